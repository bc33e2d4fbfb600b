"""The HTML tables of report.html: the answers, the glance at cmix, the headline table
with its verdict marks, the summary per trait, wall time, versions and configs."""

from __future__ import annotations

import base64
import html
import json

import numpy as np
import pandas as pd

from ..learn.methods import method_rank
from .collect import METRIC_RANGES


def html_table(df: pd.DataFrame, floatfmt="{:.4f}", wrap=()) -> str:
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


def img_tag(png: bytes, alt: str) -> str:
    return (f'<img alt="{html.escape(alt)}" src="data:image/png;base64,'
            f'{base64.b64encode(png).decode()}">')


def plus_minus(mean: float, sd: float, sign: bool = False) -> str:
    """'0.8123 ± 0.0100' (sd left out when NaN; '' when the mean is NaN)."""
    if not np.isfinite(mean):
        return ""
    m = f"{mean:+.4f}" if sign else f"{mean:.4f}"
    return m if not np.isfinite(sd) else f"{m} ± {sd:.4f}"


def p_text(p: float) -> str:
    return "" if not np.isfinite(p) else ("<0.001" if p < 0.001 else f"{p:.3f}")


VERDICT_MARK = {"better": ("▲ better", "better"), "level": ("● level", "level"),
                "inconclusive": ("? inconclusive", "level"), "worse": ("▼ worse", "worse")}


def headline_html(head: pd.DataFrame, key: str = "accuracy") -> str:
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
                          f"<td>{plus_minus(getattr(r, f'{key}_mean'), getattr(r, f'{key}_sd'))}</td>",
                          f"<td>{plus_minus(r.gain_cov_mean, r.gain_cov_sd, sign=True)}</td>",
                          f"<td>{p_text(r.gain_cov_p_holm)}</td>",
                          f"<td>{plus_minus(r.gain_best_mean, r.gain_best_sd, sign=True)}{best}</td>",
                          f"<td>{p_text(r.gain_best_p_holm)}</td>",
                          f'<td class="{cls}">{mark}</td>']
                rows.append(f'<tr class="{"cmix" if r.method == "cmix" else ""}">'
                            + "".join(cells) + "</tr>")
    header = "".join(f"<th>{html.escape(c)}</th>" for c in cols)
    return (f'<div class="tw"><table id="headline"><thead><tr>{header}</tr></thead>'
            f'<tbody>{"".join(rows)}</tbody></table></div>')


def glance_html(head: pd.DataFrame, key: str = "accuracy") -> str:
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
        p_best = p_text(r.gain_best_p_holm)
        p_cov = p_text(r.gain_cov_p_holm)
        rows.append(
            f'<tr><td class="l">{html.escape(r.trait)}</td><td>{r.budget:,}</td>'
            f"<td>{plus_minus(getattr(r, f'{key}_mean'), getattr(r, f'{key}_sd'))}</td>"
            + (f'<td class="l">{html.escape(r.best_other)}</td>'
               f"<td>{plus_minus(other[f'{key}_mean'], other[f'{key}_sd'])}</td>"
               if other is not None else "<td></td><td></td>")
            + f"<td>{plus_minus(r.gain_best_mean, r.gain_best_sd, sign=True)}"
            + (f" (p {p_best})" if p_best else "") + "</td>"
            + f"<td>{plus_minus(r.gain_cov_mean, r.gain_cov_sd, sign=True)}"
            + (f" (p {p_cov})" if p_cov else "") + "</td>"
            + f'<td class="{cls}">{mark}</td></tr>')
    cols = ["trait", "budget", f"cmix {key}", "best non-cmix method", f"its {key}",
            "cmix minus best (Holm p)", "cmix minus covariates (Holm p)", "verdict"]
    header = "".join(f"<th>{html.escape(h)}</th>" for h in cols)
    return ("<p>cmix at each trait and budget, against the best other method and the "
            "covariates alone (verdict: see how to read this, below):</p>"
            f'<div class="tw"><table id="glance"><thead><tr>{header}</tr></thead>'
            f'<tbody>{"".join(rows)}</tbody></table></div>')


