"""Coalescent cohorts (cmix simulate --haplotypes coalescent), checked against the tree
sequences msprime made (rebuilt from the same seed), plink2 --fst, plink1.9 --r2 and
plink2 --make-king-table."""

import dataclasses
import json
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
from bed_reader import open_bed

pytest.importorskip("msprime")
pytest.importorskip("stdpopsim")

from cmix.errors import CmixError  # noqa: E402
from cmix.simulate.coalescent import CoalescentDesign, simulate_coalescent_cohort  # noqa: E402
from cmix.simulate.populations import parse_population_counts  # noqa: E402
from cmix.simulate.trees import simulate_trees  # noqa: E402
from conftest import requires_plink2  # noqa: E402

COUNTS = {"YRI": 300, "CEU": 300, "CHB": 300}
DESIGN = CoalescentDesign(model="OutOfAfrica_3G09", populations=COUNTS, n_variants=2000,
                          n_chrom=2, piece_mb=2.0, n_discovery=300)
SEED = 5


def run(tool, *args, cwd):
    res = subprocess.run([tool, *args, "--threads", "2"], cwd=cwd, capture_output=True, text=True)
    assert res.returncode == 0, res.stdout + res.stderr
    return res


def truth_of(d):
    return json.loads((d / "truth.json").read_text())


@pytest.fixture(scope="module")
def ooa(tmp_path_factory):
    """900 people (YRI, CEU, CHB 300 each) x 2,000 SNPs on two 2 Mb pieces, OutOfAfrica_3G09."""
    d = tmp_path_factory.mktemp("ooa")
    simulate_coalescent_cohort(d, DESIGN, seed=SEED)
    return d


@pytest.fixture(scope="module")
def trees(ooa):
    """The tree sequences behind ``ooa``, simulated again from the truth's seed and sample counts."""
    t = truth_of(ooa)
    return simulate_trees(t["model"]["id"], t["msprime_samples"], t["n_chrom"], t["piece_mb"],
                          t["seed"])


def ts_frequencies(trees, bim, pops):
    """Derived-allele frequency (n_snps, n_pops) of each .bim SNP among all of a
    population's sampled haplotypes, straight from the tree sequences; also checks that
    every .bim SNP is a biallelic site there with A1 derived, A2 ancestral."""
    out = []
    for chrom, ts, _ in trees:
        rows = bim[bim.chrom == chrom]
        pos = ts.tables.sites.position
        site_ids = np.searchsorted(pos, rows.pos.to_numpy() - 1)
        assert np.array_equal(pos[site_ids], rows.pos.to_numpy() - 1)
        node_pop = ts.tables.nodes.population
        pop_id = {p.metadata["name"]: p.id for p in ts.populations()}
        samples = ts.samples()
        freq = np.zeros((len(rows), len(pops)))
        sub = ts.delete_sites(np.setdiff1d(np.arange(ts.num_sites), site_ids))
        for k, var in enumerate(sub.variants()):
            assert len(var.alleles) == 2 and len(var.site.mutations) == 1
            assert (var.alleles[1], var.alleles[0]) == (rows.a1.iloc[k], rows.a2.iloc[k])
            for j, p in enumerate(pops):
                freq[k, j] = var.genotypes[node_pop[samples] == pop_id[p]].mean()
        out.append(freq)
    return np.concatenate(out)


def hudson(p1, p2, n1, n2):
    """Hudson Fst as a ratio of averages over SNPs (Bhatia et al. 2013, eq. 10), with the
    sample-size correction; p: allele frequencies (n_snps,), n: haplotype counts."""
    num = (p1 - p2) ** 2 - p1 * (1 - p1) / (n1 - 1) - p2 * (1 - p2) / (n2 - 1)
    den = p1 * (1 - p2) + p2 * (1 - p1)
    return num.mean() / den.mean()


def pop_file(d):
    t = truth_of(d)
    rows = "".join(f"{e}\t{e}\t{p}\n" for e, p in zip(t["samples"]["eid"], t["samples"]["population"]))
    (d / "pop.txt").write_text("#FID\tIID\tPOP\n" + rows)
    return t


