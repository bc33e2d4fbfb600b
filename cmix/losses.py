"""Losses and mixing of Contrastive Mixup (METHOD.md).

- :func:`supcon_loss`: supervised contrastive loss (Khosla et al. 2020), certainty
  weights per anchor, anchors without a positive skipped, no extra temperature factor.
- :func:`mix_partners` / :func:`mix_rows`: within-class (or random) mixup partners in a
  batch and the mixed hidden rows.
- :func:`reconstruction_loss`: categorical cross-entropy over one (B, M, 4) logits
  tensor, or MSE for continuous columns, each averaged over its columns.
- :func:`soft_cross_entropy`: cross-entropy with soft targets and per-row weights.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def supcon_loss(z: torch.Tensor, labels: torch.Tensor, weights: torch.Tensor | None = None,
                tau: float = 0.1) -> torch.Tensor:
    """Supervised contrastive loss over the rows of z.

    z: (N, d) L2-normalised projections (both views stacked); labels: (N,) int class;
    weights: (N,) anchor weights (1 for labeled rows, certainty for pseudo-labeled).
    For anchor i: P(i) = other rows with i's label, the denominator runs over all other
    rows, loss_i = -1/|P(i)| sum_{p in P(i)} log( exp(s_ip/tau) / sum_{k != i} exp(s_ik/tau) ).
    Returns sum_i w_i loss_i / sum_i w_i over anchors with >= 1 positive (0 if none).
    """
    n = len(z)
    if weights is None:
        weights = torch.ones(n, device=z.device, dtype=z.dtype)
    if n < 2:
        return z.sum() * 0.0
    if z.dtype in (torch.float16, torch.bfloat16):
        z = z.float()
    sim = (z @ z.T) / tau
    eye = torch.eye(n, dtype=torch.bool, device=z.device)
    sim = sim.masked_fill(eye, float("-inf"))
    log_prob = sim - torch.logsumexp(sim, dim=1, keepdim=True)
    pos = (labels[:, None] == labels[None, :]) & ~eye
    n_pos = pos.sum(1)
    has = n_pos > 0
    if not bool(has.any()):
        return z.sum() * 0.0
    pos_sum = torch.where(pos, log_prob, torch.zeros_like(log_prob)).sum(1)
    loss_i = -pos_sum[has] / n_pos[has]
    w = weights[has].to(loss_i.dtype)
    return (w * loss_i).sum() / w.sum().clamp_min(1e-12)


def mix_partners(labels: torch.Tensor, generator: torch.Generator | None = None,
                 within_class: bool = True) -> torch.Tensor:
    """A mixing partner for each row of a batch: (N,) int64 row index, -1 = not mixed.

    within_class: a uniformly drawn OTHER row with the same label; rows whose class has
    no other row in the batch, and rows with label < 0 (no label), get -1.
    Otherwise (random mixing, an ablation): any other (pseudo-)labeled row of the batch.
    """
    n = len(labels)
    device = labels.device
    partner = torch.full((n,), -1, dtype=torch.long)
    lab = labels.cpu()
    if not within_class:
        rows = torch.nonzero(lab >= 0).flatten()
        m = len(rows)
        if m >= 2:
            off = torch.randint(1, m, (m,), generator=generator)
            partner[rows] = rows[(torch.arange(m) + off) % m]
        return partner.to(device)
    for c in torch.unique(lab):
        if c < 0:
            continue
        rows = torch.nonzero(lab == c).flatten()
        m = len(rows)
        if m < 2:
            continue
        off = torch.randint(1, m, (m,), generator=generator)
        partner[rows] = rows[(torch.arange(m) + off) % m]
    return partner.to(device)


def draw_mixup(labels: torch.Tensor, alpha: float, generator: torch.Generator | None = None,
               within_class: bool = True):
    """Partners (:func:`mix_partners`) and lambda ~ Uniform(0, alpha) per row, (N,) each."""
    lam = torch.rand(len(labels), generator=generator) * alpha
    partner = mix_partners(labels, generator, within_class)
    return partner, lam.to(labels.device)


def mix_rows(h: torch.Tensor, partner: torch.Tensor, lam: torch.Tensor):
    """Mixed rows lam_i * h_i + (1 - lam_i) * h_partner(i) for rows with a partner.

    h: (N, ...) hidden rows; partner: (N,) from :func:`mix_partners`; lam: (N,).
    Returns (mixed (n_mixed, ...), rows (n_mixed,) the index i of each mixed row).
    """
    rows = torch.nonzero(partner >= 0).flatten()
    lam_r = lam[rows].to(h.dtype).view(-1, *([1] * (h.dim() - 1)))
    mixed = lam_r * h[rows] + (1 - lam_r) * h[partner[rows]]
    return mixed, rows


def reconstruction_loss(out: torch.Tensor, x: torch.Tensor, embed) -> torch.Tensor:
    """Reconstruction loss of decoder output ``out`` for int8 rows x (B, M).

    Categorical encoding: out (B, M, 4) logits, one cross-entropy averaged over rows and
    columns (missing is the 4th level). Dosage encoding: out (B, M), MSE against the
    standardised dosages, averaged over rows and columns. With only one kind of column
    its share of the columns is 1.
    """
    if embed.encoding == "categorical":
        target = embed.levels(x)
        return F.cross_entropy(out.float().reshape(-1, out.shape[-1]), target.reshape(-1))
    return F.mse_loss(out.float(), embed.standardised(x))


def soft_cross_entropy(logits: torch.Tensor, targets: torch.Tensor,
                       weights: torch.Tensor | None = None) -> torch.Tensor:
    """Weighted mean over rows of -sum_c targets_c log softmax(logits)_c.

    logits, targets: (N, C); weights: (N,) or None (all 1)."""
    per_row = -(targets * F.log_softmax(logits.float(), dim=1)).sum(1)
    if weights is None:
        return per_row.mean()
    weights = weights.float()
    return (weights * per_row).sum() / weights.sum().clamp_min(1e-12)
