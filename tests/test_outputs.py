"""The output discipline of every `cmix` step: an output path never deletes what cmix did
not write, never overwrites an input, and has one writer at a time.

Each refusal must come before any work, as one line ``cmix STEP: error: ...`` with exit
status 1, and leave every file as it was: the folder or file the output named, the
step's inputs and the current folder (an empty ``--out`` names it).
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cmix.cli import main
from conftest import requires_plink2
from test_report import BUDGETS, METHODS, SEEDS, full_cells, write_grid

HAIR = {"field": 1747, "kind": "categorical",
        "classes": {"blonde": [1], "red": [2], "brown": [3, 4], "black": [5]}}
ANCESTRY = {"populations": [{"name": "british", "code": 1001, "share": 0.7, "fst": 0},
                            {"name": "other", "code": 3001, "share": 0.3, "fst": 0.05}]}
#: how `snakemake --report report.html` (Snakemake 9) starts its one self-contained page
SNAKEMAKE_REPORT = ('<!doctype html>\n\n<html lang="en">\n\n<head>\n    <meta charset="utf-8">\n'
                    "    <title>Snakemake Report</title>\n</head>\n<body></body></html>\n")


@pytest.fixture(scope="module")
def env(cohort, tmp_path_factory):
    """The documented steps (docs/reference/steps.md) on the session cohort up to one
    finished run and its report: the inputs every step of the sweep reads."""
    d = tmp_path_factory.mktemp("outputs")
    c = cohort
    (d / "hair.json").write_text(json.dumps(HAIR))
    (d / "ancestry.json").write_text(json.dumps(ANCESTRY))
    for args in (
        ["samples", "--fam", c / "genotypes.fam", "--sqc", c / "sample_qc.tsv",
         "--withdrawn", c / "withdrawn.txt", "--out", d / "samples"],
        ["qc", "--bfile", c / "genotypes", "--keep", d / "samples.keep", "--maf", "0.01",
         "--out", d / "variants"],
        ["unrelated", "--kinship", c / "kinship.dat", "--fam", c / "genotypes.fam", "--keep",
         d / "samples.keep", "--out", d / "unrelated"],
        ["select", "--sumstats", c / "sumstats/hair_colour.txt.gz", "--bfile", c / "genotypes",
         "--extract", d / "variants.snplist", "--top", "100", "--out", d / "hair.snps.tsv"],
        ["store", "--bfile", c / "genotypes", "--keep", d / "unrelated.king.cutoff.in.id",
         "--snps", d / "hair.snps.tsv", "--pheno", c / "phenotypes.tsv", "--trait", "hair",
         "--trait-config", d / "hair.json", "--out", d / "hair.zarr"],
        ["train", "--store", d / "hair.zarr", "--budget", "100", "--seed", "1", "--method",
         "logreg", "--device", "cpu", "--out", d / "runs/hair/logreg/budget100/seed1"],
    ):
        assert main([str(a) for a in args]) == 0
    return d


def tree_bytes(*paths) -> dict:
    """sha256 of every file under ``paths`` (files or folders), keyed by path, and each
    folder's listing: what must be unchanged after a refusal."""
    out = {}
    for top in map(Path, paths):
        for p in [top, *sorted(top.rglob("*"))] if top.is_dir() else [top]:
            if p.is_dir():
                out[str(p)] = sorted(x.name for x in p.iterdir())
            elif p.exists():
                out[str(p)] = hashlib.sha256(p.read_bytes()).hexdigest()
            else:
                out[str(p)] = None
    return out


def refused(capsys, args, step=None) -> str:
    """Run ``cmix args``: exit 1 and one line on stderr, ``cmix STEP: error: ...``, no
    log line (nothing ran) and no traceback. Returns the line."""
    rc = main([str(a) for a in args])
    err = capsys.readouterr().err
    assert rc == 1, err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith(f"cmix {step or args[0]}: error: "), lines[0]
    assert ".tmp" not in lines[0], lines[0]          # the real path, not the temporary
    return lines[0]


@pytest.fixture
def scratch(tmp_path, monkeypatch):
    """A current folder holding one file of the user's: an empty --out names it."""
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    (cwd / "phenotypes.tsv").write_text("eid\tf.1747.0.0\n1\t2\n")
    monkeypatch.chdir(cwd)
    return cwd


