"""Baselines of the evaluation grid (issue 7), selectable by ``cmix train --method``.

Every method uses the trainer's splits (:func:`cmix.data.make_splits`: labeled subset,
validation carved from it, fixed test split of the store), loaders, metrics
(:func:`cmix.train.classification_metrics`) and writes the same ``metrics.json`` layout
into the run folder, plus ``model.pt`` (what the method fitted, for inspection and tests).
Test rows are read only to evaluate the final model: never for fitting, column
statistics, early stopping or hyper-parameter choice.

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
are config presets of the trainer (:data:`cmix.train.METHODS`).

Config: the trainer's keys (hidden, n_layers, epochs, batch_size, lr, pred_*, ...) plus
:data:`BASELINE_DEFAULTS` (prefixed per method).
"""

from __future__ import annotations

import json
import time
import warnings
from pathlib import Path

import numpy as np

from .io import CmixError, atomic_path, check_writable_dir, log, progress, save_torch

BASELINE_DEFAULTS: dict = {
    "logreg_n_c": 10,          # C grid: logspace(-4, 2, logreg_n_c)
    "logreg_folds": 5,
    "vime_p_m": 0.3,           # mask probability
    "vime_alpha": 2.0,         # weight of the feature-estimation loss
    "vime_k": 3,               # augmented copies per unlabeled row
    "vime_beta": 1.0,          # weight of the consistency loss
    "mixup_alpha": 2.0,        # manifold mixup: lambda ~ Beta(a, a)
}
MODEL_FILE = "model.pt"


# ------------------------------------------------------------------ configuration
def baseline_config(config: dict | None = None, config_path=None) -> dict:
    """The trainer's config (:func:`cmix.train.load_config`) plus BASELINE_DEFAULTS,
    updated from the file and ``config``; unknown keys raise CmixError."""
    from .train import check_types, load_config, read_config_file

    user = read_config_file(config_path) if config_path is not None else {}
    user.update(config or {})
    extra = {k: user.pop(k) for k in list(user) if k in BASELINE_DEFAULTS}
    cfg = load_config(None, user)
    cfg.update(BASELINE_DEFAULTS)
    cfg.update(extra)
    check_types(cfg, BASELINE_DEFAULTS, config_path or "config")
    if not 0.0 < float(cfg["vime_p_m"]) < 1.0:
        raise CmixError(f"vime_p_m = {cfg['vime_p_m']!r}, expected a number in (0, 1)")
    for key in ("logreg_n_c", "logreg_folds", "vime_k"):
        if not isinstance(cfg[key], int) or cfg[key] < (2 if key == "logreg_folds" else 1):
            raise CmixError(f"{key} = {cfg[key]!r}, expected an integer >= "
                            f"{2 if key == 'logreg_folds' else 1}")
    for key in ("vime_alpha", "vime_beta", "mixup_alpha"):
        if not float(cfg[key]) >= 0:
            raise CmixError(f"{key} = {cfg[key]!r}, expected a number >= 0")
    return cfg


