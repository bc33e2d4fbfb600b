"""The linear probe on a frozen encoder's latent rows: L2 logistic regression on the
standardised latent (n, H), the covariates (n, K) beside it out of its penalty, C chosen
by the caller on rows the encoder never saw labeled.
"""

from __future__ import annotations

import numpy as np

from ..linear import fit_logreg_cv, logreg_at
from .base import full_proba


def probe_features(probe: dict, inputs: np.ndarray):
    """The linear probe's features of a head's inputs (n, H + K) (latent, then the
    covariates): the latent standardised with the probe's moments, and the covariates
    (split off when the probe fits them out of the penalty)."""
    n_cov = probe["n_cov"]
    z = inputs[:, :inputs.shape[1] - n_cov].astype(np.float64)
    z = (z - probe["mu"]) / probe["sd"]
    return np.hstack([z, inputs[:, inputs.shape[1] - n_cov:].astype(np.float64)]) \
        if n_cov else z


def probe_proba(probe: dict, inputs: np.ndarray, n_classes: int) -> np.ndarray:
    """(n, C) probabilities of the linear probe for head inputs (n, H + K)."""
    return full_proba(probe["model"], probe_features(probe, inputs), n_classes)


def probe_cs(ctx) -> np.ndarray:
    """The linear probe's C grid: ``logreg_n_c`` values in 1e-4..1e2, the logreg
    baseline's."""
    return np.logspace(-4, 2, ctx.cfg.logreg.logreg_n_c)


def fit_probe(ctx, inputs: np.ndarray, y: np.ndarray, c: float,
              n_classes: int | None = None, cov_c: float | None = None) -> dict:
    """The linear probe of a run at C = ``c`` on head inputs (n, H + K) (frozen latent,
    covariates) of labeled rows of classes y (0..n_classes - 1, default the run's
    classes): L2 logistic regression on the latent standardised with these rows'
    moments (:func:`cmix.learn.linear.logreg_at`), the covariates beside it out of its
    penalty at the C their own model chooses (:func:`covariates_c`), as the logreg
    baseline fits them. C is chosen by the caller on rows the encoder never saw labeled
    (:func:`probe_path`): a cross-validation over the rows the encoder was pre-trained
    with would read their memorised classes. ``cov_c``: the covariates' C when the
    caller has it. Returns the probe (a dict: model, moments, n_cov, C)."""
    n_cov = ctx.n_cov
    z = inputs[:, :inputs.shape[1] - n_cov].astype(np.float64)
    probe = {"mu": z.mean(0), "sd": z.std(0) + 1e-9, "n_cov": n_cov}
    x = probe_features(probe, inputs)
    n_classes = ctx.splits.n_classes if n_classes is None else n_classes
    cov = None
    if n_cov:
        x, cov = x[:, :-n_cov], x[:, -n_cov:]
        if cov_c is None:
            cov_c = covariates_c(ctx, cov, y, n_classes)
    probe.update(model=logreg_at(x, cov, y, n_classes, float(c), cov_c), C=float(c))
    return probe


def probe_path(ctx, x_fit: np.ndarray, y_fit: np.ndarray, x_eval: np.ndarray,
               n_classes: int | None = None) -> np.ndarray:
    """(n_c, n_eval, n_classes) probabilities of head inputs ``x_eval`` under the linear
    probe (:func:`fit_probe`) fitted on ``x_fit``, ``y_fit`` at each C of
    :func:`probe_cs`, smallest first."""
    n_classes = ctx.splits.n_classes if n_classes is None else n_classes
    n_cov = ctx.n_cov
    cov_c = (covariates_c(ctx, x_fit[:, x_fit.shape[1] - n_cov:].astype(np.float64), y_fit,
                          n_classes) if n_cov else None)
    return np.stack([probe_proba(fit_probe(ctx, x_fit, y_fit, c, n_classes, cov_c), x_eval,
                                 n_classes) for c in probe_cs(ctx)])


def covariates_c(ctx, cov: np.ndarray, y: np.ndarray, n_classes: int) -> float:
    """The C the covariates (n, K) of labeled rows y choose for their own model by
    cross-validation (:func:`cmix.learn.linear.fit_logreg_cv`): their penalty beside a
    probe. The covariates are inputs, not the encoder's output: a cross-validation over
    them reads no memorised class."""
    cfg = ctx.cfg.logreg
    return fit_logreg_cv(cov, y, n_classes, cfg.logreg_folds, cfg.logreg_n_c, ctx.seed)[1]
