"""The output discipline every command follows before it does any work.

:func:`claim_outputs` (run by the CLI for every step) checks each output its command line
names against every input (device and inode: links included), refuses outputs that would
lose a user's data (an empty name, the current folder, a folder where a file goes, a
path inside a Zarr store, a folder holding files the command did not write) and holds a
lock on each (:mod:`cmix.locks`). Commands that write into a folder (``report``,
``simulate``) record what they wrote in a manifest (:data:`MANIFEST_FILE`) and only ever
replace or remove those files (:func:`previous_outputs`, :func:`recorded_outputs`,
:func:`staged_folder`).
"""

from __future__ import annotations

import contextlib
import errno
import glob
import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

from . import __version__
from .atomic import (TEMPORARY_NAME, atomic_path, check_writable_dir, file_sha256, path_identity,
                     temporary_path)
from .errors import CmixError
from .locks import output_locks


#: Files a genotype or PCA prefix given as an input names besides itself: an output
#: must not be any of them.
INPUT_SUFFIXES = (".bed", ".bim", ".fam", ".pgen", ".pvar", ".pvar.zst", ".psam", ".bgi",
                  ".eigenvec", ".eigenval", ".eigenvec.allele", ".acount")


#: What marks a folder as a Zarr store (format 2 group or array, format 3 node).
ZARR_MARKERS = (".zgroup", ".zarray", "zarr.json")


#: The manifest a command with folder outputs (report, simulate) writes into the folder:
#: what it wrote there, by name; only those files are ever replaced or removed.
MANIFEST_FILE = ".cmix-manifest.json"


@dataclass(frozen=True)
class Output:
    """One output of a command, as its command line names it.

    flag: the option ("--out"), for messages; path: the text given. kind: "file" (the
    file ``path``, and ``path + s`` for each of ``suffixes``: a table and its
    ``.steps.tsv``), "prefix" (the files ``path + s`` for each of ``suffixes`` only) or
    "folder" (a folder the command writes into or replaces). lock: whether
    :func:`claim_outputs` takes its lock (a run folder has its own,
    :func:`folder_lock`). A folder that exists and holds files must carry the
    manifest of the command ``manifest`` (:func:`previous_outputs`), or be one
    ``admits(folder)`` says the command made, when these are given. A folder output that is a Zarr store
    is refused unless ``zarr_store`` (the output is a store, replaced whole).
    """

    flag: str
    path: str
    kind: str = "file"
    suffixes: tuple[str, ...] = ()
    lock: bool = True
    manifest: str | None = None
    admits: Callable[[Path], bool] | None = None
    zarr_store: bool = False

    def files(self) -> list[Path]:
        """The paths this output writes (for a folder: the folder)."""
        if self.kind == "prefix":
            return [Path(self.path + s) for s in self.suffixes]
        return [Path(self.path)] + [Path(self.path + s) for s in self.suffixes]


