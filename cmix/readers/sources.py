"""The genotype-source layer: one way in to genotypes however they are shipped.

:func:`open_source` opens a .bed trio, a .pgen trio, an indexed BGEN with its .sample,
or one of any of them per chromosome (a path pattern with ``{chrom}``) sharing one
sample table, and returns a :class:`GenotypeSource`. The readers (:class:`Bfile`,
:class:`Pfile`, :class:`BgenFile`) and :class:`ChromSet` implement it; every step
(qc, relatedness, pca, gwas, select, store, predict) opens its genotypes here and asks
the source, not its class, what it holds.

Variant indices of a per-chromosome set run over its files in chromosome order, as if
the files were merged; nothing is merged on disk.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import numpy as np
import pandas as pd

from ..errors import CmixError
from ..logs import log
from .bgen import bgi_chromosomes, open_bgen
from .chroms import AUTOSOMES, chrom_code, chrom_codes, chrom_text, parse_chroms
from .pgen import open_pfile, pfile_prefix
from .plink import bfile_prefix, open_bfile, read_fam
from .tables import Tables
from .usable import duplicates_across, summary


#: What a source holds (its ``encoding``). "hard calls": whole copies only (.bed).
#: "hard calls and dosages": hard calls, and expected copies where the file stores
#: dosages (.pgen). "fractional": expected copies from genotype probabilities, no hard
#: calls (BGEN). The store's :data:`cmix.store.schema.DOSAGE_ENCODINGS` uses the
#: first and last names for what it holds.
HARD_CALLS = "hard calls"
HARD_CALLS_AND_DOSAGES = "hard calls and dosages"
FRACTIONAL = "fractional"
ENCODINGS = (HARD_CALLS, HARD_CALLS_AND_DOSAGES, FRACTIONAL)


class GenotypeSource(Protocol):
    """Opened genotypes of any format.

    ``fam``: the samples in file order, or for a BGEN the target samples matched to its
    .sample (.fam columns: fid, iid, father, mother, sex, phenotype; all str). ``bim``:
    the variants cmix can select, in file order (.bim columns: chrom, variant_id, cm,
    pos, a1, a2; a .pvar's ALT and a BGEN's second allele are ``a1``, the counted
    allele); ``excluded``: the multiallelic sites and duplicate IDs left out of it
    (:mod:`cmix.readers.usable`; a selection naming one is refused with
    :func:`cmix.readers.usable.refuse_excluded`). Arrays read are variant-major: (n_variants, n_samples), rows
    in ``variant_idx`` order, columns in ``sample_idx`` order (None = all).
    """

    prefix: Path            # the file prefix, BGEN path or {chrom} pattern, for messages
    fam: pd.DataFrame
    bim: pd.DataFrame       # the variants cmix can select (cmix.readers.usable)
    excluded: pd.DataFrame  # those it left out (cmix.readers.usable.EXCLUDED_COLUMNS)
    encoding: str           # one of ENCODINGS
    file_format: str        # "PLINK .bed", "PLINK 2 .pgen", "BGEN v1.2"

    @property
    def n_samples(self) -> int: ...

    @property
    def n_variants(self) -> int: ...

    @property
    def variant_file(self) -> Path:
        """The variant table (.bim, .pvar) or index (.bgi), for messages."""

    def read(self, variant_idx=None, sample_idx=None) -> np.ndarray:
        """Hard calls: int8 A1 counts 0/1/2, -1 missing. CmixError for a source without
        hard calls (encoding FRACTIONAL)."""

    def read_dosages(self, variant_idx, sample_idx=None) -> np.ndarray:
        """float32 expected A1 copies 0..2, NaN missing (or the sample not in the file);
        whole numbers for a source of hard calls."""

    def samples_present(self) -> np.ndarray:
        """bool (n_samples,): whether each ``fam`` sample has genotypes in the file (a
        BGEN's .sample may lack some target samples)."""

    def input_files(self) -> dict:
        """{path: "sha256" or "fingerprint"}: the files read and how a store records
        them (whole-file sha256, or :func:`cmix.genotypes.build_store.bed_fingerprint` for
        the large ones)."""


class PackedSource(GenotypeSource, Protocol):
    """A source of hard calls (.bed, .pgen, and sets of them) that also hands out .bed
    bytes (2 bits a call, plink's packing), for the steps that decode calls in bulk."""

    @property
    def bytes_per_variant(self) -> int: ...

    def packed_rows(self, variant_idx) -> np.ndarray:
        """uint8 (len(variant_idx), bytes_per_variant): the variants' .bed bytes."""

    def packed_blocks(self, block: int):
        """Yield (start, stop, flat uint8 .bed bytes of variants start..stop-1)."""


CHROM_FIELD = "{chrom}"


def may_hold_dosages(src) -> bool:
    """Whether genotype source ``src`` (or any file of its set) may hold fractional
    dosages: a BGEN, or a .pgen whose header allows dosages; False for hard calls."""
    if src.encoding == "hard calls":
        return False
    return any(getattr(part, "may_hold_dosages", lambda: True)()
               for part in getattr(src, "parts", [src]))


def is_pattern(path) -> bool:
    return path is not None and CHROM_FIELD in str(path)


def expand(pattern, chroms=None) -> list[tuple[str, str]]:
    """[(chrom, path)] of a ``{chrom}`` pattern over ``chroms`` (a --chroms spec,
    :func:`cmix.readers.chroms.parse_chroms`; default 1-22), each code written into
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
    """Per-chromosome genotype files of one format sharing one sample table; a
    :class:`GenotypeSource` (a :class:`PackedSource` when its parts are).

    ``parts``: the opened files in chromosome order; ``offsets``: int64 (n_parts + 1),
    the first variant index of each part in the set's concatenated ``bim``.
    """

    prefix: Path          # the pattern, for messages
    parts: list
    fam: pd.DataFrame
    bim: pd.DataFrame
    offsets: np.ndarray
    chroms: list = None   # the chromosome of each part

    @property
    def encoding(self) -> str:
        return self.parts[0].encoding

    @property
    def excluded(self) -> pd.DataFrame:
        return pd.concat([p.excluded for p in self.parts], ignore_index=True)

    @property
    def file_format(self) -> str:
        return self.parts[0].file_format

    @property
    def variant_file(self) -> Path:
        suffix = self.parts[0].variant_file.name[len(self.parts[0].prefix.name):]
        return Path(str(self.prefix) + suffix)

    def input_files(self) -> dict:
        return {f: how for part in self.parts for f, how in part.input_files().items()}

    def samples_present(self) -> np.ndarray:
        present = np.ones(self.n_samples, bool)
        for part in self.parts:
            present &= part.samples_present()
        return present

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
            out[where] = part.read_dosages(local, sample_idx)
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


@dataclass(frozen=True, kw_only=True)
class GenotypeFiles:
    """The genotype inputs of a step, as its --bfile/--pfile/--bgen, --fam, --sample and
    --chroms flags give them (see :func:`open_source`): bfile / pfile: a .bed or .pgen
    prefix or ``{chrom}`` pattern (or an already opened source); bgen and sample: an
    indexed .bgen and its .sample (each may be a pattern); fam: the shared .fam / .psam,
    or the target samples of a BGEN; chroms: only these chromosomes (a parsed --chroms
    spec, :func:`cmix.readers.chroms.parse_chroms`; None = all)."""

    bfile: object = None
    pfile: object = None
    fam: object = None
    bgen: object = None
    sample: object = None
    chroms: list[str] | None = None

    def open(self, positions=None) -> GenotypeSource:
        """The opened source (:func:`open_source`); a log line counts the variants left
        out of it (multiallelic sites, duplicate IDs: :mod:`cmix.readers.usable`)."""
        src = open_source(bfile=self.bfile, pfile=self.pfile, fam=self.fam, bgen=self.bgen,
                          sample=self.sample, chroms=self.chroms, positions=positions)
        line = summary(src.excluded, src.n_variants)
        if line:
            log(f"{src.prefix}: {line}")
        return src


def open_source(*, bfile=None, pfile=None, fam=None, bgen=None, sample=None, chroms=None,
                positions=None) -> GenotypeSource:
    """Open the genotypes of a step: exactly one of

    bfile / pfile: a .bed or .pgen prefix, or a pattern with ``{chrom}`` (one file set
    per chromosome of ``chroms``, default 1-22); fam: the shared .fam (or .psam) of a
    set; without it each chromosome's own sample file is read and must equal the first.
    bgen: an indexed .bgen or a ``{chrom}`` pattern of them, with its ``sample`` file
    (or pattern; None: the sample IDs each .bgen embeds); fam: the target samples to match the .sample to (default the
    .sample's); positions: {chrom: positions} to list only the variants there.

    An already opened source given as bfile or pfile is returned as is. Raises
    CmixError for no or several inputs, a missing chromosome's file (naming the
    chromosome and path) or sample files that differ. A variant ID that two files of
    a set both hold is left out of both (:func:`leave_out_shared_ids`).
    """
    given = [name for name, v in (("--bfile", bfile), ("--pfile", pfile), ("--bgen", bgen))
             if v is not None]
    if len(given) > 1:
        raise CmixError(f"give one of --bfile, --pfile or --bgen, not {' and '.join(given)}")
    if not given:
        raise CmixError("no genotypes given: --bfile PREFIX, --pfile PREFIX or --bgen FILE "
                        "(each may hold {chrom} for one file set per chromosome)")
    if bgen is not None:
        return _open_bgen_set(bgen, sample, fam, chroms, positions)
    src = bfile if bfile is not None else pfile
    if not isinstance(src, (str, os.PathLike)):
        return src
    return _open_plink_set(src, pfile is not None, fam, chroms)


def _open_plink_set(src, is_pgen: bool, fam, chroms):
    """A .bed or .pgen prefix or ``{chrom}`` pattern (see :func:`open_source`)."""
    opener = open_pfile if is_pgen else open_bfile
    exts = (".pgen", ".pvar") if is_pgen else (".bed", ".bim")
    if not is_pattern(src):
        return opener(src, fam)
    to_prefix = pfile_prefix if is_pgen else bfile_prefix
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
                            f"{parts[0][0]}'s file; the files of a per-chromosome set must "
                            "hold the same samples in the same order (rewrite this one in "
                            "that order: plink2 --indiv-sort f FILE)")
        parts.append((chrom, part))
    leave_out_shared_ids([p for _, p in parts])
    bim = pd.concat([p.bim for _, p in parts], ignore_index=True)
    offsets = np.concatenate([[0], np.cumsum([p.n_variants for _, p in parts])]).astype(np.int64)
    return ChromSet(Path(str(src)), [p for _, p in parts], first_fam, bim, offsets,
                    [c for c, _ in parts])


def _open_bgen_set(bgen, sample, fam=None, chroms=None, positions=None):
    """One .bgen, or a ``{chrom}`` pattern of them (``sample`` may be a pattern too),
    as one source over the union of their variants (see :func:`open_source`).
    positions: {chromosome: bp positions} to list (None: all); chromosomes are matched
    by code on both sides, so ``chr1``, ``01`` and ``1`` are one chromosome."""
    target = read_fam(fam) if fam is not None else None
    if positions is not None:
        by_code: dict[str, list] = {}
        for c, pos in positions.items():
            by_code.setdefault(chrom_code(c), []).append(np.asarray(pos))
        positions = {c: np.concatenate(p) for c, p in by_code.items()}

    def wanted(chrom=None):
        if positions is None:
            return None
        if chrom is None:
            return np.concatenate([np.asarray(p) for p in positions.values()] or [[]])
        return np.asarray(positions.get(chrom, []))

    if not is_pattern(bgen):
        part = open_bgen(bgen, sample, target, wanted())
        if positions is not None:    # one file of several chromosomes: keep (chrom, pos) pairs
            keep = np.zeros(part.n_variants, bool)
            codes = chrom_codes(part.bim["chrom"])
            for c, pos in positions.items():
                keep |= (codes == c) & part.bim["pos"].isin(pos).to_numpy()
            part.keep(keep)
        return part
    parts, names = [], []
    for chrom, path in expand(bgen, chroms):
        if not Path(path).is_file():
            raise CmixError(f"{path}: missing chromosome {chrom} file of the per-chromosome "
                            f"set {bgen} (expected chromosomes {chrom_text(chroms or None)}; "
                            "--chroms names the chromosomes of a set)")
        sample_path = None if sample is None else str(sample).replace(CHROM_FIELD, chrom)
        part = open_bgen(path, sample_path, target, wanted(chrom))
        other = sorted({chrom_code(c) for c in bgi_chromosomes(f"{path}.bgi")} - {chrom})
        if other:
            raise CmixError(f"{path}: the file of chromosome {chrom} in the set {bgen} "
                            f"holds variants of chromosome {', '.join(other)}; the files "
                            "are named for other chromosomes (swapped or misnamed?)")
        if target is None:
            target = part.fam
        parts.append(part)
        names.append(chrom)
    leave_out_shared_ids(parts)
    bim = pd.concat([p.bim for p in parts], ignore_index=True)
    offsets = np.concatenate([[0], np.cumsum([p.n_variants for p in parts])]).astype(np.int64)
    return ChromSet(Path(str(bgen)), parts, target, bim, offsets, names)


def leave_out_shared_ids(parts: list) -> None:
    """Leave out of each opened file of a per-chromosome set the variants whose ID a
    variant of another file holds too (a selection could not tell which one it meant);
    they join the files' ``excluded`` as duplicate IDs."""
    for part, out in zip(parts, duplicates_across([p.bim for p in parts])):
        part.leave_out(out)
