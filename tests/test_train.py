"""End-to-end training runs (tiny), the frozen encoder, pseudo-labels in the predictor's
loss, resume after a kill, and bad inputs."""

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch

import learn_names as train_mod
from cmix.learn import checkpoints, context, harness, shared
from cmix.cli import main
from cmix.learn.methods import METHODS
from cmix.errors import CmixError
from store_helpers import log_without_seconds, simulate_labels, write_test_store

TINY = {"hidden": 32, "d_proj": 16, "epochs": 4, "warmup_epochs": 2, "lp_every": 1,
        "batch_size": 64, "labeled_batch_size": 32, "pred_epochs": 15, "pred_patience": 5,
        "lp_k": 5}


@pytest.fixture(scope="module")
def toy_store(tmp_path_factory):
    dosage, label = simulate_labels(600, 50, n_classes=2, n_causal=10, h2=0.8, seed=11)
    path = tmp_path_factory.mktemp("train") / "toy.zarr"
    write_test_store(path, dosage, label, sample_chunk=128)
    return path


def judge_says(monkeypatch, used: bool):
    """cmix's judge made to say yes (the run then trains as cmix_paper does: these tests
    need the pseudo-labels used) or no, its evidence computed as usual."""
    import learn_names as nets

    real = nets.judge_arms
    nets.patch(monkeypatch, "judge_arms", lambda *a: [{**v, "used": used} for v in real(*a)])


def pseudo_labels_beat_the_head(monkeypatch):
    judge_says(monkeypatch, True)


def test_cmix_run_writes_metrics_and_log(toy_store, tmp_path, monkeypatch):
    # a head the pseudo-labels beat: they are used, so every look of the schedule runs
    pseudo_labels_beat_the_head(monkeypatch)
    out = tmp_path / "run"
    m = harness.train_run(toy_store, 60, 123, out, config=TINY, device="cpu")
    on_disk = json.loads((out / "metrics.json").read_text())
    assert on_disk["test"] == m["test"] and on_disk["method"] == "cmix"
    assert m["n_labeled"] == 60 and m["n_validation"] == 12 and m["n_test"] == 150
    assert m["n_unlabeled"] == 450 - 60
    assert 0 <= m["test"]["accuracy"] <= 1 and m["test"]["auroc"] is not None
    assert m["pseudo_labels"]["epochs"] == [2, 3, 4]              # after K, then every f
    assert m["pseudo_labels"]["used"]
    assert 0 < m["pseudo_labels"]["coverage"] <= 1
    assert set(m["wall_seconds"]) >= {"pretrain", "label_propagation", "predictor", "evaluate"}
    log = [json.loads(line) for line in (out / "train_log.jsonl").read_text().splitlines()]
    assert [r["epoch"] for r in log if r["stage"] == "pretrain"] == [1, 2, 3, 4]
    assert all("s0" not in json.dumps(r) for r in log)             # no sample IDs
    # same seed -> same result; rerunning a finished run returns it
    m2 = harness.train_run(toy_store, 60, 123, tmp_path / "again", config=TINY, device="cpu")
    assert m2["test"] == m["test"] and m2["pseudo_labels"] == m["pseudo_labels"]


@pytest.fixture
def made_models(monkeypatch):
    """Every ContrastiveMixup the trainer builds during the test, in order."""
    import cmix.learn.nn as nn_mod
    made = []

    class Spy(nn_mod.ContrastiveMixup):
        def __init__(self, *a, **k):
            super().__init__(*a, **k)
            made.append(self)
    train_mod.patch(monkeypatch, "ContrastiveMixup", Spy)
    return made


