"""Splits and batch loaders for training on a per-trait Zarr store.

Splits (all arrays are row indices into the store, sorted):

- test: rows with ``sample_split == 1``, fixed when the store was written, identical for
  every budget, seed and method.
- labeled: exactly ``budget`` rows of the training split (``sample_split == 0``), drawn
  stratified by class with ``seed``; every class must be present.
- validation: carved from the labeled rows only (stratified, ``val_fraction``); the
  rest of the labeled rows are the ``train_labeled`` rows.
- unlabeled: the training split minus the labeled rows.

The training rows of a group of models are read once (:class:`RowSource`: on the
device, in host memory, or streamed from the store for a store larger than the memory
allowed) and every batch is a gather by position. Batch orders are chunk-aware shuffles
drawn on the device (:func:`chunk_aware_order`): each model's Zarr chunks are shuffled,
grouped into buffers of ``buffer_chunks`` chunks, and its rows shuffled inside each
buffer, so a stream reads each chunk once an epoch; every mode gives the same batches.
"""

from __future__ import annotations

import hashlib
import queue
import threading
from dataclasses import dataclass

import numpy as np

from ..errors import CmixError
from ..runtime import one_blas_thread
from ..store.read import load_rows
from .streams import SPLITS

#: a sort key above every drawn one (63-bit keys): padding sorts last
LAST = 1 << 62


@dataclass
class Splits:
    """Row indices (into the store) of each split, and the labels of all rows."""

    train_labeled: np.ndarray
    validation: np.ndarray
    unlabeled: np.ndarray
    test: np.ndarray
    label: np.ndarray          # int64 (n_samples,), class index of every row
    class_names: list
    test_hash: str             # sha256 of the sorted test-split sample IDs

    @property
    def n_classes(self) -> int:
        return len(self.class_names)

    @property
    def labeled(self) -> np.ndarray:
        return np.sort(np.concatenate([self.train_labeled, self.validation]))

    def counts(self) -> dict:
        return {"n_labeled": int(len(self.train_labeled) + len(self.validation)),
                "n_train_labeled": int(len(self.train_labeled)),
                "n_validation": int(len(self.validation)),
                "n_unlabeled": int(len(self.unlabeled)), "n_test": int(len(self.test)),
                # accuracy of always predicting the test split's commonest class
                "test_majority_rate": (float(np.bincount(self.label[self.test]).max()
                                             / len(self.test)) if len(self.test) else None)}


def stratified_take(rows: np.ndarray, label: np.ndarray, n_take: int, rng,
                    min_per_class: int, keep: int = 0) -> np.ndarray:
    """``n_take`` of ``rows``: each class in proportion to its size (largest remainder),
    at least ``min_per_class`` of each class when n_take allows, and at most its size
    minus ``keep``."""
    classes, counts = np.unique(label[rows], return_counts=True)
    cap = np.maximum(counts - keep, 0)
    n_take = min(int(n_take), int(cap.sum()))
    floor = np.minimum(cap, min_per_class)
    if floor.sum() > n_take:
        floor = np.zeros_like(floor)
    rest = n_take - floor.sum()
    share = (cap - floor) / max((cap - floor).sum(), 1) * rest
    take = np.minimum(floor + np.floor(share).astype(int), cap)
    order = np.argsort(-(share - np.floor(share)), kind="stable")
    while take.sum() < n_take:          # hand out the remainder, largest fraction first
        for i in order:
            if take.sum() < n_take and take[i] < cap[i]:
                take[i] += 1
    chosen = [rng.choice(rows[label[rows] == c], size=t, replace=False)
              for c, t in zip(classes, take)]
    return np.sort(np.concatenate(chosen)).astype(np.int64) if chosen else np.zeros(0, np.int64)


