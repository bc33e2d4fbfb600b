"""The seeds of one ``cmix train`` call run at once on the CPU: the seed queue, the
worker processes that take seeds from it and their thread counts.

- :func:`seed_workers`: how many processes run seeds at once and with how many threads
  each (:func:`available_cpus`: the cores this process may use).
- :class:`SeedQueue`: the seeds waiting to run, their metrics and their errors.
- :func:`seed_feeders`: spawned worker processes that take seeds from the queue beside
  the calling process; :func:`cpu_threads`: the thread counts inside a block.
- :func:`seed_error`: an error naming the seed and folder it came from.

The runs themselves are :func:`cmix.learn.harness.train_seeds`'s.
"""

from __future__ import annotations

import contextlib
import os
import threading

from threadpoolctl import threadpool_limits

from ..errors import CmixError


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
        import torch  # torch: ~1.5 s to import; only where a network or tensor is used

        share = min(share, torch.get_num_threads())
    return n_workers, share


def seed_error(err: Exception, seed: int, out_dir, n_seeds: int) -> Exception:
    """``err`` naming the seed and folder it came from when a call ran several seeds: a
    new CmixError for a CmixError or OSError, else ``err`` itself with a note."""
    if n_seeds > 1 and isinstance(err, (CmixError, OSError)):
        return CmixError(f"seed {seed} ({out_dir}): {err}")
    if n_seeds > 1:
        err.add_note(f"while training seed {seed} into {out_dir}")
    return err


class SeedQueue:
    """The seeds of :func:`cmix.learn.harness.train_seeds` waiting to run, shared by the
    threads that run them: ``next`` gives the next seed in order, or None once the queue
    is empty or a seed has failed (so none starts after a failure has come back); ``run``
    records a seed's metrics or its error."""

    def __init__(self, seeds: list):

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
    import torch  # torch: ~1.5 s to import; only where a network or tensor is used

    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        with threadpool_limits(n):
            yield
    finally:
        torch.set_num_threads(before)


@contextlib.contextmanager
def seed_feeders(queue: SeedQueue, n_processes: int, threads: int, worker, run: tuple):
    """Inside the block, ``n_processes`` spawned worker processes (``threads`` threads
    each) also take seeds from ``queue``, one at a time each, each fed by a thread of
    this process; run: (checked store, budget, seed -> folder, registry method, resolved
    config, device, :class:`cmix.learn.context.Reuse`), what
    :func:`cmix.learn.harness.train_seed` takes. A worker runs a seed as ``worker(shared,
    method, cfg, budget, seed, out_dir, device, reuse)``, ``shared`` the checked store's
    (path, sha256, train_split, mean, sd); ``worker`` is a module-level function (a
    spawned process finds it by name). The workers take the checked store (checksums not
    read again), log with a "seed N: " prefix and show no progress bars. On leaving, no
    seed starts and the block waits for the workers' runs to end."""
    if n_processes < 1:
        yield
        return
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    store, budget, seed_dirs, method, cfg, device, reuse = run
    shared = (str(store.path), store.sha256, store.train_split, store.mean, store.sd)

    def feed(pool):
        while (seed := queue.next()) is not None:
            queue.run(seed, lambda seed=seed: pool.submit(
                worker, shared, method, cfg, budget, seed,
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
    import torch  # torch: ~1.5 s to import; only where a network or tensor is used

    torch.set_num_threads(threads)
    threadpool_limits(threads)
    os.environ["CMIX_PROGRESS"] = "0"
