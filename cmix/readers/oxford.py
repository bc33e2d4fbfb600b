"""Oxford .sample files (the sample table of a BGEN), read as plink2 reads them, and the
matching of a target sample table to a BGEN's samples.

A .sample starts with a header line; its first column is the sample ID whatever the
header calls it (``ID_1``, ``ID``, ``id``, as QCTOOL and the BGEN project write it),
and when the second header field is ``ID_2`` the first two columns are the (ID_1,
ID_2) pair, read as (FID, IID). A one-ID file reads as plink2 reads it: IID = the ID,
FID 0. The second line may be the column types line (``0 0 0 D ...``: every field one
of the type codes 0 D C P B, the first 0), which plink2 requires and cmix skips when it
is there. A BGEN may also embed its sample IDs (:func:`embedded_samples`).
"""

from __future__ import annotations

import os

import numpy as np
import pandas as pd

from ..errors import CmixError
from ..text import input_file, read_table, text_lines
from .plink import FAM_COLUMNS

#: the column type codes of a .sample's second line
TYPE_CODES = {"0", "D", "C", "P", "B"}


def read_sample_file(path: str | os.PathLike) -> pd.DataFrame:
    """A BGEN .sample file as .fam columns (fid, iid; father, mother, sex, phenotype
    unknown), in file order (see the module docstring for the layouts read).
    ``attrs["first_line"]``: the line of the first sample (2, or 3 after a types line)."""
    path = input_file(path, "BGEN .sample file")
    lines = text_lines(path, "BGEN .sample file")
    head = next(lines, (1, ""))[1].split()
    second = next(lines, (2, ""))[1].split()
    if not head:
        raise CmixError(f"{path}, line 1: expected a .sample header (e.g. `ID_1 ID_2 "
                        "missing` or `ID`), found an empty line or file")
    pair = len(head) > 1 and head[1] == "ID_2"
    n_ids = 2 if pair else 1
    has_types = bool(second) and second[0] == "0" and set(second) <= TYPE_CODES
    skip = 2 if has_types else 1
    names = ["fid", "iid"] if pair else ["iid"]
    raw = read_table(path, "BGEN .sample file",
                     empty=pd.DataFrame({c: pd.Series(dtype=str) for c in names}),
                     sep=r"\s+", header=None, skiprows=skip, usecols=list(range(n_ids)),
                     dtype=str, names=names, na_filter=False, engine="c")
    if pair and len(raw) and (raw["iid"] == "").any():
        i = int(np.flatnonzero((raw["iid"] == "").to_numpy())[0])
        raise CmixError(f"{path}, line {i + skip + 1}: one ID, but the header names two "
                        "(ID_1 ID_2)")
    if not pair:
        raw.insert(0, "fid", "0")
    fam = raw.assign(father="0", mother="0", sex="0", phenotype="-9")[FAM_COLUMNS]
    fam.attrs["first_line"] = skip + 1
    return fam


def embedded_samples(ids) -> pd.DataFrame:
    """The sample IDs a BGEN embeds as .fam columns, as plink2 reads them without a
    .sample: IID = the ID, FID 0."""
    ids = [str(i) for i in ids]
    fam = pd.DataFrame({"fid": "0", "iid": pd.Series(ids, dtype=object), "father": "0",
                        "mother": "0", "sex": "0", "phenotype": "-9"})[FAM_COLUMNS]
    fam.attrs["first_line"] = None
    return fam


def match_sample_file(fam: pd.DataFrame, sample: pd.DataFrame, path) -> np.ndarray:
    """Row of ``sample`` (.sample file order) for each ``fam`` row: int64, -1 where the
    sample is not in the .sample file. Raises CmixError when no sample matches, or when
    the .sample lists a sample twice. ``path``: the .sample (or the .bgen whose
    embedded IDs ``sample`` holds), for messages.

    Matched by (ID_1, ID_2) = (FID, IID), or by ID_2 = IID alone when every ID_1 is 0
    (as plink2 writes it, and for one-ID files), or, where no IID matches, by the one
    ID = FID_IID (as plink2 writes a sample-v2 file of samples with family IDs)."""
    by_iid = (sample["fid"] == "0").all()
    key_s = sample["iid"] if by_iid else sample["fid"] + "\t" + sample["iid"]
    key_f = fam["iid"] if by_iid else fam["fid"] + "\t" + fam["iid"]
    if key_s.duplicated().any():
        i = int(np.flatnonzero(key_s.duplicated().to_numpy())[0])
        first = sample.attrs.get("first_line")
        where = f"{path}, line {i + first}" if first else f"{path}, sample {i + 1}"
        raise CmixError(f"{where}: a sample ID listed twice")
    rows = pd.Index(key_s).get_indexer(key_f)
    if by_iid and len(fam) and (rows < 0).all():
        # one ID per sample that plink2 wrote as FID_IID (sample-v2, or ID_2 so written)
        rows = pd.Index(key_s).get_indexer(fam["fid"] + "_" + fam["iid"])
    if len(fam) and (rows < 0).all():
        where = ("this .sample file" if sample.attrs.get("first_line")
                 else "the sample IDs this .bgen embeds")
        raise CmixError(
            f"{path}: none of the {len(fam)} samples of the .fam is in {where} "
            f"({len(sample)} samples; matched by "
            f"{'ID_2 = IID' if by_iid else 'ID_1 ID_2 = FID IID'}): the BGEN's samples "
            "are not these genotype calls' (another application's IDs, or the ID columns "
            "swapped?)")
    return rows.astype(np.int64)


def check_embedded_ids(path, embedded, samples: pd.DataFrame, sample_path) -> None:
    """Compare the sample IDs a .bgen embeds (None: it embeds none) with its .sample
    rows, in order. An embedded ID may be the .sample's ID_2, its ID_1, or
    ``ID_1_ID_2`` (plink2 --export bgen-1.2 with family IDs). Raises CmixError naming
    the first .sample line that differs and the .bgen (no IDs in the message)."""
    if embedded is None:
        return
    got = np.asarray(embedded, dtype=object)
    fid, iid = samples["fid"].to_numpy(object), samples["iid"].to_numpy(object)
    candidates = [iid, fid, fid + "_" + iid]
    if any((got == c).all() for c in candidates):
        return
    # the ID form that shares the most IDs with the embedded ones (as sets: in another
    # order no position may match)
    best = max(candidates, key=lambda c: (len(set(got) & set(c)), int((got == c).sum())))
    i = int(np.flatnonzero(got != best)[0])
    same_set = set(got) == set(best)
    line = i + (samples.attrs.get("first_line") or 3)
    raise CmixError(f"{sample_path}, line {line}: not the sample {path} holds at position "
                    f"{i + 1} (the .bgen embeds its sample IDs; "
                    + ("the .sample lists the same samples in another order" if same_set
                       else f"{int((got != best).sum())} of {len(got)} differ")
                    + "): the dosages would go to other people; use the .sample written "
                    f"with this .bgen, or give none (--sample left out) to use the IDs "
                    f"{path} embeds")
