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

The early-stopped predictors and their refit are :mod:`cmix.learn.group_heads`; a run's
folder, checkpoint and stage names are :mod:`cmix.learn.checkpoints`'.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import torch

from ..logs import progress
from .stages import START
from .nn import GroupAdam, load_model_state, model_state
from .streams import fold_seed, model_keys


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
        dev = self.dev if device is None else device
        if (stream, str(dev)) not in self._keys:
            self._keys[stream, str(dev)] = model_keys(self.seeds, stream, dev)
        return self._keys[stream, str(dev)]

    def row_set(self, rows: list) -> RowSet:
        """The RowSet of each model's store rows (``rows``: G sorted arrays)."""
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
        rs = self.row_set(rows)
        return torch.cat([self.source.gather(rs.pos_index[:, s:s + batch])
                          for s in range(0, rs.n, batch)], 1)

    def with_cov(self, inputs, pos):
        """``inputs`` (G, n, D) with the covariates of source positions ``pos`` (G, n)
        beside them (float), or unchanged when the runs use none."""
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
    return {name: (m.model_state(i) if isinstance(m, GroupAdam) else model_state(m, i))
            for name, m in modules.items()}


def load_module_parts(modules: dict, i: int, part: dict) -> None:
    """Put a run's saved slice (:func:`module_parts`) at model i of the modules."""
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
    if states[0].stage not in (START, stage):
        return
    for st in states:
        if st.stage == START:
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
