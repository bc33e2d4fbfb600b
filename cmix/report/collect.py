"""The runs of a report: every run folder's metrics.json as one row of the results table
(checked: ranges, one run per cell, one test split and store per trait), the grid they
belong to, the summary per trait x method x budget with the missing cells, and a run's
predictions.npz."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import numpy as np
import pandas as pd

from ..errors import CmixError
from ..learn.methods import method_rank
from ..logs import log


#: every test metric in results.tsv / summary.tsv, and the range a valid value lies in
METRIC_RANGES = {"accuracy": (0, 1), "balanced_accuracy": (0, 1), "auroc": (0, 1),
                 "ap": (0, 1), "mcc": (-1, 1), "brier": (0, 1)}
PREDICTIONS_FILE = "predictions.npz"


RESULT_COLUMNS = ["trait", "method", "budget", "seed", "accuracy", "balanced_accuracy",
                  "auroc", "ap", "mcc", "brier", "n_classes", "n_snps", "n_labeled", "n_train_labeled",
                  "n_validation", "n_unlabeled", "n_test", "test_majority_rate",
                  "pseudo_label_accuracy",
                  "pseudo_label_coverage", "pseudo_labels_used", "wall_seconds", "device", "store",
                  "test_split_sha256", "store_sha256", "run_dir"]


def _metric(test: dict, key: str, f) -> float:
    """test[key] (binary) or test["macro_" + key] as a float in METRIC_RANGES[key]; NaN
    when absent or None (older runs, one class present). CmixError naming ``f`` for NaN,
    a non-number or a value out of range."""
    v = test.get(key, test.get(f"macro_{key}"))
    if v is None:
        if key in ("accuracy", "balanced_accuracy"):
            raise CmixError(f"{f}: not a cmix metrics.json (test {key} missing)")
        return np.nan
    lo, hi = METRIC_RANGES[key]
    # 1e-6: float32 probabilities may put a Brier score of all-wrong rows a hair over 1
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not lo - 1e-6 <= v <= hi + 1e-6:
        raise CmixError(f"{f}: test {key} is {v!r}; expected a number in [{lo}, {hi}] "
                        "(a corrupted or hand-edited metrics.json)")
    return float(v)


def _result_row(m: dict, run_dir: str, f) -> dict:
    """One results.tsv row (RESULT_COLUMNS) from a parsed metrics.json ``f``."""
    test = m["test"]
    pl = m.get("pseudo_labels") or {}
    for k in ("accuracy", "coverage"):
        v = pl.get(k)
        if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float))
                              or not 0 <= v <= 1):
            raise CmixError(f"{f}: pseudo-label {k} is {v!r}; expected a number in [0, 1]")
    return {"trait": str(m["trait"]), "method": str(m["method"]),
            "budget": int(m["budget"]), "seed": int(m["seed"]),
            **{k: _metric(test, k, f) for k in METRIC_RANGES},
            "n_classes": len(m["class_names"]), "n_snps": m.get("n_snps"),
            **{k: int(m[k]) for k in ("n_labeled", "n_train_labeled", "n_validation",
                                      "n_unlabeled", "n_test")},
            "test_majority_rate": m.get("test_majority_rate"),
            "pseudo_label_accuracy": pl.get("accuracy"),
            "pseudo_label_coverage": pl.get("coverage"),
            "pseudo_labels_used": pl.get("used"),
            "wall_seconds": round(float(sum((m.get("wall_seconds") or {}).values())), 3),
            "device": m.get("device"), "store": m.get("store"),
            "test_split_sha256": str(m["test_split_sha256"]),
            "store_sha256": m.get("store_sha256"), "run_dir": run_dir}


def _check_comparable(df: pd.DataFrame, runs_dir) -> None:
    """Raise CmixError when the runs of one trait were trained on different store contents
    (store_sha256) or tested on different test splits (test_split_sha256)."""
    for trait, g in df.groupby("trait"):
        stores = g["store_sha256"].dropna().unique()
        if len(stores) > 1:
            counts = g["store_sha256"].value_counts()
            raise CmixError(
                f"trait {trait}: the runs under {runs_dir} were trained on {len(stores)} "
                f"different store contents (store_sha256 "
                f"{', '.join(h[:12] + f' in {n} runs' for h, n in counts.items())}); rerun the "
                "stale runs on the current store, or report them separately")
        hashes = g["test_split_sha256"].unique()
        if len(hashes) > 1:
            counts = g["test_split_sha256"].value_counts()
            raise CmixError(
                f"trait {trait}: the runs under {runs_dir} used {len(hashes)} different test "
                f"splits (test_split_sha256 {', '.join(h[:12] + f' in {n} runs' for h, n in counts.items())}); "
                "results of different stores cannot be compared, report them separately")


def collect_results(runs_dir, grid: dict | None = None) -> tuple[pd.DataFrame, list[dict]]:
    """Every metrics.json under ``runs_dir`` as one row each, sorted; also the parsed
    metrics. With ``grid`` (:func:`restrict_to_grid`) only the runs inside it, left out
    before the checks that compare runs, so a stale run outside the grid stops nothing.
    Raises CmixError for no metrics, unreadable files, duplicate cells, and different
    test splits (test_split_sha256) or store contents within one trait, and any test
    metric that is NaN or outside its range (:data:`METRIC_RANGES`)."""
    runs_dir = Path(runs_dir)
    if not runs_dir.is_dir():
        raise CmixError(f"{runs_dir}: runs folder not found")
    files = sorted(runs_dir.rglob("metrics.json"))
    linked = sorted(p for p in runs_dir.rglob("*") if p.is_symlink() and p.is_dir())
    if linked:
        log(f"{len(linked)} folder(s) under {runs_dir} are symbolic links and are not "
            f"searched for runs (e.g. {linked[0].relative_to(runs_dir)}): give the folder "
            "they point to, or copy the runs in")
    if not files:
        raise CmixError(f"{runs_dir}: no metrics.json found under this folder (run "
                        "`cmix train ... --out DIR` first)")
    rows, parsed, seen = [], [], {}
    for f in files:
        try:
            m = json.loads(f.read_text())
            row = _result_row(m, str(f.parent.relative_to(runs_dir)), f)
        except (ValueError, KeyError, TypeError) as err:
            raise CmixError(f"{f}: not a cmix metrics.json ({type(err).__name__}: {err})") \
                from None
        cell = (row["trait"], row["method"], row["budget"], row["seed"])
        if cell in seen:
            raise CmixError(f"{f}: trait {cell[0]}, method {cell[1]}, budget {cell[2]}, seed "
                            f"{cell[3]} is also in {seen[cell]}; keep one run per cell")
        seen[cell] = f
        rows.append(row)
        parsed.append(m)
    df = pd.DataFrame(rows, columns=RESULT_COLUMNS)
    if grid is not None:
        df, parsed = restrict_to_grid(df, parsed, grid)
        if df.empty:
            raise CmixError(f"{runs_dir}: none of the runs found is in the requested grid")
    _check_comparable(df, runs_dir)
    df["_order"] = df["method"].map(method_rank)
    df = df.sort_values(["trait", "_order", "method", "budget", "seed"]).drop(columns="_order")
    return df.reset_index(drop=True), parsed


def infer_grid(results: pd.DataFrame) -> dict:
    """The grid the runs belong to when none is given: every trait, method, budget and
    seed seen in any run, crossed (so a method with no run for one trait shows)."""
    return {"traits": list(dict.fromkeys(results["trait"])),
            "methods": sorted(dict.fromkeys(results["method"]), key=method_rank),
            "budgets": sorted(int(b) for b in results["budget"].unique()),
            "seeds": sorted(int(s) for s in results["seed"].unique())}


def summarise(results: pd.DataFrame, grid: dict | None = None
              ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(summary, missing) over ``grid`` ({"traits", "methods", "budgets", "seeds"};
    :func:`infer_grid` of the results when None). summary: per trait x method x budget
    the mean, sd (ddof 1; empty for one seed) and n of each metric;
    ``n_seeds_expected`` and ``complete``. missing: the trait x method x budget x seed
    cells of the grid without a run."""
    grid = grid or infer_grid(results)
    methods, budgets, seeds = grid["methods"], grid["budgets"], grid["seeds"]
    out, missing = [], []
    for trait in grid["traits"]:
        g = results[results["trait"] == trait]
        have = set(zip(g["method"], g["budget"], g["seed"]))
        for method in methods:
            for budget in budgets:
                cell = g[(g["method"] == method) & (g["budget"] == budget)]
                for seed in seeds:
                    if (method, budget, seed) not in have:
                        missing.append({"trait": trait, "method": method,
                                        "budget": int(budget), "seed": int(seed)})
                row = {"trait": trait, "method": method, "budget": int(budget)}
                for key in [*METRIC_RANGES, "pseudo_label_accuracy", "wall_seconds"]:
                    v = pd.to_numeric(cell[key], errors="coerce").dropna().to_numpy(float)
                    row[f"{key}_mean"] = float(v.mean()) if len(v) else np.nan
                    row[f"{key}_sd"] = float(v.std(ddof=1)) if len(v) > 1 else np.nan
                    if key == "accuracy":
                        row["n"] = int(len(v))
                used = cell["pseudo_labels_used"].dropna()
                row["pseudo_labels_used"] = (int(used.astype(bool).sum()) if len(used)
                                             else np.nan)
                row["n_seeds_expected"] = len(seeds)
                row["complete"] = bool(row["n"] == len(seeds))
                out.append(row)
    summary = pd.DataFrame(out)
    first = ["trait", "method", "budget", "n", "n_seeds_expected", "complete"]
    summary = summary[first + [c for c in summary.columns if c not in first]]
    summary = add_gain_over_covariates(summary, results)
    return summary, pd.DataFrame(missing, columns=["trait", "method", "budget", "seed"])


