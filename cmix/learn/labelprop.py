"""Pseudo-labels by label propagation on a kNN graph (Iscen et al. 2019, Zhou et al. 2004).

No N x N matrix is ever formed: the kNN search runs in blocks of rows with torch on the
training device (a matrix product of each block against every row), the graph is a
scipy.sparse matrix, and the linear systems (I - alpha A) f_c = y_c of every class (and
every alpha tried) are solved at once with conjugate gradients over the sparse operator,
with torch on the training device.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field, replace

import numpy as np
import scipy.sparse as sp

from ..logs import log
from ..runtime import one_blas_thread
from .config import PseudoLabels


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
    import torch

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


def solve_columns(a: sp.spmatrix, y: np.ndarray, alphas: np.ndarray, rtol: float,
                  maxiter: int, device="cpu"):
    """Solve (I - alpha_c A) f_c = y_c for every column c by conjugate gradients, all
    columns at once, in float64 on ``device`` (torch: the sparse products and the dot
    products run there).

    a: (N, N) symmetric sparse A; y: (N, C) right-hand sides; alphas: (C,) each column's
    alpha. Each column stops, as scipy's cg does, once its residual is at most rtol
    times the norm of its y_c (or after ``maxiter`` iterations); the others go on. The dot
    products are summed in an order that depends neither on the thread count nor on
    the other columns (:func:`cmix.learn.losses.fixed_order_sum`). Returns (f (N, C)
    numpy, bool (C,) columns that reached maxiter first)."""
    import torch

    from .losses import fixed_order_sum

    dev = torch.device(device)
    a = a.tocsr()
    with warnings.catch_warnings():             # torch calls its sparse CSR support beta
        warnings.simplefilter("ignore", UserWarning)
        a_t = torch.sparse_csr_tensor(torch.from_numpy(a.indptr.astype(np.int64)),
                                      torch.from_numpy(a.indices.astype(np.int64)),
                                      torch.from_numpy(a.data.astype(np.float64)),
                                      size=a.shape, check_invariants=False).to(dev)
    b = torch.from_numpy(np.ascontiguousarray(y, dtype=np.float64)).to(dev)
    alpha = torch.as_tensor(np.asarray(alphas, np.float64), device=dev)

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
    return propagate_alphas(w, labeled_pos, labeled_y, n_classes, lp, (lp.lp_alpha,),
                            device)[0]


@one_blas_thread()
def propagate_alphas(w: sp.spmatrix, labeled_pos: np.ndarray, labeled_y: np.ndarray,
                     n_classes: int, lp: PseudoLabels, alphas, device="cpu") -> list:
    """:func:`propagate` at each alpha of ``alphas`` (lp_alpha is not read), the classes
    of every alpha solved as the columns of one conjugate-gradients run: one
    PropagationResult per alpha."""
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
    cols = np.tile(y, (1, len(alphas)))
    col_alpha = np.repeat(np.asarray(alphas, np.float64), len(present))
    f, unconverged = solve_columns(a, cols, col_alpha, lp.lp_rtol, lp.lp_maxiter, device)
    for j in np.flatnonzero(unconverged):
        log(f"label propagation: conjugate gradients for class {present[j % len(present)]} "
            f"(alpha {col_alpha[j]:g}) stopped at maxiter {lp.lp_maxiter} before rtol "
            f"{lp.lp_rtol:g}; raise lp_maxiter")
    out = []
    for k in range(len(alphas)):
        scores = np.zeros((n, n_classes))
        scores[:, present] = f[:, k * len(present):(k + 1) * len(present)]
        out.append(_pseudo_labels(scores, labeled_pos, labeled_y, n_classes, missing,
                                  lp.lp_class_prior))
    return out


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


# ------------------------------------------------------------------ judging pseudo-labels
def judge_rows(y: np.ndarray, fraction: float, rng) -> np.ndarray:
    """Boolean mask (n,) of the judge fold among labeled rows of classes y (n,): about
    ``fraction`` of each class (largest remainder, at least one row of each class that
    has two or more, never a class's last row), drawn with ``rng`` (a numpy Generator).
    These rows' labels are kept from every label-aware term of pre-training, so the
    encoder's latent is as new to them as to an unlabeled row."""
    from .data import stratified_take

    rows = np.arange(len(y))
    n_take = int(round(fraction * len(y)))
    take = (stratified_take(rows, y, n_take, rng, min_per_class=1, keep=1)
            if n_take > 0 else np.zeros(0, np.int64))
    mask = np.zeros(len(y), dtype=bool)
    mask[take] = True
    return mask


def heldout_head_right(x_fit: np.ndarray, y_fit: np.ndarray, x_held: np.ndarray,
                       y_held: np.ndarray, cs=(0.01, 0.1, 1.0, 10.0)) -> np.ndarray:
    """Which held-out rows (m,) bool the supervised head gets right: L2 logistic regression
    on x_fit (n, d) (standardised on those rows), scored on x_held (m, d), at the C of the
    grid ``cs`` with the most rows right. Taking the best C favours the head, so a
    comparison against it is conservative. With one class in y_fit the head predicts it.
    One BLAS thread."""

    from sklearn.linear_model import LogisticRegression

    y_held = np.asarray(y_held)
    if len(y_held) == 0:
        return np.zeros(0, bool)
    if len(np.unique(y_fit)) < 2:
        return y_held == y_fit[0] if len(y_fit) else np.zeros(len(y_held), bool)
    x_fit, x_held = np.asarray(x_fit, np.float64), np.asarray(x_held, np.float64)
    mu, sd = x_fit.mean(0), x_fit.std(0) + 1e-9
    best = None
    with warnings.catch_warnings(), one_blas_thread():
        warnings.simplefilter("ignore")
        for c in cs:
            lr = LogisticRegression(C=c, max_iter=1000).fit((x_fit - mu) / sd, y_fit)
            right = lr.predict((x_held - mu) / sd) == y_held
            if best is None or right.sum() > best.sum():
                best = right
    return best


def heldout_head_accuracy(x_fit: np.ndarray, y_fit: np.ndarray, x_held: np.ndarray,
                          y_held: np.ndarray, cs=(0.01, 0.1, 1.0, 10.0)) -> float:
    """The supervised head's accuracy on held-out rows (:func:`heldout_head_right`); 1.0
    without any held-out row."""
    if len(y_held) == 0:
        return 1.0
    return float(np.mean(heldout_head_right(x_fit, y_fit, x_held, y_held, cs)))


#: the judge's level: the chance of using pseudo-labels that are no more often right
#: than the head, across every candidate graph tried at a look
JUDGE_LEVEL = 0.05


def sign_test_p(pl_right: np.ndarray, head_right: np.ndarray) -> float:
    """One-sided exact sign test (McNemar's exact test) that pseudo-labels are right more
    often than the head on the same rows: of the rows where exactly one of them is
    right (b where the pseudo-labels are, c where the head is), the chance of b or more
    of b + c under a fair coin; 1.0 when they never disagree."""
    from scipy.stats import binom

    b = int(np.sum(pl_right & ~head_right))
    c = int(np.sum(~pl_right & head_right))
    return float(binom.sf(b - 1, b + c, 0.5)) if b + c else 1.0


@dataclass
class JudgedPseudoLabels:
    """Pseudo-labels, and whether held-out labeled rows showed them worth using.

    label: (N,) int64 over the nodes (labeled rows first, true labels), -1 where no
    class reached a row; weight: (N,) 1 for labeled rows, the propagation's certainty for
    the others, all 0 when ``used`` is False; certainty: (N,) the propagation's own
    1 - H(p)/log C; space, k, alpha: the chosen graph and propagation;
    heldout: candidate name -> accuracy of its pseudo-labels on the held-out rows;
    head_accuracy: the supervised head's accuracy on the same rows; accepted: the
    pseudo-labels had been used at an earlier look; p_value: the one-sided sign test
    (:func:`sign_test_p`) on those rows that the pseudo-labels are right more often than
    the head (not ``accepted``) or that the head is right more often than them
    (``accepted``); used: the unlabeled rows carry weight (that p is at most
    :data:`JUDGE_LEVEL` divided by the candidates tried, resp. above :data:`JUDGE_LEVEL`;
    some row weighs; and the weights add up to at least the labels the final model gave
    up to judge them); n_held: the held-out rows; fold_pseudo: for each fold model of a cross-fitted
    judge, its own pseudo-labels and weights (label (N,), weight (N,)), seeded with the
    labeled rows it saw."""

    label: np.ndarray
    weight: np.ndarray
    certainty: np.ndarray
    space: str
    k: int
    alpha: float
    heldout: dict
    head_accuracy: float
    p_value: float
    used: bool
    accepted: bool = False
    missing_classes: list = field(default_factory=list)
    n_held: int = 0
    fold_pseudo: list = field(default_factory=list)

    @property
    def heldout_accuracy(self) -> float:
        return self.heldout[candidate_name(self.space, self.k, self.alpha)]


def candidate_name(space: str, k: int, alpha: float) -> str:
    """A judged propagation's name, e.g. "pcs k10 alpha0.9"."""
    return f"{space} k{k} alpha{alpha:g}"


@dataclass
class Folds:
    """The held-out folds of a judge. ``assignment`` (n_L,) int: each labeled row's fold
    (0..K-1), or -1 for a row no fold holds out (always a seed); fold model f saw the
    labels of every row outside fold f and none of fold f's. ``spaces[f]``: fold model
    f's node features per space (as :func:`judged_label_propagation`'s ``spaces``; a space
    the models share, e.g. input PCs, may be the same (index, sim) object), and
    ``features[f]`` (n_L, h): its labeled rows' latent for the supervised head.
    ``withheld``: labeled rows whose labels the final model gave up to judge (0 when
    fold models do the judging)."""

    assignment: np.ndarray
    spaces: list
    features: list
    withheld: int


def judged_label_propagation(spaces: dict, labeled_y: np.ndarray, judge: np.ndarray,
                             n_classes: int, head_features: np.ndarray,
                             lp: PseudoLabels = PseudoLabels(),
                             ks=(3, 10), alphas=None) -> JudgedPseudoLabels:
    """Label propagation judged on one fold of the labeled rows, ``judge`` (n_L,) bool,
    whose labels the one model of ``spaces`` never saw (it both judges and makes the
    pseudo-labels): :func:`cross_fitted_label_propagation` with that one fold."""
    folds = Folds(assignment=np.where(judge, 0, -1), spaces=[spaces], features=[head_features],
                  withheld=int(np.sum(judge)))
    return cross_fitted_label_propagation(spaces, labeled_y, n_classes, folds, lp, ks, alphas)


class Graphs:
    """The kNN graphs of models' spaces, each space searched once per model (at the
    largest k of ``ks``) and cut to any k."""

    def __init__(self, lp: PseudoLabels, ks):
        self.lp, self.ks, self._neighbours = lp, tuple(ks), {}

    def of(self, model_spaces: dict, model, name: str, k: int) -> sp.csr_matrix:
        """The graph of space ``name`` of ``model_spaces`` (one model's, ``model`` its
        key) at k neighbours."""
        if (model, name) not in self._neighbours:
            z = model_spaces[name]
            self._neighbours[model, name] = z if isinstance(z, tuple) else knn_neighbours(
                z, max(self.ks), self.lp.lp_block)
        return graph_from_neighbours(*self._neighbours[model, name], k)


def judge_candidates(graphs: Graphs, labeled_y: np.ndarray, n_classes: int, folds: "Folds",
                     lp: PseudoLabels, alphas: tuple, device):
    """Every candidate propagation (each space, k of graphs.ks and alpha of ``alphas``) on
    the held-out rows: each fold's rows labeled by its fold model's graph seeded with the
    rows outside the fold. Returns (candidate name -> accuracy on all the held-out rows,
    the best: (accuracy, space, k, alpha, held-out pseudo-labels, their certainty)); ties
    go to the first, in the order spaces, ks, alphas."""
    pos = np.arange(len(labeled_y))
    fold = np.asarray(folds.assignment)
    held_all = pos[fold >= 0]
    heldout, best = {}, None
    for name in folds.spaces[0]:
        for k in graphs.ks:
            oof = {a: (np.full(len(pos), -1), np.zeros(len(pos))) for a in alphas}
            for f, model_spaces in enumerate(folds.spaces):
                seeded, held = pos[fold != f], pos[fold == f]
                results = propagate_alphas(graphs.of(model_spaces, f, name, k), seeded,
                                           labeled_y[seeded], n_classes, lp, alphas, device)
                for alpha, res in zip(alphas, results):
                    oof[alpha][0][held] = res.pseudo_label[held]
                    oof[alpha][1][held] = res.weight[held]
            for alpha in alphas:
                lab, cert = oof[alpha][0][held_all], oof[alpha][1][held_all]
                acc = float(np.mean(lab == labeled_y[held_all])) if len(held_all) else 0.0
                heldout[candidate_name(name, k, alpha)] = acc
                if best is None or acc > best[0]:
                    best = (acc, name, k, alpha, lab, cert)
    return heldout, best


def pooled_head_right(labeled_y: np.ndarray, folds: "Folds") -> np.ndarray:
    """Which held-out rows (all rows of every fold, in row order) the supervised head gets
    right: on fold f, fold model f's head (:func:`heldout_head_right` on its latent,
    fitted on the rows outside the fold)."""
    pos = np.arange(len(labeled_y))
    fold = np.asarray(folds.assignment)
    right = np.zeros(len(pos), bool)
    for f, x in enumerate(folds.features):
        seeded, held = pos[fold != f], pos[fold == f]
        right[held] = heldout_head_right(x[seeded], labeled_y[seeded], x[held], labeled_y[held])
    return right[fold >= 0]


def cross_fitted_label_propagation(spaces: dict, labeled_y: np.ndarray, n_classes: int,
                                   folds: Folds,
                                   lp: PseudoLabels = PseudoLabels(), ks=(3, 10),
                                   alphas=None, accepted: bool = False) -> JudgedPseudoLabels:
    """Label propagation whose graph is chosen, and whose pseudo-labels are weighted, by
    labeled rows held out from the models that judge them; no row outside the nodes is
    looked at.

    spaces: name -> (N, d) node features of the final model (the one whose pseudo-labels
    are returned), or the (index, sim) of their :func:`knn_neighbours` with at least
    max(ks) columns (a space whose features do not change between calls, searched once
    by the caller); rows 0..n_L-1 are the labeled rows, with classes labeled_y (n_L,).
    For each space, each k in ``ks`` and each alpha in ``alphas`` (default: lp.lp_alpha
    alone), and each fold f of ``folds``, the propagation on fold model f's kNN graph is
    seeded with the labeled rows outside fold f only, so fold f's rows are labeled as an
    unlabeled row is; every held-out row is judged once, by a model that never saw its
    label. The candidate whose pseudo-labels are most often right on all the held-out
    rows is chosen (ties: the first, in the order spaces, ks, alphas), and compared with
    the supervised head on the same rows (:func:`heldout_head_right` on each fold model's
    latent: fitted on the rows outside the fold, scored on the fold) by a one-sided exact
    sign test on the rows where exactly one of them is right (:func:`sign_test_p`). Not
    ``accepted`` before (a run's first look), the pseudo-labels are used only if the test
    shows them right more often than the head at level :data:`JUDGE_LEVEL` / (candidates
    tried), the price of choosing the best of the candidates on these rows; ``accepted``
    (a later look of a run whose pseudo-labels were used), they are kept unless the
    reverse test shows the head right more often than them at level :data:`JUDGE_LEVEL`
    (``p_value`` is that test's). Used, every unlabeled row weighs its propagation's
    certainty, as in the paper. The pseudo-labels come from the chosen graph of the final
    model seeded with every labeled row, and each fold model's own (``fold_pseudo``) from
    its graph seeded with the rows it saw. ``used`` also asks that the unlabeled rows'
    weights add up to at least ``folds.withheld`` (the labels the final model gave up to
    judge them); pseudo-labels worth less are not used, and every weight is then 0. lp:
    the config's ``pseudo_labels`` section. The kNN searches and conjugate gradients run
    with torch where a space given as a tensor is (the training device), else on the CPU."""
    pos = np.arange(len(labeled_y))
    fold = np.asarray(folds.assignment)
    held_all = pos[fold >= 0]
    device = next((z.device for z in spaces.values() if hasattr(z, "device")), "cpu")
    graphs = Graphs(lp, ks)
    heldout, (_, name, k, alpha, lab, _) = judge_candidates(
        graphs, labeled_y, n_classes, folds, lp, tuple(alphas or (lp.lp_alpha,)), device)
    lp = replace(lp, lp_alpha=alpha)
    head_right = pooled_head_right(labeled_y, folds)
    head_acc = float(np.mean(head_right)) if len(held_all) else 1.0
    pl_right = lab == labeled_y[held_all]
    if accepted:
        p_value = sign_test_p(head_right, pl_right)
        judged = len(held_all) > 0 and p_value > JUDGE_LEVEL
    else:
        p_value = sign_test_p(pl_right, head_right)
        judged = len(held_all) > 0 and p_value <= JUDGE_LEVEL / max(len(heldout), 1)

    def weighed(res):
        """Weights (N,) of a propagation: its certainty where judged worth using, 0 on
        labeled rows and rows no class reached."""
        weight = np.asarray(res.weight, np.float64).copy() if judged else np.zeros(len(res.weight))
        weight[res.pseudo_label < 0] = 0.0
        weight[pos] = 0.0
        return weight

    res = propagate(graphs.of(spaces, "final", name, k), pos, labeled_y, n_classes, lp, device)
    weight = weighed(res)
    used = bool(weight.max() > 0.0) and weight.sum() >= folds.withheld
    fold_pseudo = []
    for f in range(len(folds.spaces) if folds.withheld == 0 else 0):
        seen = pos[fold != f]
        res_f = propagate(graphs.of(folds.spaces[f], f, name, k), seen, labeled_y[seen],
                          n_classes, lp, device)
        w_f = weighed(res_f) if used else np.zeros(len(res_f.weight))
        fold_pseudo.append((res_f.pseudo_label, w_f.astype(np.float32)))
    if not used:
        weight[:] = 0.0
    weight[pos] = 1.0
    return JudgedPseudoLabels(label=res.pseudo_label, weight=weight, certainty=res.weight,
                              space=name, k=int(k), alpha=float(alpha), heldout=heldout,
                              head_accuracy=head_acc, p_value=p_value, used=bool(used),
                              accepted=accepted,
                              missing_classes=res.missing_classes, n_held=len(held_all),
                              fold_pseudo=fold_pseudo)
