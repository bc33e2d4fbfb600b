"""Chromosome codes, read the same way by every reader and step: one spelling of a code
(``01``, ``chr1``, ``CHR1`` -> ``1``; ``23``, ``chrX`` -> ``X``), one definition of the
autosomes (1-22) and one parser of a ``--chroms`` spec with plink2 ``--chr``'s meaning
(codes, comma lists, ranges).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..errors import CmixError

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
