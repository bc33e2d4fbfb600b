"""Sample and variant selection shared by the steps (cmix.genotypes.selection): the
autosome definition, --chroms as plink2 --chr (checked against plink2 on the same .bed),
keep/remove lists and --extract lists as every step reads them."""

from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from cmix.cli import main
from cmix.readers import plink
from cmix.genotypes import selection
from cmix.readers import chroms
from cmix.errors import CmixError

from conftest import requires_plink2

#: chromosome codes as .bim files write them, three variants each; plink2 reads
#: 01/chr2/CHR3/chr22 as 1/2/3/22 and 23 as X
BIM_CODES = ["1", "01", "chr2", "3", "CHR3", "4", "5", "22", "chr22", "X", "23", "MT"]


def plink2(*args):
    r = subprocess.run(["plink2", *map(str, args)], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    return r


def lines(path) -> list[str]:
    return Path(path).read_text().split()


@pytest.fixture()
def mixed(tmp_path) -> Path:
    """200 samples x 36 variants on the chromosomes of BIM_CODES, written as there."""
    rng = np.random.default_rng(5)
    n, per = 200, 3
    chrom = [c for c in BIM_CODES for _ in range(per)]
    m = len(chrom)
    freq = rng.uniform(0.02, 0.5, m)
    dosage = rng.binomial(2, freq[:, None], (m, n)).astype(np.int8)
    dosage[rng.random((m, n)) < 0.02] = -1
    fam = pd.DataFrame({"fid": [f"F{i}" for i in range(n)], "iid": [f"S{i}" for i in range(n)],
                        "father": "0", "mother": "0", "sex": "1", "phenotype": "-9"})
    bim = pd.DataFrame({"chrom": chrom, "variant_id": [f"rs{j}" for j in range(m)],
                        "cm": 0.0, "pos": np.arange(1, m + 1) * 1000, "a1": "A", "a2": "G"})
    plink.write_bfile(tmp_path / "mixed", dosage, fam, bim)
    return tmp_path / "mixed"


# ----------------------------------------------------------------------- chromosomes
@pytest.mark.parametrize("code, autosome", [
    ("1", True), ("01", True), ("chr1", True), ("CHR1", True), ("22", True), ("chr22", True),
    ("X", False), ("23", False), ("chrX", False), ("x", False), ("0", False), ("MT", False),
    ("chrM", False), ("26", False), ("1.0", False), ("", False), ("chrUn_gl000220", False)])
def test_autosome_definition(code, autosome):
    assert bool(chroms.is_autosome([code])[0]) is autosome


def test_chrom_codes_name_one_chromosome_one_way():
    assert list(chroms.chrom_codes(["01", "chr1", "CHR1", "1"])) == ["1"] * 4
    assert list(chroms.chrom_codes(["X", "chrX", "23", "x"])) == ["X"] * 4
    assert list(chroms.chrom_codes(["MT", "chrM", "26", "M"])) == ["MT"] * 4
    assert list(chroms.chrom_codes(["24", "25", "chrXY"])) == ["Y", "XY", "XY"]


@pytest.mark.parametrize("spec, codes", [
    (["1-3,22"], ["1", "2", "3", "22"]),
    (["1-3", "22"], ["1", "2", "3", "22"]),
    (["22", "3", "chr1"], ["1", "3", "22"]),
    (["21-X"], ["21", "22", "X"]),
    (["23-26"], ["X", "Y", "XY", "MT"]),
    (["chr01-chr02"], ["1", "2"]),
    ("5", ["5"]),
])
def test_parse_chroms(spec, codes):
    assert chroms.parse_chroms(spec) == codes


@pytest.mark.parametrize("spec, message", [
    (["1-30"], "'30' is not a chromosome code"),
    (["foo"], "'foo' is not a chromosome code"),
    (["3-1"], "the range runs backwards"),
    (["1,,2"], "an empty item"),
    (["1-"], "'' is not a chromosome code"),
])
def test_parse_chroms_refuses(spec, message):
    with pytest.raises(CmixError, match=message):
        chroms.parse_chroms(spec)


@requires_plink2
@pytest.mark.plink2
@pytest.mark.parametrize("spec", [["1-3,22"], ["1-3", "22"], ["chr2,22"]])
def test_qc_chroms_equals_plink2_chr(mixed, tmp_path, spec):
    """`cmix qc --chroms S` passes the variants plink2 --chr S passes, whatever the .bim's
    spelling of the codes (X, 23 and MT stay out: they are not selected)."""
    plink2("--bfile", mixed, "--chr", *spec, "--maf", "0.05", "--write-snplist",
           "--out", tmp_path / "p")
    assert main(["qc", "--bfile", str(mixed), "--chroms", *spec, "--maf", "0.05",
                 "--out", str(tmp_path / "c")]) == 0
    expected = lines(tmp_path / "p.snplist")
    assert lines(tmp_path / "c.snplist") == expected
    # the variants considered are those plink2 keeps with --chr alone
    plink2("--bfile", mixed, "--chr", *spec, "--write-snplist", "--out", tmp_path / "all")
    table = pd.read_csv(tmp_path / "c.vqc.tsv", sep="\t")
    assert list(table["variant_id"]) == lines(tmp_path / "all.snplist")
    assert 0 < len(expected) < len(table)


@requires_plink2
@pytest.mark.plink2
def test_chroms_on_a_pattern_reads_only_those_files(mixed, tmp_path):
    """With a {chrom} pattern --chroms names the files read (a missing one is not opened);
    the result equals the single-file run restricted to the same chromosomes."""
    for c in ("1", "2", "3"):
        plink2("--bfile", mixed, "--chr", c, "--make-bed", "--out", tmp_path / f"c{c}")
    plink2("--bfile", mixed, "--chr", "1-3", "--maf", "0.05", "--write-snplist",
           "--out", tmp_path / "p")
    assert main(["qc", "--bfile", str(tmp_path / "c{chrom}"), "--fam", str(tmp_path / "c1.fam"),
                 "--chroms", "1-3", "--maf", "0.05", "--out", str(tmp_path / "q")]) == 0
    assert lines(tmp_path / "q.snplist") == lines(tmp_path / "p.snplist")


def test_chroms_restrict_pca_and_unrelated_variants(mixed, tmp_path, capsys):
    """--chroms on a single .bed restricts the variants of the other steps too: counted
    here from the .bim text with the chromosome names written out."""
    from cmix.genotypes.pca.run import PcaSettings, PcaVariants, run_pca
    from cmix.genotypes.relatedness.unrelated import unrelated_from_genotypes
    from cmix.readers.sources import GenotypeFiles

    bim = pd.read_csv(f"{mixed}.bim", sep="\t", header=None, dtype=str)
    on_1_to_3 = int(bim[0].isin(["1", "01", "chr2", "3", "CHR3"]).sum())
    summary = run_pca(GenotypeFiles(bfile=mixed, chroms=["1-3"]), tmp_path / "pca",
                      variants=PcaVariants(regions=None), settings=PcaSettings(n_pcs=2, threads=1))
    assert summary["on --chroms"] == on_1_to_3
    out = unrelated_from_genotypes(GenotypeFiles(bfile=mixed, chroms=["1-3"]), tmp_path / "king",
                                   device="cpu")
    assert out["variants_used"] == on_1_to_3
    assert out["variants_x_y_mt_excluded"] == 0
    out = unrelated_from_genotypes(GenotypeFiles(bfile=mixed, chroms=["1-3,X"]),
                                   tmp_path / "king", device="cpu")
    assert out["variants_used"] == on_1_to_3
    assert out["variants_x_y_mt_excluded"] == int(bim[0].isin(["X", "23"]).sum())


def test_qc_refuses_a_bad_chroms_spec(mixed, tmp_path, capsys):
    assert main(["qc", "--bfile", str(mixed), "--chroms", "1-30", "--out",
                 str(tmp_path / "c")]) == 1
    assert "'30' is not a chromosome code" in capsys.readouterr().err
    assert not (tmp_path / "c.snplist").exists()


# --------------------------------------------------------------------------- samples
@requires_plink2
@pytest.mark.plink2
def test_keep_with_ids_not_in_the_fam_as_plink2(mixed, tmp_path, capsys):
    """IDs the .fam lacks are ignored and reported with their count (never the IDs); the
    kept samples give plink2's counts on the same --keep/--remove files."""
    keep = tmp_path / "keep.txt"
    keep.write_text("#FID\tIID\n" + "".join(f"F{i}\tS{i}\n" for i in range(0, 150, 2))
                    + "NOPE\tNOPE\nF3\tWRONG\n")
    remove = tmp_path / "remove.txt"
    remove.write_text("F0 S0\nF2 S2\nGHOST GHOST\n")
    plink2("--bfile", mixed, "--chr", "1-22", "--keep", keep, "--remove", remove,
           "--geno", "0.01", "--write-snplist", "--out", tmp_path / "p")
    assert main(["qc", "--bfile", str(mixed), "--chroms", "1-22", "--keep", str(keep),
                 "--remove", str(remove), "--geno", "0.01", "--out", str(tmp_path / "c")]) == 0
    err = capsys.readouterr().err
    assert f"2 of 77 IDs in {keep} are not in the .fam and were ignored" in err
    assert f"1 of 3 IDs in {remove} are not in the .fam and were ignored" in err
    assert "NOPE" not in err and "GHOST" not in err
    assert pd.read_csv(tmp_path / "c.vqc.tsv", sep="\t")["n_kept"].iloc[0] == 75 - 2
    assert lines(tmp_path / "c.snplist") == lines(tmp_path / "p.snplist")


def test_sample_rows_edge_cases(mixed, tmp_path):
    fam = plink.read_fam(f"{mixed}.fam")
    lst = tmp_path / "ids.txt"
    lst.write_text("F5 S5\nF1 S1\nF5 S5\nF2 NOPE\n")      # unsorted, repeated, unknown
    rows, n_unknown = selection.sample_rows(fam, lst, step="t")
    assert list(rows) == [1, 5] and n_unknown == 1
    lst.write_text("")
    with pytest.raises(CmixError, match="no sample IDs in the --keep file"):
        selection.sample_rows(fam, lst, step="t")
    lst.write_text("A B\nC D\n")
    with pytest.raises(CmixError, match="none of its 2 IDs is in the .fam"):
        selection.sample_rows(fam, lst, step="t")
    lst.write_text("S1\nS2\n")       # one column: FID = IID ("S1 S1", not the .fam's "F1 S1")
    with pytest.raises(CmixError, match="none of its 2 IDs is in the .fam"):
        selection.sample_rows(fam, lst, step="t")
    lst.write_text("A B\nC D\n")
    rows, _ = selection.sample_rows(fam, remove=lst, step="t")   # removes nobody
    assert len(rows) == len(fam)
    lst.write_text("F1 S1\n")
    with pytest.raises(CmixError, match="no samples left after --keep/--remove"):
        selection.sample_rows(fam, lst, lst, step="t")
    lst.write_text("#FID IID\nF1\n")
    with pytest.raises(CmixError, match="line 2: expected FID and IID, found one column"):
        selection.sample_rows(fam, lst, step="t")


def test_every_step_reports_unknown_keep_ids_the_same_way(mixed, tmp_path, capsys):
    from cmix.genotypes.pca.run import PcaSettings, PcaVariants, run_pca
    from cmix.readers.sources import GenotypeFiles

    keep = tmp_path / "keep.txt"
    keep.write_text("".join(f"F{i} S{i}\n" for i in range(100)) + "X Y\n")
    run_pca(GenotypeFiles(bfile=mixed, chroms=["1-22"]), tmp_path / "pca", keep=keep,
            variants=PcaVariants(regions=None), settings=PcaSettings(n_pcs=2, threads=1))
    assert main(["unrelated", "--bfile", str(mixed), "--keep", str(keep), "--device", "cpu",
                 "--out", str(tmp_path / "u")]) == 0
    err = capsys.readouterr().err
    for step in ("pca", "unrelated"):
        assert f"[cmix] {step}: warning: 1 of 101 IDs in {keep} are not in the .fam" in err


# -------------------------------------------------------------------------- variants
def test_extract_lists(mixed, tmp_path):
    bim = plink.read_bim(f"{mixed}.bim")
    ext = tmp_path / "ext.txt"
    ext.write_text("rs3 extra\r\nrs0\n\nrs_missing\nrs3\n")
    mask, n_unknown = selection.extract_mask(bim["variant_id"], ext, "x.bim")
    assert list(np.flatnonzero(mask)) == [0, 3] and n_unknown == 1
    ext.write_text("\n\n")
    with pytest.raises(CmixError, match="no variant IDs in the --extract file"):
        selection.extract_mask(bim["variant_id"], ext, "x.bim")
    ext.write_text("a\nb\n")
    with pytest.raises(CmixError, match="none of its 2 variant IDs is in x.bim"):
        selection.extract_mask(bim["variant_id"], ext, "x.bim")
