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
    """The documented steps (docs/reference/steps.md) on the session cohort, up to the
    trait's SNP selection."""
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


@pytest.mark.parametrize("arg", ["--extract", "--keep"])
def test_select_rejects_a_folder_as_a_list(cohort, steps, tmp_path, capsys, arg):
    out = tmp_path / "out"
    fails(capsys, ["select", "--sumstats", cohort / "sumstats/hair_colour.txt.gz", "--bfile",
                   cohort / "genotypes", arg, steps / "folder", "--clump", "--top", "10",
                   "--out", out / "t.snps.tsv"],
          steps / "folder", "is a folder, expected a file", out)


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
    ("extra_field", "line 5: expected 18 columns as in the header, found 19"),
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


@pytest.mark.parametrize("arg", ["--fam", "--withdrawn"])
def test_samples_rejects_a_folder(cohort, steps, tmp_path, capsys, arg):
    args = {"--fam": cohort / "genotypes.fam", "--withdrawn": cohort / "withdrawn.txt"}
    args[arg] = steps / "folder"
    out = tmp_path / "out"
    fails(capsys, ["samples", *[x for kv in args.items() for x in kv], "--out", out / "s"],
          steps / "folder", "is a folder, expected a", out)


# ---------------------------------------------------------------------------------- qc
def _trio_with(cohort, d: Path, folder_ext=None, fam_lines=None) -> Path:
    """A copy of the cohort's trio under ``d``; ``folder_ext`` becomes a folder and
    ``fam_lines`` (a list of 0-based lines) replaces the .fam's lines."""
    d.mkdir()
    for ext in (".bed", ".bim", ".fam"):
        if ext == folder_ext:
            (d / f"g{ext}").mkdir()
        else:
            shutil.copy(cohort / f"genotypes{ext}", d / f"g{ext}")
    if fam_lines is not None:
        lines = (cohort / "genotypes.fam").read_text().splitlines(True)
        (d / "g.fam").write_text("".join(lines[i] for i in fam_lines))
    return d / "g"


@pytest.mark.parametrize("ext", [".bed", ".bim", ".fam"])
def test_qc_rejects_a_folder_in_the_trio(cohort, tmp_path, capsys, ext):
    prefix = _trio_with(cohort, tmp_path / "trio", folder_ext=ext)
    out = tmp_path / "out"
    fails(capsys, ["qc", "--bfile", prefix, "--out", out / "v"], f"{prefix}{ext}",
          "is a folder, expected a file", out)


@pytest.mark.parametrize("arg", ["--keep", "--remove"])
def test_qc_rejects_a_folder_as_a_sample_list(cohort, steps, tmp_path, capsys, arg):
    out = tmp_path / "out"
    fails(capsys, ["qc", "--bfile", cohort / "genotypes", arg, steps / "folder",
                   "--out", out / "v"], steps / "folder", "is a folder, expected a file", out)


@pytest.mark.parametrize("dropped", [99, 1999])
@pytest.mark.parametrize("step", ["qc", "select", "store", "unrelated"])
def test_fam_short_by_a_line_is_caught_by_the_padding(cohort, steps, tmp_path, capsys,
                                                      step, dropped):
    """2,000 samples: a .fam of 1,999 lines keeps 500 bytes per variant, so the .bed size
    still matches; the .bed's padding bits (the last sample's calls) tell."""
    n = len((cohort / "genotypes.fam").read_text().splitlines())
    assert (n + 3) // 4 == (n - 1 + 3) // 4 and (n - 1) % 4
    prefix = _trio_with(cohort, tmp_path / "trio",
                        fam_lines=[i for i in range(n) if i != dropped])
    out = tmp_path / "out"
    args = {
        "qc": ["qc", "--bfile", prefix, "--out", out / "v"],
        "select": ["select", "--sumstats", cohort / "sumstats/hair_colour.txt.gz", "--bfile",
                   prefix, "--top", "10", "--out", out / "t.tsv"],
        "store": ["store", "--bfile", prefix, "--snps", steps / "hair.snps.tsv", "--pheno",
                  cohort / "phenotypes.tsv", "--trait", "hair", "--trait-config",
                  json.dumps(HAIR), "--out", out / "hair.zarr"],
        "unrelated": ["unrelated", "--bfile", prefix, "--out", out / "u"],
    }[step]
    fails(capsys, args, f"{prefix}.bed", "the .fam probably has fewer lines than the .bed "
          "was written for", out)


# --------------------------------------------------------------------------- unrelated
def test_unrelated_rejects_an_empty_keep_list(cohort, steps, tmp_path, capsys):
    out = tmp_path / "out"
    fails(capsys, ["unrelated", "--kinship", cohort / "kinship.dat", "--fam",
                   cohort / "genotypes.fam", "--keep", steps / "empty.keep", "--out", out / "u"],
          steps / "empty.keep", "no sample IDs", out)


