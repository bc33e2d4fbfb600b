"""cmix samples: UKB sample QC filters. Expected sets come from direct pandas/numpy
selections on the input tables (and plink2 reads the written .keep)."""

from __future__ import annotations

import subprocess

import numpy as np
import pandas as pd
import pytest

from cmix.cli import main
from cmix.readers.plink import read_fam

from conftest import plink2_available

FIELDS = ["het.missing.outliers", "putative.sex.chromosome.aneuploidy", "excess.relatives",
          "in.white.British.ancestry.subset"]


def write_fam(path, n):
    ids = [str(1_000_001 + i) for i in range(n)]
    pd.DataFrame({"fid": ids, "iid": ids, "f": "0", "m": "0", "s": "1", "p": "-9"}).to_csv(
        path, sep=" ", header=False, index=False)
    return ids


def flags(rng, n):
    return pd.DataFrame({"het.missing.outliers": rng.random(n) < 0.05,
                         "putative.sex.chromosome.aneuploidy": rng.random(n) < 0.02,
                         "excess.relatives": rng.random(n) < 0.03,
                         "in.white.British.ancestry.subset": rng.random(n) < 0.8}).astype(int)


def write_ukb_sqc(path, f, rng):
    """68 headerless columns in .fam order, the flags at 1-based columns 19, 20, 23, 24."""
    n = len(f)
    cols = {c: rng.integers(0, 9, n) for c in range(1, 69)}
    for name, col in zip(FIELDS, (19, 20, 23, 24)):
        cols[col] = f[name].to_numpy()
    pd.DataFrame(cols).to_csv(path, sep=" ", header=False, index=False)


def read_keep(path):
    df = pd.read_csv(path, sep="\t")
    assert list(df.columns) == ["#FID", "IID"]
    return df["IID"].astype(str).tolist()


def expected(ids, f, withdrawn, ancestry=True):
    ok = ((f["het.missing.outliers"] == 0) & (f["putative.sex.chromosome.aneuploidy"] == 0)
          & (f["excess.relatives"] == 0)).to_numpy().copy()
    if ancestry:
        ok = ok & (f["in.white.British.ancestry.subset"] == 1).to_numpy()
    ok = ok & ~np.isin(ids, list(withdrawn))
    return [i for i, k in zip(ids, ok) if k]


@pytest.fixture()
def inputs(tmp_path):
    rng = np.random.default_rng(1)
    n = 400
    ids = write_fam(tmp_path / "c.fam", n)
    f = flags(rng, n)
    write_ukb_sqc(tmp_path / "ukb_sqc_v2.txt", f, rng)
    withdrawn = set(rng.choice(ids, 7, replace=False)) | {"999"}
    (tmp_path / "w.txt").write_text("".join(f"{w}\n" for w in sorted(withdrawn)))
    return tmp_path, ids, f, withdrawn


def test_headerless_ukb_table(inputs, capsys):
    d, ids, f, withdrawn = inputs
    assert main(["samples", "--fam", str(d / "c"), "--sqc", str(d / "ukb_sqc_v2.txt"),
                 "--withdrawn", str(d / "w.txt"), "--out", str(d / "s")]) == 0
    assert read_keep(d / "s.keep") == expected(ids, f, withdrawn)
    table = pd.read_csv(d / "s.filters.tsv", sep="\t")
    assert list(table["filter"]) == ["fam", "withdrawn"] + FIELDS
    assert table["n_remaining"].iloc[-1] == len(expected(ids, f, withdrawn))
    assert table["n_removed"].iloc[1] == len(withdrawn & set(ids))
    assert (table["n_remaining"].diff().iloc[1:] == -table["n_removed"].iloc[1:]).all()
    err = capsys.readouterr().err
    assert not any(w in err for w in withdrawn)  # counts only, never IDs


def test_tidy_table_matched_by_id_not_order(inputs):
    d, ids, f, withdrawn = inputs
    tidy = f.copy()
    tidy.insert(0, "eid", ids)
    tidy = tidy.sample(frac=1, random_state=3).iloc[:-5]   # shuffled, 5 samples absent
    absent = set(ids) - set(tidy["eid"])
    tidy.to_csv(d / "sqc.tsv", sep="\t", index=False)
    assert main(["samples", "--fam", str(d / "c.fam"), "--sqc", str(d / "sqc.tsv"),
                 "--out", str(d / "t")]) == 0
    want = [i for i in expected(ids, f, set()) if i not in absent]
    assert read_keep(d / "t.keep") == want
    table = pd.read_csv(d / "t.filters.tsv", sep="\t")
    assert table.set_index("filter").loc["not_in_sample_qc_table", "n_removed"] == 5