# ------------------------------------------------------------- step command lines
def commands(cohort, env) -> dict:
    """Per step (a name of the sweep): (its arguments without --out, the option its
    output takes, the inputs it reads: files or folders)."""
    c, d = cohort, env
    bfile = [c / "genotypes.bed", c / "genotypes.bim", c / "genotypes.fam"]
    gwas = ["gwas", "--bfile", c / "genotypes", "--keep", d / "unrelated.king.cutoff.in.id",
            "--extract", d / "variants.snplist", "--pheno", c / "phenotypes.tsv", "--trait",
            "hair", "--trait-config", d / "hair.json", "--multiclass", "red"]
    gwas_inputs = [*bfile, d / "unrelated.king.cutoff.in.id", d / "variants.snplist",
                   c / "phenotypes.tsv", d / "hair.json"]
    run = d / "runs/hair/logreg/budget100/seed1"
    return {
        "simulate": (["simulate", "--n-samples", "60", "--n-variants", "300", "--n-discovery",
                      "60", "--ancestry", d / "ancestry.json"], "--out", [d / "ancestry.json"]),
        "samples": (["samples", "--fam", c / "genotypes.fam", "--sqc", c / "sample_qc.tsv",
                     "--withdrawn", c / "withdrawn.txt"], "--out",
                    [c / "genotypes.fam", c / "sample_qc.tsv", c / "withdrawn.txt"]),
        "qc": (["qc", "--bfile", c / "genotypes", "--keep", d / "samples.keep", "--maf",
                "0.01"], "--out", [*bfile, d / "samples.keep"]),
        "unrelated": (["unrelated", "--kinship", c / "kinship.dat", "--fam",
                       c / "genotypes.fam", "--keep", d / "samples.keep"], "--out",
                      [c / "kinship.dat", c / "genotypes.fam", d / "samples.keep"]),
        "pca": (["pca", "--bfile", c / "genotypes", "--keep", d / "unrelated.king.cutoff.in.id",
                 "--extract", d / "variants.snplist", "--pcs", "3"], "--out",
                [*bfile, d / "unrelated.king.cutoff.in.id", d / "variants.snplist"]),
        "gwas": (gwas + ["--ids-out", "discovery.id"], "--out", gwas_inputs),
        "gwas --ids-out": (gwas + ["--out", "hair.sumstats.gz"], "--ids-out", gwas_inputs),
        "select": (["select", "--sumstats", c / "sumstats/hair_colour.txt.gz", "--bfile",
                    c / "genotypes", "--extract", d / "variants.snplist", "--top", "50"],
                   "--out", [c / "sumstats/hair_colour.txt.gz", *bfile,
                             d / "variants.snplist"]),
        "store": (["store", "--bfile", c / "genotypes", "--keep",
                   d / "unrelated.king.cutoff.in.id", "--snps", d / "hair.snps.tsv", "--pheno",
                   c / "phenotypes.tsv", "--trait", "hair", "--trait-config", d / "hair.json"],
                  "--out", [*bfile, d / "unrelated.king.cutoff.in.id", d / "hair.snps.tsv",
                            c / "phenotypes.tsv", d / "hair.json"]),
        "train": (["train", "--store", d / "hair.zarr", "--budget", "100", "--seed", "2",
                   "--method", "logreg", "--device", "cpu"], "--out", [d / "hair.zarr"]),
        "predict": (["predict", "--run", run, "--bfile", c / "genotypes", "--allow-overlap"],
                    "--out", [run, *sorted(run.iterdir()), *bfile]),
        "report": (["report", "--runs", d / "runs"], "--out", [d / "runs"]),
    }


SWEEP = ["simulate", "samples", "qc", "unrelated", "pca", "gwas", "gwas --ids-out", "select",
         "store", "train", "predict", "report"]


@pytest.mark.parametrize("name", SWEEP)
def test_sweep_every_step_refuses_a_folder_its_inputs_and_an_empty_out(
        cohort, env, scratch, capsys, name):
    """Every step with --out pointing at (a) an existing folder with a file inside, (b)
    each of its own inputs, (c) '': exit 1 with one line, and the folder, the inputs
    and the current folder keep their bytes."""
    if name.startswith("gwas") and not shutil.which("plink2"):
        pytest.skip("plink2 not installed")
    args, flag, inputs = commands(cohort, env)[name]
    step = args[0]
    folder = scratch.parent / "results"
    folder.mkdir(exist_ok=True)
    (folder / "notes.txt").write_text("a folder cmix did not write\n")
    kept = [folder, scratch, *inputs]
    before = tree_bytes(*kept)
    for out in [folder, *inputs, ""]:
        line = refused(capsys, [*args, flag, out], step)
        assert (str(out) in line) if out else (f"{flag} is empty" in line), line
        assert tree_bytes(*kept) == before, f"{flag} {out} changed files"


