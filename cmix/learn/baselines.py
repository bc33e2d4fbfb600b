"""Baselines of the evaluation grid, selectable by ``cmix train --method``.

Every method runs in the harness (:mod:`cmix.learn.harness`): the same splits, standardisation
(moments of the training split), resumable checkpoint, early-stopping loop and
``metrics.json`` layout as the trainer. Test rows are read only to evaluate the final
model: never for fitting, column statistics, early stopping or hyper-parameter choice.

Methods (:data:`BASELINES`):

- ``logreg``: L2 logistic regression on standardised dosages of the labeled rows
  (train_labeled + validation), C chosen by stratified k-fold cross-validation within
  those rows (log-loss), scikit-learn.
- ``prs``: polygenic score = dosage @ variant_beta (the store's summary-statistic effects
  of the effect allele; missing calls -> the training-split mean), no training on
  genotypes; then a one-feature logistic regression on the labeled rows (multinomial for
  more than two classes).
- ``ae``: autoencoder (the cmix embedding + encoder + decoder, reconstruction loss only)
  pre-trained on all training-split rows, then the predictor on the frozen encoder.
- ``vime``: VIME (Yoon et al. 2020). Self-supervised: mask m ~ Bernoulli(p_m), corrupted
  row x~ = m * x_bar + (1 - m) * x with x_bar_j drawn from column j's empirical marginal
  (the column's value in a random other row of the batch), loss = BCE(mask estimator,
  m') + vime_alpha * feature-estimation loss (the cmix reconstruction loss against the
  clean x), where m' = 1[x~ != x] (the reference code's target). Semi-supervised: frozen
  encoder, predictor trained with cross-entropy on labeled rows + vime_beta * consistency
  (variance of the predictor's logits over vime_k corrupted copies of each unlabeled
  row, averaged). Encoder / feature estimator / mask estimator / predictor are the cmix
  encoder / decoder / projection-head-shaped MLP / predictor.
- ``manifold_mixup``: supervised predictor on the embedded SNPs (as ``mlp``) with mixup
  at a layer drawn uniformly from {input, hidden 1, hidden 2} (Verma et al. 2019),
  lambda ~ Beta(mixup_alpha, mixup_alpha).

``mlp`` and the cmix ablations (``cmix_selfsl``, ``cmix_selfsl_pl``, ``cmix_random_mix``)
are config presets of the trainer (:data:`cmix.learn.train.METHODS`).

Config: the sections of :mod:`cmix.learn.config` each method reads (:mod:`cmix.learn.methods`).
"""

from __future__ import annotations

import time

import numpy as np

from . import harness
from .data import project_pcs, standardised_dosage, standardised_pcs
from ..io import CmixError


# ------------------------------------------------------------------ logreg / prs
def run_logreg(ctx, state) -> dict:
    """L2 logistic regression on the standardised dosages, C by stratified k-fold CV
    (log-loss) within the labeled rows; covariates unpenalised (:mod:`cmix.learn.linear`)."""
    return _cv_logreg_run(ctx, state, lambda rows: standardised_dosage(
        ctx.rows(rows).cpu().numpy(), ctx.mean, ctx.sd))


def _cv_logreg_run(ctx, state, features, covariates: bool = True) -> dict:
    """Fit L2 logistic regression on features(labeled rows) (n, d float64), with the
    run's covariates beside them unpenalised when ``covariates`` and the run has some
    (:func:`cmix.learn.linear.fit_with_unpenalised_covariates`), else on the features
    alone (:func:`harness.fit_logreg_cv`); checkpoint the fitted model (a rerun skips the
    fit), evaluate on features(test rows)."""
    from .linear import fit_with_unpenalised_covariates

    s, cfg = ctx.splits, ctx.cfg
    with_cov = covariates and ctx.n_cov > 0
    fitted = state.parts.get("fitted")
    if fitted is None:
        t = time.perf_counter()
        x = features(s.labeled)
        t = state.add_time("load", t)
        args = (s.label[s.labeled], s.n_classes, cfg["logreg_folds"], cfg["logreg_n_c"],
                ctx.seed)
        if with_cov:
            model, best_c, folds, cv_loss = fit_with_unpenalised_covariates(
                x, ctx.cov[s.labeled].astype(np.float64), *args)
        else:
            model, best_c, folds, cv_loss = harness.fit_logreg_cv(x, *args)
        state.add_time("fit", t)
        fitted = state.parts["fitted"] = {
            "model": model,
            "validation": {"C": best_c, "cv_folds": folds, "cv_log_loss": cv_loss,
                           "covariates": "unpenalised offset" if with_cov else "none",
                           "fit_rows": "labeled (train_labeled + validation)"}}
        state.stage = "fitted"
        ctx.save(state)
    x_test = features(s.test)
    prob = _full_proba(fitted["model"], _with_cov(ctx, x_test, s.test) if with_cov else x_test,
                       s.n_classes)
    return harness.finish(ctx, state, prob, fitted["validation"])


