"""Text inputs as users write them: every reader of a user's text file gives the same
result for the file gzipped (told by its magic bytes, whatever its name), starting with
a UTF-8 byte-order mark, or with CRLF line ends; and inputs that used to be misread or
silently accepted are refused with one message naming the file and the problem.
"""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from cmix.cli import main
from conftest import requires_plink2
from cmix.readers import bgen, pgen, plink
from cmix.genotypes import covariates, phenotypes, samples, selection
from cmix.genotypes.relatedness.kinship_table import read_kinship_table
from cmix.errors import CmixError
from cmix.text import read_id_list, read_id_set

BOM = "\ufeff"


# ------------------------------------------------------------------- the plain files
def _write(path: Path, text: str) -> Path:
    path.write_bytes(text.encode())
    return path


@pytest.fixture(scope="module")
def plain(cohort, tmp_path_factory):
    """{reader name: plain input file} built from the session cohort (LF line ends, no
    BOM, not compressed)."""
    d = tmp_path_factory.mktemp("plain")
    c = cohort
    fam = plink.read_fam(c / "genotypes.fam")
    bim = plink.read_bim(c / "genotypes.bim")
    files = {}
    for name in ("genotypes.fam", "genotypes.bim", "sample_qc.tsv", "phenotypes.tsv",
                 "kinship.dat", "withdrawn.txt"):
        files[name] = Path(shutil.copy(c / name, d / name))
    pheno = pd.read_csv(c / "phenotypes.tsv", sep="\t", dtype=str, keep_default_na=False)
    pheno.rename(columns=lambda s: s[2:].replace(".", "-", 1) if s.startswith("f.") else s
                 ).to_csv(d / "showcase.csv", index=False)
    files["showcase.csv"] = d / "showcase.csv"
    sqc = pd.read_csv(c / "sample_qc.tsv", sep="\t", dtype=str, keep_default_na=False)
    files["headerless_sqc.txt"] = _write(d / "headerless_sqc.txt", "".join(
        " ".join(["0"] * 2 + [r["genotyping.array"], r["Batch"]] + ["0"] * 14
                 + [r["het.missing.outliers"], r["putative.sex.chromosome.aneuploidy"], "0", "0",
                    r["excess.relatives"], r["in.white.British.ancestry.subset"], "1"]
                 + [r[f"PC{k}"] for k in range(1, 11)] + ["0"] * 33) + "\n"
        for _, r in sqc.set_index("eid").loc[fam["iid"]].reset_index().iterrows()))
    files["keep.txt"] = _write(d / "keep.txt", "#FID\tIID\n" + "".join(
        f"{a}\t{b}\n" for a, b in zip(fam["fid"][::3], fam["iid"][::3])))
    files["extract.txt"] = _write(d / "extract.txt",
                                  "".join(f"{v}\n" for v in bim["variant_id"][::2]))
    files["pcs.eigenvec"] = _write(d / "pcs.eigenvec", "#FID\tIID\tPC1\tPC2\tPC3\n" + "".join(
        f"{a}\t{b}\t{k * 0.001:.4f}\t{-k * 0.002:.4f}\t{(k % 7) * 0.01:.4f}\n"
        for k, (a, b) in enumerate(zip(fam["fid"], fam["iid"]))))
    files["g.pvar"] = _write(d / "g.pvar", "##fileformat=PVARv1.0\n##source=test\n"
                             "#CHROM\tPOS\tID\tREF\tALT\tCM\n" + "".join(
                                 f"{r.chrom}\t{r.pos}\t{r.variant_id}\t{r.a2}\t{r.a1}\t{k * 0.01:g}\n"
                                 for k, r in enumerate(bim.itertuples())))
    files["g.psam"] = _write(d / "g.psam", "#FID\tIID\tSEX\n" + "".join(
        f"{a}\t{b}\t{s}\n" for a, b, s in zip(fam["fid"], fam["iid"], fam["sex"])))
    files["g.sample"] = _write(d / "g.sample", "ID_1 ID_2 missing sex\n0 0 0 D\n" + "".join(
        f"{a} {b} 0 {s}\n" for a, b, s in zip(fam["fid"], fam["iid"], fam["sex"])))
    files["g_v2.sample"] = _write(d / "g_v2.sample", "ID missing sex\n0 0 D\n" + "".join(
        f"{a}_{b} 0 {s}\n" for a, b, s in zip(fam["fid"], fam["iid"], fam["sex"])))
    files["mfi.txt"] = _write(d / "mfi.txt", "".join(
        f"{r.chrom}:{r.pos}\t{r.variant_id}\t{r.pos}\t{r.a2}\t{r.a1}\t0.1\t{r.a1}\t0.9{k % 10}\n"
        for k, r in enumerate(bim.itertuples())))
    return files, fam


def _spec(**kw):
    return {"fields": [], "pcs": 0, **kw}


