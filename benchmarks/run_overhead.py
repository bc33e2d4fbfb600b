"""The fixed cost of one `cmix train`: wall time outside the method's own fit, by stage.

On a store of the benchmark grid's kind (benchmarks/grid.py's binary trait, --n-samples x
--n-snps), each method runs as one `cmix train` process (CPU, one torch thread, a fresh
run folder). The process is this file with ``--child``: it wraps the harness's stages in
timers (time.perf_counter; each stage's time excludes the stages nested in it, so the
stages add up), then calls the CLI's ``main`` with the train arguments, as the ``cmix``
command does. Stages:

- import: every import statement (outermost), wherever it happens;
- verify (the store's checksums), open store, splits, run key, moments, covariates,
  device, run folder (lock and checks), checkpoint read / writes, determinism switch;
- read rows: dosages read from the store (inside the fit too);
- fit: the method's ``fit``, less the stages above nested in it;
- predict test (the test rows' probabilities and latent), metrics, versions,
  prediction record, writes (predictions.npz);
- other: the rest of the process's own time; startup: the wall time outside it
  (interpreter start, site, exit).

overhead = wall - fit, printed per stage and as a ratio to the fit. The methods run in
alternating order, ``--repeats`` times (benchmarks/alternate.py); medians are printed.
With ``--before SRC`` (another cmix source tree, e.g. ``git archive`` of an older
commit) each run is made with both trees, alternating, and the table gives both. One
more run per method and tree under ``python -X importtime`` lists the costliest
top-level imports.

With ``--seeds N`` it times instead the seeds 1..N of each method made by N `cmix train`
processes, one seed each, against one `cmix train --seed 1 .. N` process (``--threads
T`` CPU threads a process, 1 by default; the one process then runs min(N, T) seeds at
once; fresh run folders, alternating, ``--repeats`` times): the wall time of each and
the ratio one process / N processes (median and minimum over the repeats), and whether
every seed's metrics.json, less its wall times and thread count, is the same in both.

    python benchmarks/run_overhead.py --work /tmp/overhead [--before /tmp/cmix_before]
    python benchmarks/run_overhead.py --work /tmp/overhead --seeds 5
"""

from __future__ import annotations

import argparse
import builtins
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
MLP_CONFIG = {"hidden": 128, "d_proj": 64, "epochs": 2, "warmup_epochs": 1,
              "batch_size": 256, "labeled_batch_size": 128, "pred_epochs": 5,
              "pred_patience": 8}


# ----------------------------------------------------------------- the timed process
class StageClock:
    """Exclusive wall seconds per stage: a stage's time stops while a stage nested in it
    runs, so the stages of one process add up to its time."""

    def __init__(self):
        self.seconds: dict[str, float] = {}
        self.stack: list[list] = []           # [name, start of its current slice]

    def enter(self, name: str) -> None:
        now = time.perf_counter()
        if self.stack:
            outer = self.stack[-1]
            self.seconds[outer[0]] = self.seconds.get(outer[0], 0.0) + now - outer[1]
        self.stack.append([name, now])

    def leave(self) -> None:
        now = time.perf_counter()
        name, start = self.stack.pop()
        self.seconds[name] = self.seconds.get(name, 0.0) + now - start
        if self.stack:
            self.stack[-1][1] = now

    def wrap(self, owner, attr: str, name: str) -> None:
        """Time ``owner.attr`` (a function or method) as stage ``name``; absent: skipped."""
        fn = getattr(owner, attr, None)
        if fn is None or getattr(fn, "_staged", False):
            return

        def timed(*args, **kwargs):
            self.enter(name)
            try:
                return fn(*args, **kwargs)
            finally:
                self.leave()

        timed._staged = True
        setattr(owner, attr, timed)


