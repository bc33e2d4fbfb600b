"""Many models in one step: the work dispatched per step does not grow with the number
of models, nothing is read back to the host inside an epoch, the grouped layers and
optimiser equal torch's per model, and every way of holding the rows gives the same run."""

import json
from pathlib import Path

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from cmix.learn import context, harness
from store_helpers import simulate_labels, write_test_store

TINY = {"hidden": 32, "d_proj": 16, "epochs": 3, "warmup_epochs": 1, "lp_every": 1,
        "batch_size": 64, "labeled_batch_size": 32, "pred_epochs": 4, "pred_patience": 3,
        "lp_k": 5}

#: operations that wait for the device and read a value back on the host (``.item()``,
#: ``bool(tensor)``, shapes that depend on values), or copy host data into a new tensor
SYNCS = ("_local_scalar_dense", "item", "is_nonzero", "nonzero", "masked_select", "unique",
         "_unique", "_unique2", "equal", "allclose", "lift_fresh")


class Count(TorchDispatchMode):
    """The aten operations dispatched inside the block, by name."""

    def __init__(self):
        super().__init__()
        self.ops: dict = {}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = func.overloadpacket.__name__
        self.ops[name] = self.ops.get(name, 0) + 1
        return func(*args, **(kwargs or {}))

    @property
    def total(self) -> int:
        return sum(self.ops.values())

    def syncs(self) -> dict:
        return {k: v for k, v in self.ops.items() if k in SYNCS}


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    dosage, label = simulate_labels(700, 40, n_classes=3, n_causal=10, h2=0.8, seed=2)
    path = tmp_path_factory.mktemp("group") / "g.zarr"
    write_test_store(path, dosage, label, sample_chunk=96)
    return path


def make_group(store, seeds, tmp_path, method="cmix", config=TINY):
    """A Group of runs of ``method`` at budget 90 for ``seeds`` (as train_group opens
    them), its rows held in memory."""
    from cmix.learn.config import resolve_config
    from cmix.learn.data import RowSource
    from cmix.learn.group import Group
    from cmix.learn.methods import get_method

    m = get_method(method)
    cfg = resolve_config(config, m.switches)
    checked = context.check_store(store, cfg)
    ctxs = []
    for s in seeds:
        ctx, state = context.open_run(m, checked, 90, s, tmp_path / f"r{s}", cfg, "cpu")
        ctx.state = state
        ctxs.append(ctx)
    return Group(ctxs, RowSource(checked.root, checked.train_split, "cpu"))


def pretrain_epoch_ops(store, tmp_path, n_models, pseudo: bool):
    """Operations of one cmix pre-training epoch of a group of ``n_models`` (with every
    model's pseudo-labels in use, or none), and its number of steps."""
    from cmix.learn.methods.cmix import pretrain as tr
    from cmix.learn.methods.heads import cmix_model
    from cmix.learn.nn import GroupAdam

    group = make_group(store, range(1, n_models + 1), tmp_path / str(n_models))
    model = cmix_model(group)
    ctxs = group.ctxs
    rows = tr.PretrainRows(labeled=group.row_set([c.splits.train_labeled for c in ctxs]),
                           y=None, unlabeled=group.row_set([c.splits.unlabeled for c in ctxs]))
    rows.y = group.label[rows.labeled.pos]
    if pseudo:
        n_u = rows.unlabeled.n
        rows.pseudo = (torch.randint(0, 3, (n_models, n_u)), torch.rand(n_models, n_u))
    opt = GroupAdam(model.parameters(), n_models, 1e-3)
    active = torch.ones(n_models, dtype=torch.bool)
    tr.pretrain_epoch(group, model, opt, rows, 0, active)            # warm-up
    sched = tr.epoch_schedule(group, rows, 1)
    n_steps = sched.step_ok.shape[1]
    with Count() as count:
        tr.pretrain_epoch(group, model, opt, rows, 1, active)
    # the epoch's schedule is made (and its small arrays sent to the device) before its
    # first step; the steps themselves send and read nothing
    with Count() as schedule:
        tr.epoch_schedule(group, rows, 1)
    return count, schedule, n_steps


@pytest.mark.parametrize("pseudo", [False, True])
def test_operations_per_pretraining_step_do_not_grow_with_the_models(store, tmp_path, pseudo):
    """The tensor operations of a pre-training epoch for 8 models are those for 1 (within
    1.1x; today's code ran one model after another: 8x), and none reads a value back."""
    one, sched_1, steps_1 = pretrain_epoch_ops(store, tmp_path, 1, pseudo)
    eight, sched_8, steps_8 = pretrain_epoch_ops(store, tmp_path, 8, pseudo)
    assert steps_1 == steps_8 >= 5
    assert eight.total <= 1.1 * one.total, (one.total, eight.total)
    for count, sched in ((one, sched_1), (eight, sched_8)):
        assert count.syncs() == sched.syncs()              # all of them in the schedule
        assert "_local_scalar_dense" not in count.ops, count.syncs()