def test_prefix_steps_write_only_the_files_they_check_and_lock(cohort, env, tmp_path):
    """What the CLI checks and locks for a prefix --out (cmix.cli.cohort.PREFIX_OUTPUTS, also the rules' outputs) is every
    file the step writes: a file outside it would be written unchecked and unlocked."""
    from cmix.cli.cohort import PREFIX_OUTPUTS

    for step in PREFIX_OUTPUTS:
        args, flag, _ = commands(cohort, env)[step]
        out = tmp_path / step
        out.mkdir()
        extra = ["--mind", "0.01"] if step == "qc" else []     # writes its .mindrem.id
        assert main([str(a) for a in [*args, *extra, flag, out / "o"]]) == 0
        declared = {f"o{s}" for s in PREFIX_OUTPUTS[step].values()}
        assert {p.name for p in out.iterdir()} <= declared, step


# ------------------------------------------------ cause 1: a folder at an output path
def _bgen(cohort, tmp_path) -> Path:
    subprocess.run(["plink2", "--bfile", cohort / "genotypes", "--chr", "1", "--thin-count",
                    "50", "--export", "bgen-1.2", "bits=8", "--out", tmp_path / "chr1"],
                   check=True, capture_output=True)
    return tmp_path / "chr1.bgen"


@pytest.mark.parametrize("step", ["gwas", "gwas --ids-out", "select", "samples", "predict",
                                  "bgen-index"])
def test_a_folder_at_an_output_path_is_refused_and_kept(cohort, env, scratch, tmp_path, capsys,
                                                        step):
    """A folder where a step writes a file (a folder of earlier discovery IDs, of traits,
    a user's folder named like O.keep or a .bgi) is refused before any work, naming it,
    and stays with everything in it (it was deleted with shutil.rmtree, exit 0)."""
    if (step.startswith("gwas") or step == "bgen-index") and not shutil.which("plink2"):
        pytest.skip("plink2 not installed")
    folder = tmp_path / "results" / "discovery"
    if step == "samples":
        folder = tmp_path / "results" / "k.keep"
    folder.mkdir(parents=True)
    (folder / "hair.discovery.id").write_text("#FID\tIID\n1\t1\n")
    before = tree_bytes(folder)
    if step == "bgen-index":
        bgen = _bgen(cohort, tmp_path)
        folder.rename(tmp_path / "chr1.bgen.bgi")
        folder = tmp_path / "chr1.bgen.bgi"
        before = {k.replace("results/discovery", "chr1.bgen.bgi"): v for k, v in before.items()}
        args = ["bgen-index", bgen]
    elif step == "samples":
        args = ["samples", "--fam", cohort / "genotypes.fam", "--out", tmp_path / "results/k"]
    else:
        args, flag, _ = commands(cohort, env)[step]
        args = [*args, flag, folder]
    line = refused(capsys, args, step.split()[0])
    assert str(folder) in line and "is a folder" in line, line
    assert tree_bytes(folder) == before


# ------------------------------------------------------ empty and "." outputs
@pytest.mark.parametrize("step", ["gwas", "select", "train", "report", "simulate"])
@pytest.mark.parametrize("out", ["", "."])
def test_empty_or_dot_output_never_touches_the_current_folder(cohort, env, scratch, capsys,
                                                             step, out):
    """--out '' (an unset shell variable) or '.': the current folder was emptied (gwas),
    written into (train, report, simulate: its phenotypes.tsv replaced) or a traceback
    (select). Now one line and the folder as it was."""
    if step == "gwas" and not shutil.which("plink2"):
        pytest.skip("plink2 not installed")
    args, flag, _ = commands(cohort, env)[step]
    before = tree_bytes(scratch)
    line = refused(capsys, [*args, flag, out], step)
    assert ("is empty" if out == "" else "current folder") in line, line
    assert tree_bytes(scratch) == before


