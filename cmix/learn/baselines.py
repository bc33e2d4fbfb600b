"""The numerical pieces of the VIME and manifold-mixup baselines (their fits are
:class:`cmix.learn.methods.networks.Vime` and
:class:`cmix.learn.methods.networks.ManifoldMixup`).

- VIME (Yoon et al. 2020). Self-supervised: mask m ~ Bernoulli(p_m), corrupted row
  x~ = m * x_bar + (1 - m) * x with x_bar_j drawn from column j's empirical marginal (the
  column's value in a random other row of the batch), loss = BCE(mask estimator, m') +
  vime_alpha * feature-estimation loss (the cmix reconstruction loss against the clean
  x), where m' = 1[x~ != x] (the reference code's target). Semi-supervised: frozen
  encoder, predictor trained with cross-entropy on labeled rows + vime_beta *
  consistency (variance of the predictor's logits over vime_k corrupted copies of each
  unlabeled row, averaged).
- Manifold mixup (Verma et al. 2019): the predictor's rows mixed at a layer drawn from
  {input, hidden 1, hidden 2}.
"""

from __future__ import annotations


# ------------------------------------------------------------------ VIME
def vime_corrupt(x, p_m: float, generator=None):
    """VIME mask generation and corruption of int8 rows x (B, M).

    m ~ Bernoulli(p_m) per entry; x_bar[:, j] = x[perm_j, j] with an independent random
    permutation perm_j of the rows per column (a draw from column j's empirical marginal
    in the batch); x~ = where(m, x_bar, x). Returns (x~ (B, M) same dtype,
    mask (B, M) float32 = 1[x~ != x], the mask estimator's target).

    The random numbers, drawn on the CPU from ``generator``: the mask's uniforms, then
    the permutations' keys (perm_j = torch.argsort of column j's keys; x_bar is
    :func:`column_shuffle`'s)."""
    import torch

    b, m = x.shape
    mask = torch.rand((b, m), generator=generator) < p_m
    x_bar = column_shuffle(x, torch.rand((b, m), generator=generator))
    mask = mask.to(x.device)
    if x.dtype == torch.int8 and x.is_contiguous():
        # the same where(m, x_bar, x) (values and layout) in exact (wrapping) int8
        # arithmetic, which torch vectorises: x + m (x_bar - x)
        x_tilde = x + mask.to(torch.int8) * (x_bar - x)
    else:
        x_tilde = torch.where(mask, x_bar, x)
    return x_tilde, (x_tilde != x).float()


def column_shuffle(x, keys):
    """x_bar (B, M), x_bar[i, j] = x[perm[i, j], j] with perm = torch.argsort(keys,
    dim=0): the values of ``torch.gather(x, 0, torch.argsort(keys, dim=0))``, keys (B, M)
    float32 in [0, 1) on the CPU. With x on the CPU the rows come from
    :func:`_column_rows` and the values are taken with numpy; elsewhere x is gathered at
    :func:`column_argsort`."""
    import numpy as np
    import torch

    if x.device.type != "cpu" or not _fast_keys(keys):
        return torch.gather(x, 0, column_argsort(keys).to(x.device))
    b, m = x.shape
    rows = _column_rows(keys)                       # (M, B): column j's rows in order
    if m * b > np.iinfo(rows.dtype).max:
        rows = rows.astype(np.uint64)
    rows += (np.arange(m, dtype=rows.dtype) * rows.dtype.type(b))[:, None]
    x_cols = np.ascontiguousarray(x.numpy().T)      # (M, B): flat index j * B + row
    return torch.from_numpy(np.ascontiguousarray(np.take(x_cols, rows).T))


def column_argsort(keys):
    """``torch.argsort(keys, dim=0)``, the same indices: faster on the CPU for float32
    keys in [0, 1) (``torch.rand``'s; :func:`_column_rows`), torch's otherwise."""
    import numpy as np
    import torch

    if not _fast_keys(keys):
        return torch.argsort(keys, dim=0)
    return torch.from_numpy(_column_rows(keys).T.astype(np.int64, order="C"))


def _fast_keys(keys) -> bool:
    import torch

    return (keys.device.type == "cpu" and keys.dtype == torch.float32 and keys.dim() == 2
            and keys.shape[0] >= 2 and keys.shape[1] > 0)


