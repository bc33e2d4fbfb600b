"""The base of the network methods (cmix with mlp and the ablations, ae, vime,
manifold_mixup): one run's fitted head and encoder, prediction and its state dict.

Each is fitted on a group of runs at once (:meth:`NetworkMethod.fit_group`, the G seeds
of one ``cmix train`` call as one set of parameters with a model axis:
:mod:`cmix.learn.group`), and ends in the one head (:func:`cmix.learn.nn.build_head`): a
predictor on frozen latent rows of a pre-trained encoder (cmix, the ablations with
pre-training, ae, vime) or on a trainable SNP embedding of the dosages (mlp,
manifold_mixup), the covariates beside them and, as a linear term, starting as the
covariates-only model (:func:`cmix.learn.methods.heads.new_head`). Each run's fitted method holds its own model's
slice: the encoder's and the head's weights, the dosage moments and the shapes;
:meth:`NetworkMethod.predict_proba` is the same code at the end of a run and in ``cmix
predict``.
"""

from __future__ import annotations

import contextlib

import numpy as np
import torch

from ..data import RowSource
from ..group import Group
from ..nn import (ContrastiveMixup, autocast, build_head, init_generators, load_model_state,
                  model_state)
from .base import FittedMethod
from .probes import probe_proba


class NetworkMethod(FittedMethod):
    """A head, on an encoder's latent rows (``model``) or on the dosages (``model`` None),
    of one run (its model's slice of the group that fitted it). ``encode_autocast``: the
    encoder runs under bfloat16 autocast on CUDA."""
    encode_autocast = False

    def __init__(self, cfg, device="cpu"):
        super().__init__(cfg, device)
        self.model = self.head = self.probe = None

    @classmethod
    def fit_group(cls, group) -> list:
        """Fit the method for every run of ``group``; returns one fitted method per run."""
        raise NotImplementedError

    def fit(self, data):
        """Fit on one run (a group of one)."""
        group = Group([data], RowSource(data.root, data.train_rows, data.dev))
        fitted = type(self).fit_group(group)[0]
        self.__dict__.update(fitted.__dict__)
        return self

    # ------------------------------------------------------------ one run's slice
    @classmethod
    def from_group(cls, group, i: int, model, head, validation: dict, pseudo_labels=None,
                   probe=None):
        """Run i's fitted method: its slices of the group's ``model`` (a grouped
        ContrastiveMixup, or None) and ``head``, and its linear probe when the choice of
        head (:func:`choose_heads`) took one."""
        ctx = group.ctxs[i]
        m = cls(group.cfg, group.dev)
        m.n_snps, m.n_classes, m.n_cov = ctx.n_snps, ctx.splits.n_classes, ctx.n_cov
        m.mean, m.sd = ctx.mean, ctx.sd
        state = m.state_dict_of(model_state(model, i) if model is not None else None,
                                {"features": model_state(head.features, i),
                                 "predictor": model_state(head.predictor, i)}, probe)
        m.load_state_dict(state)
        m.report = {"validation": validation, "pseudo_labels": pseudo_labels}
        return m

    def state_dict_of(self, encoder, head, probe=None) -> dict:
        return {"class": type(self).__name__, "cfg": self.cfg.flat(), "n_snps": self.n_snps,
                "n_classes": self.n_classes, "n_cov": self.n_cov, "mean": self.mean,
                "sd": self.sd, "encoder": encoder, "head": head, "probe": probe}

    # ------------------------------------------------------------ prediction
    def encode(self, x, batch: int = 4096):
        """float32 latent rows (n, H) of dosages x (n, M) (a tensor on the device)."""
        self.model.eval()
        amp = autocast(x.device) if self.encode_autocast else contextlib.nullcontext()
        if not len(x):
            return torch.zeros((0, self.model.encoder.out_dim), device=x.device)
        with torch.no_grad(), amp:
            return torch.cat([self.model.encode(x[None, s:s + batch]).float()[0]
                              for s in range(0, len(x), batch)])

    def inputs(self, x: np.ndarray, covariates: np.ndarray):
        """The head's inputs of dosages x (n, M) and standardised covariates (n, K): the
        latent rows or the dosages, the covariates (float32) beside them."""
        out = torch.from_numpy(np.ascontiguousarray(x)).to(self.device)
        if self.model is not None:
            out = self.encode(out)
        if self.n_cov:
            cov = torch.from_numpy(np.asarray(covariates, dtype=np.float32)).to(self.device)
            out = torch.cat([out.float(), cov], 1)
        return out

    def predict_proba(self, x, covariates):
        if self.probe is not None:          # the linear probe on the frozen latent
            return probe_proba(self.probe, self.inputs(x, covariates).cpu().numpy(),
                               self.n_classes)
        return self.head.proba(self.inputs(x, covariates)[None])[0].cpu().numpy()

    def latent(self, x, covariates):
        """The frozen encoder's latent rows (n, H), for the report's t-SNE."""
        if self.model is None:
            return None
        return self.encode(torch.from_numpy(np.ascontiguousarray(x)).to(self.device))

    def state_dict(self):

        return self.state_dict_of(
            model_state(self.model, 0) if self.model is not None else None,
            {"features": model_state(self.head.features, 0),
             "predictor": model_state(self.head.predictor, 0)}, self.probe)

    def load_state_dict(self, state):

        for k in ("n_snps", "n_classes", "n_cov", "mean", "sd"):
            setattr(self, k, state[k])
        self.probe = state.get("probe")             # runs fitted before the probe: none
        self.model = None
        if state["encoder"] is not None:
            self.model = ContrastiveMixup(init_generators([0], 0), self.n_snps, self.cfg.model,
                                          self.mean, self.sd)
            load_model_state(self.model, 0, state["encoder"])
            self.model.to(self.device).eval()
        latent = self.model.encoder.out_dim if self.model is not None else None
        self.head = build_head([0], self.n_snps, self.n_classes, self.n_cov, self.cfg,
                               latent_dim=latent, moments=(self.mean, self.sd),
                               device=self.device)
        load_model_state(self.head.features, 0, state["head"]["features"])
        load_model_state(self.head.predictor, 0, state["head"]["predictor"])
        return self
