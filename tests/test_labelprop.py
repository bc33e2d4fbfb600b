"""Label propagation against a dense reference solve and on separable clusters."""

import numpy as np
import pytest

from cmix.learn.config import PseudoLabels
from cmix.learn.methods.cmix.labelprop import knn_graph, knn_neighbours, label_propagation, propagate


def dense_cosine(z):
    """(N, N) cosine similarities of the rows of z (N, d), -inf on the diagonal."""
    z = z / np.linalg.norm(z, axis=1, keepdims=True)
    s = z @ z.T
    np.fill_diagonal(s, -np.inf)
    return s


def dense_reference(z, labeled_pos, labeled_y, n_classes, k, alpha, class_prior=False):
    """The whole computation with dense numpy matrices (fine for a few dozen nodes)."""
    n = len(z)
    s = dense_cosine(z)
    g = np.zeros((n, n))
    for i in range(n):
        nn_i = np.argsort(-s[i], kind="stable")[:k]
        g[i, nn_i] = np.clip(s[i, nn_i], 0, None) ** 3
    w = g + g.T
    np.fill_diagonal(w, 0)
    d = w.sum(1)
    a = w / np.sqrt(np.outer(d, d))
    y = np.zeros((n, n_classes))
    for c in range(n_classes):
        members = labeled_pos[labeled_y == c]
        y[members, c] = 1 / len(members)
    f = np.linalg.solve(np.eye(n) - alpha * a, y)
    f = np.clip(f, 0, None)
    if class_prior:             # column c times the labeled share |L_c| / |L|
        for c in range(n_classes):
            f[:, c] *= np.mean(labeled_y == c)
    return w, f / f.sum(1, keepdims=True)


def test_equals_dense_reference_solve():
    rng = np.random.default_rng(0)
    z = rng.normal(size=(40, 6)) + 0.3
    labeled_pos = np.array([0, 5, 9, 17, 30])
    labeled_y = np.array([0, 1, 2, 1, 0])
    w_ref, p_ref = dense_reference(z, labeled_pos, labeled_y, 3, k=4, alpha=0.99)
    w = knn_graph(z, k=4, block=7)                  # several blocks
    np.testing.assert_allclose(w.toarray(), w_ref, rtol=1e-5, atol=1e-7)
    res = propagate(w, labeled_pos, labeled_y, 3, PseudoLabels(
        lp_alpha=0.99, lp_rtol=1e-12, lp_maxiter=10000, lp_class_prior=False))
    unl = np.setdiff1d(np.arange(40), labeled_pos)
    np.testing.assert_allclose(res.prob[unl], p_ref[unl], atol=1e-5)
    assert np.array_equal(res.pseudo_label[unl], p_ref[unl].argmax(1))
    ent = -np.sum(np.where(p_ref > 0, p_ref * np.log(np.where(p_ref > 0, p_ref, 1)), 0), 1)
    np.testing.assert_allclose(res.weight[unl], 1 - ent[unl] / np.log(3), atol=1e-5)
    assert np.all(res.pseudo_label[labeled_pos] == labeled_y)
    assert np.all(res.weight[labeled_pos] == 1)


def test_class_prior_equals_dense_reference():
    """The prior moves only the argmax: prob and certainty stay those of the propagated
    distribution itself."""
    rng = np.random.default_rng(3)
    z = rng.normal(size=(50, 5)) + 0.2
    labeled_pos = np.arange(0, 50, 5)
    labeled_y = np.array([0, 0, 0, 0, 0, 0, 1, 1, 2, 0])
    _, p_ref = dense_reference(z, labeled_pos, labeled_y, 3, k=5, alpha=0.99)
    _, p_prior = dense_reference(z, labeled_pos, labeled_y, 3, k=5, alpha=0.99, class_prior=True)
    res = propagate(knn_graph(z, k=5), labeled_pos, labeled_y, 3,
                    PseudoLabels(lp_alpha=0.99, lp_rtol=1e-12, lp_maxiter=10000))
    unl = np.setdiff1d(np.arange(50), labeled_pos)
    np.testing.assert_allclose(res.prob[unl], p_ref[unl], atol=1e-5)
    assert np.array_equal(res.pseudo_label[unl], p_prior[unl].argmax(1))
    assert not np.array_equal(p_prior[unl].argmax(1), p_ref[unl].argmax(1))  # the prior acts
    ent = -np.sum(p_ref * np.log(p_ref), 1)
    np.testing.assert_allclose(res.weight[unl], 1 - ent[unl] / np.log(3), atol=1e-5)


@pytest.mark.parametrize("alpha", [None, 0.999])
def test_default_iteration_limit_reaches_the_converged_solve(alpha):
    """k = 3 (the paper's), the default alpha and 0.999: the default iteration limit must
    give the dense solve's labels and certainties, not a truncated CG iterate."""
    alpha = alpha or PseudoLabels().lp_alpha
    rng = np.random.default_rng(4)
    z = rng.normal(size=(400, 6)) + 0.3
    labeled_pos = np.arange(0, 400, 10)
    labeled_y = rng.integers(0, 3, len(labeled_pos))
    _, p_ref = dense_reference(z, labeled_pos, labeled_y, 3, k=3, alpha=alpha)
    res = label_propagation(z, labeled_pos, labeled_y, 3,
                            PseudoLabels(lp_k=3, lp_alpha=alpha, lp_class_prior=False))
    unl = np.setdiff1d(np.arange(400), labeled_pos)
    assert np.array_equal(res.pseudo_label[unl], p_ref[unl].argmax(1))
    np.testing.assert_allclose(res.prob[unl], p_ref[unl], atol=1e-4)
    if alpha == 0.999:   # 20 iterations (the earlier default) do not get there
        short = label_propagation(z, labeled_pos, labeled_y, 3, PseudoLabels(
            lp_k=3, lp_alpha=alpha, lp_maxiter=20, lp_class_prior=False))
        assert np.mean(short.pseudo_label[unl] != p_ref[unl].argmax(1)) > 0.05


