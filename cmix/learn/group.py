"""A group of runs trained together: the G runs of one method, store, budget and config
(the seeds of one ``cmix train`` call) share every step's tensor operations.

Each run keeps its own folder, splits, labeled rows, random streams, early stopping,
pseudo-labels, checkpoint and metrics (its :class:`cmix.learn.context.RunContext`); the
group holds their models as one set of parameters with a leading model axis
(:mod:`cmix.learn.nn`) and the store's training rows once (:class:`cmix.learn.data.RowSource`).
A model that has finished a stage, or has no rows in a step, is masked (its optimiser
step is skipped), never waited for by the host; the host reads the group's device tensors
once an epoch (losses, validation, stopping).

- :class:`Group`: the runs, the row source, each model's row sets (:class:`RowSet`).
- :func:`group_epochs`: the resumable epoch loop of a stage (pre-training).
- :func:`fit_heads`: the early-stopped predictors, then their refit.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from ..logs import progress


@dataclass
class RowSet:
    """One row list per model, padded to a common length: ``pos`` int64 (G, n) positions
    into the group's row source (on the training device; ``pos_index``: the same on the
    source's index device), ``count`` int64 (G,) rows each model holds (on both devices
    likewise), ``counts`` the same as a host list; positions past a model's count repeat
    its first row (they are masked wherever used)."""

    pos: object
    pos_index: object
    count: object
    count_index: object
    counts: list

    @property
    def n(self) -> int:
        return int(self.pos.shape[1])

    def mask(self, n=None):
        """bool (G, n): which of the first n entries a model holds."""
        import torch

        n = self.n if n is None else n
        return torch.arange(n, device=self.pos.device)[None, :] < self.count[:, None]


class Group:
    """The models trained together, the runs they belong to and the rows they share.

    ctxs: each model's run (context); a run may hold several models: its own (role 0)
    and, for a cross-fitted judge, its fold models (role f + 1 for fold f,
    :meth:`with_folds`). seeds: each model's stream seed (its run's seed for role 0; a
    fold model's from :func:`cmix.learn.streams.fold_seed`), from which its initial weights
    and every draw come. ``source``: the store's training rows
    (:class:`cmix.learn.data.RowSource`), ``label`` int64 (n_src,) their classes and
    ``cov`` float32 (n_src, K) their standardised covariates, on the device."""

    def __init__(self, ctxs: list, source, seeds=None, roles=None):
        import torch

        self.ctxs = ctxs
        c0 = ctxs[0]
        self.cfg, self.dev = c0.cfg, c0.dev
        self.seeds = [c.seed for c in ctxs] if seeds is None else list(seeds)
        self.roles = [0] * len(ctxs) if roles is None else list(roles)
        self.source = source
        self.label = torch.from_numpy(c0.splits.label[source.rows]).to(self.dev)
        self.cov = torch.from_numpy(np.ascontiguousarray(c0.cov[source.rows])).to(self.dev)
        self._keys: dict = {}

    @property
    def n_models(self) -> int:
        return len(self.ctxs)

    def subgroup(self, idx: list) -> "Group":
        """The group of models ``idx`` (indices into this group), on the same row source."""
        return Group([self.ctxs[i] for i in idx], self.source,
                     [self.seeds[i] for i in idx], [self.roles[i] for i in idx])

    def with_folds(self, n_folds: int) -> "Group":
        """This group's runs each with its ``n_folds`` fold models after its own model:
        model r * (n_folds + 1) is run r's, the next n_folds its fold models."""
        from .streams import fold_seed

        ctxs, seeds, roles = [], [], []
        for c, s in zip(self.ctxs, self.seeds):
            for role in range(n_folds + 1):
                ctxs.append(c)
                seeds.append(s if role == 0 else fold_seed(s, role - 1))
                roles.append(role)
        return Group(ctxs, self.source, seeds, roles)

    def runs(self) -> list:
        """The runs of the group's models, each once, in order."""
        return list({id(c): c for c in self.ctxs}.values())

    def part_name(self, stage: str, i: int) -> str:
        """The checkpoint part of model i for ``stage``: the stage's name for a run's own
        model, "<stage>:fold<f>" for its fold model f."""
        return stage if self.roles[i] == 0 else f"{stage}:fold{self.roles[i] - 1}"

    @property
    def n_classes(self) -> int:
        return self.ctxs[0].splits.n_classes

    @property
    def n_cov(self) -> int:
        return self.ctxs[0].n_cov

    @property
    def n_snps(self) -> int:
        return self.ctxs[0].n_snps

    def keys(self, stream: int, device=None):
        """int64 (G,) keys of ``stream`` for every model (:func:`cmix.learn.streams.model_keys`),
        on ``device`` (default the training device); made once a group."""
        from .streams import model_keys

        dev = self.dev if device is None else device
        if (stream, str(dev)) not in self._keys:
            self._keys[stream, str(dev)] = model_keys(self.seeds, stream, dev)
        return self._keys[stream, str(dev)]

    def row_set(self, rows: list) -> RowSet:
        """The RowSet of each model's store rows (``rows``: G sorted arrays)."""
        import torch

        counts = [len(r) for r in rows]
        n = max(max(counts), 1)
        pos = np.zeros((len(rows), n), dtype=np.int64)
        for i, r in enumerate(rows):
            p = self.source.positions(np.asarray(r, dtype=np.int64))
            pos[i, :len(p)] = p
            pos[i, len(p):] = p[0] if len(p) else 0
        t = torch.from_numpy(pos)
        c = torch.tensor(counts, dtype=torch.int64)
        return RowSet(pos=t.to(self.dev), pos_index=t.to(self.source.index_device),
                      count=c.to(self.dev), count_index=c.to(self.source.index_device),
                      counts=counts)

    def rows_of(self, rows: list, batch: int = 4096):
        """(G, n, M) dosages of each model's store rows (``rows``: G sorted arrays of one
        length), on the device."""
        import torch

        rs = self.row_set(rows)
        return torch.cat([self.source.gather(rs.pos_index[:, s:s + batch])
                          for s in range(0, rs.n, batch)], 1)

    def with_cov(self, inputs, pos):
        """``inputs`` (G, n, D) with the covariates of source positions ``pos`` (G, n)
        beside them (float), or unchanged when the runs use none."""
        import torch

        if not self.n_cov:
            return inputs
        return torch.cat([inputs.float(), self.cov[pos]], 2)

    # ------------------------------------------------------------ checkpoints
    def save(self, write_parts, force: bool = False) -> None:
        """Every run's checkpoint, when one of them has not been written for
        :data:`cmix.learn.checkpoints.CHECKPOINT_SECONDS` (``save_due``; a run's first epoch
        is written at once) or with ``force``; the group decides once for all its runs, so their
        checkpoints stay at one epoch. ``write_parts(i, state)`` first puts model i's
        modules in its state's parts (done only when writing: copying every model's
        weights to the host every epoch would cost more than the epoch on a GPU)."""
        if not force and not any(c.save_due() for c in self.ctxs):
            return
        for i, ctx in enumerate(self.ctxs):
            write_parts(i, ctx.state)
        for ctx in self.runs():
            ctx.save(ctx.state, force=True)


