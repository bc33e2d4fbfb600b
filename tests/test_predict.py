"""cmix predict: finished runs applied to a PLINK file set of new people."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
import torch

from cmix.learn import harness
from cmix.genotypes import plink
from cmix.cli import main
from cmix.genotypes.store import open_store

MPV = {"field": 30100, "kind": "continuous", "binarise": "median"}
SPEC = {"fields": [21022, 31], "pcs": 3, "pcs_from": "sample_qc"}
FAST = {"hidden": 32, "d_proj": 16, "epochs": 2, "warmup_epochs": 1, "lp_every": 1,
        "batch_size": 128, "labeled_batch_size": 64, "pred_epochs": 6, "pred_patience": 3,
        "pred_hidden": 16, "vime_k": 2}
METHODS = ["covariates", "prs", "logreg", "mlp", "manifold_mixup", "ae", "vime", "cmix"]


@pytest.fixture(scope="module")
def trained(cohort, tmp_path_factory):
    d = tmp_path_factory.mktemp("predict")
    snps = d / "mpv.snps.tsv"
    assert main(["select", "--sumstats", str(cohort / "sumstats" / "mean_platelet_volume.txt.gz"),
                 "--bfile", str(cohort / "genotypes"), "--top", "120", "--out", str(snps)]) == 0
    store = d / "mpv.zarr"
    assert main(["store", "--bfile", str(cohort / "genotypes"), "--snps", str(snps),
                 "--pheno", str(cohort / "phenotypes.tsv"), "--trait", "mpv",
                 "--trait-config", json.dumps(MPV), "--covariates", json.dumps(SPEC),
                 "--sample-qc", str(cohort / "sample_qc.tsv"), "--out", str(store)]) == 0
    runs = {m: d / "runs" / m for m in METHODS}
    for m, out in runs.items():
        harness.train_run(store, 300, 1, out, method=m, config=FAST, device="cpu")
    harness.train_run(store, 300, 2, d / "runs" / "logreg_seed2", method="logreg", config=FAST,
                      device="cpu")
    return d, store, runs


def subset_bfile(cohort, iids, out, swap_every=0, drop_variants=None, recode=None):
    """The cohort's genotypes of ``iids`` (store order) as a new .bed/.bim/.fam, written
    independently of the store: optionally with A1/A2 swapped (dosage 2 - d) on every
    ``swap_every``-th variant, variants dropped, or one variant's allele recoded."""
    bf = plink.open_bfile(cohort / "genotypes")
    rows = pd.Index(bf.fam["iid"].astype(str)).get_indexer(iids)
    g = plink.read_genotypes(bf, None, rows)                      # (variants, people)
    bim = bf.bim.copy()
    if swap_every:
        swap = np.arange(len(bim)) % swap_every == 0
        bim.loc[swap, ["a1", "a2"]] = bim.loc[swap, ["a2", "a1"]].to_numpy()
        g[swap] = np.where(g[swap] >= 0, 2 - g[swap], g[swap])
    keep = np.ones(len(bim), bool)
    if drop_variants is not None:
        keep[bim.index.get_indexer(bim.index[bim["variant_id"].isin(drop_variants)])] = False
    if recode is not None:
        i = int(np.flatnonzero(bim["variant_id"] == recode)[0])
        bim.loc[i, "a1"] = "T" if bim.loc[i, "a1"] != "T" else "G"
        bim.loc[i, "a2"] = "C" if bim.loc[i, "a2"] != "C" else "A"
    plink.write_bfile(out, g[keep], bf.fam.iloc[rows].reset_index(drop=True),
                      bim[keep].reset_index(drop=True))
    return out


def store_test_ids(store):
    root = open_store(store)
    split = np.asarray(root["sample_split"][:])
    return np.array([str(v) for v in root["sample_id"][:]])[split == 1]


