"""`cmix pca` against `plink2 --pca approx` on the same .bed, in the same run.

Data: a cohort written block by block by simulate's compiled genotype kernel (default
10,000 samples x 20,000 variants, about 2 min; RESULTS.md's 50,000 x 100,000 with flags, 0.2% missing calls) in four populations whose allele
frequencies drift from a common spectrum (Balding-Nichols, Fst 0.005, 0.01, 0.03 and
0.08), so the top PCs carry real structure.

Timing: `cmix pca --no-prune --no-exclude-regions --pcs 10` (allele counting, the
randomized Krylov passes, loadings and outputs) and `plink2 --pca 10 approx`, both on
``--threads`` threads, in ``--repeats`` alternating rounds (benchmarks/alternate.py).
Prints the median and min over rounds of the time ratio (goal <= 3; wall and CPU
seconds, the latter steadier when other jobs share the cores), the load average, the peak resident memory of both (GNU
time), the agreement of the two (canonical correlations of the top PCs,
eigenvalues), and cmix's peak memory on a quarter of the variants (every 4th, via
--extract) against all of them: flat memory in the number of variants means the two
peaks are close.

    python benchmarks/pca.py                                    # the sizes above
    python benchmarks/pca.py --n-samples 50000 --n-variants 100000   # big
    python benchmarks/pca.py --plink2-blas /tmp/openblas/usr/lib/x86_64-linux-gnu/openblas-pthread
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

REPO = Path(__file__).resolve().parent.parent
FST = (0.005, 0.01, 0.03, 0.08)
sys.path.insert(0, str(REPO / "benchmarks"))
from alternate import alternate, load_summary, ratios, summary  # noqa: E402
from alternate import run_process  # noqa: E402


def timed(cmd: list[str], env=None) -> tuple[float, float, float]:
    """Run a command; return (wall seconds, CPU seconds (user + system), peak RSS in
    MiB). On a shared machine the CPU seconds are the steadier measure."""
    r = run_process(cmd, env)
    return r["wall"], r["cpu"], r["rss"]


def write_cohort(prefix: Path, n_samples: int, n_variants: int, seed: int,
                 block: int = 4096) -> None:
    """Four equal populations (n_samples a multiple of 16), written in variant blocks."""
    sys.path.insert(0, str(REPO))
    from cmix.readers import plink
    from cmix.simulate.fast import _fast_kernel
    from cmix.simulate.variants import simulate_variants

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
    ap.add_argument("--n-samples", type=int, default=10_000)
    ap.add_argument("--n-variants", type=int, default=20_000)
    ap.add_argument("--pcs", type=int, default=10)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=3)
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
    def job(cmd, run_env, out):
        return lambda: dict(zip(("wall", "cpu", "rss"), timed(cmd + ["--out", str(work / out)],
                                                              run_env)))

    got, loads = alternate({name: job(*spec) for name, spec in runs.items()}, args.repeats)
    times = {name: [(r["wall"], r["cpu"], r["rss"]) for r in rs] for name, rs in got.items()}
    best = {name: min(t) for name, t in times.items()}
    c_wall, c_cpu, c_rss = best["cmix"]
    canon, ev = agreement(work / "cmix", work / "plink2", args.pcs)

    bim = pd.read_csv(f"{prefix}.bim", sep="\t", header=None, usecols=[1])[1]
    (work / "quarter.snplist").write_text("\n".join(bim.iloc[::4]) + "\n")
    q_wall, q_cpu, q_rss = timed(cmix + ["--extract", str(work / "quarter.snplist"),
                                         "--out", str(work / "cmix_quarter")], env)

    print(f"\nPCA of {args.n_samples:,} samples x {args.n_variants:,} variants, "
          f"{args.pcs} PCs, {args.threads} threads, {args.repeats} alternating rounds")
    labels = {"cmix": "cmix pca", "plink2": "plink2 --pca approx",
              "plink2+blas": "  same, optimized BLAS"}
    for name, t in times.items():
        print(f"  {labels[name]:<22} wall {summary([x[0] for x in t], ' s', '{:.1f}')}; CPU "
              f"{summary([x[1] for x in t], ' s', '{:.1f}')}; peak RSS {max(x[2] for x in t):.0f} MiB")
    for name in times:
        if name != "cmix":
            wall = ratios([x[0] for x in times["cmix"]], [x[0] for x in times[name]])
            cpu = ratios([x[1] for x in times["cmix"]], [x[1] for x in times[name]])
            print(f"  ratio cmix / {name} (goal <= 3): wall {summary(wall)}; CPU {summary(cpu)}")
    print(f"  {load_summary(loads)}")
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
