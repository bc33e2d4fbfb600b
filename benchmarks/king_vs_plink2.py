"""KING-robust + --king-cutoff: `cmix unrelated` against plink2 on the same files.

Genotype route: a simulated cohort (cmix.simulate.fast.simulate_genotypes_fast; default
5,000 samples x 50,000 variants, 0.2% missing calls) with relatives planted in chains
(duplicates, ~first and ~second degree: :func:`plant_relatives`), `plink2 --king-cutoff 0.0884`
and `cmix unrelated --bfile ... --device cpu`, both as whole processes with the same
thread count, after one untimed run of each (page cache, numba's compiled-kernel
cache). Then ``--repeats`` alternating rounds (benchmarks/alternate.py); prints the
median and min over rounds of the wall-time, CPU-time and peak-memory ratios (cmix /
plink2; peak RSS from GNU time), the load average, and whether the kept and dropped sets
are identical after every round. Goal: time <= 1.0x and memory <= 2x (medians).

Table route: a synthetic UK Biobank-sized kinship table (default 500,000 samples,
110,000 pairs in ukb_rel.dat format: clusters, chains and pairs) pruned by
`cmix unrelated --kinship`; plink2 2.00a3.5 cannot take such a table, so the ratio is
to reading the same table with pandas (the I/O floor), alternating the same way.

    python benchmarks/king_vs_plink2.py                       # the sizes above, ~3 min
    python benchmarks/king_vs_plink2.py --n-samples 1000 --n-variants 5000
    python benchmarks/king_vs_plink2.py --n-samples 30000 --n-variants 20000  # big
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

sys.path.insert(0, str(Path(__file__).resolve().parent))
from alternate import alternate, load_summary, ratios, run_process, summary  # noqa: E402


def plant_relatives(prefix: Path, n_groups: int, seed: int) -> None:
    """Make related samples in an LD-free cohort, rewriting its .bed: ``n_groups`` chains
    a -> b -> c of distinct samples, where b takes a's calls at a random half of the
    variants (kinship about 0.25) and c takes b's at a quarter (about 0.125); in every
    third chain b is a duplicate of a instead (all calls, 0.1% changed)."""
    from cmix.readers import plink

    bf = plink.open_bfile(prefix)
    geno = plink.read_genotypes(bf)
    rng = np.random.default_rng(seed)
    n_var = geno.shape[0]
    chains = rng.choice(bf.n_samples, (n_groups, 3), replace=False)
    for k, (a, b, c) in enumerate(chains):
        share = rng.random(n_var) < (1.0 if k % 3 == 0 else 0.5)
        geno[share, b] = geno[share, a]
        if k % 3 == 0:
            flip = rng.random(n_var) < 0.001
            geno[flip, b] = rng.integers(0, 3, int(flip.sum()))
        share = rng.random(n_var) < 0.25
        geno[share, c] = geno[share, b]
    with open(bf.bed_path, "wb") as fh:
        fh.write(bytes([0x6C, 0x1B, 0x01]))
        for v0 in range(0, n_var, 4096):
            fh.write(plink.encode(geno[v0:v0 + 4096]).tobytes())


def synthetic_ukb_table(path: Path, fam_path: Path, n_samples: int, n_pairs: int, seed: int):
    """A ukb_rel.dat-like table: pairs within small families, chains and duplicates."""
    rng = np.random.default_rng(seed)
    eids = np.arange(1_000_000, 1_000_000 + n_samples)
    a = rng.integers(0, n_samples, n_pairs)
    b = (a + rng.integers(1, 6, n_pairs)) % n_samples            # neighbours: clusters, chains
    kinship = np.where(rng.random(n_pairs) < 0.4, rng.uniform(0.0442, 0.0884, n_pairs),
                       rng.uniform(0.0884, 0.5, n_pairs))
    pd.DataFrame({"ID1": eids[a], "ID2": eids[b], "HetHet": 0.1, "IBS0": 0.01,
                  "Kinship": kinship.round(4)}).to_csv(path, sep=" ", index=False)
    pd.DataFrame({"fid": eids, "iid": eids, "f": 0, "m": 0, "s": 1, "p": -9}).to_csv(
        fam_path, sep=" ", header=False, index=False)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n-samples", type=int, default=5000)
    ap.add_argument("--n-variants", type=int, default=50000)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--skip-table", action="store_true", help="only the genotype route")
    ap.add_argument("--table-samples", type=int, default=500_000)
    ap.add_argument("--table-pairs", type=int, default=110_000)
    ap.add_argument("--workdir", default=None, help="keep files here (default: a temp dir)")
    args = ap.parse_args()

    from cmix.simulate.fast import simulate_genotypes_fast

    work = Path(args.workdir or tempfile.mkdtemp(prefix="king_bench_"))
    work.mkdir(parents=True, exist_ok=True)
    prefix = work / "genotypes"
    if not Path(f"{prefix}.bed").exists():
        simulate_genotypes_fast(work, args.n_samples, args.n_variants, seed=1)
        plant_relatives(prefix, max(1, args.n_samples // 50), seed=3)
    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads), MKL_NUM_THREADS=str(args.threads))
    plink_cmd = ["plink2", "--bfile", str(prefix), "--king-cutoff", "0.0884", "--threads",
                 str(args.threads), "--out", str(work / "plink2")]
    cmix_cmd = ["cmix", "unrelated", "--bfile", str(prefix), "--cutoff", "0.0884", "--threads",
                str(args.threads), "--device", "cpu", "--out", str(work / "cmix")]
    runs = {"plink2": lambda: run_process(plink_cmd, env),
            "cmix": lambda: run_process(cmix_cmd, env)}
    for run in runs.values():                   # untimed: page cache, numba's kernel cache
        run()
    same = []

    def compare():
        same.append(all((work / f"cmix.king.cutoff.{s}.id").read_text()
                        == (work / f"plink2.king.cutoff.{s}.id").read_text()
                        for s in ("in", "out")))

    results, loads = alternate(runs, args.repeats, after=compare)
    wall = {k: [r["wall"] for r in v] for k, v in results.items()}
    rss = {k: [r["rss"] for r in v] for k, v in results.items()}
    cpu = {k: [r["cpu"] for r in v] for k, v in results.items()}
    t_ratio, m_ratio = ratios(wall["cmix"], wall["plink2"]), ratios(rss["cmix"], rss["plink2"])
    n_dropped = len((work / "plink2.king.cutoff.out.id").read_text().splitlines()) - 1
    print(f"KING + --king-cutoff 0.0884, {args.n_samples} samples x {args.n_variants} variants, "
          f"{args.threads} threads, {args.repeats} alternating rounds")
    for name, label in (("plink2", "plink2 --king-cutoff"), ("cmix", "cmix unrelated (cpu)")):
        print(f"  {label}: wall {summary(wall[name], ' s', '{:.1f}')}; CPU "
              f"{summary(cpu[name], ' s', '{:.1f}')}; peak RSS "
              f"{summary(rss[name], ' MiB', '{:.0f}')}")
    print(f"  time ratio cmix / plink2  : {summary(t_ratio)}")
    print(f"  CPU-time ratio cmix / plink2 (steadier under load): "
          f"{summary(ratios(cpu['cmix'], cpu['plink2']))}")
    print(f"  memory ratio cmix / plink2: {summary(m_ratio)}")
    print(f"  {load_summary(loads)}")
    print(f"  kept and dropped sets identical in every round: {all(same)} ({n_dropped} dropped)")
    med = lambda x: float(np.median(x))  # noqa: E731
    print(f"  goal time <= 1.0x: {'met' if med(t_ratio) <= 1.0 else 'NOT met'}; "
          f"memory <= 2x: {'met' if med(m_ratio) <= 2.0 else 'NOT met'}")
    if args.skip_table:
        return

    table, fam = work / "ukb_rel.dat", work / "cohort.fam"
    synthetic_ukb_table(table, fam, args.table_samples, args.table_pairs, seed=2)
    table_cmd = ["cmix", "unrelated", "--kinship", str(table), "--fam", str(fam), "--out",
                 str(work / "table")]

    def read_table():
        t0 = time.perf_counter()
        pd.read_csv(table, sep=r"\s+")
        return {"wall": time.perf_counter() - t0}

    got, loads = alternate({"read": read_table, "cmix": lambda: run_process(table_cmd, env)},
                           args.repeats)
    summary_tsv = pd.read_csv(work / "table.king.summary.tsv", sep="\t", index_col=0)["value"]
    t_cmix = [r["wall"] for r in got["cmix"]]
    print(f"table route, {args.table_samples} samples, {args.table_pairs} pairs (ukb_rel.dat), "
          f"{int(summary_tsv['samples_dropped'])} dropped")
    print(f"  cmix unrelated --kinship (whole command): {summary(t_cmix, ' s', '{:.2f}')}; "
          f"peak RSS "
          f"{summary([r['rss'] for r in got['cmix']], ' MiB', '{:.0f}')}")
    print(f"  ratio to pandas.read_csv of the table alone: "
          f"{summary(ratios(t_cmix, [r['wall'] for r in got['read']]), 'x', '{:.1f}')}")
    print(f"  {load_summary(loads)}")


if __name__ == "__main__":
    main()