@pytest.mark.parametrize("method", METHODS)
def test_predict_reproduces_the_runs_test_probabilities(cohort, trained, tmp_path, method):
    """On the store's own test people, from a file set written independently (a third
    of the variants with A1/A2 swapped), predict gives the probabilities that training
    evaluated, to 1e-6."""
    d, store, runs = trained
    ids = store_test_ids(store)
    bfile = subset_bfile(cohort, ids, tmp_path / "test_people", swap_every=3)
    out = tmp_path / "prob.tsv"
    assert main(["predict", "--run", str(runs[method]), "--bfile", str(bfile),
                 "--pheno", str(cohort / "phenotypes.tsv"), "--sample-qc",
                 str(cohort / "sample_qc.tsv"), "--out", str(out)]) == 0
    got = pd.read_csv(out, sep="\t", dtype={"IID": str})
    assert list(got["IID"]) == list(ids)
    want = torch.load(runs[method] / "checkpoint.pt", weights_only=False)["parts"]["predict"]
    np.testing.assert_allclose(got[["prob_low", "prob_high"]].to_numpy(), want["test_prob"],
                               atol=1e-6)


def test_ensemble_of_seeds_averages(cohort, trained, tmp_path):
    d, store, runs = trained
    ids = store_test_ids(store)
    bfile = subset_bfile(cohort, ids, tmp_path / "t")
    out = tmp_path / "ens.tsv"
    a, b = runs["logreg"], d / "runs" / "logreg_seed2"
    assert main(["predict", "--run", str(a), str(b), "--bfile", str(bfile), "--pheno",
                 str(cohort / "phenotypes.tsv"), "--sample-qc", str(cohort / "sample_qc.tsv"),
                 "--out", str(out)]) == 0
    probs = [torch.load(r / "checkpoint.pt", weights_only=False)["parts"]["predict"]["test_prob"]
             for r in (a, b)]
    got = pd.read_csv(out, sep="\t")[["prob_low", "prob_high"]].to_numpy()
    np.testing.assert_allclose(got, (probs[0] + probs[1]) / 2, atol=1e-6)


@pytest.mark.parametrize("case, message", [
    ("overlap", "people were training rows of the run"),
    ("too_few", "shares 24 of the run's 120 variants"),
    ("recoded", "another allele coding or strand"),
    ("no_covariates", "the run was trained with covariates"),
])
def test_predict_refusals(cohort, trained, tmp_path, capsys, case, message):
    d, store, runs = trained
    root = open_store(store)
    ids = store_test_ids(store)
    variants = [str(v) for v in root["variant_id"][:]]
    extra = ["--pheno", str(cohort / "phenotypes.tsv"), "--sample-qc",
             str(cohort / "sample_qc.tsv")]
    if case == "overlap":
        train_ids = np.array([str(v) for v in root["sample_id"][:]])[
            np.asarray(root["sample_split"][:]) == 0][:20]
        bfile = subset_bfile(cohort, np.r_[ids[:30], train_ids], tmp_path / "b")
    elif case == "too_few":
        bfile = subset_bfile(cohort, ids, tmp_path / "b", drop_variants=variants[:96])
    elif case == "recoded":
        bfile = subset_bfile(cohort, ids, tmp_path / "b", recode=variants[5])
    else:
        bfile = subset_bfile(cohort, ids, tmp_path / "b")
        extra = []
    out = tmp_path / "p.tsv"
    assert main(["predict", "--run", str(runs["logreg"]), "--bfile", str(bfile), *extra,
                 "--out", str(out)]) == 1
    err = [line for line in capsys.readouterr().err.splitlines() if "error" in line][0]
    assert message in err
    assert not out.exists()
    if case == "overlap":       # allowed on request
        assert main(["predict", "--run", str(runs["logreg"]), "--bfile", str(bfile), *extra,
                     "--allow-overlap", "--out", str(out)]) == 0
        assert len(pd.read_csv(out, sep="\t")) == 50
