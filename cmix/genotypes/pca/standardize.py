"""Standardised genotypes, as plink2 ``--pca`` standardises them, streamed through dask.

z = (g - 2p) / sqrt(2p(1-p)) with p the allele frequency among the fitted founders,
missing calls mean-imputed (z = 0) (:func:`standardizing_table`); a lazy dask array of
z over blocks of variants decodes the .bed bytes through that table
(:func:`standardized_dask`), so the n x m matrix is never in memory.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from ...readers import plink


def sample_offsets(sample_idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Byte index and bit shift of each sample's 2-bit code in a .bed row."""
    sample_idx = np.asarray(sample_idx, np.int64)
    return sample_idx >> 2, ((sample_idx & 3) << 1).astype(np.int64)


@njit(cache=True, nogil=True)
def _standardize_block(packed, byte_idx, shift, lut, out):
    """out[j, s] = lut[j, code of sample s in .bed row j].

    packed: uint8 (b, bytes_per_variant); byte_idx, shift: int64 (n,); lut: (b, 4)
    standardised value of each 2-bit code; out: (b, n), float32 or float64. Serial:
    chunks run in parallel on dask's threads (the GIL is released).
    """
    n = byte_idx.shape[0]
    for j in range(packed.shape[0]):
        row = packed[j]
        t = lut[j]
        o = out[j]
        for s in range(n):
            o[s] = t[(row[byte_idx[s]] >> shift[s]) & 3]


def standardizing_table(hom_a1, het, hom_a2) -> tuple[np.ndarray, np.ndarray]:
    """plink2 --pca's variance standardisation from the fitted founders' counts.

    Inputs int (m,). p = A1 (ALT) frequency among called founders; the A1 count g of a
    call becomes z = (g - 2p) / sqrt(2p(1-p)), a missing call z = 0 (the mean).
    Returns (lut float64 (m, 4): z for codes 00, 01, 10, 11 (g = 2, missing, 1, 0),
    p_a1 float64 (m,)). A variant without variance (p = 0 or 1, or no call) gets z = 0
    everywhere: it adds nothing, as in plink2.
    """
    hom_a1 = np.asarray(hom_a1, np.int64)
    het = np.asarray(het, np.int64)
    called = hom_a1 + het + np.asarray(hom_a2, np.int64)
    with np.errstate(invalid="ignore", divide="ignore"):
        p = (2 * hom_a1 + het) / (2.0 * called)
        sd = np.sqrt(2 * p * (1 - p))
        ok = (called > 0) & (sd > 0)
        lut = np.stack([(2 - 2 * p) / sd, np.zeros_like(p), (1 - 2 * p) / sd, -2 * p / sd], 1)
    lut[~ok] = 0.0
    return lut, p


def _variant_chunks(n_variants: int, n_samples: int, itemsize: int, block_bytes: int):
    size = max(1, min(n_variants, block_bytes // max(1, n_samples * itemsize)))
    return tuple(b - a for a, b in plink.variant_blocks(n_variants, size)) or (0,)


def standardized_dask(bf, variant_idx: np.ndarray, sample_idx: np.ndarray, lut: np.ndarray,
                      dtype=np.float32, block_bytes: int = 64 << 20):
    """A lazy dask array of standardised genotypes, (n_variants, n_samples) of ``dtype``.

    Each chunk (about ``block_bytes``) reads its variants' .bed rows (``bf.packed_rows``:
    any genotype source of :mod:`cmix.readers.sources`) and decodes them through ``lut`` (see :func:`standardizing_table`), so any
    computation over it streams the file in bounded memory.
    """
    import dask.array as da  # heavy to import (0.9 s); only a PCA pass needs it

    variant_idx = np.asarray(variant_idx, np.int64)
    byte_idx, shift = sample_offsets(sample_idx)
    lut = np.asarray(lut, dtype)
    chunks = (_variant_chunks(len(variant_idx), len(byte_idx), np.dtype(dtype).itemsize,
                              block_bytes), (len(byte_idx),))

    def block(block_info=None):
        (v0, v1), _ = block_info[None]["array-location"]
        rows = bf.packed_rows(variant_idx[v0:v1])
        out = np.empty((v1 - v0, len(byte_idx)), dtype)
        _standardize_block(rows, byte_idx, shift, lut[v0:v1], out)
        return out

    return da.map_blocks(block, chunks=chunks, dtype=dtype, meta=np.empty((0, 0), dtype))
