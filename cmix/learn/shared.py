"""The shared-encoder folder: the cmix methods' runs leave each contrastive mixup
pre-training stage there and take the ones another run made.

A stage is kept under :func:`shared_stage_key`, a hash of everything its result depends
on, so a run of another method (cmix's stages are cmix_selfsl_pl's and cmix_selfsl's) or
of another config file that would repeat it takes it instead (:func:`take_shared_stage`,
after :func:`share_stage` in the run that made it); the metrics are the same either way.
The folder is :attr:`cmix.learn.context.Reuse.encoders`.

``ctx`` is the run's :class:`cmix.learn.context.RunContext`, a name not imported here:
:mod:`cmix.learn.context` sits above this module and imports it.
"""

from __future__ import annotations

import hashlib
import json
import time

from ..atomic import load_torch, save_torch
from ..errors import CmixError
from ..logs import log
from .config import sections_config
from .methods import CMIX_SECTIONS
from .results import numerics_kind, versions
from .stages import START


def shared_stage_key(ctx: RunContext, pseudo: str | None) -> str:  # noqa: F821
    """sha256 hex of what a contrastive mixup pre-training stage's result depends on: the
    trait, budget, seed, test split, store content, kind of device (:func:`numerics_kind`)
    and CPU thread count (MKL's products can differ in their last bits between thread
    counts), package versions and the cmix methods' config sections, with the switches as
    the stage reads them (``pseudo``: "unjudged" (the paper's pseudo-labels, used as
    propagated) or None (none); predictor_mixup is read by the predictor only). So
    cmix_paper and cmix_paper_pl share their pre-training, and cmix_selfsl's is any
    other run's without pseudo-labels; cmix_random_mix (another ``mix``) and any other
    config get keys of their own. cmix's pre-training (both arms and their fold
    models, :func:`cmix.learn.methods.cmix.judge.judged_pretraining`) is not shared."""
    import torch  # torch: ~1.5 s to import; only where a network or tensor is used


    cfg = {**sections_config(ctx.cfg, CMIX_SECTIONS), "pretrain": True,
           "pseudo_labels": pseudo is not None,
           "judge": None, "predictor_mixup": None}
    return hashlib.sha256(json.dumps(
        {"what": "contrastive mixup pre-training", "trait": ctx.trait,
         "budget": int(ctx.budget), "seed": int(ctx.seed), "test": ctx.splits.test_hash,
         "store": ctx.store_sha256, "device": numerics_kind(ctx.dev),
         "threads": torch.get_num_threads() if ctx.dev.type == "cpu" else None,
         # on a GPU a model's bits may depend on the group it trains in
         "group": list(ctx.group_seeds) if ctx.dev.type != "cpu" else None,
         "versions": versions(), "config": cfg}, sort_keys=True, default=str).encode()
    ).hexdigest()


#: checkpoint parts a pre-training stage with pseudo-labels leaves besides its modules
JUDGED_PARTS = ("pseudo", "lp_info")


def take_shared_stage(ctx: RunContext, stage: str, pseudo: str | None) -> bool:  # noqa: F821
    """Before pre-training stage ``stage`` (``pseudo``: as :func:`shared_stage_key`) starts:
    if the run's shared-encoder folder holds it (under :func:`shared_stage_key`, written
    by :func:`share_stage` in a run of another method or config file with the same
    pre-training), put it in the run's state as if this run had made it: the modules'
    states, the pseudo-labels and their summary of a stage with them, and the stage's epoch
    records. Returns whether it did. A damaged file stops the run (CmixError naming it)."""
    state = ctx.state
    fresh = state.stage == START or (state.stage == stage and state.epoch == 0)
    if ctx.encoders is None or not fresh:
        return False
    key = shared_stage_key(ctx, pseudo)
    path = ctx.encoders / f"{key}.pt"
    if not path.exists():
        return False
    t0 = time.perf_counter()
    shared = load_torch(path, "shared encoder")
    if not isinstance(shared, dict) or shared.get("key") != key:
        held = str(shared.get("key"))[:12] + "..." if isinstance(shared, dict) else "none"
        raise CmixError(f"{path}: holds the encoder of another run (key {held}); delete it")
    state.parts[stage] = shared["part"]
    state.parts.update(shared["parts"])
    state.history.extend({**r, "stage": stage} for r in shared["history"])
    state.stage, state.epoch = stage, shared["epoch"]
    state.add_time(stage, t0)
    lp = shared["parts"].get("lp_info")
    log(f"pre-training ({stage}) taken from {path.parent.name}/{key[:12]}..., made by a run "
        "with the same store, split, seed and pre-training config"
        + (f"; its pseudo-labels (epoch {lp[-1]['epoch']}, graph {lp[-1]['graph']}) "
           + ("used" if lp[-1]["used"] else "not used") if lp else ""))
    return True


def share_stage(ctx: RunContext, stage: str, pseudo: str | None) -> None:  # noqa: F821
    """After pre-training stage ``stage`` ran in this run: write it to the shared-encoder
    folder under :func:`shared_stage_key` (atomically; kept if there already), for
    :func:`take_shared_stage` in the runs that would repeat it."""
    state = ctx.state
    if ctx.encoders is None or stage not in state.parts:
        return
    key = shared_stage_key(ctx, pseudo)
    path = ctx.encoders / f"{key}.pt"
    if path.exists():
        return
    save_torch({"key": key, "part": state.parts[stage], "epoch": ctx.cfg.pretrain.epochs,
                "parts": {k: state.parts[k] for k in JUDGED_PARTS
                          if pseudo is not None and k in state.parts},
                "history": [r for r in state.history if r.get("stage") == stage]}, path)
