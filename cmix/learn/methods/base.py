"""What every method is: a class fitted on a run's data that predicts class probabilities.

``fit(data)`` gets the run (:class:`cmix.learn.context.RunContext`): ``cfg``, ``seed``,
``splits`` (row indices), the training split's dosage moments ``mean``/``sd`` (M,), the
standardised covariates ``cov`` (n_rows, K), ``rows(rows)`` (int8 dosages on the device)
and the checkpoint's ``parts``, where a long fit keeps its progress. The network methods
fit a group of runs at once (``fit_group``, :mod:`cmix.learn.group`). ``predict_proba(x, covariates)`` takes
int8 dosages (n, M) (-1 missing) and standardised covariates (n, K) and gives float
(n, C). ``state_dict()`` is one dict, all that :func:`cmix.learn.methods.from_state_dict`
needs to rebuild the fitted method: ``class`` names it, ``cfg`` is the run's config as
a flat dict (:meth:`cmix.learn.config.Config.flat`), so a checkpoint holds plain values.
"""

from __future__ import annotations

import numpy as np

from ...runtime import one_blas_thread


class FittedMethod:
    """Base of every method. ``FIELDS``: the attributes that hold the fitted state (plain
    values: arrays, numbers, scikit-learn models); ``report``: the run's ``validation``
    and ``pseudo_labels`` summaries for metrics.json, set by :meth:`fit`."""

    family = ""
    FIELDS: tuple = ()

    def __init__(self, cfg, device="cpu"):
        self.cfg = cfg                  # cmix.learn.config.Config
        self.device = device
        self.report = {"validation": None, "pseudo_labels": None}

    def fit(self, data) -> "FittedMethod":
        raise NotImplementedError

    def predict_proba(self, x: np.ndarray, covariates: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def latent(self, x: np.ndarray, covariates: np.ndarray):
        """The rows' latent (n, d) for the report's t-SNE, where the method has one."""
        return None

    def state_dict(self) -> dict:
        return {"class": type(self).__name__, "cfg": self.cfg.flat(),
                **{k: getattr(self, k) for k in self.FIELDS}}

    def load_state_dict(self, state: dict) -> "FittedMethod":
        for k in self.FIELDS:
            setattr(self, k, state[k])
        return self


def full_proba(model, features: np.ndarray, n_classes: int) -> np.ndarray:
    """A scikit-learn model's predict_proba with columns for all n_classes (classes
    absent from its fit get 0), on one BLAS thread (the same bits at any thread count)."""
    prob = np.zeros((len(features), n_classes))
    with one_blas_thread():
        prob[:, model.classes_] = model.predict_proba(features)
    return prob
