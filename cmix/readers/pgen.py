"""PLINK 2 genotypes (.pgen/.pvar/.psam): validate, read lazily through pgenlib.

pgenlib is the plink2 authors' own reader. Genotypes come out as the .bed reader's do:
int8 counts of the ALT allele (the .bim column-5 allele A1 that plink2 writes for ALT),
-1 for a missing call; dosages as float32 ALT counts, NaN for missing. The .pvar and
.psam become .bim- and .fam-like tables (columns of :data:`cmix.readers.plink.BIM_COLUMNS` and
:data:`cmix.readers.plink.FAM_COLUMNS`), so every step handles a .pgen as it handles a .bed.

Only biallelic variants are read: a multiallelic site (a comma in ALT) and every
variant whose ID another carries too are left out of what can be selected
(:mod:`cmix.readers.usable`).
Shapes: genotype arrays are (n_variants, n_samples), variant-major like the file.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import pgenlib

from ..errors import CmixError
from ..text import check_unique_header, input_file, read_table, text_lines
from .plink import (BIM_COLUMNS, FAM_COLUMNS, encode, first_duplicate_lines, position_columns,
                    read_fam, variant_blocks)
from .tables import PlinkTrio, check_own_samples, variant_table
from .usable import find_excluded, no_exclusions


PGEN_MAGIC = b"\x6c\x1b"
PGEN_MISSING = -9          # pgenlib's int8 missing code
READ_BLOCK = 1024          # variants decoded per pgenlib call


def _header_lines(path: Path, prefix: str) -> tuple[int, str | None]:
    """(number of lines starting with ``prefix``'s '##' meta block, the '#' header line)."""
    n = 0
    for _, line in text_lines(path, f"{path.suffix} file"):
        if line.startswith("##"):
            n += 1
            continue
        return n, line if line.startswith(prefix) else None
    return n, None


def read_pvar(path: str | os.PathLike) -> pd.DataFrame:
    """Read a .pvar (or a .bim-style headerless one; plain, gzip or zstd: a .pvar.zst)
    into .bim columns: chrom, variant_id, a1 (= ALT), a2 (= REF) as str; cm (float64, 0
    without a CM column), pos (int64). Every row: multiallelic sites (ALT with a comma)
    and duplicate IDs included (:func:`open_pfile` leaves them out of what can be
    selected). Missing columns are errors naming the line; fields past the header's
    columns are ignored. ``bim.attrs["header_lines"]``: the lines above the first
    variant."""
    path = input_file(path, ".pvar file")
    n_meta, header = _header_lines(path, "#CHROM")
    if header is None:   # .bim-style .pvar
        from .plink import read_bim
        bim = read_bim(path)
        bim.attrs["header_lines"] = 0
        return bim
    names = header.lstrip("#").split("\t")
    check_unique_header(names, path, ".pvar file", n_meta + 1)
    need = ["CHROM", "POS", "ID", "REF", "ALT"]
    lacking = [c for c in need if c not in names]
    if lacking:
        raise CmixError(f"{path}, line {n_meta + 1}: header lacks {', '.join(lacking)} "
                        "(expected #CHROM POS ID REF ALT ...)")
    skip = n_meta + 1
    raw = read_table(path, ".pvar file", empty=pd.DataFrame(columns=names, dtype=str),
                     sep="\t", header=None, names=names, usecols=range(len(names)),
                     skiprows=skip, dtype=str, na_filter=False, engine="c")
    if len(raw) and (raw[names[-1]] == "").any():
        line = int(np.flatnonzero((raw[names[-1]] == "").to_numpy())[0]) + skip + 1
        raise CmixError(f"{path}, line {line}: expected {len(names)} tab-separated "
                        f"columns ({' '.join(names)}), found fewer")
    pos, cm = position_columns(raw["POS"], raw["CM"] if "CM" in raw else None, path,
                               lambda i: i + skip + 1, ("POS", "CM"))
    bim = pd.DataFrame({"chrom": raw["CHROM"], "variant_id": raw["ID"], "cm": cm,
                        "pos": pos, "a1": raw["ALT"], "a2": raw["REF"]})[BIM_COLUMNS]
    bim.attrs["header_lines"] = skip
    return bim


def read_psam(path: str | os.PathLike) -> pd.DataFrame:
    """Read a .psam (or a .fam-style headerless one) into .fam columns.

    Without a FID column the FID is 0, as plink2 reads it and writes it in ID lists (a
    one-column --keep list names such a sample: :func:`cmix.genotypes.selection.listed_rows`). Fields
    past the header's columns are ignored, as plink2 ignores them.
    PAT/MAT default to 0, SEX to 0, the phenotype to -9.
    """
    path = input_file(path, ".psam file")
    first = next((line for _, line in text_lines(path, ".psam file")), "")
    if not first.startswith("#"):
        return read_fam(path)
    names = first.lstrip("#").split()
    check_unique_header(names, path, ".psam file")
    if "IID" not in names:
        raise CmixError(f"{path}, line 1: header has no IID column (expected #FID IID ... or "
                        "#IID ...)")
    raw = read_table(path, ".psam file", empty=pd.DataFrame(columns=names, dtype=str),
                     sep=r"\s+", header=None, names=names, usecols=range(len(names)),
                     skiprows=1, dtype=str, na_filter=False, engine="c")
    if len(raw) and (raw[names[-1]] == "").any():
        line = int(np.flatnonzero((raw[names[-1]] == "").to_numpy())[0]) + 2
        raise CmixError(f"{path}, line {line}: expected {len(names)} columns "
                        f"({' '.join(names)}), found fewer")
    fam = pd.DataFrame({
        "fid": raw["FID"] if "FID" in raw else "0",       # plink2's FID of a sample without one
        "iid": raw["IID"],
        "father": raw["PAT"] if "PAT" in raw else "0",
        "mother": raw["MAT"] if "MAT" in raw else "0",
        "sex": raw["SEX"].replace({"NA": "0"}) if "SEX" in raw else "0",
        "phenotype": "-9",
    })[FAM_COLUMNS].astype(str)
    dup = first_duplicate_lines(fam["fid"] + "\t" + fam["iid"])
    if dup:
        raise CmixError(f"{path}: duplicate sample ID on lines {dup[0] + 1} and {dup[1] + 1}; "
                        "every FID/IID pair must be unique")
    return fam


def pfile_prefix(path: str | os.PathLike) -> Path:
    """Accept ``data/cohort`` or ``data/cohort.pgen`` (or .pvar/.psam); return the prefix."""
    p = Path(path)
    return p.with_suffix("") if p.suffix in (".pgen", ".pvar", ".psam") else p


@dataclass
class Pfile(PlinkTrio):
    """An opened, validated .pgen/.pvar/.psam trio (tables in memory, genotypes lazy).

    ``fam``/``bim`` hold the .psam/.pvar as .fam/.bim columns. ``psam`` may be a shared
    sample file of another name (a per-chromosome set with one .psam). A
    :class:`cmix.readers.sources.GenotypeSource`: hard calls, and dosages where the
    .pgen holds them.
    """
    prefix: Path
    fam: pd.DataFrame
    bim: pd.DataFrame
    file_row: np.ndarray | None = None
    excluded: pd.DataFrame = field(default_factory=no_exclusions)
    header_lines: int = 0

    file_format = "PLINK 2 .pgen"
    encoding = "hard calls and dosages"    # one of cmix.readers.sources.ENCODINGS
    EXTENSIONS = (".pgen", ".pvar", ".psam")
    PLINK2_FLAG = "--pfile"

    @property
    def pgen_path(self) -> Path:
        return self.beside(".pgen")

    def reader(self, sample_idx=None):
        """A pgenlib.PgenReader over the sorted ``sample_idx`` (None = all samples)."""
        subset = None if sample_idx is None else np.asarray(sample_idx, dtype=np.uint32)
        try:
            return pgenlib.PgenReader(bytes(self.pgen_path), raw_sample_ct=self.n_samples,
                                      variant_ct=self.n_file_variants, sample_subset=subset)
        except RuntimeError as err:
            msg = err.args[0] if err.args else err
            msg = (msg.decode(errors="replace") if isinstance(msg, bytes) else str(msg)).strip()
            raise CmixError(f"{self.pgen_path}: does not match the .pvar ({self.n_file_variants} "
                            f"variants) and .psam ({self.n_samples} samples); pgenlib: "
                            f"{msg}") from None

    def _damaged(self, err: RuntimeError, first: int, last: int) -> CmixError:
        """The CmixError for a pgenlib read failure among variants first..last (0-based)."""
        msg = err.args[0] if err.args else err
        msg = (msg.decode(errors="replace") if isinstance(msg, bytes) else str(msg)).strip()
        return CmixError(f"{self.pgen_path}: cannot read variants {first + 1}-{last + 1} of "
                         f"{self.n_file_variants} (pgenlib: {msg}); the file is truncated or "
                         "damaged: rewrite it (plink2 --make-pgen)")

    def _read(self, variant_idx, sample_idx, dosages: bool) -> np.ndarray:
        variant_idx = self.file_rows(variant_idx)
        n = self.n_samples if sample_idx is None else len(sample_idx)
        if sample_idx is None:
            order, sorted_idx = None, None
        else:
            sample_idx = np.asarray(sample_idx, dtype=np.int64)
            order = np.argsort(sample_idx, kind="stable")
            sorted_idx = sample_idx[order]
            if len(np.unique(sorted_idx)) != len(sorted_idx):
                raise ValueError("sample_idx holds a sample twice")
        out = np.empty((len(variant_idx), n), np.float32 if dosages else np.int8)
        if len(variant_idx) == 0 or n == 0:
            return out
        reader = self.reader(sorted_idx)
        try:
            for s in range(0, len(variant_idx), READ_BLOCK):
                vi = variant_idx[s:s + READ_BLOCK].astype(np.uint32)
                try:
                    if dosages:
                        reader.read_dosages_list(vi, out[s:s + len(vi)])
                    else:
                        reader.read_list(vi, out[s:s + len(vi)])
                except RuntimeError as err:
                    raise self._damaged(err, int(vi.min()), int(vi.max())) from None
        finally:
            reader.close()
        if dosages:
            out[out < 0] = np.nan
        else:
            out[out == PGEN_MISSING] = -1
        if order is not None:
            unsorted = np.empty_like(out)
            unsorted[:, order] = out
            out = unsorted
        return out

    def read(self, variant_idx=None, sample_idx=None) -> np.ndarray:
        """ALT counts: int8 (n_selected_variants, n_selected_samples), -1 missing.
        sample_idx may be unsorted; columns come out in its order."""
        vi = np.arange(self.n_variants) if variant_idx is None else variant_idx
        return self._read(vi, sample_idx, dosages=False)

    def read_dosages(self, variant_idx, sample_idx=None) -> np.ndarray:
        """ALT dosages (plink2's, 1/16384 steps): float32 (n_variants, n_samples), NaN
        missing. Equal to :meth:`read` where the file holds hard calls only."""
        return self._read(variant_idx, sample_idx, dosages=True)

    def may_hold_dosages(self) -> bool:
        """Whether the .pgen's header allows dosages: storage modes 0x03/0x04 (fixed
        width with dosages), or 0x10/0x11 with 8-bit variant record types (header
        control bits 0-3 of 4-7, or 12/14). False: hard calls only."""
        with open(self.pgen_path, "rb") as fh:
            head = fh.read(12)
        if head[2:3] in (b"\x03", b"\x04"):
            return True
        return (head[2:3] in (b"\x10", b"\x11") and len(head) == 12
                and head[11] & 15 in (4, 5, 6, 7, 12, 14))

    def _read_rows(self, reader, start: int, stop: int, out: np.ndarray,
                   dosages: bool) -> None:
        """Read the variants start..stop-1 (bim rows) into ``out`` (float32 dosages or
        int8 calls, pgenlib's missing codes): one range read where no variant was left
        out, else a list read of their file rows."""
        try:
            if self.file_row is None:
                (reader.read_dosages_range if dosages else reader.read_range)(start, stop, out)
            else:
                rows = self.file_row[start:stop].astype(np.uint32)
                (reader.read_dosages_list if dosages else reader.read_list)(rows, out)
        except RuntimeError as err:
            first, last = self.file_rows([start, stop - 1])
            raise self._damaged(err, int(first), int(last)) from None

    def dosage_sums(self, sample_idx) -> tuple[np.ndarray, np.ndarray]:
        """Per variant, over the samples ``sample_idx`` (sorted): the sum of their ALT
        dosages (float64, exact: dosages are multiples of 1/16384) and how many have one
        (int64), read in blocks by one pgenlib reader."""
        alt = np.zeros(self.n_variants)
        n_obs = np.zeros(self.n_variants, np.int64)
        if len(sample_idx) == 0:
            return alt, n_obs
        block = max(1, min(READ_BLOCK, (32 << 20) // (4 * len(sample_idx))))
        reader = self.reader(sample_idx)
        try:
            for s, e in variant_blocks(self.n_variants, block):
                d = np.empty((e - s, len(sample_idx)), np.float32)
                self._read_rows(reader, s, e, d, dosages=True)
                seen = d >= 0
                alt[s:e] = np.where(seen, d, 0).sum(axis=1, dtype=np.float64)
                n_obs[s:e] = seen.sum(axis=1)
        finally:
            reader.close()
        return alt, n_obs

    def packed_rows(self, variant_idx) -> np.ndarray:
        """The variants as .bed bytes (A1 = ALT counts): uint8 (k, bytes_per_variant)."""
        variant_idx = np.asarray(variant_idx, dtype=np.int64)
        out = np.empty((len(variant_idx), self.bytes_per_variant), np.uint8)
        for s in range(0, len(variant_idx), READ_BLOCK):
            out[s:s + READ_BLOCK] = encode(self.read(variant_idx[s:s + READ_BLOCK]))
        return out

    def packed_blocks(self, block: int):
        """Yield (start, stop, uint8 .bed bytes of variants start..stop-1, flat)."""
        block = max(1, min(block, READ_BLOCK * 4))
        reader = self.reader()
        try:
            for s, e in variant_blocks(self.n_variants, block):
                g = np.empty((e - s, self.n_samples), np.int8)
                self._read_rows(reader, s, e, g, dosages=False)
                g[g == PGEN_MISSING] = -1
                yield s, e, encode(g).ravel()
        finally:
            reader.close()


def open_pfile(path: str | os.PathLike, psam: str | os.PathLike | None = None) -> Pfile:
    """Open and validate a .pgen/.pvar/.psam trio (``psam``: a shared sample file; the
    .pvar may be a zstd-compressed .pvar.zst, as ``plink2 --make-pgen vzs`` writes it).

    Checks the three files exist, the .pgen magic bytes, and (through pgenlib) that the
    .pgen agrees with the .pvar/.psam counts. Multiallelic sites and variants sharing
    an ID are left out of ``bim`` and listed in ``excluded`` (:mod:`cmix.readers.usable`).
    """
    prefix = pfile_prefix(path)
    pgen = prefix.with_name(prefix.name + ".pgen")
    psam_path = Path(psam) if psam is not None else prefix.with_name(prefix.name + ".psam")
    input_file(pgen, f"the .pgen of the PLINK 2 trio with prefix {prefix}")
    with open(pgen, "rb") as fh:
        magic = fh.read(3)
    if magic[:2] != PGEN_MAGIC:
        raise CmixError(f"{pgen}: not a PLINK 2 .pgen file (first bytes {magic[:2].hex()}, "
                        "expected 6c1b)")
    pvar = variant_table(prefix, ".pvar")
    bim = read_pvar(pvar)
    skip = bim.attrs.get("header_lines", 0)
    multi = bim["a1"].str.contains(",", regex=False).to_numpy()      # ALT lists several
    flags = f"--pfile {prefix}{' vzs' if pvar.name.endswith('.zst') else ''}"
    keep, excluded = find_excluded(bim, multi, lambda r: [f"{pvar}, line {i + 1 + skip}"
                                                          for i in r], flags)
    fam = read_psam(psam_path)
    if psam is not None:
        check_own_samples(prefix, ".psam", fam, psam_path, read_psam)
    pf = Pfile(prefix, fam, bim[keep].reset_index(drop=True),
               None if keep.all() else np.flatnonzero(keep).astype(np.int64), excluded, skip)
    if magic[2:3] in (b"\x01", b"\x02"):   # .bed-like modes: exact size check
        expected = 3 + pf.n_file_variants * pf.bytes_per_variant
        if pgen.stat().st_size != expected:
            raise CmixError(f"{pgen}: size {pgen.stat().st_size} bytes does not match the "
                            f".pvar ({pf.n_file_variants} variants) and .psam ({pf.n_samples} "
                            "samples)")
    pf.reader().close()   # pgenlib checks the header against the counts
    return pf
