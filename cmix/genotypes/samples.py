"""UK Biobank sample filters: withdrawn participants and the sample QC table.

The sample QC table is either UK Biobank's ``ukb_sqc_v2.txt`` (no header, one row per
.fam line in .fam order, 68 whitespace-separated columns) or a tidy table with a header,
an ID column (``eid``, ``IID`` or ``iid``) and any of the named columns below, matched to
the .fam by IID (not by row order). Which one a file is, is decided by its first line
(:func:`sqc_is_headerless`). A tidy table applies the named columns it has and says
which; one with an ID column only removes the samples it does not list. Both the table
and the withdrawal list are optional: a filter whose input is not given is skipped, and
the summary (:func:`filters_summary`) records it as "not given". Filters, in order:

1. withdrawn participants (a file of IDs, one per line; matched to the .fam IID);
2. ``het.missing.outliers == 0`` (ukb_sqc_v2 column 19, 1-based);
3. ``putative.sex.chromosome.aneuploidy == 0`` (column 20);
4. ``excess.relatives == 0`` (column 23);
5. ``in.white.British.ancestry.subset == 1`` (column 24), unless switched off.

A sample absent from a tidy table is removed (its QC cannot be checked) and counted on
its own line. Counts only ever leave this module, never IDs.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pandas as pd

from ..atomic import atomic_outputs
from ..errors import CmixError
from ..logs import log
from ..readers.pgen import read_psam
from ..readers.plink import first_duplicate_lines, write_sample_ids
from ..text import data_line_numbers, first_line, input_file, read_id_list, read_table


# ukb_sqc_v2.txt columns (1-based) -> name, and the value a sample must have to stay.
SQC_FIELDS = {
    "het.missing.outliers": (19, 0),
    "putative.sex.chromosome.aneuploidy": (20, 0),
    "excess.relatives": (23, 0),
    "in.white.British.ancestry.subset": (24, 1),
}
ID_COLUMNS = ("eid", "IID", "iid", "#IID")
#: Values of a store's ``provenance.sample_filters`` entries.
FILTER_STATES = ("applied", "not given")
RELATEDNESS_ROUTES = ("kinship table", "KING from genotypes", "not applied")


def sqc_is_headerless(path, first: str, flags: bool = True) -> bool:
    """Whether a sample QC table whose first line is ``first`` is a headerless
    ukb_sqc_v2 (True) or a tidy table with a header (False), decided by content: a first
    line naming an ID column or a sample QC column is a header; one with at least 24
    fields, 0 or 1 in columns 19, 20, 23 and 24, is a ukb_sqc_v2 row. Anything else is
    a CmixError naming ``path`` and both layouts. ``flags=False`` (a reader of other
    columns, e.g. the PCs): any first line that is not a header is a ukb_sqc_v2 row."""
    fields = first.rstrip("\r\n").split("\t") if "\t" in first else (
        first.split(",") if "," in first else first.split())
    names = {f.strip().strip('"') for f in fields}
    if names & (set(ID_COLUMNS) | set(SQC_FIELDS)):
        return False
    if not flags:
        return True
    cols = [c for c, _ in SQC_FIELDS.values()]
    words = first.split()
    if len(words) >= max(cols) and all(words[c - 1] in ("0", "1") for c in cols):
        return True
    raise CmixError(f"{path}, line 1: neither a tidy sample QC table (a header naming an ID "
                    f"column, {' or '.join(ID_COLUMNS)}, and any of {', '.join(SQC_FIELDS)}) "
                    f"nor a headerless ukb_sqc_v2 row (at least {max(cols)} fields, 0 or 1 "
                    f"in columns {', '.join(map(str, cols))}); found {len(words)} field(s)")


def _flag_column(values: pd.Series, path: Path, column_label: str,
                 lines: np.ndarray) -> np.ndarray:
    """Parse a 0/1 column; raise naming the first bad line (``lines``: the file line of
    each row) and the column."""
    text = values.astype(str).str.strip()
    ok = text.isin(["0", "1"])
    if not ok.all():
        i = int(np.flatnonzero(~ok.to_numpy())[0])
        raise CmixError(f"{path}, line {lines[i]}, {column_label}: expected 0 or 1, "
                        f"found {text.iloc[i]!r}")
    return (text == "1").to_numpy()


def _read_rows(path: Path, sep: str | None, header: bool) -> tuple[pd.DataFrame, np.ndarray]:
    """A table of str cells and the file line of each row, every row checked to have
    the first line's number of fields. sep: "\t", "," or None (whitespace runs)."""
    first = first_line(path, "sample QC table")
    n_fields = len(first.split(sep) if sep else first.split())
    lines = data_line_numbers(path, n_fields, sep, "sample QC table", header=header)
    raw = read_table(path, "sample QC table", sep=sep or r"\s+", header=0 if header else None,
                     dtype=str, na_filter=False, engine="c")
    return raw, lines


