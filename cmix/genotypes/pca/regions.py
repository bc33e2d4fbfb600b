"""Long-range LD regions: the list shipped with cmix (:data:`HIGH_LD_REGIONS`, GRCh37),
reading a region list and marking the variants inside one (as plink2 --exclude range)."""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

import numpy as np
import pandas as pd

from ...errors import CmixError
from ...readers.chroms import chrom_code, chrom_codes
from ...text import open_maybe_gzip  # gzip, a UTF-8 BOM and CRLF read as plain text


#: long-range LD regions shipped with cmix as package data (cmix/data/, GRCh37; see the
#: file's header); a real path in a source tree and in a pip install, -e or not
HIGH_LD_REGIONS = Path(str(files("cmix") / "data" / "high_ld_regions_grch37.tsv"))


def read_regions(path) -> pd.DataFrame:
    """Read a region list: columns chrom, start, end (1-based, inclusive bp), label.

    Whitespace separated; lines starting with '#' and blank lines are skipped. The
    chromosome may be written 6, 06 or chr6 (:func:`cmix.readers.chroms.chrom_code`).
    Errors name the line.
    """
    path = Path(path)
    if not path.exists():
        raise CmixError(f"{path}: file not found (long-range LD region list)")
    rows = []
    with open_maybe_gzip(path) as fh:
        for lineno, line in enumerate(fh, 1):
            fields = line.split()
            if not fields or fields[0].startswith("#"):
                continue
            if len(fields) < 3:
                raise CmixError(f"{path}, line {lineno}: expected chromosome, start and end "
                                f"(bp), found {len(fields)} field(s)")
            try:
                start, end = int(fields[1]), int(fields[2])
            except ValueError:
                raise CmixError(f"{path}, line {lineno}: start and end must be whole base-pair "
                                f"positions, found {fields[1]!r} {fields[2]!r}") from None
            if start > end or start < 0:
                raise CmixError(f"{path}, line {lineno}: start {start} is after end {end}"
                                if start > end else
                                f"{path}, line {lineno}: negative start {start}")
            label = fields[3] if len(fields) > 3 else f"region{len(rows) + 1}"
            rows.append((chrom_code(fields[0]), start, end, label))
    return pd.DataFrame(rows, columns=["chrom", "start", "end", "label"])


def in_regions(bim: pd.DataFrame, regions: pd.DataFrame) -> np.ndarray:
    """bool (n_variants,): True where the variant lies in a region (bounds inclusive,
    as plink2 --exclude range)."""
    out = np.zeros(len(bim), bool)
    chrom = chrom_codes(bim["chrom"])
    pos = bim["pos"].to_numpy()
    for c, s, e in zip(regions["chrom"], regions["start"], regions["end"]):
        out |= (chrom == c) & (pos >= s) & (pos <= e)
    return out