def predictor_epoch_ops(store, tmp_path, n_models):
    """Operations of one predictor epoch (latent mixup on) of ``n_models`` heads."""
    from cmix.learn.methods import heads as tr
    from cmix.learn.group_heads import Labeled
    from cmix.learn.methods.heads import new_head
    from cmix.learn.streams import PREDICTOR_STEPS

    group = make_group(store, range(1, n_models + 1), tmp_path / f"p{n_models}")
    head, opt = new_head(group, 32, {})
    g, n = n_models, 300
    gen = torch.Generator().manual_seed(0)
    train = Labeled(x=torch.randn(g, n, 32, generator=gen),
                    target=torch.eye(3)[torch.randint(0, 3, (g, n), generator=gen)],
                    weight=torch.rand(g, n, generator=gen), count=torch.full((g,), n))
    args = (torch.ones(g, dtype=torch.bool), group.keys(PREDICTOR_STEPS), 64,
            torch.ones(g, dtype=torch.bool))
    tr.predictor_epoch(head, opt, train, 0, *args)
    with Count() as count:
        tr.predictor_epoch(head, opt, train, 1, *args)
    return count


def test_operations_per_predictor_step_do_not_grow_with_the_models(store, tmp_path):
    one, eight = predictor_epoch_ops(store, tmp_path, 1), predictor_epoch_ops(store, tmp_path, 8)
    assert eight.total <= 1.1 * one.total, (one.total, eight.total)
    assert one.syncs() == {} and eight.syncs() == {}, (one.syncs(), eight.syncs())


def test_the_counter_sees_a_read_back_and_more_models_in_a_loop():
    """The checks above can fail: ``.item()`` is seen, and a loop over models is counted
    once per model."""
    with Count() as c:
        x = torch.ones(3)
        float(x.sum())
    assert c.syncs() == {"_local_scalar_dense": 1}
    counts = []
    for n in (1, 8):
        with Count() as c:
            for _ in range(n):
                torch.ones(3).sum()
        counts.append(c.total)
    assert counts[1] == 8 * counts[0]


def test_group_layers_and_adam_are_torch_s_per_model():
    """GroupLinear is F.linear with each model's weight, GroupAdam is torch.optim.Adam
    (weight decay included) on each model's slice, and an inactive model is not moved."""
    from cmix.learn.nn import GroupAdam, GroupLinear, init_generators

    gens = init_generators([1, 2, 3], 0)
    lin = GroupLinear(gens, 5, 4)
    x = torch.randn(3, 7, 5, generator=torch.Generator().manual_seed(1))
    out = lin(x)
    for i in range(3):
        torch.testing.assert_close(out[i], torch.nn.functional.linear(x[i], lin.weight[i],
                                                                      lin.bias[i]))
    refs = [torch.nn.Parameter(lin.weight[i].detach().clone()) for i in range(3)]
    ref_opts = [torch.optim.Adam([p], lr=0.01, weight_decay=0.1) for p in refs]
    opt = GroupAdam([lin.weight], 3, lr=0.01, weight_decay=0.1)
    active = torch.tensor([True, False, True])
    before = lin.weight.detach().clone()
    for step in range(4):
        grad = torch.randn(3, 4, 5, generator=torch.Generator().manual_seed(step))
        lin.weight.grad = grad.clone()
        opt.step(active)
        for i in (0, 2):
            refs[i].grad = grad[i].clone()
            ref_opts[i].step()
        torch.testing.assert_close(lin.weight[0], refs[0], rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(lin.weight[2], refs[2], rtol=1e-5, atol=1e-6)
        assert torch.equal(lin.weight[1], before[1])
    assert opt.step_count.tolist() == [4.0, 0.0, 4.0]


def _metrics(folder: Path) -> dict:
    m = json.loads((folder / "metrics.json").read_text())
    return {k: m[k] for k in ("test", "validation", "pseudo_labels", "run_key")}


def test_rows_held_or_streamed_give_the_same_runs_and_a_group_repeats_itself(store, tmp_path):
    """A group whose rows are streamed from the store (through a chunk cache) gives, bit
    for bit, the runs of the group whose rows are held in memory; the same group again
    repeats them."""
    seeds = {s: tmp_path / f"mem/s{s}" for s in (3, 5)}
    mem = harness.train_seeds(store, 90, seeds, config=TINY, device="cpu")
    streamed = harness.train_seeds(store, 90, {s: tmp_path / f"str/s{s}" for s in (3, 5)},
                                   config={**TINY, "loader": "stream"}, device="cpu")
    again = harness.train_seeds(store, 90, {s: tmp_path / f"again/s{s}" for s in (3, 5)},
                                config=TINY, device="cpu")
    for a, b, c in zip(mem, streamed, again):
        for key in ("test", "validation", "pseudo_labels"):
            assert a[key] == b[key] == c[key], key
