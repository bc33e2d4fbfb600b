"""KING-robust + --king-cutoff: `cmix unrelated` against plink2 on the same files.

Genotype route: a simulated cohort (cmix.simulate.simulate_genotypes_fast; default
5,000 samples x 50,000 variants, 0.2% missing calls), `plink2 --king-cutoff 0.0884`
and `cmix unrelated --bfile ... --device cpu`, both with the same thread count, each
run ``--repeats`` times alternately (the minimum wall time counts); prints the ratio,
the peak resident memory of each (GNU time) and whether the kept sets are identical.

Table route: a synthetic UK Biobank-sized kinship table (default 500,000 samples,
110,000 pairs in ukb_rel.dat format: clusters, chains and pairs) pruned by
`cmix unrelated --kinship`; reported as wall time and as a ratio to reading the same
table with pandas (the I/O floor), since plink2 2.00a3.5 cannot take such a table.

    python benchmarks/king_vs_plink2.py                       # the sizes above
    python benchmarks/king_vs_plink2.py --n-samples 1000 --n-variants 5000 --repeats 1
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


def timed(cmd: list[str], env=None) -> tuple[float, float]:
    """Run a command; return (wall seconds, peak RSS in MiB) via GNU time."""
    t0 = time.perf_counter()
    res = subprocess.run(["/usr/bin/time", "-f", "MAXRSS %M", *cmd], capture_output=True,
                         text=True, env=env)
    wall = time.perf_counter() - t0
    if res.returncode != 0:
        sys.exit(f"failed: {' '.join(cmd)}\n{res.stdout}\n{res.stderr}")
    rss = [line for line in res.stderr.splitlines() if line.startswith("MAXRSS")]
    return wall, int(rss[-1].split()[1]) / 1024


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
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--table-samples", type=int, default=500_000)
    ap.add_argument("--table-pairs", type=int, default=110_000)
    ap.add_argument("--workdir", default=None, help="keep files here (default: a temp dir)")
    args = ap.parse_args()

    from cmix.simulate import simulate_genotypes_fast

    work = Path(args.workdir or tempfile.mkdtemp(prefix="king_bench_"))
    work.mkdir(parents=True, exist_ok=True)
    prefix = work / "genotypes"
    if not Path(f"{prefix}.bed").exists():
        simulate_genotypes_fast(work, args.n_samples, args.n_variants, seed=1)
    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads), MKL_NUM_THREADS=str(args.threads))
    plink_cmd = ["plink2", "--bfile", str(prefix), "--king-cutoff", "0.0884", "--threads",
                 str(args.threads), "--out", str(work / "plink2")]
    cmix_cmd = ["cmix", "unrelated", "--bfile", str(prefix), "--cutoff", "0.0884", "--threads",
                str(args.threads), "--device", "cpu", "--out", str(work / "cmix")]
    t_plink, t_cmix, m_plink, m_cmix = [], [], 0.0, 0.0
    for _ in range(args.repeats):
        w, m = timed(plink_cmd, env)
        t_plink.append(w)
        m_plink = max(m_plink, m)
        w, m = timed(cmix_cmd, env)
        t_cmix.append(w)
        m_cmix = max(m_cmix, m)
    same = all((work / f"cmix.king.cutoff.{s}.id").read_text()
               == (work / f"plink2.king.cutoff.{s}.id").read_text() for s in ("in", "out"))
    print(f"KING + --king-cutoff 0.0884, {args.n_samples} samples x {args.n_variants} variants, "
          f"{args.threads} threads, min of {args.repeats} runs")
    print(f"  plink2 --king-cutoff : {min(t_plink):8.2f} s   peak RSS {m_plink:8.0f} MiB  "
          f"(runs: {', '.join(f'{t:.1f}' for t in t_plink)})")
    print(f"  cmix unrelated (cpu) : {min(t_cmix):8.2f} s   peak RSS {m_cmix:8.0f} MiB  "
          f"(runs: {', '.join(f'{t:.1f}' for t in t_cmix)})")
    print(f"  ratio cmix / plink2  : {min(t_cmix) / min(t_plink):8.2f}x   kept sets identical: "
          f"{same}")

    table, fam = work / "ukb_rel.dat", work / "cohort.fam"
    synthetic_ukb_table(table, fam, args.table_samples, args.table_pairs, seed=2)
    t0 = time.perf_counter()
    pd.read_csv(table, sep=r"\s+")
    t_read = time.perf_counter() - t0
    w, m = timed(["cmix", "unrelated", "--kinship", str(table), "--fam", str(fam), "--out",
                  str(work / "table")], env)
    summary = pd.read_csv(work / "table.king.summary.tsv", sep="\t", index_col=0)["value"]
    print(f"table route, {args.table_samples} samples, {args.table_pairs} pairs (ukb_rel.dat)")
    print(f"  cmix unrelated --kinship: {w:6.2f} s (whole command, incl. start-up), peak RSS "
          f"{m:6.0f} MiB; {int(summary['samples_dropped'])} dropped")
    print(f"  ratio to pandas.read_csv of the table alone: {w / t_read:5.1f}x ({t_read:.2f} s)")


if __name__ == "__main__":
    main()
