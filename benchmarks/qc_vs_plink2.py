"""cmix qc against plink2 on the same files: whole-process wall time, identical snplists,
cmix's peak memory, and memory flat in the number of variants.

    python benchmarks/qc_vs_plink2.py                      # 50,000 x 200,000 (+ 20,000)
    python benchmarks/qc_vs_plink2.py --n-samples 5000 --n-variants 20000 --small 2000

Cohorts are made with cmix.simulate.simulate_genotypes_fast into benchmarks/data/
(git-ignored) and reused. Both tools run as whole processes (start-up included) with
the same --threads, alternating, ``--repeats`` times each; the page cache is warmed by
one untimed run of each first. Peak RSS is the child's ru_maxrss (os.wait4).
Also times the HWE exact test alone: 10,000 variants at n = 500,000.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent


def run(cmd: list[str]) -> tuple[float, float]:
    """Run a command; return (wall seconds, peak RSS in MiB)."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    err = proc.stderr.read().decode()
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        sys.exit(f"failed ({proc.returncode}): {' '.join(cmd)}\n{err}")
    return wall, usage.ru_maxrss / 1024


def cohort(n_samples: int, n_variants: int) -> Path:
    from cmix.simulate import simulate_genotypes_fast

    out = HERE / "data" / f"qc_{n_samples}x{n_variants}"
    prefix = out / "genotypes"
    if not prefix.with_suffix(".bed").exists():
        print(f"making {out} ...", flush=True)
        simulate_genotypes_fast(out, n_samples, n_variants, seed=1)
    return prefix


def compare(prefix: Path, threads: int, repeats: int) -> dict:
    out = prefix.parent
    flags = ["--maf", "0.01", "--hwe", "1e-7", "--threads", str(threads)]
    p2 = ["plink2", "--bfile", str(prefix), *flags, "--write-snplist", "--out", str(out / "plink2")]
    cm = ["cmix", "qc", "--bfile", str(prefix), *flags, "--out", str(out / "cmix")]
    run(p2), run(cm)  # warm the page cache and numba's on-disk cache
    t_p2, t_cm, rss = [], [], []
    for _ in range(repeats):
        t_p2.append(run(p2)[0])
        w, r = run(cm)
        t_cm.append(w)
        rss.append(r)
    same = (out / "plink2.snplist").read_text() == (out / "cmix.snplist").read_text()
    n_pass = len((out / "cmix.snplist").read_text().split())
    return dict(plink2=min(t_p2), cmix=min(t_cm), ratio=min(t_cm) / min(t_p2),
                rss=max(rss), same=same, n_pass=n_pass)


def hwe_unit(threads: int) -> float:
    import numba

    from cmix.genotypes.qc import hwe_exact_p

    rng = np.random.default_rng(0)
    n, m = 500_000, 10_000
    p = rng.uniform(0.001, 0.5, m)
    hom1 = rng.binomial(n, (1 - p) ** 2)
    het = rng.binomial(n - hom1, 2 * p * (1 - p) / (1 - (1 - p) ** 2))
    het[::50] //= 2  # HWE failures: the walk then spans the far tail
    hom2 = n - hom1 - het
    numba.set_num_threads(threads)
    hwe_exact_p(het[:10], hom1[:10], hom2[:10])  # compile / load cache
    t0 = time.perf_counter()
    pv = hwe_exact_p(het, hom1, hom2)
    dt = time.perf_counter() - t0
    print(f"HWE exact test: {m} variants at n = {n}: {dt:.2f} s on {threads} threads "
          f"(target < 5 s); {int((pv < 1e-7).sum())} with p < 1e-7")
    return dt


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n-samples", type=int, default=50_000)
    ap.add_argument("--n-variants", type=int, default=200_000)
    ap.add_argument("--small", type=int, default=20_000, help="variants in the memory check cohort")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=2)
    args = ap.parse_args()

    hwe_unit(args.threads)
    for m in (args.small, args.n_variants):
        prefix = cohort(args.n_samples, m)
        r = compare(prefix, args.threads, args.repeats)
        print(f"{args.n_samples} x {m}: plink2 {r['plink2']:.2f} s, cmix qc {r['cmix']:.2f} s, "
              f"ratio {r['ratio']:.2f}; cmix peak RSS {r['rss']:.0f} MiB; "
              f"snplists identical: {r['same']} ({r['n_pass']} variants pass)", flush=True)
        if not r["same"]:
            sys.exit("snplists differ")


if __name__ == "__main__":
    main()