#: reader name -> (plain file key, function of (path, fam) giving a comparable result)
READERS = {
    "read_fam": ("genotypes.fam", lambda p, fam: plink.read_fam(p)),
    "read_bim": ("genotypes.bim", lambda p, fam: plink.read_bim(p)),
    "read_sample_ids (--keep/--remove)": ("keep.txt", lambda p, fam: selection.read_sample_ids(p)),
    "read_id_list": ("extract.txt", lambda p, fam: read_id_list(p, "ids")),
    "read_variant_ids (--extract)": ("extract.txt", lambda p, fam: selection.read_variant_ids(p)),
    "read_id_set": ("extract.txt", lambda p, fam: sorted(read_id_set(p, "ids"))),
    "read_withdrawn": ("withdrawn.txt", lambda p, fam: sorted(samples.read_withdrawn(p))),
    "read_sample_qc (tidy)": ("sample_qc.tsv", lambda p, fam: samples.read_sample_qc(p, fam)),
    "read_sample_qc (ukb_sqc_v2)": ("headerless_sqc.txt",
                                    lambda p, fam: samples.read_sample_qc(p, fam)),
    "read_phenotypes (tsv)": ("phenotypes.tsv", lambda p, fam: phenotypes.read_phenotypes(p)),
    "read_phenotypes (csv)": ("showcase.csv", lambda p, fam: phenotypes.read_phenotypes(p)),
    "covariates from sample QC (tidy)": (
        "sample_qc.tsv", lambda p, fam: covariates.covariate_matrix(
            _spec(pcs=3, array=True, batch=True), fam, np.arange(len(fam)), sample_qc=p)[1]),
    "covariates from sample QC (ukb_sqc_v2)": (
        "headerless_sqc.txt", lambda p, fam: covariates.covariate_matrix(
            _spec(pcs=3, array=True, batch=True), fam, np.arange(len(fam)), sample_qc=p)[1]),
    "covariates from .eigenvec": (
        "pcs.eigenvec", lambda p, fam: covariates.covariate_matrix(
            _spec(pcs=3, pcs_from="eigenvec"), fam, np.arange(len(fam)), eigenvec=p)[1]),
    "read_kinship_table": ("kinship.dat", lambda p, fam: read_kinship_table(p)),
    "read_pvar": ("g.pvar", lambda p, fam: pgen.read_pvar(p)),
    "read_psam": ("g.psam", lambda p, fam: pgen.read_psam(p)),
    "read_sample_file (BGEN .sample)": ("g.sample", lambda p, fam: bgen.read_sample_file(p)),
    "read_sample_file (BGEN .sample, sample-v2)": ("g_v2.sample",
                                                   lambda p, fam: bgen.read_sample_file(p)),
    "read_mfi": ("mfi.txt", lambda p, fam: bgen.read_mfi(p)),
}

VARIANTS = {
    "gzip": lambda b: gzip.compress(b, mtime=0),
    "bom": lambda b: BOM.encode() + b,
    "crlf": lambda b: b.replace(b"\n", b"\r\n"),
    "gzip+bom+crlf": lambda b: gzip.compress(BOM.encode() + b.replace(b"\n", b"\r\n"), mtime=0),
}


def _same(a, b) -> None:
    if isinstance(a, pd.DataFrame):
        pd.testing.assert_frame_equal(a, b)
        assert a.attrs.get("has_fid") == b.attrs.get("has_fid")
    elif isinstance(a, np.ndarray):
        np.testing.assert_array_equal(a, b)
    else:
        assert a == b


@pytest.mark.parametrize("variant", list(VARIANTS))
@pytest.mark.parametrize("reader", list(READERS))
def test_every_reader_reads_gzip_bom_and_crlf_as_the_plain_file(plain, tmp_path, reader,
                                                                variant):
    """The variant file (same name: gzip is told by its magic bytes) gives the plain
    file's result."""
    files, fam = plain
    key, read = READERS[reader]
    src = files[key]
    raw = src.read_bytes()
    assert b"\r" not in raw and not raw.startswith(BOM.encode())
    dst = tmp_path / src.name
    dst.write_bytes(VARIANTS[variant](raw))
    want, got = read(src, fam), read(dst, fam)
    assert len(want) > 0
    _same(want, got)


@pytest.mark.parametrize("reader", ["read_fam", "read_bim", "read_psam", "read_pvar"])
def test_fields_past_the_columns_are_ignored(plain, tmp_path, reader):
    """A .fam, .bim, .psam or .pvar whose data lines carry one more field than their
    columns reads as the plain file: the extra field is ignored, never a shift of every
    column (pandas took the first field of a 7-field .fam for its index)."""
    files, fam = plain
    key, read = READERS[reader]
    src = files[key]
    sep = "\t" if key.endswith((".pvar", ".psam")) else " "
    text = "".join(line if line.startswith("#") else line.rstrip("\n") + f"{sep}extra\n"
                   for line in src.read_text().splitlines(True))
    dst = _write(tmp_path / src.name, text)
    _same(read(src, fam), read(dst, fam))


