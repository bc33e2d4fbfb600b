"""The simulator's promises, checked by independent means (plink2, bed-reader, numpy)."""

import filecmp
import gzip
import json
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
from bed_reader import open_bed

from cmix.simulate.gwas import format_p
from cmix.simulate.balding_nichols import simulate_cohort
from conftest import requires_plink2


def run_plink2(*args, cwd):
    res = subprocess.run(["plink2", *args, "--threads", "2"], cwd=cwd, capture_output=True,
                         text=True)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "Warning" not in res.stdout + res.stderr, res.stdout
    return res


def test_same_seed_same_files_different_seed_differs(tmp_path):
    for name, seed in (("a", 5), ("b", 5), ("c", 6)):
        simulate_cohort(tmp_path / name, n_samples=300, n_variants=1200, n_discovery=500, seed=seed)
    files = ["genotypes.bed", "genotypes.bim", "genotypes.fam", "phenotypes.tsv", "kinship.dat",
             "sample_qc.tsv", "withdrawn.txt", "truth.json", "sumstats/hair_colour.txt.gz"]
    match, mismatch, errors = filecmp.cmpfiles(tmp_path / "a", tmp_path / "b", files, shallow=False)
    assert mismatch == [] and errors == []
    assert not filecmp.cmp(tmp_path / "a/genotypes.bed", tmp_path / "c/genotypes.bed", shallow=False)
    assert not list(tmp_path.glob("*/.*tmp"))   # no temporary files left behind
    # no file name in the gzip header (FNAME flag, byte 3): it was the temporary name,
    # holding the host name and process id, so another process wrote other bytes
    assert not (tmp_path / "a/sumstats/hair_colour.txt.gz").read_bytes()[3] & 0x08


@requires_plink2
def test_plink2_reads_files_and_finds_planted_hwe_failures(cohort):
    run_plink2("--bfile", "genotypes", "--freq", "--hardy", "--missing", "--out", "p2", cwd=cohort)
    truth = json.loads((cohort / "truth.json").read_text())
    hardy = pd.read_csv(cohort / "p2.hardy", sep="\t").set_index("ID")
    strong = hardy.loc[truth["hwe_planted"]["strong"], "P"]
    border = hardy.loc[truth["hwe_planted"]["borderline"], "P"]
    assert (strong < 1e-12).all(), strong
    assert ((border > 1e-14) & (border < 1e-3)).all(), border   # around the 1e-7 threshold
    planted = truth["hwe_planted"]["strong"] + truth["hwe_planted"]["borderline"]
    # Null SNPs pass HWE within one population. Across the whole structured cohort they
    # need not: pooling populations of different allele frequencies lowers heterozygosity
    # (the Wahlund effect), which is why UK Biobank tests HWE in the white British subset.
    british = [e for e, p in zip(truth["samples"]["eid"], truth["samples"]["population"])
               if p == "british"]
    (cohort / "british.txt").write_text("".join(f"{e}\t{e}\n" for e in british))
    run_plink2("--bfile", "genotypes", "--keep", "british.txt", "--hardy", "--out", "p2_british",
               cwd=cohort)
    hardy_gb = pd.read_csv(cohort / "p2_british.hardy", sep="\t").set_index("ID")
    assert (hardy_gb.loc[truth["hwe_planted"]["strong"], "P"] < 1e-7).all()
    null_fail_gb = (hardy_gb.drop(index=planted)["P"] < 1e-7).sum()
    null_fail_all = (hardy.drop(index=planted)["P"] < 1e-7).sum()
    assert null_fail_gb <= 1, null_fail_gb
    assert null_fail_all > null_fail_gb                      # structure is real: Wahlund
    freq = pd.read_csv(cohort / "p2.afreq", sep="\t")
    maf = np.minimum(freq.ALT_FREQS, 1 - freq.ALT_FREQS)
    assert 0.15 < (maf < 0.01).mean() < 0.5      # many rare variants: MAF filtering matters
    assert (maf == 0).any() and (maf > 0.4).any()
    smiss = pd.read_csv(cohort / "p2.smiss", sep="\t").set_index("IID")
    smiss.index = smiss.index.astype(str)
    assert (smiss.loc[truth["high_missing_samples"], "F_MISS"] > 0.03).all()
    assert 0 < smiss.F_MISS.median() < 0.02      # sporadic missing calls elsewhere
    vmiss = pd.read_csv(cohort / "p2.vmiss", sep="\t").set_index("ID")
    assert (vmiss.loc[truth["high_missing_variants"], "F_MISS"] > 0.03).all()


