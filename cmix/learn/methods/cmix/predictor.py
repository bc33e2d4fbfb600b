"""cmix's predictor stage: each model's predictor on its labeled and certainty-weighted
pseudo-labeled rows, with latent mixup, early-stopped and refitted.
"""

from __future__ import annotations

import numpy as np
import torch

from ... import streams
from ...group_heads import Labeled, fit_heads
from ..heads import predictor_epoch, validation_rows


def predictor_stage(group, inputs_of, su_pos: list, new_head):
    """Every model's predictor on its labeled rows and certainty-weighted pseudo-labeled
    rows (latent mixup per the config, and only for a model with some pseudo-label that
    carries weight: without, its predictor is trained exactly as cmix_selfsl's),
    early-stopped and refitted (:func:`cmix.learn.group_heads.fit_heads`). inputs_of(rows) ->
    (G, n, D) the predictor's inputs of each model's store rows (G sorted arrays of one
    length). new_head(all_labeled=False) -> (head, optimiser). Returns (head, G
    validation summaries)."""
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
