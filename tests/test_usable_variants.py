"""A genotype file with multiallelic sites and duplicate variant IDs (as imputation
servers write them) is read, not refused: those variants are left out of what cmix can
select, so QC, PCA and KING equal plink2 on the same file with ``--max-alleles 2
--rm-dup exclude-all`` (plink2 drops the multiallelic sites first, then every variant
whose ID another still carries); a selection that names one of them (an --extract list,
summary statistics by ID or position, a store's SNP table) is refused, naming it and the
plink2 command that makes it usable."""

import gzip
import re
import subprocess

import numpy as np
import pandas as pd
import pytest

from cmix.cli import main
from cmix.genotypes.pca.regions import HIGH_LD_REGIONS
from cmix.readers.pgen import open_pfile
from cmix.simulate.balding_nichols import simulate_cohort
from conftest import requires_plink2

pytestmark = [requires_plink2, pytest.mark.plink2]

QC_FLAGS = ["--maf", "0.01", "--hwe", "1e-7", "--geno", "0.05"]
BIALLELIC = ["--max-alleles", "2", "--rm-dup", "exclude-all"]


def plink2(*args):
    r = subprocess.run(["plink2", "--threads", "1", *map(str, args)], capture_output=True,
                       text=True)
    assert r.returncode == 0, r.stdout + r.stderr


def _with_extra_alleles(vcf_in, vcf_out, rng) -> dict:
    """Copy a VCF, making every 40th site multiallelic (a third allele, carried by ~15%
    of its ALT copies), giving every 53rd site the ID of the site before it (a duplicate
    ID), and the site after the first multiallelic one its ID (unique among the
    biallelic sites). Returns {"multiallelic": IDs, "duplicate": IDs (every row's), "shared_with_multi":
    IDs}."""
    out = {"multiallelic": [], "duplicate": [], "shared_with_multi": []}
    j, previous = -1, None
    with gzip.open(vcf_in, "rt") as fh, open(vcf_out, "w") as dst:
        for line in fh:
            if line.startswith("#"):
                dst.write(line)
                continue
            j += 1
            f = line.rstrip("\n").split("\t")
            if j % 40 == 3:
                third = next(a for a in "ACGT" if a not in (f[3], f[4]))
                f[4] += "," + third
                f[9:] = [re.sub(r"1", lambda m: "2" if rng.random() < 0.15 else "1", g)
                         for g in f[9:]]
                out["multiallelic"].append(f[2])
            elif j == 4:
                f[2] = previous
                out["shared_with_multi"].append(f[2])
            elif j % 53 == 7 and (j - 1) % 40 != 3 and j != 5:
                out["duplicate"] += [previous, previous]
                f[2] = previous
            previous = f[2]
            dst.write("\t".join(f) + "\n")
    return out


@pytest.fixture(scope="module")
def multi(tmp_path_factory):
    """A simulated cohort (600 people, 3 chromosomes) as a .pgen with multiallelic sites
    and duplicate IDs (written by plink2 from an edited VCF), and as a .bed with the
    duplicate IDs (plink2 --max-alleles 2 --make-bed)."""
    d = tmp_path_factory.mktemp("multi")
    simulate_cohort(d / "c", n_samples=600, n_variants=2400, n_chrom=3, seed=8)
    plink2("--bfile", d / "c" / "genotypes", "--export", "vcf", "bgz", "id-paste=iid",
           "--out", d / "x")
    ids = _with_extra_alleles(d / "x.vcf.gz", d / "m.vcf", np.random.default_rng(1))
    plink2("--vcf", d / "m.vcf", "--make-pgen", "--out", d / "m")
    plink2("--pfile", d / "m", "--max-alleles", "2", "--make-bed", "--out", d / "b")
    ranges = [ln for ln in HIGH_LD_REGIONS.read_text().splitlines() if not ln.startswith("#")]
    (d / "highld.range").write_text("\n".join(ranges) + "\n")
    return d, ids