def test_no_ancestry_filter(inputs):
    d, ids, f, withdrawn = inputs
    assert main(["samples", "--fam", str(d / "c.fam"), "--sqc", str(d / "ukb_sqc_v2.txt"),
                 "--sqc-headerless", "--withdrawn", str(d / "w.txt"), "--no-ancestry-filter",
                 "--out", str(d / "s")]) == 0
    assert read_keep(d / "s.keep") == expected(ids, f, withdrawn, ancestry=False)


@pytest.mark.skipif(not plink2_available(), reason="plink2 not installed")
def test_plink2_reads_the_keep_file(cohort, tmp_path):
    """On the simulated cohort (tidy sample_qc.tsv + withdrawn.txt); plink2 --keep agrees."""
    assert main(["samples", "--fam", str(cohort / "genotypes"), "--sqc",
                 str(cohort / "sample_qc.tsv"), "--withdrawn", str(cohort / "withdrawn.txt"),
                 "--out", str(tmp_path / "s")]) == 0
    fam = read_fam(cohort / "genotypes.fam")
    sqc = pd.read_csv(cohort / "sample_qc.tsv", sep="\t", dtype={"eid": str}).set_index("eid")
    withdrawn = set((cohort / "withdrawn.txt").read_text().split())
    want = expected(fam["iid"].tolist(), sqc.loc[fam["iid"]], withdrawn)
    keep = read_keep(tmp_path / "s.keep")
    assert keep == want and 0 < len(keep) < len(fam)
    subprocess.run(["plink2", "--bfile", str(cohort / "genotypes"), "--keep",
                    str(tmp_path / "s.keep"), "--write-samples", "--out", str(tmp_path / "p")],
                   check=True, capture_output=True)
    assert pd.read_csv(tmp_path / "p.id", sep="\t")["IID"].astype(str).tolist() == keep


def _fails(d, capsys, args, expect):
    rc = main(["samples", "--fam", str(d / "c.fam"), *args, "--out", str(d / "bad")])
    err = capsys.readouterr().err
    assert rc == 1 and expect in err, err
    assert not list(d.glob("bad.*")) and not list(d.glob(".bad.*"))


def test_bad_inputs(inputs, capsys):
    d, ids, f, withdrawn = inputs
    lines = (d / "ukb_sqc_v2.txt").read_text().splitlines(True)
    (d / "short.txt").write_text("".join(lines[:-1]))
    _fails(d, capsys, ["--sqc", str(d / "short.txt")], "one line per .fam line")
    fields = lines[4].split(" ")
    fields[18] = "x"
    (d / "badval.txt").write_text("".join(lines[:4] + [" ".join(fields)] + lines[5:]))
    _fails(d, capsys, ["--sqc", str(d / "badval.txt")], "line 5, column 19")
    (d / "narrow.txt").write_text("".join(" ".join(l.split()[:10]) + "\n" for l in lines))
    _fails(d, capsys, ["--sqc", str(d / "narrow.txt")],
           "narrow.txt, line 1: neither a tidy sample QC table")
    _fails(d, capsys, ["--sqc", str(d / "narrow.txt"), "--sqc-headerless"],
           "at least 24 columns")
    _fails(d, capsys, ["--withdrawn", str(d / "nope.txt")], "file not found")
    (d / "all.txt").write_text("\n".join(ids))
    _fails(d, capsys, ["--withdrawn", str(d / "all.txt")], "no samples remain")


def _summary(path):
    import json

    return json.loads(path.read_text())


