"""The evaluation report: collect run folders' metrics.json (and predictions.npz) into
tables, plots and one self-contained HTML page.

``write_report(runs_dir, out_dir)`` writes into ``out_dir`` (all files appear together or
none do), a new or empty folder or one an earlier ``cmix report`` wrote: the names it
wrote are listed in the folder's ``.cmix-manifest.json`` (:func:`cmix.outputs.recorded_outputs`),
and of the files there only those are ever replaced or removed (an earlier report's
figure this one does not write again); a folder holding other files is refused:

- ``results.tsv``: one row per trait x method x budget x seed (test accuracy, balanced
  accuracy, AUROC, AP, MCC, Brier score; split sizes, pseudo-label accuracy/coverage,
  wall seconds).
- ``summary.tsv``: per trait x method x budget, mean / sd / n over seeds of each metric
  and pseudo-label accuracy; ``complete`` says whether the cell has every seed of the
  trait's grid; the gain over ``covariates`` paired by seed.
- ``headline.tsv``: per trait x budget x method, accuracy mean and sd, the paired gain
  over ``covariates`` and (cmix and its ablations) over the best non-cmix method, each
  with a paired test's p and its Holm adjustment over every comparison in the table
  (:func:`headline`), and the verdict (better / level / worse).
- ``answers.tsv``: per trait x budget, the best method by mean test accuracy, the
  runner-up, their paired difference with its p and Holm adjustment, and why a
  difference is not shown (:func:`answers`).
- ``missing.tsv``: the grid cells (trait x method x budget x seed) with no run. The grid
  is the one asked for (``cmix report --traits/--methods/--budgets/--seeds``; the
  workflow passes its config), or else every trait, method, budget and seed seen in
  any run, crossed.
- ``<trait>.png`` (accuracy, balanced accuracy, AUROC against the budget on a log x
  axis, mean +- sd error bars, one line per method), ``<trait>.curves.png`` (ROC,
  reliability and, for classes under 10% of the test split, precision-recall curves at
  the largest budget), ``<trait>.tsne.png`` (t-SNE of one cmix run's test-row latent),
  ``accuracy_by_trait.png`` (one panel per trait: the paper's figure),
  ``pseudo_label_accuracy.png``.
- ``report.html``: first the answers (best method per trait and budget, a note when
  the seeds are too few to show any difference, accuracy against the budget per
  trait), then the headline table (with a caution for traits whose SNPs come from a
  GWAS that may include the cohort), the figures (PNG, base64), the data per trait
  (stores, SNP source, sample filters, split sizes), the full summary, versions and
  configs.

No sample IDs: metrics.json and predictions.npz files hold none, and the report copies
only counts and per-row test predictions without IDs into figures.
"""

from __future__ import annotations

import base64
import html
import io
import json
import re
import zipfile
from pathlib import Path

import numpy as np
import pandas as pd

from .learn.methods import METHODS, method_rank
from .atomic import atomic_outputs, check_writable_dir
from .errors import CmixError
from .logs import log
from .outputs import previous_outputs, recorded_outputs

METRICS = [("accuracy", "Accuracy"), ("balanced_accuracy", "Balanced accuracy"),
           ("auroc", "AUROC (macro one-vs-rest if > 2 classes)")]
#: short axis labels of the metrics (the captions say what macro means)
AXIS = {"accuracy": "accuracy", "balanced_accuracy": "balanced accuracy", "auroc": "AUROC",
        "pseudo_label_accuracy": "pseudo-label accuracy"}
#: every test metric in results.tsv / summary.tsv, and the range a valid value lies in
METRIC_RANGES = {"accuracy": (0, 1), "balanced_accuracy": (0, 1), "auroc": (0, 1),
                 "ap": (0, 1), "mcc": (-1, 1), "brier": (0, 1)}
PREDICTIONS_FILE = "predictions.npz"
RARE = 0.10            # classes under this share of the test split get precision-recall curves
ALPHA = 0.05           # Holm-adjusted p below which a gain counts as better / worse
WILCOXON_MIN = 10      # paired seeds from which the Wilcoxon signed-rank test replaces the t-test
RESULT_COLUMNS = ["trait", "method", "budget", "seed", "accuracy", "balanced_accuracy",
                  "auroc", "ap", "mcc", "brier", "n_classes", "n_snps", "n_labeled", "n_train_labeled",
                  "n_validation", "n_unlabeled", "n_test", "test_majority_rate",
                  "pseudo_label_accuracy",
                  "pseudo_label_coverage", "pseudo_labels_used", "wall_seconds", "device", "store",
                  "test_split_sha256", "store_sha256", "run_dir"]


# ------------------------------------------------------------------ collect
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


def paired_test(d: np.ndarray) -> tuple[float, str]:
    """(two-sided p, test name) for paired differences ``d`` (one per seed) against 0:
    the Wilcoxon signed-rank test from WILCOXON_MIN pairs on, else the one-sample t-test
    on the differences (the paired t-test). p is 1 when every difference is 0, NaN for
    fewer than 2 pairs or for equal non-zero differences (no spread to test against;
    "equal" up to float rounding, 1e-9 of their size: differences of accuracies of the
    same test people are multiples of 1 / n_test, and their float sums differ in the last
    bits, which a t-test would read as a spread of 1e-17 and a p of 1e-15)."""
    from scipy import stats

    d = np.asarray(d, dtype=float)
    d = d[np.isfinite(d)]
    if len(d) < 2:
        return np.nan, ""
    tiny = 1e-9 * max(1.0, float(np.abs(d).max()))
    if np.all(np.abs(d) <= tiny):
        return 1.0, "none (all differences 0)"
    if len(d) >= WILCOXON_MIN:
        return float(stats.wilcoxon(d).pvalue), "Wilcoxon signed-rank"
    if np.ptp(d) <= tiny:
        return np.nan, ""
    return float(stats.ttest_1samp(d, 0.0).pvalue), "paired t"


def is_cmix(method: str) -> bool:
    """cmix and its ablations (compared with the best method outside that family)."""
    return method == "cmix" or method.startswith("cmix_")