def test_the_source_leaves_them_out(multi):
    d, ids = multi
    pf = open_pfile(d / "m")
    left_out = pf.excluded.groupby("reason")["variant_id"].apply(list).to_dict()
    assert sorted(left_out["multiallelic"]) == sorted(ids["multiallelic"])
    assert sorted(left_out["duplicate ID"]) == sorted(ids["duplicate"])
    assert set(ids["shared_with_multi"]) <= set(pf.bim["variant_id"])
    assert pf.bim["variant_id"].is_unique and not pf.bim["a1"].str.contains(",").any()
    plink2("--pfile", d / "m", *BIALLELIC, "--write-snplist", "--out", d / "p2")
    assert pf.bim["variant_id"].tolist() == (d / "p2.snplist").read_text().split()


@pytest.mark.parametrize("kind", ["pfile", "bfile"])
def test_qc_equals_plink2_max_alleles_2(multi, tmp_path, capsys, kind):
    d, _ = multi
    geno = ["--pfile", str(d / "m")] if kind == "pfile" else ["--bfile", str(d / "b")]
    plink2(*geno, *BIALLELIC, *QC_FLAGS, "--write-snplist", "--out", tmp_path / "p2")
    assert main(["qc", *geno, *QC_FLAGS, "--out", str(tmp_path / "q")]) == 0
    assert (tmp_path / "q.snplist").read_text() == (tmp_path / "p2.snplist").read_text()
    err = capsys.readouterr().err
    assert "variants left out, cmix cannot select them" in err
    assert ("multiallelic" in err) == (kind == "pfile") and "--set-all-var-ids" in err


def test_king_equals_plink2_max_alleles_2(multi, tmp_path):
    d, _ = multi
    plink2("--pfile", d / "m", *BIALLELIC, "--king-cutoff", "0.0884", "--out", tmp_path / "p2")
    assert main(["unrelated", "--pfile", str(d / "m"), "--out", str(tmp_path / "k"),
                 "--device", "cpu"]) == 0
    for ext in ("king.cutoff.in.id", "king.cutoff.out.id"):    # plink2 writes no FID here
        ours = pd.read_csv(tmp_path / f"k.{ext}", sep="\t", dtype=str)["IID"].tolist()
        theirs = pd.read_csv(tmp_path / f"p2.{ext}", sep="\t", dtype=str)["#IID"].tolist()
        assert ours == theirs and len(ours) > 10


def test_pca_equals_plink2_max_alleles_2(multi, tmp_path):
    """The pruned variants are plink2's (identical lists); the PCs are those of cmix pca
    on the file plink2 --max-alleles 2 --rm-dup exclude-all writes (identical), and the
    leading PC, well above the noise here, is plink2's --pca on them (correlation >=
    0.99, eigenvalue within 1%; tests/test_pca.py compares all of them on a cohort with
    more structure)."""
    d, _ = multi
    pca = ["--indep-pairwise", "1000kb", "1", "0.1", "--pcs", "4", "--threads", "1"]
    assert main(["pca", "--pfile", str(d / "m"), *pca, "--out", str(tmp_path / "cm")]) == 0
    plink2("--pfile", d / "m", *BIALLELIC, "--autosome", "--exclude", "range",
           d / "highld.range", "--indep-pairwise", "1000kb", "1", "0.1", "--out", tmp_path / "p2")
    ours = (tmp_path / "cm.prune.in").read_text().split()
    assert ours == (tmp_path / "p2.prune.in").read_text().split() and len(ours) > 100
    plink2("--pfile", d / "m", *BIALLELIC, "--make-pgen", "--out", tmp_path / "bi")
    assert main(["pca", "--pfile", str(tmp_path / "bi"), *pca, "--out", str(tmp_path / "bi")]) == 0
    for ext in (".eigenvec", ".eigenval", ".prune.in"):
        assert (tmp_path / f"cm{ext}").read_text() == (tmp_path / f"bi{ext}").read_text()
    plink2("--pfile", d / "m", *BIALLELIC, "--extract", tmp_path / "cm.prune.in", "--pca", "4",
           "meanimpute", "--out", tmp_path / "p2pca")
    theirs = pd.read_csv(tmp_path / "p2pca.eigenvec", sep="\t", dtype={"#IID": str})
    ev = pd.read_csv(tmp_path / "cm.eigenvec", sep="\t", dtype={"IID": str}).set_index(
        "IID").loc[theirs["#IID"]]
    assert abs(np.corrcoef(ev["PC1"], theirs["PC1"])[0, 1]) >= 0.99
    np.testing.assert_allclose(np.loadtxt(tmp_path / "cm.eigenval")[0],
                               np.loadtxt(tmp_path / "p2pca.eigenval")[0], rtol=0.01)