def _with_cov(ctx, x: np.ndarray, rows) -> np.ndarray:
    """float64 (n, D + K): x with the rows' standardised covariates beside it."""
    return np.hstack([x, ctx.cov[np.asarray(rows, dtype=np.int64)].astype(np.float64)])


def run_covariates(ctx, state) -> dict:
    """The covariates alone: L2 logistic regression, C by stratified k-fold CV (log-loss)
    within the labeled rows; the reference every method's gain is measured against."""
    if not ctx.n_cov:
        raise CmixError(f"{ctx.store_path}: the covariates method needs a store with "
                        "covariates (cmix store --covariates) and the config key "
                        "covariates: true")
    return _cv_logreg_run(ctx, state, lambda rows: ctx.cov[rows].astype(np.float64),
                          covariates=False)


def _full_proba(model, x, n_classes):
    """predict_proba with columns for all n_classes (classes absent from a fit get 0)."""
    prob = np.zeros((len(x), n_classes))
    prob[:, model.classes_] = model.predict_proba(x)
    return prob


def polygenic_score(root, rows: np.ndarray, mean: np.ndarray) -> np.ndarray:
    """float64 (len(rows),): sum_j dosage_j * variant_beta_j, missing calls -> mean_j."""
    from ..genotypes.store import load_rows

    beta = np.asarray(root["variant_beta"][:], dtype=np.float64)
    x = load_rows(root, rows).astype(np.float64)
    miss = x < 0
    x[miss] = np.broadcast_to(mean, x.shape)[miss]
    return x @ beta


def run_prs(ctx, state) -> dict:
    """Polygenic score from the store's betas, then a one-feature logistic regression."""
    from sklearn.linear_model import LogisticRegression

    s = ctx.splits
    beta = np.asarray(ctx.root["variant_beta"][:], dtype=np.float64)
    if not np.any(np.isfinite(beta) & (beta != 0)):
        raise CmixError(f"{ctx.store_path}: variant_beta is all zero or missing; the PRS "
                        "baseline needs summary-statistic effects")
    fitted = state.parts.get("fitted")
    if fitted is None:
        t = time.perf_counter()
        score = polygenic_score(ctx.root, s.labeled, ctx.mean)
        mu, sigma = float(score.mean()), float(score.std()) or 1.0
        y = s.label[s.labeled]
        t = state.add_time("load", t)
        z = _with_cov(ctx, ((score - mu) / sigma)[:, None], s.labeled)
        model = LogisticRegression(C=1e6, max_iter=5000).fit(z, y)
        state.add_time("fit", t)
        fitted = state.parts["fitted"] = {
            "model": model, "score_mean": mu, "score_sd": sigma,
            "validation": {"labeled_accuracy": float(np.mean(model.predict(z) == y)),
                           "fit_rows": "labeled (train_labeled + validation)"}}
        state.stage = "fitted"
        ctx.save(state)
    test_score = (polygenic_score(ctx.root, s.test, ctx.mean) - fitted["score_mean"]) \
        / fitted["score_sd"]
    prob = _full_proba(fitted["model"], _with_cov(ctx, test_score[:, None], s.test),
                       s.n_classes)
    return harness.finish(ctx, state, prob, fitted["validation"])


