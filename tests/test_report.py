"""cmix report: tables against direct computations, incomplete grids, plots, HTML, bad inputs."""

import base64
import html
import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from cmix.cli import main
from cmix.errors import CmixError
from cmix.report.write import write_report

SEEDS = [123, 127, 131]
BUDGETS = [100, 300, 1000]
METHODS = ["prs", "logreg", "mlp", "cmix"]


def fake_metrics(trait, method, budget, seed, n_classes=2, test_hash="a" * 64):
    """A metrics.json in the trainer's layout with a deterministic accuracy."""
    rng = np.random.default_rng([budget, seed, len(method), n_classes])
    acc = 0.5 + 0.05 * np.log10(budget) + 0.015 * (METHODS.index(method) if method in METHODS else -1) + rng.normal(0, 0.01)
    auc_key = "auroc" if n_classes == 2 else "macro_auroc"
    n_val = round(0.2 * budget)
    return {"trait": trait, "method": method, "budget": budget, "seed": seed,
            "class_names": [f"class{c}" for c in range(n_classes)],
            "n_labeled": budget, "n_train_labeled": budget - n_val, "n_validation": n_val,
            "n_unlabeled": 7000 - budget, "n_test": 3000, "n_snps": 500,
            "test": {"accuracy": acc, "balanced_accuracy": acc - 0.02, auc_key: acc + 0.05},
            "validation": {"best_epoch": 3},
            "pseudo_labels": ({"accuracy": acc - 0.1, "coverage": 1.0, "used": seed == 1}
                              if method.startswith("cmix") else None),
            "test_split_sha256": test_hash, "wall_seconds": {"predictor": 1.5, "evaluate": 0.5},
            "device": "cpu", "versions": {"cmix": "0.1"}, "config": {"hidden": 64},
            "store": f"{trait}.zarr"}


def write_grid(root, cells, **kw):
    for trait, method, budget, seed, n_classes in cells:
        d = root / trait / method / f"budget{budget}" / f"seed{seed}"
        d.mkdir(parents=True)
        (d / "metrics.json").write_text(json.dumps(fake_metrics(trait, method, budget, seed,
                                                                n_classes, **kw)))


def full_cells():
    return [(t, m, b, s, k) for t, k in (("binary_trait", 2), ("three_class", 3))
            for m in METHODS for b in BUDGETS for s in SEEDS]


def test_report_tables_match_direct_computation(tmp_path):
    write_grid(tmp_path / "runs", full_cells())
    info = write_report(tmp_path / "runs", tmp_path / "rep")
    assert info["n_runs"] == 2 * 4 * 3 * 3 and info["n_missing"] == 0
    res = pd.read_csv(tmp_path / "rep" / "results.tsv", sep="\t")
    assert len(res) == 72
    assert not res.duplicated(["trait", "method", "budget", "seed"]).any()
    summ = pd.read_csv(tmp_path / "rep" / "summary.tsv", sep="\t")
    assert len(summ) == 2 * 4 * 3 and summ["complete"].all() and (summ["n"] == 3).all()
    for trait, k in (("binary_trait", 2), ("three_class", 3)):
        for method in METHODS:
            for budget in BUDGETS:
                acc = [fake_metrics(trait, method, budget, s, k)["test"]["accuracy"]
                       for s in SEEDS]
                row = summ[(summ.trait == trait) & (summ.method == method)
                           & (summ.budget == budget)].iloc[0]
                assert row["accuracy_mean"] == pytest.approx(np.mean(acc), rel=1e-5)
                assert row["accuracy_sd"] == pytest.approx(np.std(acc, ddof=1), rel=1e-4)
                assert row["auroc_mean"] == pytest.approx(np.mean(acc) + 0.05, rel=1e-5)
    # pseudo-label accuracy only for methods that have pseudo-labels
    assert summ.loc[summ.method == "prs", "pseudo_label_accuracy_mean"].isna().all()
    assert summ.loc[summ.method == "cmix", "pseudo_label_accuracy_mean"].notna().all()
    files = {p.name for p in (tmp_path / "rep").iterdir()}
    assert {"binary_trait.png", "three_class.png", "accuracy_by_trait.png",
            "pseudo_label_accuracy.png", "report.html", "missing.tsv"} <= files
    page = (tmp_path / "rep" / "report.html").read_text()
    # self-contained: every figure embedded as a base64 PNG, no external references
    imgs = re.findall(r'src="data:image/png;base64,([^"]+)"', page)
    assert len(imgs) == 4 and all(base64.b64decode(i)[:8] == b"\x89PNG\r\n\x1a\n" for i in imgs)
    assert "src=\"http" not in page and "<link" not in page
    assert "SNPs: 500" in page and "complete" in page
    assert "class0" in page            # class names are there, sample IDs never were


def test_incomplete_grid_is_reported_not_hidden(tmp_path):
    cells = [c for c in full_cells()
             if not (c[0] == "binary_trait" and c[1] == "cmix" and c[2] == 1000 and c[3] != 123)]
    write_grid(tmp_path / "runs", cells)
    info = write_report(tmp_path / "runs", tmp_path / "rep")
    assert info["n_missing"] == 2
    missing = pd.read_csv(tmp_path / "rep" / "missing.tsv", sep="\t")
    assert sorted(missing["seed"]) == [127, 131]
    assert set(missing["method"]) == {"cmix"} and set(missing["budget"]) == {1000}
    summ = pd.read_csv(tmp_path / "rep" / "summary.tsv", sep="\t")
    row = summ[(summ.trait == "binary_trait") & (summ.method == "cmix") & (summ.budget == 1000)]
    assert row["n"].item() == 1 and not row["complete"].item() and row["accuracy_sd"].isna().item()
    page = (tmp_path / "rep" / "report.html").read_text()
    assert "INCOMPLETE: 2 runs missing" in page


