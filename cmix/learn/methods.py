"""The one list of methods: name, display order, what runs it, the config it reads.

The CLI's ``--method`` choices, the report's order, the benchmark grid and the workflow
schema's ``methods`` enum all come from :data:`METHODS` (a test keeps the schema in step).
This module imports nothing of the trainer or the baselines, so anything may import it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..io import CmixError

# the networks read "logreg" too: its C grid and folds fit their covariates-only start
NEURAL = ("model", "predictor", "data", "covariates", "logreg")
CMIX_SECTIONS = NEURAL + ("pretrain", "contrastive", "pseudo_labels", "switches")


@dataclass(frozen=True)
class Method:
    """name: the ``--method`` value; family: the code that runs it (:data:`RUNNERS`);
    sections: the config sections it reads (:data:`cmix.learn.config.SECTIONS`); switches:
    fixed settings of the trainer's ablation ladder; summary: one line for help and docs."""

    name: str
    family: str
    sections: tuple
    summary: str
    switches: dict = field(default_factory=dict)

    def runner(self):
        """The function that runs this method: f(ctx, state) -> metrics dict."""
        from importlib import import_module

        module, name = RUNNERS[self.family].split(":")
        return getattr(import_module(module), name)


#: family -> "module:function" running it (imported when a run starts)
RUNNERS = {"trainer": "cmix.learn.train:run_trainer", "prs": "cmix.learn.baselines:run_prs",
           "covariates": "cmix.learn.baselines:run_covariates",
           "logreg": "cmix.learn.baselines:run_logreg", "ae": "cmix.learn.baselines:run_ae",
           "vime": "cmix.learn.baselines:run_vime",
           "manifold_mixup": "cmix.learn.baselines:run_manifold_mixup",
           "pca_logreg": "cmix.learn.baselines:run_pca_logreg",
           "label_spreading": "cmix.learn.baselines:run_label_spreading",
           "gbdt": "cmix.learn.baselines:run_gbdt"}


_ALL = [
    Method("covariates", "covariates", ("data", "covariates", "logreg"),
           "the store's covariates alone (age, sex, PCs, ...): L2 logistic regression, C by "
           "cross-validation; what every method's gain is measured against"),
    Method("prs", "prs", ("data", "covariates"),
           "polygenic score from the store's betas + one-feature logistic regression"),
    Method("logreg", "logreg", ("data", "covariates", "logreg"),
           "L2 logistic regression on standardised dosages, C by cross-validation"),
    Method("pca_logreg", "pca_logreg", ("data", "covariates", "logreg", "semi_linear"),
           "PCA of all training rows' genotypes (labeled and unlabeled), then L2 logistic "
           "regression on the labeled rows' PCs, C by cross-validation"),
    Method("label_spreading", "label_spreading", ("data", "semi_linear"),
           "label spreading (kNN graph) on the PCs of all training rows' genotypes"),
    Method("gbdt", "gbdt", ("data", "covariates", "gbdt"),
           "gradient-boosted trees on the labeled rows (scikit-learn's histogram GBDT)"),
    Method("mlp", "trainer", NEURAL, "supervised predictor on the embedded SNPs",
           {"pretrain": False, "pseudo_labels": False, "predictor_mixup": False}),
    Method("manifold_mixup", "manifold_mixup", NEURAL + ("manifold_mixup",),
           "supervised predictor with mixup at a random layer (Verma et al. 2019)"),
    Method("ae", "ae", NEURAL + ("pretrain",),
           "autoencoder pre-training, predictor on the frozen encoder"),
    Method("vime", "vime", NEURAL + ("pretrain", "vime"),
           "VIME self- and semi-supervised learning (Yoon et al. 2020)"),
    Method("cmix_selfsl", "trainer", CMIX_SECTIONS,
           "ablation: contrastive mixup pre-training without pseudo-labels",
           {"pseudo_labels": False, "predictor_mixup": False}),
    Method("cmix_selfsl_pl", "trainer", CMIX_SECTIONS,
           "ablation: with pseudo-labels, no predictor mixup", {"predictor_mixup": False}),
    Method("cmix_random_mix", "trainer", CMIX_SECTIONS,
           "ablation: partners drawn regardless of class", {"mix": "random"}),
    Method("cmix", "trainer", CMIX_SECTIONS,
           "Contrastive Mixup: the full method"),
]

#: every method, in the report's display order
METHODS: dict[str, Method] = {m.name: m for m in _ALL}


def get_method(name: str) -> Method:
    """The registry entry of ``name``; CmixError naming the known methods otherwise."""
    if name not in METHODS:
        raise CmixError(f"unknown method {name!r}; known: {', '.join(METHODS)}")
    return METHODS[name]


def method_rank(name: str) -> int:
    """Position in the display order (unknown names last)."""
    return list(METHODS).index(name) if name in METHODS else len(METHODS)
