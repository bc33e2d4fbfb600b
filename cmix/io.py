"""Shared plumbing: the user-error type, atomic outputs, progress bars, small table I/O.

Every file a cmix step writes appears only when it is complete: it is written to a
temporary name in the same folder and renamed into place, so a killed step leaves
nothing that looks finished.
"""

from __future__ import annotations

import contextlib
import errno
import glob
import gzip
import json
import os
import re
import shutil
import stat
import sys
import tempfile
import threading
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Iterator

if TYPE_CHECKING:
    import numpy as np


class CmixError(Exception):
    """A problem with the user's input or arguments.

    The CLI prints the message alone (no traceback) and exits with status 1, so the
    message must say which file, line or column is wrong and what was expected.
    """


_HOST = __import__("socket").gethostname().split(".")[0].replace("/", "_")


def _alive(pid: int) -> bool:
    """Whether process ``pid`` runs on this host (another user's counts as running)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _remove_stale_temporaries(path: Path) -> None:
    """Remove ``.NAME.HOST.PID.tmp`` leftovers of ``path`` written on this host by a
    process that no longer runs (a step killed with SIGKILL leaves them)."""
    prefix = f".{path.name}.{_HOST}."
    for tmp in path.parent.glob(f"{glob.escape(prefix)}*.tmp"):
        pid = tmp.name[len(prefix):-len(".tmp")]
        if pid.isdigit() and not _alive(int(pid)):
            _remove(tmp)


def _temporary(path: Path) -> Path:
    """The temporary name an output ``path`` is written under: ``.NAME.HOST.PID.tmp``."""
    return path.parent / f".{path.name}.{_HOST}.{os.getpid()}.tmp"


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
    tmp = _temporary(path)
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
        tmp = _temporary(path)
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
    import io

    import torch

    buf = io.BytesIO()
    torch.save(obj, buf)
    with atomic_path(path) as tmp:
        tmp.write_bytes(buf.getbuffer())


def load_torch(path: str | os.PathLike, what: str = "checkpoint"):
    """The object :func:`save_torch` wrote to ``path`` (tensors on the CPU), after checking
    the file's integrity: it must be a complete zip whose every member matches its
    CRC32. Raises CmixError naming the file for a truncated, corrupted or unreadable one."""
    import io
    import zipfile

    import torch

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
    if p.is_dir() and not p.is_symlink():
        shutil.rmtree(p, ignore_errors=True)
    elif p.exists() or p.is_symlink():
        p.unlink()


def file_sha256(path: str | os.PathLike, block: int = 1 << 20) -> str:
    """sha256 hex digest of a file's bytes."""
    import hashlib

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
def staged_folder(out_dir: str | os.PathLike, command: str = "simulate") -> Iterator[Path]:
    """Build a folder of several files that must agree (a simulated cohort) in a
    temporary sibling, ``.NAME.HOST.PID.tmp``, and yield it. On success its files are
    moved into ``out_dir`` (created if needed), each by an atomic rename; on any error
    the sibling is removed and ``out_dir`` is left as it was (removed again if this call
    created it and it is empty), so a failed run never leaves a half-written or mixed
    folder. ``out_dir`` must be new, empty, or written by an earlier ``cmix COMMAND``
    (its manifest, :func:`previous_outputs`, checked before the block runs): only the
    files that one wrote are replaced, and those this run does not write again are
    removed (:func:`recorded_outputs`)."""
    out = Path(out_dir)
    previous = previous_outputs(out, command)
    created = not out.exists()
    out = check_writable_dir(out)
    tmp = _temporary(out)
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    try:
        yield tmp
        names = sorted(str(p.relative_to(tmp)) for p in tmp.rglob("*") if p.is_file())
        with recorded_outputs(out, command, names, previous):
            for name in names:
                dest = out / name
                dest.parent.mkdir(parents=True, exist_ok=True)
                os.replace(tmp / name, dest)
    except BaseException:
        if created and out.is_dir() and not any(out.iterdir()):
            out.rmdir()
        raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


