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

from ..atomic import atomic_outputs, check_writable_dir
from ..logs import log
from ..outputs import previous_outputs, recorded_outputs
from .collect import collect_results, summarise
from .figures import report_figures
from .page import html_page
from .verdicts import answers, headline


def write_report(runs_dir, out_dir, grid: dict | None = None) -> dict:
    """Collect ``runs_dir`` and write the report files into ``out_dir``; returns counts.

    grid: {"traits", "methods", "budgets", "seeds"} the runs were asked for (runs
    outside it are left out, cells of it without a run are listed as missing); None
    infers it from the runs (:func:`infer_grid`). ``out_dir`` holding files that no
    ``cmix report`` wrote is a CmixError, raised before any work
    (:func:`cmix.outputs.previous_outputs`)."""
    import matplotlib      # heavy: only when a report is drawn
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
    figs = report_figures(runs_dir, results, summary, parsed, traits)
    page = html_page(runs_dir, results, parsed, summary, missing, head, figs, ans)
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
