"""KING-robust in tiles against the one-process run, measured in the same run.

Times, on one LD-free cohort (cmix.simulate.fast), the one-process
``cmix unrelated`` computation (KING-robust over all pairs, CPU bit planes) and one
diagonal and one off-diagonal ``cmix king-tile`` of the same samples, and prints each
tile's cost as a ratio of the one-process run. Then extrapolates to 500,000 samples x
800,000 variants on N nodes, assuming: cost proportional to pairs (n^2 / 2) and linear
in variants; an off-diagonal tile of block B costs as 2 B^2 pairs (it computes the
union of its blocks), a diagonal one B^2 / 2; the one-process rate measured here per
node; tiles spread evenly over nodes, no queue wait. Usage:
    python benchmarks/king_tiles.py --samples 2000 --variants 20000 --block 500
"""

from __future__ import annotations

import argparse
import tempfile
import time

import numpy as np

from cmix.genotypes.relatedness.king import king_robust
from cmix.genotypes.relatedness.tiles import king_tile, tile_list
from cmix.readers import plink
from cmix.readers.sources import GenotypeFiles
from cmix.simulate.fast import simulate_genotypes_fast


def _time(fn, repeat=3) -> float:
    best = np.inf
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--samples", type=int, default=2000)
    ap.add_argument("--variants", type=int, default=20000)
    ap.add_argument("--block", type=int, default=500)
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="king_tiles_")
    prefix = simulate_genotypes_fast(work, args.samples, args.variants, seed=1)
    bf, geno = plink.open_bfile(prefix), GenotypeFiles(bfile=str(prefix))
    king_robust(bf, None, None, device="cpu")               # untimed: numba cache, pages
    one = _time(lambda: king_robust(bf, None, None, device="cpu"))
    diag = _time(lambda: king_tile(geno, f"{work}/d.npz", block=args.block, tile=(0, 0)))
    off = _time(lambda: king_tile(geno, f"{work}/o.npz", block=args.block, tile=(0, 1)))
    n, b = args.samples, args.block
    pair_share = (b * b / 2) / (n * n / 2)
    print(f"{n} samples x {args.variants} variants, block {b}, {len(tile_list(n, b))} tiles")
    print(f"one process {one:.3f} s; diagonal tile {diag:.3f} s (ratio {diag / one:.4f}, "
          f"pairs ratio {pair_share:.4f}); off-diagonal tile {off:.3f} s "
          f"(ratio {off / one:.4f}, pairs ratio {2 * pair_share:.4f})")
    rate = one / (n * n / 2 * args.variants)                # s per pair-variant
    N, V = 500_000, 800_000
    for block in (10_000, 25_000):
        nb = -(-N // block)
        work_s = rate * V * (nb * block * block / 2 + nb * (nb - 1) / 2 * 2 * block * block)
        print(f"block {block}: {nb * (nb + 1) // 2} tiles, {work_s / 3600:.0f} core-h-equiv "
              "(one node = this machine)")
        for nodes in (1, 10, 50, 100):
            print(f"  {nodes:>4} nodes: {work_s / nodes / 3600:8.1f} h wall")


if __name__ == "__main__":
    main()