def add_gain_over_covariates(summary: pd.DataFrame, results: pd.DataFrame) -> pd.DataFrame:
    """Columns ``{accuracy,auroc}_gain_over_covariates_{mean,sd}``: per trait x method x
    budget, the mean and sd over seeds of (method - the covariates-only baseline), paired
    by seed (seeds both have); NaN where the covariates baseline did not run."""
    base = results[results["method"] == "covariates"].set_index(["trait", "budget", "seed"])
    for key in ("accuracy", "auroc"):
        means, sds = [], []
        for row in summary.itertuples():
            runs = results[(results["trait"] == row.trait) & (results["method"] == row.method)
                           & (results["budget"] == row.budget)]
            pairs = [(float(r[key]), float(base.loc[(row.trait, row.budget, r.seed), key]))
                     for _, r in runs.iterrows()
                     if (row.trait, row.budget, r.seed) in base.index]
            d = np.array([a - b for a, b in pairs], dtype=float)
            d = d[np.isfinite(d)]
            means.append(float(d.mean()) if len(d) else np.nan)
            sds.append(float(d.std(ddof=1)) if len(d) > 1 else np.nan)
        summary[f"{key}_gain_over_covariates_mean"] = means
        summary[f"{key}_gain_over_covariates_sd"] = sds
    return summary


