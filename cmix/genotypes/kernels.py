"""Numba kernels shared by the genotype steps, and the numba thread setting.

Genotype counts (:func:`count_genotypes`, for :mod:`cmix.genotypes.qc` and
:mod:`cmix.genotypes.pca.fit`): one streaming pass over the packed .bed bytes counts, per
variant, the kept founders' genotypes and all kept samples' missing calls, on 64-bit
words of 32 samples with per-word sample masks (see :func:`_count_block`).

KING-robust from bit planes (:mod:`cmix.genotypes.relatedness.bitplanes`): each sample's
calls over a block of variants become three bit planes, 64 variants a word (bit
``v % 64`` of word ``v // 64``):

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

from dataclasses import dataclass

import numpy as np
from llvmlite import ir
from numba import njit, prange, types
from numba.extending import intrinsic

from ..logs import progress


#: plink2's relative tolerance (kSmallEpsilon, 2^-44) on thresholds compared with
#: counts and on LD r2 (:mod:`cmix.genotypes.qc`, :mod:`cmix.genotypes.pca`)
K_SMALL_EPSILON = 0.00000000000005684341886080801486968994140625  # 2^-44

_M55 = np.uint64(0x5555555555555555)
_ONE = np.uint64(1)

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


@intrinsic
def _ctz(typingctx, x):
    sig = types.uint64(types.uint64)

    def codegen(context, builder, signature, args):

        return builder.cttz(args[0], ir.Constant(ir.IntType(1), 1))

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


@njit(parallel=True, cache=True, nogil=True)
def king_count_undefined(acc):
    """Pairs of ``acc`` (as in :func:`king_accumulate`) whose kinship is 0/0 = NaN: no
    heterozygous call in either sample among their jointly called variants and no
    difference between them there (no jointly called variant at all, for one)."""
    count = 0
    for k in prange(acc.shape[1]):
        if acc[0, k] == 0 and min(acc[1, k], acc[2, k]) == 0:
            count += 1
    return count


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


# ------------------------------------------------------------------ genotype counts
@njit(parallel=True, cache=True, nogil=True)
def _count_block(block, n_rows, bpv, mask_f, mask_nf, nf_words, mask_keep, row_ok,
                 sample_missing, counts):
    """Count genotypes for ``n_rows`` packed variants in ``block`` (uint8, row-major).

    mask_f / mask_nf / mask_keep: uint64 (n_words,), bit 2k set when sample 32w+k is a
    kept founder / kept non-founder / kept sample. nf_words: int64 indices of words
    with a kept non-founder. counts: int64 (n_rows, 4) <- founders' hom A2 (code 11),
    het (code 10), missing (code 01), and all kept samples' missing.
    sample_missing: int64 (n_chunks, n_samples) per-sample missing counts, added to
    when it has columns (one row per parallel chunk, summed by the caller), for rows
    with row_ok[v] != 0 (uint8 (n_rows,)).
    """
    n_words = mask_f.shape[0]
    n_chunks = sample_missing.shape[0]
    want_samples = sample_missing.shape[1] > 0
    per = (n_rows + n_chunks - 1) // n_chunks
    for t in prange(n_chunks):
        buf8 = np.zeros(n_words * 8, np.uint8)
        buf = buf8.view(np.uint64)
        v0 = t * per
        v1 = min(n_rows, v0 + per)
        for v in range(v0, v1):
            off = v * bpv
            buf8[:bpv] = block[off:off + bpv]
            n11 = np.uint64(0)
            nlo = np.uint64(0)
            nhi = np.uint64(0)
            for w in range(n_words):
                x = buf[w]
                lo = x & _M55
                hi = (x >> _ONE) & _M55
                m = mask_f[w]
                nlo += popcount(lo & m)
                nhi += popcount(hi & m)
                n11 += popcount(lo & hi & m)
            miss_nf = np.uint64(0)
            for k in range(nf_words.shape[0]):
                w = nf_words[k]
                x = buf[w]
                miss_nf += popcount(x & ~(x >> _ONE) & _M55 & mask_nf[w])
            counts[v, 0] = n11
            counts[v, 1] = nhi - n11
            counts[v, 2] = nlo - n11
            counts[v, 3] = nlo - n11 + miss_nf
            if want_samples and row_ok[v]:
                for w in range(n_words):
                    x = buf[w]
                    miss = x & ~(x >> _ONE) & _M55 & mask_keep[w]
                    while miss:
                        bit = _ctz(miss)
                        sample_missing[t, w * 32 + (bit >> _ONE)] += 1
                        miss &= miss - _ONE


def _word_mask(sample_flags: np.ndarray) -> np.ndarray:
    """bool (n_samples,) -> uint64 (ceil(n/32),) with bit 2k set where sample 32w+k is True."""
    n = sample_flags.shape[0]
    n_words = (n + 31) // 32
    flags = np.zeros(n_words * 32, np.uint64)
    flags[:n] = sample_flags
    shifts = (2 * np.arange(32)).astype(np.uint64)
    return (flags.reshape(n_words, 32) << shifts).sum(axis=1, dtype=np.uint64)


def founder_flags(fam) -> np.ndarray:
    """bool (n_samples,): True where the .fam lists no parent (both columns "0").

    plink2 treats a sample as a founder when neither parent ID is given, whether or not
    the parents are in the file (checked by tests/test_qc.py against plink2).
    """
    return ((fam["father"] == "0") & (fam["mother"] == "0")).to_numpy()


@dataclass
class Counts:
    """Per-variant counts over the kept samples; arrays are int64 (n_variants,)."""

    hom_a1: np.ndarray
    het: np.ndarray
    hom_a2: np.ndarray
    missing_founders: np.ndarray
    missing: np.ndarray  # all kept samples, founders or not
    n_samples: int       # kept samples
    n_founders: int      # kept founders
    sample_missing: np.ndarray | None = None  # int64 (n_samples_in_fam,), --mind only


def count_genotypes(bf, sample_idx=None, *, sample_missing: bool = False,
                    variant_ok=None, threads: int | None = None, block_bytes: int = 32 << 20,
                    show_progress: bool = True) -> Counts:
    """Count genotypes per variant over the kept samples in one streaming pass.

    bf: an opened :class:`cmix.readers.plink.Bfile`. sample_idx: int indices into the .fam of
    the kept samples (None = all). Founders (no parents in the .fam) give the genotype
    counts; all kept samples give ``missing``. ``sample_missing=True`` also counts
    each sample's missing calls (for --mind) over the variants where ``variant_ok``
    (bool (n_variants,), None = all) is True. Peak memory: two blocks of
    ``block_bytes`` plus the per-variant arrays.
    """
    n, m = bf.n_samples, bf.n_variants
    keep = np.zeros(n, bool)
    keep[np.arange(n) if sample_idx is None else np.asarray(sample_idx, np.int64)] = True
    founders = founder_flags(bf.fam)
    mask_f = _word_mask(keep & founders)
    mask_nf = _word_mask(keep & ~founders)
    mask_keep = _word_mask(keep)
    nf_words = np.flatnonzero(mask_nf).astype(np.int64)
    bpv = bf.bytes_per_variant
    n_threads = set_numba_threads(threads)
    block = max(1, min(m, block_bytes // max(bpv, 1)))
    counts = np.zeros((m, 4), np.int64)
    row_ok = (np.ones(m, np.uint8) if variant_ok is None
              else np.asarray(variant_ok, bool).astype(np.uint8))
    n_chunks = max(1, n_threads)
    smiss = np.zeros((n_chunks, n if sample_missing else 0), np.int64)
    if n > 0:
        bar = progress(total=m, desc="counting genotypes", unit="variant",
                       disable=None if show_progress else True)
        for s, e, buf in bf.packed_blocks(block):
            _count_block(buf, e - s, bpv, mask_f, mask_nf, nf_words, mask_keep, row_ok[s:e],
                         smiss, counts[s:e])
            bar.update(e - s)
        bar.close()
    n_founders = int((keep & founders).sum())
    hom_a2, het, miss_f, miss = counts.T
    return Counts(hom_a1=n_founders - hom_a2 - het - miss_f, het=het.copy(),
                  hom_a2=hom_a2.copy(), missing_founders=miss_f.copy(), missing=miss.copy(),
                  n_samples=int(keep.sum()), n_founders=n_founders,
                  sample_missing=smiss.sum(axis=0) if sample_missing else None)


def set_numba_threads(threads: int | None) -> int:
    import numba  # numba: JIT start-up; only where a kernel runs

    if threads is None:
        threads = numba.config.NUMBA_NUM_THREADS
    threads = max(1, min(int(threads), numba.config.NUMBA_NUM_THREADS))
    numba.set_num_threads(threads)
    return threads
