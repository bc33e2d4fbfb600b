"""Trainer speed: pre-training throughput, loader-only throughput, label propagation.

Measured in one run on one store (random dosages, --n-samples x --n-snps, chunks of
1,024 rows):

1. pre-training samples/s: one epoch of ``cmix.learn.train.pretrain_epoch`` (the default config:
   categorical encoding, hidden 256, batches of 256 unlabeled + 128 labeled rows, no
   pseudo-labels) over all rows, in-memory loader.
2. loader-only samples/s over the same rows and batch size: the streaming loader (dask
   reads of shuffled chunk buffers in a background thread) and the in-memory loader;
   printed as a ratio to the trainer's consumption (the target is >= 10x).
3. label propagation (kNN k=3 + sparse CG to convergence per class) on --lp-nodes
   latent rows (width 256, 2 classes, 1% labeled); the target is < 60 s on CPU.
4. compute-boundness: the multiply-adds of every nn.Linear call in each timed epoch (counted
   by forward hooks from the layer shapes and the rows each call saw; backward counted as
   2x forward) as achieved float32 FLOP/s, divided by the machine's own float32 GEMM
   throughput (torch.mm of 2,048^2 matrices, same threads) measured right before or after
   that epoch: ``--repeats`` epochs alternate with the GEMM reference
   (benchmarks/alternate.py), and the median and min of the per-round fraction are
   printed with the load average.
5. with --compile: the same pre-training epoch with the embedding, decoder and projection
   head wrapped in ``torch.compile`` (dynamic shapes: the mixed rows vary per step), after
   one warm-up epoch that pays for compilation; printed as a ratio to eager.

    python benchmarks/train_speed.py [--n-samples 20000] [--n-snps 1000] [--lp-nodes 50000]
                                     [--encoding dosage] [--hidden 0 (= paper width)] [--compile]
"""

from __future__ import annotations

import argparse
import sys
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from store_helpers import write_test_store  # noqa: E402

from cmix.learn.data import RowLoader  # noqa: E402
from cmix.learn.labelprop import label_propagation  # noqa: E402
from cmix.learn.nn import ContrastiveMixup  # noqa: E402
from cmix.genotypes.store import open_store  # noqa: E402
from cmix.io import resolve_device  # noqa: E402
from cmix.learn.config import Config, PseudoLabels  # noqa: E402
from cmix.learn.train import pretrain_epoch  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from alternate import alternate, load_summary, ratios, summary  # noqa: E402