# ------------------------------------------------- cause 2: the report's clean-up
def test_report_into_a_folder_with_a_foreign_png_and_report_html_deletes_nothing(
        tmp_path, capsys):
    """A folder holding Snakemake's own report.html (`snakemake --report report.html`: one
    self-contained page) and a user's PNG: every PNG there was removed as "a figure of
    an earlier report". Now the folder is refused and both files keep their bytes."""
    write_grid(tmp_path / "runs", full_cells())
    out = tmp_path / "results"
    out.mkdir()
    (out / "report.html").write_text(SNAKEMAKE_REPORT)
    (out / "dag.png").write_bytes(b"\x89PNG\r\n\x1a\n a user's figure")
    before = tree_bytes(out)
    line = refused(capsys, ["report", "--runs", tmp_path / "runs", "--out", out])
    assert str(out) in line and "did not write" in line, line
    assert tree_bytes(out) == before


def test_report_rerun_removes_only_the_figures_it_recorded(tmp_path):
    """A report folder cmix wrote, with a user's PNG added later: a rerun with fewer
    traits removes its own figure of the dropped trait (listed in its manifest) and
    keeps the user's PNG."""
    write_grid(tmp_path / "runs", full_cells())
    out = tmp_path / "rep"
    assert main(["report", "--runs", str(tmp_path / "runs"), "--out", str(out)]) == 0
    assert (out / "three_class.png").is_file()
    (out / "holiday.png").write_bytes(b"\x89PNG\r\n\x1a\n")
    grid = ["--traits", "binary_trait", "--methods", *METHODS, "--budgets",
            *map(str, BUDGETS), "--seeds", *map(str, SEEDS)]
    assert main(["report", "--runs", str(tmp_path / "runs"), "--out", str(out), *grid]) == 0
    pngs = {p.name for p in out.glob("*.png")}
    assert pngs == {"binary_trait.png", "accuracy_by_trait.png", "pseudo_label_accuracy.png",
                    "holiday.png"}


# ------------------------------------------------- cause 3: an output that is an input
@pytest.mark.parametrize("case", ["select --out its --sumstats", "select --out a hard link",
                                  "predict --out run/metrics.json", "predict --out its .fam",
                                  "predict --out a symlink to its .bed",
                                  "gwas --out its --pheno", "samples --withdrawn k.keep --out k"])
def test_an_output_that_is_an_input_is_refused(cohort, env, tmp_path, capsys, case):
    """An output naming one of the step's inputs (itself, a hard link or a symlink to
    it) overwrote it with exit 0: the GWAS became a 50-line table, a finished run lost
    its metrics.json. Now one line naming both, and the input keeps its bytes."""
    if case.startswith("gwas") and not shutil.which("plink2"):
        pytest.skip("plink2 not installed")
    work = tmp_path / "inputs"
    shutil.copytree(cohort, work, ignore=shutil.ignore_patterns("kinship.dat", "truth.json"))
    step = case.split()[0]
    args, flag, _ = commands(work, env)[step] if step != "samples" else (None, None, None)
    run = env / "runs/hair/logreg/budget100/seed1"
    if case == "select --out its --sumstats":
        target = work / "sumstats/hair_colour.txt.gz"
    elif case == "select --out a hard link":
        target = tmp_path / "gwas.txt.gz"
        os.link(work / "sumstats/hair_colour.txt.gz", target)
    elif case == "predict --out run/metrics.json":
        shutil.copytree(run, tmp_path / "run")
        args[args.index(run)] = tmp_path / "run"
        target = tmp_path / "run" / "metrics.json"
    elif case == "predict --out its .fam":
        target = work / "genotypes.fam"
    elif case == "predict --out a symlink to its .bed":
        target = tmp_path / "probabilities.tsv"
        target.symlink_to(work / "genotypes.bed")
    elif case == "gwas --out its --pheno":
        target = work / "phenotypes.tsv"
    else:
        (tmp_path / "k.keep").write_text("1000001\n")
        args, flag, target = (["samples", "--fam", work / "genotypes.fam", "--withdrawn",
                               tmp_path / "k.keep"], "--out", tmp_path / "k")
    watched = [work, tmp_path / "k.keep", tmp_path / "run"]
    before = tree_bytes(*watched, target)
    line = refused(capsys, [*args, flag, target], step)
    assert "is the input" in line, line
    assert tree_bytes(*watched, target) == before


# ------------------------------------------------- cause 4: one writer at a time
def _cmix(*args) -> list[str]:
    return [sys.executable, "-m", "cmix.cli", *map(str, args)]