# ------------------------------------------------------------------ pca_logreg / label_spreading / gbdt
def training_pcs(ctx, state):
    """rows -> (len(rows), p) PCs of the standardised dosages, the axes fitted on the
    training split's rows (labeled, validation and unlabeled: genotypes only, no label;
    at most ``semi_max_rows`` of them, drawn with the run's seed); p = ``semi_pcs``. The
    fit is made once, on first use, and kept in state.parts["pca"] (the checkpoint, and
    what ``cmix predict`` projects new people with)."""
    from .harness import gen

    def pcs_of(rows):
        if "pca" not in state.parts:
            train = ctx.train_rows
            if len(train) > ctx.cfg["semi_max_rows"]:
                _, rng = gen(ctx.seed, 6)
                train = np.sort(rng.choice(train, ctx.cfg["semi_max_rows"], replace=False))
            state.parts["pca"] = standardised_pcs(ctx.rows(train).cpu().numpy(), ctx.mean,
                                                  ctx.sd, ctx.cfg["semi_pcs"], ctx.seed)[1]
        return project_pcs(state.parts["pca"], ctx.rows(rows).cpu().numpy(), ctx.mean, ctx.sd)
    return pcs_of


def run_pca_logreg(ctx, state) -> dict:
    """PCA of the training split's genotypes (labeled and unlabeled rows alike), then L2
    logistic regression on the labeled rows' PCs (covariates unpenalised), C by
    stratified k-fold CV (log-loss): the semi-supervised linear model a geneticist fits
    first."""
    pcs_of = training_pcs(ctx, state)
    return _cv_logreg_run(ctx, state, pcs_of)


def run_label_spreading(ctx, state) -> dict:
    """scikit-learn's LabelSpreading (kNN kernel, ``spreading_k`` neighbours, clamping
    ``spreading_alpha``) on the training split's PCs (:func:`training_pcs`): the labeled
    rows seed, the unlabeled rows (at most ``semi_max_rows``) are nodes; test rows get
    the spread labels of their nearest nodes. Covariates are not used."""
    from sklearn.semi_supervised import LabelSpreading
    from threadpoolctl import threadpool_limits

    s, cfg = ctx.splits, ctx.cfg
    pcs_of = training_pcs(ctx, state)
    fitted = state.parts.get("fitted")
    if fitted is None:
        t = time.perf_counter()
        unl = s.unlabeled
        if len(unl) > cfg["semi_max_rows"]:
            _, rng = harness.gen(ctx.seed, 7)
            unl = np.sort(rng.choice(unl, cfg["semi_max_rows"], replace=False))
        x = np.vstack([pcs_of(s.labeled), pcs_of(unl)])
        y = np.concatenate([s.label[s.labeled], np.full(len(unl), -1)])
        t = state.add_time("load", t)
        with threadpool_limits(limits=1):
            model = LabelSpreading(kernel="knn", n_neighbors=cfg["spreading_k"],
                                   alpha=cfg["spreading_alpha"], max_iter=1000).fit(x, y)
        state.add_time("fit", t)
        fitted = state.parts["fitted"] = {
            "model": model, "validation": {"fit_rows": "labeled seeds + unlabeled nodes",
                                           "n_nodes": int(len(y))}}
        state.stage = "fitted"
        ctx.save(state)
    with threadpool_limits(limits=1):
        prob = _full_proba(fitted["model"], pcs_of(s.test), s.n_classes)
    return harness.finish(ctx, state, prob, fitted["validation"])


def gbdt_features(x: np.ndarray) -> np.ndarray:
    """float64 (n, M) dosages for the trees, missing calls (-1) as NaN (the trees' own
    missing-value branch)."""
    x = x.astype(np.float64)
    x[x < 0] = np.nan
    return x