def headline(results: pd.DataFrame, key: str = "accuracy") -> pd.DataFrame:
    """Per trait x budget x method with runs (report order): mean, sd and n over seeds
    of ``key``; ``gain_cov_*``: the paired difference to ``covariates`` (mean, sd over
    seeds both ran); for cmix and its ablations ``gain_best_*``: the paired difference to
    the non-cmix method with the highest mean at that trait and budget (``best_other``).
    Each difference gets a paired test (:func:`paired_test`) and ``*_p_holm``, the Holm
    adjustment (statsmodels ``multipletests``) within its family: the gains over
    covariates together, the cmix family's gains over the best other method together
    (``n_tests_holm_cov``, ``n_tests_holm_best``), so adding baselines to the grid does
    not weaken cmix's verdict. ``verdict`` (cmix family): "better" / "worse" where the
    gain over the best other method is positive / negative with Holm p < ALPHA; else
    "level" where the mean gain is within the seeds' spread (|mean| <= its sd), and
    "inconclusive" where it is larger than the spread but too few seeds confirm it."""
    from statsmodels.stats.multitest import multipletests

    rows = []
    for (trait, budget), g in results.groupby(["trait", "budget"], sort=True):
        by_method = {m: gm.set_index("seed")[key].astype(float)
                     for m, gm in g.groupby("method", sort=False)}
        means = {m: float(v.mean()) for m, v in by_method.items()}
        others = [m for m in by_method if not is_cmix(m) and np.isfinite(means[m])]
        best = max(others, key=lambda m: means[m]) if others else None
        for method in sorted(by_method, key=method_rank):
            v = by_method[method]
            row = {"trait": trait, "budget": int(budget), "method": method, "n": len(v),
                   f"{key}_mean": means[method],
                   f"{key}_sd": float(v.std(ddof=1)) if len(v) > 1 else np.nan}
            for tag, ref in (("cov", "covariates"), ("best", best if is_cmix(method) else None)):
                d = (v - by_method[ref]).dropna() if ref in by_method and ref != method \
                    else pd.Series(dtype=float)
                p, test = paired_test(d.to_numpy())
                row.update({f"gain_{tag}_mean": float(d.mean()) if len(d) else np.nan,
                            f"gain_{tag}_sd": float(d.std(ddof=1)) if len(d) > 1 else np.nan,
                            f"gain_{tag}_n": len(d), f"gain_{tag}_test": test,
                            f"gain_{tag}_p": p})
            row["best_other"] = best if is_cmix(method) else ""
            rows.append(row)
    out = pd.DataFrame(rows)
    if out.empty:
        return out
    for tag in ("cov", "best"):
        ps = out[f"gain_{tag}_p"].to_numpy(float)
        ok = np.isfinite(ps)
        adj = np.full(len(ps), np.nan)
        if ok.any():
            adj[ok] = multipletests(ps[ok], method="holm")[1]
        out[f"gain_{tag}_p_holm"] = adj
        out[f"n_tests_holm_{tag}"] = int(ok.sum())
    verdict = []
    for r in out.itertuples():
        if not is_cmix(r.method) or not np.isfinite(r.gain_best_mean):
            verdict.append("")
        elif np.isfinite(r.gain_best_p_holm) and r.gain_best_p_holm < ALPHA:
            verdict.append("better" if r.gain_best_mean > 0 else "worse")
        elif np.isfinite(r.gain_best_sd) and abs(r.gain_best_mean) <= r.gain_best_sd:
            verdict.append("level")
        else:
            verdict.append("inconclusive")
    out["verdict"] = verdict
    return out


def min_attainable_p(n: int) -> float:
    """The smallest two-sided p any paired test free of assumptions about the differences'
    distribution (the exact sign-flip test, the exact Wilcoxon signed-rank test) can give
    with ``n`` paired seeds: 2 / 2**n, the chance that all n differences share one sign
    when the two methods are alike (1 for fewer than 2 seeds)."""
    return 1.0 if n < 2 else min(1.0, 2.0 ** (1 - n))


def seeds_needed(n_tests: int, alpha: float = ALPHA) -> int:
    """The fewest paired seeds with which the smallest attainable p
    (:func:`min_attainable_p`), Holm-adjusted over ``n_tests`` comparisons (the smallest
    p is multiplied by their number), falls below ``alpha``."""
    n = 2
    while max(1, n_tests) * min_attainable_p(n) >= alpha:
        n += 1
    return n


def missing_p_reason(d: np.ndarray) -> str:
    """Why :func:`paired_test` gives no p for the per-seed differences ``d``: "no seed
    in common", "one seed", "identical differences across seeds: no variance, no test";
    "" when it gives one."""
    d = np.asarray(d, dtype=float)
    d = d[np.isfinite(d)]
    if len(d) == 0:
        return "no seed in common"
    if len(d) == 1:
        return "one seed"
    return ("identical differences across seeds: no variance, no test"
            if not np.isfinite(paired_test(d)[0]) else "")


def answers(results: pd.DataFrame, key: str = "accuracy", traits=None) -> pd.DataFrame:
    """Per trait x budget, the best method by mean ``key`` over seeds (any method) and the
    runner-up: their means, the paired difference best - runner-up (mean, sd, n seeds
    both ran), its p (:func:`paired_test`), ``p_holm`` (Holm over these comparisons),
    ``reason`` where there is no p (:func:`missing_p_reason`) or where the seeds are too
    few for any difference to be shown (the smallest attainable p, Holm-adjusted, is not
    below ALPHA: :func:`min_attainable_p`), ``shown`` (difference > 0 with Holm p <
    ALPHA and enough seeds) and ``answer``: the best method, or "level with RUNNER-UP"
    when the difference is not shown. traits: their order (default: as the runs list
    them)."""
    from statsmodels.stats.multitest import multipletests

    rows = []
    for trait in traits or dict.fromkeys(results["trait"]):
        gt = results[results["trait"] == trait]
        for budget in sorted(gt["budget"].unique()):
            g = gt[gt["budget"] == budget]
            rows.extend(_answer_row(g, trait, int(budget), key))
    out = pd.DataFrame(rows)
    if out.empty:
        return out
    ps = out["p"].to_numpy(float)
    ok = np.isfinite(ps)
    adj = np.full(len(ps), np.nan)
    if ok.any():
        adj[ok] = multipletests(ps[ok], method="holm")[1]
    out["p_holm"] = adj
    m = int(ok.sum())
    out["n_tests_holm"] = m
    floor = np.array([min(1.0, max(1, m) * min_attainable_p(n)) for n in out["n_pairs"]])
    too_few = ok & (floor >= ALPHA)
    say = too_few & (out["reason"] == "").to_numpy()
    out.loc[say, "reason"] = [f"{n} seeds: too few to show a difference (smallest "
                              f"attainable Holm p {f:.2g})"
                              for n, f in zip(out.loc[say, "n_pairs"], floor[say])]
    out["shown"] = ok & ~too_few & (adj < ALPHA) & (out["diff_mean"].to_numpy(float) > 0)
    out["answer"] = [r.best if r.shown or not r.runner_up
                     else f"{r.best}, level with {r.runner_up}" for r in out.itertuples()]
    return out


def _answer_row(g: pd.DataFrame, trait: str, budget: int, key: str) -> list[dict]:
    """:func:`answers`' row of one trait and budget (the runs ``g``), before Holm; [] when
    no method has a finite mean."""
    by_method = {m: gm.set_index("seed")[key].astype(float)
                 for m, gm in g.groupby("method", sort=False)}
    means = {m: float(v.mean()) for m, v in by_method.items() if np.isfinite(v.mean())}
    order = sorted(means, key=lambda m: (-means[m], method_rank(m)))
    if not order:
        return []
    best = order[0]
    runner = order[1] if len(order) > 1 else ""
    d = ((by_method[best] - by_method[runner]).dropna().to_numpy(float) if runner
         else np.array([]))
    p, test = paired_test(d) if runner else (np.nan, "")
    n_best = int(by_method[best].notna().sum())
    return [{"trait": trait, "budget": budget, "best": best,
             f"best_{key}_mean": means[best],
             f"best_{key}_sd": float(by_method[best].std(ddof=1)) if n_best > 1 else np.nan,
             "n_best": n_best, "runner_up": runner,
             f"runner_up_{key}_mean": means.get(runner, np.nan),
             "diff_mean": float(d.mean()) if len(d) else np.nan,
             "diff_sd": float(d.std(ddof=1)) if len(d) > 1 else np.nan,
             "n_pairs": len(d), "test": test, "p": p,
             "reason": missing_p_reason(d) if runner else "no other method"}]


# ------------------------------------------------------------------ plots
def _style(methods):
    import matplotlib.pyplot as plt

    # a colour of its own for each method but prs (black) and covariates (grey): cmix
    # tab10's blue, the others tab10's other colours but its grey, then tab20b's, in
    # registry order
    palette = [plt.get_cmap("tab10")(i) for i in range(10) if i != 7] + \
        [plt.get_cmap("tab20b")(i) for i in (0, 4, 8, 12, 16)]
    order = ["cmix"] + [m for m in METHODS if m not in ("cmix", "prs", "covariates")]
    order += [m for m in methods if m not in order]
    styles = {}
    for m in methods:
        styles[m] = {"color": palette[order.index(m) % len(palette)], "marker": "o" if m.startswith("cmix") else "s",
                     "linestyle": "-" if m == "cmix" else ("--" if m.startswith("cmix") else "-"),
                     "linewidth": 2.4 if m == "cmix" else 1.4}
        if m == "prs":
            styles[m].update(color="black", marker="D", linestyle=":")
        if m == "covariates":           # the reference line
            styles[m].update(color="0.5", marker="v", linestyle="-.")
    return styles