def answers_html(ans: pd.DataFrame, key: str = "accuracy") -> str:
    """The first table: per trait x budget the answer (best method, or level with the
    runner-up), both means, the paired difference, its Holm p and, where it has none or
    it cannot show a difference, why."""
    cols = ["trait", "budget", "answer", f"best: {key} mean ± sd (seeds)",
            f"runner-up: {key} mean", "best minus runner-up (paired)", "p (Holm; test)",
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
                      f"<td>{plus_minus(best, getattr(r, f'best_{key}_sd'))} ({r.n_best})</td>",
                      (f'<td>{plus_minus(runner, np.nan)} {html.escape(r.runner_up)}</td>'
                       if r.runner_up else "<td></td>"),
                      f"<td>{plus_minus(diff, r.diff_sd, sign=True)}</td>",
                      f"<td>{p_text(r.p_holm)}"
                      f"{f' ({html.escape(r.test)})' if np.isfinite(r.p_holm) else ''}</td>",
                      f'<td class="wrap">{html.escape(why)}</td>']
            rows.append("<tr>" + "".join(cells) + "</tr>")
    header = "".join(f"<th>{html.escape(c)}</th>" for c in cols)
    return (f'<div class="tw"><table id="answers"><thead><tr>{header}</tr></thead>'
            f'<tbody>{"".join(rows)}</tbody></table></div>')


def versions_table(parsed: list[dict]) -> pd.DataFrame:
    """package | version(s) seen in the runs | runs (when more than one version)."""
    seen: dict = {}
    for m in parsed:
        for k, v in (m.get("versions") or {}).items():
            seen.setdefault(str(k), {}).setdefault(str(v), 0)
            seen[str(k)][str(v)] += 1
    return pd.DataFrame([{"package": k, "version": " | ".join(
        v if len(vs) == 1 else f"{v} ({n} runs)" for v, n in vs.items())}
        for k, vs in seen.items()], columns=["package", "version"])


def config_table(parsed: list[dict]) -> pd.DataFrame:
    """key | value | methods that ran with it: one row per distinct value of each config
    key (a key with more than one value for one method shows that method twice)."""
    by: dict = {}
    for m in parsed:
        for k, v in (m.get("config") or {}).items():
            by.setdefault(k, {}).setdefault(json.dumps(v, sort_keys=True), set()).add(m["method"])
    rows = [{"key": k, "value": v, "methods": ", ".join(sorted(ms, key=method_rank))}
            for k in sorted(by) for v, ms in by[k].items()]
    return pd.DataFrame(rows, columns=["key", "value", "methods"])


def wall_table(results: pd.DataFrame) -> pd.DataFrame:
    """Mean and total wall seconds and the number of runs per method, methods in report
    order."""
    wall = (results.groupby("method")["wall_seconds"].agg(["mean", "sum", "count"])
            .reset_index().rename(columns={"mean": "mean s per run", "sum": "total s",
                                           "count": "runs"}))
    return wall.iloc[np.argsort([method_rank(m) for m in wall["method"]], kind="stable")]


def summary_html(summary: pd.DataFrame) -> str:
    """One table per trait: every metric as mean ± sd over seeds, n, completeness and the
    pseudo-label accuracy."""
    show = summary[["trait", "method", "budget", "n", "complete"]].copy()
    for key in METRIC_RANGES:
        show[key] = [plus_minus(a, b) for a, b in zip(summary[f"{key}_mean"], summary[f"{key}_sd"])]
    show["pseudo-label accuracy"] = summary["pseudo_label_accuracy_mean"]
    show["pseudo-labels used (seeds)"] = [
        "" if not np.isfinite(u) else f"{int(u)} of {n}"
        for u, n in zip(summary["pseudo_labels_used"].astype(float), summary["n"])]
    return "".join(f"<h3>{html.escape(t)}</h3>" + html_table(g.drop(columns="trait"))
                   for t, g in show.groupby("trait", sort=False))
