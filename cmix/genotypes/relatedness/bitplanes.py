"""KING-robust counts on the CPU from bit planes (:func:`king_bitplanes`).

As in plink2: per sample and 64 variants, one word each for "homozygous", "A1/A1" and
"het"; a pair's counts are popcounts of ANDs of its two samples' words
(:mod:`cmix.genotypes.kernels`), integers summed per pair over variant blocks, so the
result does not depend on the thread count. Memory: 12 bytes per pair of a pass's row
strip (capped, 256 MiB by default; more strips mean more passes over the .bed) plus one
block of 4,096 variants.
"""

from __future__ import annotations

import numpy as np

from ...logs import progress
from ...readers import plink


#: default cap on the CPU route's pair accumulators (12 bytes a pair)
CPU_MEMORY = 256 << 20
#: variants per bit-packed block of the CPU route (64 words of 64 variants)
_PLANE_VARIANTS = 4096


def king_bitplanes(bf, variant_idx, sample_idx, min_kinship, max_memory_bytes):
    """KING-robust on the CPU from bit planes (:mod:`cmix.genotypes.kernels`).

    Rows (samples, in ``sample_idx`` order) are split into passes whose upper-triangle
    pairs fit ``max_memory_bytes`` at 12 bytes a pair (int32 num, het_i, het_j); each
    pass streams the .bed in blocks of 4,096 variants, packs the samples from its first
    row on into bit planes (n - a0, 3, 64) uint64 and adds every pair's counts. Memory:
    the accumulators plus one block (its .bed bytes and 24 bytes a sample).
    Returns (i, j, kinship) over pairs with kinship > min_kinship (all when None),
    positions within ``sample_idx``, and the number of pairs whose kinship is NaN.
    """
    from .. import kernels  # numba: heavy to import (0.7 s); the kinship-table route needs none

    n, n_var = len(sample_idx), len(variant_idx)
    passes, a0 = [], 0
    while a0 < n - 1:                   # greedy: add rows while the pass fits the budget
        a1, pairs = a0, 0
        while a1 < n - 1 and (a1 == a0 or 12 * (pairs + n - a1 - 1) <= max_memory_bytes):
            pairs += n - a1 - 1
            a1 += 1
        passes.append((a0, a1, pairs))
        a0 = a1
    blocks = list(plink.variant_blocks(n_var, _PLANE_VARIANTS))
    n_words = _PLANE_VARIANTS // 64
    tile = kernels.KING_TILE
    found_i, found_j, found_k, n_undefined = [], [], [], 0
    bar = progress(total=len(passes) * len(blocks), desc="KING-robust", unit="block")
    for a0, a1, n_pairs in passes:
        width = n - a0
        lens = width - 1 - np.arange(a1 - a0, dtype=np.int64)      # pairs of each row
        offsets = np.zeros(a1 - a0, np.int64)
        np.cumsum(lens[:-1], out=offsets[1:])
        tiles = np.array([(r, c) for r in range(0, a1 - a0, tile) for c in range(r, width, tile)],
                         np.int64).reshape(-1, 2)
        acc = np.zeros((3, n_pairs), np.int32)
        planes = np.empty((width, kernels.KING_PLANES, n_words), np.uint64)
        pos = np.ascontiguousarray(sample_idx[a0:], dtype=np.int64)
        for v0, v1 in blocks:
            kernels.pack_king_planes(bf.packed_rows(variant_idx[v0:v1]), pos, planes)
            kernels.king_accumulate(planes, (v1 - v0 + 63) // 64, 0, a1 - a0, offsets, tiles, acc)
            bar.update(1)
        i, j, kin = kernels.king_select(acc, offsets, 0, a1 - a0, width,
                                        -np.inf if min_kinship is None else float(min_kinship),
                                        min_kinship is None)
        n_undefined += int(kernels.king_count_undefined(acc))
        del acc
        found_i.append(i + a0)
        found_j.append(j + a0)
        found_k.append(kin)
    bar.close()
    return (np.concatenate(found_i), np.concatenate(found_j), np.concatenate(found_k),
            n_undefined)