@contextlib.contextmanager
def folder_lock(folder: str | os.PathLike, holder: str) -> Iterator[Path]:
    """Hold an exclusive lock on ``folder`` (file ``.cmix.lock`` in it) for the block.

    A second process asking for the same folder fails at once with a CmixError naming
    the holder (``holder`` text, pid, host, start time). The lock is the kernel's
    (flock), so it is released however the holder ends, kill -9 included.
    """
    import fcntl
    import socket
    import time

    folder = check_writable_dir(folder)
    path = folder / ".cmix.lock"
    flags = os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
    try:
        try:
            fd = os.open(path, flags | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            fd = os.open(path, flags)
    except OSError as err:
        why = ("it is a symbolic link; cmix writes its lock only to a plain file it made"
               if err.errno == errno.ELOOP else err.strerror)
        raise CmixError(f"{path}: cannot use this lock file ({why}); remove it") from None
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode) or st.st_nlink != 1 or st.st_uid != os.getuid():
        os.close(fd)
        raise CmixError(f"{path}: not a lock file cmix made (expected a plain file of yours "
                        "with one link; this one is another file or a hard link to one); "
                        "remove it")
    fh = os.fdopen(fd, "r+")
    try:
        fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        fh.seek(0)
        who = fh.read(4096).strip() or "another process"
        fh.close()
        raise CmixError(f"{folder}: in use by {who}; wait for it to end or use another "
                        "folder") from None
    try:
        fh.seek(0)
        fh.truncate()
        fh.write(f"{holder} (pid {os.getpid()} on {socket.gethostname()}, since "
                 f"{time.strftime('%Y-%m-%d %H:%M:%S')})\n")
        fh.flush()
        yield folder
    finally:
        fh.close()


# ------------------------------------------------------------------ output discipline
#: Files a genotype or PCA prefix given as an input names besides itself: an output
#: must not be any of them.
INPUT_SUFFIXES = (".bed", ".bim", ".fam", ".pgen", ".pvar", ".pvar.zst", ".psam", ".bgi",
                  ".eigenvec", ".eigenval", ".eigenvec.allele", ".acount")
#: What marks a folder as a Zarr store (format 2 group or array, format 3 node).
ZARR_MARKERS = (".zgroup", ".zarray", "zarr.json")
#: The manifest a command with folder outputs (report, simulate) writes into the folder:
#: what it wrote there, by name; only those files are ever replaced or removed.
MANIFEST_FILE = ".cmix-manifest.json"
#: A temporary name of :func:`atomic_path` (``.NAME.HOST.PID.tmp``): not an output.
_TEMPORARY = re.compile(r"^\..+\.[^.]+\.\d+\.tmp$")


@dataclass(frozen=True)
class Output:
    """One output of a command, as its command line names it.

    flag: the option ("--out"), for messages; path: the text given. kind: "file" (the
    file ``path``, and ``path + s`` for each of ``suffixes``: a table and its
    ``.steps.tsv``), "prefix" (the files ``path + s`` for each of ``suffixes`` only) or
    "folder" (a folder the command writes into or replaces). lock: whether
    :func:`claim_outputs` takes its lock (a run folder has its own,
    :func:`folder_lock`). A folder that exists and holds files must carry the
    manifest of the command ``manifest`` (:func:`previous_outputs`), or hold at least
    one of the names ``holds`` (:func:`check_folder_holds`), when these are given.
    """

    flag: str
    path: str
    kind: str = "file"
    suffixes: tuple[str, ...] = ()
    lock: bool = True
    manifest: str | None = None
    holds: tuple[str, ...] = ()

    def files(self) -> list[Path]:
        """The paths this output writes (for a folder: the folder)."""
        if self.kind == "prefix":
            return [Path(self.path + s) for s in self.suffixes]
        return [Path(self.path)] + [Path(self.path + s) for s in self.suffixes]


def _identity(path) -> tuple[int, int] | None:
    """(st_dev, st_ino) of what ``path`` names (symlinks followed), None when nothing
    is there or the text cannot name a file."""
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return None
    return st.st_dev, st.st_ino


def input_paths(flag: str, value) -> list[tuple[str, Path]]:
    """(flag, path) of every existing file or folder an input argument's text may name:
    the path itself, a ``{chrom}`` pattern's files, a prefix's files
    (:data:`INPUT_SUFFIXES`) and, for a folder, the entries directly in it (a run
    folder's metrics.json). Text that names nothing (a trait name, JSON) gives none. A
    Path ``value`` names that file alone."""
    if isinstance(value, Path):
        return [(flag, value)] if _identity(value) is not None else []
    if not isinstance(value, str) or not value.strip() or "\0" in value or len(value) > 4096:
        return []
    texts = [value + s for s in ("", *INPUT_SUFFIXES)]
    if "{chrom}" in value:
        texts = [p for t in texts for p in glob.glob(glob.escape(t).replace("{chrom}", "*"))]
    found = []
    for text in texts:
        path = Path(text)
        if _identity(path) is None:
            continue
        found.append((flag, path))
        if path.is_dir():
            with contextlib.suppress(OSError):
                found += [(flag, child) for child in sorted(path.iterdir())]
    return found


def _enclosing_store(path: Path) -> Path | None:
    """The Zarr store (a folder holding :data:`ZARR_MARKERS`) that ``path`` lies in,
    symlinks resolved; None when there is none."""
    for folder in Path(os.path.realpath(path)).parents:
        if any((folder / m).exists() for m in ZARR_MARKERS):
            return folder
    return None


def _named(flag: str, path) -> str:
    """``--out PATH`` (or PATH alone without a flag): how a message names an output."""
    return f"{flag} {path}" if flag else str(path)


