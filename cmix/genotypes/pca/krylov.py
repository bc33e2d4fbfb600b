"""The randomized block Krylov PCA (:func:`randomized_pca`), one pass over X a block.

Every pass streams X (a dask array of standardised genotypes,
:mod:`cmix.genotypes.pca.standardize`) in chunks on dask's threaded scheduler with
one BLAS thread a chunk and a fixed tree of sums (:func:`compute_on_threads`,
:func:`tree_sum`), so the result does not depend on the thread count.
"""

from __future__ import annotations

import numpy as np
from threadpoolctl import threadpool_limits


def _orthonormalize(y: np.ndarray, against: list[np.ndarray]) -> np.ndarray:
    """Columns of ``y`` (float64, tall) made orthonormal and orthogonal to the
    orthonormal blocks ``against``: block Gram-Schmidt twice, then the eigenvectors of
    the small Gram matrix (Cholesky-QR2 style); directions already in the span (relative
    norm < 1e-10) are dropped. Returns (n, <= y.shape[1])."""
    q = y.copy()
    for _ in range(2):
        for b in against:
            q -= b @ (b.T @ q)
        w, v = np.linalg.eigh(q.T @ q)
        ok = w > max(w.max(), 0.0) * 1e-20
        if not ok.any():
            return q[:, :0]
        q = q @ (v[:, ok] / np.sqrt(w[ok]))
    return q


def randomized_pca(x, n_pcs: int, *, seed: int = 0, n_blocks: int | None = None,
                   block_width: int | None = None,
                   threads: int = 1) -> tuple[np.ndarray, np.ndarray, int]:
    """Top ``n_pcs`` eigenpairs of X' X / m for a dask array X (m variants x n samples).

    Randomized block Krylov (Musco & Musco 2015; the method of plink2 --pca approx,
    Galinsky et al. 2016, with the Krylov basis kept on the sample side): from a
    Gaussian start Q_0 (n x l, ``seed``), Q_{i+1} = orth(X' X Q_i) against all earlier
    blocks, for ``n_blocks`` blocks; the Ritz pairs of X' X on their span (the small
    matrix K' X' X K, from products already computed) give the PCs. Each block costs
    one pass over X, computing X' (X Q_i) chunk by chunk. Defaults follow plink2's
    approx: l = 2k, k + 1 blocks (fewer for k > 10, so the basis stays near 512
    columns). Memory: the basis and its image (n x 512 float64 each, at most) and one
    chunk of X.

    Returns (eigenvectors float64 (n, k) with unit columns, each signed so that its
    largest entry is positive; eigenvalues float64 (k,) of X' X / m, descending;
    number of passes over X).
    """
    m, n = x.shape
    k = n_pcs
    width = block_width or 2 * k
    n_blocks = n_blocks or min(k + 1, max(3, 512 // width))   # basis <= ~512 columns
    rng = np.random.default_rng(seed)
    q = _orthonormalize(rng.standard_normal((n, width)), [])
    basis, images = [], []
    for i in range(n_blocks):
        y = np.asarray(_gram_times(x, q.astype(x.dtype), threads), np.float64)
        basis.append(q)
        images.append(y)
        if i + 1 < n_blocks:
            q = _orthonormalize(y, basis)
            if q.shape[1] == 0:
                break
    kb = np.hstack(basis)
    t = kb.T @ np.hstack(images)
    theta, s = np.linalg.eigh((t + t.T) / 2)
    order = np.argsort(theta)[::-1][:k]
    u = kb @ s[:, order]
    u *= np.sign(u[np.abs(u).argmax(axis=0), np.arange(u.shape[1])])
    return u, theta[order] / m, len(basis)


def _gram_times(x, q: np.ndarray, threads: int) -> np.ndarray:
    """X' (X q) for dask X (m x n) and numpy q (n x l): one pass over X's chunks."""
    import dask  # heavy to import (0.2 s); only a PCA pass needs it

    q = dask.delayed(q)
    parts = [dask.delayed(_chunk_gram)(b, q) for b in x.to_delayed().ravel()]
    return compute_on_threads(threads, tree_sum(parts))[0]


def compute_on_threads(threads: int, *delayed):
    """Compute on dask's threaded scheduler with ``threads`` workers, each chunk's
    products on one BLAS thread: every chunk is then computed the same way and the
    tree of sums is fixed, so the result does not depend on the thread count."""
    import dask  # heavy to import (0.2 s); only a PCA pass needs it

    with threadpool_limits(1):
        return dask.compute(*delayed, scheduler="threads", num_workers=threads)


def _chunk_gram(xb: np.ndarray, q: np.ndarray) -> np.ndarray:
    return xb.T @ (xb @ q)


def tree_sum(parts: list):
    """Add delayed arrays pairwise (a fixed order, so the same result every run)."""
    import dask  # heavy to import (0.2 s); only a PCA pass needs it

    while len(parts) > 1:
        parts = [dask.delayed(np.add)(*parts[i:i + 2]) if i + 1 < len(parts) else parts[i]
                 for i in range(0, len(parts), 2)]
    return parts[0]
