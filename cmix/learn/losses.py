"""Losses and mixing of Contrastive Mixup (METHOD.md).

- :func:`supcon_loss`: supervised contrastive loss (Khosla et al. 2020) with certainty
  weights on every anchor-positive pair and every denominator term, soft labels for
  randomly mixed views, anchors without a positive skipped, float32 similarities.
- :func:`mix_partners` / :func:`mix_rows` / :func:`contrastive_targets`: within-class (or
  random) mixup partners in a batch, the mixed hidden rows, and the views' labels/weights.
- :func:`mixup_cross_entropy`: the predictor's loss on latent-mixup rows.
- :func:`reconstruction_loss`: categorical cross-entropy over one (B, M, 4) logits
  tensor, or MSE for continuous columns, each averaged over its columns.
- :func:`soft_cross_entropy`: cross-entropy with soft targets and per-row weights.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def supcon_loss(z: torch.Tensor, labels: torch.Tensor, weights: torch.Tensor | None = None,
                tau: float = 0.1) -> torch.Tensor:
    """Certainty-weighted supervised contrastive loss over the rows of z, in float32.

    z: (N, d) L2-normalised projections (both views stacked). labels: (N,) int class
    (< 0 = no class), or (N, C) class distributions (soft labels: a randomly mixed view is
    lam-close to one parent's class and (1 - lam)-close to the other's). weights: (N,)
    certainty w (1 for labeled rows); None = all 1.

    With pi_ip = q_i . q_p (1 when two hard labels agree, else 0) and s = z z^T / tau:
    for anchor i, log p_ik = s_ik - log sum_{k' != i} w_k' exp(s_ik'), and
    loss_i = -sum_{p != i} w_p pi_ip log p_ip / sum_{p != i} w_p pi_ip. The result is
    sum_i w_i loss_i / sum_i w_i over anchors with positive mass (0 if there is none).
    Every anchor-positive pair is thus weighted by w_i w_p, and a row with w = 0 changes
    neither the loss nor any gradient, as anchor, positive or negative. With all w = 1 and
    hard labels this is Khosla et al. (2020) without any extra temperature factor.
    The similarities are computed in float32 (or z's own wider dtype) even inside an
    autocast region.
    """
    n = len(z)
    if n < 2:
        return z.sum() * 0.0
    with torch.autocast(device_type=z.device.type, enabled=False):
        if z.dtype in (torch.float16, torch.bfloat16):
            z = z.float()
        if weights is None:
            weights = torch.ones(n, device=z.device)
        weights = weights.to(z.dtype)
        if labels.dim() == 1:
            n_cls = int(labels.max()) + 1 if bool((labels >= 0).any()) else 1
            q = F.one_hot(labels.clamp_min(0).long(), n_cls).to(z.dtype)
            q = q * (labels >= 0).to(z.dtype)[:, None]
        else:
            q = labels.to(z.dtype)
        eye = torch.eye(n, dtype=torch.bool, device=z.device)
        pos_w = (q @ q.T).masked_fill(eye, 0.0) * weights[None, :]      # (N, N): w_p pi_ip
        mass = pos_w.sum(1)
        anchors = (mass > 0) & (weights > 0)
        if not bool(anchors.any()):
            return z.sum() * 0.0
        sim = (z[anchors] @ z.T) / tau                                  # (A, N)
        sim = sim.masked_fill(eye[anchors], float("-inf"))
        log_w = torch.log(weights).expand_as(sim)                       # -inf where w = 0
        log_den = torch.logsumexp(sim + log_w, dim=1, keepdim=True)
        pw = pos_w[anchors]
        log_prob = torch.where(pw > 0, sim - log_den, torch.zeros_like(sim))
        loss_a = -(pw * log_prob).sum(1) / mass[anchors]
        w_a = weights[anchors]
        return (w_a * loss_a).sum() / w_a.sum()


def contrastive_targets(labels: torch.Tensor, weights: torch.Tensor, partner: torch.Tensor,
                        lam: torch.Tensor, n_classes: int):
    """Class distributions and certainty weights of the two contrastive views of a batch.

    labels: (N,) int (< 0 = no label); weights: (N,) certainty; partner, lam: (N,) from
    :func:`draw_mixup` (partner -1 = not mixed). The first view is every row with a label
    and w > 0 (one-hot q, weight w_i). The second is every mixed row i, lam_i * h_i +
    (1 - lam_i) * h_partner, in index order: q = lam_i e_{y_i} + (1 - lam_i) e_{y_partner}
    (one-hot when the partner has i's class) and weight w_i * w_partner, so a mixed row is
    only as certain as its less certain parent.
    Returns (original_rows (n_o,), mixed_rows (n_m,), q (n_o + n_m, C), w (n_o + n_m,)).
    """
    has = (labels >= 0) & (weights > 0)
    orig = torch.nonzero(has).flatten()
    mixed = torch.nonzero(partner >= 0).flatten()
    onehot = F.one_hot(labels.clamp_min(0).long(), n_classes).float()
    lam_m = lam[mixed].float()[:, None]
    same = (labels[mixed] == labels[partner[mixed]])[:, None]
    q_mixed = torch.where(same, onehot[mixed],
                          lam_m * onehot[mixed] + (1 - lam_m) * onehot[partner[mixed]])
    q = torch.cat([onehot[orig], q_mixed])
    w = torch.cat([weights[orig].float(), weights[mixed].float() * weights[partner[mixed]].float()])
    return orig, mixed, q, w


def _draw_others(w: torch.Tensor, generator) -> torch.Tensor:
    """For each of m rows, another row drawn with probability proportional to ``w`` (m,)
    over the other rows: (m,) local index, -1 where every other row has weight 0."""
    m = len(w)
    p = w.double().expand(m, m).clone()
    p.fill_diagonal_(0.0)
    ok = p.sum(1) > 0
    out = torch.full((m,), -1, dtype=torch.long)
    if bool(ok.any()):
        out[ok] = torch.multinomial(p[ok], 1, generator=generator).flatten()
    return out


def mix_partners(labels: torch.Tensor, generator: torch.Generator | None = None,
                 within_class: bool = True, weights: torch.Tensor | None = None) -> torch.Tensor:
    """A mixing partner for each row of a batch: (N,) int64 row index, -1 = not mixed.

    within_class: another row with the same label, drawn with probability proportional
    to its certainty weight (uniformly when ``weights`` is None); rows whose class has no
    other row of positive weight in the batch, and rows with label < 0 (no label), get
    -1. A mixed row weighs w_i * w_partner in the contrastive loss, so a uniform draw
    would pair most labeled rows with near-zero-certainty pseudo-labeled rows and their
    mixed views would vanish from the loss; drawing in proportion to certainty keeps
    them. Otherwise (random mixing, an ablation): any other (pseudo-)labeled row of the
    batch, in proportion to its weight.
    """
    n = len(labels)
    device = labels.device
    partner = torch.full((n,), -1, dtype=torch.long)
    lab = labels.cpu()
    w = torch.ones(n, dtype=torch.float64) if weights is None else weights.detach().cpu().double()
    groups = [lab >= 0] if not within_class else \
        [lab == c for c in torch.unique(lab) if c >= 0]
    for members in groups:
        rows = torch.nonzero(members).flatten()
        if len(rows) < 2:
            continue
        local = _draw_others(w[rows], generator)
        drawn = local >= 0
        partner[rows[drawn]] = rows[local[drawn]]
    return partner.to(device)


def draw_mixup(labels: torch.Tensor, alpha: float, generator: torch.Generator | None = None,
               within_class: bool = True, weights: torch.Tensor | None = None):
    """Partners (:func:`mix_partners`, in proportion to ``weights``) and lambda ~
    Uniform(0, alpha) per row, (N,) each."""
    lam = torch.rand(len(labels), generator=generator) * alpha
    partner = mix_partners(labels, generator, within_class, weights)
    return partner, lam.to(labels.device)


def mixup_cross_entropy(logits: torch.Tensor, t_i: torch.Tensor, t_j: torch.Tensor,
                        w_i: torch.Tensor, w_j: torch.Tensor, lam: torch.Tensor) -> torch.Tensor:
    """Predictor loss of latent-mixup rows lam * f_i + (1 - lam) * f_j.

    logits: (N, C) of the mixed rows; t_i, t_j: (N, C) the parents' (soft) targets;
    w_i, w_j, lam: (N,). Returns sum_n [lam w_i CE(t_i) + (1 - lam) w_j CE(t_j)] /
    sum_n [lam w_i + (1 - lam) w_j]: each parent's target counts with its own certainty,
    so a parent with w = 0 adds nothing, whatever its label.
    """
    logp = F.log_softmax(logits.float(), dim=1)
    ce_i = -(t_i.float() * logp).sum(1)
    ce_j = -(t_j.float() * logp).sum(1)
    a = lam.float() * w_i.float()
    b = (1 - lam.float()) * w_j.float()
    return (a * ce_i + b * ce_j).sum() / (a + b).sum().clamp_min(1e-12)


def mix_rows(h: torch.Tensor, partner: torch.Tensor, lam: torch.Tensor):
    """Mixed rows lam_i * h_i + (1 - lam_i) * h_partner(i) for rows with a partner.

    h: (N, ...) hidden rows; partner: (N,) from :func:`mix_partners`; lam: (N,).
    Returns (mixed (n_mixed, ...), rows (n_mixed,) the index i of each mixed row).
    """
    rows = torch.nonzero(partner >= 0).flatten()
    lam_r = lam[rows].to(h.dtype).view(-1, *([1] * (h.dim() - 1)))
    mixed = lam_r * h[rows] + (1 - lam_r) * h[partner[rows]]
    return mixed, rows


def fixed_order_mean(x: torch.Tensor, width: int = 1024) -> torch.Tensor:
    """Mean of all elements of x, summed in an order that does not depend on the number
    of torch threads (a 0-d tensor, differentiable).

    torch sums a tensor of more than 32,768 elements into one value in per-thread partial
    sums, so the result changes in the last bits with the thread count. Here the elements
    (zero-padded) are summed in rows of ``width``, a reduction torch splits among threads
    by row (each row summed whole by one thread), repeated until at most ``width`` values
    remain, which are summed by one thread.
    """
    v = x.reshape(-1)
    n = v.numel()
    while v.numel() > width:
        v = F.pad(v, (0, -v.numel() % width)).view(-1, width).sum(1)
    return v.sum() / max(n, 1)


def reconstruction_loss(out: torch.Tensor, x: torch.Tensor, embed) -> torch.Tensor:
    """Reconstruction loss of decoder output ``out`` for int8 rows x (B, M).

    Categorical encoding: out (B, M, 4) logits, one cross-entropy averaged over rows and
    columns (missing is the 4th level). Dosage encoding: out (B, M), MSE against the
    standardised dosages, averaged over rows and columns. With only one kind of column
    its share of the columns is 1. The average is :func:`fixed_order_mean`, the same at
    any thread count; the cross-entropy is log-sum-exp minus the target's logit, not
    torch's NLLLoss, which has no deterministic CUDA kernel.
    """
    out = out.float()
    if embed.encoding == "categorical":
        target = embed.levels(x)
        per_call = torch.logsumexp(out, -1) - out.gather(-1, target[..., None])[..., 0]
        return fixed_order_mean(per_call)
    return fixed_order_mean(torch.square(out - embed.standardised(x)))


def soft_cross_entropy(logits: torch.Tensor, targets: torch.Tensor,
                       weights: torch.Tensor | None = None) -> torch.Tensor:
    """Weighted mean over rows of -sum_c targets_c log softmax(logits)_c.

    logits, targets: (N, C); weights: (N,) or None (all 1)."""
    per_row = -(targets * F.log_softmax(logits.float(), dim=1)).sum(1)
    if weights is None:
        return per_row.mean()
    weights = weights.float()
    return (weights * per_row).sum() / weights.sum().clamp_min(1e-12)