def test_tidy_table_with_some_columns_applies_those(inputs, capsys):
    """A tidy table without excess.relatives and the ancestry column applies the other
    two (and says so); expected set from pandas on those two columns alone."""
    d, ids, f, withdrawn = inputs
    tidy = f.drop(columns=["excess.relatives", "in.white.British.ancestry.subset"])
    tidy.insert(0, "eid", ids)
    tidy.to_csv(d / "some.tsv", sep="\t", index=False)
    assert main(["samples", "--fam", str(d / "c.fam"), "--sqc", str(d / "some.tsv"),
                 "--withdrawn", str(d / "w.txt"), "--out", str(d / "s")]) == 0
    ok = ((f["het.missing.outliers"] == 0) & (f["putative.sex.chromosome.aneuploidy"] == 0)
          & ~pd.Series(ids).isin(withdrawn)).to_numpy()
    assert read_keep(d / "s.keep") == [i for i, k in zip(ids, ok) if k]
    assert len(read_keep(d / "s.keep")) < len(expected(ids, f.assign(**{
        "excess.relatives": 0, "in.white.British.ancestry.subset": 1}), set()))
    table = pd.read_csv(d / "s.filters.tsv", sep="\t")
    assert list(table["filter"]) == ["fam", "withdrawn", *FIELDS[:2]]
    err = capsys.readouterr().err
    assert ("sample QC columns applied: het.missing.outliers, "
            "putative.sex.chromosome.aneuploidy; not in the table, so not applied: "
            "excess.relatives, in.white.British.ancestry.subset") in err
    assert _summary(d / "s.filters.json") == {
        "sample_qc": "applied", "withdrawn": "applied", "sample_qc_columns": FIELDS[:2]}


def test_id_only_table_is_tidy_not_headerless(inputs, capsys):
    """A one-column table (eid) is a list of samples that passed QC, not a headerless
    ukb_sqc_v2: the samples it lacks are removed, no QC column applies."""
    d, ids, f, withdrawn = inputs
    listed = ids[::3]
    (d / "eids.txt").write_text("eid\n" + "".join(f"{i}\n" for i in listed))
    assert main(["samples", "--fam", str(d / "c.fam"), "--sqc", str(d / "eids.txt"),
                 "--out", str(d / "s")]) == 0
    assert read_keep(d / "s.keep") == listed
    assert "sample QC columns applied: none" in capsys.readouterr().err
    assert _summary(d / "s.filters.json") == {
        "sample_qc": "applied", "withdrawn": "not given", "sample_qc_columns": []}


def test_no_sample_qc_and_no_withdrawals_keep_everyone(inputs, capsys):
    d, ids, f, withdrawn = inputs
    assert main(["samples", "--fam", str(d / "c.fam"), "--out", str(d / "s")]) == 0
    assert read_keep(d / "s.keep") == ids
    err = capsys.readouterr().err
    assert "no sample QC table given" in err and "no withdrawal list given" in err
    assert _summary(d / "s.filters.json") == {
        "sample_qc": "not given", "withdrawn": "not given", "sample_qc_columns": []}
    table = pd.read_csv(d / "s.filters.tsv", sep="\t")
    assert list(table["filter"]) == ["fam"]
    assert main(["samples", "--fam", str(d / "c.fam"), "--sqc", str(d / "ukb_sqc_v2.txt"),
                 "--no-ancestry-filter", "--out", str(d / "u")]) == 0
    assert _summary(d / "u.filters.json")["sample_qc_columns"] == FIELDS[:3]


def test_filters_summary_is_checked_before_the_store_records_it(inputs):
    """cmix store --sample-filters reads cmix samples' OUT.filters.json: the relatedness
    route is added; a malformed summary or an unknown route is one message."""
    from cmix.genotypes.samples import read_filters_summary
    from cmix.errors import CmixError

    d, ids, f, withdrawn = inputs
    assert main(["samples", "--fam", str(d / "c.fam"), "--withdrawn", str(d / "w.txt"),
                 "--out", str(d / "s")]) == 0
    assert read_filters_summary(d / "s.filters.json", "kinship table") == {
        "sample_qc": "not given", "withdrawn": "applied", "sample_qc_columns": [],
        "relatedness": "kinship table"}
    with pytest.raises(CmixError, match="relatedness route 'plink'"):
        read_filters_summary(d / "s.filters.json", "plink")
    (d / "bad.json").write_text('{"sample_qc": "yes", "withdrawn": "applied"}')
    with pytest.raises(CmixError, match="bad.json: expected 'sample_qc'"):
        read_filters_summary(d / "bad.json", "kinship table")
    (d / "trunc.json").write_text('{"sample_qc": ')
    with pytest.raises(CmixError, match="trunc.json: not valid JSON"):
        read_filters_summary(d / "trunc.json", "kinship table")
