"""Pseudo-labels by label propagation on a kNN graph (Iscen et al. 2019, Zhou et al. 2004).

No N x N matrix is ever formed: the kNN search runs in blocks of rows with torch (CPU or
GPU), the graph is a scipy.sparse matrix, and each class's linear system
(I - alpha A) f_c = y_c is solved with conjugate gradients over the sparse operator.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp
from scipy.sparse.linalg import cg

from ..io import log


@dataclass
class PropagationResult:
    """pseudo_label: (N,) int64, -1 where no class reached the row; weight: (N,) certainty
    1 - H(p)/log(C) (1 for labeled rows, 0 where unlabeled); prob: (N, C) row-normalised
    scores; missing_classes: classes with no labeled row (their scores are 0)."""

    pseudo_label: np.ndarray
    weight: np.ndarray
    prob: np.ndarray
    missing_classes: list = field(default_factory=list)


def knn_graph(z, k: int = 3, block: int = 4096, power: float = 3.0) -> sp.csr_matrix:
    """Symmetric kNN affinity W = G + G^T (N, N) sparse, zero diagonal.

    z: (N, d) torch tensor or array (rows are L2-normalised here). g_ij = max(cos_ij, 0)^power
    for j among the k nearest other rows of i (by cosine similarity).
    """
    import torch

    z = torch.as_tensor(z)
    z = torch.nn.functional.normalize(z.float(), dim=1)
    n = len(z)
    k = min(k, n - 1)
    rows, cols, vals = [], [], []
    for s in range(0, n, block):
        sims = z[s:s + block] @ z.T                       # (b, N), one block at a time
        idx = torch.arange(s, min(s + block, n), device=z.device)
        sims[torch.arange(len(idx), device=z.device), idx] = float("-inf")
        v, j = torch.topk(sims, k, dim=1)
        rows.append(idx.repeat_interleave(k).cpu().numpy())
        cols.append(j.flatten().cpu().numpy())
        vals.append(v.flatten().clamp_min(0).pow(power).cpu().numpy().astype(np.float64))
    g = sp.csr_matrix((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))),
                      shape=(n, n))
    w = (g + g.T).tocsr()
    w.setdiag(0)
    w.eliminate_zeros()
    return w


def normalised_adjacency(w: sp.spmatrix) -> sp.csr_matrix:
    """A = D^-1/2 W D^-1/2 (isolated rows keep degree 1 so nothing divides by 0)."""
    d = np.asarray(w.sum(axis=1)).ravel()
    d_inv_sqrt = 1.0 / np.sqrt(np.where(d > 0, d, 1.0))
    dm = sp.diags(d_inv_sqrt)
    return (dm @ w @ dm).tocsr()


def propagate(w: sp.spmatrix, labeled_pos: np.ndarray, labeled_y: np.ndarray,
              n_classes: int, alpha: float = 0.99, rtol: float = 1e-6,
              maxiter: int = 500, class_prior: bool = True) -> PropagationResult:
    """Solve (I - alpha A) f_c = y_c for each class c by conjugate gradients.

    w: (N, N) sparse affinity; labeled_pos: positions of labeled rows; labeled_y: their
    classes. y_c = 1/|L_c| on labeled rows of class c, so f_c acts as a class-conditional
    score; scores are clipped at 0 and each row normalised to p. The certainty weight is
    w = 1 - H(p)/log C of that propagated distribution itself, so a graph that carries no
    label information gives w ~ 0. The pseudo-label is argmax p, or with ``class_prior``
    argmax of p times each class's share of the labeled rows (Bayes' rule with the labeled
    class frequencies as the prior): the prior may move the argmax on an imbalanced trait,
    where the equal-prior argmax hands rows of an uninformative graph to a rare class, but
    it never adds certainty. Labeled rows keep their true label with weight 1.

    The solves run with numpy's BLAS on one thread: OpenBLAS splits the dot products of
    vectors longer than 10,000 among its threads, so the scores (and the pseudo-labels'
    weights) would change in the last bits with the thread count (OMP_NUM_THREADS or
    OPENBLAS_NUM_THREADS). CG's time goes to the sparse products, which scipy runs on one
    thread anyway.
    """
    from threadpoolctl import threadpool_limits

    n = w.shape[0]
    labeled_pos = np.asarray(labeled_pos, dtype=np.int64)
    labeled_y = np.asarray(labeled_y, dtype=np.int64)
    a = normalised_adjacency(w)
    op = (sp.identity(n, format="csr") - alpha * a).tocsr()
    scores = np.zeros((n, n_classes))
    missing = []
    for c in range(n_classes):
        members = labeled_pos[labeled_y == c]
        if len(members) == 0:
            missing.append(c)
            continue
        y = np.zeros(n)
        y[members] = 1.0 / len(members)
        with threadpool_limits(limits=1, user_api="blas"):
            f, info = cg(op, y, rtol=rtol, maxiter=maxiter)
        if info > 0:
            log(f"label propagation: conjugate gradients for class {c} stopped at maxiter "
                f"{maxiter} before rtol {rtol:g} (residual "
                f"{np.linalg.norm(op @ f - y) / np.linalg.norm(y):.2g}); raise lp_maxiter")
        scores[:, c] = f
    scores = np.clip(scores, 0, None)
    total = scores.sum(1)
    reached = total > 0
    prob = np.zeros_like(scores)
    prob[reached] = scores[reached] / total[reached, None]
    with np.errstate(divide="ignore", invalid="ignore"):
        ent = -np.where(prob > 0, prob * np.log(prob), 0.0).sum(1)
    weight = np.where(reached, 1.0 - ent / np.log(n_classes), 0.0) if n_classes > 1 \
        else reached.astype(float)
    decide = prob
    if class_prior:
        decide = prob * (np.bincount(labeled_y, minlength=n_classes) / max(len(labeled_y), 1))
    pseudo = np.where(reached, decide.argmax(1), -1)
    pseudo[labeled_pos] = labeled_y
    weight[labeled_pos] = 1.0
    prob[labeled_pos] = np.eye(n_classes)[labeled_y]
    return PropagationResult(pseudo_label=pseudo.astype(np.int64),
                             weight=np.clip(weight, 0.0, 1.0), prob=prob,
                             missing_classes=missing)


def label_propagation(z, labeled_pos, labeled_y, n_classes: int, k: int = 3,
                      alpha: float = 0.99, rtol: float = 1e-6, maxiter: int = 500,
                      block: int = 4096, class_prior: bool = True) -> PropagationResult:
    """kNN graph of latent rows z (N, d) then :func:`propagate`."""
    w = knn_graph(z, k=k, block=block)
    return propagate(w, labeled_pos, labeled_y, n_classes, alpha=alpha, rtol=rtol,
                     maxiter=maxiter, class_prior=class_prior)