# ------------------------------------------------------------------ shared pieces
class _Run:
    """What every baseline needs: config, device, store, splits, run folder, timers."""

    def __init__(self, method, store_path, budget, seed, out_dir, config, config_path, device):
        from . import store as store_mod
        from .data import make_splits
        from .train import open_checked_store, resolve_device

        self.t0 = time.perf_counter()
        self.method, self.budget, self.seed = method, int(budget), int(seed)
        self.cfg = baseline_config(config, config_path)
        self.dev = resolve_device(device)
        self.store_path = Path(store_path)
        self.root = open_checked_store(store_path)
        store_mod.check_encoding(self.root, self.cfg.get("encoding"), self.store_path.name)
        self.store_sha256 = store_mod.store_fingerprint(self.root)
        self.splits = make_splits(self.root, budget, seed, self.cfg["val_fraction"],
                                  self.store_path.name)
        self.trait = str(self.root.attrs["trait"])
        self.n_snps = int(self.root["call_dosage"].shape[1])
        self.out_dir = check_writable_dir(out_dir)
        self.times: dict = {}
        s = self.splits
        self.train_rows = np.sort(np.concatenate([s.train_labeled, s.validation, s.unlabeled]))
        c = s.counts()
        log(f"{self.trait}: {method}, budget {budget}, seed {seed}: {c['n_train_labeled']} "
            f"labeled + {c['n_validation']} validation, {c['n_unlabeled']} unlabeled, "
            f"{c['n_test']} test, {self.n_snps} SNPs, {s.n_classes} classes, device {self.dev}")

    def tick(self, key, since):
        self.times[key] = self.times.get(key, 0.0) + time.perf_counter() - since
        return time.perf_counter()

    def finish(self, test_prob, validation: dict, fitted: dict) -> dict:
        """Test metrics from ``test_prob`` (n_test, C); writes model.pt and metrics.json."""
        import torch

        from .train import METRICS_FILE, _versions, classification_metrics

        s = self.splits
        metrics = classification_metrics(s.label[s.test], test_prob, s.n_classes)
        result = {
            "trait": self.trait, "method": self.method, "budget": self.budget,
            "seed": self.seed, "class_names": s.class_names, **s.counts(),
            "n_snps": self.n_snps,
            "test": metrics, "validation": validation, "pseudo_labels": None,
            "test_split_sha256": s.test_hash,
            "wall_seconds": {k: round(v, 3) for k, v in self.times.items()},
            "device": (str(self.dev) if self.dev.type == "cpu"
                       else f"cuda ({torch.cuda.get_device_name(self.dev)})"),
            "torch_threads": torch.get_num_threads(),
            "versions": _versions(), "config": self.cfg,
            "store": str(self.store_path.resolve().name),
            "store_sha256": self.store_sha256,
        }
        save_torch(fitted, self.out_dir / MODEL_FILE)
        with atomic_path(self.out_dir / METRICS_FILE) as tmp:
            tmp.write_text(json.dumps(result, indent=2) + "\n")
        log(f"{self.trait} {self.method} budget {self.budget} seed {self.seed}: test accuracy "
            f"{metrics['accuracy']:.4f}, balanced {metrics['balanced_accuracy']:.4f}")
        return result


def standardised_dosage(x: np.ndarray, mean: np.ndarray, sd: np.ndarray) -> np.ndarray:
    """float64 (n, M): (dosage - mean) / sd, missing (-1) -> 0 (the mean)."""
    z = (x.astype(np.float64) - mean) / sd
    z[x < 0] = 0.0
    return z


def _log_loss_cv(n_labeled_per_class: np.ndarray, folds: int) -> int:
    return int(max(2, min(folds, n_labeled_per_class.min())))


def fit_logreg_cv(x: np.ndarray, y: np.ndarray, n_classes: int, folds: int, n_c: int,
                  seed: int):
    """L2 logistic regression on x (n, d), y (n,): C from ``n_c`` values in 1e-4..1e2 by
    stratified k-fold CV of the log-loss (k = ``folds``, fewer if a class has fewer rows),
    then refit on all rows. Returns (model, C, k, best mean CV log-loss)."""
    from sklearn.linear_model import LogisticRegression, LogisticRegressionCV
    from sklearn.model_selection import StratifiedKFold

    folds = _log_loss_cv(np.bincount(y, minlength=n_classes), folds)
    cv = LogisticRegressionCV(Cs=np.logspace(-4, 2, n_c),
                              cv=StratifiedKFold(folds, shuffle=True, random_state=seed),
                              scoring="neg_log_loss", max_iter=2000, n_jobs=1)
    with warnings.catch_warnings():          # scikit-learn 1.8 API-transition notices
        warnings.simplefilter("ignore", FutureWarning)
        cv.fit(x, y)
    best_c = float(np.atleast_1d(cv.C_)[0])
    scores = np.mean(next(iter(cv.scores_.values())), axis=0)      # (n_c,) mean over folds
    model = LogisticRegression(C=best_c, max_iter=5000).fit(x, y)
    return model, best_c, folds, float(-scores.max())


