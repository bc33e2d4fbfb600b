"""SupCon, mixup and the predictor's loss, checked against direct small computations."""

import math

import numpy as np
import pytest
import torch

from cmix.learn.methods.cmix.losses import (contrastive_targets, mix_partners, mix_rows,
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


def onehot(labels, n_classes=None):
    """(N, C) one-hot rows of int labels (N,), all 0 for a label < 0."""
    labels = torch.as_tensor(labels)
    c = n_classes or int(labels.max()) + 1
    q = torch.nn.functional.one_hot(labels.clamp_min(0), c).to(torch.float64)
    return q * (labels >= 0)[:, None]


def supcon1(z, q, w, tau):
    """supcon_loss of one model (adds and drops the model axis)."""
    return supcon_loss(z[None], q[None], w[None], tau)[0]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_supcon_matches_double_loop_with_weights_and_lonely_anchors(seed):
    g = torch.Generator().manual_seed(seed)
    z = torch.nn.functional.normalize(torch.randn(13, 5, generator=g, dtype=torch.float64), dim=1)
    labels = torch.tensor([0, 0, 1, 1, 1, 2, 3, 0, 1, 4, 2, 0, 5])  # classes 3, 4, 5: no positive
    weights = torch.rand(13, generator=g, dtype=torch.float64) + 0.05
    got = supcon1(z, onehot(labels), weights, tau=0.1)
    want = supcon_double_loop(z.tolist(), labels.tolist(), weights.tolist(), 0.1)
    assert float(got) == pytest.approx(want, rel=1e-6)
    # unit weights, another temperature
    got1 = supcon1(z, onehot(labels), torch.ones(13, dtype=torch.float64), tau=0.5)
    assert float(got1) == pytest.approx(supcon_double_loop(z.tolist(), labels.tolist(),
                                                           [1.0] * 13, 0.5), rel=1e-6)
    # soft labels (randomly mixed views): positive-ness q_i . q_p
    q = torch.softmax(torch.randn(13, 3, generator=g, dtype=torch.float64) * 3, 1)
    got2 = supcon1(z, q, weights, tau=0.2)
    assert float(got2) == pytest.approx(supcon_double_loop(z.tolist(), q.tolist(),
                                                           weights.tolist(), 0.2), rel=1e-6)
    # a group of three models: each model's loss is its own
    zs = torch.stack([z, z.flip(0), z.roll(3, 0)])
    q6 = torch.cat([q, torch.zeros(13, 3, dtype=torch.float64)], 1)
    qs = torch.stack([onehot(labels), q6, onehot(labels.roll(2))])
    ws = torch.stack([weights, weights.flip(0), torch.ones(13, dtype=torch.float64)])
    group = supcon_loss(zs, qs, ws, 0.1)
    for i in range(3):
        assert float(group[i]) == pytest.approx(float(supcon1(zs[i], qs[i], ws[i], 0.1)),
                                                rel=1e-12)


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
        loss = supcon1(z, onehot(lab, 8), w, tau=0.1)
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
    q, w = onehot(labels).float(), torch.ones(64)
    want = supcon1(z, q, w, 0.1)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        got = supcon1(z, q, w, 0.1)
    assert got.dtype == torch.float32
    assert float(got) == pytest.approx(float(want), rel=1e-6)
    # bf16 similarities would be visibly off (3 significant digits): the check can fail
    sim16 = (z.bfloat16() @ z.bfloat16().T).float()
    assert (sim16 - z @ z.T).abs().max() > 1e-4


def test_contrastive_targets_against_direct_assembly():
    """Originals: every row, one-hot and w_i where it has a label (0 otherwise); mixed
    views: every row with a partner, its class mix lam * e_y(i) + (1 - lam) * e_y(partner)
    and weight w_i * w_partner (0 without a partner)."""
    labels = torch.tensor([0, 1, -1, 0, 2, 1, 0, 2])
    weights = torch.tensor([1.0, 1.0, 0.0, 0.4, 0.7, 0.0, 0.9, 1.0])
    partner = torch.tensor([3, -1, -1, 6, 7, -1, 0, 4])
    lam = torch.tensor([0.1, 0.2, 0.3, 0.05, 0.15, 0.0, 0.2, 0.12])
    q, w = contrastive_targets(labels[None], weights[None], partner[None], lam[None], 3)
    q, w = q[0], w[0]
    assert q.shape == (16, 3) and w.shape == (16,)
    want_q, want_w = [], []
    for i in range(8):
        lab = int(labels[i])
        want_q.append(np.eye(3)[lab] if lab >= 0 else np.zeros(3))
        want_w.append(float(weights[i]) if lab >= 0 else 0.0)
    for i in range(8):
        j = int(partner[i])
        if j < 0:
            want_w.append(0.0)
            want_q.append(np.asarray(want_q[i]))
            continue
        li = float(lam[i])
        want_q.append(li * np.eye(3)[int(labels[i])] + (1 - li) * np.eye(3)[int(labels[j])])
        want_w.append(float(weights[i]) * float(weights[j]))
    has = [i for i in range(16) if want_w[i] > 0]           # rows of weight 0 take no part
    np.testing.assert_allclose(q.numpy()[has], np.array(want_q)[has], rtol=1e-6)
    np.testing.assert_allclose(w.numpy(), np.array(want_w), rtol=1e-6)


def test_random_mixing_gives_soft_positives():
    """With partners of another class the mixed view is a (1 - lam) positive of the
    partner's class and a lam positive of its own."""
    labels = torch.tensor([[0, 1]])
    weights = torch.ones(1, 2)
    q, _ = contrastive_targets(labels, weights, torch.tensor([[1, 0]]),
                               torch.tensor([[0.2, 0.1]]), 2)
    np.testing.assert_allclose(q[0, 2:].numpy(), [[0.2, 0.8], [0.9, 0.1]], rtol=1e-6)


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
    one = lambda *a: [v[None] for v in a]                    # noqa: E731
    got = mixup_cross_entropy(*one(logits, t_i, t_j, w_i, w_j, lam))[0]
    assert float(got) == pytest.approx(num / den, rel=1e-6)
    # a partner with certainty 0 adds nothing, whatever its label
    other = eye[[2, 0, 0, 2, 0]]
    other_j = torch.where((w_j == 0)[:, None], other, t_j)
    assert float(mixup_cross_entropy(*one(logits, t_i, other_j, w_i, w_j, lam))[0]) == \
        pytest.approx(float(got), rel=1e-7)
    # lambda 1 is the plain weighted cross-entropy, bit for bit (a model without mixup)
    ones = torch.ones(5)
    assert torch.equal(mixup_cross_entropy(*one(logits, t_i, t_j, w_i, w_j, ones)),
                       soft_cross_entropy(logits[None], t_i[None], w_i[None]))


def test_supcon_without_positives_is_zero_and_differentiable():
    z = torch.nn.functional.normalize(torch.randn(4, 3), dim=1).requires_grad_()
    loss = supcon1(z, onehot(torch.tensor([0, 1, 2, 3])).float(), torch.ones(4), 0.1)
    assert float(loss.detach()) == 0.0
    loss.backward()
    assert torch.isfinite(z.grad).all()


def draws_for(seed):
    from cmix.learn.streams import Draws, model_keys

    return Draws(model_keys([seed], 1), seed, 0)


def test_mixup_pairs_rows_of_the_same_class():
    labels = torch.tensor([[0, 1, 0, 2, -1, 1, 1, 0, -1, 3, 2]])
    w = torch.ones(1, 11)
    for k in range(50):
        u = draws_for(k).uniform(11)
        partner = mix_partners(labels, w, u, within_class=True)[0]
        for i, p in enumerate(partner.tolist()):
            lab = int(labels[0, i])
            n_same = int((labels == lab).sum())
            if lab < 0 or n_same < 2:          # unlabeled rows and class 3 (alone): not mixed
                assert p == -1
            else:
                assert p != i and int(labels[0, p]) == lab
    # every partner of a row of class 1 is drawn over time (uniform over the others)
    seen = {int(mix_partners(labels, w, draws_for(k).uniform(11))[0, 1]) for k in range(200)}
    assert seen == {5, 6}


def test_random_mix_pairs_any_labeled_row():
    labels = torch.tensor([[0, 1, -1, 2]])
    seen = set()
    for k in range(100):
        partner = mix_partners(labels, torch.ones(1, 4), draws_for(k).uniform(4),
                               within_class=False)[0]
        assert int(partner[2]) == -1 and int(partner[0]) in (1, 3)
        seen.add(int(partner[0]))
    assert seen == {1, 3}


def test_mix_rows_is_the_convex_combination():
    h = torch.randn(1, 5, 4)
    partner = torch.tensor([[2, -1, 0, 4, 3]])
    lam = torch.tensor([[0.1, 0.5, 0.2, 0.0, 0.15]])
    mixed = mix_rows(h, partner, lam)[0]
    assert torch.equal(mixed[1], h[0, 1])                  # no partner: the row itself
    for i in (0, 2, 3, 4):
        want = lam[0, i] * h[0, i] + (1 - lam[0, i]) * h[0, partner[0, i]]
        assert torch.allclose(mixed[i], want)


def test_categorical_reconstruction_is_mean_cross_entropy_over_columns():
    from cmix.learn.nn import init_generators

    emb = SnpEmbedding(init_generators([0], 0), 6, "categorical")
    x = torch.tensor([[[0, 1, 2, -1, 1, 0], [2, 2, 0, 1, -1, 1]]], dtype=torch.int8)
    logits = torch.randn(1, 2, 6, 4)
    want = np.mean([-torch.log_softmax(logits[0, b, j], 0)[3 if x[0, b, j] < 0
                                                           else int(x[0, b, j])].item()
                    for b in range(2) for j in range(6)])
    assert float(reconstruction_loss(logits, x, emb)[0]) == pytest.approx(want, rel=1e-6)
    assert categorical_width(4) == 3 and emb(x).shape == (1, 2, 18)
    # a row mask leaves the masked rows out of the mean
    mask = torch.tensor([[True, False]])
    want0 = np.mean([-torch.log_softmax(logits[0, 0, j], 0)[3 if x[0, 0, j] < 0
                                                            else int(x[0, 0, j])].item()
                     for j in range(6)])
    assert float(reconstruction_loss(logits, x, emb, mask)[0]) == pytest.approx(want0, rel=1e-6)


def test_soft_cross_entropy_weights():
    logits = torch.tensor([[2.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    targets = torch.tensor([[1.0, 0.0], [0.3, 0.7], [0.0, 1.0]])
    w = torch.tensor([1.0, 0.5, 0.0])
    logp = torch.log_softmax(logits, 1)
    rows = [-(targets[i] * logp[i]).sum().item() for i in range(3)]
    want = (rows[0] * 1 + rows[1] * 0.5) / 1.5
    assert float(soft_cross_entropy(logits[None], targets[None], w[None])[0]) == \
        pytest.approx(want, rel=1e-6)