def run_gbdt(ctx, state) -> dict:
    """Gradient-boosted trees (scikit-learn's HistGradientBoostingClassifier) on the
    labeled rows' dosages (and covariates): the paper's CatBoost row. The number of
    trees is early-stopped on an internal 20% of the labeled rows (log-loss); learning
    rate ``gbdt_lr``, at most ``gbdt_max_iter`` trees of ``gbdt_max_leaf_nodes`` leaves,
    L2 ``gbdt_l2``. One OpenMP thread, so the sums do not depend on the thread count."""
    from sklearn.ensemble import HistGradientBoostingClassifier
    from threadpoolctl import threadpool_limits

    s, cfg = ctx.splits, ctx.cfg

    def features(rows):
        return _with_cov(ctx, gbdt_features(ctx.rows(rows).cpu().numpy()), rows)

    fitted = state.parts.get("fitted")
    if fitted is None:
        t = time.perf_counter()
        x, y = features(s.labeled), s.label[s.labeled]
        t = state.add_time("load", t)
        model = HistGradientBoostingClassifier(
            learning_rate=cfg["gbdt_lr"], max_iter=cfg["gbdt_max_iter"],
            max_leaf_nodes=cfg["gbdt_max_leaf_nodes"], l2_regularization=cfg["gbdt_l2"],
            early_stopping=True, validation_fraction=0.2, n_iter_no_change=10,
            scoring="loss", random_state=int(ctx.seed) & 0x7FFFFFFF)
        with threadpool_limits(limits=1):
            model.fit(x, y)
        state.add_time("fit", t)
        fitted = state.parts["fitted"] = {
            "model": model, "validation": {"n_trees": int(model.n_iter_),
                                           "fit_rows": "labeled (train_labeled + validation)"}}
        state.stage = "fitted"
        ctx.save(state)
    with threadpool_limits(limits=1):
        prob = _full_proba(fitted["model"], features(s.test), s.n_classes)
    return harness.finish(ctx, state, prob, fitted["validation"])


# ------------------------------------------------------------------ neural baselines
def _cmix_model(ctx):
    """The cmix model (embedding + encoder + decoder) seeded by the run's seed."""
    import torch

    from .nn import ContrastiveMixup

    torch.manual_seed(ctx.seed)
    return ContrastiveMixup(ctx.n_snps, ctx.cfg, ctx.mean, ctx.sd).to(ctx.dev)


def _train_loader(ctx, rows):
    from .data import RowLoader, choose_mode

    mode = choose_mode(len(ctx.train_rows), ctx.n_snps, ctx.cfg["loader"],
                       int(ctx.cfg["memory_limit_mb"]) << 20)
    return RowLoader(ctx.root, rows, batch_size=ctx.cfg["batch_size"], mode=mode,
                     device=ctx.dev, buffer_chunks=ctx.cfg["buffer_chunks"])


def _encode_all(model, x, batch=4096):
    import torch

    model.eval()
    with torch.no_grad():
        return torch.cat([model.encode(x[i:i + batch]).float() for i in range(0, len(x), batch)]) \
            if len(x) else torch.zeros((0, model.encoder.out_dim), device=x.device)


def _latent_head(ctx, in_dim, stage_seed):
    """A fresh predictor head on latent rows of width in_dim, and its optimiser."""
    import torch

    from .nn import Predictor
    from .train import Head

    torch.manual_seed(stage_seed)
    head = Head(torch.nn.Identity(), Predictor(in_dim, ctx.splits.n_classes,
                                               ctx.cfg["pred_hidden"], ctx.n_cov,
                                               ctx.cfg["pred_dropout"]).to(ctx.dev))
    harness.start_covariate_term(ctx, head.predictor)
    opt = torch.optim.Adam(head.parameters(), lr=ctx.cfg["pred_lr"],
                           weight_decay=ctx.cfg["pred_weight_decay"])
    return head, opt


def _frozen_latent(ctx, model):
    """Freeze the encoder; the labeled rows' latent inputs (covariates beside them, if
    any), one-hot targets and unit weights (the harness's train tuple), and the
    validation rows' (inputs, labels)."""
    import torch

    s = ctx.splits
    for p in model.parameters():
        p.requires_grad_(False)
    z_lab = ctx.with_cov(_encode_all(model, ctx.rows(s.train_labeled)), s.train_labeled)
    eye = torch.eye(s.n_classes, device=ctx.dev)
    y_lab = torch.from_numpy(s.label[s.train_labeled]).to(ctx.dev)
    train = (z_lab, eye[y_lab], torch.ones(len(y_lab), device=ctx.dev))
    z_val = ctx.with_cov(_encode_all(model, ctx.rows(s.validation)), s.validation)
    return train, (z_val, s.label[s.validation])


