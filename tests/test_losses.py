"""SupCon, mixup and the predictor's loss, checked against direct small computations."""

import math

import numpy as np
import pytest
import torch

from cmix.losses import (draw_mixup, mix_partners, mix_rows, reconstruction_loss,
                         soft_cross_entropy, supcon_loss)
from cmix.nn import SnpEmbedding, categorical_width


def supcon_double_loop(z, labels, weights, tau):
    """Khosla et al. (2020) SupCon written as plain loops over anchors and rows."""
    z = [list(map(float, r)) for r in z]
    n = len(z)
    num, den = 0.0, 0.0
    for i in range(n):
        positives = [p for p in range(n) if p != i and labels[p] == labels[i]]
        if not positives:
            continue
        sims = {k: sum(a * b for a, b in zip(z[i], z[k])) / tau for k in range(n) if k != i}
        log_den = math.log(sum(math.exp(s) for s in sims.values()))
        loss_i = -sum(sims[p] - log_den for p in positives) / len(positives)
        num += weights[i] * loss_i
        den += weights[i]
    return num / den


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_supcon_matches_double_loop_with_weights_and_lonely_anchors(seed):
    g = torch.Generator().manual_seed(seed)
    z = torch.nn.functional.normalize(torch.randn(13, 5, generator=g, dtype=torch.float64), dim=1)
    labels = torch.tensor([0, 0, 1, 1, 1, 2, 3, 0, 1, 4, 2, 0, 5])  # classes 3, 4, 5: no positive
    weights = torch.rand(13, generator=g, dtype=torch.float64) + 0.05
    got = supcon_loss(z, labels, weights, tau=0.1)
    want = supcon_double_loop(z.tolist(), labels.tolist(), weights.tolist(), 0.1)
    assert float(got) == pytest.approx(want, rel=1e-9)
    # unit weights, another temperature
    got1 = supcon_loss(z, labels, None, tau=0.5)
    assert float(got1) == pytest.approx(supcon_double_loop(z.tolist(), labels.tolist(),
                                                           [1.0] * 13, 0.5), rel=1e-9)


def test_supcon_without_positives_is_zero_and_differentiable():
    z = torch.nn.functional.normalize(torch.randn(4, 3), dim=1).requires_grad_()
    loss = supcon_loss(z, torch.tensor([0, 1, 2, 3]), None, 0.1)
    assert float(loss.detach()) == 0.0
    loss.backward()


def test_mixup_pairs_same_class_and_lambda_in_range():
    g = torch.Generator().manual_seed(3)
    labels = torch.tensor([0, 1, 0, 2, -1, 1, 1, 0, -1, 3, 2])
    for _ in range(50):
        partner, lam = draw_mixup(labels, 0.2, g, within_class=True)
        assert torch.all((lam >= 0) & (lam <= 0.2))
        for i, p in enumerate(partner.tolist()):
            lab = int(labels[i])
            n_same = int((labels == lab).sum())
            if lab < 0 or n_same < 2:          # unlabeled rows and class 3 (alone): not mixed
                assert p == -1
            else:
                assert p != i and int(labels[p]) == lab
    # every partner of a row of class 1 is drawn over time (uniform over the others)
    seen = {int(mix_partners(labels, g)[1]) for _ in range(200)}
    assert seen == {5, 6}


def test_random_mix_pairs_any_labeled_row():
    g = torch.Generator().manual_seed(0)
    labels = torch.tensor([0, 1, -1, 2])
    seen = set()
    for _ in range(100):
        partner = mix_partners(labels, g, within_class=False)
        assert int(partner[2]) == -1 and int(partner[0]) in (1, 3)
        seen.add(int(partner[0]))
    assert seen == {1, 3}


def test_mix_rows_is_the_convex_combination():
    h = torch.randn(5, 4)
    partner = torch.tensor([2, -1, 0, 4, 3])
    lam = torch.tensor([0.1, 0.5, 0.2, 0.0, 0.15])
    mixed, rows = mix_rows(h, partner, lam)
    assert rows.tolist() == [0, 2, 3, 4]
    for k, i in enumerate(rows.tolist()):
        want = lam[i] * h[i] + (1 - lam[i]) * h[partner[i]]
        assert torch.allclose(mixed[k], want)


def test_categorical_reconstruction_is_mean_cross_entropy_over_columns():
    torch.manual_seed(0)
    emb = SnpEmbedding(6, "categorical")
    x = torch.tensor([[0, 1, 2, -1, 1, 0], [2, 2, 0, 1, -1, 1]], dtype=torch.int8)
    logits = torch.randn(2, 6, 4)
    want = np.mean([-torch.log_softmax(logits[b, j], 0)[3 if x[b, j] < 0 else int(x[b, j])].item()
                    for b in range(2) for j in range(6)])
    assert float(reconstruction_loss(logits, x, emb)) == pytest.approx(want, rel=1e-6)
    assert categorical_width(4) == 3 and emb(x).shape == (2, 18)


def test_soft_cross_entropy_weights():
    logits = torch.tensor([[2.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    targets = torch.tensor([[1.0, 0.0], [0.3, 0.7], [0.0, 1.0]])
    w = torch.tensor([1.0, 0.5, 0.0])
    logp = torch.log_softmax(logits, 1)
    rows = [-(targets[i] * logp[i]).sum().item() for i in range(3)]
    want = (rows[0] * 1 + rows[1] * 0.5) / 1.5
    assert float(soft_cross_entropy(logits, targets, w)) == pytest.approx(want, rel=1e-6)