def _panel(ax, summary_trait, key, label, styles, chance=None, majority=None):
    for method, g in summary_trait.groupby("method", sort=False):
        g = g.sort_values("budget")
        y = g[f"{key}_mean"].to_numpy(float)
        if np.all(np.isnan(y)):
            continue
        sd = np.nan_to_num(g[f"{key}_sd"].to_numpy(float))
        ax.errorbar(g["budget"], y, yerr=sd, capsize=3, markersize=5, label=method,
                    **styles[method])
        part = ~g["complete"].to_numpy(bool)
        if part.any():              # cells with fewer seeds than the grid: open markers
            ax.plot(g["budget"].to_numpy()[part], y[part], linestyle="none", markersize=9,
                    marker=styles[method]["marker"], markerfacecolor="white",
                    markeredgecolor=styles[method]["color"], zorder=5)
    if chance is not None:
        ax.axhline(chance, color="grey", linewidth=0.8, linestyle="-.", zorder=0)
    if majority is not None and np.isfinite(majority):
        ax.axhline(majority, color="grey", linewidth=1.0, linestyle=(0, (1, 2)), zorder=0)
        ax.annotate("majority class", (0.01, majority), xycoords=("axes fraction", "data"),
                    fontsize=8, color="dimgrey", va="bottom")
    ax.set_xscale("log")
    budgets = sorted(summary_trait["budget"].unique())
    ax.set_xticks(budgets)
    ax.set_xticklabels([f"{b:,}" for b in budgets])
    ax.minorticks_off()
    ax.set_xlabel("labeled training samples (budget, log scale)")
    ax.set_ylabel(AXIS.get(key, label))
    ax.grid(True, which="both", alpha=0.3)


def plot_trait(summary_trait: pd.DataFrame, trait: str, n_classes: int, path,
               majority: float | None = None) -> None:
    """One figure, three panels (accuracy, balanced accuracy, AUROC) against the budget;
    ``majority``: the test split's commonest-class share, drawn on the accuracy panel."""
    import matplotlib.pyplot as plt

    styles = _style(list(dict.fromkeys(summary_trait["method"])))
    fig, axes = plt.subplots(1, 3, figsize=(14, 4.6))
    chance = {"accuracy": None, "balanced_accuracy": 1.0 / n_classes, "auroc": 0.5}
    for ax, (key, label) in zip(axes, METRICS):
        _panel(ax, summary_trait, key, label, styles, chance[key],
               majority if key == "accuracy" else None)
        ax.set_title(label.split(" (")[0])
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="center right", fontsize=9, title="method")
    fig.suptitle(f"{trait} ({n_classes} classes): test metrics, mean +- sd over seeds",
                 fontsize=11)
    fig.tight_layout(rect=(0, 0, 0.87, 0.95))
    fig.savefig(path, dpi=100, format="png")
    plt.close(fig)


def plot_by_trait(summary: pd.DataFrame, key: str, label: str, path, methods=None,
                  majority: dict | None = None) -> bool:
    """One panel per trait of ``key`` against the budget; False if nothing to plot.
    ``majority``: trait -> commonest-class share, drawn as a dotted line."""
    import matplotlib.pyplot as plt

    s = summary if methods is None else summary[summary["method"].isin(methods)]
    s = s[~s[f"{key}_mean"].isna()]
    traits = list(dict.fromkeys(s["trait"]))
    if not traits:
        return False
    styles = _style(list(dict.fromkeys(summary["method"])))
    ncol = min(len(traits), 3)
    nrow = -(-len(traits) // ncol)
    width = 4.6 * ncol + 2.2
    fig, axes = plt.subplots(nrow, ncol, figsize=(width, 4.2 * nrow + 0.4), squeeze=False)
    for ax in axes.ravel()[len(traits):]:
        ax.set_visible(False)
    for ax, trait in zip(axes.ravel(), traits):
        _panel(ax, s[s["trait"] == trait], key, label, styles,
               majority=(majority or {}).get(trait))
        ax.set_title(trait)
    handles = {}
    for ax in axes.ravel()[:len(traits)]:
        for h, lab in zip(*ax.get_legend_handles_labels()):
            handles.setdefault(lab, h)
    fig.legend(list(handles.values()), list(handles), loc="center right", fontsize=9,
               title="method")
    fig.suptitle(f"{label} against the labeled budget, mean +- sd over seeds", fontsize=11)
    fig.tight_layout(rect=(0, 0, 1 - 2.0 / width, 0.95))
    fig.savefig(path, dpi=100, format="png")
    plt.close(fig)
    return True


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


def _curve_methods(methods) -> list[str]:
    """The methods drawn in the curve figures: cmix and every non-cmix method (the cmix
    ablations are left out to keep the panels readable)."""
    return [m for m in methods if m == "cmix" or not is_cmix(m)]


def plot_curves(preds: dict, trait: str, class_names: list, budget: int, path) -> bool:
    """ROC, reliability and (for classes under RARE of the test rows) precision-recall
    curves at one budget: preds maps method -> list of predictions dicts (one per seed;
    the seeds' test predictions are pooled). Binary: of class 1; more classes: the macro
    mean of the one-vs-rest ROC curves and the one-vs-rest reliability of every class
    pooled. False when there is nothing to draw."""
    import matplotlib.pyplot as plt
    from sklearn.metrics import precision_recall_curve, roc_curve

    methods = [m for m in _curve_methods(preds) if preds[m]]
    if not methods:
        return False
    styles = _style(methods)
    pooled = {m: (np.concatenate([p["y"] for p in preds[m]]),
                  np.concatenate([p["prob"] for p in preds[m]])) for m in methods}
    y0 = preds[methods[0]][0]["y"]
    c = len(class_names)
    share = np.bincount(y0, minlength=c) / len(y0)
    rare = [k for k in np.argsort(share) if 0 < share[k] < RARE][:2]
    n_panels = 2 + len(rare)
    fig, axes = plt.subplots(1, n_panels, figsize=(3.9 * n_panels + 2.0, 3.9), squeeze=False)
    axes = axes[0]
    grid = np.linspace(0, 1, 201)
    bins = np.linspace(0, 1, 11)
    for m in methods:
        y, prob = pooled[m]
        st = {k: styles[m][k] for k in ("color", "linestyle", "linewidth")}
        if c == 2:
            fpr, tpr, _ = roc_curve(y == 1, prob[:, 1])
            axes[0].plot(fpr, tpr, label=m, **st)
            score, hit = prob[:, 1], (y == 1)
        else:
            tprs = []
            for k in np.unique(y):
                fpr, tpr, _ = roc_curve(y == k, prob[:, k])
                tprs.append(np.interp(grid, fpr, tpr))
            axes[0].plot(grid, np.mean(tprs, axis=0), label=m, **st)
            score, hit = prob.ravel(), (y[:, None] == np.arange(c)[None, :]).ravel()
        mean_p, freq = _reliability_points(score, hit, bins)
        axes[1].plot(mean_p, freq, marker=styles[m]["marker"], markersize=4, label=m, **st)
        for ax, k in zip(axes[2:], rare):
            prec, rec, _ = precision_recall_curve(y == k, prob[:, k])
            ax.plot(rec, prec, label=m, **st)
    _label_curve_axes(axes, class_names, rare, share)
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="center right", fontsize=9, title="method")
    fig.suptitle(f"{trait}, budget {budget:,}", fontsize=11)
    fig.tight_layout(rect=(0, 0, 1 - 2.0 / (3.9 * n_panels + 2.0), 0.95))
    fig.savefig(path, dpi=100, format="png")
    plt.close(fig)
    return True