def gemm_peak(dev, n: int = 2048, reps: int = 10) -> float:
    """float32 FLOP/s of torch.mm on two n x n matrices (best of ``reps``), this device,
    the current torch thread count."""
    a = torch.randn(n, n, device=dev)
    b = torch.randn(n, n, device=dev)
    best = float("inf")
    for _ in range(reps + 1):
        t = time.perf_counter()
        a @ b
        if dev.type == "cuda":
            torch.cuda.synchronize()
        best = min(best, time.perf_counter() - t)
    return 2 * n ** 3 / best


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--n-samples", type=int, default=20000)
    p.add_argument("--n-snps", type=int, default=1000)
    p.add_argument("--lp-nodes", type=int, default=50000)
    p.add_argument("--device", default="cpu")
    p.add_argument("--repeats", type=int, default=3,
                   help="timed epochs, each alternating with a GEMM reference")
    p.add_argument("--encoding", default=Config().model.encoding)
    p.add_argument("--hidden", type=int, default=Config().model.hidden,
                   help="encoder width; 0 = the paper's (embedded width)")
    p.add_argument("--compile", action="store_true",
                   help="also time a torch.compile'd pre-training epoch against eager")
    args = p.parse_args(argv)
    dev = resolve_device(args.device)
    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "speed.zarr"
        dosage = rng.binomial(2, rng.uniform(0.05, 0.5, args.n_snps),
                              size=(args.n_samples, args.n_snps)).astype(np.int8)
        label = rng.integers(0, 2, args.n_samples).astype(np.int16)
        write_test_store(path, dosage, label, test_fraction=0.1, sample_chunk=1024)
        root = open_store(path)
        rows = np.arange(args.n_samples)
        cfg = Config().with_keys(encoding=args.encoding, hidden=args.hidden or None)
        print(f"device {dev}, torch threads {torch.get_num_threads()}, store "
              f"{args.n_samples} x {args.n_snps}")

        # 1. trainer
        torch.manual_seed(0)
        model = ContrastiveMixup(args.n_snps, cfg.model).to(dev)
        opt = torch.optim.Adam(model.parameters(), lr=1e-3)
        loader = RowLoader(root, rows, batch_size=cfg.pretrain.batch_size, mode="memory",
                           device=dev)
        x_lab = torch.from_numpy(dosage[:500]).to(dev)
        y_lab = torch.from_numpy(label[:500].astype(np.int64)).to(dev)
        warm = RowLoader(root, rows[:2048], batch_size=256, device=dev)
        pretrain_epoch(model, opt, (x_lab, y_lab), (warm, None), cfg, 2, 0, 0)
        macs = [0]

        def count(mod, inp, out):
            macs[0] += inp[0].numel() // mod.in_features * mod.in_features * mod.out_features
        hooks = [m.register_forward_hook(count) for m in model.modules()
                 if isinstance(m, torch.nn.Linear)]
        epoch = [0]

        def one_epoch():
            macs[0] = 0
            epoch[0] += 1
            t = time.perf_counter()
            pretrain_epoch(model, opt, (x_lab, y_lab), (loader, None), cfg, 2, 0, epoch[0])
            if dev.type == "cuda":
                torch.cuda.synchronize()
            wall = time.perf_counter() - t
            return {"wall": wall, "flops": 2 * 3 * macs[0] / wall}  # forward + 2x backward

        # the GEMM reference and the timed epochs alternate, so both see the same load
        got, loads = alternate({"gemm": lambda: {"flops": gemm_peak(dev, reps=3)},
                                "epoch": one_epoch}, args.repeats)
        for h in hooks:
            h.remove()
        achieved = [r["flops"] for r in got["epoch"]]
        peaks = [r["flops"] for r in got["gemm"]]
        t_train = statistics.median(r["wall"] for r in got["epoch"])
        print(f"pre-training, {args.repeats} epochs alternating with the float32 GEMM reference "
              f"(torch.mm of 2,048^2 matrices; width {model.encoder.out_dim}, {cfg.model.encoding}):")
        print(f"  nn.Linear GFLOP/s achieved: {summary([a / 1e9 for a in achieved], '', '{:.1f}')}")
        print(f"  GEMM GFLOP/s: {summary([g / 1e9 for g in peaks], '', '{:.1f}')}")
        print(f"  fraction of the GEMM (per round): "
              f"{summary([100 * r for r in ratios(achieved, peaks)], '%', '{:.0f}')}")
        print(f"  {load_summary(loads)}")
        n_per_epoch = args.n_samples + loader.n_batches() * cfg.pretrain.labeled_batch_size
        train_rate = n_per_epoch / t_train
        print(f"pre-training: {t_train:.2f} s/epoch (median), {train_rate:,.0f} samples/s "
              f"({args.n_samples} unlabeled + {cfg.pretrain.labeled_batch_size} labeled per step)")

        if args.compile:
            t = time.perf_counter()
            for name in ("embed", "decoder", "proj"):
                setattr(model, name, torch.compile(getattr(model, name), dynamic=True))
            pretrain_epoch(model, opt, (x_lab, y_lab), (loader, None), cfg, 2, 0, epoch[0] + 1)
            t_warm = time.perf_counter() - t
            t = time.perf_counter()
            pretrain_epoch(model, opt, (x_lab, y_lab), (loader, None), cfg, 2, 0, epoch[0] + 2)
            if dev.type == "cuda":
                torch.cuda.synchronize()
            t_comp = time.perf_counter() - t
            print(f"torch.compile: first epoch (compiling) {t_warm:.2f} s, then {t_comp:.2f} "
                  f"s/epoch = {t_train / t_comp:.2f}x eager's speed")

        # 2. loaders
        for mode in ("stream", "memory"):
            ld = RowLoader(root, rows, batch_size=cfg.pretrain.batch_size, mode=mode, device=dev)
            t = time.perf_counter()
            n = 0
            for _pos, x in ld.batches(seed_seq=[0, 1]):
                n += len(x)
            if dev.type == "cuda":
                torch.cuda.synchronize()
            rate = n / (time.perf_counter() - t)
            print(f"loader {mode}: {rate:,.0f} samples/s = {rate / train_rate:.1f}x the "
                  "trainer's consumption")

    # 3. label propagation
    n = args.lp_nodes
    centers = rng.normal(size=(2, 256))
    y = rng.integers(0, 2, n)
    z = torch.from_numpy((centers[y] + rng.normal(scale=3.0, size=(n, 256))).astype(np.float32))
    labeled = rng.choice(n, n // 100, replace=False)
    t = time.perf_counter()
    res = label_propagation(z.to(dev), labeled, y[labeled], 2, PseudoLabels(lp_k=3))
    t_lp = time.perf_counter() - t
    unl = np.setdiff1d(np.arange(n), labeled)
    print(f"label propagation on {n:,} nodes: {t_lp:.1f} s (target < 60 s on CPU); "
          f"pseudo-label accuracy {np.mean(res.pseudo_label[unl] == y[unl]):.3f}, "
          f"coverage {np.mean(res.pseudo_label[unl] >= 0):.3f}")


if __name__ == "__main__":
    main()