def test_predictor_stage_freezes_encoder_and_uses_pseudo_labels(toy_store, tmp_path, monkeypatch,
                                                                made_models):
    seen = {}
    made = made_models
    real_epoch = train_mod.predictor_epoch

    def spy_epoch(head, opt, train, *rest):
        enc = made[0]                   # the group's network (the judged group's is made[1])
        enc_params = {id(p) for p in enc.parameters()}
        assert all(not p.requires_grad for p in enc.parameters())
        assert not any(id(p) in enc_params for p in opt.params)
        seen.setdefault("n_rows", int(train.count[0]))   # the first (early-stopped) fit
        seen.setdefault("weights", train.weight[0].cpu().numpy())
        before = {k: v.clone() for k, v in enc.state_dict().items()}
        loss = real_epoch(head, opt, train, *rest)
        assert all(torch.equal(before[k], v) for k, v in enc.state_dict().items())
        return loss
    train_mod.patch(monkeypatch, "predictor_epoch", spy_epoch)
    # a head that never beats the pseudo-labels on held-out rows: they are used
    pseudo_labels_beat_the_head(monkeypatch)
    m = harness.train_run(toy_store, 60, 5, tmp_path / "spy", config=TINY, device="cpu")
    # the predictor trained on the labeled rows plus the pseudo-labeled rows, weighted by w
    n_train_labeled = m["n_labeled"] - m["n_validation"]
    n = seen["n_rows"]
    assert n > n_train_labeled
    w = seen["weights"][:n]
    assert np.all(w[w == 1].size >= n_train_labeled)
    assert np.all(w <= 1) and np.any(w < 1) and np.all(seen["weights"][n:] == 0)


def test_pseudo_labels_change_the_predictor_loss():
    from cmix.learn.group_heads import Labeled
    from cmix.learn.nn import GroupAdam, Head, Identity, Predictor, init_generators
    from cmix.learn.streams import model_keys

    g = torch.Generator().manual_seed(0)
    z = torch.randn(1, 40, 8, generator=g)
    eye = torch.eye(2)
    y = torch.randint(0, 2, (40,), generator=g)
    w = torch.cat([torch.ones(10), torch.full((30,), 0.5)])

    def loss_with(labels, weights, mixup=True):
        head = Head(Identity(), Predictor(init_generators([0], 0), 8, 2))
        opt = GroupAdam(head.parameters(), 1, lr=0.0)   # lr 0: loss of the same weights
        train = Labeled(x=z, target=eye[labels][None], weight=weights[None],
                        count=torch.tensor([40]))
        return float(train_mod.predictor_epoch(head, opt, train, 0, torch.tensor([True]),
                                               model_keys([1], 3), 1000,
                                               torch.tensor([mixup]))[0])
    base = loss_with(y, w)
    flipped = y.clone()
    flipped[10:] = 1 - flipped[10:]                 # change only the pseudo-labels
    assert loss_with(flipped, w) != pytest.approx(base, rel=1e-6)
    w2 = w.clone()
    w2[10:] = 0.0                                    # pseudo rows with zero weight drop out
    assert loss_with(flipped, w2, False) == pytest.approx(loss_with(y, w2, False), rel=1e-6)
    assert loss_with(flipped, w, False) != pytest.approx(loss_with(y, w, False), rel=1e-6)


def test_a_moving_encoder_is_caught(toy_store, tmp_path, monkeypatch, made_models):
    """The frozen-encoder check compares with a copy taken before the predictor stage: a
    predictor epoch that nudges the encoder (a test double; the group's network, the
    first made: a run whose pseudo-labels weigh nothing is pre-trained again in a second
    one whose weights are copied into it) must stop the run."""
    made = made_models
    real_epoch = train_mod.predictor_epoch

    def nudging_epoch(*args):
        with torch.no_grad():
            next(made[0].encoder.parameters()).view(-1)[0] += 1e-3
        return real_epoch(*args)
    train_mod.patch(monkeypatch, "predictor_epoch", nudging_epoch)
    with pytest.raises(CmixError, match="encoder changed during the predictor stage"):
        harness.train_run(toy_store, 60, 5, tmp_path / "nudged", config=TINY, device="cpu")
    assert not (tmp_path / "nudged" / "metrics.json").exists()


