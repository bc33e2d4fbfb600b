"""What cmix refuses rather than give a wrong number: stale runs after a store or config
change, damaged stores, concurrent runs into one folder, a full disk, incomplete grids in
the report, bad config values and leftovers of killed steps.

Each test checks the exit status, that the first line of the message names the file and
the problem, and that nothing that looks complete was left.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from cmix.store.read import open_store, store_fingerprint
from cmix.store.schema import DOSAGE_FILL
from cmix.cli import main
from cmix.store.read import load_rows
from cmix.atomic import atomic_path
from cmix.errors import CmixError
from cmix.locks import folder_lock

sys.path.insert(0, str(Path(__file__).parent))
from store_helpers import simulate_labels, write_test_store  # noqa: E402

FAST = {"hidden": 16, "d_proj": 8, "epochs": 2, "warmup_epochs": 1, "lp_every": 1,
        "batch_size": 64, "labeled_batch_size": 32, "pred_epochs": 3, "pred_patience": 2,
        "pred_hidden": 16}


def first_error_line(capsys) -> str:
    err = [line for line in capsys.readouterr().err.splitlines() if "error:" in line]
    assert err, "no error line printed"
    return err[0]


@pytest.fixture
def two_stores(tmp_path):
    """Two stores with the same samples, labels, test split and SNP count but other
    dosages (a store rebuilt with other SNPs)."""
    dosage_a, label = simulate_labels(320, 40, seed=1)
    dosage_b, _ = simulate_labels(320, 40, seed=2)
    a = write_test_store(tmp_path / "a.zarr", dosage_a, label, sample_chunk=64)
    b = write_test_store(tmp_path / "b.zarr", dosage_b, label, sample_chunk=64)
    return a, b


def train_args(store, out, cfg_file, method="cmix", seed=1):
    return ["train", "--store", str(store), "--budget", "60", "--seed", str(seed),
            "--method", method, "--config", str(cfg_file), "--device", "cpu", "--out", str(out)]


@pytest.mark.parametrize("change", ["store_content", "config"])
def test_changed_store_or_config_starts_a_fresh_run(two_stores, tmp_path, change):
    """A rerun into a folder whose checkpoint is of another run (the store rebuilt with
    other SNPs, or the config changed) after its metrics.json was removed, as Snakemake
    does before a rerun, gives the metrics of a fresh run, not the old model's."""
    a, b = two_stores
    cfg = tmp_path / "cfg.json"
    cfg.write_text(json.dumps(FAST))
    run = tmp_path / "run"
    store = tmp_path / "trait.zarr"
    shutil.copytree(a, store)
    assert main(train_args(store, run, cfg)) == 0
    (run / "metrics.json").unlink()
    if change == "store_content":
        shutil.rmtree(store)
        shutil.copytree(b, store)
    else:
        cfg.write_text(json.dumps({**FAST, "pred_lr": 3e-3}))
    assert main(train_args(store, run, cfg)) == 0
    fresh = tmp_path / "fresh"
    assert main(train_args(store, fresh, cfg)) == 0
    rerun = json.loads((run / "metrics.json").read_text())
    want = json.loads((fresh / "metrics.json").read_text())
    assert rerun["test"] == want["test"]
    assert rerun["store_sha256"] == want["store_sha256"] == store_fingerprint(
        open_store(store))


def test_finished_run_of_other_store_is_not_overwritten(two_stores, tmp_path, capsys):
    a, b = two_stores
    cfg = tmp_path / "cfg.json"
    cfg.write_text(json.dumps(FAST))
    run = tmp_path / "run"
    assert main(train_args(a, run, cfg, method="mlp")) == 0
    before = (run / "metrics.json").read_text()
    assert main(train_args(b, run, cfg, method="mlp")) == 1
    line = first_error_line(capsys)
    assert str(run) in line and "finished run with another store content" in line
    assert (run / "metrics.json").read_text() == before