def _reliability_points(score: np.ndarray, hit: np.ndarray, bins: np.ndarray):
    """Reliability curve points: per equal-width bin of ``score`` (edges ``bins``) holding
    at least 5 rows, the mean predicted probability and the observed share of ``hit``
    (bool, like score (n,))."""
    idx = np.clip(np.digitize(score, bins) - 1, 0, len(bins) - 2)
    count = np.bincount(idx, minlength=len(bins) - 1)
    keep = count >= 5
    mean_p = np.bincount(idx, weights=score, minlength=len(bins) - 1)[keep] / count[keep]
    freq = np.bincount(idx, weights=hit, minlength=len(bins) - 1)[keep] / count[keep]
    return mean_p, freq


def _label_curve_axes(axes, class_names: list, rare: list, share: np.ndarray) -> None:
    """Titles, labels, chance lines and grids of the ROC, reliability and precision-recall
    panels; rare: the class indices with a precision-recall panel, share: (n_classes,)
    the test split's class shares."""
    c = len(class_names)
    axes[0].plot([0, 1], [0, 1], color="grey", linewidth=0.8, linestyle="-.")
    axes[0].set(xlabel="false positive rate", ylabel="true positive rate",
                title="ROC" + (f" ({class_names[1]})" if c == 2 else " (macro one-vs-rest)"))
    axes[1].plot([0, 1], [0, 1], color="grey", linewidth=0.8, linestyle="-.")
    axes[1].set(xlabel="predicted probability", ylabel="observed share",
                title="Reliability" + (f" ({class_names[1]})" if c == 2 else " (all classes)"),
                xlim=(0, 1), ylim=(0, 1))
    for ax, k in zip(axes[2:], rare):
        ax.axhline(share[k], color="grey", linewidth=0.8, linestyle="-.")
        ax.set(xlabel="recall", ylabel="precision", xlim=(0, 1), ylim=(0, 1.02),
               title=f"Precision-recall: {class_names[k]} ({100 * share[k]:.1f}%)")
    for ax in axes:
        ax.grid(True, alpha=0.3)
        ax.set_aspect("equal", adjustable="box")


def plot_tsne(latent: np.ndarray, y: np.ndarray, class_names: list, title: str, path,
              max_rows: int = 1000, seed: int = 0) -> bool:
    """2-D t-SNE (scikit-learn, random_state ``seed``, PCA start, one thread: the same
    picture on any machine, and no thread oversubscription on a busy one) of ``latent``
    (n, d), at most ``max_rows`` rows drawn with ``seed``, one colour per class of ``y``."""
    import matplotlib.pyplot as plt
    from sklearn.manifold import TSNE
    from threadpoolctl import threadpool_limits

    n = len(latent)
    if n < 10:
        return False
    rows = np.sort(np.random.default_rng(seed).permutation(n)[:max_rows])
    x = np.asarray(latent, dtype=np.float64)[rows]
    with threadpool_limits(1):
        emb = TSNE(n_components=2, perplexity=min(30.0, (len(rows) - 1) / 3), init="pca",
                   random_state=seed).fit_transform(x)
    fig, ax = plt.subplots(figsize=(6.6, 4.8))
    cmap = plt.get_cmap("tab10")
    for k, name in enumerate(class_names):
        on = y[rows] == k
        if on.any():
            ax.scatter(emb[on, 0], emb[on, 1], s=6, alpha=0.7, color=cmap(k % 10),
                       label=f"{name} ({int(on.sum())})")
    ax.set(xticks=[], yticks=[], title=title)
    ax.legend(loc="center left", bbox_to_anchor=(1.01, 0.5), fontsize=9, markerscale=2.5,
              title="true class")
    fig.tight_layout()
    fig.savefig(path, dpi=100, format="png")
    plt.close(fig)
    return True


# ------------------------------------------------------------------ HTML
def _table(df: pd.DataFrame, floatfmt="{:.4f}", wrap=()) -> str:
    """An HTML table of ``df`` (column names with spaces for underscores; cells of the
    columns in ``wrap`` may wrap, others do not)."""
    def fmt(v):
        if isinstance(v, (float, np.floating)):
            return "" if np.isnan(v) else floatfmt.format(v)
        return html.escape(str(v))
    head = "".join(f"<th>{html.escape(str(c).replace('_', ' '))}</th>" for c in df.columns)
    def cls(c, v):
        return ('class="wrap"' if c in wrap else
                'class="l"' if isinstance(v, str) else "")
    body = "".join("<tr>" + "".join(f"<td {cls(c, v)}>{fmt(v)}</td>"
                                    for c, v in zip(df.columns, r)) + "</tr>"
                   for r in df.itertuples(index=False))
    return f'<div class="tw"><table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>'


def _img(png: bytes, alt: str) -> str:
    return (f'<img alt="{html.escape(alt)}" src="data:image/png;base64,'
            f'{base64.b64encode(png).decode()}">')


def _pm(mean: float, sd: float, sign: bool = False) -> str:
    """'0.8123 ± 0.0100' (sd left out when NaN; '' when the mean is NaN)."""
    if not np.isfinite(mean):
        return ""
    m = f"{mean:+.4f}" if sign else f"{mean:.4f}"
    return m if not np.isfinite(sd) else f"{m} ± {sd:.4f}"


def _p(p: float) -> str:
    return "" if not np.isfinite(p) else ("<0.001" if p < 0.001 else f"{p:.3f}")


VERDICT_MARK = {"better": ("▲ better", "better"), "level": ("● level", "level"),
                "inconclusive": ("? inconclusive", "level"), "worse": ("▼ worse", "worse")}


def _headline_html(head: pd.DataFrame, key: str = "accuracy") -> str:
    """The headline table: one row per trait x budget x method, trait and budget cells
    spanning their rows, cmix's rows in bold with the verdict mark."""
    cols = ["trait", "budget", "method", "n", f"{key} mean ± sd", "gain over covariates",
            "p (Holm)", "gain over best non-cmix", "p (Holm)", "cmix vs best non-cmix"]
    rows = []
    for trait, gt in head.groupby("trait", sort=False):
        first_t = True
        for budget, gb in gt.groupby("budget", sort=True):
            first_b = True
            for r in gb.itertuples():
                cells = []
                if first_t:
                    cells.append(f'<td rowspan="{len(gt)}" class="l">{html.escape(trait)}</td>')
                    first_t = False
                if first_b:
                    cells.append(f'<td rowspan="{len(gb)}">{budget:,}</td>')
                    first_b = False
                mark, cls = VERDICT_MARK.get(r.verdict, ("", ""))
                best = (f" vs {html.escape(r.best_other)}" if r.best_other
                        and np.isfinite(r.gain_best_mean) else "")
                cells += [f'<td class="l">{html.escape(r.method)}</td>', f"<td>{r.n}</td>",
                          f"<td>{_pm(getattr(r, f'{key}_mean'), getattr(r, f'{key}_sd'))}</td>",
                          f"<td>{_pm(r.gain_cov_mean, r.gain_cov_sd, sign=True)}</td>",
                          f"<td>{_p(r.gain_cov_p_holm)}</td>",
                          f"<td>{_pm(r.gain_best_mean, r.gain_best_sd, sign=True)}{best}</td>",
                          f"<td>{_p(r.gain_best_p_holm)}</td>",
                          f'<td class="{cls}">{mark}</td>']
                rows.append(f'<tr class="{"cmix" if r.method == "cmix" else ""}">'
                            + "".join(cells) + "</tr>")
    header = "".join(f"<th>{html.escape(c)}</th>" for c in cols)
    return (f'<div class="tw"><table id="headline"><thead><tr>{header}</tr></thead>'
            f'<tbody>{"".join(rows)}</tbody></table></div>')


