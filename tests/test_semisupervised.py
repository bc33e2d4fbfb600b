"""Unlabeled data that never hurts: cmix's cross-fitted judge (fold models that never see
their fold's labels, every labeled row scored once, the run exactly cmix_paper's or
cmix_selfsl's), cmix_paper without a judge, partners drawn by certainty, batch norm with
mixed rows, validation labels kept out of pre-training, the head choice."""

from types import SimpleNamespace

import numpy as np
import pytest
import torch

from cmix.learn import harness
from cmix.learn.config import resolve_config
from cmix.learn.methods.cmix.losses import mix_partners

import learn_names
from store_helpers import simulate_labels, write_test_store


def test_partners_are_drawn_in_proportion_to_certainty():
    """One class, certainty weights 1, 1, 0.5, 0.1, 0: a row's partner frequencies follow
    the others' weights; a zero-weight row is never a partner."""
    from cmix.learn.streams import Draws, model_keys

    labels = torch.zeros(1, 5, dtype=torch.long)
    weights = torch.tensor([[1.0, 1.0, 0.5, 0.1, 0.0]])
    keys = model_keys([0], 1)
    counts = np.zeros((5, 5))
    n = 4000
    for k in range(n):
        p = mix_partners(labels, weights, Draws(keys, k).uniform(5))[0].numpy()
        counts[np.arange(5), p] += 1
    assert counts[:, 4].sum() == 0
    expect = np.array([1.0, 0.5, 0.1, 0.0])            # row 0's partners: rows 1, 2, 3, 4
    np.testing.assert_allclose(counts[0, 1:] / n, expect / expect.sum(), atol=0.03)
    # a uniform draw (the old behaviour) would give each other row 1/4: the check can fail
    assert abs(counts[0, 3] / n - 0.25) > 0.15
    # unit weights: uniform among the other rows
    counts_u = np.zeros(5)
    for k in range(2000):
        counts_u[int(mix_partners(labels, torch.ones(1, 5), Draws(keys, k).uniform(5))[0, 0])] += 1
    np.testing.assert_allclose(counts_u[1:] / 2000, 0.25, atol=0.04)


def test_batch_norm_sees_originals_and_mixed_rows_as_one_batch():
    """With batchnorm the running statistics move once per step, by the statistics of
    the batch [originals; mixed rows that exist at that block] (a mixed row exists from
    its layer t on, and only where it has a partner)."""
    from cmix.learn.methods.cmix.losses import mix_partners as partners, mix_rows
    from cmix.learn.nn import ContrastiveMixup, init_generators
    from cmix.learn.streams import Draws, model_keys
    from cmix.learn.methods.cmix.pretrain import Batch, contrastive_mixup_loss

    cfg = resolve_config({"batchnorm": True, "n_layers": 1, "hidden": 8, "alpha": 0.5})
    x = torch.randint(0, 3, (1, 12, 5), dtype=torch.int8, generator=torch.Generator().manual_seed(0))
    labels = torch.tensor([[0] * 5 + [1] * 5 + [-1] * 2])      # two rows without a label
    w = (labels >= 0).float()
    mask = torch.ones(1, 12, dtype=torch.bool)
    seen_t = set()
    for step in range(12):
        model = ContrastiveMixup(init_generators([0], 0), 5, cfg.model, np.ones(5, np.float32),
                                 np.ones(5, np.float32))
        model.train()
        bn = model.encoder.blocks[0][1]
        keys = model_keys([0], 1)
        u = Draws(keys, 0, step).uniform(1 + 2 * 12)     # the same draws: t, partners, lam
        t = int((u[:, 0] * 2).long().clamp_max(1)[0])
        partner = partners(labels, w, u[:, 1:13])
        lam = u[:, 13:] * cfg.contrastive.alpha
        with torch.no_grad():
            e = model.embed(x)
            lin = model.encoder.blocks[0][0]
            rows = e[0]
            if t == 0:
                mixed = mix_rows(e, partner, lam)[0][partner[0] >= 0]
                rows = torch.cat([rows, mixed])
            pre = lin(rows[None])[0]
        contrastive_mixup_loss(model, Batch(x, labels, w, mask), Draws(keys, 0, step),
                               cfg.contrastive, 2)
        assert int(bn.num_batches_tracked[0]) == 1
        torch.testing.assert_close(bn.running_mean[0], 0.1 * pre.mean(0))
        seen_t.add(t)
    assert seen_t == {0, 1}                            # both layers drawn: both cases checked