def test_report_refuses_runs_of_different_store_contents(two_stores, tmp_path, capsys):
    a, b = two_stores
    cfg = tmp_path / "cfg.json"
    cfg.write_text(json.dumps(FAST))
    runs = tmp_path / "runs"
    assert main(train_args(a, runs / "s1", cfg, method="logreg", seed=1)) == 0
    assert main(train_args(b, runs / "s2", cfg, method="logreg", seed=2)) == 0
    assert main(["report", "--runs", str(runs), "--out", str(tmp_path / "rep")]) == 1
    assert "2 different store contents" in first_error_line(capsys)
    assert not (tmp_path / "rep" / "report.html").exists()
    # a stale run outside the grid asked for (seed 2 of the other store) stops nothing
    grid = ["--traits", "t", "--methods", "logreg", "--budgets", "40", "--seeds", "1"]
    trait = json.loads((runs / "s1" / "metrics.json").read_text())["trait"]
    budget = json.loads((runs / "s1" / "metrics.json").read_text())["budget"]
    grid[1], grid[5] = trait, str(budget)
    assert main(["report", "--runs", str(runs), "--out", str(tmp_path / "rep"), *grid]) == 0
    assert (tmp_path / "rep" / "report.html").exists()


# ------------------------------------------------------------------ damaged stores
def chunk_file(store: Path, i: int = 1) -> Path:
    return store / "call_dosage" / f"{i}.0"


def damage(store: Path, how: str) -> None:
    f = chunk_file(store)
    if how == "flip":
        raw = bytearray(f.read_bytes())
        mid = len(raw) // 2
        raw[mid:mid + 64] = bytes(b ^ 0xFF for b in raw[mid:mid + 64])
        f.write_bytes(bytes(raw))
    elif how == "delete":
        f.unlink()
    elif how == "truncate":
        f.write_bytes(f.read_bytes()[:20])
    elif how == "extra_chunk":
        shutil.copy(f, store / "call_dosage" / "99.0")


@pytest.mark.parametrize("how", ["flip", "delete", "truncate", "extra_chunk"])
def test_damaged_store_stops_train_and_verify(two_stores, tmp_path, capsys, how):
    a, _ = two_stores
    damage(a, how)
    cfg = tmp_path / "cfg.json"
    cfg.write_text(json.dumps(FAST))
    for method in ("cmix", "logreg"):
        run = tmp_path / f"run_{method}"
        assert main(train_args(a, run, cfg, method=method)) == 1
        line = first_error_line(capsys)
        assert f"{a}: damaged store" in line and "call_dosage/" in line
        assert not (run / "metrics.json").exists()
    assert main(["verify", str(a)]) == 1
    assert f"{a}: damaged store" in first_error_line(capsys)


def test_changed_group_attributes_are_caught(two_stores, tmp_path, capsys):
    """Class names swapped in the store's root .zattrs relabel every prediction; verify
    and train said nothing of it."""
    import shutil

    a, _ = two_stores
    store = tmp_path / "s.zarr"
    shutil.copytree(a, store)
    zattrs = next(f for f in (store / "zarr.json", store / ".zattrs") if f.exists())
    meta = json.loads(zattrs.read_text())
    attrs = meta.get("attributes", meta)
    attrs["class_names"] = attrs["class_names"][::-1]
    zattrs.write_text(json.dumps(meta))
    assert main(["verify", str(store)]) == 1
    assert "its group attributes (.zattrs" in first_error_line(capsys)
    cfg = tmp_path / "cfg.json"
    cfg.write_text(json.dumps(FAST))
    assert main(train_args(store, tmp_path / "run", cfg, method="logreg")) == 1
    assert "have changed" in first_error_line(capsys)


def test_verify_accepts_an_intact_store(two_stores, capsys):
    a, b = two_stores
    assert main(["verify", str(a), str(b)]) == 0
    assert "OK" in capsys.readouterr().err


def test_absent_chunk_never_reads_as_dosages(two_stores):
    """Past the checksum check (a chunk lost while training), an absent chunk reads as
    the fill value, which every read rejects, never as valid all-zero dosages."""
    a, _ = two_stores
    root = open_store(a)
    chunk_file(a).unlink()
    assert root["call_dosage"].fill_value == DOSAGE_FILL
    with pytest.raises(CmixError, match=r"a.zarr: call_dosage chunk 1.0 .* holds -128, "
                                        r"outside -1..2"):
        load_rows(root, np.arange(0, 200))
    assert load_rows(root, np.arange(0, 64)).shape == (64, 40)      # chunk 0 is intact


def test_store_removed_while_in_use(two_stores):
    a, _ = two_stores
    root = open_store(a)
    shutil.rmtree(a)
    with pytest.raises(CmixError, match="a.zarr: (cannot read|call_dosage chunk)"):
        load_rows(root, np.arange(0, 200))