# ------------------------------------------------------------------ logreg / prs
def run_logreg(store_path, budget, seed, out_dir, *, config=None, config_path=None,
               device="cpu", resume=False):
    """L2 logistic regression, C by stratified k-fold CV (log-loss) within the labeled rows."""
    from .data import column_moments, load_rows

    r = _Run("logreg", store_path, budget, seed, out_dir, config, config_path, device)
    s, cfg = r.splits, r.cfg
    t = time.perf_counter()
    mean, sd = column_moments(r.root, r.train_rows)
    lab = s.labeled
    x = standardised_dosage(load_rows(r.root, lab), mean, sd)
    y = s.label[lab]
    t = r.tick("load", t)
    model, best_c, folds, cv_loss = fit_logreg_cv(x, y, s.n_classes, cfg["logreg_folds"],
                                                  cfg["logreg_n_c"], seed)
    t = r.tick("fit", t)
    prob = _full_proba(model, standardised_dosage(load_rows(r.root, s.test), mean, sd),
                       s.n_classes)
    r.tick("evaluate", t)
    return r.finish(prob, {"C": best_c, "cv_folds": folds, "cv_log_loss": cv_loss,
                           "fit_rows": "labeled (train_labeled + validation)"},
                    {"coef": model.coef_, "intercept": model.intercept_, "C": best_c,
                     "mean": mean, "sd": sd})


def _full_proba(model, x, n_classes):
    """predict_proba with columns for all n_classes (classes absent from a fit get 0)."""
    prob = np.zeros((len(x), n_classes))
    prob[:, model.classes_] = model.predict_proba(x)
    return prob


def polygenic_score(root, rows: np.ndarray, mean: np.ndarray) -> np.ndarray:
    """float64 (len(rows),): sum_j dosage_j * variant_beta_j, missing calls -> mean_j."""
    from .data import load_rows

    beta = np.asarray(root["variant_beta"][:], dtype=np.float64)
    x = load_rows(root, rows).astype(np.float64)
    miss = x < 0
    x[miss] = np.broadcast_to(mean, x.shape)[miss]
    return x @ beta


def run_prs(store_path, budget, seed, out_dir, *, config=None, config_path=None,
            device="cpu", resume=False):
    """Polygenic score from the store's betas, then a one-feature logistic regression."""
    from sklearn.linear_model import LogisticRegression

    from .data import column_moments

    r = _Run("prs", store_path, budget, seed, out_dir, config, config_path, device)
    s = r.splits
    beta = np.asarray(r.root["variant_beta"][:], dtype=np.float64)
    if not np.any(np.isfinite(beta) & (beta != 0)):
        raise CmixError(f"{r.store_path}: variant_beta is all zero or missing; the PRS "
                        "baseline needs summary-statistic effects")
    t = time.perf_counter()
    mean, _ = column_moments(r.root, r.train_rows)
    lab = s.labeled
    score = polygenic_score(r.root, lab, mean)
    mu, sigma = float(score.mean()), float(score.std()) or 1.0
    y = s.label[lab]
    t = r.tick("load", t)
    model = LogisticRegression(C=1e6, max_iter=5000).fit(((score - mu) / sigma)[:, None], y)
    t = r.tick("fit", t)
    test_score = (polygenic_score(r.root, s.test, mean) - mu) / sigma
    prob = _full_proba(model, test_score[:, None], s.n_classes)
    r.tick("evaluate", t)
    train_acc = float(np.mean(model.predict(((score - mu) / sigma)[:, None]) == y))
    return r.finish(prob, {"labeled_accuracy": train_acc,
                           "fit_rows": "labeled (train_labeled + validation)"},
                    {"coef": model.coef_, "intercept": model.intercept_,
                     "score_mean": mu, "score_sd": sigma})