@requires_plink2
@pytest.mark.plink2
def test_a_fam_and_bim_with_an_extra_field_read_as_plink2_reads_them(cohort, tmp_path):
    """plink2 reads the first six fields of a 7-field .fam and .bim and writes them back
    (--make-just-fam, --make-just-bim); cmix's reading of the 7-field files equals its
    reading of plink2's output."""
    import subprocess

    for ext in ("fam", "bim"):
        text = (cohort / f"genotypes.{ext}").read_text()
        _write(tmp_path / f"seven.{ext}",
               "".join(line + " extra\n" for line in text.splitlines()))
    shutil.copy(cohort / "genotypes.bed", tmp_path / "seven.bed")
    subprocess.run(["plink2", "--bfile", str(tmp_path / "seven"), "--make-just-fam",
                    "--make-just-bim", "--out", str(tmp_path / "p2")], check=True,
                   capture_output=True)
    _same(plink.read_fam(tmp_path / "p2.fam"), plink.read_fam(tmp_path / "seven.fam"))
    _same(plink.read_bim(tmp_path / "p2.bim"), plink.read_bim(tmp_path / "seven.bim"))


@pytest.mark.parametrize("layout", ["comma", "comma_space", "padded_tsv"])
def test_a_tidy_sample_qc_table_reads_alike_in_every_layout(plain, tmp_path, layout):
    """The tidy sample QC table as a CSV, as a CSV with ", " between fields, and as a TSV
    with spaces around its names and IDs: the same filters (every column found, every ID
    matched) and the same covariates as the plain TSV."""
    files, fam = plain
    rows = [line.split("\t") for line in files["sample_qc.tsv"].read_text().splitlines()]
    join = {"comma": ",", "comma_space": ", ", "padded_tsv": "\t"}[layout]
    pad = (lambda f: f" {f} ") if layout == "padded_tsv" else (lambda f: f)
    path = _write(tmp_path / "sqc.txt", "".join(
        join.join(pad(f) for f in row) + "\n" for row in rows))
    for reader in ("read_sample_qc (tidy)", "covariates from sample QC (tidy)"):
        read = READERS[reader][1]
        _same(read(files["sample_qc.tsv"], fam), read(path, fam))
    qc = samples.read_sample_qc(path, fam)
    assert qc["in_table"].all() and set(samples.SQC_FIELDS) <= set(qc.columns)


# --------------------------------------------------------------------- CLI helpers
def fails(capsys, args, names, problem, out_dir) -> str:
    """Run ``cmix args``: exit 1, one error line starting with ``names`` and holding
    ``problem``, and nothing in ``out_dir``. Returns the line."""
    rc = main([str(a) for a in args])
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if not line.startswith("[cmix]")]
    assert rc == 1, err
    assert len(lines) == 1, err
    assert lines[0].startswith(f"cmix {args[0]}: error: {names}"), lines[0]
    assert problem in lines[0], lines[0]
    out_dir = Path(out_dir)
    assert not out_dir.exists() or not list(out_dir.iterdir()), list(out_dir.iterdir())
    return lines[0]


def _fam_iids(cohort) -> list[str]:
    return plink.read_fam(cohort / "genotypes.fam")["iid"].tolist()


# ----------------------------------------------------------------------- withdrawals
def test_a_bom_does_not_hide_the_first_withdrawn_participant(cohort, tmp_path, capsys):
    """Two withdrawn .fam participants, the list saved with a BOM (and CRLF, gzipped):
    both are removed, the log counts the list's matches, no ID is logged."""
    iids = _fam_iids(cohort)
    w = [iids[5], iids[17], "999999999"]              # the last is in no .fam
    for name, data in (("bom.txt", BOM + "\n".join(w) + "\n"),
                       ("bom_crlf.txt", BOM + "\r\n".join(w) + "\r\n")):
        _write(tmp_path / name, data)
    (tmp_path / "bom.gz.txt").write_bytes(gzip.compress((tmp_path / "bom_crlf.txt").read_bytes()))
    for name in ("bom.txt", "bom_crlf.txt", "bom.gz.txt"):
        out = tmp_path / name.replace(".", "_")
        assert main(["samples", "--fam", str(cohort / "genotypes.fam"), "--withdrawn",
                     str(tmp_path / name), "--out", str(out / "s")]) == 0
        err = capsys.readouterr().err
        table = pd.read_csv(out / "s.filters.tsv", sep="\t")
        assert table.set_index("filter").loc["withdrawn", "n_removed"] == 2
        keep = pd.read_csv(out / "s.keep", sep="\t", dtype=str)["IID"]
        assert not set(w) & set(keep) and len(keep) == len(iids) - 2
        assert "withdrawn list: 2 of its 3 IDs are in the .fam" in err
        assert not any(i in err for i in w)


