"""ae: autoencoder pre-training of the cmix network (reconstruction loss only), then the
predictor on the frozen encoder.
"""

from __future__ import annotations

from ..stages import PRETRAIN
from ..group import group_epochs
from ..nn import GroupAdam
from ..streams import AE_BATCHES, Draws
from .cmix.losses import reconstruction_loss
from .heads import choose_heads, cmix_model, freeze, supervised_heads
from .network import NetworkMethod
from .selfsupervised import batch_schedule, masked_epoch


class Autoencoder(NetworkMethod):
    """Autoencoder pre-training (the cmix network, reconstruction loss only) on all
    training-split rows, then the predictor on the frozen encoder."""
    family = "ae"

    @classmethod
    def fit_group(cls, group) -> list:

        cfg, src = group.cfg.pretrain, group.source
        model = cmix_model(group)
        opt = GroupAdam(model.parameters(), group.n_models, cfg.lr, cfg.weight_decay)
        train = group.row_set([c.train_rows for c in group.ctxs])
        keys = group.keys(AE_BATCHES, src.index_device)

        def epoch_fn(epoch, active):
            sched, ok = batch_schedule(group, train, Draws(keys, epoch), cfg.batch_size)
            model.train()
            return masked_epoch(src, sched, ok, active, opt, lambda s, x, m: reconstruction_loss(
                model.decoder(model.encode(x, m), m), x, model.embed, m))

        group_epochs(group, PRETRAIN, cfg.epochs, {"model": model, "opt": opt}, epoch_fn,
                     "ae pre-training")
        freeze(model)
        head, summaries = supervised_heads(group, model, {})
        probes = choose_heads(group, model, summaries)
        return [cls.from_group(group, i, model, head, summaries[i], probe=probes[i])
                for i in range(group.n_models)]
