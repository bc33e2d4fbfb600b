"""The predictors of a group of runs (:class:`cmix.learn.group.Group`): every model's head
early-stopped on its run's validation rows, then refitted on its training and validation
rows for the epochs it stopped at, resumable at every epoch (stages ``predictor`` and
``refit`` of each run's checkpoint).

- :class:`Labeled`: the rows a head trains on, (G, n, ...) with their soft targets.
- :class:`EarlyStop`: each model's best epoch and weights.
- :func:`fit_heads`: the early-stopped predictors, then their refit.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import torch

from ..logs import progress
from .stages import DONE, PREDICTOR, REFIT
from .group import Group
from .nn import load_model_state, model_state


def heldout_log_loss(prob, y, mask):
    """Each model's mean negative log-probability of the true class over the rows of
    ``mask``: prob (G, n, C), y (G, n) int64, mask (G, n) bool -> (G,) float64, inf for
    a model without rows."""
    p = torch.gather(prob, 2, y[..., None])[..., 0].double().clamp_min(1e-12)
    m = mask.double()
    n = m.sum(1)
    out = -(torch.log(p) * m).sum(1) / n.clamp_min(1.0)
    return torch.where(n > 0, out, torch.full_like(out, float("inf")))


def heldout_accuracy(prob, y, mask):
    """(G,) float64: each model's share of ``mask``'s rows whose argmax is the class."""
    m = mask.double()
    right = (prob.argmax(-1) == y).double() * m
    return right.sum(1) / m.sum(1).clamp_min(1.0)


@dataclass
class Labeled:
    """A predictor stage's rows of each model: ``x`` (G, n, ...) inputs, ``target``
    (G, n, C) float, ``weight`` (G, n) float (0 past a model's count), ``count`` int64
    (G,) rows each model holds."""
    x: object
    target: object
    weight: object
    count: object

    def mask(self):

        return torch.arange(self.x.shape[1], device=self.x.device)[None, :] < self.count[:, None]


class EarlyStop:
    """Every model's early-stopping record on the device: its best state so far (a copy
    of the head's state dict with the model axis), best validation log-loss (inf: none
    yet), best epoch (0: the start), epochs without improvement, and whether it holds a
    best state at all."""
    def __init__(self, head, g: int, dev):

        self.best = [t.detach().clone() for t in head.state_dict().values()]
        self.loss = torch.full((g,), float("inf"), dtype=torch.float64, device=dev)
        self.epoch = torch.zeros(g, dtype=torch.long, device=dev)
        self.bad = torch.zeros(g, dtype=torch.long, device=dev)
        self.held = torch.zeros(g, dtype=torch.bool, device=dev)

    def update(self, head, vloss, active, epoch: int) -> None:
        """After an epoch (1-based ``epoch`` done): keep the heads of the active models
        whose validation loss ``vloss`` (G,) improved; count the others' bad epochs."""
        improved = active & (vloss < self.loss)
        with torch.no_grad():
            for b, c in zip(self.best, head.state_dict().values()):
                b.copy_(torch.where(improved.view(-1, *([1] * (b.dim() - 1))), c, b))
        self.loss = torch.where(improved, vloss, self.loss)
        self.epoch = torch.where(improved, torch.full_like(self.epoch, epoch), self.epoch)
        self.held = self.held | improved
        self.bad = torch.where(improved, torch.zeros_like(self.bad), self.bad + active.long())

    def restore(self, head) -> None:
        """Put each model's best state (where it has one) into the head."""
        with torch.no_grad():
            for p, b in zip(head.state_dict().values(), self.best):
                p.copy_(torch.where(self.held.view(-1, *([1] * (p.dim() - 1))), b, p))

    def part(self, head, opt, i: int) -> dict:
        """Model i's checkpoint part "predictor"."""
        return {"head": model_state(head, i), "opt": opt.model_state(i),
                "best": ({k: v[i].detach().cpu().clone()
                          for k, v in zip(head.state_dict(), self.best)}
                         if bool(self.held[i]) else None),
                "best_loss": float(self.loss[i]), "best_epoch": int(self.epoch[i]),
                "bad": int(self.bad[i])}

    def load(self, head, opt, i: int, part: dict) -> None:
        """Model i's head, optimiser and record from its checkpoint part."""
        load_model_state(head, i, part["head"])
        opt.load_model_state(i, part["opt"])
        if part["best"] is not None:
            load_model_state_into(self.best, head, i, part["best"])
            self.held[i] = True
        self.loss[i] = part["best_loss"]
        self.epoch[i], self.bad[i] = part["best_epoch"], part["bad"]