def _glance_html(head: pd.DataFrame, key: str = "accuracy") -> str:
    """One row per trait x budget where cmix ran: cmix against the best non-cmix method
    and against covariates (rows of the headline table, nothing recomputed)."""
    c = head[head["method"] == "cmix"]
    if c.empty:
        return ""
    means = head.set_index(["trait", "budget", "method"])
    rows = []
    for r in c.itertuples():
        other = (means.loc[(r.trait, r.budget, r.best_other)] if r.best_other else None)
        mark, cls = VERDICT_MARK.get(r.verdict, ("", ""))
        p_best = _p(r.gain_best_p_holm)
        p_cov = _p(r.gain_cov_p_holm)
        rows.append(
            f'<tr><td class="l">{html.escape(r.trait)}</td><td>{r.budget:,}</td>'
            f"<td>{_pm(getattr(r, f'{key}_mean'), getattr(r, f'{key}_sd'))}</td>"
            + (f'<td class="l">{html.escape(r.best_other)}</td>'
               f"<td>{_pm(other[f'{key}_mean'], other[f'{key}_sd'])}</td>"
               if other is not None else "<td></td><td></td>")
            + f"<td>{_pm(r.gain_best_mean, r.gain_best_sd, sign=True)}"
            + (f" (p {p_best})" if p_best else "") + "</td>"
            + f"<td>{_pm(r.gain_cov_mean, r.gain_cov_sd, sign=True)}"
            + (f" (p {p_cov})" if p_cov else "") + "</td>"
            + f'<td class="{cls}">{mark}</td></tr>')
    cols = ["trait", "budget", f"cmix {key}", "best non-cmix method", f"its {key}",
            "cmix minus best (Holm p)", "cmix minus covariates (Holm p)", "verdict"]
    header = "".join(f"<th>{html.escape(h)}</th>" for h in cols)
    return ("<p>cmix at each trait and budget, against the best other method and the "
            "covariates alone (verdict: see how to read this, below):</p>"
            f'<div class="tw"><table id="glance"><thead><tr>{header}</tr></thead>'
            f'<tbody>{"".join(rows)}</tbody></table></div>')


def _answers_html(ans: pd.DataFrame, key: str = "accuracy") -> str:
    """The first table: per trait x budget the answer (best method, or level with the
    runner-up), both means, the paired difference, its Holm p and, where it has none or
    it cannot show a difference, why."""
    cols = ["trait", "budget", "answer", f"best: {key} mean ± sd (seeds)",
            f"runner-up: {key} mean", "best minus runner-up (paired)", "p (Holm)",
            "no difference shown because"]
    rows = []
    for trait, gt in ans.groupby("trait", sort=False):
        first = True
        for r in gt.itertuples():
            cells = []
            if first:
                cells.append(f'<td rowspan="{len(gt)}" class="l">{html.escape(trait)}</td>')
                first = False
            best = getattr(r, f"best_{key}_mean")
            diff = 0.0 if abs(r.diff_mean) < 5e-5 else r.diff_mean    # no "-0.0000"
            runner = getattr(r, f"runner_up_{key}_mean")
            why = "" if r.shown else (r.reason or (
                "difference not significant" if np.isfinite(r.p_holm) else ""))
            cells += [f"<td>{r.budget:,}</td>",
                      f'<td class="l {"better" if r.shown else "level"}">'
                      f"{html.escape(r.answer)}</td>",
                      f"<td>{_pm(best, getattr(r, f'best_{key}_sd'))} ({r.n_best})</td>",
                      (f'<td>{_pm(runner, np.nan)} {html.escape(r.runner_up)}</td>'
                       if r.runner_up else "<td></td>"),
                      f"<td>{_pm(diff, r.diff_sd, sign=True)}</td>",
                      f"<td>{_p(r.p_holm)}</td>",
                      f'<td class="wrap">{html.escape(why)}</td>']
            rows.append("<tr>" + "".join(cells) + "</tr>")
    header = "".join(f"<th>{html.escape(c)}</th>" for c in cols)
    return (f'<div class="tw"><table id="answers"><thead><tr>{header}</tr></thead>'
            f'<tbody>{"".join(rows)}</tbody></table></div>')


def seeds_note(ans: pd.DataFrame) -> str:
    """A plain sentence when the seeds are too few for any difference in ``ans``
    (:func:`answers`) to be shown: the smallest attainable p for that many seeds
    (:func:`min_attainable_p`), Holm-adjusted, and the seeds needed; "" otherwise."""
    if ans.empty:
        return ""
    n = int(ans["n_pairs"].max())
    m = max(1, int(ans["n_tests_holm"].iloc[0]))
    need = seeds_needed(m)
    if n < 2:
        return (f"Only one seed per method: no paired test is possible, so no difference "
                f"between methods can be shown. Run at least {need} seeds.")
    floor = min_attainable_p(n)
    if m * floor < ALPHA:
        return ""
    return (f"Too few seeds to show any difference: with {n} seeds, a paired test that "
            f"assumes nothing about how the differences are distributed cannot give a p "
            f"below 2/2^{n} = {floor:.3g} (every seed's difference of one sign), and Holm "
            f"over the {m} comparisons multiplies the smallest p by {m}: {m} × {floor:.3g} = "
            f"{m * floor:.3g}, not below {ALPHA}. Read the best method as a ranking, not a shown "
            f"difference (t-test p values below assume normal differences, which {n} "
            f"seeds cannot check). Run at least {need} seeds to be able to show one.")


def trait_provenance(parsed: list[dict], trait: str) -> list:
    """The distinct ``provenance`` records of a trait's runs (None for runs without one)."""
    seen = {}
    for m in parsed:
        if m["trait"] == trait:
            p = m.get("provenance")
            seen.setdefault(json.dumps(p, sort_keys=True), p)
    return list(seen.values())


def overlap_caution(prov: dict | None) -> str | None:
    """The caution for a snp_source of kind external whose overlap is yes or unknown
    (or not given), or for runs whose store records no snp_source; else None."""
    src = (prov or {}).get("snp_source") or {}
    if not src:
        return ("the store does not record where its SNPs came from (written by cmix store "
                "without --sumstats or --discovery): if a GWAS that included this cohort's test "
                "people chose them, every method's test metric on this trait may be "
                "optimistic. Record the source when writing the store.")
    if src.get("kind") != "external":
        return None
    overlap = str(src.get("overlap", "unknown"))
    if overlap not in ("yes", "unknown"):
        return None
    how = ("includes" if overlap == "yes" else "may include (overlap: unknown)")
    return (f"SNPs and PRS betas come from external summary statistics "
            f"({src.get('file', 'file not recorded')}) whose GWAS {how} this cohort's "
            "people, test people among them: every method's test metric on this trait may "
            "be optimistic (the test people's phenotypes helped choose the SNPs).")