def make_splits(root, budget: int, seed: int, val_fraction: float = 0.2,
                store_name: str = "store") -> Splits:
    """The labeled / validation / unlabeled / test rows of a store for one budget and seed.

    Raises CmixError when the budget exceeds the training split, is smaller than the
    number of classes, or a class has no training row.
    """
    label = np.asarray(root["sample_label"][:], dtype=np.int64)
    split = np.asarray(root["sample_split"][:])
    class_names = list(root.attrs["class_names"])
    n_classes = len(class_names)
    if label.min(initial=0) < 0 or label.max(initial=0) >= n_classes:
        raise CmixError(f"{store_name}: sample_label outside 0..{n_classes - 1} "
                        f"(class_names has {n_classes} entries)")
    train = np.flatnonzero(split == 0)
    test = np.flatnonzero(split == 1)
    if budget > len(train):
        raise CmixError(f"{store_name}: budget {budget} is larger than the training split "
                        f"({len(train)} samples)")
    if budget < n_classes:
        raise CmixError(f"{store_name}: budget {budget} is smaller than the number of "
                        f"classes ({n_classes}); every class needs a labeled sample")
    if len(test) == 0:
        raise CmixError(f"{store_name}: the store has no test split (sample_split == 1)")
    absent = [class_names[c] for c in range(n_classes) if not np.any(label[train] == c)]
    if absent:
        raise CmixError(f"{store_name}: class(es) {absent} have no sample in the training "
                        "split, so the labeled subset cannot contain them")
    rng = np.random.default_rng([int(seed), SPLITS])
    labeled = stratified_take(train, label, budget, rng, min_per_class=1)
    # Validation: from the labeled rows only; every class keeps >= 1 training row.
    n_val = int(round(val_fraction * budget))
    validation = (stratified_take(labeled, label, n_val, rng, min_per_class=1, keep=1)
                  if n_val > 0 else np.zeros(0, dtype=np.int64))
    train_labeled = np.setdiff1d(labeled, validation)
    unlabeled = np.setdiff1d(train, labeled)
    ids = sorted(str(s) for s in np.asarray(root["sample_id"][:])[test])
    test_hash = hashlib.sha256("\n".join(ids).encode()).hexdigest()
    return Splits(train_labeled=train_labeled, validation=validation, unlabeled=unlabeled,
                  test=test, label=label, class_names=class_names, test_hash=test_hash)


