"""cmix predict: finished runs applied to a PLINK file set of new people."""

from __future__ import annotations

import json
import shutil
import subprocess

import numpy as np
import pandas as pd
import pytest
import torch

from cmix.learn import harness
from cmix.readers import plink
from cmix.cli import main
from cmix.store.read import load_rows, open_store

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


# ------------------------------------------------------------ PCs of new people from a saved PCA
@pytest.fixture(scope="module")
def pca_trained(cohort, trained, tmp_path_factory):
    """cmix pca fitted on 70% of the cohort (everyone else projected), a store whose PCs
    come from its .eigenvec, and a logreg run on it."""
    d = tmp_path_factory.mktemp("predict_pca")
    _, store, _ = trained
    bf = plink.open_bfile(cohort / "genotypes")
    rng = np.random.default_rng(4)
    fit = np.sort(rng.choice(bf.n_samples, int(0.7 * bf.n_samples), replace=False))
    plink.write_sample_ids(d / "fit.id", bf.fam, fit)
    plink.write_sample_ids(d / "all.id", bf.fam, np.arange(bf.n_samples))
    assert main(["pca", "--bfile", str(cohort / "genotypes"), "--keep", str(d / "fit.id"),
                 "--project", str(d / "all.id"), "--indep-pairwise", "200", "20", "0.2",
                 "--pcs", "4", "--threads", "2", "--out", str(d / "pcs")]) == 0
    spec = {"fields": [21022, 31], "pcs": 4, "pcs_from": "eigenvec"}
    pca_store = d / "mpv_pcs.zarr"
    assert main(["store", "--bfile", str(cohort / "genotypes"), "--snps",
                 str(store.parent / "mpv.snps.tsv"), "--pheno", str(cohort / "phenotypes.tsv"),
                 "--trait", "mpv", "--trait-config", json.dumps(MPV), "--covariates",
                 json.dumps(spec), "--eigenvec", str(d / "pcs.eigenvec"),
                 "--out", str(pca_store)]) == 0
    run = d / "runs" / "logreg"
    harness.train_run(pca_store, 300, 1, run, method="logreg", config=FAST, device="cpu")
    fitted = set(bf.fam["iid"].astype(str).iloc[fit])
    held = np.array([i for i in store_test_ids(pca_store) if i not in fitted])
    return d, pca_store, run, held


def test_new_people_projected_as_the_pca_projected_them(cohort, pca_pcs_file):
    """PCs of people outside the fit, projected from a separate file set (a third of the
    alleles swapped) with the saved weights, equal the PCs cmix pca gave them, and
    plink2 --score's on the same file set."""
    from cmix.genotypes.pca.projection import project_new_people, read_pca_model

    d, bfile, held = pca_pcs_file
    model = read_pca_model(d / "pcs")
    scores, counts = project_new_people(plink.open_bfile(bfile), model)
    assert counts["n_shared"] == counts["n_variants"] and counts["n_flipped"] > 0
    want = pd.read_csv(d / "pcs.eigenvec", sep="\t", dtype={"IID": str}).set_index("IID")
    want = want.loc[held, [f"PC{k}" for k in range(1, 5)]].to_numpy()
    assert np.abs(want).max() > 0.02
    np.testing.assert_allclose(scores, want, rtol=0, atol=1e-6)
    if shutil.which("plink2"):
        subprocess.run(["plink2", "--bfile", str(bfile), "--read-freq", str(d / "pcs.acount"),
                        "--score", str(d / "pcs.eigenvec.allele"), "2", "5", "header-read",
                        "no-mean-imputation", "variance-standardize", "cols=+scoresums",
                        "--score-col-nums", "6-9", "--out", str(d / "p2score")],
                       check=True, capture_output=True)
        score = pd.read_csv(d / "p2score.sscore", sep="\t")
        sums = score[[f"PC{k}_SUM" for k in range(1, 5)]].to_numpy()
        np.testing.assert_allclose(scores, sums / (counts["n_variants"]
                                                   * np.sqrt(model["eigenvalues"])),
                                   rtol=0, atol=1e-6)


@pytest.fixture(scope="module")
def pca_pcs_file(cohort, pca_trained, tmp_path_factory):
    d, _, _, held = pca_trained
    assert len(held) >= 50
    out = tmp_path_factory.mktemp("new_people") / "held"
    return d, subset_bfile(cohort, held, out, swap_every=3), held