def check_outputs(outputs, inputs=()) -> None:
    """Refuse, before any work, the outputs of a command that would lose a user's data.

    outputs: :class:`Output` items; inputs: (flag, text) pairs of the command's input
    arguments (:func:`input_paths` expands them). An output is refused (CmixError naming
    it) when its text is empty (an unset shell variable); when it names the current
    folder or a folder above it (``.``); when a folder sits where a file is written, or
    a file where a folder is meant; for a prefix, when it is itself a folder or ends
    in ``/``; when it lies inside a Zarr store; when it is the same file or folder as
    any input (compared by device and inode: symlinks and hard links included) or as
    another output; for a folder, when it holds entries the command did not write (its
    ``manifest`` or ``holds`` rule).
    """
    outputs = list(outputs)
    if not outputs:
        return
    known = {}
    for flag, value in inputs:
        for what, path in input_paths(flag, value):
            known.setdefault(_identity(path), (what, path))
    cwd = Path.cwd().resolve()
    written: dict[tuple, tuple[str, Path]] = {}
    for out in outputs:
        flag, text, noun = out.flag, out.path, "folder" if out.kind == "folder" else "file"
        if not text.strip():
            raise CmixError(f"{flag or 'an output'} is empty (an unset shell variable?); "
                            f"give the {noun} to write")
        if "\0" in text:
            raise CmixError(f"{_named(flag, repr(text))}: a path cannot hold a NUL byte")
        where = Path(text).resolve()
        if where == cwd or where in cwd.parents:
            raise CmixError(f"{_named(flag, text)}: names the current folder (or one above "
                            f"it); give a new {noun} name, e.g. results/NAME")
        if out.kind == "prefix" and (text.endswith(("/", os.sep)) or Path(text).is_dir()):
            stem = text.rstrip("/" + os.sep)
            raise CmixError(f"{_named(flag, text)}: is a folder; {flag or 'it'} is a prefix "
                            f"of the file names written ({stem}/NAME writes "
                            f"{stem}/NAME{out.suffixes[0]} and the others)")
        if out.kind == "folder" and Path(text).exists() and not Path(text).is_dir():
            raise CmixError(f"{_named(flag, text)}: cannot write to this folder (it is a "
                            "file)")
        own = out.files()
        for path in own + ([Path(text)] if out.kind == "prefix" else []):
            if out.kind != "folder" and path.is_dir():
                raise CmixError(f"{_named(flag, path)}: is a folder, expected the name of a "
                                "file to write; cmix never deletes a folder it did not write")
            store = _enclosing_store(path)
            if store is not None:
                raise CmixError(f"{_named(flag, path)}: lies inside the Zarr store {store}; "
                                "writing there would damage it: choose a path outside it")
            ident = _identity(path)
            if ident is not None and ident in known:
                what, src = known[ident]
                same = "" if str(src) == str(path) else f" ({src})"
                raise CmixError(f"{_named(flag, path)}: is the input {what}{same}; an output "
                                "never overwrites an input: choose another name")
            if path not in own:
                continue
            key = ident or ("path", os.path.abspath(path))
            if key in written:
                raise CmixError(f"{_named(flag, path)}: is also the output "
                                f"{_named(*written[key])}; give each output its own name")
            written[key] = (flag, path)
        if out.kind == "folder" and out.manifest:
            previous_outputs(text, out.manifest, flag)
        if out.kind == "folder" and out.holds:
            check_folder_holds(text, out.holds, flag)


def check_folder_holds(folder, names, flag: str = "--out") -> None:
    """Refuse (CmixError) a folder output that exists, holds files (in it or below it;
    empty folders do not count) and none of ``names`` directly in it (the files the
    command writes there, e.g. a run's): a folder the command did not write, which it
    would fill beside someone else's files."""
    folder = Path(folder)
    if not folder.is_dir():
        return
    first = _first_file(folder)
    if first is not None and not {e.name for e in folder.iterdir()} & set(names):
        raise CmixError(f"{_named(flag, folder)}: holds files this command did not write "
                        f"(e.g. {first}; it writes "
                        f"{', '.join(n for n in sorted(names) if not n.startswith('.'))}); "
                        "give a new or empty folder")


def _read_manifest(folder: Path, command: str, flag: str) -> list[str] | None:
    """The names ``folder``'s manifest lists, or None when it has none. CmixError when
    it is unreadable or another command's."""
    path = folder / MANIFEST_FILE
    if not path.exists():
        return None
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise CmixError(f"{path}: unreadable manifest of {_named(flag, folder)} ({err}); cmix "
                        "cannot tell which files there it wrote: give a new folder") from None
    names = manifest.get("files") if isinstance(manifest, dict) else None
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise CmixError(f"{path}: not a cmix manifest (expected a JSON object with a list "
                        "of file names); give a new folder")
    if manifest.get("command") != command:
        raise CmixError(f"{_named(flag, folder)}: was written by `cmix {manifest.get('command')}` "
                        f"(its {MANIFEST_FILE}); `cmix {command}` writes into a folder of its "
                        "own: give another folder")
    return names