def read_tidy_sample_qc(path: Path, first: str) -> tuple[pd.DataFrame, str, np.ndarray]:
    """A sample QC table with a header (``first``, its first line): (the table, str cells
    and column names with surrounding spaces removed; the name of its ID column, the
    first of :data:`ID_COLUMNS` it has; the file line of each row). Separated by tabs if
    the first line has one, else by commas if it has one, else by runs of spaces. Every
    row must have the header's number of fields; an ID listed twice (naming both lines),
    or no ID column, is a CmixError naming the file."""
    tidy, lines = _read_rows(path, "\t" if "\t" in first else ("," if "," in first else None),
                             header=True)
    tidy.columns = [str(c).strip() for c in tidy.columns]
    tidy = tidy.apply(lambda column: column.str.strip())
    id_col = next((c for c in ID_COLUMNS if c in tidy.columns), None)
    if id_col is None:
        raise CmixError(f"{path}: no sample ID column; expected one named "
                        f"{' or '.join(ID_COLUMNS)}")
    dup = first_duplicate_lines(tidy[id_col])
    if dup:
        raise CmixError(f"{path}: the same sample ID on lines {lines[dup[0] - 1]} and "
                        f"{lines[dup[1] - 1]}; each sample must appear once")
    return tidy, id_col, lines


def read_sample_qc(path: str | os.PathLike, fam: pd.DataFrame,
                   headerless: bool | None = None) -> pd.DataFrame:
    """Read a sample QC table aligned to ``fam``: bool columns named as SQC_FIELDS (all
    four for ukb_sqc_v2; those it has for a tidy table) plus ``in_table`` (False for .fam
    samples a tidy table does not list). One row per .fam row.

    headerless: True for ukb_sqc_v2.txt, False for a tidy table, None = detect by
    content (:func:`sqc_is_headerless`). Every row must have as many fields as the first
    line.
    """
    path = input_file(path, "sample QC table")
    first = first_line(path, "sample QC table")
    if not first.strip():
        raise CmixError(f"{path}: the file (or its first line) is empty; expected "
                        "ukb_sqc_v2.txt rows (no header, .fam order) or a header naming "
                        "het.missing.outliers and the other sample QC columns")
    if headerless is None:
        headerless = sqc_is_headerless(path, first)
    if headerless:
        raw, lines = _read_rows(path, None, header=False)
        need = max(c for c, _ in SQC_FIELDS.values())
        if raw.shape[1] < need:
            raise CmixError(f"{path}: headerless ukb_sqc_v2-style table needs at least {need} "
                            f"columns (UK Biobank's has 68), found {raw.shape[1]}")
        if len(raw) != len(fam):
            raise CmixError(f"{path}: {len(raw)} lines, but the .fam has {len(fam)} samples; "
                            "a headerless ukb_sqc_v2 table must have one line per .fam line, "
                            "in .fam order")
        out = pd.DataFrame({name: _flag_column(raw[col - 1], path, f"column {col} ({name})",
                                               lines)
                            for name, (col, _) in SQC_FIELDS.items()})
        out["in_table"] = True
        return out
    tidy, id_col, lines = read_tidy_sample_qc(path, first)
    present = [c for c in SQC_FIELDS if c in tidy.columns]
    flags = pd.DataFrame({name: _flag_column(tidy[name], path, f"column {name}", lines)
                          for name in present}, index=tidy[id_col].to_numpy())
    pos = pd.Index(tidy[id_col].to_numpy()).get_indexer(fam["iid"])
    out = pd.DataFrame({name: np.where(pos >= 0, flags[name].to_numpy()[pos], False)
                        for name in present}, index=pd.RangeIndex(len(fam)))
    if "in.white.British.ancestry.subset" in out:
        out["in.white.British.ancestry.subset"] &= pos >= 0
    out["in_table"] = pos >= 0
    return out


def read_withdrawn(path: str | os.PathLike) -> set[str]:
    """IDs of withdrawn participants: exactly one per line, blank lines skipped. A line
    with a second field or a comma (UK Biobank's ``eid,date`` CSV form) is an error
    naming the line, and so is a list with no ID at all (an empty or cut download):
    a misread list would withdraw nobody."""
    ids = set(read_id_list(path, "withdrawn participants list", one_field=True))
    if not ids:
        raise CmixError(f"{path}: no participant ID in the withdrawn participants list (the "
                        "file is empty or blank); expected one eid per line. With no "
                        "withdrawals, leave the list out")
    return ids


def check_withdrawn(withdrawn: set[str], fam: pd.DataFrame, path) -> int:
    """The number of the list's IDs that are .fam IIDs; a list of which none is a .fam
    IID is an error (a list of other IDs, or of IDs in another column)."""
    n_match = len(withdrawn & set(fam["iid"].astype(str)))
    if n_match == 0:
        raise CmixError(f"{path}: none of its {len(withdrawn)} withdrawn participant IDs is "
                        "an IID of the .fam; expected the participant IDs (eids) of this "
                        "dataset, one per line")
    return n_match