def _writer_waiting_on(args: list, fifo: Path, config: dict):
    """Start `cmix args`, whose --trait-config is the named pipe ``fifo``, and return it
    once it has opened the pipe: it is a running writer, paused before reading its
    first input, after any lock it takes. Returns (process, write end of the pipe)."""
    os.mkfifo(fifo)
    proc = subprocess.Popen(_cmix(*args), stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 300
    while True:
        try:
            fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)     # ENXIO: no reader yet
            break
        except OSError as err:
            if err.errno != errno.ENXIO:
                raise
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                pytest.fail(f"the first writer never read its config: {proc.stderr.read()}")
            time.sleep(0.05)
    os.set_blocking(fd, True)
    return proc, fd, json.dumps(config).encode()


def _let_it_finish(proc, fd, text: bytes) -> str:
    os.write(fd, text)
    os.close(fd)
    _, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err
    return err


def test_two_stores_into_one_out_the_second_stops_naming_the_first(cohort, env, tmp_path):
    """Two `cmix store` runs into one new --out both exited 0 and the later replaced the
    other silently. Now the second stops at once, naming the first (its pid), and the
    first writes its store."""
    args, flag, _ = commands(cohort, env)["store"]
    out = tmp_path / "traits" / "hair.zarr"
    fifo_args = [*args, flag, out]
    fifo_args[fifo_args.index(env / "hair.json")] = tmp_path / "hair.fifo"
    first, fd, text = _writer_waiting_on(fifo_args, tmp_path / "hair.fifo", HAIR)
    try:
        second = subprocess.run(_cmix(*args, flag, out), capture_output=True, text=True,
                                timeout=600)
        assert second.returncode == 1, second.stderr
        lines = second.stderr.strip().splitlines()
        assert len(lines) == 1 and f"pid {first.pid}" in lines[0], second.stderr
        assert lines[0].startswith(f"cmix store: error: {out}: being written by cmix store")
        assert not out.exists()
    finally:
        _let_it_finish(first, fd, text)
    from cmix.store.read import open_store
    from cmix.store.verify import verify_store

    verify_store(out, open_store(out))
    assert not list(out.parent.glob(".*lock")), list(out.parent.iterdir())


@requires_plink2
def test_two_gwas_sharing_an_ids_out_never_mix_their_outputs(cohort, env, tmp_path):
    """Two `cmix gwas` draws writing one --ids-out left one draw's summary statistics
    beside the other's discovery IDs (both exit 0). Now the second stops at once naming
    the first and writes nothing; the first's two files appear together."""
    args, _, _ = commands(cohort, env)["gwas"]
    args = [a for a in args]
    ids = tmp_path / "discovery" / "hair.discovery.id"
    first_out, second_out = tmp_path / "discovery" / "a.gz", tmp_path / "discovery" / "b.gz"
    fifo_args = [*args, "--discovery-fraction", "0.5", "--discovery-seed", "1",
                 "--ids-out", ids, "--out", first_out]
    fifo_args[fifo_args.index(env / "hair.json")] = tmp_path / "hair.fifo"
    first, fd, text = _writer_waiting_on(fifo_args, tmp_path / "hair.fifo", HAIR)
    try:
        second = subprocess.run(_cmix(*args, "--discovery-fraction", "0.5", "--discovery-seed",
                                      "2", "--ids-out", ids, "--out", second_out),
                                capture_output=True, text=True, timeout=600)
        assert second.returncode == 1, second.stderr
        lines = second.stderr.strip().splitlines()
        assert len(lines) == 1 and f"pid {first.pid}" in lines[0], second.stderr
        assert str(ids) in lines[0] and "being written by cmix gwas" in lines[0]
        assert not second_out.exists() and not ids.exists()
    finally:
        _let_it_finish(first, fd, text)
    assert sorted(p.name for p in ids.parent.iterdir()) == ["a.gz", "a.gz.discovery.json",
                                                            "hair.discovery.id"]


HOLD_LOCK = """
import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o644)
fcntl.flock(fd, fcntl.LOCK_EX)
os.write(fd, f"cmix step (pid {os.getpid()} on this host, since now)\\n".encode())
print("held", flush=True)
sys.stdin.read()
os.unlink(sys.argv[1])
"""
#: per step of the sweep, the output file whose lock another writer holds: for a prefix
#: step one it writes only sometimes (qc's .mindrem.id, pca's .prune.out, ...)
LOCKED = {"simulate": "", "samples": ".filters.json", "qc": ".mindrem.id",
          "unrelated": ".kin0", "pca": ".prune.out", "gwas": "", "gwas --ids-out": "",
          "select": ".steps.tsv", "store": "", "predict": "", "report": ""}


