"""Splits and loaders of cmix.learn.data on small simulated stores."""

import numpy as np
import pytest

from cmix.learn.data import RowLoader, epoch_order, make_splits
from cmix.genotypes.store import load_rows
from cmix.io import CmixError
from cmix.genotypes.store import open_store
from store_helpers import simulate_labels, write_test_store


@pytest.fixture(scope="module")
def store3(tmp_path_factory):
    dosage, label = simulate_labels(900, 40, n_classes=3, seed=5)
    path = tmp_path_factory.mktemp("data") / "t.zarr"
    write_test_store(path, dosage, label, sample_chunk=64)
    return path, dosage, label


def test_splits_exact_stratified_disjoint(store3):
    path, dosage, label = store3
    root = open_store(path)
    split = np.asarray(root["sample_split"][:])
    s = make_splits(root, 60, seed=123, val_fraction=0.2)
    labeled = s.labeled
    assert len(labeled) == 60 and len(s.validation) == 12
    assert np.all(split[labeled] == 0) and np.array_equal(s.test, np.flatnonzero(split == 1))
    assert set(s.validation) <= set(labeled)
    assert not set(labeled) & set(s.unlabeled)
    assert len(labeled) + len(s.unlabeled) == np.sum(split == 0)
    # stratified: class counts within 1 of the training split's proportions
    train = np.flatnonzero(split == 0)
    want = np.bincount(label[train], minlength=3) / len(train) * 60
    assert np.all(np.abs(np.bincount(label[labeled], minlength=3) - want) <= 1)
    for c in range(3):
        assert np.any(label[s.train_labeled] == c)
    # same test split for another budget and seed; different labeled subset per seed
    s2 = make_splits(root, 200, seed=127)
    assert np.array_equal(s2.test, s.test) and s2.test_hash == s.test_hash
    assert not np.array_equal(make_splits(root, 60, seed=127).labeled, labeled)
    assert np.array_equal(make_splits(root, 60, seed=123).labeled, labeled)


def test_budget_errors(store3):
    path, _, _ = store3
    root = open_store(path)
    n_train = int(np.sum(np.asarray(root["sample_split"][:]) == 0))
    with pytest.raises(CmixError, match="larger than the training split"):
        make_splits(root, n_train + 1, 1)
    with pytest.raises(CmixError, match="smaller than the number of classes"):
        make_splits(root, 2, 1)
    s = make_splits(root, 3, 1)       # one row per class, none can go to validation
    assert len(s.train_labeled) == 3 and len(np.unique(s.label[s.train_labeled])) == 3


def test_class_absent_from_training_split(tmp_path):
    dosage, label = simulate_labels(200, 10, n_classes=2, seed=1)
    label = label.copy()
    label[:5] = 2
    path = tmp_path / "absent.zarr"
    write_test_store(path, dosage, label, test_fraction=0.25)
    import zarr
    root = zarr.open_group(str(path), mode="r+", zarr_format=2)
    split = root["sample_split"][:]
    split[:5] = 1                      # class 2 only in the test split
    root["sample_split"][:] = split
    with pytest.raises(CmixError, match="no sample in the training"):
        make_splits(open_store(path), 50, 1)


def test_loaders_memory_and_stream_give_same_batches(store3):
    path, dosage, _ = store3
    root = open_store(path)
    rows = np.sort(np.random.default_rng(0).choice(900, 500, replace=False))
    mem = RowLoader(root, rows, batch_size=48, mode="memory", buffer_chunks=3)
    stream = RowLoader(root, rows, batch_size=48, mode="stream", buffer_chunks=3, prefetch=2)
    for seed in ([1, 2, 0], [1, 2, 1]):
        a = list(mem.batches(seed_seq=seed))
        b = list(stream.batches(seed_seq=seed))
        assert len(a) == len(b) == mem.n_batches()
        for (pa, xa), (pb, xb) in zip(a, b):
            assert np.array_equal(pa, pb) and np.array_equal(xa.numpy(), xb.numpy())
            assert np.array_equal(xa.numpy(), dosage[rows[pa]])     # against the source array
        seen = np.concatenate([p for p, _ in a])
        assert np.array_equal(np.sort(seen), np.arange(500))       # each row once per epoch
    # shuffled differently per epoch, in store order without shuffle
    p0 = np.concatenate([p for p, _ in mem.batches(seed_seq=[1, 2, 0])])
    p1 = np.concatenate([p for p, _ in mem.batches(seed_seq=[1, 2, 1])])
    assert not np.array_equal(p0, p1)
    ordered = np.concatenate([p for p, _ in stream.batches(shuffle=False)])
    assert np.array_equal(ordered, np.arange(500))
    assert len(list(mem.batches(seed_seq=0, drop_last=True))) == 500 // 48


def test_epoch_order_is_chunk_aware():
    rows = np.arange(0, 1000, 3)
    buffers = epoch_order(rows, chunk_rows=64, seed_seq=4, buffer_chunks=2)
    for pos in buffers:
        assert len(np.unique(rows[pos] // 64)) <= 2      # a buffer reads at most 2 chunks
    assert np.array_equal(np.sort(np.concatenate(buffers)), np.arange(len(rows)))


def test_load_rows_matches_source(store3):
    path, dosage, _ = store3
    rows = np.array([0, 63, 64, 65, 500, 899])
    assert np.array_equal(load_rows(open_store(path), rows), dosage[rows])


@pytest.mark.parametrize("read_chunks", [1, 2, 64])
def test_load_rows_reads_only_touched_chunks_in_runs(store3, monkeypatch, read_chunks):
    """Rows spread over runs of chunks, gaps and the short last chunk (900 rows of 64 a
    chunk) come back as the source's, however many chunks one read may take; no chunk
    that holds none of the rows is read."""
    from cmix.genotypes import store as store_mod

    path, dosage, _ = store3
    monkeypatch.setattr(store_mod, "READ_CHUNKS", read_chunks)
    root = open_store(path)
    reads = []
    real = type(root["call_dosage"]).__getitem__
    monkeypatch.setattr(type(root["call_dosage"]), "__getitem__",
                        lambda self, key: reads.append(key) or real(self, key))
    rng = np.random.default_rng(3)

    def rows_read(key):                       # the rows of one slice read from call_dosage
        return np.arange(900)[key[0] if isinstance(key, tuple) else key]

    for rows in (np.arange(900), np.array([5]), np.array([899]),
                 np.r_[np.arange(0, 10), np.arange(200, 330), np.arange(890, 900)],
                 np.sort(rng.choice(900, 77, replace=False))):
        reads.clear()
        assert np.array_equal(load_rows(root, rows), dosage[rows])
        read_rows = np.concatenate([rows_read(k) for k in reads])
        assert set(read_rows // 64) == set(rows // 64)          # touched chunks, each once
        assert len(read_rows) == len(np.unique(read_rows))
        assert all(len(rows_read(k)) <= 64 * read_chunks for k in reads)