def module_parts(modules: dict, i: int) -> dict:
    """Model i's slice of named grouped modules and :class:`cmix.learn.nn.GroupAdam`s."""
    from .nn import GroupAdam, model_state

    return {name: (m.model_state(i) if isinstance(m, GroupAdam) else model_state(m, i))
            for name, m in modules.items()}


def load_module_parts(modules: dict, i: int, part: dict) -> None:
    """Put a run's saved slice (:func:`module_parts`) at model i of the modules."""
    from .nn import GroupAdam, load_model_state

    for name, m in modules.items():
        if isinstance(m, GroupAdam):
            m.load_model_state(i, part[name])
        else:
            load_model_state(m, i, part[name])


def group_epochs(group: Group, stage: str, n_epochs: int, modules: dict, epoch_fn,
                 desc: str) -> None:
    """Epochs ``state.epoch + 1 .. n_epochs`` of ``stage`` for every run of the group,
    resuming where their states are (they are at one epoch: the group was formed so).
    modules: name -> grouped module or GroupAdam, each model's slice saved in its run's
    parts (:meth:`Group.part_name`). epoch_fn(epoch, active) -> list of G epoch records
    (None for an inactive model; a run's history takes its own model's); active: host list
    of G bools, False for the models of a run already past the stage (one that took it
    from the shared-encoder folder). A run's fold models go as its own model does. A
    state past this stage loads the modules and returns."""
    states = [c.state for c in group.ctxs]
    names = [group.part_name(stage, i) for i in range(group.n_models)]
    for i, st in enumerate(states):
        if names[i] in st.parts:
            load_module_parts(modules, i, st.parts[names[i]])
    if states[0].stage not in ("start", stage):
        return
    for st in states:
        if st.stage == "start":
            st.stage, st.epoch = stage, 0

    def write_parts(i, st):
        if st.stage == stage:
            st.parts[names[i]] = module_parts(modules, i)

    epoch = min(st.epoch for st in states)
    bar = progress(total=n_epochs, desc=desc, unit="epoch")
    bar.update(epoch)
    while epoch < n_epochs:
        t0 = time.perf_counter()
        active = [st.epoch < n_epochs for st in states]
        if not any(active):                  # every run is past the stage
            break
        recs = epoch_fn(epoch, active)
        seconds = time.perf_counter() - t0
        for i, (st, rec) in enumerate(zip(states, recs)):
            if not active[i] or rec is None or group.roles[i] != 0:
                continue
            st.epoch = epoch + 1
            st.times[stage] = st.times.get(stage, 0.0) + seconds
            st.history.append({"stage": stage, "epoch": epoch + 1, **rec,
                               "seconds": round(seconds, 3)})
        epoch += 1
        group.save(write_parts)
        bar.update(1)
    bar.close()
    for i, st in enumerate(states):
        write_parts(i, st)


