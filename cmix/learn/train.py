"""Contrastive Mixup training of a group of runs: the stages of cmix, mlp and the
ablations (the method as Darabi et al. 2021 describe it; departures in docs/method.md).

Stages: splits -> pre-training (within-class mixup at a random encoder layer, SupCon +
reconstruction, label propagation after ``warmup_epochs`` and every ``lp_every`` epochs)
-> predictor on the frozen encoder (latent mixup, soft targets, pseudo-labeled rows
weighted by their certainty, early stopping on the labeled validation rows, best
checkpoint reloaded) -> test metrics.

Every stage runs the G models of a :class:`cmix.learn.group.Group` together: one step is
one set of tensor operations for all of them, with no value read back to the host
inside an epoch. Randomness (:mod:`cmix.learn.streams`): the model initialisation comes
from each run's seed; every epoch draws its batch orders, layers, lambdas and partners
on the device from the run's keys and (stage, epoch, step), so a model draws the same
in any group, and a resumed run repeats exactly what an uninterrupted one does (bit for
bit on CPU). Runs use torch's deterministic kernels, and the reductions that torch
splits among threads are summed in an order that does not depend on the thread count.

The method class that runs these stages is
:class:`cmix.learn.methods.networks.ContrastiveMixupMethod`; the checkpoints and loops
come from :mod:`cmix.learn.group`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from . import streams
from .data import LAST
from ..errors import CmixError
from ..logs import log


def _amp(device):
    from .nn import autocast

    return autocast(device)


def latent_rows(model, x, batch: int = 4096):
    """float32 (G, n, H) latent of dosages x (G, n, M) (eval mode, in batches of rows)."""
    import torch

    model.eval()
    if x.shape[1] == 0:
        return torch.zeros(x.shape[0], 0, model.encoder.out_dim, device=x.device)
    with torch.no_grad(), _amp(x.device):
        return torch.cat([model.encode(x[:, s:s + batch]).float()
                          for s in range(0, x.shape[1], batch)], 1)


# ------------------------------------------------------------------ pre-training
@dataclass
class Batch:
    """One pre-training step's rows of every model: ``x`` (G, B, M) dosages, ``labels``
    (G, B) int64 class or -1 (no label), ``weights`` (G, B) certainty (0 for rows without
    a label), ``mask`` (G, B) bool the rows a model holds; the first ``n_con`` rows are
    those that may carry a label (the labeled rows, and the pseudo-labeled ones when
    pseudo-labels are in use; None: all B)."""

    x: object
    labels: object
    weights: object
    mask: object
    n_con: int | None = None


def contrastive_mixup_loss(model, batch: Batch, draws, contrastive, n_classes: int):
    """The pre-training loss of one batch of every model (:class:`Batch`): (total,
    contrastive, reconstruction), each (G,).

    The contrastive term and the mixed views are of the batch's first n_con rows only;
    the reconstruction is of every row. draws: the step's
    :class:`cmix.learn.streams.Draws`; contrastive: the config's ``contrastive`` section
    (alpha, tau, beta, mix). Each model draws its mixing layer t uniformly from
    0..n_layers, lambda ~ U(0, alpha) per row, and partners in proportion to certainty
    (:func:`cmix.learn.losses.mix_partners`, within the class with mix == "within_class").
    The originals and the mixed views run through the encoder as one batch; a mixed view
    is the placeholder of its row until layer t, where it becomes the mix of the two
    rows' hidden states (with batch norm, the statistics of a block are of the originals
    and the mixed views that exist there). The weighted supervised contrastive loss
    (temperature tau) runs over the labeled rows and the mixed rows with their soft class
    targets (:func:`cmix.learn.losses.contrastive_targets`); the reconstruction loss is of
    every row. total = contrastive + beta * reconstruction."""
    import torch

    from .losses import (contrastive_targets, mix_partners, mix_rows, reconstruction_loss,
                         supcon_loss)

    x, mask = batch.x, batch.mask
    g, b = batch.labels.shape
    k = b if batch.n_con is None else batch.n_con
    labels, weights, cmask = batch.labels[:, :k], batch.weights[:, :k], mask[:, :k]
    n_layers = model.encoder.n_layers
    u = draws.uniform(1 + 2 * k)                  # the step's draws, in one operation
    t = (u[:, 0] * (n_layers + 1)).long().clamp_max(n_layers)                  # (G,)
    partner = mix_partners(labels, weights, u[:, 1:1 + k], contrastive.mix == "within_class")
    lam = u[:, 1 + k:] * contrastive.alpha
    has_partner = partner >= 0
    with _amp(x.device):
        h = model.embed(x)
        m = torch.where((t == 0).view(g, 1, 1), mix_rows(h[:, :k], partner, lam), h[:, :k])
        for layer, block in enumerate(model.encoder.blocks):
            m_mask = cmask & has_partner & (t <= layer)[:, None]
            out = block(torch.cat([h, m.to(h.dtype)], 1), torch.cat([mask, m_mask], 1))
            h, m = out[:, :b], out[:, b:]
            m = torch.where((t == layer + 1).view(g, 1, 1), mix_rows(h[:, :k], partner, lam), m)
        recon = reconstruction_loss(model.decoder(h, mask), x, model.embed, mask)
        q, w = contrastive_targets(labels, weights * cmask, partner, lam, n_classes)
        p = model.proj(torch.cat([h[:, :k], m.to(h.dtype)], 1))
        con = supcon_loss(p, q, w, contrastive.tau)
    return con + contrastive.beta * recon, con, recon


def labeled_rows_per_step(n_labeled: int, n_steps: int, n_classes: int, pretrain) -> int:
    """Labeled rows in each pre-training step: labeled_batch_size, but at most what
    shows each labeled row ``labeled_passes`` times an epoch over ``n_steps`` steps (and
    at least 2 per class, so the contrastive term has positives). Drawing the whole
    labeled set at every step of a pass over the unlabeled rows shows each labeled row
    hundreds of times an epoch and lets the encoder memorise D_L. 0 = no cap. pretrain:
    the config's ``pretrain`` section."""
    take = min(pretrain.labeled_batch_size, n_labeled)
    if pretrain.labeled_passes > 0 and n_steps > 0:
        cap = int(np.ceil(pretrain.labeled_passes * n_labeled / n_steps))
        take = min(take, max(cap, 2 * n_classes))
    return max(1, min(take, n_labeled))


