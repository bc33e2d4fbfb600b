"""GPU benchmark for one node: what its GPU does for cmix, measured in one run.

One run on one node measures, and prints as ratios (parts: ``--parts``, default all):

* ``gemm``: the device's float32, TF32, bf16 and fp16 GEMM rates (TFLOP/s) and int8
  ``torch._int_mm`` (TOPS, int32 sums) in the layout the KING route uses (right operand
  column-major: cuBLASLt's int8 tensor-core layout) and with a row-major right operand,
  on --gemm-size^3 products: one warm-up call, then the median of --repeats timed calls,
  ``torch.cuda.synchronize()`` before every clock read. Printed as fractions of the
  bf16 rate.
* ``train``: cmix pre-training on a simulated store (``--rows`` x ``--snps``, budget
  ``--budget``): one epoch of a group of G models for each G of ``--models`` (default 1,
  10, 50): seconds an epoch, rows a second per model and in all, the Linear layers'
  FLOP/s and their fraction of the float32 rate measured by ``gemm``, and the device
  memory the epoch peaks at per model. Then one ``cmix train`` group of ``--seeds``
  seeds on the device against the same seeds one after another on the device and the
  same group on the node's CPU cores: wall seconds and ratios, and how far a seed's test
  accuracy in the group is from the same seed alone.
* ``king``: KING-robust on the same .bed (simulated: ``simulate_genotypes_fast`` with
  relatives planted as in benchmarks/king_vs_plink2.py; --king-samples x
  --king-variants) by the GPU route (int8 indicator products, ``--device``) and by the
  CPU bit-plane route (numba, all cores or --threads), after one untimed run of each,
  then --repeats alternating rounds (benchmarks/alternate.py). Per route: the wall time
  of ``king_robust`` (what ``cmix unrelated`` spends on KING: the route plus the exact
  recount of the pairs it keeps), of the route alone, and on a GPU the route's kernel
  time (CUDA events around one more run, and torch.profiler's kernel durations
  summed over another). Asserts that the kept and dropped sets, the
  .kin0 rows and the undefined-pair counts are identical, and prints the ratios
  GPU / CPU (goal <= 0.1x), kernel time / 1 s (the goal at 20,000 x 20,000) and the
  route's int8 rate as a fraction of the ``_int_mm`` rate measured in the same run.

Each part is a function ``part_NAME(args, device) -> dict`` listed in :data:`PARTS`;
``--json PATH`` writes every part's numbers. Every timing is of the work only (inputs
written and the process warmed up first) and ends with a device synchronisation.

On a GPU node (the package need not be installed; numba, torch, numpy, scipy, pandas
and zarr must be; ~8 minutes on one H200 at these sizes, most of it the CPU routes):

    PYTHONPATH=$PWD python3 benchmarks/gpu.py --device cuda --json gpu.json

On a CPU (the same code paths, the int8 route emulated by torch's CPU kernels; this is
how the script is tested):

    python benchmarks/gpu.py --device cpu --gemm-size 1024 --king-samples 2000 \\
        --king-variants 2000 --rows 3000 --snps 300 --budget 200 --models 1 4 --seeds 3 \\
        --train-config '{"epochs": 4}' --repeats 2 --json /tmp/gpu_cpu.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))
from alternate import alternate, load_summary, ratios, summary  # noqa: E402


# ----------------------------------------------------------------------------- timing
def synchronize(device) -> None:
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize(device)


def timed(fn, device) -> float:
    """Seconds of one call of fn, the device synchronized before both clock reads."""
    synchronize(device)
    t0 = time.perf_counter()
    fn()
    synchronize(device)
    return time.perf_counter() - t0


def median_timed(fn, device, repeats: int) -> float:
    """Median seconds of ``repeats`` calls of fn after one warm-up call."""
    timed(fn, device)
    return statistics.median(timed(fn, device) for _ in range(repeats))


def device_seconds(fn, device) -> dict | None:
    """The GPU's time for one call of fn, two ways (None on the CPU): ``span``, from a
    CUDA event recorded before the call to one recorded after it (the device's timeline,
    idle gaps included), and ``kernels``, the durations of every kernel and copy summed
    (torch.profiler, another call; None if the profiler gives no device events)."""
    if device.type != "cuda":
        return None
    import torch
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    synchronize(device)
    start.record()
    fn()
    end.record()
    synchronize(device)
    out = {"span": start.elapsed_time(end) / 1e3, "kernels": None}
    try:
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            fn()
            synchronize(device)
        total_us = sum(getattr(e, "self_device_time_total", 0.0) for e in prof.key_averages()
                       if e.device_type == DeviceType.CUDA)
        out["kernels"] = total_us / 1e6 if total_us > 0 else None
    except Exception as err:                     # a profiler that cannot see the device
        print(f"  (profiler: {type(err).__name__}: {err})")
    return out


# ------------------------------------------------------------------------------- gemm
GEMM_KINDS = ("fp32", "tf32", "bf16", "fp16", "int8_colmajor", "int8_rowmajor")


def gemm_rate(kind: str, n: int, device, repeats: int) -> float:
    """Operations per second (2 n^3 per product) of one n x n x n product of ``kind``:
    the median of ``repeats`` synchronized calls after one warm-up call."""
    import torch

    gen = torch.Generator(device="cpu").manual_seed(0)
    if kind.startswith("int8"):
        a = torch.randint(0, 2, (n, n), dtype=torch.int8, generator=gen).to(device)
        b = torch.randint(0, 2, (n, n), dtype=torch.int8, generator=gen).to(device)
        right = b.T if kind == "int8_colmajor" else b      # (k, n) column- or row-major

        def op():
            torch._int_mm(a, right)
    else:
        dtype = {"fp32": torch.float32, "tf32": torch.float32, "bf16": torch.bfloat16,
                 "fp16": torch.float16}[kind]
        a = torch.randn(n, n, generator=gen).to(device=device, dtype=dtype)
        b = torch.randn(n, n, generator=gen).to(device=device, dtype=dtype)

        def op():
            a @ b
    before = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = kind == "tf32"
    try:
        seconds = median_timed(op, device, repeats)          # a warm-up call first
    finally:
        torch.backends.cuda.matmul.allow_tf32 = before
    return 2.0 * n ** 3 / seconds


def part_gemm(args, device) -> dict:
    n = args.gemm_size
    rates = {}
    for kind in GEMM_KINDS:
        try:
            rates[kind] = gemm_rate(kind, n, device, args.repeats)
        except RuntimeError as err:                         # e.g. no int8 kernel here
            print(f"  {kind}: not run ({str(err).splitlines()[0]})")
    print(f"GEMM rates on {device_name(device)}, {n}^3, median of {args.repeats} after a "
          "warm-up (tf32 = fp32 on a CPU):")
    ref = rates.get("bf16") or max(rates.values())
    for kind, rate in rates.items():
        unit = "TOPS" if kind.startswith("int8") else "TFLOP/s"
        print(f"  {kind:14s} {rate / 1e12:9.2f} {unit:7s} = {rate / ref:6.3f}x bf16")
    if "int8_colmajor" in rates and "int8_rowmajor" in rates:
        print(f"  int8 column-major right operand (the KING route's) / row-major: "
              f"{rates['int8_colmajor'] / rates['int8_rowmajor']:.2f}x")
    return {"size": n, "repeats": args.repeats, "ops_per_s": rates}


# --------------------------------------------------------------------------- train
def synthetic_store(folder: Path, n_rows: int, n_snps: int, seed: int = 0) -> Path:
    """A store of n_rows x n_snps int8 dosages (MAF U(0.05, 0.5), 1% missing), a binary
    trait of 30 causal SNPs (h2 0.5), 20% test rows, chunks of 1,024 rows."""
    from cmix.store.write import StoreContent, write_store

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
    from cmix.learn import context
    from cmix.learn.config import resolve_config
    from cmix.learn.data import RowSource
    from cmix.learn.group import Group
    from cmix.learn.methods import get_method

    m = get_method("cmix")
    cfg = resolve_config(config, m.switches)
    checked = context.check_store(store, cfg)
    ctxs = []
    for s in range(1, n_models + 1):
        ctx, state = context.open_run(m, checked, budget, s, folder / f"g{n_models}_s{s}", cfg,
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

    from cmix.learn.methods.cmix import pretrain as tr
    from cmix.learn.methods.heads import cmix_model
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

            sec = median_timed(one_epoch, dev, repeats)
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
            synchronize(dev)
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


def part_train(args, device) -> dict:
    config = json.loads(args.train_config)
    peak = args.results.get("gemm", {}).get("ops_per_s", {}).get("fp32")
    with tempfile.TemporaryDirectory() as tmp:
        store = synthetic_store(Path(tmp), args.rows, args.snps)
        return {"pretrain": pretrain_throughput(store, device, args.models, args.budget,
                                                config, args.repeats, peak),
                "cmix_train": group_against(store, device, args.seeds, args.budget, config)}


# ------------------------------------------------------------------------------- king
def make_bed(workdir: Path, n_samples: int, n_variants: int) -> Path:
    """A simulated .bed with planted relatives (cached in workdir); returns the prefix."""
    from cmix.simulate.fast import simulate_genotypes_fast
    from king_vs_plink2 import plant_relatives

    prefix = workdir / "genotypes"
    if not Path(f"{prefix}.bed").exists():
        simulate_genotypes_fast(workdir, n_samples, n_variants, seed=1)
        plant_relatives(prefix, max(1, n_samples // 50), seed=3)
    return prefix


def int8_multiply_adds(n: int, n_var: int, block_size: int, variant_block: int) -> int:
    """Multiply-adds of the int8 route's products (padding included)."""
    from cmix.genotypes.relatedness import int8 as int8_route

    n_pad, edges, _, vb = int8_route._int8_plan(n, n_var, block_size, variant_block, 1 << 62)
    n_blocks = -(-n_var // vb)
    pairs = sum((edges[s + 1] - edges[s]) * (n_pad - edges[s]) for s in range(len(edges) - 1))
    return 5 * vb * n_blocks * pairs


def part_king(args, device) -> dict:
    import pandas as pd
    import torch

    from cmix.genotypes.relatedness.bitplanes import CPU_MEMORY, king_bitplanes
    from cmix.genotypes.relatedness.cutoff import DEFAULT_CUTOFF, REPORT_MIN_KINSHIP
    from cmix.genotypes.relatedness.int8 import INT8_STRIP, INT8_VARIANTS, int8_memory, king_int8
    from cmix.genotypes.relatedness.king import king_robust, king_variants
    from cmix.genotypes.relatedness.unrelated import write_unrelated
    from cmix.readers import plink

    work = Path(args.workdir or tempfile.mkdtemp(prefix="gpu_bench_"))
    work.mkdir(parents=True, exist_ok=True)
    prefix = make_bed(work, args.king_samples, args.king_variants)
    bf = plink.open_bfile(prefix)
    variants = np.flatnonzero(king_variants(bf.bim["chrom"]))
    samples = np.arange(bf.n_samples)
    min_kin = REPORT_MIN_KINSHIP
    block = args.block_size or INT8_STRIP
    vblock = INT8_VARIANTS
    memory = int8_memory(device)
    routes = {
        "gpu": {"whole": lambda: king_robust(bf, min_kinship=min_kin, device=device.type,
                                             route="int8", block_size=block),
                "route": lambda: king_int8(bf, variants, samples, min_kin, block, vblock,
                                           device, memory)},
        "cpu": {"whole": lambda: king_robust(bf, min_kinship=min_kin, device="cpu"),
                "route": lambda: king_bitplanes(bf, variants, samples, min_kin, CPU_MEMORY)},
    }
    results = {}

    def run(name):
        out = {}

        def whole():
            results[name] = routes[name]["whole"]()
        out["wall"] = timed(whole, device)
        out["route_wall"] = timed(routes[name]["route"], device)
        return out

    for name in routes:                  # untimed: numba's compiled kernels, CUDA, cuBLAS
        run(name)
    same_rounds = []

    def compare():
        a, b = results["gpu"], results["cpu"]
        same = a.attrs["undefined_kinship_pairs"] == b.attrs["undefined_kinship_pairs"]
        try:
            pd.testing.assert_frame_equal(a, b)
        except AssertionError:
            same = False
        same_rounds.append(same)

    got, loads = alternate({name: (lambda name=name: run(name)) for name in routes},
                           args.repeats, after=compare)
    on_gpu = device_seconds(routes["gpu"]["route"], device)
    # kept and dropped sets through the writer cmix unrelated uses
    files = {}
    for name, pairs in results.items():
        out = work / f"king_{name}"
        write_unrelated(out, bf.fam, samples, pairs, DEFAULT_CUTOFF, kin0=pairs)
        files[name] = [Path(f"{out}.{ext}").read_bytes() for ext in
                       ("king.cutoff.in.id", "king.cutoff.out.id", "kin0")]
    identical = files["gpu"] == files["cpu"] and all(same_rounds)
    n_dropped = len(files["cpu"][1].splitlines()) - 1
    wall = {k: [r["wall"] for r in v] for k, v in got.items()}
    route_wall = {k: [r["route_wall"] for r in v] for k, v in got.items()}
    macs = int8_multiply_adds(len(samples), len(variants), block, vblock)
    gpu_label = "GPU route (int8 products)" if device.type == "cuda" else \
        "int8 route emulated on the CPU"
    print(f"KING-robust, {len(samples)} samples x {len(variants)} variants, "
          f"{len(results['cpu'])} pairs > {min_kin}, {n_dropped} dropped at "
          f"{DEFAULT_CUTOFF}; {gpu_label} on {device_name(device)} against the "
          f"CPU bit planes on {numba_threads()} threads; {args.repeats} alternating rounds")
    for name, label in (("gpu", gpu_label), ("cpu", "CPU bit planes")):
        print(f"  {label}: king_robust wall {summary(wall[name], ' s', '{:.2f}')}; "
              f"route alone {summary(route_wall[name], ' s', '{:.2f}')}")
    t_ratio = ratios(wall["gpu"], wall["cpu"])
    r_ratio = ratios(route_wall["gpu"], route_wall["cpu"])

    def verdict(ok):
        return ("met" if ok else "NOT met") if device.type == "cuda" else "a goal for a GPU"
    print(f"  wall ratio GPU / CPU, king_robust: {summary(t_ratio)} (goal <= 0.1x: "
          f"{verdict(statistics.median(t_ratio) <= 0.1)})")
    print(f"  wall ratio GPU / CPU, the routes alone: {summary(r_ratio)}")
    print(f"  {load_summary(loads)}")
    if on_gpu is not None:
        gpu_seconds = on_gpu["kernels"] or on_gpu["span"]
        what = "kernel time (profiler)" if on_gpu["kernels"] else "device span (CUDA events)"
        print(f"  route on the GPU: device span {on_gpu['span']:.3f} s, kernels "
              + (f"{on_gpu['kernels']:.3f} s" if on_gpu["kernels"] else "not measured")
              + f"; span / route wall {on_gpu['span'] / statistics.median(route_wall['gpu']):.2f}")
    else:
        gpu_seconds = statistics.median(route_wall["gpu"])
        what = "route wall (no device clock on a CPU)"
    print(f"  {what} / the 1 s goal: {gpu_seconds:.3f}x "
          f"({verdict(gpu_seconds <= 1.0)}; the goal is set at 20,000 x 20,000)")
    rate = 2.0 * macs / gpu_seconds
    int8_rate = args.results.get("gemm", {}).get("ops_per_s", {}).get("int8_colmajor")
    frac = rate / int8_rate if int8_rate else None
    if frac is not None:
        print(f"  the route's int8 rate ({macs:.3g} multiply-adds in {gpu_seconds:.3f} s) / "
              f"_int_mm's rate measured above: {frac:.3f}")
    else:
        print(f"  the route's int8 products: {macs:.3g} multiply-adds (run --parts gemm,king "
              "for their rate as a fraction of _int_mm's)")
    print(f"  kept and dropped sets, .kin0 rows and undefined-pair counts identical in every "
          f"round: {identical}")
    if not identical:
        raise SystemExit("KING: the GPU route and the CPU route disagree")
    return {"n_samples": len(samples), "n_variants": len(variants), "block_size": block,
            "variant_block": vblock, "pairs_reported": len(results["cpu"]),
            "dropped": n_dropped, "wall_s": wall, "route_wall_s": route_wall,
            "gpu_device_s": on_gpu, "wall_ratio_gpu_cpu": t_ratio,
            "route_ratio_gpu_cpu": r_ratio, "multiply_adds": macs,
            "fraction_of_int8_rate": frac, "identical": identical, "load_average": loads,
            "cpu_threads": numba_threads()}


# ------------------------------------------------------------------------------- main
PARTS = {"gemm": part_gemm, "train": part_train, "king": part_king}


def device_name(device) -> str:
    import torch

    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return f"CPU ({torch.get_num_threads()} torch threads)"


def numba_threads() -> int:
    import numba

    return numba.get_num_threads()


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    ap.add_argument("--parts", default="gemm,train,king",
                    help=f"comma-separated parts to run, of {', '.join(PARTS)}")
    ap.add_argument("--gemm-size", type=int, default=8192)
    ap.add_argument("--king-samples", type=int, default=20000)
    ap.add_argument("--king-variants", type=int, default=20000)
    ap.add_argument("--block-size", type=int, default=None,
                    help="samples per row strip of the int8 route (default the route's)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=None,
                    help="CPU threads for numba and torch (default all cores)")
    ap.add_argument("--rows", type=int, default=20000, help="simulated store rows")
    ap.add_argument("--snps", type=int, default=1000, help="simulated store SNPs")
    ap.add_argument("--budget", type=int, default=1000, help="labeled rows a model trains on")
    ap.add_argument("--models", type=int, nargs="+", default=[1, 10, 50],
                    help="group sizes whose pre-training epoch is timed")
    ap.add_argument("--seeds", type=int, default=10, help="seeds of the cmix train group")
    ap.add_argument("--train-config", default="{}", help="cmix config keys as JSON")
    ap.add_argument("--workdir", default=None, help="keep the simulated .bed here")
    ap.add_argument("--json", default=None, help="write the results here as JSON")
    args = ap.parse_args(argv)
    parts = [p.strip() for p in args.parts.split(",") if p.strip()]
    unknown = [p for p in parts if p not in PARTS]
    if unknown:
        ap.error(f"unknown part(s) {', '.join(unknown)}; parts are {', '.join(PARTS)}")

    import torch

    from cmix.runtime import resolve_device

    if args.threads:
        from cmix.genotypes.kernels import set_numba_threads

        set_numba_threads(args.threads)
        torch.set_num_threads(args.threads)
    device = resolve_device(args.device)
    args.results = {"device": device_name(device), "torch": torch.__version__,
                    "cuda": torch.version.cuda, "cpu_cores": os.cpu_count(),
                    "argv": sys.argv[1:] if argv is None else list(argv)}
    for part in parts:
        args.results[part] = PARTS[part](args, device)
    if args.json:
        Path(args.json).write_text(json.dumps(args.results, indent=1, default=float) + "\n")
        print(f"wrote {args.json}")
    return args.results


if __name__ == "__main__":
    main()
