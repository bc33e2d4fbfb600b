"""What the GPU of a node does for cmix, measured in one run on that node.

Parts (``--parts``, default all):

- ``gemm``: the device's own matrix-product peaks, float32, TF32 and bfloat16 (and int8
  with int32 accumulation, ``torch._int_mm``, on CUDA): ``--gemm-size``^3 products, a
  warm-up first, the median of ``--repeats`` timings, the device synchronised before
  every clock read. The fractions below are of the float32 peak measured here.
- ``train``: cmix pre-training on a simulated store (``--rows`` x ``--snps``, budget
  ``--budget``): one epoch of a group of G models for each G of ``--models`` (default 1,
  10, 50): seconds an epoch, rows a second per model and in all, the Linear layers'
  FLOP/s and their fraction of the float32 peak, and the device memory the epoch peaks
  at per model. Then one ``cmix train`` group of ``--seeds`` seeds on the device against
  the same seeds one after another on the device and the same group on the node's CPU
  cores: wall seconds and ratios, and how far a seed's test accuracy in the group is from
  the same seed alone.

Every timing is of the work only (the store is written and the process warmed up
first) and ends with ``torch.cuda.synchronize()``; ratios are the verdicts, measured in
the same run; ``--json`` writes everything as one JSON file. It runs on the CPU too
(``--device cpu``, small sizes), which is how it is tested; on the CPU there is no TF32,
bfloat16 or int8 peak and no device memory.

On a GPU node (about 5 minutes on one H200, inside a 7-minute limit):

    python benchmarks/gpu.py --device cuda --json gpu.json

Here (2 CPU cores):

    python benchmarks/gpu.py --device cpu --rows 3000 --snps 300 --budget 200 \\
        --models 1 4 --seeds 3 --gemm-size 1024 --train-config '{"epochs": 4}'
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def sync(device) -> None:
    """Wait for the device's queued work (nothing to wait for on the CPU)."""
    import torch

    if torch.device(device).type == "cuda":
        torch.cuda.synchronize(device)


def timed(fn, device, repeats: int) -> float:
    """Median seconds of ``repeats`` calls of fn() after one warm-up call, the device
    synchronised before each clock read."""
    fn()
    sync(device)
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        sync(device)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


# ------------------------------------------------------------------ GEMM peaks
def gemm_peaks(device, size: int, repeats: int) -> dict:
    """FLOP/s (or integer operations a second for int8) of size^3 products: float32,
    TF32 and bfloat16 on CUDA (float32 only on the CPU), and ``torch._int_mm`` int8 ->
    int32 on CUDA."""
    import torch

    dev = torch.device(device)
    g = torch.Generator(device=dev).manual_seed(0)
    out = {}
    kinds = [("fp32", torch.float32, False)]
    if dev.type == "cuda":
        kinds += [("tf32", torch.float32, True), ("bf16", torch.bfloat16, False)]
    for name, dtype, tf32 in kinds:
        a = torch.randn(size, size, device=dev, generator=g).to(dtype)
        b = torch.randn(size, size, device=dev, generator=g).to(dtype)
        before = torch.backends.cuda.matmul.allow_tf32
        torch.backends.cuda.matmul.allow_tf32 = tf32
        try:
            sec = timed(lambda: a @ b, dev, repeats)
        finally:
            torch.backends.cuda.matmul.allow_tf32 = before
        out[name] = 2 * size ** 3 / sec
    if dev.type == "cuda":
        a = torch.randint(-3, 3, (size, size), device=dev, dtype=torch.int8, generator=g)
        b = torch.randint(-3, 3, (size, size), device=dev, dtype=torch.int8, generator=g)
        out["int8"] = 2 * size ** 3 / timed(lambda: torch._int_mm(a, b), dev, repeats)
    return out


# ------------------------------------------------------------------ training
def synthetic_store(folder: Path, n_rows: int, n_snps: int, seed: int = 0) -> Path:
    """A store of n_rows x n_snps int8 dosages (MAF U(0.05, 0.5), 1% missing), a binary
    trait of 30 causal SNPs (h2 0.5), 20% test rows, chunks of 1,024 rows."""
    from cmix.genotypes.store import StoreContent, write_store

    rng = np.random.default_rng(seed)
    maf = rng.uniform(0.05, 0.5, n_snps)
    dosage = rng.binomial(2, maf, size=(n_rows, n_snps)).astype(np.int8)
    causal = rng.choice(n_snps, min(30, n_snps), replace=False)
    g = (dosage[:, causal] - 2 * maf[causal]) @ rng.normal(size=len(causal))
    liab = np.sqrt(0.5) * (g - g.mean()) / g.std() + np.sqrt(0.5) * rng.normal(size=n_rows)
    label = (liab > np.median(liab)).astype(np.int16)
    dosage[rng.random(dosage.shape) < 0.01] = -1
    split = (rng.random(n_rows) < 0.2).astype(np.int8)
    path = folder / f"bench_{n_rows}x{n_snps}.zarr"
    write_store(path, StoreContent(
        dosage=dosage, sample_id=[f"s{i}" for i in range(n_rows)], sample_label=label,
        sample_split=split, variant_id=[f"rs{j}" for j in range(n_snps)],
        variant_contig=["1"] * n_snps, variant_position=np.arange(n_snps) * 100 + 1,
        variant_allele=np.array([["A", "G"]] * n_snps), variant_beta=np.zeros(n_snps),
        attrs={"trait": "bench", "class_names": ["control", "case"]}), sample_chunk=1024)
    return path


