"""Reading GWAS summary statistics (:func:`read_sumstats`) and their p-values as text.

Plain or gzipped text, tab- or whitespace-separated (a UTF-8 byte-order mark is
ignored). The layout is recognised from the header alone
(:mod:`cmix.genotypes.sumstats.layouts`); the layout and the columns used are logged.
Every row must have the header's number of fields (a row with a field too many or
too few is an error: its columns would shift), and a beta must be a finite number
or missing text (``NA``, ``nan``, empty). p-values are parsed as log10 from their
text (mantissa and exponent split apart), so ``1.2E-400`` is log10 p = -399.92 and
``0`` is -inf; -log10 p columns (regenie's LOG10P, plink2's LOG10_P, GWAS-SSF's
neg_log_10_p_value) are read as numbers: no value underflows. p-value text is
written back from log10 p where a file gave -log10 p (:func:`with_p_text`).
"""

from __future__ import annotations

import csv
import os
import re

import numpy as np
import pandas as pd

from ...errors import CmixError
from ...logs import log
from ...readers.chroms import chrom_code
from ...text import data_line_numbers, input_file, is_gzip, open_maybe_gzip
from .layouts import LAYOUTS, describe_columns, resolve_columns


_MISSING_TEXT = {"", "NA", "#NA", "NAN", "NONE", ".", "NULL"}   # #NA: GWAS-SSF
_NUMBER = re.compile(r"^\s*\+?(\d+\.?\d*|\.\d+)(?:[eE]([+-]?\d+))?\s*$")


def map_unique(values, func) -> np.ndarray:
    """Apply a str -> str function to each distinct value only (alleles and chromosome
    names repeat millions of times): object array (n,)."""
    codes, uniques = pd.factorize(pd.Series(np.asarray(values, dtype=object)).astype(str))
    mapped = np.array([func(u) for u in uniques] + [""], dtype=object)
    return mapped[codes]


def parse_log10_p(text, path="", column="p", lines=None) -> np.ndarray:
    """log10 of p-values given as text: float64 (n,), -inf for p = 0, NaN for missing.

    The mantissa and exponent are split from the text, so values far below the smallest
    double (``"1.2E-400"``) keep their order. Text that is not a number, and numbers
    outside [0, 1], raise :class:`CmixError` naming the file, line and column.
    """
    text = pd.Series(np.asarray(text, dtype=object)).astype(str).str.strip()
    fast = pd.to_numeric(text, errors="coerce").to_numpy(dtype=float)
    easy = np.isfinite(fast) & (fast >= 1e-300) & (fast <= 1.0)
    if easy.all():   # no underflow, text or missing: plain floats are exact enough
        return np.log10(fast)
    out = np.empty(len(text))
    out[easy] = np.log10(fast[easy])
    hard = np.flatnonzero(~easy)
    out[hard] = _parse_log10_p_text(text.iloc[hard].reset_index(drop=True), path, column,
                                    (np.arange(1, len(text) + 1) if lines is None
                                     else np.asarray(lines))[hard])
    return out


def _parse_log10_p_text(text: pd.Series, path, column, lines) -> np.ndarray:
    """The slow path of :func:`parse_log10_p`: split mantissa and exponent by regex."""
    missing = text.str.upper().isin(_MISSING_TEXT).to_numpy()
    parts = text.str.extract(_NUMBER)
    bad = parts[0].isna().to_numpy() & ~missing
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        line = lines[i] if lines is not None else i + 1
        raise CmixError(f"{path}, line {line}, column {column}: expected a p-value (a number "
                        f"between 0 and 1), found {text.iloc[i]!r}")
    mantissa = pd.to_numeric(parts[0], errors="coerce").to_numpy(dtype=float)
    exponent = pd.to_numeric(parts[1], errors="coerce").fillna(0).to_numpy(dtype=float)
    with np.errstate(divide="ignore"):
        log10_p = np.log10(mantissa) + exponent
    log10_p[missing] = np.nan
    above = log10_p > 1e-12
    if above.any():
        i = int(np.flatnonzero(above)[0])
        line = lines[i] if lines is not None else i + 1
        raise CmixError(f"{path}, line {line}, column {column}: p-value {text.iloc[i]!r} is "
                        "above 1")
    return np.minimum(log10_p, 0.0)


