"""The numerical pieces of the VIME and manifold-mixup baselines (their fits are
:class:`cmix.learn.methods.vime.Vime` and
:class:`cmix.learn.methods.manifold_mixup.ManifoldMixup`).

- VIME (Yoon et al. 2020). Self-supervised: mask m ~ Bernoulli(p_m), corrupted row
  x~ = m * x_bar + (1 - m) * x with x_bar_j drawn from column j's empirical marginal (the
  column's value in a random row of the batch), loss = BCE(mask estimator, m') +
  vime_alpha * feature-estimation loss (the cmix reconstruction loss against the clean
  x), where m' = 1[x~ != x] (the reference code's target). Semi-supervised: frozen
  encoder, predictor trained with cross-entropy on labeled rows + vime_beta *
  consistency (variance of the predictor's logits over vime_k corrupted copies of each
  unlabeled row, averaged).
- Manifold mixup (Verma et al. 2019): the predictor's rows mixed at a layer drawn from
  {input, hidden 1, hidden 2}.
"""

from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

from .methods.cmix.losses import fixed_order_sum, mix_rows, reconstruction_loss
from .nn import Dropout, apply_layer


# ------------------------------------------------------------------ VIME
def vime_corrupt(x, p_m: float, draws, n_rows=None):
    """VIME mask generation and corruption of the rows x (G, B, M) of every model.

    m ~ Bernoulli(p_m) per entry; x_bar[g, i, j] = x[g, r, j] for a row r drawn uniformly
    from the model's first n_rows[g] rows (its rows of the batch; all B by default): a
    draw from column j's empirical marginal in the batch, as Yoon et al. define it (their
    code shuffles each column instead, which also keeps the column's counts; a sort per
    column and step cost as much as the rest of the step on the CPU). x~ = where(m,
    x_bar, x). Returns (x~ (G, B, M) same dtype, mask (G, B, M) float32 = 1[x~ != x], the
    mask estimator's target). One 32-bit draw an entry from ``draws`` (the step's
    :class:`cmix.learn.streams.Draws`): its high 16 bits give the mask (p_m to 1/65,536),
    its low 16 bits the row."""
    g, b, m = x.shape
    bits = draws.bits(b, m)                       # one 32-bit draw an entry: 16 bits each
    mask = (bits >> 16) < int(round(p_m * 65536))
    n = torch.full((g,), b, device=x.device) if n_rows is None else n_rows
    rows = (((bits & 0xFFFF) * n.view(g, 1, 1)) >> 16).clamp_max(b - 1)
    x_bar = torch.gather(x, 1, rows)
    x_tilde = torch.where(mask, x_bar, x)
    return x_tilde, (x_tilde != x).float()


def vime_self_loss(mask_logits, mask, feature_out, x, embed, alpha: float, rows=None):
    """VIME self-supervised loss of every model: BCE(mask_logits (G, B, M), mask
    (G, B, M)) averaged over entries + alpha * feature-estimation loss (the cmix
    reconstruction loss of the clean rows x from feature_out); rows: (G, B) bool, the rows
    a model holds (all without). Returns (total, mask_loss, feature_loss), each (G,)."""

    bce = F.binary_cross_entropy_with_logits(mask_logits.float(), mask.float(),
                                             reduction="none")
    if rows is None:
        mask_loss = fixed_order_sum(bce) / bce[0].numel()
    else:
        r = rows.to(bce.dtype)
        mask_loss = fixed_order_sum(bce * r[..., None]) / (r.sum(1) * bce.shape[2]).clamp_min(1)
    feature_loss = reconstruction_loss(feature_out, x, embed, rows)
    return mask_loss + alpha * feature_loss, mask_loss, feature_loss


def vime_consistency_loss(logits_k, rows=None):
    """Consistency over K augmented copies, per model: logits_k (G, K, B, C); the
    variance over the K copies (population variance, as tf.nn.moments) averaged over the
    rows of ``rows`` (G, B) bool (all without) and classes: (G,)."""
    var = logits_k.float().var(dim=1, unbiased=False).mean(-1)              # (G, B)
    if rows is None:
        return var.mean(-1)
    r = rows.to(var.dtype)
    return (var * r).sum(-1) / r.sum(-1).clamp_min(1)


# ------------------------------------------------------------------ manifold mixup
def block_ends(net) -> list:
    """The indices in the Sequential ``net`` where the input and each hidden block end
    (0; after the ReLU of block 1 and, with dropout, the Dropout that follows it; the
    same after block 2)."""

    ends = [0]
    for i, m in enumerate(net):
        if isinstance(m, nn.ReLU):
            end = i + 1
            ends.append(end + 1 if end < len(net) and isinstance(net[end], Dropout) else end)
    return ends


def manifold_mixup_step(predictor, f, targets, layer, lam, perm, rows=None):
    """Logits of every model's predictor (a grouped cmix Predictor) for inputs f (G, B, D)
    mixed at ``layer`` (G,) int (0 = input, 1 / 2 = after hidden block 1 / 2): there
    h = lam h + (1 - lam) h[perm] (lam (G, B), perm (G, B) row indices); rows: (G, B) bool,
    the rows a model holds. Returns (logits (G, B, C), mixed soft targets (G, B, C))."""

    net = predictor.net
    ends = block_ends(net)
    g = f.shape[0]
    h = f
    for k, (lo, hi) in enumerate(zip(ends, ends[1:] + [len(net)])):
        h = torch.where((layer == k).view(g, 1, 1), mix_rows(h, perm, lam), h)
        for module in net[lo:hi]:
            h = apply_layer(module, h, rows)
    t = mix_rows(targets, perm, lam)
    # the covariate term is linear: mixing its inputs mixes it as the targets are mixed
    return h + predictor.covariate_logits(mix_rows(f, perm, lam)), t
