"""The evaluation grid (every method x budget x seed) on a simulated cohort, then `cmix report`.

Simulates N samples x M independent SNPs (MAF ~ U(0.01, 0.5), 0.5% missing calls), two
traits from a liability with heritability h2 over ``n_causal`` SNPs: a binary trait
(prevalence 30%) and a 3-class trait (50 / 30 / 20 %, liability quantiles). The store's
variant_beta comes from a marginal GWAS of the liability-scale phenotype in a separate
discovery sample (``--n-discovery``, not in the store), so PRS is an honest baseline.
Each store gets a stratified 30% test split. Then every (trait, method, budget) cell
runs its seeds in one :func:`cmix.learn.harness.train_seeds` call, as the workflow's
training job does (``--jobs`` worker processes, one torch thread each; finished runs are
skipped, so a rerun resumes), with the workflow's shared-encoder folder (OUT/encoders):
within a budget the cmix cells run first and the cmix_selfsl_pl and cmix_selfsl cells
last, so that these take the pre-training cmix made instead of repeating it. The report
is written to OUT/report.

    python benchmarks/grid.py --out /tmp/grid                        # the full grid
    python benchmarks/grid.py --out /tmp/grid_small --budgets 100 1000 --seeds 123

Prints the mean wall time per run by method and the estimated time of the full grid.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

import numpy as np

from cmix.learn.methods import METHODS

# CPU-sized config (2-core machines); paper-sized networks (hidden = embedded width =
# 3 x n_snps; docs/method.md, "The encoder") are for GPU nodes.
CPU_CONFIG = {"hidden": 128, "d_proj": 64, "epochs": 12, "warmup_epochs": 4, "lp_every": 4,
              "batch_size": 256, "labeled_batch_size": 128, "pred_epochs": 60,
              "pred_patience": 8, "lp_k": 10, "vime_k": 3}


def simulate_traits(out: Path, n_samples: int, n_snps: int, n_discovery: int, n_causal: int,
                    h2: float, seed: int) -> list[Path]:
    from cmix.store.write import StoreContent, write_store

    rng = np.random.default_rng(seed)
    maf = rng.uniform(0.01, 0.5, n_snps)
    n_all = n_samples + n_discovery
    dosage = rng.binomial(2, maf, size=(n_all, n_snps)).astype(np.int8)
    std = (dosage - 2 * maf) / np.sqrt(2 * maf * (1 - maf))
    stores = []
    for trait, props in (("binary_trait", [0.7, 0.3]), ("three_class_trait", [0.5, 0.3, 0.2])):
        causal = rng.choice(n_snps, n_causal, replace=False)
        effect = np.zeros(n_snps)
        effect[causal] = rng.normal(0, np.sqrt(h2 / n_causal), n_causal)
        g = std @ effect
        liab = g + rng.normal(0, np.sqrt(max(1 - g.var(), 1e-6)), n_all)
        disc, target = slice(0, n_discovery), slice(n_discovery, n_all)
        # marginal GWAS in the discovery sample: beta per copy of the effect allele
        xd = dosage[disc].astype(np.float64)
        xd -= xd.mean(0)
        yd = liab[disc] - liab[disc].mean()
        beta = (xd * yd[:, None]).sum(0) / np.maximum((xd ** 2).sum(0), 1e-9)
        cuts = np.quantile(liab[target], np.cumsum(props)[:-1])
        label = np.searchsorted(cuts, liab[target]).astype(np.int16)
        x = dosage[target].copy()
        x[rng.random(x.shape) < 0.005] = -1
        split = np.zeros(n_samples, dtype=np.int8)
        for c in range(len(props)):
            rows = np.flatnonzero(label == c)
            split[rng.choice(rows, int(round(0.3 * len(rows))), replace=False)] = 1
        path = out / "stores" / f"{trait}.zarr"
        if not path.exists():
            write_store(path, StoreContent(
                dosage=x, sample_id=[str(1000000 + i) for i in range(n_samples)],
                sample_label=label, sample_split=split,
                variant_id=[f"rs{j}" for j in range(n_snps)],
                variant_contig=["1"] * n_snps,
                variant_position=np.arange(n_snps) * 1000 + 1,
                variant_allele=np.array([["A", "G"]] * n_snps), variant_beta=beta,
                attrs={"trait": trait,
                       "class_names": [f"class{c}" for c in range(len(props))],
                       "split": {"seed": seed, "test_fraction": 0.3}}))
        stores.append(path)
    return stores


def _cell(args):
    """The seeds of one (trait, method, budget) cell in one `train_seeds` call, one torch
    thread, as the workflow's training job runs them: the store is opened, checked and
    its moments computed once for the cell."""
    method, store, budget, seed_dirs, config, encoders = args
    import torch

    torch.set_num_threads(1)
    os.environ.setdefault("CMIX_PROGRESS", "0")
    from cmix.learn.context import Reuse
    from cmix.learn.harness import train_seeds

    t = time.perf_counter()
    train_seeds(store, budget, seed_dirs, method=method, config=config, device="cpu",
                threads=1, reuse=Reuse(encoders=encoders))
    return method, budget, list(seed_dirs), time.perf_counter() - t


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--n-samples", type=int, default=10000)
    ap.add_argument("--n-snps", type=int, default=500)
    ap.add_argument("--n-discovery", type=int, default=5000)
    ap.add_argument("--n-causal", type=int, default=100)
    ap.add_argument("--h2", type=float, default=0.5)
    ap.add_argument("--budgets", type=int, nargs="+", default=[100, 300, 1000, 3000])
    ap.add_argument("--seeds", type=int, nargs="+", default=[123, 127, 131])
    # every registered method but "covariates": these stores have no covariates
    ap.add_argument("--methods", nargs="+", default=[m for m in METHODS if m != "covariates"])
    ap.add_argument("--traits", nargs="+", default=None, help="subset of the two traits")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--config", default=None, help="JSON file overriding CPU_CONFIG")
    args = ap.parse_args(argv)
    out = Path(args.out)
    config = dict(CPU_CONFIG)
    if args.config:
        config.update(json.loads(Path(args.config).read_text()))
    t0 = time.perf_counter()
    stores = simulate_traits(out, args.n_samples, args.n_snps, args.n_discovery,
                             args.n_causal, args.h2, seed=2026)
    if args.traits:
        stores = [s for s in stores if s.stem in args.traits]
    print(f"stores: {time.perf_counter() - t0:.1f} s", flush=True)
    # one job per (trait, method, budget) cell with its unfinished seeds; the largest
    # budgets first, so that the cheap cells fill the workers' last minutes; within a
    # budget cmix first and the ablations that take its pre-training last
    takers = ("cmix_selfsl_pl", "cmix_selfsl")
    order = sorted(args.methods, key=lambda m: (m != "cmix", m in takers))
    jobs, n_runs = [], 0
    for budget in sorted(args.budgets, reverse=True):
        for method in order:
            for store in stores:
                seed_dirs = {}
                for seed in args.seeds:
                    run = out / "runs" / store.stem / method / f"budget{budget}" / f"seed{seed}"
                    if not (run / "metrics.json").exists():
                        seed_dirs[seed] = str(run)
                if seed_dirs:
                    jobs.append((method, str(store), budget, seed_dirs, config,
                                 str(out / "encoders")))
                    n_runs += len(seed_dirs)
    n_cells = len(stores) * len(args.methods) * len(args.budgets) * len(args.seeds)
    print(f"{n_runs} of {n_cells} runs to do in {len(jobs)} cells, {args.jobs} worker(s)",
          flush=True)
    t1 = time.perf_counter()
    times: dict = {}
    import multiprocessing

    # spawn, not fork: the parent has dask/zarr threads (writing the stores)
    with ProcessPoolExecutor(max_workers=args.jobs,
                             mp_context=multiprocessing.get_context("spawn")) as pool:
        futs = [pool.submit(_cell, j) for j in jobs]
        for i, f in enumerate(as_completed(futs), 1):
            method, budget, seeds, sec = f.result()
            times.setdefault(method, []).extend([(budget, sec / len(seeds))] * len(seeds))
            print(f"[{i}/{len(jobs)}] {method} budget {budget} seeds "
                  f"{' '.join(map(str, seeds))}: {sec:.1f} s (elapsed "
                  f"{time.perf_counter() - t1:.0f} s)", flush=True)
    grid_wall = time.perf_counter() - t1
    from cmix.report.write import write_report

    write_report(out / "runs", out / "report")
    print(f"\ngrid wall time {grid_wall:.0f} s for {n_runs} runs with {args.jobs} workers")
    print("method            mean s/run  runs  (per budget: mean s)")
    total_est = 0.0
    for method in args.methods:
        if method not in times:
            continue
        secs = [s for _, s in times[method]]
        per_b = {b: np.mean([s for bb, s in times[method] if bb == b])
                 for b in sorted({b for b, _ in times[method]})}
        total_est += np.mean(secs) * 2 * 4 * 3
        print(f"{method:18s}{np.mean(secs):10.1f}  {len(secs):4d}  "
              + ", ".join(f"{b}: {v:.1f}" for b, v in per_b.items()))
    print(f"estimated full grid (2 traits x 4 budgets x 3 seeds, these methods, mean over "
          f"the budgets run): {total_est / 60:.0f} CPU-worker minutes, "
          f"~{total_est / 60 / args.jobs:.0f} min wall with {args.jobs} workers")
    return 0


if __name__ == "__main__":
    sys.exit(main())