def chunk_aware_order(draws, store_rows, n_rows, chunk_rows: int, n_chunks: int,
                      buffer_chunks: int = 8):
    """Each model's shuffled order of its rows for one epoch, chunk-aware: (G, n)
    positions into its row list.

    store_rows: int64 (G, n) tensor, each model's store rows (sorted; entries past its
    count padded with any value); n_rows: int64 (G,) tensor, each model's count; chunk_rows:
    rows per Zarr chunk; n_chunks: chunks in the store; draws:
    :class:`cmix.learn.streams.Draws` of the epoch. Each model's chunks are shuffled and
    grouped ``buffer_chunks`` at a time, and its rows shuffled inside each group, so that
    a stream reads each chunk once an epoch; a model's padding comes last. The draws and
    the order depend on the model's own key only, on any device."""
    import torch  # torch: ~1.5 s to import; only where a network or tensor is used

    g, n = store_rows.shape
    dev = store_rows.device
    valid = torch.arange(n, device=dev)[None, :] < n_rows[:, None]
    chunk = torch.where(valid, store_rows // chunk_rows, torch.zeros_like(store_rows))
    present = torch.zeros((g, n_chunks), dtype=torch.bool, device=dev)
    present.scatter_(1, chunk, valid)
    chunk_key = torch.where(present, draws.bits(n_chunks), LAST)
    rank = torch.argsort(torch.argsort(chunk_key, dim=1, stable=True), dim=1, stable=True)
    buffer = torch.gather(rank, 1, chunk) // buffer_chunks
    key = torch.where(valid, (buffer << 32) | draws.bits(n), LAST)
    return torch.argsort(key, dim=1, stable=True)


def permutations(draws, n_rows, n_perms: int, n: int):
    """``n_perms`` independent shuffles of each model's n_rows[g] rows: (G, n_perms, n)
    positions, each model's padding (positions >= its count) last; n_rows: int64 (G,)
    tensor."""
    import torch  # torch: ~1.5 s to import; only where a network or tensor is used

    valid = torch.arange(n, device=n_rows.device)[None, None, :] < n_rows[:, None, None]
    key = torch.where(valid, draws.bits(n_perms, n),
                      LAST)
    return torch.argsort(key, dim=2, stable=True)


class RowSource:
    """The training rows of a group's store (the training split, ``rows`` sorted store
    indices), read once, and the batches gathered from them by position.

    mode "device": held on the training device (int8, or float32 for a fractional
    store): a batch is one indexing operation there. "host": held in host memory: a batch
    is gathered on the CPU and copied to the device. "stream": read from the Zarr store
    as batches need it, through a cache of decoded chunks (for a store larger than the
    memory allowed), ``prefetch`` steps ahead in a background thread. Every mode gives the
    same batches for the same positions. ``index_device``: where the positions of
    :meth:`steps` live (the training device for "device", else the CPU)."""

    def __init__(self, root, rows: np.ndarray, device, mode: str = "device",
                 cache_chunks: int = 64, prefetch: int = 2):
        import torch  # torch: ~1.5 s to import; only where a network or tensor is used

        self.root, self.rows = root, np.asarray(rows, dtype=np.int64)
        self.device, self.mode = torch.device(device), mode
        self.index_device = self.device if mode == "device" else torch.device("cpu")
        self.chunk_rows = int(root["call_dosage"].chunks[0])
        self.n_chunks = -(-int(root["call_dosage"].shape[0]) // self.chunk_rows)
        self.n_variants = int(root["call_dosage"].shape[1])
        self.prefetch, self.cache_chunks = prefetch, cache_chunks
        #: the store rows as an int64 tensor on the index device
        self.rows_index = torch.from_numpy(self.rows.copy()).to(self.index_device)
        self._x = None
        self._cache: dict = {}
        if mode in ("device", "host"):
            x = torch.from_numpy(load_rows(root, self.rows))
            if mode == "device":
                x = x.to(self.device)
            elif self.device.type == "cuda":
                x = x.pin_memory()
            self._x = x
        elif mode != "stream":
            raise ValueError(f"unknown row source mode {mode!r}")

    def __len__(self) -> int:
        return len(self.rows)

    def positions(self, store_rows: np.ndarray) -> np.ndarray:
        """Positions (int64) of sorted store rows among the source's rows."""
        pos = np.searchsorted(self.rows, store_rows)
        if len(store_rows) and not np.array_equal(self.rows[np.minimum(pos, len(self.rows) - 1)],
                                                  store_rows):
            raise ValueError("rows outside the row source")
        return pos.astype(np.int64)

    def gather(self, pos):
        """Rows at positions ``pos`` (any shape, on :attr:`index_device`): (*pos.shape, M)
        on the training device."""
        import torch  # torch: ~1.5 s to import; only where a network or tensor is used

        if self.mode == "device":
            return self._x[pos]
        flat = pos.reshape(-1).cpu().numpy()
        if self.mode == "host":
            x = self._x[torch.from_numpy(flat)]
        else:
            x = torch.from_numpy(self._read(flat))
            if self.device.type == "cuda":
                x = x.pin_memory()
        return x.view(*pos.shape, self.n_variants).to(self.device, non_blocking=True)

    def _read(self, flat: np.ndarray) -> np.ndarray:
        """Rows at positions ``flat`` (n,) from the store, through the chunk cache."""
        store_rows = self.rows[flat]
        chunk = store_rows // self.chunk_rows
        out = None
        for c in np.unique(chunk):
            block = self._cache.pop(int(c), None)
            if block is None:
                lo = int(c) * self.chunk_rows
                held = self.rows[(self.rows >= lo) & (self.rows < lo + self.chunk_rows)]
                block = (lo, held, load_rows(self.root, held))
            self._cache[int(c)] = block                     # most recently used last
            lo, held, x = block
            if out is None:
                out = np.empty((len(flat), self.n_variants), dtype=x.dtype)
            at = chunk == c
            out[at] = x[np.searchsorted(held, store_rows[at])]
        while len(self._cache) > self.cache_chunks:
            self._cache.pop(next(iter(self._cache)))
        if out is None:
            out = np.zeros((0, self.n_variants), dtype=np.int8)
        return out

    def steps(self, schedule):
        """Rows of each step of ``schedule`` ((G, S, B) positions on :attr:`index_device`):
        yields S tensors (G, B, M) on the training device; a stream reads ``prefetch``
        steps ahead in a background thread."""
        n_steps = schedule.shape[1]
        if self.mode != "stream":
            for s in range(n_steps):
                yield self.gather(schedule[:, s])
            return
        q: queue.Queue = queue.Queue(maxsize=max(1, self.prefetch))
        stop = threading.Event()

        def reader():
            try:
                for s in range(n_steps):
                    if stop.is_set():
                        return
                    q.put(self.gather(schedule[:, s]))
            except BaseException as err:  # handed to the consumer
                q.put(err)

        thread = threading.Thread(target=reader, daemon=True)
        thread.start()
        try:
            for _ in range(n_steps):
                item = q.get()
                if isinstance(item, BaseException):
                    raise item
                yield item
        finally:
            stop.set()
            while thread.is_alive():
                try:
                    q.get_nowait()
                except queue.Empty:
                    thread.join(timeout=0.05)


def row_source_mode(n_rows: int, n_variants: int, itemsize: int, device, loader: str = "auto",
                    memory_limit_bytes: int = 2 << 30) -> str:
    """Where a group's training rows are held (:class:`RowSource`): ``loader`` "memory"
    (held: on the device, or in host memory where the device lacks the room), "stream",
    or "auto": held when they fit in ``memory_limit_bytes``, else streamed. On a GPU the
    rows go to the device when they take at most half of its free memory, else they stay
    in host memory."""
    import torch  # torch: ~1.5 s to import; only where a network or tensor is used

    if loader not in ("auto", "memory", "stream"):
        raise CmixError(f"loader must be auto, memory or stream, not {loader!r}")
    size = n_rows * n_variants * itemsize
    if loader == "stream" or (loader == "auto" and size > memory_limit_bytes):
        return "stream"
    dev = torch.device(device)
    if dev.type == "cuda":
        free, _ = torch.cuda.mem_get_info(dev)
        return "device" if size <= free // 2 else "host"
    return "device"


def standardised_dosage(x: np.ndarray, mean: np.ndarray, sd: np.ndarray) -> np.ndarray:
    """float64 (n, M): (dosage - mean) / sd, missing (-1) -> 0 (the mean)."""
    z = x.astype(np.float64)
    z -= mean                   # in place: the same arithmetic without two more copies
    z /= sd
    z[x < 0] = 0.0
    return z


def standardised_pcs(x_fit: np.ndarray, mean: np.ndarray, sd: np.ndarray, n_pcs: int,
                     seed: int):
    """Principal components of standardised dosages (:func:`standardised_dosage`).

    x_fit: int8 (n, M) rows to fit on (no labels are used). Returns (scores (n, p) float64
    of those rows, the fitted scikit-learn PCA) with p = min(n_pcs, n - 1, M); other rows
    are projected on the same axes by :func:`project_pcs`. Randomized SVD seeded by
    ``seed``, on one BLAS thread so that the axes do not depend on the thread count.
    """
    from sklearn.decomposition import PCA  # scikit-learn: ~1 s; only the methods that fit with it

    z = standardised_dosage(x_fit, mean, sd)
    p = max(1, min(n_pcs, len(z) - 1, z.shape[1]))
    with one_blas_thread():
        pca = PCA(p, svd_solver="randomized", random_state=int(seed) & 0x7FFFFFFF).fit(z)
        return pca.transform(z), pca


def project_pcs(pca, x: np.ndarray, mean: np.ndarray, sd: np.ndarray) -> np.ndarray:
    """(m, p) scores of int8 rows x (m, M) on the axes of :func:`standardised_pcs`."""
    with one_blas_thread():
        return pca.transform(standardised_dosage(x, mean, sd))