@requires_plink2
def test_plink2_finds_the_planted_relatives(cohort_dense):
    d = cohort_dense
    run_plink2("--bfile", "genotypes", "--make-king-table", "--king-table-filter", "0.0442",
               "--out", "p2", cwd=d)
    run_plink2("--bfile", "genotypes", "--king-cutoff", "0.0884", "--out", "p2", cwd=d)
    truth = json.loads((d / "truth.json").read_text())
    kin = pd.read_csv(d / "p2.kin0", sep="\t", dtype={"IID1": str, "IID2": str})
    kin["key"] = [frozenset(p) for p in zip(kin.IID1, kin.IID2)]
    by_key = kin.set_index("key").KINSHIP
    expected = {0: (0.354, 0.51), 1: (0.177, 0.354), 2: (0.0442, 0.177), 3: (0.0, 0.0884)}
    planted = {frozenset(p[:2]): p[2] for p in truth["related_pairs"]}
    assert {0, 1, 2, 3} <= set(planted.values())
    for pair, degree in planted.items():
        lo, hi = expected[degree]
        if degree <= 2:
            assert lo < by_key[pair] < hi, (degree, by_key[pair])
    # no unrelated pair reaches the second-degree cutoff
    unrelated = kin[~kin.key.isin(planted.keys())]
    assert (unrelated.KINSHIP < 0.0884).all()
    # --king-cutoff leaves at most one of each duplicate / first-degree pair
    kept = set(pd.read_csv(d / "p2.king.cutoff.in.id", sep="\t", dtype=str).IID)
    for pair, degree in planted.items():
        if degree <= 1:
            assert len(pair & kept) <= 1
    # kinship.dat (UKB ukb_rel.dat layout) agrees with plink2's KING-robust values
    rel = pd.read_csv(d / "kinship.dat", sep=" ", dtype={"ID1": str, "ID2": str})
    assert list(rel.columns) == ["ID1", "ID2", "HetHet", "IBS0", "Kinship"]
    assert (rel.Kinship > 0.0442).all()
    rel_kin = pd.Series(rel.Kinship.to_numpy(), index=[frozenset(p) for p in zip(rel.ID1, rel.ID2)])
    common = rel_kin.index.intersection(by_key.index)
    assert len(common) >= sum(1 for v in planted.values() if v <= 1)
    np.testing.assert_allclose(rel_kin[common], by_key[common], atol=6e-5)


def test_traits_follow_ukb_codings_and_heritability(cohort):
    pheno = pd.read_csv(cohort / "phenotypes.tsv", sep="\t", dtype={"eid": str})
    assert list(pheno.columns) == ["eid", "f.30100.0.0", "f.30270.0.0", "f.20116.0.0", "f.1747.0.0",
                                   "f.31.0.0", "f.21022.0.0", "f.21000.0.0"]
    fam = pd.read_csv(cohort / "genotypes.fam", sep=" ", header=None, dtype=str)
    assert list(pheno.eid) == list(fam[1])
    # sex (field 31: 0 female, 1 male) agrees with the .fam (1 male, 2 female); age 40-69
    assert (pheno["f.31.0.0"] == (fam[4] == "1").astype(int)).all()
    assert pheno["f.21022.0.0"].between(40, 69).all() and pheno["f.21022.0.0"].nunique() == 30
    # ethnic background (field 21000, coding 1001) is each person's population
    truth = json.loads((cohort / "truth.json").read_text())
    code = {p["name"]: p["code"] for p in truth["populations"]}
    assert list(pheno.eid) == truth["samples"]["eid"]
    assert (pheno["f.21000.0.0"] == [code[p] for p in truth["samples"]["population"]]).all()
    smoking = pheno["f.20116.0.0"]
    assert set(smoking.dropna().unique()) <= {-3, 0, 1, 2} and -3 in set(smoking)
    hair = pheno["f.1747.0.0"]
    assert set(hair.dropna().unique()) <= {-3, -1, 1, 2, 3, 4, 5, 6}
    assert {1, 2, 3, 4, 5} <= set(hair.dropna().unique())
    for col in pheno.columns[1:5]:    # the traits; sex, age and ethnic background are complete
        assert 0.005 < pheno[col].isna().mean() < 0.05          # missing values present
    assert 7 < pheno["f.30100.0.0"].median() < 12                # fL, plausible MPV
    # heritability: the true polygenic score explains roughly h2 of the variance
    bim = pd.read_csv(cohort / "genotypes.bim", sep="\t", header=None)
    causal = truth["causal"]["mean_platelet_volume"]
    idx = bim.index[bim[1].isin(causal["variant_ids"])].to_numpy()
    order = pd.Series(np.arange(len(idx)), index=bim[1].iloc[idx]).loc[causal["variant_ids"]]
    with open_bed(cohort / "genotypes.bed") as bed:
        g = bed.read(index=np.s_[:, idx], dtype="float64")   # counts of A1, NaN missing
    g = np.where(np.isnan(g), np.nanmean(g, axis=0), g)
    prs = g[:, order.to_numpy()] @ np.asarray(causal["betas_a1"])
    y = pheno["f.30100.0.0"].to_numpy()
    ok = ~np.isnan(y)
    r2 = np.corrcoef(prs[ok], y[ok])[0, 1] ** 2
    assert 0.2 < r2 < 0.5, r2                                    # h2 = 0.35