def test_validation_labels_never_reach_pre_training(tmp_path, monkeypatch):
    """Shuffling the validation rows' labels after the splits are drawn changes nothing
    of pre-training (both arms' encoders, own and fold models, pseudo-labels and the
    judge's verdict): they are neither seeds nor judges of the pseudo-labels."""
    import cmix.learn.data as data_mod

    dosage, label = simulate_labels(400, 30, n_classes=2, seed=4)
    store = write_test_store(tmp_path / "s.zarr", dosage, label)
    real = data_mod.make_splits
    cfg = {"epochs": 3, "warmup_epochs": 1, "lp_every": 1, "pred_epochs": 2, "hidden": 16,
           "d_proj": 8, "batch_size": 64}

    def run(tag, shuffle):
        def splits(*a, **k):
            s = real(*a, **k)
            if shuffle:
                s.label = s.label.copy()
                s.label[s.validation] = 1 - s.label[s.validation]
            return s
        learn_names.patch(monkeypatch, "make_splits", splits)
        harness.train_run(store, 60, 3, tmp_path / tag, config=cfg, device="cpu")
        ck = torch.load(tmp_path / tag / "checkpoint.pt", weights_only=False)
        return ck["parts"]

    a, b = run("a", False), run("b", True)
    for part in ("pretrain", "pretrain_all", "pretrain:fold0", "pretrain_all:fold1"):
        for k, v in a[part]["model"].items():
            assert torch.equal(v, b[part]["model"][k]), (part, k)
    drop = lambda d: {k: v for k, v in d.items() if k != "seconds"}  # noqa: E731
    assert drop(a["lp_info"][-1]) == drop(b["lp_info"][-1])       # the judge's verdict too
    np.testing.assert_array_equal(a["pseudo"]["label"], b["pseudo"]["label"])
    np.testing.assert_array_equal(a["pseudo"]["weight"], b["pseudo"]["weight"])
    # the predictor, which early-stops on validation rows, did see them (the check can fail)
    assert any(not torch.equal(v, b["predictor"]["best"][k])
               for k, v in a["predictor"]["best"].items())


def test_a_folds_labels_never_reach_its_fold_models(tmp_path, monkeypatch):
    """cmix's judge: fold model f of either arm never sees fold f's labels (not in its
    label-aware terms, not as a propagation seed). Flipping fold 0's labels leaves both
    arms' fold model 0 and its pseudo-labels as they were, to the bit, while the run's
    own models, which see them, change; flipping a few of fold 1's labels changes fold
    model 0 (the check can fail)."""
    import cmix.learn.data as data_mod
    import learn_names as train_mod

    dosage, label = simulate_labels(400, 30, n_classes=2, seed=4)
    store = write_test_store(tmp_path / "s.zarr", dosage, label)
    real = data_mod.make_splits
    cfg = {"epochs": 3, "warmup_epochs": 1, "lp_every": 1, "pred_epochs": 1, "hidden": 16,
           "d_proj": 8, "batch_size": 64, "lp_judge_folds": 3}
    # fixed folds: rows 0, 3, 6, ... in fold 0, rows 1, 4, ... in fold 1, ...
    train_mod.patch(monkeypatch, "judge_folds", lambda ctx: np.arange(len(ctx.splits.train_labeled)) % 3)

    def run(tag, which):
        def splits(*a, **k):
            s = real(*a, **k)
            rows = {None: [], "fold0": s.train_labeled[0::3],
                    "fold1": s.train_labeled[1::6]}[which]
            s.label = s.label.copy()
            s.label[rows] = 1 - s.label[rows]
            return s
        learn_names.patch(monkeypatch, "make_splits", splits)
        harness.train_run(store, 80, 3, tmp_path / tag, config=cfg, device="cpu")
        return torch.load(tmp_path / tag / "checkpoint.pt", weights_only=False)["parts"]

    a, b, c = run("a", None), run("b", "fold0"), run("c", "fold1")
    same = lambda x, y: all(torch.equal(v, y["model"][k]) for k, v in x["model"].items())  # noqa: E731,E501
    for arm in ("pretrain", "pretrain_all"):
        assert same(a[f"{arm}:fold0"], b[f"{arm}:fold0"]), arm    # fold 0 unseen
        assert not same(a[arm], b[arm]), arm                      # the own model saw it
        assert not same(a[f"{arm}:fold0"], c[f"{arm}:fold0"]), arm  # fold model 0 saw fold 1
    for key in ("label", "weight"):
        np.testing.assert_array_equal(a["pseudo_folds"][0][key], b["pseudo_folds"][0][key])


