"""cmix report: tables against direct computations, incomplete grids, plots, HTML, bad inputs."""

import base64
import json
import re

import numpy as np
import pandas as pd
import pytest

from cmix.cli import main
from cmix.io import CmixError
from cmix.report import write_report

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
            "pseudo_labels": ({"accuracy": acc - 0.1, "coverage": 1.0}
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


def test_report_of_real_runs(tmp_path):
    """Two real baseline runs through the CLI, then the report."""
    from test_baselines import simulate_trait, store_from

    dosage, label, split, beta = simulate_trait(400, 12, 2, seed=2, n_causal=3, h2=0.9)
    store = store_from(tmp_path / "t.zarr", dosage, label, split, beta, trait="toy")
    for method in ("prs", "logreg"):
        for seed in (1, 2):
            assert main(["train", "--store", str(store), "--budget", "60", "--seed", str(seed),
                         "--method", method, "--out",
                         str(tmp_path / "runs" / method / str(seed))]) == 0
    assert main(["report", "--runs", str(tmp_path / "runs"), "--out", str(tmp_path / "rep")]) == 0
    res = pd.read_csv(tmp_path / "rep" / "results.tsv", sep="\t")
    assert len(res) == 4 and set(res["method"]) == {"prs", "logreg"}
    assert (res["n_snps"] == 12).all() and (res["n_test"] == 100).all()
    test_labels = label[split == 1]              # the store's test rows
    assert np.allclose(res["test_majority_rate"], np.bincount(test_labels).max() / len(test_labels))
    for f in ("results.tsv", "summary.tsv", "report.html"):
        text = (tmp_path / "rep" / f).read_text()
        assert not re.search(r"\bid\d+\b", text), f           # no sample IDs


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