def previous_outputs(folder, command: str, flag: str = "--out") -> list[str]:
    """The files an earlier ``cmix COMMAND`` recorded writing into the output folder
    ``folder`` (its manifest, :data:`MANIFEST_FILE`; names relative to the folder); []
    for a folder that does not exist or is empty. A folder that holds entries but no
    manifest of this command (a folder cmix did not write, or another command's) is a
    CmixError: nothing is written into it. Call it before any work."""
    folder = Path(folder)
    if not folder.exists():
        return []
    if not folder.is_dir():
        raise CmixError(f"{_named(flag, folder)}: cannot write to this folder (it is a file)")
    names = _read_manifest(folder, command, flag)
    if names is not None:
        return names
    first = _first_file(folder)
    if first is not None:
        raise CmixError(f"{_named(flag, folder)}: holds files `cmix {command}` did not write "
                        f"(e.g. {first}; it records what it writes in {MANIFEST_FILE}); give "
                        "a new or empty folder")
    return []


def _first_file(folder: Path) -> str | None:
    """The first file (or link) found in ``folder`` or its subfolders, relative to it,
    leaving out atomic-write temporaries; None when it holds empty folders only (as
    Snakemake makes them for a job's outputs)."""
    for root, dirs, files in os.walk(folder):
        dirs.sort()
        found = sorted(f for f in files if not _TEMPORARY.match(f))
        found += sorted(d for d in dirs if os.path.islink(os.path.join(root, d)))
        if found:
            return os.path.relpath(os.path.join(root, found[0]), folder)
    return None


def _write_manifest(folder: Path, command: str, names) -> None:
    from . import __version__

    with atomic_path(folder / MANIFEST_FILE) as tmp:
        tmp.write_text(json.dumps({"command": command, "cmix": __version__,
                                   "files": sorted(set(names))}, indent=1) + "\n")


@contextlib.contextmanager
def recorded_outputs(folder, command: str, names, previous, flag: str = "--out"):
    """Around the block that renames ``names`` (relative to ``folder``) into place:
    refuses first (CmixError) a name that exists but is not in ``previous`` (what
    :func:`previous_outputs` returned: a file this command did not write there) or is
    a folder; records previous + names in the manifest (so a kill at any point leaves
    every file cmix wrote listed); after the block removes the files of ``previous``
    not written again (a figure of a trait no longer reported) and records ``names``
    alone (on an exception in the block, the manifest as it was). Yields the list of
    stale names it will remove. Files it did not write are never touched."""
    folder = Path(folder)
    names = list(dict.fromkeys(str(n) for n in names))
    ours = set(previous)
    for name in names:
        path = folder / name
        if path.is_dir() and not path.is_symlink():
            raise CmixError(f"{_named(flag, folder)}: {name} there is a folder; cmix writes a file "
                            "of that name: move it away or give another folder")
        if (path.exists() or path.is_symlink()) and name not in ours:
            raise CmixError(f"{_named(flag, folder)}: {name} there was not written by `cmix "
                            f"{command}` (not in its {MANIFEST_FILE}); move it away or give "
                            "another folder")
    stale = [n for n in previous if n not in names]
    folder.mkdir(parents=True, exist_ok=True)
    had_manifest = (folder / MANIFEST_FILE).exists()
    _write_manifest(folder, command, [*previous, *names])
    try:
        yield stale
    except BaseException:                   # nothing renamed: the record as it was
        if had_manifest:
            _write_manifest(folder, command, previous)
        else:
            (folder / MANIFEST_FILE).unlink(missing_ok=True)
        raise
    for name in stale:
        path = folder / name
        if path.is_file() or path.is_symlink():
            path.unlink()
            with contextlib.suppress(OSError):      # a subfolder it emptied
                if path.parent != folder:
                    path.parent.rmdir()
    _write_manifest(folder, command, names)