# ------------------------------------------------------------------ neural baselines
def fit_predictor(new_head, epoch_fn, x_lab, y_lab, x_val, y_val, cfg, desc="predictor"):
    """Early-stopped training of a predictor head, then (with cfg["pred_refit"]) a refit.

    new_head() -> (head, optimiser), seeded the same way at every call; epoch_fn(head,
    opt, x, y, epoch) -> mean loss trains one epoch on inputs x (N, ...) and int64 labels
    y (N,), both on the device. Training stops after cfg["pred_patience"] epochs without a
    better validation log-loss and reloads the best state; with cfg["pred_refit"] a fresh
    head is then trained on the labeled and validation rows together for the best epoch
    count (as the trainer does). Returns (head, validation summary dict)."""
    import torch

    from .train import _cpu_state, log_loss, predict_proba

    head, opt = new_head()
    y_val_np = y_val.cpu().numpy()
    has_val = len(y_val_np) > 0
    best, best_loss, best_epoch, bad = None, float("inf"), 0, 0
    bar = progress(total=cfg["pred_epochs"], desc=desc, unit="epoch")
    for epoch in range(cfg["pred_epochs"]):
        epoch_fn(head, opt, x_lab, y_lab, epoch)
        bar.update(1)
        if not has_val:
            continue
        vloss = log_loss(predict_proba(head, x_val, x_val.device), y_val_np)
        if vloss < best_loss:
            best, best_loss, best_epoch, bad = _cpu_state(head.state_dict()), vloss, epoch + 1, 0
        else:
            bad += 1
            if bad >= cfg["pred_patience"]:
                break
    bar.close()
    if best is not None:
        head.load_state_dict(best)
    out = {"best_epoch": best_epoch, "best_loss": best_loss if np.isfinite(best_loss) else None}
    if has_val:
        prob = predict_proba(head, x_val, x_val.device)
        out["accuracy"] = float(np.mean(prob.argmax(1) == y_val_np))
    n_refit = best_epoch if cfg["pred_refit"] else 0
    if n_refit:
        head, opt = new_head()
        x_all, y_all = torch.cat([x_lab, x_val]), torch.cat([y_lab, y_val])
        for epoch in range(n_refit):
            epoch_fn(head, opt, x_all, y_all, epoch)
    out["refit_epochs"] = n_refit
    return head, out


def _nn_setup(r):
    """Column moments (dosage encoding), the cmix model (embedding + encoder + decoder),
    labeled / validation inputs on the device."""
    import torch

    from .data import column_moments, load_rows
    from .nn import ContrastiveMixup

    s, cfg = r.splits, r.cfg
    mean = sd = None
    if cfg["encoding"] == "dosage":
        mean, sd = column_moments(r.root, r.train_rows)
    torch.manual_seed(r.seed)
    model = ContrastiveMixup(r.n_snps, cfg, mean, sd).to(r.dev)
    x_lab = torch.from_numpy(load_rows(r.root, s.train_labeled)).to(r.dev)
    x_val = torch.from_numpy(load_rows(r.root, s.validation)).to(r.dev)
    return model, mean, sd, x_lab, x_val


def _encode_all(model, x, batch=4096):
    import torch

    model.eval()
    with torch.no_grad():
        return torch.cat([model.encode(x[i:i + batch]).float() for i in range(0, len(x), batch)]) \
            if len(x) else torch.zeros((0, model.encoder.out_dim), device=x.device)


def _supervised_head_epoch(head, opt, inputs, y, cfg, seed, epoch, device):
    """One plain supervised epoch (the trainer's predictor_epoch without mixup)."""
    import torch

    from .train import predictor_epoch

    eye = torch.eye(int(head.predictor.net[-1].out_features), device=device)
    return predictor_epoch(head, opt, inputs, eye[y], torch.ones(len(y), device=device),
                           {**cfg, "predictor_mixup": False}, seed, epoch, device)


