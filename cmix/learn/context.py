"""What a method's run is given: the checked store, the run's context and the opening of
a run in its folder.

- :class:`CheckedStore` (:func:`check_store`): a store opened, checked against its
  checksums and its training moments computed once for every run on it.
- :class:`RunContext`: the resolved config, device, checked store, splits, standardisation
  moments, run key and run folder; what a method's ``fit`` gets. It writes the run's
  checkpoint (:meth:`RunContext.save`, :mod:`cmix.learn.checkpoints`) and takes and
  leaves shared pre-training (:mod:`cmix.learn.shared`).
- :class:`Reuse`: what a run may take from work already on disk.
- :func:`open_run`: a run's context and its state: new, resumed from its checkpoint, or
  finished; its covariates standardised with the training split's moments
  (:func:`standardised_covariates`).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, fields
from pathlib import Path

import numpy as np

from ..atomic import atomic_path, check_writable_dir, save_torch
from ..errors import CmixError
from ..logs import log
from ..runtime import resolve_device
from ..store.read import check_encoding, column_moments, load_rows, open_store, store_fingerprint
from ..store.verify import verify_store
from .checkpoints import (CHECKPOINT_FILE, CHECKPOINT_SECONDS, LOG_FILE, RunState,
                          finished_metrics, run_key_of, saved_state, write_run_file)
from .data import make_splits
from .shared import share_stage, take_shared_stage
from .stages import DONE


@dataclass(frozen=True)
class Reuse:
    """What a run may take from work already on disk. ``resume``: the run folder must hold
    a checkpoint of this run, which it continues (``cmix train --resume``; without it a
    checkpoint of the same run is continued too, and one of another run is discarded,
    :func:`saved_state`). ``encoders``: the shared-encoder folder, where the cmix methods'
    runs leave each pre-training stage and take the ones another run made
    (:func:`take_shared_stage`), or None (every run pre-trains for itself)."""

    resume: bool = False
    encoders: Path | str | None = None


@dataclass
class RunContext:
    """What a method needs to run: see the module docstring. ``mean``/``sd`` (float32,
    n_snps) are the dosage moments over the training split (sample_split == 0: the
    labeled, validation and unlabeled rows; missing calls left out), the one
    standardisation of every method."""

    method: object                  # cmix.learn.methods.Method (the registry entry)
    cfg: object                     # cmix.learn.config.Config
    budget: int
    seed: int
    store_path: Path
    root: object
    splits: object                  # cmix.learn.data.Splits
    dev: object                     # torch.device
    out_dir: Path
    store_sha256: str
    run_key: str
    mean: np.ndarray
    sd: np.ndarray
    cov: np.ndarray                 # float32 (n_rows, K) standardised covariates; K = 0 off
    cov_mu: np.ndarray = None       # float64 (K,) training-split mean of the covariates
    cov_sd: np.ndarray = None       # float64 (K,) and sd (1 for a constant column)
    state: RunState = None          # the checkpoint the loops below keep
    last_save: float = float("-inf")  # time.perf_counter() of the last checkpoint write
    encoders: Path = None           # shared-encoder folder (Reuse.encoders), or None
    group_seeds: tuple = ()         # the seeds of the group the run trains in

    @property
    def n_cov(self) -> int:
        return int(self.cov.shape[1])

    @property
    def trait(self) -> str:
        return str(self.root.attrs["trait"])

    @property
    def n_snps(self) -> int:
        return int(self.root["call_dosage"].shape[1])

    @property
    def train_rows(self) -> np.ndarray:
        s = self.splits
        return np.sort(np.concatenate([s.train_labeled, s.validation, s.unlabeled]))

    def rows(self, rows) -> "torch.Tensor":  # noqa: F821
        """int8 dosages (len(rows), n_snps) of store rows (sorted), on the device."""
        import torch  # torch: ~1.5 s to import; only where a network or tensor is used

        return torch.from_numpy(load_rows(self.root, rows)).to(self.dev)

    def save(self, state: RunState, force: bool = False) -> None:
        """Write the checkpoint (the state's fields as a dict) and the log (atomically),
        unless ``force`` is False and the last write was less than
        :data:`CHECKPOINT_SECONDS` ago (the state in memory is whole after every epoch,
        so whichever write a kill leaves resumes to the same metrics). The dict holds the
        state's own objects (no deep copy of every tensor first): torch.save serialises
        them as they stand."""
        if not force and time.perf_counter() - self.last_save < CHECKPOINT_SECONDS:
            return
        save_torch({f.name: getattr(state, f.name) for f in fields(state)},
                   self.out_dir / CHECKPOINT_FILE)
        with atomic_path(self.out_dir / LOG_FILE) as tmp:
            tmp.write_text("".join(json.dumps(h) + "\n" for h in state.history))
        self.last_save = time.perf_counter()

    def save_due(self) -> bool:
        """Whether the run's checkpoint was last written :data:`CHECKPOINT_SECONDS` ago or
        more (never written: due)."""
        return time.perf_counter() - self.last_save >= CHECKPOINT_SECONDS

    @property
    def parts(self) -> dict:
        """The checkpoint's parts: where a method keeps what a resumed fit needs."""
        return self.state.parts

    def add_time(self, key: str, since: float) -> float:
        """Add the seconds since ``since`` to the run's times[key]; returns now."""
        return self.state.add_time(key, since)

    def take_shared(self, stage: str, pseudo: str | None) -> bool:
        """:func:`take_shared_stage` of this run."""
        return take_shared_stage(self, stage, pseudo)

    def share(self, stage: str, pseudo: str | None) -> None:
        """:func:`share_stage` of this run."""
        share_stage(self, stage, pseudo)


@dataclass(frozen=True)
class CheckedStore:
    """A store opened and checked once for every run on it: ``root`` the zarr group,
    ``sha256`` its fingerprint (:func:`cmix.store.read.store_fingerprint`),
    ``train_split`` int64 (n_train,) the rows with sample_split == 0, and ``mean``/``sd``
    float32 (n_snps,) their dosage moments (missing calls left out); a run takes copies."""

    path: Path
    root: object
    sha256: str
    train_split: np.ndarray
    mean: np.ndarray
    sd: np.ndarray


def check_store(store_path, cfg) -> CheckedStore:
    """Open a store, check its files against its checksums and its encoding against the
    config's, and compute the training split's moments."""
    store_path = Path(store_path)
    root = open_store_checked(store_path)
    check_encoding(root, cfg.model.encoding, store_path.name)
    train_split = np.flatnonzero(np.asarray(root["sample_split"][:]) == 0)
    mean, sd = column_moments(root, train_split)
    for shared in (train_split, mean, sd):
        shared.setflags(write=False)
    return CheckedStore(path=store_path, root=root, sha256=store_fingerprint(root),
                        train_split=train_split, mean=mean, sd=sd)


def open_store_checked(store_path):
    """Open a store and check its files against its checksums (logged with the time)."""
    root = open_store(store_path)
    t0 = time.perf_counter()
    checked = verify_store(store_path, root)
    log(f"{Path(store_path).name}: {checked['files']} files ({checked['bytes'] / 2**20:.1f} "
        f"MiB) match their checksums ({time.perf_counter() - t0:.2f} s)")
    return root


def open_run(method, store: CheckedStore, budget: int, seed: int, out_dir, cfg, device,
             reuse: Reuse = Reuse()) -> tuple[RunContext, RunState | None]:
    """The context of a run and its state: a new state, the checkpoint's when it is of
    the same run (:func:`saved_state`), or None when the run is finished: a finished
    checkpoint of this run and a metrics.json that proves it (:func:`finished_metrics`)."""
    dev = resolve_device(device)
    root = store.root
    splits = make_splits(root, budget, seed, cfg.data.val_fraction, store.path.name)
    if method.network and len(splits.validation) == 0:
        raise CmixError(f"{store.path.name}: budget {budget} leaves no validation row of its "
                        f"{splits.n_classes} classes (each class keeps one labeled training "
                        f"row), on which {method.name} early-stops, so its head would keep its "
                        f"untrained start: give a budget of at least {splits.n_classes + 1}")
    out_dir = check_writable_dir(out_dir)
    run_key = run_key_of(root, method, budget, seed, cfg, splits.test_hash, store.sha256)
    state = saved_state(out_dir, run_key, reuse.resume)
    write_run_file(out_dir, run_key)
    ctx = RunContext(method=method, cfg=cfg, budget=int(budget), seed=int(seed),
                     store_path=store.path, root=root, splits=splits, dev=dev,
                     out_dir=out_dir, store_sha256=store.sha256, run_key=run_key,
                     mean=store.mean.copy(), sd=store.sd.copy(), cov=None,
                     encoders=None if reuse.encoders is None else Path(reuse.encoders))
    ctx.cov, ctx.cov_mu, ctx.cov_sd = standardised_covariates(root, store.train_split, cfg)
    if state is not None and state.stage == DONE and finished_metrics(out_dir, run_key):
        log(f"{out_dir}: run already complete")
        return ctx, None
    if state is None:
        state = RunState(run_key=run_key)
    else:
        log(f"resuming from {state.stage} epoch {state.epoch}")
    c = splits.counts()
    log(f"{ctx.trait}: {method.name}, budget {budget}, seed {seed}: {c['n_train_labeled']} "
        f"labeled + {c['n_validation']} validation, {c['n_unlabeled']} unlabeled, "
        f"{c['n_test']} test, {ctx.n_snps} SNPs, {splits.n_classes} classes, device {dev}")
    return ctx, state


def standardised_covariates(root, train_split: np.ndarray, cfg):
    """(float32 (n_rows, K) the store's covariates standardised with the training split's
    mean and sd (a constant column -> 0), mean (K,), sd (K,)); K = 0 when the config's
    ``covariates`` is off or the store has none."""
    n_cov = int(root["sample_covariate"].shape[1]) if "sample_covariate" in root else 0
    if not cfg.covariates.covariates or not n_cov:
        return np.zeros((int(root["sample_label"].shape[0]), 0), np.float32), \
            np.zeros(0), np.ones(0)
    cov = np.asarray(root["sample_covariate"][:], dtype=np.float64)
    mu = cov[train_split].mean(0)
    sd = cov[train_split].std(0)
    sd = np.where(sd > 1e-12, sd, 1.0)
    return ((cov - mu) / sd).astype(np.float32), mu, sd