class _OutputLock:
    """An flock on ``.NAME.cmix.lock`` beside an output; the file is removed when the
    lock is released (a SIGKILL leaves it, unlocked: the next writer takes it over)."""

    def __init__(self, output: Path, holder: str):
        import fcntl
        import socket
        import time

        self.path = output.parent / f".{output.name}.cmix.lock"
        flags = os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
        for _ in range(100):                 # the holder may remove the file meanwhile
            try:
                try:
                    fd = os.open(self.path, flags | os.O_CREAT | os.O_EXCL, 0o644)
                except FileExistsError:
                    fd = os.open(self.path, flags)
            except FileNotFoundError:
                continue
            except OSError as err:
                if err.errno in (errno.ENOSPC, errno.EDQUOT):
                    raise CmixError(f"{output.parent}: no space left on device (creating "
                                    f"the lock of {output}); nothing was written") from None
                if err.errno == errno.ELOOP:
                    raise CmixError(f"{self.path}: cannot use this lock file of {output} (it "
                                    "is a symbolic link; cmix writes its lock only to a plain "
                                    "file it made); remove it") from None
                raise CmixError(f"{output.parent}: cannot write to this folder "
                                f"({err.strerror or err})") from None
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode) or st.st_nlink > 1 or st.st_uid != os.getuid():
                os.close(fd)
                raise CmixError(f"{self.path}: not a lock file cmix made (expected a plain "
                                "file of yours with one link); remove it")
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                who = os.pread(fd, 4096, 0).decode("utf-8", "replace").strip()
                os.close(fd)
                raise CmixError(f"{output}: being written by {who or 'another process'}; "
                                "wait for it to end or choose another output") from None
            if _identity(self.path) == (st.st_dev, st.st_ino) and st.st_nlink == 1:
                break
            os.close(fd)                     # removed by its holder on release: again
        else:
            raise CmixError(f"{self.path}: the lock of {output} keeps changing; try again")
        self.fd, self.identity = fd, (st.st_dev, st.st_ino)
        with contextlib.suppress(OSError):   # the text only informs (a full disk...)
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{holder} (pid {os.getpid()} on {socket.gethostname()}, since "
                          f"{time.strftime('%Y-%m-%d %H:%M:%S')})\n".encode(), 0)

    def release(self) -> None:
        if _identity(self.path) == self.identity:
            with contextlib.suppress(OSError):
                self.path.unlink()
        os.close(self.fd)


def _make_folders(folder: Path) -> list[Path]:
    """Create ``folder`` and its missing parents; returns those created, outermost first."""
    missing = [p for p in [folder, *folder.parents] if not p.exists()][::-1]
    for p in missing:
        try:
            p.mkdir()
        except FileExistsError:
            pass
        except OSError as err:
            raise CmixError(f"{p}: cannot write to this folder ({err.strerror or err})") \
                from None
    return missing


@contextlib.contextmanager
def output_locks(paths, holder: str) -> Iterator[None]:
    """Hold the lock of every output in ``paths`` (a file ``.NAME.cmix.lock`` beside
    each, flock) for the block: a second writer of any of them stops at once with a
    CmixError naming the holder (``holder`` text, pid, host, start time). Folders made
    for the locks are removed again when the block leaves them empty."""
    made, held = [], []
    try:
        named = {os.path.abspath(p): Path(p) for p in paths}
        for where in sorted(named):
            made += _make_folders(Path(where).parent)
            held.append(_OutputLock(named[where], holder))
        yield
    finally:
        for lock in reversed(held):
            lock.release()
        for folder in reversed(made):
            with contextlib.suppress(OSError):
                folder.rmdir()


@contextlib.contextmanager
def claim_outputs(command: str, outputs, inputs=()) -> Iterator[None]:
    """What every cmix command does before any work: :func:`check_outputs`, then hold
    each output's lock (:func:`output_locks`; the holder is ``cmix COMMAND``) while the
    block runs."""
    outputs = list(outputs)
    check_outputs(outputs, inputs)
    locked = [p for o in outputs if o.lock for p in o.files()]
    with output_locks(locked, f"cmix {command}"):
        yield


@contextlib.contextmanager
def scratch_folder(beside, tag: str) -> Iterator[Path]:
    """A private scratch folder ``.TAG.HOST.PID.XXXXXXXX`` in the folder ``beside``,
    removed with everything in it when the block ends. Such folders left by processes
    that no longer run on this host (a SIGKILL leaves them, with whatever they held)
    are removed first."""
    beside = Path(beside)
    beside.mkdir(parents=True, exist_ok=True)
    prefix = f".{tag}.{_HOST}."
    for old in beside.glob(f"{glob.escape(prefix)}*"):
        pid = old.name[len(prefix):].split(".")[0]
        if pid.isdigit() and not _alive(int(pid)) and old.is_dir() and not old.is_symlink():
            shutil.rmtree(old, ignore_errors=True)
    with tempfile.TemporaryDirectory(prefix=f"{prefix}{os.getpid()}.", dir=beside) as tmp:
        yield Path(tmp)


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


def input_file(path: str | os.PathLike, what: str) -> Path:
    """``path`` as a Path, checked to be an existing file (not a folder).

    ``what`` names the file's role (e.g. "phenotype table") in the message.
    """
    path = Path(path)
    if path.is_dir():
        raise CmixError(f"{path}: is a folder, expected a file ({what})")
    if not path.exists():
        raise CmixError(f"{path}: file not found ({what})")
    return path