def _latent_head(r, in_dim, stage_seed):
    """A fresh predictor head on latent rows of width in_dim, and its optimiser."""
    import torch

    from .nn import Predictor
    from .train import Head

    torch.manual_seed(stage_seed)
    head = Head(torch.nn.Identity(), Predictor(in_dim, r.splits.n_classes,
                                               r.cfg["pred_hidden"]).to(r.dev))
    opt = torch.optim.Adam(head.parameters(), lr=r.cfg["pred_lr"],
                           weight_decay=r.cfg["pred_weight_decay"])
    return head, opt


def _frozen_latent(r, model, x_lab, x_val):
    """Freeze the encoder and embed the labeled and validation rows:
    (z_lab, z_val, y_lab, y_val) on the device."""
    import torch

    s = r.splits
    for p in model.parameters():
        p.requires_grad_(False)
    z_lab, z_val = _encode_all(model, x_lab), _encode_all(model, x_val)
    y_lab = torch.from_numpy(s.label[s.train_labeled]).to(r.dev)
    y_val = torch.from_numpy(s.label[s.validation]).to(r.dev)
    return z_lab, z_val, y_lab, y_val


def _frozen_predictor(r, model, x_lab, x_val, stage_seed):
    """Predictor on the frozen encoder's latent rows of the labeled rows (no mixup);
    returns (head, validation summary)."""
    z_lab, z_val, y_lab, y_val = _frozen_latent(r, model, x_lab, x_val)
    return fit_predictor(lambda: _latent_head(r, z_lab.shape[1], stage_seed),
                         lambda h, o, z, y, e: _supervised_head_epoch(h, o, z, y, r.cfg,
                                                                      r.seed, e, r.dev),
                         z_lab, y_lab, z_val, y_val, r.cfg)


def _test_proba_latent(r, model, head):
    import torch

    from .data import load_rows
    from .train import predict_proba

    x_test = torch.from_numpy(load_rows(r.root, r.splits.test)).to(r.dev)
    return predict_proba(head, _encode_all(model, x_test), r.dev)


def run_ae(store_path, budget, seed, out_dir, *, config=None, config_path=None,
           device="auto", resume=False):
    """Autoencoder pre-training on all training-split rows, predictor on the frozen encoder."""
    import torch

    from .data import RowLoader, choose_mode
    from .losses import reconstruction_loss
    from .train import _cpu_state

    r = _Run("ae", store_path, budget, seed, out_dir, config, config_path, device)
    cfg, dev = r.cfg, r.dev
    t = time.perf_counter()
    model, _, _, x_lab, x_val = _nn_setup(r)
    mode = choose_mode(len(r.train_rows), r.n_snps, cfg["loader"], int(cfg["memory_limit_mb"]) << 20)
    loader = RowLoader(r.root, r.train_rows, batch_size=cfg["batch_size"], mode=mode, device=dev,
                       buffer_chunks=cfg["buffer_chunks"])
    t = r.tick("load", t)
    opt = torch.optim.Adam(model.parameters(), lr=cfg["lr"], weight_decay=cfg["weight_decay"])
    history = []
    for epoch in progress(range(cfg["epochs"]), desc="ae pre-training", unit="epoch"):
        model.train()
        tot, n = 0.0, 0
        for _, x in loader.batches(seed_seq=[r.seed & 0xFFFFFFFF, 11, epoch]):
            x = x.to(dev)
            loss = reconstruction_loss(model.decoder(model.encode(x)), x, model.embed)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            tot, n = tot + float(loss.detach()), n + 1
        history.append(tot / max(n, 1))
    t = r.tick("pretrain", t)
    head, val = _frozen_predictor(r, model, x_lab, x_val, r.seed + 2)
    t = r.tick("predictor", t)
    prob = _test_proba_latent(r, model, head)
    r.tick("evaluate", t)
    val["pretrain_loss"] = history
    return r.finish(prob, val, {"model": {k: v.cpu() for k, v in model.state_dict().items()},
                                "head": _cpu_state(head.state_dict())})


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


