"""Same seed, same result on CPU at 1 and 2 threads: the ops whose torch kernels split a
reduction among threads (batch norm statistics, whole-tensor means, BLAS dot products in
label propagation, atomic adds in the mixup backward) against a one-thread or dense
reference, and whole `cmix train` runs in subprocesses at OMP_NUM_THREADS=1 and 2."""

import json
import os
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
import torch
import torch.nn.functional as F

from cmix.learn import harness
from cmix.learn.methods.cmix.labelprop import propagate
from cmix.learn.methods.cmix.losses import fixed_order_sum, mix_partners, mix_rows, reconstruction_loss
from cmix.learn.nn import GroupBatchNorm, Predictor, SnpEmbedding, init_generators
from store_helpers import log_without_seconds, simulate_labels, write_test_store

REPO = Path(__file__).resolve().parent.parent


@contextmanager
def torch_threads(n):
    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def predictor_step(n_threads, n_models=1):
    """Output, input gradient and parameter gradients of one training-mode Predictor
    forward/backward on a fixed batch (128 rows, 256 -> 100 -> 100 -> 3) of each of
    ``n_models`` models, and its running statistics, at ``n_threads`` torch threads."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(8, 128, 256, generator=g)[:n_models].clone().requires_grad_(True)
    w = torch.randn(8, 128, 3, generator=g)[:n_models]
    net = Predictor(init_generators(range(1, n_models + 1), 0), 256, 3)
    with torch_threads(n_threads):
        out = net(x)
        (out * w).sum().backward()
    return [out.detach(), x.grad] + [p.grad for p in net.parameters()] + list(net.buffers())


def test_predictor_batch_norm_is_the_same_at_1_and_2_threads():
    one, two = predictor_step(1), predictor_step(2)
    assert all(torch.equal(a, b) for a, b in zip(one, two))
    # and model 0 of a group of 8 computes what it computes alone
    eight = predictor_step(2, n_models=8)
    assert all(torch.equal(a[:1], b[:1]) for a, b in zip(one, eight))


def test_batch_norm_matches_torch_batch_norm():
    """Each model's output, gradients and running statistics are those of nn.BatchNorm1d
    (torch's kernel, one thread) on its rows, to rounding; a row mask leaves rows out of
    the statistics (as torch on the other rows alone)."""
    g = torch.Generator().manual_seed(3)
    ours = GroupBatchNorm(2, 40)
    refs = [torch.nn.BatchNorm1d(40) for _ in range(2)]
    with torch.no_grad():
        ours.weight.copy_(torch.linspace(0.5, 2.0, 80).view(2, 40))
        ours.bias.copy_(torch.linspace(-1.0, 1.0, 80).view(2, 40))
        for i, m in enumerate(refs):
            m.weight.copy_(ours.weight[i])
            m.bias.copy_(ours.bias[i])
    keep = 50                                   # model 1 holds its first 50 rows only
    mask = torch.ones(2, 64, dtype=torch.bool)
    mask[1, keep:] = False
    for _ in range(3):
        x = torch.randn(2, 64, 40, generator=g) * 3 + 1
        up = torch.randn(2, 64, 40, generator=g)
        xx = x.clone().requires_grad_(True)
        with torch_threads(1):
            y = ours(xx, mask)
            (y * up * mask[..., None]).sum().backward()
        for i, m in enumerate(refs):
            n = 64 if i == 0 else keep
            xr = x[i, :n].clone().requires_grad_(True)
            with torch_threads(1):
                yr = m(xr)
                (yr * up[i, :n]).sum().backward()
            torch.testing.assert_close(y[i, :n].detach(), yr.detach(), rtol=1e-5, atol=1e-5)
            torch.testing.assert_close(xx.grad[i, :n], xr.grad, rtol=1e-5, atol=1e-5)
        for i, m in enumerate(refs):
            torch.testing.assert_close(ours.weight.grad[i], m.weight.grad, rtol=1e-5, atol=1e-5)
            torch.testing.assert_close(ours.bias.grad[i], m.bias.grad, rtol=1e-5, atol=1e-5)
        ours.weight.grad = ours.bias.grad = None
        for m in refs:
            m.weight.grad = m.bias.grad = None
    for i, m in enumerate(refs):
        torch.testing.assert_close(ours.running_mean[i], m.running_mean)
        torch.testing.assert_close(ours.running_var[i], m.running_var)
        assert int(ours.num_batches_tracked[i]) == int(m.num_batches_tracked) == 3
    ours.eval()
    x = torch.randn(2, 10, 40, generator=g)
    for i, m in enumerate(refs):
        m.eval()
        torch.testing.assert_close(ours(x)[i], m(x[i]))


def test_fixed_order_sum_matches_float64_and_thread_count():
    g = torch.Generator().manual_seed(0)
    for shape in [(1, 3), (1, 384, 1000), (2, 70001), (40, 1025), (64, 3000)]:
        x = torch.randn(*shape, generator=g) + 0.5
        with torch_threads(1):
            one = fixed_order_sum(x)
        with torch_threads(2):
            two = fixed_order_sum(x)
        assert torch.equal(one, two), shape
        np.testing.assert_allclose(one.numpy(), x.double().reshape(shape[0], -1).sum(1).numpy(),
                                   rtol=1e-5)
        # a model's sum does not depend on the models beside it
        assert torch.equal(fixed_order_sum(x[:1]), one[:1])


def test_reconstruction_loss_is_the_same_at_1_and_2_threads():
    """384 rows x 1000 SNPs: more elements than torch sums on one thread; the value and
    gradient agree with torch's mse_loss (one thread) to rounding. (The categorical loss's
    value is checked in test_losses.py.)"""
    g = torch.Generator().manual_seed(0)
    x = torch.randint(-1, 3, (1, 384, 1000), generator=g).to(torch.int8)
    embed = SnpEmbedding(init_generators([0], 0), 1000, "dosage", mean=torch.full((1000,), 0.8),
                         sd=torch.full((1000,), 0.7))
    out = torch.randn(1, 384, 1000, generator=g)
    results = []
    for n in (1, 2):
        o = out.clone().requires_grad_(True)
        with torch_threads(n):
            loss = reconstruction_loss(o, x, embed)
            loss.sum().backward()
        results.append((loss.detach(), o.grad))
    assert torch.equal(results[0][0], results[1][0])
    assert torch.equal(results[0][1], results[1][1])
    o = out.clone().requires_grad_(True)
    with torch_threads(1):
        ref = F.mse_loss(o, embed.standardised(x))
        ref.backward()
    torch.testing.assert_close(results[0][0][0], ref.detach(), rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(results[0][1], o.grad, rtol=1e-4, atol=1e-9)


def test_mixup_backward_adds_repeated_partners_in_a_fixed_order():
    """Within-class mixup partners repeat rows; the backward of the partners' gather must
    give the one-thread sums at 2 threads, every time (torch's CPU kernel uses atomic adds
    from several threads unless deterministic algorithms are on)."""
    from cmix.learn.streams import Draws, model_keys

    g = torch.Generator().manual_seed(0)
    labels = torch.randint(0, 2, (1, 4096), generator=g)
    h = torch.randn(1, 4096, 64, generator=g)
    draws = Draws(model_keys([0], 1), 0, 0)
    partner = mix_partners(labels, torch.ones(1, 4096), draws.uniform(4096))
    lam = draws.uniform(4096) * 0.5
    up = torch.randn(1, 4096, 64, generator=g)

    def grad(n_threads):
        hh = h.clone().requires_grad_(True)
        with torch_threads(n_threads):
            (mix_rows(hh, partner, lam) * up).sum().backward()
        return hh.grad

    with harness.deterministic_algorithms("cpu"):
        ref = grad(1)
        assert all(torch.equal(grad(2), ref) for _ in range(5))
    assert not torch.are_deterministic_algorithms_enabled()      # restored after the run


def test_the_deterministic_switch_sets_torch_s_flags_without_importing_inductor():
    """Inside the run's switch torch's deterministic flag is on (warn-only on CUDA), and
    both are restored after; in a fresh process the switch leaves torch._inductor
    unimported (torch.use_deterministic_algorithms itself imports it)."""
    code = ("import sys, torch\n"
            "from cmix.learn.harness import deterministic_algorithms\n"
            "seen = []\n"
            "for device in ('cpu', 'cuda'):\n"
            "    with deterministic_algorithms(device):\n"
            "        seen += [torch.are_deterministic_algorithms_enabled(),\n"
            "                 torch.is_deterministic_algorithms_warn_only_enabled()]\n"
            "    seen += [torch.are_deterministic_algorithms_enabled(),\n"
            "             torch.is_deterministic_algorithms_warn_only_enabled()]\n"
            "print(*seen, 'torch._inductor' in sys.modules)\n"
            "torch.use_deterministic_algorithms(False)\n"
            "print('torch._inductor' in sys.modules)")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO),
                                                       os.environ.get("PYTHONPATH", "")]))
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, check=True).stdout.split()
    assert out[:8] == ["True", "False", "False", "False", "True", "True", "False", "False"]
    assert out[8:] == ["False", "True"]      # the public call would have imported it


def test_label_propagation_is_the_same_at_1_and_2_threads():
    """20,000 nodes: longer vectors than OpenBLAS/MKL or torch sum on one thread in a dot
    product; the conjugate gradients at 1 and 2 torch (and BLAS) threads."""
    from threadpoolctl import threadpool_limits

    rng = np.random.default_rng(0)
    n = 20000
    rows = np.repeat(np.arange(n), 3)
    w = sp.csr_matrix((rng.random(3 * n), (rows, rng.integers(0, n, 3 * n))), shape=(n, n))
    w = (w + w.T).tocsr()
    w.setdiag(0)
    w.eliminate_zeros()
    lab = rng.choice(n, 200, replace=False)
    y = rng.integers(0, 3, 200)
    results = []
    for n_threads in (1, 2):
        with threadpool_limits(limits=n_threads, user_api="blas"), torch_threads(n_threads):
            results.append(propagate(w, lab, y, 3))
    assert np.array_equal(results[0].prob, results[1].prob)
    assert np.array_equal(results[0].weight, results[1].weight)


# ------------------------------------------------------------------ whole runs
@pytest.fixture(scope="module")
def det_store(tmp_path_factory):
    dosage, label = simulate_labels(640, 400, n_classes=3, n_causal=20, h2=0.8, seed=5)
    path = tmp_path_factory.mktemp("det") / "det.zarr"
    write_test_store(path, dosage, label, sample_chunk=128)
    return path


CONFIG = {"hidden": 64, "d_proj": 32, "epochs": 3, "warmup_epochs": 1, "lp_every": 1,
          "batch_size": 96, "labeled_batch_size": 32, "pred_epochs": 12, "pred_patience": 4,
          "pred_hidden": 64, "lp_k": 5}


#: (method, budget, seeds) of the whole runs compared at 1 and 2 threads: a lone seed at
#: budget 30 (a 6-row validation set, 24 labeled rows), 80 and 100, and a group of two
RUNS = [("cmix", 30, [3]), ("cmix", 100, [3]), ("cmix", 30, [3, 4]), ("mlp", 80, [3])]


@pytest.fixture(scope="module")
def runs(det_store, tmp_path_factory):
    """metrics.json and train_log.jsonl (without timings) of `cmix train` for each of
    :data:`RUNS` at OMP_NUM_THREADS=1 and 2: one subprocess per thread count (started
    together), each running the CLI for every entry."""
    tmp = tmp_path_factory.mktemp("runs")
    cfg_file = tmp / "cfg.json"
    cfg_file.write_text(json.dumps(CONFIG))
    procs = {}
    for n_threads in (1, 2):
        argvs = [["train", "--store", str(det_store), "--budget", str(budget), "--seed",
                  *map(str, seeds), "--method", method, "--device", "cpu", "--config",
                  str(cfg_file),
                  "--out", str(tmp / f"{method}_{budget}_{len(seeds)}_{n_threads}_s{{seed}}")]
                 for method, budget, seeds in RUNS]
        code = ("import sys; from cmix.cli import main; "
                f"sys.exit(max(main(argv) for argv in {argvs!r}))")
        env = dict(os.environ, OMP_NUM_THREADS=str(n_threads),
                   PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
        procs[n_threads] = subprocess.Popen([sys.executable, "-c", code], env=env,
                                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                            text=True)
    for proc in procs.values():
        _, err = proc.communicate()
        assert proc.returncode == 0, err
    results = {}
    for method, budget, seeds in RUNS:
        for n_threads in (1, 2):
            for seed in seeds:
                out = tmp / f"{method}_{budget}_{len(seeds)}_{n_threads}_s{seed}"
                results[method, budget, len(seeds), seed, n_threads] = (
                    json.loads((out / "metrics.json").read_text()), log_without_seconds(out))
    return results


@pytest.mark.parametrize("method, budget, seeds", RUNS)
def test_train_gives_the_same_metrics_at_1_and_2_threads(runs, method, budget, seeds):
    for seed in seeds:
        (m1, log1), (m2, log2) = (runs[method, budget, len(seeds), seed, n] for n in (1, 2))
        assert (m1["torch_threads"], m2["torch_threads"]) == (1, 2)
        for key in ("test", "validation", "pseudo_labels"):
            assert m1[key] == m2[key], key
        assert log1 == log2                      # every epoch's losses, bit for bit
        if method == "cmix":
            assert m1["pseudo_labels"] is not None and any(r["stage"] == "pretrain"
                                                           for r in log1)


def test_logistic_regression_is_the_same_at_1_and_2_blas_threads():
    """The linear baselines' fits and probabilities (C by CV, covariates as an offset)
    at 1 and 2 BLAS threads: 1,000 x 500 dosages, where OpenBLAS splits the products
    among threads."""
    from threadpoolctl import threadpool_limits

    from cmix.learn.linear import fit_logreg_cv, fit_with_covariates
    from cmix.learn.methods.base import full_proba

    rng = np.random.default_rng(4)
    x = rng.binomial(2, 0.3, (1000, 500)).astype(np.float64)
    y = (x[:, :20].sum(1) + rng.normal(0, 2, 1000) > 12).astype(np.int64)
    cov = rng.normal(size=(1000, 3))
    out = []
    for n_threads in (1, 2):
        with threadpool_limits(limits=n_threads, user_api="blas"):
            model = fit_logreg_cv(x, y, 2, 5, 8, seed=1)[0]
            offset = fit_with_covariates(x[:, :200], cov, y, 2, 3, 4, seed=1)[0]
            out.append([model.coef_, full_proba(model, x, 2), offset.coef,
                        offset.predict_proba(np.hstack([x[:, :200], cov]))])
    for a, b in zip(*out):
        assert np.array_equal(a, b)