def _supervised_epoch(ctx):
    """One plain supervised epoch of a head (the trainer's predictor epoch, no mixup)."""
    from .train import predictor_epoch

    cfg = {**ctx.cfg, "predictor_mixup": False}
    return lambda head, opt, x, t, w, epoch: predictor_epoch(head, opt, x, t, w, cfg, ctx.seed,
                                                            epoch, ctx.dev)


def _test_proba_latent(ctx, model, head):
    test = ctx.splits.test
    return harness.predict_proba(head, ctx.with_cov(_encode_all(model, ctx.rows(test)), test))


def run_ae(ctx, state) -> dict:
    """Autoencoder pre-training on all training-split rows, predictor on the frozen encoder."""
    import torch

    from .losses import reconstruction_loss

    cfg, dev = ctx.cfg, ctx.dev
    model = _cmix_model(ctx)
    opt = torch.optim.Adam(model.parameters(), lr=cfg["lr"], weight_decay=cfg["weight_decay"])
    loader = []

    def epoch_fn(epoch):
        if not loader:
            loader.append(_train_loader(ctx, ctx.train_rows))
        model.train()
        tot, n = 0.0, 0
        for _, x in loader[0].batches(seed_seq=[ctx.seed & 0xFFFFFFFF, 11, epoch]):
            x = x.to(dev)
            loss = reconstruction_loss(model.decoder(model.encode(x)), x, model.embed)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            tot, n = tot + float(loss.detach()), n + 1
        return {"loss": tot / max(n, 1)}

    harness.run_epochs(ctx, state, "pretrain", cfg["epochs"], {"model": model, "opt": opt},
                       epoch_fn, "ae pre-training")
    train, val = _frozen_latent(ctx, model)
    head, validation = harness.fit_head(
        ctx, state, lambda: _latent_head(ctx, train[0].shape[1], ctx.seed + 2),
        _supervised_epoch(ctx), train, val)
    return harness.finish(ctx, state, _test_proba_latent(ctx, model, head), validation)


# ------------------------------------------------------------------ VIME
def vime_corrupt(x, p_m: float, generator=None):
    """VIME mask generation and corruption of int8 rows x (B, M).

    m ~ Bernoulli(p_m) per entry; x_bar[:, j] = x[perm_j, j] with an independent random
    permutation perm_j of the rows per column (a draw from column j's empirical marginal
    in the batch); x~ = where(m, x_bar, x). Returns (x~ (B, M) same dtype,
    mask (B, M) float32 = 1[x~ != x], the mask estimator's target)."""
    import torch

    b, m = x.shape
    mask = torch.rand((b, m), generator=generator) < p_m
    perm = torch.argsort(torch.rand((b, m), generator=generator), dim=0)
    x_bar = torch.gather(x, 0, perm.to(x.device))
    x_tilde = torch.where(mask.to(x.device), x_bar, x)
    return x_tilde, (x_tilde != x).float()


def vime_self_loss(mask_logits, mask, feature_out, x, embed, alpha: float):
    """VIME self-supervised loss: BCE(mask_logits (B, M), mask (B, M)) averaged over
    entries + alpha * feature-estimation loss (the cmix reconstruction loss of the clean
    rows x from feature_out). Returns (total, mask_loss, feature_loss)."""
    import torch.nn.functional as F

    from .losses import reconstruction_loss

    mask_loss = F.binary_cross_entropy_with_logits(mask_logits.float(), mask.float())
    feature_loss = reconstruction_loss(feature_out, x, embed)
    return mask_loss + alpha * feature_loss, mask_loss, feature_loss


def vime_consistency_loss(logits_k):
    """Consistency over K augmented copies: logits_k (K, B, C); the variance over the K
    copies (population variance, as tf.nn.moments) averaged over rows and classes."""
    return logits_k.float().var(dim=0, unbiased=False).mean()


