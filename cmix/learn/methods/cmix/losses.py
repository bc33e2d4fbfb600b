"""Losses and mixing of Contrastive Mixup for a group of G models (a leading model axis
on every tensor; one loss per model, (G,)).

- :func:`supcon_loss`: supervised contrastive loss (Khosla et al. 2020) with certainty
  weights on every anchor-positive pair and every denominator term, soft labels for
  randomly mixed views, anchors without a positive skipped, float32 similarities.
- :func:`mix_partners` / :func:`mix_rows` / :func:`contrastive_targets`: within-class (or
  random) mixup partners in a batch, the mixed hidden rows, and the views' labels/weights.
- :func:`mixup_cross_entropy`: the predictor's loss on latent-mixup rows.
- :func:`reconstruction_loss`: categorical cross-entropy over one (G, B, M, 4) logits
  tensor, or MSE for continuous columns, each averaged over its columns.
- :func:`soft_cross_entropy`: cross-entropy with soft targets and per-row weights.

Every function keeps its shapes fixed: a row that takes no part (no label, no partner,
padding) has weight 0 rather than being cut out, so nothing waits for the host to count
rows, and a row of weight 0 changes neither a loss nor any gradient.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

#: log-weight of a row of weight 0 in a softmax denominator: exp() of it is 0 in float32,
#: yet, unlike -inf, a row whose every other weight is 0 keeps finite gradients
_LOG_ZERO = -1e30


def supcon_loss(z: torch.Tensor, q: torch.Tensor, weights: torch.Tensor,
                tau: float = 0.1) -> torch.Tensor:
    """Certainty-weighted supervised contrastive loss of each model, in float32: (G,).

    z: (G, N, d) L2-normalised projections (both views stacked); q: (G, N, C) class
    distributions (one-hot for a labeled row, lam-close to one parent's class and (1 -
    lam)-close to the other's for a randomly mixed view; all 0 = no class); weights:
    (G, N) certainty w (1 for labeled rows, 0 for rows that take no part).

    With pi_ip = q_i . q_p and s = z z^T / tau: for anchor i, log p_ik = s_ik - log
    sum_{k' != i} w_k' exp(s_ik'), and loss_i = -sum_{p != i} w_p pi_ip log p_ip /
    sum_{p != i} w_p pi_ip. A model's loss is sum_i w_i loss_i / sum_i w_i over its anchors
    with positive mass (0 if it has none). Every anchor-positive pair is thus weighted by
    w_i w_p, and a row with w = 0 changes neither the loss nor any gradient, as anchor,
    positive or negative. With all w = 1 and one-hot labels this is Khosla et al. (2020)
    without any extra temperature factor. The similarities are computed in float32 (or z's
    own wider dtype) even inside an autocast region.
    """
    n = z.shape[1]
    with torch.autocast(device_type=z.device.type, enabled=False):
        if z.dtype in (torch.float16, torch.bfloat16):
            z = z.float()
        w = weights.to(z.dtype)
        q = q.to(z.dtype)
        eye = torch.eye(n, dtype=torch.bool, device=z.device)
        pos_w = torch.bmm(q, q.transpose(1, 2)).masked_fill(eye, 0.0) * w[:, None, :]
        mass = pos_w.sum(-1)                                              # (G, N)
        anchor = ((mass > 0) & (w > 0)).to(z.dtype)
        sim = torch.bmm(z, z.transpose(1, 2)) / tau                       # (G, N, N)
        log_w = torch.where(w > 0, torch.log(w.clamp_min(1e-38)),
                            torch.full_like(w, _LOG_ZERO))
        den = (sim + log_w[:, None, :]).masked_fill(eye, _LOG_ZERO)
        log_den = torch.logsumexp(den, dim=-1, keepdim=True)
        log_prob = torch.where(pos_w > 0, sim - log_den, torch.zeros_like(sim))
        loss_a = -(pos_w * log_prob).sum(-1) / mass.clamp_min(1e-30)
        w_a = w * anchor
        return (w_a * loss_a).sum(-1) / w_a.sum(-1).clamp_min(1e-30)


def mix_partners(labels: torch.Tensor, weights: torch.Tensor, u: torch.Tensor,
                 within_class: bool = True) -> torch.Tensor:
    """A mixing partner for each row of each model's batch: (G, B) int64 row index,
    -1 = not mixed.

    labels: (G, B) int (< 0 = no label); weights: (G, B) certainty; u: (G, B) uniforms in
    [0, 1) (the draw). within_class: another row with the same label, drawn with
    probability proportional to its certainty weight (inverse CDF of the weights of the
    eligible rows in row order); rows whose class has no other row of positive weight in
    the batch, and rows without a label, get -1. A mixed row weighs w_i * w_partner in
    the contrastive loss, so a uniform draw would pair most labeled rows with
    near-zero-certainty pseudo-labeled rows and their mixed views would vanish from the
    loss; drawing in proportion to certainty keeps them. Otherwise (random mixing, an
    ablation): any other labeled row of the batch, in proportion to its weight.
    """
    b = labels.shape[1]
    has = labels >= 0
    eligible = has[:, :, None] & has[:, None, :] & (weights > 0)[:, None, :]
    if within_class:
        eligible = eligible & (labels[:, :, None] == labels[:, None, :])
    eligible = eligible & ~torch.eye(b, dtype=torch.bool, device=labels.device)
    p = torch.where(eligible, weights.double()[:, None, :], torch.zeros((), dtype=torch.float64,
                                                                        device=labels.device))
    cum = torch.cumsum(p, dim=-1)                                       # (G, B, B)
    total = cum[..., -1:]
    target = u.double()[..., None] * total
    pick = torch.searchsorted(cum, target, right=True).squeeze(-1).clamp_max(b - 1)
    return torch.where(total.squeeze(-1) > 0, pick, torch.full_like(pick, -1))


def mix_rows(h: torch.Tensor, partner: torch.Tensor, lam: torch.Tensor) -> torch.Tensor:
    """Mixed rows lam_i * h_i + (1 - lam_i) * h_partner(i), (G, B, ...) like h; a row
    without a partner (-1) is itself (its mixed view has weight 0 anyway).

    h: (G, B, ...) hidden rows; partner: (G, B) from :func:`mix_partners`; lam: (G, B)."""
    idx = torch.where(partner >= 0, partner,
                      torch.arange(h.shape[1], device=h.device).expand_as(partner))
    other = torch.gather(h, 1, idx.view(*idx.shape, *([1] * (h.dim() - 2))).expand_as(h))
    lam_r = lam.to(h.dtype).view(*lam.shape, *([1] * (h.dim() - 2)))
    return lam_r * h + (1 - lam_r) * other


def contrastive_targets(labels: torch.Tensor, weights: torch.Tensor, partner: torch.Tensor,
                        lam: torch.Tensor, n_classes: int):
    """Class distributions and certainty weights of the two contrastive views of each
    model's batch: (q (G, 2B, C), w (G, 2B)), the originals first.

    labels: (G, B) int (< 0 = no label); weights: (G, B) certainty; partner, lam: (G, B)
    (partner -1 = not mixed). The first view is every row, one-hot q and weight w_i for a
    row with a label (0 without). The second is every row's mixed view, lam_i * h_i +
    (1 - lam_i) * h_partner: q = lam_i e_{y_i} + (1 - lam_i) e_{y_partner} (one-hot when
    the partner has i's class) and weight w_i * w_partner, so a mixed row is only as
    certain as its less certain parent; 0 for a row without a partner."""
    has = labels >= 0
    # a comparison, not F.one_hot, which reads the labels' range back to check it
    onehot = (labels[..., None] == torch.arange(n_classes, device=labels.device)).float()
    idx = partner.clamp_min(0)
    onehot_p = torch.gather(onehot, 1, idx[..., None].expand_as(onehot))
    lam_m = lam.float()[..., None]
    same = ((labels == torch.gather(labels, 1, idx)) | (partner < 0))[..., None]
    q_mixed = torch.where(same, onehot, lam_m * onehot + (1 - lam_m) * onehot_p)
    w = weights.float() * has.float()
    w_mixed = torch.where(partner >= 0, w * torch.gather(w, 1, idx), torch.zeros_like(w))
    return torch.cat([onehot, q_mixed], 1), torch.cat([w, w_mixed], 1)


def mixup_cross_entropy(logits: torch.Tensor, t_i: torch.Tensor, t_j: torch.Tensor,
                        w_i: torch.Tensor, w_j: torch.Tensor, lam: torch.Tensor,
                        width: int = 0) -> torch.Tensor:
    """Predictor loss of latent-mixup rows lam * f_i + (1 - lam) * f_j, per model: (G,).

    logits: (G, N, C) of the mixed rows; t_i, t_j: (G, N, C) the parents' (soft) targets;
    w_i, w_j, lam: (G, N). Returns sum_n [lam w_i CE(t_i) + (1 - lam) w_j CE(t_j)] /
    sum_n [lam w_i + (1 - lam) w_j]: each parent's target counts with its own certainty,
    so a parent with w = 0 adds nothing, whatever its label. Both sums run over ``width``
    values (the rows zero-padded to it when N is shorter): a model's step then sums the
    same values in the same order whatever the group's widest step, so its loss and
    gradients are those of its lone run to the bit (a float sum's rounding depends on
    the length it runs over, trailing zeros included).
    """
    logp = F.log_softmax(logits.float(), dim=-1)
    ce_i = -(t_i.float() * logp).sum(-1)
    ce_j = -(t_j.float() * logp).sum(-1)
    a = lam.float() * w_i.float()
    b = (1 - lam.float()) * w_j.float()
    num, den = a * ce_i + b * ce_j, a + b
    if num.shape[-1] < width:
        num, den = (F.pad(v, (0, width - num.shape[-1])) for v in (num, den))
    return num.sum(-1) / den.sum(-1).clamp_min(1e-12)


def fixed_order_sum(x: torch.Tensor, width: int = 1024) -> torch.Tensor:
    """Sum of each model's elements of x (G, ...), in an order that depends neither on
    the number of torch threads nor on G: (G,), differentiable.

    torch sums a long row in per-thread partial sums, so the result would change in the
    last bits with the thread count. Here each model's elements (zero-padded) are summed
    in rows of ``width``, each row summed whole by one thread, repeated until at most
    ``width`` values remain."""
    v = x.reshape(x.shape[0], -1)
    while v.shape[1] > width:
        v = F.pad(v, (0, -v.shape[1] % width)).view(v.shape[0], -1, width).sum(-1)
    return v.sum(-1)


def reconstruction_loss(out: torch.Tensor, x: torch.Tensor, embed,
                        mask: torch.Tensor | None = None) -> torch.Tensor:
    """Reconstruction loss of decoder output ``out`` for rows x (G, B, M), per model:
    (G,), the mean over the rows of ``mask`` (G, B) (all rows without one) and columns.

    Categorical encoding: out (G, B, M, 4) logits, one cross-entropy (missing is the 4th
    level). Dosage encoding: out (G, B, M), MSE against the standardised dosages. With
    only one kind of column its share of the columns is 1. The sums are
    :func:`fixed_order_sum`'s; the cross-entropy is log-sum-exp minus the target's logit,
    not torch's NLLLoss, which has no deterministic CUDA kernel."""
    out = out.float()
    if embed.encoding == "categorical":
        target = embed.levels(x)
        per_call = torch.logsumexp(out, -1) - out.gather(-1, target[..., None])[..., 0]
    else:
        per_call = torch.square(out - embed.standardised(x))
    if mask is None:
        return fixed_order_sum(per_call) / per_call[0].numel()
    m = mask.to(per_call.dtype)
    return fixed_order_sum(per_call * m[..., None]) / (m.sum(1) * x.shape[2]).clamp_min(1.0)


def soft_cross_entropy(logits: torch.Tensor, targets: torch.Tensor,
                       weights: torch.Tensor) -> torch.Tensor:
    """Weighted mean over rows of -sum_c targets_c log softmax(logits)_c, per model: (G,).

    logits, targets: (G, N, C); weights: (G, N) (0 for rows that take no part)."""
    per_row = -(targets.float() * F.log_softmax(logits.float(), dim=-1)).sum(-1)
    weights = weights.float()
    return (weights * per_row).sum(-1) / weights.sum(-1).clamp_min(1e-12)
