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
    mask (B, M) float32 = 1[x~ != x], the mask estimator's target)."""
    import torch

    b, m = x.shape
    mask = torch.rand((b, m), generator=generator) < p_m
    perm = torch.argsort(torch.rand((b, m), generator=generator), dim=0)
    x_bar = torch.gather(x, 0, perm.to(x.device))
    x_tilde = torch.where(mask.to(x.device), x_bar, x)
    return x_tilde, (x_tilde != x).float()


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
def manifold_mixup_step(predictor, f, targets, layer: int, lam, perm):
    """Logits of predictor (a cmix Predictor) for inputs f (B, D) mixed at ``layer``
    (0 = input, 1 / 2 = after hidden block 1 / 2): h = lam h + (1 - lam) h[perm];
    returns (logits (B, C), mixed soft targets (B, C))."""
    net = predictor.net
    cut = 3 * layer                          # blocks are Linear, BatchNorm, ReLU
    h = net[:cut](f)
    lam_v = lam.view(-1, 1).to(h.dtype)
    h = lam_v * h + (1 - lam_v) * h[perm]
    t = lam.view(-1, 1) * targets + (1 - lam.view(-1, 1)) * targets[perm]
    # the covariate term is linear: mixing its inputs mixes it as the targets are mixed
    skip = predictor.covariate_logits(lam_v.to(f.dtype) * f + (1 - lam_v.to(f.dtype)) * f[perm])
    return net[cut:](h) + skip, t