def test_method_with_no_run_for_a_trait_is_missing(tmp_path, capsys):
    """A trait x method with no metrics.json anywhere: missing in the grid the workflow
    asked for, and in the grid inferred from every trait, method, budget and seed seen."""
    cells = [c for c in full_cells() if not (c[0] == "three_class" and c[1] == "logreg")]
    write_grid(tmp_path / "runs", cells)
    n_absent = len(BUDGETS) * len(SEEDS)
    info = write_report(tmp_path / "runs", tmp_path / "inferred")
    assert info["n_missing"] == n_absent
    missing = pd.read_csv(tmp_path / "inferred" / "missing.tsv", sep="\t")
    assert set(zip(missing.trait, missing.method)) == {("three_class", "logreg")}
    summ = pd.read_csv(tmp_path / "inferred" / "summary.tsv", sep="\t")
    absent = summ[(summ.trait == "three_class") & (summ.method == "logreg")]
    assert len(absent) == len(BUDGETS) and (absent["n"] == 0).all() and not absent.complete.any()
    # the explicit grid: also a trait with no run at all, and a run outside it left out
    write_grid(tmp_path / "runs", [("binary_trait", "prs", BUDGETS[0], 999, 2)])
    args = ["report", "--runs", str(tmp_path / "runs"), "--out", str(tmp_path / "asked"),
            "--traits", "binary_trait", "three_class", "never_run", "--methods", *METHODS,
            "--budgets", *map(str, BUDGETS), "--seeds", *map(str, SEEDS)]
    assert main(args) == 0
    missing = pd.read_csv(tmp_path / "asked" / "missing.tsv", sep="\t")
    assert len(missing) == n_absent + len(METHODS) * n_absent
    assert 999 not in set(pd.read_csv(tmp_path / "asked" / "results.tsv", sep="\t").seed)
    assert "runs missing" in (tmp_path / "asked" / "report.html").read_text()
    # part of a grid is an error
    assert main(args[:5] + ["--traits", "binary_trait"]) == 1
    assert "give the whole grid" in capsys.readouterr().err
    # so is a grid value given twice: each of its cells would be counted twice
    twice = args[:5] + ["--traits", "binary_trait", "binary_trait", *args[8:]]
    twice[twice.index("--out") + 1] = str(tmp_path / "twice")
    assert main(twice) == 1
    assert "--traits: binary_trait is given twice" in capsys.readouterr().err
    assert not (tmp_path / "twice").exists()


