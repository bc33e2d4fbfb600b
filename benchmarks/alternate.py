"""Timing on a shared machine: alternate the compared runs, repeat, report ratios.

The speed scripts in benchmarks/ all measure this way. In each repeat every compared run
goes once, in alternating order (A B, then B A, then A B, ...), so that a burst of load
from other jobs tends to land on both. A ratio is taken within each repeat (the two runs
minutes apart at most), and the median and the minimum of the per-repeat ratios are
printed, with the 1-minute load average read before each repeat.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import tempfile
import time
from typing import Callable


def loadavg() -> float:
    """The 1-minute load average (/proc/loadavg; NaN where there is none)."""
    try:
        with open("/proc/loadavg") as fh:
            return float(fh.read().split()[0])
    except OSError:
        return float("nan")


def run_process(cmd: list[str], env=None, cwd=None) -> dict:
    """Run a command to completion; return wall (s), cpu (user + system s) and rss (peak
    resident MiB of the command and its children). The command runs under GNU time
    (/usr/bin/time): a child forked from this Python process would start from its
    resident size, so wait4's ru_maxrss here would never read below ours. A failure
    exits with the command's output."""
    with tempfile.NamedTemporaryFile("r", suffix=".time") as stats:
        t0 = time.perf_counter()
        res = subprocess.run(["/usr/bin/time", "-f", "%U %S %M", "-o", stats.name, *map(str, cmd)],
                             env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        wall = time.perf_counter() - t0
        if res.returncode != 0:
            raise SystemExit(f"failed ({res.returncode}): {' '.join(map(str, cmd))}\n"
                             f"{res.stdout.decode(errors='replace')[-4000:]}")
        user, system, kib = stats.read().split()[-3:]
    return {"wall": wall, "cpu": float(user) + float(system), "rss": int(kib) / 1024}


def alternate(runs: dict[str, Callable[[], dict]], repeats: int,
              after: Callable[[], None] | None = None) -> tuple[dict, list]:
    """Call each of ``runs`` once per repeat, alternating the order between repeats.

    runs: name -> a function returning a dict of measurements (e.g. run_process's).
    after: called at the end of each repeat (e.g. to compare the runs' outputs).
    Returns ({name: [dict per repeat]}, [load average before each repeat]).
    """
    names = list(runs)
    out: dict[str, list] = {name: [] for name in names}
    loads = []
    for rep in range(repeats):
        loads.append(loadavg())
        for name in (names if rep % 2 == 0 else names[::-1]):
            out[name].append(runs[name]())
        if after is not None:
            after()
    return out, loads


def ratios(num: list[float], den: list[float]) -> list[float]:
    """Per-repeat ratios num[k] / den[k]."""
    return [a / b for a, b in zip(num, den)]


def summary(values: list[float], unit: str = "x", fmt: str = "{:.2f}") -> str:
    """'median M, min m (a, b, c)' of a list of per-repeat values."""
    each = ", ".join(fmt.format(v) for v in values)
    return (f"median {fmt.format(statistics.median(values))}{unit}, min "
            f"{fmt.format(min(values))}{unit} ({each})")


def load_summary(loads: list[float]) -> str:
    return (f"load average (1 min, before each repeat): {min(loads):.1f}-{max(loads):.1f}, "
            f"median {statistics.median(loads):.1f} on {os.cpu_count()} cores")
