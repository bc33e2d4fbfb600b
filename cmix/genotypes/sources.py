"""One way in to genotypes however they are shipped: a .bed trio, a .pgen trio, or one
of either per chromosome (a path pattern with ``{chrom}``) sharing one sample file.

Every source has the same interface as :class:`cmix.genotypes.plink.Bfile`: ``fam`` and ``bim``
tables (.fam/.bim columns; a .pvar's ALT is ``a1``, the counted allele), ``n_samples``,
``n_variants``, ``bytes_per_variant``, ``read(variant_idx, sample_idx)`` -> int8 A1
counts (n_variants, n_samples) with -1 missing, ``packed_rows(variant_idx)`` and
``packed_blocks(block)`` -> .bed bytes. Variant indices of a per-chromosome set run over
its files in chromosome order, as if the files were merged; nothing is merged on disk.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from ..io import CmixError
from .plink import Tables
from .selection import AUTOSOMES, chrom_code, chrom_text, parse_chroms

CHROM_FIELD = "{chrom}"


def is_pattern(path) -> bool:
    return path is not None and CHROM_FIELD in str(path)


def expand(pattern, chroms=None) -> list[tuple[str, str]]:
    """[(chrom, path)] of a ``{chrom}`` pattern over ``chroms`` (a --chroms spec,
    :func:`cmix.genotypes.selection.parse_chroms`; default 1-22), each code written into
    the pattern as parse_chroms gives it (1-22, X, Y, XY, MT)."""
    codes = parse_chroms(chroms) if chroms else AUTOSOMES
    return [(c, str(pattern).replace(CHROM_FIELD, c)) for c in codes]


def check_part_chrom(bim: pd.DataFrame, chrom: str, path) -> None:
    """Raise unless every variant of a per-chromosome file (``bim``: its .bim/.pvar
    table) is on ``chrom``, the chromosome its name gives: a file under another
    chromosome's name would be read as that chromosome."""
    codes = bim["chrom"].astype(str).map(chrom_code).to_numpy()
    bad = codes != chrom_code(chrom)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise CmixError(f"{path}, variant row {i + 1}: chromosome {bim['chrom'].iloc[i]!r}, but the "
                        f"file is chromosome {chrom}'s of the per-chromosome set "
                        f"({int(bad.sum())} of its {len(bad)} variants on another chromosome); "
                        "check the file names")


@dataclass
class ChromSet(Tables):
    """Per-chromosome genotype files (Bfile or Pfile objects) sharing one sample table.

    ``parts``: the opened files in chromosome order; ``offsets``: int64 (n_parts + 1),
    the first variant index of each part in the set's concatenated ``bim``.
    """

    prefix: Path          # the pattern, for messages
    parts: list
    fam: pd.DataFrame
    bim: pd.DataFrame
    offsets: np.ndarray
    chroms: list = None   # the chromosome of each part


    def _split(self, variant_idx):
        """Yield (part, local indices, output positions) for the variants in each file."""
        variant_idx = np.asarray(variant_idx, dtype=np.int64)
        part_of = np.searchsorted(self.offsets, variant_idx, side="right") - 1
        for k in np.unique(part_of):
            where = np.flatnonzero(part_of == k)
            yield self.parts[k], variant_idx[where] - self.offsets[k], where

    def read(self, variant_idx=None, sample_idx=None) -> np.ndarray:
        variant_idx = np.arange(self.n_variants) if variant_idx is None else variant_idx
        n = self.n_samples if sample_idx is None else len(sample_idx)
        out = np.empty((len(variant_idx), n), np.int8)
        for part, local, where in self._split(variant_idx):
            out[where] = part.read(local, sample_idx)
        return out

    def read_dosages(self, variant_idx, sample_idx=None) -> np.ndarray:
        n = self.n_samples if sample_idx is None else len(sample_idx)
        out = np.empty((len(variant_idx), n), np.float32)
        for part, local, where in self._split(variant_idx):
            out[where] = (part.read_dosages(local, sample_idx) if hasattr(part, "read_dosages")
                          else _as_dosage(part.read(local, sample_idx)))
        return out

    def packed_rows(self, variant_idx) -> np.ndarray:
        out = np.empty((len(variant_idx), self.bytes_per_variant), np.uint8)
        for part, local, where in self._split(variant_idx):
            out[where] = part.packed_rows(local)
        return out

    def packed_blocks(self, block: int):
        for part, off in zip(self.parts, self.offsets[:-1]):
            for s, e, buf in part.packed_blocks(block):
                yield s + off, e + off, buf


