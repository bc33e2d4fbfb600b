"""One run of one method on one store, budget and seed: what every method shares.

The harness owns the splits, the standardisation moments, the checkpoint and the
metrics; the method (:mod:`cmix.learn.methods`) is a class the harness builds from the
config, fits on the run (:class:`RunContext`), asks for the test rows' probabilities and
checkpoints by its state dict.

- :class:`RunContext`: the resolved config, device, checked store, splits, standardisation
  moments, run key and run folder; what a method's ``fit`` gets.
- :func:`train_run`: one run; :func:`train_seeds`: the runs of several seeds, sharing
  the store opened and checked once (:class:`CheckedStore`). The network methods' seeds
  train together as one group of models (:func:`train_group`, :mod:`cmix.learn.group`,
  where their epoch loops live); the other methods' seeds run at once in worker
  processes on the CPU.
- :class:`RunState`: the checkpoint. ``stage`` and ``epoch`` say where the run is;
  ``parts`` holds what each stage saved (model and optimiser states, pseudo-labels; the
  fitted method's state dict as ``model`` with its ``report``, the record ``cmix
  predict`` checks new data against as ``predict``); ``history`` is train_log.jsonl.
  It is written atomically after the first epoch, then at most every
  :data:`CHECKPOINT_SECONDS`, and when the method is fitted and when the run is done,
  so a killed run of any method resumes to the same metrics (on CPU, bit for bit).
- :func:`finish`: the one metrics.json writer.

Run folder: ``checkpoint.pt``, ``train_log.jsonl``, ``predictions.npz`` (the test rows'
classes, probabilities and, where the method has one, latent; no IDs), ``metrics.json``
(written last), ``.cmix.lock`` (held while the run is going).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import time
from dataclasses import dataclass, field, fields
from functools import partial
from pathlib import Path

import numpy as np

from ..atomic import atomic_path, check_writable_dir, load_torch, save_torch
from ..errors import CmixError
from ..logs import log, set_log_prefix

METRICS_FILE = "metrics.json"
PREDICTIONS_FILE = "predictions.npz"
CHECKPOINT_FILE = "checkpoint.pt"
LOG_FILE = "train_log.jsonl"

#: least seconds between two checkpoint writes inside a run's epoch loops. The first
#: epoch's checkpoint, the fitted method's and the finished run's are always written; a
#: killed run loses at most this much work plus one epoch, and a run of many short epochs
#: does not spend a tenth of its time serialising itself.
CHECKPOINT_SECONDS = 60.0


@dataclass
class RunState:
    """The checkpoint of a run (see the module docstring)."""

    run_key: str
    stage: str = "start"
    epoch: int = 0
    history: list = field(default_factory=list)
    times: dict = field(default_factory=dict)
    parts: dict = field(default_factory=dict)

    def add_time(self, key: str, since: float) -> float:
        """Add the seconds since ``since`` to times[key]; returns now."""
        now = time.perf_counter()
        self.times[key] = self.times.get(key, 0.0) + now - since
        return now


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
        import torch

        from ..genotypes.store import load_rows

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



@contextlib.contextmanager
def deterministic_algorithms(device):
    """torch's deterministic kernels (``torch.use_deterministic_algorithms``) while the
    block runs; the previous setting is restored after.

    On CPU this makes the backward of ``h[index]`` with repeated indices (the mixup
    partners) add in index order instead of with atomic adds from several threads, whose
    order changed from run to run. An op without a deterministic kernel raises on CPU; on
    CUDA it only warns (no GPU run has checked this path). Two settings are read when their
    library starts, so they hold when the run does the process's first matrix product (as
    in ``cmix train``); a value the user set is kept: MKL's strict reproducibility mode
    (``MKL_CBWR=AUTO,STRICT``: MKL's float32 products then depend far less on the number
    of threads, see README) and cuBLAS's fixed workspace (``CUBLAS_WORKSPACE_CONFIG=
    :4096:8``), which cuBLAS needs to be deterministic. Filling new tensors with NaN,
    torch's debugging aid in this mode, is switched off: nothing here reads memory it did
    not write.
    """
    import torch
    import torch.utils.deterministic as det

    os.environ.setdefault("MKL_CBWR", "AUTO,STRICT")
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    before = (torch.are_deterministic_algorithms_enabled(),
              torch.is_deterministic_algorithms_warn_only_enabled(),
              det.fill_uninitialized_memory)
    use_deterministic_algorithms(True, warn_only=torch.device(device).type == "cuda")
    det.fill_uninitialized_memory = False
    try:
        yield
    finally:
        use_deterministic_algorithms(before[0], warn_only=before[1])
        det.fill_uninitialized_memory = before[2]


def use_deterministic_algorithms(mode: bool, warn_only: bool) -> None:
    """``torch.use_deterministic_algorithms(mode, warn_only=warn_only)`` without its import
    of torch._inductor (1.7 s of a logreg run's start on the 2-core VM): that import only
    sets inductor's own flag of the same name, read by ``torch.compile``, which no run
    uses; the kernels' flag is set the same way. Once inductor is imported (or where
    this torch lacks the internal setter), the public call sets both."""
    import sys

    import torch

    setter = getattr(torch._C, "_set_deterministic_algorithms", None)
    if setter is None or "torch._inductor.config" in sys.modules:
        torch.use_deterministic_algorithms(mode, warn_only=warn_only)
    else:
        setter(mode, warn_only=warn_only)


def train_run(store_path, budget: int, seed: int, out_dir, *, method: str = "cmix",
              config: dict | None = None, device: str = "auto",
              reuse: Reuse = Reuse()) -> dict:
    """Run one method on one store, budget and seed; writes the run folder and returns
    the metrics. config: keys of :mod:`cmix.learn.config` (every method takes the same dict;
    each reads its own sections). The folder is locked for the run; see
    :func:`open_run` for resuming and stale checkpoints. The run uses torch's
    deterministic kernels (:func:`deterministic_algorithms`)."""
    return train_seeds(store_path, budget, {seed: out_dir}, method=method, config=config,
                       device=device, reuse=reuse)[0]


def train_seeds(store_path, budget: int, seed_dirs: dict, *, method: str = "cmix",
                config: dict | None = None, device: str = "auto",
                threads: int | None = None, reuse: Reuse = Reuse()) -> list[dict]:
    """Run one method on one store and budget for every seed of ``seed_dirs`` (seed ->
    run folder); returns their metrics, in the dict's order.

    Each run is the one :func:`train_run` of that seed alone makes (same folder
    contents, run key, lock, checkpoint and resume; a finished run is returned as it
    is): the store is opened, checked against its checksums and its training moments
    computed once (:func:`check_store`), and each run gets its own copy of the moments;
    splits, seeding and everything else are the run's own.

    threads: CPU threads for the whole call (default: the cores this process may use).
    On the CPU, min(seeds, threads) seeds run at once (:func:`seed_workers`): this
    process takes seeds one after another from the queue while spawned worker processes
    take the others, each with an equal share of the threads, so that small runs, which
    cannot keep several cores busy, fill them. A seed's run is the one a lone run with
    its share of the threads makes (``torch_threads`` in its metrics.json); another
    thread count can change the last bits of the matrix products, and from there the
    metrics (README, "Same seed, same result"). On a GPU the seeds run one after another
    in this process. When a run fails, the runs already started finish in their folders
    and no new one starts; with several seeds the error names the failing seed and
    folder.

    reuse: the checkpoint and shared-encoder folder the runs may take from
    (:class:`Reuse`). With a shared-encoder folder the runs of the cmix methods leave
    their pre-training there, keyed by everything it depends on, and take it when another
    run (of another method: cmix's stages are cmix_selfsl_pl's and cmix_selfsl's, or of
    another config file) made the same one (:func:`shared_stage_key`); the metrics are
    the same either way."""
    from ..runtime import resolve_device
    from .config import resolve_config
    from .methods import get_method

    m = get_method(method)
    cfg = resolve_config(config, m.switches)
    store = check_store(store_path, cfg)
    if reuse.encoders is not None:      # refused before any work, not after pre-training
        check_writable_dir(reuse.encoders)
    if m.network:
        with cpu_threads(threads):
            return train_group(m, store, budget, seed_dirs, cfg, device, reuse)
    n_workers, per_worker = seed_workers(len(seed_dirs), threads, resolve_device(device))
    queue = SeedQueue(list(seed_dirs))
    with cpu_threads(per_worker):
        if n_workers > 1:
            log(f"{len(seed_dirs)} seeds, {n_workers} at a time, {per_worker} thread(s) each")
        with _seed_feeders(queue, n_workers - 1, per_worker,
                           (store, budget, seed_dirs, m, cfg, device, reuse)):
            try:
                while (seed := queue.next()) is not None:
                    if n_workers > 1:
                        set_log_prefix(f"seed {seed}: ")
                    queue.run(seed, lambda seed=seed: train_seed(
                        m, store, budget, seed, seed_dirs[seed], cfg, device, reuse))
            finally:
                set_log_prefix("")
    if queue.failed:
        seed = next(s for s in seed_dirs if s in queue.failed)
        err = queue.failed[seed]
        named = _seed_error(err, seed, seed_dirs[seed], len(seed_dirs))
        if named is err:
            raise err
        raise named from err
    return [queue.results[seed] for seed in seed_dirs]


def train_group(method, store: "CheckedStore", budget: int, seed_dirs: dict, cfg, device,
                reuse: Reuse = Reuse()) -> list[dict]:
    """The runs of a network method for every seed of ``seed_dirs``, trained as groups
    (:mod:`cmix.learn.group`): each run's folder locked, opened and resumed as a lone run's
    would be (a finished run is returned as it is); the unfinished runs that stand at the
    same stage and epoch form one group, whose models take every step together; the
    store's training rows are read once for all (:class:`cmix.learn.data.RowSource`:
    on the device where they fit). Returns the metrics in the dict's order."""
    from ..locks import folder_lock
    from ..runtime import resolve_device
    from .data import RowSource, row_source_mode
    from .group import Group

    dev = resolve_device(device)
    results: dict = {}
    with contextlib.ExitStack() as locks:
        pending = []
        for seed, out_dir in seed_dirs.items():
            holder = f"cmix train --method {method.name} --budget {budget} --seed {seed}"
            try:
                locks.enter_context(folder_lock(out_dir, holder))
                ctx, state = open_run(method, store, budget, seed, out_dir, cfg, device, reuse)
            except (CmixError, OSError) as err:
                named = _seed_error(err, seed, out_dir, len(seed_dirs))
                raise named from (None if named is err else err)
            if state is None:
                results[seed] = json.loads((ctx.out_dir / METRICS_FILE).read_text())
                continue
            ctx.state = state
            pending.append(ctx)
        fitted = {}
        to_fit = [c for c in pending if "model" not in c.state.parts]
        if to_fit:
            from ..genotypes.store import dosage_encoding

            root = store.root
            itemsize = 1 if dosage_encoding(root)["kind"] == "hard calls" else 4
            mode = row_source_mode(len(store.train_split), to_fit[0].n_snps, itemsize, dev,
                                   cfg.data.loader, int(cfg.data.memory_limit_mb) << 20)
            source = RowSource(root, store.train_split, dev, mode,
                               cache_chunks=max(64, 2 * len(to_fit) * cfg.data.buffer_chunks))
            log(f"{len(store.train_split)} training rows x {to_fit[0].n_snps} SNPs held "
                + {"device": f"on the {dev.type} device", "host": "in host memory",
                   "stream": "in the store (streamed)"}[mode])
            by_progress: dict = {}
            for c in to_fit:
                by_progress.setdefault((c.state.stage, c.state.epoch), []).append(c)
            for ctxs in by_progress.values():
                if len(ctxs) > 1:
                    log(f"{len(ctxs)} runs (seeds {', '.join(str(c.seed) for c in ctxs)}) "
                        "trained as one group")
                for c in ctxs:
                    c.group_seeds = tuple(x.seed for x in ctxs)
                try:
                    with deterministic_algorithms(dev):
                        for c, f in zip(ctxs, method.cls.fit_group(Group(ctxs, source))):
                            fitted[c.seed] = f
                except (CmixError, OSError) as err:
                    if len(seed_dirs) > 1:
                        seeds = ", ".join(str(c.seed) for c in ctxs)
                        raise CmixError(f"seed(s) {seeds}: {err}") from err
                    raise
                for c in ctxs:
                    f = fitted[c.seed]
                    c.state.parts["model"] = cpu_state(f.state_dict())
                    c.state.parts["report"] = f.report
                    c.state.stage = "fitted"
                    c.save(c.state, force=True)
        for ctx in pending:
            with deterministic_algorithms(dev):
                results[ctx.seed] = run_method(ctx, ctx.state, fitted.get(ctx.seed))
    return [results[seed] for seed in seed_dirs]


