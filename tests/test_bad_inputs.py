"""Malformed inputs through every `cmix` step, as a user's probes made them.

Each probe must stop with exit status 1 and one line, ``cmix STEP: error: FILE...``, that
names the file (or option) and the problem, with no traceback, no individual IDs, and
nothing left in the output folder that could pass for a finished output.
"""

import gzip
import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

from cmix.cli import main

HAIR = {"field": 1747, "kind": "categorical",
        "classes": {"blonde": [1], "red": [2], "brown": [3, 4], "black": [5]}}


@pytest.fixture(scope="module")
def steps(cohort, tmp_path_factory):
    """The README's steps on the session cohort, up to the trait's SNP selection."""
    d = tmp_path_factory.mktemp("steps")
    c = cohort
    for args in (
        ["samples", "--fam", c / "genotypes.fam", "--sqc", c / "sample_qc.tsv",
         "--withdrawn", c / "withdrawn.txt", "--out", d / "samples"],
        ["qc", "--bfile", c / "genotypes", "--keep", d / "samples.keep", "--maf", "0.01",
         "--hwe", "1e-7", "--geno", "0.05", "--out", d / "variants"],
        ["unrelated", "--kinship", c / "kinship.dat", "--fam", c / "genotypes.fam", "--keep",
         d / "samples.keep", "--out", d / "unrelated"],
        ["select", "--sumstats", c / "sumstats/hair_colour.txt.gz", "--bfile",
         c / "genotypes", "--extract", d / "variants.snplist", "--top", "200",
         "--out", d / "hair.snps.tsv"],
    ):
        assert main([str(a) for a in args]) == 0
    (d / "empty.keep").write_text("")
    (d / "folder").mkdir()
    return d


def fails(capsys, args, names, problem, out_dir):
    """Run ``cmix args``; check exit 1, one error line starting with ``names`` and
    holding ``problem``, and an empty (or absent) output folder. Returns the line."""
    rc = main([str(a) for a in args])
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if not line.startswith("[cmix]")]
    assert rc == 1, err
    assert len(lines) == 1, err                      # one message, no traceback
    assert lines[0].startswith(f"cmix {args[0]}: error: {names}"), lines[0]
    assert problem in lines[0], lines[0]
    out_dir = Path(out_dir)
    assert not out_dir.exists() or not list(out_dir.iterdir()), list(out_dir.iterdir())
    return lines[0]


def edit_line(src: Path, dst: Path, lineno: int, edit) -> Path:
    """Copy a (possibly gzipped) text file to plain ``dst`` with line ``lineno`` (1-based)
    replaced by ``edit(fields)`` of its tab-separated fields."""
    opener = gzip.open if src.suffix == ".gz" else open
    with opener(src, "rt") as fh:
        lines = fh.read().splitlines()
    lines[lineno - 1] = "\t".join(edit(lines[lineno - 1].split("\t")))
    dst.write_text("\n".join(lines) + "\n")
    return dst


# ------------------------------------------------------------------------------ select
def _with_info_twice(f):      # one field too many, in the middle: BETA would read INFO
    return f[:7] + [f[6]] + f[7:]


@pytest.mark.parametrize("case, problem", [
    ("extra_field", "line 5: expected 11 columns as in the header, found 12"),
    ("missing_field", "line 5: expected 11 columns as in the header, found 10"),
    ("inf_beta", "line 5, column BETA: expected a finite effect size, found 'inf'"),
    ("minus_inf_beta", "line 5, column BETA: expected a finite effect size, found '-inf'"),
    ("truncated_gz", "truncated or corrupt gzip file"),
    ("folder", "is a folder, expected a file (summary statistics)"),
])
def test_select_rejects_bad_sumstats(cohort, steps, tmp_path, capsys, case, problem):
    src = cohort / "sumstats/hair_colour.txt.gz"
    bad = tmp_path / "ss.txt"
    if case == "extra_field":
        edit_line(src, bad, 5, _with_info_twice)
    elif case == "missing_field":
        edit_line(src, bad, 5, lambda f: f[:7] + f[8:])
    elif case in ("inf_beta", "minus_inf_beta"):
        edit_line(src, bad, 5, lambda f: f[:7] + ["inf" if case == "inf_beta" else "-inf"]
                  + f[8:])
    elif case == "truncated_gz":
        bad = tmp_path / "ss.txt.gz"
        bad.write_bytes(src.read_bytes()[:20000])
    else:
        bad = steps / "folder"
    out = tmp_path / "out"
    fails(capsys, ["select", "--sumstats", bad, "--bfile", cohort / "genotypes", "--extract",
                   steps / "variants.snplist", "--top", "100", "--out", out / "t.snps.tsv"],
          bad, problem, out)


