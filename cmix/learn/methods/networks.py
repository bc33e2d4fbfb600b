"""The network methods: cmix (with mlp and the ablations), ae, vime, manifold_mixup.

Each ends in the one head (:func:`cmix.learn.nn.build_head`): a predictor on frozen
latent rows of a pre-trained encoder (cmix, the ablations with pre-training, ae, vime)
or on a trainable SNP embedding of the dosages (mlp, manifold_mixup), the covariates
beside them and, as a linear term, starting as the covariates-only model
(:meth:`NetworkMethod.new_head`). The state dict holds the encoder's and the head's
weights, the dosage moments and the shapes; :meth:`NetworkMethod.predict_proba` is
the same code at the end of a run and in ``cmix predict``.
"""

from __future__ import annotations

import time
from functools import partial

import numpy as np

from .base import FittedMethod


class NetworkMethod(FittedMethod):
    """A head, on an encoder's latent rows (``model``) or on the dosages (``model`` None).
    ``encode_autocast``: the encoder runs under bfloat16 autocast on CUDA."""

    encode_autocast = False

    def __init__(self, cfg, device="cpu"):
        super().__init__(cfg, device)
        self.model = self.head = None
        self._cov_start = {}

    # ------------------------------------------------------------ fitting helpers
    def take_shapes(self, data) -> None:
        self.n_snps, self.n_classes, self.n_cov = data.n_snps, data.splits.n_classes, data.n_cov
        self.mean, self.sd = data.mean, data.sd

    def cmix_model(self, data):
        """The cmix network (embedding + encoder + decoder + projection), its weights
        drawn from the run's seed."""
        from .. import nn
        from ..streams import MODEL_INIT, manual_seed

        manual_seed(data.seed, MODEL_INIT)
        return nn.ContrastiveMixup(self.n_snps, self.cfg.model, self.mean, self.sd).to(data.dev)

    def covariates_start(self, data, all_labeled: bool = False):
        """(weight (C, K), bias (C,)) of the covariates baseline's model
        (:func:`cmix.learn.linear.fit_logreg_cv`: L2, C by cross-validation) fitted on the
        training labeled rows, or with ``all_labeled`` on every labeled row (training and
        validation, as the refit and the covariates baseline use them); fitted once per
        run for each."""
        from ..linear import fit_logreg_cv

        if all_labeled not in self._cov_start:
            s, cfg = data.splits, self.cfg.logreg
            rows = s.labeled if all_labeled else s.train_labeled
            y = s.label[rows]
            c = s.n_classes
            w, b = np.zeros((c, data.n_cov)), np.zeros(c)
            if len(np.unique(y)) > 1:
                lr = fit_logreg_cv(data.cov[rows].astype(np.float64), y, c,
                                   cfg.logreg_folds, cfg.logreg_n_c, data.seed)[0]
                if len(lr.classes_) == 2:
                    w[lr.classes_[1]], b[lr.classes_[1]] = lr.coef_[0], lr.intercept_[0]
                else:
                    w[lr.classes_], b[lr.classes_] = lr.coef_, lr.intercept_
            self._cov_start[all_labeled] = (w, b)
        return self._cov_start[all_labeled]

    def new_head(self, data, all_labeled: bool = False):
        """A fresh head (latent rows when the method has an encoder) and its Adam, seeded
        the same way at every call. With covariates the predictor's covariate term starts
        as the covariates-only model (:meth:`covariates_start`) and its network's last
        layer at zero: the head starts as exactly that model and learns what the genotypes
        add; early stopping keeps the start as a candidate. ``all_labeled``: the start
        fitted on every labeled row, for the refit on training plus validation rows."""
        import torch

        from ..nn import build_head

        cfg = self.cfg
        latent = self.model.encoder.out_dim if self.model is not None else None
        head = build_head(self.n_snps, self.n_classes, self.n_cov, cfg, data.seed,
                          latent_dim=latent, moments=(self.mean, self.sd), device=data.dev)
        if head.predictor.skip is not None:
            w, b = self.covariates_start(data, all_labeled)
            with torch.no_grad():
                head.predictor.skip.weight.copy_(torch.from_numpy(w))
                head.predictor.skip.bias.copy_(torch.from_numpy(b))
                head.predictor.net[-1].weight.zero_()
                head.predictor.net[-1].bias.zero_()
        return head, torch.optim.Adam(head.parameters(), lr=cfg.predictor.pred_lr,
                                      weight_decay=cfg.predictor.pred_weight_decay)

    def train_loader(self, data, rows):
        """Batches of ``rows`` (the loader mode chosen for the training split's size)."""
        from ..data import RowLoader, choose_mode

        cfg = self.cfg
        mode = choose_mode(len(data.train_rows), data.n_snps, cfg.data.loader,
                           int(cfg.data.memory_limit_mb) << 20)
        return RowLoader(data.root, rows, batch_size=cfg.pretrain.batch_size, mode=mode,
                         device=data.dev, buffer_chunks=cfg.data.buffer_chunks)

    def frozen_latent(self, data):
        """Freeze the encoder; the labeled rows' latent inputs (covariates beside them, if
        any), one-hot targets and unit weights (the harness's train tuple), and the
        validation rows' (inputs, labels)."""
        import torch

        s = data.splits
        for p in self.model.parameters():
            p.requires_grad_(False)
        z_lab = data.with_cov(self.encode(data.rows(s.train_labeled)), s.train_labeled)
        eye = torch.eye(s.n_classes, device=data.dev)
        y_lab = torch.from_numpy(s.label[s.train_labeled]).to(data.dev)
        train = (z_lab, eye[y_lab], torch.ones(len(y_lab), device=data.dev))
        z_val = data.with_cov(self.encode(data.rows(s.validation)), s.validation)
        return train, (z_val, s.label[s.validation])

    def supervised_epoch(self, data):
        """One plain supervised epoch of a head (the trainer's predictor epoch, no mixup)."""
        from .. import train

        cfg = self.cfg.with_keys(predictor_mixup=False)
        return lambda head, opt, x, t, w, epoch: train.predictor_epoch(
            head, opt, x, t, w, cfg, data.seed, epoch)

    # ------------------------------------------------------------ prediction
    def encode(self, x, batch: int = 4096):
        """float32 latent rows (n, H) of int8 dosages x (n, M) (a tensor on the device)."""
        import contextlib

        import torch

        from ..nn import autocast

        self.model.eval()
        amp = autocast(x.device) if self.encode_autocast else contextlib.nullcontext()
        if not len(x):
            return torch.zeros((0, self.model.encoder.out_dim), device=x.device)
        with torch.no_grad(), amp:
            return torch.cat([self.model.encode(x[s:s + batch]).float()
                              for s in range(0, len(x), batch)])

    def inputs(self, x: np.ndarray, covariates: np.ndarray):
        """The head's inputs of int8 dosages x (n, M) and standardised covariates (n, K):
        the latent rows or the dosages, the covariates (float32) beside them."""
        import torch

        out = torch.from_numpy(np.ascontiguousarray(x)).to(self.device)
        if self.model is not None:
            out = self.encode(out)
        if self.n_cov:
            cov = torch.from_numpy(np.asarray(covariates, dtype=np.float32)).to(self.device)
            out = torch.cat([out.float(), cov], 1)
        return out

    def predict_proba(self, x, covariates):
        return self.head.proba(self.inputs(x, covariates))

    def state_dict(self):
        return {"class": type(self).__name__, "cfg": self.cfg.flat(), "n_snps": self.n_snps,
                "n_classes": self.n_classes, "n_cov": self.n_cov, "mean": self.mean,
                "sd": self.sd,
                "encoder": self.model.state_dict() if self.model is not None else None,
                "head": self.head.state_dict()}

    def load_state_dict(self, state):
        from ..nn import ContrastiveMixup, build_head

        for k in ("n_snps", "n_classes", "n_cov", "mean", "sd"):
            setattr(self, k, state[k])
        if state["encoder"] is not None:
            self.model = ContrastiveMixup(self.n_snps, self.cfg.model, self.mean, self.sd)
            self.model.load_state_dict(state["encoder"])
            self.model.to(self.device).eval()
        latent = self.model.encoder.out_dim if self.model is not None else None
        self.head = build_head(self.n_snps, self.n_classes, self.n_cov, self.cfg, 0,
                               latent_dim=latent, moments=(self.mean, self.sd),
                               device=self.device)
        self.head.load_state_dict(state["head"])
        return self