def read_id_list(path: str | os.PathLike, what: str, *, one_field: bool = False) -> list[str]:
    """The first whitespace field of each non-empty line, in file order (a .snplist, an
    --extract list, a withdrawal list). ``what`` names the file's role in messages.

    Read through :func:`open_maybe_gzip` (gzip, a UTF-8 BOM and CRLF line ends are
    handled). ``one_field``: every non-empty line must hold exactly one ID (no second
    field, no comma), else a CmixError names the file and line.
    """
    path = input_file(path, what)
    ids = []
    for lineno, line in text_lines(path, what):
        fields = line.split()
        if not fields:
            continue
        if one_field and (len(fields) > 1 or "," in fields[0]):
            form = (f"{len(fields)} fields" if len(fields) > 1 else
                    "comma-separated values (UK Biobank's eid,date form?)")
            raise CmixError(f"{path}, line {lineno}: expected one ID per line ({what}), found "
                            f"{form}; keep the ID column only")
        ids.append(fields[0])
    return ids


def read_id_set(path: str | os.PathLike, what: str, *, one_field: bool = False) -> set[str]:
    """:func:`read_id_list` as a set."""
    return set(read_id_list(path, what, one_field=one_field))


def resolve_device(device: str | None = "auto"):
    """A torch device from --device: 'auto' is CUDA when torch sees a GPU, else CPU;
    'cuda' without a GPU is an error."""
    import torch

    if device in (None, "auto"):
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device == "cuda" and not torch.cuda.is_available():
        raise CmixError(f"--device cuda: torch {torch.__version__} sees no CUDA GPU here; use "
                        "--device cpu or auto")
    if device not in ("cpu", "cuda"):
        raise CmixError(f"--device must be auto, cpu or cuda, not {device!r}")
    return torch.device(device)


_ONE_BLAS = threading.local()


@contextlib.contextmanager
def one_blas_thread():
    """A context in which numpy's and scipy's BLAS (and MKL's) run on one thread: the sums
    of a fit's products then do not depend on the thread count, and small fits do not pay
    for threads they cannot use. Entering it inside itself (same thread) costs nothing;
    the outermost entry inspects the loaded libraries (~3 ms)."""
    if getattr(_ONE_BLAS, "active", False):
        yield
        return
    from threadpoolctl import threadpool_limits

    _ONE_BLAS.active = True
    try:
        with threadpool_limits(limits=1, user_api="blas"):
            yield
    finally:
        _ONE_BLAS.active = False


def is_gzip(path: str | os.PathLike) -> bool:
    """True when the file starts with the gzip magic bytes (whatever its name)."""
    with open(path, "rb") as fh:
        return fh.read(2) == b"\x1f\x8b"


def write_gzip(path: str | os.PathLike, data: bytes) -> None:
    """Write ``data`` gzipped to ``path`` (a temporary name, usually), reproducibly: the
    gzip header holds no file name (which would be the temporary one, naming the host
    and process) and no time."""
    with open(path, "wb") as fh, gzip.GzipFile(filename="", fileobj=fh, mode="wb",
                                               mtime=0) as gz:
        gz.write(data)


def open_maybe_gzip(path: str | os.PathLike, mode: str = "rt"):
    """Open a plain or gzip-compressed file (told apart by the gzip magic bytes).

    Text mode reads UTF-8 with a leading byte-order mark dropped ("utf-8-sig") and
    CRLF line ends read as "\\n" (universal newlines). Binary mode gives the stored
    (decompressed) bytes.
    """
    gz = is_gzip(path)
    if "b" in mode:
        return gzip.open(path, mode) if gz else open(path, mode)
    mode = mode if "t" in mode else mode + "t"
    return (gzip.open(path, mode, encoding="utf-8-sig") if gz
            else open(path, mode, encoding="utf-8-sig"))


def text_lines(path: str | os.PathLike, what: str) -> Iterator[tuple[int, str]]:
    """Yield (1-based line number, line without its line end) of a text file read
    through :func:`open_maybe_gzip`. A file that is not UTF-8 text, or a truncated or
    corrupt gzip file, is a CmixError naming the file and ``what``."""
    try:
        with open_maybe_gzip(path) as fh:
            for lineno, line in enumerate(fh, 1):
                yield lineno, line.rstrip("\r\n")
    except UnicodeDecodeError as err:
        raise CmixError(f"{path}: not UTF-8 text ({what}): {err.reason} at byte "
                        f"{err.start}") from None
    except (EOFError, zlib.error, gzip.BadGzipFile) as err:
        raise CmixError(f"{path}: truncated or corrupt gzip file ({what}): {err}") from None


def first_line(path: str | os.PathLike, what: str) -> str:
    """The first line of a text file without its line end (gzip and a BOM handled;
    "" for an empty file)."""
    for _, line in text_lines(path, what):
        return line
    return ""