def test_mlp_method_and_ablation_switches(toy_store, tmp_path, monkeypatch):
    """Each method's switches change what runs, not only a metadata field."""
    import cmix.learn.methods.cmix.losses as losses_mod
    calls = {}

    def spy(module, name):
        real = getattr(module, name)

        def wrapper(*a, **k):
            out = real(*a, **k)
            calls.setdefault(name, []).append((a, k, out))
            return out
        train_mod.patch(monkeypatch, name, wrapper)
    spy(train_mod, "pretrain_epoch")
    spy(train_mod, "record_look")
    spy(train_mod, "predictor_epoch")
    # pseudo-labels that beat the head on held-out rows, so that they reach the predictor
    pseudo_labels_beat_the_head(monkeypatch)
    spy(losses_mod, "contrastive_targets")
    seen = {}
    for method in [m.name for m in METHODS.values() if m.family == "trainer"]:
        calls.clear()
        m = harness.train_run(toy_store, 60, 123, tmp_path / method, method=method,
                                config=TINY, device="cpu")
        assert m["method"] == method
        first = calls["predictor_epoch"][0][0]          # (head, opt, train, ..., mix_on)
        n_pred_rows = int(first[2].count[0])
        q_soft = any(bool(((out[0] > 0) & (out[0] < 1)).any())
                     for _, _, out in calls.get("contrastive_targets", []))
        seen[method] = {"pretrain": "pretrain_epoch" in calls,
                        "lp": "record_look" in calls,
                        "pred_mixup": any(bool(c[0][7].any()) for c in calls["predictor_epoch"]),
                        "extra_rows": n_pred_rows > m["n_train_labeled"],
                        "soft_positives": q_soft}
    assert seen["mlp"] == {"pretrain": False, "lp": False, "pred_mixup": False,
                           "extra_rows": False, "soft_positives": False}
    assert seen["cmix_selfsl"] == {"pretrain": True, "lp": False, "pred_mixup": False,
                                   "extra_rows": False, "soft_positives": False}
    assert seen["cmix_selfsl_pl"] == {"pretrain": True, "lp": True, "pred_mixup": False,
                                      "extra_rows": True, "soft_positives": False}
    assert seen["cmix"] == {"pretrain": True, "lp": True, "pred_mixup": True,
                            "extra_rows": True, "soft_positives": False}
    assert seen["cmix_random_mix"] == {"pretrain": True, "lp": True, "pred_mixup": True,
                                       "extra_rows": True, "soft_positives": True}
    assert seen["cmix_paper"] == {"pretrain": True, "lp": True, "pred_mixup": True,
                                  "extra_rows": True, "soft_positives": False}
    assert seen["cmix_paper_pl"] == {"pretrain": True, "lp": True, "pred_mixup": False,
                                     "extra_rows": True, "soft_positives": False}
    m = harness.train_run(toy_store, 60, 123, tmp_path / "rand",
                            config={**TINY, "mix": "random", "pseudo_labels": False,
                                    "encoding": "dosage", "n_layers": 2}, device="cpu")
    assert m["pseudo_labels"] is None and m["config"]["mix"] == "random"


def test_refit_on_all_labeled_rows_for_the_chosen_epochs(toy_store, tmp_path, monkeypatch):
    """After early stopping picks an epoch count on the validation rows, the predictor is
    retrained from the same initialisation on training + validation rows for that many
    epochs, and that model is the one evaluated."""
    sizes = []
    real_epoch = train_mod.predictor_epoch

    def spy(head, opt, train, *rest):
        sizes.append(int(train.count[0]))
        return real_epoch(head, opt, train, *rest)
    train_mod.patch(monkeypatch, "predictor_epoch", spy)
    m = harness.train_run(toy_store, 60, 3, tmp_path / "refit", method="mlp", config=TINY,
                            device="cpu")
    n_tr, n_val = m["n_train_labeled"], m["n_validation"]
    best = m["validation"]["best_epoch"]
    assert best >= 1 and m["validation"]["refit_epochs"] == best
    n_search = len(sizes) - best
    assert sizes[:n_search] == [n_tr] * n_search
    assert sizes[n_search:] == [n_tr + n_val] * best
    sizes.clear()
    m0 = harness.train_run(toy_store, 60, 3, tmp_path / "norefit", method="mlp",
                             config={**TINY, "pred_refit": False}, device="cpu")
    assert m0["validation"]["refit_epochs"] == 0 and set(sizes) == {n_tr}
    assert m0["test"] != m["test"]


def _cli(args):
    return [sys.executable, "-m", "cmix.cli", "train", *args]


def _same(a, b) -> bool:
    """Deep equality of nested dicts / lists / tensors / arrays / plain values."""
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(map(_same, a, b))
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.dtype == b.dtype and torch.equal(a, b)
    if isinstance(a, np.ndarray):
        return isinstance(b, np.ndarray) and a.dtype == b.dtype and np.array_equal(a, b)
    return type(a) is type(b) and a == b


