"""manifold_mixup: the supervised predictor on the embedded SNPs (as mlp) with mixup at a
layer drawn uniformly from {input, hidden 1, hidden 2} (Verma et al. 2019).
"""

from __future__ import annotations

from functools import partial

import numpy as np
import torch

from ..baselines import manifold_mixup_step
from ..data import LAST
from ..group_heads import fit_heads
from ..streams import MANIFOLD_MIXUP_STEPS, gen
from .cmix.losses import soft_cross_entropy
from .heads import (head_inputs, head_steps, labeled_rows, new_head, rows_at,
                    validation_rows)
from .network import NetworkMethod


class ManifoldMixup(NetworkMethod):
    """Supervised predictor on the embedded SNPs (as mlp) with mixup at a layer drawn
    uniformly from {input, hidden 1, hidden 2} (Verma et al. 2019), lambda ~
    Beta(mixup_alpha, mixup_alpha)."""
    family = "manifold_mixup"

    @classmethod
    def fit_group(cls, group) -> list:
        dev, bs = group.dev, group.cfg.predictor.pred_batch_size
        inputs_of = head_inputs(group, None)
        train = labeled_rows(group, inputs_of)
        a = float(group.cfg.manifold_mixup.mixup_alpha)
        keys = group.keys(MANIFOLD_MIXUP_STEPS)

        def epoch_fn(head, opt, data, epoch, active):
            g, n_rows = data.weight.shape
            n_steps = -(-n_rows // bs)
            # lambda ~ Beta(a, a) for every step's rows: drawn on the host for the whole
            # epoch from each run's stream (torch has no Beta inverse CDF), sent once
            lam_host = np.ones((g, n_steps, bs), np.float32)
            if a > 0:
                for i, seed in enumerate(group.seeds):
                    _, rng = gen(seed, MANIFOLD_MIXUP_STEPS, epoch)
                    lam_host[i] = rng.beta(a, a, (n_steps, bs))
            lam_all = torch.from_numpy(lam_host).to(dev)
            tot = torch.zeros(g, dtype=torch.float64, device=dev)
            for st in head_steps(head, data, epoch, active, keys, bs):
                ok, b = st.ok, st.idx.shape[1]
                layer = (st.draws.uniform() * 3).long().clamp_max(2)
                perm = torch.argsort(torch.where(ok, st.draws.bits(b), LAST), dim=1,
                                     stable=True)
                logits, tgt_mix = manifold_mixup_step(
                    head.predictor, head.features(rows_at(data.x, st.idx), ok),
                    rows_at(data.target, st.idx), layer, lam_all[:, st.j, :b], perm, ok)
                loss = soft_cross_entropy(logits, tgt_mix, ok.float())
                opt.zero_grad()
                (loss * st.active).sum().backward()
                opt.step(st.active)
                tot += loss.detach().double() * st.active
            return tot

        head, summaries = fit_heads(group, partial(new_head, group, None, {}), epoch_fn, train,
                                    validation_rows(group, inputs_of))
        return [cls.from_group(group, i, None, head, summaries[i])
                for i in range(group.n_models)]