def read_header(path) -> tuple[list[str], str, int]:
    """(header names, pandas separator, the header's 1-based line number) of a
    summary-statistics file: the header is its first line that is not blank (blank
    lines above it are skipped); a UTF-8 byte-order mark before the first name is
    dropped."""
    text, lineno = "", 0
    try:
        with open_maybe_gzip(path) as fh:
            for lineno, text in enumerate(fh, 1):
                text = text.lstrip("\ufeff")
                if text.strip():
                    break
    except (OSError, EOFError, UnicodeDecodeError) as err:
        raise CmixError(f"{path}: cannot read ({err})") from None
    if not text.strip():
        raise CmixError(f"{path}: empty file (expected a header line)" if lineno == 0 else
                        f"{path}: no header line (its {lineno} lines are blank)")
    if "\t" in text:
        return [h.strip() for h in text.strip("\r\n").split("\t")], "\t", lineno
    return text.split(), r"\s+", lineno


def _numbers(text: pd.Series, path, column, lines, what: str) -> np.ndarray:
    """float64 (n,) of number text, NaN for missing text (NA, ., empty); other text raises
    :class:`CmixError` naming the line and column."""
    values = pd.to_numeric(text, errors="coerce").to_numpy(dtype=float, copy=True)
    nan = np.flatnonzero(np.isnan(values))     # text only where it is not a number
    if len(nan):
        rest = text.iloc[nan].str.strip()
        bad = np.flatnonzero(~rest.str.upper().isin(_MISSING_TEXT).to_numpy())
        if len(bad):
            i = nan[bad[0]]
            raise CmixError(f"{path}, line {lines[i]}, column {column}: expected {what}, "
                            f"found {rest.iloc[bad[0]]!r}")
    return values


def _p_text(log10_p: np.ndarray) -> np.ndarray:
    """p-value text from log10 p (object (n,)): 6 significant digits, mantissa and
    exponent written apart below 1e-300 so nothing underflows; "0" for -inf, "NA" NaN.
    A Python loop: used on the selected rows only."""
    log10_p = np.asarray(log10_p, dtype=float)
    out = np.full(len(log10_p), "NA", dtype=object)
    out[log10_p == -np.inf] = "0"
    for i in np.flatnonzero(np.isfinite(log10_p)):
        lp = float(log10_p[i])
        if lp > -300:
            out[i] = f"{10.0 ** lp:.6g}"
        else:
            exponent = int(np.floor(lp))
            mantissa = float(f"{10.0 ** (lp - exponent):.6g}")
            if mantissa >= 10:
                mantissa, exponent = mantissa / 10, exponent + 1
            out[i] = f"{mantissa:g}e{exponent}"
    return out


def with_p_text(table: pd.DataFrame) -> pd.DataFrame:
    """``table`` with the p text of rows read from a -log10 p column (p = "") made from
    their log10_p (:func:`_p_text`)."""
    empty = (table["p"] == "").to_numpy()
    if not empty.any():
        return table
    table = table.copy()
    table.loc[empty, "p"] = _p_text(table["log10_p"].to_numpy()[empty])
    return table


def _plink2_other_allele(a1, ref, alt, path, columns, lines) -> np.ndarray:
    """plink2 --glm rows without an OMITTED/AX column: the other allele is REF where A1 is
    an ALT allele and ALT where A1 is REF (object (n,)). An A1 that is neither raises."""
    other = np.where(a1 == ref, alt, ref)
    odd = np.flatnonzero((a1 != ref) & (a1 != alt))
    for i in odd:   # multi-allelic rows: A1 must be one of the comma-separated ALTs
        if a1[i] not in str(alt[i]).split(","):
            raise CmixError(f"{path}, line {lines[i]}, column {columns['effect_allele']}: A1 "
                            f"allele {a1[i]!r} is neither REF {ref[i]!r} nor ALT {alt[i]!r}")
    return other


