"""What a step says while it runs: one-line log messages and progress bars, on stderr.

No log line ever holds an individual-level ID.
"""

from __future__ import annotations

import os
import sys


def progress(iterable=None, *, total=None, desc: str = "", unit: str = "it", disable=None):
    """A tqdm progress bar on stderr, shown only on a terminal (or when forced).

    Set ``CMIX_PROGRESS=1`` to force bars (e.g. in a SLURM log), ``0`` to hide them.
    """
    from tqdm.auto import tqdm

    if disable is None:
        forced = os.environ.get("CMIX_PROGRESS")
        disable = (not sys.stderr.isatty()) if forced is None else forced == "0"
    return tqdm(iterable, total=total, desc=desc, unit=unit, disable=disable, leave=False,
                dynamic_ncols=True)


_LOG_PREFIX = [""]


def log(msg: str) -> None:
    """One line of progress or summary on stderr (never individual-level IDs), after the
    prefix of :func:`set_log_prefix`."""
    print(f"[cmix] {_LOG_PREFIX[0]}{msg}", file=sys.stderr, flush=True)


def set_log_prefix(prefix: str) -> None:
    """Start every later :func:`log` line of this process with ``prefix`` (e.g. "seed 3:
    ", where processes log side by side)."""
    _LOG_PREFIX[0] = prefix
