"""Packed training jobs: several runs at once on one device, or one after another?

    python benchmarks/packed_training.py STORE --runs 4 --out DIR [--device cpu]

Runs `cmix train` for `--runs` seeds of one method and budget on STORE twice: one after
another, each with all the machine's threads (what a packed SLURM job does by default:
the group's runs go through `--jobs 1`), then all at once, each with threads / runs
threads (`--parallel-first` swaps the order). Prints both wall times, their ratio, and
each seed's test accuracy in both modes (the thread count differs between them).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import time
from pathlib import Path

SHORT = {"epochs": 2, "warmup_epochs": 1, "lp_every": 1, "pred_epochs": 10,
         "pred_patience": 3}


def command(store, out, seed, method, budget, device, config):
    return ["cmix", "train", "--store", str(store), "--budget", str(budget), "--seed",
            str(seed), "--method", method, "--config", str(config), "--device", device,
            "--out", str(out)]


def run(store, out: Path, seeds, method, budget, device, threads, parallel: bool) -> float:
    config = out / "config.json"
    out.mkdir(parents=True, exist_ok=True)
    config.write_text(json.dumps(SHORT))
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads))
    start = time.time()
    procs = []
    for seed in seeds:
        cmd = command(store, out / f"seed{seed}", seed, method, budget, device, config)
        p = subprocess.Popen(cmd, env=env, stderr=subprocess.DEVNULL)
        if parallel:
            procs.append(p)
        else:
            assert p.wait() == 0
    assert all(p.wait() == 0 for p in procs)
    return time.time() - start


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("store", type=Path)
    p.add_argument("--runs", type=int, default=4)
    p.add_argument("--method", default="cmix")
    p.add_argument("--budget", type=int, default=1000)
    p.add_argument("--device", default="cpu")
    p.add_argument("--threads", type=int, default=os.cpu_count())
    p.add_argument("--parallel-first", action="store_true",
                   help="time the all-at-once mode first (run both orders on a busy machine)")
    p.add_argument("--out", type=Path, required=True)
    a = p.parse_args()
    seeds = list(range(1, a.runs + 1))

    def sequential():
        return run(a.store, a.out / "sequential", seeds, a.method, a.budget, a.device,
                   a.threads, parallel=False)

    def parallel():
        return run(a.store, a.out / "parallel", seeds, a.method, a.budget, a.device,
                   max(1, a.threads // a.runs), parallel=True)

    if a.parallel_first:
        par = parallel()
        seq = sequential()
    else:
        seq = sequential()
        par = parallel()
    for seed in seeds:
        m1 = json.loads((a.out / f"sequential/seed{seed}/metrics.json").read_text())["test"]
        m2 = json.loads((a.out / f"parallel/seed{seed}/metrics.json").read_text())["test"]
        print(f"seed {seed}: test accuracy {m1['accuracy']:.4f} (sequential) "
              f"{m2['accuracy']:.4f} (parallel)")
    print(f"{a.runs} runs of {a.method}, budget {a.budget}, {a.device}, {a.threads} threads: "
          f"one after another {seq:.1f} s, all at once {par:.1f} s, "
          f"sequential / parallel = {seq / par:.2f}")


if __name__ == "__main__":
    main()
