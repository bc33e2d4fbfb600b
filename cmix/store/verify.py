"""A store's checksums: the sha256 of every array file and of the group attributes,
written with the store and checked before every training run (``cmix verify``)."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import numpy as np

from ..atomic import file_sha256
from ..errors import CmixError
from .read import load_rows, open_store


def attrs_digest(attrs: dict) -> str:
    """sha256 of the group attributes (trait, class names, encoding, covariates,
    provenance, ...) less ``checksums`` and ``complete``, as canonical JSON."""

    kept = {k: v for k, v in attrs.items() if k not in ("checksums", "complete")}
    return hashlib.sha256(json.dumps(kept, sort_keys=True).encode()).hexdigest()


def array_files(path: Path) -> dict:
    """{relative path: [size in bytes, sha256 hex]} of every file of the store's arrays
    (chunks and .zarray/.zattrs), not the group's own metadata."""
    files = {}
    for sub in sorted(p for p in path.iterdir() if p.is_dir()):
        for f in sorted(sub.rglob("*")):
            if f.is_file():
                files[f.relative_to(path).as_posix()] = [f.stat().st_size, file_sha256(f)]
    return files


def verify_store(path: str | os.PathLike, root=None, *, decode: bool = False) -> dict:
    """Check a store's array files and group attributes against the checksums written
    with it.

    Every recorded file must exist with its size and sha256, no array may hold a chunk
    file that was not recorded, and the group attributes must have the recorded sha256
    (class names swapped in the .zattrs would relabel every prediction). ``decode=True`` also reads every call_dosage chunk
    and checks its values lie in the store's encoding (:data:`DOSAGE_ENCODINGS`). Raises CmixError naming the
    first damaged files; returns {"files", "bytes"} checked.
    """
    path = Path(path)
    root = open_store(path) if root is None else root
    recorded = root.attrs["checksums"]["files"]
    bad = []
    for rel, (size, digest) in recorded.items():
        f = path / rel
        if not f.is_file():
            bad.append(f"{rel} is missing")
        elif f.stat().st_size != size:
            bad.append(f"{rel} has {f.stat().st_size} bytes, {size} were written")
        elif file_sha256(f) != digest:
            bad.append(f"{rel} has changed (sha256 differs)")
    present = set(_array_file_names(path))
    bad += [f"{rel} was not written with the store" for rel in sorted(present - set(recorded))]
    digest = root.attrs["checksums"].get("attrs")     # stores written before it: files only
    if digest is not None and attrs_digest(root.attrs.asdict()) != digest:
        bad.insert(0, "its group attributes (.zattrs: trait, class names, encoding, ...) "
                      "have changed")
    if bad:
        more = f" (and {len(bad) - 3} more)" if len(bad) > 3 else ""
        raise CmixError(f"{path}: damaged store: {'; '.join(bad[:3])}{more}; rebuild it with "
                        "`cmix store --force`")
    if decode:

        call = root["call_dosage"]
        step = int(call.chunks[0])
        for start in range(0, call.shape[0], step):
            load_rows(root, np.arange(start, min(start + step, call.shape[0])), path.name)
    return {"files": len(recorded), "bytes": int(sum(v[0] for v in recorded.values()))}


def _array_file_names(path: Path) -> list[str]:
    return [f.relative_to(path).as_posix() for sub in path.iterdir() if sub.is_dir()
            for f in sub.rglob("*") if f.is_file()]