def fit_heads(group: Group, new_head, epoch_fn, train: Labeled, val: tuple,
              desc: str = "predictor"):
    """The early-stopped predictor of every model, then the refit; resumable at every
    epoch (stages "predictor" then "refit", parts "predictor" and "refit" of each run).

    new_head(all_labeled=False) -> (head, optimiser): the group's heads (each model's
    covariate term starting as its covariates-only model, fitted on its training labeled
    rows, or on every labeled row with ``all_labeled``), the same start at every call.
    epoch_fn(head, opt, train, epoch, active) -> (G,) mean losses trains one epoch
    (active: (G,) bool device tensor; an inactive model takes no step). val: (x (G, n, ...),
    y (G, n) int64, count (G,) int64), possibly of zero rows. A model stops after
    ``pred_patience`` epochs without a better validation log-loss (its optimiser steps are
    masked from then on) and its best state is reloaded; with covariates the untrained head
    (the covariates-only model) competes as epoch 0. The loop ends when every model has
    stopped or after pred_epochs. With ``pred_refit`` each model's fresh head (covariate
    start fitted on every labeled row) is trained on train + validation rows for that
    model's best epoch count (the group runs the largest count; a model's head is kept
    at its own); when epoch 0 wins, that fresh head untrained is its result.
    Returns (head, list of G validation summaries)."""
    cfg = group.cfg.predictor
    x_val, y_val, n_val = val
    has_val = x_val.shape[1] > 0
    head, opt = new_head()
    stop = EarlyStop(head, group.n_models, group.dev)
    parts = [c.state.parts.get("predictor") for c in group.ctxs]
    if all(p is None for p in parts):
        if has_val and group.n_cov:     # the start is the covariates-only model: a candidate
            stop.loss = heldout_log_loss(head.proba(x_val), y_val, val_rows(val))
            stop.held[:] = True
    else:
        for i, part in enumerate(parts):
            stop.load(head, opt, i, part)
    for c in group.ctxs:
        if c.state.stage not in (PREDICTOR, REFIT, DONE):
            c.state.stage, c.state.epoch = "predictor", 0
    predictor_epochs(group, head, opt, stop, epoch_fn, train, val, desc)
    stop.restore(head)                  # the best epoch, not the last
    summaries, n_refit = head_summaries(group, head, stop, val)
    refit = n_refit > 0 if not (cfg.pred_refit and has_val and group.n_cov) \
        else np.ones(group.n_models, dtype=bool)
    if not refit.any():
        return head, summaries
    fresh = refit_heads(group, new_head, epoch_fn, train, val, n_refit)
    kept = [model_state(fresh if refit[i] else head, i) for i in range(group.n_models)]
    for i in range(group.n_models):
        load_model_state(head, i, kept[i])
    return head, summaries


def val_rows(val: tuple):
    """bool (G, n): the validation rows each model holds (``val`` as :func:`fit_heads`)."""
    x_val, _, n_val = val
    return torch.arange(x_val.shape[1], device=n_val.device)[None, :] < n_val[:, None]


def predictor_epochs(group: Group, head, opt, stop: EarlyStop, epoch_fn, train: Labeled,
                     val: tuple, desc: str) -> None:
    """The early-stopping loop of :func:`fit_heads` from where the runs' states stand: an
    epoch of every model that has not stopped, its validation loss, one read of the
    losses by the host, each run's log record; checkpoints as :meth:`Group.save`."""
    cfg = group.cfg.predictor
    states = [c.state for c in group.ctxs]
    x_val, y_val, _ = val
    has_val = x_val.shape[1] > 0
    mask = val_rows(val)
    epoch = states[0].epoch if states[0].stage == PREDICTOR else cfg.pred_epochs

    def write_parts(i, st):
        if st.stage == PREDICTOR:
            st.parts["predictor"] = stop.part(head, opt, i)

    bar = progress(total=cfg.pred_epochs, desc=desc, unit="epoch")
    bar.update(epoch)
    stopped = stop.bad >= cfg.pred_patience if has_val else stop.bad < 0
    while states[0].stage == PREDICTOR and epoch < cfg.pred_epochs and \
            not (has_val and bool(stopped.all())):
        t0 = time.perf_counter()
        active = ~stopped
        recs = {"loss": epoch_fn(head, opt, train, epoch, active).double()}
        if has_val:
            prob = head.proba(x_val)
            vloss = heldout_log_loss(prob, y_val, mask)
            recs.update(val_loss=vloss, val_accuracy=heldout_accuracy(prob, y_val, mask))
            stop.update(head, vloss, active, epoch + 1)
            stopped = stop.bad >= cfg.pred_patience
        seconds = time.perf_counter() - t0
        host = {k: v.cpu().numpy() for k, v in recs.items()}          # once an epoch
        act = active.cpu().numpy()
        epoch += 1
        for i, st in enumerate(states):
            st.epoch = epoch
            if act[i]:
                st.times["predictor"] = st.times.get("predictor", 0.0) + seconds
                st.history.append({"stage": PREDICTOR, "epoch": epoch,
                                   **{k: float(v[i]) for k, v in host.items()},
                                   "seconds": round(seconds, 3)})
        group.save(write_parts)
        bar.update(1)
    bar.close()
    for i, st in enumerate(states):
        write_parts(i, st)


