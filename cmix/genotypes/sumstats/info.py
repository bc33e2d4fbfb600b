"""The imputation-INFO filter of ``cmix select --min-info``: from the imputation mfi
files, or else the summary statistics' INFO column (:func:`sumstats_info`)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ...errors import CmixError
from ...readers.bgen import info_scores
from ...readers.sources import expand, is_pattern
from ...text import input_file
from .read import read_columns, read_header


def sumstats_info(path, column: str = "INFO") -> np.ndarray:
    """The INFO column of a summary-statistics file, float64 per data row (NaN where
    missing). Raises CmixError when the file has no such column."""
    path = input_file(path, "summary statistics")
    header, sep, header_line = read_header(path)
    names = {h.upper(): h for h in header}
    if column.upper() not in names:
        raise CmixError(f"{path}: no {column} column for --min-info (header has "
                        f"{' '.join(header)}); give the imputation mfi files (--mfi) instead")
    name = names[column.upper()]
    raw, lines = read_columns(path, header, sep, {"info": name}, header_line)
    text = raw[name].str.strip()
    info = pd.to_numeric(text, errors="coerce")
    # NA, ".", or an empty cell is a missing INFO (the row fails --min-info); other text
    # ("0,9") is a misread file, not a low score
    bad = info.isna() & ~text.str.upper().isin(["NA", "NAN", ".", ""])
    if bad.any():
        i = int(np.flatnonzero(bad.to_numpy())[0])
        raise CmixError(f"{path}, line {lines[i]}, column {name}: expected an INFO score, "
                        f"found {text.iloc[i]!r}")
    return info.to_numpy(np.float64)


def info_filter(sumstats_path, sumstats: pd.DataFrame, qc: set | None, bf, min_info: float,
                mfi, chroms) -> tuple[set | None, pd.DataFrame, tuple]:
    """Apply ``cmix select --min-info``: with mfi files (``mfi``: a path or a ``{chrom}``
    pattern over ``chroms``), narrow the QC-passed IDs ``qc`` to the genotype files'
    variants with INFO >= min_info; else (``mfi`` None) drop the sumstats rows whose
    INFO column is below it. Returns (qc, sumstats, (step, n removed, n remaining))."""
    if mfi is not None:
        info = info_scores(bf.bim, [p for _, p in expand(mfi, chroms)]
                           if is_pattern(mfi) else [mfi])
        passing = set(bf.bim["variant_id"][info >= min_info])
        qc = passing if qc is None else qc & passing
        return qc, sumstats, (f"INFO < {min_info} or not in the mfi files (variants of the "
                              "genotype files)", int((~(info >= min_info)).sum()), len(passing))
    info = sumstats_info(sumstats_path)
    n0 = len(sumstats)
    sumstats = sumstats[info[sumstats.index.to_numpy()] >= min_info]
    return qc, sumstats, (f"INFO < {min_info} or missing (sumstats INFO column)",
                          n0 - len(sumstats),
                          len(sumstats))