def _provenance_items(prov: dict | None) -> str:
    """<li> lines of one provenance record: SNP source and sample filters."""
    if prov is None:
        return ("<li>provenance: not recorded (the store was written without --sumstats, "
                "--discovery or --sample-filters, or by a cmix before stores recorded "
                "them)</li>")
    src = prov.get("snp_source")
    if src is None:
        line = "not recorded (the store was written without --sumstats or --discovery)"
    elif src.get("kind") == "external":
        line = (f"external summary statistics <code>{html.escape(str(src.get('file')))}"
                f"</code>; GWAS overlap with this cohort: <b>{html.escape(str(src.get('overlap', 'unknown')))}</b>")
    elif src.get("kind") == "discovery":
        line = (f"GWAS on a discovery split of this cohort ({src.get('n_discovery')} people, "
                f"left out of the store; {html.escape(str(src.get('engine', '')))}; IDs "
                f"sha256 {html.escape(str(src.get('ids_sha256', ''))[:12])}...)")
    else:
        line = html.escape(json.dumps(src, sort_keys=True))
    filters = prov.get("sample_filters")
    if filters is None:
        ftxt = "not recorded"
    else:
        ftxt = "; ".join(
            f"{html.escape(str(k))}: " + (f'<span class="warn">{html.escape(str(v))}</span>'
                                           if str(v) in ("not given", "not applied")
                                           else html.escape(str(v)))
            for k, v in filters.items())
    return f"<li>SNP source: {line}</li><li>sample filters: {ftxt}</li>"


def _data_tables(results: pd.DataFrame, parsed: list[dict]) -> str:
    parts = []
    for trait, g in results.groupby("trait", sort=False):
        m0 = next(m for m in parsed if m["trait"] == trait)
        n_snps = g["n_snps"].dropna()
        splits = (g.groupby("budget")[["n_labeled", "n_train_labeled", "n_validation",
                                       "n_unlabeled", "n_test"]].agg(["min", "max"]))
        splits.columns = [f"{a} ({b})" for a, b in splits.columns]
        splits = splits.reset_index()
        provs = trait_provenance(parsed, trait)
        prov = "".join(_provenance_items(p) for p in provs)
        if len(provs) > 1:
            prov = (f"<li class='warn'>the runs of this trait record {len(provs)} different "
                    f"provenances:</li>{prov}")
        parts.append(
            f"<h3>{html.escape(trait)}</h3><ul>"
            f"<li>store: {html.escape(', '.join(sorted(set(map(str, g['store'])))))}</li>"
            f"{prov}"
            f"<li>SNPs: {int(n_snps.iloc[0]) if len(n_snps) else 'not recorded in metrics.json'}"
            f"</li><li>classes: {html.escape(', '.join(map(str, m0['class_names'])))}</li>"
            f"<li>test split: {int(g['n_test'].iloc[0])} samples, sha256 "
            f"{html.escape(g['test_split_sha256'].iloc[0][:16])}... (identical in all "
            f"{len(g)} runs)</li>"
            f"<li>methods: {html.escape(', '.join(dict.fromkeys(g['method'])))}; budgets: "
            f"{', '.join(map(str, sorted(g['budget'].unique())))}; seeds: "
            f"{', '.join(map(str, sorted(g['seed'].unique())))}</li></ul>"
            f"<p>Samples per split, by budget (min / max over methods and seeds):</p>"
            + _table(splits))
    return "".join(parts)


def _versions_table(parsed: list[dict]) -> pd.DataFrame:
    """package | version(s) seen in the runs | runs (when more than one version)."""
    seen: dict = {}
    for m in parsed:
        for k, v in (m.get("versions") or {}).items():
            seen.setdefault(str(k), {}).setdefault(str(v), 0)
            seen[str(k)][str(v)] += 1
    return pd.DataFrame([{"package": k, "version": " | ".join(
        v if len(vs) == 1 else f"{v} ({n} runs)" for v, n in vs.items())}
        for k, vs in seen.items()], columns=["package", "version"])


def _config_table(parsed: list[dict]) -> pd.DataFrame:
    """key | value | methods that ran with it: one row per distinct value of each config
    key (a key with more than one value for one method shows that method twice)."""
    by: dict = {}
    for m in parsed:
        for k, v in (m.get("config") or {}).items():
            by.setdefault(k, {}).setdefault(json.dumps(v, sort_keys=True), set()).add(m["method"])
    rows = [{"key": k, "value": v, "methods": ", ".join(sorted(ms, key=method_rank))}
            for k in sorted(by) for v, ms in by[k].items()]
    return pd.DataFrame(rows, columns=["key", "value", "methods"])


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


def _render(fn, *args, **kw) -> bytes | None:
    """PNG bytes of plot function ``fn`` (called with a buffer after ``args``), or None
    when it returns False (nothing to draw)."""
    buf = io.BytesIO()
    ok = fn(*args, buf, **kw)
    return buf.getvalue() if ok is not False else None


def _figures(runs_dir, results: pd.DataFrame, summary: pd.DataFrame, parsed: list[dict],
             traits: list[str]) -> dict:
    """{file name: (PNG bytes, caption)}: accuracy by trait; per trait the metrics against
    the budget, the curves at the largest budget with predictions, and the t-SNE of one
    run's latent (:func:`_trait_figures`); pseudo-label accuracy where any run has
    pseudo-labels."""
    safe = {t: re.sub(r"[^A-Za-z0-9_.-]+", "_", t) for t in traits}
    figs: dict[str, tuple] = {}
    majority = {}
    for t in traits:
        rates = pd.to_numeric(results.loc[results["trait"] == t, "test_majority_rate"],
                              errors="coerce").dropna()
        majority[t] = float(rates.iloc[0]) if len(rates) else None
    png = _render(plot_by_trait, summary, "accuracy", "Test accuracy", majority=majority)
    if png is not None:
        figs["accuracy_by_trait.png"] = (png, (
            "Test accuracy of every method against the labeled budget (log scale), one "
            "panel per trait. Dotted: the test split's majority-class share. Open markers: "
            "cells with fewer seeds than the grid."))
    for t in traits:
        class_names = next(m["class_names"] for m in parsed if m["trait"] == t)
        figs.update(_trait_figures(runs_dir, results[results["trait"] == t],
                                   summary[summary["trait"] == t], t, safe[t], class_names,
                                   majority[t]))
    # the unlabeled rows are drawn from the stratified training split: same class shares
    png = _render(plot_by_trait, summary, "pseudo_label_accuracy",
                  "Pseudo-label accuracy", majority=majority)
    if png is not None:
        figs["pseudo_label_accuracy.png"] = (png, (
            "Pseudo-label accuracy on the unlabeled rows they cover. Dotted: the "
            "majority-class share; pseudo-labels on that line say no more than the class "
            "prior." + (" cmix_selfsl_pl shares cmix's pre-training, hence its pseudo-labels: "
                        "its line lies under cmix's."
                        if {"cmix", "cmix_selfsl_pl"} <= set(results["method"]) else "")))
    return figs


def _trait_figures(runs_dir, trait_results: pd.DataFrame, trait_summary: pd.DataFrame,
                   trait: str, stem: str, class_names: list, majority: float | None) -> dict:
    """One trait's figures, {file name: (PNG bytes or None, caption)} in page order:
    ``<stem>.png`` (metrics against the budget), and when some run at the largest budget
    left predictions, ``<stem>.curves.png`` and ``<stem>.tsne.png`` (a run with a latent:
    cmix first, then the lowest seed)."""
    t = trait
    figs = {f"{stem}.png": (_render(
        plot_trait, trait_summary, t, len(class_names), majority=majority), (
        f"{t}: accuracy, balanced accuracy and AUROC against the budget, mean +- sd "
        "over seeds. Dash-dot: chance; dotted: majority class; open markers: fewer "
        "seeds than the grid."))}
    preds = _largest_budget_predictions(runs_dir, trait_results)
    if not preds:
        return figs
    budget = next(iter(preds.values()))[0][0]
    order = sorted(preds, key=method_rank)
    png = _render(plot_curves, {m: [p for _, _, p in preds[m]] for m in order}, t,
                  class_names, int(budget))
    if png is not None:
        y0 = next(iter(preds.values()))[0][2]["y"]
        figs[f"{stem}.curves.png"] = (png, _curves_caption(t, int(budget), class_names, y0))
    with_latent = [(is_cmix(m) is False, m != "cmix", seed, m, p)
                   for m in order for _, seed, p in preds[m] if "latent" in p]
    if with_latent:
        _, _, seed, m, pr = min(with_latent, key=lambda r: r[:4])
        png = _render(plot_tsne, pr["latent"], pr["y"], class_names,
                      f"{t}: {m}, budget {int(budget):,}, seed {seed}")
        if png is not None:
            figs[f"{stem}.tsne.png"] = (png, (
                f"{t}: 2-D t-SNE (scikit-learn, PCA start, random_state 0; at most 1,000 "
                f"test rows) of the {m} run's latent (the frozen encoder's output, "
                f"{pr['latent'].shape[1]} dimensions) for the test rows, coloured by "
                "their true class. Classes that separate here are separable by the "
                "predictor; distances between clusters in t-SNE carry little meaning."))
    return figs


