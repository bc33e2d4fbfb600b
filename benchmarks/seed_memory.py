"""How many seeds of one training run fit one GPU: memory arithmetic from the real model.

For each preset (``cpu``: the defaults; ``paper``: categorical SNPs, encoder width = the
embedded width) at ``--n-snps`` SNPs, one pre-training step of
:func:`cmix.learn.train.contrastive_mixup_loss` runs on the CPU in float32 with the
default batch (``batch_size`` unlabeled + ``labeled_batch_size`` labeled rows), and the
script counts, per seed:

- parameters, their gradients and Adam's two moment buffers (4 x the parameter bytes);
- activations kept for the backward pass (every tensor autograd saves during the step,
  counted once per storage: ``torch.autograd.graph.saved_tensors_hooks``);
- label propagation's largest block: ``lp_block`` rows x (``lp_max_unlabeled`` + the
  labeled rows) float32 similarities, plus its kNN graph.

Shared by the seeds of one (trait, method, budget): the training rows as int8 on the GPU
(the in-memory loader), ``--n-rows`` x n_snps bytes. The predictor stage is far smaller
than pre-training (a 100-wide head over the latent) and is not counted. The number of
seeds that fit is (GPU memory x ``--usable`` - shared) / per seed, taking the step's
activations and label propagation's block as not resident at once (they never are: label
propagation runs between epochs).

    python benchmarks/seed_memory.py [--n-snps 1000] [--n-rows 400000] [--gpu-gib 80]

An estimate, not a measurement on a GPU: the CUDA context (~0.5 GiB), cuBLAS workspaces
and the caching allocator's fragmentation are what ``--usable`` (default 0.8) leaves room
for.
"""

from __future__ import annotations

import argparse

import torch

from cmix.learn.config import PRESETS, Config
from cmix.learn.nn import ContrastiveMixup
from cmix.learn.train import contrastive_mixup_loss

GIB = 2 ** 30


def saved_activation_bytes(model, x, labels, weights, cfg, n_classes) -> int:
    """Bytes of the tensors autograd keeps for the backward pass of one pre-training step
    on rows x (B, M) int8, each storage counted once."""
    seen: dict[int, int] = {}

    def pack(t):
        if isinstance(t, torch.Tensor) and t.device.type == "cpu":
            storage = t.untyped_storage()
            seen[storage.data_ptr()] = storage.nbytes()
        return t

    gen = torch.Generator().manual_seed(0)
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        loss, _, _ = contrastive_mixup_loss(model, x, labels, weights, cfg.contrastive, gen,
                                            n_classes, torch.device("cpu"))
    loss.backward()
    param_ptrs = {p.untyped_storage().data_ptr() for p in model.parameters()}
    return sum(n for ptr, n in seen.items() if ptr not in param_ptrs)


def per_seed(preset: str, n_snps: int, n_classes: int) -> dict:
    """Bytes per seed for a preset: params (+ grads + Adam), step activations, label
    propagation's block and graph."""
    cfg = Config.from_flat({**Config().flat(), **PRESETS[preset]})
    torch.manual_seed(0)
    model = ContrastiveMixup(n_snps, cfg.model)
    n_params = sum(p.numel() for p in model.parameters())
    b_u, b_l = cfg.pretrain.batch_size, cfg.pretrain.labeled_batch_size
    rng = torch.Generator().manual_seed(1)
    x = torch.randint(0, 3, (b_u + b_l, n_snps), generator=rng, dtype=torch.int8)
    labels = torch.cat([torch.randint(0, n_classes, (b_l,), generator=rng),
                        torch.full((b_u,), -1, dtype=torch.long)])
    weights = torch.cat([torch.ones(b_l), torch.zeros(b_u)])
    activations = saved_activation_bytes(model, x, labels, weights, cfg, n_classes)
    pl = cfg.pseudo_labels
    nodes = pl.lp_max_unlabeled + 10_000            # |S_U| + a large labeled budget
    lp = pl.lp_block * nodes * 4 + nodes * 2 * max(pl.lp_k, 10) * 12 + nodes * n_classes * 8
    return {"preset": preset, "hidden": model.encoder.out_dim, "n_params": n_params, "weights": 4 * n_params * 4,
            "activations": activations, "label_propagation": lp}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n-snps", type=int, default=1000)
    ap.add_argument("--n-rows", type=int, default=400_000,
                    help="training rows of one trait's store held on the GPU (int8)")
    ap.add_argument("--n-classes", type=int, default=2)
    ap.add_argument("--gpu-gib", type=float, default=80.0)
    ap.add_argument("--usable", type=float, default=0.8)
    args = ap.parse_args()
    torch.set_num_threads(1)
    shared = args.n_rows * args.n_snps
    budget = args.gpu_gib * GIB * args.usable - shared
    print(f"{args.n_snps} SNPs, {args.n_classes} classes; shared rows {args.n_rows:,} x "
          f"{args.n_snps} int8 = {shared / GIB:.2f} GiB; {args.gpu_gib:g} GiB GPU, "
          f"{args.usable:.0%} usable")
    print("| preset | encoder width | parameters | weights + grads + Adam | step activations | "
          "label propagation | per seed | seeds that fit |")
    print("|---|---|---|---|---|---|---|---|")
    for preset in ("cpu", "paper"):
        r = per_seed(preset, args.n_snps, args.n_classes)
        seed_bytes = r["weights"] + max(r["activations"], r["label_propagation"])
        print(f"| {preset} | {r['hidden']:,} | {r['n_params'] / 1e6:.1f} M | {r['weights'] / GIB:.3f} GiB | "
              f"{r['activations'] / GIB:.3f} GiB | {r['label_propagation'] / GIB:.3f} GiB | "
              f"{seed_bytes / GIB:.3f} GiB | {int(budget // seed_bytes):,} |")


if __name__ == "__main__":
    main()
