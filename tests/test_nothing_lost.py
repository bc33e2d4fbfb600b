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

    from cmix.genotypes.build_store import bed_fingerprint

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


# ------------------------------------------------- a run folder is one cmix made
@pytest.mark.parametrize("name", ["metrics.json", "train_log.jsonl", ".cmix.lock"])
def test_a_folder_with_a_file_of_a_run_files_name_is_not_a_run_folder(two_stores, tmp_path,
                                                                       capsys, name):
    """A folder holding one file with a run file's name (a user's own metrics.json, a
    stray .cmix.lock) was taken for a run folder and overwritten. Now it is refused
    before any work and keeps its bytes; the run file a run writes admits its folder."""
    out = tmp_path / "mine"
    out.mkdir()
    (out / name).write_text('{"accuracy": 0.99, "note": "my own result"}\n')
    before = tree_bytes(out)
    args = ["train", "--store", two_stores[0], "--budget", "40", "--seed", "1", "--method",
            "logreg", "--device", "cpu", "--out", out]
    line = refused(capsys, args)
    assert "holds files this command did not write" in line, line
    assert tree_bytes(out) == before
    run = tmp_path / "run"
    args[-1] = run
    assert main([str(a) for a in args]) == 0
    assert json.loads((run / ".cmix-run.json").read_text())["run_key"] == \
        json.loads((run / "metrics.json").read_text())["run_key"]
    (run / "metrics.json").unlink()                 # as Snakemake does before a rerun
    assert main([str(a) for a in args]) == 0
    assert (run / "metrics.json").is_file()


def test_shared_encoders_never_write_into_a_store(two_stores, tmp_path, capsys):
    """`--shared-encoders` naming a store wrote an encoder into it."""
    import shutil

    store = tmp_path / "s.zarr"
    shutil.copytree(two_stores[1], store)
    before = tree_bytes(store)
    line = refused(capsys, ["train", "--store", two_stores[0], "--budget", "40", "--seed", "1",
                            "--method", "cmix", "--device", "cpu", "--out", tmp_path / "run",
                            "--shared-encoders", store])
    assert "is a Zarr store" in line, line
    assert tree_bytes(store) == before


# ------------------------------------------------- the weak spots: one clear line, early
def test_a_full_disk_during_simulate_names_the_folder_and_file(tmp_path):
    import errno

    from cmix.errors import CmixError
    from cmix.outputs import staged_folder

    out = tmp_path / "cohort"
    with pytest.raises(CmixError) as err:
        with staged_folder(out) as tmp:
            (tmp / "genotypes.bim").write_text("1\trs1\t0\t1\tA\tG\n")
            raise OSError(errno.ENOSPC, "No space left on device", str(tmp / "genotypes.bed"))
    assert str(out) in str(err.value) and "genotypes.bed" in str(err.value)
    assert "no space left" in str(err.value) and not out.exists()


def test_a_folder_at_a_lock_path_and_another_users_lock_are_named(tmp_path):
    import os

    from cmix.errors import CmixError
    from cmix.locks import folder_lock, output_locks

    target = tmp_path / "snps.tsv"
    (tmp_path / ".snps.tsv.cmix.lock").mkdir()
    with pytest.raises(CmixError) as err:
        with output_locks([target], "cmix select"):
            pass
    assert str(err.value).startswith(f"{tmp_path / '.snps.tsv.cmix.lock'}: is a folder")
    if os.getuid() != 0:
        pytest.skip("another user's file needs root to make")
    other = tmp_path / "other.tsv"
    lock = tmp_path / ".other.tsv.cmix.lock"
    lock.write_text("cmix select (pid 1 on host)\n")
    os.chown(lock, 65534, 65534)
    run = tmp_path / "run"
    run.mkdir()
    (run / ".cmix.lock").write_text("cmix train (pid 1 on host)\n")
    os.chown(run / ".cmix.lock", 65534, 65534)
    for holder in (lambda: output_locks([other], "cmix select"),
                   lambda: folder_lock(run, "cmix train")):
        with pytest.raises(CmixError) as err:
            with holder():
                pass
        assert "belongs to" in str(err.value) and "another user's lock" in str(err.value)


