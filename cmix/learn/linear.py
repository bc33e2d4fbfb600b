"""L2 logistic regression with the covariates left out of the penalty.

A statistical geneticist fits SNP effects (or PCs) beside covariates such as age, sex
and ancestry PCs with the penalty on the SNPs only (snpnet, bigstatsr and regenie all
do): a penalty on the covariates would shrink a strong covariate model towards nothing
whenever many weak SNP features share its C. Here the covariates model is fitted first
(:func:`fit_logreg_cv`, its own C by cross-validation: the
``covariates`` baseline itself) and its logits enter the SNP model as a fixed offset;
the SNP coefficients carry the L2 penalty, with C chosen by stratified k-fold CV of the
log-loss. At the smallest C the model is the covariates model, so adding SNPs can make
it worse than the covariates alone only by the noise of that choice.
"""

from __future__ import annotations

import warnings

import numpy as np

from ..io import CmixError, one_blas_thread


def cv_folds(n_labeled_per_class: np.ndarray, folds: int) -> int:
    """The number of CV folds: ``folds``, fewer if a class has fewer rows (at least 2)."""
    return int(max(2, min(folds, n_labeled_per_class.min())))


def require_two_per_class(y: np.ndarray, n_classes: int, what: str) -> None:
    """CmixError when a class has fewer than 2 of the rows ``y`` (int labels): a
    stratified split (CV folds, an early-stopping holdout) needs 2 of each. ``what``
    names the step for the message."""
    counts = np.bincount(y, minlength=n_classes)
    if counts.min() < 2:
        k = int(np.argmin(counts))
        raise CmixError(f"{what} needs at least 2 labeled rows of every class, class index "
                        f"{k} has {int(counts[k])} (labeled class counts "
                        f"{counts.tolist()}); raise the budget")


@one_blas_thread()
def fit_logreg_cv(x: np.ndarray, y: np.ndarray, n_classes: int, folds: int, n_c: int,
                  seed: int):
    """L2 logistic regression on x (n, d), y (n,): C from ``n_c`` values in 1e-4..1e2 by
    stratified k-fold CV of the log-loss (k = ``folds``, fewer if a class has fewer rows),
    then refit on all rows, on one BLAS thread (:func:`one_blas_thread`). Returns
    (model, C, k, best mean CV log-loss)."""
    from sklearn.linear_model import LogisticRegression, LogisticRegressionCV
    from sklearn.model_selection import StratifiedKFold

    require_two_per_class(y, n_classes, "choosing logistic regression's C by stratified CV")
    folds = cv_folds(np.bincount(y, minlength=n_classes), folds)
    cv = LogisticRegressionCV(Cs=np.logspace(-4, 2, n_c),
                              cv=StratifiedKFold(folds, shuffle=True, random_state=seed),
                              scoring="neg_log_loss", max_iter=2000, n_jobs=1)
    with warnings.catch_warnings():          # scikit-learn 1.8 API-transition notices
        warnings.simplefilter("ignore", FutureWarning)
        cv.fit(x, y)
    best_c = float(np.atleast_1d(cv.C_)[0])
    scores = np.mean(next(iter(cv.scores_.values())), axis=0)      # (n_c,) mean over folds
    model = LogisticRegression(C=best_c, max_iter=5000).fit(x, y)
    return model, best_c, folds, float(-scores.max())


def _fit_offset(x: np.ndarray, y: np.ndarray, offset: np.ndarray, n_classes: int, c: float,
                start: np.ndarray | None = None) -> np.ndarray:
    """Coefficients (d + 1, K) (the last row: intercepts) minimising
    sum_i [logsumexp(l_i) - l_i,y_i] + |W|^2 / (2c), with l = offset + x W + b: the
    objective of scikit-learn's LogisticRegression(C=c) plus an offset. As there, two
    classes have one coefficient vector (class 0's column stays 0) and more classes one
    per class. x: (n, d) float64; offset: (n, K). L-BFGS on one BLAS thread (the sums do
    not depend on the thread count)."""
    from scipy.optimize import minimize
    from scipy.special import logsumexp, softmax

    n, d = x.shape
    onehot = np.eye(n_classes)[y]
    free = [1] if n_classes == 2 else list(range(n_classes))

    def full(theta):
        w = np.zeros((d + 1, n_classes))
        w[:, free] = theta.reshape(d + 1, len(free))
        return w

    def objective(theta):
        w = full(theta)
        logits = offset + x @ w[:d] + w[d]
        loss = float(np.sum(logsumexp(logits, axis=1) - np.sum(logits * onehot, axis=1)))
        g = softmax(logits, axis=1) - onehot
        grad = np.vstack([x.T @ g + w[:d] / c, g.sum(0)])[:, free]
        return loss + float(np.sum(w[:d] ** 2)) / (2 * c), grad.ravel()

    theta0 = np.zeros((d + 1) * len(free)) if start is None else start[:, free].ravel()
    with one_blas_thread():
        res = minimize(objective, theta0, jac=True, method="L-BFGS-B",
                       options={"maxiter": 2000, "gtol": 1e-6})
    return full(res.x)