def read_sumstats(path: str | os.PathLike, column_map: dict | None = None,
                  quiet: bool = False) -> pd.DataFrame:
    """Read summary statistics into a table with one row per data line.

    The layout is recognised from the header (:func:`resolve_columns`: plink2 --glm,
    regenie, GWAS-SSF, SAIGE, METAL, BOLT-LMM, else generic names; ``column_map``
    overrides) and logged (unless ``quiet``) with the columns used. Rows of a TEST
    column other than ADD (plink2's and plink 1.9's covariate rows, regenie's
    non-additive tests), in a recognised layout or read by common names, are left out
    and counted in the log; rows with a plink2 ERRCODE have a missing beta.

    Columns: id, chrom (str, a chromosome code,
    :func:`cmix.readers.chroms.chrom_code`, GWAS-SSF's 25 read as MT; "" when the
    file has none), pos (int64,
    -1 when none), effect_allele, other_allele (upper-case str), beta (float64, NaN
    missing; ln OR where the file gives odds ratios), log10_p (float64), p (the p-value
    text; "" where read from -log10 p: :func:`cmix.genotypes.sumstats.select.select_top`
    and the output write it from log10_p), line (1-based line number in the file). The layout
    name and the columns are in ``.attrs["layout"]`` and ``.attrs["columns"]``.

    A row whose field count is not the header's, a beta or odds ratio that is not a
    finite number (an odds ratio not > 0) or missing text, a position that is not an
    integer, a p or -log10 p out of range and a truncated .gz raise :class:`CmixError`
    naming the file and line.
    """
    path = input_file(path, "summary statistics")
    header, sep, header_line = read_header(path)
    layout, columns = resolve_columns(header, column_map, path)
    raw, lines = read_columns(path, header, sep, columns, header_line)
    raw, lines, note = _additive_rows(raw, lines, columns, path)
    if not quiet:
        log(f"{path}: {describe_columns(layout, columns)}{note}")
    out = pd.DataFrame(index=raw.index)
    out["id"] = raw[columns["id"]].str.strip() if "id" in columns else ""
    out["chrom"] = (_chrom_codes(raw[columns["chrom"]], layout) if "chrom" in columns
                    else np.full(len(raw), "", dtype=object))
    out["pos"] = _positions(raw, columns, lines, path)
    out["effect_allele"], out["other_allele"] = _alleles(raw, columns, lines, path)
    out["beta"] = _betas(raw, columns, lines, path)
    for name, values in _p_values(raw, columns, lines, path).items():
        out[name] = values
    out["line"] = lines
    out.attrs["layout"], out.attrs["columns"] = layout, dict(columns)
    return out


def read_columns(path, header: list[str], sep: str, columns: dict, header_line: int = 1
                  ) -> tuple[pd.DataFrame, np.ndarray]:
    """The used columns of every data row below the header (on line ``header_line``) as
    text (no missing-value parsing), and the 1-based line number of each row. Every row
    must have the header's fields: with a field too many or too few, the columns of a
    row shift and a beta would be read from another column."""
    lines = data_line_numbers(path, len(header), "\t" if sep == "\t" else None,
                              "summary statistics", first=header_line)
    try:
        raw = pd.read_csv(path, sep=sep, dtype=str, usecols=list(dict.fromkeys(columns.values())),
                          na_filter=False, compression="gzip" if is_gzip(path) else None,
                          engine="c",
                          quoting=csv.QUOTE_NONE, encoding="utf-8-sig",
                          skiprows=header_line - 1)
    except (pd.errors.ParserError, ValueError) as err:
        raise CmixError(f"{path}: cannot parse as a table ({err})") from None
    if len(raw) != len(lines):
        raise CmixError(f"{path}: read {len(raw)} rows but the file has {len(lines)} data "
                        "lines; cannot parse it as a table")
    return raw, lines


def _additive_rows(raw: pd.DataFrame, lines: np.ndarray, columns: dict, path
                   ) -> tuple[pd.DataFrame, np.ndarray, str]:
    """The rows with TEST = ADD where the layout has a test column (all rows otherwise;
    the index stays the data-row number), their line numbers, and a note for the log
    on the rows left out ("" when none)."""
    if "test" not in columns:
        return raw, lines, ""
    test = raw[columns["test"]]
    add = (test == "ADD").to_numpy()
    if not add.all():      # tab-separated fields may carry spaces
        test = test.str.strip()
        add = (test == "ADD").to_numpy()
    if not add.any() and len(raw):
        raise CmixError(f"{path}: no row with {columns['test']} = ADD (the additive "
                        f"test); tests found: {', '.join(sorted(set(test))[:5])}")
    note = ""
    if not add.all():
        note = f"; {int((~add).sum())} rows of other tests (covariates) left out"
    return raw[add], lines[add], note


