"""Which samples and variants a step uses, read and matched the same way by every step.

- Samples: plink ``--keep`` / ``--remove`` lists (``#FID IID``, FID IID or IID lines),
  matched to the .fam by (FID, IID); IDs the .fam lacks are counted and reported, as
  plink2 ignores them.
- Variants: ``--extract`` lists (the first field of each line, e.g. a ``.snplist``).
"""

from __future__ import annotations

import os

import numpy as np
import pandas as pd

from ..errors import CmixError
from ..logs import log
from ..readers.usable import refuse_excluded
from ..text import input_file, read_id_list, text_lines


# ----------------------------------------------------------------------------- samples
def read_sample_ids(path: str | os.PathLike) -> pd.DataFrame:
    """Read a plink-style sample ID list (--keep/--remove): columns fid, iid.

    Accepts an optional ``#FID IID`` / ``#IID`` header, two columns (FID IID) or one
    (IID), whitespace separated; extra columns are ignored. A one-column row's fid is
    None: it names the sample with that IID and no family ID (:func:`match_samples`).
    """
    path = input_file(path, "sample ID list")
    rows = []
    two_columns = None
    for lineno, line in text_lines(path, "sample ID list"):
        fields = line.split()
        if not fields:
            continue
        if lineno == 1 and fields[0].startswith("#"):
            two_columns = fields[0].lstrip("#").upper() == "FID"
            continue
        if two_columns is None:
            two_columns = len(fields) >= 2
        if two_columns and len(fields) < 2:
            raise CmixError(f"{path}, line {lineno}: expected FID and IID, found one column")
        rows.append((fields[0], fields[1]) if two_columns else (None, fields[0]))
    return pd.DataFrame(rows, columns=["fid", "iid"], dtype=object)


def listed_rows(ids: pd.DataFrame, fam: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """Which ``fam`` samples an ID list (:func:`read_sample_ids`) names: (rows, known):
    sorted unique int64 .fam positions, and bool (len(ids),) whether each ID names one.
    A two-column ID names the sample with that FID and IID; a one-column one (fid None)
    the sample with that IID whose FID is 0 (plink2's reading, and how plink2 writes a
    sample without a family ID) or the IID itself (UK Biobank's .fam, ``eid eid``); never
    a sample of another family."""
    key = pd.Index(fam["fid"].astype(str) + "\t" + fam["iid"].astype(str))
    fid, iid = ids["fid"].to_numpy(object), ids["iid"].to_numpy(object).astype(str)
    no_fid = pd.isna(fid)
    first = key.get_indexer(np.where(no_fid, "0", fid.astype(str)) + "\t" + iid)
    second = np.where(no_fid, key.get_indexer(iid + "\t" + iid), -1)
    found = np.concatenate([first, second])
    return np.unique(found[found >= 0]).astype(np.int64), (first >= 0) | (second >= 0)


def match_samples(ids: pd.DataFrame, fam: pd.DataFrame, path=None) -> tuple[np.ndarray, int]:
    """Indices into ``fam`` (sorted, .fam order) of the samples listed in ``ids``
    (:func:`listed_rows`).

    Returns (indices, n_unknown). IDs not in the .fam are counted, as plink2 ignores
    them; an empty ID list, or one that matches no sample at all, is an error.
    """
    if len(ids) == 0:
        raise CmixError(f"{path or 'sample list'}: no sample IDs in the file (expected lines "
                        "of FID IID, or IID)")
    idx, known = listed_rows(ids, fam)
    if len(idx) == 0:
        raise CmixError(f"{path or 'sample list'}: none of its {len(ids)} IDs is in the .fam "
                        "(check the FID/IID columns)")
    return idx, int((~known).sum())


def sample_rows(fam: pd.DataFrame, keep=None, remove=None, *, step: str,
                keep_flag: str = "--keep") -> tuple[np.ndarray, int]:
    """The samples a step uses: sorted int64 .fam positions of those in the ``keep``
    list (all when None) and not in the ``remove`` list, and the number of ``keep``
    IDs the .fam lacks.

    IDs not in the .fam are ignored, as plink2 does, and reported on stderr as
    "``step``: warning: N of M IDs in FILE are not in the .fam and were ignored". A
    ``keep`` list without IDs, or matching no sample, is a CmixError; a ``remove`` list
    matching no sample removes nobody. ``keep_flag`` names the keep list's flag in
    messages (e.g. --project).
    """
    chosen = np.ones(len(fam), bool)
    n_keep_unknown = 0
    for path, is_keep in ((keep, True), (remove, False)):
        if path is None:
            continue
        ids = read_sample_ids(path)
        if is_keep and len(ids) == 0:
            raise CmixError(f"{path}: no sample IDs in the {keep_flag} file (expected lines "
                            "of FID IID, or IID)")
        try:
            idx, n_unknown = match_samples(ids, fam, path)
        except CmixError:
            if is_keep:
                raise
            idx, n_unknown = np.zeros(0, np.int64), len(ids)
        if n_unknown:
            log(f"{step}: warning: {n_unknown} of {len(ids)} IDs in {path} are not in the "
                ".fam and were ignored (as plink2 does)")
        if is_keep:
            n_keep_unknown = n_unknown
        listed = np.zeros(len(fam), bool)
        listed[idx] = True
        chosen &= listed if is_keep else ~listed
    rows = np.flatnonzero(chosen).astype(np.int64)
    if len(rows) == 0:
        raise CmixError(f"no samples left after {keep_flag}/--remove")
    return rows, n_keep_unknown


# ---------------------------------------------------------------------------- variants
def read_variant_ids(path: str | os.PathLike, flag: str = "--extract") -> list[str]:
    """The variant IDs of an ``--extract`` list (e.g. a QC ``.snplist``): the first
    whitespace field of each non-empty line, in file order (gzip, a BOM and CRLF line
    ends handled). A file without IDs is a CmixError."""
    ids = read_id_list(path, f"variant ID list for {flag}")
    if not ids:
        raise CmixError(f"{path}: no variant IDs in the {flag} file")
    return ids


def extract_mask(variant_id, path, where, flag: str = "--extract",
                 excluded=None) -> tuple[np.ndarray, int]:
    """(bool (n,), n_unknown): True for the variants of ``variant_id`` (a .bim column)
    listed in the ``flag`` file ``path``, and the number of its IDs not among them. A
    list none of whose IDs is a variant is a CmixError naming ``where`` (the .bim); so
    is one that names a variant the source left out (``excluded``, the source's table:
    :func:`cmix.readers.usable.refuse_excluded`)."""
    ids = read_variant_ids(path, flag)
    listed = pd.Index(ids).unique()
    found = listed.isin(pd.Index(np.asarray(variant_id, dtype=object)))
    refuse_excluded(excluded, f"{path} ({flag})", ids=listed[~found])
    if not found.any():
        raise CmixError(f"{path}: none of its {len(ids)} variant IDs is in {where}")
    mask = pd.Index(np.asarray(variant_id, dtype=object)).isin(listed)
    return np.asarray(mask, bool), int((~found).sum())