class OffsetLogisticRegression:
    """The fitted model: ``predict_proba(features)`` of features (n, d + K) laid out as
    [penalised columns, covariates], like scikit-learn's; ``classes_`` = 0..C-1."""

    def __init__(self, cov_model, coef: np.ndarray, n_features: int, n_classes: int):
        self.cov_model, self.coef = cov_model, coef
        self.n_features, self.classes_ = n_features, np.arange(n_classes)

    def offset(self, cov: np.ndarray) -> np.ndarray:
        return covariate_logits(self.cov_model, cov, len(self.classes_))

    def predict_proba(self, features: np.ndarray) -> np.ndarray:
        from scipy.special import softmax

        x, cov = features[:, :self.n_features], features[:, self.n_features:]
        d = self.n_features
        with one_blas_thread():
            return softmax(self.offset(cov) + x @ self.coef[:d] + self.coef[d], axis=1)


def covariate_logits(cov_model, cov: np.ndarray, n_classes: int) -> np.ndarray:
    """(n, C) logits of a fitted scikit-learn covariates model (log-probabilities, which
    are logits up to a per-row constant), 0 for a model of no covariates (None)."""
    if cov_model is None:
        return np.zeros((len(cov), n_classes))
    prob = np.full((len(cov), n_classes), 1e-300)
    with one_blas_thread():
        prob[:, cov_model.classes_] = np.clip(cov_model.predict_proba(cov), 1e-300, None)
    return np.log(prob)


@one_blas_thread()
def fit_with_unpenalised_covariates(x: np.ndarray, cov: np.ndarray, y: np.ndarray,
                                    n_classes: int, folds: int, n_c: int, seed: int):
    """x (n, d) penalised features, cov (n, K) covariates (K may be 0), y (n,) classes.

    The covariates model (C by CV) gives a fixed offset; the features' C comes from
    ``n_c`` values in 1e-4..1e2 by stratified k-fold CV of the log-loss, the covariates
    model refitted (at its chosen C) on each training fold. Returns (model, C, k, best
    mean CV log-loss), as :func:`fit_logreg_cv`; on one BLAS thread."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import StratifiedKFold

    cov_c = None
    if cov.shape[1]:
        cov_c = fit_logreg_cv(cov, y, n_classes, folds, n_c, seed)[1]

    def cov_fit(rows):
        if cov_c is None or len(np.unique(y[rows])) < 2:
            return None
        return LogisticRegression(C=cov_c, max_iter=5000).fit(cov[rows], y[rows])

    k = cv_folds(np.bincount(y, minlength=n_classes), folds)
    cs = np.logspace(-4, 2, n_c)
    losses = np.zeros(n_c)
    for train, held in StratifiedKFold(k, shuffle=True, random_state=seed).split(x, y):
        cm = cov_fit(train)
        off_tr = covariate_logits(cm, cov[train], n_classes)
        coef = None
        for i, c in enumerate(cs):                 # small C first: warm starts grow
            coef = _fit_offset(x[train], y[train], off_tr, n_classes, c, coef)
            model = OffsetLogisticRegression(cm, coef, x.shape[1], n_classes)
            p = model.predict_proba(np.hstack([x[held], cov[held]]))
            losses[i] += -np.mean(np.log(np.clip(p[np.arange(len(held)), y[held]], 1e-12, None)))
    losses /= k
    best = int(np.argmin(losses))
    cm = cov_fit(np.arange(len(y)))
    coef = _fit_offset(x, y, covariate_logits(cm, cov, n_classes), n_classes, cs[best])
    return OffsetLogisticRegression(cm, coef, x.shape[1], n_classes), float(cs[best]), k, \
        float(losses[best])