def _chrom_codes(chrom: pd.Series, layout: str) -> np.ndarray:
    """Chromosome codes, object (n,): :func:`cmix.readers.chroms.chrom_code` of
    each name, after the layout's own chromosome numbers
    (:attr:`cmix.genotypes.sumstats.layouts.Layout.chrom_numbers`: GWAS-SSF's 25 is MT,
    not plink's XY)."""
    numbers = next((lay.chrom_numbers for lay in LAYOUTS if lay.name == layout), {})

    def code(name: str) -> str:
        text = name.strip()
        if text.isascii() and text.isdigit() and int(text) in numbers:
            return numbers[int(text)]
        return chrom_code(text)

    return map_unique(chrom, code)


def _positions(raw: pd.DataFrame, columns: dict, lines, path) -> np.ndarray:
    """Base-pair positions, int64 (n,), -1 when the file has no position column; a
    position that is not an integer raises naming its line."""
    if "pos" not in columns:
        return np.full(len(raw), -1, dtype=np.int64)
    pos = pd.to_numeric(raw[columns["pos"]], errors="coerce").to_numpy(dtype=float)
    bad = ~(np.isfinite(pos) & (pos % 1 == 0))
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise CmixError(f"{path}, line {lines[i]}, column {columns['pos']}: expected an "
                        f"integer position, found {raw[columns['pos']].iloc[i]!r}")
    return pos.astype(np.int64)


def _alleles(raw: pd.DataFrame, columns: dict, lines, path) -> tuple[np.ndarray, np.ndarray]:
    """(effect allele, other allele), upper-case object arrays (n,); without an other
    allele column, plink2's REF/ALT give it (:func:`_plink2_other_allele`)."""
    upper_alleles = lambda col: map_unique(raw[col], lambda a: a.strip().upper())  # noqa: E731
    effect = upper_alleles(columns["effect_allele"])
    if "other_allele" in columns:
        return effect, upper_alleles(columns["other_allele"])
    return effect, _plink2_other_allele(effect, upper_alleles(columns["ref"]),
                                        upper_alleles(columns["alt"]), path, columns, lines)


def _betas(raw: pd.DataFrame, columns: dict, lines, path) -> np.ndarray:
    """Effect sizes, float64 (n,): the beta column, or ln of the odds-ratio column; NaN
    for missing text and for rows with a plink2 error code. A beta that is not finite or
    an odds ratio not > 0 raises naming its line."""
    if "beta" in columns:
        col = columns["beta"]
        beta = _numbers(raw[col], path, col, lines, "a number")
        infinite = np.isinf(beta)
        what = "a finite effect size"
    else:
        col = columns["or"]
        odds = _numbers(raw[col], path, col, lines, "an odds ratio")
        infinite = ~(np.isfinite(odds) & (odds > 0)) & ~np.isnan(odds)
        with np.errstate(divide="ignore", invalid="ignore"):
            beta = np.log(odds)
        what = "a finite odds ratio > 0"
    if infinite.any():
        i = int(np.flatnonzero(infinite)[0])
        raise CmixError(f"{path}, line {lines[i]}, column {col}: expected {what}, found "
                        f"{raw[col].iloc[i].strip()!r}")
    if "errcode" in columns:
        errcode = raw[columns["errcode"]]
        failed = ~errcode.isin([".", ""]).to_numpy()
        failed[failed] = ~errcode[failed].str.strip().isin([".", ""]).to_numpy()
        beta[failed] = np.nan
    return beta


def _p_values(raw: pd.DataFrame, columns: dict, lines, path) -> dict:
    """{"p": p-value text, "log10_p": float64 (n,)} in the order the columns are added:
    from a p column, its text and :func:`parse_log10_p`; from a -log10 p column,
    log10_p first and "" text (made from log10_p for the selected rows only,
    :func:`with_p_text`). A -log10 p below 0 raises naming its line."""
    if "p" in columns:
        p_text = raw[columns["p"]].str.strip()
        return {"p": p_text, "log10_p": parse_log10_p(p_text, path, columns["p"], lines)}
    col = columns["log10p"]
    neg = _numbers(raw[col], path, col, lines, "-log10 p (a number >= 0)")
    below = neg < -1e-12
    if below.any():
        i = int(np.flatnonzero(below)[0])
        raise CmixError(f"{path}, line {lines[i]}, column {col}: -log10 p "
                        f"{raw[col].iloc[i].strip()!r} is below 0 (p above 1)")
    return {"log10_p": np.minimum(-neg, 0.0), "p": ""}