def _largest_budget_predictions(runs_dir, trait_results: pd.DataFrame) -> dict:
    """{method: [(budget, seed, predictions dict), ...]} of the runs at the largest budget
    of one trait that has any run with predictions (:func:`load_predictions`)."""
    preds: dict = {}
    lacking = []
    for row in trait_results.sort_values("budget", ascending=False).itertuples():
        if preds and row.budget != next(iter(preds.values()))[0][0]:
            break
        pr = load_predictions(runs_dir, row)
        if pr is not None:
            preds.setdefault(row.method, []).append((row.budget, row.seed, pr))
        else:
            lacking.append((row.budget, f"{row.method} seed {row.seed}"))
    budget = next(iter(preds.values()))[0][0] if preds else None
    lacking = [name for b, name in lacking if b == budget]
    if lacking:
        log(f"{len(lacking)} run(s) at budget {budget} have no {PREDICTIONS_FILE} and are left "
            f"out of the pooled curves ({', '.join(lacking[:5])}"
            + (", ..." if len(lacking) > 5 else "") + ")")
    return preds


def _curves_caption(t: str, budget: int, class_names: list, y0: np.ndarray) -> str:
    """Caption of the ROC / reliability / precision-recall figure; y0: one run's test
    classes (n_test,), for the shares of the rare classes named in it."""
    share = np.bincount(y0, minlength=len(class_names)) / len(y0)
    rare = [class_names[k] for k in range(len(class_names)) if 0 < share[k] < RARE]
    return (
        f"{t} at budget {budget:,}: each method's test predictions, all its "
        "seeds pooled (cmix ablations left out). ROC: "
        + ("of class " + str(class_names[1]) if len(class_names) == 2 else
           "the mean of the one-vs-rest curves (macro)")
        + "; the diagonal is chance. Reliability: predicted probability against the "
        "observed share in 10 equal-width bins (5 rows at least); on the diagonal "
        "the probabilities mean what they say"
        + ("" if len(class_names) == 2 else ", every class's one-vs-rest pairs pooled")
        + ". " + (f"Precision-recall for the classes under {RARE:.0%} of the test "
                  f"split ({', '.join(map(str, rare[:2]))}; dash-dot: the class "
                  "share, what a random ranking reaches)." if rare else
                  f"No class is under {RARE:.0%} of the test split: no "
                  "precision-recall panel."))


HOW_TO_READ = """Each row of the headline table is one method at one labeled budget for one
trait: the test accuracy's mean ± sd over seeds (n = seeds), on the trait's fixed test
split, which no method saw in training or model selection. <i>Gain over covariates</i> is
the method's accuracy minus the covariates-only model's, seed by seed (the same labeled
rows), then mean ± sd; <i>gain over best non-cmix</i> does the same for cmix and its
ablations against the non-cmix method with the highest mean at that budget (chosen on the
same test results, which favours the baseline). Each gain has a paired test of the
per-seed differences ({tests}), and its p is Holm-adjusted within its column: over all
{n_cov} gains over covariates, and over all {n_best} gains of cmix and its ablations over the
best non-cmix method, so a p under {alpha} holds across its column. The mark says whether
cmix is <span class="better">▲ better</span> than the best non-cmix method (gain above 0,
adjusted p &lt; {alpha}), <span class="worse">▼ worse</span> (gain below 0, adjusted p &lt;
{alpha}), <span class="level">● level</span> (not significant, and the mean gain no larger
than the seeds' spread, its sd) or <span class="level">? inconclusive</span> (not
significant, but the mean gain is larger than the seeds' spread: too few seeds to tell;
run more). The ± and p describe the spread over seeds on one fixed test split: they leave
out the sampling error of the test people themselves (an accuracy near 0.8 on 500 test
people has a binomial standard error near 0.018), so a small gain that is "better" here
may not carry over to another sample of people. AP (average precision), MCC
(Matthews correlation of the predicted class; 0 = chance) and the Brier score (half the
mean squared distance between the predicted probabilities and the one-hot truth; 0 is
perfect, lower is better) are in the summary table and results.tsv."""


def _grid_status(summary: pd.DataFrame, missing: pd.DataFrame) -> str:
    """The page's one-line grid status: complete, or how many runs are missing and how
    many cells have fewer seeds than the grid."""
    n_cells = len(summary)
    n_incomplete = int((~summary["complete"]).sum())
    return ("complete: every trait x method x budget has every seed" if len(missing) == 0
            else f"INCOMPLETE: {len(missing)} runs missing, {n_incomplete} of {n_cells} "
                 "cells have fewer seeds than the grid (their means use only the seeds "
                 "present; see the table of missing runs)")


def _caution_html(parsed: list[dict], traits: list[str]) -> str:
    """The caution box listing the traits whose GWAS may overlap the test people
    (:func:`overlap_caution`); empty when none."""
    cautions = []
    for t in traits:
        for prov in trait_provenance(parsed, t):
            c = overlap_caution(prov)
            if c:
                cautions.append(f"<b>{html.escape(t)}</b>: {html.escape(c)}")
    return ("" if not cautions else '<div class="caution" id="caution"><b>Caution: '
            "possible overlap between the GWAS and the test people.</b><ul>"
            + "".join(f"<li>{c}</li>" for c in cautions) + "</ul></div>")


def _wall_table(results: pd.DataFrame) -> pd.DataFrame:
    """Mean and total wall seconds and the number of runs per method, methods in report
    order."""
    wall = (results.groupby("method")["wall_seconds"].agg(["mean", "sum", "count"])
            .reset_index().rename(columns={"mean": "mean s per run", "sum": "total s",
                                           "count": "runs"}))
    return wall.iloc[np.argsort([method_rank(m) for m in wall["method"]], kind="stable")]


def _summary_html(summary: pd.DataFrame) -> str:
    """One table per trait: every metric as mean ± sd over seeds, n, completeness and the
    pseudo-label accuracy."""
    show = summary[["trait", "method", "budget", "n", "complete"]].copy()
    for key in METRIC_RANGES:
        show[key] = [_pm(a, b) for a, b in zip(summary[f"{key}_mean"], summary[f"{key}_sd"])]
    show["pseudo-label accuracy"] = summary["pseudo_label_accuracy_mean"]
    show["pseudo-labels used (seeds)"] = [
        "" if not np.isfinite(u) else f"{int(u)} of {n}"
        for u, n in zip(summary["pseudo_labels_used"].astype(float), summary["n"])]
    return "".join(f"<h3>{html.escape(t)}</h3>" + _table(g.drop(columns="trait"))
                   for t, g in show.groupby("trait", sort=False))


