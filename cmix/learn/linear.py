"""L2 logistic regression with the covariates kept out of the SNPs' penalty.

A statistical geneticist fits SNP effects (or PCs) beside covariates such as age, sex
and ancestry PCs with the penalty on the SNPs only (glmnet's penalty.factor, snpnet,
bigstatsr and regenie all do): a penalty shared with many weak SNP features would
shrink a strong covariate model towards nothing. Here the covariates and the SNPs are
fitted jointly, each covariate and SNP coefficient re-estimated beside the others (a
covariates-only fit frozen as an offset keeps the attenuated marginal effects of a
logistic model, and a PC keeps effects that belong to the SNPs). The covariates carry
their own L2 penalty at the C their own model chose by CV (:func:`fit_logreg_cv`, the
``covariates`` baseline; 1e2 at most, next to nothing on a few standardised columns),
which keeps a covariate set that separates the labeled rows finite; the SNP
coefficients carry the L2 penalty whose C is chosen by stratified k-fold CV of the
log-loss. The intercepts are unpenalised.
"""

from __future__ import annotations

import warnings

import numpy as np

from ..errors import CmixError
from ..runtime import one_blas_thread


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
    # scikit-learn: ~1 s; only the methods that fit with it
    from sklearn.linear_model import LogisticRegressionCV
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
    return logreg_at(x, None, y, n_classes, best_c), best_c, folds, float(-scores.max())


def _fit_penalised(x: np.ndarray, y: np.ndarray, n_classes: int, inv_c: np.ndarray,
                   start: np.ndarray | None = None) -> np.ndarray:
    """Coefficients (d + 1, K) (the last row: intercepts) minimising
    sum_i [logsumexp(l_i) - l_i,y_i] + sum_j inv_c_j |W_j|^2 / 2, with l = x W + b:
    scikit-learn's LogisticRegression(C=c) objective when every inv_c_j = 1 / c, here
    with a penalty per column (inv_c (d,); 0 leaves a column unpenalised). As there,
    two classes have one coefficient vector (class 0's column stays 0) and more classes
    one per class. x: (n, d) float64. L-BFGS on one BLAS thread (the sums do not depend
    on the thread count)."""
    from scipy.optimize import minimize  # scipy: ~0.3 s; only where it computes
    from scipy.special import logsumexp, softmax  # scipy: ~0.3 s; only where it computes

    n, d = x.shape
    onehot = np.eye(n_classes)[y]
    free = [1] if n_classes == 2 else list(range(n_classes))
    inv_c = np.asarray(inv_c, np.float64)[:, None]

    def full(theta):
        w = np.zeros((d + 1, n_classes))
        w[:, free] = theta.reshape(d + 1, len(free))
        return w

    def objective(theta):
        w = full(theta)
        logits = x @ w[:d] + w[d]
        loss = float(np.sum(logsumexp(logits, axis=1) - np.sum(logits * onehot, axis=1)))
        g = softmax(logits, axis=1) - onehot
        grad = np.vstack([x.T @ g + inv_c * w[:d], g.sum(0)])[:, free]
        return loss + float(np.sum(inv_c * w[:d] ** 2)) / 2, grad.ravel()

    theta0 = np.zeros((d + 1) * len(free)) if start is None else start[:, free].ravel()
    with one_blas_thread():
        res = minimize(objective, theta0, jac=True, method="L-BFGS-B",
                       options={"maxiter": 2000, "gtol": 1e-6})
    return full(res.x)


class JointLogisticRegression:
    """The fitted model: ``predict_proba(features)`` of features (n, d + K) laid out as
    [SNP (or PC) columns, covariates], like scikit-learn's; ``classes_`` = 0..C-1;
    ``coef`` (d + K + 1, C), the last row the intercepts."""

    def __init__(self, coef: np.ndarray, n_classes: int):
        self.coef, self.classes_ = coef, np.arange(n_classes)

    def predict_proba(self, features: np.ndarray) -> np.ndarray:
        from scipy.special import softmax  # scipy: ~0.3 s; only where it computes

        with one_blas_thread():
            return softmax(features @ self.coef[:-1] + self.coef[-1], axis=1)


