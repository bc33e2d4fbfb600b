"""SupCon, mixup and the predictor's loss, checked against direct small computations."""

import math

import numpy as np
import pytest
import torch

from cmix.learn.losses import (contrastive_targets, draw_mixup, mix_partners, mix_rows,
                         mixup_cross_entropy, reconstruction_loss, soft_cross_entropy,
                         supcon_loss)
from cmix.learn.nn import SnpEmbedding, categorical_width


def supcon_double_loop(z, labels, weights, tau):
    """SupCon (Khosla et al. 2020) with certainty weights, as plain loops: labels are ints
    or class distributions; a pair (i, p) counts w_i * w_p * (q_i . q_p), the denominator
    of anchor i sums w_k exp(s_ik / tau) over k != i."""
    z = [list(map(float, r)) for r in z]
    n = len(z)

    def agree(a, b):
        if isinstance(a, (list, tuple)):
            return sum(x * y for x, y in zip(a, b))
        return float(a == b and a >= 0)
    num, den = 0.0, 0.0
    for i in range(n):
        pos = {p: weights[p] * agree(labels[i], labels[p]) for p in range(n) if p != i}
        mass = sum(pos.values())
        if mass <= 0 or weights[i] <= 0:
            continue
        sims = {k: sum(a * b for a, b in zip(z[i], z[k])) / tau for k in range(n) if k != i}
        log_den = math.log(sum(weights[k] * math.exp(s) for k, s in sims.items()))
        loss_i = -sum(m * (sims[p] - log_den) for p, m in pos.items() if m > 0) / mass
        num += weights[i] * loss_i
        den += weights[i]
    return num / den if den else 0.0


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_supcon_matches_double_loop_with_weights_and_lonely_anchors(seed):
    g = torch.Generator().manual_seed(seed)
    z = torch.nn.functional.normalize(torch.randn(13, 5, generator=g, dtype=torch.float64), dim=1)
    labels = torch.tensor([0, 0, 1, 1, 1, 2, 3, 0, 1, 4, 2, 0, 5])  # classes 3, 4, 5: no positive
    weights = torch.rand(13, generator=g, dtype=torch.float64) + 0.05
    got = supcon_loss(z, labels, weights, tau=0.1)
    want = supcon_double_loop(z.tolist(), labels.tolist(), weights.tolist(), 0.1)
    assert float(got) == pytest.approx(want, rel=1e-6)
    # unit weights, another temperature
    got1 = supcon_loss(z, labels, None, tau=0.5)
    assert float(got1) == pytest.approx(supcon_double_loop(z.tolist(), labels.tolist(),
                                                           [1.0] * 13, 0.5), rel=1e-6)
    # soft labels (randomly mixed views): positive-ness q_i . q_p
    q = torch.softmax(torch.randn(13, 3, generator=g, dtype=torch.float64) * 3, 1)
    got2 = supcon_loss(z, q, weights, tau=0.2)
    assert float(got2) == pytest.approx(supcon_double_loop(z.tolist(), q.tolist(),
                                                           weights.tolist(), 0.2), rel=1e-6)


@pytest.mark.parametrize("role", ["anchor_and_positive", "negative_only"])
def test_zero_certainty_row_changes_neither_loss_nor_gradient(role):
    """A pseudo-labeled row with w = 0 must be invisible: same loss and same gradient on
    every other row as without it, and no gradient of its own, whatever its label."""
    g = torch.Generator().manual_seed(4)
    base = torch.nn.functional.normalize(torch.randn(9, 6, generator=g, dtype=torch.float64), dim=1)
    labels = torch.tensor([0, 0, 1, 1, 2, 2, 0, 1, 2])
    weights = torch.rand(9, generator=g, dtype=torch.float64) * 0.8 + 0.2
    extra = torch.nn.functional.normalize(torch.randn(1, 6, generator=g, dtype=torch.float64), dim=1)
    # its class: shared with others (it would be an anchor and a positive) or its own
    extra_label = torch.tensor([0 if role == "anchor_and_positive" else 7])

    def loss_grad(with_extra, label=extra_label):
        z = torch.cat([base, extra]) if with_extra else base.clone()
        z.requires_grad_(True)
        lab = torch.cat([labels, label]) if with_extra else labels
        w = torch.cat([weights, torch.zeros(1, dtype=torch.float64)]) if with_extra else weights
        loss = supcon_loss(z, lab, w, tau=0.1)
        loss.backward()
        return float(loss.detach()), z.grad
    loss0, grad0 = loss_grad(False)
    for label in (extra_label, torch.tensor([1]), torch.tensor([2])):
        loss1, grad1 = loss_grad(True, label)
        assert loss1 == pytest.approx(loss0, rel=1e-12)
        torch.testing.assert_close(grad1[:9], grad0, rtol=1e-12, atol=1e-14)
        assert torch.all(grad1[9] == 0)
    # the weighted double loop gives the same number (the row really is in the batch)
    assert loss0 == pytest.approx(supcon_double_loop(base.tolist(), labels.tolist(),
                                                     weights.tolist(), 0.1), rel=1e-9)