def test_sumstats_layout_swaps_and_enrichment(cohort):
    truth = json.loads((cohort / "truth.json").read_text())
    bim = pd.read_csv(cohort / "genotypes.bim", sep="\t", header=None,
                      names=["chrom", "id", "cm", "pos", "a1", "a2"])
    with gzip.open(cohort / "sumstats/mean_platelet_volume.txt.gz", "rt") as fh:
        ss = pd.read_csv(fh, sep="\t", dtype={"P_BOLT_LMM": str})
    assert list(ss.columns) == ["SNP", "CHR", "BP", "ALLELE1", "ALLELE0", "A1FREQ", "INFO", "BETA",
                                "SE", "P_BOLT_LMM_INF", "P_BOLT_LMM"]
    assert 0.85 < len(ss) / len(bim) < 0.97                      # some SNPs absent
    m = ss.merge(bim, left_on="SNP", right_on="id")
    swapped = m.ALLELE1 == m.a2
    assert ((m.ALLELE1 == m.a1) | swapped).all() and 0.2 < swapped.mean() < 0.4
    beta_a1 = np.where(swapped, -m.BETA, m.BETA)
    # the top SNPs are enriched for causal ones (base rate 150 / 4000)
    log10_p = m.P_BOLT_LMM.map(lambda s: np.log10(float(s.split("E")[0])) + int(s.split("E")[1]))
    top = m.assign(lp=log10_p).nsmallest(50, "lp")
    causal = dict(zip(truth["causal"]["mean_platelet_volume"]["variant_ids"],
                      truth["causal"]["mean_platelet_volume"]["betas_a1"]))
    assert top.SNP.isin(list(causal)).mean() > 5 * 150 / len(bim)
    # estimated effects, turned to the .bim A1, agree in sign with the true ones
    is_causal = m.SNP.isin(list(causal)).to_numpy()
    true_beta = m.SNP[is_causal].map(causal).to_numpy()
    assert np.corrcoef(beta_a1[is_causal], true_beta)[0, 1] > 0.5


def test_format_p_survives_underflow():
    assert format_p(np.array([-400.0, np.log10(0.31), -1e-9, 0.0])) == [
        "1.0E-400", "3.1E-01", "1.0E+00", "1.0E+00"]
    assert format_p(np.array([np.log10(9.96e-5)])) == ["1.0E-04"]


def test_a_failed_run_leaves_the_folder_as_it_was(tmp_path, monkeypatch):
    """A rerun into a cohort's folder that fails after writing its .bed left the new
    .bed beside the old phenotypes and truth (a cohort of two seeds) and a temporary
    file; now the folder keeps the first cohort, byte for byte."""
    import cmix.simulate.balding_nichols as bn
    from cmix.errors import CmixError

    out = tmp_path / "c"
    simulate_cohort(out, n_samples=200, n_variants=400, n_discovery=300, seed=1)
    before = {f.relative_to(out): f.read_bytes() for f in out.rglob("*") if f.is_file()}

    def fail(*args, **kwargs):
        raise CmixError("planted failure after the .bed")

    monkeypatch.setattr(bn, "discovery_sumstats", fail)
    with pytest.raises(CmixError, match="planted failure"):
        simulate_cohort(out, n_samples=200, n_variants=400, n_discovery=300, seed=2)
    after = {f.relative_to(out): f.read_bytes() for f in out.rglob("*") if f.is_file()}
    assert after == before
    assert [f.name for f in tmp_path.iterdir()] == ["c"]       # no staged folder left


def test_cli_rejects_bad_arguments(tmp_path):
    def cmix(*args):
        return subprocess.run([sys.executable, "-m", "cmix.cli", "simulate", *args],
                              capture_output=True, text=True)

    res = cmix("--out", str(tmp_path / "x"), "--n-samples", "-5")
    assert res.returncode == 2 and "expected a cohort size from 2 to 10,000,000, got -5" in res.stderr
    blocker = tmp_path / "file"
    blocker.write_text("")
    res = cmix("--out", str(blocker / "sub"), "--n-samples", "50", "--n-variants", "300")
    assert res.returncode == 1
    assert res.stderr.count("\n") == 1 and "cannot write to this folder" in res.stderr
    assert "Traceback" not in res.stderr