def run_vime(store_path, budget, seed, out_dir, *, config=None, config_path=None,
             device="auto", resume=False):
    """VIME self- and semi-supervised learning (Yoon et al. 2020)."""
    import torch

    from .data import RowLoader, choose_mode
    from .nn import _mlp
    from .train import _cpu_state, _gen

    r = _Run("vime", store_path, budget, seed, out_dir, config, config_path, device)
    s, cfg, dev = r.splits, r.cfg, r.dev
    t = time.perf_counter()
    model, _, _, x_lab, x_val = _nn_setup(r)
    hidden = model.encoder.out_dim
    torch.manual_seed(r.seed + 5)
    dims = [hidden] * cfg["proj_layers"] + [r.n_snps]
    mask_est = torch.nn.Sequential(*_mlp(dims, batchnorm=False, last_act=False)).to(dev)
    mode = choose_mode(len(r.train_rows), r.n_snps, cfg["loader"], int(cfg["memory_limit_mb"]) << 20)
    loader = RowLoader(r.root, r.train_rows, batch_size=cfg["batch_size"], mode=mode, device=dev,
                       buffer_chunks=cfg["buffer_chunks"])
    t = r.tick("load", t)
    params = list(model.embed.parameters()) + list(model.encoder.parameters()) \
        + list(model.decoder.parameters()) + list(mask_est.parameters())
    opt = torch.optim.Adam(params, lr=cfg["lr"], weight_decay=cfg["weight_decay"])
    history = []
    for epoch in progress(range(cfg["epochs"]), desc="vime self-supervised", unit="epoch"):
        gen, _ = _gen(r.seed, 21, epoch)
        model.train()
        mask_est.train()
        tot, n = 0.0, 0
        for _, x in loader.batches(seed_seq=[r.seed & 0xFFFFFFFF, 22, epoch]):
            x = x.to(dev)
            x_tilde, mask = vime_corrupt(x, cfg["vime_p_m"], gen)
            z = model.encode(x_tilde)
            loss, _, _ = vime_self_loss(mask_est(z), mask.to(dev), model.decoder(z), x,
                                        model.embed, cfg["vime_alpha"])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            tot, n = tot + float(loss.detach()), n + 1
        history.append(tot / max(n, 1))
    t = r.tick("pretrain", t)

    # semi-supervised predictor on the frozen encoder
    z_lab, z_val, y_lab, y_val = _frozen_latent(r, model, x_lab, x_val)
    u_loader = RowLoader(r.root, s.unlabeled, batch_size=cfg["batch_size"], mode=mode, device=dev,
                         buffer_chunks=cfg["buffer_chunks"])
    bs, k = cfg["pred_batch_size"], cfg["vime_k"]

    def epoch_fn(head, popt, z_l, y_l, epoch):
        import torch.nn.functional as F

        gen, rng = _gen(r.seed, 23, epoch)
        head.train()
        order = torch.from_numpy(rng.permutation(len(y_l))).to(dev)
        u_iter = (u_loader.batches(seed_seq=[r.seed & 0xFFFFFFFF, 24, epoch])
                  if len(u_loader) else iter(()))
        tot = 0.0
        for st in range(0, len(order), bs):
            idx = order[st:st + bs]
            if len(idx) < 2:
                continue
            loss = F.cross_entropy(head.predictor(z_l[idx]), y_l[idx])
            xu = next(u_iter, (None, None))[1]
            if xu is not None and len(xu) >= 2 and cfg["vime_beta"] > 0:
                xu = xu.to(dev)
                with torch.no_grad():
                    zk = torch.stack([model.encode(vime_corrupt(xu, cfg["vime_p_m"], gen)[0])
                                      for _ in range(k)])             # (K, B, H)
                logits_k = head.predictor(zk.flatten(0, 1)).view(k, len(xu), -1)
                loss = loss + cfg["vime_beta"] * vime_consistency_loss(logits_k)
            popt.zero_grad(set_to_none=True)
            loss.backward()
            popt.step()
            tot += float(loss.detach())
        return tot

    head, val = fit_predictor(lambda: _latent_head(r, z_lab.shape[1], r.seed + 2), epoch_fn,
                              z_lab, y_lab, z_val, y_val, cfg)
    t = r.tick("predictor", t)
    prob = _test_proba_latent(r, model, head)
    r.tick("evaluate", t)
    val["pretrain_loss"] = history
    return r.finish(prob, val, {"model": {k_: v.cpu() for k_, v in model.state_dict().items()},
                                "mask_estimator": {k_: v.cpu() for k_, v in
                                                   mask_est.state_dict().items()},
                                "head": _cpu_state(head.state_dict())})


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
    return net[cut:](h), t