def test_the_checkpoint_holds_every_field_of_the_state(tmp_path):
    """What RunContext.save writes loads back as dataclasses.asdict of the state: every
    field, tensors and arrays in nested parts included."""
    from dataclasses import asdict
    from types import SimpleNamespace

    from cmix.atomic import load_torch

    g = torch.Generator().manual_seed(0)
    state = checkpoints.RunState(run_key="k", stage="predictor", epoch=3,
                                 history=[{"stage": "pretrain", "epoch": 1, "loss": 0.5}],
                                 times={"pretrain": 1.25},
                                 parts={"pretrain": {"model": {"w": torch.randn(4, 3, generator=g)}},
                                        "pseudo": {"label": np.arange(5), "weight": np.ones(5)},
                                        "report": {"validation": None, "list": [1, (2, 3)]}})
    ctx = SimpleNamespace(out_dir=tmp_path)
    context.RunContext.save(ctx, state, force=True)
    saved = load_torch(tmp_path / checkpoints.CHECKPOINT_FILE)
    assert _same(saved, asdict(state))
    assert (tmp_path / checkpoints.LOG_FILE).read_text() == json.dumps(state.history[0]) + "\n"


def _python(code: str) -> str:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(Path(__file__).resolve().parent.parent), os.environ.get("PYTHONPATH", "")]))
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                          text=True, check=True).stdout


def test_help_imports_no_heavy_library():
    """`cmix --help` and `cmix train --help` import none of torch, scikit-learn, dask,
    zarr."""
    out = _python("import sys\nfrom cmix.cli import main\n"
                  "for argv in (['--help'], ['train', '--help']):\n"
                  "    try:\n        main(argv)\n    except SystemExit:\n        pass\n"
                  "print('HEAVY', sorted(m for m in ('torch', 'sklearn', 'dask', 'zarr')"
                  " if m in sys.modules))")
    assert out.splitlines()[-1] == "HEAVY []"


def test_a_cli_step_freezes_the_objects_at_exit(toy_store, tmp_path):
    """After a `cmix train`, the process's exit moves the objects out of the garbage
    collector's reach (gc.freeze), so exit skips collecting torch's objects; the run's
    outputs are whole."""
    out = tmp_path / "run"
    got = _python("import atexit, gc\nfrom cmix.cli import main\n"
                  f"rc = main(['train', '--store', {str(toy_store)!r}, '--budget', '60', "
                  f"'--seed', '1', '--method', 'logreg', '--device', 'cpu', '--out', "
                  f"{str(out)!r}])\n"
                  "before = gc.get_freeze_count()\natexit._run_exitfuncs()\n"
                  "print(rc, before, gc.get_freeze_count() > 0)")
    assert got.split()[-3:] == ["0", "0", "True"]
    assert json.loads((out / "metrics.json").read_text())["method"] == "logreg"


