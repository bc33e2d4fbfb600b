"""Does training the seeds of one run as one batched model pay on a CPU?

For the shapes of cmix's training steps, S models (one per seed) take optimisation steps
two ways, alternating, ``--repeats`` times:

- loop: each seed's model, its own forward, backward and Adam step, one after another
  (what S separate ``cmix train`` runs do, less their start-up);
- batched: the S models' parameters stacked on a leading seed axis
  (``torch.func.stack_module_state``), one ``vmap(grad(loss))`` over the seeds and one
  Adam step over the stacked parameters.

Shapes (rows per step x input width -> hidden): the pre-training step (encoder, decoder
and projection head over the SNPs) at the grid's store width and at 1,000 SNPs, and the
predictor step (two hidden layers of 100 over the latent). It prints, per shape, the
median and minimum of batched / loop wall time per step, and whether the parameters after
the steps are bit-identical to the loop's (they must be for batching to keep every metric
of a seed alone).

    python benchmarks/seed_batching.py [--seeds 10] [--steps 20] [--repeats 3] [--threads 1]
"""

from __future__ import annotations

import argparse
import copy
import statistics
import time

import torch
from torch import nn
from torch.func import functional_call, grad, stack_module_state, vmap

from alternate import loadavg

SHAPES = {
    # name: (rows per step, input width, hidden width, output width)
    "pretrain 881 SNPs": (384, 881, 256, 128),
    "pretrain 1,000 SNPs": (384, 1000, 256, 128),
    "predictor": (128, 256, 100, 3),
}


class Model(nn.Module):
    """Encoder (n_in -> hidden), decoder (hidden -> n_in) and a head (hidden -> n_out);
    forward returns (reconstruction (B, n_in), head output (B, n_out))."""

    def __init__(self, n_in: int, hidden: int, n_out: int):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(n_in, hidden), nn.ReLU())
        self.decoder = nn.Linear(hidden, n_in)
        self.head = nn.Sequential(nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, n_out))

    def forward(self, x):
        z = self.encoder(x)
        return self.decoder(z), self.head(z)


def make_model(n_in: int, hidden: int, n_out: int, seed: int) -> Model:
    """One seed's model, initialised from torch's generator seeded with ``seed``."""
    torch.manual_seed(seed)
    return Model(n_in, hidden, n_out)


def loss_of(recon, out, x):
    """Reconstruction MSE + a smooth term on the head's output (a stand-in for the
    contrastive and supervised losses: same GEMMs, cheap element-wise work)."""
    return ((recon - x) ** 2).mean() + (out ** 2).mean()


def run_loop(models, optims, x, steps):
    t0 = time.perf_counter()
    for _ in range(steps):
        for s, (m, opt) in enumerate(zip(models, optims)):
            opt.zero_grad()
            loss_of(*m(x[s]), x[s]).backward()
            opt.step()
    return (time.perf_counter() - t0) / steps


def run_batched(base, params, buffers, optim, x, steps):
    def loss(p, b, xs):
        return loss_of(*functional_call(base, (p, b), (xs,)), xs)

    batched_grad = vmap(grad(loss))
    t0 = time.perf_counter()
    for _ in range(steps):
        grads = batched_grad(params, buffers, x)
        for name, p in params.items():
            p.grad = grads[name]
        optim.step()
    return (time.perf_counter() - t0) / steps


def compare(shape, n_seeds, steps, repeats):
    rows, n_in, hidden, n_out = shape
    x = torch.randn(n_seeds, rows, n_in, generator=torch.Generator().manual_seed(0))
    ratios, identical = [], True
    for rep in range(repeats):
        models = [make_model(n_in, hidden, n_out, seed) for seed in range(n_seeds)]
        params, buffers = stack_module_state(copy.deepcopy(models))
        params = {k: v.detach().clone().requires_grad_(True) for k, v in params.items()}
        base = copy.deepcopy(models[0]).to("meta")
        optims = [torch.optim.Adam(m.parameters(), lr=1e-3) for m in models]
        optim = torch.optim.Adam(params.values(), lr=1e-3)
        if rep % 2 == 0:
            t_loop = run_loop(models, optims, x, steps)
            t_batch = run_batched(base, params, buffers, optim, x, steps)
        else:
            t_batch = run_batched(base, params, buffers, optim, x, steps)
            t_loop = run_loop(models, optims, x, steps)
        ratios.append(t_batch / t_loop)
        for s, m in enumerate(models):
            for name, p in m.named_parameters():
                identical &= torch.equal(p.detach(), params[name][s].detach())
    return ratios, identical


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    print(f"{args.seeds} seeds, {args.steps} steps, {args.repeats} alternating repeats, "
          f"{args.threads} thread(s), load {loadavg():.2f}")
    print("| step shape | rows x in -> hidden | batched / loop (median) | min | bit-identical |")
    print("|---|---|---|---|---|")
    for name, shape in SHAPES.items():
        ratios, identical = compare(shape, args.seeds, args.steps, args.repeats)
        rows, n_in, hidden, _ = shape
        print(f"| {name} | {rows} x {n_in} -> {hidden} | {statistics.median(ratios):.2f} | "
              f"{min(ratios):.2f} | {'yes' if identical else 'no'} |")
    print(f"load after: {loadavg():.2f}")


if __name__ == "__main__":
    main()
