"""Speed cost of deterministic training on CPU, and whether it is deterministic.

The same ``cmix.learn.train.train_run`` (method cmix) on one store, in two modes:

- deterministic: cmix as it is (torch.use_deterministic_algorithms, MKL_CBWR=AUTO,STRICT,
  batch norm statistics and loss averages summed in a fixed order, label propagation's CG
  with the BLAS on one thread);
- torch defaults: the same code with those pieces swapped back for torch's own
  (nn.BatchNorm1d, F.mse_loss's mean, no deterministic algorithms, MKL_CBWR unset, CG
  with the BLAS on all its threads), i.e. the trainer before the determinism fixes.

Every measurement is a fresh process (MKL reads MKL_CBWR once, at its first call), the
modes alternate ABBA ABBA ..., ``--repeats`` runs each, all at ``--threads`` threads
(OMP_NUM_THREADS). Printed: median seconds per stage of each mode and their ratio
(deterministic / defaults), the median and min of the total's ratio within each ABBA
round, the load average before each round (benchmarks/alternate.py), whether each
mode's repeats gave identical test metrics, and
whether one deterministic run at 1 thread gave the same metrics as those at ``--threads``.

With ``--pieces``, instead: the time of one pre-training epoch (default config, every
unlabeled row pseudo-labeled, min of 3 epochs per process) with each deterministic piece
alone and all together against none: ``det`` (torch.use_deterministic_algorithms),
``mean`` (fixed-order loss average), ``mkl`` (MKL_CBWR=AUTO,STRICT); processes alternate
between the settings, ``--repeats`` each.

    python benchmarks/determinism_speed.py [--n-samples 15000] [--n-snps 1000] [--repeats 3]
                                           [--threads 2] [--epochs 5] [--pred-epochs 30]
                                           [--pieces]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
from alternate import load_summary, loadavg, ratios, summary  # noqa: E402


def _torch_reconstruction_loss(out, x, embed):
    """The reconstruction loss with torch's own reductions (the code before the fix)."""
    import torch.nn.functional as F

    if embed.encoding == "categorical":
        target = embed.levels(x)
        return F.cross_entropy(out.float().reshape(-1, out.shape[-1]), target.reshape(-1))
    return F.mse_loss(out.float(), embed.standardised(x))


def child(mode: str, store: str, out: str, cfg: dict) -> None:
    import torch
    import threadpoolctl

    import cmix.learn.losses as losses_mod
    import cmix.learn.nn as nn_mod
    import cmix.learn.harness as harness_mod

    if mode == "defaults":
        nn_mod.BatchNorm1d = torch.nn.BatchNorm1d
        losses_mod.reconstruction_loss = _torch_reconstruction_loss
        threadpoolctl.threadpool_limits = lambda *a, **k: contextlib.nullcontext()
        harness_mod.deterministic_algorithms = lambda device: contextlib.nullcontext()
    m = harness_mod.train_run(store, 500, 1, out, method="cmix", config=cfg, device="cpu")
    print(json.dumps({"test": m["test"], "seconds": m["wall_seconds"],
                      "threads": m["torch_threads"], "mkl_cbwr": os.environ.get("MKL_CBWR")}))


def child_epoch(pieces: str, store: str) -> None:
    """Seconds of one pre-training epoch (min of 3) with the deterministic ``pieces``."""
    import time

    import numpy as np
    import torch

    import cmix.learn.losses as losses_mod
    from cmix.learn.data import RowLoader
    from cmix.genotypes.store import column_moments, load_rows
    from cmix.learn.nn import ContrastiveMixup
    from cmix.genotypes.store import open_store
    from cmix.learn.config import Config
    from cmix.learn.train import pretrain_epoch

    if "mkl" in pieces:
        os.environ["MKL_CBWR"] = "AUTO,STRICT"
    if "mean" not in pieces:
        losses_mod.reconstruction_loss = _torch_reconstruction_loss
    if "det" in pieces:
        torch.use_deterministic_algorithms(True)
        import torch.utils.deterministic
        torch.utils.deterministic.fill_uninitialized_memory = False
    root = open_store(store)
    n = root["call_dosage"].shape[0]
    rows = np.arange(n)
    lab, unl = rows[:500], rows[500:]
    label = np.asarray(root["sample_label"][:], dtype=np.int64)
    mean, sd = column_moments(root, rows)
    x_lab = torch.from_numpy(load_rows(root, lab))
    y_lab = torch.from_numpy(label[lab])
    cfg = Config()
    loader = RowLoader(root, unl, batch_size=cfg.pretrain.batch_size, mode="memory")
    rng = np.random.default_rng(0)
    pseudo = (torch.from_numpy(rng.integers(0, 3, len(unl))),
              torch.from_numpy(rng.uniform(0.2, 1.0, len(unl)).astype(np.float32)))
    torch.manual_seed(0)
    model = ContrastiveMixup(root["call_dosage"].shape[1], cfg.model, mean, sd)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    times = []
    for epoch in range(3):
        t = time.perf_counter()
        pretrain_epoch(model, opt, (x_lab, y_lab), (loader, pseudo), cfg, 3, 0, epoch)
        times.append(time.perf_counter() - t)
    print(json.dumps({"seconds": min(times)}))