def data_line(path: str | os.PathLike, row: int, what: str, header: bool = True) -> int:
    """The 1-based file line of data row ``row`` (0-based) of a text table, blank lines
    skipped as pandas skips them; for messages that name a line (computed when needed:
    it reads the file up to that line)."""
    n = -1
    for lineno, line in text_lines(path, what):
        if (header and lineno == 1) or not line.strip():
            continue
        n += 1
        if n == row:
            return lineno
    return row + 1 + header


def split_header(line: str, sep: str | None) -> list[str]:
    r"""The column names of a header line: split at ``sep`` ("\t", ",") or at runs of
    whitespace (None or r"\s+"); surrounding spaces and double quotes dropped."""
    fields = line.split() if sep in (None, r"\s+") else line.split(sep)
    return [f.strip().strip('"') for f in fields]


def check_row_widths(path: str | os.PathLike, n_fields: int, sep: str, what: str) -> None:
    r"""CmixError naming the first data line (after the header line) whose field count is
    not ``n_fields``: a value too many or too few shifts every later column of its row.
    sep: "\t", "," or r"\s+" (:func:`sniff_sep`); a comma-separated file is split as CSV
    (a quoted field may hold commas), the others as :func:`data_line_numbers` splits them.
    Blank lines are skipped."""
    import csv

    if sep == "\t":
        data_line_numbers(path, n_fields, "\t", what)
        return
    if sep != ",":
        try:
            data_line_numbers(path, n_fields, None, what)
        except CmixError as err:
            raise CmixError(f"{err}; between spaces a blank cell is no field: write NA "
                            "for a missing value") from None
        return
    rows = csv.reader(line for _, line in text_lines(path, what))
    next(rows, None)
    for row in rows:
        if row and len(row) != n_fields:
            raise CmixError(f"{path}, line {rows.line_num}: expected {n_fields} columns as in "
                            f"the header, found {len(row)} ({what}); a value too many or too "
                            "few shifts the columns")


def parse_json(text: str, source: str):
    """JSON text parsed. Text that is not JSON, or an object that gives one key twice
    (JSON keeps the last silently: a class or a field would vanish), is a CmixError
    naming ``source`` (and the line and column, or the key)."""
    import json

    def unique_keys(pairs):
        out = {}
        for key, value in pairs:
            if key in out:
                raise CmixError(f"{source}: key {key!r} appears twice in one JSON object; "
                                "which one is meant cannot be told")
            out[key] = value
        return out

    try:
        return json.loads(text, object_pairs_hook=unique_keys)
    except json.JSONDecodeError as err:
        raise CmixError(f"{source}: not valid JSON (line {err.lineno}, column {err.colno}: "
                        f"{err.msg})") from None


def parse_yaml(text: str, source: str):
    """YAML text parsed (safe tags only). Text that does not parse, or a mapping that
    gives one key twice (YAML keeps the last silently), is a CmixError naming ``source``
    (and the key's line)."""
    import yaml

    class UniqueKeyLoader(yaml.SafeLoader):
        def construct_mapping(self, node, deep=False):
            seen = set()
            for key_node, _ in node.value:
                key = self.construct_object(key_node, deep=deep)
                if key in seen:
                    raise CmixError(f"{source}, line {key_node.start_mark.line + 1}: key "
                                    f"{key!r} appears twice in one mapping; which one is "
                                    "meant cannot be told")
                seen.add(key)
            return super().construct_mapping(node, deep=deep)

    try:
        return yaml.load(text, Loader=UniqueKeyLoader)
    except yaml.YAMLError as err:
        raise CmixError(f"{source}: cannot parse ({err})") from None


def first_repeated(values):
    """The first value of ``values`` (a sequence) that an earlier one equals, else None:
    a list of a grid's traits, budgets or seeds may name each once."""
    seen = set()
    for value in values:
        if value in seen:
            return value
        seen.add(value)
    return None


def sniff_sep(header: str) -> str:
    r"""The delimiter of a table from its header line: "\t" when it holds a tab, else ","
    when it holds a comma, else r"\s+" (runs of spaces)."""
    return "\t" if "\t" in header else ("," if "," in header else r"\s+")


def check_unique_header(names: list[str], path, what: str, line: int = 1) -> None:
    """Raise a CmixError naming the first column name that appears twice."""
    seen: dict[str, int] = {}
    for k, name in enumerate(names, 1):
        if name in seen:
            raise CmixError(f"{path}, line {line}: column {name!r} appears twice in the "
                            f"header (columns {seen[name]} and {k}) ({what}); which one is "
                            "meant cannot be told")
        seen[name] = k


