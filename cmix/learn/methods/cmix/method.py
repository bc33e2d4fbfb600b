"""The method class of cmix, mlp and the ablations: the stages the registry's switches
select (pre-training with or without pseudo-labels, judged or not; the predictor), then
each run's head.
"""

from __future__ import annotations

from functools import partial

from ...stages import PRETRAIN
from ..heads import check_frozen, choose_heads, cmix_model, freeze, head_inputs, new_head
from ..network import NetworkMethod
from .judge import judged_pretraining, shared_stage
from .predictor import predictor_stage
from .pretrain import pretrain_rows, pretrain_stage
from .pseudo_labels import paper_look, pseudo_label_rows


class ContrastiveMixupMethod(NetworkMethod):
    """cmix, mlp and the ablations (the registry's switches select the stages of
    :mod:`cmix.learn.methods.cmix`): pre-training with the paper's pseudo-labels and without,
    the run's the arm its cross-fitted judge prefers (cmix, :func:`judged_pretraining`),
    or with them as propagated (cmix_paper), or without (cmix_selfsl); then the predictor
    on the frozen encoder (or, without pre-training, on the embedded dosages)."""
    family = "trainer"
    encode_autocast = True

    @classmethod
    def fit_group(cls, group) -> list:

        cfg, ctxs = group.cfg, group.ctxs
        sw = cfg.switches
        model = cmix_model(group)
        if sw.pretrain and sw.pseudo_labels and sw.judge:
            judged_pretraining(group, model)
        elif sw.pretrain and sw.pseudo_labels:
            shared_stage(group, PRETRAIN, "unjudged", lambda: pretrain_stage(
                group, model, pretrain_rows(group), paper_look(group, model)))
        elif sw.pretrain:
            shared_stage(group, PRETRAIN, None,
                         lambda: pretrain_stage(group, model, pretrain_rows(group)))
        frozen = freeze(model)
        encoder = model if sw.pretrain else None
        cache: dict = {}
        latent = model.encoder.out_dim if sw.pretrain else None
        head, summaries = predictor_stage(group, head_inputs(group, encoder),
                                             [pseudo_label_rows(c) for c in ctxs],
                                             partial(new_head, group, latent, cache))
        check_frozen(model, frozen)
        probes = choose_heads(group, encoder, summaries) if encoder is not None \
            else [None] * group.n_models
        keys = ("accuracy", "coverage", "n_rows", "missing_classes", "used", "graph",
                "mean_weight", "n_judge", "paper_brier", "selfsl_brier",
                "paper_accuracy", "selfsl_accuracy", "p_value")
        out = []
        for i, ctx in enumerate(ctxs):
            lp = ctx.parts.get("lp_info") or []
            pl = ({**{k: lp[-1].get(k) for k in keys}, "epochs": [r["epoch"] for r in lp]}
                  if lp else None)
            out.append(cls.from_group(group, i, encoder, head, summaries[i], pl, probes[i]))
        return out
