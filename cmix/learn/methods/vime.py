"""vime: VIME self- and semi-supervised learning (Yoon et al. 2020) for a group of G
models: the self-supervised encoder (mask estimation and reconstruction of corrupted
rows), then a predictor on the frozen encoder with VIME's consistency loss on the
unlabeled rows. The losses and corruption are :mod:`cmix.learn.baselines`'.
"""

from __future__ import annotations

from functools import partial

import numpy as np
import torch
import torch.nn.functional as F

from ..baselines import vime_consistency_loss, vime_corrupt, vime_self_loss
from ..stages import PRETRAIN
from ..group import group_epochs
from ..group_heads import Labeled, fit_heads
from ..nn import GroupAdam, Layers, init_generators, mlp_layers
from ..streams import (VIME_BATCHES, VIME_CORRUPTION, VIME_MASK_ESTIMATOR, VIME_SEMI_STEPS,
                       VIME_UNLABELED_BATCHES, Draws)
from .heads import (choose_heads, cmix_model, freeze, head_inputs, head_steps, new_head, rows_at,
                    validation_rows)
from .network import NetworkMethod
from .selfsupervised import batch_schedule, masked_epoch


class Vime(NetworkMethod):
    """VIME self- and semi-supervised learning (Yoon et al. 2020): self-supervised
    pre-training of the encoder (:func:`vime_pretrain`), then a predictor on the frozen
    encoder with VIME's consistency loss on the unlabeled rows (:func:`vime_heads`)."""
    family = "vime"

    @classmethod
    def fit_group(cls, group) -> list:
        model = vime_pretrain(group)
        freeze(model)
        head, summaries = vime_heads(group, model)
        probes = choose_heads(group, model, summaries)
        return [cls.from_group(group, i, model, head, summaries[i], probe=probes[i])
                for i in range(group.n_models)]


def vime_pretrain(group):
    """VIME's self-supervised stage (resumable per epoch): corrupt each training row
    (mask probability vime_p_m, masked values drawn from the column's marginal in the
    batch), then estimate the mask and reconstruct the row from the encoding. Returns the
    grouped model."""
    cfg, vime, dev, src = group.cfg.pretrain, group.cfg.vime, group.dev, group.source
    model = cmix_model(group)
    dims = [model.encoder.out_dim] * group.cfg.model.proj_layers + [group.n_snps]
    mask_est = Layers(*mlp_layers(init_generators(group.seeds, VIME_MASK_ESTIMATOR), dims,
                                  batchnorm=False, last_act=False)).to(dev)
    params = list(model.embed.parameters()) + list(model.encoder.parameters()) \
        + list(model.decoder.parameters()) + list(mask_est.parameters())
    opt = GroupAdam(params, group.n_models, cfg.lr, cfg.weight_decay)
    train = group.row_set([c.train_rows for c in group.ctxs])
    keys_b = group.keys(VIME_BATCHES, src.index_device)
    keys_c = group.keys(VIME_CORRUPTION)

    def epoch_fn(epoch, active):
        sched, ok = batch_schedule(group, train, Draws(keys_b, epoch), cfg.batch_size)
        model.train()
        mask_est.train()

        def step_loss(s, x, m):
            x_tilde, mask = vime_corrupt(x, vime.vime_p_m, Draws(keys_c, epoch, s + 1), m.sum(1))
            z = model.encode(x_tilde, m)
            return vime_self_loss(mask_est(z, m), mask, model.decoder(z, m), x, model.embed,
                                  vime.vime_alpha, m)[0]

        return masked_epoch(src, sched, ok, active, opt, step_loss)

    group_epochs(group, PRETRAIN, cfg.epochs,
                 {"model": model, "mask_estimator": mask_est, "opt": opt}, epoch_fn,
                 "vime self-supervised")
    return model


