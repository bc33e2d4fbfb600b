"""Baselines and ablations: each learns an easy simulated trait, none reads the
test rows for fitting, VIME's corruption and losses against direct computations."""

import json
import pickle

import numpy as np
import pytest
import torch

from cmix.learn import baselines
from cmix.learn import checkpoints, context, harness
from cmix.learn.methods import METHODS
from cmix.cli import main
from cmix.store.write import StoreContent, write_store
from store_helpers import log_without_seconds


def run_method(method, *args, **kw):
    """harness.train_run with the method first (as the grid loops read)."""
    return harness.train_run(*args, method=method, **kw)

TINY = {"hidden": 32, "d_proj": 16, "epochs": 3, "warmup_epochs": 2, "lp_every": 1,
        "batch_size": 64, "labeled_batch_size": 32, "pred_epochs": 40, "pred_patience": 8,
        "lp_k": 5, "vime_k": 2}
NN_METHODS = ["mlp", "ae", "vime", "manifold_mixup", "cmix_selfsl", "cmix_selfsl_pl",
              "cmix_random_mix"]


def simulate_trait(n, m, n_classes, seed, n_causal=8, h2=0.85):
    """Independent SNPs, liability from n_causal SNPs (true betas returned), classes by
    liability quantiles; 1% missing calls."""
    rng = np.random.default_rng(seed)
    maf = rng.uniform(0.1, 0.5, m)
    dosage = rng.binomial(2, maf, size=(n, m)).astype(np.int8)
    beta = np.zeros(m)
    causal = rng.choice(m, n_causal, replace=False)
    beta[causal] = rng.choice([-1, 1], n_causal) * rng.uniform(0.5, 1.0, n_causal)
    g = (dosage - 2 * maf) @ beta
    g = (g - g.mean()) / g.std()
    liab = np.sqrt(h2) * g + np.sqrt(1 - h2) * rng.normal(size=n)
    cuts = np.quantile(liab, np.linspace(0, 1, n_classes + 1)[1:-1])
    label = np.searchsorted(cuts, liab).astype(np.int16)
    dosage[rng.random(dosage.shape) < 0.01] = -1
    split = np.zeros(n, dtype=np.int8)
    split[rng.choice(n, n // 4, replace=False)] = 1
    return dosage, label, split, beta


def store_from(path, dosage, label, split, beta, trait="easy"):
    n, m = dosage.shape
    n_classes = int(label.max()) + 1
    return write_store(path, StoreContent(
        dosage=dosage, sample_id=[f"id{i}" for i in range(n)],
        sample_label=label, sample_split=split,
        variant_id=[f"rs{j}" for j in range(m)], variant_contig=["1"] * m,
        variant_position=np.arange(m) * 10 + 1,
        variant_allele=np.array([["A", "G"]] * m), variant_beta=beta,
        attrs={"trait": trait, "class_names": [f"c{c}" for c in range(n_classes)]}),
        sample_chunk=128)


@pytest.fixture(autouse=True)
def one_torch_thread():
    """Tiny networks: one thread is much faster than two on a shared 2-core machine."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


@pytest.fixture(scope="module")
def easy(tmp_path_factory):
    d = tmp_path_factory.mktemp("baselines")
    dosage, label, split, beta = simulate_trait(1000, 20, 2, seed=3, n_causal=4, h2=0.9)
    clean = store_from(d / "easy.zarr", dosage, label, split, beta)
    # the same store with the test rows' labels flipped and their genotypes scrambled
    rng = np.random.default_rng(5)
    test = split == 1
    label_p, dosage_p = label.copy(), dosage.copy()
    label_p[test] = 1 - label_p[test]
    dosage_p[test] = rng.integers(-1, 3, size=(test.sum(), dosage.shape[1]))
    poisoned = store_from(d / "poisoned.zarr", dosage_p, label_p, split, beta)
    return clean, poisoned


@pytest.mark.parametrize("method", ["logreg", "prs"] + NN_METHODS)
def test_method_learns_easy_binary_trait(easy, tmp_path, method):
    out = tmp_path / method
    m = run_method(method, easy[0], 300, 123, out, config=TINY, device="cpu")
    on_disk = json.loads((out / "metrics.json").read_text())
    assert on_disk["method"] == method and on_disk["test"] == m["test"]
    for key in ("trait", "budget", "seed", "class_names", "n_labeled", "n_train_labeled",
                "n_validation", "n_unlabeled", "n_test", "validation", "pseudo_labels",
                "test_split_sha256", "wall_seconds", "device", "versions", "config", "store"):
        assert key in m, key
    assert m["n_labeled"] == 300 and m["n_test"] == 250 and m["n_unlabeled"] == 450
    # chance is 0.5 (balanced classes); the liability has h2 0.9 from 4 SNPs
    assert m["test"]["accuracy"] > 0.65, m["test"]
    assert m["test"]["balanced_accuracy"] > 0.65, m["test"]
    assert m["test"]["auroc"] > 0.72, m["test"]
    assert "id1" not in (out / "metrics.json").read_text()
    if method not in ("logreg", "prs"):      # every predictor is refitted on all labeled rows
        assert m["validation"]["refit_epochs"] == m["validation"]["best_epoch"] >= 1


def test_methods_learn_three_classes(tmp_path):
    """Mean over three seeds (one seed's vime ranged 0.69-0.78 in macro-AUROC over five)."""
    dosage, label, split, beta = simulate_trait(900, 20, 3, seed=8, n_causal=4, h2=0.9)
    store = store_from(tmp_path / "three.zarr", dosage, label, split, beta, trait="three")
    for method in ("logreg", "prs", "vime"):
        runs = harness.train_seeds(store, 300, {s: tmp_path / method / str(s)
                                                for s in (127, 1, 2)},
                                   method=method, config={**TINY, "epochs": 8}, device="cpu")
        acc = np.mean([m["test"]["accuracy"] for m in runs])
        auc = np.mean([m["test"]["macro_auroc"] for m in runs])
        assert acc > 0.5, (method, acc)                                 # chance 1/3
        assert auc > 0.7, (method, auc)


def _fitted(path):
    """Everything a run fitted, from its checkpoint: pre-trained modules, pseudo-labels,
    the predictor's kept state and the refit, or a linear model's coefficients."""
    parts = torch.load(path / "checkpoint.pt", weights_only=False)["parts"]
    out = {k: parts[k] for k in ("pretrain", "pseudo") if k in parts}
    if "predictor" in parts:
        out["head"] = parts["predictor"]["best"]
    if "refit" in parts:
        out["refit"] = parts["refit"]["head"]
    model_state = parts.get("model", {})
    if model_state.get("probe") is not None:  # a network's linear probe on its latent
        probe = model_state["probe"]
        coef = getattr(probe["model"], "coef", None)
        out["probe"] = {"coef": coef if coef is not None else probe["model"].coef_,
                        "mu": probe["mu"], "sd": probe["sd"]}
    if model_state.get("pca") is not None:   # PCA axes of the training rows' genotypes
        pca = model_state["pca"]
        out["pca"] = {"components": pca.components_, "mean": pca.mean_}
    if "model" in model_state:               # a scikit-learn or offset model
        model = model_state["model"]
        if hasattr(model, "coef_"):
            state = {"coef": model.coef_, "intercept": model.intercept_}
        elif hasattr(model, "label_distributions_"):      # label spreading: nodes and labels
            state = {"nodes": model.X_, "labels": model.label_distributions_}
        else:                                              # trees, an offset model: the pickle
            state = {"pickle": pickle.dumps(model)}
        out["fitted"] = {**state, **{k: v for k, v in model_state.items()
                                     if k not in ("model", "pca", "cfg", "class")},
                         **parts["report"]}
    return out


def _assert_same(a, b, where=""):
    if isinstance(a, dict):
        assert set(a) == set(b), where
        for k in a:
            _assert_same(a[k], b[k], f"{where}/{k}")
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), where
        for k, (x, y) in enumerate(zip(a, b)):
            _assert_same(x, y, f"{where}/{k}")
    elif isinstance(a, torch.Tensor):
        assert torch.equal(a, b), where
    elif isinstance(a, np.ndarray):
        np.testing.assert_array_equal(a, b, err_msg=where)
    else:
        assert a == b, where


@pytest.mark.parametrize("method", [m for m in METHODS if m != "covariates"])   # no covariates here
def test_test_rows_never_used_for_fitting(easy, tmp_path, method):
    cfg = {**TINY, "epochs": 2, "pred_epochs": 6}
    a = run_method(method, easy[0], 100, 7, tmp_path / "clean", config=cfg,
                             device="cpu")
    b = run_method(method, easy[1], 100, 7, tmp_path / "poisoned", config=cfg,
                             device="cpu")
    _assert_same(_fitted(tmp_path / "clean"), _fitted(tmp_path / "poisoned"))
    assert a["validation"] == b["validation"]
    assert a["test_split_sha256"] == b["test_split_sha256"]
    # the poison did reach the test metrics (flipped labels: accuracy -> 1 - accuracy)
    assert a["test"]["accuracy"] != b["test"]["accuracy"]


def test_vime_corruption_against_direct_computation():
    from cmix.learn.streams import Draws, model_keys

    x = torch.from_numpy(np.random.default_rng(0).integers(-1, 3, (2, 50, 7)).astype(np.int8))
    keys = model_keys([4, 5], 21)
    n_rows = torch.tensor([50, 30])                   # model 1 holds its first 30 rows
    x_tilde, mask = baselines.vime_corrupt(x, 0.3, Draws(keys, 0, 1), n_rows)
    # redraw the same numbers (same key and counters, one call) and corrupt entry by
    # entry: the high 16 bits of an entry's draw against p_m, the low 16 pick the row
    bits = Draws(keys, 0, 1).bits(50, 7).numpy()
    xn = x.numpy()
    want = xn.copy()
    for g in range(2):
        for i in range(50):
            for j in range(7):
                if (bits[g, i, j] >> 16) / 65536 < 0.3:
                    r = int((bits[g, i, j] & 0xFFFF) / 65536 * int(n_rows[g]))
                    assert r < int(n_rows[g])               # only the model's own rows
                    want[g, i, j] = xn[g, r, j]
    np.testing.assert_array_equal(x_tilde.numpy(), want)
    np.testing.assert_array_equal(mask.numpy(), (want != xn).astype(np.float32))
    assert x_tilde.dtype == torch.int8
    # p_m -> 1: every entry comes from its own column (draws from its marginal), and the
    # rows are mixed across columns independently
    x_all, _ = baselines.vime_corrupt(x, 1 - 1e-9, Draws(keys, 1, 1))
    for j in range(7):
        assert set(x_all[0, :, j].tolist()) <= set(x[0, :, j].tolist())
    assert not torch.equal(x_all, x)
    # mask rate ~ p_m
    big = torch.zeros((1, 400, 50), dtype=torch.int8)
    big[:, ::2] = 1
    _, mk = baselines.vime_corrupt(big, 0.3, Draws(keys[:1], 2, 1))
    assert abs(float(mk.mean()) - 0.3 * 0.5) < 0.02      # a masked entry changes w.p. ~1/2


def test_vime_losses_against_direct_computation():
    from cmix.learn.nn import SnpEmbedding, init_generators

    rng = np.random.default_rng(1)
    b, m = 6, 5
    mask_logits = torch.from_numpy(rng.normal(size=(1, b, m)).astype(np.float32))
    mask = torch.from_numpy((rng.random((1, b, m)) < 0.4).astype(np.float32))
    x = torch.from_numpy(rng.integers(-1, 3, (1, b, m)).astype(np.int8))
    feat = torch.from_numpy(rng.normal(size=(1, b, m, 4)).astype(np.float32))
    embed = SnpEmbedding(init_generators([0], 0), m, "categorical")
    total, lm, lf = baselines.vime_self_loss(mask_logits, mask, feat, x, embed, alpha=2.0)
    p = 1 / (1 + np.exp(-mask_logits.numpy().astype(np.float64)))
    mk = mask.numpy()
    want_m = -np.mean(mk * np.log(p) + (1 - mk) * np.log(1 - p))
    f = feat.numpy().astype(np.float64)
    logp = f - np.log(np.exp(f).sum(-1, keepdims=True))
    level = np.where(x.numpy() < 0, 3, x.numpy())               # missing = 4th level
    want_f = -np.mean(np.take_along_axis(logp, level[..., None], -1))
    assert float(lm[0]) == pytest.approx(want_m, rel=1e-5)
    assert float(lf[0]) == pytest.approx(want_f, rel=1e-5)
    assert float(total[0]) == pytest.approx(want_m + 2.0 * want_f, rel=1e-5)
    # a row mask: the masked rows take no part
    rows = torch.tensor([[True, True, False, True, False, True]])
    keep = rows[0].numpy()
    _, lm_r, lf_r = baselines.vime_self_loss(mask_logits, mask, feat, x, embed, 2.0, rows)
    want_mr = -np.mean((mk * np.log(p) + (1 - mk) * np.log(1 - p))[0, keep])
    want_fr = -np.mean(np.take_along_axis(logp, level[..., None], -1)[0, keep])
    assert float(lm_r[0]) == pytest.approx(want_mr, rel=1e-5)
    assert float(lf_r[0]) == pytest.approx(want_fr, rel=1e-5)
    # dosage encoding: MSE against the standardised dosages
    mean = np.array([1.0, 0.5, 1.2, 0.8, 1.0], np.float32)
    sd = np.array([0.7, 0.5, 0.6, 0.9, 1.0], np.float32)
    emb_d = SnpEmbedding(init_generators([0], 0), m, "dosage", mean, sd)
    out = torch.from_numpy(rng.normal(size=(1, b, m)).astype(np.float32))
    _, _, lf_d = baselines.vime_self_loss(mask_logits, mask, out, x, emb_d, alpha=1.0)
    z = (x.numpy() - mean) / sd
    z[x.numpy() < 0] = 0
    assert float(lf_d[0]) == pytest.approx(np.mean((out.numpy() - z) ** 2), rel=1e-5)
    # consistency: variance over the K copies, averaged
    lk = rng.normal(size=(1, 3, b, 2))
    got = baselines.vime_consistency_loss(torch.from_numpy(lk))
    assert float(got[0]) == pytest.approx(np.mean(np.var(lk[0], axis=0)), rel=1e-6)
    got_r = baselines.vime_consistency_loss(torch.from_numpy(lk), rows)
    assert float(got_r[0]) == pytest.approx(np.mean(np.var(lk[0], axis=0)[keep]), rel=1e-6)


@pytest.mark.parametrize("dropout", [0.0, 0.3])
def test_manifold_mixup_step_against_direct_computation(dropout):
    """Mixing at layer 1 / 2 mixes after hidden block 1 / 2: its Linear, BatchNorm, ReLU
    and, with dropout, its Dropout (a fixed stride of 3 modules cut block 2 before its
    ReLU when dropout was on); each model of a group at its own layer."""
    from cmix.learn.nn import Predictor, init_generators, load_model_state, model_state

    pred = Predictor(init_generators([0, 1, 2], 0), 6, 3, hidden=8, dropout=dropout).eval()
    width = 4 if dropout else 3
    f = torch.randn(3, 5, 6, generator=torch.Generator().manual_seed(0))
    t = torch.eye(3)[torch.tensor([0, 1, 2, 1, 0])].expand(3, 5, 3)
    lam = torch.tensor([0.1, 0.5, 0.9, 0.3, 0.7]).expand(3, 5)
    perm = torch.tensor([4, 3, 2, 1, 0]).expand(3, 5)
    layer = torch.tensor([0, 1, 2])                     # model g mixes at layer g
    with torch.no_grad():
        logits, tt = baselines.manifold_mixup_step(pred, f, t, layer, lam, perm)
        for g in range(3):
            lone = Predictor(init_generators([9], 0), 6, 3, hidden=8, dropout=dropout).eval()
            load_model_state(lone, 0, model_state(pred, g))
            h = f[g:g + 1]
            blocks = [lone.net[0:width], lone.net[width:2 * width]]
            for blk in blocks[:g]:
                h = blk(h)
            lm = lam[g][:, None]
            h = lm * h + (1 - lm) * h[:, perm[g]]
            for blk in blocks[g:]:
                h = blk(h)
            torch.testing.assert_close(logits[g], lone.net[2 * width](h)[0], atol=1e-6,
                                       rtol=1e-6)
            assert torch.allclose(tt[g], lm * t[g] + (1 - lm) * t[g][perm[g]])


def test_cli_train_dispatches_to_baselines_and_rejects_unknown(easy, tmp_path, capsys):
    cfg = tmp_path / "cfg.json"
    cfg.write_text(json.dumps({"logreg_folds": 3}))
    rc = main(["train", "--store", str(easy[0]), "--budget", "80", "--seed", "1",
               "--method", "logreg", "--config", str(cfg), "--out", str(tmp_path / "lr")])
    assert rc == 0
    m = json.loads((tmp_path / "lr" / "metrics.json").read_text())
    assert m["method"] == "logreg" and m["validation"]["cv_folds"] == 3
    rc = main(["train", "--store", str(easy[0]), "--budget", "80", "--seed", "1",
               "--method", "nope", "--out", str(tmp_path / "x")])
    assert rc == 1 and "unknown method" in capsys.readouterr().err
    cfg.write_text(json.dumps({"vime_p_m": 1.5}))
    rc = main(["train", "--store", str(easy[0]), "--budget", "80", "--seed", "1",
               "--method", "vime", "--config", str(cfg), "--out", str(tmp_path / "v")])
    assert rc == 1 and "vime_p_m" in capsys.readouterr().err
    assert not (tmp_path / "v" / "metrics.json").exists()


@pytest.mark.parametrize("method", ["logreg", "gbdt", "pca_logreg"])
def test_one_labeled_row_of_a_class_is_refused_where_a_stratified_split_needs_two(
        easy, tmp_path, capsys, method):
    """Budget 2 on a 2-class store gives each class one labeled row: the CV that picks C
    and gbdt's early-stopping holdout cannot be stratified (a scikit-learn traceback);
    now one message naming the need. The networks still train on it."""
    out = tmp_path / method
    assert main(["train", "--store", str(easy[0]), "--budget", "2", "--seed", "1",
                 "--method", method, "--out", str(out)]) == 1
    err = capsys.readouterr().err
    assert "needs at least 2 labeled rows of every class" in err and "Traceback" not in err
    assert not (out / "metrics.json").exists()


def test_gbdt_equals_scikit_learn_fitted_directly_with_its_knobs(easy, tmp_path):
    """The trees' knobs reach the model (min_samples_leaf among them: scikit-learn's 20
    leaves at most two leaves per tree at a budget of 40 training rows), and a
    HistGradientBoostingClassifier early-stopped on the labeled rows' dosages (missing
    calls as NaN), then fitted again with its tree count on every labeled row, gives
    the run's test probabilities."""
    import zarr
    from sklearn.ensemble import HistGradientBoostingClassifier

    from cmix.learn.data import make_splits

    cfg = {"gbdt_lr": 0.3, "gbdt_max_leaf_nodes": 7, "gbdt_min_leaf": 3, "gbdt_l2": 2.0,
           "gbdt_max_iter": 200}
    out = tmp_path / "gbdt"
    m = run_method("gbdt", easy[0], 200, 5, out, config=cfg, device="cpu")
    model = torch.load(out / "checkpoint.pt", weights_only=False)["parts"]["model"]["model"]
    root = zarr.open_group(str(easy[0]), mode="r")
    s = make_splits(root, 200, 5)
    x = root["call_dosage"][:].astype(np.float64)
    x[x < 0] = np.nan
    knobs = dict(learning_rate=0.3, max_leaf_nodes=7, min_samples_leaf=3,
                 l2_regularization=2.0, random_state=5)
    stopped = HistGradientBoostingClassifier(
        max_iter=200, early_stopping=True, validation_fraction=0.2, n_iter_no_change=10,
        scoring="loss", **knobs).fit(x[s.labeled], s.label[s.labeled])
    assert stopped.n_iter_ < 200                 # the holdout stopped it
    # then every labeled row, with the holdout's count of trees
    ref = HistGradientBoostingClassifier(max_iter=stopped.n_iter_, early_stopping=False,
                                         **knobs).fit(x[s.labeled], s.label[s.labeled])
    assert model.min_samples_leaf == 3 and model.n_iter_ == ref.n_iter_
    assert m["validation"]["n_trees"] == stopped.n_iter_
    np.testing.assert_allclose(model.predict_proba(x[s.test]), ref.predict_proba(x[s.test]),
                               rtol=0, atol=1e-12)
    acc = float(np.mean(ref.predict(x[s.test]) == s.label[s.test]))
    assert m["test"]["accuracy"] == pytest.approx(acc, abs=1e-12)
    # leaves of at least 3 rows, and smaller than scikit-learn's default 20
    counts = np.concatenate([tree[0].nodes["count"][tree[0].nodes["is_leaf"] == 1]
                             for tree in model._predictors])
    assert counts.min() >= 3 and (counts < 20).any()


@pytest.mark.parametrize("budget, n_pcs", [(200, 20), (30, 10)])
def test_pca_logreg_chooses_its_pc_count_as_scikit_learn_cross_validation_does(
        easy, tmp_path, budget, n_pcs):
    """On the run's own PCA axes, scikit-learn's LogisticRegressionCV (same C grid, same
    stratified folds, log-loss) on the leading 5, 10 and 20 PCs of the labeled rows: the
    run keeps the count with the lowest CV log-loss (all 20 at 200 labels, 10 at 30), and
    its test accuracy is a LogisticRegression's at that count's C."""
    import zarr
    from sklearn.linear_model import LogisticRegression, LogisticRegressionCV
    from sklearn.model_selection import StratifiedKFold

    from cmix.learn.data import make_splits, project_pcs

    out = tmp_path / "pl"
    m = run_method("pca_logreg", easy[0], budget, 5, out, device="cpu")
    fitted = torch.load(out / "checkpoint.pt", weights_only=False)["parts"]["model"]
    root = zarr.open_group(str(easy[0]), mode="r")
    s = make_splits(root, budget, 5)
    x = root["call_dosage"][:]
    pcs = project_pcs(fitted["pca"], x, fitted["mean"], fitted["sd"])
    assert pcs.shape[1] == 20
    loss, model = {}, {}
    for k in (5, 10, 20):
        cv = LogisticRegressionCV(Cs=np.logspace(-4, 2, 10), scoring="neg_log_loss",
                                  cv=StratifiedKFold(5, shuffle=True, random_state=5),
                                  max_iter=2000).fit(pcs[s.labeled, :k], s.label[s.labeled])
        loss[k] = -np.mean(next(iter(cv.scores_.values())), axis=0).max()
        model[k] = LogisticRegression(C=float(cv.C_[0]), max_iter=5000).fit(
            pcs[s.labeled, :k], s.label[s.labeled])
    best = min(loss, key=lambda k: (loss[k], k))
    assert fitted["n_pcs"] == m["validation"]["n_pcs"] == best == n_pcs
    assert m["validation"]["cv_log_loss_by_n_pcs"] == pytest.approx(
        {str(k): v for k, v in loss.items()}, rel=1e-9)
    assert len(set(np.round(list(loss.values()), 9))) == 3     # the counts differ
    prob = model[best].predict_proba(pcs[s.test, :best])
    acc = float(np.mean(prob.argmax(1) == s.label[s.test]))
    assert m["test"]["accuracy"] == pytest.approx(acc, abs=1e-12)


def test_label_spreading_on_every_training_row_and_a_large_k(easy, tmp_path):
    """With every training row labeled there is no unlabeled node (the projection of
    none crashed), and spreading_k above the nodes is capped at n - 1, recorded."""
    import zarr

    n_train = int((zarr.open_group(str(easy[0]), mode="r")["sample_split"][:] == 0).sum())
    m = run_method("label_spreading", easy[0], n_train, 1, tmp_path / "all",
                   config={"spreading_k": 5000}, device="cpu")
    assert m["validation"]["n_nodes"] == n_train
    assert m["validation"]["k_capped_to"] == n_train - 1
    assert (tmp_path / "all" / "metrics.json").exists()


def test_prs_refuses_store_without_betas(easy, tmp_path):
    from cmix.errors import CmixError

    dosage, label, split, _ = simulate_trait(200, 10, 2, seed=1)
    store = store_from(tmp_path / "nob.zarr", dosage, label, split, np.zeros(10))
    with pytest.raises(CmixError, match="variant_beta"):
        run_method("prs", store, 50, 1, tmp_path / "p", device="cpu")


class _Killed(BaseException):
    """Stands for a SIGKILL right after a checkpoint write (the checkpoint on disk is
    only ever a whole one, written atomically, so that is the state a kill leaves)."""


@pytest.mark.parametrize("method, kill_after, dropout", [
    ("prs", 1, 0), ("logreg", 1, 0), ("ae", 2, 0), ("vime", 2, 0), ("manifold_mixup", 2, 0),
    ("mlp", 3, 0), ("cmix", 1, 0), ("cmix", 2, 0), ("cmix", 5, 0),
    ("mlp", 4, 0.3), ("manifold_mixup", 4, 0.3), ("vime", 6, 0.3), ("cmix", 5, 0.3)])
def test_killed_run_resumes_to_identical_metrics(easy, tmp_path, monkeypatch, method,
                                                 kill_after, dropout):
    """Every method family: stopped after its k-th checkpoint and rerun, a run gives the
    metrics and validation summary of an uninterrupted run, and the log has each epoch
    once. Every epoch's checkpoint is written here (CHECKPOINT_SECONDS 0). With dropout
    in the heads too: its masks came from torch's global generator, which a resumed run
    re-seeded at the head's build, so a resumed epoch drew epoch 0's masks."""
    cfg = {**TINY, "epochs": 3, "pred_epochs": 6, "pred_dropout": dropout}
    monkeypatch.setattr(context, "CHECKPOINT_SECONDS", 0.0)
    full = run_method(method, easy[0], 100, 7, tmp_path / "full", config=cfg, device="cpu")
    real_save, calls = context.RunContext.save, []

    def save_then_die(self, state, force=False):
        real_save(self, state, force)
        calls.append(state.stage)
        if len(calls) == kill_after:
            raise _Killed

    monkeypatch.setattr(context.RunContext, "save", save_then_die)
    with pytest.raises(_Killed):
        run_method(method, easy[0], 100, 7, tmp_path / "killed", config=cfg, device="cpu")
    monkeypatch.setattr(context.RunContext, "save", real_save)
    assert not (tmp_path / "killed" / "metrics.json").exists()
    resumed = run_method(method, easy[0], 100, 7, tmp_path / "killed", config=cfg,
                         device="cpu")
    assert resumed["test"] == full["test"] and resumed["validation"] == full["validation"]
    assert resumed["pseudo_labels"] == full["pseudo_labels"]
    assert log_without_seconds(tmp_path / "killed") == log_without_seconds(tmp_path / "full")


def test_checkpoints_are_written_at_most_every_checkpoint_seconds(easy, tmp_path,
                                                                   monkeypatch):
    """With the default interval a short run writes three checkpoints (its first epoch,
    the fitted method, the finished run), not one an epoch; killed after a later epoch
    whose checkpoint was not written, it resumes from the first epoch's to the metrics and
    log of an uninterrupted run."""
    cfg = {**TINY, "epochs": 3, "pred_epochs": 6}
    assert checkpoints.CHECKPOINT_SECONDS >= 30
    writes = []
    real_write = context.save_torch

    def counted(obj, path):
        writes.append((obj["stage"], obj["epoch"]))
        real_write(obj, path)

    monkeypatch.setattr(context, "save_torch", counted)
    full = run_method("cmix", easy[0], 100, 7, tmp_path / "full", config=cfg, device="cpu")
    assert writes == [("pretrain", 1), ("fitted", writes[1][1]), ("done", writes[2][1])]
    import learn_names as train_mod

    real_epoch, calls = train_mod.predictor_epoch, []

    def epoch_then_die(*args):
        """Killed in the predictor's second epoch: its first epoch's checkpoint was not
        written (the interval has not passed)."""
        calls.append(1)
        if len(calls) == 2:
            raise _Killed
        return real_epoch(*args)

    train_mod.patch(monkeypatch, "predictor_epoch", epoch_then_die)
    writes.clear()
    with pytest.raises(_Killed):
        run_method("cmix", easy[0], 100, 7, tmp_path / "killed", config=cfg, device="cpu")
    assert writes == [("pretrain", 1)]
    train_mod.patch(monkeypatch, "predictor_epoch", real_epoch)
    resumed = run_method("cmix", easy[0], 100, 7, tmp_path / "killed", config=cfg,
                         device="cpu")
    assert resumed["test"] == full["test"] and resumed["validation"] == full["validation"]
    assert log_without_seconds(tmp_path / "killed") == log_without_seconds(tmp_path / "full")


def test_resume_flag_needs_a_checkpoint(easy, tmp_path, capsys):
    """--resume without a checkpoint is an error for every family, as the help says."""
    for method in ("logreg", "ae"):
        code = main(["train", "--store", str(easy[0]), "--budget", "100", "--seed", "7",
                     "--method", method, "--resume", "--out", str(tmp_path / method)])
        assert code == 1
        assert "--resume given but there is no checkpoint.pt" in capsys.readouterr().err
