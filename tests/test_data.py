"""Splits and loaders of cmix.learn.data on small simulated stores."""

import numpy as np
import pytest

from cmix.learn.data import RowSource, chunk_aware_order, make_splits
from cmix.store.read import load_rows
from cmix.errors import CmixError
from cmix.store.read import open_store
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


def test_row_sources_give_the_same_batches_in_every_mode(store3):
    """Rows held on the device, in host memory, or streamed from the store through the
    chunk cache (a cache smaller than the store): the same batches for the same
    positions, each the source array's rows."""
    import torch

    from cmix.learn.streams import Draws, model_keys

    path, dosage, _ = store3
    root = open_store(path)
    rows = np.sort(np.random.default_rng(0).choice(900, 500, replace=False))
    sources = [RowSource(root, rows, "cpu", mode) for mode in ("device", "host")]
    sources.append(RowSource(root, rows, "cpu", "stream", cache_chunks=3, prefetch=2))
    keys = model_keys([1, 2], 2)
    store_rows = torch.from_numpy(rows).expand(2, -1).contiguous()
    counts = torch.tensor([500, 480])
    for epoch in (0, 1):
        order = chunk_aware_order(Draws(keys, epoch), store_rows, counts, 64, 15, 3)
        sched = order[:, :480].reshape(2, 10, 48)
        batches = [list(src.steps(sched)) for src in sources]
        for step in range(10):
            for b in batches[1:]:
                assert torch.equal(b[step], batches[0][step])
            for g in range(2):
                assert np.array_equal(batches[0][step][g].numpy(),
                                      dosage[rows[sched[g, step].numpy()]])
    with pytest.raises(ValueError, match="unknown row source"):
        RowSource(root, rows, "cpu", "disk")


def test_chunk_aware_order_is_a_shuffle_per_model_and_epoch():
    """Each model's order holds each of its rows once, its padding last; a buffer of
    consecutive positions reads at most buffer_chunks chunks; another epoch or another
    model's key gives another order, the same key and epoch the same one (on any device
    the integers are the same)."""
    import torch

    from cmix.learn.streams import Draws, model_keys

    rows = torch.from_numpy(np.arange(0, 1000, 3)).expand(2, -1).contiguous()
    n = rows.shape[1]
    counts = torch.tensor([n, n - 40])
    keys = model_keys([4, 5], 2)
    order = chunk_aware_order(Draws(keys, 0), rows, counts, 64, 16, 2)
    for g in range(2):
        c = int(counts[g])
        assert np.array_equal(np.sort(order[g, :c].numpy()), np.arange(c))
        assert np.array_equal(np.sort(order[g, c:].numpy()), np.arange(c, n))
        chunks = rows[g].numpy()[order[g, :c].numpy()] // 64
        # greedy segments of at most 2 distinct chunks: one per buffer of 2 chunks, and a
        # chunk's rows all in one segment
        segments, cur = [], set()
        for ch in chunks:
            if ch not in cur and len(cur) == 2:
                segments.append(cur)
                cur = set()
            cur.add(ch)
        segments.append(cur)
        n_chunks = len(np.unique(chunks))
        assert len(segments) == -(-n_chunks // 2)
        assert sum(len(seg) for seg in segments) == n_chunks
    assert not torch.equal(order[0], chunk_aware_order(Draws(keys, 1), rows, counts, 64, 16, 2)[0])
    assert torch.equal(order, chunk_aware_order(Draws(keys, 0), rows, counts, 64, 16, 2))
    assert not torch.equal(order[0, :n - 40], order[1, :n - 40])


def test_the_draws_hash_is_its_python_integer_definition():
    """The int32 finaliser (logical shifts, products wrapping modulo 2^32) gives the
    32-bit arithmetic of its definition on Python integers, on every value tried."""
    import torch

    from cmix.learn.streams import _mix32, _mix32_int

    x = torch.randint(-2 ** 31, 2 ** 31 - 1, (20000,), dtype=torch.int32,
                      generator=torch.Generator().manual_seed(0))
    x = torch.cat([x, torch.tensor([0, -1, 2 ** 31 - 1, -2 ** 31], dtype=torch.int32)])
    got = (_mix32(x).to(torch.int64) & 0xFFFFFFFF).tolist()
    assert got == [_mix32_int(int(v) & 0xFFFFFFFF) for v in x.tolist()]


def test_draws_are_uniform_and_a_model_s_own():
    """The device draws: uniform on [0, 1) (a chi-square check of 20 bins), another model
    or another counter gives others, a model's values do not depend on the models beside
    it."""
    from scipy.stats import chisquare

    from cmix.learn.streams import Draws, model_keys

    keys = model_keys([1, 2, 3], 7)
    u = Draws(keys, 5, 9).uniform(200_000)
    assert float(u.min()) >= 0.0 and float(u.max()) < 1.0
    counts = np.histogram(u[0].numpy(), bins=20, range=(0, 1))[0]
    assert chisquare(counts).pvalue > 1e-3
    assert not np.array_equal(u[0].numpy(), u[1].numpy())
    assert not np.array_equal(u[0].numpy(), Draws(keys, 5, 10).uniform(200_000)[0].numpy())
    alone = Draws(model_keys([2], 7), 5, 9).uniform(200_000)
    assert np.array_equal(alone[0].numpy(), u[1].numpy())
    # a second call within a step gives fresh values
    d = Draws(keys, 5, 9)
    assert not np.array_equal(d.uniform(10).numpy(), d.uniform(10).numpy())


def test_load_rows_matches_source(store3):
    path, dosage, _ = store3
    rows = np.array([0, 63, 64, 65, 500, 899])
    assert np.array_equal(load_rows(open_store(path), rows), dosage[rows])


@pytest.mark.parametrize("read_chunks", [1, 2, 64])
def test_load_rows_reads_only_touched_chunks_in_runs(store3, monkeypatch, read_chunks):
    """Rows spread over runs of chunks, gaps and the short last chunk (900 rows of 64 a
    chunk) come back as the source's, however many chunks one read may take; no chunk
    that holds none of the rows is read."""
    from cmix.store import read as store_read

    path, dosage, _ = store3
    monkeypatch.setattr(store_read, "READ_CHUNKS", read_chunks)
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
