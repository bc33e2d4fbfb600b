"""The paper's pseudo-labels during pre-training, for a group of G models: S_U (the
unlabeled rows that get them), the looks (label propagation on each model's latent,
:mod:`cmix.learn.methods.cmix.labelprop`) and their record in each run's checkpoint
parts, the judge's folds of the labeled rows.
"""

from __future__ import annotations

import time

import numpy as np
import torch

from ....logs import log
from ... import streams
from ..heads import latent_rows
from .labelprop import graph_from_neighbours, knn_neighbours, propagate


def pseudo_tensors(group):
    """(label int64 (G, n_u), weight float (G, n_u)) over every model's unlabeled
    positions, from its run's checkpoint parts ("pseudo": the S_U rows' labels and weights
    of the run's own model; "pseudo_folds": those of its fold models); -1 / 0 outside S_U
    or without pseudo-labels. None when no pseudo-label of any model carries weight (the
    unlabeled rows then take no part in the contrastive term)."""
    found = []
    for i, ctx in enumerate(group.ctxs):
        role = group.roles[i]
        pseudo = ctx.parts.get("pseudo") if role == 0 else \
            (ctx.parts.get("pseudo_folds") or {}).get(role - 1)
        found.append(pseudo)
    if not any(p is not None and bool(((p["label"] >= 0) & (p["weight"] > 0)).any())
               for p in found):
        return None
    n_u = max(len(c.splits.unlabeled) for c in group.ctxs)
    label = np.full((group.n_models, max(n_u, 1)), -1, dtype=np.int64)
    weight = np.zeros((group.n_models, max(n_u, 1)), dtype=np.float32)
    for i, (ctx, pseudo) in enumerate(zip(group.ctxs, found)):
        if pseudo is not None:
            pos = pseudo_label_rows(ctx)
            label[i, pos] = pseudo["label"]
            weight[i, pos] = pseudo["weight"]
    return torch.from_numpy(label).to(group.dev), torch.from_numpy(weight).to(group.dev)


def pseudo_label_rows(ctx) -> np.ndarray:
    """S_U: positions (sorted) into the run's unlabeled rows that get pseudo-labels, at
    most lp_max_unlabeled of them, drawn with the run's seed."""
    _, rng = streams.gen(ctx.seed, streams.PSEUDO_LABEL_ROWS)
    n_u = len(ctx.splits.unlabeled)
    return np.sort(rng.permutation(n_u)[:ctx.cfg.pseudo_labels.lp_max_unlabeled])


def judge_folds(ctx) -> np.ndarray:
    """(n_L,) int: the fold (0..K-1, K = ``lp_judge_folds``) of each of the run's training
    labeled rows, stratified by class: each class's rows, shuffled with the run's seed,
    dealt to the folds in turn from a fold drawn for the class, so every fold holds about
    1/K of every class."""
    _, rng = streams.gen(ctx.seed, streams.PSEUDO_LABEL_JUDGE)
    s = ctx.splits
    y = s.label[s.train_labeled]
    k = ctx.cfg.pseudo_labels.lp_judge_folds
    fold = np.zeros(len(y), dtype=np.int64)
    start = 0
    for c in np.unique(y):
        rows = rng.permutation(np.flatnonzero(y == c))
        fold[rows] = (start + np.arange(len(rows))) % k
        start = (start + len(rows)) % k
    return fold


def look_of(group, model, per_run):
    """A look for :func:`pretrain_stage`: the latent z (G, n, H), on the device, of each
    model's label-propagation nodes (its run's training labeled rows, then its S_U rows)
    and the nodes' dosages x (G, n, M); then ``per_run(i, z, x, n, epoch, record)`` for
    each run's own model i still going (n: its node count; record: its epoch record)."""
    def look(done, active, recs):
        idx = [i for i in range(group.n_models) if active[i] and group.roles[i] == 0]
        if not idx:
            return
        nodes = [np.concatenate([c.splits.train_labeled,
                                 c.splits.unlabeled[pseudo_label_rows(c)]])
                 for c in group.ctxs]
        x_nodes = group.rows_of(nodes)
        z = latent_rows(model, x_nodes)
        for i in idx:
            per_run(i, z, x_nodes, len(nodes[i]), done, recs[i])
    return look


