"""Training configuration: typed keys in sections, presets, and the checks at the edge.

A config is one flat mapping of keys (a YAML/JSON file, or a dict in Python). Every key
belongs to one section, a frozen dataclass (:class:`Model`, :class:`Pretrain`, ...), and
:class:`Config` holds the sections: code reads ``cfg.pseudo_labels.lp_k``. Each method
reads the sections the registry gives it (:mod:`cmix.learn.methods`), so the same file
serves every method of a grid, and a method's run key covers only the keys it reads
(changing ``vime_k`` reruns no cmix job). Every key is checked for every method: an
unknown key, or a value of the wrong type or range, stops any method, naming the key.

``preset: cpu`` (the defaults: CPU-sized, for tests, the demo and 2-core machines) or
``preset: paper`` (the paper's encoder: categorical SNPs, encoder width = the embedded
width) sets the starting values; the other keys override them.

Only :mod:`cmix.cli` reads config files (:func:`read_config_file`);
:func:`resolve_config` checks a flat mapping and returns its :class:`Config`, which
everything below takes. A checkpoint keeps the flat mapping (:meth:`Config.flat`)."""

from __future__ import annotations

from dataclasses import dataclass, field, fields

import numpy as np

from ..errors import CmixError
from ..text import parse_json, parse_yaml, read_config_text


@dataclass(frozen=True)
class Model:
    """The network: SNP encoding, encoder, projection head."""

    encoding: str = "dosage"        # dosage (standardised) | categorical (4 levels -> width 3)
    hidden: int | None = 256        # encoder width; null = embedded width (paper)
    n_layers: int = 1               # T encoder layers (paper: 1)
    batchnorm: bool = False         # batch norm after each encoder and decoder layer
    d_proj: int = 128               # projection head output width
    proj_layers: int = 2            # layers of the projection head (L_proj)


@dataclass(frozen=True)
class Pretrain:
    """The pre-training stage (cmix, ae, vime)."""

    epochs: int = 20                # pre-training epochs
    batch_size: int = 256           # unlabeled rows per step
    labeled_batch_size: int = 128   # labeled rows per step (drawn from D_L each step)
    labeled_passes: float = 2.0     # at most this many views of each labeled row an
                                    # epoch (fewer labeled rows per step); 0 = no cap
    lr: float = 1e-3                # Adam learning rate of pre-training
    weight_decay: float = 0.0       # Adam weight decay of pre-training


@dataclass(frozen=True)
class Contrastive:
    """The contrastive mixup loss."""

    alpha: float = 0.2              # lambda ~ U(0, alpha), alpha in [0, 0.5]
    tau: float = 0.1                # SupCon temperature
    beta: float = 0.25              # weight of the reconstruction loss
    gamma: float = 1.0              # weight of pseudo-labeled rows in SupCon (0 = Self-SL)
    mix: str = "within_class"       # within_class | random


@dataclass(frozen=True)
class PseudoLabels:
    """Label propagation on the kNN graph (:mod:`cmix.learn.methods.cmix.labelprop`)."""

    warmup_epochs: int = 5          # pre-training epochs before the first look (K)
    lp_every: int = 5               # epochs between looks, label propagations (f)
    lp_k: int = 3                   # kNN neighbours (paper: 3)
    lp_judge_folds: int = 2         # K folds of cmix's judge: fold model k of each arm (with and
                                    # without pseudo-labels) trains without fold k's labels and
                                    # judges those rows; a run trains 2 (K + 1) encoders
    lp_alpha: float = 0.99          # propagation's alpha; 0.999 oversmooths (benchmarks/RESULTS.md)
    lp_rtol: float = 1e-6           # CG stops at this relative residual
    lp_maxiter: int = 500           # CG iterations (stops earlier at lp_rtol)
    lp_max_unlabeled: int = 20000   # unlabeled rows drawn as graph nodes (|S_U|)
    lp_class_prior: bool = True     # weight class scores by the labeled class shares
    lp_block: int = 256             # rows per block of the kNN search (cache-sized on a CPU)


@dataclass(frozen=True)
class Switches:
    """The ablation ladder; the registry sets them per method."""

    pretrain: bool = True           # pre-train the encoder (false: the predictor alone, mlp)
    pseudo_labels: bool = True      # label propagation's pseudo-labels in pre-training
    judge: bool = True              # pseudo-labels judged on held-out labeled rows (cmix);
                                    # false: used as propagated (cmix_paper, Darabi et al.)
    predictor_mixup: bool = True    # latent mixup, lambda ~ U(0, 1)


