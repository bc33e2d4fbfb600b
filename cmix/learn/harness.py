"""One run of one method on one store, budget and seed: the training entry points.

The harness owns the splits, the standardisation moments, the checkpoint and the
metrics; the method (:mod:`cmix.learn.methods`) is a class the harness builds from the
config, fits on the run (:class:`cmix.learn.context.RunContext`), asks for the test
rows' probabilities and checkpoints by its state dict.

- :func:`train_run`: one run; :func:`train_seeds`: the runs of several seeds, sharing
  the store opened and checked once (:class:`cmix.learn.context.CheckedStore`). The
  network methods' seeds train together as one group of models (:func:`train_group`,
  :mod:`cmix.learn.group`, where their epoch loops live); the other methods' seeds run
  at once in worker processes on the CPU (:mod:`cmix.learn.seedpool`).
- :func:`train_seed` and :func:`run_method`: one run in its locked folder, from its
  context (:func:`cmix.learn.context.open_run`) to its metrics
  (:func:`cmix.learn.results.finish`), checkpointed as :mod:`cmix.learn.checkpoints`
  says.
- :func:`deterministic_algorithms`: torch's deterministic kernels, which every run uses.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from pathlib import Path

from ..atomic import check_writable_dir
from ..errors import CmixError
from ..locks import folder_lock
from ..logs import log, set_log_prefix
from ..runtime import resolve_device
from ..store.read import open_store
from .checkpoints import METRICS_FILE, RunState, cpu_state
from .config import resolve_config
from .context import CheckedStore, Reuse, RunContext, check_store, open_run
from .data import RowSource, row_source_mode
from .group import Group
from .methods import get_method
from .results import finish
from .seedpool import SeedQueue, cpu_threads, seed_error, seed_feeders, seed_workers
from .stages import FITTED


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
    of threads, see docs/guide/reproducibility.md) and cuBLAS's fixed workspace (``CUBLAS_WORKSPACE_CONFIG=
    :4096:8``), which cuBLAS needs to be deterministic. Filling new tensors with NaN,
    torch's debugging aid in this mode, is switched off: nothing here reads memory it did
    not write.
    """
    import torch  # torch: ~1.5 s to import; only where a network or tensor is used
    # torch: ~1.5 s to import; only where a network or tensor is used
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
    import torch  # torch: ~1.5 s to import; only where a network or tensor is used

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

    A network method's seeds train as one group in this process, on the CPU or a GPU
    (:func:`train_group`): their models take every step together, each run's the model
    its lone run makes. threads: CPU threads for the whole call (default: the cores this
    process may use). For the other methods, on the CPU, min(seeds, threads) seeds run at
    once (:func:`seed_workers`): this process takes seeds one after another from the
    queue while spawned worker processes take the others, each with an equal share of
    the threads, so that small runs, which cannot keep several cores busy, fill them. A
    seed's run is the one a lone run with its share of the threads makes
    (``torch_threads`` in its metrics.json); another thread count can change the last
    bits of the matrix products, and from there the metrics
    (docs/guide/reproducibility.md). With ``device`` a GPU they run one after another in
    this process. When a run fails, the runs already started finish in their folders
    and no new one starts; with several seeds the error names the failing seed and
    folder.

    reuse: the checkpoint and shared-encoder folder the runs may take from
    (:class:`Reuse`). With a shared-encoder folder the runs of the cmix methods leave
    their pre-training there, keyed by everything it depends on, and take it when another
    run (of another method: cmix's stages are cmix_selfsl_pl's and cmix_selfsl's, or of
    another config file) made the same one (:func:`cmix.learn.shared.shared_stage_key`);
    the metrics are the same either way."""
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
        with seed_feeders(queue, n_workers - 1, per_worker, _seed_in_worker,
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
        named = seed_error(err, seed, seed_dirs[seed], len(seed_dirs))
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
                named = seed_error(err, seed, out_dir, len(seed_dirs))
                raise named from (None if named is err else err)
            if state is None:
                results[seed] = json.loads((ctx.out_dir / METRICS_FILE).read_text())
                continue
            ctx.state = state
            pending.append(ctx)
        fitted = {}
        to_fit = [c for c in pending if "model" not in c.state.parts]
        if to_fit:
            from ..store.schema import dosage_encoding

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
                    c.state.stage = FITTED
                    c.save(c.state, force=True)
        for ctx in pending:
            with deterministic_algorithms(dev):
                results[ctx.seed] = run_method(ctx, ctx.state, fitted.get(ctx.seed))
    return [results[seed] for seed in seed_dirs]


def _seed_in_worker(shared: tuple, method, cfg, budget: int, seed: int, out_dir: str,
                    device: str, reuse: Reuse) -> dict:
    """One seed's run in a seed worker, on the store the parent checked, with the
    registry method and resolved config the parent resolved."""
    path, sha256, train_split, mean, sd = shared
    set_log_prefix(f"seed {seed}: ")
    store = CheckedStore(path=Path(path), root=open_store(Path(path)), sha256=sha256,
                         train_split=train_split, mean=mean, sd=sd)
    return train_seed(method, store, budget, seed, out_dir, cfg, device, reuse)


def train_seed(method, store: "CheckedStore", budget: int, seed: int, out_dir, cfg, device,
               reuse: Reuse = Reuse()) -> dict:
    """One run of :func:`train_seeds`, in its locked folder: its metrics."""
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
        state.stage = FITTED
        ctx.save(state, force=True)
    test = ctx.splits.test
    x, cov = ctx.rows(test).cpu().numpy(), ctx.cov[test]
    return finish(ctx, state, method.predict_proba(x, cov), method.report["validation"],
                  pseudo_labels=method.report["pseudo_labels"], latent=method.latent(x, cov))
