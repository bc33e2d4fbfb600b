"""The report's matplotlib figures: metrics against the labeled budget (per trait, and
one panel per trait), ROC / reliability / precision-recall curves, and a t-SNE of a
run's latent. Each draws into a path or buffer and returns False when there is nothing
to draw.

matplotlib.pyplot is imported inside each function: it is heavy, and
:func:`cmix.report.write.write_report` picks its backend (Agg) before it is loaded."""

from __future__ import annotations

import numpy as np
import pandas as pd
from sklearn.manifold import TSNE
from sklearn.metrics import precision_recall_curve, roc_curve
from threadpoolctl import threadpool_limits

from ..learn.methods import METHODS
from .verdicts import is_cmix


METRICS = [("accuracy", "Accuracy"), ("balanced_accuracy", "Balanced accuracy"),
           ("auroc", "AUROC (macro one-vs-rest if > 2 classes)")]
#: short axis labels of the metrics (the captions say what macro means)
AXIS = {"accuracy": "accuracy", "balanced_accuracy": "balanced accuracy", "auroc": "AUROC",
        "pseudo_label_accuracy": "pseudo-label accuracy"}


RARE = 0.10            # classes under this share of the test split get precision-recall curves


def _style(methods):
    import matplotlib.pyplot as plt   # heavy; after write_report picks Agg

    # a colour of its own for each method but prs (black) and covariates (grey): cmix
    # tab10's blue, the others tab10's other colours but its grey, then tab20b's, in
    # registry order
    palette = [plt.get_cmap("tab10")(i) for i in range(10) if i != 7] + \
        [plt.get_cmap("tab20b")(i) for i in (0, 4, 8, 12, 16)]
    order = ["cmix"] + [m for m in METHODS if m not in ("cmix", "prs", "covariates")]
    order += [m for m in methods if m not in order]
    styles = {}
    for m in methods:
        styles[m] = {"color": palette[order.index(m) % len(palette)], "marker": "o" if m == "cmix" else ("^" if m.startswith("cmix") else "s"),
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
        # cmix's ablations a few percent right of cmix (log x): equal means stay two lines
        x = g["budget"].to_numpy(float) * (1.04 if method.startswith("cmix_") else 1.0)
        ax.errorbar(x, y, yerr=sd, capsize=3, markersize=5, label=method,
                    **styles[method])
        part = ~g["complete"].to_numpy(bool)
        if part.any():              # cells with fewer seeds than the grid: open markers
            ax.plot(x[part], y[part], linestyle="none", markersize=9,
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
    import matplotlib.pyplot as plt   # heavy; after write_report picks Agg

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
    import matplotlib.pyplot as plt   # heavy; after write_report picks Agg

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
    import matplotlib.pyplot as plt   # heavy; after write_report picks Agg

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
    import matplotlib.pyplot as plt   # heavy; after write_report picks Agg

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
