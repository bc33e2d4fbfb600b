"""Atomic outputs: every file a cmix step writes appears only when it is complete.

A file is written to a temporary name in the same folder (``.NAME.HOST.PID.tmp``,
:func:`temporary_path`) and renamed into place, so a killed step leaves nothing that
looks finished; a set of files (:func:`atomic_outputs`) is renamed in only after the old
set is gone, so old and new never mix. Leftover temporaries of processes that no longer
run on this host are removed by the next write. torch checkpoints go through the same
path (:func:`save_torch`) and are checked whole when read (:func:`load_torch`).
"""

from __future__ import annotations

import contextlib
import errno
import glob
import hashlib
import io
import os
import re
import shutil
import tempfile
import zipfile
import zlib
from pathlib import Path
from typing import Iterator

from .errors import CmixError


HOST = __import__("socket").gethostname().split(".")[0].replace("/", "_")


def _alive(pid: int) -> bool:
    """Whether process ``pid`` runs on this host (another user's counts as running)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def path_identity(path) -> tuple[int, int] | None:
    """(st_dev, st_ino) of what ``path`` names (symlinks followed), None when nothing
    is there or the text cannot name a file."""
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return None
    return st.st_dev, st.st_ino


#: A temporary name of :func:`atomic_path` (``.NAME.HOST.PID.tmp``): not an output.
TEMPORARY_NAME = re.compile(r"^\..+\.[^.]+\.\d+\.tmp$")


def _remove_stale_temporaries(path: Path) -> None:
    """Remove ``.NAME.HOST.PID.tmp`` leftovers of ``path`` written on this host by a
    process that no longer runs (a step killed with SIGKILL leaves them)."""
    prefix = f".{path.name}.{HOST}."
    for tmp in path.parent.glob(f"{glob.escape(prefix)}*.tmp"):
        pid = tmp.name[len(prefix):-len(".tmp")]
        if pid.isdigit() and not _alive(int(pid)):
            _remove(tmp)


def temporary_path(path: Path) -> Path:
    """The temporary name an output ``path`` is written under: ``.NAME.HOST.PID.tmp``."""
    return path.parent / f".{path.name}.{HOST}.{os.getpid()}.tmp"


def _refuse_folder_at(path: Path) -> None:
    """CmixError when a folder sits where the file ``path`` is to be written: cmix
    never replaces a folder with a file (it would have to delete what is in it)."""
    if path.is_dir():
        raise CmixError(f"{path}: is a folder, expected the name of a file to write; cmix "
                        "never deletes a folder it did not write: choose another name")


def _naming_output(err: OSError, real: dict[str, Path]) -> BaseException:
    """``err`` raised on a temporary name, as a CmixError naming the output it stands
    for (``real``: temporary path text -> output); ``err`` itself otherwise."""
    for name in (err.filename, err.filename2):
        if name is not None and str(name) in real:
            return CmixError(f"{real[str(name)]}: cannot write it ({err.strerror or err}); "
                             "nothing was written")
    return err


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike, *, is_dir: bool = False,
                replaceable=None) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; rename it onto ``path`` on success.

    On any exception the temporary file or folder is removed and ``path`` is left as
    it was. A folder at ``path`` where a file is written is a CmixError, raised before
    the block runs. ``is_dir=True`` yields a (not yet created) folder name, for Zarr
    stores; an existing folder at ``path`` is then replaced only when
    ``replaceable(path)`` is true (a folder this kind of output wrote: a cmix store),
    and an existing file there is a CmixError. An error on the temporary name is
    reported naming ``path``.
    """
    path = Path(path)
    if not is_dir:
        _refuse_folder_at(path)
    elif path.is_file():
        raise CmixError(f"{path}: is a file, expected a folder to write")
    path.parent.mkdir(parents=True, exist_ok=True)
    _remove_stale_temporaries(path)
    tmp = temporary_path(path)
    _remove(tmp)
    try:
        yield tmp
        if not is_dir:
            _refuse_folder_at(path)
        elif path.exists() or path.is_symlink():
            if path.is_symlink() or replaceable is None or not replaceable(path):
                raise CmixError(f"{path}: exists and is not an output of this kind that "
                                "cmix wrote; cmix replaces only its own: remove it yourself "
                                "or choose another name")
            _remove(path)
        os.replace(tmp, path)
    except BaseException as err:
        _remove(tmp)
        if isinstance(err, OSError) and err.errno in (errno.ENOSPC, errno.EDQUOT):
            raise CmixError(f"{path}: no space left on device writing it "
                            f"({err.strerror}); nothing was written") from None
        if isinstance(err, OSError):
            named = _naming_output(err, {str(tmp): path})
            if named is not err:
                raise named from None
        raise


