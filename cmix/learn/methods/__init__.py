"""The one list of methods: name, display order, the class that fits it, the config it reads.

The CLI's ``--method`` choices, the report's order, the benchmark grid and the workflow
schema's ``methods`` enum all come from :data:`METHODS` (a test keeps the schema in step).
A method is a class (:class:`cmix.learn.methods.base.FittedMethod`): the harness builds it
from the run's config, calls ``fit`` and ``predict_proba`` and checkpoints its
``state_dict``; ``cmix predict`` rebuilds it from that dict alone
(:func:`from_state_dict`). A built-in method's class is imported when it is first asked
for (``Method.cls``), so this package imports neither torch nor scikit-learn and anything
may import it. Methods of installed packages (entry-point group ``cmix.methods``,
:mod:`cmix.learn.methods.plugins`) follow the built-in ones in :data:`METHODS`.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field

from ...errors import CmixError
from ..config import Config
from .base import FittedMethod
from .plugins import plugin_methods

# the networks read "logreg" too: its C grid and folds fit their covariates-only start
NEURAL = ("model", "predictor", "data", "covariates", "logreg")
CMIX_SECTIONS = NEURAL + ("pretrain", "contrastive", "pseudo_labels", "switches")


@dataclass(frozen=True)
class Method:
    """name: the ``--method`` value; where: the class that fits it, "module:Class" under
    this package (imported on first use) or the class itself (a plugin's); sections: the
    config sections it reads (:data:`cmix.learn.config.SECTIONS`); summary: one line for
    help and docs; network: whether it trains a torch network (GPU jobs on a cluster;
    the others fit scikit-learn or numpy models on the CPU); switches: fixed settings of
    the trainer's ablation ladder; package: the installed package a plugin method comes
    from (None for cmix's own)."""

    name: str
    where: object
    sections: tuple
    summary: str
    network: bool = False
    switches: dict = field(default_factory=dict)
    package: str | None = None

    @property
    def cls(self) -> type:
        """The class that fits the method."""
        if isinstance(self.where, type):
            return self.where
        module, name = self.where.split(":")
        return getattr(importlib.import_module(f"{__name__}.{module}"), name)

    @property
    def family(self) -> str:
        """The code path shared by methods of one class ("trainer" for cmix, mlp and the
        ablations)."""
        return self.cls.family


CMIX = "cmix.method:ContrastiveMixupMethod"
_BUILT_IN = [
    Method("covariates", "linear:CovariatesOnly", ("data", "covariates", "logreg"),
           "the store's covariates alone (age, sex, PCs, ...): L2 logistic regression, C by "
           "cross-validation; what every method's gain is measured against"),
    Method("prs", "linear:PolygenicScore", ("data", "covariates"),
           "polygenic score from the store's betas + one-feature logistic regression"),
    Method("logreg", "linear:Logreg", ("data", "covariates", "logreg"),
           "L2 logistic regression on standardised dosages, C by cross-validation"),
    Method("pca_logreg", "linear:PcaLogreg", ("data", "covariates", "logreg", "semi_linear"),
           "PCA of all training rows' genotypes (labeled and unlabeled), then L2 logistic "
           "regression on the labeled rows' PCs, C by cross-validation"),
    Method("label_spreading", "linear:LabelSpreadingOnPcs", ("data", "semi_linear"),
           "label spreading (kNN graph) on the PCs of all training rows' genotypes"),
    Method("gbdt", "linear:GradientBoostedTrees", ("data", "covariates", "gbdt"),
           "gradient-boosted trees on the labeled rows (scikit-learn's histogram GBDT)"),
    Method("mlp", CMIX, NEURAL, "supervised predictor on the embedded SNPs", True,
           {"pretrain": False, "pseudo_labels": False, "predictor_mixup": False}),
    Method("manifold_mixup", "manifold_mixup:ManifoldMixup", NEURAL + ("manifold_mixup",),
           "supervised predictor with mixup at a random layer (Verma et al. 2019)", True),
    Method("ae", "ae:Autoencoder", NEURAL + ("pretrain",),
           "autoencoder pre-training, predictor on the frozen encoder", True),
    Method("vime", "vime:Vime", NEURAL + ("pretrain", "vime"),
           "VIME self- and semi-supervised learning (Yoon et al. 2020)", True),
    Method("cmix_selfsl", CMIX, CMIX_SECTIONS,
           "ablation: contrastive mixup pre-training without pseudo-labels", True,
           {"pseudo_labels": False, "predictor_mixup": False}),
    Method("cmix_selfsl_pl", CMIX, CMIX_SECTIONS,
           "ablation: with pseudo-labels, no predictor mixup", True, {"predictor_mixup": False}),
    Method("cmix_random_mix", CMIX, CMIX_SECTIONS,
           "ablation: partners drawn regardless of class", True, {"mix": "random"}),
    Method("cmix_paper_pl", CMIX, CMIX_SECTIONS,
           "the paper's Self-SL + PL: pseudo-labels used as propagated (certainty-weighted, "
           "no judge), no predictor mixup", True, {"judge": False, "predictor_mixup": False}),
    Method("cmix_paper", CMIX, CMIX_SECTIONS,
           "Contrastive Mixup as Darabi et al. describe it: pseudo-labels used as propagated "
           "(certainty-weighted, refreshed every lp_every epochs, no judge)", True,
           {"judge": False}),
    Method("cmix", CMIX, CMIX_SECTIONS,
           "Contrastive Mixup: the full method, trained with the paper's pseudo-labels and "
           "without, cross-fitted; the training that predicts held-out labeled rows better "
           "is the run's", True),
]

#: the sections a plugin method reads: the rows' standardisation and its plugin_config
PLUGIN_SECTIONS = ("data", "covariates", "plugin")
_REGISTRY: dict = {}


def registry() -> dict:
    """name -> :class:`Method` of every method, cmix's own in the report's display order,
    then the installed plugins' (read once, :func:`cmix.learn.methods.plugins.plugin_methods`;
    CmixError, one line naming the package, for a plugin that fails to load or takes a
    built-in name)."""
    if not _REGISTRY:
        built_in = {m.name: m for m in _BUILT_IN}
        plugins = [Method(p.name, p.cls, PLUGIN_SECTIONS, p.summary, p.network,
                          package=p.package) for p in plugin_methods(set(built_in))]
        _REGISTRY.update(built_in)
        _REGISTRY.update({m.name: m for m in plugins})
    return _REGISTRY


def __getattr__(name: str):
    """:data:`METHODS` (name -> Method) and :data:`CLASSES` (class name -> class, for
    rebuilding a method from its state dict), built on first use."""
    if name == "METHODS":
        return registry()
    if name == "CLASSES":
        return {m.cls.__name__: m.cls for m in registry().values()}
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def get_method(name: str) -> Method:
    """The registry entry of ``name``; CmixError naming the known methods otherwise."""
    methods = registry()
    if name not in methods:
        raise CmixError(f"unknown method {name!r}; known: {', '.join(methods)}")
    return methods[name]


def method_rank(name: str) -> int:
    """Position in the display order (unknown names last)."""
    methods = list(registry())
    return methods.index(name) if name in methods else len(methods)


def from_state_dict(state: dict, device="cpu") -> FittedMethod:
    """The fitted method a :meth:`FittedMethod.state_dict` describes (its ``class``
    names it; ``cfg``, the flat config, becomes a :class:`cmix.learn.config.Config`), its
    modules on ``device``."""
    classes = __getattr__("CLASSES")
    cls = classes.get(state.get("class")) if isinstance(state, dict) else None
    if cls is None:
        raise CmixError(f"the run's model names no known method class "
                        f"({state.get('class') if isinstance(state, dict) else state!r}); "
                        "retrain it with this cmix")
    return cls(Config.from_flat(state["cfg"]), device).load_state_dict(state)
