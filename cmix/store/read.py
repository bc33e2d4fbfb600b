"""Reading a store: open and check it, its dosages by rows (decoded and range-checked),
its text arrays, column moments, and its fingerprint for run keys."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import numpy as np

from ..errors import CmixError
from .schema import (REQUIRED_ARRAYS, REQUIRED_ATTRS, STORE_VERSION, dosage_encoding,
                     fractional_copies)


def open_store(path: str | os.PathLike):
    """Open a store read-only and check it is complete and has the schema's arrays.

    Returns the zarr Group. Raises :class:`CmixError` naming what is missing.
    """

    import zarr     # 0.3 s: not at module level, which `cmix --help` reaches

    path = Path(path)
    if not path.exists():
        raise CmixError(f"{path}: store not found")
    try:
        root = zarr.open_group(str(path), mode="r", zarr_format=2)
    except Exception as err:  # zarr raises several types for a non-store folder
        raise CmixError(f"{path}: not a cmix Zarr store ({err})") from None
    if not root.attrs.get("complete", False):
        raise CmixError(f"{path}: incomplete store (no 'complete' attribute): it was not "
                        "written to the end; delete it and run `cmix store` again")
    version = root.attrs.get("cmix_store_version")
    if version != STORE_VERSION or "checksums" not in root.attrs:
        raise CmixError(f"{path}: store format {version}, this cmix reads format "
                        f"{STORE_VERSION} (with checksums); rebuild it with `cmix store --force`")
    missing = [a for a in REQUIRED_ARRAYS if a not in root]
    missing += [f"attribute {a}" for a in REQUIRED_ATTRS if a not in root.attrs]
    if missing:
        raise CmixError(f"{path}: store lacks {', '.join(missing)}")
    return root


def is_cmix_store(path: Path) -> bool:
    """Whether ``path`` is a folder holding a cmix store's group metadata."""

    try:
        attrs = json.loads((path / ".zattrs").read_text())
    except (OSError, ValueError):
        return False
    return path.is_dir() and (path / ".zgroup").is_file() and "cmix_store_version" in attrs



def check_encoding(root, encoding: str, name: str) -> None:
    """Refuse the categorical SNP encoding (levels 0/1/2) on a fractional store."""
    if encoding == "categorical" and dosage_encoding(root)["kind"] == "fractional":
        raise CmixError(f"{name}: holds fractional (imputed) dosages, which have no 0/1/2 "
                        "levels for the categorical encoding; use the dosage encoding "
                        "(train config encoding: dosage, the default)")


def store_fingerprint(root) -> str:
    """sha256 of the store's attributes, which hold the checksum of every array file:
    identifies its content (dosages, labels, splits, variants, trait config) for run
    keys."""

    return hashlib.sha256(json.dumps(dict(root.attrs), sort_keys=True, default=str)
                          .encode()).hexdigest()


def check_store_unchanged(store_path, sha256: str) -> None:
    """Refuse (CmixError) to go on when the store at ``store_path`` is no longer the one
    a run opened (fingerprint ``sha256``, :func:`store_fingerprint`):
    replaced (``cmix store --force``), removed or being rebuilt while the run read it.
    Called before a run writes its results, after its last read of the store, so the
    results never mix two stores' rows."""
    try:
        now = store_fingerprint(open_store(store_path))
    except CmixError:
        now = None
    if now != sha256:
        raise CmixError(f"{store_path}: the store changed while this run read it (replaced, "
                        "removed or rebuilt since the run opened it); its results would mix "
                        "two stores' rows, so none were written: rerun `cmix train`")



# Reading a store

def dosage_dask(root):
    """The store's call_dosage as a dask array with one dask chunk per Zarr chunk."""
    import dask.array as da     # imports scipy (0.3 s): only where a dask array is made


    return da.from_zarr(root["call_dosage"])


def store_text(root, name: str) -> np.ndarray:
    """Array ``name`` of a store's string arrays (sample_id, variant_id, variant_allele,
    contig_id, covariate_name) as a numpy ``str`` array of its shape (zarr returns numpy's
    variable-width string dtype, which cannot be cast to a fixed width)."""
    return np.array([str(v) for v in np.asarray(root[name][:]).ravel()]).reshape(
        root[name].shape)


def store_name(root) -> str:
    """The folder name of an open store, for messages."""
    where = getattr(root.store, "root", None)
    return Path(str(where)).name if where is not None else "store"


