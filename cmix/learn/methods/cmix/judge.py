"""cmix's judged pre-training: the paper arm (pseudo-labels as propagated) and the selfsl
arm (none), each with its K fold models, and the cross-fitted judge that chooses
between them per run; the shared-encoder stages.
"""

from __future__ import annotations

import numpy as np
from scipy.stats import ttest_1samp

from ....logs import log
from ...stages import PRETRAIN, PRETRAIN_ALL
from ...nn import load_model_state, model_state
from ..heads import cmix_model, run_inputs
from ..probes import probe_cs, probe_path
from .pretrain import pretrain_rows, pretrain_stage
from .pseudo_labels import judge_folds, paper_look


def judged_pretraining(group, model) -> None:
    """cmix's pre-training, into ``model`` (the group's runs' models): the paper's
    (pseudo-labels as propagated) or cmix_selfsl's (none), whichever the run's
    cross-fitted judge (:func:`judge_arms`) finds better. Each run trains 2 (K + 1)
    models, K = lp_judge_folds: the paper arm, its own model and K fold models (stage
    "pretrain", :func:`cmix.learn.methods.cmix.pseudo_labels.paper_look` at every look), then the selfsl arm,
    the same K + 1 without pseudo-labels (stage "pretrain_all"). Fold model f of either
    arm never sees fold f's labels (not in its label-aware terms, not as a propagation
    seed) and has the initial weights and draws of the other arm's fold model f, so the
    two differ only by the pseudo-labels. The chosen arm's own model becomes the run's:
    its pre-training is exactly cmix_paper's or exactly cmix_selfsl's; refused, the
    run's pseudo-labels weigh nothing, so its predictor is cmix_selfsl's too."""
    k = group.cfg.pseudo_labels.lp_judge_folds
    folds = {id(c): judge_folds(c) for c in group.ctxs}
    arms = group.with_folds(k)
    rows = pretrain_rows(arms, folds)
    paper, selfsl = cmix_model(arms), cmix_model(arms)
    for r in range(group.n_models):            # a run's own model: as the group's
        for m in (paper, selfsl):
            load_model_state(m, r * (k + 1), model_state(model, r))
    pretrain_stage(arms, paper, rows, paper_look(arms, paper, folds))
    for c in group.ctxs:
        if c.state.stage == PRETRAIN:
            c.state.stage, c.state.epoch = PRETRAIN_ALL, 0
    pretrain_stage(arms, selfsl, rows, stage=PRETRAIN_ALL)      # no look: no pseudo-labels
    for r, (ctx, verdict) in enumerate(zip(group.ctxs, judge_arms(arms, paper, selfsl, folds))):
        load_model_state(model, r, model_state(paper if verdict["used"] else selfsl,
                                               r * (k + 1)))
        ctx.parts["lp_info"][-1].update(verdict)
        if not verdict["used"]:
            ctx.parts["lp_info"][-1]["mean_weight"] = 0.0
            pseudo = ctx.parts["pseudo"]
            ctx.parts["pseudo"] = {"label": pseudo["label"],
                                   "weight": np.zeros_like(pseudo["weight"])}
        if not verdict["n_judge"]:
            log(f"seed {ctx.seed}: the judge could not score every labeled row (a fold "
                "leaves fewer than 2 classes of 2 rows outside it): pseudo-labels not used "
                "(the run is cmix_selfsl's)")
            continue
        log(f"seed {ctx.seed}: judge on {verdict['n_judge']} held-out labeled rows: held-out "
            f"Brier score {verdict['paper_brier']:.4f} with the paper's pseudo-labels vs "
            f"{verdict['selfsl_brier']:.4f} without (accuracy "
            f"{verdict['paper_accuracy']:.3f} vs {verdict['selfsl_accuracy']:.3f}, one-sided "
            f"paired t-test p = {verdict['p_value']:.3g}): "
            + ("pseudo-labels used (the run is cmix_paper's)" if verdict["used"] else
               "pseudo-labels not used (the run is cmix_selfsl's)"))


#: the judge's level: the chance of taking the paper's pseudo-labels in a run where
#: they predict held-out labeled rows no better than cmix_selfsl's training does
JUDGE_LEVEL = 0.05


