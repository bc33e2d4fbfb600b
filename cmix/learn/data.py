"""Splits and batch loaders for training on a per-trait Zarr store.

Splits (all arrays are row indices into the store, sorted):

- test: rows with ``sample_split == 1``, fixed when the store was written, identical for
  every budget, seed and method.
- labeled: exactly ``budget`` rows of the training split (``sample_split == 0``), drawn
  stratified by class with ``seed``; every class must be present.
- validation: carved from the labeled rows only (stratified, ``val_fraction``); the
  rest of the labeled rows are the ``train_labeled`` rows.
- unlabeled: the training split minus the labeled rows.

Loaders yield ``(positions, x)`` batches, where ``positions`` index the loader's row set
and ``x`` is int8 (batch, n_variants), -1 missing. The batch order of an epoch is a
chunk-aware shuffle (:func:`epoch_order`): Zarr chunks are shuffled, grouped into
buffers of ``buffer_chunks`` chunks, and rows are shuffled inside each buffer. The
in-memory path (rows loaded once, batches drawn by index on the device) and the
streaming path (a background thread reads each buffer of chunks) use the same order,
so they give the same batches for the same seed.
"""

from __future__ import annotations

import hashlib
import queue
import threading
from dataclasses import dataclass

import numpy as np

from ..io import CmixError, one_blas_thread
from ..genotypes.store import load_rows
from .streams import SPLITS


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


def epoch_order(rows: np.ndarray, chunk_rows: int, seed_seq, buffer_chunks: int = 8,
                shuffle: bool = True) -> list[np.ndarray]:
    """Chunk-aware shuffled order of positions 0..len(rows)-1, as a list of buffers.

    rows: sorted store indices; chunk_rows: rows per Zarr chunk. Chunks are shuffled,
    grouped ``buffer_chunks`` at a time, and positions are shuffled inside each group.
    Without shuffle: one buffer per group of chunks, in store order.
    """
    chunk_of = np.asarray(rows) // chunk_rows
    chunks, starts = np.unique(chunk_of, return_index=True)
    bounds = np.append(starts, len(rows))
    rng = np.random.default_rng(seed_seq)
    chunk_order = rng.permutation(len(chunks)) if shuffle else np.arange(len(chunks))
    buffers = []
    for g in range(0, len(chunk_order), buffer_chunks):
        pos = np.concatenate([np.arange(bounds[c], bounds[c + 1])
                              for c in chunk_order[g:g + buffer_chunks]])
        buffers.append(rng.permutation(pos) if shuffle else pos)
    return buffers


