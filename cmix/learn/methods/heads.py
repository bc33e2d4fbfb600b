"""The heads shared by the network methods, for a group of G models: the cmix network's
initialisation, the head's inputs (frozen latent rows (G, n, H) or the dosages, the
covariates beside them), fresh heads started as the covariates-only model, the
predictor's epochs (:func:`predictor_epoch`), the validation rows, the choice between the
MLP head and a linear probe (:func:`choose_heads`).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

import numpy as np
import torch

from ...errors import CmixError
from .. import streams
from ..data import LAST
from ..group_heads import Labeled, fit_heads
from ..linear import fit_logreg_cv, require_two_per_class
from ..nn import ContrastiveMixup, GroupAdam, autocast, build_head, init_generators, set_draws
from ..streams import MODEL_INIT, PREDICTOR_STEPS
from .cmix.losses import mixup_cross_entropy
from .probes import fit_probe, probe_cs, probe_path


def latent_rows(model, x, batch: int = 4096):
    """float32 (G, n, H) latent of dosages x (G, n, M) (eval mode, in batches of rows)."""
    model.eval()
    if x.shape[1] == 0:
        return torch.zeros(x.shape[0], 0, model.encoder.out_dim, device=x.device)
    with torch.no_grad(), autocast(x.device):
        return torch.cat([model.encode(x[:, s:s + batch]).float()
                          for s in range(0, x.shape[1], batch)], 1)


def cmix_model(group):
    """The cmix network (embedding + encoder + decoder + projection) of every model of the
    group, each model's weights drawn from its run's seed."""
    c0 = group.ctxs[0]
    return ContrastiveMixup(init_generators(group.seeds, MODEL_INIT), group.n_snps,
                            group.cfg.model, c0.mean, c0.sd).to(group.dev)


def covariates_start(ctx, all_labeled: bool, cache: dict):
    """(weight (C, K), bias (C,)) of a run's covariates baseline's model
    (:func:`cmix.learn.linear.fit_logreg_cv`: L2, C by cross-validation) fitted on its
    training labeled rows, or with ``all_labeled`` on every labeled row (training and
    validation, as the refit and the covariates baseline use them); fitted once per run
    for each (``cache``: (seed, all_labeled) -> result)."""
    key = (ctx.seed, all_labeled)
    if key not in cache:
        s, cfg = ctx.splits, ctx.cfg.logreg
        rows = s.labeled if all_labeled else s.train_labeled
        y = s.label[rows]
        c = s.n_classes
        w, b = np.zeros((c, ctx.n_cov)), np.zeros(c)
        if len(np.unique(y)) > 1:
            lr = fit_logreg_cv(ctx.cov[rows].astype(np.float64), y, c, cfg.logreg_folds,
                               cfg.logreg_n_c, ctx.seed)[0]
            if len(lr.classes_) == 2:
                w[lr.classes_[1]], b[lr.classes_[1]] = lr.coef_[0], lr.intercept_[0]
            else:
                w[lr.classes_], b[lr.classes_] = lr.coef_, lr.intercept_
        cache[key] = (w, b)
    return cache[key]


def new_head(group, latent_dim, cache: dict, all_labeled: bool = False):
    """Fresh heads of every model (on latent rows of width ``latent_dim``, or on the
    dosages when None) and their Adam, seeded the same way at every call. With
    covariates each model's covariate term starts as its covariates-only model
    (:func:`covariates_start`) and its network's last layer at zero: the head starts as
    exactly that model and learns what the genotypes add; early stopping keeps the start
    as a candidate. ``all_labeled``: the start fitted on every labeled row, for the refit
    on training plus validation rows."""
    cfg, c0 = group.cfg, group.ctxs[0]
    head = build_head(group.seeds, group.n_snps, group.n_classes, group.n_cov, cfg,
                      latent_dim=latent_dim, moments=(c0.mean, c0.sd), device=group.dev)
    if head.predictor.skip is not None:
        starts = [covariates_start(ctx, all_labeled, cache) for ctx in group.ctxs]
        with torch.no_grad():
            head.predictor.skip.weight.copy_(torch.from_numpy(np.stack([w for w, _ in starts])))
            head.predictor.skip.bias.copy_(torch.from_numpy(np.stack([b for _, b in starts])))
            head.predictor.net[-1].weight.zero_()
            head.predictor.net[-1].bias.zero_()
    return head, GroupAdam(head.parameters(), group.n_models, cfg.predictor.pred_lr,
                           cfg.predictor.pred_weight_decay)


def head_inputs(group, model=None):
    """rows -> the predictor's inputs (G, n, D) of each model's store rows (G arrays of
    one length): frozen latent rows of ``model`` (a grouped encoder), or the dosages when
    None (the head embeds them itself); the covariates beside them, if any."""
    def inputs(rows):
        rs = group.row_set(rows)
        x = group.source.gather(rs.pos_index)
        if model is not None:
            x = latent_rows(model, x)
        return group.with_cov(x, rs.pos)
    return inputs


def freeze(model) -> dict:
    """Freeze an encoder (eval mode, no gradients); returns a copy of its state, to check
    that it stays frozen."""
    model.eval()
    for p in model.parameters():
        p.requires_grad_(False)
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def check_frozen(model, before: dict) -> None:
    """Raise CmixError if any tensor of ``model`` differs from ``before`` (a copy of its
    state taken before the predictor stage): the encoder must stay frozen."""
    moved = [k for k, v in model.state_dict().items() if not torch.equal(v, before[k])]
    if moved:
        raise CmixError(f"the pre-trained encoder changed during the predictor stage "
                        f"({len(moved)} tensors, e.g. {moved[0]}); this is a bug in cmix")


def run_inputs(group, model, rows: list) -> list:
    """Each run's head inputs (n_i, H + K) numpy of its store rows ``rows[i]``, computed
    for the whole group at once (:func:`head_inputs`, the rows padded to one length)."""
    n = max(max(len(r) for r in rows), 1)
    padded = [np.concatenate([r, np.repeat(r[:1] if len(r) else np.zeros(1, np.int64),
                                           n - len(r))]) for r in rows]
    x = head_inputs(group, model)(padded).float().cpu().numpy()
    return [x[i, :len(r)] for i, r in enumerate(rows)]


def choose_heads(group, model, summaries: list) -> list:
    """For each run, the head its labels favour: the MLP predictor already fitted, or a
    linear probe on the frozen latent of ``model``, whichever has the lower log-loss on
    the run's validation rows. The MLP's: its early-stopped head's; the probe's: fitted
    on the training labeled rows at each C of :func:`probe_cs`, C the one with the
    lowest validation log-loss (the validation rows are the labeled rows whose labels
    pre-training never used: on the training labeled rows the latent holds the classes
    it was trained with, and a cross-validation there reads them). No test row is read.
    A chosen probe is fitted again at its C on every labeled row (training and
    validation), as the MLP is refitted. Records the choice, the probe's C and both
    losses in each run's validation summary; returns the probes (None where the MLP
    stays)."""
    splits = [c.splits for c in group.ctxs]
    x_tr = run_inputs(group, model, [s.train_labeled for s in splits])
    x_val = run_inputs(group, model, [s.validation for s in splits])
    probes, chosen = [None] * group.n_models, {}
    for i, (ctx, s) in enumerate(zip(group.ctxs, splits)):
        mlp_loss = summaries[i].get("best_loss")
        choice = {"head": "mlp", "head_val_log_loss": {"mlp": mlp_loss, "linear": None},
                  "probe_C": None}
        y_tr, y_val = s.label[s.train_labeled], s.label[s.validation]
        try:
            require_two_per_class(y_tr, s.n_classes, "the linear probe's fit")
        except CmixError:              # too few labeled rows of a class: the MLP stays
            summaries[i].update(choice)
            continue
        if len(y_val) and mlp_loss is not None:
            path = probe_path(ctx, x_tr[i], y_tr, x_val[i])
            losses = -np.mean(np.log(np.clip(path[:, np.arange(len(y_val)), y_val], 1e-12,
                                             None)), axis=1)
            best = int(np.argmin(losses))
            choice["head_val_log_loss"]["linear"] = float(losses[best])
            choice["probe_C"] = float(probe_cs(ctx)[best])
            if losses[best] < mlp_loss:
                choice["head"] = "linear"
                chosen[i] = choice["probe_C"]
        summaries[i].update(choice)
    if chosen:
        x_lab = run_inputs(group, model, [s.labeled for s in splits])
        for i, c in chosen.items():
            s = splits[i]
            probes[i] = fit_probe(group.ctxs[i], x_lab[i], s.label[s.labeled], c)
    return probes


def labeled_rows(group, inputs_of) -> Labeled:
    """Every model's training labeled rows as one padded batch: ``x`` their inputs
    (``inputs_of``, G x n), one-hot targets (G, n, C), weight 1 on a model's own rows and
    0 on the padding (its first row repeated up to the longest model's n), counts (G,)."""
    rows = [c.splits.train_labeled for c in group.ctxs]
    counts = [len(r) for r in rows]
    n = max(counts)
    x = inputs_of([np.concatenate([r, np.repeat(r[:1], n - len(r))]) for r in rows])
    eye = np.eye(group.n_classes, dtype=np.float32)
    tgt = np.zeros((group.n_models, n, group.n_classes), np.float32)
    wt = np.zeros((group.n_models, n), np.float32)
    for i, (c, r) in enumerate(zip(group.ctxs, rows)):
        tgt[i, :len(r)] = eye[c.splits.label[r]]
        wt[i, :len(r)] = 1.0
    dev = group.dev
    return Labeled(x=x, target=torch.from_numpy(tgt).to(dev),
                   weight=torch.from_numpy(wt).to(dev), count=torch.tensor(counts, device=dev))


def supervised_heads(group, model, cache: dict):
    """The early-stopped, refitted heads (plain cross-entropy) of every model on the
    frozen latent of ``model`` (or on the dosages when None), on its training labeled
    rows, validated on its validation rows: (head, G validation summaries)."""
    inputs_of = head_inputs(group, model)
    train = labeled_rows(group, inputs_of)
    dev = group.dev
    keys = group.keys(PREDICTOR_STEPS)
    off = torch.zeros(group.n_models, dtype=torch.bool, device=dev)
    latent = model.encoder.out_dim if model is not None else None

    def epoch_fn(head, opt, data, epoch, active):
        return predictor_epoch(head, opt, data, epoch, active, keys,
                                  group.cfg.predictor.pred_batch_size, off)

    return fit_heads(group, partial(new_head, group, latent, cache), epoch_fn, train,
                     validation_rows(group, inputs_of))


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
    :class:`cmix.learn.group_heads.Labeled`): each model's rows in a shuffled order drawn from
    ``keys`` and the epoch (its padding last), ``batch_size`` a step. Yields
    :class:`HeadStep` s, the head in training mode with the step's draws for its dropout
    (cleared after the epoch)."""
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
    """One epoch of every model's predictor: train (:class:`cmix.learn.group_heads.Labeled`:
    inputs (G, N, ...), targets (G, N, C) soft, weights (G, N)); active (G,) bool device
    tensor; keys: (G,) keys of the epoch loop's stream; batch_size rows a step; mix_on:
    (G,) bool device tensor, latent mixup for those models (lambda ~ U(0, 1), partner = a
    random row of the batch, each parent's target weighted by lambda times its own
    certainty: :func:`cmix.learn.methods.cmix.losses.mixup_cross_entropy`); for the others lambda is 1,
    which is plain cross-entropy. A batch of fewer than 2 rows of a model is skipped for
    it (batch norm needs 2). Returns (G,) mean losses on the device."""
    g = train.weight.shape[0]
    dev = train.weight.device
    total = torch.zeros(g, dtype=torch.float64, device=dev)
    steps = torch.zeros(g, dtype=torch.float64, device=dev)
    for st in head_steps(head, train, epoch, active, keys, batch_size):
        idx, ok = st.idx, st.ok
        b = idx.shape[1]
        t, w = rows_at(train.target, idx), rows_at(train.weight, idx) * ok
        with autocast(dev):
            f = head.features(rows_at(train.x, idx), ok)
        lam = torch.where(mix_on[:, None], st.draws.uniform(b), torch.ones(g, b, device=dev))
        # the partner: a random other row of the model's batch (a shuffle of its rows)
        perm = torch.argsort(torch.where(ok, st.draws.bits(b), LAST), dim=1, stable=True)
        lf = lam.to(f.dtype)[..., None]
        f = lf * f + (1 - lf) * rows_at(f, perm)
        with autocast(dev):
            logits = head.predictor(f, ok).float()
        loss = mixup_cross_entropy(logits, t, rows_at(t, perm), w, rows_at(w, perm), lam,
                                   batch_size)
        opt.zero_grad()
        (loss * st.active).sum().backward()
        opt.step(st.active)
        total += loss.detach().double() * st.active
        steps += st.active
    return total / steps.clamp_min(1)


def validation_rows(group, inputs_of):
    """(inputs (G, n_val, ...), y int64 (G, n_val), count (G,)) of every model's validation
    rows (padded to the group's largest count)."""
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