def judge_arms(group, paper, selfsl, folds: dict) -> list:
    """The cross-fitted judge of each run of ``group`` (runs with their fold models,
    :meth:`cmix.learn.group.Group.with_folds`; ``paper``, ``selfsl``: both arms' grouped
    models; ``folds``: run id -> (n_L,) fold of each training labeled row). Every
    training labeled row, of fold f, is scored by the linear probe (:func:`fit_probe`)
    on fold model f's latent, fitted on the rows outside fold f, in either arm: n_L
    held-out Brier scores (sum over classes of (p - 1[class])^2, 0 to 2) per arm, from
    encoders and probes that never saw the row's label. The Brier score is bounded, so a
    few confidently wrong rows cannot decide the test as they can a log-loss.
    The probe's C is chosen on rows fold model f never saw labeled: fold f's rows are
    split in two halves (alternate rows), and each half is scored at the C of
    :func:`probe_cs` with the lowest mean Brier score on the other half (the rows
    outside the fold are no guide: the fold model holds their memorised classes, and a
    cross-validation on them takes the largest C); a fold of one row is scored at the C
    best on itself.
    A probe is fitted on the classes with 2 or more rows outside the fold; a held-out
    row of another class gets probability 0 for its class in both arms.
    The paper arm is used when it is shown better: the one-sided paired t-test of the
    per-row differences (selfsl's Brier score minus the paper's) has p <= :data:`JUDGE_LEVEL`.
    A run whose rows cannot all be judged (a fold leaving fewer than 2 classes of 2 rows
    for the probe) does not use them. Returns
    per run (in order) {"used", "n_judge", "paper_brier", "selfsl_brier",
    "paper_accuracy", "selfsl_accuracy", "p_value"}."""
    rows = [c.splits.train_labeled for c in group.ctxs]
    inputs = {"paper": run_inputs(group, paper, rows), "selfsl": run_inputs(group, selfsl, rows)}
    out = []
    for ctx in group.runs():
        s = ctx.splits
        y, fold = s.label[s.train_labeled], folds[id(ctx)]
        loss = {a: np.full(len(y), np.nan) for a in inputs}
        right = {a: np.zeros(len(y), bool) for a in inputs}
        for j in (j for j in range(group.n_models)
                  if group.ctxs[j] is ctx and group.roles[j] > 0):
            held = fold == group.roles[j] - 1
            if not held.any():
                continue
            classes = np.flatnonzero(np.bincount(y[~held], minlength=s.n_classes) >= 2)
            if len(classes) < 2:
                continue
            fit = ~held & np.isin(y, classes)
            idx = np.flatnonzero(held)
            truth = np.eye(s.n_classes)[y[idx]]
            half = np.arange(len(idx)) % 2
            for a, x in inputs.items():
                p = np.zeros((len(probe_cs(ctx)), len(idx), s.n_classes))
                p[:, :, classes] = probe_path(ctx, x[j][fit], np.searchsorted(classes, y[fit]),
                                              x[j][idx], len(classes))
                brier = ((p - truth) ** 2).sum(2)                     # (n_c, n_held)
                for h in (0, 1):
                    rows, other = half == h, half != h
                    c = int(np.argmin(brier[:, other if other.any() else rows].mean(1)))
                    loss[a][idx[rows]] = brier[c, rows]
                    right[a][idx[rows]] = p[c, rows].argmax(1) == y[idx[rows]]
        d = loss["selfsl"] - loss["paper"]
        judged = len(d) > 0 and not np.isnan(d).any()
        if judged and np.std(d) > 0:
            p_value = float(ttest_1samp(d, 0.0, alternative="greater").pvalue)
        else:
            p_value = 0.0 if judged and d.mean() > 0 else 1.0
        out.append({"used": bool(judged and p_value <= JUDGE_LEVEL),
                    "n_judge": int(len(d)) if judged else 0,
                    **{f"{a}_brier": float(np.mean(loss[a])) if judged else None
                       for a in inputs},
                    **{f"{a}_accuracy": float(np.mean(right[a])) if judged else None
                       for a in inputs},
                    "p_value": float(f"{p_value:.3g}")})
    return out


def shared_stage(group, stage: str, pseudo, run) -> None:
    """Run pre-training stage ``stage`` (``run()``) for the runs that cannot take it from
    the shared-encoder folder (:func:`cmix.learn.shared.take_shared_stage`; ``pseudo``:
    "unjudged" or None), and leave it there for the others' later use
    (:func:`cmix.learn.shared.share_stage`). A run that took it is inactive in the
    group's loop (its state is past the stage)."""
    runs = group.runs()
    taken = [c.take_shared(stage, pseudo) for c in runs]
    run()
    for c, was_taken in zip(runs, taken):
        if not was_taken:
            c.share(stage, pseudo)