class RowLoader:
    """Batches of a fixed row set of a store.

    mode "memory": the rows are read once (:func:`load_rows`) into a tensor on ``device``
    and batches are gathered by index there. mode "stream": a background thread reads
    each buffer of chunks (:func:`load_rows`), ``prefetch`` buffers ahead.
    Iterate with :meth:`batches` (``(positions, x)``; positions are a numpy int array
    into the row set, x an int8 tensor (batch, n_variants) on ``device``).
    """

    def __init__(self, root, rows: np.ndarray, *, batch_size: int, mode: str = "memory",
                 device="cpu", buffer_chunks: int = 8, prefetch: int = 2):
        import torch

        self.root = root
        self.rows = np.asarray(rows, dtype=np.int64)
        self.batch_size = int(batch_size)
        self.mode = mode
        self.device = torch.device(device)
        self.buffer_chunks = buffer_chunks
        self.prefetch = prefetch
        self.chunk_rows = int(root["call_dosage"].chunks[0])
        self.n_variants = int(root["call_dosage"].shape[1])
        self._x = None
        if mode == "memory":
            x = torch.from_numpy(load_rows(root, self.rows))
            self._x = x.to(self.device)
        elif mode != "stream":
            raise ValueError(f"unknown loader mode {mode!r}")

    def __len__(self) -> int:
        return len(self.rows)

    def n_batches(self, drop_last: bool = False) -> int:
        n = len(self.rows)
        return n // self.batch_size if drop_last else -(-n // self.batch_size)

    def batches(self, seed_seq=0, shuffle: bool = True, drop_last: bool = False):
        buffers = epoch_order(self.rows, self.chunk_rows, seed_seq, self.buffer_chunks, shuffle)
        if self.mode == "memory":
            yield from self._memory_batches(buffers, drop_last)
        else:
            yield from self._stream_batches(buffers, drop_last)

    def _split(self, order: np.ndarray, drop_last: bool):
        n = len(order)
        stop = n - n % self.batch_size if drop_last else n
        for s in range(0, stop, self.batch_size):
            yield order[s:s + self.batch_size]

    def _memory_batches(self, buffers, drop_last):
        import torch

        order = np.concatenate(buffers) if buffers else np.zeros(0, dtype=np.int64)
        if self.device.type == "cpu":       # numpy's take is ~20x torch's for int8 rows
            x_np = self._x.numpy()
            for pos in self._split(order, drop_last):
                yield pos, torch.from_numpy(np.take(x_np, pos, axis=0))
            return
        order_dev = torch.from_numpy(order).to(self.device)
        for s, pos in zip(range(0, len(order), self.batch_size), self._split(order, drop_last)):
            yield pos, self._x.index_select(0, order_dev[s:s + len(pos)])

    def _read_buffer(self, pos: np.ndarray):
        import torch

        sort = np.argsort(pos, kind="stable")
        block = load_rows(self.root, self.rows[pos[sort]])
        out = np.empty_like(block)
        out[sort] = block
        x = torch.from_numpy(out)
        if self.device.type == "cuda":
            x = x.pin_memory()
        return pos, x

    def _stream_batches(self, buffers, drop_last):
        import torch

        q: queue.Queue = queue.Queue(maxsize=max(1, self.prefetch))
        stop = threading.Event()

        def reader():
            try:
                for pos in buffers:
                    if stop.is_set():
                        return
                    q.put(self._read_buffer(pos))
            except BaseException as err:  # handed to the consumer
                q.put(err)
            q.put(None)

        thread = threading.Thread(target=reader, daemon=True)
        thread.start()
        pend_pos = np.zeros(0, dtype=np.int64)
        pend_x = torch.zeros((0, self.n_variants), dtype=torch.int8)
        try:
            while True:
                item = q.get()
                if isinstance(item, BaseException):
                    raise item
                if item is None:
                    break
                pos, x = item
                pend_pos = np.concatenate([pend_pos, pos])
                pend_x = torch.cat([pend_x, x]) if len(pend_x) else x
                while len(pend_pos) >= self.batch_size:
                    b = self.batch_size
                    yield pend_pos[:b], pend_x[:b].to(self.device, non_blocking=True)
                    pend_pos, pend_x = pend_pos[b:], pend_x[b:]
            if len(pend_pos) and not drop_last:
                yield pend_pos, pend_x.to(self.device, non_blocking=True)
        finally:
            stop.set()
            while thread.is_alive():
                try:
                    q.get_nowait()
                except queue.Empty:
                    thread.join(timeout=0.05)


def choose_mode(n_rows: int, n_variants: int, mode: str = "auto",
                memory_limit_bytes: int = 2 << 30) -> str:
    """"memory" when the rows fit in ``memory_limit_bytes`` (int8), else "stream"."""
    if mode in ("memory", "stream"):
        return mode
    if mode != "auto":
        raise CmixError(f"loader must be auto, memory or stream, not {mode!r}")
    return "memory" if n_rows * n_variants <= memory_limit_bytes else "stream"


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
    from sklearn.decomposition import PCA

    z = standardised_dosage(x_fit, mean, sd)
    p = max(1, min(n_pcs, len(z) - 1, z.shape[1]))
    with one_blas_thread():
        pca = PCA(p, svd_solver="randomized", random_state=int(seed) & 0x7FFFFFFF).fit(z)
        return pca.transform(z), pca


def project_pcs(pca, x: np.ndarray, mean: np.ndarray, sd: np.ndarray) -> np.ndarray:
    """(m, p) scores of int8 rows x (m, M) on the axes of :func:`standardised_pcs`."""
    with one_blas_thread():
        return pca.transform(standardised_dosage(x, mean, sd))
