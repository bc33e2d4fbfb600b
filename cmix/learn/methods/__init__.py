"""The one list of methods: name, display order, the class that fits it, the config it reads.

The CLI's ``--method`` choices, the report's order, the benchmark grid and the workflow
schema's ``methods`` enum all come from :data:`METHODS` (a test keeps the schema in step).
A method is a class (:class:`cmix.learn.methods.base.FittedMethod`): the harness builds it
from the run's config, calls ``fit`` and ``predict_proba`` and checkpoints its
``state_dict``; ``cmix predict`` rebuilds it from that dict alone
(:func:`from_state_dict`). This package imports neither torch nor scikit-learn until a
method is fitted, so anything may import it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ...errors import CmixError
from .base import FittedMethod
from .linear import (CovariatesOnly, GradientBoostedTrees, LabelSpreadingOnPcs, Logreg,
                     PcaLogreg, PolygenicScore)
from .networks import Autoencoder, ContrastiveMixupMethod, ManifoldMixup, NetworkMethod, Vime

# the networks read "logreg" too: its C grid and folds fit their covariates-only start
NEURAL = ("model", "predictor", "data", "covariates", "logreg")
CMIX_SECTIONS = NEURAL + ("pretrain", "contrastive", "pseudo_labels", "switches")


@dataclass(frozen=True)
class Method:
    """name: the ``--method`` value; cls: the class that fits it; sections: the config
    sections it reads (:data:`cmix.learn.config.SECTIONS`); switches: fixed settings of
    the trainer's ablation ladder; summary: one line for help and docs."""

    name: str
    cls: type
    sections: tuple
    summary: str
    switches: dict = field(default_factory=dict)

    @property
    def family(self) -> str:
        """The code path shared by methods of one class ("trainer" for cmix, mlp and the
        ablations)."""
        return self.cls.family

    @property
    def network(self) -> bool:
        """Whether it trains a torch network (GPU jobs on a cluster); the others fit
        scikit-learn or numpy models on the CPU."""
        return issubclass(self.cls, NetworkMethod)


_ALL = [
    Method("covariates", CovariatesOnly, ("data", "covariates", "logreg"),
           "the store's covariates alone (age, sex, PCs, ...): L2 logistic regression, C by "
           "cross-validation; what every method's gain is measured against"),
    Method("prs", PolygenicScore, ("data", "covariates"),
           "polygenic score from the store's betas + one-feature logistic regression"),
    Method("logreg", Logreg, ("data", "covariates", "logreg"),
           "L2 logistic regression on standardised dosages, C by cross-validation"),
    Method("pca_logreg", PcaLogreg, ("data", "covariates", "logreg", "semi_linear"),
           "PCA of all training rows' genotypes (labeled and unlabeled), then L2 logistic "
           "regression on the labeled rows' PCs, C by cross-validation"),
    Method("label_spreading", LabelSpreadingOnPcs, ("data", "semi_linear"),
           "label spreading (kNN graph) on the PCs of all training rows' genotypes"),
    Method("gbdt", GradientBoostedTrees, ("data", "covariates", "gbdt"),
           "gradient-boosted trees on the labeled rows (scikit-learn's histogram GBDT)"),
    Method("mlp", ContrastiveMixupMethod, NEURAL, "supervised predictor on the embedded SNPs",
           {"pretrain": False, "pseudo_labels": False, "predictor_mixup": False}),
    Method("manifold_mixup", ManifoldMixup, NEURAL + ("manifold_mixup",),
           "supervised predictor with mixup at a random layer (Verma et al. 2019)"),
    Method("ae", Autoencoder, NEURAL + ("pretrain",),
           "autoencoder pre-training, predictor on the frozen encoder"),
    Method("vime", Vime, NEURAL + ("pretrain", "vime"),
           "VIME self- and semi-supervised learning (Yoon et al. 2020)"),
    Method("cmix_selfsl", ContrastiveMixupMethod, CMIX_SECTIONS,
           "ablation: contrastive mixup pre-training without pseudo-labels",
           {"pseudo_labels": False, "predictor_mixup": False}),
    Method("cmix_selfsl_pl", ContrastiveMixupMethod, CMIX_SECTIONS,
           "ablation: with pseudo-labels, no predictor mixup", {"predictor_mixup": False}),
    Method("cmix_random_mix", ContrastiveMixupMethod, CMIX_SECTIONS,
           "ablation: partners drawn regardless of class", {"mix": "random"}),
    Method("cmix_paper_pl", ContrastiveMixupMethod, CMIX_SECTIONS,
           "the paper's Self-SL + PL: pseudo-labels used as propagated (certainty-weighted, "
           "no judge), no predictor mixup", {"judge": False, "predictor_mixup": False}),
    Method("cmix_paper", ContrastiveMixupMethod, CMIX_SECTIONS,
           "Contrastive Mixup as Darabi et al. describe it: pseudo-labels used as propagated "
           "(certainty-weighted, refreshed every lp_every epochs, no judge)",
           {"judge": False}),
    Method("cmix", ContrastiveMixupMethod, CMIX_SECTIONS,
           "Contrastive Mixup: the full method, trained with the paper's pseudo-labels and "
           "without, cross-fitted; the training that predicts held-out labeled rows better "
           "is the run's"),
]

#: every method, in the report's display order
METHODS: dict[str, Method] = {m.name: m for m in _ALL}

#: class name -> class, for rebuilding a method from its state dict
CLASSES: dict[str, type] = {m.cls.__name__: m.cls for m in _ALL}


def get_method(name: str) -> Method:
    """The registry entry of ``name``; CmixError naming the known methods otherwise."""
    if name not in METHODS:
        raise CmixError(f"unknown method {name!r}; known: {', '.join(METHODS)}")
    return METHODS[name]


def method_rank(name: str) -> int:
    """Position in the display order (unknown names last)."""
    return list(METHODS).index(name) if name in METHODS else len(METHODS)


def from_state_dict(state: dict, device="cpu") -> FittedMethod:
    """The fitted method a :meth:`FittedMethod.state_dict` describes (its ``class``
    names it; ``cfg``, the flat config, becomes a :class:`cmix.learn.config.Config`), its
    modules on ``device``."""
    cls = CLASSES.get(state.get("class")) if isinstance(state, dict) else None
    if cls is None:
        raise CmixError(f"the run's model names no known method class "
                        f"({state.get('class') if isinstance(state, dict) else state!r}); "
                        "retrain it with this cmix")
    from ..config import Config

    return cls(Config.from_flat(state["cfg"]), device).load_state_dict(state)
