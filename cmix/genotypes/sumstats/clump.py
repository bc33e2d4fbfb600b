"""LD clumping with plink 1.9 ``--clump`` rules (:func:`clump`) and its EM haplotype r2.

Index SNPs in p order with p <= p1 that are not yet in a clump; each takes into its
clump the not yet clumped SNPs within ``kb`` kilobases with p <= p2 and r2 > r2
threshold. r2 is plink 1.9's: from two-locus haplotype frequencies estimated by maximum
likelihood (double heterozygotes phased by EM, :func:`haplotype_r2`) in the cohort's
kept samples called at both SNPs; not the squared correlation of allele counts (that
is ``plink --r2``'s, which differs by up to ~0.15 on the same pair).
"""

from __future__ import annotations

from collections import OrderedDict

import numpy as np
import pandas as pd

from ...logs import progress
from .harmonise import chrom_sort_key


class _GenotypeCache:
    """Allele counts of single SNPs for the kept samples, LRU-cached (bounded bytes)."""

    def __init__(self, bf, sample_idx, max_bytes=2 << 30):
        self._read = lambda i: bf.read(np.array([i]), sample_idx)[0]
        self._cache: OrderedDict[int, np.ndarray] = OrderedDict()
        self._max = max(1, max_bytes // max(1, len(sample_idx) if sample_idx is not None
                                               else bf.n_samples))

    def get(self, i: int) -> np.ndarray:
        if i in self._cache:
            self._cache.move_to_end(i)
            return self._cache[i]
        g = self._read(i)
        self._cache[i] = g
        if len(self._cache) > self._max:
            self._cache.popitem(last=False)
        return g


def haplotype_r2(g0: np.ndarray, g: np.ndarray) -> np.ndarray:
    """r2 between one SNP and several from maximum-likelihood two-locus haplotype
    frequencies, as plink 1.9 ``--clump`` (and ``--ld``) computes it.

    g0: int8 (n_samples,); g: int8 (n_snps, n_samples) allele counts, -1 = missing.
    Each pair uses the samples called at both SNPs. Haplotype counts are known except
    for double heterozygotes; the count x of those in the coupling phase solves the EM
    fixed point x (AB + CD) = d AB (A = f11 + x, B = f22 + x, C = f12 + d - x,
    D = f21 + d - x, d = double heterozygotes), a cubic; of its real roots in [0, d] the
    one with the highest likelihood is taken (plink's em_phase_hethet does the same).
    Then r2 = D'^2 / (p1 (1 - p1) q1 (1 - q1)). Returns float64 (n_snps,), 0 where a SNP
    is monomorphic among the jointly called samples.
    """
    g = np.atleast_2d(g)
    k = g.shape[0]
    both = (g >= 0) & (g0 >= 0)[None, :]
    code = np.where(both, g0[None, :].astype(np.int16) * 3 + g, 9)
    n = np.stack([(code == c).sum(1) for c in range(9)], axis=1).astype(np.float64)
    n = n.reshape(k, 3, 3)  # n[:, count at g0, count at g]
    f11 = 2 * n[:, 2, 2] + n[:, 2, 1] + n[:, 1, 2]
    f12 = 2 * n[:, 2, 0] + n[:, 2, 1] + n[:, 1, 0]
    f21 = 2 * n[:, 0, 2] + n[:, 1, 2] + n[:, 0, 1]
    f22 = 2 * n[:, 0, 0] + n[:, 1, 0] + n[:, 0, 1]
    d = n[:, 1, 1]
    h = f11 + f12 + f21 + f22 + 2 * d
    # 2x^3 + a2 x^2 + a1 x + a0 = 0, roots as eigenvalues of the companion matrix
    a2 = f11 + f22 - f12 - f21 - 3 * d
    a1 = f11 * f22 + (f12 + d) * (f21 + d) - d * (f11 + f22)
    a0 = -d * f11 * f22
    companion = np.zeros((k, 3, 3))
    companion[:, 1, 0] = companion[:, 2, 1] = 1.0
    companion[:, 0, 2], companion[:, 1, 2], companion[:, 2, 2] = -a0 / 2, -a1 / 2, -a2 / 2
    roots = np.linalg.eigvals(companion) if k else np.zeros((0, 3))
    best, best_ll = np.zeros(k), np.full(k, -np.inf)
    with np.errstate(divide="ignore", invalid="ignore"):
        for r in range(3):
            x = roots[:, r]
            ok = (np.abs(x.imag) < 1e-6) & (x.real >= -1e-9) & (x.real <= d + 1e-9)
            x = np.clip(x.real, 0, d)
            p11, p22, p12, p21 = (f11 + x) / h, (f22 + x) / h, (f12 + d - x) / h, (f21 + d - x) / h
            ll = sum(np.where(c > 0, c * np.log(p), 0.0)
                     for c, p in ((f11, p11), (f22, p22), (f12, p12), (f21, p21),
                                  (d, p11 * p22 + p12 * p21)))
            take = ok & (ll > best_ll)
            best[take], best_ll[take] = x[take], ll[take]
        p11 = (f11 + best) / h
        p1, q1 = (f11 + f12 + d) / h, (f11 + f21 + d) / h
        r2 = (p11 - p1 * q1) ** 2 / (p1 * (1 - p1) * q1 * (1 - q1))
    return np.where(np.isfinite(r2), r2, 0.0)