# ------------------------------------------------------------------------ files, label
def test_files_label_and_sites(ooa, trees):
    t = truth_of(ooa)
    bim = pd.read_csv(ooa / "genotypes.bim", sep="\t", header=None,
                      names=["chrom", "id", "cm", "pos", "a1", "a2"])
    fam = pd.read_csv(ooa / "genotypes.fam", sep=" ", header=None)
    assert len(bim) == 2000 and sorted(bim.chrom.unique()) == [1, 2] and bim.id.is_unique
    assert all((np.diff(g.pos) > 0).all() for _, g in bim.groupby("chrom"))
    assert len(fam) == 900
    pheno = pd.read_csv(ooa / "phenotypes.tsv", sep="\t")
    assert pheno.eid.astype(str).tolist() == fam[1].astype(str).tolist()
    # the label: f.21000 codes are the model's population order, the counts as asked
    assert t["classes"] == {"YRI": [1], "CEU": [2], "CHB": [3]}
    assert pheno["f.21000.0.0"].value_counts().to_dict() == {1: 300, 2: 300, 3: 300}
    code = {k: v[0] for k, v in t["classes"].items()}
    assert (pheno["f.21000.0.0"].to_numpy() == [code[p] for p in t["samples"]["population"]]).all()
    # every SNP is a biallelic site of the tree sequence, A1 derived, MAF above the floor
    freq = ts_frequencies(trees, bim, list(COUNTS))
    pooled = freq.mean(axis=1)          # equal haplotype counts per population
    assert (np.minimum(pooled, 1 - pooled) > 0.005).all()
    for f in ("kinship.dat", "sample_qc.tsv", "withdrawn.txt", "sumstats/hair_colour.txt.gz"):
        assert (ooa / f).stat().st_size > 0, f