def test_bad_inputs(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    with pytest.raises(CmixError, match="no metrics.json"):
        write_report(tmp_path / "empty", tmp_path / "rep")
    assert not (tmp_path / "rep" / "results.tsv").exists()
    assert main(["report", "--runs", str(tmp_path / "empty"), "--out", str(tmp_path / "rep")]) == 1
    assert "no metrics.json" in capsys.readouterr().err
    # two test splits for one trait: refused, naming the trait; nothing written
    write_grid(tmp_path / "runs", [("hair", "prs", 100, 1, 2)])
    write_grid(tmp_path / "runs", [("hair", "cmix", 100, 1, 2)], test_hash="b" * 64)
    write_grid(tmp_path / "runs", [("other", "cmix", 100, 1, 2)])
    with pytest.raises(CmixError, match="trait hair: .* 2 different test splits"):
        write_report(tmp_path / "runs", tmp_path / "rep2")
    assert not (tmp_path / "rep2").exists() or not any((tmp_path / "rep2").iterdir())
    # a broken metrics.json names the file
    bad = tmp_path / "runs2" / "x"
    bad.mkdir(parents=True)
    (bad / "metrics.json").write_text('{"trait": "t"}')
    with pytest.raises(CmixError, match=r"x/metrics.json: not a cmix metrics.json"):
        write_report(tmp_path / "runs2", tmp_path / "rep3")


PROVENANCE = {"snp_source": {"kind": "external", "file": "toy.sumstats.gz",
                             "overlap": "unknown"},
              "sample_filters": {"sample_qc": "not given", "withdrawn": "applied",
                                 "relatedness": "KING from genotypes"}}


def test_report_of_real_runs(tmp_path):
    """Real runs through the CLI and the harness (prs, logreg: 2 seeds; cmix: 1), then
    the report: predictions.npz against the store, provenance copied, figures written."""
    from test_baselines import TINY, simulate_trait, store_from

    from cmix.store.write import StoreContent, write_store
    from cmix.learn import harness

    dosage, label, split, beta = simulate_trait(400, 12, 2, seed=2, n_causal=3, h2=0.9)
    store = store_from(tmp_path / "t.zarr", dosage, label, split, beta, trait="toy")
    for method in ("prs", "logreg"):
        for seed in (1, 2):
            assert main(["train", "--store", str(store), "--budget", "60", "--seed", str(seed),
                         "--method", method, "--out",
                         str(tmp_path / "runs" / method / str(seed))]) == 0
    harness.train_run(store, 60, 1, tmp_path / "runs" / "cmix" / "1", config=TINY, device="cpu")
    assert main(["report", "--runs", str(tmp_path / "runs"), "--out", str(tmp_path / "rep")]) == 0
    res = pd.read_csv(tmp_path / "rep" / "results.tsv", sep="\t")
    assert len(res) == 5 and set(res["method"]) == {"prs", "logreg", "cmix"}
    assert (res["n_snps"] == 12).all() and (res["n_test"] == 100).all()
    test_labels = label[split == 1]              # the store's test rows
    assert np.allclose(res["test_majority_rate"], np.bincount(test_labels).max() / len(test_labels))
    for run in ("prs/1", "logreg/2", "cmix/1"):
        z = np.load(tmp_path / "runs" / run / "predictions.npz")
        m = json.loads((tmp_path / "runs" / run / "metrics.json").read_text())
        assert np.array_equal(z["y"], test_labels) and z["prob"].shape == (100, 2)
        assert np.allclose(z["prob"].sum(1), 1, atol=1e-5)
        assert m["test"]["accuracy"] == pytest.approx(np.mean(z["prob"].argmax(1) == test_labels))
        assert ("latent" in z.files) == (run == "cmix/1")
        assert "provenance" not in m                 # this store records none
    assert z["latent"].shape == (100, TINY["hidden"])
    assert {"toy.png", "toy.curves.png", "toy.tsne.png"} <= {
        p.name for p in (tmp_path / "rep").iterdir()}
    for f in ("results.tsv", "summary.tsv", "headline.tsv", "report.html"):
        text = (tmp_path / "rep" / f).read_text()
        assert not re.search(r"\bid\d+\b", text), f           # no sample IDs
    # a store recording its provenance: copied into metrics.json, shown with the caution
    prov_store = write_store(tmp_path / "p.zarr", StoreContent(
        dosage=dosage, sample_id=[f"id{i}" for i in range(len(label))],
        sample_label=label, sample_split=split, variant_id=[f"rs{j}" for j in range(12)],
        variant_contig=["1"] * 12, variant_position=np.arange(12) * 10 + 1,
        variant_allele=np.array([["A", "G"]] * 12), variant_beta=beta,
        attrs={"trait": "prov", "class_names": ["c0", "c1"], "provenance": PROVENANCE}))
    assert main(["train", "--store", str(prov_store), "--budget", "60", "--seed", "1",
                 "--method", "prs", "--out", str(tmp_path / "runs2" / "prs")]) == 0
    m = json.loads((tmp_path / "runs2" / "prs" / "metrics.json").read_text())
    assert m["provenance"] == PROVENANCE
    write_report(tmp_path / "runs2", tmp_path / "rep2")
    page = (tmp_path / "rep2" / "report.html").read_text()
    assert page.index('id="caution"') < page.index('id="headline"')
    assert "toy.sumstats.gz" in page and "overlap: unknown" in page


def test_classification_metrics_against_direct_computation():
    from cmix.learn.results import classification_metrics

    rng = np.random.default_rng(0)
    # binary: no tied scores, so AP is the mean over positives of the precision at their rank
    y = rng.integers(0, 2, 60)
    p1 = np.clip(0.3 * y + rng.uniform(0, 0.7, 60), 0, 1)
    prob = np.stack([1 - p1, p1], 1)
    m = classification_metrics(y, prob, 2)
    pred = (p1 > 0.5).astype(int)
    tp, tn = np.sum((pred == 1) & (y == 1)), np.sum((pred == 0) & (y == 0))
    fp, fn = np.sum((pred == 1) & (y == 0)), np.sum((pred == 0) & (y == 1))
    assert m["mcc"] == pytest.approx((tp * tn - fp * fn)
                                     / np.sqrt((tp + fp) * (tp + fn) * (tn + fp) * (tn + fn)))
    assert m["brier"] == pytest.approx(np.mean((p1 - y) ** 2))

    def ap(pos, score):
        hits = pos[np.argsort(-score)]
        return np.mean((np.cumsum(hits) / np.arange(1, len(hits) + 1))[hits.astype(bool)])
    assert m["ap"] == pytest.approx(ap(y, p1))
    assert m["accuracy"] == pytest.approx(np.mean(pred == y))
    # three classes: macro AP over the classes, Brier half the squared distance to one-hot
    y3 = rng.integers(0, 3, 90)
    logits = rng.normal(size=(90, 3)) + 1.5 * np.eye(3)[y3]
    prob3 = np.exp(logits) / np.exp(logits).sum(1, keepdims=True)
    m3 = classification_metrics(y3, prob3, 3)
    assert m3["macro_ap"] == pytest.approx(np.mean([ap(y3 == c, prob3[:, c]) for c in range(3)]))
    assert m3["brier"] == pytest.approx(0.5 * np.mean(((prob3 - np.eye(3)[y3]) ** 2).sum(1)))
    assert 0 <= m3["brier"] <= 1 and -1 <= m3["mcc"] <= 1
    # multi-class MCC (Gorodkin's R_K) from the confusion matrix
    cm = np.zeros((3, 3))
    np.add.at(cm, (y3, prob3.argmax(1)), 1)
    t, pk, c, s = cm.sum(1), cm.sum(0), np.trace(cm), cm.sum()
    assert m3["mcc"] == pytest.approx((c * s - t @ pk) / np.sqrt((s**2 - pk @ pk) * (s**2 - t @ t)))


@pytest.mark.parametrize("seed", range(30))
def test_metrics_are_scikit_learn_s_to_the_bit(seed):
    """cmix.learn.metrics gives scikit-learn's floats exactly: random sizes and class
    counts, scores with many ties (few decimals) or none, predictions of classes absent
    from the truth, a constant prediction (MCC undefined), 0/1 and bool truths."""
    import warnings

    import sklearn.metrics as skm

    from cmix.learn import metrics

    rng = np.random.default_rng(seed)
    n, k = int(rng.integers(3, 400)), int(rng.integers(2, 5))
    y = rng.integers(0, k, n)
    y[:2] = [1, 0]                                       # both sides of class 1 present
    score = np.round(rng.random(n) * (0.6 + (y == 1)), int(rng.choice([1, 2, 12])))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for pred in (rng.integers(0, k + 1, n), np.where(rng.random(n) < 0.7, y, 0),
                     np.zeros(n, dtype=int)):
            for name in ("balanced_accuracy_score", "matthews_corrcoef"):
                assert getattr(metrics, name)(y, pred) == getattr(skm, name)(y, pred)
        for truth in (y == 1, (y == 1).astype(int)):
            for name in ("roc_auc_score", "average_precision_score"):
                assert getattr(metrics, name)(truth, score) == getattr(skm, name)(truth, score)


def test_metrics_and_versions_import_no_scikit_learn():
    """A run's metrics and version record leave scikit-learn (and scipy) unimported, and
    the versions are the packages' own."""
    import importlib.metadata
    import os
    import subprocess
    import sys

    import dask
    import scipy
    import sklearn
    import torch
    import zarr

    from cmix.learn.results import versions

    code = ("import sys, numpy as np\n"
            "from cmix.learn.results import classification_metrics, versions\n"
            "classification_metrics(np.array([0, 1, 2, 1]), np.eye(3)[[0, 1, 1, 2]], 3)\n"
            "versions()\n"
            "print(sorted(m for m in ('sklearn', 'scipy') if m in sys.modules))")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(Path(__file__).resolve().parent.parent), os.environ.get("PYTHONPATH", "")]))
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, check=True).stdout
    assert out.split("\n")[-2] == "[]"
    v = versions()
    assert (v["torch"], v["scipy"], v["sklearn"], v["dask"], v["zarr"]) == (
        torch.__version__, scipy.__version__, sklearn.__version__, dask.__version__,
        zarr.__version__)
    assert importlib.metadata.version("scikit-learn") == sklearn.__version__