@pytest.mark.parametrize("case, text, problem", [
    ("ukb_csv", "{a},2021-03-01\n{b},2021-03-02\n", "line 1: expected one ID per line"),
    ("two_fields", "{a}\n{b} 2021-03-02\n", "line 2: expected one ID per line"),
    ("none_match", "123\n456\n", "none of its 2 withdrawn participant IDs is an IID of the .fam"),
    ("empty", "", "no participant ID in the withdrawn participants list"),
    ("blank", "\n  \n\t\n", "no participant ID in the withdrawn participants list"),
])
def test_a_withdrawal_list_that_withdraws_nobody_is_refused(cohort, tmp_path, capsys, case,
                                                            text, problem):
    iids = _fam_iids(cohort)
    path = _write(tmp_path / "w.csv", text.format(a=iids[3], b=iids[4]))
    out = tmp_path / "out"
    line = fails(capsys, ["samples", "--fam", cohort / "genotypes.fam", "--withdrawn", path,
                          "--out", out / "s"], path, problem, out)
    assert iids[3] not in line and iids[4] not in line


def test_a_bom_does_not_hide_the_first_extract_variant(plain, tmp_path):
    files, _ = plain
    ids = read_id_list(files["extract.txt"], "ids")
    _write(tmp_path / "x.txt", BOM + "\n".join(ids) + "\n")
    assert read_id_set(tmp_path / "x.txt", "ids") == set(ids)


# ------------------------------------------------------------ gzipped inputs via CLI
def test_samples_and_unrelated_read_gzipped_bom_crlf_inputs(cohort, tmp_path, capsys):
    """cmix samples and cmix unrelated on gzip+BOM+CRLF copies of every text input
    (the .fam included) write the same bytes as on the plain files."""
    g = tmp_path / "g"
    g.mkdir()
    shutil.copy(cohort / "genotypes.bed", g / "genotypes.bed")
    for name in ("genotypes.fam", "genotypes.bim", "sample_qc.tsv", "withdrawn.txt",
                 "kinship.dat"):
        (g / name).write_bytes(VARIANTS["gzip+bom+crlf"]((cohort / name).read_bytes()))
    outs = {}
    for label, d in (("plain", cohort), ("variant", g)):
        out = tmp_path / label
        assert main(["samples", "--fam", str(d / "genotypes.fam"), "--sqc",
                     str(d / "sample_qc.tsv"), "--withdrawn", str(d / "withdrawn.txt"),
                     "--out", str(out / "s")]) == 0
        assert main(["unrelated", "--kinship", str(d / "kinship.dat"), "--fam",
                     str(d / "genotypes.fam"), "--keep", str(out / "s.keep"),
                     "--out", str(out / "u")]) == 0
        outs[label] = {p.name: p.read_bytes() for p in sorted(out.iterdir())}
    capsys.readouterr()
    assert outs["plain"] == outs["variant"] and len(outs["plain"]) >= 4


def test_a_bom_in_the_kinship_header_is_read(cohort, tmp_path):
    path = _write(tmp_path / "k.dat", BOM + (cohort / "kinship.dat").read_text())
    _same(read_kinship_table(cohort / "kinship.dat"),
          read_kinship_table(path))


@pytest.mark.parametrize("case, problem", [
    ("reversed_pair", "the same pair of samples on lines 2 and"),
    ("repeated_pair", "the same pair of samples on lines 2 and"),
    ("self_pair", "line 2: a sample paired with itself"),
])
def test_a_kinship_table_listing_a_pair_twice_or_a_self_pair_is_refused(cohort, tmp_path,
                                                                        capsys, case, problem):
    """A pair listed twice (in either order) would be counted twice among the related
    pairs; a sample paired with itself is no relationship. Both are refused, naming the
    lines and no ID."""
    lines = (cohort / "kinship.dat").read_text().splitlines(True)
    first = lines[1].split()
    extra = {"reversed_pair": [first[1], first[0], *first[2:]], "repeated_pair": first,
             "self_pair": [first[0], first[0], *first[2:]]}[case]
    if case == "self_pair":
        lines[1] = " ".join(extra) + "\n"
    else:
        lines.append(" ".join(extra) + "\n")
    path = _write(tmp_path / "k.dat", "".join(lines))
    out = tmp_path / "out"
    line = fails(capsys, ["unrelated", "--kinship", path, "--fam", cohort / "genotypes.fam",
                          "--out", out / "u"], path, problem, out)
    assert first[0] not in line and first[1] not in line


# ---------------------------------------------------------------- tables: duplicates
@pytest.mark.parametrize("reader, name, header_edit", [
    ("phenotypes", "phenotypes.tsv", lambda h: h.replace("f.31.0.0", "f.30100.0.0")),
    ("sample_qc", "sample_qc.tsv", lambda h: h.replace("PC9", "PC2")),
    ("kinship", "kinship.dat", lambda h: h.replace("IBS0", "HetHet")),
])
def test_a_column_named_twice_is_refused(cohort, tmp_path, reader, name, header_edit):
    lines = (cohort / name).read_text().splitlines(True)
    path = _write(tmp_path / name, header_edit(lines[0]) + "".join(lines[1:]))
    fam = plink.read_fam(cohort / "genotypes.fam")
    read = {"phenotypes": phenotypes.read_phenotypes,
            "sample_qc": lambda p: samples.read_sample_qc(p, fam),
            "kinship": read_kinship_table}[reader]
    with pytest.raises(CmixError, match=r"line 1: column '.*' appears twice in the header"):
        read(path)