# ------------------------------------------------------------------ cmix, mlp, ablations
class ContrastiveMixupMethod(NetworkMethod):
    """cmix, mlp and the ablations (the registry's switches select the stages of
    :mod:`cmix.learn.train`): pre-training with pseudo-labels judged on a judge fold of the
    labeled rows (pre-training again without them, as cmix_selfsl does, when none carries
    weight at the end), then the predictor on the frozen encoder (or, without
    pre-training, on the embedded dosages)."""

    family = "trainer"
    encode_autocast = True

    def fit(self, data):
        import torch

        from .. import train

        pretrain, s = self.cfg.switches.pretrain, data.splits
        self.take_shapes(data)
        t0 = time.perf_counter()
        x_lab = data.rows(s.train_labeled)
        y_lab = torch.from_numpy(s.label[s.train_labeled]).to(data.dev)
        data.add_time("load", t0)
        model = self.cmix_model(data)
        su_pos = train.pseudo_label_rows(data)
        if pretrain and self.cfg.switches.pseudo_labels:
            judge = train.judge_fold(data, s.label[s.train_labeled])
            train.pretrain_stage(data, model, (x_lab, y_lab), su_pos, judge)
            if not train.pseudo_labels_weigh(data):
                model = train.pretrain_without_pseudo_labels(
                    data, lambda: self.cmix_model(data), (x_lab, y_lab), su_pos)
        elif pretrain:
            train.pretrain_stage(data, model, (x_lab, y_lab), su_pos)
        model.eval()
        for p in model.parameters():
            p.requires_grad_(False)
        frozen = {k: v.detach().clone() for k, v in model.state_dict().items()}
        self.model = model if pretrain else None
        self.head, validation = train.predictor_stage(
            data, train.trainer_inputs(data, model), su_pos, partial(self.new_head, data))
        train.check_frozen(model, frozen)
        lp = data.parts.get("lp_info") or []
        keys = ("accuracy", "coverage", "n_rows", "missing_classes", "used", "graph",
                "heldout_accuracy", "head_accuracy", "head_bound", "n_judge", "mean_weight")
        self.report = {"validation": validation, "pseudo_labels": (
            {**{k: lp[-1].get(k) for k in keys}, "epochs": [i["epoch"] for i in lp]}
            if lp else None)}
        return self

    def latent(self, x, covariates):
        """The frozen encoder's latent rows (n, H), for the report's t-SNE."""
        import torch

        if self.model is None:
            return None
        return self.encode(torch.from_numpy(np.ascontiguousarray(x)).to(self.device))