@contextlib.contextmanager
def atomic_outputs(*paths: str | os.PathLike, remove=()) -> Iterator[list[Path]]:
    """Like :func:`atomic_path` for several files at once: yields one temporary path
    per output (beside it). On success the old outputs (and the files ``remove``, stale
    outputs of another kind of run) are deleted first, then every new file is renamed
    into place, so the files present at any moment are all old or all new: a process
    killed in between leaves an incomplete set (a missing file marks it unfinished),
    never new files beside old ones. On an exception nothing changes. Only files are
    ever deleted: a folder at an output path (or among ``remove``) is a CmixError,
    raised before the block runs and checked again before anything is deleted."""
    paths = [Path(p) for p in paths]
    stale = [Path(p) for p in remove]
    for path in [*paths, *stale]:
        _refuse_folder_at(path)
    tmps = []
    for path in paths:
        path.parent.mkdir(parents=True, exist_ok=True)
        _remove_stale_temporaries(path)
        tmp = temporary_path(path)
        _remove(tmp)
        tmps.append(tmp)
    try:
        yield tmps
        missing = [t for t in tmps if not t.exists()]
        if missing:
            raise RuntimeError(f"atomic_outputs: {missing[0]} was not written")
        for old in [*paths, *stale]:
            _refuse_folder_at(old)
        for old in [*paths, *stale]:
            if old.exists() or old.is_symlink():
                old.unlink()
        for tmp, path in zip(tmps, paths):
            os.replace(tmp, path)
    except BaseException as err:
        for tmp in tmps:
            _remove(tmp)
        if isinstance(err, OSError) and err.errno in (errno.ENOSPC, errno.EDQUOT):
            what = (f"{paths[0]}" + (f" and {len(paths) - 1} more outputs" if len(paths) > 1
                                     else ""))
            raise CmixError(f"{paths[0].parent}: no space left on device writing {what} "
                            f"({err.strerror}); nothing was written") from None
        if isinstance(err, OSError):
            named = _naming_output(err, {str(t): p for t, p in zip(tmps, paths)})
            if named is not err:
                raise named from None
        raise


def save_torch(obj, path: str | os.PathLike) -> None:
    """torch.save ``obj`` to ``path`` atomically. It is serialised in memory first and
    written in one call, so a full disk surfaces as OSError ENOSPC (reported as "no
    space left on device"), not as torch's "unexpected pos". torch writes a zip file:
    :func:`load_torch` checks each member's CRC32 before loading."""
    import torch  # torch: ~1.5 s to import; only where a network or tensor is used

    buf = io.BytesIO()
    torch.save(obj, buf)
    with atomic_path(path) as tmp:
        tmp.write_bytes(buf.getbuffer())


def load_torch(path: str | os.PathLike, what: str = "checkpoint"):
    """The object :func:`save_torch` wrote to ``path`` (tensors on the CPU), after checking
    the file's integrity: it must be a complete zip whose every member matches its
    CRC32. Raises CmixError naming the file for a truncated, corrupted or unreadable one."""
    import torch  # torch: ~1.5 s to import; only where a network or tensor is used

    path = Path(path)
    data = path.read_bytes()
    fix = "; it cannot be trusted: delete it (and retrain, or restore a copy)"
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as zf:
            bad = zf.testzip()
    except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, EOFError, ValueError,
            NotImplementedError, zlib.error) as err:
        raise CmixError(f"{path}: truncated or corrupt {what} (not a complete torch zip file: "
                        f"{err}){fix}") from None
    if bad is not None:
        raise CmixError(f"{path}: corrupt {what} (member {bad} fails its CRC32 check: the "
                        f"bytes changed after it was written){fix}")
    try:
        return torch.load(io.BytesIO(data), map_location="cpu", weights_only=False)
    except Exception as err:    # noqa: BLE001 - any unpickling failure is a bad file
        raise CmixError(f"{path}: unreadable {what} ({type(err).__name__}: {err}){fix}") \
            from None


def _remove(p: Path) -> None:
    """Remove a file, link or folder tree at ``p`` if there is one."""
    if p.is_dir() and not p.is_symlink():
        shutil.rmtree(p, ignore_errors=True)
    elif p.exists() or p.is_symlink():
        p.unlink()


def file_sha256(path: str | os.PathLike, block: int = 1 << 20) -> str:
    """sha256 hex digest of a file's bytes."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(block), b""):
            h.update(chunk)
    return h.hexdigest()


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


@contextlib.contextmanager
def scratch_folder(beside, tag: str) -> Iterator[Path]:
    """A private scratch folder ``.TAG.HOST.PID.XXXXXXXX`` in the folder ``beside``,
    removed with everything in it when the block ends. Such folders left by processes
    that no longer run on this host (a SIGKILL leaves them, with whatever they held)
    are removed first."""
    beside = Path(beside)
    beside.mkdir(parents=True, exist_ok=True)
    prefix = f".{tag}.{HOST}."
    for old in beside.glob(f"{glob.escape(prefix)}*"):
        pid = old.name[len(prefix):].split(".")[0]
        if pid.isdigit() and not _alive(int(pid)) and old.is_dir() and not old.is_symlink():
            shutil.rmtree(old, ignore_errors=True)
    with tempfile.TemporaryDirectory(prefix=f"{prefix}{os.getpid()}.", dir=beside) as tmp:
        yield Path(tmp)