def run_child(mode, store, out, cfg, threads):
    env = {k: v for k, v in os.environ.items() if k != "MKL_CBWR"}
    env.update(OMP_NUM_THREADS=str(threads),
               PYTHONPATH=os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]))
    r = subprocess.run([sys.executable, __file__, "--child", mode, "--store", store,
                        "--out", str(out), "--config", json.dumps(cfg)],
                       env=env, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"{mode} run failed:\n{r.stderr[-3000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def stages(sec: dict) -> dict:
    lp = sec.get("label_propagation", 0.0)
    return {"pretrain (no LP)": sec.get("pretrain", 0.0) - lp, "label propagation": lp,
            "predictor + refit": sec.get("predictor", 0.0) + sec.get("refit", 0.0),
            "total": sec.get("pretrain", 0.0) + sec.get("predictor", 0.0)
            + sec.get("refit", 0.0) + sec.get("evaluate", 0.0)}


def pieces(store, args) -> None:
    settings = ["", "det", "mean", "mkl", "det,mean,mkl"]
    print(f"one pre-training epoch (min of 3), store {args.n_samples} x {args.n_snps}, "
          f"{args.threads} threads, {args.repeats} processes per setting")
    secs = {s: [] for s in settings}
    loads = []
    for i in range(args.repeats):
        loads.append(loadavg())
        for s in (settings if i % 2 == 0 else settings[::-1]):
            r = run_child("epoch:" + s, store, "-", {}, args.threads)
            secs[s].append(r["seconds"])
            print(f"  {s or 'none':13s} {r['seconds']:.2f} s", flush=True)
    print("\nmedian seconds per epoch; ratio to none within each round: median, min")
    for s in settings:
        m = statistics.median(secs[s])
        print(f"  {s or 'none':13s} {m:7.2f} s   {summary(ratios(secs[s], secs['']), 'x', '{:.3f}')}")
    print(load_summary(loads))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--n-samples", type=int, default=15000)
    p.add_argument("--n-snps", type=int, default=1000)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--epochs", type=int, default=5)
    p.add_argument("--pred-epochs", type=int, default=30)
    p.add_argument("--pieces", action="store_true",
                   help="time one pre-training epoch per deterministic piece instead")
    p.add_argument("--child", default=None, help=argparse.SUPPRESS)
    p.add_argument("--store", default=None, help=argparse.SUPPRESS)
    p.add_argument("--out", default=None, help=argparse.SUPPRESS)
    p.add_argument("--config", default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child and args.child.startswith("epoch:"):
        return child_epoch(args.child[len("epoch:"):], args.store)
    if args.child:
        return child(args.child, args.store, args.out, json.loads(args.config))

    from store_helpers import simulate_labels, write_test_store

    # label propagation after epochs 4..epochs, over > 10,000 nodes (where the BLAS splits
    # dot products among threads)
    cfg = {"epochs": args.epochs, "warmup_epochs": min(4, args.epochs), "lp_every": 1,
           "pred_epochs": args.pred_epochs}
    with tempfile.TemporaryDirectory() as tmp:
        store = str(Path(tmp) / "bench.zarr")
        dosage, label = simulate_labels(args.n_samples, args.n_snps, n_classes=3,
                                        n_causal=50, h2=0.6, seed=0)
        write_test_store(store, dosage, label, sample_chunk=1024)
        if args.pieces:
            return pieces(store, args)
        print(f"store {args.n_samples} x {args.n_snps}, 3 classes, budget 500, cmix with "
              f"{cfg}, {args.threads} threads, {args.repeats} repeats per mode (ABBA)")
        results = {"deterministic": [], "defaults": []}
        loads = []
        for i in range(args.repeats):
            loads.append(loadavg())
            order = ["deterministic", "defaults"] if i % 2 == 0 else ["defaults", "deterministic"]
            for mode in order:
                r = run_child(mode, store, str(Path(tmp) / f"{mode}{i}"), cfg, args.threads)
                results[mode].append(r)
                print(f"  {mode:13s} run {i + 1}: " + ", ".join(
                    f"{k} {v:.2f} s" for k, v in stages(r["seconds"]).items())
                    + f"; auroc {r['test']['macro_auroc']:.6f}", flush=True)
        one = run_child("deterministic", store, str(Path(tmp) / "one"), cfg, 1)
    for name, stat in (("median", statistics.median), ("min", min)):
        print(f"\n{name} seconds{' ' * (9 - len(name))} deterministic   defaults   ratio")
        for key in stages({}):
            a = stat(stages(r["seconds"])[key] for r in results["deterministic"])
            b = stat(stages(r["seconds"])[key] for r in results["defaults"])
            print(f"  {key:18s} {a:10.2f} {b:10.2f}   {a / b if b else float('nan'):.3f}x")
    totals = {m: [stages(r["seconds"])["total"] for r in rs] for m, rs in results.items()}
    print(f"\ntotal, deterministic / defaults within each round: "
          f"{summary(ratios(totals['deterministic'], totals['defaults']), 'x', '{:.3f}')}")
    print(load_summary(loads))
    for mode, rs in results.items():
        same = all(r["test"] == rs[0]["test"] for r in rs)
        print(f"{mode}: the {len(rs)} repeats at {args.threads} threads gave "
              f"{'identical' if same else 'DIFFERENT'} test metrics")
    same = one["test"] == results["deterministic"][0]["test"]
    print(f"deterministic at 1 thread vs {args.threads} threads: "
          f"{'identical' if same else 'DIFFERENT'} test metrics "
          f"(MKL_CBWR {results['deterministic'][0]['mkl_cbwr']})")


if __name__ == "__main__":
    main()