# ----------------------------------------------------------------------------- samples
def _headerless_sqc(cohort, path):
    """ukb_sqc_v2-style: no header, .fam order, the four flags in columns 19, 20, 23, 24."""
    tidy = pd.read_csv(cohort / "sample_qc.tsv", sep="\t", dtype=str)
    rows = pd.DataFrame({c: ["0"] * len(tidy) for c in range(24)})
    for col, name in ((18, "het.missing.outliers"), (19, "putative.sex.chromosome.aneuploidy"),
                      (22, "excess.relatives"), (23, "in.white.British.ancestry.subset")):
        rows[col] = tidy[name].to_numpy()
    rows.to_csv(path, sep=" ", header=False, index=False)
    return path


@pytest.mark.parametrize("case, problem", [
    ("empty", "the file (or its first line) is empty"),
    ("extra_field", "line 5: expected 16 columns as in the header, found 17"),
    ("headerless_extra_field", "line 3: expected 24 columns, found 25"),
    ("folder", "is a folder, expected a file (sample QC table)"),
])
def test_samples_rejects_bad_sample_qc(cohort, steps, tmp_path, capsys, case, problem):
    bad = tmp_path / "sqc.tsv"
    if case == "empty":
        bad.write_text("")
    elif case == "extra_field":
        edit_line(cohort / "sample_qc.tsv", bad, 5, lambda f: f[:3] + ["7"] + f[3:])
    elif case == "headerless_extra_field":
        _headerless_sqc(cohort, tmp_path / "ok.txt")
        lines = (tmp_path / "ok.txt").read_text().splitlines()
        lines[2] += " 0"
        bad.write_text("\n".join(lines) + "\n")
    else:
        bad = steps / "folder"
    out = tmp_path / "out"
    fails(capsys, ["samples", "--fam", cohort / "genotypes.fam", "--sqc", bad,
                   "--out", out / "samples"], bad, problem, out)


# ------------------------------------------------------------------------------- store
def _store_args(cohort, steps, out, **change):
    args = {"--bfile": cohort / "genotypes", "--keep": steps / "unrelated.king.cutoff.in.id",
            "--snps": steps / "hair.snps.tsv", "--pheno": cohort / "phenotypes.tsv",
            "--trait": "hair", "--trait-config": json.dumps(HAIR)}
    args.update({f"--{k.replace('_', '-')}": v for k, v in change.items()})
    return ["store", *[x for kv in args.items() for x in kv], "--out", out / "hair.zarr"]


@pytest.mark.parametrize("value", ["inf", "nan", "-inf"])
def test_store_rejects_a_selection_without_a_finite_beta(cohort, steps, tmp_path, capsys,
                                                         value):
    table = pd.read_csv(steps / "hair.snps.tsv", sep="\t", dtype=str)
    table.loc[2, "beta"] = value
    bad = tmp_path / "t.snps.tsv"
    table.to_csv(bad, sep="\t", index=False)
    out = tmp_path / "out"
    fails(capsys, _store_args(cohort, steps, out, snps=bad), f"{bad}, line 4, column beta",
          f"expected a finite number for every selected SNP, found '{value}'", out)


# ---------------------------------------------------------------- the field-count pass
@pytest.mark.parametrize("sep", ["\t", None])
@pytest.mark.parametrize("block", [5, 64, 1 << 23])
def test_field_counts_match_a_line_by_line_count(tmp_path, sep, block):
    """data_line_numbers against Python's own split of each line, across block edges,
    blank lines, CRLF endings, gzip and a last line without a newline."""
    import numpy as np

    from cmix.io import CmixError, data_line_numbers

    rng = np.random.default_rng(len(str(sep)) + block)
    rows = ["a\tb\tc"]
    for _ in range(300):
        kind = rng.integers(10)
        if kind == 0:
            rows.append("")                                   # blank line
        elif kind == 1:
            rows.append("x\ty\tz\r")                          # CRLF
        elif kind == 2 and sep is None:
            rows.append("  x y\t\tz  ")                       # runs of spaces and tabs
        elif kind == 3 and sep == "\t":
            rows.append("x\t\t")                              # empty fields count
        else:
            rows.append("\t".join(str(v) for v in rng.integers(0, 10**6, 3)))

    def expected(lines):
        count = (lambda s: s.count("\t") + 1) if sep else (lambda s: len(s.split()))
        blank = (lambda s: s.rstrip("\r") == "") if sep else (lambda s: not s.split())
        return [(i, count(s)) for i, s in enumerate(lines, 1) if i > 1 and not blank(s)]

    for suffix in ("", ".gz"):
        path = tmp_path / f"t{suffix}"
        opener = gzip.open if suffix else open
        with opener(path, "wt", newline="") as fh:
            fh.write("\n".join(rows))                          # no final newline
        assert all(c == 3 for _, c in expected(rows))
        got = data_line_numbers(path, 3, sep, "test", block=block)
        assert got.tolist() == [i for i, _ in expected(rows)]
        bad = list(rows)
        bad[200] = "1\t2\t3\t4" if bad[200].strip() else "1"
        with opener(path, "wt", newline="") as fh:
            fh.write("\n".join(bad))
        first_bad = next(i for i, c in expected(bad) if c != 3)
        with pytest.raises(CmixError, match=f"line {first_bad}: expected 3 columns"):
            data_line_numbers(path, 3, sep, "test", block=block)
