"""Training configuration: typed keys in sections, presets, and the checks at the edge.

A config is one flat mapping of keys (a YAML/JSON file, or a dict in Python). Every key
belongs to one section; each method reads the sections the registry gives it
(:mod:`cmix.learn.methods`), so the same file serves every method of a grid, and a method's run
key covers only the keys it reads (changing ``vime_k`` reruns no cmix job). Every key
is checked for every method: an unknown key, or a value of the wrong type or range,
stops any method, naming the key.

``preset: cpu`` (the defaults: CPU-sized, for tests, the demo and 2-core machines) or
``preset: paper`` (the paper's encoder: categorical SNPs, encoder width = the embedded
width) sets the starting values; the other keys override them.

Only :mod:`cmix.cli` reads config files (:func:`read_config_file`); everything below it
takes dicts.
"""

from __future__ import annotations


import numpy as np

from ..io import CmixError

SECTIONS: dict[str, dict] = {
    "model": {
        "encoding": "dosage",       # dosage (standardised) | categorical (4 levels -> width 3)
        "hidden": 256,              # encoder width; null = embedded width (paper)
        "n_layers": 1,              # T encoder layers (paper: 1)
        "batchnorm": False,
        "d_proj": 128,              # projection head output width
        "proj_layers": 2,           # L_proj
    },
    "pretrain": {
        "epochs": 20,
        "batch_size": 256,          # unlabeled rows per step
        "labeled_batch_size": 128,  # labeled rows per step (drawn from D_L each step)
        "labeled_passes": 2.0,      # at most this many views of each labeled row an
                                    # epoch (fewer labeled rows per step); 0 = no cap
        "lr": 1e-3,
        "weight_decay": 0.0,
    },
    "contrastive": {
        "alpha": 0.2,               # lambda ~ U(0, alpha), alpha in [0, 0.5]
        "tau": 0.1,                 # SupCon temperature
        "beta": 0.25,               # weight of the reconstruction loss
        "gamma": 1.0,               # weight of pseudo-labeled rows in SupCon (0 = Self-SL)
        "mix": "within_class",      # within_class | random
    },
    "pseudo_labels": {
        "warmup_epochs": 5,         # K
        "lp_every": 5,              # f
        "lp_k": 3,                  # kNN neighbours (paper: 3); 10 is tried beside it
        "lp_pcs": 20,               # PCs of the inputs: a second space for the graph (0 = latent only)
        "lp_folds": 5,              # folds of the labeled rows judging the pseudo-labels
        "lp_alpha": 0.99,           # converged solve; 0.999 oversmooths (RESULTS.md)
        "lp_rtol": 1e-6,
        "lp_maxiter": 500,          # CG iterations (stops earlier at lp_rtol)
        "lp_max_unlabeled": 20000,  # |S_U|
        "lp_class_prior": True,     # weight class scores by the labeled class shares
        "lp_block": 4096,
    },
    "switches": {                   # the ablation ladder; the registry sets them per method
        "pretrain": True,
        "pseudo_labels": True,
        "predictor_mixup": True,    # latent mixup, lambda ~ U(0, 1)
    },
    "predictor": {
        "pred_hidden": 100,
        "pred_epochs": 100,
        "pred_patience": 10,
        "pred_lr": 1e-3,
        "pred_weight_decay": 0.0,
        "pred_dropout": 0.0,        # dropout after each hidden layer of every head
        "pred_batch_size": 128,
        "pred_refit": True,         # then retrain on all labeled rows for the best epoch count
    },
    "data": {
        "val_fraction": 0.2,        # validation carved from the labeled rows
        "loader": "auto",           # auto | memory | stream
        "buffer_chunks": 8,
        "memory_limit_mb": 2048,
    },
    "covariates": {
        "covariates": True,         # use the store's covariates (age, sex, PCs, ...) when it
                                    # has them: beside the latent / input of the networks,
                                    # as features of logreg, beside the score of prs
    },
    "logreg": {
        "logreg_n_c": 10,           # C grid: logspace(-4, 2, logreg_n_c)
        "logreg_folds": 5,
    },
    "semi_linear": {                # pca_logreg and label_spreading
        "semi_pcs": 20,             # PCs of the training split's genotypes
        "semi_max_rows": 20000,     # rows the PCA and the spreading graph are fitted on
        "spreading_k": 10,          # kNN neighbours of label spreading
        "spreading_alpha": 0.2,     # clamping: share of a node's label taken from neighbours
    },
    "gbdt": {
        "gbdt_lr": 0.1,
        "gbdt_max_iter": 300,       # trees, early-stopped on 20% of the labeled rows
        "gbdt_max_leaf_nodes": 15,
        "gbdt_l2": 1.0,
    },
    "vime": {
        "vime_p_m": 0.3,            # mask probability
        "vime_alpha": 2.0,          # weight of the feature-estimation loss
        "vime_k": 3,                # augmented copies per unlabeled row
        "vime_beta": 1.0,           # weight of the consistency loss
    },
    "manifold_mixup": {
        "mixup_alpha": 2.0,         # lambda ~ Beta(a, a)
    },
}