def _column_rows(keys):
    """(M, B) numpy unsigned integers: row j = torch.argsort(keys[:, j]), bit for bit, for
    CPU float32 keys (B, M) in [0, 1), about ten times faster than torch's argsort.

    Torch's CPU argsort is not stable: where a column has equal keys, the order of their
    rows is its sort algorithm's. A column whose keys are all distinct has one ascending
    order, whatever the algorithm, so each column is sorted here as integers: the key
    scaled by 2^24 and truncated (torch.rand's floats are multiples of 2^-24, so this is
    exact for them; for any keys it is monotone) in the high bits, the row in the low bits
    (distinct composite keys: a plain sort, no index array, gives the rows in order). A
    column in which two truncated keys are equal (about one column in 500 of a 256-row
    batch) is argsorted again by torch, alone, as it would be within the whole matrix (the
    order of a column's rows depends only on that column's keys)."""
    import numpy as np
    import torch

    b = keys.shape[0]
    rb = (b - 1).bit_length()                       # bits of the row index
    ut = np.uint32 if 24 + rb <= 32 else np.uint64
    comp = (keys.numpy().T * np.float32(1 << 24)).astype(ut, order="C")   # (M, B)
    comp <<= ut(rb)
    comp |= np.arange(b, dtype=ut)
    comp.sort(axis=1)
    tied = (((comp[:, 1:] ^ comp[:, :-1]) >> ut(rb)) == 0).any(1)
    comp &= ut((1 << rb) - 1)
    if tied.any():
        cols = np.flatnonzero(tied)
        comp[cols] = torch.argsort(keys[:, torch.from_numpy(cols)], dim=0).numpy().T
    return comp


def vime_self_loss(mask_logits, mask, feature_out, x, embed, alpha: float):
    """VIME self-supervised loss: BCE(mask_logits (B, M), mask (B, M)) averaged over
    entries + alpha * feature-estimation loss (the cmix reconstruction loss of the clean
    rows x from feature_out). Returns (total, mask_loss, feature_loss)."""
    import torch.nn.functional as F

    from .losses import reconstruction_loss

    mask_loss = F.binary_cross_entropy_with_logits(mask_logits.float(), mask.float())
    feature_loss = reconstruction_loss(feature_out, x, embed)
    return mask_loss + alpha * feature_loss, mask_loss, feature_loss


def vime_consistency_loss(logits_k):
    """Consistency over K augmented copies: logits_k (K, B, C); the variance over the K
    copies (population variance, as tf.nn.moments) averaged over rows and classes."""
    return logits_k.float().var(dim=0, unbiased=False).mean()


# ------------------------------------------------------------------ manifold mixup
def block_end(net, layer: int) -> int:
    """The index in the Sequential ``net`` just after hidden block ``layer`` (0: the
    input): after its ReLU and, with dropout, the Dropout that follows it."""
    import torch.nn as nn

    if layer == 0:
        return 0
    relus = [i for i, m in enumerate(net) if isinstance(m, nn.ReLU)]
    end = relus[layer - 1] + 1
    return end + 1 if end < len(net) and isinstance(net[end], nn.Dropout) else end


def manifold_mixup_step(predictor, f, targets, layer: int, lam, perm):
    """Logits of predictor (a cmix Predictor) for inputs f (B, D) mixed at ``layer``
    (0 = input, 1 / 2 = after hidden block 1 / 2): h = lam h + (1 - lam) h[perm];
    returns (logits (B, C), mixed soft targets (B, C))."""
    net = predictor.net
    cut = block_end(net, layer)
    h = net[:cut](f)
    lam_v = lam.view(-1, 1).to(h.dtype)
    h = lam_v * h + (1 - lam_v) * h[perm]
    t = lam.view(-1, 1) * targets + (1 - lam.view(-1, 1)) * targets[perm]
    # the covariate term is linear: mixing its inputs mixes it as the targets are mixed
    skip = predictor.covariate_logits(lam_v.to(f.dtype) * f + (1 - lam_v.to(f.dtype)) * f[perm])
    return net[cut:](h) + skip, t
