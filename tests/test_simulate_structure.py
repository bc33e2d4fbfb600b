"""Population structure and trait architectures of the simulator, checked against plink2
(--fst, --pca, --glm), bed-reader and the truth file."""

import json
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
from bed_reader import open_bed

from cmix.errors import CmixError
from cmix.simulate.traits import TRAITS
from cmix.simulate.populations import (check_populations, default_populations,
                                       population_classes)
from cmix.simulate.balding_nichols import simulate_cohort
from conftest import requires_plink2

# A scripted structure (as a benchmark would pass it): British with two regions, three
# populations at Fst 0.01, 0.05 and 0.15 from it, and an admixed group.
SCRIPTED = [
    {"name": "british", "code": 1001, "share": 0.4,
     "regions": [{"name": "south", "share": 0.5, "fst": 0.001},
                 {"name": "north", "share": 0.5, "fst": 0.003}]},
    {"name": "pop_a", "code": 1003, "share": 0.15, "fst": 0.01},
    {"name": "pop_b", "code": 3001, "share": 0.15, "fst": 0.05},
    {"name": "pop_c", "code": 4002, "share": 0.15, "fst": 0.15},
    {"name": "mixed", "code": 2001, "share": 0.15, "admixed_from": {"pop_c": 0.5, "british": 0.5}},
]


def run_plink2(*args, cwd):
    res = subprocess.run(["plink2", *args, "--threads", "2"], cwd=cwd, capture_output=True,
                         text=True)
    assert res.returncode == 0, res.stdout + res.stderr
    return res


def truth_of(d):
    return json.loads((d / "truth.json").read_text())


def write_pop_file(d, truth):
    """plink2 phenotype file with population and region as categorical columns."""
    s = truth["samples"]
    rows = "".join(f"{e}\t{e}\t{p}\t{r}\n" for e, p, r in zip(s["eid"], s["population"], s["region"]))
    (d / "pop.txt").write_text("#FID\tIID\tPOP\tREGION\n" + rows)


@pytest.fixture(scope="module")
def scripted(tmp_path_factory):
    """1,500 people x 3,000 SNPs of the SCRIPTED structure."""
    d = tmp_path_factory.mktemp("scripted")
    simulate_cohort(d, n_samples=1500, n_variants=3000, n_discovery=200, seed=3,
                    populations=SCRIPTED)
    return d


# ------------------------------------------------------------------------ options / input
def test_unstructured_option_is_one_population(tmp_path):
    truth = simulate_cohort(tmp_path, n_samples=200, n_variants=800, n_discovery=200, seed=1,
                            populations=None)
    assert [p["name"] for p in truth["populations"]] == ["british"]
    pheno = pd.read_csv(tmp_path / "phenotypes.tsv", sep="\t")
    assert (pheno["f.21000.0.0"] == 1001).all()
    assert set(truth["samples"]["region"]) == {"british"}


def test_default_populations_are_ukb_like():
    pops = check_populations(default_populations())
    assert abs(sum(p["share"] for p in pops) - 1) < 1e-12
    assert pops[0]["name"] == "british" and 0.85 < pops[0]["share"] < 0.9
    region_fst = [r["fst"] for r in pops[0]["regions"]]
    # pairwise Hudson Fst between regions is the sum of their Fst to the British frequency
    pair = [a + b for i, a in enumerate(region_fst) for b in region_fst[i + 1:]]
    assert 0.001 <= min(pair) and max(pair) <= 0.005
    assert sum(p["share"] for p in pops if p.get("fst", 0) >= 0.05) < 0.05
    assert any("admixed_from" in p for p in pops)
    assert population_classes()["african"] == [4002]


@pytest.mark.parametrize("text, key", [
    ("not json", "not a readable JSON file"),
    ('[{"name": "a", "code": 1001, "share": 1, "fst": 0, "colour": 1}]', "populations[0].colour"),
    ('[{"name": "a", "code": 1001, "share": 1, "fst": 0.1}]', "populations[0] (a).fst"),
    ('[{"name": "a", "code": 1001, "share": 1}, {"name": "b", "code": 2, "share": 1, "fst": 0.7}]',
     "populations[1] (b).fst"),
    ('[{"name": "a", "code": 1001, "share": 1}, {"name": "b", "code": 2, "share": 1, '
     '"admixed_from": {"a": 0.5, "x": 0.5}}]', "populations[1] (b).admixed_from.x"),
    ('{"populations": [{"name": "a", "share": 1}]}', "populations[0].code"),
    # two populations of one code: the f.21000 column could not tell them apart
    ('[{"name": "a", "code": 1001, "share": 1}, {"name": "b", "code": 1001, "share": 1, '
     '"fst": 0.15}]', "populations[1] (b).code: 1001 is also a's code"),
])
def test_bad_ancestry_json_names_file_and_key(tmp_path, text, key):
    bad = tmp_path / "anc.json"
    bad.write_text(text)
    res = subprocess.run([sys.executable, "-m", "cmix.cli", "simulate", "--out", str(tmp_path / "o"),
                          "--n-samples", "100", "--n-variants", "500", "--ancestry", str(bad)],
                         capture_output=True, text=True)
    assert res.returncode == 1 and "Traceback" not in res.stderr
    assert res.stderr.count("\n") == 1 and str(bad) in res.stderr and key in res.stderr, res.stderr
    with pytest.raises(CmixError, match="populations"):
        check_populations([{"name": "a", "code": 1, "share": -1}])