def child(times_path: str, argv: list[str]) -> int:
    """Run ``cmix`` with ``argv`` in this process, stages timed; writes their seconds
    (and the process's own total) as JSON to ``times_path``."""
    t0 = time.perf_counter()
    clock = StageClock()
    real_import = builtins.__import__

    def timed_import(name, *args, **kwargs):
        if clock.stack and clock.stack[-1][0] == "import":
            return real_import(name, *args, **kwargs)
        clock.enter("import")
        try:
            return real_import(name, *args, **kwargs)
        finally:
            clock.leave()

    builtins.__import__ = timed_import
    clock.enter("other")
    import cmix.cli as cli
    import cmix.atomic as atomic
    import cmix.learn.data as data
    import cmix.learn.context as context
    import cmix.learn.harness as harness
    import cmix.learn.results as results
    import cmix.learn.shared as shared
    from cmix.learn.methods import CLASSES

    for owner, attr, name in [
            (context, "verify_store", "verify"), (context, "open_store", "open store"),
            (context, "make_splits", "splits"), (context, "run_key_of", "run key"),
            (context, "store_fingerprint", "run key"), (context, "column_moments", "moments"),
            (context, "standardised_covariates", "covariates"),
            (harness, "resolve_device", "device"), (context, "resolve_device", "device"),
            (harness, "folder_lock", "run folder"),
            (atomic, "check_writable_dir", "run folder"),
            (context, "saved_state", "checkpoint read"),
            (context.RunContext, "save", "checkpoint writes"),
            (context, "load_rows", "read rows"), (data, "load_rows", "read rows"),
            (results, "classification_metrics", "metrics"), (results, "versions", "versions"),
            (shared, "versions", "versions"),
            (results, "prediction_record", "prediction record"),
            (results, "write_predictions", "writes")]:
        clock.wrap(owner, attr, name)
    for cls in {base for c in CLASSES.values() for base in c.__mro__}:
        for attr, name in (("fit", "fit"), ("predict_proba", "predict test"),
                           ("latent", "predict test")):
            if attr in cls.__dict__:
                clock.wrap(cls, attr, name)
    import torch

    clock.wrap(torch, "use_deterministic_algorithms", "determinism switch")
    torch.set_num_threads(1)
    rc = cli.main(argv)
    clock.leave()
    builtins.__import__ = real_import
    Path(times_path).write_text(json.dumps(
        {"stages": clock.seconds, "process": time.perf_counter() - t0}))
    return rc


# ----------------------------------------------------------------- the comparison
def make_store(work: Path, n_samples: int, n_snps: int) -> Path:
    sys.path.insert(0, str(HERE))
    from grid import simulate_traits

    stores = simulate_traits(work, n_samples, n_snps, n_discovery=1000, n_causal=100,
                             h2=0.5, seed=2026)
    return stores[0]


def train_args(store: Path, method: str, out: Path, config: Path,
               seeds: tuple = (1,), threads: int | None = None) -> list[str]:
    args = ["train", "--store", str(store), "--budget", "300", "--seed", *map(str, seeds),
            "--method", method, "--device", "cpu", "--out", str(out)]
    args += ["--threads", str(threads)] if threads else []
    return args + (["--config", str(config)] if method != "logreg" else [])


