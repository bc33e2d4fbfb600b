"""The discovery route: `cmix gwas` against plink2 --glm run by hand, the discovery set
kept out of the store, and the store's provenance."""

import gzip
import hashlib
import json
import shutil
import subprocess

import numpy as np
import pandas as pd
import pytest
import zarr

from conftest import requires_plink2
from test_workflow import ukb_standin  # noqa: F401  (a fixture)

from cmix.atomic import file_sha256
from cmix.cli import main
from cmix.genotypes.gwas import discovery_split
from cmix.simulate.balding_nichols import simulate_cohort

pytestmark = requires_plink2

COVARIATES = {"fields": [21022, 31], "pcs": 10, "pcs_from": "sample_qc"}
MPV = {"field": 30100, "kind": "continuous", "binarise": "median"}
SMOKING = {"field": 20116, "kind": "categorical", "classes": {"never": [0], "ever": [1, 2]}}
HAIR = {"field": 1747, "kind": "categorical",
        "classes": {"blonde": [1], "red": [2], "light_brown": [3], "dark_brown": [4],
                    "black": [5]}}


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    d = tmp_path_factory.mktemp("gwas")
    simulate_cohort(d / "c", n_samples=500, n_variants=1200, n_discovery=500, seed=5)
    return d


def gwas(d, trait, config, out, *extra):
    c = d / "c"
    return main(["gwas", "--bfile", str(c / "genotypes"), "--pheno", str(c / "phenotypes.tsv"),
                 "--trait", trait, "--trait-config", json.dumps(config),
                 "--covariates", json.dumps(COVARIATES), "--sample-qc", str(c / "sample_qc.tsv"),
                 "--out", str(out), *extra])