# ------------------------------------------------------------------ the predictors
def heldout_log_loss(prob, y, mask):
    """Each model's mean negative log-probability of the true class over the rows of
    ``mask``: prob (G, n, C), y (G, n) int64, mask (G, n) bool -> (G,) float64, inf for
    a model without rows."""
    import torch

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
        import torch

        return torch.arange(self.x.shape[1], device=self.x.device)[None, :] < self.count[:, None]


class EarlyStop:
    """Every model's early-stopping record on the device: its best state so far (a copy
    of the head's state dict with the model axis), best validation log-loss (inf: none
    yet), best epoch (0: the start), epochs without improvement, and whether it holds a
    best state at all."""

    def __init__(self, head, g: int, dev):
        import torch

        self.best = [t.detach().clone() for t in head.state_dict().values()]
        self.loss = torch.full((g,), float("inf"), dtype=torch.float64, device=dev)
        self.epoch = torch.zeros(g, dtype=torch.long, device=dev)
        self.bad = torch.zeros(g, dtype=torch.long, device=dev)
        self.held = torch.zeros(g, dtype=torch.bool, device=dev)

    def update(self, head, vloss, active, epoch: int) -> None:
        """After an epoch (1-based ``epoch`` done): keep the heads of the active models
        whose validation loss ``vloss`` (G,) improved; count the others' bad epochs."""
        import torch

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
        import torch

        with torch.no_grad():
            for p, b in zip(head.state_dict().values(), self.best):
                p.copy_(torch.where(self.held.view(-1, *([1] * (p.dim() - 1))), b, p))

    def part(self, head, opt, i: int) -> dict:
        """Model i's checkpoint part "predictor"."""
        from .nn import model_state

        return {"head": model_state(head, i), "opt": opt.model_state(i),
                "best": ({k: v[i].detach().cpu().clone()
                          for k, v in zip(head.state_dict(), self.best)}
                         if bool(self.held[i]) else None),
                "best_loss": float(self.loss[i]), "best_epoch": int(self.epoch[i]),
                "bad": int(self.bad[i])}

    def load(self, head, opt, i: int, part: dict) -> None:
        """Model i's head, optimiser and record from its checkpoint part."""
        from .nn import load_model_state

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
    from .nn import load_model_state, model_state

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
        if c.state.stage not in ("predictor", "refit", "done"):
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
    import torch

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
    epoch = states[0].epoch if states[0].stage == "predictor" else cfg.pred_epochs

    def write_parts(i, st):
        if st.stage == "predictor":
            st.parts["predictor"] = stop.part(head, opt, i)

    bar = progress(total=cfg.pred_epochs, desc=desc, unit="epoch")
    bar.update(epoch)
    stopped = stop.bad >= cfg.pred_patience if has_val else stop.bad < 0
    while states[0].stage == "predictor" and epoch < cfg.pred_epochs and \
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
                st.history.append({"stage": "predictor", "epoch": epoch,
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
    import torch

    with torch.no_grad():
        for t, k in zip(tensors, module.state_dict()):
            t[i].copy_(torch.as_tensor(state[k]))


def refit_heads(group: Group, new_head, epoch_fn, train: Labeled, val: tuple,
                n_refit: np.ndarray):
    """Fresh heads (``new_head(all_labeled=True)``) trained on each model's training plus
    validation rows, model i for n_refit[i] epochs (its head is the one it had then; 0:
    as it starts); resumable at every epoch (stage and part "refit")."""
    import torch

    from .nn import load_model_state, model_state

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
        if st.stage == "predictor":
            st.stage, st.epoch = "refit", 0
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
            st.history.append({"stage": "refit", "epoch": epoch, "loss": float(loss[i]),
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
    import torch

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
