"""What a finished run leaves: its test metrics, the record ``cmix predict`` applies it
with, and the run folder's predictions.npz and metrics.json.

- :func:`classification_metrics`: the test metrics of a run's probabilities.
- :func:`numerics_kind` and :func:`versions`: what besides the code decides a result's
  bits (the kind of device, the packages' versions), recorded with it.
- :func:`prediction_record`: what :mod:`cmix.learn.predict` needs besides the fitted
  method's state dict.
- :func:`finish`: the one metrics.json writer (after predictions.npz,
  :func:`write_predictions`, and the finished run's checkpoint).

``ctx`` is the run's :class:`cmix.learn.context.RunContext`, a name not imported here:
:mod:`cmix.learn.context` sits above this module and imports it.
"""

from __future__ import annotations

import json
import platform
import sys
import time
from functools import partial
from importlib.metadata import version
from pathlib import Path

import numpy as np

from .. import __version__
from ..atomic import atomic_path
from ..errors import CmixError
from ..logs import log
from ..store.read import check_store_unchanged, store_text
from .checkpoints import METRICS_FILE, PREDICTIONS_FILE, RunState
from .config import sections_config
from .metrics import (average_precision_score, balanced_accuracy_score, matthews_corrcoef,
                      roc_auc_score)
from .stages import DONE


def classification_metrics(y: np.ndarray, prob: np.ndarray, n_classes: int) -> dict:
    """Test metrics of probabilities ``prob`` (n, C) against true classes ``y`` (n,) ints.

    accuracy and balanced accuracy of the argmax; ``mcc``: Matthews correlation of the
    argmax (multi-class form; in [-1, 1], 0 when undefined); ``brier``: half the mean
    squared distance between each row of ``prob`` and the one-hot truth, in [0, 1] (for
    2 classes the usual binary Brier score of class 1). Binary: ``auroc`` and ``ap``
    (average precision) of class 1; more classes: ``macro_auroc`` and ``macro_ap``, the
    one-vs-rest mean over the classes present. Ranking metrics are None when fewer than
    2 classes are present."""
    y = np.asarray(y, dtype=np.int64)
    prob = np.asarray(prob, dtype=np.float64)
    if not np.isfinite(prob).all():
        bad = int((~np.isfinite(prob)).any(axis=1).sum())
        raise CmixError(f"the model's probabilities are not finite for {bad} of {len(prob)} "
                        "rows (a diverged network: lower lr or pred_lr); no metric is "
                        "computed from them")
    pred = prob.argmax(1)
    onehot = np.eye(prob.shape[1])[y]
    out = {"accuracy": float(np.mean(pred == y)),
           "balanced_accuracy": float(balanced_accuracy_score(y, pred)),
           "mcc": float(matthews_corrcoef(y, pred)),
           "brier": float(0.5 * np.mean(np.sum((prob - onehot) ** 2, axis=1)))}
    present = np.unique(y)
    auc = ap = None
    if len(present) >= 2:
        if n_classes == 2:
            auc = float(roc_auc_score(y, prob[:, 1]))
            ap = float(average_precision_score(y, prob[:, 1]))
        else:
            auc = float(np.mean([roc_auc_score(y == c, prob[:, c]) for c in present]))
            ap = float(np.mean([average_precision_score(y == c, prob[:, c]) for c in present]))
    out["auroc" if n_classes == 2 else "macro_auroc"] = auc
    out["ap" if n_classes == 2 else "macro_ap"] = ap
    return out


def numerics_kind(device) -> str:
    """What decides a network's float bits besides the code, seed and thread count:
    "cuda", or for the CPU its vendor (MKL dispatches by it) and torch's CPU capability
    (the vector instructions of its kernels), e.g. "cpu AuthenticAMD AVX2". The same run
    on CPUs of two kinds can differ in its last bits and from there in its metrics."""
    import torch  # torch: ~1.5 s to import; only where a network or tensor is used

    if torch.device(device).type != "cpu":
        return torch.device(device).type
    vendor = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("vendor_id"):
                vendor = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"cpu {vendor} {torch.backends.cpu.get_cpu_capability()}"


def versions() -> dict:
    """Versions of the packages a result depends on: an imported package's
    ``__version__``, else its installed distribution's (not imported for this)."""


    def of(module: str, dist: str) -> str:
        return sys.modules[module].__version__ if module in sys.modules else version(dist)

    return {"cmix": __version__, "torch": of("torch", "torch"), "numpy": np.__version__,
            "scipy": of("scipy", "scipy"), "sklearn": of("sklearn", "scikit-learn"),
            "dask": of("dask", "dask"), "zarr": of("zarr", "zarr"),
            "python": platform.python_version()}