def open_group(store: Path, n_models: int, budget: int, config: dict, device, folder: Path):
    """A Group of ``n_models`` cmix runs (seeds 1..n) on the store, its rows held on the
    device, opened as ``cmix train`` opens them."""
    from cmix.learn import harness
    from cmix.learn.config import resolve_config
    from cmix.learn.data import RowSource
    from cmix.learn.group import Group
    from cmix.learn.methods import get_method

    m = get_method("cmix")
    cfg = resolve_config(config, m.switches)
    checked = harness.check_store(store, cfg)
    ctxs = []
    for s in range(1, n_models + 1):
        ctx, state = harness.open_run(m, checked, budget, s, folder / f"g{n_models}_s{s}", cfg,
                                      str(device))
        ctx.state = state
        ctxs.append(ctx)
    return Group(ctxs, RowSource(checked.root, checked.train_split, device))


def pretrain_throughput(store: Path, device, models, budget: int, config: dict,
                        repeats: int, fp32_peak: float | None) -> list[dict]:
    """For each G of ``models``: one cmix pre-training epoch of a group of G (no
    pseudo-labels), the median of ``repeats`` epochs after a warm-up epoch. Rows a second
    count each model's labeled and unlabeled rows of the epoch; FLOPs are the Linear
    layers' (forward 2 x rows x in x out per layer and model, backward twice that,
    counted by hooks in the warm-up epoch); memory is the epoch's peak above what was
    allocated before the group was built, per model (CUDA only)."""
    import torch

    from cmix.learn import train as tr
    from cmix.learn.methods.networks import cmix_model
    from cmix.learn.nn import GroupAdam, GroupLinear

    dev = torch.device(device)
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        for g in models:
            if dev.type == "cuda":
                torch.cuda.empty_cache()
                base = torch.cuda.memory_allocated(dev)
                torch.cuda.reset_peak_memory_stats(dev)
            group = open_group(store, g, budget, config, dev, Path(tmp))
            model = cmix_model(group)
            ctxs = group.ctxs
            rows = tr.PretrainRows(
                labeled=group.row_set([c.splits.train_labeled for c in ctxs]), y=None,
                unlabeled=group.row_set([c.splits.unlabeled for c in ctxs]))
            rows.y = group.label[rows.labeled.pos]
            opt = GroupAdam(model.parameters(), g, group.cfg.pretrain.lr)
            active = torch.ones(g, dtype=torch.bool, device=dev)
            flops = [0]

            def count(module, inputs, output):
                x = inputs[0]
                flops[0] += 6 * x.shape[0] * x.shape[1] * module.weight.shape[1] \
                    * module.weight.shape[2]

            hooks = [m.register_forward_hook(count) for m in model.modules()
                     if isinstance(m, GroupLinear)]
            epoch = [0]

            def one_epoch():
                tr.pretrain_epoch(group, model, opt, rows, epoch[0], active)
                epoch[0] += 1
                for h in hooks:
                    h.remove()
                hooks.clear()

            sec = timed(one_epoch, dev, repeats)
            n_rows = int(tr.epoch_schedule(group, rows, 0).row_ok[0].sum())
            rec = {"models": g, "seconds_per_epoch": sec,
                   "rows_per_s_per_model": n_rows / sec, "rows_per_s": g * n_rows / sec,
                   "linear_flop_per_s": flops[0] / sec}
            if fp32_peak:
                rec["fraction_of_fp32_peak"] = flops[0] / sec / fp32_peak
            if dev.type == "cuda":
                rec["peak_mib_per_model"] = (torch.cuda.max_memory_allocated(dev) - base) / g / 2 ** 20
            out.append(rec)
            print(f"  pre-training, {g} model(s): {sec:.3f} s an epoch, "
                  f"{rec['rows_per_s_per_model']:,.0f} rows/s per model, "
                  f"{rec['rows_per_s']:,.0f} in all"
                  + (f", {100 * rec['fraction_of_fp32_peak']:.2f}% of the fp32 peak"
                     if fp32_peak else "")
                  + (f", {rec['peak_mib_per_model']:.0f} MiB per model"
                     if "peak_mib_per_model" in rec else ""), flush=True)
            del group, model, opt, rows
    base = out[0]["rows_per_s_per_model"]
    for rec in out:
        rec["throughput_per_model_over_one_model"] = rec["rows_per_s"] / base
    return out