def test_gain_over_covariates_is_paired_by_seed(tmp_path):
    cells = [(t, m, b, s, k) for t, k in (("binary_trait", 2),)
             for m in ("covariates", "logreg") for b in BUDGETS for s in SEEDS]
    write_grid(tmp_path / "runs", cells)
    write_report(tmp_path / "runs", tmp_path / "rep")
    summ = pd.read_csv(tmp_path / "rep" / "summary.tsv", sep="\t")
    res = pd.read_csv(tmp_path / "rep" / "results.tsv", sep="\t")
    for b in BUDGETS:
        a = res[(res.method == "logreg") & (res.budget == b)].set_index("seed").accuracy
        c = res[(res.method == "covariates") & (res.budget == b)].set_index("seed").accuracy
        row = summ[(summ.method == "logreg") & (summ.budget == b)].iloc[0]
        assert row["accuracy_gain_over_covariates_mean"] == pytest.approx((a - c).mean(), abs=1e-6)
        assert row["accuracy_gain_over_covariates_sd"] == pytest.approx((a - c).std(ddof=1),
                                                                        abs=1e-5)
        own = summ[(summ.method == "covariates") & (summ.budget == b)].iloc[0]
        assert own["accuracy_gain_over_covariates_mean"] == 0


@pytest.mark.parametrize("key,value", [("accuracy", float("nan")), ("accuracy", 1.7),
                                        ("auroc", -0.1), ("mcc", -1.5), ("brier", "0.2")])
def test_metric_nan_or_out_of_range_is_refused(tmp_path, capsys, key, value):
    write_grid(tmp_path / "runs", [("hair", "prs", 100, 1, 2), ("hair", "prs", 100, 2, 2)])
    f = tmp_path / "runs" / "hair" / "prs" / "budget100" / "seed2" / "metrics.json"
    m = json.loads(f.read_text())
    m["test"][key] = value
    f.write_text(json.dumps(m))                  # json writes NaN as the bare token NaN
    assert main(["report", "--runs", str(tmp_path / "runs"), "--out", str(tmp_path / "rep")]) == 1
    err = capsys.readouterr().err.strip()
    assert str(f) in err and f"test {key} is" in err and err.count("\n") == 0
    assert not (tmp_path / "rep").exists() or not any((tmp_path / "rep").iterdir())


def test_stale_figures_of_an_earlier_report_are_removed(tmp_path):
    write_grid(tmp_path / "runs", full_cells())
    write_report(tmp_path / "runs", tmp_path / "rep")
    assert (tmp_path / "rep" / "three_class.png").is_file()
    grid = {"traits": ["binary_trait"], "methods": METHODS, "budgets": BUDGETS, "seeds": SEEDS}
    write_report(tmp_path / "runs", tmp_path / "rep", grid=grid)
    pngs = {p.name for p in (tmp_path / "rep").glob("*.png")}
    assert pngs == {"binary_trait.png", "accuracy_by_trait.png", "pseudo_label_accuracy.png"}
    assert "three_class" not in (tmp_path / "rep" / "report.html").read_text()
    # a folder that holds no report: refused before any work, nothing in it touched
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "holiday.png").write_bytes(b"\x89PNG")
    with pytest.raises(CmixError, match="holiday.png"):
        write_report(tmp_path / "runs", tmp_path / "mine", grid=grid)
    assert [p.name for p in (tmp_path / "mine").iterdir()] == ["holiday.png"]


def holm(p):
    """Holm's step-down adjustment, written out: sort, multiply the i-th smallest by
    (m - i), running maximum, cap at 1."""
    p = np.asarray(p, float)
    order = np.argsort(p)
    adj = np.minimum(1, np.maximum.accumulate((len(p) - np.arange(len(p))) * p[order]))
    out = np.empty_like(adj)
    out[order] = adj
    return out


