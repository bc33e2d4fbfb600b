"""Contrastive Mixup pre-training of a group of runs (cmix and the ablations
with pre-training) (the method as Darabi et al. 2021 describe it; departures in docs/method.md).

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
:class:`cmix.learn.methods.cmix.method.ContrastiveMixupMethod`; the checkpoints and loops
come from :mod:`cmix.learn.group`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from ... import streams
from ...stages import PRETRAIN
from ...data import chunk_aware_order, permutations
from ...group import group_epochs
from ...nn import GroupAdam, autocast
from .losses import contrastive_targets, mix_partners, mix_rows, reconstruction_loss, supcon_loss
from .pseudo_labels import pseudo_tensors


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
    (:func:`cmix.learn.methods.cmix.losses.mix_partners`, within the class with mix == "within_class").
    The originals and the mixed views run through the encoder as one batch; a mixed view
    is the placeholder of its row until layer t, where it becomes the mix of the two
    rows' hidden states (with batch norm, the statistics of a block are of the originals
    and the mixed views that exist there). The weighted supervised contrastive loss
    (temperature tau) runs over the labeled rows and the mixed rows with their soft class
    targets (:func:`cmix.learn.methods.cmix.losses.contrastive_targets`); the reconstruction loss is of
    every row. total = contrastive + beta * reconstruction."""
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
    with autocast(x.device):
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


def pretrain_rows(group, folds: dict | None = None):
    """The pre-training rows of every model of the group: each run's training labeled
    rows (a fold model f: those outside fold f of ``folds``, run id -> (n_L,) folds) and
    its unlabeled rows."""
    labeled = []
    for c, role in zip(group.ctxs, group.roles):
        rows = c.splits.train_labeled
        labeled.append(rows if role == 0 else rows[folds[id(c)] != role - 1])
    rows = PretrainRows(labeled=group.row_set(labeled), y=None,
                           unlabeled=group.row_set([c.splits.unlabeled for c in group.ctxs]))
    rows.y = group.label[rows.labeled.pos]
    return rows


def epoch_schedule(group, rows: PretrainRows, epoch: int) -> Schedule:
    """The steps of one pre-training epoch (:class:`Schedule`), drawn on the device from
    each run's (stream, epoch): labeled rows ``take`` a step from successive shuffles of
    the model's labeled rows, unlabeled rows B a step in a chunk-aware shuffled order
    (:func:`cmix.learn.data.chunk_aware_order`)."""
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


def pretrain_stage(group, model, rows: PretrainRows, look=None, stage=PRETRAIN) -> None:
    """Contrastive mixup pre-training of every model of the group as checkpoint stage
    ``stage``. rows: :class:`PretrainRows`, each model's labeled rows in its label-aware
    terms. look: None (no pseudo-labels) or ``look(epoch, active, records)``, run after
    ``warmup_epochs`` epochs, then every ``lp_every`` epochs and after the last: it
    leaves each run's pseudo-labels in its checkpoint parts ("pseudo", and
    "pseudo_folds" for its fold models), which the following epochs use
    (:func:`paper_look`)."""
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
