"""Unlabeled data that never hurts: pseudo-labels judged on held-out labeled rows,
partners drawn by certainty, batch norm with mixed rows, validation labels kept out of
pre-training."""

import numpy as np
import pytest
import torch

from cmix.learn import harness
from cmix.learn.config import resolve_config
from cmix.learn.labelprop import (calibrated_weights, judged_label_propagation,
                                  out_of_fold_head_accuracy, stratified_folds)
from cmix.learn.losses import mix_partners

from store_helpers import simulate_labels, write_test_store


def clusters(n_per=60, n_classes=3, d=6, spread=0.15, seed=0):
    """n_classes well-separated Gaussian clusters: (z (n, d), y (n,))."""
    rng = np.random.default_rng(seed)
    centres = np.eye(d)[:n_classes] * 3
    z = np.vstack([c + rng.normal(scale=spread, size=(n_per, d)) for c in centres])
    return z, np.repeat(np.arange(n_classes), n_per)


def order_labeled_first(z, y, n_labeled, seed=0):
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(y))
    return z[order], y[order]


def test_pseudo_labels_that_lose_to_the_head_carry_no_weight():
    """The graph carries no class information (random node features), the head's
    features do: the held-out labeled rows show it and every pseudo-label weighs 0."""
    rng = np.random.default_rng(1)
    z, y = clusters(n_per=100)
    z, y = order_labeled_first(z, y, 60)
    n_l = 60
    noise = rng.normal(size=z.shape)
    fold = stratified_folds(y[:n_l], 5, np.random.default_rng(0))
    res = judged_label_propagation({"latent": noise}, n_l, y[:n_l], 3, z[:n_l], fold, ks=(3, 10))
    assert res.head_accuracy > 0.95
    assert not res.used and res.heldout_accuracy < res.head_accuracy
    assert np.all(res.weight[n_l:] == 0) and np.all(res.weight[:n_l] == 1)


def test_pseudo_labels_that_beat_the_head_are_used_with_calibrated_weight():
    """The graph's space separates the classes, the head's features do not: pseudo-labels
    are used, weighted where they are right more often than the head."""
    rng = np.random.default_rng(2)
    z, y = clusters(n_per=100)
    z, y = order_labeled_first(z, y, 60)
    n_l = 60
    fold = stratified_folds(y[:n_l], 5, np.random.default_rng(0))
    res = judged_label_propagation({"latent": rng.normal(size=z.shape), "pcs": z}, n_l, y[:n_l],
                                   3, rng.normal(size=(n_l, 4)), fold, ks=(3, 10))
    assert res.used and res.space == "pcs"
    assert res.heldout_accuracy == 1.0 and res.head_accuracy < 0.7
    assert res.weight[n_l:].mean() > 0.9
    assert np.mean(res.label[n_l:] == y[n_l:]) > 0.98


def test_pseudo_labels_level_with_the_head_weigh_only_rows_more_often_right(monkeypatch):
    """The gate is "no worse than the head": with the head's held-out accuracy set equal
    to the pseudo-labels', rows whose certainty was right more often than that still
    carry weight; a hair above it, and every pseudo-label weighs 0."""
    import cmix.learn.labelprop as lp

    rng = np.random.default_rng(4)
    z, y = clusters(n_per=100, spread=1.2)              # overlapping: some held-out errors
    z, y = order_labeled_first(z, y, 90)
    n_l = 90
    fold = stratified_folds(y[:n_l], 5, np.random.default_rng(0))
    args = ({"latent": z}, n_l, y[:n_l], 3, z[:n_l], fold)
    pl_acc = judged_label_propagation(*args, ks=(3,)).heldout_accuracy
    assert 0.5 < pl_acc < 1.0
    monkeypatch.setattr(lp, "out_of_fold_head_accuracy", lambda *a: pl_acc)
    level = judged_label_propagation(*args, ks=(3,))
    assert level.used and 0 < level.weight[n_l:].mean() < 1
    assert level.weight[n_l:].min() == 0.0               # only where more often right
    monkeypatch.setattr(lp, "out_of_fold_head_accuracy", lambda *a: pl_acc + 1e-9)
    above = judged_label_propagation(*args, ks=(3,))
    assert not above.used and np.all(above.weight[n_l:] == 0)


def test_calibrated_weight_is_zero_at_the_heads_accuracy_and_grows_with_correctness():
    cert = np.linspace(0, 1, 200)
    correct = np.random.default_rng(0).random(200) < 0.5 + 0.5 * cert   # right more often when certain
    w = calibrated_weights(cert, correct, np.array([0.0, 0.5, 1.0]), floor=0.6)
    assert w[0] == 0.0 and w[1] <= w[2] and w[2] > 0.5
    assert np.all(calibrated_weights(cert, correct, cert, floor=1.0) == 0)


def test_head_accuracy_is_held_out():
    """Features that are pure noise with as many columns as rows: a head fitted and scored
    on the same rows would be perfect; held out it is near chance."""
    rng = np.random.default_rng(3)
    x = rng.normal(size=(60, 200))
    y = np.repeat([0, 1], 30)
    fold = stratified_folds(y, 5, rng)
    assert out_of_fold_head_accuracy(x, y, fold) < 0.8