def test_headline_gains_tests_and_holm_against_direct_computation(tmp_path):
    """Paired gains, the paired t-test (3 seeds) / Wilcoxon (10 seeds) per cell, Holm over
    every comparison, and the verdict, recomputed here from results.tsv."""
    from scipy import stats

    seeds = list(range(10))
    cells = ([("few", m, b, s, 2) for m in ("covariates", "prs", "logreg", "cmix")
              for b in BUDGETS for s in SEEDS]
             + [("many", m, 300, s, 3) for m in ("covariates", "logreg", "cmix") for s in seeds])
    write_grid(tmp_path / "runs", cells)
    write_report(tmp_path / "runs", tmp_path / "rep")
    res = pd.read_csv(tmp_path / "rep" / "results.tsv", sep="\t")
    head = pd.read_csv(tmp_path / "rep" / "headline.tsv", sep="\t")
    acc = res.set_index(["trait", "budget", "method", "seed"])["accuracy"].sort_index()
    ps, where = [], []
    for r in head.itertuples():
        for tag in ("cov", "best"):
            ref = "covariates" if tag == "cov" else r.best_other
            if r.method == ref or (tag == "best" and r.method != "cmix"):
                assert np.isnan(getattr(r, f"gain_{tag}_p"))
                continue
            d = (acc.loc[(r.trait, r.budget, r.method)] - acc.loc[(r.trait, r.budget, ref)]).to_numpy()
            assert getattr(r, f"gain_{tag}_mean") == pytest.approx(d.mean(), abs=1e-6)
            p = (stats.wilcoxon(d).pvalue if len(d) >= 10 else stats.ttest_rel(
                acc.loc[(r.trait, r.budget, r.method)], acc.loc[(r.trait, r.budget, ref)]).pvalue)
            assert getattr(r, f"gain_{tag}_p") == pytest.approx(p, rel=1e-4)
            assert getattr(r, f"gain_{tag}_test") == ("Wilcoxon signed-rank" if len(d) >= 10
                                                      else "paired t")
            ps.append(p)
            where.append((r.Index, tag))
    for family in ("cov", "best"):          # Holm within each column's family of tests
        mine = [(i, p) for (i, tag), p in zip(where, ps) if tag == family]
        withheld = 0
        for (i, _), a in zip(mine, holm([p for _, p in mine])):
            # withheld where even an all-one-sign result (p = 2 / 2^n) could not pass Holm
            n = head.loc[i, f"gain_{family}_n"]
            if len(mine) * 2.0 ** (1 - n) >= 0.05:
                assert np.isnan(head.loc[i, f"gain_{family}_p_holm"])
                withheld += 1
            else:
                assert head.loc[i, f"gain_{family}_p_holm"] == pytest.approx(a, rel=1e-4)
        assert 0 < withheld < len(mine)         # 3-seed cells withheld, 10-seed cells not
        assert (head[f"n_tests_holm_{family}"] == len(mine)).all()
    # the best non-cmix method is the one with the highest mean; verdicts follow the p,
    # then the gain against its sd
    for r in head[head.method == "cmix"].itertuples():
        means = res[(res.trait == r.trait) & (res.budget == r.budget)
                    & (res.method != "cmix")].groupby("method").accuracy.mean()
        assert r.best_other == means.idxmax()
        expect = (("better" if r.gain_best_mean > 0 else "worse") if r.gain_best_p_holm < 0.05
                  else "level" if abs(r.gain_best_mean) <= r.gain_best_sd else "inconclusive")
        assert r.verdict == expect
    assert set(head.loc[head.method == "cmix", "verdict"]) >= {"better"}   # cmix leads by design
    page = (tmp_path / "rep" / "report.html").read_text()
    n_best = sum(tag == "best" for _, tag in where)
    assert "▲ better" in page and f"all {n_best} gains of cmix" in page


@pytest.mark.parametrize("source,caution", [
    ({"kind": "external", "file": "bolt.txt.gz", "overlap": "yes"}, True),
    ({"kind": "external", "file": "bolt.txt.gz"}, True),
    ({"kind": "external", "file": "bolt.txt.gz", "overlap": "no"}, False),
    ({"kind": "discovery", "n_discovery": 1200, "ids_sha256": "ab" * 32,
      "engine": "plink2 --glm"}, False),
    (None, True)])
def test_provenance_and_overlap_caution(tmp_path, source, caution):
    """Where the SNPs came from, shown per trait; a caution above the headline where the
    GWAS may have seen the test people: external summary statistics of overlap yes or
    unknown, or a store that records no source at all."""
    write_grid(tmp_path / "runs", [("hair", m, 100, s, 2) for m in ("prs", "cmix") for s in (1, 2)])
    if source is not None:
        for f in (tmp_path / "runs").rglob("metrics.json"):
            m = json.loads(f.read_text())
            m["provenance"] = {"snp_source": source,
                               "sample_filters": {"sample_qc": "not given"}}
            f.write_text(json.dumps(m))
    write_report(tmp_path / "runs", tmp_path / "rep")
    page = (tmp_path / "rep" / "report.html").read_text()
    assert ('id="caution"' in page) == caution
    if caution:
        assert page.index('id="caution"') < page.index('id="headline"')
        assert ("bolt.txt.gz" if source else "does not record where its SNPs came from") in page
    if source is None:      # a store written without --sumstats or --discovery
        assert "provenance: not recorded (the store was written without --sumstats" in page
    elif source["kind"] == "discovery":
        assert "discovery split of this cohort (1200 people" in page
    else:
        assert f"overlap with this cohort: <b>{source.get('overlap', 'unknown')}</b>" in page


CHROMIUM = "/usr/bin/chromium"


def write_runs_with_predictions(root, trait, shares, methods, budgets, seeds, n_test=300):
    """Fake runs whose metrics.json holds the metrics of their own predictions.npz (test
    classes with the given shares, probabilities that favour the true class more for
    later methods), and a latent for cmix."""
    from cmix.learn.results import classification_metrics, write_predictions

    c = len(shares)
    y = np.repeat(np.arange(c), np.round(np.array(shares) * n_test).astype(int))[:n_test]
    for i, method in enumerate(methods):
        for budget in budgets:
            for seed in seeds:
                rng = np.random.default_rng([i, budget, seed, c])
                logits = rng.normal(size=(len(y), c)) + (0.5 + 0.3 * i) * np.eye(c)[y]
                prob = np.exp(logits) / np.exp(logits).sum(1, keepdims=True)
                latent = (rng.normal(size=(len(y), 8)) + 2 * np.eye(c, 8)[y]
                          if method == "cmix" else None)
                d = root / trait / method / f"budget{budget}" / f"seed{seed}"
                d.mkdir(parents=True)
                write_predictions(d / "predictions.npz", y, prob, latent)
                m = fake_metrics(trait, method, budget, seed, c)
                m.update(test=classification_metrics(y, prob, c), n_test=len(y),
                         test_majority_rate=float(np.bincount(y).max() / len(y)))
                (d / "metrics.json").write_text(json.dumps(m))