def seeds_run(store: Path, method: str, work: Path, config: Path, n_seeds: int,
              one_process: bool, threads: int = 1) -> dict:
    """Seeds 1..n_seeds of ``method`` in fresh run folders, by one `cmix train` process
    for all or one process per seed (cmix of this tree, ``threads`` CPU threads per
    process: one process then runs min(n_seeds, threads) seeds at once): {"wall":
    seconds of all the processes, "metrics": {seed: metrics.json less wall_seconds and
    torch_threads}}."""
    from alternate import run_process

    runs = work / "runs" / f"seeds_{method}_{'one' if one_process else 'each'}"
    subprocess.run(["rm", "-rf", str(runs)], check=True)
    env = {**os.environ, "PYTHONPATH": str(HERE.parent), "CMIX_PROGRESS": "0",
           "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads)}
    seeds = tuple(range(1, n_seeds + 1))
    batches = [seeds] if one_process else [(s,) for s in seeds]
    wall = 0.0
    for batch in batches:
        cmd = [sys.executable, "-m", "cmix.cli",
               *train_args(store, method, runs / "seed{seed}", config, batch, threads)]
        wall += run_process(cmd, env=env, cwd=work)["wall"]
    metrics = {}
    for s in seeds:
        m = json.loads((runs / f"seed{s}" / "metrics.json").read_text())
        metrics[s] = {k: v for k, v in m.items() if k not in ("wall_seconds", "torch_threads")}
    return {"wall": wall, "metrics": metrics}


def compare_seeds(store: Path, methods: list[str], work: Path, config: Path, n_seeds: int,
                  repeats: int, threads: int = 1) -> None:
    """Print, per method, the wall time of ``n_seeds`` seeds as n_seeds processes and as
    one, their ratio per repeat and whether the metrics agree (see the module docstring)."""
    from alternate import alternate, load_summary, ratios, summary

    runs = {f"{m} {mode}": (lambda m=m, one=(mode == "one"):
                            seeds_run(store, m, work, config, n_seeds, one, threads))
            for m in methods for mode in ("each", "one")}
    results, loads = alternate(runs, repeats)
    print(f"store {store.name}; budget 300; CPU, {threads} thread(s) a process; "
          f"seeds 1..{n_seeds}; "
          f"{repeats} repeats; {load_summary(loads)}")
    for m in methods:
        each, one = results[f"{m} each"], results[f"{m} one"]
        same = all(r["metrics"] == each[0]["metrics"] for r in each + one)
        print(f"{m}: {n_seeds} processes {statistics.median(r['wall'] for r in each):.1f} s, "
              f"one process {statistics.median(r['wall'] for r in one):.1f} s (medians); "
              f"one / {n_seeds}: "
              f"{summary(ratios([r['wall'] for r in one], [r['wall'] for r in each]))}; "
              f"metrics {'identical' if same else 'DIFFER'}")


def timed_run(src: Path, store: Path, method: str, work: Path, config: Path) -> dict:
    """One `cmix train` of ``method`` with cmix from ``src`` in a fresh run folder:
    {"wall", "fit", "overhead", "stages"} in seconds."""
    out = work / "runs" / f"{src.name}_{method}"
    subprocess.run(["rm", "-rf", str(out)], check=True)
    times = work / "times.json"
    env = {**os.environ, "PYTHONPATH": str(src), "CMIX_PROGRESS": "0"}
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", str(times), "--",
           *train_args(store, method, out, config)]
    t0 = time.perf_counter()
    res = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    wall = time.perf_counter() - t0
    if res.returncode != 0:
        raise SystemExit(f"failed: {' '.join(cmd)}\n{res.stdout.decode()[-3000:]}")
    got = json.loads(times.read_text())
    stages = dict(got["stages"])
    stages["startup"] = wall - got["process"]
    fit = stages.get("fit", 0.0)
    return {"wall": wall, "fit": fit, "overhead": wall - fit, "stages": stages,
            "metrics": json.loads((out / "metrics.json").read_text())["test"]}