def test_folds_are_stratified():
    y = np.repeat([0, 1, 2], [10, 20, 7])
    fold = stratified_folds(y, 5, np.random.default_rng(0))
    for c in range(3):
        counts = np.bincount(fold[y == c], minlength=5)
        assert counts.max() - counts.min() <= 1


def test_partners_are_drawn_in_proportion_to_certainty():
    """One class, certainty weights 1, 1, 0.5, 0.1, 0: a row's partner frequencies follow
    the others' weights; a zero-weight row is never a partner."""
    labels = torch.zeros(5, dtype=torch.long)
    weights = torch.tensor([1.0, 1.0, 0.5, 0.1, 0.0])
    g = torch.Generator().manual_seed(0)
    counts = np.zeros((5, 5))
    n = 4000
    for _ in range(n):
        p = mix_partners(labels, g, True, weights).numpy()
        counts[np.arange(5), p] += 1
    assert counts[:, 4].sum() == 0
    expect = np.array([1.0, 0.5, 0.1, 0.0])            # row 0's partners: rows 1, 2, 3, 4
    np.testing.assert_allclose(counts[0, 1:] / n, expect / expect.sum(), atol=0.03)
    # a uniform draw (the old behaviour) would give each other row 1/4: the check can fail
    assert abs(counts[0, 3] / n - 0.25) > 0.15
    # without weights: uniform among the other rows
    counts_u = np.zeros(5)
    for _ in range(2000):
        counts_u[mix_partners(labels, g, True)[0].item()] += 1
    np.testing.assert_allclose(counts_u[1:] / 2000, 0.25, atol=0.04)


def test_batch_norm_sees_originals_and_mixed_rows_as_one_batch():
    """With batchnorm the running statistics move once per step, by the statistics of
    the batch [originals; mixed rows]."""
    from cmix.learn.nn import ContrastiveMixup
    from cmix.learn.train import contrastive_mixup_loss

    cfg = resolve_config({"batchnorm": True, "n_layers": 1, "hidden": 8, "alpha": 0.5})
    torch.manual_seed(0)
    x = torch.randint(0, 3, (12, 5), dtype=torch.int8)
    model = ContrastiveMixup(5, cfg.model, np.ones(5, np.float32), np.ones(5, np.float32))
    model.train()
    bn = model.encoder.blocks[0][1]
    labels = torch.tensor([0] * 6 + [1] * 6)
    gen = torch.Generator().manual_seed(3)
    # layer 0 mixes the embedded inputs; fix the draw of t to 0 to know h
    gen_copy = torch.Generator().manual_seed(3)
    t = int(torch.randint(0, 2, (1,), generator=gen_copy))
    from cmix.learn.losses import draw_mixup, mix_rows
    partner, lam = draw_mixup(labels, cfg.contrastive.alpha, gen_copy, True, torch.ones(12))
    with torch.no_grad():
        h = model.encoder.forward_to(model.embed(x), t)
        mixed, _ = mix_rows(h, partner, lam)
        pre = model.encoder.blocks[0][0](torch.cat([h, mixed])) if t == 0 else None
    contrastive_mixup_loss(model, x, labels, torch.ones(12), cfg.contrastive, gen, 2, "cpu")
    assert int(bn.num_batches_tracked) == 1
    if pre is not None:
        expect = 0.9 * torch.zeros(8) + 0.1 * pre.mean(0)
        torch.testing.assert_close(bn.running_mean, expect)


def test_validation_labels_never_reach_pre_training(tmp_path, monkeypatch):
    """Shuffling the validation rows' labels after the splits are drawn changes nothing
    of pre-training (encoder states and pseudo-labels): they are neither seeds nor
    judges of the pseudo-labels."""
    import cmix.learn.data as data_mod

    dosage, label = simulate_labels(400, 30, n_classes=2, seed=4)
    store = write_test_store(tmp_path / "s.zarr", dosage, label)
    real = data_mod.make_splits
    cfg = {"epochs": 3, "warmup_epochs": 1, "lp_every": 1, "pred_epochs": 2, "hidden": 16,
           "d_proj": 8, "batch_size": 64, "lp_pcs": 5}

    def run(tag, shuffle):
        def splits(*a, **k):
            s = real(*a, **k)
            if shuffle:
                s.label = s.label.copy()
                s.label[s.validation] = 1 - s.label[s.validation]
            return s
        monkeypatch.setattr(data_mod, "make_splits", splits)
        harness.train_run(store, 60, 3, tmp_path / tag, config=cfg, device="cpu")
        ck = torch.load(tmp_path / tag / "checkpoint.pt", weights_only=False)
        return ck["parts"]

    a, b = run("a", False), run("b", True)
    for k, v in a["pretrain"]["model"].items():
        assert torch.equal(v, b["pretrain"]["model"][k]), k
    np.testing.assert_array_equal(a["pseudo"]["label"], b["pseudo"]["label"])
    np.testing.assert_array_equal(a["pseudo"]["weight"], b["pseudo"]["weight"])
    # the predictor, which early-stops on validation rows, did see them (the check can fail)
    assert any(not torch.equal(v, b["predictor"]["best"]["predictor"][k])
               for k, v in a["predictor"]["best"]["predictor"].items())