def render_in_chromium(page, tmp_path, width=1280) -> dict:
    """Open ``page`` in headless Chromium at ``width`` px and return what a script in
    the page measured after load: the document's scroll width, each image's natural
    width, and the answers table's and first image's positions."""
    probe = """<script>window.addEventListener('load', function () {
      var imgs = Array.from(document.images), head = document.getElementById('answers');
      var r = head ? head.getBoundingClientRect() : null;
      var out = {scrollWidth: document.documentElement.scrollWidth,
                 bodyScrollWidth: document.body.scrollWidth, innerWidth: window.innerWidth,
                 natural: imgs.map(function (i) { return i.naturalWidth; }),
                 shown: imgs.map(function (i) { return i.getBoundingClientRect().right; }),
                 headTop: r ? r.top : null, headRight: r ? r.right : null,
                 headBeforeImg: !!(head && imgs.length && (head.compareDocumentPosition(
                     imgs[0]) & Node.DOCUMENT_POSITION_FOLLOWING)),
                 firstImgTop: imgs.length ? imgs[0].getBoundingClientRect().top : null};
      var pre = document.createElement('pre');
      pre.id = 'cmix-measure'; pre.textContent = JSON.stringify(out);
      document.body.appendChild(pre);
    });</script>"""
    html_file = tmp_path / "probe.html"
    html_file.write_text(page.replace("</body>", probe + "</body>"))
    import subprocess

    out = subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--no-first-run", f"--user-data-dir={tmp_path / 'chromium-profile'}",
         f"--window-size={width},900", "--virtual-time-budget=10000", "--dump-dom",
         html_file.as_uri()], capture_output=True, text=True, timeout=180)
    found = re.search(r'<pre id="cmix-measure">(.*?)</pre>', out.stdout, re.S)
    assert found, out.stderr[-2000:]
    return json.loads(html.unescape(found.group(1)))


@pytest.mark.skipif(not Path(CHROMIUM).is_file(), reason="needs /usr/bin/chromium")
def test_report_renders_in_chromium(tmp_path):
    """The page in a real browser at 1280 px: no horizontal scroll, every figure loads,
    the answers table comes before the first figure, which starts on the first screen
    (900 px), and fits the window."""
    methods = ["covariates", "prs", "logreg", "manifold_mixup", "cmix_random_mix", "cmix"]
    write_runs_with_predictions(tmp_path / "runs", "hair_colour_with_a_rather_long_name",
                                [0.55, 0.3, 0.1, 0.05], methods, [100, 10000], [1, 2, 3])
    write_runs_with_predictions(tmp_path / "runs", "asthma", [0.92, 0.08], methods,
                                [100, 10000], [1, 2, 3])
    write_report(tmp_path / "runs", tmp_path / "rep")
    names = {p.name for p in (tmp_path / "rep").glob("*.png")}
    assert {"asthma.curves.png", "asthma.tsne.png",
            "hair_colour_with_a_rather_long_name.curves.png"} <= names
    page = (tmp_path / "rep" / "report.html").read_text()
    m = render_in_chromium(page, tmp_path)
    assert m["innerWidth"] == 1280
    assert m["scrollWidth"] <= 1280 and m["bodyScrollWidth"] <= 1280, m
    assert len(m["natural"]) == len(names) and all(w > 0 for w in m["natural"]), m["natural"]
    assert all(r <= 1280 for r in m["shown"]), m["shown"]
    assert m["headBeforeImg"] and m["headTop"] < m["firstImgTop"] < 900, m
    assert m["headRight"] <= 1280


@pytest.mark.parametrize("damage", ["cut", "empty", "text"])
def test_a_damaged_predictions_file_is_refused_by_name(tmp_path, capsys, damage):
    """A predictions.npz cut short, emptied or overwritten with text is one error naming
    the file (zipfile's BadZipFile escaped as a traceback before), and no report."""
    write_runs_with_predictions(tmp_path / "runs", "hair", [0.5, 0.5], ["mlp", "cmix"],
                                [100], [1, 2])
    f = tmp_path / "runs" / "hair" / "mlp" / "budget100" / "seed1" / "predictions.npz"
    data = f.read_bytes()
    f.write_bytes({"cut": data[:300], "empty": b"", "text": b"not a zip\n"}[damage])
    assert main(["report", "--runs", str(tmp_path / "runs"), "--out", str(tmp_path / "rep")]) == 1
    err = [line for line in capsys.readouterr().err.splitlines() if "error" in line]
    assert len(err) == 1 and f"{f}: not a cmix predictions.npz" in err[0]
    assert not (tmp_path / "rep" / "report.html").exists()


def test_equal_differences_up_to_rounding_have_no_p():
    """Two seeds whose gains are the same 2 of 487 test people, summed in floats that
    differ in the last bit: no spread to test, so no p (a t-test gave p = 4e-15)."""
    from cmix.report.verdicts import paired_test

    a = np.array([0.5031, 0.4949]) + 2 / 487
    d = a - np.array([0.5031, 0.4949])
    assert np.ptp(d) > 0                       # the rounding the test must not read
    assert np.isnan(paired_test(d)[0])
    assert paired_test(np.array([1e-17, -1e-17]))[0] == 1.0