def group_against(store: Path, device, seeds: int, budget: int, config: dict) -> dict:
    """``cmix train`` of ``seeds`` seeds as one group on ``device``, against the same seeds
    one after another on ``device`` and the same group on the CPU's cores (each the whole
    of train_seeds: runs opened, trained, evaluated, written; after a warm-up run of
    another seed, which pays for the imports): wall seconds and ratios, and the largest
    difference in test accuracy of a seed in the group and alone."""
    import torch

    from cmix.learn.harness import train_seeds

    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)

        def run(tag, dev, seed_list):
            t0 = time.perf_counter()
            res = train_seeds(store, budget, {s: tmp / tag / f"s{s}" for s in seed_list},
                              config=config, device=str(dev))
            sync(dev)
            return time.perf_counter() - t0, res

        run("warm-up", device, [seeds + 1])                   # imports and first calls
        out["group_seconds"], group = run("group", device, range(1, seeds + 1))
        alone, out["sequential_seconds"] = [], 0.0
        for s in range(1, seeds + 1):
            sec, res = run("alone", device, [s])
            out["sequential_seconds"] += sec
            alone += res
        out["group_over_sequential"] = out["group_seconds"] / out["sequential_seconds"]
        diffs = [abs(a["test"]["accuracy"] - b["test"]["accuracy"]) for a, b in zip(group, alone)]
        out["max_accuracy_difference_group_alone"] = max(diffs)
        out["seeds_identical_to_alone"] = sum(a["test"] == b["test"] for a, b in zip(group, alone))
        out["mean_test_accuracy"] = float(np.mean([r["test"]["accuracy"] for r in group]))
        if torch.device(device).type != "cpu":
            out["cpu_group_seconds"], _ = run("cpu", "cpu", range(1, seeds + 1))
            out["group_over_cpu_group"] = out["group_seconds"] / out["cpu_group_seconds"]
    print(f"  cmix train, {seeds} seeds: group {out['group_seconds']:.1f} s, one after "
          f"another {out['sequential_seconds']:.1f} s (ratio "
          f"{out['group_over_sequential']:.3f})"
          + (f", the group on the CPU {out['cpu_group_seconds']:.1f} s (ratio "
             f"{out['group_over_cpu_group']:.3f})" if "cpu_group_seconds" in out else "")
          + f"; test accuracy group vs alone: largest difference "
            f"{out['max_accuracy_difference_group_alone']:.4f}, "
            f"{out['seeds_identical_to_alone']} of {seeds} identical", flush=True)
    return out


def main(argv=None) -> dict:
    import torch

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--parts", nargs="+", default=["gemm", "train"], choices=["gemm", "train"])
    p.add_argument("--gemm-size", type=int, default=8192)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--rows", type=int, default=20000, help="simulated store rows")
    p.add_argument("--snps", type=int, default=1000)
    p.add_argument("--budget", type=int, default=1000)
    p.add_argument("--models", type=int, nargs="+", default=[1, 10, 50])
    p.add_argument("--seeds", type=int, default=10)
    p.add_argument("--train-config", default="{}", help="cmix config keys as JSON")
    p.add_argument("--json", default=None)
    args = p.parse_args(argv)
    dev = torch.device(args.device)
    config = json.loads(args.train_config)
    result = {"device": (torch.cuda.get_device_name(dev) if dev.type == "cuda" else "cpu"),
              "torch": torch.__version__, "threads": torch.get_num_threads(),
              "args": vars(args)}
    print(f"device {result['device']}, torch {torch.__version__}, {result['threads']} CPU threads")
    if "gemm" in args.parts:
        result["gemm"] = gemm_peaks(dev, args.gemm_size, args.repeats)
        print("  GEMM peaks: " + ", ".join(f"{k} {v / 1e12:.1f} T/s"
                                          for k, v in result["gemm"].items()), flush=True)
    if "train" in args.parts:
        with tempfile.TemporaryDirectory() as tmp:
            store = synthetic_store(Path(tmp), args.rows, args.snps)
            peak = result.get("gemm", {}).get("fp32")
            result["pretrain"] = pretrain_throughput(store, dev, args.models, args.budget,
                                                     config, args.repeats, peak)
            result["cmix_train"] = group_against(store, dev, args.seeds, args.budget, config)
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1) + "\n")
    return result


if __name__ == "__main__":
    main()
