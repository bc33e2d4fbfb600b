"""The PCA of the fitted samples and the projection of the others (:func:`fit_and_project`).

Genotypes are standardised as plink2 ``--pca`` does (:mod:`cmix.genotypes.pca.standardize`)
on the fitted samples (the unrelated set); the top PCs come from the randomized block
Krylov method (:mod:`cmix.genotypes.pca.krylov`) whose every pass streams the .bed, so
memory stays flat in the number of variants. Every other sample asked for is projected
onto the same axes with the SNP loadings; its scores are on the scale of the fitted
samples' eigenvectors (:class:`Pca`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from threadpoolctl import threadpool_limits

from ...errors import CmixError
from ..kernels import count_genotypes, set_numba_threads
from .krylov import compute_on_threads, randomized_pca, tree_sum
from .standardize import standardized_dask, standardizing_table


@dataclass
class Pca:
    """A fitted PCA and the projection of further samples.

    eigenvectors: float64 (n_fit, k), unit columns (plink2's .eigenvec values).
    eigenvalues: float64 (k,) of the GRM Z Z' / m (plink2's .eigenval), Z the
    standardised genotypes of the fitted samples (n_fit x m), m = number of variants
    that vary among the fitted founders.
    loadings: float64 (m, k), unit SNP loadings v_k = Z' u_k / sqrt(m lambda_k).
    projected: float64 (n_other, k), Z_other v_k / sqrt(m lambda_k): on the scale of
    the eigenvectors (a fitted sample would get back its own eigenvector entry).
    alt_count, allele_count: int64 (m,), A1 (ALT) alleles and called alleles among the
    fitted founders (the frequencies that standardise). n_passes: over the .bed.
    m counts only the variants that vary among the fitted founders (``used``); the
    others are not part of the PCA or its outputs.
    """

    eigenvectors: np.ndarray
    eigenvalues: np.ndarray
    loadings: np.ndarray
    projected: np.ndarray
    alt_count: np.ndarray
    allele_count: np.ndarray
    n_passes: int
    used: np.ndarray = None     # bool (len(variant_idx) given,): the variants that vary

    @property
    def n_variants(self) -> int:
        return self.loadings.shape[0]

    def score_scale(self) -> np.ndarray:
        """m sqrt(lambda_k), float64 (k,): plink2 ``--score OUT.eigenvec.allele ...
        variance-standardize no-mean-imputation cols=+scoresums`` with
        ``--read-freq OUT.acount`` gives PCk_SUM; PCk_SUM / this = PCk of OUT.eigenvec."""
        return self.n_variants * np.sqrt(self.eigenvalues)


def fit_and_project(bf, variant_idx: np.ndarray, fit_idx: np.ndarray, other_idx: np.ndarray,
                    n_pcs: int, *, seed: int = 0, threads: int | None = None,
                    block_bytes: int = 64 << 20) -> Pca:
    """PCA of samples ``fit_idx`` over variants ``variant_idx`` (int indices into the
    .fam/.bim), then the projection of samples ``other_idx``: a pass counting alleles,
    the Krylov passes in float32 and one final pass in float64 for loadings and
    projection. Raises CmixError when fewer than ``n_pcs`` variants vary.

    threads: allele counting threads and dask workers (None = all cores). BLAS runs on
    one thread throughout, so the result is the same at any thread count.
    """
    variant_idx = np.asarray(variant_idx, np.int64)
    fit_idx = np.asarray(fit_idx, np.int64)
    other_idx = np.asarray(other_idx, np.int64)
    counts = count_genotypes(bf, fit_idx, threads=threads, show_progress=False)
    hom_a1, het, hom_a2 = (counts.hom_a1[variant_idx], counts.het[variant_idx],
                           counts.hom_a2[variant_idx])
    lut, _ = standardizing_table(hom_a1, het, hom_a2)
    used = (lut != 0).any(axis=1)
    n_informative = int(used.sum())
    if n_informative < n_pcs:
        raise CmixError(f"--pcs {n_pcs}: only {n_informative} of the {len(variant_idx)} "
                        "variants vary among the fitted founders; ask for fewer PCs or "
                        "keep more variants")
    # a variant without variance among the fitted founders (monomorphic, or no call) adds
    # nothing to Z Z' and is left out of m too, so it does not dilute the eigenvalues
    variant_idx, lut = variant_idx[used], lut[used]
    hom_a1, het, hom_a2 = hom_a1[used], het[used], hom_a2[used]
    x = standardized_dask(bf, variant_idx, fit_idx, lut, np.float32, block_bytes)
    x_all = standardized_dask(bf, variant_idx, np.concatenate([fit_idx, other_idx]), lut,
                              np.float64, block_bytes)
    n_threads = set_numba_threads(threads)
    with threadpool_limits(1):
        u, eigenvalues, n_passes = randomized_pca(x, n_pcs, seed=seed, threads=n_threads)
        scale = np.sqrt(eigenvalues * len(variant_idx))
        loadings, projected = _loadings_and_projection(x_all, len(fit_idx), u / scale,
                                                       n_threads)
    return Pca(eigenvectors=u, eigenvalues=eigenvalues, loadings=loadings,
               projected=projected / scale, alt_count=2 * hom_a1 + het,
               allele_count=2 * (hom_a1 + het + hom_a2), n_passes=n_passes + 1, used=used)


def _loadings_and_projection(x_all, n_fit: int, u_scaled: np.ndarray, threads: int):
    """One pass over X (dask, m x (n_fit + n_other), fitted samples first):
    (X_fit u_scaled (m x k), X_other' X_fit u_scaled (n_other x k))."""
    import dask  # heavy to import (0.2 s); only a PCA pass needs it

    u = dask.delayed(u_scaled)
    parts = [dask.delayed(_chunk_project)(b, u, n_fit) for b in x_all.to_delayed().ravel()]
    loads = dask.delayed(np.vstack)([p[0] for p in parts])
    return compute_on_threads(threads, loads, tree_sum([p[1] for p in parts]))


def _chunk_project(xb, u_scaled, n_fit):
    v = xb[:, :n_fit] @ u_scaled
    return v, xb[:, n_fit:].T @ v