def test_killed_run_resumes_to_the_same_metrics(toy_store, tmp_path):
    cfg = {**TINY, "epochs": 12, "lp_every": 3, "pred_epochs": 8}
    cfg_file = tmp_path / "cfg.json"
    cfg_file.write_text(json.dumps(cfg))
    common = ["--store", str(toy_store), "--budget", "60", "--seed", "7", "--device", "cpu",
              "--config", str(cfg_file)]
    out = tmp_path / "killed"
    env = dict(os.environ, OMP_NUM_THREADS="2")       # several threads: still bit for bit
    proc = subprocess.Popen(_cli([*common, "--out", str(out)]), env=env,
                            stderr=subprocess.PIPE, stdout=subprocess.DEVNULL)
    deadline = time.time() + 120
    while not (out / "checkpoint.pt").exists() and time.time() < deadline:
        time.sleep(0.02)
    assert proc.poll() is None, "the run ended before it could be killed"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert not (out / "metrics.json").exists()
    done = torch.load(out / "checkpoint.pt", weights_only=False)
    assert done["stage"] == "pretrain" and done["epoch"] < 12
    r = subprocess.run(_cli([*common, "--out", str(out), "--resume"]), env=env,
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "resuming from pretrain epoch" in r.stderr
    ref = tmp_path / "straight"
    r = subprocess.run(_cli([*common, "--out", str(ref)]), env=env, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    a = json.loads((out / "metrics.json").read_text())
    b = json.loads((ref / "metrics.json").read_text())
    for key in ("test", "pseudo_labels", "validation", "n_labeled", "test_split_sha256"):
        assert a[key] == b[key], key


@pytest.mark.slow
def test_interrupted_seeds_stop_at_once_and_resume(toy_store, tmp_path):
    """Ctrl-C on `cmix train` running two seeds at once (this process and a worker) ends
    it with exit 130 and one line, no traceback and no worker left; the same command
    then resumes both seeds to the metrics of an uninterrupted one-thread run."""
    cfg_file = tmp_path / "cfg.json"
    # a seed must outlast the worker's start by seconds, on a loaded machine too: at 40
    # epochs the first seed ended 0.4 s after the second's first checkpoint
    cfg_file.write_text(json.dumps({**TINY, "epochs": 400, "lp_every": 5}))
    common = ["--store", str(toy_store), "--budget", "60", "--seed", "3", "5", "--device",
              "cpu", "--config", str(cfg_file)]
    out = tmp_path / "s{seed}"
    proc = subprocess.Popen(_cli([*common, "--threads", "2", "--out", str(out)]),
                            stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True,
                            start_new_session=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.time() + 120
    while not all((tmp_path / f"s{s}/checkpoint.pt").exists() for s in (3, 5)):
        assert time.time() < deadline and proc.poll() is None, "both seeds never started"
        time.sleep(0.02)
    assert not any((tmp_path / f"s{s}/metrics.json").exists() for s in (3, 5)), \
        "a seed ended before the other started: raise the test's epochs"
    os.killpg(proc.pid, signal.SIGINT)
    err = proc.communicate(timeout=60)[1]
    assert proc.returncode == 130, err
    assert "interrupted" in err and "Traceback" not in err and "Exception in" not in err
    time.sleep(0.5)
    session = subprocess.run(["ps", "-o", "stat=", "-s", str(proc.pid)], capture_output=True,
                             text=True).stdout.split()
    assert all(st.startswith("Z") for st in session), "a worker outlived the command"
    assert not any((tmp_path / f"s{s}/metrics.json").exists() for s in (3, 5))
    r = subprocess.run(_cli([*common, "--threads", "2", "--out", str(out)]),
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "resuming from" in r.stderr
    ref = tmp_path / "ref{seed}"
    r = subprocess.run(_cli([*common, "--threads", "1", "--out", str(ref)]),
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    for s in (3, 5):
        a = json.loads((tmp_path / f"s{s}/metrics.json").read_text())
        b = json.loads((tmp_path / f"ref{s}/metrics.json").read_text())
        for key in ("test", "pseudo_labels", "validation", "run_key"):
            assert a[key] == b[key], (s, key)


def test_bad_inputs_give_one_clear_error_and_no_metrics(toy_store, tmp_path, capsys):
    def run(store, budget, out, *extra):
        code = main(["train", "--store", str(store), "--budget", str(budget), "--seed", "1",
                     "--out", str(out), "--device", "cpu", *extra])
        err = capsys.readouterr().err
        assert code == 1 and not (Path(out) / "metrics.json").exists()
        return err

    assert "larger than the training split" in run(toy_store, 451, tmp_path / "a")
    assert "smaller than the number of classes" in run(toy_store, 1, tmp_path / "b")
    assert "store not found" in run(tmp_path / "nope.zarr", 10, tmp_path / "c")
    broken = tmp_path / "broken.zarr"
    shutil.copytree(toy_store, broken)
    shutil.rmtree(broken / "sample_label")
    assert "store lacks sample_label" in run(broken, 10, tmp_path / "d")
    noattr = tmp_path / "noattr.zarr"
    shutil.copytree(toy_store, noattr)
    attrs = json.loads((noattr / ".zattrs").read_text())
    del attrs["class_names"]
    (noattr / ".zattrs").write_text(json.dumps(attrs))
    assert "attribute class_names" in run(noattr, 10, tmp_path / "e")
    bad_cfg = tmp_path / "bad.yaml"
    bad_cfg.write_text("epochs: 2\nlearning_rate: 0.1\n")
    assert "unknown config key" in run(toy_store, 10, tmp_path / "f", "--config", str(bad_cfg))
    assert "unknown method" in run(toy_store, 10, tmp_path / "g", "--method", "svm")
    assert "--resume given" in run(toy_store, 10, tmp_path / "h", "--resume")
    if not torch.cuda.is_available():
        code = main(["train", "--store", str(toy_store), "--budget", "10", "--seed", "1",
                     "--out", str(tmp_path / "i"), "--device", "cuda"])
        assert code == 1 and "no CUDA GPU" in capsys.readouterr().err
    # a different run in the same folder is refused, not mixed up
    harness.train_run(toy_store, 20, 1, tmp_path / "j", config={**TINY, "epochs": 1,
                                                                   "pred_epochs": 1}, device="cpu")
    with pytest.raises(CmixError, match="holds a finished run with another"):
        harness.train_run(toy_store, 30, 1, tmp_path / "j", config=TINY, device="cpu")


def _without_times(metrics: dict) -> dict:
    """A run's metrics less its wall times and torch thread count (how it ran, not what
    it found)."""
    return {k: v for k, v in metrics.items() if k not in ("wall_seconds", "torch_threads")}


def _same_run_folders(a: Path, b: Path) -> None:
    """metrics.json equal but for wall times; predictions.npz equal array for array."""
    assert (_without_times(json.loads((a / "metrics.json").read_text()))
            == _without_times(json.loads((b / "metrics.json").read_text())))
    with np.load(a / "predictions.npz") as pa, np.load(b / "predictions.npz") as pb:
        assert sorted(pa.files) == sorted(pb.files)
        for name in pa.files:
            assert np.array_equal(pa[name], pb[name]), name


@pytest.mark.parametrize("threads", [1, 2])
def test_several_seeds_in_one_call_match_lone_runs(toy_store, tmp_path, threads):
    """train_seeds of 3 seeds of a method without a network writes, for each, the run
    folder a lone run of that seed writes into another folder (the lone runs go in the
    reverse order, so a state carried from one run to the next would show). With 1
    thread the seeds run one after another in this process; with 2, two at a time in
    worker processes of one thread each; the lone runs have one thread."""
    seeds = [4, 9, 2]
    dirs = {s: tmp_path / f"many/seed{s}" for s in seeds}
    in_this_process = []
    real = harness.train_seed

    def after_the_others(method_, store, budget, seed, *args):
        """This process's run of a seed waits for the worker to finish the others."""
        in_this_process.append(seed)
        deadline = time.monotonic() + 300
        while threads == 2 and not all((dirs[s] / "metrics.json").exists()
                                       for s in seeds if s != seed):
            assert time.monotonic() < deadline, "the worker process ran no seed"
            time.sleep(0.1)
        return real(method_, store, budget, seed, *args)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(harness, "train_seed", after_the_others)
        many = harness.train_seeds(toy_store, 60, dirs, method="logreg", config=TINY,
                                   device="cpu", threads=threads)
    assert [m["seed"] for m in many] == seeds
    assert len(in_this_process) == (1 if threads == 2 else 3)
    if threads == 2:
        assert {m["torch_threads"] for m in many} == {1}
    for seed in reversed(seeds):
        lone = harness.train_seeds(toy_store, 60, {seed: tmp_path / f"lone/seed{seed}"},
                                   method="logreg", config=TINY, device="cpu", threads=1)[0]
        got = many[seeds.index(seed)]
        for key in ("test", "validation", "pseudo_labels", "run_key"):
            assert got[key] == lone[key], (seed, key)
        _same_run_folders(tmp_path / f"many/seed{seed}", tmp_path / f"lone/seed{seed}")
    assert len({m["run_key"] for m in many}) == 3


@pytest.mark.parametrize("method, threads", [("mlp", 1), ("mlp", 2), ("cmix", 2),
                                             ("vime", 2), ("manifold_mixup", 2)])
def test_a_group_of_seeds_matches_lone_runs(toy_store, tmp_path, method, threads):
    """The seeds of a network method train as one group (one process, every step one set
    of tensor operations for all models): each seed's run folder is the one a lone run
    of it writes, bit for bit on the CPU, whatever the thread counts (the group at
    ``threads``, the lone runs at 1, in the reverse order); the group's runs are in one
    process, not in workers."""
    seeds = [4, 9, 2]
    dirs = {s: tmp_path / f"many/seed{s}" for s in seeds}
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(harness, "seed_feeders", None)       # no worker process is started
        many = harness.train_seeds(toy_store, 60, dirs, method=method,
                                   config={**TINY, "pred_dropout": 0.2}, device="cpu",
                                   threads=threads)
    assert [m["seed"] for m in many] == seeds
    assert {m["torch_threads"] for m in many} == {threads}
    for seed in reversed(seeds):
        lone = harness.train_seeds(toy_store, 60, {seed: tmp_path / f"lone/seed{seed}"},
                                   method=method, config={**TINY, "pred_dropout": 0.2},
                                   device="cpu", threads=1)[0]
        got = many[seeds.index(seed)]
        for key in ("test", "validation", "pseudo_labels", "run_key"):
            assert got[key] == lone[key], (seed, key)
        a = json.loads((tmp_path / f"many/seed{seed}/metrics.json").read_text())
        b = json.loads((tmp_path / f"lone/seed{seed}/metrics.json").read_text())
        assert _without_times(a) == {**_without_times(b)}
        assert log_without_seconds(tmp_path / f"many/seed{seed}") == \
            log_without_seconds(tmp_path / f"lone/seed{seed}")
        with np.load(tmp_path / f"many/seed{seed}/predictions.npz") as pa, \
                np.load(tmp_path / f"lone/seed{seed}/predictions.npz") as pb:
            for name in pa.files:
                assert np.array_equal(pa[name], pb[name]), name
    assert len({m["run_key"] for m in many}) == 3


@pytest.mark.parametrize("threads", [1, 2])
def test_several_seeds_skip_a_finished_run_and_name_a_failing_seed(toy_store, tmp_path,
                                                                   threads):
    """A finished seed's folder is left as it is while the others run; a seed that fails
    is named in the error and the seeds started before it finish (one after another, or
    two at a time in worker processes); one after another, none starts after it."""
    done = tmp_path / "seed2"
    harness.train_run(toy_store, 60, 2, done, method="logreg", device="cpu")
    def finished():
        return (done / "metrics.json").read_bytes(), (done / "metrics.json").stat().st_mtime_ns

    before = finished()
    dirs = {s: tmp_path / f"seed{s}" for s in (1, 2, 3)}
    out = harness.train_seeds(toy_store, 60, dirs, method="logreg", device="cpu",
                              threads=threads)
    assert finished() == before
    assert [m["seed"] for m in out] == [1, 2, 3]
    assert all((d / "metrics.json").exists() for d in dirs.values())
    # seed 6's folder holds another seed's finished run: refused, naming seed 6
    dirs = {5: tmp_path / "seed5", 6: tmp_path / "seed1", 7: tmp_path / "seed7"}
    with pytest.raises(CmixError, match=r"^seed 6 \(.*seed1\): .*holds a finished run"):
        harness.train_seeds(toy_store, 60, dirs, method="logreg", device="cpu",
                            threads=threads)
    assert json.loads((tmp_path / "seed5/metrics.json").read_text())["seed"] == 5
    if threads == 1:          # two at a time, seed 7 starts if seed 5 ends first
        assert not (tmp_path / "seed7").exists()


def test_cli_takes_several_seeds_with_a_seed_field_in_out(toy_store, tmp_path, capsys):
    """--seed with several seeds needs {seed} in --out (refused before anything is
    written otherwise); with it, each seed's run lands in its own folder."""
    common = ["train", "--store", str(toy_store), "--budget", "60", "--method", "logreg",
              "--device", "cpu"]
    assert main([*common, "--seed", "1", "2", "--out", str(tmp_path / "run")]) == 1
    err = capsys.readouterr().err
    assert "--out" in err and "{seed}" in err and not (tmp_path / "run").exists()
    assert main([*common, "--seed", "1", "1", "--out", str(tmp_path / "r{seed}")]) == 1
    assert "seed 1 given twice" in capsys.readouterr().err and not list(tmp_path.glob("r*"))
    assert main([*common, "--seed", "1", "2", "--out", str(tmp_path / "run{seed}")]) == 0
    for seed in (1, 2):
        assert json.loads((tmp_path / f"run{seed}/metrics.json").read_text())["seed"] == seed
    assert main([*common, "--seed", "3", "--out", str(tmp_path / "one/seed{seed}")]) == 0
    assert (tmp_path / "one/seed3/metrics.json").exists()


# ------------------------------------------------------------------ shared pre-training
def test_shared_encoders_leave_every_metric_and_log_as_it_was(toy_store, tmp_path):
    """The cmix methods run with a shared-encoder folder give the metrics, validation,
    pseudo-label summary and log they give alone: cmix_paper makes its pre-training and
    cmix_paper_pl takes it (no new file), cmix_selfsl makes its own; cmix, whose judge
    needs its fold models, neither takes nor leaves one."""
    methods = ["cmix_paper", "cmix_paper_pl", "cmix_selfsl", "cmix"]
    enc = tmp_path / "encoders"
    alone, shared, n_files = {}, {}, []
    for m in methods:
        alone[m] = harness.train_run(toy_store, 60, 9, tmp_path / "alone" / m, method=m,
                                     config=TINY, device="cpu")
    for m in methods:
        shared[m] = harness.train_run(toy_store, 60, 9, tmp_path / "shared" / m, method=m,
                                      config=TINY, device="cpu",
                                      reuse=context.Reuse(encoders=enc))
        n_files.append(len(list(enc.glob("*.pt"))))
    assert n_files == [1, 1, 2, 2]
    for m in methods:
        for key in ("test", "validation", "pseudo_labels"):
            assert shared[m][key] == alone[m][key], (m, key)
        assert (log_without_seconds(tmp_path / "shared" / m)
                == log_without_seconds(tmp_path / "alone" / m)), m
    assert (shared["cmix_paper_pl"]["wall_seconds"]["pretrain"]
            < 0.5 * alone["cmix_paper_pl"]["wall_seconds"]["pretrain"])


def test_shared_encoder_keys_follow_what_pre_training_reads(toy_store, tmp_path):
    """One key for the stages two methods share, another for any config key the
    pre-training reads, the mix, the seed or the budget."""
    from types import SimpleNamespace

    from cmix.learn.config import resolve_config
    from cmix.learn.data import make_splits
    from cmix.learn.context import check_store

    def key(method="cmix_paper", pseudo="unjudged", seed=9, budget=60, **config):
        cfg = resolve_config({**TINY, **config}, METHODS[method].switches)
        store = check_store(toy_store, cfg)
        ctx = SimpleNamespace(cfg=cfg, trait=str(store.root.attrs["trait"]), budget=budget,
                              seed=seed, store_sha256=store.sha256, dev=torch.device("cpu"),
                              splits=make_splits(store.root, budget, seed, 0.2, "toy.zarr"))
        return shared.shared_stage_key(ctx, pseudo)

    base = key()
    assert key("cmix_paper_pl") == base
    assert key(pseudo=None) == key("cmix_selfsl", pseudo=None) != base
    assert key("cmix_random_mix") != base
    for changed in ({"lr": 3e-3}, {"tau": 0.5}, {"lp_k": 7}, {"hidden": 16}, {"seed": 10},
                    {"budget": 70}):
        assert key(**changed) != base, changed
    threads = torch.get_num_threads()
    torch.set_num_threads(threads + 1)       # MKL's products may differ by thread count
    try:
        assert key() != base
    finally:
        torch.set_num_threads(threads)


def test_a_damaged_shared_encoder_stops_the_run(toy_store, tmp_path):
    """A shared encoder file cut short, or holding another key, is refused by name."""
    enc = tmp_path / "encoders"
    harness.train_run(toy_store, 60, 9, tmp_path / "a", method="cmix_selfsl", config=TINY,
                      device="cpu", reuse=context.Reuse(encoders=enc))
    (path,) = enc.glob("*.pt")
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(CmixError, match=path.name):
        harness.train_run(toy_store, 60, 9, tmp_path / "b", method="cmix_selfsl",
                          config=TINY, device="cpu", reuse=context.Reuse(encoders=enc))
    other = tmp_path / "other"
    harness.train_run(toy_store, 60, 10, tmp_path / "c", method="cmix_selfsl", config=TINY,
                      device="cpu", reuse=context.Reuse(encoders=other))
    (wrong,) = other.glob("*.pt")
    shutil.copyfile(wrong, path)
    with pytest.raises(CmixError, match="another run"):
        harness.train_run(toy_store, 60, 9, tmp_path / "d", method="cmix_selfsl",
                          config=TINY, device="cpu", reuse=context.Reuse(encoders=enc))
    torch.save(torch.zeros(3), path)            # a torch file, not a shared stage
    with pytest.raises(CmixError, match="another run"):
        harness.train_run(toy_store, 60, 9, tmp_path / "e", method="cmix_selfsl",
                          config=TINY, device="cpu", reuse=context.Reuse(encoders=enc))


def test_a_shared_encoder_folder_that_cannot_be_written_is_refused_first(toy_store, tmp_path,
                                                                         capsys):
    """--shared-encoders naming a file: one message naming it, exit 1, no run written."""
    blocker = tmp_path / "not_a_folder"
    blocker.write_text("x")
    out = tmp_path / "run"
    rc = main(["train", "--store", str(toy_store), "--budget", "60", "--seed", "9",
               "--method", "cmix", "--device", "cpu", "--out", str(out),
               "--shared-encoders", str(blocker)])
    assert rc == 1 and "not_a_folder: cannot write to this folder" in capsys.readouterr().err
    assert not out.exists() and blocker.read_text() == "x"
