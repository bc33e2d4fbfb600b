"""report.html: one self-contained page, the answers first, then the detail (headline
table, how to read it, figures, the data per trait with its provenance and cautions,
the summary, missing runs, wall time, versions, configs). Its CSS is package data,
report.css beside this module."""

from __future__ import annotations

import html
import json
from importlib.resources import files
from pathlib import Path

import pandas as pd

from ..learn.methods import method_rank
from .collect import trait_provenance
from .tables import (answers_html, config_table, glance_html, headline_html, html_table,
                     img_tag, summary_html, versions_table, wall_table)
from .verdicts import ALPHA, WILCOXON_MIN, refusals, seeds_note


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
            + html_table(splits))
    return "".join(parts)


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


def _refusals_html(results: pd.DataFrame) -> str:
    """One line per trait where cmix's judge refused the pseudo-labels (:func:`refusals`):
    "cmix = cmix_selfsl" when it refused in every run (budget and seed)."""
    lines = []
    for r in refusals(results).itertuples():
        if r.refused == r.n:
            lines.append(f"{r.trait}: cmix = cmix_selfsl (pseudo-labels refused in {r.refused} "
                         f"of {r.n} runs: every budget and seed)")
        elif r.refused:
            lines.append(f"{r.trait}: pseudo-labels refused in {r.refused} of {r.n} cmix runs "
                         f"(budgets x seeds; those runs are cmix_selfsl's)")
    return ("" if not lines else '<ul id="refusals" class="warn">'
            + "".join(f"<li>{html.escape(x)}</li>" for x in lines) + "</ul>")


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


#: the CSS of report.html, package data (report.css beside this module): tables scroll
#: inside their box, images shrink to the page width
PAGE_STYLE = ("<style>" + (files("cmix.report") / "report.css").read_text(encoding="utf-8")
              .rstrip("\n") + "</style>")


def html_page(runs_dir, results: pd.DataFrame, parsed: list[dict], summary: pd.DataFrame,
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
        f'<figure><figcaption>{html.escape(cap)}</figcaption>{img_tag(png, name)}</figure>'
        for name, (png, cap) in figs.items() if name != first_fig)
    top_fig = ("" if first_fig not in figs else
               f'<figure id="accuracy-figure"><figcaption>{html.escape(figs[first_fig][1])}'
               f"</figcaption>{img_tag(figs[first_fig][0], first_fig)}</figure>")
    note = seeds_note(ans)
    note_html = f'<p class="warn" id="seeds-note">{html.escape(note)}</p>' if note else ""
    return f"""<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>cmix evaluation report</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
{PAGE_STYLE}</head><body>
<h1>cmix evaluation report</h1>
<p>{len(results)} runs from <code>{html.escape(str(runs_dir))}</code>: {len(traits)}
trait(s), methods {html.escape(', '.join(sorted(results['method'].unique(), key=method_rank)))}.
Grid status: <span class="{'warn' if len(missing) else ''}">{html.escape(status)}</span>.</p>
{caution}
<h2>Which method is best, per trait and labeled budget</h2>
<p>Highest mean test accuracy over seeds, against the runner-up paired by seed ("level
with": no difference shown); <b>budget</b> = labeled training samples; <b>cmix_paper</b> = the
paper's method; <b>cmix</b> keeps pseudo-labels only where held-out labeled rows show they
help.</p>
{_refusals_html(results)}
{note_html}
{answers_html(ans)}
{top_fig}
<h2>Detail: test accuracy by trait, budget and method</h2>
{glance_html(head)}
<p>Every method, each row against covariates and (cmix and its ablations) against the best
non-cmix method, paired by seed:</p>
{headline_html(head)}
<h2>How to read this</h2><p>{_how_to_read(head)}</p>
<h2>Figures</h2>{fig_html}
<h2>Data</h2>{_data_tables(results, parsed)}
<h2>Summary: every metric, mean ± sd over seeds</h2>
<p>AUROC and AP are macro one-vs-rest for multi-class traits; MCC in [-1, 1]; Brier: lower is
better.</p>{summary_html(summary)}
<h2>Missing runs</h2>{html_table(missing) if len(missing) else '<p>None: the grid is complete.</p>'}
<h2>Wall time per method</h2>{html_table(wall_table(results), '{:.2f}')}
<h2>Versions</h2><p>Devices: {html.escape(devices)}.</p>{html_table(versions_table(parsed))}
<h2>Configs</h2><p>Each key's value and the methods that ran with it (the trainer's keys plus
the baselines' keys).</p>{html_table(config_table(parsed), wrap=("value", "methods"))}
</body></html>
"""
