"""Which samples and variants a step uses, read and matched the same way by every step.

- Samples: plink ``--keep`` / ``--remove`` lists (``#FID IID``, FID IID or IID lines),
  matched to the .fam by (FID, IID); IDs the .fam lacks are counted and reported, as
  plink2 ignores them.
- Variants: ``--extract`` lists (the first field of each line, e.g. a ``.snplist``).
- Chromosomes: one spelling of a chromosome code (``01``, ``chr1``, ``CHR1`` -> ``1``;
  ``23``, ``chrX`` -> ``X``), one definition of the autosomes (1-22) and one parser of a
  ``--chroms`` spec with plink2 ``--chr``'s meaning (codes, comma lists, ranges).
"""

from __future__ import annotations

import os

import numpy as np
import pandas as pd

from ..errors import CmixError
from ..logs import log
from ..text import input_file, read_id_list, text_lines

# ------------------------------------------------------------------------- chromosomes
#: the autosomes, as chromosome codes
AUTOSOMES = tuple(str(c) for c in range(1, 23))
#: every code a --chroms spec may name, in plink2's order (X, Y, XY, MT are 23-26)
CHROM_ORDER = AUTOSOMES + ("X", "Y", "XY", "MT")
_NAME_OF_NUMBER = {"23": "X", "24": "Y", "25": "XY", "26": "MT"}
_ALIASES = {"M": "MT"}


def chrom_code(chrom) -> str:
    """One chromosome name as a code: no ``chr`` prefix (any case), no leading zeros,
    upper case, plink's numbers 23-26 as X, Y, XY, MT and M as MT ("chr01" -> "1",
    "chrX" -> "X", "23" -> "X", "chrM" -> "MT"). Other names come back stripped and
    upper-cased ("chrUn_gl000220" -> "UN_GL000220")."""
    text = str(chrom).strip()
    if text[:3].lower() == "chr":
        text = text[3:]
    text = text.upper()
    if text.isascii() and text.isdigit():
        text = str(int(text))
    text = _NAME_OF_NUMBER.get(text, text)
    return _ALIASES.get(text, text)


def chrom_codes(chrom) -> np.ndarray:
    """:func:`chrom_code` of each value of ``chrom`` (a .bim column): object (n,).
    Each distinct name is converted once."""
    codes, uniques = pd.factorize(pd.Series(np.asarray(chrom, dtype=object)).astype(str))
    mapped = np.array([chrom_code(u) for u in uniques] + [""], dtype=object)
    return mapped[codes]


def is_autosome(chrom) -> np.ndarray:
    """bool (n,): True where the chromosome is one of 1-22, however written (``1``,
    ``01``, ``chr1``, ``CHR1``); False for X, Y, XY, MT (23-26) and anything else."""
    return np.isin(chrom_codes(chrom), AUTOSOMES)


def parse_chroms(spec) -> list[str] | None:
    """A ``--chroms`` spec as plink2 ``--chr`` reads it: one or more values (a string or
    a list of them), each a comma-separated list of codes (1-22, X, Y, XY, MT, with or
    without ``chr``; 23-26 for X-MT) and ranges of them (``1-4``, ``20-X``). Returns the
    codes in plink2's order, each once (``["1-3,22"]`` -> ["1", "2", "3", "22"]); None
    for None. An unknown code, an empty item or a range running backwards is a
    CmixError naming it."""
    if spec is None:
        return None
    values = [spec] if isinstance(spec, (str, int)) else list(spec)
    rank = {c: i for i, c in enumerate(CHROM_ORDER)}

    def code_of(text: str, item: str) -> str:
        code = chrom_code(text)
        if code not in rank:
            raise CmixError(f"--chroms {item!r}: {text.strip()!r} is not a chromosome code "
                            "(expected 1-22, X, Y, XY or MT, comma lists and ranges such "
                            "as 1-4,22)")
        return code

    chosen = set()
    for value in values:
        for item in str(value).split(","):
            if not item.strip():
                raise CmixError(f"--chroms {str(value)!r}: an empty item (expected codes "
                                "such as 1-4,22)")
            lo, dash, hi = item.partition("-")
            if dash:
                first, last = rank[code_of(lo, item)], rank[code_of(hi, item)]
                if first > last:
                    raise CmixError(f"--chroms {item!r}: the range runs backwards (write "
                                    f"{hi.strip()}-{lo.strip()})")
                chosen.update(CHROM_ORDER[first:last + 1])
            else:
                chosen.add(code_of(item, item))
    if not chosen:
        raise CmixError("--chroms: no chromosome given (expected codes such as 1-4,22)")
    return [c for c in CHROM_ORDER if c in chosen]


def chrom_mask(chrom, chroms) -> np.ndarray:
    """bool (n,): True where the chromosome of each value of ``chrom`` (a .bim column)
    is one of ``chroms`` (a --chroms spec, :func:`parse_chroms`); all True for None."""
    if chroms is None:
        return np.ones(len(chrom), bool)
    return np.isin(chrom_codes(chrom), parse_chroms(chroms))


def chrom_text(chroms) -> str:
    """``chroms`` for messages: "1-22" for the autosomes, else the codes joined."""
    chroms = parse_chroms(chroms) if chroms is not None else list(AUTOSOMES)
    return "1-22" if chroms == list(AUTOSOMES) else ", ".join(chroms)


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


def extract_mask(variant_id, path, where, flag: str = "--extract") -> tuple[np.ndarray, int]:
    """(bool (n,), n_unknown): True for the variants of ``variant_id`` (a .bim column)
    listed in the ``flag`` file ``path``, and the number of its IDs not among them. A
    list none of whose IDs is a variant is a CmixError naming ``where`` (the .bim)."""
    ids = read_variant_ids(path, flag)
    listed = pd.Index(ids).unique()
    found = listed.isin(pd.Index(np.asarray(variant_id, dtype=object)))
    if not found.any():
        raise CmixError(f"{path}: none of its {len(ids)} variant IDs is in {where}")
    mask = pd.Index(np.asarray(variant_id, dtype=object)).isin(listed)
    return np.asarray(mask, bool), int((~found).sum())