def test_cli_same_seed_same_files(ooa, tmp_path):
    """The CLI with the fixture's arguments writes the same bytes; another seed does not."""
    base = [sys.executable, "-m", "cmix.cli", "simulate", "--haplotypes", "coalescent",
            "--model", "OutOfAfrica_3G09", "--populations", "YRI:300,CEU:300,CHB:300",
            "--n-variants", "2000", "--n-chrom", "2", "--piece-mb", "2", "--n-discovery", "300"]
    res = subprocess.run(base + ["--seed", "5", "--out", str(tmp_path / "a")],
                         capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    for f in ("genotypes.bed", "genotypes.bim", "genotypes.fam", "phenotypes.tsv",
              "sample_qc.tsv", "kinship.dat", "truth.json", "sumstats/smoking_status.txt.gz"):
        assert (tmp_path / "a" / f).read_bytes() == (ooa / f).read_bytes(), f
    eids = truth_of(ooa)["samples"]["eid"]
    assert not any(e in res.stderr for e in eids)          # no individual IDs in logs
    other = tmp_path / "b"
    simulate_coalescent_cohort(other, dataclasses.replace(DESIGN, n_variants=400), seed=6)
    assert (other / "genotypes.bim").read_bytes() != (ooa / "genotypes.bim").read_bytes()


@pytest.mark.parametrize("args, message", [
    (["--model", "NoSuchModel_1X00"], "not a HomSap demographic model"),
    (["--populations", "YRI:10,XYZ:10"], "'XYZ' is not a population of the model"),
    (["--ancestry", "none"], "--ancestry is for --haplotypes balding-nichols"),
    (["--model", "AncientEurope_4A21"], "no population of this model is sampled at the"),
    (["--n-discovery", "49"], "--n-discovery must be at least 50"),
    # fails after the .bed is written: nothing of it may stay
    (["--n-variants", "8"], "too"),
])
def test_bad_arguments_one_message(tmp_path, args, message):
    res = subprocess.run([sys.executable, "-m", "cmix.cli", "simulate", "--haplotypes", "coalescent",
                          "--n-variants", "100", "--out", str(tmp_path / "o"), *args],
                         capture_output=True, text=True)
    err = [line for line in res.stderr.splitlines() if not line.startswith("[cmix]")]
    assert res.returncode == 1 and "Traceback" not in res.stderr, res.stderr
    assert len(err) == 1 and message in err[0], res.stderr
    assert list(tmp_path.iterdir()) == []      # no folder, no half-written cohort


@pytest.mark.parametrize("args, message", [
    (["--populations", "YRI:10"], "--populations need --haplotypes coalescent"),
    (["--maf-floor", "0.3"], "--maf-floor need --haplotypes coalescent"),
    (["--fast", "--haplotypes", "coalescent", "--model", "Zigzag_1S14", "--n-chrom", "3"],
     "it does not use --model, --n-chrom, --haplotypes"),
])
def test_options_the_chosen_simulator_ignores_are_refused(tmp_path, args, message):
    res = subprocess.run([sys.executable, "-m", "cmix.cli", "simulate", *args,
                          "--n-variants", "100", "--out", str(tmp_path / "o")],
                         capture_output=True, text=True)
    assert res.returncode == 1 and message in res.stderr, res.stderr


def test_population_counts_and_shares():
    names = ["YRI", "CEU", "CHB"]
    assert parse_population_counts("YRI:5,CHB:7", 100, names) == {"YRI": 5, "CHB": 7}
    assert parse_population_counts("CEU:0.5,YRI:0.25,CHB:0.25", 10, names) == {"CEU": 5, "YRI": 3, "CHB": 2}
    assert parse_population_counts(None, 10, names) == {"YRI": 4, "CEU": 3, "CHB": 3}
    with pytest.raises(CmixError, match="twice"):
        parse_population_counts("YRI:5,YRI:6", 10, names)
    with pytest.raises(CmixError, match="NAME:COUNT"):
        parse_population_counts("YRI:ten", 10, names)


# ------------------------------------------------------------------ against plink2 / ts
@requires_plink2
def test_plink2_hudson_fst_matches_the_tree_sequence(ooa, trees):
    """plink2 --fst method=hudson on the cohort's .bed against Hudson Fst from the tree
    sequence's own allele frequencies on the same SNPs (all sampled haplotypes of each
    population: cohort founders and discovery people, 1,200+ per population).

    Both estimate the same quantity from overlapping samples; the cohort adds relatives,
    missing calls and 600 haplotypes per population of sampling noise. Tolerance: 5% of
    the value + 0.003. Measured (seed 5): within 1.5%.
    """
    t = pop_file(ooa)
    run("plink2", "--bfile", "genotypes", "--pheno", "pop.txt", "--fst", "POP", "method=hudson",
        "--out", "fst", cwd=ooa)
    got = pd.read_csv(ooa / "fst.fst.summary", sep="\t")
    got = {frozenset((a, b)): v for a, b, v in zip(got["#POP1"], got.POP2, got.HUDSON_FST)}
    bim = pd.read_csv(ooa / "genotypes.bim", sep="\t", header=None,
                      names=["chrom", "id", "cm", "pos", "a1", "a2"])
    pops = list(COUNTS)
    freq = ts_frequencies(trees, bim, pops)
    n_hap = {p: 2 * t["msprime_samples"][p] for p in pops}
    for i in range(3):
        for j in range(i + 1, 3):
            a, b = pops[i], pops[j]
            expected = hudson(freq[:, i], freq[:, j], n_hap[a], n_hap[b])
            value = got[frozenset((a, b))]
            assert abs(value - expected) <= 0.05 * expected + 0.003, (a, b, value, expected)
    # the model's history: CEU and CHB split 23 kya from one out-of-Africa population,
    # so they are closer to each other than either is to YRI
    assert got[frozenset(("CEU", "CHB"))] < min(got[frozenset(("YRI", "CEU"))],
                                                got[frozenset(("YRI", "CHB"))])


def test_ld_decays_with_distance_as_in_the_haplotypes(ooa, trees):
    """plink1.9 --r2 (genotype r2) among the cohort's CEU people, binned by distance,
    against the haplotype r2 of the same SNP pairs over every sampled CEU haplotype in the
    tree sequence. r2 falls with distance (recombination breaks LD), bin by bin; the two
    agree within 0.01 + 15% per bin (genotype r2 = haplotype r2 under Hardy-Weinberg;
    300 people vs 700 haplotypes of noise)."""
    t = truth_of(ooa)
    (ooa / "ceu.txt").write_text("".join(f"{e} {e}\n" for e, p in zip(t["samples"]["eid"],
                                                                        t["samples"]["population"])
                                         if p == "CEU"))
    run("plink1.9", "--bfile", "genotypes", "--keep", "ceu.txt", "--maf", "0.05", "--r2",
        "--ld-window", "100000", "--ld-window-kb", "1000", "--ld-window-r2", "0",
        "--out", "ld", cwd=ooa)
    ld = pd.read_csv(ooa / "ld.ld", sep=r"\s+")
    ld = ld[ld.CHR_A == 1]
    dist = (ld.BP_B - ld.BP_A).to_numpy()
    edges = np.array([0, 5e3, 20e3, 50e3, 150e3, 400e3, 1e6])
    bins = np.digitize(dist, edges) - 1
    # haplotype r2 from the tree sequence, CEU haplotypes, same pairs
    chrom, ts, rate = trees[0]
    node_pop = ts.tables.nodes.population
    ceu = {p.metadata["name"]: p.id for p in ts.populations()}["CEU"]
    keep = node_pop[ts.samples()] == ceu
    pos = ts.tables.sites.position
    wanted = np.unique(np.r_[ld.BP_A, ld.BP_B]) - 1
    sub = ts.delete_sites(np.setdiff1d(np.arange(ts.num_sites), np.searchsorted(pos, wanted)))
    h = sub.genotype_matrix()[:, keep].astype(float)           # (snps, CEU haplotypes)
    z = (h - h.mean(axis=1, keepdims=True)) / h.std(axis=1, keepdims=True)
    row = {int(x) + 1: k for k, x in enumerate(sub.tables.sites.position)}
    a = np.array([row[x] for x in ld.BP_A])
    b = np.array([row[x] for x in ld.BP_B])
    hap_r2 = ((z @ z.T / h.shape[1]) ** 2)[a, b]
    plink_mean = np.array([ld.R2.to_numpy()[bins == k].mean() for k in range(len(edges) - 1)])
    hap_mean = np.array([hap_r2[bins == k].mean() for k in range(len(edges) - 1)])
    assert (np.diff(plink_mean) < 0).all(), plink_mean
    assert plink_mean[0] > 3 * plink_mean[-1], plink_mean
    assert (np.abs(plink_mean - hap_mean) <= 0.01 + 0.15 * hap_mean).all(), (plink_mean, hap_mean)


@requires_plink2
def test_relatives_made_on_coalescent_haplotypes(ooa):
    """plink2 --make-king-table kinship of the planted pairs: duplicates ~0.5, first-degree
    pairs 0.25 +- 0.05 on average (parent-offspring exactly, full siblings on average), more
    distant pairs lower; pairs stay within a population. With only two 2 Mb pieces (a few
    cM) a sibling or cousin pair shares all or nothing of each piece, so single pairs
    beyond parent-offspring are not held to KING's bands."""
    t = pop_file(ooa)
    pop = dict(zip(t["samples"]["eid"], t["samples"]["population"]))
    run("plink2", "--bfile", "genotypes", "--make-king-table", "--king-table-filter", "0.02",
        "--out", "king", cwd=ooa)
    king = pd.read_csv(ooa / "king.kin0", sep="\t", dtype={"#FID1": str, "IID1": str, "IID2": str})
    kin = {frozenset((a, b)): k for a, b, k in zip(king.IID1, king.IID2, king.KINSHIP)}
    by_degree = {}
    for a, b, d in t["related_pairs"]:
        assert pop[a] == pop[b]
        by_degree.setdefault(d, []).append(kin.get(frozenset((a, b)), 0.0))
    mean = {d: float(np.mean(v)) for d, v in by_degree.items()}
    # first degree: 2/3 parent-offspring (0.25 exactly), 1/3 full siblings (0.25 on
    # average; per pair 0, 0.25 or 0.5 on each piece): the mean's sd is ~0.015
    assert min(by_degree[0]) > 0.45 and 0.2 < mean[1] < 0.3, mean
    assert np.mean(by_degree[2] + by_degree[3]) < mean[1] - 0.05, mean
    # founders are distinct sampled diploids: no unplanted pair at duplicate level. (Over
    # 4 Mb, ~20% of unrelated pairs exceed 0.0442 and ~0.2% exceed 0.177, max ~0.24, in the
    # tree sequences' own genotypes as well: shared coalescent history over few segments.)
    planted = {frozenset(p[:2]) for p in t["related_pairs"]}
    extra = [k for pair, k in kin.items() if pair not in planted and k > 0.3]
    assert not extra, extra


def test_american_admixture_admixed_between_sources(tmp_path):
    """AmericanAdmixture_4B18: the admixed population (ADMIX) has lower Hudson Fst to EUR
    and to AFR than AFR and EUR have to each other (Fst from the .bed, by population)."""
    design = CoalescentDesign(model="AmericanAdmixture_4B18",
                              populations="AFR:150,EUR:150,ASIA:150,ADMIX:150",
                              n_variants=600, n_chrom=2, piece_mb=1.0, n_discovery=100)
    simulate_coalescent_cohort(tmp_path, design, seed=2)
    t = truth_of(tmp_path)
    assert [p["name"] for p in t["populations"]] == ["AFR", "EUR", "ASIA", "ADMIX"]
    g = open_bed(tmp_path / "genotypes.bed").read(dtype="float32")     # (samples, snps), A1 counts
    pop = np.array(t["samples"]["population"])
    p = {k: np.nanmean(g[pop == k], axis=0) / 2 for k in ("AFR", "EUR", "ADMIX")}
    f = {(a, b): hudson(p[a], p[b], 300, 300) for a, b in
         (("AFR", "EUR"), ("ADMIX", "EUR"), ("ADMIX", "AFR"))}
    assert f[("AFR", "EUR")] > 0.05, f
    assert f[("ADMIX", "EUR")] < 0.6 * f[("AFR", "EUR")], f
    assert f[("ADMIX", "AFR")] < 0.9 * f[("AFR", "EUR")], f


@requires_plink2
def test_plink2_glm_finds_the_largest_trait_locus(ooa):
    """Traits sit on the coalescent genotypes: plink2 --glm of hair colour (codes 1-5 as a
    number) among the reference population's cohort members finds the HERC2 locus
    (12% of liability variance there) at p < 1e-5, with the sign of truth.json's effect
    (A1 = light allele: negative on the .bim A1)."""
    t = truth_of(ooa)
    ph = pd.read_csv(ooa / "phenotypes.tsv", sep="\t")
    pop = dict(zip(map(int, t["samples"]["eid"]), t["samples"]["population"]))
    ph = ph[ph.eid.map(pop) == t["reference_population"]]
    hair = ph["f.1747.0.0"].where(ph["f.1747.0.0"].between(1, 5))
    pd.DataFrame({"#FID": ph.eid, "IID": ph.eid, "HAIR": hair}).to_csv(
        ooa / "hair.txt", sep="\t", index=False, na_rep="NA")
    run("plink2", "--bfile", "genotypes", "--pheno", "hair.txt", "--glm", "allow-no-covars",
        "--out", "glm", cwd=ooa)
    glm = pd.read_csv(ooa / "glm.HAIR.glm.linear", sep="\t")
    herc2 = t["traits"]["hair_colour"]["large_loci"][0]
    assert herc2["locus"] == "HERC2"
    row = glm[glm.ID == herc2["variant_id"]].iloc[0]
    beta_bim_a1 = row.BETA if row.A1 == row.ALT else -row.BETA     # .bim A1 is plink2's ALT
    assert row.P < 1e-5 and np.sign(beta_bim_a1) == np.sign(herc2["beta_a1"]) == -1, row
