"""The evaluation report: collect run folders' metrics.json into tables, plots and
one self-contained HTML page.

``write_report(runs_dir, out_dir)`` writes into ``out_dir`` (all files appear together or
none do):

- ``results.tsv``: one row per trait x method x budget x seed (test metrics, split
  sizes, pseudo-label accuracy/coverage, wall seconds).
- ``summary.tsv``: per trait x method x budget, mean / sd / n over seeds of accuracy,
  balanced accuracy, AUROC (macro one-vs-rest for multi-class) and pseudo-label accuracy;
  ``complete`` says whether the cell has every seed of the trait's grid.
- ``missing.tsv``: the grid cells (trait x method x budget x seed) with no run. The grid
  is the one asked for (``cmix report --traits/--methods/--budgets/--seeds``; the
  workflow passes its config), or else every trait, method, budget and seed seen in
  any run, crossed.
- ``<trait>.png`` (accuracy, balanced accuracy, AUROC against the budget on a log x
  axis, mean +- sd error bars, one line per method), ``accuracy_by_trait.png`` (one
  panel per trait: the paper's figure), ``pseudo_label_accuracy.png``.
- ``report.html``: the tables and the PNGs (base64), the data (stores, SNP counts,
  sample counts per split, test-split hash), configs, devices and versions.

No sample IDs: metrics.json files hold none, and the report copies only counts.
"""

from __future__ import annotations

import base64
import html
import io
import json
import re
from pathlib import Path

import numpy as np
import pandas as pd

from .learn.methods import METHODS, method_rank
from .io import CmixError, atomic_outputs, check_writable_dir, log

METRICS = [("accuracy", "Accuracy"), ("balanced_accuracy", "Balanced accuracy"),
           ("auroc", "AUROC (macro one-vs-rest if > 2 classes)")]
RESULT_COLUMNS = ["trait", "method", "budget", "seed", "accuracy", "balanced_accuracy",
                  "auroc", "n_classes", "n_snps", "n_labeled", "n_train_labeled",
                  "n_validation", "n_unlabeled", "n_test", "test_majority_rate",
                  "pseudo_label_accuracy",
                  "pseudo_label_coverage", "wall_seconds", "device", "store",
                  "test_split_sha256", "store_sha256", "run_dir"]