def available_cpus() -> int:
    """The CPU cores this process may run on (its affinity mask, which a SLURM allocation
    sets; the machine's count where the platform has no mask)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def seed_workers(n_seeds: int, threads: int | None, device) -> tuple[int, int | None]:
    """(processes, torch threads each, None to leave torch's own count) for ``n_seeds``
    seeds on ``threads`` CPU threads. On the CPU, min(n_seeds, threads) processes share
    the threads equally (at least one each); threads None: the cores this process may
    use (:func:`available_cpus`), each process's share capped at torch's own thread
    count (so OMP_NUM_THREADS=1 keeps every run on one thread). On a GPU (``device``, a
    torch device), or for one seed, one process."""
    if device.type != "cpu" or n_seeds < 2:
        return 1, threads
    cpus = max(1, int(threads or available_cpus()))
    n_workers = min(n_seeds, cpus)
    if n_workers < 2:
        return 1, threads
    share = cpus // n_workers
    if threads is None:
        import torch

        share = min(share, torch.get_num_threads())
    return n_workers, share


def _seed_error(err: Exception, seed: int, out_dir, n_seeds: int) -> Exception:
    """``err`` naming the seed and folder it came from when a call ran several seeds: a
    new CmixError for a CmixError or OSError, else ``err`` itself with a note."""
    if n_seeds > 1 and isinstance(err, (CmixError, OSError)):
        return CmixError(f"seed {seed} ({out_dir}): {err}")
    if n_seeds > 1:
        err.add_note(f"while training seed {seed} into {out_dir}")
    return err


class SeedQueue:
    """The seeds of :func:`train_seeds` waiting to run, shared by the threads that run
    them: ``next`` gives the next seed in order, or None once the queue is empty or a
    seed has failed (so none starts after a failure has come back); ``run`` records a
    seed's metrics or its error."""

    def __init__(self, seeds: list):
        import threading

        self.waiting, self.results, self.failed = list(seeds), {}, {}
        self.lock = threading.Lock()

    def next(self):
        with self.lock:
            return self.waiting.pop(0) if self.waiting and not self.failed else None

    def stop(self) -> None:
        with self.lock:
            self.waiting.clear()

    def run(self, seed, fit, catch=Exception) -> None:
        """Record ``fit()``'s metrics, or its error if of a type in ``catch`` (a worker's
        KeyboardInterrupt comes back to the thread that feeds it as an error)."""
        try:
            self.results[seed] = fit()
        except catch as err:
            with self.lock:
                self.failed[seed] = err


@contextlib.contextmanager
def cpu_threads(n: int | None):
    """torch's and the BLAS libraries' thread counts set to ``n`` inside the block (left
    as they are for None), restored after it."""
    if n is None:
        yield
        return
    import torch
    from threadpoolctl import threadpool_limits

    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        with threadpool_limits(n):
            yield
    finally:
        torch.set_num_threads(before)


@contextlib.contextmanager
def _seed_feeders(queue: SeedQueue, n_processes: int, threads: int, run: tuple):
    """Inside the block, ``n_processes`` spawned worker processes (``threads`` threads
    each) also take seeds from ``queue``, one at a time each, each fed by a thread of
    this process; run: (checked store, budget, seed -> folder, registry method, resolved
    config, device, :class:`Reuse`), what :func:`train_seed` takes. The workers take the checked
    store (checksums not read again), log with a "seed N: " prefix and show no progress
    bars. On leaving, no seed starts and the block waits for the workers' runs to end."""
    if n_processes < 1:
        yield
        return
    import multiprocessing
    import threading
    from concurrent.futures import ProcessPoolExecutor

    store, budget, seed_dirs, method, cfg, device, reuse = run
    shared = (str(store.path), store.sha256, store.train_split, store.mean, store.sd)

    def feed(pool):
        while (seed := queue.next()) is not None:
            queue.run(seed, lambda seed=seed: pool.submit(
                _seed_in_worker, shared, method, cfg, budget, seed,
                str(seed_dirs[seed]), device, reuse).result(), catch=BaseException)

    with ProcessPoolExecutor(n_processes, mp_context=multiprocessing.get_context("spawn"),
                             initializer=_seed_worker_start, initargs=(threads,)) as pool:
        feeders = [threading.Thread(target=feed, args=(pool,), daemon=True)
                   for _ in range(n_processes)]
        for t in feeders:
            t.start()
        try:
            yield
        finally:
            queue.stop()
            for t in feeders:
                t.join()


def _seed_worker_start(threads: int) -> None:
    """A seed worker's start: its thread count for torch and the BLAS libraries, and
    progress bars off (several processes share one terminal)."""
    import torch
    from threadpoolctl import threadpool_limits

    torch.set_num_threads(threads)
    threadpool_limits(threads)
    os.environ["CMIX_PROGRESS"] = "0"


def _seed_in_worker(shared: tuple, method, cfg, budget: int, seed: int, out_dir: str,
                    device: str, reuse: Reuse) -> dict:
    """One seed's run in a seed worker, on the store the parent checked, with the
    registry method and resolved config the parent resolved."""
    from ..genotypes.store import open_store

    path, sha256, train_split, mean, sd = shared
    set_log_prefix(f"seed {seed}: ")
    store = CheckedStore(path=Path(path), root=open_store(Path(path)), sha256=sha256,
                         train_split=train_split, mean=mean, sd=sd)
    return train_seed(method, store, budget, seed, out_dir, cfg, device, reuse)


def train_seed(method, store: "CheckedStore", budget: int, seed: int, out_dir, cfg, device,
               reuse: Reuse = Reuse()) -> dict:
    """One run of :func:`train_seeds`, in its locked folder: its metrics."""
    from ..locks import folder_lock

    holder = f"cmix train --method {method.name} --budget {budget} --seed {seed}"
    with folder_lock(out_dir, holder):
        ctx, state = open_run(method, store, budget, seed, out_dir, cfg, device, reuse)
        if state is None:
            return json.loads((ctx.out_dir / METRICS_FILE).read_text())
        with deterministic_algorithms(ctx.dev):
            return run_method(ctx, state)


def run_method(ctx: RunContext, state: RunState, method=None) -> dict:
    """Fit the run's method (or rebuild it from the checkpoint of a fit that finished, or
    take ``method``, fitted in a group), checkpoint its state dict (stage "fitted"), then
    its test rows' probabilities and :func:`finish`."""
    ctx.state = state
    if method is not None:
        pass
    elif "model" in state.parts:
        method = ctx.method.cls(ctx.cfg, ctx.dev)
        method.load_state_dict(state.parts["model"])
        method.report = state.parts["report"]
    else:
        method = ctx.method.cls(ctx.cfg, ctx.dev)
        method.fit(ctx)
        state.parts["model"] = cpu_state(method.state_dict())
        state.parts["report"] = method.report
        state.stage = "fitted"
        ctx.save(state, force=True)
    test = ctx.splits.test
    x, cov = ctx.rows(test).cpu().numpy(), ctx.cov[test]
    return finish(ctx, state, method.predict_proba(x, cov), method.report["validation"],
                  pseudo_labels=method.report["pseudo_labels"], latent=method.latent(x, cov))


@dataclass(frozen=True)
class CheckedStore:
    """A store opened and checked once for every run on it: ``root`` the zarr group,
    ``sha256`` its fingerprint (:func:`cmix.genotypes.store.store_fingerprint`),
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
    from ..genotypes import store as store_mod
    from ..genotypes.store import column_moments

    store_path = Path(store_path)
    root = open_store_checked(store_path)
    store_mod.check_encoding(root, cfg.model.encoding, store_path.name)
    train_split = np.flatnonzero(np.asarray(root["sample_split"][:]) == 0)
    mean, sd = column_moments(root, train_split)
    for shared in (train_split, mean, sd):
        shared.setflags(write=False)
    return CheckedStore(path=store_path, root=root, sha256=store_mod.store_fingerprint(root),
                        train_split=train_split, mean=mean, sd=sd)


def open_store_checked(store_path):
    """Open a store and check its files against its checksums (logged with the time)."""
    from ..genotypes import store as store_mod

    root = store_mod.open_store(store_path)
    t0 = time.perf_counter()
    checked = store_mod.verify_store(store_path, root)
    log(f"{Path(store_path).name}: {checked['files']} files ({checked['bytes'] / 2**20:.1f} "
        f"MiB) match their checksums ({time.perf_counter() - t0:.2f} s)")
    return root


def open_run(method, store: CheckedStore, budget: int, seed: int, out_dir, cfg, device,
             reuse: Reuse = Reuse()) -> tuple[RunContext, RunState | None]:
    """The context of a run and its state: a new state, the checkpoint's when it is of
    the same run (:func:`saved_state`), or None when the run is finished: a finished
    checkpoint of this run and a metrics.json that proves it (:func:`finished_metrics`)."""
    from ..runtime import resolve_device
    from .data import make_splits

    dev = resolve_device(device)
    root = store.root
    splits = make_splits(root, budget, seed, cfg.data.val_fraction, store.path.name)
    out_dir = check_writable_dir(out_dir)
    run_key = run_key_of(root, method, budget, seed, cfg, splits.test_hash, store.sha256)
    state = saved_state(out_dir, run_key, reuse.resume)
    ctx = RunContext(method=method, cfg=cfg, budget=int(budget), seed=int(seed),
                     store_path=store.path, root=root, splits=splits, dev=dev,
                     out_dir=out_dir, store_sha256=store.sha256, run_key=run_key,
                     mean=store.mean.copy(), sd=store.sd.copy(), cov=None,
                     encoders=None if reuse.encoders is None else Path(reuse.encoders))
    ctx.cov, ctx.cov_mu, ctx.cov_sd = standardised_covariates(root, store.train_split, cfg)
    if state is not None and state.stage == "done" and finished_metrics(out_dir, run_key):
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


def run_key_of(root, method, budget: int, seed: int, cfg, test_hash: str,
               store_sha256: str) -> str:
    """sha256 hex of what makes a run: the trait, budget, seed, method, the config
    sections the method reads, the test split and the store's content."""
    from .config import sections_config

    return hashlib.sha256(json.dumps(
        {"trait": str(root.attrs["trait"]), "budget": int(budget), "seed": int(seed),
         "method": method.name, "config": sections_config(cfg, method.sections),
         "test": test_hash, "store": store_sha256},
        sort_keys=True, default=str).encode()).hexdigest()


def shared_stage_key(ctx: RunContext, pseudo: str | None) -> str:
    """sha256 hex of what a contrastive mixup pre-training stage's result depends on: the
    trait, budget, seed, test split, store content, kind of device (:func:`numerics_kind`)
    and CPU thread count (MKL's products can differ in their last bits between thread
    counts), package versions and the cmix methods' config sections, with the switches as
    the stage reads them (``pseudo``: "judged" (pseudo-labels judged by held-out labeled
    rows), "unjudged" (used as propagated), or None (none); predictor_mixup is read by the
    predictor only). So cmix and cmix_selfsl_pl share their judged stage, cmix_paper and
    cmix_paper_pl their unjudged one, and cmix's pre-training without pseudo-labels is
    cmix_selfsl's; cmix_random_mix (another ``mix``) and any other config get keys of
    their own."""
    import torch

    from .config import sections_config
    from .methods import CMIX_SECTIONS

    cfg = {**sections_config(ctx.cfg, CMIX_SECTIONS), "pretrain": True,
           "pseudo_labels": pseudo is not None,
           "judge": None if pseudo is None else pseudo == "judged", "predictor_mixup": None}
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


def take_shared_stage(ctx: RunContext, stage: str, pseudo: str | None) -> bool:
    """Before pre-training stage ``stage`` (``pseudo``: as :func:`shared_stage_key`) starts:
    if the run's shared-encoder folder holds it (under :func:`shared_stage_key`, written
    by :func:`share_stage` in a run of another method or config file with the same
    pre-training), put it in the run's state as if this run had made it: the modules'
    states, the pseudo-labels and their summary of a stage with them, and the stage's epoch
    records. Returns whether it did. A damaged file stops the run (CmixError naming it)."""
    state = ctx.state
    fresh = state.stage == "start" or (state.stage == stage and state.epoch == 0)
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


def share_stage(ctx: RunContext, stage: str, pseudo: str | None) -> None:
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


def saved_state(out_dir: Path, run_key: str, resume: bool) -> RunState | None:
    """The checkpoint in ``out_dir`` when it is of run ``run_key``, else None.

    A checkpoint of another run is discarded (logged) when metrics.json is absent, as
    after Snakemake removes a job's outputs to rerun it; beside a metrics.json, or with
    ``resume``, it is an error. ``resume`` without a checkpoint is an error.
    """
    metrics_path, ckpt_path = out_dir / METRICS_FILE, out_dir / CHECKPOINT_FILE
    if not ckpt_path.exists():
        if resume:
            raise CmixError(f"{out_dir}: --resume given but there is no {CHECKPOINT_FILE}")
        return None
    saved = load_torch(ckpt_path)
    try:
        state = RunState(**saved)
    except Exception as err:
        raise CmixError(f"{ckpt_path}: unreadable checkpoint ({type(err).__name__}: "
                        f"{err}); delete it to start over") from None
    if state.run_key == run_key:
        return state
    if resume or metrics_path.exists():
        raise CmixError(f"{out_dir}: holds a {'finished ' * metrics_path.exists()}"
                        "run with another store content, budget, seed, method or "
                        "config; use another --out, or delete its metrics.json to "
                        "replace it")
    log(f"{out_dir}: the checkpoint there is of another run (store content, budget, "
        "seed, method or config changed); starting this run afresh")
    for name in (CHECKPOINT_FILE, LOG_FILE):
        (out_dir / name).unlink(missing_ok=True)
    return None


def finished_metrics(out_dir: Path, run_key: str) -> bool:
    """Whether ``out_dir``'s metrics.json proves that run ``run_key`` finished there: a
    JSON object carrying that run key (beside the finished checkpoint of that key).

    A metrics.json that is no run's record (not JSON, not an object, no run key) is
    logged and False is returned: the run's results are written again from its finished
    checkpoint, replacing it. One carrying another run's key is a CmixError naming it:
    it is another run's record, which cmix never deletes."""
    path = out_dir / METRICS_FILE
    if not path.exists():
        return False
    try:
        metrics = json.loads(path.read_bytes().decode("utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as err:
        metrics, why = None, f"not JSON ({type(err).__name__})"
    else:
        why = "not a JSON object of a run's metrics"
    if isinstance(metrics, dict) and "run_key" in metrics:
        if metrics["run_key"] == run_key:
            return True
        raise CmixError(f"{path}: the metrics of another run (its run_key is not that of "
                        f"this run's finished checkpoint, {CHECKPOINT_FILE}); move it away "
                        "or use another --out")
    if isinstance(metrics, dict):
        why = "no run_key"
    log(f"{path}: {why}, not this finished run's record; writing it again from "
        f"{CHECKPOINT_FILE}")
    return False


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


def cpu_state(sd: dict) -> dict:
    """A detached CPU copy of a (nested) state dict."""
    import torch

    if isinstance(sd, torch.Tensor):
        return sd.detach().cpu().clone()
    if isinstance(sd, dict):
        return {k: cpu_state(v) for k, v in sd.items()}
    if isinstance(sd, list):
        return [cpu_state(v) for v in sd]
    return sd


def classification_metrics(y: np.ndarray, prob: np.ndarray, n_classes: int) -> dict:
    """Test metrics of probabilities ``prob`` (n, C) against true classes ``y`` (n,) ints.

    accuracy and balanced accuracy of the argmax; ``mcc``: Matthews correlation of the
    argmax (multi-class form; in [-1, 1], 0 when undefined); ``brier``: half the mean
    squared distance between each row of ``prob`` and the one-hot truth, in [0, 1] (for
    2 classes the usual binary Brier score of class 1). Binary: ``auroc`` and ``ap``
    (average precision) of class 1; more classes: ``macro_auroc`` and ``macro_ap``, the
    one-vs-rest mean over the classes present. Ranking metrics are None when fewer than
    2 classes are present."""
    from .metrics import (average_precision_score, balanced_accuracy_score,
                          matthews_corrcoef, roc_auc_score)

    y = np.asarray(y, dtype=np.int64)
    prob = np.asarray(prob, dtype=np.float64)
    if not np.isfinite(prob).all():
        bad = int((~np.isfinite(prob)).any(axis=1).sum())
        raise CmixError(f"the model's probabilities are not finite for {bad} of {len(prob)} "
                        "rows (a diverged network: lower lr or pred_lr); no metric is "
                        "computed from them")
    pred = prob.argmax(1)
    onehot = np.eye(prob.shape[1])[y]
    out = {"accuracy": float(np.mean(pred == y)),
           "balanced_accuracy": float(balanced_accuracy_score(y, pred)),
           "mcc": float(matthews_corrcoef(y, pred)),
           "brier": float(0.5 * np.mean(np.sum((prob - onehot) ** 2, axis=1)))}
    present = np.unique(y)
    auc = ap = None
    if len(present) >= 2:
        if n_classes == 2:
            auc = float(roc_auc_score(y, prob[:, 1]))
            ap = float(average_precision_score(y, prob[:, 1]))
        else:
            auc = float(np.mean([roc_auc_score(y == c, prob[:, c]) for c in present]))
            ap = float(np.mean([average_precision_score(y == c, prob[:, c]) for c in present]))
    out["auroc" if n_classes == 2 else "macro_auroc"] = auc
    out["ap" if n_classes == 2 else "macro_ap"] = ap
    return out


def numerics_kind(device) -> str:
    """What decides a network's float bits besides the code, seed and thread count:
    "cuda", or for the CPU its vendor (MKL dispatches by it) and torch's CPU capability
    (the vector instructions of its kernels), e.g. "cpu AuthenticAMD AVX2". The same run
    on CPUs of two kinds can differ in its last bits and from there in its metrics."""
    import platform

    import torch

    if torch.device(device).type != "cpu":
        return torch.device(device).type
    vendor = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("vendor_id"):
                vendor = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"cpu {vendor} {torch.backends.cpu.get_cpu_capability()}"


def versions() -> dict:
    """Versions of the packages a result depends on: an imported package's
    ``__version__``, else its installed distribution's (not imported for this)."""
    import platform
    import sys
    from importlib.metadata import version

    from .. import __version__

    def of(module: str, dist: str) -> str:
        return sys.modules[module].__version__ if module in sys.modules else version(dist)

    return {"cmix": __version__, "torch": of("torch", "torch"), "numpy": np.__version__,
            "scipy": of("scipy", "scipy"), "sklearn": of("sklearn", "scikit-learn"),
            "dask": of("dask", "dask"), "zarr": of("zarr", "zarr"),
            "python": platform.python_version()}


def prediction_record(ctx: RunContext, test_prob: np.ndarray) -> dict:
    """What :mod:`cmix.learn.predict` needs besides the fitted method's state dict to
    apply the run to new people (no sample IDs): the method's name, the store's variants
    and effect alleles, the covariate spec and standardisation moments, and the test
    probabilities (test rows in store order) to check a prediction against."""
    from ..genotypes.store import store_text

    root = ctx.root
    text = partial(store_text, root)
    contig = text("contig_id")[np.asarray(root["variant_contig"][:])]
    cov_attrs = root.attrs.get("covariates") or {}
    return {"method": ctx.method.name, "class_names": list(ctx.splits.class_names),
            "variant_id": text("variant_id"),
            "contig": contig, "position": np.asarray(root["variant_position"][:]),
            "allele": text("variant_allele"),
            "cov_names": ([str(c) for c in root["covariate_name"][:]] if ctx.n_cov else []),
            "cov_spec": cov_attrs.get("spec", {}), "cov_mu": ctx.cov_mu, "cov_sd": ctx.cov_sd,
            "pca_sha256": cov_attrs.get("pca_sha256"),
            "store_path": str(ctx.store_path.resolve()), "store_sha256": ctx.store_sha256,
            "test_prob": np.asarray(test_prob)}


def finish(ctx: RunContext, state: RunState, test_prob: np.ndarray, validation: dict,
           pseudo_labels: dict | None = None, latent=None) -> dict:
    """Test metrics of ``test_prob`` (n_test, C); writes predictions.npz, then
    metrics.json (last; each atomically) and the final checkpoint; returns the metrics
    dict. ``latent``: the test rows' latent (n_test, d) where the method has one (numpy
    or torch), kept in predictions.npz for the report's t-SNE."""
    import torch

    from .config import sections_config

    s = ctx.splits
    t0 = time.perf_counter()
    metrics = classification_metrics(s.label[s.test], test_prob, s.n_classes)
    state.add_time("evaluate", t0)
    dev = ctx.dev
    result = {
        "trait": ctx.trait, "method": ctx.method.name, "budget": ctx.budget, "seed": ctx.seed,
        "class_names": s.class_names, **s.counts(), "n_snps": ctx.n_snps,
        "test": metrics, "validation": validation, "pseudo_labels": pseudo_labels,
        "test_split_sha256": s.test_hash,
        "wall_seconds": {k: round(v, 3) for k, v in state.times.items()},
        "device": (str(dev) if dev.type == "cpu"
                   else f"cuda ({torch.cuda.get_device_name(dev)})"),
        "torch_threads": torch.get_num_threads(),
        "versions": versions(),
        "config": sections_config(ctx.cfg, ctx.method.sections),
        "covariates": ([str(c) for c in ctx.root["covariate_name"][:]] if ctx.n_cov else []),
        "store": ctx.store_path.resolve().name,
        "store_sha256": ctx.store_sha256,
        "run_key": ctx.run_key,
    }
    provenance = ctx.root.attrs.get("provenance")
    if provenance is not None:
        result["provenance"] = (json.loads(provenance) if isinstance(provenance, str)
                                else provenance)
    state.parts["predict"] = prediction_record(ctx, test_prob)
    state.stage = "done"
    ctx.save(state, force=True)
    write_predictions(ctx.out_dir / PREDICTIONS_FILE, s.label[s.test], test_prob, latent)
    with atomic_path(ctx.out_dir / METRICS_FILE) as tmp:
        tmp.write_text(json.dumps(result, indent=2) + "\n")
    log(f"{ctx.trait} {ctx.method.name} budget {ctx.budget} seed {ctx.seed}: test accuracy "
        f"{metrics['accuracy']:.4f}, balanced {metrics['balanced_accuracy']:.4f}")
    return result


def write_predictions(path, y: np.ndarray, prob: np.ndarray, latent=None) -> None:
    """predictions.npz (atomically): ``y`` int64 (n_test,) true classes, ``prob`` float32
    (n_test, C), and ``latent`` float32 (n_test, d) when given. Test rows in store
    order; no sample IDs."""
    arrays = {"y": np.asarray(y, dtype=np.int64), "prob": np.asarray(prob, dtype=np.float32)}
    if latent is not None:
        if hasattr(latent, "detach"):
            latent = latent.detach().float().cpu().numpy()
        arrays["latent"] = np.asarray(latent, dtype=np.float32)
    with atomic_path(path) as tmp, open(tmp, "wb") as fh:
        np.savez_compressed(fh, **arrays)