def test_predict_projects_pcs_with_the_saved_pca(cohort, pca_trained, pca_pcs_file, tmp_path):
    """predict --pca (PCs projected from the new file set) gives the probabilities of
    predict --eigenvec (the PCs cmix pca wrote for the same people)."""
    d, _, run, held = pca_trained
    _, bfile, _ = pca_pcs_file
    outs = {}
    for flag, value in (("--pca", d / "pcs"), ("--eigenvec", d / "pcs.eigenvec")):
        outs[flag] = tmp_path / f"{flag[2:]}.tsv"
        assert main(["predict", "--run", str(run), "--bfile", str(bfile), "--pheno",
                     str(cohort / "phenotypes.tsv"), flag, str(value),
                     "--out", str(outs[flag])]) == 0
    a, b = (pd.read_csv(outs[f], sep="\t", dtype={"IID": str}) for f in ("--pca", "--eigenvec"))
    assert list(a["IID"]) == list(held)
    np.testing.assert_allclose(a[["prob_low", "prob_high"]], b[["prob_low", "prob_high"]],
                               rtol=0, atol=1e-6)


@pytest.mark.parametrize("case, message", [
    ("missing", "cmix pca output (eigenval)"),
    ("too_few", "the projected PCs would shrink towards 0"),
    ("run_without_eigenvec_pcs", "the run's PCs do not come from a .eigenvec"),
    ("recoded", "the PCA (ALT/REF) has"),
    ("weight_not_a_number", "pcs.eigenvec.allele, line 4, column PC2: 'x' is not a finite number"),
    ("no_obs_ct", "pcs.acount: no OBS_CT column"),
    ("empty_acount", "pcs.acount: not a tab-separated table"),
    ("negative_eigenvalue", "pcs.eigenval: expected 4 positive eigenvalues"),
])
def test_predict_pca_refusals(cohort, trained, pca_trained, tmp_path, capsys, case, message):
    d, pca_store, run, held = pca_trained
    prefix = d / "pcs"
    if case == "run_without_eigenvec_pcs":          # trained on the sample QC's PCs
        run = trained[2]["logreg"]
        held = store_test_ids(trained[1])
        bfile = subset_bfile(cohort, held, tmp_path / "b")
    elif case == "missing":
        for s in ("eigenvec.allele", "acount"):
            (tmp_path / f"pcs.{s}").write_bytes((d / f"pcs.{s}").read_bytes())
        prefix = tmp_path / "pcs"
        bfile = subset_bfile(cohort, held, tmp_path / "b")
    elif case in ("weight_not_a_number", "no_obs_ct", "empty_acount", "negative_eigenvalue"):
        files = {s: (d / f"pcs.{s}").read_text() for s in ("eigenvec.allele", "acount",
                                                             "eigenval")}
        if case == "weight_not_a_number":
            lines = files["eigenvec.allele"].splitlines()
            fields = lines[3].split("\t")
            fields[6] = "x"                                  # PC2 of the third data line
            lines[3] = "\t".join(fields)
            files["eigenvec.allele"] = "\n".join(lines) + "\n"
        elif case == "no_obs_ct":
            files["acount"] = files["acount"].replace("OBS_CT", "N", 1)
        elif case == "empty_acount":
            files["acount"] = ""
        else:
            files["eigenval"] = files["eigenval"].replace(
                files["eigenval"].splitlines()[1], "-0.5", 1)
        for s, text in files.items():
            (tmp_path / f"pcs.{s}").write_text(text)
        prefix = tmp_path / "pcs"
        bfile = subset_bfile(cohort, held, tmp_path / "b")
    else:
        ids = pd.read_csv(d / "pcs.eigenvec.allele", sep="\t")["ID"].unique()
        in_store = {str(v) for v in open_store(pca_store)["variant_id"][:]}
        ids = [i for i in ids if i not in in_store]          # the run's own SNPs stay
        if case == "recoded":                # a PCA variant, not the run's, whose recoded
            bim = plink.open_bfile(cohort / "genotypes").bim.set_index("variant_id")
            new = {i: {"T" if bim.at[i, "a1"] != "T" else "G",     # alleles are not a swap
                       "C" if bim.at[i, "a2"] != "C" else "A"} for i in ids}
            ids = [i for i in ids if new[i] != {bim.at[i, "a1"], bim.at[i, "a2"]}]
            bfile = subset_bfile(cohort, held, tmp_path / "b", recode=ids[0])
        else:
            bfile = subset_bfile(cohort, held, tmp_path / "b",
                                 drop_variants=ids[: len(ids) // 2])
    out = tmp_path / "p.tsv"
    assert main(["predict", "--run", str(run), "--bfile", str(bfile), "--pheno",
                 str(cohort / "phenotypes.tsv"), "--pca", str(prefix), "--out", str(out)]) == 1
    err = [line for line in capsys.readouterr().err.splitlines() if "error" in line][0]
    assert message in err
    assert not out.exists()


# ------------------------------------------------------------ a run's files checked before use
def _copy_run(src, dst):
    shutil.copytree(src, dst)
    return dst


def _flip_a_bit_in_the_weights(ckpt):
    """Flip one bit inside the largest stored member (the fitted weights), as a disk or a
    copy might: the zip stays well-formed, only the member's bytes change."""
    import zipfile

    with zipfile.ZipFile(ckpt) as zf:
        info = max(zf.infolist(), key=lambda i: i.compress_size)
    data = bytearray(ckpt.read_bytes())
    name_len, extra_len = np.frombuffer(bytes(data[info.header_offset + 26:
                                                   info.header_offset + 30]), "<u2")
    at = info.header_offset + 30 + int(name_len) + int(extra_len) + info.compress_size // 2
    data[at] ^= 0x10
    ckpt.write_bytes(bytes(data))


@pytest.mark.parametrize("case, message", [
    ("bit_flip", "checkpoint.pt: corrupt checkpoint (member"),
    ("truncated", "checkpoint.pt: truncated or corrupt checkpoint"),
    ("bad_metrics", "metrics.json: not valid JSON"),
    ("other_seed", "checkpoint.pt: not the checkpoint of the run metrics.json describes"),
    ("other_method", "not the same method (mlp vs cmix)"),
])
def test_predict_refuses_a_damaged_or_mismatched_run(cohort, trained, tmp_path, capsys, case,
                                                     message):
    """A checkpoint with a flipped bit or cut short, a metrics.json that is not JSON, a
    checkpoint of another seed beside a run's metrics.json, and runs of two methods
    averaged together: each one message naming the file, exit 1, no output."""
    d, store, runs = trained
    bfile = subset_bfile(cohort, store_test_ids(store), tmp_path / "b")
    run_args = [str(_copy_run(runs["cmix"], tmp_path / "run"))]
    run = tmp_path / "run"
    if case == "bit_flip":
        _flip_a_bit_in_the_weights(run / "checkpoint.pt")
    elif case == "truncated":
        data = (run / "checkpoint.pt").read_bytes()
        (run / "checkpoint.pt").write_bytes(data[: len(data) // 2])
    elif case == "bad_metrics":
        (run / "metrics.json").write_text('{"trait": "mpv", ')
    elif case == "other_seed":
        shutil.copy(d / "runs" / "logreg_seed2" / "checkpoint.pt", run / "checkpoint.pt")
        shutil.copy(runs["logreg"] / "metrics.json", run / "metrics.json")
    else:
        run_args = [str(runs["cmix"]), str(runs["mlp"])]
    out = tmp_path / "p.tsv"
    assert main(["predict", "--run", *run_args, "--bfile", str(bfile), "--pheno",
                 str(cohort / "phenotypes.tsv"), "--sample-qc", str(cohort / "sample_qc.tsv"),
                 "--out", str(out)]) == 1
    err = [line for line in capsys.readouterr().err.splitlines() if "error" in line][0]
    assert message in err, err
    assert "Traceback" not in err
    assert not out.exists() and not list(tmp_path.glob(".p.tsv*"))


def test_one_duplicated_position_does_not_switch_off_position_matching(cohort, trained,
                                                                       tmp_path):
    """New people's .bim with other variant IDs (so matching is by chrom:pos) and one
    extra variant at an existing position: the other variants still match, and the
    probabilities equal those from the file with the run's own IDs."""
    d, store, runs = trained
    ids = store_test_ids(store)
    same = subset_bfile(cohort, ids, tmp_path / "same")
    renamed = tmp_path / "renamed"
    bf = plink.open_bfile(same)
    bim = bf.bim.copy()
    bim["variant_id"] = "x" + bim["variant_id"]
    g = plink.read_genotypes(bf)
    in_store = {str(v) for v in open_store(store)["variant_id"][:]}
    other = int(np.flatnonzero(~bf.bim["variant_id"].isin(in_store))[0])   # not the run's
    dup = bim.iloc[[other]].assign(variant_id="dup", a1="T", a2="G")
    order = np.r_[np.arange(len(bim)), other]
    plink.write_bfile(renamed, g[order], bf.fam, pd.concat([bim, dup], ignore_index=True))
    outs = {}
    for name, b in (("same", same), ("renamed", renamed)):
        outs[name] = tmp_path / f"{name}.tsv"
        assert main(["predict", "--run", str(runs["logreg"]), "--bfile", str(b), "--pheno",
                     str(cohort / "phenotypes.tsv"), "--sample-qc",
                     str(cohort / "sample_qc.tsv"), "--out", str(outs[name])]) == 0
    a, b = (pd.read_csv(outs[k], sep="\t") for k in ("same", "renamed"))
    np.testing.assert_allclose(a[["prob_low", "prob_high"]], b[["prob_low", "prob_high"]])


@pytest.mark.parametrize("chrom", ["chr{c}", "0{c}"])
def test_chromosomes_spelled_otherwise_still_match_by_position(cohort, trained, tmp_path,
                                                               chrom):
    """New people's .bim with other variant IDs and its chromosomes written chr2 or 02:
    matched by position with the chromosome as its code, every variant is found and the
    probabilities equal the run's saved test probabilities (they lost a variant per
    chromosome name before, each given the training mean)."""
    d, store, runs = trained
    ids = store_test_ids(store)
    same = subset_bfile(cohort, ids, tmp_path / "same")
    bf = plink.open_bfile(same)
    bim = bf.bim.assign(variant_id="x" + bf.bim["variant_id"],
                        chrom=[chrom.format(c=c) for c in bf.bim["chrom"]])
    plink.write_bfile(tmp_path / "chr", plink.read_genotypes(bf), bf.fam, bim)
    out = tmp_path / "p.tsv"
    assert main(["predict", "--run", str(runs["logreg"]), "--bfile", str(tmp_path / "chr"),
                 "--pheno", str(cohort / "phenotypes.tsv"), "--sample-qc",
                 str(cohort / "sample_qc.tsv"), "--min-shared", "1", "--out", str(out)]) == 0
    want = torch.load(runs["logreg"] / "checkpoint.pt", weights_only=False)["parts"]["predict"]
    got = pd.read_csv(out, sep="\t")[["prob_low", "prob_high"]].to_numpy()
    np.testing.assert_allclose(got, want["test_prob"], atol=1e-6)


@pytest.mark.parametrize("case, message", [
    ("same_seed_twice", "seed 1 again"),
    ("other_budget", "not the same budget (250 vs 300)"),
    ("other_config", "not the same trainer config"),
])
def test_an_ensemble_of_other_runs_is_refused(cohort, trained, tmp_path, capsys, case,
                                              message):
    """An ensemble averages distinct seeds of one run: the same seed twice, or runs of
    another budget or config (one with covariates, one without: a shape error before),
    are refused naming what differs."""
    d, store, runs = trained
    a = runs["logreg"]
    if case == "same_seed_twice":
        b = a
    elif case == "other_budget":
        b = tmp_path / "b250"
        harness.train_run(store, 250, 2, b, method="logreg", config=FAST, device="cpu")
    else:
        b = tmp_path / "nocov"
        harness.train_run(store, 300, 2, b, method="logreg",
                          config={**FAST, "covariates": False}, device="cpu")
    bfile = subset_bfile(cohort, store_test_ids(store), tmp_path / "t")
    out = tmp_path / "p.tsv"
    assert main(["predict", "--run", str(a), str(b), "--bfile", str(bfile), "--pheno",
                 str(cohort / "phenotypes.tsv"), "--sample-qc", str(cohort / "sample_qc.tsv"),
                 "--out", str(out)]) == 1
    assert message in capsys.readouterr().err and not out.exists()


@pytest.mark.parametrize("case", ["other_fit", "other_eigenval"])
def test_predict_refuses_another_pca(cohort, pca_trained, pca_pcs_file, tmp_path, capsys,
                                     case):
    """--pca naming another cmix pca fit (other fitted people), or the run's own fit with
    another fit's .eigenval: refused, naming the prefix; the run recorded its PCA."""
    d, _, run, held = pca_trained
    _, bfile, _ = pca_pcs_file
    bf = plink.open_bfile(cohort / "genotypes")
    fit = np.sort(np.random.default_rng(9).choice(bf.n_samples, int(0.6 * bf.n_samples),
                                                  replace=False))
    plink.write_sample_ids(tmp_path / "fit.id", bf.fam, fit)
    assert main(["pca", "--bfile", str(cohort / "genotypes"), "--keep", str(tmp_path / "fit.id"),
                 "--indep-pairwise", "200", "20", "0.2", "--pcs", "4", "--threads", "2",
                 "--out", str(tmp_path / "other")]) == 0
    prefix = tmp_path / "other"
    if case == "other_eigenval":
        for s in ("eigenvec", "eigenvec.allele", "acount"):
            shutil.copy(d / f"pcs.{s}", tmp_path / f"mixed.{s}")
        shutil.copy(tmp_path / "other.eigenval", tmp_path / "mixed.eigenval")
        prefix = tmp_path / "mixed"
    out = tmp_path / "p.tsv"
    assert main(["predict", "--run", str(run), "--bfile", str(bfile), "--pheno",
                 str(cohort / "phenotypes.tsv"), "--pca", str(prefix), "--out", str(out)]) == 1
    err = [line for line in capsys.readouterr().err.splitlines() if "error" in line][0]
    assert f"{prefix}: not the PCA the run's PCs came from" in err, err
    assert not out.exists()


# ---------------------------------------------------------------- other genotype formats
def _plink2(*args):
    r = subprocess.run(["plink2", "--threads", "1", *map(str, args)], capture_output=True,
                       text=True)
    assert r.returncode == 0, r.stdout + r.stderr


@pytest.fixture(scope="module")
def new_people_formats(cohort, trained, tmp_path_factory):
    """The store's test people as a .bed (a third of the alleles swapped), and plink2's
    .pgen and 8-bit BGEN (with its .sample and a .bgi) of that .bed."""
    d = tmp_path_factory.mktemp("formats")
    bfile = subset_bfile(cohort, store_test_ids(trained[1]), d / "people", swap_every=3)
    _plink2("--bfile", bfile, "--make-pgen", "--out", d / "people_pgen")
    _plink2("--bfile", bfile, "--export", "bgen-1.2", "bits=8", "--out", d / "people_bgen")
    assert main(["bgen-index", str(d / "people_bgen.bgen")]) == 0
    return {"bed": ["--bfile", str(bfile)],
            "pgen": ["--pfile", str(d / "people_pgen")],
            "bgen": ["--bgen", str(d / "people_bgen.bgen"),
                     "--sample", str(d / "people_bgen.sample")]}


@pytest.mark.skipif(not shutil.which("plink2"), reason="plink2 not installed")
@pytest.mark.parametrize("method", ["logreg", "cmix"])
def test_predict_from_pgen_and_bgen_equals_predict_from_the_bed(cohort, trained,
                                                                 new_people_formats, tmp_path,
                                                                 method):
    """plink2's .pgen and 8-bit BGEN of a .bed hold its hard calls exactly, so predict
    gives the same people the same probabilities from each as from the .bed."""
    d, store, runs = trained
    extra = ["--pheno", str(cohort / "phenotypes.tsv"), "--sample-qc",
             str(cohort / "sample_qc.tsv")]
    got = {}
    for kind, flags in new_people_formats.items():
        out = tmp_path / f"{kind}.tsv"
        assert main(["predict", "--run", str(runs[method]), *flags, *extra,
                     "--out", str(out)]) == 0
        got[kind] = pd.read_csv(out, sep="\t", dtype={"IID": str})
    want = torch.load(runs[method] / "checkpoint.pt", weights_only=False)["parts"]["predict"]
    np.testing.assert_allclose(got["bed"][["prob_low", "prob_high"]].to_numpy(),
                               want["test_prob"], atol=1e-6)
    for kind in ("pgen", "bgen"):
        assert list(got[kind]["IID"]) == list(got["bed"]["IID"])
        np.testing.assert_allclose(got[kind][["prob_low", "prob_high"]].to_numpy(),
                                   got["bed"][["prob_low", "prob_high"]].to_numpy(),
                                   rtol=0, atol=1e-6)


@pytest.mark.skipif(not shutil.which("plink2"), reason="plink2 not installed")
def test_predict_chroms_reads_what_plink2_chr_keeps(cohort, trained, new_people_formats,
                                                      tmp_path):
    """--chroms as plink2 --chr: predict from the whole .bed with --chroms gives the
    probabilities predict gives from the .bed plink2 --chr wrote, and not those of the
    whole .bed (the other chromosomes' variants count as absent)."""
    d, store, runs = trained
    bfile = new_people_formats["bed"][1]
    _plink2("--bfile", bfile, "--chr", "1-2", "--make-bed", "--out", tmp_path / "chr12")
    extra = ["--run", str(runs["logreg"]), "--pheno", str(cohort / "phenotypes.tsv"),
             "--sample-qc", str(cohort / "sample_qc.tsv"), "--min-shared", "0"]
    got = {}
    for name, flags in (("chroms", ["--bfile", bfile, "--chroms", "chr1,02"]),
                        ("plink2", ["--bfile", str(tmp_path / "chr12")]),
                        ("whole", ["--bfile", bfile])):
        out = tmp_path / f"{name}.tsv"
        assert main(["predict", *flags, *extra, "--out", str(out)]) == 0
        got[name] = pd.read_csv(out, sep="\t", dtype={"IID": str})
    assert list(got["chroms"]["IID"]) == list(got["plink2"]["IID"])
    cols = ["prob_low", "prob_high"]
    np.testing.assert_allclose(got["chroms"][cols].to_numpy(), got["plink2"][cols].to_numpy(),
                               rtol=0, atol=1e-6)
    assert np.abs(got["chroms"][cols].to_numpy() - got["whole"][cols].to_numpy()).max() > 1e-3


@pytest.mark.skipif(not shutil.which("plink2"), reason="plink2 not installed")
def test_predict_from_fractional_bgen_feeds_the_dosages_a_store_holds(cohort, trained, tmp_path):
    """From a BGEN of fractional dosages, predict gives the model what `cmix store` writes
    from that BGEN (expected copies on its 1/125 grid): the logreg run's probabilities,
    computed here from that store's rows with the fitted model, equal predict's."""
    d, store, runs = trained
    bf = plink.open_bfile(subset_bfile(cohort, store_test_ids(store), tmp_path / "people"))
    from test_ukb_inputs import write_dosage_vcf

    write_dosage_vcf(tmp_path / "frac.vcf", bf, seed=3)
    _plink2("--vcf", tmp_path / "frac.vcf", "dosage=DS", "--make-pgen", "--out", tmp_path / "frac")
    _plink2("--pfile", tmp_path / "frac", "--export", "bgen-1.2", "bits=8", "--out",
            tmp_path / "frac")
    assert main(["bgen-index", str(tmp_path / "frac.bgen")]) == 0
    genotypes = ["--bgen", str(tmp_path / "frac.bgen"), "--sample", str(tmp_path / "frac.sample")]
    covariates = ["--pheno", str(cohort / "phenotypes.tsv"), "--sample-qc",
                  str(cohort / "sample_qc.tsv")]
    out = tmp_path / "prob.tsv"
    assert main(["predict", "--run", str(runs["logreg"]), *genotypes, *covariates,
                 "--out", str(out)]) == 0
    frac_store = tmp_path / "frac.zarr"
    assert main(["store", *genotypes, *covariates, "--snps", str(d / "mpv.snps.tsv"),
                 "--trait", "mpv", "--trait-config", json.dumps(MPV), "--covariates",
                 json.dumps(SPEC), "--out", str(frac_store)]) == 0
    root = open_store(frac_store)
    x = load_rows(root, np.arange(root["call_dosage"].shape[0]))
    assert x.dtype == np.float32 and ((x > 0) & (x % 1 != 0)).mean() > 0.3
    info = torch.load(runs["logreg"] / "checkpoint.pt", weights_only=False)["parts"]
    fitted, rec = info["model"], info["predict"]
    model = fitted["model"]
    z = (x.astype(np.float64) - np.asarray(fitted["mean"])) / np.asarray(fitted["sd"])
    z[x < 0] = 0.0
    cov = (root["sample_covariate"][:] - np.asarray(rec["cov_mu"])) / np.asarray(rec["cov_sd"])
    want = np.zeros((len(x), 2))
    want[:, model.classes_] = model.predict_proba(np.hstack([z, cov]))
    got = pd.read_csv(out, sep="\t", dtype={"IID": str}).set_index("IID")
    ids = [str(v) for v in root["sample_id"][:]]
    np.testing.assert_allclose(got.loc[ids, ["prob_low", "prob_high"]].to_numpy(), want,
                               rtol=0, atol=1e-6)