def _sumstats(d, keep) -> pd.DataFrame:
    table = pd.read_csv(d / "c" / "sumstats" / "mean_platelet_volume.txt.gz", sep="\t",
                        dtype={"CHR": str})
    return table[keep(table)]


def test_selecting_a_left_out_variant_is_refused(multi, tmp_path, capsys):
    """By ID in an --extract list or in summary statistics, by chromosome and position in
    summary statistics (another ID), by ID in a store's SNP table: one message naming
    the selection's line, the variant, why and the plink2 command; nothing written. The
    same summary statistics without those rows select as before."""
    d, ids = multi
    geno = ["--pfile", str(d / "m")]
    multi_id, dup_id = ids["multiallelic"][1], ids["duplicate"][0]
    (tmp_path / "extract.txt").write_text(f"{ids['shared_with_multi'][0]}\n{multi_id}\n")
    assert main(["pca", *geno, "--extract", str(tmp_path / "extract.txt"), "--out",
                 str(tmp_path / "pc")]) == 1
    err = capsys.readouterr().err
    assert f"extract.txt (--extract): selects variant {multi_id!r}" in err
    assert "is multiallelic" in err and "--max-alleles 2" in err and "Traceback" not in err
    assert not list(tmp_path.glob("pc*"))

    usable = set(open_pfile(d / "m").bim["variant_id"])
    fine = _sumstats(d, lambda t: t["SNP"].isin(usable))
    fine.to_csv(tmp_path / "fine.tsv", sep="\t", index=False)
    assert main(["select", *geno, "--sumstats", str(tmp_path / "fine.tsv"), "--top", "20",
                 "--out", str(tmp_path / "fine.sel.tsv")]) == 0
    by_id = pd.concat([fine, _sumstats(d, lambda t: t["SNP"] == multi_id)])
    by_id.to_csv(tmp_path / "by_id.tsv", sep="\t", index=False)
    assert main(["select", *geno, "--sumstats", str(tmp_path / "by_id.tsv"), "--top", "20",
                 "--out", str(tmp_path / "a.tsv")]) == 1
    err = capsys.readouterr().err
    assert f"by_id.tsv, line {len(by_id) + 1}: selects variant {multi_id!r}" in err
    by_pos = pd.concat([fine, _sumstats(d, lambda t: t["SNP"] == dup_id).assign(SNP="other")])
    by_pos.to_csv(tmp_path / "by_pos.tsv", sep="\t", index=False)
    assert main(["select", *geno, "--sumstats", str(tmp_path / "by_pos.tsv"), "--top", "20",
                 "--out", str(tmp_path / "b.tsv")]) == 1
    err = capsys.readouterr().err
    assert f"selects variant {dup_id!r}" in err and "shares its ID with another" in err
    assert "--set-all-var-ids" in err and not (tmp_path / "a.tsv").exists()

    sel = pd.read_csv(tmp_path / "fine.sel.tsv", sep="\t", dtype={"chrom": str})
    row = open_pfile(d / "m").excluded.query("reason == 'duplicate ID'").iloc[0]
    bad = pd.concat([sel, pd.DataFrame([{**sel.iloc[0].to_dict(), "variant_id": row["variant_id"],
                                         "chrom": row["chrom"], "pos": row["pos"]}])])
    bad.to_csv(tmp_path / "bad.sel.tsv", sep="\t", index=False)
    assert main(["store", *geno, "--snps", str(tmp_path / "bad.sel.tsv"), "--pheno",
                 str(d / "c" / "phenotypes.tsv"), "--trait", "mpv", "--trait-config",
                 '{"field": 30100, "kind": "continuous", "binarise": "median"}',
                 "--out", str(tmp_path / "s.zarr")]) == 1
    err = capsys.readouterr().err
    assert f"bad.sel.tsv, line {len(bad) + 1}: selects variant {row['variant_id']!r}" in err
    assert not list(tmp_path.glob("*s.zarr*"))