class _Run:
    """A run as :func:`cmix.learn.methods.cmix.judge.judge_arms` reads it: n labeled
    training rows of classes y, no covariates."""

    def __init__(self, y, seed=0):
        self.splits = SimpleNamespace(label=y, train_labeled=np.arange(len(y)),
                                      n_classes=int(y.max()) + 1)
        self.cfg, self.n_cov, self.seed = resolve_config({}), 0, seed


def _judge(monkeypatch, y, fold, paper, selfsl):
    """judge_arms on one run with K = fold.max() + 1 fold models, each arm's head inputs
    given per model (K + 1 arrays (n, d): the run's own model first)."""
    import learn_names as networks

    k = int(fold.max()) + 1
    run = _Run(y)
    group = SimpleNamespace(ctxs=[run] * (k + 1), roles=list(range(k + 1)), n_models=k + 1,
                            runs=lambda: [run])
    networks.patch(monkeypatch, "run_inputs", lambda g, arm, rows: arm)
    return networks.judge_arms(group, paper, selfsl, {id(run): fold})[0]


def test_a_memorised_latent_does_not_fool_the_judge(monkeypatch):
    """Paper arm: fold model f's latent holds the class of every row it was trained on
    and noise for fold f's, and the run's own model holds every class: a judge that
    scored a row with a model that saw its label would prefer it. Selfsl arm: a weaker
    signal on every row. Each row scored by its fold's model and probe (fitted outside
    the fold) finds the selfsl arm better: the pseudo-labels are refused, every row
    judged once."""
    rng = np.random.default_rng(0)
    n, k = 120, 3
    y = np.tile([0, 1], n // 2)
    fold = np.arange(n) % k
    signal = (2 * y - 1)[:, None] * np.ones((1, 4))
    paper = [signal * 3 + rng.normal(scale=0.1, size=(n, 4))]
    for f in range(k):
        z = signal * 3 + rng.normal(scale=0.1, size=(n, 4))
        z[fold == f] = rng.normal(size=((fold == f).sum(), 4))
        paper.append(z)
    selfsl = [signal + rng.normal(scale=1.0, size=(n, 4)) for _ in range(k + 1)]
    v = _judge(monkeypatch, y, fold, paper, selfsl)
    assert v["n_judge"] == n and not v["used"]
    assert v["paper_accuracy"] < 0.7 < 0.8 < v["selfsl_accuracy"]
    assert v["selfsl_brier"] < v["paper_brier"]
    swapped = _judge(monkeypatch, y, fold, selfsl, paper)      # the same, arms swapped
    assert swapped["used"] and swapped["p_value"] < 0.01


def test_the_judge_is_cross_fitting_computed_directly(monkeypatch):
    """With a nearest-centroid probe put in for the linear one (C its sharpness), the
    judge's held-out Brier scores, accuracies, p and choice equal a direct computation:
    each row of fold f scored on fold model f's inputs by centroids of the rows outside
    fold f, at the C of the grid with the lowest mean Brier score on the other half of
    fold f (alternate rows), the paired one-sided t-test of the per-row differences by
    scipy, used at p <= 5%."""
    from scipy.stats import ttest_rel

    import learn_names as networks

    def fit(ctx, x, y, c, n_classes=2, cov_c=None):
        return np.stack([x[y == k].mean(0) for k in range(n_classes)]), c

    def proba(probe, x, n_classes):
        centres, c = probe
        logit = -c * ((x[:, None, :] - centres[None]) ** 2).sum(-1)
        e = np.exp(logit - logit.max(1, keepdims=True))
        return e / e.sum(1, keepdims=True)

    networks.patch(monkeypatch, "fit_probe", fit)
    networks.patch(monkeypatch, "probe_proba", proba)
    cs = np.logspace(-4, 2, resolve_config({}).logreg.logreg_n_c)
    rng = np.random.default_rng(1)
    n, k = 60, 2
    y = rng.integers(0, 2, n)
    fold = rng.integers(0, k, n)
    used, chosen = [], set()
    for paper_signal, selfsl_signal in ((1.0, 0.8), (2.0, 0.3), (0.3, 2.0)):
        arms = {a: [(2 * y - 1)[:, None] * sig + rng.normal(size=(n, 3))
                    for _ in range(k + 1)]
                for a, sig in (("paper", paper_signal), ("selfsl", selfsl_signal))}
        v = _judge(monkeypatch, y, fold, arms["paper"], arms["selfsl"])
        want = {}
        for a, z in arms.items():
            loss, right = np.zeros(n), np.zeros(n, bool)
            for f in range(k):
                idx = np.flatnonzero(fold == f)
                out = fold != f
                briers, probs = [], []
                for c in cs:
                    p = proba(fit(None, z[f + 1][out], y[out], c), z[f + 1][idx], 2)
                    probs.append(p)
                    briers.append(((p - np.eye(2)[y[idx]]) ** 2).sum(1))
                briers = np.array(briers)
                for h in (0, 1):
                    mine = np.arange(len(idx)) % 2 == h
                    best = int(np.argmin(briers[:, ~mine].mean(1)))
                    chosen.add(best)
                    loss[idx[mine]] = briers[best, mine]
                    right[idx[mine]] = probs[best][mine].argmax(1) == y[idx[mine]]
            want[a] = loss
            assert v[f"{a}_brier"] == pytest.approx(loss.mean(), rel=1e-12)
            assert v[f"{a}_accuracy"] == right.mean()
        p = ttest_rel(want["selfsl"], want["paper"], alternative="greater").pvalue
        assert v["p_value"] == pytest.approx(p, rel=1e-2)
        assert v["used"] == (p <= networks.JUDGE_LEVEL)
        used.append(v["used"])
    assert used[1:] == [True, False]        # a clear gain is taken, a clear loss refused
    assert len(chosen) > 1                  # the choice of C moves with the data


def test_the_probe_chooses_c_on_rows_the_encoder_never_saw_labeled(monkeypatch):
    """The training labeled rows' latent holds their classes (as an encoder pre-trained
    with their labels does), the validation rows' only a weak signal: the probe's C, its
    validation log-loss and its choice equal scikit-learn's logistic regression fitted
    on the training rows at each C of the grid and scored on the validation rows. A
    cross-validation over the training rows would take the largest C; this takes a C at
    which the probe is no worse than a constant on the validation rows, and the
    validation rows, not the training rows, decide it."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import log_loss

    import learn_names as networks

    rng = np.random.default_rng(3)
    n_tr, n_val, d = 80, 40, 6
    y_tr, y_val = np.tile([0, 1], n_tr // 2), np.tile([0, 1], n_val // 2)
    x_tr = (2 * y_tr - 1)[:, None] * 3.0 + rng.normal(size=(n_tr, d))      # memorised
    x_val = (2 * y_val - 1)[:, None] * 0.1 + rng.normal(size=(n_val, d))   # weak signal
    run = _Run(np.r_[y_tr, y_val])
    run.splits.train_labeled = np.arange(n_tr)
    run.splits.validation = np.arange(n_tr, n_tr + n_val)
    run.splits.labeled = np.arange(n_tr + n_val)
    x_all = np.vstack([x_tr, x_val])
    group = SimpleNamespace(ctxs=[run], n_models=1)
    networks.patch(monkeypatch, "run_inputs", lambda g, m, rows: [x_all[rows[0]]])
    mu, sd = x_tr.mean(0), x_tr.std(0) + 1e-9
    cs = networks.probe_cs(run)
    direct = [log_loss(y_val, LogisticRegression(C=c, max_iter=5000)
                       .fit((x_tr - mu) / sd, y_tr).predict_proba((x_val - mu) / sd))
              for c in cs]
    best = int(np.argmin(direct))
    for mlp_loss, want_head in ((0.6, "mlp"), (5.0, "linear")):
        summaries = [{"best_loss": mlp_loss}]
        probes = networks.choose_heads(group, None, summaries)
        got = summaries[0]
        assert got["probe_C"] == cs[best] and best < len(cs) - 1
        assert got["head_val_log_loss"]["linear"] == pytest.approx(direct[best], rel=1e-6)
        assert got["head_val_log_loss"]["linear"] <= np.log(2) + 0.01
        assert got["head"] == want_head
        assert (probes[0] is not None) == (want_head == "linear")
    assert probes[0]["C"] == cs[best]        # refitted on every labeled row at that C
    np.testing.assert_allclose(probes[0]["mu"], x_all.mean(0))


def test_cmix_paper_uses_its_pseudo_labels_without_any_judge(tmp_path, monkeypatch):
    """cmix_paper: no judge is called (it would raise), every look's pseudo-labels are
    used, each weighted by its certainty."""
    import learn_names as networks

    def no_judge(*a):
        raise AssertionError("cmix_paper called the judge")

    networks.patch(monkeypatch, "judge_arms", no_judge)
    dosage, label = simulate_labels(400, 30, n_classes=2, seed=4)
    store = write_test_store(tmp_path / "s.zarr", dosage, label)
    cfg = {"epochs": 3, "warmup_epochs": 1, "lp_every": 1, "pred_epochs": 3, "hidden": 16,
           "d_proj": 8, "batch_size": 64}
    paper = harness.train_run(store, 100, 3, tmp_path / "paper", method="cmix_paper",
                              config=cfg, device="cpu")
    pl = paper["pseudo_labels"]
    assert pl["used"] and pl["epochs"] == [1, 2, 3] and pl["n_judge"] is None
    assert pl["p_value"] is None and 0 < pl["mean_weight"] < 1
    ck = torch.load(tmp_path / "paper" / "checkpoint.pt", weights_only=False)
    w = ck["parts"]["pseudo"]["weight"]
    assert np.all((w >= 0) & (w <= 1)) and len(np.unique(w)) > 10   # certainties, not 0/1
    with pytest.raises(AssertionError, match="called the judge"):
        harness.train_run(store, 100, 3, tmp_path / "cmix", config=cfg, device="cpu")


@pytest.mark.parametrize("used", [False, True])
def test_cmix_is_exactly_cmix_paper_or_cmix_selfsl(tmp_path, monkeypatch, used):
    """Whatever its judge says, a cmix run's test and validation metrics equal, to the
    bit, those of cmix_paper (yes: its pseudo-labels used) or of cmix_selfsl (no), and
    differ from the other's (the check can fail)."""
    import learn_names as networks

    real = networks.judge_arms
    networks.patch(monkeypatch, "judge_arms", lambda *a: [{**v, "used": used} for v in real(*a)])
    dosage, label = simulate_labels(400, 30, n_classes=2, n_causal=10, h2=0.9, seed=4)
    store = write_test_store(tmp_path / "s.zarr", dosage, label)
    cfg = {"epochs": 3, "warmup_epochs": 1, "lp_every": 1, "pred_epochs": 3, "hidden": 16,
           "d_proj": 8, "batch_size": 64, "lp_alpha": 0.9}
    runs = {m: harness.train_run(store, 150, 3, tmp_path / m, method=m, config=cfg, device="cpu")
            for m in ("cmix", "cmix_selfsl", "cmix_paper")}
    same, other = ("cmix_paper", "cmix_selfsl") if used else ("cmix_selfsl", "cmix_paper")
    assert runs["cmix"]["pseudo_labels"]["used"] is used
    for key in ("test", "validation"):
        assert runs["cmix"][key] == runs[same][key], key
    assert runs["cmix"]["test"] != runs[other]["test"]


def test_a_judge_needs_two_folds():
    """One fold would leave no model to judge it: lp_judge_folds 1 is refused, naming the
    key; the single held-out fold of before is no key any more."""
    from cmix.errors import CmixError

    with pytest.raises(CmixError, match=r"lp_judge_folds = 1, expected an integer >= 2"):
        resolve_config({"lp_judge_folds": 1})
    with pytest.raises(CmixError, match="did you mean 'lp_judge_folds'"):
        resolve_config({"lp_judge_fraction": 0.25})


@pytest.mark.parametrize("method", ["cmix_selfsl", "ae"])
def test_the_head_choice_never_reads_a_test_row(tmp_path, monkeypatch, method):
    """The MLP-or-probe choice of a frozen-encoder method reads the latent of training
    labeled, validation and labeled rows only: every row handed to the head inputs while
    heads are chosen is outside the test split, the probe is scored on the validation
    rows, and the choice is recorded with both losses."""
    import learn_names as networks

    dosage, label = simulate_labels(300, 30, n_classes=2, seed=6)
    store = write_test_store(tmp_path / "s.zarr", dosage, label)
    seen, tests = [], []
    real_inputs, real_choose = networks.run_inputs, networks.choose_heads

    def choose(group, model, summaries):
        tests.extend(int(r) for c in group.ctxs for r in c.splits.test)
        networks.patch(monkeypatch, "run_inputs", lambda g, m, rows: seen.extend(int(r) for x in rows for r in x)
                            or real_inputs(g, m, rows))
        try:
            return real_choose(group, model, summaries)
        finally:
            networks.patch(monkeypatch, "run_inputs", real_inputs)

    networks.patch(monkeypatch, "choose_heads", choose)
    m = harness.train_run(store, 100, 3, tmp_path / "run", method=method,
                          config={"epochs": 2, "warmup_epochs": 1, "pred_epochs": 3,
                                  "hidden": 16, "d_proj": 8, "batch_size": 64},
                          device="cpu")
    assert seen and tests and not set(seen) & set(tests)
    losses = m["validation"]["head_val_log_loss"]
    assert m["validation"]["head"] in ("mlp", "linear") and losses["mlp"] is not None
    assert losses["linear"] is not None


def test_a_class_too_rare_for_a_folds_probe_still_lets_every_row_be_judged(monkeypatch):
    """Three rows of class 2, two of them in fold 0: fold 0's probe has one class-2 row
    to fit on, fewer than the 2 a class needs, so it fits classes 0 and 1; every row is
    still judged, and a class-2 row of fold 0 costs both arms the same (its class has
    probability 0 in both)."""
    import learn_names as networks

    rng = np.random.default_rng(2)
    y = np.r_[np.repeat([0, 1], 28), [2, 2, 2]]
    n, fold = len(y), np.arange(len(y)) % 2
    centres = rng.normal(scale=3, size=(3, 4))
    arms = [[centres[y] + rng.normal(size=(n, 4)) for _ in range(3)] for _ in range(2)]
    losses = {}
    real = networks.probe_proba

    def proba(probe, x, n_classes):
        p = real(probe, x, n_classes)
        losses.setdefault(n_classes, 0)
        losses[n_classes] += 1
        return p

    networks.patch(monkeypatch, "probe_proba", proba)
    v = _judge(monkeypatch, y, fold, *arms)
    assert v["n_judge"] == n and v["paper_brier"] is not None
    n_c = len(networks.probe_cs(_Run(y)))
    assert losses == {2: 2 * n_c, 3: 2 * n_c}  # fold 0: classes 0, 1; fold 1: all three
    assert v["paper_brier"] >= 2 / n        # two rows whose class had probability 0