def paper_look(group, model, folds: dict | None = None):
    """The look of the paper's pseudo-labels (:func:`pretrain_stage`), as Darabi et al.
    describe them: for each model, label propagation on its latent (k = lp_k, alpha =
    lp_alpha) seeded with the training labeled rows it trains on (a fold model f: those
    outside fold f of ``folds``, run id -> (n_L,) fold of each labeled row), every
    pseudo-label weighted by its certainty 1 - H(p)/log C. A run's own model's S_U
    pseudo-labels go to its checkpoint parts ("pseudo", summary in "lp_info"), fold
    model f's to parts["pseudo_folds"][f]. cmix_paper's looks, and those of cmix's paper
    arm (:func:`cmix.learn.methods.cmix.judge.judged_pretraining`)."""
    lp = group.cfg.pseudo_labels

    def per_run(i, z, x_nodes, n, done, rec):
        ctx = group.ctxs[i]
        t0 = time.perf_counter()
        n_l = len(ctx.splits.train_labeled)
        y_l = ctx.splits.label[ctx.splits.train_labeled]
        own = None
        for j in (j for j in range(group.n_models) if group.ctxs[j] is ctx):
            role = group.roles[j]
            seen = np.arange(n_l) if role == 0 else np.flatnonzero(folds[id(ctx)] != role - 1)
            index, sim = knn_neighbours(z[j, :n], lp.lp_k, lp.lp_block)
            prop = propagate(graph_from_neighbours(index, sim, lp.lp_k), seen, y_l[seen],
                             ctx.splits.n_classes, lp, ctx.dev)
            if role == 0:
                own = prop
            else:
                ctx.parts.setdefault("pseudo_folds", {})[role - 1] = {
                    "label": prop.pseudo_label[n_l:],
                    "weight": np.asarray(prop.weight[n_l:], np.float32)}
        info = record_look(ctx, own, n_l, done, t0)
        rec.update(pseudo_label_accuracy=info["accuracy"],
                   pseudo_label_coverage=info["coverage"])

    return look_of(group, model, per_run)


def record_look(ctx, prop, n_l: int, epoch: int, t0: float) -> dict:
    """Keep a look's pseudo-labels of the run's S_U rows in its checkpoint parts
    ("pseudo") and its summary in parts["lp_info"] (accuracy against the S_U rows' true
    classes, which nothing else reads); log it. prop: the look's
    :class:`cmix.learn.methods.cmix.labelprop.PropagationResult` over the run's nodes (n_l labeled
    rows first)."""
    s, parts = ctx.splits, ctx.parts
    su_pos = pseudo_label_rows(ctx)
    lp = ctx.cfg.pseudo_labels
    parts["pseudo"] = {"label": prop.pseudo_label[n_l:],
                       "weight": np.asarray(prop.weight[n_l:], np.float32)}
    info = _pseudo_stats(parts["pseudo"], s.label[s.unlabeled[su_pos]])
    info.update(epoch=epoch, missing_classes=[s.class_names[c] for c in prop.missing_classes],
                graph=f"latent k{lp.lp_k} alpha{lp.lp_alpha:g}", used=True,
                mean_weight=float(parts["pseudo"]["weight"].mean()) if len(su_pos) else 0.0,
                seconds=round(time.perf_counter() - t0, 3))
    log(f"seed {ctx.seed}: pseudo-labels (epoch {epoch}), as propagated: graph "
        f"{info['graph']}, mean weight {info['mean_weight']:.3f}")
    if prop.missing_classes:
        log(f"label propagation: no labeled row of class(es) {info['missing_classes']}; "
            "they get no pseudo-labels")
    parts.setdefault("lp_info", []).append(info)
    ctx.add_time("label_propagation", t0)
    return info


def _pseudo_stats(pseudo: dict, truth: np.ndarray) -> dict:
    """Accuracy of the pseudo-labels on the rows they cover, and the share covered."""
    covered = pseudo["label"] >= 0
    acc = float(np.mean(pseudo["label"][covered] == truth[covered])) if covered.any() else None
    return {"accuracy": acc, "coverage": float(np.mean(covered)) if len(covered) else 0.0,
            "n_rows": int(len(covered))}
