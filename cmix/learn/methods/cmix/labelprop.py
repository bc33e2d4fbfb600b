"""Pseudo-labels by label propagation on a kNN graph (Iscen et al. 2019, Zhou et al. 2004).

No N x N matrix is ever formed: the kNN search runs in blocks of rows with torch on the
training device (a matrix product of each block against every row), the graph is a
scipy.sparse matrix, and the linear systems (I - alpha A) f_c = y_c of every class (and
every alpha tried) are solved at once with conjugate gradients over the sparse operator,
with torch on the training device.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp
import torch

from ....logs import log
from ....runtime import one_blas_thread
from ...config import PseudoLabels
from .losses import fixed_order_sum


@dataclass
class PropagationResult:
    """pseudo_label: (N,) int64, -1 where no class reached the row; weight: (N,) certainty
    1 - H(p)/log(C) (1 for labeled rows, 0 where unlabeled); prob: (N, C) row-normalised
    scores; missing_classes: classes with no labeled row (their scores are 0)."""

    pseudo_label: np.ndarray
    weight: np.ndarray
    prob: np.ndarray
    missing_classes: list = field(default_factory=list)


def knn_neighbours(z, k: int, block: int = PseudoLabels.lp_block):
    """The k nearest other rows of each row of z (N, d) by cosine similarity:
    (index (N, k) int64, similarity (N, k) float64, numpy), most similar first. Runs with
    torch where z is (a tensor on a GPU: blocks of at least 4,096 rows)."""
    z = torch.as_tensor(z)
    z = torch.nn.functional.normalize(z.float(), dim=1)
    n = len(z)
    if z.device.type != "cpu":          # a GPU wants large products; the rows are the same
        block = max(block, 4096)
    k = min(k, n - 1)
    idx_out, sim_out = [], []
    # one (block, N) buffer for every block: a fresh one each time costs its page faults
    buf = torch.empty((min(block, n), n), dtype=z.dtype, device=z.device)
    for s in range(0, n, block):
        idx = torch.arange(s, min(s + block, n), device=z.device)
        sims = torch.mm(z[s:s + len(idx)], z.T, out=buf[:len(idx)])    # (b, N)
        sims[torch.arange(len(idx), device=z.device), idx] = float("-inf")
        v, j = torch.topk(sims, k, dim=1)
        idx_out.append(j.cpu().numpy())
        sim_out.append(v.cpu().numpy().astype(np.float64))
    return np.concatenate(idx_out), np.concatenate(sim_out)


def graph_from_neighbours(index: np.ndarray, sim: np.ndarray, k: int,
                          power: float = 3.0) -> sp.csr_matrix:
    """W = G + G^T (N, N) sparse, zero diagonal, from the first k columns of
    :func:`knn_neighbours`' output: g_ij = max(cos_ij, 0)^power for j among i's k nearest."""
    n = len(index)
    k = min(k, index.shape[1])
    rows = np.repeat(np.arange(n), k)
    vals = np.clip(sim[:, :k], 0, None).ravel() ** power
    g = sp.csr_matrix((vals, (rows, index[:, :k].ravel())), shape=(n, n))
    w = (g + g.T).tocsr()
    w.setdiag(0)
    w.eliminate_zeros()
    return w


def knn_graph(z, k: int = 3, block: int = PseudoLabels.lp_block,
              power: float = 3.0) -> sp.csr_matrix:
    """Symmetric kNN affinity W = G + G^T (N, N) sparse, zero diagonal.

    z: (N, d) torch tensor or array (rows are L2-normalised here). g_ij = max(cos_ij, 0)^power
    for j among the k nearest other rows of i (by cosine similarity).
    """
    index, sim = knn_neighbours(z, k, block)
    return graph_from_neighbours(index, sim, k, power)


def normalised_adjacency(w: sp.spmatrix) -> sp.csr_matrix:
    """A = D^-1/2 W D^-1/2 (isolated rows keep degree 1 so nothing divides by 0)."""
    d = np.asarray(w.sum(axis=1)).ravel()
    d_inv_sqrt = 1.0 / np.sqrt(np.where(d > 0, d, 1.0))
    dm = sp.diags(d_inv_sqrt)
    return (dm @ w @ dm).tocsr()


def solve_columns(a: sp.spmatrix, y: np.ndarray, alpha: float, rtol: float,
                  maxiter: int, device="cpu"):
    """Solve (I - alpha A) f_c = y_c for every column c by conjugate gradients, all
    columns at once, in float64 on ``device`` (torch: the sparse products and the dot
    products run there).

    a: (N, N) symmetric sparse A; y: (N, C) right-hand sides. Each column stops, as
    scipy's cg does, once its residual is at most rtol times the norm of its y_c (or
    after ``maxiter`` iterations); the others go on. The dot
    products are summed in an order that depends neither on the thread count nor on
    the other columns (:func:`cmix.learn.methods.cmix.losses.fixed_order_sum`). Returns (f (N, C)
    numpy, bool (C,) columns that reached maxiter first)."""
    dev = torch.device(device)
    a = a.tocsr()
    with warnings.catch_warnings():             # torch calls its sparse CSR support beta
        warnings.simplefilter("ignore", UserWarning)
        a_t = torch.sparse_csr_tensor(torch.from_numpy(a.indptr.astype(np.int64)),
                                      torch.from_numpy(a.indices.astype(np.int64)),
                                      torch.from_numpy(a.data.astype(np.float64)),
                                      size=a.shape, check_invariants=False).to(dev)
    b = torch.from_numpy(np.ascontiguousarray(y, dtype=np.float64)).to(dev)
    alpha = float(alpha)

    def dots(u, v):                                   # (C,) column dot products
        return fixed_order_sum((u * v).T.contiguous())

    x = torch.zeros_like(b)
    r = b.clone()
    p = r.clone()
    rr = dots(r, r)
    tol = rtol * torch.sqrt(dots(b, b))
    active = torch.sqrt(rr) > tol
    for _ in range(maxiter):
        if not bool(active.any()):                    # once an iteration, between epochs
            break
        ap = p - alpha * (a_t @ p)
        pap = dots(p, ap)
        step = torch.where(active, rr / torch.where(active, pap, 1.0), 0.0)
        x = x + step * p
        r = r - step * ap
        rr_new = dots(r, r)
        beta = torch.where(active, rr_new / torch.where(active, rr, 1.0), 0.0)
        p = torch.where(active, r + beta * p, p)
        rr = torch.where(active, rr_new, rr)
        active = active & (torch.sqrt(rr) > tol)
    return x.cpu().numpy(), active.cpu().numpy()


@one_blas_thread()
def propagate(w: sp.spmatrix, labeled_pos: np.ndarray, labeled_y: np.ndarray,
              n_classes: int, lp: PseudoLabels = PseudoLabels(),
              device="cpu") -> PropagationResult:
    """Solve (I - alpha A) f_c = y_c for each class c by conjugate gradients
    (:func:`solve_columns`, on ``device``).

    w: (N, N) sparse affinity; labeled_pos: positions of labeled rows; labeled_y: their
    classes; lp: the config's ``pseudo_labels`` section (alpha = lp_alpha; CG to relative
    tolerance lp_rtol or lp_maxiter iterations; class_prior = lp_class_prior).
    y_c = 1/|L_c| on labeled rows of class c, so f_c acts as a class-conditional score;
    scores are clipped at 0 and each row normalised to p. The certainty weight is
    w = 1 - H(p)/log C of that propagated distribution itself, so a graph that carries no
    label information gives w ~ 0. The pseudo-label is argmax p, or with ``class_prior``
    argmax of p times each class's share of the labeled rows (Bayes' rule with the labeled
    class frequencies as the prior): the prior may move the argmax on an imbalanced trait,
    where the equal-prior argmax hands rows of an uninformative graph to a rare class, but
    it never adds certainty. Labeled rows keep their true label with weight 1. The
    entropy is normalised by the log of the number of classes that have a labeled row
    (only those can receive mass), so a class without labeled rows does not make every
    row look more certain than it is. The numpy steps run on one BLAS thread."""
    labeled_pos = np.asarray(labeled_pos, dtype=np.int64)
    labeled_y = np.asarray(labeled_y, dtype=np.int64)
    a = normalised_adjacency(w)
    n = w.shape[0]
    missing = [c for c in range(n_classes) if not np.any(labeled_y == c)]
    present = [c for c in range(n_classes) if c not in missing]
    y = np.zeros((n, len(present)))
    for j, c in enumerate(present):
        members = labeled_pos[labeled_y == c]
        y[members, j] = 1.0 / len(members)
    f, unconverged = solve_columns(a, y, lp.lp_alpha, lp.lp_rtol, lp.lp_maxiter, device)
    for j in np.flatnonzero(unconverged):
        log(f"label propagation: conjugate gradients for class {present[j]} (alpha "
            f"{lp.lp_alpha:g}) stopped at maxiter {lp.lp_maxiter} before rtol "
            f"{lp.lp_rtol:g}; raise lp_maxiter")
    scores = np.zeros((n, n_classes))
    scores[:, present] = f
    return _pseudo_labels(scores, labeled_pos, labeled_y, n_classes, missing,
                          lp.lp_class_prior)


def _pseudo_labels(scores: np.ndarray, labeled_pos, labeled_y, n_classes: int, missing: list,
                   class_prior: bool) -> PropagationResult:
    """Pseudo-labels, certainty weights and distributions of propagated class scores
    (N, C) (:func:`propagate`)."""
    scores = np.clip(scores, 0, None)
    total = scores.sum(1)
    reached = total > 0
    prob = np.zeros_like(scores)
    prob[reached] = scores[reached] / total[reached, None]
    with np.errstate(divide="ignore", invalid="ignore"):
        ent = -np.where(prob > 0, prob * np.log(prob), 0.0).sum(1)
    n_seeded = n_classes - len(missing)          # classes that can receive mass
    weight = np.where(reached, 1.0 - ent / np.log(n_seeded), 0.0) if n_seeded > 1 \
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


def label_propagation(z, labeled_pos, labeled_y, n_classes: int,
                      lp: PseudoLabels = PseudoLabels()) -> PropagationResult:
    """kNN graph of latent rows z (N, d) (k = lp.lp_k, searched in blocks of lp.lp_block
    rows) then :func:`propagate`."""
    w = knn_graph(z, k=lp.lp_k, block=lp.lp_block)
    return propagate(w, labeled_pos, labeled_y, n_classes, lp)
