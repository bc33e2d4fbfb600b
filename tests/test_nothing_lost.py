"""Data that must never be lost or misreported: what cmix deletes, what a reader holds,
which people a test split may contain, and which folders a run may write into.

Each test reproduces a way data was lost or a wrong result reported, and fails on code
that loses it.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from cmix.cli import main
from test_outputs import refused, tree_bytes
from test_report import full_cells, write_grid

SMALL = ["--n-samples", "60", "--n-variants", "300", "--fast"]


# ------------------------------------------------- a manifest names files inside its folder
@pytest.mark.parametrize("entry", ["absolute", "dotdot", "symlink"])
@pytest.mark.parametrize("command", ["simulate", "report"])
def test_a_manifest_entry_outside_its_folder_deletes_nothing(tmp_path, capsys, command, entry):
    """A folder's .cmix-manifest.json listing a file outside the folder (absolute, ``../``,
    or through a symlink inside it) made the rerun delete that file, exit 0. Now the
    rerun is refused naming the entry, and the file keeps its bytes."""
    victim = tmp_path / "elsewhere" / "precious.txt"
    victim.parent.mkdir()
    victim.write_text("a user's file\n")
    out = tmp_path / "out"
    if command == "simulate":
        args = ["simulate", "--out", out, *SMALL]
    else:
        write_grid(tmp_path / "runs", full_cells())
        args = ["report", "--runs", tmp_path / "runs", "--out", out]
    assert main([str(a) for a in args]) == 0
    capsys.readouterr()
    manifest = out / ".cmix-manifest.json"
    record = json.loads(manifest.read_text())
    if entry == "absolute":
        name = str(victim)
    elif entry == "dotdot":
        name = "../elsewhere/precious.txt"
    else:
        (out / "link").symlink_to(victim.parent)
        name = "link/precious.txt"
    record["files"].append(name)
    manifest.write_text(json.dumps(record))
    before = tree_bytes(victim)
    line = refused(capsys, args)
    assert repr(name) in line and "not a file inside" in line, line
    assert tree_bytes(victim) == before


def test_a_file_changed_since_cmix_wrote_it_is_never_removed_or_replaced(tmp_path, capsys):
    """A report file the user edited after cmix wrote it (its sha256 no longer the
    manifest's) is neither overwritten by a rerun nor removed as stale."""
    write_grid(tmp_path / "runs", full_cells())
    out = tmp_path / "rep"
    args = ["report", "--runs", str(tmp_path / "runs"), "--out", str(out)]
    assert main(args) == 0
    capsys.readouterr()
    record = json.loads((out / ".cmix-manifest.json").read_text())
    assert set(record["sha256"]) == set(record["files"])
    page = out / "report.html"
    page.write_text(page.read_text() + "<!-- my notes -->")
    before = tree_bytes(page)
    line = refused(capsys, args)
    assert "report.html" in line and "changed since" in line, line
    assert tree_bytes(page) == before


# ------------------------------------------------- a reader holds what it read
@pytest.fixture(scope="module")
def two_stores(tmp_path_factory):
    """Two toy stores of the same shape and different content."""
    from store_helpers import simulate_labels, write_test_store

    d = tmp_path_factory.mktemp("two_stores")
    for name, seed in (("a.zarr", 11), ("b.zarr", 12)):
        dosage, label = simulate_labels(400, 40, n_classes=2, n_causal=8, h2=0.8, seed=seed)
        write_test_store(d / name, dosage, label, sample_chunk=128)
    return d / "a.zarr", d / "b.zarr"


@pytest.mark.parametrize("method", ["logreg", "mlp"])
def test_a_store_replaced_during_training_writes_no_metrics(two_stores, tmp_path, capsys,
                                                            monkeypatch, method):
    """`cmix store --force` while `cmix train` read that store: train read the test rows
    from the new store and wrote metrics.json with the old store's sha256 (accuracy
    0.333 where the clean run gave 0.994), exit 0. Now the store is replaced after the
    run's last read and before its results: train stops with one line, no metrics."""
    import shutil

    import cmix.learn.results as results

    store = tmp_path / "s.zarr"
    shutil.copytree(two_stores[0], store)
    real = results.classification_metrics

    def replaced_then_scored(*args, **kwargs):
        shutil.rmtree(store)
        shutil.copytree(two_stores[1], store)
        return real(*args, **kwargs)

    monkeypatch.setattr(results, "classification_metrics", replaced_then_scored)
    out = tmp_path / "run"
    args = ["train", "--store", store, "--budget", "40", "--seed", "1", "--method", method,
            "--device", "cpu", "--out", out]
    if method == "mlp":
        (tmp_path / "quick.json").write_text(json.dumps({"pred_epochs": 3}))
        args += ["--config", tmp_path / "quick.json"]
    rc = main([str(a) for a in args])
    err = capsys.readouterr().err
    assert rc == 1, err
    assert "the store changed while this run read it" in err.strip().splitlines()[-1], err
    assert not (out / "metrics.json").exists() and not (out / "predictions.npz").exists()


def test_a_genotype_file_is_identified_by_its_content_not_its_time(tmp_path):
    """The store recorded the .bed's mtime: two identical workflow runs, or a copied .bed,
    got different store fingerprints and run keys. Now a copy with another mtime has the
    same identity, and a changed byte a different one."""
    import os

    from cmix.genotypes.store import bed_fingerprint

    rng = np.random.default_rng(0)
    data = rng.integers(0, 256, 3 << 20, dtype=np.uint8).tobytes()
    a, b = tmp_path / "a.bed", tmp_path / "b.bed"
    a.write_bytes(data)
    b.write_bytes(data)
    os.utime(b, (1e9, 1e9))
    assert bed_fingerprint(a) == bed_fingerprint(b)
    changed = bytearray(data)
    changed[len(data) // 2] ^= 1
    b.write_bytes(bytes(changed))
    assert bed_fingerprint(a) != bed_fingerprint(b)