def test_old_store_format_is_refused(two_stores, capsys, tmp_path):
    a, _ = two_stores
    attrs_file = a / ".zattrs"
    attrs = json.loads(attrs_file.read_text())
    del attrs["checksums"]
    attrs["cmix_store_version"] = 1
    attrs_file.write_text(json.dumps(attrs))
    assert main(["verify", str(a)]) == 1
    assert "store format 1" in first_error_line(capsys)


# ------------------------------------------------------------------ one run per folder
def test_second_run_into_a_busy_folder_fails_fast(two_stores, tmp_path, capsys):
    a, _ = two_stores
    cfg = tmp_path / "cfg.json"
    cfg.write_text(json.dumps(FAST))
    run = tmp_path / "run"
    with folder_lock(run, "cmix train --method cmix --budget 60 --seed 1"):
        assert main(train_args(a, run, cfg, seed=2)) == 1
        line = first_error_line(capsys)
        assert f"{run}: in use by cmix train --method cmix --budget 60 --seed 1 (pid " \
               f"{os.getpid()}" in line
        assert not (run / "metrics.json").exists() and not (run / "checkpoint.pt").exists()
    assert main(train_args(a, run, cfg, seed=2)) == 0      # released with the holder


def test_lock_is_released_when_the_holder_is_killed(tmp_path):
    run = tmp_path / "run"
    code = ("import sys, time; from cmix.locks import folder_lock\n"
            "with folder_lock(sys.argv[1], 'holder'):\n"
            "    print('held', flush=True); time.sleep(60)\n")
    proc = subprocess.Popen([sys.executable, "-c", code, str(run)], stdout=subprocess.PIPE,
                            text=True)
    try:
        assert proc.stdout.readline().strip() == "held"
        with pytest.raises(CmixError, match="in use by holder"):
            with folder_lock(run, "second"):
                pass
    finally:
        proc.kill()
        proc.wait()
    with folder_lock(run, "second"):
        pass



@pytest.mark.parametrize("kind", ["symlink", "hardlink"])
def test_lock_file_linked_elsewhere_is_refused_and_left_alone(two_stores, tmp_path, capsys,
                                                              kind):
    """A .cmix.lock that is a symbolic or hard link to another file: train refuses,
    naming the lock file, and the file it points to keeps its bytes."""
    a, _ = two_stores
    cfg = tmp_path / "cfg.json"
    cfg.write_text(json.dumps(FAST))
    run = tmp_path / "run"
    run.mkdir()
    precious = tmp_path / "precious.txt"
    precious.write_text("keep me\n")
    if kind == "symlink":
        (run / ".cmix.lock").symlink_to(precious)
    else:
        os.link(precious, run / ".cmix.lock")
    assert main(train_args(a, run, cfg, seed=2)) == 1
    line = first_error_line(capsys)
    assert f"{run / '.cmix.lock'}: " in line
    assert ("symbolic link" if kind == "symlink" else "not a lock file cmix made") in line
    assert precious.read_text() == "keep me\n"
    assert not (run / "metrics.json").exists() and not (run / "checkpoint.pt").exists()


_KILL_BETWEEN_RENAMES = """
import os, sys
from cmix import atomic
names = [sys.argv[1] + s for s in (".a", ".b", ".c")]
real, n = os.replace, [0]
def replace(src, dst):
    n[0] += 1
    if n[0] == 2:
        os.kill(os.getpid(), 9)
    real(src, dst)
atomic.os.replace = replace
with atomic.atomic_outputs(*names) as tmps:
    for t in tmps:
        open(t, "w").write("new")
"""


def test_multi_file_outputs_never_mix_old_and_new(tmp_path):
    """A step killed (SIGKILL) between renaming its outputs into place leaves no new file
    beside an old one: the files there are all of one generation, and at least one is
    missing, so the set does not look finished. The next run completes it."""
    out = tmp_path / "pcs"
    for s in (".a", ".b", ".c"):
        Path(f"{out}{s}").write_text("old")
    r = subprocess.run([sys.executable, "-c", _KILL_BETWEEN_RENAMES, str(out)])
    assert r.returncode == -9
    texts = {s: Path(f"{out}{s}").read_text() for s in (".a", ".b", ".c")
             if Path(f"{out}{s}").exists()}
    assert len(set(texts.values())) <= 1 and len(texts) < 3, texts
    from cmix.atomic import atomic_outputs

    with atomic_outputs(*[f"{out}{s}" for s in (".a", ".b", ".c")]) as tmps:
        for t in tmps:
            t.write_text("new")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pcs.a", "pcs.b", "pcs.c"]