# ------------------------------------------------------------------ collect
def _result_row(m: dict, run_dir: str) -> dict:
    """One results.tsv row (RESULT_COLUMNS) from a parsed metrics.json."""
    test = m["test"]
    auroc = test.get("auroc", test.get("macro_auroc"))
    pl = m.get("pseudo_labels") or {}
    return {"trait": str(m["trait"]), "method": str(m["method"]),
            "budget": int(m["budget"]), "seed": int(m["seed"]),
            "accuracy": float(test["accuracy"]),
            "balanced_accuracy": float(test["balanced_accuracy"]),
            "auroc": np.nan if auroc is None else float(auroc),
            "n_classes": len(m["class_names"]), "n_snps": m.get("n_snps"),
            **{k: int(m[k]) for k in ("n_labeled", "n_train_labeled", "n_validation",
                                      "n_unlabeled", "n_test")},
            "test_majority_rate": m.get("test_majority_rate"),
            "pseudo_label_accuracy": pl.get("accuracy"),
            "pseudo_label_coverage": pl.get("coverage"),
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


def collect_results(runs_dir) -> tuple[pd.DataFrame, list[dict]]:
    """Every metrics.json under ``runs_dir`` as one row each, sorted; also the parsed
    metrics. Raises CmixError for no metrics, unreadable files, duplicate cells, and
    different test splits (test_split_sha256) within one trait."""
    runs_dir = Path(runs_dir)
    if not runs_dir.is_dir():
        raise CmixError(f"{runs_dir}: runs folder not found")
    files = sorted(runs_dir.rglob("metrics.json"))
    if not files:
        raise CmixError(f"{runs_dir}: no metrics.json found under this folder (run "
                        "`cmix train ... --out DIR` first)")
    rows, parsed, seen = [], [], {}
    for f in files:
        try:
            m = json.loads(f.read_text())
            row = _result_row(m, str(f.parent.relative_to(runs_dir)))
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
                for key in ["accuracy", "balanced_accuracy", "auroc", "pseudo_label_accuracy",
                            "wall_seconds"]:
                    v = pd.to_numeric(cell[key], errors="coerce").dropna().to_numpy(float)
                    row[f"{key}_mean"] = float(v.mean()) if len(v) else np.nan
                    row[f"{key}_sd"] = float(v.std(ddof=1)) if len(v) > 1 else np.nan
                    if key == "accuracy":
                        row["n"] = int(len(v))
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


# ------------------------------------------------------------------ plots
def _style(methods):
    import matplotlib.pyplot as plt

    cmap = plt.get_cmap("tab10")
    known = {m: i for i, m in enumerate(METHODS)}
    styles = {}
    for i, m in enumerate(methods):
        c = cmap(known.get(m, i) % 10)
        styles[m] = {"color": c, "marker": "o" if m.startswith("cmix") else "s",
                     "linestyle": "-" if m == "cmix" else ("--" if m.startswith("cmix") else "-"),
                     "linewidth": 2.4 if m == "cmix" else 1.4}
        if m == "prs":
            styles[m].update(color="black", marker="D", linestyle=":")
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
    ax.set_ylabel(label)
    ax.grid(True, which="both", alpha=0.3)


def plot_trait(summary_trait: pd.DataFrame, trait: str, n_classes: int, path,
               majority: float | None = None) -> None:
    """One figure, three panels (accuracy, balanced accuracy, AUROC) against the budget;
    ``majority``: the test split's commonest-class share, drawn on the accuracy panel."""
    import matplotlib.pyplot as plt

    styles = _style(list(dict.fromkeys(summary_trait["method"])))
    fig, axes = plt.subplots(1, 3, figsize=(16, 5.2))
    chance = {"accuracy": None, "balanced_accuracy": 1.0 / n_classes, "auroc": 0.5}
    for ax, (key, label) in zip(axes, METRICS):
        _panel(ax, summary_trait, key, label, styles, chance[key],
               majority if key == "accuracy" else None)
        ax.set_title(f"{trait}: {label.split(' (')[0].lower()}")
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="center right", fontsize=9, title="method")
    fig.suptitle(f"{trait} ({n_classes} classes): test metrics, mean +- sd over seeds; "
                 "dash-dot = chance, dotted = majority class; open marker = fewer seeds than "
                 "the grid", fontsize=11)
    fig.tight_layout(rect=(0, 0, 0.89, 0.95))
    fig.savefig(path, dpi=110, format="png")
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
    fig, axes = plt.subplots(1, len(traits), figsize=(5.8 * len(traits) + 2.2, 5), squeeze=False)
    for ax, trait in zip(axes[0], traits):
        _panel(ax, s[s["trait"] == trait], key, label, styles,
               majority=(majority or {}).get(trait))
        ax.set_title(trait)
    handles = {}
    for ax in axes[0]:
        for h, lab in zip(*ax.get_legend_handles_labels()):
            handles.setdefault(lab, h)
    fig.legend(list(handles.values()), list(handles), loc="center right", fontsize=9,
               title="method")
    fig.suptitle(f"{label} against the labeled budget, mean +- sd over seeds; "
                 + ("dotted = majority class; " if majority else "")
                 + "open marker = fewer seeds than the grid", fontsize=11)
    fig.tight_layout(rect=(0, 0, 1 - 2.0 / (5.8 * len(traits) + 2.2), 0.94))
    fig.savefig(path, dpi=110, format="png")
    plt.close(fig)
    return True


# ------------------------------------------------------------------ HTML
def _table(df: pd.DataFrame, floatfmt="{:.4f}") -> str:
    def fmt(v):
        if isinstance(v, (float, np.floating)):
            return "" if np.isnan(v) else floatfmt.format(v)
        return html.escape(str(v))
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in df.columns)
    body = "".join("<tr>" + "".join(f"<td>{fmt(v)}</td>" for v in r) + "</tr>"
                   for r in df.itertuples(index=False))
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _img(png: bytes, alt: str) -> str:
    return (f'<img alt="{html.escape(alt)}" src="data:image/png;base64,'
            f'{base64.b64encode(png).decode()}">')


