"""The linear and scikit-learn methods: covariates, prs, logreg, pca_logreg,
label_spreading, gbdt.

Each fits on the labeled rows (train_labeled + validation) of the run; the logistic
regressions choose C by stratified k-fold cross-validation within them (log-loss), the
covariates fitted jointly beside the genotype features, out of their penalty
(:mod:`cmix.learn.linear`). Test
rows are read only to evaluate the fitted model.
"""

from __future__ import annotations

import time

import numpy as np
from threadpoolctl import threadpool_limits

from ...errors import CmixError
from ...runtime import one_blas_thread
from ..data import project_pcs, standardised_dosage, standardised_pcs
from ..linear import fit_logreg_cv, fit_with_covariates, require_two_per_class
from ..streams import PCA_ROWS, SPREADING_ROWS, gen
from .base import FittedMethod, full_proba


class _CvLogreg(FittedMethod):
    """L2 logistic regression on ``features(x)`` (n, d float64) of the labeled rows, with
    the run's covariates fitted jointly beside them, out of their penalty, when the run
    has some
    (:func:`cmix.learn.linear.fit_with_covariates`), else on the features
    alone (:func:`cmix.learn.linear.fit_logreg_cv`)."""

    family = "logreg"
    FIELDS = ("model", "with_cov", "n_classes", "mean", "sd")
    uses_covariates = True

    def features(self, x: np.ndarray, covariates: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def prepare(self, data) -> None:
        """Fit what :meth:`features` needs before the features of the labeled rows."""

    def fit(self, data):

        s, cfg = data.splits, self.cfg.logreg
        self.mean, self.sd, self.n_classes = data.mean, data.sd, s.n_classes
        self.with_cov = self.uses_covariates and data.n_cov > 0
        t = time.perf_counter()
        self.prepare(data)
        x = self.features(data.rows(s.labeled).cpu().numpy(), data.cov[s.labeled])
        t = data.add_time("load", t)
        args = (s.label[s.labeled], s.n_classes, cfg.logreg_folds, cfg.logreg_n_c,
                data.seed)
        cov = data.cov[s.labeled].astype(np.float64)
        # the covariates' own C, once for every feature set fit_features tries
        cov_c = fit_logreg_cv(cov, *args)[1] if self.with_cov else None

        def fit_one(features):
            if self.with_cov:
                return fit_with_covariates(features, cov, *args, cov_c=cov_c)
            return fit_logreg_cv(features, *args)

        self.model, best_c, folds, cv_loss = self.fit_features(x, fit_one)
        data.add_time("fit", t)
        self.report["validation"] = {
            "C": best_c, "cv_folds": folds, "cv_log_loss": cv_loss,
            "covariates": (f"joint, own L2 C {self.model.covariates_c:g}" if self.with_cov
                           else "none"),
            "fit_rows": "labeled (train_labeled + validation)",
            **(self.report.get("validation") or {})}
        return self

    def fit_features(self, x: np.ndarray, fit_one):
        """(model, C, folds, CV log-loss) of ``fit_one`` on the labeled rows' features."""
        return fit_one(x)

    def predict_proba(self, x, covariates):
        feats = self.features(x, covariates)
        if self.with_cov:
            feats = np.hstack([feats, covariates.astype(np.float64)])
        return full_proba(self.model, feats, self.n_classes)


class Logreg(_CvLogreg):
    """L2 logistic regression on the standardised dosages."""

    def features(self, x, covariates):

        return standardised_dosage(x, self.mean, self.sd)


class CovariatesOnly(_CvLogreg):
    """The covariates alone: the reference every method's gain is measured against."""

    family = "covariates"
    uses_covariates = False

    def prepare(self, data):
        if not data.n_cov:
            raise CmixError(f"{data.store_path}: the covariates method needs a store with "
                            "covariates (cmix store --covariates) and the config key "
                            "covariates: true")

    def features(self, x, covariates):
        return covariates.astype(np.float64)


def training_pca(data, cfg):
    """PCA of the standardised dosages of the training split's rows (labeled, validation
    and unlabeled: genotypes only, no label; at most ``semi_max_rows`` of them, drawn
    with the run's seed); ``semi_pcs`` axes (:func:`cmix.learn.data.standardised_pcs`).
    cfg: the config's ``semi_linear`` section."""
    train = data.train_rows
    if len(train) > cfg.semi_max_rows:
        _, rng = gen(data.seed, PCA_ROWS)
        train = np.sort(rng.choice(train, cfg.semi_max_rows, replace=False))
    return standardised_pcs(data.rows(train).cpu().numpy(), data.mean, data.sd,
                            cfg.semi_pcs, data.seed)[1]


def pc_counts(n_pcs: int) -> list[int]:
    """The leading-PC counts pca_logreg chooses among: 5, 10, 20, ... below ``n_pcs``,
    and ``n_pcs`` itself (e.g. 20 -> [5, 10, 20]; 3 -> [3])."""
    counts = [k for k in (5 * 2 ** i for i in range(12)) if k < n_pcs]
    return counts + [int(n_pcs)]


class PcaLogreg(_CvLogreg):
    """PCA of the training split's genotypes (labeled and unlabeled rows alike), then L2
    logistic regression on the labeled rows' leading PCs: the semi-supervised linear
    model a geneticist fits first. The number of leading PCs is chosen with C, by the
    same cross-validation of the log-loss on the same folds (:func:`pc_counts` of the
    ``semi_pcs`` fitted; ties: fewer PCs): few PCs fit few labels."""

    family = "pca_logreg"
    FIELDS = _CvLogreg.FIELDS + ("pca", "n_pcs")

    def prepare(self, data):
        self.pca = training_pca(data, self.cfg.semi_linear)
        self.n_pcs = None

    def features(self, x, covariates):

        pcs = project_pcs(self.pca, x, self.mean, self.sd)
        return pcs if self.n_pcs is None else pcs[:, :self.n_pcs]

    def fit_features(self, x, fit_one):
        fits = {k: fit_one(x[:, :k]) for k in pc_counts(x.shape[1])}
        self.n_pcs = min(fits, key=lambda k: (fits[k][3], k))
        self.report["validation"] = {
            "n_pcs": int(self.n_pcs),
            "cv_log_loss_by_n_pcs": {str(k): float(f[3]) for k, f in fits.items()}}
        return fits[self.n_pcs]


class LabelSpreadingOnPcs(FittedMethod):
    """scikit-learn's LabelSpreading (kNN kernel, ``spreading_k`` neighbours, clamping
    ``spreading_alpha``) on the training split's PCs (:func:`training_pca`): the labeled
    rows seed, the unlabeled rows (at most ``semi_max_rows``) are nodes; new rows get the
    spread labels of their nearest nodes. Covariates are not used."""

    family = "label_spreading"
    FIELDS = ("model", "pca", "n_classes", "mean", "sd")

    def fit(self, data):
        # scikit-learn: ~1 s; only the methods that fit with it
        from sklearn.semi_supervised import LabelSpreading


        s, cfg = data.splits, self.cfg.semi_linear
        self.mean, self.sd, self.n_classes = data.mean, data.sd, s.n_classes
        t = time.perf_counter()
        self.pca = training_pca(data, cfg)
        unl = s.unlabeled
        if len(unl) > cfg.semi_max_rows:
            _, rng = gen(data.seed, SPREADING_ROWS)
            unl = np.sort(rng.choice(unl, cfg.semi_max_rows, replace=False))
        x = np.vstack([project_pcs(self.pca, data.rows(r).cpu().numpy(), self.mean, self.sd)
                       for r in (s.labeled, unl) if len(r)])   # no unlabeled row: all labeled
        y = np.concatenate([s.label[s.labeled], np.full(len(unl), -1)])
        t = data.add_time("load", t)
        # a node has at most n - 1 neighbours
        k = min(cfg.spreading_k, len(y) - 1)
        with threadpool_limits(limits=1):
            self.model = LabelSpreading(kernel="knn", n_neighbors=k,
                                        alpha=cfg.spreading_alpha, max_iter=1000).fit(x, y)
        data.add_time("fit", t)
        self.report["validation"] = {"fit_rows": "labeled seeds + unlabeled nodes",
                                     "n_nodes": int(len(y)),
                                     **({"k_capped_to": int(k)} if k < cfg.spreading_k else {})}
        return self

    def predict_proba(self, x, covariates):


        with threadpool_limits(limits=1):
            return full_proba(self.model, project_pcs(self.pca, x, self.mean, self.sd),
                              self.n_classes)


def gbdt_features(x: np.ndarray) -> np.ndarray:
    """float64 (n, M) dosages for the trees, missing calls (-1) as NaN (the trees' own
    missing-value branch)."""
    x = x.astype(np.float64)
    x[x < 0] = np.nan
    return x


class GradientBoostedTrees(FittedMethod):
    """Gradient-boosted trees (scikit-learn's HistGradientBoostingClassifier) on the
    labeled rows' dosages and covariates: the paper's CatBoost row. The number of trees
    is early-stopped on an internal 20% of the labeled rows (log-loss), then the trees
    are fitted again with that count on every labeled row. Learning rate ``gbdt_lr``, at
    most ``gbdt_max_iter`` trees of ``gbdt_max_leaf_nodes`` leaves of at least
    ``gbdt_min_leaf`` rows, L2 ``gbdt_l2``. One OpenMP thread, so the sums do not depend
    on the thread count."""

    family = "gbdt"
    FIELDS = ("model", "n_classes")

    @staticmethod
    def features(x, covariates):
        return np.hstack([gbdt_features(x), covariates.astype(np.float64)])

    def fit(self, data):
        # scikit-learn: ~1 s; only the methods that fit with it
        from sklearn.ensemble import HistGradientBoostingClassifier


        s, cfg = data.splits, self.cfg.gbdt
        self.n_classes = s.n_classes
        t = time.perf_counter()
        x = self.features(data.rows(s.labeled).cpu().numpy(), data.cov[s.labeled])
        y = s.label[s.labeled]
        require_two_per_class(y, s.n_classes, "gbdt's early-stopping holdout (stratified)")
        t = data.add_time("load", t)

        def trees(**kw):
            return HistGradientBoostingClassifier(
                learning_rate=cfg.gbdt_lr, max_leaf_nodes=cfg.gbdt_max_leaf_nodes,
                min_samples_leaf=cfg.gbdt_min_leaf, l2_regularization=cfg.gbdt_l2,
                random_state=int(data.seed) & 0x7FFFFFFF, **kw)

        with threadpool_limits(limits=1):
            stopped = trees(max_iter=cfg.gbdt_max_iter, early_stopping=True,
                            validation_fraction=0.2, n_iter_no_change=10,
                            scoring="loss").fit(x, y)
            # the count of trees from the holdout, then every labeled row, as the
            # networks' predictors are refitted
            self.model = trees(max_iter=int(stopped.n_iter_), early_stopping=False).fit(x, y)
        data.add_time("fit", t)
        self.report["validation"] = {"n_trees": int(stopped.n_iter_),
                                     "fit_rows": "labeled (train_labeled + validation); the "
                                                 "tree count early-stopped on 20% of them"}
        return self

    def predict_proba(self, x, covariates):

        with threadpool_limits(limits=1):
            return full_proba(self.model, self.features(x, covariates), self.n_classes)


class PolygenicScore(FittedMethod):
    """Polygenic score = dosage @ variant_beta (the store's summary-statistic effects of
    the effect allele; missing calls -> the training-split mean), standardised over the
    labeled rows, then a one-feature logistic regression (the covariates beside it) on
    the labeled rows."""

    family = "prs"
    FIELDS = ("model", "beta", "mean", "score_mean", "score_sd", "n_classes")

    def score(self, x: np.ndarray) -> np.ndarray:
        """float64 (n,): sum_j dosage_j * beta_j of int8 x (n, M), missing -> mean_j."""
        d = x.astype(np.float64)
        miss = d < 0
        d[miss] = np.broadcast_to(self.mean, d.shape)[miss]
        with one_blas_thread():
            return d @ self.beta

    def fit(self, data):
        # scikit-learn: ~1 s; only the methods that fit with it
        from sklearn.linear_model import LogisticRegression

        s = data.splits
        self.beta = np.asarray(data.root["variant_beta"][:], dtype=np.float64)
        if not np.any(np.isfinite(self.beta) & (self.beta != 0)):
            raise CmixError(f"{data.store_path}: variant_beta is all zero or missing; the "
                            "PRS baseline needs summary-statistic effects")
        self.mean, self.n_classes = data.mean, s.n_classes
        t = time.perf_counter()
        score = self.score(data.rows(s.labeled).cpu().numpy())
        self.score_mean, self.score_sd = float(score.mean()), float(score.std()) or 1.0
        y = s.label[s.labeled]
        t = data.add_time("load", t)
        z = self._features(score, data.cov[s.labeled])
        with one_blas_thread():
            self.model = LogisticRegression(C=1e6, max_iter=5000).fit(z, y)
        data.add_time("fit", t)
        self.report["validation"] = {"labeled_accuracy": float(np.mean(self.model.predict(z) == y)),
                                     "fit_rows": "labeled (train_labeled + validation)"}
        return self

    def _features(self, score, covariates):
        return np.hstack([((score - self.score_mean) / self.score_sd)[:, None],
                          covariates.astype(np.float64)])

    def predict_proba(self, x, covariates):
        return full_proba(self.model, self._features(self.score(x), covariates),
                          self.n_classes)