def test_resume_from_a_corrupted_checkpoint_names_it(two_stores, tmp_path, capsys):
    """--resume from a checkpoint with one flipped bit: one message naming the
    checkpoint and the CRC failure, exit 1, no metrics.json."""
    import zipfile

    a, _ = two_stores
    cfg = tmp_path / "cfg.json"
    cfg.write_text(json.dumps(FAST))
    run = tmp_path / "run"
    assert main(train_args(a, run, cfg)) == 0
    (run / "metrics.json").unlink()
    ckpt = run / "checkpoint.pt"
    with zipfile.ZipFile(ckpt) as zf:         # the largest tensor's bytes
        info = max((i for i in zf.infolist() if "/data/" in i.filename),
                   key=lambda i: i.compress_size)
    data = bytearray(ckpt.read_bytes())
    name_len, extra_len = np.frombuffer(bytes(data[info.header_offset + 26:
                                                   info.header_offset + 30]), "<u2")
    data[info.header_offset + 30 + int(name_len) + int(extra_len)
         + info.compress_size // 2 + 3] ^= 0x40      # an exponent bit of a float32
    ckpt.write_bytes(bytes(data))
    assert main([*train_args(a, run, cfg), "--resume"]) == 1
    line = first_error_line(capsys)
    assert f"{ckpt}: corrupt checkpoint (member" in line and "CRC32" in line
    assert "bug" not in line
    assert not (run / "metrics.json").exists()

# ------------------------------------------------------------------ config values
@pytest.mark.parametrize("text,key,want", [('{"lr": "abc"}', "lr", "a number"),
                                           ('{"epochs": 2.5}', "epochs", "an integer"),
                                           ('{"batchnorm": "yes"}', "batchnorm", "true or false"),
                                           ('{"vime_k": "3"}', "vime_k", "an integer"),
                                           # 0 epochs or patience: the head's random start
                                           ('{"pred_patience": 0}', "pred_patience",
                                            "an integer >= 1"),
                                           ('{"pred_epochs": 0}', "pred_epochs",
                                            "an integer >= 1"),
                                           ('{"preset": ["cpu"]}', "preset", "one of")])
def test_bad_config_values(two_stores, tmp_path, capsys, text, key, want):
    a, _ = two_stores
    cfg = tmp_path / "cfg.json"
    cfg.write_text(text)
    method = "vime" if key.startswith("vime") else "cmix"
    assert main(train_args(a, tmp_path / "run", cfg, method=method)) == 1
    line = first_error_line(capsys)
    assert f"{cfg}: {key} = " in line and f"expected {want}" in line


@pytest.mark.parametrize("seed, want", [("-3", "expected an integer >= 0, got -3"),
                                        ("4294967296", "expected a seed <= 2^32 - 1")])
@pytest.mark.parametrize("step", ["train", "simulate", "pca", "store", "gwas"])
def test_seeds_out_of_range_are_refused_by_every_step(tmp_path, capsys, step, seed, want):
    """numpy takes no negative seed (a traceback, after work was done), and the random
    streams keep 32 bits (seed 2^32 + 1 would repeat seed 1's draws)."""
    flag = {"store": "--split-seed", "gwas": "--discovery-seed"}.get(step, "--seed")
    with pytest.raises(SystemExit) as stop:
        main([step, flag, seed, "--out", str(tmp_path / "o")])
    assert stop.value.code == 2
    assert want in capsys.readouterr().err
    assert not list(tmp_path.iterdir())


def test_yaml_exponent_without_dot_is_a_number(two_stores, tmp_path):
    from cmix.learn.config import read_config_file, resolve_config

    cfg = tmp_path / "cfg.yaml"
    cfg.write_text("lr: 1e-3\n")
    assert resolve_config(read_config_file(cfg)).pretrain.lr == 1e-3


def test_config_sections_hold_the_flat_keys_as_written():
    """Each key lands in its section and comes back in the flat mapping a checkpoint keeps
    (keys in the defaults' order, values as written: an int for a float key stays an int,
    so the run key does not move); a flat mapping without a later key takes its default."""
    from cmix.learn.config import DEFAULTS, SECTION_OF, Config, resolve_config

    user = {"lp_k": 10, "lr": 1, "hidden": None, "vime_k": 5, "mix": "random",
            "pred_refit": False, "gbdt_lr": 0.05}
    cfg = resolve_config(user)
    want = {**DEFAULTS, **user}
    assert cfg.flat() == want and list(cfg.flat()) == list(DEFAULTS)
    assert type(cfg.pretrain.lr) is int and cfg.pseudo_labels.lp_k == 10
    assert all(getattr(getattr(cfg, SECTION_OF[k]), k) == v for k, v in want.items())
    assert Config.from_flat(cfg.flat()) == cfg
    older = {k: v for k, v in cfg.flat().items() if k != "pred_dropout"}
    assert Config.from_flat(older) == cfg
    assert cfg.with_keys(predictor_mixup=False).flat() == {**want, "predictor_mixup": False}
    with pytest.raises(KeyError, match="predictor_mixpu"):
        cfg.with_keys(predictor_mixpu=False)


# ------------------------------------------------------------------ full disk
@pytest.fixture
def tiny_disk(tmp_path):
    """A 256 KiB tmpfs (needs root and mount rights; skipped elsewhere)."""
    mnt = tmp_path / "full"
    mnt.mkdir()
    res = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(mnt)],
                         capture_output=True, text=True)
    if res.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here ({res.stderr.strip()})")
    yield mnt
    subprocess.run(["umount", str(mnt)], check=False)