def top_imports(src: Path, store: Path, method: str, work: Path, config: Path,
                n: int = 6) -> list[tuple[str, float]]:
    """The ``n`` costliest top-level imports of one `cmix train` (python -X importtime,
    cumulative seconds)."""
    out = work / "runs" / f"{src.name}_{method}_importtime"
    subprocess.run(["rm", "-rf", str(out)], check=True)
    env = {**os.environ, "PYTHONPATH": str(src), "CMIX_PROGRESS": "0"}
    res = subprocess.run([sys.executable, "-X", "importtime", "-m", "cmix.cli",
                          *train_args(store, method, out, config)],
                         env=env, cwd=work, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                         text=True)   # cwd: `-m` puts it first on sys.path, before src
    rows = []
    for line in res.stderr.splitlines():
        if line.startswith("import time:") and "cumulative" not in line:
            _, cum, name = line.split("|")
            if not name[1:].startswith(" "):          # top level
                rows.append((name.strip(), int(cum) / 1e6))
    return sorted(rows, key=lambda r: -r[1])[:n]


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--child"]:
        return child(argv[1], argv[3:])
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--work", required=True, help="folder for the store and the runs")
    ap.add_argument("--store", default=None, help="use this store instead of simulating one")
    ap.add_argument("--n-samples", type=int, default=2500)
    ap.add_argument("--n-snps", type=int, default=900)
    ap.add_argument("--methods", nargs="+", default=["logreg", "mlp"])
    ap.add_argument("--before", default=None, help="another cmix source tree to compare")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--seeds", type=int, default=None,
                    help="time this many seeds as separate processes against one process")
    ap.add_argument("--threads", type=int, default=1,
                    help="with --seeds: CPU threads of every process (one process then "
                         "runs min(seeds, threads) seeds at once)")
    args = ap.parse_args(argv)
    sys.path.insert(0, str(HERE))
    from alternate import alternate, load_summary

    work = Path(args.work).resolve()
    work.mkdir(parents=True, exist_ok=True)
    store = Path(args.store) if args.store else make_store(work, args.n_samples, args.n_snps)
    config = work / "mlp_config.json"
    config.write_text(json.dumps(MLP_CONFIG))
    if args.seeds:
        compare_seeds(store, args.methods, work, config, args.seeds, args.repeats,
                      args.threads)
        return 0
    trees = {"after": HERE.parent}
    if args.before:
        trees = {"before": Path(args.before).resolve(), **trees}
    runs = {f"{m} {t}": (lambda src=src, m=m: timed_run(src, store, m, work, config))
            for m in args.methods for t, src in trees.items()}
    results, loads = alternate(runs, args.repeats)
    print(f"store {store.name}: {args.n_samples} x {args.n_snps}; budget 300; CPU, 1 torch "
          f"thread; medians of {args.repeats}; {load_summary(loads)}")
    first = next(iter(trees))
    for m in args.methods:
        if any(rep["metrics"] != results[f"{m} {first}"][0]["metrics"]
               for t in trees for rep in results[f"{m} {t}"]):
            print(f"!! {m}: the test metrics differ between runs")
    names = list(runs)
    stages = sorted({s for r in results.values() for rep in r for s in rep["stages"]},
                    key=lambda s: -statistics.median(
                        results[names[-1]][k]["stages"].get(s, 0.0)
                        for k in range(args.repeats)))
    med = {name: {key: statistics.median(rep[key] for rep in results[name])
                  for key in ("wall", "fit", "overhead")} for name in names}
    print(f"\n{'seconds':22s}" + "".join(f"{n:>15s}" for n in names))
    for key in ("wall", "fit", "overhead"):
        print(f"{key:22s}" + "".join(f"{med[n][key]:15.3f}" for n in names))
    print(f"{'overhead / fit':22s}" + "".join(
        f"{statistics.median(r['overhead'] / max(r['fit'], 1e-9) for r in results[n]):15.2f}"
        for n in names))
    print("overhead by stage:")
    for s in stages:
        if s == "fit":
            continue
        print(f"  {s:20s}" + "".join(
            f"{statistics.median(rep['stages'].get(s, 0.0) for rep in results[n]):15.3f}"
            for n in names))
    print("\ncostliest top-level imports (python -X importtime, one run, cumulative s):")
    for m in args.methods:
        for t, src in trees.items():
            rows = top_imports(src, store, m, work, config)
            print(f"  {m} {t}: " + ", ".join(f"{name} {s:.2f}" for name, s in rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