def run_vime(ctx, state) -> dict:
    """VIME self- and semi-supervised learning (Yoon et al. 2020): self-supervised
    pre-training of the encoder, then a predictor on the frozen encoder with VIME's
    consistency loss on the unlabeled rows."""
    model = vime_pretrain(ctx, state)
    train, val = _frozen_latent(ctx, model)
    head, validation = harness.fit_head(
        ctx, state, lambda: _latent_head(ctx, train[0].shape[1], ctx.seed + 2),
        vime_semi_epoch(ctx, model), train, val)
    return harness.finish(ctx, state, _test_proba_latent(ctx, model, head), validation)


def vime_pretrain(ctx, state):
    """VIME's self-supervised stage (resumable per epoch): corrupt each training row
    (mask probability vime_p_m, masked values drawn from the column's marginal), then
    estimate the mask and reconstruct the row from the encoding. Returns the model."""
    import torch

    from .nn import mlp_layers

    cfg, dev = ctx.cfg, ctx.dev
    model = _cmix_model(ctx)
    torch.manual_seed(ctx.seed + 5)
    dims = [model.encoder.out_dim] * cfg["proj_layers"] + [ctx.n_snps]
    mask_est = torch.nn.Sequential(*mlp_layers(dims, batchnorm=False, last_act=False)).to(dev)
    params = list(model.embed.parameters()) + list(model.encoder.parameters()) \
        + list(model.decoder.parameters()) + list(mask_est.parameters())
    opt = torch.optim.Adam(params, lr=cfg["lr"], weight_decay=cfg["weight_decay"])
    loaders = {}

    def self_epoch(epoch):
        if "train" not in loaders:
            loaders["train"] = _train_loader(ctx, ctx.train_rows)
        g, _ = harness.gen(ctx.seed, 21, epoch)
        model.train()
        mask_est.train()
        tot, n = 0.0, 0
        for _, x in loaders["train"].batches(seed_seq=[ctx.seed & 0xFFFFFFFF, 22, epoch]):
            x = x.to(dev)
            x_tilde, mask = vime_corrupt(x, cfg["vime_p_m"], g)
            z = model.encode(x_tilde)
            loss, _, _ = vime_self_loss(mask_est(z), mask.to(dev), model.decoder(z), x,
                                        model.embed, cfg["vime_alpha"])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            tot, n = tot + float(loss.detach()), n + 1
        return {"loss": tot / max(n, 1)}

    harness.run_epochs(ctx, state, "pretrain", cfg["epochs"],
                       {"model": model, "mask_estimator": mask_est, "opt": opt}, self_epoch,
                       "vime self-supervised")
    return model


def vime_semi_epoch(ctx, model):
    """The epoch function (for :func:`harness.fit_head`) of VIME's semi-supervised
    predictor: cross-entropy on the labeled latents plus vime_beta x the variance of the
    logits over vime_k corruptions of each unlabeled row."""
    import torch
    import torch.nn.functional as F

    s, cfg, dev = ctx.splits, ctx.cfg, ctx.dev
    u_loader = _train_loader(ctx, s.unlabeled)
    bs, k = cfg["pred_batch_size"], cfg["vime_k"]

    def semi_epoch(head, popt, z_l, t_l, w_l, epoch):
        g, rng = harness.gen(ctx.seed, 23, epoch)
        y_l = t_l.argmax(1)
        head.train()
        order = torch.from_numpy(rng.permutation(len(y_l))).to(dev)
        u_iter = (u_loader.batches(seed_seq=[ctx.seed & 0xFFFFFFFF, 24, epoch])
                  if len(u_loader) else iter(()))
        tot = 0.0
        for st in range(0, len(order), bs):
            idx = order[st:st + bs]
            if len(idx) < 2:
                continue
            loss = F.cross_entropy(head.predictor(z_l[idx]), y_l[idx])
            pos_u, xu = next(u_iter, (None, None))
            if xu is not None and len(xu) >= 2 and cfg["vime_beta"] > 0:
                xu = xu.to(dev)
                with torch.no_grad():
                    zk = torch.stack([model.encode(vime_corrupt(xu, cfg["vime_p_m"], g)[0])
                                      for _ in range(k)])             # (K, B, H)
                    if ctx.n_cov:
                        cov_u = ctx.cov_rows(s.unlabeled[pos_u])
                        zk = torch.cat([zk, cov_u.expand(k, -1, -1)], 2)
                logits_k = head.predictor(zk.flatten(0, 1)).view(k, len(xu), -1)
                loss = loss + cfg["vime_beta"] * vime_consistency_loss(logits_k)
            popt.zero_grad(set_to_none=True)
            loss.backward()
            popt.step()
            tot += float(loss.detach())
        return tot

    return semi_epoch