# ------------------------------------------------------- cmix store: refused inputs
MPV = {"field": 30100, "kind": "continuous", "binarise": "median"}
HAIR = {"field": 1747, "kind": "categorical",
        "classes": {"blonde": [1], "red": [2], "brown": [3, 4], "black": [5]}}


@pytest.fixture(scope="module")
def snps(cohort, tmp_path_factory):
    out = tmp_path_factory.mktemp("sel") / "mpv.snps.tsv"
    assert main(["select", "--sumstats", str(cohort / "sumstats" / "mean_platelet_volume.txt.gz"),
                 "--bfile", str(cohort / "genotypes"), "--top", "100", "--out", str(out)]) == 0
    return out


def _store(cohort, snps, out, *, pheno=None, trait=MPV, spec=None, sqc=None, eigenvec=None):
    args = ["store", "--bfile", cohort / "genotypes", "--snps", snps,
            "--pheno", pheno or cohort / "phenotypes.tsv", "--trait", "t",
            "--trait-config", json.dumps(trait), "--out", out]
    if spec is not None:
        args += ["--covariates", json.dumps(spec), "--sample-qc", sqc or cohort / "sample_qc.tsv"]
    if eigenvec is not None:
        args += ["--eigenvec", eigenvec]
    return args


def _pheno(cohort) -> pd.DataFrame:
    return pd.read_csv(cohort / "phenotypes.tsv", sep="\t", dtype=str, keep_default_na=False)


def test_text_in_a_numeric_trait_cell_is_refused(cohort, snps, tmp_path, capsys):
    p = _pheno(cohort)
    p.loc[[9, 30], "f.30100.0.0"] = ["high", "n/a"]
    p.loc[[11, 12], "f.30100.0.0"] = ["NA", ""]           # missing values stay allowed
    p.to_csv(tmp_path / "p.tsv", sep="\t", index=False)
    lines = (tmp_path / "p.tsv").read_text().splitlines(True)
    _write(tmp_path / "p.tsv", "".join(lines[:5] + ["\n"] + lines[5:]))   # a blank line 6
    out = tmp_path / "out"
    fails(capsys, _store(cohort, snps, out / "t.zarr", pheno=tmp_path / "p.tsv"),
          tmp_path / "p.tsv", "line 12, column f.30100.0.0: 'high' is not a number", out)


@pytest.mark.parametrize("case, problem", [
    ("short_row_spaces", "line 8: expected 8 columns as in the header, found 7"),
    ("short_row_tabs", "line 8: expected 8 columns as in the header, found 7"),
    ("trailing_tab_rows", "line 2: expected 8 columns as in the header, found 9"),
    ("long_row_csv", "line 8: expected 8 columns as in the header, found 9"),
])
def test_a_phenotype_row_of_another_width_is_refused(cohort, snps, tmp_path, capsys, case,
                                                     problem):
    """A row with a value too few (a blank cell in a space-separated table, a cut line)
    or too many would put its values under other columns' names (a sex code read as a
    hair colour); it is refused, naming its line."""
    p = _pheno(cohort)
    assert p.shape[1] == 8
    if case == "short_row_spaces":
        p.loc[6, "f.30100.0.0"] = ""
        text = "".join(" ".join(v for v in row if v) + "\n"
                       for row in [p.columns, *p.to_numpy().tolist()])
    elif case == "short_row_tabs":
        rows = ["\t".join(row) for row in [p.columns, *p.to_numpy().tolist()]]
        rows[7] = rows[7].rsplit("\t", 1)[0]
        text = "\n".join(rows) + "\n"
    elif case == "trailing_tab_rows":
        text = "\t".join(p.columns) + "\n" + "".join(
            "\t".join(row) + "\t\n" for row in p.to_numpy().tolist())
    else:
        rows = [",".join(row) for row in [p.columns, *p.to_numpy().tolist()]]
        rows[7] += ",1"
        text = "\n".join(rows) + "\n"
    path = _write(tmp_path / "p.txt", text)
    out = tmp_path / "out"
    fails(capsys, _store(cohort, snps, out / "t.zarr", pheno=path), path, problem, out)


def test_quoted_commas_in_a_csv_phenotype_table_are_one_field(cohort, tmp_path):
    """A Showcase-style CSV whose text cells hold commas inside quotes reads as the TSV."""
    p = _pheno(cohort)
    p["note"] = [f"a, b {i}" for i in range(len(p))]
    p.to_csv(tmp_path / "p.csv", index=False)
    p.to_csv(tmp_path / "p.tsv", sep="\t", index=False)
    _same(phenotypes.read_phenotypes(tmp_path / "p.tsv"),
          phenotypes.read_phenotypes(tmp_path / "p.csv").rename_axis("eid"))