def _data_tables(results: pd.DataFrame, parsed: list[dict]) -> str:
    parts = []
    for trait, g in results.groupby("trait", sort=False):
        m0 = next(m for m in parsed if m["trait"] == trait)
        n_snps = g["n_snps"].dropna()
        splits = (g.groupby("budget")[["n_labeled", "n_train_labeled", "n_validation",
                                       "n_unlabeled", "n_test"]].agg(["min", "max"]))
        splits.columns = [f"{a} ({b})" for a, b in splits.columns]
        splits = splits.reset_index()
        parts.append(
            f"<h3>{html.escape(trait)}</h3><ul>"
            f"<li>store: {html.escape(', '.join(sorted(set(map(str, g['store'])))))}</li>"
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


def _config_table(parsed: list[dict]) -> str:
    by_method: dict = {}
    for m in parsed:
        by_method.setdefault(m["method"], []).append(json.dumps(m.get("config", {}),
                                                                sort_keys=True))
    keys = sorted({k for m in parsed for k in (m.get("config") or {})})
    methods = sorted(by_method, key=method_rank)
    rows = []
    for k in keys:
        vals = []
        for method in methods:
            cfgs = {json.dumps(json.loads(c).get(k)) for c in by_method[method]}
            vals.append(" | ".join(sorted(cfgs)))
        rows.append([k] + vals)
    df = pd.DataFrame(rows, columns=["key"] + methods)
    n_variants = {m: len(set(v)) for m, v in by_method.items()}
    note = ("" if all(n == 1 for n in n_variants.values()) else
            "<p><b>Note:</b> some methods ran with more than one config (values separated by |).</p>")
    return note + _table(df)


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


def _figures(results: pd.DataFrame, summary: pd.DataFrame, traits: list[str]) -> dict:
    """{file name: PNG bytes}: one figure per trait, accuracy by trait, and pseudo-label
    accuracy where any run has pseudo-labels."""
    safe = {t: re.sub(r"[^A-Za-z0-9_.-]+", "_", t) for t in traits}
    pngs: dict[str, bytes] = {}

    def render(fn, *args, **kw) -> bytes | None:
        buf = io.BytesIO()
        ok = fn(*args, buf, **kw)
        return buf.getvalue() if ok is not False else None

    majority = {}
    for t in traits:
        rates = pd.to_numeric(results.loc[results["trait"] == t, "test_majority_rate"],
                              errors="coerce").dropna()
        majority[t] = float(rates.iloc[0]) if len(rates) else None
    for t in traits:
        n_classes = int(results.loc[results["trait"] == t, "n_classes"].iloc[0])
        pngs[f"{safe[t]}.png"] = render(plot_trait, summary[summary["trait"] == t], t,
                                        n_classes, majority=majority[t])
    pngs["accuracy_by_trait.png"] = render(plot_by_trait, summary, "accuracy", "Test accuracy",
                                           majority=majority)
    # the unlabeled rows are drawn from the stratified training split: same class shares
    pl = render(plot_by_trait, summary, "pseudo_label_accuracy",
                "Pseudo-label accuracy (on the unlabeled rows they cover)", majority=majority)
    if pl is not None:
        pngs["pseudo_label_accuracy.png"] = pl
    return pngs


def _html_page(runs_dir, results: pd.DataFrame, parsed: list[dict], summary: pd.DataFrame,
               missing: pd.DataFrame, pngs: dict, traits: list[str]) -> str:
    """report.html: the grid status, the data, the figures (inline), the summary, missing
    runs, wall time per method and the configs."""
    devices = ", ".join(sorted(set(map(str, results["device"].dropna()))))
    versions = parsed[0].get("versions", {})
    n_cells = len(summary)
    n_incomplete = int((~summary["complete"]).sum())
    status = ("complete: every trait x method x budget has every seed" if len(missing) == 0
              else f"INCOMPLETE: {len(missing)} runs missing, {n_incomplete} of {n_cells} "
                   "cells have fewer seeds than the grid (their means use only the seeds "
                   "present; see the table of missing runs)")
    wall = (results.groupby("method")["wall_seconds"].agg(["mean", "sum", "count"])
            .reset_index().rename(columns={"mean": "mean s per run", "sum": "total s",
                                           "count": "runs"}))
    wall = wall.iloc[np.argsort([method_rank(m) for m in wall["method"]], kind="stable")]
    show = summary[["trait", "method", "budget", "n", "complete", "accuracy_mean",
                    "accuracy_sd", "balanced_accuracy_mean", "balanced_accuracy_sd",
                    "auroc_mean", "auroc_sd", "pseudo_label_accuracy_mean"]
                   + (["accuracy_gain_over_covariates_mean", "auroc_gain_over_covariates_mean"]
                      if summary["accuracy_gain_over_covariates_mean"].notna().any() else [])]
    captions = {"pseudo_label_accuracy.png":
                "Dotted: the majority-class share; pseudo-labels on that line say no more "
                "than the class prior. cmix_selfsl_pl shares cmix's pre-training, hence its "
                "pseudo-labels: its line lies under cmix's."}
    figs = "".join(f"<h3>{html.escape(name)}</h3>"
                   + (f"<p>{html.escape(captions[name])}</p>" if name in captions else "")
                   + _img(png, name) for name, png in pngs.items())
    return f"""<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>cmix evaluation report</title>
<style>body{{font-family:sans-serif;max-width:1500px;margin:2em auto;}}
table{{border-collapse:collapse;font-size:12px;margin:0.5em 0 1.5em 0}}
td,th{{border:1px solid #bbb;padding:2px 6px;text-align:right}} th{{background:#eee}}
img{{max-width:100%;border:1px solid #ddd;margin-bottom:1em}}
.warn{{color:#a00;font-weight:bold}}</style></head><body>
<h1>cmix evaluation report</h1>
<p>{len(results)} runs from <code>{html.escape(str(Path(runs_dir).name))}</code>: {len(traits)}
trait(s), methods {html.escape(', '.join(sorted(results['method'].unique(), key=method_rank)))}.
Grid status: <span class="{'warn' if len(missing) else ''}">{html.escape(status)}</span>.</p>
<p>Metrics are on each trait's fixed test split (never used for training or model
selection); mean +- sd (ddof 1) over seeds; n = seeds present. AUROC is macro one-vs-rest
for multi-class traits. Devices: {html.escape(devices)}. Versions: {html.escape(json.dumps(versions))}.</p>
<h2>Data</h2>{_data_tables(results, parsed)}
<h2>Figures</h2>{figs}
<h2>Summary (mean, sd over seeds)</h2>{_table(show)}
<h2>Missing runs</h2>{_table(missing) if len(missing) else '<p>None: the grid is complete.</p>'}
<h2>Wall time per method</h2>{_table(wall, '{:.2f}')}
<h2>Configs (per method; the trainer's keys plus baseline keys)</h2>{_config_table(parsed)}
</body></html>
"""


def write_report(runs_dir, out_dir, grid: dict | None = None) -> dict:
    """Collect ``runs_dir`` and write the report files into ``out_dir``; returns counts.

    grid: {"traits", "methods", "budgets", "seeds"} the runs were asked for (runs
    outside it are left out, cells of it without a run are listed as missing); None
    infers it from the runs (:func:`infer_grid`)."""
    import matplotlib
    matplotlib.use("Agg")

    results, parsed = collect_results(runs_dir)
    if grid is not None:
        grid = {"traits": [str(t) for t in grid["traits"]],
                "methods": [str(m) for m in grid["methods"]],
                "budgets": [int(b) for b in grid["budgets"]],
                "seeds": [int(s) for s in grid["seeds"]]}
        results, parsed = restrict_to_grid(results, parsed, grid)
        if results.empty:
            raise CmixError(f"{runs_dir}: none of the runs found is in the requested grid")
    summary, missing = summarise(results, grid)
    out_dir = check_writable_dir(out_dir)
    traits = list(dict.fromkeys(results["trait"]))
    pngs = _figures(results, summary, traits)
    page = _html_page(runs_dir, results, parsed, summary, missing, pngs, traits)
    names = ["results.tsv", "summary.tsv", "missing.tsv", "report.html", *pngs]
    with atomic_outputs(*[out_dir / n for n in names]) as tmps:
        tmp = dict(zip(names, tmps))
        results.to_csv(tmp["results.tsv"], sep="\t", index=False, na_rep="NA")
        summary.to_csv(tmp["summary.tsv"], sep="\t", index=False, na_rep="NA",
                       float_format="%.6g")
        missing.to_csv(tmp["missing.tsv"], sep="\t", index=False)
        tmp["report.html"].write_text(page)
        for name, png in pngs.items():
            tmp[name].write_bytes(png)
    log(f"report: {len(results)} runs, {len(traits)} trait(s), {len(missing)} missing runs -> "
        f"{out_dir}")
    return {"n_runs": len(results), "n_traits": len(traits), "n_missing": len(missing),
            "files": names}
