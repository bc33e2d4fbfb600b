"""`cmix pca` against `plink2 --pca approx` on the same .bed, in the same run.

Data: a cohort written block by block by simulate's compiled genotype kernel (default
50,000 samples x 100,000 variants, 0.2% missing calls) in four populations whose allele
frequencies drift from a common spectrum (Balding-Nichols, Fst 0.005, 0.01, 0.03 and
0.08), so the top PCs carry real structure.

Timing: `cmix pca --no-prune --no-exclude-regions --pcs 10` (allele counting, the
randomized Krylov passes, loadings and outputs) and `plink2 --pca 10 approx`, both on
``--threads`` threads, run ``--repeats`` times alternately; the minimum wall time of
each counts. Prints the time ratio (goal <= 3; wall and CPU seconds, the latter
steadier when other jobs share the cores), the peak resident memory of both (GNU
time), the agreement of the two (canonical correlations of the top PCs,
eigenvalues), and cmix's peak memory on a quarter of the variants (every 4th, via
--extract) against all of them: flat memory in the number of variants means the two
peaks are close.

    python benchmarks/pca.py                                    # the sizes above
    python benchmarks/pca.py --n-samples 5000 --n-variants 10000 --repeats 1
    python benchmarks/pca.py --plink2-blas /tmp/openblas/usr/lib/x86_64-linux-gnu/openblas-pthread
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

REPO = Path(__file__).resolve().parent.parent
FST = (0.005, 0.01, 0.03, 0.08)


def timed(cmd: list[str], env=None) -> tuple[float, float, float]:
    """Run a command; return (wall seconds, CPU seconds (user + system), peak RSS in
    MiB) via GNU time. On a shared machine the CPU seconds are the steadier measure."""
    t0 = time.perf_counter()
    res = subprocess.run(["/usr/bin/time", "-f", "RUSAGE %M %U %S", *cmd],
                         capture_output=True, text=True, env=env)
    wall = time.perf_counter() - t0
    if res.returncode != 0:
        sys.exit(f"failed: {' '.join(cmd)}\n{res.stdout}\n{res.stderr}")
    usage = [line for line in res.stderr.splitlines() if line.startswith("RUSAGE")][-1]
    rss, user, system = usage.split()[1:]
    return wall, float(user) + float(system), int(rss) / 1024


def write_cohort(prefix: Path, n_samples: int, n_variants: int, seed: int,
                 block: int = 4096) -> None:
    """Four equal populations (n_samples a multiple of 16), written in variant blocks."""
    sys.path.insert(0, str(REPO))
    from cmix.genotypes import plink
    from cmix.simulate import _fast_kernel, simulate_variants

    if n_samples % (4 * len(FST)):
        sys.exit(f"--n-samples must be a multiple of {4 * len(FST)}")
    rng = np.random.default_rng(seed)
    variants = simulate_variants(rng, n_variants, 22)
    p = np.clip(variants.p_a1.to_numpy(), 1e-3, 1 - 1e-3)
    pop_p = [rng.beta(p * (1 - f) / f, (1 - p) * (1 - f) / f) for f in FST]
    n_pop = n_samples // len(FST)
    ids = (np.arange(n_samples) + 1_000_001).astype(str)
    fam = pd.DataFrame({"fid": ids, "iid": ids, "father": "0", "mother": "0",
                        "sex": rng.choice(["1", "2"], n_samples), "phenotype": "-9"})
    fill = _fast_kernel()
    buf = np.empty((block, n_samples // 4), np.uint8)
    with plink.BedWriter(prefix, fam, variants[plink.BIM_COLUMNS]) as writer:
        for v0, v1 in plink.variant_blocks(n_variants, block):
            for k, pp in enumerate(pop_p):
                part = np.empty((v1 - v0, n_pop // 4), np.uint8)
                fill(seed * 10 + k, v0, pp[v0:v1], 0.002, n_pop, part)
                buf[: v1 - v0, k * (n_pop // 4):(k + 1) * (n_pop // 4)] = part
            writer.write_packed(buf[: v1 - v0])


def agreement(ours: Path, theirs: Path, k: int) -> tuple[np.ndarray, np.ndarray]:
    from scipy.linalg import subspace_angles

    a = pd.read_csv(f"{ours}.eigenvec", sep="\t").iloc[:, 2:2 + k].to_numpy()
    b = pd.read_csv(f"{theirs}.eigenvec", sep="\t").iloc[:, 2:2 + k].to_numpy()
    canon = np.cos(subspace_angles(a, b))
    ev = np.loadtxt(f"{ours}.eigenval")[:k] / np.loadtxt(f"{theirs}.eigenval")[:k] - 1
    return np.sort(canon)[::-1], ev


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n-samples", type=int, default=50_000)
    ap.add_argument("--n-variants", type=int, default=100_000)
    ap.add_argument("--pcs", type=int, default=10)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--workdir", default=None, help="keep the data here (default: a temp dir)")
    ap.add_argument("--plink2-blas", default=None, metavar="DIR",
                    help="also time plink2 with the libblas.so.3/liblapack.so.3 in DIR (e.g. "
                         "OpenBLAS unpacked from the Debian package): the Debian plink2 links "
                         "the reference BLAS")
    args = ap.parse_args()

    tmp = None
    if args.workdir:
        work = Path(args.workdir)
        work.mkdir(parents=True, exist_ok=True)
    else:
        tmp = tempfile.TemporaryDirectory(prefix="cmix_bench_pca_")
        work = Path(tmp.name)
    prefix = work / f"pops_{args.n_samples}x{args.n_variants}"
    if not prefix.with_suffix(".bed").exists():
        t0 = time.perf_counter()
        write_cohort(prefix, args.n_samples, args.n_variants, args.seed)
        print(f"wrote {prefix}.bed ({args.n_samples} x {args.n_variants}, "
              f"{len(FST)} populations) in {time.perf_counter() - t0:.1f} s")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    cmix = [sys.executable, "-m", "cmix.cli", "pca", "--bfile", str(prefix), "--no-prune",
            "--no-exclude-regions", "--pcs", str(args.pcs), "--threads", str(args.threads)]
    plink2 = ["plink2", "--bfile", str(prefix), "--pca", str(args.pcs), "approx",
              "--threads", str(args.threads)]
    runs = {"cmix": (cmix, env, "cmix"), "plink2": (plink2, None, "plink2")}
    if args.plink2_blas:
        blas_env = {**os.environ, "LD_LIBRARY_PATH": args.plink2_blas,
                    "OPENBLAS_NUM_THREADS": str(args.threads)}
        runs["plink2+blas"] = (plink2, blas_env, "plink2_blas")
    times: dict[str, list[tuple[float, float, float]]] = {name: [] for name in runs}
    for r in range(args.repeats):
        for name, (cmd, run_env, out) in runs.items():
            times[name].append(timed(cmd + ["--out", str(work / out)], run_env))
        print(f"repeat {r + 1}: " + ", ".join(
            f"{name} {t[-1][0]:.1f} s ({t[-1][1]:.1f} CPU s)" for name, t in times.items()),
            flush=True)
    best = {name: min(t) for name, t in times.items()}
    c_wall, c_cpu, c_rss = best["cmix"]
    canon, ev = agreement(work / "cmix", work / "plink2", args.pcs)

    bim = pd.read_csv(f"{prefix}.bim", sep="\t", header=None, usecols=[1])[1]
    (work / "quarter.snplist").write_text("\n".join(bim.iloc[::4]) + "\n")
    q_wall, q_cpu, q_rss = timed(cmix + ["--extract", str(work / "quarter.snplist"),
                                         "--out", str(work / "cmix_quarter")], env)

    print(f"\nPCA of {args.n_samples:,} samples x {args.n_variants:,} variants, "
          f"{args.pcs} PCs, {args.threads} threads (min of {args.repeats})")
    labels = {"cmix": "cmix pca", "plink2": "plink2 --pca approx",
              "plink2+blas": "  same, optimized BLAS"}
    for name, (wall, cpu, rss) in best.items():
        print(f"  {labels[name]:<22} {wall:7.1f} s wall {cpu:7.1f} s CPU   peak RSS {rss:6.0f} MiB")
    for name in best:
        if name != "cmix":
            print(f"  ratio cmix / {name}: {c_wall / best[name][0]:.2f} wall, "
                  f"{c_cpu / best[name][1]:.2f} CPU (goal <= 3)")
    print(f"  canonical correlations with plink2 approx: {np.round(canon, 4).tolist()}")
    print(f"  eigenvalue ratio - 1: {np.round(ev, 4).tolist()}")
    print("memory in the number of variants (cmix pca):")
    print(f"  {len(bim.iloc[::4]):>9,} variants: {q_wall:7.1f} s wall, {q_cpu:7.1f} s CPU, "
          f"peak RSS {q_rss:.0f} MiB")
    print(f"  {len(bim):>9,} variants: {c_wall:7.1f} s wall, {c_cpu:7.1f} s CPU, "
          f"peak RSS {c_rss:.0f} MiB")
    if tmp is not None:
        tmp.cleanup()


if __name__ == "__main__":
    main()