def by_hand(d, ids_file, column, codes, tmp, bfile=None, extra=()):
    """plink2 --glm on the whole .bed (``bfile``, default the cohort's), with phenotype
    and covariate files made here from the cohort's tables (not by cmix), for the people
    of ``ids_file``; ``extra``: more plink2 arguments."""
    c = d / "c"
    bfile = bfile or c / "genotypes"
    pheno = pd.read_csv(c / "phenotypes.tsv", sep="\t", dtype={"eid": str}).set_index("eid")
    sqc = pd.read_csv(c / "sample_qc.tsv", sep="\t", dtype={"eid": str}).set_index("eid")
    ids = pd.read_csv(ids_file, sep="\t", dtype=str)
    y = pheno.loc[ids["IID"], column]
    if codes is not None:      # binary: control codes -> 1, case codes -> 2
        y = y.map(lambda v: 1 if v in codes[0] else (2 if v in codes[1] else np.nan))
    pd.DataFrame({"#FID": ids["#FID"].to_numpy(), "IID": ids["IID"].to_numpy(),
                  "Y": y.to_numpy()}).to_csv(tmp / "y.tsv", sep="\t", index=False, na_rep="NA")
    cov = pd.concat([pheno.loc[ids["IID"], ["f.21022.0.0", "f.31.0.0"]],
                     sqc.loc[ids["IID"], [f"PC{k}" for k in range(1, 11)]]], axis=1)
    cov.insert(0, "IID", ids["IID"].to_numpy())
    cov.insert(0, "#FID", ids["#FID"].to_numpy())
    cov.to_csv(tmp / "cov.tsv", sep="\t", index=False)
    glm = ["--glm", "hide-covar"] + (["firth-fallback"] if codes is not None else [])
    r = subprocess.run(["plink2", "--bfile", str(bfile), "--keep", str(ids_file),
                        "--pheno", str(tmp / "y.tsv"), "--covar", str(tmp / "cov.tsv"),
                        "--covar-variance-standardize", *glm, *extra, "--threads", "1",
                        "--out", str(tmp / "hand")], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    (f,) = [p for p in tmp.glob("hand.Y.glm.*") if not p.name.endswith(".id")]
    return pd.read_csv(f, sep="\t", na_values=["NA"])


@pytest.mark.parametrize("trait, config, column, codes", [
    ("mean_platelet_volume", MPV, "f.30100.0.0", None),
    ("smoking_status", SMOKING, "f.20116.0.0", ([0], [1, 2])),
])
def test_gwas_equals_plink2_glm_by_hand(small, tmp_path, trait, config, column, codes):
    out, ids = tmp_path / "ss.gz", tmp_path / "disc.id"
    assert gwas(small, trait, config, out, "--discovery-fraction", "0.5",
                "--ids-out", str(ids)) == 0
    ours = pd.read_csv(out, sep="\t", na_values=["NA"])
    assert list(ours.columns) == ["SNP", "CHR", "BP", "ALLELE1", "ALLELE0", "A1FREQ", "INFO",
                                  "BETA", "SE", "P_BOLT_LMM"]
    hand = by_hand(small, ids, column, codes, tmp_path)
    assert list(ours["SNP"]) == list(hand["ID"])            # every variant, .bim order
    assert (ours["ALLELE1"] == hand["A1"]).all()
    other = np.where(hand["A1"] == hand["ALT"], hand["REF"], hand["ALT"])
    assert (ours["ALLELE0"] == other).all()
    # linear: BETA; logistic: plink2's default OR column, our log odds exponentiated
    effect = ours["BETA"] if codes is None else np.exp(ours["BETA"])
    beta = hand["BETA"] if codes is None else hand["OR"]
    se = hand["SE"] if codes is None else hand["LOG(OR)_SE"]
    tested = hand["P"].notna()
    assert tested.sum() > 500 and (ours["P_BOLT_LMM"].notna() == tested).all()
    # the same fits, to plink2's printing precision (6 significant digits)
    np.testing.assert_allclose(effect[tested], beta[tested], rtol=1e-5)
    np.testing.assert_allclose(ours["SE"][tested], se[tested], rtol=2e-5)
    np.testing.assert_allclose(ours["P_BOLT_LMM"][tested], hand["P"][tested], rtol=1e-5)
    # the selection reads it like any BOLT-LMM file
    assert main(["select", "--sumstats", str(out), "--bfile", str(small / "c/genotypes"),
                 "--top", "20", "--out", str(tmp_path / "snps.tsv")]) == 0


def test_chrx_with_sex_covariate_and_a_chromosome_without_variants(small, tmp_path):
    """Chromosome 6 relabelled X, sex among the covariates, and an --extract list
    without chromosome 5: plink2 would add .fam sex on chrX (collinear: it stopped) and
    stop on a chromosome with no variant left. cmix runs the chromosomes that have one,
    each with the store's covariates: equal to plink2 by hand with no-x-sex."""
    import shutil

    c = small / "c"
    for ext in ("bed", "fam"):
        shutil.copy(c / f"genotypes.{ext}", tmp_path / f"x.{ext}")
    bim = pd.read_csv(c / "genotypes.bim", sep="\t", header=None, dtype=str)
    bim.loc[bim[0] == "6", 0] = "X"
    bim.to_csv(tmp_path / "x.bim", sep="\t", header=False, index=False)
    bim.loc[bim[0] != "5", 1].to_csv(tmp_path / "no5.snplist", header=False, index=False)
    out, ids = tmp_path / "ss.gz", tmp_path / "disc.id"
    assert main(["gwas", "--bfile", str(tmp_path / "x"), "--pheno", str(c / "phenotypes.tsv"),
                 "--trait", "mean_platelet_volume", "--trait-config", json.dumps(MPV),
                 "--covariates", json.dumps(COVARIATES), "--sample-qc", str(c / "sample_qc.tsv"),
                 "--extract", str(tmp_path / "no5.snplist"), "--discovery-fraction", "0.5",
                 "--ids-out", str(ids), "--out", str(out)]) == 0
    ours = pd.read_csv(out, sep="\t", na_values=["NA"], dtype={"CHR": str})
    assert set(ours["CHR"]) == {"1", "2", "3", "4", "X"}
    hand = by_hand(small, ids, "f.30100.0.0", None, tmp_path, bfile=tmp_path / "x",
                   extra=["no-x-sex", "--extract", str(tmp_path / "no5.snplist")])
    assert list(ours["SNP"]) == list(hand["ID"])
    tested = hand["P"].notna()
    np.testing.assert_allclose(ours["BETA"][tested], hand["BETA"][tested], rtol=1e-5)
    np.testing.assert_allclose(ours["P_BOLT_LMM"][tested], hand["P"][tested], rtol=1e-5)


def test_measured_trait_of_counts_and_minus_nine_is_tested_as_measured(small, tmp_path):
    """A measured trait whose values are all 0/1/2, some of them -9 (a value: -9 is not
    among the trait's missing codes), and a covariate holding -9: plink2 alone would read
    the trait as case/control (0 = missing) and drop the -9s. cmix's GWAS must be the
    linear regression of every chosen person, checked against OLS by numpy on the .bed's
    A1 counts (bed-reader)."""
    from bed_reader import open_bed

    c = small / "c"
    pheno = pd.read_csv(c / "phenotypes.tsv", sep="\t", dtype={"eid": str})
    rng = np.random.default_rng(0)
    y = rng.integers(0, 3, len(pheno)).astype(float)
    y[rng.random(len(pheno)) < 0.05] = -9.0
    pheno["f.99999.0.0"] = y
    age = pheno["f.21022.0.0"].to_numpy(float)
    age[:15] = -9.0
    pheno["f.21022.0.0"] = age
    table = tmp_path / "pheno.tsv"
    pheno.to_csv(table, sep="\t", index=False)
    out, ids = tmp_path / "count.gz", tmp_path / "tested.id"
    assert main(["gwas", "--bfile", str(c / "genotypes"), "--pheno", str(table),
                 "--trait", "count", "--trait-config", '{"field": 99999, "kind": "continuous"}',
                 "--covariates", '{"fields": [21022]}', "--chroms", "1",
                 "--ids-out", str(ids), "--out", str(out)]) == 0
    tested = pd.read_csv(ids, sep="\t", dtype=str)["IID"]
    fam = pd.read_csv(c / "genotypes.fam", sep=r"\s+", header=None, dtype=str)
    has = pheno.set_index("eid").loc[fam[1]]
    assert set(tested) == set(fam[1][(has["f.99999.0.0"].notna() & has["f.21022.0.0"].notna())
                                     .to_numpy()])
    ours = pd.read_csv(out, sep="\t", na_values=["NA"]).set_index("SNP")
    bed = open_bed(c / "genotypes.bed")
    rows = np.flatnonzero(fam[1].isin(set(tested)).to_numpy())
    bim = pd.read_csv(c / "genotypes.bim", sep="\t", header=None, dtype=str)
    tab = has.iloc[rows]
    checked = 0
    for j in np.flatnonzero((bim[0] == "1").to_numpy())[:40]:
        snp = bim[1][j]
        if np.isnan(ours.loc[snp, "P_BOLT_LMM"]):
            continue
        a1 = bed.read(index=np.s_[rows, j], dtype="float64")[:, 0]   # counts of .bim col 5
        if ours.loc[snp, "ALLELE1"] != bim[4][j]:
            a1 = 2 - a1
        ok = ~np.isnan(a1)
        x = np.column_stack([np.ones(ok.sum()), a1[ok], tab["f.21022.0.0"].to_numpy()[ok]])
        yy = tab["f.99999.0.0"].to_numpy()[ok]
        coef, *_ = np.linalg.lstsq(x, yy, rcond=None)
        resid = yy - x @ coef
        se = np.sqrt(resid @ resid / (len(yy) - 3) * np.linalg.inv(x.T @ x)[1, 1])
        np.testing.assert_allclose(ours.loc[snp, "BETA"], coef[1], rtol=1e-4)
        np.testing.assert_allclose(ours.loc[snp, "SE"], se, rtol=1e-4)
        checked += 1
    assert checked >= 30


def test_multiclass_names_the_case_of_a_two_class_trait(small, tmp_path, capsys):
    """--multiclass never on smoking (classes never, ever) makes never the case: the log
    odds ratios are the default run's (ever the case) negated; on a continuous trait
    --multiclass is refused (it was ignored, exit 0)."""
    runs = {}
    for case in (None, "never"):
        out = tmp_path / f"{case}.gz"
        extra = ["--multiclass", case] if case else []
        assert gwas(small, "smoking_status", SMOKING, out, "--chroms", "1", *extra) == 0
        runs[case] = pd.read_csv(out, sep="\t", na_values=["NA"])
    assert "never (case) vs ever (control), logistic" in capsys.readouterr().err
    a, b = runs[None], runs["never"]
    assert (a["SNP"] == b["SNP"]).all() and (a["ALLELE1"] == b["ALLELE1"]).all()
    tested = a["BETA"].notna()
    assert tested.sum() > 100
    # (a few rows are fits plink2 iterates to its own tolerance: 1e-3, not print precision)
    np.testing.assert_allclose(b["BETA"][tested], -a["BETA"][tested], rtol=2e-3, atol=1e-6)
    np.testing.assert_allclose(b["P_BOLT_LMM"][tested], a["P_BOLT_LMM"][tested], rtol=5e-3)
    out = tmp_path / "mpv.gz"
    assert gwas(small, "mean_platelet_volume", MPV, out, "--multiclass", "never") == 1
    assert "multiclass 'never' given for a continuous trait" in capsys.readouterr().err
    assert not out.exists()


def test_glm_table_of_the_other_regression_or_more_people_is_refused(tmp_path):
    from cmix.genotypes.gwas import _merge_glm
    from cmix.errors import CmixError

    head = "#CHROM\tPOS\tID\tREF\tALT\tA1\tA1_FREQ\tTEST\tOBS_CT\tBETA\tSE\tP\n"
    row = "1\t10\trs1\tA\tG\tG\t0.2\tADD\t{n}\t0.1\t0.05\t0.04\n"
    logistic = tmp_path / "chr1.Y.glm.logistic.hybrid"
    logistic.write_text(head.replace("SE", "LOG(OR)_SE") + row.format(n=90))
    with pytest.raises(CmixError, match="plink2 ran logistic regression where cmix asked for linear"):
        _merge_glm([logistic], binary=False, n_people=100)
    assert _merge_glm([logistic], binary=True, n_people=100).attrs["max_obs"] == 90
    linear = tmp_path / "chr1.Y.glm.linear"
    linear.write_text(head + row.format(n=101))
    with pytest.raises(CmixError, match="counted 101 people at a variant where cmix chose 100"):
        _merge_glm([linear], binary=False, n_people=100)


def test_phenotype_of_one_value_is_refused(small, tmp_path, capsys):
    c = small / "c"
    pheno = pd.read_csv(c / "phenotypes.tsv", sep="\t", dtype={"eid": str})
    pheno["f.99999.0.0"] = 1.0
    pheno.to_csv(tmp_path / "pheno.tsv", sep="\t", index=False)
    out = tmp_path / "one.gz"
    assert main(["gwas", "--bfile", str(c / "genotypes"), "--pheno", str(tmp_path / "pheno.tsv"),
                 "--trait", "one", "--trait-config", '{"field": 99999, "kind": "continuous"}',
                 "--out", str(out)]) == 1
    assert "all 500 people tested have the same phenotype" in capsys.readouterr().err
    assert not out.exists()


def test_discovery_people_never_enter_the_store(small, tmp_path):
    c = small / "c"
    keep = tmp_path / "keep.id"
    fam = pd.read_csv(c / "genotypes.fam", sep=r"\s+", header=None, dtype=str)
    fam.iloc[::2, :2].to_csv(keep, sep="\t", header=["#FID", "IID"], index=False)  # drop some
    ids, ss = tmp_path / "disc.id", tmp_path / "ss.gz"
    assert gwas(small, "hair_colour", HAIR, ss, "--keep", str(keep), "--discovery-fraction",
                "0.4", "--discovery-seed", "3", "--ids-out", str(ids),
                "--multiclass", "class_index") == 0
    disc = set(pd.read_csv(ids, sep="\t", dtype=str)["IID"])
    assert disc <= set(fam[1].iloc[::2])
    assert main(["select", "--sumstats", str(ss), "--bfile", str(c / "genotypes"),
                 "--top", "30", "--out", str(tmp_path / "snps.tsv")]) == 0
    store = tmp_path / "hair.zarr"
    assert main(["store", "--bfile", str(c / "genotypes"), "--keep", str(keep),
                 "--snps", str(tmp_path / "snps.tsv"), "--pheno", str(c / "phenotypes.tsv"),
                 "--trait", "hair_colour", "--trait-config", json.dumps(HAIR),
                 "--covariates", json.dumps(COVARIATES), "--sample-qc", str(c / "sample_qc.tsv"),
                 "--discovery", str(ids), "--out", str(store)]) == 0
    root = zarr.open_group(str(store), mode="r")
    stored = np.array([str(i) for i in root["sample_id"][:]])
    split = root["sample_split"][:]
    for rows in (split == 0, split == 1):         # training rows (labeled and not) and test
        assert rows.any() and not disc & set(stored[rows])
    # everyone else with a listed hair colour is in the store
    pheno = pd.read_csv(c / "phenotypes.tsv", sep="\t", dtype={"eid": str}).set_index("eid")
    has = {i for i in fam[1].iloc[::2] if pheno.loc[i, "f.1747.0.0"] in (1, 2, 3, 4, 5)}
    assert set(stored) == has - disc
    # stratified, about 40% of each class
    n_disc = pheno.loc[sorted(disc), "f.1747.0.0"].value_counts()
    n_all = pheno.loc[sorted(has), "f.1747.0.0"].value_counts()
    assert (abs(n_disc / n_all[n_disc.index] - 0.4) < 0.1).all()
    source = root.attrs["provenance"]["snp_source"]
    assert source == {"kind": "discovery", "n_discovery": len(disc), "engine": "plink2 --glm",
                      "ids_sha256": hashlib.sha256("\n".join(sorted(disc)).encode()).hexdigest(),
                      "sumstats_sha256": file_sha256(ss), "discovery_gwas": True}


@pytest.mark.parametrize("case, message", [
    ("fid_zero", "50 of its 50 discovery IDs are not in the sample file"),
    ("one_foreign", "1 of its 51 discovery IDs are not in the sample file"),
    ("empty", "no sample IDs in the discovery list"),
])
def test_a_discovery_list_the_store_cannot_match_is_refused(small, tmp_path, capsys, case,
                                                             message):
    """The GWAS people are left out of the store by their IDs: a list written with
    another FID (plink2's 0) matched none of them, and they entered the store, test split
    included, while its provenance said "discovery"."""
    c = small / "c"
    fam = pd.read_csv(c / "genotypes.fam", sep=r"\s+", header=None, dtype=str)
    disc = fam.iloc[:50, :2].copy()
    if case == "fid_zero":
        disc[0] = "0"
    elif case == "one_foreign":
        disc = pd.concat([disc, pd.DataFrame({0: ["x"], 1: ["not_a_person"]})])
    else:
        disc = disc.iloc[:0]
    ids = tmp_path / "disc.id"
    disc.to_csv(ids, sep="\t", header=["#FID", "IID"], index=False)
    # summary statistics recorded as the GWAS of these very IIDs (as cmix gwas records them)
    from cmix.genotypes.gwas import discovery_record_path, write_discovery_record
    from cmix.readers.plink import read_bim

    ss = tmp_path / "gwas.gz"
    shutil.copy(c / "sumstats/mean_platelet_volume.txt.gz", ss)
    write_discovery_record(discovery_record_path(ss), ss, disc[1].tolist(),
                           read_bim(c / "genotypes.bim"))
    assert main(["select", "--sumstats", str(ss),
                 "--bfile", str(c / "genotypes"), "--top", "20",
                 "--out", str(tmp_path / "snps.tsv")]) == 0
    store = tmp_path / "s.zarr"
    assert main(["store", "--bfile", str(c / "genotypes"), "--snps", str(tmp_path / "snps.tsv"),
                 "--pheno", str(c / "phenotypes.tsv"), "--trait", "mean_platelet_volume",
                 "--trait-config", json.dumps(MPV), "--discovery", str(ids),
                 "--out", str(store)]) == 1
    assert message in capsys.readouterr().err
    assert not store.exists()


def test_continuous_discovery_strata_are_deciles_of_those_drawn_among():
    """The draw is among people with every covariate, so its deciles must be theirs:
    with the covariates complete for the lower half of the values only, every tenth of
    that half gives the same number of people (deciles of everyone put two of its
    tenths in one stratum, drawn unevenly)."""
    from cmix.genotypes.gwas import discovery_split

    n = 200
    iids = np.array([f"s{i}" for i in range(n)])
    pheno = pd.DataFrame({"f.30100.0.0": np.arange(n, dtype=float)}, index=iids)
    complete = np.arange(n) < 100
    chosen = discovery_split(pheno, "mpv", {"field": 30100, "kind": "continuous"}, iids,
                             0.3, seed=4, complete=complete)
    assert complete[chosen].all()
    per_tenth = np.bincount(chosen // 10, minlength=10)
    assert len(set(per_tenth.tolist())) == 1 and per_tenth[0] == 3, per_tenth


def test_discovery_draw_is_seeded(small, tmp_path):
    sets = []
    for k, seed in enumerate(["1", "1", "2"]):
        ids = tmp_path / f"d{k}.id"
        assert gwas(small, "mean_platelet_volume", MPV, tmp_path / f"s{k}.gz",
                    "--discovery-fraction", "0.5", "--discovery-seed", seed,
                    "--ids-out", str(ids)) == 0
        sets.append(ids.read_text())
    assert sets[0] == sets[1] != sets[2]
    assert (gzip.open(tmp_path / "s0.gz").read() == gzip.open(tmp_path / "s1.gz").read())
    assert not (tmp_path / "s0.gz").read_bytes()[3] & 0x08     # no (temporary) file name


def test_external_source_is_recorded_with_its_overlap(small, tmp_path):
    c = small / "c"
    ss = c / "sumstats/smoking_status.txt.gz"
    assert main(["select", "--sumstats", str(ss), "--bfile", str(c / "genotypes"),
                 "--top", "20", "--out", str(tmp_path / "snps.tsv")]) == 0
    for extra, overlap in ([], "unknown"), (["--overlap", "yes"], "yes"):
        store = tmp_path / f"s_{overlap}.zarr"
        assert main(["store", "--bfile", str(c / "genotypes"), "--snps",
                     str(tmp_path / "snps.tsv"), "--pheno", str(c / "phenotypes.tsv"),
                     "--trait", "smoking_status", "--trait-config", json.dumps(SMOKING),
                     "--sumstats", str(ss), *extra, "--out", str(store)]) == 0
        assert zarr.open_group(str(store), mode="r").attrs["provenance"] == {
            "snp_source": {"kind": "external", "file": "smoking_status.txt.gz",
                           "overlap": overlap, "sumstats_sha256": file_sha256(ss),
                           "discovery_gwas": False}}


@pytest.mark.parametrize("extra, message", [
    ([], "5 classes (blonde, red, light_brown, dark_brown, black) have no single GWAS"),
    (["--multiclass", "auburn"], "multiclass 'auburn' is neither 'class_index' nor one of"),
    (["--multiclass", "red", "--plink2", "/nonexistent/plink2"], "/nonexistent/plink2: not found"),
])
def test_refusals_name_the_problem(small, tmp_path, capsys, extra, message):
    out = tmp_path / "ss.gz"
    assert gwas(small, "hair_colour", HAIR, out, "--discovery-fraction", "0.5",
                "--ids-out", str(tmp_path / "d.id"), *extra) == 1
    assert message in capsys.readouterr().err
    assert not out.exists() and not list(tmp_path.iterdir())


def test_a_discovery_draw_without_ids_out_is_refused(small, tmp_path, capsys):
    """--discovery-fraction without --ids-out would test people written nowhere: the
    store could not keep them out."""
    out = tmp_path / "ss.gz"
    assert gwas(small, "mean_platelet_volume", MPV, out, "--discovery-fraction", "0.5") == 1
    err = [line for line in capsys.readouterr().err.splitlines() if "error" in line]
    assert len(err) == 1 and "give --ids-out FILE" in err[0], err
    assert not list(tmp_path.iterdir())


# ------------------------------------------------------------------------ the workflow
def test_workflow_plans_a_gwas_per_discovery_trait(ukb_standin, tmp_path):
    """config/ukb.yaml takes the discovery route for every trait; an empty list takes the
    external summary statistics; a wrong multiclass choice fails before any job."""
    import copy

    import yaml
    from test_workflow import REPO, plan, snakemake

    _, cfg = ukb_standin
    cfg = copy.deepcopy(cfg)          # the stand-in with config/ukb.yaml's discovery route
    cfg["discovery"] = yaml.safe_load((REPO / "config/ukb.yaml").read_text())["discovery"]
    cfg["budgets"] = [50]       # half of the small stand-in cohort goes to the GWAS
    cfg_path = tmp_path / "ukb.yaml"
    cfg_path.write_text(yaml.safe_dump(cfg))
    args = ("-n", "-p", "--cores", "1", "--configfile", str(cfg_path), "--directory",
            str(tmp_path))
    res = snakemake(*args)
    assert res.returncode == 0, res.stdout + res.stderr
    rules = [j["rule"] for j in plan(res.stdout)]
    assert rules.count("gwas") == len(cfg["traits"]) == rules.count("select_snps")
    # the stand-in lists external files for these traits too: said, not silently dropped
    note = [line for line in res.stderr.splitlines() if line.startswith("cmix: note: ")]
    assert len(note) == 1 and "inputs.sumstats files are not used" in note[0], res.stderr
    assert "--discovery results/ukbtiny/discovery/hair_colour.discovery.id" in res.stdout
    res = snakemake(*args, "--config", "discovery={'traits': []}")
    assert res.returncode == 0, res.stdout + res.stderr
    assert "gwas" not in [j["rule"] for j in plan(res.stdout)]
    assert "--overlap unknown" in res.stdout
    res = snakemake(*args, "--config", "discovery={'multiclass': {'hair_colour': 'auburn'}}")
    assert res.returncode != 0
    assert ("discovery.multiclass.hair_colour: 'auburn' is neither class_index nor one of "
            "its classes") in res.stdout + res.stderr


def test_demo_runs_either_way_to_the_stores(tmp_path):
    """The demo with one trait on the discovery route and one on the simulator's summary
    statistics: real jobs up to the stores, which record their SNP source and hold none
    of the discovery people."""
    import yaml
    from test_workflow import REPO, snakemake

    cfg = yaml.safe_load((REPO / "config/config.yaml").read_text())
    cfg.update(run_name="disc", simulate={"n_samples": 500, "n_variants": 800, "seed": 4},
               selection={"top": 40}, traits=["mean_platelet_volume", "hair_colour"],
               budgets=[40])
    cfg["discovery"]["traits"] = ["hair_colour"]
    path = tmp_path / "disc.yaml"
    path.write_text(yaml.safe_dump(cfg))
    out = tmp_path / "results/disc"
    stores = [f"results/disc/traits/{t}.zarr" for t in cfg["traits"]]
    res = snakemake("--cores", "2", "--configfile", str(path), "--directory", str(tmp_path),
                    *stores)
    assert res.returncode == 0, res.stdout + res.stderr[-3000:]
    disc = set(pd.read_csv(out / "discovery/hair_colour.discovery.id", sep="\t", dtype=str)["IID"])
    hair = zarr.open_group(str(out / "traits/hair_colour.zarr"), mode="r")
    assert hair.attrs["provenance"]["snp_source"]["kind"] == "discovery"
    assert hair.attrs["provenance"]["snp_source"]["n_discovery"] == len(disc) > 50
    assert not disc & {str(i) for i in hair["sample_id"][:]}
    mpv = zarr.open_group(str(out / "traits/mean_platelet_volume.zarr"), mode="r")
    mpv_source = dict(mpv.attrs["provenance"]["snp_source"])
    assert len(mpv_source.pop("sumstats_sha256")) == 64
    assert mpv_source == {"kind": "external", "file": "mean_platelet_volume.txt.gz",
                          "overlap": "no", "discovery_gwas": False}
    assert hair.attrs["provenance"]["snp_source"]["discovery_gwas"] is True
    assert disc & {str(i) for i in mpv["sample_id"][:]}     # only hair colour's route


def test_predict_refuses_the_discovery_people_unless_allowed(small, tmp_path, capsys):
    """The discovery GWAS's people chose the run's SNPs: predicting them is optimistic.
    The store records their IDs; predict refuses them, or with --allow-discovery warns
    with their count (never their IDs)."""
    import subprocess

    c = small / "c"
    ids, ss = tmp_path / "disc.id", tmp_path / "ss.gz"
    assert gwas(small, "mean_platelet_volume", MPV, ss, "--discovery-fraction", "0.5",
                "--ids-out", str(ids)) == 0
    assert main(["select", "--sumstats", str(ss), "--bfile", str(c / "genotypes"),
                 "--top", "30", "--out", str(tmp_path / "snps.tsv")]) == 0
    store = tmp_path / "mpv.zarr"
    assert main(["store", "--bfile", str(c / "genotypes"), "--snps", str(tmp_path / "snps.tsv"),
                 "--pheno", str(c / "phenotypes.tsv"), "--trait", "mean_platelet_volume",
                 "--trait-config", json.dumps(MPV), "--discovery", str(ids),
                 "--out", str(store)]) == 0
    disc = sorted(pd.read_csv(ids, sep="\t", dtype=str)["IID"])
    root = zarr.open_group(str(store), mode="r")
    assert [str(v) for v in root["discovery_id"][:]] == disc
    run = tmp_path / "run"
    assert main(["train", "--store", str(store), "--budget", "40", "--seed", "1", "--method",
                 "logreg", "--device", "cpu", "--out", str(run)]) == 0
    subprocess.run(["plink2", "--bfile", str(c / "genotypes"), "--keep", str(ids),
                    "--make-bed", "--out", str(tmp_path / "disc")], check=True,
                   capture_output=True)
    capsys.readouterr()
    out = tmp_path / "p.tsv"
    args = ["predict", "--run", str(run), "--bfile", str(tmp_path / "disc"), "--out", str(out)]
    assert main(args) == 1
    err = [line for line in capsys.readouterr().err.splitlines() if "error" in line]
    assert len(err) == 1 and f"{len(disc)} people are in the discovery set" in err[0], err
    assert "--allow-discovery" in err[0] and not out.exists()
    assert main([*args, "--allow-discovery"]) == 0
    log = capsys.readouterr().err
    assert f"warning: {len(disc)} people are in the discovery set" in log
    assert not any(i in log for i in disc)
    assert len(pd.read_csv(out, sep="\t")) == len(disc)


def test_store_records_which_summary_statistics_chose_its_snps(small, tmp_path, capsys):
    """--discovery with SNPs selected from external summary statistics recorded
    "discovery": now the selection records the file it read (sha256) and whether a
    discovery GWAS wrote it, and the store refuses a route that contradicts it."""
    c = small / "c"
    ids, ss = tmp_path / "disc.id", tmp_path / "ss.gz"
    assert gwas(small, "smoking_status", SMOKING, ss, "--discovery-fraction", "0.5",
                "--ids-out", str(ids)) == 0
    external = c / "sumstats/smoking_status.txt.gz"
    for name, sumstats in (("ext", external), ("disc", ss)):
        assert main(["select", "--sumstats", str(sumstats), "--bfile", str(c / "genotypes"),
                     "--top", "20", "--out", str(tmp_path / f"{name}.snps.tsv")]) == 0
    record = json.loads((tmp_path / "ext.snps.tsv.source.json").read_text())
    assert record == {"sumstats": "smoking_status.txt.gz", "sha256": file_sha256(external),
                      "discovery_gwas": None}
    record = json.loads((tmp_path / "disc.snps.tsv.source.json").read_text())
    assert record["sha256"] == file_sha256(ss) and record["discovery_gwas"]["n_discovery"] > 50
    capsys.readouterr()

    def store(snps, *route):
        out = tmp_path / "s.zarr"
        rc = main(["store", "--bfile", str(c / "genotypes"), "--snps", str(snps), "--pheno",
                   str(c / "phenotypes.tsv"), "--trait", "smoking_status", "--trait-config",
                   json.dumps(SMOKING), *route, "--force", "--out", str(out)])
        return rc, out

    rc, out = store(tmp_path / "ext.snps.tsv", "--discovery", str(ids))
    err = [line for line in capsys.readouterr().err.splitlines() if "error" in line]
    assert rc == 1 and len(err) == 1 and not out.exists(), err
    assert "the SNPs were selected from smoking_status.txt.gz" in err[0]
    assert "give --sumstats smoking_status.txt.gz instead" in err[0]
    rc, out = store(tmp_path / "disc.snps.tsv", "--sumstats", str(external))
    err = [line for line in capsys.readouterr().err.splitlines() if "error" in line]
    assert rc == 1 and "not from this file" in err[0] and not out.exists(), err
    rc, out = store(tmp_path / "disc.snps.tsv", "--discovery", str(ids))
    assert rc == 0
    source = zarr.open_group(str(out), mode="r").attrs["provenance"]["snp_source"]
    assert source["kind"] == "discovery" and source["discovery_gwas"] is True
    assert source["sumstats_sha256"] == file_sha256(ss)


def _ambiguous(bim: pd.DataFrame) -> set:
    """IDs of the .bim's strand-ambiguous SNPs (A/T, C/G), told from the .bim alone."""
    pair = bim[4] + bim[5]
    return set(bim.loc[pair.isin(["AT", "TA", "CG", "GC"]), 1])


def test_own_gwas_keeps_strand_ambiguous_snps_and_external_sumstats_do_not(small, tmp_path,
                                                                          capsys):
    """Summary statistics of cmix's own GWAS of these genotypes carry the .bim's alleles,
    so A/T and C/G SNPs are kept; the same file without its record (external summary
    statistics), or a record of a GWAS on other genotypes, drops them as before."""
    c = small / "c"
    bim = pd.read_csv(c / "genotypes.bim", sep=r"\s+", header=None, dtype=str)
    ambiguous = _ambiguous(bim)
    assert len(ambiguous) > 20
    ss, ids = tmp_path / "own.gz", tmp_path / "disc.id"
    assert gwas(small, "mean_platelet_volume", MPV, ss, "--discovery-fraction", "0.5",
                "--ids-out", str(ids)) == 0

    def selected(sumstats, name):
        out = tmp_path / f"{name}.snps.tsv"
        assert main(["select", "--sumstats", str(sumstats), "--bfile", str(c / "genotypes"),
                     "--top", "100000", "--out", str(out)]) == 0
        return set(pd.read_csv(out, sep="\t", dtype=str)["variant_id"])

    own = selected(ss, "own")
    assert "cmix's own GWAS of these genotypes" in capsys.readouterr().err
    table = pd.read_csv(ss, sep="\t", dtype=str)
    tested = set(table.loc[pd.to_numeric(table["P_BOLT_LMM"], errors="coerce").notna(), "SNP"])
    assert len(ambiguous & tested) > 20 and ambiguous & tested <= own
    external = tmp_path / "external.gz"
    shutil.copy(ss, external)                     # no record beside it
    assert not (selected(external, "external") & ambiguous)
    # a record of a GWAS on other genotypes (one allele changed in its .bim): dropped too
    other = tmp_path / "other"
    for ext in ("bed", "fam"):
        shutil.copy(c / f"genotypes.{ext}", other.with_suffix(f".{ext}"))
    changed = bim.copy()
    changed.iloc[0, 4], changed.iloc[0, 5] = changed.iloc[0, 5], changed.iloc[0, 4]
    changed.to_csv(other.with_suffix(".bim"), sep="\t", header=False, index=False)
    ss_other = tmp_path / "other.gz"
    assert main(["gwas", "--bfile", str(other), "--pheno", str(c / "phenotypes.tsv"),
                 "--trait", "mean_platelet_volume", "--trait-config", json.dumps(MPV),
                 "--covariates", json.dumps(COVARIATES), "--sample-qc", str(c / "sample_qc.tsv"),
                 "--discovery-fraction", "0.5", "--ids-out", str(tmp_path / "o.id"),
                 "--out", str(ss_other)]) == 0
    assert not (selected(ss_other, "other") & ambiguous)


@pytest.mark.parametrize("route", ["neither", "as --sumstats"])
def test_a_discovery_gwas_stored_without_its_people_left_out_is_refused(small, tmp_path,
                                                                        capsys, route):
    """SNPs selected from cmix's own discovery GWAS, stored without --discovery (or with
    that GWAS given as --sumstats): every test person could be a GWAS person (196 of 196;
    prs AUROC 0.905 against 0.491). Now refused, naming the fix, and no store."""
    c = small / "c"
    ids, ss, snps = tmp_path / "disc.id", tmp_path / "ss.gz", tmp_path / "snps.tsv"
    assert gwas(small, "hair_colour", HAIR, ss, "--discovery-fraction", "0.4", "--ids-out",
                str(ids), "--multiclass", "class_index") == 0
    assert main(["select", "--sumstats", str(ss), "--bfile", str(c / "genotypes"), "--top",
                 "30", "--out", str(snps)]) == 0
    capsys.readouterr()
    store = tmp_path / "hair.zarr"
    extra = ["--sumstats", str(ss)] if route == "as --sumstats" else []
    rc = main(["store", "--bfile", str(c / "genotypes"), "--snps", str(snps), "--pheno",
               str(c / "phenotypes.tsv"), "--trait", "hair_colour", "--trait-config",
               json.dumps(HAIR), *extra, "--out", str(store)])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 1 and len(err) == 1 and not store.exists(), err
    assert "cmix's discovery GWAS of" in err[0] and "give --discovery" in err[0], err[0]


def test_the_discovery_draw_and_the_test_split_are_independent_streams():
    """The discovery draw and the store's test split were the same seeded, stratified
    permutation: with both seeds 0 the test split fell inside the discovery set. Now the
    share of test people among the discovery set is the discovery fraction (binomial)."""
    from cmix.genotypes.phenotypes import test_split

    n = 4000
    label = np.repeat([0, 1, 2, 3], n // 4)
    iids = np.array([f"s{i}" for i in range(n)])
    four = {"field": 1747, "kind": "categorical",
            "classes": {"a": [1], "b": [2], "c": [3], "d": [4]}}
    pheno = pd.DataFrame({"f.1747.0.0": label + 1}, index=iids)
    disc = discovery_split(pheno, "hair_colour", four, iids, 0.4, seed=0)
    rest = np.setdiff1d(np.arange(n), disc)
    test = rest[test_split(label[rest], 0.2, seed=0) == 1]
    in_disc = np.isin(np.flatnonzero(test_split(label, 0.2, seed=0) == 1), disc).mean()
    assert len(test) > 0 and not np.isin(test, disc).any()
    # a whole-cohort test split drawn with the same seed: 40% of it in the discovery set
    # (binomial sd 1.7 points), not 100%
    assert abs(in_disc - 0.4) < 0.06, in_disc