def _how_to_read(head: pd.DataFrame) -> str:
    """:data:`HOW_TO_READ` with the paired tests used in the headline table, the number
    of Holm-adjusted comparisons and the significance level filled in."""
    tests = sorted({t for c in ("gain_cov_test", "gain_best_test") for t in head[c] if t
                    and not t.startswith("none")})
    return HOW_TO_READ.format(
        tests=f"the paired t-test below {WILCOXON_MIN} paired seeds, the Wilcoxon signed-rank "
              f"test from {WILCOXON_MIN} on; here: {', '.join(tests) or 'none'}",
        n_cov=int(head["n_tests_holm_cov"].iloc[0]), n_best=int(head["n_tests_holm_best"].iloc[0]),
        alpha=ALPHA)


# the CSS of report.html: tables scroll inside their box, images shrink to the page width
PAGE_STYLE = """<style>body{font-family:sans-serif;max-width:1200px;margin:1em auto;padding:0 12px;
line-height:1.4;box-sizing:border-box}
table{border-collapse:collapse;font-size:12px;margin:0.5em 0 1em 0}
td,th{border:1px solid #bbb;padding:2px 6px;text-align:right;vertical-align:top}
td{white-space:nowrap} th{background:#eee;vertical-align:bottom} td.l{text-align:left}
tr.cmix td{font-weight:bold} td.wrap{white-space:normal;overflow-wrap:anywhere;text-align:left}
.tw{max-width:100%;overflow-x:auto}
img{max-width:100%;height:auto;border:1px solid #ddd;display:block}
figure{margin:0 0 1.5em 0} figcaption{font-size:13px;color:#333;margin-bottom:0.3em}
.warn{color:#a00;font-weight:bold} .better{color:#070;font-weight:bold}
.worse{color:#b00;font-weight:bold} .level{color:#555}
.caution{border:2px solid #c60;background:#fff4e5;padding:0.5em 1em;margin:1em 0}
code{overflow-wrap:anywhere}</style>"""


def _html_page(runs_dir, results: pd.DataFrame, parsed: list[dict], summary: pd.DataFrame,
               missing: pd.DataFrame, head: pd.DataFrame, figs: dict,
               ans: pd.DataFrame) -> str:
    """report.html: first the answers (status, cautions, the best method per trait and
    budget, the note on too few seeds, accuracy against the budget per trait), then the
    detail: cmix against the others, the headline table, how to read it, the other
    figures, the data per trait, the full summary, missing runs, wall time, versions,
    configs."""
    traits = list(dict.fromkeys(results["trait"]))
    devices = ", ".join(sorted(set(map(str, results["device"].dropna()))))
    status = _grid_status(summary, missing)
    caution = _caution_html(parsed, traits)
    first_fig = "accuracy_by_trait.png"
    fig_html = "".join(
        f'<figure><figcaption>{html.escape(cap)}</figcaption>{_img(png, name)}</figure>'
        for name, (png, cap) in figs.items() if name != first_fig)
    top_fig = ("" if first_fig not in figs else
               f'<figure id="accuracy-figure"><figcaption>{html.escape(figs[first_fig][1])}'
               f"</figcaption>{_img(figs[first_fig][0], first_fig)}</figure>")
    note = seeds_note(ans)
    note_html = f'<p class="warn" id="seeds-note">{html.escape(note)}</p>' if note else ""
    return f"""<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>cmix evaluation report</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
{PAGE_STYLE}</head><body>
<h1>cmix evaluation report</h1>
<p>{len(results)} runs from <code>{html.escape(str(Path(runs_dir).name))}</code>: {len(traits)}
trait(s), methods {html.escape(', '.join(sorted(results['method'].unique(), key=method_rank)))}.
Grid status: <span class="{'warn' if len(missing) else ''}">{html.escape(status)}</span>.</p>
{caution}
<h2>Which method is best, per trait and labeled budget</h2>
<p>The method with the highest mean test accuracy over seeds (any method), against the
runner-up, paired by seed; "level with" where the difference is not shown.</p>
{note_html}
{_answers_html(ans)}
{top_fig}
<h2>Detail: test accuracy by trait, budget and method</h2>
{_glance_html(head)}
<p>Every method, each row against covariates and (cmix and its ablations) against the best
non-cmix method, paired by seed:</p>
{_headline_html(head)}
<h2>How to read this</h2><p>{_how_to_read(head)}</p>
<h2>Figures</h2>{fig_html}
<h2>Data</h2>{_data_tables(results, parsed)}
<h2>Summary: every metric, mean ± sd over seeds</h2>
<p>AUROC and AP are macro one-vs-rest for multi-class traits; MCC in [-1, 1]; Brier: lower is
better.</p>{_summary_html(summary)}
<h2>Missing runs</h2>{_table(missing) if len(missing) else '<p>None: the grid is complete.</p>'}
<h2>Wall time per method</h2>{_table(_wall_table(results), '{:.2f}')}
<h2>Versions</h2><p>Devices: {html.escape(devices)}.</p>{_table(_versions_table(parsed))}
<h2>Configs</h2><p>Each key's value and the methods that ran with it (the trainer's keys plus
the baselines' keys).</p>{_table(_config_table(parsed), wrap=("value", "methods"))}
</body></html>
"""


def write_report(runs_dir, out_dir, grid: dict | None = None) -> dict:
    """Collect ``runs_dir`` and write the report files into ``out_dir``; returns counts.

    grid: {"traits", "methods", "budgets", "seeds"} the runs were asked for (runs
    outside it are left out, cells of it without a run are listed as missing); None
    infers it from the runs (:func:`infer_grid`). ``out_dir`` holding files that no
    ``cmix report`` wrote is a CmixError, raised before any work
    (:func:`cmix.outputs.previous_outputs`)."""
    import matplotlib
    matplotlib.use("Agg")

    previous = previous_outputs(out_dir, "report")

    if grid is not None:
        grid = {"traits": [str(t) for t in grid["traits"]],
                "methods": [str(m) for m in grid["methods"]],
                "budgets": [int(b) for b in grid["budgets"]],
                "seeds": [int(s) for s in grid["seeds"]]}
    results, parsed = collect_results(runs_dir, grid)
    summary, missing = summarise(results, grid)
    head = headline(results)
    ans = answers(results, traits=list(dict.fromkeys(summary["trait"])))
    out_dir = check_writable_dir(out_dir)
    traits = list(dict.fromkeys(results["trait"]))
    figs = _figures(runs_dir, results, summary, parsed, traits)
    page = _html_page(runs_dir, results, parsed, summary, missing, head, figs, ans)
    names = ["results.tsv", "summary.tsv", "headline.tsv", "answers.tsv", "missing.tsv",
             "report.html", *figs]
    with recorded_outputs(out_dir, "report", names, previous) as stale, \
            atomic_outputs(*[out_dir / n for n in names]) as tmps:
        tmp = dict(zip(names, tmps))
        results.to_csv(tmp["results.tsv"], sep="\t", index=False, na_rep="NA")
        summary.to_csv(tmp["summary.tsv"], sep="\t", index=False, na_rep="NA",
                       float_format="%.6g")
        head.to_csv(tmp["headline.tsv"], sep="\t", index=False, na_rep="NA",
                    float_format="%.6g")
        ans.to_csv(tmp["answers.tsv"], sep="\t", index=False, na_rep="NA",
                   float_format="%.6g")
        missing.to_csv(tmp["missing.tsv"], sep="\t", index=False)
        tmp["report.html"].write_text(page)
        for name, (png, _) in figs.items():
            tmp[name].write_bytes(png)
    n_stale = len(stale)
    log(f"report: {len(results)} runs, {len(traits)} trait(s), {len(missing)} missing runs -> "
        f"{out_dir}" + (f" ({n_stale} file(s) of an earlier report removed)" if n_stale
                        else ""))
    return {"n_runs": len(results), "n_traits": len(traits), "n_missing": len(missing),
            "files": names}