def test_ancestry_file_reproduces_the_scripted_call(tmp_path, scripted):
    (tmp_path / "anc.json").write_text(json.dumps({"populations": SCRIPTED}))
    res = subprocess.run([sys.executable, "-m", "cmix.cli", "simulate", "--out", str(tmp_path / "o"),
                          "--n-samples", "1500", "--n-variants", "3000", "--n-discovery", "200",
                          "--seed", "3", "--ancestry", str(tmp_path / "anc.json")],
                         capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    for f in ("genotypes.bed", "phenotypes.tsv", "sample_qc.tsv", "truth.json"):
        assert (tmp_path / "o" / f).read_bytes() == (scripted / f).read_bytes(), f
    for line in res.stderr.splitlines():            # no individual IDs in logs
        assert not any(e in line for e in truth_of(scripted)["samples"]["eid"][:50])


# ------------------------------------------------------------------ structure vs plink2
@requires_plink2
def test_plink2_hudson_fst_recovers_the_configured_fst(scripted):
    """plink2 --fst method=hudson between each population and the British.

    Expected value: for p2 ~ BN(p1, F) Hudson's Fst is F/2, and the simulator uses
    F = 2 fst; the British sample pools two regions drawn around the British frequency,
    which adds sum(w_r^2 fst_r) (here 0.001). Tolerance: 10% of the value + 0.002
    (3,000 independent frequency draws; per-SNP Fst is very variable).
    """
    truth = truth_of(scripted)
    write_pop_file(scripted, truth)
    run_plink2("--bfile", "genotypes", "--pheno", "pop.txt", "--fst", "POP", "method=hudson",
               "--out", "fst", cwd=scripted)
    fst = pd.read_csv(scripted / "fst.fst.summary", sep="\t")
    fst = {frozenset((a, b)): v for a, b, v in zip(fst["#POP1"], fst.POP2, fst.HUDSON_FST)}
    pooled = sum(r["share"] ** 2 * r["fst"] for r in truth["populations"][0]["regions"])
    for pop in truth["populations"][1:]:
        if "fst" in pop:
            expected = pop["fst"] + pooled
            got = fst[frozenset(("british", pop["name"]))]
            assert abs(got - expected) <= 0.1 * expected + 0.002, (pop["name"], got, expected)
    # regions: both drawn around the British frequency, so their pairwise Fst is the sum
    run_plink2("--bfile", "genotypes", "--pheno", "pop.txt", "--fst", "REGION", "method=hudson",
               "--out", "fst_region", cwd=scripted)
    reg = pd.read_csv(scripted / "fst_region.fst.summary", sep="\t")
    got = reg[(reg["#POP1"].isin(["north", "south"])) & reg.POP2.isin(["north", "south"])].HUDSON_FST
    assert abs(float(got.iloc[0]) - 0.004) <= 0.0015, got
    # the admixed group sits between its sources: Fst to each well below theirs to each other
    assert fst[frozenset(("british", "mixed"))] < 0.5 * fst[frozenset(("british", "pop_c"))]
    assert fst[frozenset(("pop_c", "mixed"))] < 0.5 * fst[frozenset(("british", "pop_c"))]


def canonical_correlations(a, b):
    qa, _ = np.linalg.qr(a - a.mean(axis=0))
    qb, _ = np.linalg.qr(b - b.mean(axis=0))
    return np.linalg.svd(qa.T @ qb, compute_uv=False)


def plink2_pcs(d, n=10, extract=None, out="pca"):
    args = ["--extract", extract] if extract else ["--maf", "0.05"]
    run_plink2("--bfile", "genotypes", *args, "--pca", str(n), "--out", out, cwd=d)
    ev = pd.read_csv(d / f"{out}.eigenvec", sep="\t", dtype={"IID": str})
    return ev.set_index("IID")[[f"PC{k + 1}" for k in range(n)]]


@requires_plink2
@pytest.mark.slow
def test_plink2_pca_separates_ancestries_and_matches_sample_qc_pcs(cohort):
    """Default (UK Biobank-like) cohort of 2,000. sample_qc.tsv's PCs are fitted the UKB
    way (unrelated samples, LD-thinned common SNPs listed in truth.json, everyone
    projected). plink2 --pca on the same SNPs but all samples must span the same top
    subspace (canonical correlations >= 0.95). The top PCs are the African and South
    Asian axes: at this size the default has ~4 East Asians, too few for a PC of their
    own (plink2 puts them on no early PC either). plink2 --pca on all common SNPs must
    put each non-European ancestry far from the British on its first PCs."""
    truth = truth_of(cohort)
    sqc = pd.read_csv(cohort / "sample_qc.tsv", sep="\t", dtype={"eid": str}).set_index("eid")
    assert [c for c in sqc.columns][-11:] == ["used.in.pca.calculation"] + [f"PC{k}" for k in range(1, 11)]
    pop = pd.Series(truth["samples"]["population"], index=truth["samples"]["eid"])
    # white British flag: mostly the British, never anyone else
    wb = sqc["in.white.British.ancestry.subset"].astype(bool)
    assert not wb[pop != "british"].any() and wb[pop == "british"].mean() > 0.9
    (cohort / "pca_snps.txt").write_text("\n".join(truth["pca"]["variant_ids"]) + "\n")
    ours = sqc.loc[pop.index, ["PC1", "PC2"]].to_numpy()
    same_snps = plink2_pcs(cohort, 2, extract="pca_snps.txt", out="pca_same").loc[pop.index]
    cc = canonical_correlations(ours, same_snps.to_numpy())
    assert cc.min() >= 0.95, cc
    theirs = plink2_pcs(cohort, 3).loc[pop.index].to_numpy()
    brit = (pop == "british").to_numpy()
    # distance from the British centroid in British-SD units, on plink2's top PCs
    z = (theirs - theirs[brit].mean(axis=0)) / theirs[brit].std(axis=0)
    dist = np.linalg.norm(z, axis=1)
    for name in ("south_asian", "african", "white_and_black_caribbean"):
        grp = (pop == name).to_numpy()
        assert grp.sum() >= 3 and np.median(dist[grp]) > 6, name
    assert np.quantile(dist[brit], 0.99) < 6
    # the African axis agrees between all SNPs and the thinned ones
    assert canonical_correlations(ours[:, :1], theirs[:, :1])[0] >= 0.9


@requires_plink2
def test_admixed_people_lie_between_their_sources_by_ancestry_proportion(scripted):
    truth = truth_of(scripted)
    pop = pd.Series(truth["samples"]["population"], index=truth["samples"]["eid"])
    pcs = plink2_pcs(scripted, 4).loc[pop.index].to_numpy()
    mean_gb = pcs[(pop == "british").to_numpy()].mean(axis=0)
    axis = pcs[(pop == "pop_c").to_numpy()].mean(axis=0) - mean_gb
    mixed = (pop == "mixed").to_numpy()
    t = (pcs[mixed] - mean_gb) @ axis / (axis @ axis)         # 0 = British, 1 = pop_c
    q = np.array([truth["samples"]["admixture"][e]["pop_c"] for e in pop.index[mixed]])
    assert np.corrcoef(t, q)[0, 1] > 0.8
    assert abs(t.mean() - q.mean()) < 0.1


# -------------------------------------------------------------------- traits vs plink2
@pytest.fixture(scope="module")
def gwas_cohort(tmp_path_factory):
    """5,000 people x 3,000 SNPs on 16 chromosomes (MC1R at its chr16 position)."""
    d = tmp_path_factory.mktemp("gwas")
    simulate_cohort(d, n_samples=5000, n_variants=3000, n_chrom=16, n_discovery=200, seed=21)
    return d


@requires_plink2
@pytest.mark.slow
def test_plink2_glm_finds_red_hair_locus_and_nothing_for_smoking(gwas_cohort):
    d = gwas_cohort
    truth = truth_of(d)
    pheno = pd.read_csv(d / "phenotypes.tsv", sep="\t", dtype={"eid": str})
    hair, smoke = pheno["f.1747.0.0"], pheno["f.20116.0.0"]
    red = np.where(hair == 2, 2, np.where(hair.isin([1, 3, 4, 5]), 1, -9))      # case 2, control 1
    ever = np.where(smoke.isin([1, 2]), 2, np.where(smoke == 0, 1, -9))
    pd.DataFrame({"#FID": pheno.eid, "IID": pheno.eid, "RED": red, "EVER": ever}).to_csv(
        d / "bin.txt", sep="\t", index=False)
    sqc = pd.read_csv(d / "sample_qc.tsv", sep="\t", dtype={"eid": str})
    sqc.insert(0, "#FID", sqc.eid)
    sqc.rename(columns={"eid": "IID"})[["#FID", "IID", "PC1", "PC2", "PC3", "PC4"]].to_csv(
        d / "covar.txt", sep="\t", index=False)
    run_plink2("--bfile", "genotypes", "--pheno", "bin.txt", "--covar", "covar.txt", "--maf", "0.01",
               "--glm", "hide-covar", "--out", "glm", cwd=d)
    red_res = pd.read_csv(d / "glm.RED.glm.logistic.hybrid", sep="\t").set_index("ID")
    mc1r = truth["traits"]["hair_colour"]["red_hair"]["variant_ids"]
    assert truth["traits"]["hair_colour"]["red_hair"]["chrom"] == 16
    assert red_res.loc[mc1r, "P"].min() < 5e-8, red_res.loc[mc1r, "P"]
    assert (red_res.loc[mc1r, "OR"] > 1).all()                  # A1 is the R allele
    smoke_res = pd.read_csv(d / "glm.EVER.glm.logistic.hybrid", sep="\t")
    assert smoke_res.P.min() > 5e-8, smoke_res.nsmallest(3, "P")


def test_snp_heritability_recovered_from_truth_and_genotypes(cohort):
    """For each trait, the true genetic value (truth.json effects x genotypes read with
    bed-reader) has variance h2 in the British; for the measured traits, the residual
    after removing it and the configured sex and age effects has variance 1 - h2, and
    the liability's regression slope on it is 1."""
    truth = truth_of(cohort)
    pheno = pd.read_csv(cohort / "phenotypes.tsv", sep="\t", dtype={"eid": str})
    bim = pd.read_csv(cohort / "genotypes.bim", sep="\t", header=None)
    col = pd.Series(np.arange(len(bim)), index=bim[1])
    brit = np.array(truth["samples"]["population"]) == "british"
    male, age = pheno["f.31.0.0"].to_numpy(), pheno["f.21022.0.0"].to_numpy()
    with open_bed(cohort / "genotypes.bed") as bed:
        geno = bed.read(dtype="float32")                       # A1 counts, NaN missing
    geno = np.where(np.isnan(geno), np.nanmean(geno, axis=0), geno)
    for name, spec in TRAITS.items():
        causal = truth["causal"][name]
        g = geno[:, col[causal["variant_ids"]].to_numpy()] @ np.asarray(causal["betas_a1"])
        g -= g[brit].mean()
        h2 = truth["traits"][name]["h2"]
        assert abs(g[brit].var() - h2) < 0.1 * h2 + 0.02, (name, g[brit].var(), h2)
        if spec["kind"] != "continuous":
            continue
        y = (pheno[f"f.{spec['field']}.0.0"].to_numpy() - spec["mean"]) / spec["sd"]
        ok = brit & ~np.isnan(y)
        resid = y - g - spec["male"] * male - spec["age"] * (age - 55)
        resid -= resid[ok].mean()
        h2_hat = g[ok].var() / (g[ok].var() + resid[ok].var())
        assert abs(h2_hat - h2) < 0.05, (name, h2_hat, h2)
        slope = np.polyfit(g[ok], y[ok] - spec["male"] * male[ok] - spec["age"] * (age[ok] - 55), 1)[0]
        assert abs(slope - 1) < 0.15, (name, slope)


def test_covariate_and_regional_effects(gwas_cohort):
    """Men smoke more, regions differ in smoking as configured, relatives share their
    ancestry, non-Europeans are darker and almost never red-haired, and the British
    red-hair share is about 4%."""
    truth = truth_of(gwas_cohort)
    pheno = pd.read_csv(gwas_cohort / "phenotypes.tsv", sep="\t", dtype={"eid": str})
    pop = np.array(truth["samples"]["population"])
    region = np.array(truth["samples"]["region"])
    ever = pheno["f.20116.0.0"].isin([1, 2]).where(pheno["f.20116.0.0"].isin([0, 1, 2]))
    by_sex = ever.groupby(pheno["f.31.0.0"]).mean()
    assert by_sex[1] - by_sex[0] > 0.05
    rate = ever.groupby(region).mean()
    assert rate["scotland"] - rate["south_east_england"] > 0.05
    # relatives share their family's population and region
    where = {e: k for k, e in enumerate(truth["samples"]["eid"])}
    for a, b, _ in truth["related_pairs"]:
        assert pop[where[a]] == pop[where[b]] and region[where[a]] == region[where[b]]
    hair = pheno["f.1747.0.0"]
    brit = pop == "british"
    assert 0.025 < (hair[brit] == 2).mean() < 0.06
    non_eu = np.isin(pop, ["south_asian", "african", "east_asian"])
    assert (hair[non_eu] == 2).sum() <= 1
    assert hair[non_eu].isin([4, 5]).mean() > 0.8 > hair[brit].isin([4, 5]).mean()
