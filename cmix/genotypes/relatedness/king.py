"""KING-robust kinship from genotypes (:func:`king_robust`), with the exact pair counts.

KING-robust (Manichaikul et al. 2010; plink2's between-family estimator), over the
variants called in both samples i and j, chrX, chrY and MT excluded (as plink2 does: the
pseudo-autosomal XY, unplaced chromosome 0 and contigs are counted as autosomal,
:func:`king_variants`):

    phi_ij = 0.5 - (4 N_IBS0 + N_het_i,hom_j + N_hom_i,het_j) / (4 min(N_het_i, N_het_j))

The counts come from bit planes on the CPU (:mod:`cmix.genotypes.relatedness.bitplanes`)
or int8 matrix products on a GPU (:mod:`cmix.genotypes.relatedness.int8`). Pairs above
the reporting threshold are then recounted exactly (NSNP, HETHET, IBS0) from the
genotypes (:func:`pair_counts`), and the two must agree.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ...errors import CmixError
from ...readers import plink
from ...readers.chroms import chrom_codes
from ...runtime import resolve_device
from .bitplanes import CPU_MEMORY, king_bitplanes
from .cutoff import REPORT_MIN_KINSHIP
from .int8 import INT8_STRIP, INT8_VARIANTS, int8_memory, king_int8


#: variants KING-robust takes at most; a pair's int32 sums (up to 4 V) stay far from 2^31
_MAX_VARIANTS = 40_000_000


def king_variants(chrom) -> np.ndarray:
    """bool (n_variants,): the variants KING-robust uses, as plink2 chooses them: all but
    those on chrX, chrY and MT (however written: 23, chrX, ...); the pseudo-autosomal XY,
    the unplaced chromosome 0 and other contigs count as autosomal."""
    return ~np.isin(chrom_codes(chrom), ("X", "Y", "MT"))


def king_robust(bf: plink.Bfile, variant_idx=None, sample_idx=None, *,
                min_kinship: float | None = REPORT_MIN_KINSHIP, block_size: int | None = None,
                device: str = "auto", max_memory_bytes: int | None = None,
                route: str | None = None) -> pd.DataFrame:
    """KING-robust kinship of all pairs of the selected samples, over the variants off
    chrX, chrY and MT (:func:`king_variants`).

    bf: an opened .bed trio. variant_idx: int positions in the .bim to use (default all;
    those on X, Y and MT are dropped, as plink2 does). sample_idx: sorted int positions in
    the .fam (default all). min_kinship: keep pairs with kinship > this (None: all pairs).
    device "cpu" (or "auto" without a GPU): bit-packed pair counts on numba's threads
    (:func:`king_bitplanes`); "cuda": int8 indicator products with torch
    (:func:`king_int8`; block_size: samples per row strip, default 2,048; blocks of at
    most 8,192 variants). route: "bitplanes" or "int8" overrides the
    device's route (the int8 route runs on the CPU as well; the bit planes on the CPU only).
    max_memory_bytes bounds the per-pair accumulators held at once (default 256 MiB on
    the CPU, 12 bytes a pair; int8 route: a third of the GPU's free memory, 1 GiB on the
    CPU, 16 bytes a pair); further row strips are done in further passes over the .bed.

    Returns a DataFrame, one row per kept pair in plink2's .kin0 order (by the later
    sample, then the earlier): idx1 (later .fam position), idx2 (earlier), nsnp, hethet,
    ibs0, het1_hom2, het2_hom1 (int64 counts over jointly called variants), kinship.
    ``attrs["undefined_kinship_pairs"]``: how many pairs of all had a NaN kinship (never
    above min_kinship, so not among the rows when it is given).
    """
    variant_idx = np.arange(bf.n_variants) if variant_idx is None else np.asarray(variant_idx)
    variant_idx = np.sort(variant_idx[king_variants(bf.bim["chrom"].iloc[variant_idx])])
    sample_idx = np.arange(bf.n_samples) if sample_idx is None else np.sort(np.asarray(sample_idx))
    n, n_var = len(sample_idx), len(variant_idx)
    empty = pd.DataFrame({c: pd.Series(dtype=np.int64) for c in
                          ("idx1", "idx2", "nsnp", "hethet", "ibs0", "het1_hom2", "het2_hom1")})
    empty["kinship"] = pd.Series(dtype=np.float64)
    if n < 2 or n_var == 0:             # with no variant, every pair's kinship is 0/0
        empty.attrs["undefined_kinship_pairs"] = n * (n - 1) // 2
        return empty
    if n_var >= _MAX_VARIANTS:
        raise CmixError(f"KING-robust: {n_var} variants exceed the supported {_MAX_VARIANTS - 1}")
    on_cpu = device == "cpu" or resolve_device(device).type == "cpu"   # torch only if asked
    route = route or ("bitplanes" if on_cpu else "int8")
    if route == "bitplanes":
        if not on_cpu:
            raise ValueError("the bit-plane route runs on the CPU only")
        pos_i, pos_j, kin, n_undefined = king_bitplanes(bf, variant_idx, sample_idx,
                                                         min_kinship,
                                                         max_memory_bytes or CPU_MEMORY)
    elif route == "int8":
        dev = resolve_device(device)
        pos_i, pos_j, kin, n_undefined = king_int8(
            bf, variant_idx, sample_idx, min_kinship, block_size or INT8_STRIP,
            INT8_VARIANTS, dev, max_memory_bytes or int8_memory(dev))
    else:
        raise ValueError(f"unknown KING route {route!r} (bitplanes or int8)")
    if len(pos_i) == 0:
        empty.attrs["undefined_kinship_pairs"] = n_undefined
        return empty
    # exact counts for the kept pairs, in .kin0 order (later sample first)
    order = np.lexsort((pos_i, pos_j))
    later, earlier = pos_j[order], pos_i[order]
    counts = pair_counts(bf, variant_idx, sample_idx, later, earlier, block=8192)
    fast = kin[order]
    if not np.allclose(fast, counts["kinship"].to_numpy(), rtol=0, atol=1e-9, equal_nan=True):
        raise RuntimeError("KING-robust: blocked counts and exact pair counts disagree "
                           "(internal error; please report)")
    counts.insert(0, "idx1", sample_idx[later].astype(np.int64))
    counts.insert(1, "idx2", sample_idx[earlier].astype(np.int64))
    if min_kinship is not None:
        counts = counts[counts["kinship"] > min_kinship].reset_index(drop=True)
    counts.attrs["undefined_kinship_pairs"] = n_undefined
    return counts


def pair_counts(bf: plink.Bfile, variant_idx, sample_idx, pos1, pos2,
                block: int = 8192) -> pd.DataFrame:
    """Exact KING counts for given pairs, streaming variant blocks of the .bed.

    pos1, pos2: positions within ``sample_idx`` of each pair's two samples.
    Returns nsnp, hethet, ibs0, het1_hom2, het2_hom1 (int64, jointly called variants)
    and kinship (float64, plink2's formula), one row per pair.
    """
    pos1, pos2 = np.asarray(pos1, np.int64), np.asarray(pos2, np.int64)
    involved, inv = np.unique(np.concatenate([pos1, pos2]), return_inverse=True)
    c1, c2 = inv[:len(pos1)], inv[len(pos1):]
    n_pairs = len(pos1)
    tot = np.zeros((5, n_pairs), dtype=np.int64)
    pair_chunk = max(1, (1 << 24) // max(1, block))
    for v0, v1 in plink.variant_blocks(len(variant_idx), block):
        geno = bf.read(variant_idx[v0:v1], np.asarray(sample_idx)[involved])
        for p0 in range(0, n_pairs, pair_chunk):
            a = geno[:, c1[p0:p0 + pair_chunk]]
            b = geno[:, c2[p0:p0 + pair_chunk]]
            both = (a >= 0) & (b >= 0)
            het_a, het_b = (a == 1) & both, (b == 1) & both
            hom_a, hom_b = both & (a != 1), both & (b != 1)
            sl = slice(p0, p0 + a.shape[1])
            tot[0, sl] += both.sum(0)
            tot[1, sl] += (het_a & het_b).sum(0)
            tot[2, sl] += (hom_a & hom_b & (a != b)).sum(0)
            tot[3, sl] += (het_a & hom_b).sum(0)
            tot[4, sl] += (hom_a & het_b).sum(0)
    out = pd.DataFrame(tot.T, columns=["nsnp", "hethet", "ibs0", "het1_hom2", "het2_hom1"])
    out["kinship"] = king_kinship(out["ibs0"].to_numpy(), out["hethet"].to_numpy(),
                                  out["het1_hom2"].to_numpy(), out["het2_hom1"].to_numpy())
    return out


def king_kinship(ibs0, hethet, het1_hom2, het2_hom1) -> np.ndarray:
    """plink2's KING-robust kinship from jointly-called counts (NaN/-inf when no hets)."""
    ibs0, hethet = np.asarray(ibs0, np.float64), np.asarray(hethet, np.float64)
    h12, h21 = np.asarray(het1_hom2, np.float64), np.asarray(het2_hom1, np.float64)
    smaller_het = hethet + np.minimum(h12, h21)
    with np.errstate(divide="ignore", invalid="ignore"):
        return 0.5 - (4.0 * ibs0 + h12 + h21) / (4.0 * smaller_het)
