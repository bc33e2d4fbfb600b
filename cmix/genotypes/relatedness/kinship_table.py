"""Kinship tables: UK Biobank's ``ukb_rel.dat`` (``ID1 ID2 HetHet IBS0 Kinship``) or a
``plink2 --make-king-table`` ``.kin0`` file (:func:`read_kinship_table`), and their pairs
matched to the .fam (:func:`match_kinship_pairs`)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ...errors import CmixError
from ...readers import plink
from ...text import check_unique_header, data_line_numbers, first_line, input_file, read_table


_ID_COLUMNS = {  # normalised header name -> role
    "ID1": "iid1", "IID1": "iid1", "ID2": "iid2", "IID2": "iid2",
    "FID1": "fid1", "FID2": "fid2", "KINSHIP": "kinship", "NSNP": "nsnp",
    "HETHET": "hethet", "IBS0": "ibs0",
}


def read_kinship_table(path) -> pd.DataFrame:
    """Read a kinship table: UKB ``ukb_rel.dat`` or plink2 ``.kin0`` (whitespace separated).

    Columns are found by header name (case-insensitive, leading ``#`` ignored):
    ``ID1 ID2 ... Kinship`` (UK Biobank: IDs are eids, matched to the .fam IID) or
    ``FID1 IID1 FID2 IID2 ... KINSHIP`` (plink2; ``IID1 IID2`` alone when there is no
    FID). A kinship of ``nan`` (plink2 writes it for a pair with no variant called in
    both, or no heterozygous call) is read as NaN: no estimate. Returns a DataFrame with
    columns key1, key2 (str: ``FID<TAB>IID`` when the
    table has FIDs, else IID), kinship (float64) and hethet/ibs0/nsnp when present;
    ``df.attrs["has_fid"]`` says which key form was used.
    """
    path = input_file(path, "kinship table")
    header = first_line(path, "kinship table").split()
    if not header:
        raise CmixError(f"{path}, line 1: empty file; expected a header such as "
                        "'ID1 ID2 HetHet IBS0 Kinship' or plink2's '#FID1 IID1 FID2 IID2 "
                        "NSNP HETHET IBS0 KINSHIP'")
    roles = _kinship_columns(path, header)
    has_fid = "fid1" in roles          # with fid2: checked by _kinship_columns
    lines = data_line_numbers(path, len(header), None, "kinship table")
    raw = read_table(path, "kinship table, whitespace-separated",
                     empty=pd.DataFrame({c: pd.Series(dtype=str) for c in range(len(header))}),
                     sep=r"\s+", header=None, skiprows=1, names=range(len(header)), dtype=str,
                     na_filter=False, engine="c", comment=None)
    out = pd.DataFrame(index=raw.index)
    if has_fid:
        out["key1"] = raw[roles["fid1"]] + "\t" + raw[roles["iid1"]]
        out["key2"] = raw[roles["fid2"]] + "\t" + raw[roles["iid2"]]
    else:
        out["key1"] = raw[roles["iid1"]]
        out["key2"] = raw[roles["iid2"]]
    _check_pairs_once(out["key1"], out["key2"], path, lines)
    for role in ("kinship", "hethet", "ibs0", "nsnp"):
        if role not in roles:
            continue
        values = pd.to_numeric(raw[roles[role]], errors="coerce")
        bad = values.isna() & (raw[roles[role]].str.lower() != "nan")
        if role == "kinship" and bad.any():
            i = int(np.flatnonzero(bad.to_numpy())[0])
            raise CmixError(f"{path}, line {lines[i]}, column {roles[role] + 1} "
                            f"({header[roles[role]]}): expected a number (or nan), found "
                            f"{raw[roles[role]].iloc[i]!r}")
        out[role] = values.astype(np.float64)
    out.attrs["has_fid"] = has_fid
    return out


def _check_pairs_once(key1: pd.Series, key2: pd.Series, path, lines: np.ndarray) -> None:
    """CmixError naming the line(s) of a kinship table's first row that pairs a sample
    with itself, or that repeats an earlier row's pair (in either order): each pair is
    one relationship, and a repeat would be counted twice in the summary."""
    same = (key1 == key2).to_numpy()
    if same.any():
        raise CmixError(f"{path}, line {lines[int(np.flatnonzero(same)[0])]}: a sample paired "
                        "with itself; a kinship table lists pairs of two samples")
    low = np.where(key1 <= key2, key1, key2)
    high = np.where(key1 <= key2, key2, key1)
    dup = plink.first_duplicate_lines(pd.Series(low + "\n" + high))
    if dup:
        raise CmixError(f"{path}: the same pair of samples on lines {lines[dup[0] - 1]} and "
                        f"{lines[dup[1] - 1]}; a kinship table lists each pair once")


def _kinship_columns(path, header: list[str]) -> dict[str, int]:
    """{role: column index} of a kinship table's header (roles of :data:`_ID_COLUMNS`,
    names case-insensitive, leading ``#`` ignored, the first column of a role wins).
    CmixError naming ``path``, line 1, when ID1/ID2/Kinship is missing or only one of
    FID1 and FID2 is there."""
    names = [h.lstrip("#").upper() for h in header]
    check_unique_header(names, path, "kinship table")
    roles = {}
    for col, name in enumerate(names):
        role = _ID_COLUMNS.get(name)
        if role and role not in roles:
            roles[role] = col
    missing = [r for r in ("iid1", "iid2", "kinship") if r not in roles]
    if missing or (("fid1" in roles) != ("fid2" in roles)):
        # line 1 is not quoted: in a table without a header it holds two participant IDs
        shown = {"iid1": "ID1 (or IID1)", "iid2": "ID2 (or IID2)", "kinship": "Kinship"}
        lacks = (f"no column named {', '.join(shown[r] for r in missing)}" if missing
                 else "only one of FID1 and FID2")
        raise CmixError(f"{path}, line 1: not a kinship table header ({lacks}); expected "
                        "the header 'ID1 ID2 HetHet IBS0 Kinship' (UK Biobank ukb_rel.dat) "
                        "or '#FID1 IID1 FID2 IID2 NSNP HETHET IBS0 KINSHIP' (plink2 "
                        "--make-king-table); add it if the file has none")
    return roles


def match_kinship_pairs(table: pd.DataFrame, fam: pd.DataFrame) -> tuple[pd.DataFrame, int]:
    """Map a kinship table's pairs onto .fam positions.

    Returns (pairs, n_unknown): pairs has columns idx1, idx2 (int64 positions in ``fam``)
    plus the table's value columns, for the rows whose two IDs are both in ``fam``;
    n_unknown counts rows naming an ID that is not.
    """
    if table.attrs.get("has_fid"):
        keys = fam["fid"] + "\t" + fam["iid"]
    else:
        keys = fam["iid"]
        if keys.duplicated().any():
            raise CmixError("the kinship table identifies samples by IID only, but the "
                            f"sample list has {int(keys.duplicated().sum())} repeated IIDs "
                            "(different FIDs); use a table with FID columns")
    index = pd.Index(keys.to_numpy())
    p1 = index.get_indexer(table["key1"].to_numpy())
    p2 = index.get_indexer(table["key2"].to_numpy())
    known = (p1 >= 0) & (p2 >= 0)
    pairs = table.loc[known].drop(columns=["key1", "key2"]).reset_index(drop=True)
    pairs.insert(0, "idx1", p1[known].astype(np.int64))
    pairs.insert(1, "idx2", p2[known].astype(np.int64))
    return pairs, int((~known).sum())
