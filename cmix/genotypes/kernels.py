"""Numba kernels shared by the genotype steps.

KING-robust from bit planes (:mod:`cmix.genotypes.relatedness`): each sample's calls over a
block of variants become three bit planes, 64 variants a word (bit ``v % 64`` of word
``v // 64``):

* plane 0, ``hom``: the call is homozygous (A1 count 0 or 2);
* plane 1, ``two``: the call is homozygous for A1 (count 2);
* plane 2, ``het``: the call is heterozygous.

A missing call sets no bit. For two samples i and j, over the variants called in both,

    IBS0      = popcount(hom_i & hom_j & (two_i ^ two_j))
    HETHET    = popcount(het_i & het_j)
    het_i hom_j = popcount(het_i & hom_j),   hom_i het_j = popcount(hom_i & het_j)

(every term needs both calls, so missing calls drop out by themselves). The pair kernel
keeps three integer sums per pair, exactly what plink2's KING-robust kinship needs:

    num   = 4 IBS0 + het_i hom_j + hom_i het_j
    het_i = HETHET + het_i hom_j      (i's hets among the variants j has called)
    het_j = HETHET + hom_i het_j
    kinship = 0.5 - num / (4 min(het_i, het_j))

Integer sums do not depend on the order of addition, so the result is the same for
every thread count.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange, types
from numba.extending import intrinsic

#: bit planes per sample and variant word: hom, two (A1/A1), het
KING_PLANES = 3
#: samples per edge of a pair tile (a tile's two sample blocks stay in the L2 cache)
KING_TILE = 64


@intrinsic
def popcount(typingctx, x):
    """Number of set bits of a uint64 (LLVM ctpop; vectorised inside loops)."""
    sig = types.uint64(types.uint64)

    def codegen(context, builder, signature, args):
        return builder.ctpop(args[0])

    return sig, codegen


@njit(parallel=True, cache=True, nogil=True)
def pack_king_planes(bed, sample_pos, planes):
    """Bit planes of a variant block from its .bed bytes.

    bed: uint8 (n_block_variants, bytes_per_variant), .bed rows (2 bits a sample: 00
    A1/A1, 01 missing, 10 het, 11 A2/A2). sample_pos: int64 (n,), the .fam positions of
    the samples to pack, in order. planes: uint64 (n, KING_PLANES, n_words) with
    n_words >= ceil(n_block_variants / 64), overwritten; bits past the block stay 0.
    """
    n_var = bed.shape[0]
    n = sample_pos.shape[0]
    n_words = planes.shape[2]
    for s in prange(n):
        col = sample_pos[s] >> 2
        shift = np.uint8(2 * (sample_pos[s] & 3))
        for w in range(n_words):
            hom = np.uint64(0)
            two = np.uint64(0)
            het = np.uint64(0)
            v0 = w * 64
            for b in range(min(64, n_var - v0)):
                code = (bed[v0 + b, col] >> shift) & np.uint8(3)
                lo = np.uint64(code & np.uint8(1))
                hi = np.uint64(code >> np.uint8(1))
                bit = np.uint64(b)
                hom |= ((lo ^ hi) ^ np.uint64(1)) << bit
                two |= ((lo | hi) ^ np.uint64(1)) << bit
                het |= (hi & (lo ^ np.uint64(1))) << bit
            planes[s, 0, w] = hom
            planes[s, 1, w] = two
            planes[s, 2, w] = het


@njit(cache=True, nogil=True)
def _king_pair(planes, i, j, n_words):
    """(IBS0, HETHET, het_i hom_j, hom_i het_j) of samples i, j over one block's words."""
    ibs0 = np.uint64(0)
    hethet = np.uint64(0)
    het_hom = np.uint64(0)
    hom_het = np.uint64(0)
    for w in range(n_words):
        hom_i = planes[i, 0, w]
        hom_j = planes[j, 0, w]
        het_i = planes[i, 2, w]
        het_j = planes[j, 2, w]
        ibs0 += popcount(hom_i & hom_j & (planes[i, 1, w] ^ planes[j, 1, w]))
        hethet += popcount(het_i & het_j)
        het_hom += popcount(het_i & hom_j)
        hom_het += popcount(hom_i & het_j)
    return ibs0, hethet, het_hom, hom_het


@njit(parallel=True, cache=True, nogil=True)
def king_accumulate(planes, n_words, r0, r1, offsets, tiles, acc):
    """Add one variant block's KING sums to the pairs (i, j), r0 <= i < r1, i < j.

    planes: uint64 (n, KING_PLANES, >= n_words), samples in order; n_words: the block's
    words. offsets: int64 (r1 - r0,), the first pair index of each row i (its pairs with
    j = i + 1 .. n - 1 follow in order). tiles: int64 (n_tiles, 2) first rows/columns of
    the KING_TILE x KING_TILE tiles (column tile >= row tile) that cover those pairs.
    acc: int32 (3, n_pairs): num, het_i, het_j (see the module docstring), updated.
    Tiles run in parallel; each pair is written by one tile only.
    """
    n = planes.shape[0]
    for t in prange(tiles.shape[0]):
        i0 = tiles[t, 0]
        j0 = tiles[t, 1]
        i1 = min(i0 + KING_TILE, r1)
        j1 = min(j0 + KING_TILE, n)
        for i in range(i0, i1):
            base = offsets[i - r0] - i - 1
            for j in range(max(j0, i + 1), j1):
                ibs0, hethet, het_hom, hom_het = _king_pair(planes, i, j, n_words)
                k = base + j
                acc[0, k] += np.int32(4 * ibs0 + het_hom + hom_het)
                acc[1, k] += np.int32(hethet + het_hom)
                acc[2, k] += np.int32(hethet + hom_het)


@njit(parallel=True, cache=True, nogil=True, error_model="numpy")
def king_select(acc, offsets, r0, r1, n, min_kinship, keep_all):
    """Pairs of rows r0 <= i < r1 (j > i) whose kinship exceeds min_kinship.

    acc, offsets: as in :func:`king_accumulate`, summed over all variant blocks.
    keep_all: return every pair (min_kinship ignored). Returns (i, j, kinship): int64,
    int64, float64 arrays in row-major pair order; kinship is plink2's
    0.5 - num / (4 min(het_i, het_j)) (NaN or -inf when neither sample has a het).
    """
    n_rows = r1 - r0
    counts = np.zeros(n_rows, np.int64)
    for r in prange(n_rows):
        i = r0 + r
        base = offsets[r] - i - 1
        c = 0
        for j in range(i + 1, n):
            k = base + j
            kin = 0.5 - np.float64(acc[0, k]) / (4.0 * np.float64(min(acc[1, k], acc[2, k])))
            if keep_all or kin > min_kinship:
                c += 1
        counts[r] = c
    starts = np.zeros(n_rows + 1, np.int64)
    for r in range(n_rows):
        starts[r + 1] = starts[r] + counts[r]
    out_i = np.empty(starts[n_rows], np.int64)
    out_j = np.empty(starts[n_rows], np.int64)
    out_k = np.empty(starts[n_rows], np.float64)
    for r in prange(n_rows):
        i = r0 + r
        base = offsets[r] - i - 1
        m = starts[r]
        for j in range(i + 1, n):
            k = base + j
            kin = 0.5 - np.float64(acc[0, k]) / (4.0 * np.float64(min(acc[1, k], acc[2, k])))
            if keep_all or kin > min_kinship:
                out_i[m] = i
                out_j[m] = j
                out_k[m] = kin
                m += 1
    return out_i, out_j, out_k
