"""Shared plumbing: the user-error type, atomic outputs, progress bars, small table I/O.

Every file a cmix step writes appears only when it is complete: it is written to a
temporary name in the same folder and renamed into place, so a killed step leaves
nothing that looks finished.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Iterator


class CmixError(Exception):
    """A problem with the user's input or arguments.

    The CLI prints the message alone (no traceback) and exits with status 1, so the
    message must say which file, line or column is wrong and what was expected.
    """


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike, *, is_dir: bool = False) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; rename it onto ``path`` on success.

    On any exception the temporary file or folder is removed and ``path`` is left as
    it was. ``is_dir=True`` yields a (not yet created) folder name, for Zarr stores.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.parent / f".{path.name}.{os.getpid()}.tmp"
    _remove(tmp)
    try:
        yield tmp
        if is_dir and path.exists():
            _remove(path)
        os.replace(tmp, path)
    except BaseException:
        _remove(tmp)
        raise


@contextlib.contextmanager
def atomic_outputs(*paths: str | os.PathLike) -> Iterator[list[Path]]:
    """Like :func:`atomic_path` for several files at once: all appear, or none do."""
    stack = contextlib.ExitStack()
    with stack:
        tmps = [stack.enter_context(atomic_path(p)) for p in paths]
        yield tmps


def _remove(p: Path) -> None:
    if p.is_dir() and not p.is_symlink():
        shutil.rmtree(p, ignore_errors=True)
    elif p.exists() or p.is_symlink():
        p.unlink()


def check_writable_dir(path: str | os.PathLike) -> Path:
    """Create ``path`` if needed and check that files can be written in it."""
    path = Path(path)
    try:
        path.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path):
            pass
    except OSError as err:
        raise CmixError(f"{path}: cannot write to this folder ({err.strerror or err})") from None
    return path


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


def log(msg: str) -> None:
    """One line of progress or summary on stderr (never individual-level IDs)."""
    print(f"[cmix] {msg}", file=sys.stderr, flush=True)


def read_id_set(path: str | os.PathLike, what: str) -> set[str]:
    """The first whitespace field of each non-empty line (a .snplist, a withdrawal list).

    ``what`` names the file's role in the not-found message.
    """
    path = Path(path)
    if not path.exists():
        raise CmixError(f"{path}: file not found ({what})")
    with open(path) as fh:
        return {line.split()[0] for line in fh if line.strip()}