# ------------------------------------------------------------------ ae
class Autoencoder(NetworkMethod):
    """Autoencoder pre-training (the cmix network, reconstruction loss only) on all
    training-split rows, then the predictor on the frozen encoder."""

    family = "ae"

    def fit(self, data):
        import torch

        from ..losses import reconstruction_loss
        from ..streams import AE_BATCHES, seed_seq

        cfg, dev = self.cfg.pretrain, data.dev
        self.take_shapes(data)
        model = self.cmix_model(data)
        opt = torch.optim.Adam(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
        loader = []

        def epoch_fn(epoch):
            if not loader:
                loader.append(self.train_loader(data, data.train_rows))
            model.train()
            tot, n = 0.0, 0
            for _, x in loader[0].batches(seed_seq=seed_seq(data.seed, AE_BATCHES, epoch)):
                x = x.to(dev)
                loss = reconstruction_loss(model.decoder(model.encode(x)), x, model.embed)
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
                tot, n = tot + float(loss.detach()), n + 1
            return {"loss": tot / max(n, 1)}

        data.epochs("pretrain", cfg.epochs, {"model": model, "opt": opt}, epoch_fn,
                    "ae pre-training")
        self.model = model
        train, val = self.frozen_latent(data)
        self.head, validation = data.early_stopped(partial(self.new_head, data),
                                                   self.supervised_epoch(data), train, val)
        self.report["validation"] = validation
        return self


# ------------------------------------------------------------------ vime
class Vime(NetworkMethod):
    """VIME self- and semi-supervised learning (Yoon et al. 2020): self-supervised
    pre-training of the encoder (:meth:`pretrain`), then a predictor on the frozen
    encoder with VIME's consistency loss on the unlabeled rows (:meth:`semi_epoch`)."""

    family = "vime"

    def fit(self, data):
        self.take_shapes(data)
        self.model = self.pretrain(data)
        train, val = self.frozen_latent(data)
        self.head, validation = data.early_stopped(partial(self.new_head, data),
                                                   self.semi_epoch(data), train, val)
        self.report["validation"] = validation
        return self

    def pretrain(self, data):
        """VIME's self-supervised stage (resumable per epoch): corrupt each training row
        (mask probability vime_p_m, masked values drawn from the column's marginal), then
        estimate the mask and reconstruct the row from the encoding. Returns the model."""
        import torch

        from ..baselines import vime_corrupt, vime_self_loss
        from ..nn import mlp_layers
        from ..streams import (VIME_BATCHES, VIME_CORRUPTION, VIME_MASK_ESTIMATOR, gen,
                               manual_seed, seed_seq)

        cfg, vime, dev = self.cfg.pretrain, self.cfg.vime, data.dev
        model = self.cmix_model(data)
        manual_seed(data.seed, VIME_MASK_ESTIMATOR)
        dims = [model.encoder.out_dim] * self.cfg.model.proj_layers + [self.n_snps]
        mask_est = torch.nn.Sequential(*mlp_layers(dims, batchnorm=False, last_act=False)).to(dev)
        params = list(model.embed.parameters()) + list(model.encoder.parameters()) \
            + list(model.decoder.parameters()) + list(mask_est.parameters())
        opt = torch.optim.Adam(params, lr=cfg.lr, weight_decay=cfg.weight_decay)
        loaders = {}

        def self_epoch(epoch):
            if "train" not in loaders:
                loaders["train"] = self.train_loader(data, data.train_rows)
            g, _ = gen(data.seed, VIME_CORRUPTION, epoch)
            model.train()
            mask_est.train()
            tot, n = 0.0, 0
            for _, x in loaders["train"].batches(seed_seq=seed_seq(data.seed, VIME_BATCHES,
                                                                   epoch)):
                x = x.to(dev)
                x_tilde, mask = vime_corrupt(x, vime.vime_p_m, g)
                z = model.encode(x_tilde)
                loss, _, _ = vime_self_loss(mask_est(z), mask.to(dev), model.decoder(z), x,
                                            model.embed, vime.vime_alpha)
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
                tot, n = tot + float(loss.detach()), n + 1
            return {"loss": tot / max(n, 1)}

        data.epochs("pretrain", cfg.epochs,
                    {"model": model, "mask_estimator": mask_est, "opt": opt}, self_epoch,
                    "vime self-supervised")
        return model

    def semi_epoch(self, data):
        """The epoch function (for the run's ``early_stopped``) of VIME's semi-supervised
        predictor: cross-entropy on the labeled latents plus vime_beta x the variance of
        the logits over vime_k corruptions of each unlabeled row."""
        import torch
        import torch.nn.functional as F

        from ..baselines import vime_consistency_loss, vime_corrupt
        from ..streams import (VIME_SEMI_STEPS, VIME_UNLABELED_BATCHES, gen, seed_dropout,
                               seed_seq)

        s, vime, dev, model = data.splits, self.cfg.vime, data.dev, self.model
        u_loader = self.train_loader(data, s.unlabeled)
        bs, k = self.cfg.predictor.pred_batch_size, vime.vime_k

        def semi_epoch(head, popt, z_l, t_l, w_l, epoch):
            g, rng = gen(data.seed, VIME_SEMI_STEPS, epoch)
            seed_dropout(data.seed, VIME_SEMI_STEPS, epoch, self.cfg.predictor.pred_dropout)
            y_l = t_l.argmax(1)
            head.train()
            order = torch.from_numpy(rng.permutation(len(y_l))).to(dev)
            u_iter = (u_loader.batches(seed_seq=seed_seq(data.seed, VIME_UNLABELED_BATCHES,
                                                         epoch))
                      if len(u_loader) else iter(()))
            tot = 0.0
            for st in range(0, len(order), bs):
                idx = order[st:st + bs]
                if len(idx) < 2:
                    continue
                loss = F.cross_entropy(head.predictor(z_l[idx]), y_l[idx])
                pos_u, xu = next(u_iter, (None, None))
                if xu is not None and len(xu) >= 2 and vime.vime_beta > 0:
                    xu = xu.to(dev)
                    with torch.no_grad():
                        zk = torch.stack([model.encode(vime_corrupt(xu, vime.vime_p_m, g)[0])
                                          for _ in range(k)])             # (K, B, H)
                        if data.n_cov:
                            cov_u = data.cov_rows(s.unlabeled[pos_u])
                            zk = torch.cat([zk, cov_u.expand(k, -1, -1)], 2)
                    logits_k = head.predictor(zk.flatten(0, 1)).view(k, len(xu), -1)
                    loss = loss + vime.vime_beta * vime_consistency_loss(logits_k)
                popt.zero_grad(set_to_none=True)
                loss.backward()
                popt.step()
                tot += float(loss.detach())
            return tot

        return semi_epoch


# ------------------------------------------------------------------ manifold mixup
class ManifoldMixup(NetworkMethod):
    """Supervised predictor on the embedded SNPs (as mlp) with mixup at a layer drawn
    uniformly from {input, hidden 1, hidden 2} (Verma et al. 2019), lambda ~
    Beta(mixup_alpha, mixup_alpha)."""

    family = "manifold_mixup"

    def fit(self, data):
        import torch

        from ..baselines import manifold_mixup_step
        from ..losses import soft_cross_entropy
        from ..streams import MANIFOLD_MIXUP_STEPS, gen, seed_dropout

        s, dev, bs = data.splits, data.dev, self.cfg.predictor.pred_batch_size
        self.take_shapes(data)
        t = time.perf_counter()
        x_lab = data.with_cov(data.rows(s.train_labeled), s.train_labeled)
        y_lab = torch.from_numpy(s.label[s.train_labeled]).to(dev)
        eye = torch.eye(s.n_classes, device=dev)
        train = (x_lab, eye[y_lab], torch.ones(len(y_lab), device=dev))
        val = (data.with_cov(data.rows(s.validation), s.validation), s.label[s.validation])
        data.add_time("load", t)
        a = float(self.cfg.manifold_mixup.mixup_alpha)

        def epoch_fn(head, opt, x_l, t_l, w_l, epoch):
            _, rng = gen(data.seed, MANIFOLD_MIXUP_STEPS, epoch)
            seed_dropout(data.seed, MANIFOLD_MIXUP_STEPS, epoch, self.cfg.predictor.pred_dropout)
            head.train()
            order = torch.from_numpy(rng.permutation(len(t_l))).to(dev)
            tot = 0.0
            for st in range(0, len(order), bs):
                idx = order[st:st + bs]
                if len(idx) < 2:
                    continue
                layer = int(rng.integers(0, 3))
                lam = torch.from_numpy(rng.beta(a, a, len(idx)).astype(np.float32) if a > 0
                                       else np.ones(len(idx), np.float32)).to(dev)
                perm = torch.from_numpy(rng.permutation(len(idx))).to(dev)
                logits, tgt = manifold_mixup_step(head.predictor, head.features(x_l[idx]),
                                                  t_l[idx], layer, lam, perm)
                loss = soft_cross_entropy(logits, tgt)
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
                tot += float(loss.detach())
            return tot

        self.head, validation = data.early_stopped(partial(self.new_head, data), epoch_fn,
                                                   train, val)
        self.report["validation"] = validation
        return self
