"""cmix qc against plink2 on the same files: whole-process wall time, identical snplists,
cmix's peak memory, and memory flat in the number of variants.

    python benchmarks/qc_vs_plink2.py                      # 20,000 x 50,000 (+ 10,000), ~2 min
    python benchmarks/qc_vs_plink2.py --n-samples 50000 --n-variants 200000 --small 20000  # big

Cohorts are made with cmix.simulate.fast.simulate_genotypes_fast into benchmarks/data/
(git-ignored) and reused. Both tools run as whole processes (start-up included) with
the same --threads; the page cache is warmed by one untimed run of each first, then
``--repeats`` alternating rounds (benchmarks/alternate.py): the median and min of the
per-round time ratio, and the load average, are printed. Peak RSS is the child's
ru_maxrss (GNU time).
Also times the HWE exact test alone: 10,000 variants at n = 500,000.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from alternate import alternate, load_summary, ratios, run_process, summary  # noqa: E402


def cohort(n_samples: int, n_variants: int) -> Path:
    from cmix.simulate.fast import simulate_genotypes_fast

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
    run_process(p2), run_process(cm)  # warm the page cache and numba's on-disk cache
    got, loads = alternate({"plink2": lambda: run_process(p2), "cmix": lambda: run_process(cm)},
                           repeats)
    same = (out / "plink2.snplist").read_text() == (out / "cmix.snplist").read_text()
    n_pass = len((out / "cmix.snplist").read_text().split())
    wall = {k: [r["wall"] for r in v] for k, v in got.items()}
    return dict(plink2=wall["plink2"], cmix=wall["cmix"], ratio=ratios(wall["cmix"], wall["plink2"]),
                rss=max(r["rss"] for r in got["cmix"]), same=same, n_pass=n_pass, loads=loads)


def hwe_unit(threads: int) -> float:
    import numba

    from cmix.genotypes.hwe import hwe_exact_p

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
    ap.add_argument("--n-samples", type=int, default=20_000)
    ap.add_argument("--n-variants", type=int, default=50_000)
    ap.add_argument("--small", type=int, default=10_000, help="variants in the memory check cohort")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()

    hwe_unit(args.threads)
    for m in (args.small, args.n_variants):
        prefix = cohort(args.n_samples, m)
        r = compare(prefix, args.threads, args.repeats)
        print(f"{args.n_samples} x {m}: plink2 {summary(r['plink2'], ' s')}; cmix qc "
              f"{summary(r['cmix'], ' s')}\n  ratio cmix / plink2: {summary(r['ratio'])}; cmix "
              f"peak RSS {r['rss']:.0f} MiB; snplists identical: {r['same']} ({r['n_pass']} "
              f"variants pass)\n  {load_summary(r['loads'])}", flush=True)
        if not r["same"]:
            sys.exit("snplists differ")


if __name__ == "__main__":
    main()