def test_full_disk_in_train_and_store(two_stores, tiny_disk, tmp_path, capsys):
    a, _ = two_stores
    cfg = tmp_path / "cfg.json"
    cfg.write_text(json.dumps({**FAST, "hidden": 512}))   # checkpoint > 256 KiB
    run = tiny_disk / "run"
    assert main(train_args(a, run, cfg)) == 1
    line = first_error_line(capsys)
    assert "checkpoint.pt: no space left on device" in line
    assert not (run / "metrics.json").exists() and not (run / "checkpoint.pt").exists()
    assert not list(run.glob(".*.tmp"))
    # a store too big for the disk: no store, no temporary folder left
    dosage, label = simulate_labels(2000, 400, seed=3)
    dosage = np.random.default_rng(0).integers(0, 3, dosage.shape).astype(np.int8)
    with pytest.raises(CmixError, match="no space left on device"):
        write_test_store(tiny_disk / "big.zarr", dosage, label)
    assert not (tiny_disk / "big.zarr").exists() and not list(tiny_disk.glob(".*.tmp"))


def test_no_space_message_without_a_mount(tmp_path, monkeypatch):
    """The same translation, with the failing write simulated (runs anywhere)."""
    import errno

    with pytest.raises(CmixError, match=r"out.txt: no space left on device writing it"):
        with atomic_path(tmp_path / "out.txt") as tmp:
            tmp.write_text("partial")
            raise OSError(errno.ENOSPC, "No space left on device")
    assert not list(tmp_path.iterdir())



def test_no_space_in_several_outputs_names_the_set_not_the_last(tmp_path):
    """A full disk while writing the first of several outputs (cmix pca's) names the
    output set, not the last file of the list, and leaves nothing."""
    import errno

    from cmix.atomic import atomic_outputs

    names = [tmp_path / f"pcs.{s}" for s in ("eigenvec", "eigenval", "prune.in", "prune.out")]
    with pytest.raises(CmixError) as err:
        with atomic_outputs(*names) as tmps:
            tmps[0].write_text("partial")
            raise OSError(errno.ENOSPC, "No space left on device")
    assert str(err.value).startswith(f"{tmp_path}: no space left on device writing "
                                     f"{names[0]} and 3 more outputs")
    assert "prune.out:" not in str(err.value)
    assert not list(tmp_path.iterdir())

# ------------------------------------------------------------------ leftovers of killed steps
def test_stale_temporaries_of_dead_processes_are_removed(tmp_path):
    from cmix.atomic import HOST

    out = tmp_path / "trait.zarr"
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True).stdout.strip()
    stale = tmp_path / f".trait.zarr.{HOST}.{dead}.tmp"
    live = tmp_path / f".trait.zarr.{HOST}.{os.getppid()}.tmp"
    other_host = tmp_path / f".trait.zarr.otherhost.{dead}.tmp"
    for d in (stale, live, other_host):
        (d / "call_dosage").mkdir(parents=True)
    dosage, label = simulate_labels(100, 10, seed=1)
    write_test_store(out, dosage, label)
    assert not stale.exists()
    assert live.exists() and other_host.exists()     # a running writer; another host's
    assert open_store(out) is not None


def _fill(disk: Path) -> None:
    """Fill a tmpfs to the last byte."""
    with open(disk / "filler", "wb", buffering=0) as fh:
        try:
            while True:
                fh.write(b"\0" * 4096)
        except OSError:
            pass