def sample_filters(fam: pd.DataFrame, sqc: pd.DataFrame | None = None,
                   withdrawn: set[str] | None = None, ancestry: bool = True
                   ) -> tuple[np.ndarray, pd.DataFrame]:
    """Apply the filters in order; None skips a filter, and a sample QC column absent
    from ``sqc`` is not applied. Returns (kept indices into fam (sorted), filters table
    with columns filter, n_removed, n_remaining; the first row is the .fam itself)."""
    keep = np.ones(len(fam), bool)
    rows = [("fam", 0, len(fam))]

    def apply(name: str, remove: np.ndarray) -> None:
        removed = keep & remove
        keep[removed] = False
        rows.append((name, int(removed.sum()), int(keep.sum())))

    if withdrawn is not None:
        apply("withdrawn", fam["iid"].isin(withdrawn).to_numpy())
    if sqc is not None:
        if not sqc["in_table"].all():
            apply("not_in_sample_qc_table", ~sqc["in_table"].to_numpy())
        for name, (_, want) in SQC_FIELDS.items():
            if name not in sqc or (name == "in.white.British.ancestry.subset"
                                   and not ancestry):
                continue
            apply(name, sqc[name].to_numpy() != bool(want))
    return np.flatnonzero(keep), pd.DataFrame(rows, columns=["filter", "n_removed", "n_remaining"])


def filters_summary(sqc: pd.DataFrame | None, withdrawn: set[str] | None,
                    ancestry: bool = True) -> dict:
    """Which sample filters ran: ``sample_qc`` and ``withdrawn`` each "applied" or "not
    given", and ``sample_qc_columns``, the sample QC columns applied (a store's
    ``provenance.sample_filters`` without its ``relatedness`` entry)."""
    columns = [] if sqc is None else [
        c for c in SQC_FIELDS if c in sqc
        and (ancestry or c != "in.white.British.ancestry.subset")]
    return {"sample_qc": "not given" if sqc is None else "applied",
            "withdrawn": "not given" if withdrawn is None else "applied",
            "sample_qc_columns": columns}


def read_filters_summary(path, relatedness: str) -> dict:
    """``O.filters.json`` of :func:`run_samples` with the relatedness route added: the
    store's ``provenance.sample_filters``. Checks the values."""
    path = input_file(path, "sample filters summary (cmix samples' OUT.filters.json)")
    try:
        summary = json.loads(path.read_text())
    except json.JSONDecodeError as err:
        raise CmixError(f"{path}: not valid JSON (line {err.lineno}: {err.msg})") from None
    for key in ("sample_qc", "withdrawn"):
        if not isinstance(summary, dict) or summary.get(key) not in FILTER_STATES:
            raise CmixError(f"{path}: expected {key!r}: one of {', '.join(FILTER_STATES)} "
                            "(written by cmix samples)")
    if relatedness not in RELATEDNESS_ROUTES:
        raise CmixError(f"relatedness route {relatedness!r}: expected one of "
                        f"{', '.join(RELATEDNESS_ROUTES)}")
    return {**summary, "relatedness": relatedness}


def run_samples(fam_path, out_prefix, sqc_path=None, withdrawn_path=None,
                headerless: bool | None = None, ancestry: bool = True) -> pd.DataFrame:
    """Read inputs, filter, write ``O.keep`` (#FID IID), ``O.filters.tsv`` and
    ``O.filters.json`` (:func:`filters_summary`) together. A filter whose input is None
    is skipped and logged."""
    fam = read_psam(fam_path)        # a .fam, or a PLINK 2 .psam (with its # header)
    sqc = read_sample_qc(sqc_path, fam, headerless) if sqc_path else None
    withdrawn = read_withdrawn(withdrawn_path) if withdrawn_path else None
    if sqc is None:
        log("samples: no sample QC table given: its filters are not applied")
    else:
        applied = filters_summary(sqc, withdrawn, ancestry)["sample_qc_columns"]
        absent = [c for c in SQC_FIELDS if c not in sqc]
        log(f"samples: sample QC columns applied: {', '.join(applied) or 'none'}"
            + (f"; not in the table, so not applied: {', '.join(absent)}" if absent else ""))
    if withdrawn is None:
        log("samples: no withdrawal list given: nobody removed as withdrawn")
    else:
        n_match = check_withdrawn(withdrawn, fam, withdrawn_path)
        log(f"samples: withdrawn list: {n_match} of its {len(withdrawn)} IDs are in the .fam")
    idx, table = sample_filters(fam, sqc, withdrawn, ancestry)
    if len(idx) == 0:
        raise CmixError("no samples remain after the sample filters "
                        f"({'; '.join(f'{r.filter}: -{r.n_removed}' for r in table.itertuples())})")
    out_prefix = Path(out_prefix)
    keep_path = out_prefix.with_name(out_prefix.name + ".keep")
    table_path = out_prefix.with_name(out_prefix.name + ".filters.tsv")
    json_path = out_prefix.with_name(out_prefix.name + ".filters.json")
    with atomic_outputs(keep_path, table_path, json_path) as (tmp_keep, tmp_table, tmp_json):
        write_sample_ids(tmp_keep, fam, idx)
        table.to_csv(tmp_table, sep="\t", index=False)
        tmp_json.write_text(json.dumps(filters_summary(sqc, withdrawn, ancestry), indent=1)
                            + "\n")
    for r in table.itertuples():
        log(f"samples: {r.filter}: removed {r.n_removed}, {r.n_remaining} remain")
    return table
