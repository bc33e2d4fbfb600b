"""PLINK 1 binary genotypes (.bed/.bim/.fam): validate, read lazily, write.

The .bed is memory-mapped and decoded on demand, so any subset of variants and
samples is read without touching the rest. Genotypes come out as int8 counts of the
.bim column-5 allele (A1; plink2's ALT): 0, 1, 2, and -1 for a missing call. That is
bed-reader's convention; ``plink2 --export A`` (2.00a3.5) counts the column-6 allele
instead unless told otherwise with ``--export-allele``.

Shapes: ``genotypes`` arrays are (n_variants, n_samples), variant-major like the .bed.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from ..errors import CmixError
from ..text import input_file, read_table
from .tables import PlinkTrio, check_own_samples, variant_table
from .usable import find_excluded, no_exclusions

BED_MAGIC = b"\x6c\x1b\x01"
FAM_COLUMNS = ["fid", "iid", "father", "mother", "sex", "phenotype"]
BIM_COLUMNS = ["chrom", "variant_id", "cm", "pos", "a1", "a2"]

# 2-bit code -> count of A1. 00 hom A1, 01 missing, 10 het, 11 hom A2.
CODE_TO_DOSAGE = np.array([2, -1, 1, 0], dtype=np.int8)
# byte -> the 4 samples' A1 counts, low bits first.
BYTE_TO_DOSAGE = CODE_TO_DOSAGE[(np.arange(256)[:, None] >> (2 * np.arange(4))) & 3]
# A1 count (index value + 1, so -1 -> 0) -> 2-bit code.
_DOSAGE_PLUS1_TO_CODE = np.array([0b01, 0b11, 0b10, 0b00], dtype=np.uint8)


def _read_table(path: Path, columns: list[str], what: str, dtype=None) -> pd.DataFrame:
    """Read a headerless whitespace-separated table, checking every line's field count:
    fewer fields than ``columns`` is an error naming the line; fields past them are
    ignored, as plink2 ignores them in a .fam or .bim.

    ``dtype`` (column -> type) parses numeric columns directly; a value that does not
    parse raises ValueError, and callers re-read as text to name the bad line.
    """
    input_file(path, f"{what} file")
    types = {c: (dtype or {}).get(c, str) for c in columns}
    df = read_table(path, f"{what} file: {len(columns)} whitespace-separated columns "
                    f"{' '.join(columns)}",
                    empty=pd.DataFrame({c: pd.Series(dtype=types[c]) for c in columns}),
                    sep=r"\s+", header=None, names=columns, usecols=range(len(columns)),
                    dtype=types, engine="c", na_filter=False, comment=None)
    last = df[columns[-1]]
    short = last.eq("") if last.dtype == object or types[columns[-1]] is str else last.isna()
    if short.any():
        line = int(np.flatnonzero(short.to_numpy())[0]) + 1
        raise CmixError(f"{path}, line {line}: expected {len(columns)} columns "
                        f"({' '.join(columns)}), found fewer")
    return df


def first_duplicate_lines(values: pd.Series) -> tuple[int, int] | None:
    """1-based positions of the first value listed twice and of its second listing, or
    None when every value is unique (the line numbers of a headerless file)."""
    dup = values.duplicated(keep=False).to_numpy()
    if not dup.any():
        return None
    first = values[dup].iloc[0]
    lines = np.flatnonzero(values.to_numpy() == first)[:2] + 1
    return int(lines[0]), int(lines[1])


def read_fam(path: str | os.PathLike) -> pd.DataFrame:
    """Read a .fam file: columns fid, iid, father, mother (str), sex, phenotype (str).

    Duplicate (FID, IID) pairs are an error naming the two line numbers (not the IDs).
    """
    path = Path(path)
    fam = _read_table(path, FAM_COLUMNS, ".fam")
    dup = first_duplicate_lines(fam["fid"] + "\t" + fam["iid"])
    if dup:
        raise CmixError(f"{path}: duplicate sample ID on lines {dup[0]} and {dup[1]}; "
                        "every FID/IID pair must be unique")
    return fam


def position_columns(pos: pd.Series, cm: pd.Series | None, path, line_of,
                     names: tuple[str, str]) -> tuple[np.ndarray, np.ndarray]:
    """(pos int64, cm float64) of a variant table's text columns (cm None: all 0).

    A position must be a whole number >= 0 that fits an int64 (plink2 skips a variant
    with a negative position, which would leave cmix's variants not plink2's), a cM a
    number; otherwise a CmixError names the file, the line (``line_of``: 0-based row ->
    line number) and the column (``names``: the position's and the cM's)."""
    conv = pd.to_numeric(pos, errors="coerce").astype(np.float64)
    bad = (conv.isna() | (conv % 1 != 0) | (conv.abs() >= 2.0 ** 63)).to_numpy()
    negative = (conv < 0).to_numpy()
    for mask, kind in ((bad, "an integer base-pair position"),
                       (negative, "a position >= 0 (plink2 skips a variant with a negative "
                                  "one; remove it)")):
        if mask.any():
            i = int(np.flatnonzero(mask)[0])
            raise CmixError(f"{path}, line {line_of(i)}, column {names[0]}: expected {kind}, "
                            f"found {pos.iloc[i]!r}")
    if cm is None:
        return conv.to_numpy(np.int64), np.zeros(len(pos))
    cm_conv = pd.to_numeric(cm, errors="coerce").astype(np.float64)
    if cm_conv.isna().any():
        i = int(np.flatnonzero(cm_conv.isna().to_numpy())[0])
        raise CmixError(f"{path}, line {line_of(i)}, column {names[1]}: expected a number "
                        f"(cM), found {cm.iloc[i]!r}")
    return conv.to_numpy(np.int64), cm_conv.to_numpy(np.float64)


def read_bim(path: str | os.PathLike) -> pd.DataFrame:
    """Read a .bim file (plain, gzip or zstd: a .bim.zst): chrom, variant_id, a1, a2
    (str), cm (float64), pos (int64); every row, duplicate IDs included (the reader
    leaves them out of what can be selected: :mod:`cmix.readers.usable`)."""
    path = Path(path)
    try:   # fast path: numeric columns parsed by the C reader
        bim = _read_table(path, BIM_COLUMNS, ".bim", dtype={"cm": np.float64, "pos": np.int64})
        if (bim["pos"] < 0).any():
            raise ValueError("a negative position")
    except (ValueError, OverflowError) as err:
        bim = _read_table(path, BIM_COLUMNS, ".bim")
        position_columns(bim["pos"], bim["cm"], path, lambda i: i + 1, ("4", "3"))
        raise CmixError(f"{path}: cannot read columns 3-4 (cM, position) as numbers "
                        f"({err})") from None
    return bim


@dataclass
class Bfile(PlinkTrio):
    """An opened, validated .bed/.bim/.fam trio. Nothing but the tables is in memory.
    A :class:`cmix.readers.sources.GenotypeSource` of hard calls; variant indices are
    rows of ``bim`` (the usable variants, :class:`PlinkTrio`)."""

    prefix: Path
    fam: pd.DataFrame
    bim: pd.DataFrame
    file_row: np.ndarray | None = None
    excluded: pd.DataFrame = field(default_factory=no_exclusions)
    header_lines: int = 0

    file_format = "PLINK .bed"
    encoding = "hard calls"          # one of cmix.readers.sources.ENCODINGS
    EXTENSIONS = (".bed", ".bim", ".fam")
    PLINK2_FLAG = "--bfile"

    @property
    def bed_path(self) -> Path:
        return self.beside(".bed")

    def read_dosages(self, variant_idx, sample_idx=None) -> np.ndarray:
        """A1 counts as float32 (n_selected_variants, n_selected_samples), NaN missing."""
        g = self.read(variant_idx, sample_idx)
        dosage = g.astype(np.float32)
        dosage[g < 0] = np.nan
        return dosage

    def packed(self) -> np.ndarray:
        """The packed genotype bytes of every variant of the file (those left out
        included: index it with :meth:`file_rows`), memory-mapped: uint8
        (n_file_variants, bytes_per_variant)."""
        if self.n_file_variants == 0 or self.n_samples == 0:
            return np.zeros((self.n_file_variants, self.bytes_per_variant), np.uint8)
        return np.memmap(self.bed_path, dtype=np.uint8, mode="r", offset=3,
                         shape=(self.n_file_variants, self.bytes_per_variant))

    def read(self, variant_idx=None, sample_idx=None) -> np.ndarray:
        """A1 counts: int8 (n_selected_variants, n_selected_samples), -1 missing
        (:func:`read_genotypes`)."""
        return read_genotypes(self, variant_idx, sample_idx)

    def packed_rows(self, variant_idx) -> np.ndarray:
        """The .bed bytes of the given variants: uint8 (k, bytes_per_variant)."""
        variant_idx = np.asarray(variant_idx, dtype=np.int64)
        if len(variant_idx) == 0:
            return np.zeros((0, self.bytes_per_variant), np.uint8)
        return np.ascontiguousarray(self.packed()[self.file_rows(variant_idx)])

    def packed_blocks(self, block: int):
        """Yield (start, stop, flat uint8 .bed bytes of variants start..stop-1), reading
        one block ahead (gathering the usable rows where some were left out)."""
        if self.file_row is None:
            yield from _read_blocks(self.bed_path, self.n_variants, self.bytes_per_variant,
                                    block)
            return
        for s, e in variant_blocks(self.n_variants, block):
            yield s, e, self.packed_rows(np.arange(s, e)).ravel()


def _read_blocks(bed_path: Path, n_variants: int, bpv: int, block: int):
    """Yield (start, stop, uint8 buffer) over variant blocks, reading one block ahead."""
    if n_variants == 0:
        return
    bufs = [np.empty(block * bpv, np.uint8), np.empty(block * bpv, np.uint8)]
    fd = os.open(bed_path, os.O_RDONLY)
    try:
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_SEQUENTIAL)
        except (AttributeError, OSError):
            pass
        ranges = [(s, min(s + block, n_variants)) for s in range(0, n_variants, block)]

        def read(i, j):
            s, e = ranges[i]
            view = memoryview(bufs[j])[: (e - s) * bpv]
            offset = 3 + s * bpv
            got = 0
            while got < len(view):
                n = os.preadv(fd, [view[got:]], offset + got)
                if n <= 0:
                    raise CmixError(f"{bed_path}: file ended early (truncated while reading)")
                got += n

        result: dict = {}

        def read_into(i, j):
            try:
                read(i, j)
            except BaseException as err:  # re-raised in the consumer
                result[i] = err

        read(0, 0)
        for i, (s, e) in enumerate(ranges):
            thread = None
            if i + 1 < len(ranges):
                thread = threading.Thread(target=read_into, args=(i + 1, (i + 1) % 2))
                thread.start()
            yield s, e, bufs[i % 2]
            if thread is not None:
                thread.join()
                if (i + 1) in result:
                    raise result[i + 1]
    finally:
        os.close(fd)


def bfile_prefix(path: str | os.PathLike) -> Path:
    """Accept ``data/cohort`` or ``data/cohort.bed`` (or .bim/.fam) and return the prefix.

    A folder with no trio beside it (``data/`` for ``data/cohort``) is an error.
    """
    p = Path(path)
    if p.suffix in (".bed", ".bim", ".fam"):
        p = p.with_suffix("")
    elif p.is_dir() and not any(p.with_name(p.name + e).exists()
                                for e in (".bed", ".bim", ".fam")):
        beds = sorted(p.glob("*.bed"))
        hint = f", e.g. {beds[0].with_suffix('')}" if beds else ""
        raise CmixError(f"{p}: is a folder, expected a PLINK prefix (the path without "
                        f".bed/.bim/.fam{hint})")
    return p


def open_bfile(path: str | os.PathLike, fam: str | os.PathLike | None = None) -> Bfile:
    """Open and validate a PLINK 1 binary trio (``fam``: a shared .fam of another name,
    as UK Biobank ships one .fam for all chromosomes' .bed/.bim).

    Checks: all three files exist, the magic bytes (variant-major .bed), that the
    .bed size is exactly 3 + n_variants * ceil(n_samples / 4) for the .bim/.fam line
    counts, and that the padding bits of the last byte are 00 in up to
    :data:`PADDING_CHECK_VARIANTS` evenly spaced variants (:func:`check_padding`; a
    .fam short by a line or two keeps the byte count when n_samples % 4 != 0, so only
    the padding tells). Raises :class:`CmixError` naming the file and the mismatch.
    """
    prefix = bfile_prefix(path)
    bed = prefix.with_name(prefix.name + ".bed")
    fam_path = Path(fam) if fam is not None else prefix.with_name(prefix.name + ".fam")
    bim_path = variant_table(prefix, ".bim")
    for f in (bed, bim_path, fam_path):
        input_file(f, f"one of the PLINK .bed/.bim/.fam trio with prefix {prefix}")
    with open(bed, "rb") as fh:
        magic = fh.read(3)
    if magic[:2] != BED_MAGIC[:2]:
        raise CmixError(f"{bed}: not a PLINK .bed file (first bytes {magic[:2].hex()}, "
                        "expected 6c1b)")
    if magic[2:3] != b"\x01":
        raise CmixError(f"{bed}: a sample-major .bed (mode byte {magic[2:3].hex()}; PLINK "
                        "1.07's individual-major layout), which cmix does not read; rewrite "
                        f"it variant-major with `plink2 --bfile {prefix} --make-bed --out NEW`")
    bim = read_bim(bim_path)
    multi = (bim["a1"].str.contains(",", regex=False)
             | bim["a2"].str.contains(",", regex=False)).to_numpy()
    plink2_input = f"--bfile {prefix}"
    keep, excluded = find_excluded(bim, multi, lambda r: [f"{bim_path}, line {i + 1}"
                                                          for i in r], plink2_input)
    bf = Bfile(prefix, read_fam(fam_path), bim[keep].reset_index(drop=True),
               None if keep.all() else np.flatnonzero(keep).astype(np.int64), excluded)
    if fam is not None:
        check_own_samples(prefix, ".fam", bf.fam, fam_path, read_fam)
    n_rows = bf.n_file_variants
    expected = 3 + n_rows * bf.bytes_per_variant
    size = bed.stat().st_size
    if size != expected:
        raise CmixError(
            f"{bed}: size {size} bytes does not match the .bim ({n_rows} variants) "
            f"and .fam ({bf.n_samples} samples): expected 3 + {n_rows} x "
            f"{bf.bytes_per_variant} = {expected} bytes; the .bed is "
            f"{'truncated' if size < expected else 'longer than expected'} or the "
            ".bim/.fam do not belong to it")
    if bf.n_samples % 4 and n_rows:
        sample = np.unique(np.linspace(0, n_rows - 1, PADDING_CHECK_VARIANTS)
                           .astype(np.int64))
        check_padding(bf, _last_bytes(bf, sample), sample)
    return bf


def _last_bytes(bf: Bfile, variant_idx: np.ndarray) -> np.ndarray:
    """The last .bed byte of each given variant (file rows): uint8 (k,). One 1-byte pread each, with
    random-access advice, so no read-ahead pulls in the rest of a 100 GB file."""
    fd = os.open(bf.bed_path, os.O_RDONLY)
    try:
        if hasattr(os, "posix_fadvise"):
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)
        offsets = 3 + (np.asarray(variant_idx, np.int64) + 1) * bf.bytes_per_variant - 1
        return np.frombuffer(b"".join(os.pread(fd, 1, int(o)) for o in offsets), np.uint8)
    finally:
        os.close(fd)


#: variants whose last byte :func:`open_bfile` checks for non-zero padding
PADDING_CHECK_VARIANTS = 256


def check_padding(bf: Bfile, last_bytes: np.ndarray, variant_idx: np.ndarray) -> None:
    """Check that the unused high bit pairs of each variant's last .bed byte are 00.

    last_bytes: uint8 (k,), the last byte of the variants on .bed rows ``variant_idx``
    (file rows, int (k,)).
    A .bed written for more samples than the .fam lists (a .fam line lost, with the byte
    count per variant unchanged) has genotypes there; raise :class:`CmixError` then.
    """
    n_used = bf.n_samples % 4
    if n_used == 0:
        return
    pad_mask = np.uint8((0xFF << (2 * n_used)) & 0xFF)
    bad = (np.asarray(last_bytes, dtype=np.uint8) & pad_mask) != 0
    if bad.any():
        i = int(np.asarray(variant_idx)[np.flatnonzero(bad)[0]])
        raise CmixError(
            f"{bf.bed_path}: non-zero padding bits after sample {bf.n_samples} in the last "
            f"byte of the variant on .bim line {i + 1} (a valid .bed has 00 there): the "
            f".fam probably has fewer lines than the .bed was written for ({bf.prefix}.fam "
            f"has {bf.n_samples}; was a line lost?)")


def decode(packed: np.ndarray, sample_idx: np.ndarray | None = None,
           n_samples: int | None = None) -> np.ndarray:
    """Decode packed .bed rows into A1 counts.

    packed: uint8 (n_variants, bytes_per_variant). sample_idx: sorted or unsorted int
    indices of the samples to return (None = the first ``n_samples``).
    Returns int8 (n_variants, n_selected_samples) with -1 for missing.
    """
    packed = np.asarray(packed)
    if sample_idx is None:
        out = BYTE_TO_DOSAGE[packed].reshape(packed.shape[0], -1)
        return out[:, :n_samples] if n_samples is not None else out
    sample_idx = np.asarray(sample_idx, dtype=np.int64)
    codes = (packed[:, sample_idx >> 2] >> ((sample_idx & 3) << 1).astype(np.uint8)) & 3
    return CODE_TO_DOSAGE[codes]


def read_genotypes(bf: Bfile, variant_idx=None, sample_idx=None) -> np.ndarray:
    """Read A1 counts for a subset: int8 (n_selected_variants, n_selected_samples).

    Only the .bed rows of the selected variants are read from disk; their padding bits
    are checked (:func:`check_padding`).
    """
    packed = bf.packed()
    if variant_idx is None and bf.file_row is None:
        rows = np.arange(bf.n_variants)
    else:
        rows = bf.file_rows(np.arange(bf.n_variants) if variant_idx is None else variant_idx)
        packed = packed[rows]
    if bf.n_samples % 4 and len(rows):
        check_padding(bf, packed[:, -1], rows)
    return decode(packed, sample_idx, bf.n_samples)


def variant_blocks(n_variants: int, block: int):
    """Yield (start, stop) ranges that tile ``n_variants`` in steps of ``block``."""
    for start in range(0, n_variants, block):
        yield start, min(start + block, n_variants)


def genotypes_dask(bf: Bfile, sample_idx=None, variant_chunk: int = 4096):
    """A lazy dask array of A1 counts, int8 (n_variants, n_selected_samples).

    Each chunk of ``variant_chunk`` variants decodes its own slice of the memory-mapped
    .bed, so computing a reduction streams over the file in bounded memory.
    """
    import dask.array as da  # dask.array imports scipy (~0.3 s); only where a dask array is made

    n_sel = bf.n_samples if sample_idx is None else len(sample_idx)
    chunks = (tuple(b - a for a, b in variant_blocks(bf.n_variants, variant_chunk)) or (0,),
              (n_sel,))

    def _block(block_info=None):
        (v0, v1), _ = block_info[None]["array-location"]
        return read_genotypes(bf, np.arange(v0, v1), sample_idx)

    return da.map_blocks(_block, chunks=chunks, dtype=np.int8,
                         meta=np.empty((0, 0), np.int8))


def encode(dosage: np.ndarray) -> np.ndarray:
    """Pack A1 counts (int8 (n_variants, n_samples), -1 missing) into .bed bytes.

    Returns uint8 (n_variants, ceil(n_samples / 4)); padding bits are 00.
    """
    dosage = np.asarray(dosage)
    n_var, n = dosage.shape
    if dosage.size and (dosage.min() < -1 or dosage.max() > 2):
        raise ValueError("dosages must be -1 (missing), 0, 1 or 2")
    codes = np.zeros((n_var, ((n + 3) // 4) * 4), dtype=np.uint8)
    codes[:, :n] = _DOSAGE_PLUS1_TO_CODE[dosage.astype(np.int64) + 1]
    codes = codes.reshape(n_var, -1, 4)
    return codes[:, :, 0] | (codes[:, :, 1] << 2) | (codes[:, :, 2] << 4) | (codes[:, :, 3] << 6)


def write_fam(path, fam: pd.DataFrame) -> None:
    fam[FAM_COLUMNS].to_csv(path, sep=" ", header=False, index=False)


def write_bim(path, bim: pd.DataFrame) -> None:
    out = bim[BIM_COLUMNS].copy()
    out["cm"] = out["cm"].map(lambda x: f"{x:g}")
    out.to_csv(path, sep="\t", header=False, index=False)


class BedWriter:
    """Write a .bed/.bim/.fam trio block by block; the files appear only on success.

    >>> with BedWriter("out/cohort", fam, bim) as w:   # doctest: +SKIP
    ...     for block in blocks:                        # int8 (v, n_samples)
    ...         w.write(block)
    """

    def __init__(self, prefix, fam: pd.DataFrame, bim: pd.DataFrame):
        self.prefix = bfile_prefix(prefix)
        self.fam, self.bim = fam, bim
        self.n_written = 0

    def _path(self, ext: str) -> Path:
        return self.prefix.with_name(self.prefix.name + ext)

    def _tmp(self, ext: str) -> Path:
        return self.prefix.with_name(f".{self.prefix.name}{ext}.{os.getpid()}.tmp")

    def __enter__(self):
        self.prefix.parent.mkdir(parents=True, exist_ok=True)
        self._fh = open(self._tmp(".bed"), "wb")
        self._fh.write(BED_MAGIC)
        return self

    def write(self, dosage: np.ndarray) -> None:
        """Append variants: int8 A1 counts (n_block_variants, n_samples), -1 missing."""
        if dosage.shape[1] != len(self.fam):
            raise ValueError(f"block has {dosage.shape[1]} samples, .fam has {len(self.fam)}")
        self.write_packed(encode(dosage))

    def write_packed(self, packed: np.ndarray) -> None:
        """Append already packed rows: uint8 (n_block_variants, ceil(n_samples / 4))."""
        self._fh.write(np.ascontiguousarray(packed, dtype=np.uint8).tobytes())
        self.n_written += packed.shape[0]

    def __exit__(self, exc_type, exc, tb):
        self._fh.close()
        tmps = {ext: self._tmp(ext) for ext in (".bed", ".bim", ".fam")}
        try:
            if exc_type is not None:
                return False
            if self.n_written != len(self.bim):
                raise ValueError(f"wrote {self.n_written} variants, .bim has {len(self.bim)}")
            write_bim(tmps[".bim"], self.bim)
            write_fam(tmps[".fam"], self.fam)
            for ext, tmp in tmps.items():
                os.replace(tmp, self._path(ext))
            return False
        finally:
            for tmp in tmps.values():
                tmp.unlink(missing_ok=True)


def write_bfile(prefix, dosage: np.ndarray, fam: pd.DataFrame, bim: pd.DataFrame) -> None:
    """Write a whole in-memory genotype matrix int8 (n_variants, n_samples) as a trio."""
    with BedWriter(prefix, fam, bim) as w:
        w.write(dosage)


def allele_flips(bim: pd.DataFrame, row: np.ndarray, ids, effect, other, where,
                 whose: str) -> np.ndarray:
    """Orient variants found in ``bim`` to a reference's alleles.

    row: int (m,) the .bim row of each reference variant, -1 when absent; ids, effect,
    other: (m,) the reference's variant IDs and its two alleles. Returns flip: bool (m,),
    True where the .bim's A1 is ``other`` and A2 ``effect`` (an A1 count c becomes the
    effect-allele count 2 - c); False for variants that are absent or in the reference's
    orientation. A found variant whose two alleles are not the reference's is a CmixError
    naming it, the count of such variants and ``whose`` alleles they should have been.
    """
    found = row >= 0
    take = np.maximum(row, 0)
    a1 = np.where(found, bim["a1"].to_numpy(str)[take], "")
    a2 = np.where(found, bim["a2"].to_numpy(str)[take], "")
    effect, other = np.asarray(effect, dtype=str), np.asarray(other, dtype=str)
    same, swapped = (a1 == effect) & (a2 == other), (a1 == other) & (a2 == effect)
    bad = found & ~(same | swapped)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise CmixError(f"{where}: variant {ids[i]} has alleles {a1[i]}/{a2[i]}, {whose} has "
                        f"{effect[i]}/{other[i]} ({int(bad.sum())} such variants): another "
                        "allele coding or strand; harmonise the file set first")
    return swapped & found


def write_sample_ids(path, fam: pd.DataFrame, idx: np.ndarray) -> None:
    """Write samples ``fam.iloc[idx]`` as a plink2 ``#FID IID`` list (--keep, .king.cutoff
    .in.id, .mindrem.id layout; the header even when FIDs are 0). ``path`` is written
    as given: callers write to a temporary name (:func:`cmix.atomic.atomic_path`)."""
    sub = fam.iloc[np.asarray(idx, dtype=np.int64)]
    with open(path, "w") as fh:
        fh.write("#FID\tIID\n")
        fh.write("".join(f"{fid}\t{iid}\n" for fid, iid in zip(sub["fid"], sub["iid"])))