def run_manifold_mixup(store_path, budget, seed, out_dir, *, config=None, config_path=None,
                       device="auto", resume=False):
    """Supervised predictor on the embedded SNPs with manifold mixup."""
    import torch

    from .data import column_moments, load_rows
    from .losses import soft_cross_entropy
    from .nn import Predictor, SnpEmbedding
    from .train import Head, _cpu_state, _gen

    r = _Run("manifold_mixup", store_path, budget, seed, out_dir, config, config_path, device)
    s, cfg, dev = r.splits, r.cfg, r.dev
    t = time.perf_counter()
    mean = sd = None
    if cfg["encoding"] == "dosage":
        mean, sd = column_moments(r.root, r.train_rows)
    x_lab = torch.from_numpy(load_rows(r.root, s.train_labeled)).to(dev)
    x_val = torch.from_numpy(load_rows(r.root, s.validation)).to(dev)
    y_lab = torch.from_numpy(s.label[s.train_labeled]).to(dev)
    t = r.tick("load", t)
    y_val = torch.from_numpy(s.label[s.validation]).to(dev)

    def new_head():
        torch.manual_seed(r.seed + 1)
        features = SnpEmbedding(r.n_snps, cfg["encoding"], mean, sd).to(dev)
        torch.manual_seed(r.seed + 2)
        h = Head(features, Predictor(features.out_dim, s.n_classes, cfg["pred_hidden"]).to(dev))
        return h, torch.optim.Adam(h.parameters(), lr=cfg["pred_lr"],
                                   weight_decay=cfg["pred_weight_decay"])
    eye = torch.eye(s.n_classes, device=dev)
    a = float(cfg["mixup_alpha"])

    def epoch_fn(head, opt, x_l, y_l, epoch):
        gen, rng = _gen(r.seed, 31, epoch)
        head.train()
        order = torch.from_numpy(rng.permutation(len(y_l))).to(dev)
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
                                              eye[y_l[idx]], layer, lam, perm)
            loss = soft_cross_entropy(logits, tgt)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            tot += float(loss.detach())
        return tot

    head, val = fit_predictor(new_head, epoch_fn, x_lab, y_lab, x_val, y_val, cfg)
    t = r.tick("predictor", t)
    from .train import predict_proba
    prob = predict_proba(head, torch.from_numpy(load_rows(r.root, s.test)).to(dev), dev)
    r.tick("evaluate", t)
    return r.finish(prob, val, {"head": _cpu_state(head.state_dict())})


# method name -> run function (same signature as cmix.train.train_run)
BASELINES: dict = {
    "logreg": run_logreg,
    "prs": run_prs,
    "ae": run_ae,
    "vime": run_vime,
    "manifold_mixup": run_manifold_mixup,
}

# every method of the evaluation grid, in the report's display order
ALL_METHODS = ["prs", "logreg", "mlp", "manifold_mixup", "ae", "vime", "cmix_selfsl",
               "cmix_selfsl_pl", "cmix_random_mix", "cmix"]


def run_method(method: str, store_path, budget, seed, out_dir, *, config=None,
               config_path=None, device="auto", resume=False) -> dict:
    """Run any method of the grid with one config dict for all of them: the trainer's
    methods (cmix, mlp, ablations) do not take the baselines' keys, which are dropped."""
    from .train import train_run

    if method not in BASELINES:
        config = {k: v for k, v in (config or {}).items() if k not in BASELINE_DEFAULTS}
    return train_run(store_path, budget, seed, out_dir, method=method, config=config,
                     config_path=config_path, device=device, resume=resume)