def load_predictions(runs_dir, row) -> dict | None:
    """The run's predictions.npz as {"y" (n_test,) int, "prob" (n_test, C) float,
    optionally "latent" (n_test, d)}; None when the run has none (runs of older
    versions). CmixError naming the file when its shapes, classes or accuracy disagree
    with the run's metrics.json."""
    f = Path(runs_dir) / row.run_dir / PREDICTIONS_FILE
    if not f.is_file():
        return None
    try:
        with np.load(f, allow_pickle=False) as z:
            out = {k: z[k] for k in z.files}
        y, prob = np.asarray(out["y"]), np.asarray(out["prob"], dtype=np.float64)
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as err:
        raise CmixError(f"{f}: not a cmix predictions.npz ({type(err).__name__}: {err})") \
            from None
    n, c = int(row.n_test), int(row.n_classes)
    problem = None
    if y.shape != (n,) or prob.shape != (n, c):
        problem = (f"holds y {y.shape} and prob {prob.shape}; the run's metrics.json says "
                   f"{n} test rows and {c} classes")
    elif y.min(initial=0) < 0 or y.max(initial=0) >= c or not np.all(np.isfinite(prob)):
        problem = "holds a class index out of range or a non-finite probability"
    elif abs(float(np.mean(prob.argmax(1) == y)) - row.accuracy) > 1e-6:
        problem = (f"gives test accuracy {np.mean(prob.argmax(1) == y):.6f}, the run's "
                   f"metrics.json {row.accuracy:.6f} (a file from another run?)")
    elif "latent" in out and (out["latent"].ndim != 2 or len(out["latent"]) != n):
        problem = f"holds a latent of shape {out['latent'].shape} for {n} test rows"
    if problem:
        raise CmixError(f"{f}: {problem}")
    out["y"], out["prob"] = y.astype(np.int64), prob
    return out


def trait_provenance(parsed: list[dict], trait: str) -> list:
    """The distinct ``provenance`` records of a trait's runs (None for runs without one)."""
    seen = {}
    for m in parsed:
        if m["trait"] == trait:
            p = m.get("provenance")
            seen.setdefault(json.dumps(p, sort_keys=True), p)
    return list(seen.values())


def restrict_to_grid(results: pd.DataFrame, parsed: list[dict], grid: dict
                     ) -> tuple[pd.DataFrame, list[dict]]:
    """The runs inside ``grid`` (others, e.g. of a method no longer configured, are
    left out with a log line)."""
    inside = (results["trait"].isin(grid["traits"]) & results["method"].isin(grid["methods"])
              & results["budget"].isin(grid["budgets"]) & results["seed"].isin(grid["seeds"]))
    if not inside.all():
        log(f"report: {int((~inside).sum())} run(s) found outside the requested grid are "
            "left out")
    keep = np.flatnonzero(inside.to_numpy())
    return results.iloc[keep].reset_index(drop=True), [parsed[i] for i in keep]