def decode_rows(x: np.ndarray, enc: dict, rows: np.ndarray, name: str, chunk_rows: int):
    """Check raw call_dosage values against the store's encoding and decode them.

    x: raw (len(rows), n_variants) values; enc: :func:`dosage_encoding`.
    Hard calls come back as int8 (-1 missing); fractional codes as float32 expected
    copies (code / scale), -1.0 where missing. A value outside the encoding (as an
    absent chunk's fill) raises CmixError naming the store rows of the first one.
    """
    lo, hi = enc["valid"]
    bad = ((x < lo) | (x > hi)) & (x != enc["missing"])
    if bad.any():
        bad_row, bad_col = np.argwhere(bad)[0]
        chunk = int(rows[bad_row]) // chunk_rows
        raise CmixError(f"{name}: call_dosage chunk {chunk}.0 (store row {rows[bad_row]}, "
                        f"variant {bad_col}) holds {int(x[bad_row, bad_col])}, outside "
                        f"{lo}..{hi} ({enc['kind']}, missing {enc['missing']}): the chunk is "
                        "missing or damaged; rebuild the store")
    if enc["kind"] == "hard calls":
        return np.asarray(x, dtype=np.int8)
    return fractional_copies(x, enc)



READ_CHUNKS = 64


def load_rows(root, rows: np.ndarray, name: str | None = None) -> np.ndarray:
    """Dosages of ``rows`` (sorted indices): (len(rows), n_variants). Only the Zarr
    chunks that hold a row are read, each run of consecutive ones (at most
    :data:`READ_CHUNKS`) as one slice whose chunks zarr fetches concurrently. int8 (-1
    missing) for a hard-call store, float32 expected copies (-1.0 missing) for a
    fractional one (:func:`decode_rows`).

    Raises CmixError when a chunk cannot be read or decoded (a store damaged or removed
    while in use) or holds a value outside the store's encoding (an absent chunk reads
    as its fill value, never a valid one), naming the store rows of the first bad value.
    """
    rows = np.asarray(rows, dtype=np.int64)
    enc = dosage_encoding(root)
    if len(rows) == 0:
        dtype = np.int8 if enc["kind"] == "hard calls" else np.float32
        return np.zeros((0, root["call_dosage"].shape[1]), dtype=dtype)
    name = name or store_name(root)
    try:
        call = root["call_dosage"]
        chunk_rows = int(call.chunks[0])
        touched = np.unique(rows // chunk_rows)
        runs = np.split(touched, np.flatnonzero(np.diff(touched) > 1) + 1)
        x = np.empty((len(rows), call.shape[1]), dtype=call.dtype)
        for run in runs:                          # consecutive chunks, READ_CHUNKS a read
            for chunks in np.split(run, range(READ_CHUNKS, len(run), READ_CHUNKS)):
                lo = int(chunks[0]) * chunk_rows
                hi = min((int(chunks[-1]) + 1) * chunk_rows, call.shape[0])
                pos = np.flatnonzero((rows >= lo) & (rows < hi))
                x[pos] = np.asarray(call[lo:hi])[rows[pos] - lo]
    except (OSError, RuntimeError, ValueError, KeyError, IndexError) as err:
        raise CmixError(f"{name}: cannot read call_dosage rows {rows[0]}-{rows[-1]} "
                        f"({type(err).__name__}: {err}); was the store changed or removed "
                        "while in use? Check it with `cmix verify`") from None
    return decode_rows(x, enc, rows, name, chunk_rows)


def column_moments(root, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Mean and standard deviation (float32, n_variants) of each column's dosage (expected
    copies for a fractional store) over ``rows``, missing calls left out; for the dosage encoding (training rows only)."""

    import dask.array as da     # imports scipy: only where moments are computed

    enc = dosage_encoding(root)
    x = dosage_dask(root)[np.asarray(rows, dtype=np.int64)]
    xf = da.where(x == enc["missing"], np.nan, x.astype(np.float32) / np.float32(enc["scale"]))
    valid = da.where(x == enc["missing"], enc["valid"][0], x)
    try:
        mean, sd, lo, hi = da.compute(da.nanmean(xf, axis=0), da.nanstd(xf, axis=0),
                                      valid.min(), valid.max())
    except (OSError, RuntimeError, ValueError, KeyError) as err:
        raise CmixError(f"{store_name(root)}: cannot read call_dosage ({type(err).__name__}: "
                        f"{err}); was the store changed or removed while in use? Check it "
                        "with `cmix verify`") from None
    if lo < enc["valid"][0] or hi > enc["valid"][1]:
        raise CmixError(f"{store_name(root)}: call_dosage holds values {int(lo)}..{int(hi)}, "
                        f"outside {enc['valid'][0]}..{enc['valid'][1]} ({enc['kind']}): a chunk "
                        "is missing or damaged; rebuild the store")
    mean = np.nan_to_num(np.asarray(mean, dtype=np.float32))
    sd = np.asarray(sd, dtype=np.float32)
    sd = np.where(np.isfinite(sd) & (sd > 1e-6), sd, 1.0).astype(np.float32)
    return mean, sd