# ------------------------------------------------------------------ manifold mixup
def manifold_mixup_step(predictor, f, targets, layer: int, lam, perm):
    """Logits of predictor (a cmix Predictor) for inputs f (B, D) mixed at ``layer``
    (0 = input, 1 / 2 = after hidden block 1 / 2): h = lam h + (1 - lam) h[perm];
    returns (logits (B, C), mixed soft targets (B, C))."""
    net = predictor.net
    cut = 3 * layer                          # blocks are Linear, BatchNorm, ReLU
    h = net[:cut](f)
    lam_v = lam.view(-1, 1).to(h.dtype)
    h = lam_v * h + (1 - lam_v) * h[perm]
    t = lam.view(-1, 1) * targets + (1 - lam.view(-1, 1)) * targets[perm]
    # the covariate term is linear: mixing its inputs mixes it as the targets are mixed
    skip = predictor.covariate_logits(lam_v.to(f.dtype) * f + (1 - lam_v.to(f.dtype)) * f[perm])
    return net[cut:](h) + skip, t


def run_manifold_mixup(ctx, state) -> dict:
    """Supervised predictor on the embedded SNPs with manifold mixup."""
    import torch

    from .losses import soft_cross_entropy
    from .nn import Predictor, SnpEmbedding, WithCovariates
    from .train import Head

    s, cfg, dev = ctx.splits, ctx.cfg, ctx.dev
    t = time.perf_counter()
    x_lab = ctx.with_cov(ctx.rows(s.train_labeled), s.train_labeled)
    y_lab = torch.from_numpy(s.label[s.train_labeled]).to(dev)
    eye = torch.eye(s.n_classes, device=dev)
    train = (x_lab, eye[y_lab], torch.ones(len(y_lab), device=dev))
    val = (ctx.with_cov(ctx.rows(s.validation), s.validation), s.label[s.validation])
    state.add_time("load", t)

    def new_head():
        torch.manual_seed(ctx.seed + 1)
        features = SnpEmbedding(ctx.n_snps, cfg["encoding"], ctx.mean, ctx.sd).to(dev)
        if ctx.n_cov:
            features = WithCovariates(features, ctx.n_snps, ctx.n_cov)
        torch.manual_seed(ctx.seed + 2)
        h = Head(features, Predictor(features.out_dim, s.n_classes, cfg["pred_hidden"],
                                     ctx.n_cov, cfg["pred_dropout"]).to(dev))
        harness.start_covariate_term(ctx, h.predictor)
        return h, torch.optim.Adam(h.parameters(), lr=cfg["pred_lr"],
                                   weight_decay=cfg["pred_weight_decay"])
    a = float(cfg["mixup_alpha"])

    def epoch_fn(head, opt, x_l, t_l, w_l, epoch):
        _, rng = harness.gen(ctx.seed, 31, epoch)
        head.train()
        order = torch.from_numpy(rng.permutation(len(t_l))).to(dev)
        tot = 0.0
        for st in range(0, len(order), cfg["pred_batch_size"]):
            idx = order[st:st + cfg["pred_batch_size"]]
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

    head, validation = harness.fit_head(ctx, state, new_head, epoch_fn, train, val)
    prob = harness.predict_proba(head, ctx.with_cov(ctx.rows(s.test), s.test))
    return harness.finish(ctx, state, prob, validation)