@dataclass
class PretrainRows:
    """What pre-training reads of each model: ``labeled`` (RowSet) the training labeled
    rows in its label-aware terms, ``y`` int64 (G, n_l) their classes; ``unlabeled``
    (RowSet); ``pseudo``: None or (label int64 (G, n_u), weight float (G, n_u)) over
    the unlabeled positions (-1 / 0 where none)."""

    labeled: object
    y: object
    unlabeled: object
    pseudo: tuple | None = None


@dataclass
class Schedule:
    """One pre-training epoch's steps for every model: ``src_pos`` (G, S, take + B) row
    positions in the row source (on its index device; each step's ``take`` labeled rows
    first, then B unlabeled rows), ``labels`` (G, S, take + B) int64 (-1 = none) and
    ``weights`` (G, S, take + B) certainty, ``row_ok`` (G, S, take + B) bool the rows a
    model holds, ``step_ok`` (G, S) bool the steps it takes (a model with fewer rows than
    the group's largest takes fewer), on the device."""

    src_pos: object
    labels: object
    weights: object
    row_ok: object
    step_ok: object
    take: int


def epoch_schedule(group, rows: PretrainRows, epoch: int) -> Schedule:
    """The steps of one pre-training epoch (:class:`Schedule`), drawn on the device from
    each run's (stream, epoch): labeled rows ``take`` a step from successive shuffles of
    the model's labeled rows, unlabeled rows B a step in a chunk-aware shuffled order
    (:func:`cmix.learn.data.chunk_aware_order`)."""
    import torch

    from .data import chunk_aware_order, permutations

    cfg, src = group.cfg, group.source
    idev = src.index_device
    lab, unl = rows.labeled, rows.unlabeled
    n_l, n_u = np.array(lab.counts), np.array(unl.counts)
    bs = cfg.pretrain.batch_size
    if n_u.max() > 0:
        steps_of = -(-n_u // bs)
    else:
        steps_of = np.maximum(1, -(-n_l // cfg.pretrain.labeled_batch_size))
    n_steps = int(steps_of.max())
    take_of = np.array([labeled_rows_per_step(int(n), int(-(-u // bs)), group.n_classes,
                                              cfg.pretrain) for n, u in zip(n_l, n_u)])
    take = int(take_of.max())
    keys_b = group.keys(streams.PRETRAIN_BATCHES, idev)
    keys_s = group.keys(streams.PRETRAIN_STEPS, idev)
    # labeled: shuffles of each model's rows, `take` a step, a new shuffle when the next
    # step would run past the end
    per_perm = np.maximum(1, n_l // np.maximum(take_of, 1))
    n_perms = int((-(-n_steps // per_perm)).max())
    perms = permutations(streams.Draws(keys_s, epoch, 0), lab.count_index, n_perms, lab.n)
    s = np.arange(n_steps)
    which = s[None, :] // per_perm[:, None]                                     # (G, S)
    start = (s[None, :] % per_perm[:, None]) * take_of[:, None]
    slot = np.arange(take)
    col = start[:, :, None] + slot[None, None, :]                               # (G, S, take)
    lab_ok = slot[None, None, :] < take_of[:, None, None]
    flat = torch.from_numpy(which[:, :, None] * lab.n + np.minimum(col, lab.n - 1)).to(idev)
    lab_pos = torch.gather(perms.reshape(len(n_l), -1), 1, flat.view(len(n_l), -1)).view(
        flat.shape)
    # unlabeled: a chunk-aware order of each model's rows, B a step
    if n_u.max() > 0:
        unl_store = src.rows_index[unl.pos_index]
        order = chunk_aware_order(streams.Draws(keys_b, epoch), unl_store, unl.count_index,
                                  src.chunk_rows, src.n_chunks, cfg.data.buffer_chunks)
        pad = n_steps * bs - order.shape[1]
        order = torch.nn.functional.pad(order, (0, pad)) if pad > 0 else order[:, :n_steps * bs]
        u_pos = order.view(len(n_u), n_steps, bs)
        u_ok = (torch.arange(n_steps * bs, device=idev).view(1, n_steps, bs)
                < unl.count_index.view(-1, 1, 1))
    else:
        u_pos = torch.zeros(len(n_u), n_steps, 0, dtype=torch.long, device=idev)
        u_ok = torch.zeros(len(n_u), n_steps, 0, dtype=torch.bool, device=idev)
    src_pos = torch.cat([torch.gather(lab.pos_index, 1, lab_pos.view(len(n_l), -1)).view(
        lab_pos.shape), torch.gather(unl.pos_index, 1, u_pos.reshape(len(n_u), -1)).view(
        u_pos.shape)], 2)
    row_ok = torch.cat([torch.from_numpy(lab_ok).expand(len(n_l), n_steps, take).to(idev),
                        u_ok], 2)
    step_ok = torch.from_numpy(s[None, :] < steps_of[:, None])
    dev = group.dev
    lab_pos_d, u_pos_d = lab_pos.to(dev), u_pos.to(dev)
    y = torch.gather(rows.y, 1, lab_pos_d.view(len(n_l), -1)).view(lab_pos_d.shape)
    if rows.pseudo is not None:
        yu = torch.gather(rows.pseudo[0], 1, u_pos_d.reshape(len(n_u), -1)).view(u_pos_d.shape)
        wu = torch.gather(rows.pseudo[1], 1, u_pos_d.reshape(len(n_u), -1)).view(u_pos_d.shape)
    else:
        yu = torch.full(u_pos_d.shape, -1, dtype=torch.long, device=dev)
        wu = torch.zeros(u_pos_d.shape, device=dev)
    labels = torch.cat([y, yu], 2)
    weights = torch.cat([torch.ones(y.shape, device=dev), wu * cfg.contrastive.gamma], 2)
    return Schedule(src_pos=src_pos, labels=labels, weights=weights, row_ok=row_ok.to(dev),
                    step_ok=step_ok.to(dev), take=take)


def pretrain_epoch(group, model, opt, rows: PretrainRows, epoch: int, active):
    """One pre-training epoch of every model; active: (G,) bool device tensor (a model
    that has ended its stage takes no step). Returns (G, 3) float64 mean losses (total,
    contrastive, reconstruction) on the device."""
    import torch

    cfg = group.cfg
    sch = epoch_schedule(group, rows, epoch)
    labels, weights, row_ok, step_ok = sch.labels, sch.weights, sch.row_ok, sch.step_ok
    keys = group.keys(streams.PRETRAIN_STEPS)
    model.train()
    g = group.n_models
    # without pseudo-labels only the labeled rows (first in each batch) carry labels
    n_con = labels.shape[2] if rows.pseudo is not None else sch.take
    sums = torch.zeros(g, 3, dtype=torch.float64, device=group.dev)
    n_steps = labels.shape[1]
    for s, x in enumerate(group.source.steps(sch.src_pos)):
        lab, w, ok = labels[:, s], weights[:, s], row_ok[:, s]
        lab = torch.where((w > 0) & ok, lab, torch.full_like(lab, -1))
        w = w * ok
        loss, con, recon = contrastive_mixup_loss(
            model, Batch(x, lab, w, ok, n_con), streams.Draws(keys, epoch, s + 1),
            cfg.contrastive, group.n_classes)
        opt.zero_grad()
        loss.sum().backward()
        step_active = active & step_ok[:, s]
        opt.step(step_active)
        sums += torch.stack([loss, con, recon], 1).detach().double() * step_active[:, None]
    n = step_ok[:, :n_steps].sum(1).clamp_min(1)[:, None]
    return sums / n


def pretrain_stage(group, model, rows: PretrainRows, look=None, stage="pretrain") -> None:
    """Contrastive mixup pre-training of every model of the group as checkpoint stage
    ``stage``. rows: :class:`PretrainRows`, each model's labeled rows in its label-aware
    terms. look: None (no pseudo-labels) or ``look(epoch, active, records)``, run after
    ``warmup_epochs`` epochs, then every ``lp_every`` epochs and after the last: it
    leaves each run's pseudo-labels in its checkpoint parts ("pseudo", and
    "pseudo_folds" for its fold models), which the following epochs use
    (:func:`paper_look`)."""
    import torch

    from .group import group_epochs
    from .nn import GroupAdam

    cfg, lp = group.cfg, group.cfg.pseudo_labels
    opt = GroupAdam(model.parameters(), group.n_models, cfg.pretrain.lr,
                    cfg.pretrain.weight_decay)

    def epoch_fn(epoch, active):
        rows.pseudo = pseudo_tensors(group) if look is not None else None
        act = torch.tensor(active, device=group.dev)
        losses = pretrain_epoch(group, model, opt, rows, epoch, act).cpu().numpy()
        recs = [{"loss": float(r[0]), "contrastive": float(r[1]),
                 "reconstruction": float(r[2])} if a else None for r, a in zip(losses, active)]
        done = epoch + 1
        if look is not None and ((done >= lp.warmup_epochs
                                  and (done - lp.warmup_epochs) % lp.lp_every == 0)
                                 or done == cfg.pretrain.epochs):
            look(done, active, recs)
        return recs

    group_epochs(group, stage, cfg.pretrain.epochs, {"model": model, "opt": opt}, epoch_fn,
                 "pre-training")


def pseudo_tensors(group):
    """(label int64 (G, n_u), weight float (G, n_u)) over every model's unlabeled
    positions, from its run's checkpoint parts ("pseudo": the S_U rows' labels and weights
    of the run's own model; "pseudo_folds": those of its fold models); -1 / 0 outside S_U
    or without pseudo-labels. None when no pseudo-label of any model carries weight (the
    unlabeled rows then take no part in the contrastive term)."""
    import torch

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
    arm (:func:`cmix.learn.methods.networks.judged_pretraining`)."""
    from .labelprop import graph_from_neighbours, knn_neighbours, propagate

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
    :class:`cmix.learn.labelprop.PropagationResult` over the run's nodes (n_l labeled
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


# ------------------------------------------------------------------ predictor
@dataclass
class HeadStep:
    """One step of a head's epoch for every model: ``idx`` (G, b) positions of the step's
    rows among the epoch's rows, ``ok`` (G, b) bool the rows a model holds, ``active``
    (G,) bool the models that take the step (active, and 2 rows or more: batch norm needs
    2), ``draws`` the step's :class:`cmix.learn.streams.Draws` (the head's dropout layers
    draw from them too), ``j`` its index."""

    j: int
    idx: object
    ok: object
    active: object
    draws: object


def rows_at(t, idx):
    """Rows of a (G, n, ...) tensor at positions idx (G, b): (G, b, ...)."""
    return t.gather(1, idx.view(*idx.shape, *([1] * (t.dim() - 2))).expand(
        *idx.shape, *t.shape[2:]))


def head_steps(head, data, epoch: int, active, keys, batch_size: int):
    """The steps of one epoch of a head over ``data``'s rows (a
    :class:`cmix.learn.group.Labeled`): each model's rows in a shuffled order drawn from
    ``keys`` and the epoch (its padding last), ``batch_size`` a step. Yields
    :class:`HeadStep` s, the head in training mode with the step's draws for its dropout
    (cleared after the epoch)."""
    import torch

    from .nn import set_draws

    g, n = data.weight.shape
    dev = data.weight.device
    order = torch.argsort(torch.where(data.mask(), streams.Draws(keys, epoch, 0).bits(n),
                                      LAST), dim=1, stable=True)
    head.train()
    for j, s0 in enumerate(range(0, n, batch_size)):
        idx = order[:, s0:s0 + batch_size]
        ok = (s0 + torch.arange(idx.shape[1], device=dev))[None, :] < data.count[:, None]
        draws = streams.Draws(keys, epoch, j + 1)
        set_draws(head, draws)
        yield HeadStep(j=j, idx=idx, ok=ok, active=active & (ok.sum(1) >= 2), draws=draws)
    set_draws(head, None)


def predictor_epoch(head, opt, train, epoch: int, active, keys, batch_size: int, mix_on):
    """One epoch of every model's predictor: train (:class:`cmix.learn.group.Labeled`:
    inputs (G, N, ...), targets (G, N, C) soft, weights (G, N)); active (G,) bool device
    tensor; keys: (G,) keys of the epoch loop's stream; batch_size rows a step; mix_on:
    (G,) bool device tensor, latent mixup for those models (lambda ~ U(0, 1), partner = a
    random row of the batch, each parent's target weighted by lambda times its own
    certainty: :func:`cmix.learn.losses.mixup_cross_entropy`); for the others lambda is 1,
    which is plain cross-entropy. A batch of fewer than 2 rows of a model is skipped for
    it (batch norm needs 2). Returns (G,) mean losses on the device."""
    import torch

    from .losses import mixup_cross_entropy

    g = train.weight.shape[0]
    dev = train.weight.device
    total = torch.zeros(g, dtype=torch.float64, device=dev)
    steps = torch.zeros(g, dtype=torch.float64, device=dev)
    for st in head_steps(head, train, epoch, active, keys, batch_size):
        idx, ok = st.idx, st.ok
        b = idx.shape[1]
        t, w = rows_at(train.target, idx), rows_at(train.weight, idx) * ok
        with _amp(dev):
            f = head.features(rows_at(train.x, idx), ok)
        lam = torch.where(mix_on[:, None], st.draws.uniform(b), torch.ones(g, b, device=dev))
        # the partner: a random other row of the model's batch (a shuffle of its rows)
        perm = torch.argsort(torch.where(ok, st.draws.bits(b), LAST), dim=1, stable=True)
        lf = lam.to(f.dtype)[..., None]
        f = lf * f + (1 - lf) * rows_at(f, perm)
        with _amp(dev):
            logits = head.predictor(f, ok).float()
        loss = mixup_cross_entropy(logits, t, rows_at(t, perm), w, rows_at(w, perm), lam,
                                   batch_size)
        opt.zero_grad()
        (loss * st.active).sum().backward()
        opt.step(st.active)
        total += loss.detach().double() * st.active
        steps += st.active
    return total / steps.clamp_min(1)


def predictor_stage(group, inputs_of, su_pos: list, new_head):
    """Every model's predictor on its labeled rows and certainty-weighted pseudo-labeled
    rows (latent mixup per the config, and only for a model with some pseudo-label that
    carries weight: without, its predictor is trained exactly as cmix_selfsl's),
    early-stopped and refitted (:func:`cmix.learn.group.fit_heads`). inputs_of(rows) ->
    (G, n, D) the predictor's inputs of each model's store rows (G sorted arrays of one
    length). new_head(all_labeled=False) -> (head, optimiser). Returns (head, G
    validation summaries)."""
    import torch

    from .group import Labeled, fit_heads

    cfg, dev = group.cfg, group.dev
    g = group.n_models
    rows, ys, ws, mix_on = [], [], [], []
    for i, ctx in enumerate(group.ctxs):
        s = ctx.splits
        r, y, w = [s.train_labeled], [s.label[s.train_labeled]], \
            [np.ones(len(s.train_labeled), np.float32)]
        pseudo = ctx.parts.get("pseudo")
        keep = np.zeros(0, dtype=bool)
        if cfg.switches.pseudo_labels and pseudo is not None:
            keep = (pseudo["label"] >= 0) & (pseudo["weight"] > 0)
            r.append(s.unlabeled[su_pos[i]][keep])
            y.append(pseudo["label"][keep])
            w.append(pseudo["weight"][keep])
        mix_on.append(bool(cfg.switches.predictor_mixup and keep.any()))
        r = np.concatenate(r)
        order = np.argsort(r, kind="stable")
        rows.append((r, order))
        ys.append(np.concatenate(y))
        ws.append(np.concatenate(w).astype(np.float32))
    counts = [len(r) for r, _ in rows]
    n = max(counts)
    # every model's rows sorted by store row, padded with its first row to n
    padded = [np.concatenate([r[o], np.repeat(r[o][:1], n - len(r))]) for r, o in rows]
    x_sorted = inputs_of(padded)
    eye = np.eye(group.n_classes, dtype=np.float32)
    inv = np.zeros((g, n), dtype=np.int64)
    tgt = np.zeros((g, n, group.n_classes), dtype=np.float32)
    wt = np.zeros((g, n), dtype=np.float32)
    for i, (r, o) in enumerate(rows):
        inv[i, :len(r)] = np.argsort(o, kind="stable")
        tgt[i, :len(r)] = eye[ys[i]]
        wt[i, :len(r)] = ws[i]
    inv_t = torch.from_numpy(inv).to(dev)
    x = torch.gather(x_sorted, 1, inv_t.view(g, n, *([1] * (x_sorted.dim() - 2))).expand_as(
        x_sorted))
    train = Labeled(x=x, target=torch.from_numpy(tgt).to(dev), weight=torch.from_numpy(wt).to(dev),
                    count=torch.tensor(counts, device=dev))
    val = validation_rows(group, inputs_of)
    mix = torch.tensor(mix_on, device=dev)
    keys = group.keys(streams.PREDICTOR_STEPS)

    def epoch_fn(head, opt, data, epoch, active):
        return predictor_epoch(head, opt, data, epoch, active, keys,
                               cfg.predictor.pred_batch_size, mix)

    return fit_heads(group, new_head, epoch_fn, train, val)


def validation_rows(group, inputs_of):
    """(inputs (G, n_val, ...), y int64 (G, n_val), count (G,)) of every model's validation
    rows (padded to the group's largest count)."""
    import torch

    dev = group.dev
    vals = [c.splits.validation for c in group.ctxs]
    counts = [len(v) for v in vals]
    n = max(counts)
    y = np.zeros((group.n_models, n), dtype=np.int64)
    for i, v in enumerate(vals):
        y[i, :len(v)] = group.ctxs[i].splits.label[v]
    if n == 0:
        x = inputs_of([np.zeros(0, np.int64)] * group.n_models)
    else:
        x = inputs_of([np.concatenate([v, np.repeat(v[:1], n - len(v))]) if len(v) else
                       np.repeat(group.ctxs[i].splits.train_labeled[:1], n)
                       for i, v in enumerate(vals)])
    return x, torch.from_numpy(y).to(dev), torch.tensor(counts, device=dev)


def check_frozen(model, before: dict) -> None:
    """Raise CmixError if any tensor of ``model`` differs from ``before`` (a copy of its
    state taken before the predictor stage): the encoder must stay frozen."""
    import torch

    moved = [k for k, v in model.state_dict().items() if not torch.equal(v, before[k])]
    if moved:
        raise CmixError(f"the pre-trained encoder changed during the predictor stage "
                        f"({len(moved)} tensors, e.g. {moved[0]}); this is a bug in cmix")


def _pseudo_stats(pseudo: dict, truth: np.ndarray) -> dict:
    """Accuracy of the pseudo-labels on the rows they cover, and the share covered."""
    covered = pseudo["label"] >= 0
    acc = float(np.mean(pseudo["label"][covered] == truth[covered])) if covered.any() else None
    return {"accuracy": acc, "coverage": float(np.mean(covered)) if len(covered) else 0.0,
            "n_rows": int(len(covered))}