def input_paths(flag: str, value) -> list[tuple[str, Path]]:
    """(flag, path) of every existing file or folder an input argument's text may name:
    the path itself, a ``{chrom}`` pattern's files, a prefix's files
    (:data:`INPUT_SUFFIXES`) and, for a folder, the entries directly in it (a run
    folder's metrics.json). Text that names nothing (a trait name, JSON) gives none. A
    Path ``value`` names that file alone."""
    if isinstance(value, Path):
        return [(flag, value)] if path_identity(value) is not None else []
    if not isinstance(value, str) or not value.strip() or "\0" in value or len(value) > 4096:
        return []
    texts = [value + s for s in ("", *INPUT_SUFFIXES)]
    if "{chrom}" in value:
        texts = [p for t in texts for p in glob.glob(glob.escape(t).replace("{chrom}", "*"))]
    found = []
    for text in texts:
        path = Path(text)
        if path_identity(path) is None:
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
    ``manifest`` or ``admits`` rule).
    """
    outputs = list(outputs)
    if not outputs:
        return
    known = {}
    for flag, value in inputs:
        for what, path in input_paths(flag, value):
            known.setdefault(path_identity(path), (what, path))
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
            ident = path_identity(path)
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
        if out.kind == "folder" and out.admits and Path(text).is_dir():
            first = _first_file(Path(text))
            if first is not None and not out.admits(Path(text)):
                raise CmixError(f"{_named(flag, text)}: holds files this command did not "
                                f"write (e.g. {first}; a folder it made holds its record of "
                                "them); give a new or empty folder")
        if out.kind == "folder" and not out.zarr_store and any(
                (Path(text) / m).exists() for m in ZARR_MARKERS):
            raise CmixError(f"{_named(flag, text)}: is a Zarr store; writing there would "
                            "damage it: choose a folder outside it")


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
    for name in names:
        _check_inside(folder, name, path)
    if manifest.get("command") != command:
        raise CmixError(f"{_named(flag, folder)}: was written by `cmix {manifest.get('command')}` "
                        f"(its {MANIFEST_FILE}); `cmix {command}` writes into a folder of its "
                        "own: give another folder")
    return names


def _check_inside(folder: Path, name: str, manifest: Path) -> None:
    """Refuse (CmixError) a manifest entry that is not a file name inside ``folder``: an
    absolute path, a ``..`` part, or a path whose symlinks lead out of the folder. Such an
    entry was not written by cmix (an edited manifest, or a folder from elsewhere), and
    acting on it could replace or delete a file anywhere."""
    parts = Path(name).parts
    bad = (not name or Path(name).is_absolute() or ".." in parts or "\0" in name
           or name == MANIFEST_FILE)
    if not bad:
        root = os.path.realpath(folder)
        bad = os.path.commonpath([root, os.path.realpath(folder / name)]) != root
    if bad:
        raise CmixError(f"{manifest}: lists {name!r}, which is not a file inside {folder}; cmix "
                        "lists only files it wrote in the folder, so this manifest was edited "
                        "or comes from elsewhere: nothing was deleted; give a new folder")


def _recorded_sha256(folder: Path) -> dict[str, str]:
    """{name: sha256} of the files the folder's manifest recorded with their content
    ({} for a manifest that recorded names alone)."""
    with contextlib.suppress(OSError, ValueError, AttributeError):
        digests = json.loads((folder / MANIFEST_FILE).read_text(encoding="utf-8"))["sha256"]
        return {k: v for k, v in digests.items() if isinstance(v, str)}
    return {}


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
        found = sorted(f for f in files if not TEMPORARY_NAME.match(f))
        found += sorted(d for d in dirs if os.path.islink(os.path.join(root, d)))
        if found:
            return os.path.relpath(os.path.join(root, found[0]), folder)
    return None


def _write_manifest(folder: Path, command: str, names, digests: dict[str, str]) -> None:
    """Record ``names`` (relative to ``folder``) as ``command``'s files there, with the
    sha256 of those ``digests`` holds (what cmix can show it wrote)."""
    names = sorted(set(names))
    with atomic_path(folder / MANIFEST_FILE) as tmp:
        tmp.write_text(json.dumps({"command": command, "cmix": __version__, "files": names,
                                   "sha256": {n: digests[n] for n in names if n in digests}},
                                  indent=1) + "\n")


@contextlib.contextmanager
def recorded_outputs(folder, command: str, names, previous, flag: str = "--out"):
    """Around the block that renames ``names`` (relative to ``folder``) into place:
    refuses first (CmixError) a name that exists but is not a file this command wrote
    there (not in ``previous``, what :func:`previous_outputs` returned, or changed since:
    its sha256 differs from the manifest's) or is a folder; records previous + names in
    the manifest (so a kill at any point leaves every file cmix wrote listed); after the
    block removes the files of ``previous`` not written again (a figure of a trait no
    longer reported) whose content is still what cmix wrote, and records ``names``
    alone with their sha256 (on an exception in the block, the manifest as it was).
    Yields the list of stale names it will remove. Files it did not write, and files
    changed since it wrote them, are never touched."""
    folder = Path(folder)
    names = list(dict.fromkeys(str(n) for n in names))
    digests = _recorded_sha256(folder)
    changed = {n for n in previous if n in digests and (folder / n).is_file()
               and file_sha256(folder / n) != digests[n]}       # edited since cmix wrote it
    ours = set(previous) - changed
    foreign = []
    for name in names:
        path = folder / name
        if path.is_dir() and not path.is_symlink():
            raise CmixError(f"{_named(flag, folder)}: {name} there is a folder; cmix writes a file "
                            "of that name: move it away or give another folder")
        if (path.exists() or path.is_symlink()) and name not in ours:
            foreign.append(name)
    if foreign:
        listed = ", ".join(foreign[:10]) + (f" and {len(foreign) - 10} more"
                                            if len(foreign) > 10 else "")
        raise CmixError(f"{_named(flag, folder)}: {listed} there "
                        f"{'was' if len(foreign) == 1 else 'were'} not written by `cmix "
                        f"{command}` (not in its {MANIFEST_FILE}, or changed since) and would "
                        "be overwritten; move them away or give another folder")
    stale = [n for n in previous if n not in names and n not in changed]
    folder.mkdir(parents=True, exist_ok=True)
    had_manifest = (folder / MANIFEST_FILE).exists()
    _write_manifest(folder, command, [*previous, *names], digests)
    try:
        yield stale
    except BaseException:                   # nothing renamed: the record as it was
        if had_manifest:
            _write_manifest(folder, command, previous, digests)
        else:
            (folder / MANIFEST_FILE).unlink(missing_ok=True)
        raise
    for name in stale:
        path = folder / name
        _check_inside(folder, name, folder / MANIFEST_FILE)
        if path.is_file() or path.is_symlink():
            path.unlink()
            with contextlib.suppress(OSError):      # a subfolder it emptied
                if path.parent != folder:
                    path.parent.rmdir()
    _write_manifest(folder, command, names,
                    {n: file_sha256(folder / n) for n in names if (folder / n).is_file()})


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
    tmp = temporary_path(out)
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
    except BaseException as err:
        if created and out.is_dir() and not any(out.iterdir()):
            out.rmdir()
        if isinstance(err, OSError) and err.errno in (errno.ENOSPC, errno.EDQUOT):
            name = Path(err.filename).name if err.filename else "its files"
            raise CmixError(f"{out}: no space left on device writing {name} "
                            f"({err.strerror}); nothing was written there") from None
        raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