def read_table(path: str | os.PathLike, what: str, *, empty=None, **kw):
    """``pandas.read_csv(path, **kw)`` for a user's text table, with the reading rules
    of :func:`open_maybe_gzip`: gzip told by its magic bytes (not its name), a UTF-8 BOM
    dropped (encoding "utf-8-sig"), CRLF line ends read as LF.

    With a header (``header`` 0 or not given, no ``names``, no ``skiprows``) a column
    name that appears twice is a CmixError. ``empty``: returned for a file with no data
    (pandas' EmptyDataError); None makes an empty file a CmixError. pandas' ParserError,
    text that is not UTF-8 and a corrupt gzip file become one CmixError naming the file
    and ``what``.
    """
    import pandas as pd

    kw.setdefault("encoding", "utf-8-sig")
    kw["compression"] = "gzip" if is_gzip(path) else None
    try:
        df = pd.read_csv(path, **kw)
    except pd.errors.EmptyDataError:
        if empty is not None:
            return empty
        raise CmixError(f"{path}: the file is empty ({what})") from None
    except pd.errors.ParserError as err:
        raise CmixError(f"{path}: cannot parse as a table ({what}): "
                        f"{str(err).strip()}") from None
    except UnicodeDecodeError as err:
        raise CmixError(f"{path}: not UTF-8 text ({what}): {err.reason}") from None
    except (EOFError, zlib.error, gzip.BadGzipFile) as err:
        raise CmixError(f"{path}: truncated or corrupt gzip file ({what}): {err}") from None
    if kw.get("header", 0) == 0 and kw.get("names") is None and not kw.get("skiprows"):
        check_unique_header(split_header(first_line(path, what), kw.get("sep")), path, what)
    return df


def data_line_numbers(path: str | os.PathLike, n_fields: int, sep: str | None,
                      what: str, header: bool = True, block: int = 1 << 23,
                      first: int = 1) -> np.ndarray:
    r"""Check that every data line of a text table has ``n_fields`` fields.

    sep: "\t" or "," (every separator counts, so empty fields count too) or None (runs
    of spaces and tabs separate, as pandas' ``sep=r"\s+"``). The file may be gzipped.
    Blank lines are skipped, as pandas skips them; the table starts at line ``first``
    (lines above it are not read, as pandas' ``skiprows=first - 1``), and with
    ``header`` that line is the header and is not checked. Runs over the bytes in
    blocks, vectorised.

    Returns int64 (n_data_lines,): the 1-based line number of each data line (of each
    row pandas reads), for messages that name a line. Raises :class:`CmixError` naming
    the first line with another field count, or a truncated or corrupt gzip file.
    """
    import numpy as np

    lines_out = []
    n_lines = 0
    tail = b""
    try:
        with open_maybe_gzip(path, "rb") as fh:
            while True:
                chunk = fh.read(block)
                eof = not chunk
                data = tail + chunk
                cut = len(data) if eof else data.rfind(b"\n") + 1
                data, tail = data[:cut], data[cut:]
                if eof and data and not data.endswith(b"\n"):
                    data += b"\n"
                if data:
                    counts, blank = _field_counts(np.frombuffer(data, np.uint8), sep)
                    numbers = n_lines + 1 + np.arange(len(counts))
                    keep = ~blank & (numbers > first if header else numbers >= first)
                    bad = keep & (counts != n_fields)
                    if bad.any():
                        i = int(np.flatnonzero(bad)[0])
                        raise CmixError(
                            f"{path}, line {numbers[i]}: expected {n_fields} columns"
                            f"{' as in the header' if header else ''}, found {counts[i]} "
                            f"({what}); a value too many or too few shifts the columns")
                    lines_out.append(numbers[keep])
                    n_lines += len(counts)
                if eof:
                    break
    except (EOFError, zlib.error, gzip.BadGzipFile) as err:
        raise CmixError(f"{path}: truncated or corrupt gzip file ({what}): {err}") from None
    return np.concatenate(lines_out) if lines_out else np.zeros(0, np.int64)


def _field_counts(a, sep: str | None):
    """Fields per line of bytes ``a`` (uint8 array, ending with a newline): (counts int64,
    blank bool), one entry per line."""
    import numpy as np

    ends = np.flatnonzero(a == 10)
    starts = np.concatenate([[0], ends[:-1] + 1])
    length = ends - starts
    cr = (length > 0) & (a[np.maximum(ends - 1, 0)] == 13)
    blank = (length - cr) == 0
    if sep is not None:
        marks = np.flatnonzero(a == ord(sep))
        counts = np.diff(np.searchsorted(marks, ends), prepend=0) + 1
    else:
        space = (a == 32) | (a == 9) | (a == 13) | (a == 10)
        marks = np.flatnonzero(~space[1:] & space[:-1]) + 1
        if len(a) and not space[0]:
            marks = np.concatenate([[0], marks])
        counts = np.diff(np.searchsorted(marks, ends), prepend=0)
        blank = counts == 0
    return counts.astype(np.int64), blank