#: every key with its default (the ``cpu`` preset)
DEFAULTS: dict = {k: v for section in SECTIONS.values() for k, v in section.items()}
SECTION_OF: dict = {k: name for name, section in SECTIONS.items() for k in section}
NULLABLE = ("hidden",)

PRESETS: dict[str, dict] = {
    "cpu": {},
    "paper": {"encoding": "categorical", "hidden": None},
}

#: key -> (kind, low, high, low_inclusive, high_inclusive) for numbers; set of choices
RANGES: dict = {
    "alpha": (0.0, 0.5, True, True), "lp_alpha": (0.0, 1.0, True, False),
    "val_fraction": (0.0, 1.0, True, False), "vime_p_m": (0.0, 1.0, False, False),
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
MIN_INT: dict = {"epochs": 0, "warmup_epochs": 0, "pred_epochs": 0, "pred_patience": 0,
                 "logreg_folds": 2, "lp_pcs": 0, "lp_folds": 2,
                 "gbdt_max_leaf_nodes": 2}


def read_config_file(path) -> dict:
    """The key: value mapping of a YAML or JSON config file ({} for an empty file); a
    missing, unparsable or non-mapping file raises CmixError. For the CLI only."""
    from ..io import input_file

    path = input_file(path, "trainer config")
    text = path.read_text()
    try:
        if path.suffix == ".json":
            import json
            user = json.loads(text)
        else:
            import yaml
            user = yaml.safe_load(text)
    except Exception as err:
        raise CmixError(f"{path}: cannot parse config ({err})") from None
    if user is None:
        user = {}
    if not isinstance(user, dict):
        raise CmixError(f"{path}: config must be a mapping of key: value")
    return user


def resolve_config(user: dict | None = None, switches: dict | None = None,
                   where="config") -> dict:
    """Every key's value: the preset's, then ``user``'s, then ``switches`` (a method's
    fixed settings from the registry). Checks names, types and ranges; ``where`` names
    the source in messages. Returns a new flat dict."""
    user = dict(user or {})
    preset = user.pop("preset", "cpu")
    if preset not in PRESETS:
        raise CmixError(f"{where}: preset = {preset!r}, expected one of {sorted(PRESETS)}")
    unknown = sorted(set(user) - set(DEFAULTS))
    if unknown:
        import difflib

        hints = [f"{k!r}" + (f" (did you mean {m[0]!r}?)" if (m := difflib.get_close_matches(
            k, list(DEFAULTS), n=1)) else "") for k in unknown]
        raise CmixError(f"{where}: unknown config key(s) {', '.join(hints)}; the keys are "
                        f"listed in cmix/config.py and the README")
    cfg = {**DEFAULTS, **PRESETS[preset], **user, **(switches or {})}
    check_config(cfg, where)
    return cfg


def check_config(cfg: dict, where="config") -> None:
    """Raise CmixError for the first key of ``cfg`` with a wrong type or range.

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
            low = MIN_INT.get(key, 1)
            if not isinstance(v, int) or isinstance(v, bool) or v < low:
                bad(key, f"an integer >= {low}" + (" or null" if key in NULLABLE else ""))
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
        elif key in CHOICES and v not in CHOICES[key]:
            bad(key, " or ".join(CHOICES[key]))


def sections_config(cfg: dict, sections) -> dict:
    """The keys of ``cfg`` in ``sections`` (what one method reads: its run key and the
    config its metrics.json records)."""
    return {k: v for k, v in cfg.items() if SECTION_OF.get(k) in sections}