@one_blas_thread()
def fit_with_covariates(x: np.ndarray, cov: np.ndarray, y: np.ndarray,
                        n_classes: int, folds: int, n_c: int, seed: int,
                        cov_c: float | None = None):
    """x (n, d) penalised features, cov (n, K) covariates (K >= 1), y (n,) classes.

    One joint fit of both (:func:`_fit_penalised`): the covariates at the C of their own
    model (:func:`fit_logreg_cv` on ``cov``; ``cov_c`` when a caller fitting several
    feature sets beside the same covariates has it already), the features at a C from
    ``n_c`` values in 1e-4..1e2 chosen by stratified k-fold CV of the log-loss (warm
    starts from small C up). Returns (model, C, k, best mean CV log-loss), as
    :func:`fit_logreg_cv`, and the covariates' C as ``model.covariates_c``; on one BLAS
    thread."""
    # scikit-learn: ~1 s; only the methods that fit with it
    from sklearn.model_selection import StratifiedKFold

    if cov_c is None:
        cov_c = fit_logreg_cv(cov, y, n_classes, folds, n_c, seed)[1]
    z = np.hstack([x, cov])
    k = cv_folds(np.bincount(y, minlength=n_classes), folds)
    cs = np.logspace(-4, 2, n_c)

    losses = np.zeros(n_c)
    for train, held in StratifiedKFold(k, shuffle=True, random_state=seed).split(x, y):
        coef = None
        for i, c in enumerate(cs):                 # small C first: warm starts grow
            coef = _fit_penalised(z[train], y[train], n_classes,
                                  penalties(x.shape[1], cov.shape[1], c, cov_c), coef)
            p = JointLogisticRegression(coef, n_classes).predict_proba(z[held])
            losses[i] += -np.mean(np.log(np.clip(p[np.arange(len(held)), y[held]], 1e-12, None)))
    losses /= k
    best = int(np.argmin(losses))
    model = fit_joint(x, cov, y, n_classes, float(cs[best]), cov_c)
    return model, float(cs[best]), k, float(losses[best])


def logreg_at(x: np.ndarray, cov: np.ndarray | None, y: np.ndarray, n_classes: int,
              c: float, cov_c: float | None = None):
    """L2 logistic regression at a given C on features x (n, d): scikit-learn's
    (intercept unpenalised) when ``cov`` is None, else the joint fit beside the
    covariates cov (n, K) (:func:`fit_joint`, the covariates at ``cov_c``). Its
    ``predict_proba`` takes the features (with the covariates after them); on one BLAS
    thread."""
    # scikit-learn: ~1 s; only the methods that fit with it
    from sklearn.linear_model import LogisticRegression

    if cov is not None:
        return fit_joint(x, cov, y, n_classes, c, cov_c)
    with one_blas_thread():
        return LogisticRegression(C=c, max_iter=5000).fit(x, y)


def fit_joint(x: np.ndarray, cov: np.ndarray, y: np.ndarray, n_classes: int, c: float,
              cov_c: float) -> JointLogisticRegression:
    """The joint fit of features x (n, d) at C = ``c`` and covariates cov (n, K) at
    ``cov_c`` (:func:`_fit_penalised`); ``model.covariates_c`` records the latter."""
    inv_c = penalties(x.shape[1], cov.shape[1], c, cov_c)
    model = JointLogisticRegression(_fit_penalised(np.hstack([x, cov]), y, n_classes, inv_c),
                                    n_classes)
    model.covariates_c = float(cov_c)
    return model


def penalties(d: int, k: int, c: float, cov_c: float) -> np.ndarray:
    """The joint fit's per-column penalties (d + k,) (:func:`_fit_penalised`'s
    ``inv_c``): 1 / c for the d features, 1 / cov_c for the k covariates."""
    return np.concatenate([np.full(d, 1 / c), np.full(k, 1 / cov_c)])