def test_a_large_gain_with_few_seeds_is_inconclusive_not_level(tmp_path):
    """Two seeds, cmix 3.5 and 2 points under prs (2.6 sd of the gain): no test at 2 seeds
    can show a difference, so no Holm p is given, and the mark said "level"; it is
    "inconclusive"."""
    from cmix.report.verdicts import headline

    rows = []
    for seed, (c, p, cov) in enumerate([(0.60, 0.635, 0.55), (0.61, 0.63, 0.55)], 1):
        rows += [{"trait": "t", "budget": 100, "method": m, "seed": seed, "accuracy": v}
                 for m, v in (("cmix", c), ("prs", p), ("covariates", cov))]
    head = headline(pd.DataFrame(rows))
    row = head[head.method == "cmix"].iloc[0]
    assert row.best_other == "prs" and 0 < row.gain_best_p < 1
    assert np.isnan(row.gain_best_p_holm)     # two seeds cannot show a difference: no p
    assert abs(row.gain_best_mean) > row.gain_best_sd and row.verdict == "inconclusive"


def test_report_says_in_how_many_seeds_the_pseudo_labels_were_used(tmp_path):
    """A refused judge makes cmix cmix_selfsl's run; the report said so nowhere (its
    pseudo-label accuracy was tabulated as if they were used)."""
    write_grid(tmp_path / "runs", [("t", m, 100, s, 2) for m in ("covariates", "cmix")
                                   for s in (1, 2, 3)])
    write_report(tmp_path / "runs", tmp_path / "rep")
    res = pd.read_csv(tmp_path / "rep" / "results.tsv", sep="\t")
    cm = res[res.method == "cmix"].sort_values("seed")
    assert cm["pseudo_labels_used"].tolist() == [True, False, False]
    assert res.loc[res.method == "covariates", "pseudo_labels_used"].isna().all()
    summary = pd.read_csv(tmp_path / "rep" / "summary.tsv", sep="\t")
    assert summary.set_index("method").loc["cmix", "pseudo_labels_used"] == 1
    assert "pseudo-labels used (seeds)" in (tmp_path / "rep" / "report.html").read_text()
    assert ">1 of 3</td>" in (tmp_path / "rep" / "report.html").read_text()



def test_non_finite_probabilities_get_no_metrics():
    """A diverged network's NaN probabilities scored AUROC 0.556 and accuracy 0.5
    (scikit-learn raises); now one message and no metrics."""
    from cmix.errors import CmixError
    from cmix.learn.results import classification_metrics

    prob = np.full((6, 2), 0.5)
    prob[2] = np.nan
    with pytest.raises(CmixError, match="not finite for 1 of 6 rows"):
        classification_metrics(np.array([0, 1, 0, 1, 0, 1]), prob, 2)


def runs_frame(acc: dict, seeds, trait="t", budget=100) -> pd.DataFrame:
    """results rows {trait, method, budget, seed, accuracy} from {method: [acc per seed]}."""
    return pd.DataFrame([{"trait": trait, "method": m, "budget": budget, "seed": s,
                          "accuracy": a} for m, v in acc.items() for s, a in zip(seeds, v)])


def test_first_screen_answers_before_the_detail(tmp_path):
    write_grid(tmp_path / "runs", full_cells())
    write_report(tmp_path / "runs", tmp_path / "rep")
    page = (tmp_path / "rep" / "report.html").read_text()
    # the answers table, the seeds note and the accuracy figure come before any other table
    at = {k: page.index(k) for k in ('id="answers"', 'id="seeds-note"', 'id="accuracy-figure"',
                                     'id="glance"', 'id="headline"')}
    assert at['id="seeds-note"'] < at['id="answers"'] < at['id="accuracy-figure"'] \
        < at['id="glance"'] < at['id="headline"']
    assert page.index("<table") == page.index('<table id="answers"')
    ans = pd.read_csv(tmp_path / "rep" / "answers.tsv", sep="\t")
    assert len(ans) == 2 * 3                                  # trait x budget
    res = pd.read_csv(tmp_path / "rep" / "results.tsv", sep="\t")
    for r in ans.itertuples():
        means = res[(res.trait == r.trait) & (res.budget == r.budget)].groupby(
            "method")["accuracy"].mean().sort_values(ascending=False)
        assert (r.best, r.runner_up) == tuple(means.index[:2])
    # 3 seeds, 6 comparisons: 6 x 2/2^3 >= 0.05, so no difference is shown and every
    # answer is "level with" its runner-up, saying why
    assert not ans["shown"].any()
    assert all(a == f"{b}, level with {r}" for a, b, r in zip(ans.answer, ans.best, ans.runner_up))
    assert ans["reason"].str.contains("3 seeds: too few to show a difference").all()
    answers_table = page[at['id="answers"']:at['id="accuracy-figure"']]
    assert "level with" in answers_table
    note = html.unescape(re.search(r'id="seeds-note">(.*?)</p>', page).group(1))
    assert "with 3 seeds" in note and "2/2^3 = 0.25" in note and "the 6 comparisons" in note
    assert "Run at least 8 seeds" in note


def test_smallest_attainable_p_and_seeds_needed():
    from cmix.report.verdicts import min_attainable_p, seeds_needed
    assert min_attainable_p(1) == 1.0 and min_attainable_p(2) == 0.5
    assert min_attainable_p(6) == pytest.approx(1 / 32)
    # exact sign-flip test: the p of differences all of one sign is its smallest p
    from itertools import product
    d = np.array([0.01, 0.02, 0.03, 0.04, 0.05])
    stat = [abs(np.dot(s, d)) for s in product([-1, 1], repeat=len(d))]
    assert np.mean(np.array(stat) >= abs(d.sum()) - 1e-12) == min_attainable_p(len(d))
    assert seeds_needed(1) == 6 and seeds_needed(6) == 8