@pytest.mark.parametrize("name", sorted(LOCKED))
def test_every_writer_stops_while_another_holds_one_of_its_outputs(cohort, env, scratch,
                                                                    capsys, name):
    """Every step that writes (all but train, which locks its run folder) stops at once,
    naming the holder and writing nothing, while another cmix process holds the lock of
    any one of the files it would write."""
    if name.startswith("gwas") and not shutil.which("plink2"):
        pytest.skip("plink2 not installed")
    args, flag, _ = commands(cohort, env)[name]
    out = scratch.parent / "results" / "out"
    out.parent.mkdir()
    holder = subprocess.Popen(      # the lock protocol: flock on .NAME.cmix.lock beside it
        [sys.executable, "-c", HOLD_LOCK, str(out.parent / f".out{LOCKED[name]}.cmix.lock")],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline() == "held\n"
        before = tree_bytes(scratch.parent)
        line = refused(capsys, [*args, flag, out], args[0])
        assert f"{out}{LOCKED[name]}: being written by cmix step (pid {holder.pid}" in line
        assert tree_bytes(scratch.parent) == before
    finally:
        holder.communicate("")
    assert holder.returncode == 0


@requires_plink2
def test_leftover_gwas_temporaries_of_dead_processes_are_removed(cohort, env, tmp_path):
    """A SIGKILLed `cmix gwas` left a .cmix_gwas.* folder holding people's IDs and
    phenotypes beside its output for good. The next run removes those of processes that
    no longer run on this host, and only those."""
    from cmix.atomic import HOST

    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True).stdout.strip()
    out = tmp_path / "discovery"
    stale = out / f".cmix_gwas.{HOST}.{dead}.k3j2h1"
    live = out / f".cmix_gwas.{HOST}.{os.getppid()}.a8b7c6"
    other_host = out / f".cmix_gwas.otherhost.{dead}.z9y8x7"
    for d in (stale, live, other_host):
        d.mkdir(parents=True)
        (d / "people.id").write_text("#FID\tIID\n1000001\t1000001\n")
    args, _, _ = commands(cohort, env)["gwas"]
    args = args[:args.index("--ids-out")]
    assert main([str(a) for a in [*args, "--out", out / "hair.sumstats.gz"]]) == 0
    assert not stale.exists()
    # a running gwas's and another host's are kept; this run's own is gone
    assert set(out.glob(".cmix_gwas.*")) == {live, other_host}


def test_a_lock_left_by_a_killed_writer_does_not_block_and_is_removed(cohort, env, tmp_path):
    """A writer killed with SIGKILL leaves its lock file, unlocked: the next writer takes
    it over and removes it when done."""
    args, flag, _ = commands(cohort, env)["select"]
    out = tmp_path / "hair.snps.tsv"
    lock = tmp_path / ".hair.snps.tsv.cmix.lock"
    lock.write_text("cmix select (pid 1 on elsewhere, since 2020-01-01 00:00:00)\n")
    assert main([str(a) for a in [*args, flag, out]]) == 0
    assert out.is_file() and not lock.exists()


# ------------------------------------------------------ other places an output may not go
def test_an_output_inside_a_store_is_refused(cohort, env, tmp_path, capsys):
    """--out inside a store folder wrote a file among its chunks."""
    store = tmp_path / "hair.zarr"
    shutil.copytree(env / "hair.zarr", store)
    before = tree_bytes(store)
    args, flag, _ = commands(cohort, env)["select"]
    line = refused(capsys, [*args, flag, store / "call_dosage" / "snps.tsv"])
    assert "inside the Zarr store" in line, line
    assert tree_bytes(store) == before