@pytest.mark.parametrize("args, message", [
    (["simulate", "--n-samples", "1", "--out", "x"], "expected a cohort size from 2"),
    (["simulate", "--n-samples", "1000000000000", "--out", "x"], "to 10,000,000"),
    (["train", "--threads", "100000", "--store", "s", "--budget", "5", "--seed", "1",
      "--out", "r"], "expected a thread count from 1 to 1,024"),
])
def test_sizes_no_machine_holds_are_one_line(tmp_path, capsys, monkeypatch, args, message):
    """`--threads 100000`: an ImportError traceback then a segfault; `--n-samples 1e12`:
    MemoryError tracebacks; `--n-samples 1`: a numpy traceback. Now one line each."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as stop:
        main(args)
    err = capsys.readouterr().err.strip().splitlines()
    assert stop.value.code == 2 and message in err[-1], err
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize("key, value, message", [
    (("split", "test_fraction"), float("nan"), "split.test_fraction: nan is not a finite"),
    (("simulate", "n_samples"), 10 ** 12, "simulate.n_samples: 1000000000000 is greater"),
])
def test_check_config_refuses_what_no_run_could_use(tmp_path, capsys, key, value, message):
    """The demo config with one value no run could use passed `cmix check-config`."""
    import yaml

    cfg = yaml.safe_load((Path(__file__).parent.parent / "config/config.yaml").read_text())
    cfg[key[0]][key[1]] = value
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(cfg))
    line = refused(capsys, ["check-config", path])
    assert message in line, line


def test_check_config_does_not_read_a_device_forever(capsys):
    line = refused(capsys, ["check-config", "/dev/zero"])
    assert "not a workflow config (over 16 MiB" in line, line


def test_a_budget_that_leaves_no_validation_row_is_refused_before_training(tmp_path, capsys):
    """Budget 3 on 3 classes: every labeled row is its class's only training row, so no
    validation row passed, and the head kept its untrained start, exit 0. Now refused
    before any training (and by check-config for the workflow's grid)."""
    import yaml

    from store_helpers import simulate_labels, write_test_store

    dosage, label = simulate_labels(300, 20, n_classes=3, n_causal=5, h2=0.8, seed=3)
    store = tmp_path / "three.zarr"
    write_test_store(store, dosage, label, sample_chunk=128)
    out = tmp_path / "run"
    rc = main([str(a) for a in ["train", "--store", store, "--budget", "3", "--seed", "1",
                                "--method", "mlp", "--device", "cpu", "--out", out]])
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert rc == 1 and line.startswith("cmix train: error: "), line
    assert "leaves no validation row" in line and "at least 4" in line, line
    assert not (out / "metrics.json").exists() and not (out / "checkpoint.pt").exists()
    cfg = yaml.safe_load((Path(__file__).parent.parent / "config/config.yaml").read_text())
    n_classes = len(cfg["trait_definitions"]["hair_colour"]["classes"])
    cfg.update(traits=["hair_colour"], budgets=[n_classes], methods=["logreg", "mlp"])
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(cfg))
    line = refused(capsys, ["check-config", path])
    assert "leave no validation row" in line and "mlp" in line, line


def test_select_keep_without_clump_is_refused(tmp_path, capsys):
    """`cmix select --keep FILE` without --clump ignored the list (even a missing one)."""
    line = refused(capsys, ["select", "--sumstats", tmp_path / "ss.gz", "--bfile",
                            tmp_path / "g", "--keep", tmp_path / "absent.id", "--out",
                            tmp_path / "snps.tsv"])
    assert "--keep" in line and "no --clump was given" in line, line


def test_a_class_code_written_as_text_labels_as_the_integer_code_does():
    """A class code quoted in the config ('1') got a hint to write it with a decimal
    point; it is a valid text code now, compared with the table's cells as written."""
    import pandas as pd

    from cmix.genotypes.phenotypes import class_labels

    ids = np.array(["a", "b", "c", "d"])
    pheno = pd.DataFrame({"f.1.0.0": ["1", "2", "", "1"]}, index=ids)
    as_int = class_labels(pheno, "f.1.0.0", {"x": [1], "y": [2]}, ids, "p.tsv", "t")[0]
    as_text = class_labels(pheno, "f.1.0.0", {"x": ["1"], "y": ["2"]}, ids, "p.tsv", "t")[0]
    assert as_int.tolist() == as_text.tolist() == [0, 1, -1, 0]


def test_check_config_refuses_more_pcs_than_the_simulated_sample_qc_holds(tmp_path, capsys):
    """`covariates.pcs: 50` on the simulated demo (whose sample_qc.tsv holds 10 PCs)
    passed check-config and failed in the store jobs."""
    import yaml

    from cmix.simulate.sample_qc import SIMULATED_PCS

    cfg = yaml.safe_load((Path(__file__).parent.parent / "config/config.yaml").read_text())
    cfg["covariates"] = {"fields": [21022, 31], "pcs": SIMULATED_PCS + 40,
                         "pcs_from": "sample_qc"}
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(cfg))
    line = refused(capsys, ["check-config", path])
    assert f"holds {SIMULATED_PCS}" in line and "covariates.pcs" in line, line


def test_check_config_refuses_more_neighbours_than_graph_rows(tmp_path, capsys):
    """`lp_k` above the number of rows passed check-config (the search then took every
    row as a neighbour)."""
    import yaml

    cfg = yaml.safe_load((Path(__file__).parent.parent / "config/config.yaml").read_text())
    cfg.setdefault("train", {}).setdefault("config", {})["lp_k"] = 10 ** 6
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(cfg))
    line = refused(capsys, ["check-config", path])
    assert "lp_k = 1000000 neighbours" in line, line


def test_budget_12_on_5_classes_trains_to_its_end(tmp_path, capsys):
    """Budget 12 on 5 classes was refused only after pre-training (the judge's folds left
    classes without rows). Now it runs to its metrics: the judge, unable to score every
    row, keeps the run without pseudo-labels, and says so."""
    from store_helpers import simulate_labels, write_test_store

    dosage, label = simulate_labels(400, 20, n_classes=5, n_causal=5, h2=0.8, seed=4)
    store = tmp_path / "five.zarr"
    write_test_store(store, dosage, label, sample_chunk=128)
    cfg = tmp_path / "tiny.json"
    cfg.write_text(json.dumps({"epochs": 2, "warmup_epochs": 1, "lp_every": 1,
                               "pred_epochs": 3, "hidden": 16, "d_proj": 8}))
    out = tmp_path / "run"
    assert main(["train", "--store", str(store), "--budget", "12", "--seed", "1", "--method",
                 "cmix", "--device", "cpu", "--config", str(cfg), "--out", str(out)]) == 0
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["n_labeled"] == 12 and metrics["pseudo_labels"]["used"] is False
    assert "the judge could not score every labeled row" in capsys.readouterr().err