def test_best_method_is_any_method_and_shown_with_enough_seeds():
    from cmix.report.verdicts import answers, seeds_note
    seeds = list(range(12))
    rng = np.random.default_rng(0)
    base = 0.7 + rng.normal(0, 0.01, 12)
    res = runs_frame({"cmix": base, "mlp": base + 0.05 + rng.normal(0, 0.002, 12),
                      "logreg": base - 0.02}, seeds)
    ans = answers(res)
    r = ans.iloc[0]
    assert (r.best, r.runner_up, r.answer) == ("mlp", "cmix", "mlp")
    assert r.shown and r.p_holm < 0.05 and r.reason == ""
    assert seeds_note(ans) == ""
    # a runner-up within the seeds' noise: level with it
    res = runs_frame({"cmix": base, "mlp": base + rng.normal(0, 0.01, 12)}, seeds)
    r = answers(res).iloc[0]
    assert not r.shown and r.answer == f"{r.best}, level with {r.runner_up}"


@pytest.mark.parametrize("acc,seeds,reason", [
    ({"cmix": [0.8, 0.7, 0.6], "mlp": [0.75, 0.65, 0.55]}, [1, 2, 3],
     "identical differences across seeds: no variance, no test"),
    ({"cmix": [0.8], "mlp": [0.7]}, [1], "one seed"),
])
def test_a_missing_p_says_why(tmp_path, acc, seeds, reason):
    from cmix.report.verdicts import answers
    ans = answers(runs_frame(acc, seeds))
    assert np.isnan(ans.iloc[0].p) and ans.iloc[0].reason == reason
    assert ans.iloc[0].answer == "cmix, level with mlp"
    cells = [("t", m, 100, s, 2) for m in acc for s in seeds]
    root = tmp_path / "runs"
    for t, m, b, s, _ in cells:
        d = root / t / m / f"budget{b}" / f"seed{s}"
        d.mkdir(parents=True)
        met = fake_metrics(t, m, b, s)
        met["test"]["accuracy"] = acc[m][seeds.index(s)]
        (d / "metrics.json").write_text(json.dumps(met))
    write_report(root, tmp_path / "rep")
    page = (tmp_path / "rep" / "report.html").read_text()
    table = page[page.index('id="answers"'):page.index("</table>", page.index('id="answers"'))]
    assert html.escape(reason) in table
    if len(seeds) == 1:
        assert "Only one seed per method" in page


def test_report_says_why_runs_are_left_out(tmp_path, capsys):
    """A symbolic link to a run folder is named (not searched), and a run without
    predictions.npz at the curves' budget is named as left out of the pooled curves."""
    import shutil

    from cmix.report.collect import collect_results
    from cmix.report.figures import _largest_budget_predictions

    runs = tmp_path / "runs"
    write_runs_with_predictions(runs, "asthma", [0.6, 0.4], ["mlp", "cmix"], [50, 100], [1, 2])
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (runs / "linked").symlink_to(elsewhere, target_is_directory=True)
    results, _ = collect_results(runs)
    err = capsys.readouterr().err
    assert "symbolic link" in err and "linked" in err
    top = results[results.budget == results.budget.max()]
    row = next(top.itertuples())
    (runs / row.run_dir / "predictions.npz").unlink()
    _largest_budget_predictions(runs, results[results.trait == row.trait])
    err = capsys.readouterr().err
    assert f"{row.method} seed {row.seed}" in err and "left out of the pooled curves" in err


def test_level_never_stands_beside_a_p_below_alpha():
    """Three seeds whose gains are 1.0, 1.1 and 1.2 points: a paired t-test gives p <
    0.05, yet no test on 3 seeds can be trusted to show it, and the best-method table
    printed Holm p 0.040 beside "level". Now the p is withheld where the seeds are too
    few, so "level" comes with no p below 0.05."""
    from cmix.report.verdicts import ALPHA, answers

    rows = []
    for seed, gain in zip((1, 2, 3), (0.010, 0.011, 0.012)):
        base = 0.80 + 0.01 * seed
        rows += [{"trait": "t", "budget": 100, "method": "cmix", "seed": seed,
                  "accuracy": base + gain},
                 {"trait": "t", "budget": 100, "method": "logreg", "seed": seed,
                  "accuracy": base}]
    row = answers(pd.DataFrame(rows)).iloc[0]
    assert row["p"] < ALPHA                      # what used to be printed
    assert "level with logreg" in row["answer"] and not np.isfinite(row["p_holm"])
    assert "too few to show a difference" in row["reason"]


def test_the_first_screen_names_cmix_s_refusals_the_budget_and_the_run_folder(tmp_path):
    """cmix equal to cmix_selfsl (every seed's judge refused) was said only in a table
    near the bottom; "budget" and which method is the paper's were said nowhere by the
    table; the header named the last common folder (the trait's), not the run folder."""
    runs = tmp_path / "results" / "runs"
    write_grid(runs, [("eur", m, 100, s, 2) for m in ("covariates", "cmix_selfsl", "cmix")
                      for s in (2, 3, 4)])           # fake_metrics: used only for seed 1
    write_report(runs, tmp_path / "rep")
    page = (tmp_path / "rep" / "report.html").read_text()
    assert "cmix = cmix_selfsl (pseudo-labels refused in 3 of 3 runs" in page
    at = page.index("cmix = cmix_selfsl (pseudo-labels refused in 3 of 3 runs")
    assert at < page.index("<table")              # before the first table
    intro = " ".join(page[:page.index("<table")].replace("<b>", "").replace("</b>", "").split())
    assert "budget = labeled training samples" in intro
    assert "cmix_paper = the paper's method" in intro
    assert str(runs) in page[:page.index("<table")]