@pytest.mark.parametrize("cell", ["inf", "-Infinity", "1e999"])
def test_an_infinite_covariate_or_trait_cell_is_refused(cohort, snps, tmp_path, capsys, cell):
    for column, spec in (("f.21022.0.0", {"fields": [21022]}), ("f.30100.0.0", None)):
        p = _pheno(cohort)
        p.loc[9, column] = cell
        p.to_csv(tmp_path / "p.tsv", sep="\t", index=False)
        out = tmp_path / "out"
        args = _store(cohort, snps, out / "t.zarr", pheno=tmp_path / "p.tsv", spec=spec)
        fails(capsys, args, tmp_path / "p.tsv", f"line 11, column {column}: '{cell}' is not "
              "a number", out)


@pytest.mark.parametrize("option", ["--trait-config", "--covariates"])
def test_a_key_given_twice_in_json_is_refused(cohort, snps, tmp_path, capsys, option):
    """JSON keeps the last of two equal keys: a class or a field would vanish unseen."""
    args = _store(cohort, snps, tmp_path / "out" / "t.zarr", trait=HAIR, spec={"pcs": 2})
    text = ('{"field": 1747, "kind": "categorical", "classes": {"blonde": [1], '
            '"brown": [3], "brown": [4], "black": [5]}}' if option == "--trait-config"
            else '{"pcs": 2, "pcs": 3}')
    args[args.index(option) + 1] = text
    fails(capsys, args, option, "key 'brown' appears twice" if option == "--trait-config"
          else "key 'pcs' appears twice", tmp_path / "out")


def test_a_key_given_twice_in_a_trainer_config_is_refused(tmp_path):
    from cmix.learn.config import read_config_file

    _write(tmp_path / "c.yaml", "epochs: 2\nlr: 0.01\nepochs: 3\n")
    _write(tmp_path / "c.json", '{"epochs": 2, "epochs": 3}')
    with pytest.raises(CmixError, match=r"c.yaml, line 3: key 'epochs' appears twice"):
        read_config_file(tmp_path / "c.yaml")
    with pytest.raises(CmixError, match=r"c.json: key 'epochs' appears twice"):
        read_config_file(tmp_path / "c.json")


def test_a_phenotype_table_of_other_ids_is_named_as_such(cohort, snps, tmp_path, capsys):
    """eids written as floats match no .fam IID: the message says no candidate has a row,
    not that a class is empty."""
    p = _pheno(cohort)
    p["eid"] = p["eid"] + ".0"
    p.to_csv(tmp_path / "p.tsv", sep="\t", index=False)
    out = tmp_path / "out"
    fails(capsys, _store(cohort, snps, out / "t.zarr", pheno=tmp_path / "p.tsv"),
          tmp_path / "p.tsv", "has a row in the phenotype table", out)


def test_batch_levels_are_those_of_the_stored_samples(cohort, snps, tmp_path):
    """A batch held only by kept people without a label (here: no hair colour) is no
    level of the store: its levels are the stored samples' batches (pandas), so that
    `cmix predict` refuses that batch as one training never saw. The reference level
    (no column) is the most common batch."""
    from cmix.store.read import open_store, store_text

    p = _pheno(cohort)
    sqc = pd.read_csv(cohort / "sample_qc.tsv", sep="\t", dtype=str, keep_default_na=False)
    unlabeled = set(p.loc[p["f.1747.0.0"].isin(["", "NA", "-3", "-1"]), "eid"])
    assert unlabeled
    sqc.loc[sqc["eid"].isin(unlabeled), "Batch"] = "Batch_new"
    sqc.to_csv(tmp_path / "sqc.tsv", sep="\t", index=False)
    args = _store(cohort, snps, tmp_path / "t.zarr", trait=HAIR, spec={"batch": True},
                  sqc=tmp_path / "sqc.tsv")
    assert main([str(a) for a in args]) == 0
    root = open_store(tmp_path / "t.zarr")
    stored = set(store_text(root, "sample_id"))
    counts = sqc.set_index("eid").loc[sorted(stored), "Batch"].value_counts()
    ref = sorted(counts.index[counts == counts.max()])[0]      # the most common, ties: first
    want = [ref] + sorted(set(counts.index) - {ref})
    assert "Batch_new" not in want and len(want) > 2
    assert root.attrs["covariates"]["spec"]["batch_levels"] == want
    names = list(store_text(root, "covariate_name"))
    assert names == [f"batch_{b}" for b in want[1:]]


def test_a_field_in_both_column_layouts_is_refused(cohort, snps, tmp_path, capsys):
    p = _pheno(cohort)
    p["30100-0.0"] = p["f.30100.0.0"]
    p.to_csv(tmp_path / "p.tsv", sep="\t", index=False)
    out = tmp_path / "out"
    fails(capsys, _store(cohort, snps, out / "t.zarr", pheno=tmp_path / "p.tsv"),
          tmp_path / "p.tsv", "both 'f.30100.0.0' and '30100-0.0'", out)