@dataclass(frozen=True)
class Predictor:
    """The head every network method ends in, and its early-stopped training."""

    pred_hidden: int = 100          # hidden width of the predictor head
    pred_epochs: int = 100          # most epochs of the head's training
    pred_patience: int = 10         # epochs without a better validation loss before it stops
    pred_lr: float = 1e-3           # Adam learning rate of the head
    pred_weight_decay: float = 0.0  # Adam weight decay of the head
    pred_dropout: float = 0.0       # dropout after each hidden layer of every head
    pred_batch_size: int = 128      # rows per step of the head
    pred_refit: bool = True         # then retrain on all labeled rows for the best epoch count


@dataclass(frozen=True)
class Data:
    """The validation split and how rows are read."""

    val_fraction: float = 0.2       # validation carved from the labeled rows
    loader: str = "auto"            # auto | memory | stream
    buffer_chunks: int = 8          # stream loader: store chunks shuffled together as one buffer
    memory_limit_mb: int = 2048     # auto loader: training rows above this size are streamed


@dataclass(frozen=True)
class Covariates:
    """Whether the store's covariates are used."""

    covariates: bool = True         # use the store's covariates (age, sex, PCs, ...) when it
                                    # has them: beside the latent / input of the networks,
                                    # as features of logreg, beside the score of prs


@dataclass(frozen=True)
class Logreg:
    """L2 logistic regression, C by cross-validation."""

    logreg_n_c: int = 10            # C grid: logspace(-4, 2, logreg_n_c)
    logreg_folds: int = 5           # cross-validation folds for C


@dataclass(frozen=True)
class SemiLinear:
    """pca_logreg and label_spreading."""

    semi_pcs: int = 20              # PCs of the training split's genotypes (pca_logreg
    #                                 chooses 5, 10, ... up to these by CV)
    semi_max_rows: int = 20000      # rows the PCA and the spreading graph are fitted on
    spreading_k: int = 10           # kNN neighbours of label spreading
    spreading_alpha: float = 0.2    # clamping: share of a node's label taken from neighbours


@dataclass(frozen=True)
class Gbdt:
    """scikit-learn's histogram gradient-boosted trees."""

    gbdt_lr: float = 0.1            # learning rate (shrinkage) of each tree
    gbdt_max_iter: int = 300        # trees, early-stopped on 20% of the labeled rows
    gbdt_max_leaf_nodes: int = 15   # leaves per tree
    gbdt_min_leaf: int = 20         # rows a leaf must hold (scikit-learn's min_samples_leaf)
    gbdt_l2: float = 1.0            # L2 regularisation of the leaf values


@dataclass(frozen=True)
class Vime:
    """VIME (Yoon et al. 2020)."""

    vime_p_m: float = 0.3           # mask probability
    vime_alpha: float = 2.0         # weight of the feature-estimation loss
    vime_k: int = 3                 # augmented copies per unlabeled row
    vime_beta: float = 1.0          # weight of the consistency loss


@dataclass(frozen=True)
class ManifoldMixup:
    """Manifold mixup (Verma et al. 2019)."""

    mixup_alpha: float = 2.0        # lambda ~ Beta(a, a)


@dataclass(frozen=True)
class Plugin:
    """Methods from installed packages (entry-point group ``cmix.methods``)."""

    plugin_config: dict | None = None   # method name -> the mapping given to that plugin
                                        # method (its factory's or class's config)