def uninformative_graph():
    """3,000 rows of 8-d noise, 80/20 labels independent of them, 200 labeled:
    (rng, z, y, labeled_pos, unlabeled_pos)."""
    rng = np.random.default_rng(4)
    n = 3000
    z = rng.normal(size=(n, 8))
    y = (rng.random(n) < 0.2).astype(int)
    labeled_pos = rng.choice(n, 200, replace=False)
    return rng, z, y, labeled_pos, np.setdiff1d(np.arange(n), labeled_pos)


@pytest.mark.parametrize("class_prior", [False, True])
def test_graph_without_label_information_gives_no_certainty(class_prior):
    """Labels independent of the latent rows, 80/20 classes: every pseudo-label's certainty
    is ~0 with or without the class prior (the prior must not create certainty)."""
    rng, z, y, labeled_pos, unl = uninformative_graph()
    res = label_propagation(z, labeled_pos, y[labeled_pos], 2,
                            PseudoLabels(lp_k=10, lp_class_prior=class_prior))
    assert res.weight[unl].mean() < 0.01 and res.weight[unl].max() < 0.1
    # while on separated clusters the same code is certain (the check can fail)
    a = np.array([1.0, 0, 0, 0]) + rng.normal(scale=0.1, size=(150, 4))
    b = np.array([0, 0, 1.0, 0]) + rng.normal(scale=0.1, size=(50, 4))
    res2 = label_propagation(np.vstack([a, b]), np.array([3, 5, 160]), np.array([0, 0, 1]), 2,
                             PseudoLabels(lp_k=10, lp_class_prior=class_prior))
    assert res2.weight.min() > 0.9


def test_class_prior_keeps_rare_classes_rare():
    """Labels unrelated to the latent space (a polygenic trait's usual case), 80/20
    classes, alpha 0.999: the scores are nearly the graph's stationary distribution for
    every class, so the equal-prior argmax labels rows by which class's seeds happen to
    sit in denser parts of the graph (here: most rows get the rare class). With the
    labeled shares as prior the majority class wins, ~80% correct."""
    rng, z, y, labeled_pos, unl = uninformative_graph()
    acc, rare = {}, {}
    for cm in (False, True):
        res = label_propagation(z, labeled_pos, y[labeled_pos], 2, PseudoLabels(
            lp_k=10, lp_alpha=0.999, lp_maxiter=50, lp_class_prior=cm))
        acc[cm] = np.mean(res.pseudo_label[unl] == y[unl])
        rare[cm] = np.mean(res.pseudo_label[unl] == 1)
    assert acc[False] < 0.5 and rare[False] > 0.5
    assert acc[True] > 0.75 and rare[True] < 0.25


def test_two_separated_clusters_from_one_label_each():
    rng = np.random.default_rng(1)
    a = np.array([1.0, 0, 0, 0]) + rng.normal(scale=0.1, size=(150, 4))
    b = np.array([0, 0, 1.0, 0]) + rng.normal(scale=0.1, size=(150, 4))
    z = np.vstack([a, b])
    truth = np.repeat([0, 1], 150)
    res = label_propagation(z, np.array([3, 200]), np.array([0, 1]), 2,
                            PseudoLabels(lp_k=10, lp_alpha=0.99, lp_maxiter=200))
    assert np.array_equal(res.pseudo_label, truth)
    assert res.missing_classes == []
    assert np.all(res.weight > 0.9)


def test_class_without_labeled_row_is_reported_not_a_crash():
    rng = np.random.default_rng(2)
    z = rng.normal(size=(50, 5))
    res = label_propagation(z, np.array([0, 1, 2]), np.array([0, 1, 0]), 3, PseudoLabels(lp_k=5))
    assert res.missing_classes == [2]
    assert not np.any(res.pseudo_label == 2)
    assert np.all(np.isfinite(res.prob)) and np.all(np.isfinite(res.weight))


def test_block_size_does_not_change_the_neighbours():
    """Each row's neighbours come from its own products: the same at any block (the
    default's several blocks, a part block and a one-row block, which the matrix-vector
    kernel sums, included) as in one whole block, and those of a dense cosine-similarity
    reference."""
    z = np.random.default_rng(3).normal(size=(1000, 32)).astype(np.float32)
    index, sim = knn_neighbours(z, 10, block=len(z))
    for block in (9, 300, PseudoLabels().lp_block):
        index_b, sim_b = knn_neighbours(z, 10, block)
        assert np.array_equal(index_b, index)
        np.testing.assert_allclose(sim_b, sim, rtol=1e-6)
    cos = dense_cosine(z)
    dense = np.argsort(-cos, axis=1, kind="stable")[:, :10]
    assert np.array_equal(index, dense)
    np.testing.assert_allclose(sim, np.take_along_axis(cos, dense, 1), rtol=1e-5)
    small, whole = knn_graph(z, k=3, block=9), knn_graph(z, k=3, block=len(z))
    assert np.array_equal(small.indptr, whole.indptr) and np.array_equal(small.indices, whole.indices)
    np.testing.assert_allclose(small.data, whole.data, rtol=1e-5)