def test_supcon_similarities_in_float32_under_bf16_autocast():
    g = torch.Generator().manual_seed(0)
    z = torch.nn.functional.normalize(torch.randn(64, 32, generator=g), dim=1)
    labels = torch.randint(0, 4, (64,), generator=g)
    want = supcon_loss(z, labels, None, 0.1)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        got = supcon_loss(z, labels, None, 0.1)
    assert got.dtype == torch.float32
    assert float(got) == pytest.approx(float(want), rel=1e-6)
    # bf16 similarities would be visibly off (3 significant digits): the check can fail
    sim16 = (z.bfloat16() @ z.bfloat16().T).float()
    assert (sim16 - z @ z.T).abs().max() > 1e-4


def test_contrastive_targets_against_direct_assembly():
    """Originals: labeled rows with w > 0; mixed rows: every row with a partner, its class
    mix lam * e_y(i) + (1 - lam) * e_y(partner) and weight w_i * w_partner."""
    labels = torch.tensor([0, 1, -1, 0, 2, 1, 0, 2])
    weights = torch.tensor([1.0, 1.0, 0.0, 0.4, 0.7, 0.0, 0.9, 1.0])
    partner = torch.tensor([3, -1, -1, 6, 7, -1, 0, 4])
    lam = torch.tensor([0.1, 0.2, 0.3, 0.05, 0.15, 0.0, 0.2, 0.12])
    orig, mixed, q, w = contrastive_targets(labels, weights, partner, lam, 3)
    assert orig.tolist() == [0, 1, 3, 4, 6, 7]           # row 2 unlabeled, row 5 w = 0
    assert mixed.tolist() == [0, 3, 4, 6, 7]
    want_q, want_w = [], []
    for i in orig.tolist():
        want_q.append(np.eye(3)[int(labels[i])])
        want_w.append(float(weights[i]))
    for i in mixed.tolist():
        j = int(partner[i])
        li = float(lam[i])
        want_q.append(li * np.eye(3)[int(labels[i])] + (1 - li) * np.eye(3)[int(labels[j])])
        want_w.append(float(weights[i]) * float(weights[j]))
    np.testing.assert_allclose(q.numpy(), np.array(want_q), rtol=1e-6)
    np.testing.assert_allclose(w.numpy(), np.array(want_w), rtol=1e-6)


def test_random_mixing_gives_soft_positives():
    """With partners of another class the mixed view is a (1 - lam) positive of the
    partner's class and a lam positive of its own."""
    labels = torch.tensor([0, 1])
    weights = torch.ones(2)
    _, _, q, _ = contrastive_targets(labels, weights, torch.tensor([1, 0]),
                                     torch.tensor([0.2, 0.1]), 2)
    np.testing.assert_allclose(q[2:].numpy(), [[0.2, 0.8], [0.9, 0.1]], rtol=1e-6)


def test_mixup_cross_entropy_against_direct_computation():
    g = torch.Generator().manual_seed(1)
    logits = torch.randn(5, 3, generator=g)
    eye = torch.eye(3)
    t_i, t_j = eye[[0, 1, 2, 0, 1]], eye[[1, 1, 0, 2, 2]]
    w_i = torch.tensor([1.0, 0.5, 1.0, 0.2, 1.0])
    w_j = torch.tensor([0.0, 1.0, 0.3, 1.0, 0.0])
    lam = torch.tensor([0.3, 0.5, 0.9, 0.1, 0.6])
    logp = torch.log_softmax(logits, 1)
    num = den = 0.0
    for n in range(5):
        a, b = float(lam[n] * w_i[n]), float((1 - lam[n]) * w_j[n])
        num += a * -float((t_i[n] * logp[n]).sum()) + b * -float((t_j[n] * logp[n]).sum())
        den += a + b
    got = mixup_cross_entropy(logits, t_i, t_j, w_i, w_j, lam)
    assert float(got) == pytest.approx(num / den, rel=1e-6)
    # a partner with certainty 0 adds nothing, whatever its label
    other = eye[[2, 0, 0, 2, 0]]
    other_j = torch.where((w_j == 0)[:, None], other, t_j)
    assert float(mixup_cross_entropy(logits, t_i, other_j, w_i, w_j, lam)) == pytest.approx(
        float(got), rel=1e-7)


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