def clump(ranked: pd.DataFrame, bf, sample_idx=None, *, r2: float = 0.5, kb: float = 250,
          p1: float = 1.0, p2: float | None = None, max_index: int | None = None) -> np.ndarray:
    """Greedy LD clumping with plink 1.9 ``--clump`` rules; returns index-SNP rows.

    ranked: :func:`cmix.genotypes.sumstats.harmonise.rank` output (best first). bf: the
    opened .bed; sample_idx: rows of the samples whose genotypes give r2 (None = all). A SNP joins an index SNP's clump
    when it is on the same chromosome within ``kb`` * 1000 bp, has p <= p2 (default p1),
    is not already in a clump, and r2 > ``r2``. Stops after ``max_index`` index SNPs.
    Returns int64 positions into ``ranked`` of the index SNPs, best first.
    """
    p2 = p1 if p2 is None else p2
    log_p1, log_p2 = np.log10(p1) if p1 > 0 else -np.inf, np.log10(p2) if p2 > 0 else -np.inf
    n = len(ranked)
    log_p = ranked["log10_p"].to_numpy()
    chrom = chrom_sort_key(ranked["chrom"])
    pos = ranked["pos"].to_numpy(np.int64)
    bim_index = ranked["bim_index"].to_numpy(np.int64)
    eligible = log_p <= log_p2 + 1e-12
    clumped = np.zeros(n, dtype=bool)
    cache = _GenotypeCache(bf, sample_idx)
    window = kb * 1000
    # positions sorted per chromosome for the window search
    order = np.lexsort((pos, chrom))
    s_chrom, s_pos = chrom[order], pos[order]
    index_rows = []
    bar = progress(total=max_index or None, desc="clumping", unit="index SNP")
    for i in range(n):
        if clumped[i] or log_p[i] > log_p1 + 1e-12:
            continue
        index_rows.append(i)
        clumped[i] = True
        bar.update(1)
        if max_index and len(index_rows) >= max_index:
            break
        lo = np.searchsorted(s_chrom, chrom[i], "left")
        hi = np.searchsorted(s_chrom, chrom[i], "right")
        a = lo + np.searchsorted(s_pos[lo:hi], pos[i] - window, "left")
        b = lo + np.searchsorted(s_pos[lo:hi], pos[i] + window, "right")
        members = order[a:b]
        members = members[~clumped[members] & eligible[members]]
        if len(members) == 0:
            continue
        g0 = cache.get(int(bim_index[i]))
        g = np.stack([cache.get(int(bim_index[j])) for j in members])
        clumped[members[haplotype_r2(g0, g) > r2]] = True
    bar.close()
    return np.asarray(index_rows, dtype=np.int64)