def prediction_record(ctx: RunContext, test_prob: np.ndarray) -> dict:  # noqa: F821
    """What :mod:`cmix.learn.predict` needs besides the fitted method's state dict to
    apply the run to new people (no sample IDs): the method's name, the store's variants
    and effect alleles, the covariate spec and standardisation moments, and the test
    probabilities (test rows in store order) to check a prediction against."""
    root = ctx.root
    text = partial(store_text, root)
    contig = text("contig_id")[np.asarray(root["variant_contig"][:])]
    cov_attrs = root.attrs.get("covariates") or {}
    return {"method": ctx.method.name, "class_names": list(ctx.splits.class_names),
            "variant_id": text("variant_id"),
            "contig": contig, "position": np.asarray(root["variant_position"][:]),
            "allele": text("variant_allele"),
            "cov_names": ([str(c) for c in root["covariate_name"][:]] if ctx.n_cov else []),
            "cov_spec": cov_attrs.get("spec", {}), "cov_mu": ctx.cov_mu, "cov_sd": ctx.cov_sd,
            "pca_sha256": cov_attrs.get("pca_sha256"),
            "store_path": str(ctx.store_path.resolve()), "store_sha256": ctx.store_sha256,
            "test_prob": np.asarray(test_prob)}


def finish(ctx: RunContext, state: RunState, test_prob: np.ndarray, validation: dict,  # noqa: F821
           pseudo_labels: dict | None = None, latent=None) -> dict:
    """Test metrics of ``test_prob`` (n_test, C); writes predictions.npz, then
    metrics.json (last; each atomically) and the final checkpoint; returns the metrics
    dict. ``latent``: the test rows' latent (n_test, d) where the method has one (numpy
    or torch), kept in predictions.npz for the report's t-SNE."""
    import torch  # torch: ~1.5 s to import; only where a network or tensor is used


    s = ctx.splits
    t0 = time.perf_counter()
    metrics = classification_metrics(s.label[s.test], test_prob, s.n_classes)
    state.add_time("evaluate", t0)
    dev = ctx.dev
    result = {
        "trait": ctx.trait, "method": ctx.method.name, "budget": ctx.budget, "seed": ctx.seed,
        "class_names": s.class_names, **s.counts(), "n_snps": ctx.n_snps,
        "test": metrics, "validation": validation, "pseudo_labels": pseudo_labels,
        "test_split_sha256": s.test_hash,
        "wall_seconds": {k: round(v, 3) for k, v in state.times.items()},
        "device": (str(dev) if dev.type == "cpu"
                   else f"cuda ({torch.cuda.get_device_name(dev)})"),
        "torch_threads": torch.get_num_threads(),
        "versions": versions(),
        "config": sections_config(ctx.cfg, ctx.method.sections),
        "covariates": ([str(c) for c in ctx.root["covariate_name"][:]] if ctx.n_cov else []),
        "store": ctx.store_path.resolve().name,
        "store_sha256": ctx.store_sha256,
        "run_key": ctx.run_key,
    }
    provenance = ctx.root.attrs.get("provenance")
    if provenance is not None:
        result["provenance"] = (json.loads(provenance) if isinstance(provenance, str)
                                else provenance)
    check_store_unchanged(ctx.store_path, ctx.store_sha256)
    state.parts["predict"] = prediction_record(ctx, test_prob)
    state.stage = DONE
    ctx.save(state, force=True)
    write_predictions(ctx.out_dir / PREDICTIONS_FILE, s.label[s.test], test_prob, latent)
    with atomic_path(ctx.out_dir / METRICS_FILE) as tmp:
        tmp.write_text(json.dumps(result, indent=2) + "\n")
    log(f"{ctx.trait} {ctx.method.name} budget {ctx.budget} seed {ctx.seed}: test accuracy "
        f"{metrics['accuracy']:.4f}, balanced {metrics['balanced_accuracy']:.4f}")
    return result


def write_predictions(path, y: np.ndarray, prob: np.ndarray, latent=None) -> None:
    """predictions.npz (atomically): ``y`` int64 (n_test,) true classes, ``prob`` float32
    (n_test, C), and ``latent`` float32 (n_test, d) when given. Test rows in store
    order; no sample IDs."""
    arrays = {"y": np.asarray(y, dtype=np.int64), "prob": np.asarray(prob, dtype=np.float32)}
    if latent is not None:
        if hasattr(latent, "detach"):
            latent = latent.detach().float().cpu().numpy()
        arrays["latent"] = np.asarray(latent, dtype=np.float32)
    with atomic_path(path) as tmp, open(tmp, "wb") as fh:
        np.savez_compressed(fh, **arrays)