def vime_heads(group, model):
    """VIME's semi-supervised predictors on the frozen encoder (:func:`vime_semi_epoch`),
    early-stopped and refitted: (head, G validation summaries)."""
    dev = group.dev
    inputs_of = head_inputs(group, model)
    rows = [c.splits.train_labeled for c in group.ctxs]
    counts = [len(r) for r in rows]
    n = max(counts)
    x = inputs_of([np.concatenate([r, np.repeat(r[:1], n - len(r))]) for r in rows])
    y = np.zeros((group.n_models, n), np.int64)
    for i, (c, r) in enumerate(zip(group.ctxs, rows)):
        y[i, :len(r)] = c.splits.label[r]
    y_t = torch.from_numpy(y).to(dev)
    count = torch.tensor(counts, device=dev)
    train = Labeled(x=x, target=torch.nn.functional.one_hot(y_t, group.n_classes).float(),
                    weight=(torch.arange(n, device=dev)[None, :] < count[:, None]).float(),
                    count=count)
    epoch_fn = vime_semi_epoch(group, model,
                               group.row_set([c.splits.unlabeled for c in group.ctxs]))
    return fit_heads(group, partial(new_head, group, model.encoder.out_dim, {}), epoch_fn,
                     train, validation_rows(group, inputs_of))


def vime_semi_epoch(group, model, unl):
    """The epoch function (for :func:`cmix.learn.group_heads.fit_heads`) of VIME's
    semi-supervised predictors: each step, cross-entropy on a batch of each model's
    labeled latents plus vime_beta x the variance of the logits over vime_k corruptions of
    each row of a batch of its unlabeled rows ``unl`` (a RowSet; chunk-aware order, one
    batch a step until they run out). The epoch function returns the summed losses (G,)."""
    vime, dev, src = group.cfg.vime, group.dev, group.source
    keys_s = group.keys(VIME_SEMI_STEPS)
    keys_u = group.keys(VIME_UNLABELED_BATCHES, src.index_device)
    bs, k, ub = group.cfg.predictor.pred_batch_size, vime.vime_k, group.cfg.pretrain.batch_size

    def epoch_fn(head, opt, data, epoch, active):
        g = data.weight.shape[0]
        labels = data.target.argmax(-1)
        u_sched, u_ok = (batch_schedule(group, unl, Draws(keys_u, epoch), ub)
                         if max(unl.counts) else (None, None))
        n_u_steps = u_sched.shape[1] if u_sched is not None else 0
        tot = torch.zeros(g, dtype=torch.float64, device=dev)
        for st in head_steps(head, data, epoch, active, keys_s, bs):
            j, ok, step_ok, draws = st.j, st.ok, st.active, st.draws
            ce = F.cross_entropy(head.predictor(rows_at(data.x, st.idx), ok).float()
                                 .transpose(1, 2), rows_at(labels, st.idx), reduction="none")
            loss = (ce * ok).sum(1) / ok.sum(1).clamp_min(1)
            if j < n_u_steps and vime.vime_beta > 0:
                uo = u_ok[:, j] & step_ok[:, None]
                xu = src.gather(u_sched[:, j])                               # (G, Bu, M)
                with torch.no_grad():
                    n_u = u_ok[:, j].sum(1)
                    zk = torch.stack([model.encode(vime_corrupt(xu, vime.vime_p_m, draws,
                                                                n_u)[0])
                                      for _ in range(k)], 1)               # (G, K, Bu, H)
                    if group.n_cov:
                        cov_u = group.cov[u_sched[:, j].to(dev)]                 # (G, Bu, K)
                        zk = torch.cat([zk, cov_u[:, None].expand(g, k, *cov_u.shape[1:])], 3)
                mk = uo[:, None].expand(g, k, uo.shape[1]).reshape(g, -1)
                logits_k = head.predictor(zk.flatten(1, 2), mk).view(g, k, -1, group.n_classes)
                loss = loss + vime.vime_beta * vime_consistency_loss(logits_k, uo) \
                    * (uo.sum(1) >= 2)
            opt.zero_grad()
            (loss * step_ok).sum().backward()
            opt.step(step_ok)
            tot += loss.detach().double() * step_ok
        return tot

    return epoch_fn