@dataclass(frozen=True)
class Config:
    """Every section of a resolved config. Build it with :func:`resolve_config` (checked)
    or :meth:`from_flat`; :meth:`flat` gives back the flat mapping of keys."""

    model: Model = field(default_factory=Model)
    pretrain: Pretrain = field(default_factory=Pretrain)
    contrastive: Contrastive = field(default_factory=Contrastive)
    pseudo_labels: PseudoLabels = field(default_factory=PseudoLabels)
    switches: Switches = field(default_factory=Switches)
    predictor: Predictor = field(default_factory=Predictor)
    data: Data = field(default_factory=Data)
    covariates: Covariates = field(default_factory=Covariates)
    logreg: Logreg = field(default_factory=Logreg)
    semi_linear: SemiLinear = field(default_factory=SemiLinear)
    gbdt: Gbdt = field(default_factory=Gbdt)
    vime: Vime = field(default_factory=Vime)
    manifold_mixup: ManifoldMixup = field(default_factory=ManifoldMixup)
    plugin: Plugin = field(default_factory=Plugin)

    @classmethod
    def from_flat(cls, flat: dict) -> "Config":
        """The sections of a flat mapping of keys (not checked: see :func:`resolve_config`);
        a key it lacks (a checkpoint written before the key existed) takes its default."""
        return cls(**{name: section(**{f.name: flat.get(f.name, f.default)
                                       for f in fields(section)})
                      for name, section in SECTIONS.items()})

    def flat(self) -> dict:
        """key -> value of every key, in the order of :data:`DEFAULTS` (a plain dict: what
        a checkpoint holds)."""
        return {f.name: getattr(getattr(self, name), f.name)
                for name, section in SECTIONS.items() for f in fields(section)}

    def with_keys(self, **keys) -> "Config":
        """A copy with some keys (flat names) changed; KeyError for a name that is no key."""
        unknown = sorted(set(keys) - set(DEFAULTS))
        if unknown:
            raise KeyError(f"unknown config key(s) {unknown}")
        return Config.from_flat({**self.flat(), **keys})


#: section name -> its dataclass, in the order of :class:`Config`
SECTIONS: dict[str, type] = {f.name: f.default_factory for f in fields(Config)}
#: every key with its default (the ``cpu`` preset)
DEFAULTS: dict = {f.name: f.default for section in SECTIONS.values() for f in fields(section)}
SECTION_OF: dict = {f.name: name for name, section in SECTIONS.items() for f in fields(section)}
NULLABLE = ("hidden", "plugin_config")

PRESETS: dict[str, dict] = {
    "cpu": {},
    "paper": {"encoding": "categorical", "hidden": None},
}

#: float key -> (low, high, low_inclusive, high_inclusive); None = unbounded on that side
RANGES: dict = {
    "alpha": (0.0, 0.5, True, True), "lp_alpha": (0.0, 1.0, True, False),
    "val_fraction": (0.0, 1.0, True, False),
    "vime_p_m": (0.0, 1.0, False, False),
    "tau": (0.0, None, False, None), "lr": (0.0, None, False, None),
    "pred_lr": (0.0, None, False, None), "lp_rtol": (0.0, None, False, None),
    "weight_decay": (0.0, None, True, None), "pred_weight_decay": (0.0, None, True, None),
    "beta": (0.0, None, True, None), "gamma": (0.0, None, True, None),
    "labeled_passes": (0.0, None, True, None), "pred_dropout": (0.0, 1.0, True, False),
    "spreading_alpha": (0.0, 1.0, False, False), "gbdt_lr": (0.0, None, False, None),
    "gbdt_l2": (0.0, None, True, None),
    "vime_alpha": (0.0, None, True, None), "vime_beta": (0.0, None, True, None),
    "mixup_alpha": (0.0, None, True, None),
}
CHOICES: dict = {"encoding": ("categorical", "dosage"), "mix": ("within_class", "random"),
                 "loader": ("auto", "memory", "stream")}
# keys not listed here need >= 1 (a predictor trained for 0 epochs, or stopped before
# its first, would be its random start: pred_epochs and pred_patience are >= 1)
MIN_INT: dict = {"epochs": 0, "warmup_epochs": 0, "logreg_folds": 2, "lp_judge_folds": 2,
                 "gbdt_max_leaf_nodes": 2}
#: the largest value of an integer key: epochs beyond these would run for days, widths
#: and batch sizes beyond them would not fit any memory; keys not listed take MAX_ANY_INT
MAX_INT: dict = {**dict.fromkeys(("epochs", "warmup_epochs", "lp_every", "pred_epochs",
                                  "pred_patience"), 10_000),
                 **dict.fromkeys(("hidden", "d_proj", "pred_hidden", "batch_size",
                                  "labeled_batch_size", "pred_batch_size"), 1_000_000),
                 **dict.fromkeys(("n_layers", "proj_layers"), 100),
                 "gbdt_max_iter": 100_000, "lp_maxiter": 100_000}
MAX_ANY_INT = 1_000_000_000


def read_config_file(path) -> dict:
    """The key: value mapping of a YAML or JSON config file ({} for an empty file); a
    missing, unparsable or non-mapping file, or one that gives a key twice, raises
    CmixError. For the CLI only."""
    path, text = read_config_text(path, "trainer config")
    if path.suffix == ".json":
        user = parse_json(text, str(path))
    else:
        user = parse_yaml(text, str(path))
    if user is None:
        user = {}
    if not isinstance(user, dict):
        raise CmixError(f"{path}: config must be a mapping of key: value")
    return user


