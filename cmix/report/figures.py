"""Which figures a report holds, as PNG bytes with their captions: accuracy by trait, per
trait the metrics against the budget, the curves at the largest budget with predictions
and one run's t-SNE, and pseudo-label accuracy (drawn by :mod:`cmix.report.plots`)."""

from __future__ import annotations

import io
import re

import numpy as np
import pandas as pd

from ..learn.methods import method_rank
from ..logs import log
from .collect import PREDICTIONS_FILE, load_predictions
from .plots import RARE, plot_by_trait, plot_curves, plot_trait, plot_tsne
from .verdicts import is_cmix


def _render(fn, *args, **kw) -> bytes | None:
    """PNG bytes of plot function ``fn`` (called with a buffer after ``args``), or None
    when it returns False (nothing to draw)."""
    buf = io.BytesIO()
    ok = fn(*args, buf, **kw)
    return buf.getvalue() if ok is not False else None


def report_figures(runs_dir, results: pd.DataFrame, summary: pd.DataFrame, parsed: list[dict],
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
