"""Covariates in the store (age, sex, PCs, array), the missing-value rule, their use by
every method, and the covariates-only baseline."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
import torch

from cmix.learn import harness
from cmix.cli import main
from cmix.store.read import open_store

MPV = {"field": 30100, "kind": "continuous", "binarise": "median"}
SPEC = {"fields": [21022, 31], "pcs": 4, "pcs_from": "sample_qc"}
FAST = {"hidden": 32, "d_proj": 16, "epochs": 2, "warmup_epochs": 1, "lp_every": 1,
        "batch_size": 128, "labeled_batch_size": 64, "pred_epochs": 20, "pred_patience": 5,
        "pred_hidden": 16, "vime_k": 2}


@pytest.fixture(scope="module")
def selected(cohort, tmp_path_factory):
    d = tmp_path_factory.mktemp("cov")
    snps = d / "mpv.snps.tsv"
    assert main(["select", "--sumstats", str(cohort / "sumstats" / "mean_platelet_volume.txt.gz"),
                 "--bfile", str(cohort / "genotypes"), "--top", "200", "--out", str(snps)]) == 0
    return d, snps


def store_args(cohort, snps, out, spec=SPEC, pheno=None, sqc=None):
    return ["store", "--bfile", str(cohort / "genotypes"), "--snps", str(snps),
            "--pheno", str(pheno or cohort / "phenotypes.tsv"), "--trait", "mpv",
            "--trait-config", json.dumps(MPV), "--covariates", json.dumps(spec),
            "--sample-qc", str(sqc or cohort / "sample_qc.tsv"), "--out", str(out)]


@pytest.fixture(scope="module")
def cov_store(cohort, selected):
    d, snps = selected
    out = d / "mpv.zarr"
    assert main(store_args(cohort, snps, out)) == 0
    return out


def test_store_holds_the_covariates_of_the_source_tables(cohort, cov_store):
    """Each stored covariate equals the phenotype / sample-QC table's value for the
    sample with that ID (read here with pandas, independently)."""
    root = open_store(cov_store)
    names = list(root["covariate_name"][:])
    assert names == ["f.21022.0.0", "f.31.0.0", "PC1", "PC2", "PC3", "PC4"]
    cov = root["sample_covariate"][:]
    ids = root["sample_id"][:]
    pheno = pd.read_csv(cohort / "phenotypes.tsv", sep="\t", dtype={"eid": str}).set_index("eid")
    sqc = pd.read_csv(cohort / "sample_qc.tsv", sep="\t", dtype={"eid": str}).set_index("eid")
    np.testing.assert_array_equal(cov[:, 0], pheno.loc[ids, "f.21022.0.0"].to_numpy(float))
    np.testing.assert_array_equal(cov[:, 1], pheno.loc[ids, "f.31.0.0"].to_numpy(float))
    np.testing.assert_allclose(cov[:, 2:], sqc.loc[ids, ["PC1", "PC2", "PC3", "PC4"]]
                               .to_numpy(float))
    assert root.attrs["covariates"]["names"] == names


def test_samples_missing_a_covariate_are_left_out(cohort, selected, tmp_path):
    d, snps = selected
    pheno = pd.read_csv(cohort / "phenotypes.tsv", sep="\t", dtype=str, keep_default_na=False)
    pheno.loc[:49, "f.21022.0.0"] = ""
    pheno.loc[50:59, "f.21022.0.0"] = "NA"
    path = tmp_path / "pheno.tsv"
    pheno.to_csv(path, sep="\t", index=False)
    out = tmp_path / "m.zarr"
    assert main(store_args(cohort, snps, out, pheno=path)) == 0
    root = open_store(out)
    gone = set(pheno.loc[:59, "eid"])
    assert not gone & set(root["sample_id"][:])
    assert not np.isnan(root["sample_covariate"][:]).any()
    full = open_store(selected[0] / "mpv.zarr")
    kept_before = set(full["sample_id"][:])
    assert root.attrs["counts"]["left_out_missing_covariate"] == len(
        gone & set(pd.read_csv(cohort / "genotypes.fam", sep=r"\s+", header=None, dtype=str)[1]))
    assert set(root["sample_id"][:]) == kept_before - gone


@pytest.mark.parametrize("case, message", [
    ("non_numeric_age", "line 8, column f.21022.0.0: 'sixty' is not a number"),
    ("all_missing", "covariates: f.21022.0.0 is missing for every sample"),
    ("too_many_pcs", "50 PCs asked for, the table has 10"),
    ("unknown_key", "unknown key(s) ['pc']"),
    ("no_sample_qc", "need --sample-qc"),
])
def test_bad_covariates(cohort, selected, tmp_path, capsys, case, message):
    d, snps = selected
    pheno = pd.read_csv(cohort / "phenotypes.tsv", sep="\t", dtype=str, keep_default_na=False)
    spec = dict(SPEC)
    if case == "non_numeric_age":
        pheno.loc[6, "f.21022.0.0"] = "sixty"
    elif case == "all_missing":
        pheno["f.21022.0.0"] = ""
    elif case == "too_many_pcs":
        spec["pcs"] = 50
    elif case == "unknown_key":
        spec["pc"] = 3
    path = tmp_path / "pheno.tsv"
    pheno.to_csv(path, sep="\t", index=False)
    out = tmp_path / "bad.zarr"
    args = store_args(cohort, snps, out, spec=spec, pheno=path)
    if case == "no_sample_qc":
        args = args[:args.index("--sample-qc")] + args[args.index("--sample-qc") + 2:]
    assert main(args) == 1
    err = [line for line in capsys.readouterr().err.splitlines() if "error" in line][0]
    assert message in err
    assert not out.exists()


@pytest.fixture(scope="module")
def sex_linked_store(cohort, selected):
    """A trait that the covariates carry: sex with 15% of labels flipped (so the best
    possible accuracy from the covariates is about 0.85)."""
    d, snps = selected
    pheno = pd.read_csv(cohort / "phenotypes.tsv", sep="\t", dtype=str, keep_default_na=False)
    flip = np.random.default_rng(0).random(len(pheno)) < 0.15
    sex = pheno["f.31.0.0"].astype(int).to_numpy()
    pheno["sex_linked"] = np.where(flip, 1 - sex, sex)
    path = d / "pheno_sex_linked.tsv"
    pheno.to_csv(path, sep="\t", index=False)
    out = d / "sex_linked.zarr"
    args = store_args(cohort, snps, out, pheno=path)
    args[args.index("--trait-config") + 1] = json.dumps(
        {"column": "sex_linked", "kind": "categorical", "classes": {"f": [0], "m": [1]}})
    assert main(args) == 0
    return out


def test_covariates_baseline_and_every_method_use_them(sex_linked_store, tmp_path):
    """On a trait the covariates carry, the covariates-only baseline reaches what sex
    alone gives (a direct logistic regression on the stored sex column), every method
    reads the covariates (its result changes when the switch is off), and none with
    covariates falls far below the baseline."""
    from sklearn.linear_model import LogisticRegression

    cov = harness.train_run(sex_linked_store, 600, 1, tmp_path / "cov", method="covariates",
                            device="cpu")
    root = open_store(sex_linked_store)
    from cmix.learn.data import make_splits

    splits = make_splits(root, 600, 1)
    sex = root["sample_covariate"][:, 1:2]
    direct = LogisticRegression().fit(sex[splits.labeled], splits.label[splits.labeled])
    direct_acc = float(np.mean(direct.predict(sex[splits.test]) == splits.label[splits.test]))
    assert direct_acc > 0.8
    assert cov["test"]["accuracy"] >= direct_acc - 0.02, (cov["test"], direct_acc)
    assert cov["covariates"] == ["f.21022.0.0", "f.31.0.0", "PC1", "PC2", "PC3", "PC4"]
    for method in ("logreg", "prs", "mlp", "ae", "vime", "manifold_mixup", "cmix"):
        on = harness.train_run(sex_linked_store, 600, 1, tmp_path / f"{method}_on",
                               method=method, config=FAST, device="cpu")
        off = harness.train_run(sex_linked_store, 600, 1, tmp_path / f"{method}_off",
                                method=method, config={**FAST, "covariates": False},
                                device="cpu")
        assert len(on["covariates"]) == 6 and off["covariates"] == []
        assert on["test"]["accuracy"] > off["test"]["accuracy"] + 0.15, (method, on, off)
        assert on["test"]["accuracy"] >= cov["test"]["accuracy"] - 0.05, (method, on["test"])


def test_covariates_method_needs_covariates(tmp_path, capsys):
    from store_helpers import simulate_labels, write_test_store

    d, label = simulate_labels(200, 10)
    store = write_test_store(tmp_path / "plain.zarr", d, label)
    code = main(["train", "--store", str(store), "--budget", "40", "--seed", "1",
                 "--method", "covariates", "--out", str(tmp_path / "run")])
    assert code == 1
    assert "the covariates method needs a store with covariates" in capsys.readouterr().err
    assert not (tmp_path / "run" / "metrics.json").exists()


# ------------------------------------------------------------------ genotyping array and batch
def _headerless_from_tidy(cohort, path):
    """The tidy sample QC rewritten as ukb_sqc_v2.txt: no header, .fam order, 68 columns,
    array in column 3, batch in 4, PC1..PC10 in 26..35 (the rest filler)."""
    fam = pd.read_csv(cohort / "genotypes.fam", sep=r"\s+", header=None, dtype=str)
    sqc = pd.read_csv(cohort / "sample_qc.tsv", sep="\t", dtype=str).set_index("eid").loc[fam[1]]
    table = pd.DataFrame({c: ["0"] * len(fam) for c in range(1, 69)})
    table[3] = sqc["genotyping.array"].to_numpy()
    table[4] = sqc["Batch"].to_numpy()
    for k in range(10):
        table[26 + k] = sqc[f"PC{k + 1}"].to_numpy()
    table.to_csv(path, sep=" ", header=False, index=False)
    return path


@pytest.mark.parametrize("layout", ["tidy", "headerless"])
def test_array_and_batch_covariates(cohort, selected, tmp_path, layout):
    """The array is UKBL = 1; the batch becomes one 0/1 column per batch but the most
    common, checked against pandas' own dummy coding of the source table; the store
    records the levels, reference first."""
    d, snps = selected
    sqc_path = (cohort / "sample_qc.tsv" if layout == "tidy"
                else _headerless_from_tidy(cohort, tmp_path / "ukb_sqc_v2.txt"))
    out = tmp_path / "b.zarr"
    spec = {"fields": [31], "pcs": 2, "array": True, "batch": True}
    assert main(store_args(cohort, snps, out, spec=spec, sqc=sqc_path)) == 0
    root = open_store(out)
    names = [str(n) for n in root["covariate_name"][:]]
    cov = root["sample_covariate"][:]
    ids = [str(i) for i in root["sample_id"][:]]
    sqc = pd.read_csv(cohort / "sample_qc.tsv", sep="\t", dtype=str).set_index("eid").loc[ids]
    assert names[:4] == ["f.31.0.0", "PC1", "PC2", "genotyping_array_UKBL"]
    np.testing.assert_array_equal(cov[:, 3], (sqc["genotyping.array"] == "UKBL").to_numpy(float))
    reference = sqc["Batch"].value_counts().sort_index(kind="stable").idxmax()
    dummies = pd.get_dummies(sqc["Batch"], dtype=float).drop(columns=reference)
    assert names[4:] == [f"batch_{b}" for b in dummies.columns]
    np.testing.assert_array_equal(cov[:, 4:], dummies.to_numpy())
    assert len(dummies.columns) >= 3
    levels = root.attrs["covariates"]["spec"]["batch_levels"]
    assert levels == [reference, *dummies.columns]


def test_unknown_batch_is_refused_in_predict(cohort, selected, tmp_path, capsys):
    """A run trained with batch covariates codes new people's batches with the training
    levels; a batch training never saw is an error naming it."""
    from cmix.readers import plink

    d, snps = selected
    store = tmp_path / "b.zarr"
    assert main(store_args(cohort, snps, store, spec={"fields": [31], "batch": True})) == 0
    run = tmp_path / "run"
    harness.train_run(store, 300, 1, run, method="covariates", config=FAST, device="cpu")
    root = open_store(store)
    test_ids = np.array([str(v) for v in root["sample_id"][:]])[
        np.asarray(root["sample_split"][:]) == 1]
    bf = plink.open_bfile(cohort / "genotypes")
    rows = pd.Index(bf.fam["iid"].astype(str)).get_indexer(test_ids)
    plink.write_bfile(tmp_path / "new", plink.read_genotypes(bf, None, rows),
                      bf.fam.iloc[rows].reset_index(drop=True), bf.bim)
    out = tmp_path / "p.tsv"
    args = ["predict", "--run", str(run), "--bfile", str(tmp_path / "new"), "--pheno",
            str(cohort / "phenotypes.tsv"), "--out", str(out)]
    assert main(args + ["--sample-qc", str(cohort / "sample_qc.tsv")]) == 0
    want = torch.load(run / "checkpoint.pt", weights_only=False)["parts"]["predict"]["test_prob"]
    np.testing.assert_allclose(pd.read_csv(out, sep="\t").iloc[:, 2:].to_numpy(), want, atol=1e-6)
    sqc = pd.read_csv(cohort / "sample_qc.tsv", sep="\t", dtype=str)
    sqc.loc[sqc["eid"] == test_ids[3], "Batch"] = "Batch_b999"
    sqc.to_csv(tmp_path / "sqc.tsv", sep="\t", index=False)
    out.unlink()
    assert main(args + ["--sample-qc", str(tmp_path / "sqc.tsv")]) == 1
    err = [line for line in capsys.readouterr().err.splitlines() if "error" in line][0]
    assert "batch 'Batch_b999'" in err and "not among the training samples' batches" in err
    assert not out.exists()


@pytest.mark.parametrize("case, message", [
    ("no_batch_column", "no Batch column (covariates: batch)"),
    ("headerless_too_narrow", "3 columns, but the genotyping batch is column 4"),
    ("headerless_short_row", "line 5: expected 68 columns, found 67"),
    ("headerless_pc41", "41 PCs asked for, the table has 40"),
])
def test_batch_source_refusals(cohort, selected, tmp_path, capsys, case, message):
    d, snps = selected
    if case == "no_batch_column":
        sqc = pd.read_csv(cohort / "sample_qc.tsv", sep="\t", dtype=str).drop(columns="Batch")
        path = tmp_path / "sqc.tsv"
        sqc.to_csv(path, sep="\t", index=False)
    elif case == "headerless_too_narrow":
        full = _headerless_from_tidy(cohort, tmp_path / "full.txt")
        path = tmp_path / "ukb_sqc_v2.txt"
        path.write_text("".join(" ".join(line.split()[:3]) + "\n"
                                for line in full.read_text().splitlines()))
    elif case == "headerless_pc41":     # column 66 is a QC flag, not PC41
        path = _headerless_from_tidy(cohort, tmp_path / "ukb_sqc_v2.txt")
    else:       # line 5 lacks its PC1: read as it was, PC2 would be stored as PC1
        full = _headerless_from_tidy(cohort, tmp_path / "full.txt")
        lines = full.read_text().splitlines(True)
        fields = lines[4].split()
        lines[4] = " ".join(fields[:25] + fields[26:]) + "\n"
        path = tmp_path / "ukb_sqc_v2.txt"
        path.write_text("".join(lines))
    out = tmp_path / "b.zarr"
    spec = {"fields": [31], "batch": True, **({"pcs": 41} if case == "headerless_pc41" else {})}
    assert main(store_args(cohort, snps, out, spec=spec, sqc=path)) == 1
    err = [line for line in capsys.readouterr().err.splitlines() if "error" in line][0]
    assert message in err
    assert not out.exists()



@pytest.mark.parametrize("fields, message", [
    ([21022, 31, 21022], "covariates: fields lists 21022 twice"),
    ([{"column": "f.31.0.0"}, {"column": "f.31.0.0"}],
     "covariates: fields lists {'column': 'f.31.0.0'} twice"),
    ([31, {"column": "f.31.0.0"}], "reads column 'f.31.0.0'"),
])
def test_a_covariate_field_given_twice_is_refused(cohort, selected, tmp_path, capsys, fields,
                                                  message):
    """A covariate column stored twice makes the discovery GWAS's covariates collinear
    (plink2 stops); it is refused when the spec is read, naming the field."""
    d, snps = selected
    out = tmp_path / "dup.zarr"
    assert main(store_args(cohort, snps, out, spec={**SPEC, "fields": fields})) == 1
    err = [line for line in capsys.readouterr().err.splitlines() if "error" in line]
    assert len(err) == 1 and message in err[0], err
    assert not out.exists()


def test_gwas_refuses_a_covariate_field_given_twice(cohort, tmp_path, capsys):
    out = tmp_path / "g" / "mpv.gwas.gz"
    assert main(["gwas", "--bfile", str(cohort / "genotypes"), "--pheno",
                 str(cohort / "phenotypes.tsv"), "--trait", "mpv", "--trait-config",
                 json.dumps(MPV), "--covariates", json.dumps({"fields": [21022, 21022]}),
                 "--out", str(out)]) == 1
    err = [line for line in capsys.readouterr().err.splitlines() if "error" in line]
    assert len(err) == 1 and "covariates: fields lists 21022 twice" in err[0], err
    assert not out.parent.exists() or not list(out.parent.iterdir())