def test_simulate_never_overwrites_files_it_did_not_write(tmp_path, capsys):
    """`simulate --out` into a folder holding a user's phenotypes.tsv replaced it. Now
    such a folder is refused; a folder an earlier simulation wrote is replaced, its files
    that the new one does not write (the traits of a full cohort after --fast) removed."""
    folder = tmp_path / "cohort"
    folder.mkdir()
    (folder / "phenotypes.tsv").write_text("eid\tf.1747.0.0\n1\t2\n")
    before = tree_bytes(folder)
    small = ["--n-samples", "60", "--n-variants", "300"]
    refused(capsys, ["simulate", "--out", folder, *small, "--n-discovery", "60"])
    assert tree_bytes(folder) == before
    sim = tmp_path / "sim"
    assert main(["simulate", "--out", str(sim), *small, "--n-discovery", "60"]) == 0
    assert (sim / "phenotypes.tsv").is_file()
    assert main(["simulate", "--out", str(sim), *small, "--fast"]) == 0
    assert sorted(p.name for p in sim.iterdir()) == [".cmix-manifest.json", "genotypes.bed",
                                                     "genotypes.bim", "genotypes.fam"]


# ------------------------------------------------- a finished run is proven, not presumed
def _train(env, out, seed=1):
    return main(["train", "--store", str(env / "hair.zarr"), "--budget", "100", "--seed",
                 str(seed), "--method", "logreg", "--device", "cpu", "--out", str(out)])


@pytest.mark.parametrize("content", [b"[1, 2]", b'{"test": {"accuracy": 1.0}}',
                                     b"\xff\xfe not JSON at all"])
def test_a_metrics_json_that_proves_nothing_is_written_again(env, tmp_path, capsys, content):
    """A metrics.json that is no run's record (a list, no run key, not JSON) beside a
    finished checkpoint gave "run already complete" (or a traceback). Now the run's
    metrics are written again from its checkpoint."""
    run = tmp_path / "run"
    assert _train(env, run) == 0
    want = json.loads((run / "metrics.json").read_text())
    (run / "metrics.json").write_bytes(content)
    capsys.readouterr()
    assert _train(env, run) == 0
    err = capsys.readouterr().err
    assert "run already complete" not in err and "Traceback" not in err, err
    got = json.loads((run / "metrics.json").read_text())
    assert got["run_key"] == want["run_key"] and got["test"] == want["test"]


def test_another_runs_metrics_json_beside_a_finished_checkpoint_is_refused(env, tmp_path,
                                                                          capsys):
    """Another seed's metrics.json copied beside a finished checkpoint was taken for the
    run's own ("run already complete", exit 0). Now one line names it, and it is kept:
    it is another run's record."""
    run, other = tmp_path / "seed1", tmp_path / "seed2"
    assert _train(env, run) == 0 and _train(env, other, seed=2) == 0
    shutil.copy(other / "metrics.json", run / "metrics.json")
    kept = [run / "metrics.json", run / "checkpoint.pt", run / "predictions.npz"]
    before = tree_bytes(*kept)
    capsys.readouterr()
    assert _train(env, run) == 1
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if not line.startswith("[cmix]")]
    assert len(lines) == 1 and lines[0].startswith("cmix train: error: "), err
    assert str(run / "metrics.json") in lines[0] and "another run" in lines[0], lines[0]
    assert tree_bytes(*kept) == before


@pytest.mark.parametrize("args", [
    ["simulate", "--n-samples", "60", "--n-variants", "300", "--n-discovery", "60"],
    ["report", "--runs", "runs"],
    ["train", "--store", "s.zarr", "--budget", "10", "--seed", "1"],
])
def test_an_empty_out_is_refused_not_read_as_the_current_folder(tmp_path, capsys,
                                                                 monkeypatch, args):
    monkeypatch.chdir(tmp_path)
    line = refused(capsys, [*args, "--out", ""])
    assert "--out is empty" in line, line
    assert list(tmp_path.iterdir()) == []


def test_simulate_names_every_file_it_would_overwrite(tmp_path, capsys):
    """A folder an earlier --fast simulation wrote, where the user then put files of the
    names a full simulation writes: refused, naming each, and none of them touched."""
    sim = tmp_path / "sim"
    small = ["--n-samples", "60", "--n-variants", "300"]
    assert main(["simulate", "--out", str(sim), *small, "--fast"]) == 0
    capsys.readouterr()
    (sim / "phenotypes.tsv").write_text("eid\tf.1747.0.0\n1\t2\n")
    (sim / "truth.json").write_text("{}\n")
    before = tree_bytes(sim)
    rc = main(["simulate", "--out", str(sim), *small, "--n-discovery", "60"])
    err = [line for line in capsys.readouterr().err.splitlines() if "error:" in line]
    assert rc == 1 and len(err) == 1, err
    assert "phenotypes.tsv, truth.json there were not written by `cmix simulate`" in err[0]
    assert tree_bytes(sim) == before