def test_a_class_of_one_sample_is_refused_at_store(cohort, snps, tmp_path, capsys):
    """One sample coded 8, its own class: it cannot be in both splits, so the class's
    test accuracy would be missing from the metrics."""
    p = _pheno(cohort)
    fam_iids = set(_fam_iids(cohort))
    row = int(np.flatnonzero(p["eid"].isin(fam_iids).to_numpy())[0])
    p.loc[row, "f.1747.0.0"] = "8"
    p.to_csv(tmp_path / "p.tsv", sep="\t", index=False)
    trait = {**HAIR, "classes": {**HAIR["classes"], "grey": [8]}}
    out = tmp_path / "out"
    fails(capsys, _store(cohort, snps, out / "t.zarr", pheno=tmp_path / "p.tsv", trait=trait),
          tmp_path / "p.tsv", "class 'grey' has 1 sample(s), too few for one in the test split",
          out)


@pytest.mark.parametrize("case, problem", [
    ("empty", "the file (or its first line) is empty"),
    ("duplicate_id", "the same sample ID on lines 3 and 8"),
    ("padded_duplicate_id", "the same sample ID on lines 3 and 8"),
    ("no_pc3", "no column PC3"),
])
def test_bad_sample_qc_for_covariates_is_refused(cohort, snps, tmp_path, capsys, case, problem):
    lines = (cohort / "sample_qc.tsv").read_text().splitlines(True)
    if case == "empty":
        text = ""
    elif case == "duplicate_id":
        lines[7] = lines[2].split("\t")[0] + "\t" + lines[7].split("\t", 1)[1]
        text = "".join(lines)
    elif case == "padded_duplicate_id":            # the same ID once with a space after it
        lines[7] = lines[2].split("\t")[0] + " \t" + lines[7].split("\t", 1)[1]
        text = "".join(lines)
    else:
        sqc = pd.read_csv(cohort / "sample_qc.tsv", sep="\t", dtype=str, keep_default_na=False)
        sqc.drop(columns="PC3").to_csv(tmp_path / "sqc.tsv", sep="\t", index=False)
        text = (tmp_path / "sqc.tsv").read_text()
    path = _write(tmp_path / "sqc.tsv", text)
    out = tmp_path / "out"
    fails(capsys, _store(cohort, snps, out / "t.zarr", spec={"pcs": 5}, sqc=path), path,
          problem, out)


def test_a_duplicate_id_in_the_eigenvec_is_refused(cohort, snps, plain, tmp_path, capsys):
    files, _ = plain
    lines = files["pcs.eigenvec"].read_text().splitlines(True)
    a = lines[4].split("\t")
    lines[9] = "\t".join(a[:2] + lines[9].split("\t")[2:])
    path = _write(tmp_path / "pcs.eigenvec", "".join(lines))
    out = tmp_path / "out"
    fails(capsys, _store(cohort, snps, out / "t.zarr", spec={"pcs": 2, "pcs_from": "eigenvec"},
                         eigenvec=path), path, "the same sample ID on lines 5 and 10", out)


def test_a_short_row_in_the_eigenvec_is_refused(cohort, snps, plain, tmp_path, capsys):
    """A row missing its PC1 field would read PC2 as PC1 for that person."""
    files, _ = plain
    lines = files["pcs.eigenvec"].read_text().splitlines(True)
    a = lines[5].rstrip("\n").split("\t")
    lines[5] = "\t".join(a[:2] + a[3:]) + "\n"
    path = _write(tmp_path / "pcs.eigenvec", "".join(lines))
    out = tmp_path / "out"
    fails(capsys, _store(cohort, snps, out / "t.zarr", spec={"pcs": 2, "pcs_from": "eigenvec"},
                         eigenvec=path), path, "line 6: expected", out)


# ------------------------------------------------- per-chromosome files: chromosome
@pytest.fixture(scope="module")
def chrom_set(cohort, tmp_path_factory):
    """c{chrom}.bed/.bim per chromosome of the cohort, sharing c.fam."""
    d = tmp_path_factory.mktemp("chroms")
    bf = plink.open_bfile(cohort / "genotypes")
    for chrom in bf.bim["chrom"].unique():
        idx = np.flatnonzero(bf.bim["chrom"].to_numpy() == chrom)
        plink.write_bfile(d / f"c{chrom}", bf.read(idx), bf.fam,
                          bf.bim.iloc[idx].reset_index(drop=True))
    shutil.copy(cohort / "genotypes.fam", d / "c.fam")
    return d, sorted(bf.bim["chrom"].unique(), key=int)