def test_headerless_kinship_table_names_line_not_ids(cohort, tmp_path, capsys):
    table = tmp_path / "rel.dat"
    lines = (cohort / "kinship.dat").read_text().splitlines(True)
    table.write_text("".join(lines[1:]))
    out = tmp_path / "out"
    msg = fails(capsys, ["unrelated", "--kinship", table, "--fam", cohort / "genotypes.fam",
                         "--out", out / "u"],
                f"{table}, line 1:", "not a kinship table header", out)
    id1, id2 = lines[1].split()[:2]
    assert id1 not in msg and id2 not in msg
    assert "ID1 ID2 HetHet IBS0 Kinship" in msg


@pytest.mark.parametrize("arg", ["--kinship", "--fam", "--keep"])
def test_unrelated_rejects_a_folder(cohort, steps, tmp_path, capsys, arg):
    args = {"--kinship": cohort / "kinship.dat", "--fam": cohort / "genotypes.fam",
            "--keep": steps / "samples.keep"}
    args[arg] = steps / "folder"
    out = tmp_path / "out"
    fails(capsys, ["unrelated", *[x for kv in args.items() for x in kv], "--out", out / "u"],
          steps / "folder", "is a folder, expected a file", out)


def test_unrelated_rejects_a_folder_as_extract(cohort, steps, tmp_path, capsys):
    out = tmp_path / "out"
    fails(capsys, ["unrelated", "--bfile", cohort / "genotypes", "--extract", steps / "folder",
                   "--out", out / "u"], steps / "folder", "is a folder, expected a file", out)


# ------------------------------------------------------------------------------- store
def _store_args(cohort, steps, out, **change):
    args = {"--bfile": cohort / "genotypes", "--keep": steps / "unrelated.king.cutoff.in.id",
            "--snps": steps / "hair.snps.tsv", "--pheno": cohort / "phenotypes.tsv",
            "--trait": "hair", "--trait-config": json.dumps(HAIR)}
    args.update({f"--{k.replace('_', '-')}": v for k, v in change.items()})
    return ["store", *[x for kv in args.items() for x in kv], "--out", out / "hair.zarr"]


@pytest.mark.parametrize("config, problem", [
    ({**HAIR, "instanse": 2}, "unknown key 'instanse' (did you mean 'instance'?)"),
    ({"field": 30100, "kind": "continuous", "binarize": "median"},
     "unknown key 'binarize' (did you mean 'binarise'?)"),
    ({"field": 30100, "kind": "continuous", "binarise": {"treshold": 9}},
     "unknown key 'treshold' (did you mean 'threshold'?)"),
    ({**HAIR, "classes": ["a", "b"]}, "a map of at least two class names to lists of codes"),
    ({**HAIR, "classes": {"a": [None], "b": [2]}}, "class 'a': a code is an integer, found "
                                                   "None"),
    ({**HAIR, "classes": {"a": [1.5], "b": [2]}}, "class 'a': a code is an integer, found "
                                                  "1.5"),
    ({**HAIR, "binarise": "median"}, "'binarise' applies to continuous traits only"),
    ({"field": 30100, "kind": "continuous", "binarise": {"quantiles": ["a", 0.75]}},
     "'binarise' must be 'median'"),
])
def test_store_rejects_bad_trait_config(cohort, steps, tmp_path, capsys, config, problem):
    problem = problem.replace("a code is an integer", "a code is an integer (the field's UK "
                              "Biobank data-coding value) or text (the category as the "
                              "phenotype table writes it)")
    out = tmp_path / "out"
    fails(capsys, _store_args(cohort, steps, out, trait_config=json.dumps(config)),
          "--trait-config: trait 'hair'", problem, out)


def test_store_names_the_trait_config_file(cohort, steps, tmp_path, capsys):
    out = tmp_path / "out"
    path = tmp_path / "hair.json"
    path.write_text(json.dumps({**HAIR, "instanse": 2}))
    fails(capsys, _store_args(cohort, steps, out, trait_config=path), f"{path}: trait 'hair'",
          "unknown key 'instanse'", out)
    path.write_text("[1, 2]")
    for text, names in ((path, path), ("[1,2]", "--trait-config")):
        fails(capsys, _store_args(cohort, steps, out, trait_config=text), names,
              "the trait config must be a JSON object", out)
    fails(capsys, _store_args(cohort, steps, out, trait_config=steps / "folder"),
          steps / "folder", "is a folder, expected a file", out)