@pytest.mark.parametrize("step", ["qc", "select"])
def test_full_disk_in_qc_and_select(cohort, tiny_disk, capsys, step):
    _fill(tiny_disk)
    if step == "qc":
        args = ["qc", "--bfile", str(cohort / "genotypes"), "--maf", "0.01",
                "--out", str(tiny_disk / "variants")]
    else:
        args = ["select", "--sumstats", str(cohort / "sumstats" / "hair_colour.txt.gz"),
                "--bfile", str(cohort / "genotypes"), "--top", "100",
                "--out", str(tiny_disk / "hair.snps.tsv")]
    assert main(args) == 1
    line = first_error_line(capsys)
    assert "no space left on device" in line and str(tiny_disk) in line
    assert sorted(p.name for p in tiny_disk.iterdir()) == ["filler"]     # nothing half-written


@pytest.mark.parametrize("n", ["3", "49"])
def test_a_discovery_cohort_too_small_for_its_p_values_is_refused(tmp_path, capsys, n):
    """The simulated summary statistics' P-values are normal approximations of t
    statistics: a discovery cohort of a handful of people would make noise significant."""
    out = tmp_path / "sim"
    assert main(["simulate", "--out", str(out), "--n-samples", "60", "--n-variants", "300",
                 "--n-discovery", n]) == 1
    line = first_error_line(capsys)
    assert f"--n-discovery must be at least 50, got {n}" in line
    assert not out.exists() or not list(out.iterdir())


@pytest.mark.parametrize("text,key,bound", [('{"epochs": 100000000000000000000000}', "epochs",
                                             "10_000"),
                                            ('{"pred_epochs": 10001}', "pred_epochs", "10_000"),
                                            ('{"hidden": 1000001}', "hidden", "1_000_000"),
                                            ('{"batch_size": 10000000}', "batch_size",
                                             "1_000_000"),
                                            ('{"lp_max_unlabeled": 10000000000}',
                                             "lp_max_unlabeled", "1_000_000_000")])
def test_config_integers_beyond_their_bound_are_refused(two_stores, tmp_path, capsys, text,
                                                        key, bound):
    """An integer key far beyond any sensible value (1e23 epochs would run forever) is
    refused, naming the key and its bound."""
    a, _ = two_stores
    cfg = tmp_path / "cfg.json"
    cfg.write_text(text)
    assert main(train_args(a, tmp_path / "run", cfg)) == 1
    line = first_error_line(capsys)
    assert f"{cfg}: {key} = " in line and f"expected an integer <= {bound}" in line
    assert not (tmp_path / "run" / "metrics.json").exists()


@pytest.mark.parametrize("val_fraction", [0, 0.001])
@pytest.mark.parametrize("method", ["mlp", "cmix"])
def test_no_validation_row_for_a_network_method_is_refused(two_stores, tmp_path, capsys,
                                                           method, val_fraction):
    """A network's predictor early-stops on the validation rows: with none it would keep
    its untrained start (best epoch 0)."""
    a, _ = two_stores
    cfg = tmp_path / "cfg.json"
    cfg.write_text(json.dumps({**FAST, "val_fraction": val_fraction}))
    assert main(train_args(a, tmp_path / "run", cfg, method=method)) == 1
    line = first_error_line(capsys)
    assert f"{cfg}: val_fraction = {val_fraction}" in line and f"method {method!r}" in line
    assert "early-stops on the validation rows" in line
    assert not (tmp_path / "run" / "metrics.json").exists()


def test_an_error_on_a_temporary_name_names_the_real_output(tmp_path):
    """An OSError raised on ``.NAME.HOST.PID.tmp`` (here: a folder where the temporary
    file goes) is reported naming the output, and leaves nothing behind."""
    from cmix.atomic import atomic_outputs

    target = tmp_path / "target.tsv"
    with pytest.raises(CmixError) as err:
        with atomic_path(target) as tmp:
            tmp.mkdir()
            open(tmp, "w")
    assert str(err.value).startswith(f"{target}: cannot write it (Is a directory)")
    assert ".tmp" not in str(err.value)
    with pytest.raises(CmixError) as err:
        with atomic_outputs(tmp_path / "a.tsv", target) as tmps:
            tmps[0].write_text("x")
            tmps[1].mkdir()
            open(tmps[1], "w")
    assert str(err.value).startswith(f"{target}: cannot write it") and ".tmp" not in str(err.value)
    assert list(tmp_path.iterdir()) == []