def test_a_file_holding_another_chromosome_is_refused(chrom_set, tmp_path, capsys):
    """c2's files hold chromosome 1's variants: `cmix qc --chroms 2` and the whole set
    are refused instead of reading them as chromosome 2's (or finding none)."""
    d, chroms = chrom_set
    assert len(chroms) >= 2
    e = tmp_path / "set"
    shutil.copytree(d, e)
    for ext in (".bed", ".bim", ".fam"):       # chromosome 1's files under chromosome 2's name
        shutil.copy(d / f"c{chroms[0]}{ext}", e / f"c{chroms[1]}{ext}")
    out = tmp_path / "out"
    assert main(["qc", "--bfile", str(d / "c{chrom}"), "--fam", str(d / "c.fam"), "--chroms",
                 *chroms, "--out", str(tmp_path / "ok" / "v")]) == 0
    capsys.readouterr()
    for sel in ([chroms[1]], chroms):
        fails(capsys, ["qc", "--bfile", e / "c{chrom}", "--fam", e / "c.fam", "--chroms", *sel,
                       "--out", out / "v"], e / f"c{chroms[1]}.bim",
              f"chromosome '{chroms[0]}', but the file is chromosome {chroms[1]}'s", out)


def test_chromosome_names_compare_as_plink_numbers():
    from cmix.readers.sources import check_part_chrom

    bim = pd.DataFrame({"chrom": ["chr03", "3", "03"]})
    check_part_chrom(bim, "3", "c3.bim")
    check_part_chrom(pd.DataFrame({"chrom": ["23", "X", "chrX"]}), "X", "cX.bim")
    with pytest.raises(CmixError, match=r"c3.bim, variant row 2: chromosome '4', but the file "
                                        r"is chromosome 3's .*\(2 of its 3 variants"):
        check_part_chrom(pd.DataFrame({"chrom": ["3", "4", "chr4"]}), "3", "c3.bim")


def test_the_ld_region_list_reads_gzip_bom_and_crlf(tmp_path):
    from cmix.genotypes.pca.regions import HIGH_LD_REGIONS, read_regions

    raw = Path(HIGH_LD_REGIONS).read_bytes().replace(b"\r\n", b"\n")
    plain_path = tmp_path / "r.txt"
    plain_path.write_bytes(b"6 25000000 33500000 MHC\n" + raw)   # a region on line 1
    want = read_regions(plain_path)
    for variant, edit in VARIANTS.items():
        path = tmp_path / f"r_{variant.replace('+', '_')}.txt"
        path.write_bytes(edit(plain_path.read_bytes()))
        pd.testing.assert_frame_equal(read_regions(path), want)


def test_data_line_skips_blank_lines_as_pandas_does(tmp_path):
    from cmix.text import data_line

    path = _write(tmp_path / "t.tsv", "a\tb\n1\t2\n\n3\t4\r\n  \n5\t6\n")
    rows = pd.read_csv(path, sep="\t")
    assert list(rows["a"]) == [1, 3, 5]
    assert [data_line(path, i, "t") for i in range(3)] == [2, 4, 6]


@pytest.mark.parametrize("encoding", ["gzip", "latin-1"])
@pytest.mark.parametrize("option", ["--trait-config", "--covariates"])
def test_a_gzipped_or_latin1_json_option_file_is_refused(cohort, snps, tmp_path, capsys,
                                                         option, encoding):
    """A config file must be UTF-8 text: a gzipped or latin-1 one is one message naming
    the file, not a traceback."""
    text = (json.dumps(MPV) if option == "--trait-config"
            else '{"fields": [21022], "note": "\u00e9t\u00e9"}')
    data = (gzip.compress(text.encode()) if encoding == "gzip"
            else text.encode("latin-1"))
    path = tmp_path / "c.json"
    path.write_bytes(data if option == "--covariates" or encoding == "gzip"
                     else data + '  # caf\u00e9'.encode("latin-1"))
    args = _store(cohort, snps, tmp_path / "out" / "t.zarr", spec={"pcs": 2})
    args[args.index(option) + 1] = path
    fails(capsys, args, path, "expected UTF-8 YAML/JSON text", tmp_path / "out")


@pytest.mark.parametrize("encoding", ["gzip", "latin-1"])
def test_a_gzipped_or_latin1_trainer_config_is_refused(tmp_path, capsys, encoding):
    from cmix.learn.config import read_config_file

    text = "epochs: 2\n# r\u00e9sum\u00e9\n"
    data = gzip.compress(text.encode()) if encoding == "gzip" else text.encode("latin-1")
    (tmp_path / "c.yaml").write_bytes(data)
    with pytest.raises(CmixError, match=r"c.yaml.*expected UTF-8 YAML/JSON text"):
        read_config_file(tmp_path / "c.yaml")
    fails(capsys, ["train", "--store", tmp_path / "none.zarr", "--budget", "10", "--seed", "1",
                   "--config", tmp_path / "c.yaml", "--out", tmp_path / "run"],
          tmp_path / "c.yaml", "expected UTF-8 YAML/JSON text", tmp_path / "run")