def test_store_rejects_a_class_without_samples(cohort, steps, tmp_path, capsys):
    out = tmp_path / "out"
    config = {**HAIR, "classes": {**HAIR["classes"], "other": [77]}}
    msg = fails(capsys, _store_args(cohort, steps, out, trait_config=json.dumps(config)),
                cohort / "phenotypes.tsv", "trait 'hair' (column 'f.1747.0.0'): class 'other' "
                "(codes [77]) has no sample after filtering", out)
    assert "'other': 0" in msg
    config = {"field": 30100, "kind": "continuous", "binarise": {"threshold": 1000}}
    fails(capsys, _store_args(cohort, steps, out, trait_config=json.dumps(config)),
          cohort / "phenotypes.tsv", "class 'high' (values > 1000) has no sample", out)


def test_store_blames_an_empty_keep_list(cohort, steps, tmp_path, capsys):
    out = tmp_path / "out"
    fails(capsys, _store_args(cohort, steps, out, keep=steps / "empty.keep"),
          steps / "empty.keep", "no sample IDs", out)


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


@pytest.mark.parametrize("arg", ["keep", "snps", "pheno"])
def test_store_rejects_a_folder(cohort, steps, tmp_path, capsys, arg):
    out = tmp_path / "out"
    fails(capsys, _store_args(cohort, steps, out, **{arg: steps / "folder"}), steps / "folder",
          "is a folder, expected a file", out)


# ------------------------------------------------------------------------------- train
def test_train_rejects_a_folder_as_config(steps, tmp_path, capsys):
    out = tmp_path / "out"
    fails(capsys, ["train", "--store", tmp_path / "t.zarr", "--budget", "10", "--seed", "1",
                   "--config", steps / "folder", "--out", out / "run"],
          steps / "folder", "is a folder, expected a file (trainer config", out)


# ---------------------------------------------------------------- the field-count pass
@pytest.mark.parametrize("sep", ["\t", None])
@pytest.mark.parametrize("block", [5, 64, 1 << 23])
def test_field_counts_match_a_line_by_line_count(tmp_path, sep, block):
    """data_line_numbers against Python's own split of each line, across block edges,
    blank lines, CRLF endings, gzip and a last line without a newline."""
    import numpy as np

    from cmix.errors import CmixError
    from cmix.text import data_line_numbers

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


@pytest.mark.parametrize("case", ["text", "gzip"])
def test_bgen_index_refuses_a_file_that_is_not_bgen(tmp_path, capsys, case):
    """A text or gzipped file given to bgen-index is one message naming it; no .bgi is
    written."""
    text = b"#CHROM POS ID REF ALT this is a text table, not a BGEN file\n" * 3
    data = {"text": text, "gzip": gzip.compress(text)}
    d = tmp_path / "in"
    d.mkdir()
    path = d / "x.bgen"
    path.write_bytes(data[case])
    rc = main(["bgen-index", str(path)])
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if not line.startswith("[cmix]")]
    assert rc == 1 and len(lines) == 1, err
    assert lines[0].startswith(f"cmix bgen-index: error: {path}: not a BGEN file"), lines[0]
    assert [p.name for p in d.iterdir()] == ["x.bgen"]


@pytest.mark.parametrize("spec, problem", [
    ("YRI:1", "the counts add up to 1 person; a cohort needs at least 2"),
    ("YRI:0.5,CEU:100", "YRI given as shares and CEU as counts"),
    ("YRI:0.1,CEU:0.1", "the shares sum to 0.2; shares of --n-samples must sum to 1"),
    ("YRI:0.6,CEU:0.5", "the shares sum to 1.1; shares of --n-samples must sum to 1"),
])
def test_simulate_refuses_a_populations_spec_it_would_misread(tmp_path, capsys, spec,
                                                              problem):
    """Counts and shares are told apart by how they are written (a point makes a share);
    mixed ones, shares not summing to 1 and a cohort of one person are refused before
    anything is simulated (msprime not needed to be told)."""
    fails(capsys, ["simulate", "--haplotypes", "coalescent", "--populations", spec,
                   "--n-variants", "100", "--out", tmp_path / "o"],
          "--populations", problem, tmp_path / "o")


def test_a_share_of_one_is_the_whole_cohort():
    from cmix.simulate.populations import parse_population_counts

    assert parse_population_counts("ADMIX:1.0", 300, ["AFR", "ADMIX"]) == {"ADMIX": 300}
    assert parse_population_counts({"ADMIX": 1.0}, 300, ["ADMIX"]) == {"ADMIX": 300}
    assert parse_population_counts("AFR:0.25,ADMIX:0.75", 8, ["AFR", "ADMIX"]) == {
        "AFR": 2, "ADMIX": 6}
    assert parse_population_counts("AFR:3,ADMIX:5", 300, ["AFR", "ADMIX"]) == {
        "AFR": 3, "ADMIX": 5}
