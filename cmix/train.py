"""Contrastive Mixup training for one store, budget, seed and method (METHOD.md).

Stages: splits -> pre-training (within-class mixup at a random encoder layer, SupCon +
reconstruction, label propagation after ``warmup_epochs`` and every ``lp_every`` epochs)
-> predictor on the frozen encoder (latent mixup, soft targets, pseudo-labeled rows
weighted by their certainty, early stopping on the labeled validation rows, best
checkpoint reloaded) -> test metrics.

Run folder (``--out``): ``checkpoint.pt`` (after every epoch, atomic), ``train_log.jsonl``
(one line per epoch: stage, epoch, losses; no sample IDs) and ``metrics.json`` (written
last, atomically). A rerun of the same command resumes from the checkpoint. Randomness:
the model initialisation comes from ``seed``; every epoch draws its batches, layers,
lambdas and partners from generators seeded by (seed, stage, epoch), so a resumed run
repeats exactly what an uninterrupted one does (bit-for-bit on CPU).

Methods: ``cmix`` (the full method) and ``mlp`` (supervised predictor on the embedded
inputs, same labels, no pre-training). A method is a set of config overrides in
:data:`METHODS`; ablations are config switches (``pretrain``, ``pseudo_labels``,
``predictor_mixup``, ``mix``).
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import time
from pathlib import Path

import numpy as np

from .io import CmixError, atomic_path, check_writable_dir, folder_lock, log, progress, save_torch

# Defaults: CPU-sized (tests, demo, 2-core machines). The paper's size differs only in the
# encoder width: ``hidden: null`` = the embedded width (n_snps for dosages, 3 x n_snps for
# categorical SNPs).
DEFAULT_CONFIG: dict = {
    # model
    "encoding": "dosage",           # dosage (standardised) | categorical (4 levels -> width 3)
    "hidden": 256,                  # encoder width; null = embedded width (paper)
    "n_layers": 1,                  # T encoder layers (paper: 1)
    "batchnorm": False,
    "d_proj": 128,                  # projection head output width
    "proj_layers": 2,               # L_proj
    # pre-training
    "pretrain": True,
    "epochs": 20,
    "batch_size": 256,              # unlabeled rows per step
    "labeled_batch_size": 128,      # labeled rows per step (drawn from D_L each step)
    "lr": 1e-3,
    "weight_decay": 0.0,
    "alpha": 0.2,                   # lambda ~ U(0, alpha), alpha in [0, 0.5]
    "tau": 0.1,                     # SupCon temperature
    "beta": 0.25,                   # weight of the reconstruction loss
    "gamma": 1.0,                   # weight of pseudo-labeled rows in SupCon (0 = Self-SL)
    "mix": "within_class",          # within_class | random
    # label propagation
    "pseudo_labels": True,
    "warmup_epochs": 5,             # K
    "lp_every": 5,                  # f
    "lp_k": 3,                      # kNN neighbours (paper: 3)
    "lp_alpha": 0.99,               # converged solve; 0.999 oversmooths (RESULTS.md)
    "lp_rtol": 1e-6,
    "lp_maxiter": 500,              # CG iterations (stops earlier at lp_rtol)
    "lp_max_unlabeled": 20000,      # |S_U|
    "lp_class_prior": True,         # weight class scores by the labeled class shares
                                    # (false = METHOD.md's equal-prior argmax)
    "lp_block": 4096,
    # predictor
    "pred_hidden": 100,
    "pred_epochs": 100,
    "pred_patience": 10,
    "pred_lr": 1e-3,
    "pred_weight_decay": 0.0,
    "pred_batch_size": 128,
    "predictor_mixup": True,        # latent mixup, lambda ~ U(0, 1)
    "val_fraction": 0.2,            # validation carved from the labeled rows
    "pred_refit": True,             # then retrain on all labeled rows for the best epoch count
    # data
    "loader": "auto",               # auto | memory | stream
    "buffer_chunks": 8,
    "memory_limit_mb": 2048,
}

# method name -> config overrides (the baselines of cmix.baselines run their own code)
METHODS: dict = {
    "cmix": {},
    "mlp": {"pretrain": False, "pseudo_labels": False, "predictor_mixup": False},
    # ablations (METHOD.md)
    "cmix_selfsl": {"pseudo_labels": False, "predictor_mixup": False},
    "cmix_selfsl_pl": {"predictor_mixup": False},
    "cmix_random_mix": {"mix": "random"},
}

METRICS_FILE = "metrics.json"
CHECKPOINT_FILE = "checkpoint.pt"
LOG_FILE = "train_log.jsonl"


# ------------------------------------------------------------------ configuration
def read_config_file(path) -> dict:
    """The key: value mapping of a YAML or JSON config file ({} for an empty file);
    a missing, unparsable or non-mapping file raises CmixError."""
    path = Path(path)
    if not path.exists():
        raise CmixError(f"{path}: config file not found")
    text = path.read_text()
    try:
        if path.suffix == ".json":
            user = json.loads(text)
        else:
            import yaml
            user = yaml.safe_load(text)
    except Exception as err:
        raise CmixError(f"{path}: cannot parse config ({err})") from None
    if user is None:
        user = {}
    if not isinstance(user, dict):
        raise CmixError(f"{path}: config must be a mapping of key: value")
    return user


def load_config(path=None, overrides: dict | None = None) -> dict:
    """DEFAULT_CONFIG updated from a YAML/JSON file and ``overrides``; unknown keys and
    values out of range raise CmixError."""
    cfg = dict(DEFAULT_CONFIG)
    if path is not None:
        user = read_config_file(path)
        unknown = sorted(set(user) - set(cfg))
        if unknown:
            raise CmixError(f"{path}: unknown config key(s) {unknown}; known keys: "
                            f"{sorted(cfg)}")
        cfg.update(user)
    if overrides:
        unknown = sorted(set(overrides) - set(cfg))
        if unknown:
            raise CmixError(f"unknown config key(s) {unknown}")
        cfg.update(overrides)
    _check_config(cfg, path or "config")
    return cfg


def check_types(cfg: dict, defaults: dict, where, nullable=()) -> None:
    """Each key of ``defaults`` in ``cfg`` must have its default's type: a finite number
    for float defaults (an integer is fine), an integer for int ones, true/false for
    bools, text for strings (null too for keys in ``nullable``)."""
    for key, default in defaults.items():
        if key not in cfg or (cfg[key] is None and key in nullable):
            continue
        v = cfg[key]
        if isinstance(default, bool):
            ok, want = isinstance(v, bool), "true or false"
        elif isinstance(default, int):
            ok, want = isinstance(v, int) and not isinstance(v, bool), "an integer"
        elif isinstance(default, float):
            if isinstance(v, str):          # YAML 1.1 reads 1e-3 (no dot) as text
                try:
                    v = cfg[key] = float(v)
                except ValueError:
                    pass
            ok = isinstance(v, (int, float)) and not isinstance(v, bool) and np.isfinite(v)
            want = "a number"
        elif isinstance(default, str):
            ok, want = isinstance(v, str), "text"
        else:
            continue
        if not ok:
            raise CmixError(f"{where}: {key} = {v!r}, expected {want}")


def _check_config(cfg: dict, where) -> None:
    def bad(key, want):
        raise CmixError(f"{where}: {key} = {cfg[key]!r}, expected {want}")

    check_types(cfg, DEFAULT_CONFIG, where, nullable=("hidden",))

    if cfg["encoding"] not in ("categorical", "dosage"):
        bad("encoding", "categorical or dosage")
    if cfg["mix"] not in ("within_class", "random"):
        bad("mix", "within_class or random")
    if cfg["loader"] not in ("auto", "memory", "stream"):
        bad("loader", "auto, memory or stream")
    if not 0.0 <= float(cfg["alpha"]) <= 0.5:
        bad("alpha", "a number in [0, 0.5]")
    if not 0.0 <= float(cfg["lp_alpha"]) < 1.0:
        bad("lp_alpha", "a number in [0, 1)")
    if not 0.0 <= float(cfg["val_fraction"]) < 1.0:
        bad("val_fraction", "a number in [0, 1)")
    for key in ("n_layers", "d_proj", "proj_layers", "batch_size", "labeled_batch_size",
                "lp_k", "pred_hidden", "pred_batch_size", "lp_every", "lp_max_unlabeled",
                "buffer_chunks", "lp_maxiter"):
        if not isinstance(cfg[key], int) or cfg[key] < 1:
            bad(key, "an integer >= 1")
    for key in ("epochs", "warmup_epochs", "pred_epochs", "pred_patience"):
        if not isinstance(cfg[key], int) or cfg[key] < 0:
            bad(key, "an integer >= 0")
    if cfg["hidden"] is not None and (not isinstance(cfg["hidden"], int) or cfg["hidden"] < 1):
        bad("hidden", "an integer >= 1 or null")
    for key in ("tau", "lr", "pred_lr"):
        if not float(cfg[key]) > 0:
            bad(key, "a number > 0")
    for key in ("batchnorm", "pretrain", "pseudo_labels", "predictor_mixup", "lp_class_prior",
                "pred_refit"):
        if not isinstance(cfg[key], bool):
            bad(key, "true or false")


def resolve_device(device: str):
    import torch

    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device == "cuda":
        if not torch.cuda.is_available():
            raise CmixError("--device cuda: no CUDA GPU is visible to torch "
                            f"(torch {torch.__version__}); use --device cpu or auto")
        return torch.device("cuda")
    if device == "cpu":
        return torch.device("cpu")
    raise CmixError(f"--device must be auto, cpu or cuda, not {device!r}")


# ------------------------------------------------------------------ small helpers
def _gen(seed: int, *keys: int):
    """A torch CPU generator and a numpy generator seeded by (seed, keys)."""
    import torch

    ss = np.random.SeedSequence([int(seed) & 0xFFFFFFFF, *keys])
    g = torch.Generator().manual_seed(int(ss.generate_state(1, dtype=np.uint64)[0] >> 1))
    return g, np.random.default_rng(ss)


def _amp(device):
    import contextlib

    import torch

    if torch.device(device).type == "cuda":
        return torch.autocast("cuda", dtype=torch.bfloat16)
    return contextlib.nullcontext()


def _save_checkpoint(run_dir: Path, state: dict) -> None:
    save_torch(state, run_dir / CHECKPOINT_FILE)


def _write_log(run_dir: Path, history: list) -> None:
    with atomic_path(run_dir / LOG_FILE) as tmp:
        tmp.write_text("".join(json.dumps(h) + "\n" for h in history))


def embed_rows(model, loader, device, batch_size: int | None = None):
    """Latent rows (len(loader), H) float32 on ``device`` in position order, eval mode."""
    import torch

    model.eval()
    out = torch.empty((len(loader), model.encoder.out_dim), device=device)
    with torch.no_grad(), _amp(device):
        for pos, x in loader.batches(shuffle=False):
            out[torch.as_tensor(pos, device=device)] = model.encode(x.to(device)).float()
    return out


# ------------------------------------------------------------------ pre-training
def pretrain_epoch(model, opt, x_lab, y_lab, u_loader, pseudo, cfg, seed, epoch, device,
                   n_classes):
    """One pre-training epoch. x_lab: int8 (n_L, M) labeled rows on device; y_lab: (n_L,)
    int64; pseudo: None or (label (n_U,), weight (n_U,)) tensors over the unlabeled loader's
    positions (-1 = no pseudo-label). Returns mean losses."""
    import torch

    from .losses import (contrastive_targets, draw_mixup, mix_rows, reconstruction_loss,
                         supcon_loss)

    gen, rng = _gen(seed, 1, epoch)
    model.train()
    n_l = len(x_lab)
    lab_order = torch.from_numpy(rng.permutation(n_l)).to(device)
    lab_ptr = 0
    sums = {"loss": 0.0, "contrastive": 0.0, "reconstruction": 0.0}
    n_steps = 0
    T = model.encoder.n_layers
    if len(u_loader):
        batches = u_loader.batches(seed_seq=[seed & 0xFFFFFFFF, 2, epoch], drop_last=False)
    else:
        batches = ((None, None) for _ in range(max(1, -(-n_l // cfg["labeled_batch_size"]))))
    for pos, xu in batches:
        take = min(cfg["labeled_batch_size"], n_l)
        if lab_ptr + take > n_l:
            lab_order = torch.from_numpy(rng.permutation(n_l)).to(device)
            lab_ptr = 0
        li = lab_order[lab_ptr:lab_ptr + take]
        lab_ptr += take
        xl, yl = x_lab[li], y_lab[li]
        wl = torch.ones(len(li), device=device)
        if xu is None:
            x, labels, weights = xl, yl, wl
        else:
            xu = xu.to(device, non_blocking=True)
            if pseudo is not None:
                pidx = torch.as_tensor(pos, device=device)
                yu, wu = pseudo[0][pidx], pseudo[1][pidx] * cfg["gamma"]
                yu = torch.where(wu > 0, yu, torch.full_like(yu, -1))
            else:
                yu = torch.full((len(xu),), -1, dtype=torch.long, device=device)
                wu = torch.zeros(len(xu), device=device)
            x = torch.cat([xl, xu])
            labels, weights = torch.cat([yl, yu]), torch.cat([wl, wu])
        labels = torch.where(weights > 0, labels, torch.full_like(labels, -1))
        t = int(torch.randint(0, T + 1, (1,), generator=gen))
        partner, lam = draw_mixup(labels, cfg["alpha"], gen, cfg["mix"] == "within_class")
        with _amp(device):
            h = model.encoder.forward_to(model.embed(x), t)
            mixed, _ = mix_rows(h, partner, lam)
            z = model.encoder.forward_from(h, t)
            recon = reconstruction_loss(model.decoder(z), x, model.embed)
            orig, mrows, q, w = contrastive_targets(labels, weights, partner, lam, n_classes)
            if len(orig):
                zm = model.encoder.forward_from(mixed, t) if len(mrows) else z[:0]
                p = model.proj(torch.cat([z[orig], zm]))
                con = supcon_loss(p, q, w, cfg["tau"])
            else:
                con = recon * 0.0
            loss = con + cfg["beta"] * recon
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        sums["loss"] += float(loss.detach())
        sums["contrastive"] += float(con.detach())
        sums["reconstruction"] += float(recon.detach())
        n_steps += 1
    return {k: v / max(n_steps, 1) for k, v in sums.items()}


def run_label_propagation(model, x_lab, y_lab, su_loader, n_classes, cfg, device):
    """Pseudo-labels for the S_U rows: returns (PropagationResult over [D_L; S_U], n_L)."""
    import torch

    from .labelprop import label_propagation

    model.eval()
    with torch.no_grad(), _amp(device):
        z_l = torch.cat([model.encode(x_lab[s:s + 4096]).float()
                         for s in range(0, len(x_lab), 4096)])
    z_u = embed_rows(model, su_loader, device)
    z = torch.cat([z_l, z_u])
    res = label_propagation(z, np.arange(len(x_lab)), y_lab.cpu().numpy(), n_classes,
                            k=cfg["lp_k"], alpha=cfg["lp_alpha"], rtol=cfg["lp_rtol"],
                            maxiter=cfg["lp_maxiter"], block=cfg["lp_block"],
                            class_prior=cfg["lp_class_prior"])
    return res


# ------------------------------------------------------------------ predictor
class Head:
    """What the predictor stage trains: ``features`` (a module applied to the inputs:
    identity on frozen latent rows, or a trainable SNP embedding for the MLP) and
    ``predictor``."""

    def __init__(self, features, predictor):
        self.features = features
        self.predictor = predictor

    def modules(self):
        return [self.features, self.predictor]

    def parameters(self):
        return [p for m in self.modules() for p in m.parameters() if p.requires_grad]

    def train(self, on=True):
        for m in self.modules():
            m.train(on)

    def logits(self, inputs, device):
        with _amp(device):
            return self.predictor(self.features(inputs)).float()

    def state_dict(self):
        return {"features": self.features.state_dict(), "predictor": self.predictor.state_dict()}

    def load_state_dict(self, state):
        self.features.load_state_dict(state["features"])
        self.predictor.load_state_dict(state["predictor"])


def predictor_epoch(head, opt, inputs, targets, weights, cfg, seed, epoch, device):
    """One epoch of the predictor: inputs (N, ...) on device, targets (N, C) soft,
    weights (N,). Latent mixup (lambda ~ U(0, 1), partner = a random row of the batch)
    when cfg["predictor_mixup"], each parent's target weighted by lambda times its own
    certainty (:func:`losses.mixup_cross_entropy`). Returns the mean loss."""
    import torch

    from .losses import mixup_cross_entropy, soft_cross_entropy

    gen, rng = _gen(seed, 3, epoch)
    head.train()
    n = len(inputs)
    order = torch.from_numpy(rng.permutation(n)).to(device)
    bs = cfg["pred_batch_size"]
    total, steps = 0.0, 0
    for s in range(0, n, bs):
        idx = order[s:s + bs]
        if len(idx) < 2:          # BatchNorm needs 2 rows
            continue
        with _amp(device):
            f = head.features(inputs[idx])
        t, w = targets[idx], weights[idx]
        if cfg["predictor_mixup"]:
            lam = torch.rand(len(idx), generator=gen).to(device)
            perm = torch.from_numpy(rng.permutation(len(idx))).to(device)
            lf = lam.view(-1, 1).to(f.dtype)
            f = lf * f + (1 - lf) * f[perm]
            with _amp(device):
                logits = head.predictor(f).float()
            loss = mixup_cross_entropy(logits, t, t[perm], w, w[perm], lam)
        else:
            with _amp(device):
                logits = head.predictor(f).float()
            loss = soft_cross_entropy(logits, t, w)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        total += float(loss.detach())
        steps += 1
    return total / max(steps, 1)


def predict_proba(head, inputs, device, batch: int = 4096):
    import torch

    head.train(False)
    with torch.no_grad():
        out = [torch.softmax(head.logits(inputs[s:s + batch], device), 1)
               for s in range(0, len(inputs), batch)]
    return torch.cat(out).cpu().numpy() if out else np.zeros((0, 0))


# ------------------------------------------------------------------ metrics
def log_loss(prob: np.ndarray, y: np.ndarray) -> float:
    """Mean negative log-probability of the true class: prob (n, C), y (n,) ints."""
    return float(-np.mean(np.log(np.clip(prob[np.arange(len(y)), y], 1e-12, None))))


def classification_metrics(y: np.ndarray, prob: np.ndarray, n_classes: int) -> dict:
    """accuracy, balanced accuracy, AUROC (binary: of class 1) or macro one-vs-rest AUROC
    over the classes present (None when fewer than 2 classes are present)."""
    from sklearn.metrics import balanced_accuracy_score, roc_auc_score

    pred = prob.argmax(1)
    out = {"accuracy": float(np.mean(pred == y)),
           "balanced_accuracy": float(balanced_accuracy_score(y, pred))}
    present = np.unique(y)
    auc = None
    if len(present) >= 2:
        if n_classes == 2:
            auc = float(roc_auc_score(y, prob[:, 1]))
        else:
            aucs = [roc_auc_score(y == c, prob[:, c]) for c in present]
            auc = float(np.mean(aucs))
    out["auroc" if n_classes == 2 else "macro_auroc"] = auc
    return out


def _versions() -> dict:
    import dask
    import scipy
    import sklearn
    import torch
    import zarr

    from . import __version__
    return {"cmix": __version__, "python": platform.python_version(), "numpy": np.__version__,
            "scipy": scipy.__version__, "torch": torch.__version__, "dask": dask.__version__,
            "zarr": zarr.__version__, "scikit-learn": sklearn.__version__}


# ------------------------------------------------------------------ the run
def train_run(store_path, budget: int, seed: int, out_dir, *, method: str = "cmix",
              config: dict | None = None, config_path=None, device: str = "auto",
              resume: bool = False) -> dict:
    """Train one (store, budget, seed, method) and write the run folder; returns metrics.

    The run folder is locked for the run (a second run into it fails at once), and the
    store's files are checked against its checksums first. A rerun with the same
    arguments on the same store content continues from ``checkpoint.pt``;
    ``resume=True`` requires one. A finished run (metrics.json present, same run) is
    returned as is. A checkpoint of a different run (other store content, budget,
    seed, method or config) is discarded, with a log line, when metrics.json is absent
    (as after Snakemake removes a job's outputs to rerun it); beside a metrics.json
    it is an error, so finished results are never overwritten by another run.
    """
    from .baselines import BASELINES

    if method not in METHODS and method not in BASELINES:
        raise CmixError(f"unknown method {method!r}; known: "
                        f"{sorted(METHODS) + sorted(BASELINES)}")
    with folder_lock(out_dir, f"cmix train --method {method} --budget {budget} "
                              f"--seed {seed}"):
        if method in BASELINES:
            return BASELINES[method](store_path, budget, seed, out_dir, config=config,
                                     config_path=config_path, device=device, resume=resume)
        return _train_run(store_path, budget, seed, out_dir, method=method, config=config,
                          config_path=config_path, device=device, resume=resume)


def open_checked_store(store_path):
    """Open a store for training and check its files against its checksums."""
    from . import store as store_mod

    root = store_mod.open_store(store_path)
    t0 = time.perf_counter()
    checked = store_mod.verify_store(store_path, root)
    log(f"{Path(store_path).name}: {checked['files']} files ({checked['bytes'] / 2**20:.1f} "
        f"MiB) match their checksums ({time.perf_counter() - t0:.2f} s)")
    return root


def _train_run(store_path, budget: int, seed: int, out_dir, *, method, config, config_path,
               device, resume) -> dict:
    import torch

    from . import store as store_mod
    from .data import RowLoader, choose_mode, column_moments, load_rows, make_splits
    from .nn import ContrastiveMixup, Predictor, SnpEmbedding

    cfg = load_config(config_path, {**(config or {}), **METHODS[method]})
    dev = resolve_device(device)
    root = open_checked_store(store_path)
    store_name = Path(store_path).name
    store_mod.check_encoding(root, cfg["encoding"], store_name)
    splits = make_splits(root, budget, seed, cfg["val_fraction"], store_name)
    trait = str(root.attrs["trait"])
    n_classes = splits.n_classes
    n_snps = int(root["call_dosage"].shape[1])
    out_dir = check_writable_dir(out_dir)
    store_sha256 = store_mod.store_fingerprint(root)
    run_key = hashlib.sha256(json.dumps(
        {"trait": trait, "budget": budget, "seed": seed, "method": method, "config": cfg,
         "test": splits.test_hash, "n_snps": n_snps, "store": store_sha256},
        sort_keys=True).encode()).hexdigest()
    metrics_path = out_dir / METRICS_FILE
    ckpt_path = out_dir / CHECKPOINT_FILE
    state = None
    if ckpt_path.exists():
        try:
            state = torch.load(ckpt_path, map_location="cpu", weights_only=False)
        except Exception as err:
            raise CmixError(f"{ckpt_path}: unreadable checkpoint ({err}); delete it to "
                            "start over") from None
        if state.get("run_key") != run_key:
            if resume or metrics_path.exists():
                raise CmixError(f"{out_dir}: holds a {'finished ' * metrics_path.exists()}"
                                "run with another store content, budget, seed, method or "
                                "config; use another --out, or delete its metrics.json to "
                                "replace it")
            log(f"{out_dir}: the checkpoint there is of another run (store content, budget, "
                "seed, method or config changed); starting this run afresh")
            for name in (CHECKPOINT_FILE, LOG_FILE):
                (out_dir / name).unlink(missing_ok=True)
            state = None
    elif resume:
        raise CmixError(f"{out_dir}: --resume given but there is no {CHECKPOINT_FILE}")
    if state is not None and state["stage"] == "done" and metrics_path.exists():
        log(f"{out_dir}: run already complete")
        return json.loads(metrics_path.read_text())
    if state is None:
        state = {"run_key": run_key, "stage": "pretrain", "epoch": 0, "history": [],
                 "times": {}, "pseudo": None, "lp_info": []}
    else:
        log(f"resuming from {state['stage']} epoch {state['epoch']}")

    counts = splits.counts()
    log(f"{trait}: {method}, budget {budget}, seed {seed}: {counts['n_train_labeled']} "
        f"labeled + {counts['n_validation']} validation, {counts['n_unlabeled']} unlabeled, "
        f"{counts['n_test']} test, {n_snps} SNPs, {n_classes} classes, device {dev}")
    t0 = time.perf_counter()
    times = dict(state["times"])
    mem_limit = int(cfg["memory_limit_mb"]) << 20
    mode = choose_mode(len(splits.unlabeled), n_snps, cfg["loader"], mem_limit)
    train_rows = np.sort(np.concatenate([splits.train_labeled, splits.unlabeled]))
    mean = sd = None
    if cfg["encoding"] == "dosage":
        mean, sd = column_moments(root, train_rows)
    x_lab = torch.from_numpy(load_rows(root, splits.train_labeled)).to(dev)
    y_lab = torch.from_numpy(splits.label[splits.train_labeled]).to(dev)
    _, su_rng = _gen(seed, 4)
    su_pos = np.sort(su_rng.permutation(len(splits.unlabeled))[:cfg["lp_max_unlabeled"]])
    times["load"] = times.get("load", 0.0) + time.perf_counter() - t0

    torch.manual_seed(seed)
    model = ContrastiveMixup(n_snps, cfg, mean, sd).to(dev)

    # ---------------- pre-training
    if cfg["pretrain"]:
        opt = torch.optim.Adam(model.parameters(), lr=cfg["lr"],
                               weight_decay=cfg["weight_decay"])
        if state["stage"] != "pretrain" or state["epoch"] > 0:
            model.load_state_dict(state["model"])
            if state["stage"] == "pretrain":
                opt.load_state_dict(state["opt"])
        if state["stage"] == "pretrain" and state["epoch"] < cfg["epochs"]:
            t1 = time.perf_counter()
            u_loader = RowLoader(root, splits.unlabeled, batch_size=cfg["batch_size"],
                                 mode=mode, device=dev, buffer_chunks=cfg["buffer_chunks"])
            su_loader = RowLoader(root, splits.unlabeled[su_pos], batch_size=4096,
                                  mode=mode, device=dev, buffer_chunks=cfg["buffer_chunks"])
            pseudo = None
            if state["pseudo"] is not None:
                pseudo = _pseudo_tensors(state["pseudo"], su_pos, len(splits.unlabeled), dev)
            bar = progress(total=cfg["epochs"], desc="pre-training", unit="epoch")
            bar.update(state["epoch"])
            while state["epoch"] < cfg["epochs"]:
                te = time.perf_counter()
                losses = pretrain_epoch(model, opt, x_lab, y_lab, u_loader, pseudo, cfg,
                                        seed, state["epoch"], dev, n_classes)
                epoch = state["epoch"] + 1
                rec = {"stage": "pretrain", "epoch": epoch, **losses,
                       "seconds": round(time.perf_counter() - te, 3)}
                bar.update(1)
                # after K warm-up epochs, then every f epochs, and after the last epoch
                due = cfg["pseudo_labels"] and len(su_pos) > 0 and (
                    (epoch >= cfg["warmup_epochs"]
                     and (epoch - cfg["warmup_epochs"]) % cfg["lp_every"] == 0)
                    or epoch == cfg["epochs"])
                if due:
                    tl = time.perf_counter()
                    res = run_label_propagation(model, x_lab, y_lab, su_loader, n_classes,
                                                cfg, dev)
                    n_l = len(x_lab)
                    state["pseudo"] = {"label": res.pseudo_label[n_l:],
                                       "weight": res.weight[n_l:].astype(np.float32)}
                    pseudo = _pseudo_tensors(state["pseudo"], su_pos, len(splits.unlabeled), dev)
                    info = _pseudo_stats(state["pseudo"], splits.label[splits.unlabeled[su_pos]])
                    info.update(epoch=epoch, missing_classes=[splits.class_names[c] for c in
                                                              res.missing_classes],
                                seconds=round(time.perf_counter() - tl, 3))
                    if res.missing_classes:
                        log(f"label propagation: no labeled row of class(es) "
                            f"{info['missing_classes']}; they get no pseudo-labels")
                    state["lp_info"].append(info)
                    times["label_propagation"] = (times.get("label_propagation", 0.0)
                                                  + info["seconds"])
                    rec["pseudo_label_accuracy"] = info["accuracy"]
                    rec["pseudo_label_coverage"] = info["coverage"]
                state["epoch"] = epoch
                state["history"].append(rec)
                times["pretrain"] = times.get("pretrain", 0.0) + time.perf_counter() - t1
                t1 = time.perf_counter()
                state["times"] = times
                state["model"] = model.state_dict()
                state["opt"] = opt.state_dict()
                state["rng_torch"] = torch.get_rng_state()
                _save_checkpoint(out_dir, state)
                _write_log(out_dir, state["history"])
            bar.close()
            del u_loader, su_loader

    # ---------------- predictor
    t2 = time.perf_counter()
    model.eval()
    for p in model.parameters():
        p.requires_grad_(False)
    frozen = {k: v.detach().clone() for k, v in model.state_dict().items()}
    if cfg["pretrain"]:
        def inputs_of(rows):
            loader = RowLoader(root, rows, batch_size=4096, mode=mode, device=dev)
            return embed_rows(model, loader, dev)
    else:
        def inputs_of(rows):
            return torch.from_numpy(load_rows(root, rows)).to(dev)

    def new_head():
        """The predictor (and, for the MLP, a fresh SNP embedding), seeded by ``seed``."""
        torch.manual_seed(seed + 1)
        if cfg["pretrain"]:
            features, in_dim = torch.nn.Identity(), model.encoder.out_dim
        else:
            features = SnpEmbedding(n_snps, cfg["encoding"], mean, sd).to(dev)
            in_dim = features.out_dim
        torch.manual_seed(seed + 2)
        return Head(features, Predictor(in_dim, n_classes, cfg["pred_hidden"]).to(dev))

    def new_opt(h):
        return torch.optim.Adam(h.parameters(), lr=cfg["pred_lr"],
                                weight_decay=cfg["pred_weight_decay"])
    head = new_head()
    eye = np.eye(n_classes, dtype=np.float32)
    tr_rows = [splits.train_labeled]
    tr_y = [splits.label[splits.train_labeled]]
    tr_w = [np.ones(len(splits.train_labeled), np.float32)]
    if cfg["pseudo_labels"] and state["pseudo"] is not None:
        keep = (state["pseudo"]["label"] >= 0) & (state["pseudo"]["weight"] > 0)
        tr_rows.append(splits.unlabeled[su_pos][keep])
        tr_y.append(state["pseudo"]["label"][keep])
        tr_w.append(state["pseudo"]["weight"][keep])
    rows = np.concatenate(tr_rows)
    order = np.argsort(rows, kind="stable")
    inputs = inputs_of(rows[order])[np.argsort(order)]
    targets = torch.from_numpy(eye[np.concatenate(tr_y)]).to(dev)
    weights = torch.from_numpy(np.concatenate(tr_w).astype(np.float32)).to(dev)
    val_inputs = inputs_of(splits.validation) if len(splits.validation) else None
    y_val = splits.label[splits.validation]
    popt = new_opt(head)
    pred_state = state.get("pred")
    if state["stage"] in ("predictor", "refit", "done") and pred_state is not None:
        head.load_state_dict(pred_state["head"])
        popt.load_state_dict(pred_state["opt"])
    else:
        pred_state = {"epoch": 0, "best": None, "best_loss": float("inf"), "best_epoch": 0,
                      "bad": 0}
        state["stage"], state["epoch"] = "predictor", 0
    bar = progress(total=cfg["pred_epochs"], desc="predictor", unit="epoch")
    bar.update(pred_state["epoch"])
    while pred_state["epoch"] < cfg["pred_epochs"] and (
            val_inputs is None or pred_state["bad"] < cfg["pred_patience"]):
        te = time.perf_counter()
        epoch = pred_state["epoch"]
        loss = predictor_epoch(head, popt, inputs, targets, weights, cfg, seed, epoch, dev)
        rec = {"stage": "predictor", "epoch": epoch + 1, "loss": loss}
        if val_inputs is not None:
            prob = predict_proba(head, val_inputs, dev)
            vloss = log_loss(prob, y_val)
            rec.update(val_loss=vloss, val_accuracy=float(np.mean(prob.argmax(1) == y_val)))
            if vloss < pred_state["best_loss"]:
                pred_state.update(best=_cpu_state(head.state_dict()), best_loss=vloss,
                                  best_epoch=epoch + 1, bad=0)
            else:
                pred_state["bad"] += 1
        rec["seconds"] = round(time.perf_counter() - te, 3)
        pred_state["epoch"] = epoch + 1
        pred_state["head"] = head.state_dict()
        pred_state["opt"] = popt.state_dict()
        state["pred"] = pred_state
        state["history"].append(rec)
        times["predictor"] = times.get("predictor", 0.0) + time.perf_counter() - t2
        t2 = time.perf_counter()
        state["times"] = times
        _save_checkpoint(out_dir, state)
        _write_log(out_dir, state["history"])
        bar.update(1)
    bar.close()
    if pred_state["best"] is not None:
        head.load_state_dict(pred_state["best"])       # the best epoch, not the last

    # ---------------- refit on every labeled row for the chosen number of epochs
    n_refit = pred_state["best_epoch"] if cfg["pred_refit"] and val_inputs is not None else 0
    if n_refit:
        t2 = time.perf_counter()
        all_in = torch.cat([inputs, val_inputs])
        all_t = torch.cat([targets, torch.from_numpy(eye[y_val]).to(dev)])
        all_w = torch.cat([weights, torch.ones(len(y_val), device=dev)])
        head, refit = new_head(), state.get("refit")
        ropt = new_opt(head)
        if refit is not None:
            head.load_state_dict(refit["head"])
            ropt.load_state_dict(refit["opt"])
        else:
            refit = {"epoch": 0}
            state["stage"] = "refit"
        while refit["epoch"] < n_refit:
            te = time.perf_counter()
            loss = predictor_epoch(head, ropt, all_in, all_t, all_w, cfg, seed, refit["epoch"],
                                   dev)
            refit.update(epoch=refit["epoch"] + 1, head=head.state_dict(), opt=ropt.state_dict())
            state["refit"] = refit
            state["history"].append({"stage": "refit", "epoch": refit["epoch"], "loss": loss,
                                     "seconds": round(time.perf_counter() - te, 3)})
            times["refit"] = times.get("refit", 0.0) + time.perf_counter() - t2
            t2 = time.perf_counter()
            state["times"] = times
            _save_checkpoint(out_dir, state)
            _write_log(out_dir, state["history"])
    check_frozen(model, frozen)

    # ---------------- evaluation
    t3 = time.perf_counter()
    test_inputs = inputs_of(splits.test)
    prob = predict_proba(head, test_inputs, dev)
    metrics = classification_metrics(splits.label[splits.test], prob, n_classes)
    times["evaluate"] = time.perf_counter() - t3
    last_lp = state["lp_info"][-1] if state["lp_info"] else None
    result = {
        "trait": trait, "method": method, "budget": int(budget), "seed": int(seed),
        "class_names": splits.class_names, **counts, "n_snps": n_snps,
        "test": metrics,
        "validation": {"best_epoch": pred_state["best_epoch"], "refit_epochs": n_refit,
                       "best_loss": (pred_state["best_loss"]
                                     if np.isfinite(pred_state["best_loss"]) else None)},
        "pseudo_labels": ({"accuracy": last_lp["accuracy"], "coverage": last_lp["coverage"],
                           "n_rows": last_lp["n_rows"],
                           "missing_classes": last_lp["missing_classes"],
                           "epochs": [i["epoch"] for i in state["lp_info"]]}
                          if last_lp else None),
        "test_split_sha256": splits.test_hash,
        "wall_seconds": {k: round(v, 3) for k, v in times.items()},
        "device": str(dev) if dev.type == "cpu" else f"cuda ({torch.cuda.get_device_name(dev)})",
        "torch_threads": torch.get_num_threads(),
        "versions": _versions(),
        "config": cfg,
        "store": str(Path(store_path).resolve().name),
        "store_sha256": store_sha256,
    }
    state["stage"] = "done"
    _save_checkpoint(out_dir, state)
    with atomic_path(metrics_path) as tmp:
        tmp.write_text(json.dumps(result, indent=2) + "\n")
    log(f"{trait} {method} budget {budget} seed {seed}: test accuracy "
        f"{metrics['accuracy']:.4f}, balanced {metrics['balanced_accuracy']:.4f}")
    return result


def check_frozen(model, before: dict) -> None:
    """Raise CmixError if any tensor of ``model`` differs from ``before`` (a copy of its
    state taken before the predictor stage): the encoder must stay frozen."""
    import torch

    moved = [k for k, v in model.state_dict().items() if not torch.equal(v, before[k])]
    if moved:
        raise CmixError(f"the pre-trained encoder changed during the predictor stage "
                        f"({len(moved)} tensors, e.g. {moved[0]}); this is a bug in cmix")


def _cpu_state(sd):
    return {k: {kk: vv.detach().cpu().clone() for kk, vv in v.items()} for k, v in sd.items()}


def _pseudo_tensors(pseudo: dict, su_pos: np.ndarray, n_unlabeled: int, device):
    """Pseudo-label / weight tensors over all unlabeled positions (-1 / 0 outside S_U)."""
    import torch

    label = np.full(n_unlabeled, -1, dtype=np.int64)
    weight = np.zeros(n_unlabeled, dtype=np.float32)
    label[su_pos] = pseudo["label"]
    weight[su_pos] = pseudo["weight"]
    return torch.from_numpy(label).to(device), torch.from_numpy(weight).to(device)


def _pseudo_stats(pseudo: dict, truth: np.ndarray) -> dict:
    """Accuracy of the pseudo-labels on the rows they cover, and the share covered."""
    covered = pseudo["label"] >= 0
    acc = float(np.mean(pseudo["label"][covered] == truth[covered])) if covered.any() else None
    return {"accuracy": acc, "coverage": float(np.mean(covered)) if len(covered) else 0.0,
            "n_rows": int(len(covered))}