def _as_dosage(g: np.ndarray) -> np.ndarray:
    x = g.astype(np.float32)
    x[g < 0] = np.nan
    return x


def open_genotypes(bfile=None, *, pfile=None, fam=None, chroms=None):
    """Open a .bed or .pgen source, or a per-chromosome set of them.

    bfile / pfile: a prefix, or a pattern with ``{chrom}`` (one file set per chromosome
    of ``chroms``, default 1-22). fam: the shared .fam (or .psam) of a set; without it
    each chromosome's own sample file is read and must equal the first. An already
    opened source is returned as is. Raises CmixError for a missing chromosome's file
    (naming the chromosome and path) or sample files that differ.
    """
    from .pgen import open_pfile, pfile_prefix
    from .plink import bfile_prefix, open_bfile

    if bfile is not None and pfile is not None:
        raise CmixError("give --bfile or --pfile, not both")
    if bfile is None and pfile is None:
        raise CmixError("no genotypes given: --bfile PREFIX or --pfile PREFIX (either may "
                        "hold {chrom} for one file set per chromosome)")
    src = bfile if bfile is not None else pfile
    if hasattr(src, "read") and hasattr(src, "bim"):
        return src
    opener = open_bfile if bfile is not None else open_pfile
    exts = (".bed", ".bim") if bfile is not None else (".pgen", ".pvar")
    if not is_pattern(src):
        return opener(src, fam)
    to_prefix = bfile_prefix if bfile is not None else pfile_prefix
    parts, first_fam = [], None
    for chrom, path in expand(src, chroms):
        prefix = to_prefix(path)
        for ext in exts:
            f = prefix.with_name(prefix.name + ext)
            if not f.is_file():
                raise CmixError(f"{f}: missing chromosome {chrom} file of the per-chromosome "
                                f"set {src} (expected chromosomes {chrom_text(chroms or None)}; "
                                "--chroms names the chromosomes of a set)")
        part = opener(prefix, fam)
        check_part_chrom(part.bim, chrom, prefix.with_name(prefix.name + exts[1]))
        if first_fam is None:
            first_fam = part.fam
        elif fam is None and not part.fam[["fid", "iid"]].equals(first_fam[["fid", "iid"]]):
            raise CmixError(f"{prefix}: its samples differ from those of chromosome "
                            f"{parts[0][0]}'s file; a per-chromosome set needs one sample "
                            "file (give it as fam)")
        parts.append((chrom, part))
    bim = pd.concat([p.bim for _, p in parts], ignore_index=True)
    dup = bim["variant_id"].duplicated()
    if dup.any():
        raise CmixError(f"{src}: variant ID {bim['variant_id'][dup].iloc[0]!r} is in two "
                        "chromosomes' files; variant IDs must be unique across the set")
    offsets = np.concatenate([[0], np.cumsum([p.n_variants for _, p in parts])]).astype(np.int64)
    return ChromSet(Path(str(src)), [p for _, p in parts], first_fam, bim, offsets,
                    [c for c, _ in parts])


def sample_file_of(src) -> Path | None:
    part = src.parts[0] if isinstance(src, ChromSet) else src
    ext = ".fam" if hasattr(part, "bed_path") else ".psam"
    f = part.prefix.with_name(part.prefix.name + ext)
    return f if f.is_file() else None