def resolve_config(user: dict | None = None, switches: dict | None = None,
                   where="config") -> Config:
    """Every key's value: the preset's, then ``user``'s, then ``switches`` (a method's
    fixed settings from the registry). Checks names, types and ranges; ``where`` names
    the source in messages. Returns the sections."""
    user = dict(user or {})
    preset = user.pop("preset", "cpu")
    if not isinstance(preset, str) or preset not in PRESETS:
        raise CmixError(f"{where}: preset = {preset!r}, expected one of {sorted(PRESETS)}")
    unknown = sorted(set(user) - set(DEFAULTS))
    if unknown:
        import difflib

        hints = [f"{k!r}" + (f" (did you mean {m[0]!r}?)" if (m := difflib.get_close_matches(
            k, list(DEFAULTS), n=1)) else "") for k in unknown]
        raise CmixError(f"{where}: unknown config key(s) {', '.join(hints)}; the keys are "
                        f"listed in cmix/learn/config.py and docs/reference/config.md")
    cfg = {**DEFAULTS, **PRESETS[preset], **user, **(switches or {})}
    check_config(cfg, where)
    return Config.from_flat(cfg)


def check_config(cfg: dict, where="config") -> None:
    """Raise CmixError for the first key of the flat mapping ``cfg`` with a wrong type or
    range.

    Float keys take any finite number; text that reads as a number is converted in
    place (YAML 1.1 reads ``1e-3`` without a dot as text)."""
    def bad(key, want):
        raise CmixError(f"{where}: {key} = {cfg[key]!r}, expected {want}")

    for key, default in DEFAULTS.items():
        v = cfg[key]
        if v is None and key in NULLABLE:
            continue
        if isinstance(default, bool):
            if not isinstance(v, bool):
                bad(key, "true or false")
        elif isinstance(default, int):
            low, high = MIN_INT.get(key, 1), MAX_INT.get(key, MAX_ANY_INT)
            if not isinstance(v, int) or isinstance(v, bool) or v < low:
                bad(key, f"an integer >= {low}" + (" or null" if key in NULLABLE else ""))
            if v > high:
                bad(key, f"an integer <= {high:_}")
        elif isinstance(default, float):
            if isinstance(v, str):
                try:
                    v = cfg[key] = float(v)
                except ValueError:
                    pass
            if not isinstance(v, (int, float)) or isinstance(v, bool) or not np.isfinite(v):
                bad(key, "a number")
            if key in RANGES:
                lo, hi, lo_in, hi_in = RANGES[key]
                ok = (lo is None or (v >= lo if lo_in else v > lo)) and \
                     (hi is None or (v <= hi if hi_in else v < hi))
                if not ok:
                    bad(key, f"a number in {'[' if lo_in else '('}{lo}, "
                             f"{hi if hi is not None else 'inf'}{']' if hi_in else ')'}")
        elif key == "plugin_config":
            if not isinstance(v, dict) or not all(isinstance(k, str) and isinstance(c, dict)
                                                  for k, c in v.items()):
                bad(key, "a mapping of method name -> mapping of that method's settings")
        elif key in CHOICES and v not in CHOICES[key]:
            bad(key, " or ".join(CHOICES[key]))


def sections_config(cfg: Config, sections) -> dict:
    """The keys of ``cfg`` in ``sections`` as a flat dict (what one method reads: its run
    key and the config its metrics.json records)."""
    return {k: v for k, v in cfg.flat().items() if SECTION_OF[k] in sections}


def check_validation_rows(val_fraction: float, budget: int, method: str, network: bool,
                          where="config") -> None:
    """CmixError when a network ``method`` would get no validation row: its predictor is
    early-stopped on the validation rows (``val_fraction`` of the ``budget`` labeled
    rows), and with none it would keep its epoch-0 random start. A budget under 2 is left
    to the split's own refusal (fewer labels than classes)."""
    n_val = int(round(val_fraction * budget))
    if network and n_val < 1 and budget >= 2:
        raise CmixError(f"{where}: val_fraction = {val_fraction!r} leaves no validation row "
                        f"of the {budget} labeled (budget); method {method!r} early-stops on "
                        "the validation rows and would keep its untrained start: give "
                        f"val_fraction >= {0.5 / budget:.3g}")
