"""The statistics of the verdicts: paired tests of per-seed differences, Holm adjustment,
the headline table (gains over covariates and over the best non-cmix method, with the
verdict) and the answers (the best method per trait and budget, and whether its lead is
shown), with what too few seeds allow."""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy import stats
from statsmodels.stats.multitest import multipletests

from ..learn.methods import method_rank


ALPHA = 0.05           # Holm-adjusted p below which a gain counts as better / worse
WILCOXON_MIN = 10      # paired seeds from which the Wilcoxon signed-rank test replaces the t-test


def paired_test(d: np.ndarray) -> tuple[float, str]:
    """(two-sided p, test name) for paired differences ``d`` (one per seed) against 0:
    the Wilcoxon signed-rank test from WILCOXON_MIN pairs on, else the one-sample t-test
    on the differences (the paired t-test). p is 1 when every difference is 0, NaN for
    fewer than 2 pairs or for equal non-zero differences (no spread to test against;
    "equal" up to float rounding, 1e-9 of their size: differences of accuracies of the
    same test people are multiples of 1 / n_test, and their float sums differ in the last
    bits, which a t-test would read as a spread of 1e-17 and a p of 1e-15)."""
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
    not weaken cmix's verdict; an adjusted p is withheld (NaN) where the seeds are too
    few for any difference to be shown (:func:`holm_where_seeds_allow`), the rule of
    :func:`answers` too. ``verdict`` (cmix family): "better" / "worse" where the
    gain over the best other method is positive / negative with Holm p < ALPHA; else
    "level" where the mean gain is within the seeds' spread (|mean| <= its sd), and
    "inconclusive" where it is larger than the spread but too few seeds confirm it."""
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
        adj, m, _ = holm_where_seeds_allow(out[f"gain_{tag}_p"], out[f"gain_{tag}_n"])
        out[f"gain_{tag}_p_holm"] = adj
        out[f"n_tests_holm_{tag}"] = m
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


def holm_where_seeds_allow(p, n_pairs) -> tuple[np.ndarray, int, np.ndarray]:
    """Holm-adjusted p-values of one family of comparisons, withheld where the seeds are
    too few for any difference to be shown.

    p: (n_comparisons,) raw p (NaN: no test); n_pairs: (n_comparisons,) paired seeds of
    each. Returns (adjusted p, NaN where there is no p or where even the smallest
    attainable p with that many seeds, Holm-adjusted over the family, is not below
    ALPHA; the family's size m, the comparisons with a p; that floor per comparison).
    Withholding the parametric p there keeps a verdict from resting on a t-test of two
    or three seeds, and keeps a "level" answer from standing beside a p below ALPHA."""
    ps = np.asarray(p, dtype=float)
    ok = np.isfinite(ps)
    adj = np.full(len(ps), np.nan)
    if ok.any():
        adj[ok] = multipletests(ps[ok], method="holm")[1]
    m = int(ok.sum())
    floor = np.array([min(1.0, max(1, m) * min_attainable_p(int(n))) for n in n_pairs])
    adj[floor >= ALPHA] = np.nan
    return adj, m, floor


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
    ALPHA; ``p_holm`` is NaN where the seeds are too few, so a difference is shown exactly
    when its Holm p is printed and below ALPHA) and ``answer``: the best method, or "level with RUNNER-UP"
    when the difference is not shown. traits: their order (default: as the runs list
    them)."""
    rows = []
    for trait in traits or dict.fromkeys(results["trait"]):
        gt = results[results["trait"] == trait]
        for budget in sorted(gt["budget"].unique()):
            g = gt[gt["budget"] == budget]
            rows.extend(_answer_row(g, trait, int(budget), key))
    out = pd.DataFrame(rows)
    if out.empty:
        return out
    adj, m, floor = holm_where_seeds_allow(out["p"], out["n_pairs"])
    out["n_tests_holm"] = m
    too_few = np.isfinite(out["p"].to_numpy(float)) & (floor >= ALPHA)
    say = too_few & (out["reason"] == "").to_numpy()
    out.loc[say, "reason"] = [f"{n} seeds: too few to show a difference (smallest "
                              f"attainable Holm p {f:.2g})"
                              for n, f in zip(out.loc[say, "n_pairs"], floor[say])]
    out["p_holm"] = adj
    out["shown"] = (np.nan_to_num(adj, nan=1.0) < ALPHA) & (out["diff_mean"].to_numpy(float) > 0)
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
    return (f"Too few seeds to show any difference: with {n} seeds no paired test free of "
            f"assumptions gives a p below 2/2^{n} = {floor:.3g}, and Holm over the {m} "
            f"comparisons makes that {m * floor:.3g}, not below {ALPHA}; read the best method "
            f"as a ranking. Run at least {need} seeds to be able to show one.")


def refusals(results: pd.DataFrame) -> pd.DataFrame:
    """Per trait, the cmix runs whose judge refused the pseudo-labels (``pseudo_labels_used``
    false; such a run is cmix_selfsl's): ``refused`` and ``n`` (cmix runs that record the
    judge's decision); only traits with at least one such run."""
    if "pseudo_labels_used" not in results:
        return pd.DataFrame(columns=["trait", "refused", "n"])
    cm = results[results["method"] == "cmix"]
    used = cm["pseudo_labels_used"].map(lambda u: np.nan if pd.isna(u) else float(bool(u)))
    cm = cm.assign(_used=used).dropna(subset=["_used"])
    rows = [{"trait": t, "refused": int((g["_used"] == 0).sum()), "n": len(g)}
            for t, g in cm.groupby("trait", sort=False)]
    return pd.DataFrame(rows, columns=["trait", "refused", "n"])