def head_summaries(group: Group, head, stop: EarlyStop, val: tuple):
    """Each model's validation summary (best epoch and loss, the accuracy of its best
    head, the refit's epoch count) and the refit's epoch counts (G,) numpy."""
    cfg = group.cfg.predictor
    x_val, y_val, _ = val
    has_val = x_val.shape[1] > 0
    acc = (heldout_accuracy(head.proba(x_val), y_val, val_rows(val)).cpu().numpy()
           if has_val else None)
    be, bl = stop.epoch.cpu().numpy(), stop.loss.cpu().numpy()
    n_refit = np.zeros(group.n_models, dtype=np.int64)
    summaries = []
    for i in range(group.n_models):
        s = {"best_epoch": int(be[i]), "best_loss": float(bl[i]) if np.isfinite(bl[i]) else None}
        if has_val:
            s["accuracy"] = float(acc[i])
        n_refit[i] = int(be[i]) if cfg.pred_refit and has_val else 0
        s["refit_epochs"] = int(n_refit[i])
        summaries.append(s)
    return summaries, n_refit


def load_model_state_into(tensors: list, module, i: int, state: dict) -> None:
    """Put a lone model's state dict at index i of ``tensors`` (a list parallel to
    ``module.state_dict()``'s entries)."""
    with torch.no_grad():
        for t, k in zip(tensors, module.state_dict()):
            t[i].copy_(torch.as_tensor(state[k]))


def refit_heads(group: Group, new_head, epoch_fn, train: Labeled, val: tuple,
                n_refit: np.ndarray):
    """Fresh heads (``new_head(all_labeled=True)``) trained on each model's training plus
    validation rows, model i for n_refit[i] epochs (its head is the one it had then; 0:
    as it starts); resumable at every epoch (stage and part "refit")."""

    x_val, y_val, n_val = val
    states = [c.state for c in group.ctxs]
    all_train = concat_labeled(train, val, group.n_classes)
    head, opt = new_head(all_labeled=True)
    kept = [None] * group.n_models
    for i, st in enumerate(states):
        part = st.parts.get("refit")
        if part is not None:
            load_model_state(head, i, part["head"])
            opt.load_model_state(i, part["opt"])
            kept[i] = part.get("kept")
        if st.stage == PREDICTOR:
            st.stage, st.epoch = REFIT, 0
    target = torch.as_tensor(n_refit, device=group.dev)
    epoch = min(st.epoch for st in states)
    for i in range(group.n_models):
        if kept[i] is None and epoch >= n_refit[i]:
            kept[i] = model_state(head, i)

    def write_parts(i, st):
        st.parts["refit"] = {"head": model_state(head, i), "opt": opt.model_state(i),
                             "kept": kept[i]}

    while epoch < int(n_refit.max()):
        t0 = time.perf_counter()
        active = epoch < target
        loss = epoch_fn(head, opt, all_train, epoch, active).cpu().numpy()
        epoch += 1
        seconds = time.perf_counter() - t0
        for i, st in enumerate(states):
            st.epoch = epoch
            if epoch > n_refit[i]:
                continue
            st.times["refit"] = st.times.get("refit", 0.0) + seconds
            st.history.append({"stage": REFIT, "epoch": epoch, "loss": float(loss[i]),
                               "seconds": round(seconds, 3)})
            if epoch == n_refit[i]:
                kept[i] = model_state(head, i)
        group.save(write_parts)
    for i, st in enumerate(states):
        write_parts(i, st)
    for i in range(group.n_models):
        load_model_state(head, i, kept[i])
    return head


def concat_labeled(train: Labeled, val: tuple, n_classes: int) -> Labeled:
    """Each model's training rows followed by its validation rows (one-hot targets, weight
    1), packed to the front: a Labeled of n_train + n_val columns."""
    x_val, y_val, n_val = val
    g, n_tr = train.weight.shape
    n = n_tr + x_val.shape[1]
    dev = train.x.device
    # destination column of every source entry: model i's training rows 0..count-1, then its
    # validation rows count..count+n_val-1; padding after
    col = torch.arange(n, device=dev)[None, :].expand(g, n)
    is_val = col >= train.count[:, None]
    src_tr = col.clamp_max(n_tr - 1)
    src_val = (col - train.count[:, None]).clamp(0, max(x_val.shape[1] - 1, 0))
    eye = torch.eye(n_classes, device=dev, dtype=train.target.dtype)

    def pick(a_tr, a_val):
        shape = (g, n) + a_tr.shape[2:]
        idx_tr = src_tr.view(g, n, *([1] * (a_tr.dim() - 2))).expand(shape)
        tr = torch.gather(a_tr, 1, idx_tr)
        if a_val.shape[1] == 0:
            return tr
        idx_val = src_val.view(g, n, *([1] * (a_val.dim() - 2))).expand(shape)
        va = torch.gather(a_val, 1, idx_val)
        return torch.where(is_val.view(g, n, *([1] * (a_tr.dim() - 2))), va, tr)

    x = pick(train.x, x_val.to(train.x.dtype))
    target = pick(train.target, eye[y_val])
    w_val = torch.ones(y_val.shape, device=dev, dtype=train.weight.dtype)
    weight = pick(train.weight, w_val)
    count = train.count + n_val
    weight = weight * (col < count[:, None]).to(weight.dtype)
    return Labeled(x=x, target=target, weight=weight, count=count)
