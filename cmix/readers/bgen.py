"""BGEN imputed dosages: .bgi random access, sample matching, INFO filter.

The variants of a .bgen are listed from its .bgi index (bgenix's SQLite table
``Variant``), never by scanning the file; the genotype block of a selected variant is
read with one pread at the offset the index gives and decoded by
:mod:`cmix.readers.bgen_blocks` (layout 1 or 2, zlib, zstd or none; unphased or phased;
haploid and diploid calls), so only the selected SNPs are ever read. The dosage is the
expected count of BGEN allele 2, float32 with NaN for a missing call; as a .bim table
allele 2 is ``a1`` (the counted allele) and allele 1 is ``a2``. A variant of more than
two alleles is left out of what can be selected (:mod:`cmix.readers.usable`).

Sample order comes from the .sample file (:mod:`cmix.readers.oxford`), or without one
from the sample IDs the .bgen embeds; a target sample table (.fam) is matched to it by
ID (:func:`cmix.readers.oxford.match_sample_file`).
"""

from __future__ import annotations

import os
import sqlite3
import struct
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from ..atomic import atomic_path
from ..errors import CmixError
from ..text import input_file, read_table
from .bgen_blocks import (data_length, decode_dosage, read_header, read_variant_header,
                          variant_header)
from .oxford import check_embedded_ids, embedded_samples, match_sample_file, read_sample_file
from .plink import BIM_COLUMNS, position_columns
from .tables import Tables
from .usable import excluded_rows, find_excluded, no_exclusions


BGI_SQL = """
CREATE TABLE Variant (
  chromosome TEXT NOT NULL,
  position INT NOT NULL,
  rsid TEXT NOT NULL,
  number_of_alleles INT NOT NULL,
  allele1 TEXT NOT NULL,
  allele2 TEXT NULL,
  file_start_position INT NOT NULL,
  size_in_bytes INT NOT NULL,
  PRIMARY KEY (chromosome, position, rsid, allele1, allele2, file_start_position)
) WITHOUT ROWID;
"""


def write_bgi(bgen: str | os.PathLike, out: str | os.PathLike | None = None) -> Path:
    """Index a BGEN file (layout 1 or 2) as bgenix does: an SQLite ``.bgi`` (table
    ``Variant``).

    Reads only the variant headers (the genotype blocks are skipped by their stated
    length). Written to a temporary name and renamed. Returns the .bgi path.
    """
    bgen = input_file(bgen, "BGEN file")
    out = Path(out) if out is not None else bgen.with_name(bgen.name + ".bgi")
    head = read_header(bgen)
    rows = []
    fd = os.open(bgen, os.O_RDONLY)
    try:
        file_size = os.fstat(fd).st_size
        at = head["first_variant"]
        for _ in range(head["n_variants"]):
            try:
                _, rsid, chrom, pos, alleles, used = read_variant_header(
                    fd, at, bgen, head["layout"])
            except UnicodeDecodeError:
                raise CmixError(f"{bgen}: no variant header at byte {at} (a damaged "
                                "file)") from None
            glen, whole = data_length(fd, at + used, head)
            if not whole:
                raise CmixError(f"{bgen}: the file ends inside the variant at byte {at} "
                                "(truncated?)")
            size = used + glen
            if at + size > file_size:
                raise CmixError(f"{bgen}: the file ends inside the genotype block of "
                                f"variant {rsid!r} (byte {at}; {file_size} bytes in the "
                                "file): truncated?")
            if len(alleles) < 2:
                raise CmixError(f"{bgen}: variant {rsid!r} (byte {at}) lists "
                                f"{len(alleles)} allele(s); a BGEN variant has at least two "
                                "(plink2 refuses it too)")
            rows.append((chrom, pos, rsid, len(alleles), alleles[0], alleles[1], at, size))
            at += size
    finally:
        os.close(fd)
    with atomic_path(out) as tmp:
        con = sqlite3.connect(tmp)
        try:
            con.executescript(BGI_SQL)
            con.executemany("INSERT INTO Variant VALUES (?,?,?,?,?,?,?,?)", rows)
            con.commit()
        finally:
            con.close()
    return out


def read_bgi(bgi: Path, positions=None) -> tuple[pd.DataFrame, int]:
    """The .bgi's variants in file order, and how many it lists in all.

    Columns chrom, rsid, pos, n_alleles, allele1, allele2, start, size (int64 byte
    offset and length of each variant block), and repeated (bool: the rsid is listed
    more than once in the whole index). positions: only the variants at these base-pair
    positions (the index is queried, so memory does not grow with the chromosome's
    length; an rsid listed elsewhere too is found by one scan of the index); None = all.
    """
    select = ("SELECT chromosome, rsid, position, number_of_alleles, allele1, allele2, "
              "file_start_position, size_in_bytes FROM Variant")
    try:
        con = sqlite3.connect(f"file:{bgi}?mode=ro", uri=True)
        try:
            n_all = con.execute("SELECT COUNT(*) FROM Variant").fetchone()[0]
            if positions is None:
                rows = con.execute(select + " ORDER BY file_start_position").fetchall()
            else:
                con.execute("CREATE TEMP TABLE wanted (position INT PRIMARY KEY)")
                con.executemany("INSERT OR IGNORE INTO wanted VALUES (?)",
                                [(int(p),) for p in positions])
                rows = con.execute(select + " WHERE position IN (SELECT position FROM wanted) "
                                   "ORDER BY file_start_position").fetchall()
                con.execute("CREATE TEMP TABLE listed (rsid TEXT PRIMARY KEY)")
                con.executemany("INSERT OR IGNORE INTO listed VALUES (?)",
                                [(r[1],) for r in rows])
                repeated = {r[0] for r in con.execute(
                    "SELECT rsid FROM Variant WHERE rsid IN (SELECT rsid FROM listed) "
                    "GROUP BY rsid HAVING COUNT(*) > 1")}
        finally:
            con.close()
    except sqlite3.Error as err:
        raise CmixError(f"{bgi}: not a bgenix .bgi index ({err}); remake it with "
                        "`cmix bgen-index` or `bgenix -index`") from None
    table = pd.DataFrame(rows, columns=["chrom", "rsid", "pos", "n_alleles", "allele1",
                                        "allele2", "start", "size"])
    table["repeated"] = (table["rsid"].duplicated(keep=False) if positions is None
                         else table["rsid"].isin(repeated))
    return table, n_all


def bgi_chromosomes(bgi) -> list[str]:
    """The lowest and highest chromosome code a .bgi lists (two lookups in its primary
    key, whose first column is the chromosome), without leading zeros as the variants'
    ``chrom`` column; [] for an empty index."""
    try:
        con = sqlite3.connect(f"file:{bgi}?mode=ro", uri=True)
        try:
            codes = [r[0] for order in ("ASC", "DESC") for r in con.execute(
                f"SELECT chromosome FROM Variant ORDER BY chromosome {order} LIMIT 1")]
            return list(_strip_chrom(pd.Series(codes, dtype=str)))
        finally:
            con.close()
    except sqlite3.Error as err:
        raise CmixError(f"{bgi}: not a bgenix .bgi index ({err}); remake it with "
                        "`cmix bgen-index` or `bgenix -index`") from None


@dataclass
class BgenFile(Tables):
    """One indexed .bgen with its samples (its .sample, or the IDs it embeds), matched to
    a target sample table.

    fam: the target samples (.fam columns); sample_row: int64 (len(fam),), each one's
    row in the .bgen (-1 = not in it). bim: the .bgi's usable variants as .bim columns
    (:mod:`cmix.readers.usable`; ``excluded`` lists the others); start, size: int64
    (n_variants,) byte offset and length of each variant block; rsid: the index's rsid
    of each (the .bim ID differs for an rsid listed twice); head: the file's header
    (:func:`cmix.readers.bgen_blocks.read_header`). Each block read is checked against
    its index entry (:meth:`_checked_block`). A
    :class:`cmix.readers.sources.GenotypeSource` of expected copies; it has no hard calls.
    """
    path: Path
    fam: pd.DataFrame
    bim: pd.DataFrame
    start: np.ndarray
    size: np.ndarray
    sample_row: np.ndarray
    head: dict
    rsid: np.ndarray            # str (n_variants,) the rsid each block's header must carry
    excluded: pd.DataFrame = field(default_factory=no_exclusions)

    encoding = "fractional"          # one of cmix.readers.sources.ENCODINGS

    @property
    def file_format(self) -> str:
        return "BGEN v1.1" if self.head["layout"] == 1 else "BGEN v1.2"

    @property
    def n_bgen_samples(self) -> int:
        return self.head["n_samples"]

    @property
    def prefix(self) -> Path:
        return self.path

    @property
    def variant_file(self) -> Path:
        return self.path.with_name(self.path.name + ".bgi")

    def input_files(self) -> dict:
        """{path: "fingerprint"} of the .bgen and its .bgi (the .sample is the caller's)."""
        return {self.path: "fingerprint", self.variant_file: "fingerprint"}

    def samples_present(self) -> np.ndarray:
        """bool (n_samples,): whether each target sample is in the .bgen."""
        return self.sample_row >= 0

    def keep(self, rows: np.ndarray) -> None:
        """Keep only the variants ``rows`` (bool (n_variants,))."""
        self.bim = self.bim[rows].reset_index(drop=True)
        self.start, self.size, self.rsid = self.start[rows], self.size[rows], self.rsid[rows]

    def leave_out(self, out: np.ndarray) -> None:
        """Leave out the variants ``out`` (bool (n_variants,)) as sharing their IDs with
        variants of other files of a per-chromosome set."""
        if not out.any():
            return
        self.excluded = pd.concat([self.excluded, excluded_rows(
            self.bim, out, np.zeros(len(out), bool),
            lambda r: [f"{self.path}, byte {self.start[i]}" for i in r],
            self.excluded_input)], ignore_index=True)
        self.keep(~out)

    @property
    def excluded_input(self) -> str:
        return f"--bgen {self.path} ref-last"

    def read(self, variant_idx=None, sample_idx=None) -> np.ndarray:
        """A BGEN holds genotype probabilities, no hard calls: always CmixError."""
        raise CmixError(f"{self.path}: a BGEN holds genotype probabilities, not the hard "
                        "calls this step reads; give the array calls with --bfile or --pfile")

    def read_dosages(self, variant_idx, sample_idx=None) -> np.ndarray:
        """Expected allele-2 counts: float32 (n_selected_variants, n_selected_samples),
        NaN where missing or where the sample is not in the .bgen. Only the selected
        variants' blocks are read (one pread and one decode each)."""
        variant_idx = np.asarray(variant_idx, dtype=np.int64)
        sample_idx = np.arange(self.n_samples) if sample_idx is None else np.asarray(sample_idx)
        rows = self.sample_row[sample_idx]
        present = rows >= 0
        out = np.full((len(variant_idx), len(sample_idx)), np.nan, np.float32)
        if len(variant_idx) == 0:
            return out
        fd = os.open(self.path, os.O_RDONLY)
        try:
            file_size = os.fstat(fd).st_size
            for k, v in enumerate(variant_idx):
                block = self._checked_block(fd, int(v), file_size)
                d = decode_dosage(block, self.head, self.path, self.bim["variant_id"].iloc[v])
                out[k, present] = d[rows[present]]
        finally:
            os.close(fd)
        return out

    def _checked_block(self, fd: int, v: int, file_size: int) -> bytes:
        """The genotype data field of variant ``v`` (one pread of its whole block), after
        checking that the block at its index offset is variant ``v`` (rsid, position,
        alleles) and as long as the index says, whole inside the file. CmixError
        otherwise: an index of another file, or a damaged or truncated .bgen."""
        bgi, start, size = f"{self.path}.bgi", int(self.start[v]), int(self.size[v])
        name = self.rsid[v]
        fix = f"remake it with `cmix bgen-index {self.path}`"
        if start >= file_size:
            raise CmixError(f"{bgi}: its entry for variant {name!r} points at byte "
                            f"{start}, past the end of {self.path} ({file_size} bytes): the "
                            "index belongs to another (longer) file, or this one is cut "
                            f"short; if the .bgen is whole, {fix}")
        buf = os.pread(fd, size, start)
        try:
            try:
                _, rsid, _, pos, alleles, used = variant_header(buf, self.head["layout"])
            except (IndexError, struct.error):   # longer than the index says: read on
                _, rsid, _, pos, alleles, used = read_variant_header(fd, start, self.path,
                                                                     self.head["layout"])
        except UnicodeDecodeError:
            raise CmixError(f"{bgi}: its entry for variant {name!r} points at byte "
                            f"{start} of {self.path}, where no variant starts; the index "
                            f"belongs to another file: {fix}") from None
        except CmixError:       # the lengths read there run past the end of the file
            raise CmixError(f"{self.path}: the file ends inside the header of the variant at "
                            f"byte {start} that {bgi} lists for {name!r}: the .bgen is "
                            "cut short, or the index belongs to another file; if the .bgen "
                            f"is whole, {fix}") from None
        want = (str(name), int(self.bim["pos"].iloc[v]),
                [str(self.bim["a2"].iloc[v]), str(self.bim["a1"].iloc[v])])
        if (rsid, pos, alleles) != want:
            raise CmixError(f"{bgi}: its entry for variant {want[0]!r} (position {want[1]}, "
                            f"alleles {'/'.join(want[2])}) points at byte {start} of "
                            f"{self.path}, which holds {rsid!r} (position {pos}, alleles "
                            f"{'/'.join(alleles)}); the index does not belong to this file: "
                            f"{fix}")
        length, whole = data_length(fd, start + used, self.head)
        if not whole or start + used + length > file_size:
            raise CmixError(f"{self.path}: the file ends inside the genotype block of variant "
                            f"{want[0]!r} (byte {start}; {file_size} bytes in the file): "
                            "truncated?")
        if used + length != size:
            raise CmixError(f"{bgi}: its entry for variant {want[0]!r} gives a block of "
                            f"{size} bytes at byte {start} of {self.path}, which holds one "
                            f"of {used + length}; the index does not belong to this file: "
                            f"{fix}")
        return buf[used:]


def _strip_chrom(chrom: pd.Series) -> pd.Series:
    """'01' -> '1' (UK Biobank's BGENs write two-digit chromosome codes)."""
    return chrom.astype(str).str.replace(r"^0+(?=\d)", "", regex=True)


def _bgen_samples(path: Path, head: dict, sample) -> pd.DataFrame:
    """The samples of a .bgen in file order: its .sample's (``sample``), or without one
    the IDs it embeds. CmixError for a .sample of another size, or no sample IDs at
    all."""
    if sample is None:
        if head["sample_ids"] is None:
            raise CmixError(f"{path}: embeds no sample IDs, and no .sample file was given: "
                            "give the .sample written with it (--sample FILE)")
        return embedded_samples(head["sample_ids"])
    samples = read_sample_file(sample)
    if len(samples) != head["n_samples"]:
        raise CmixError(f"{sample}: {len(samples)} samples, but {path} holds "
                        f"{head['n_samples']}; the .sample does not belong to this .bgen")
    return samples


def open_bgen(path: str | os.PathLike, sample: str | os.PathLike | None = None,
              fam: pd.DataFrame | None = None, positions=None) -> BgenFile:
    """Open a .bgen with its .bgi (``path + '.bgi'``) and its .sample (None: the sample
    IDs the .bgen embeds).

    fam: the target sample table (default: the .bgen's own samples). positions: list
    only the variants at these positions (a store's SNPs; None = all, for selection).
    An rsid listed twice in the index (split multiallelic sites), whether or not both
    rows are listed here, gets the ID ``chrom:pos:allele1:allele2`` for all its rows,
    so IDs are unique and the same whichever positions are asked for; a variant of more
    than two alleles, or one whose ID is still not unique, is left out (``excluded``).
    Raises CmixError for a missing .bgi (saying how to make one), a .sample whose size
    or order differs from the .bgen's, or whose IDs match none of the target samples.
    """
    path = input_file(path, "BGEN file")
    bgi = path.with_name(path.name + ".bgi")
    if not bgi.is_file():
        raise CmixError(f"{path}: no index {bgi.name} beside it; cmix reads BGEN through its "
                        f"bgenix index: make one with `cmix bgen-index {path}` (or "
                        f"`bgenix -g {path} -index`)")
    head = read_header(path)
    samples = _bgen_samples(path, head, sample)
    index, n_indexed = read_bgi(bgi, positions)
    if n_indexed != head["n_variants"]:
        raise CmixError(f"{bgi}: indexes {n_indexed} variants, {path} holds "
                        f"{head['n_variants']}; the index is stale: remake it with "
                        f"`cmix bgen-index {path}`")
    chrom = _strip_chrom(index["chrom"])
    ids = index["rsid"].astype(str)
    dup = index["repeated"]
    if dup.any():
        ids = ids.where(~dup, chrom + ":" + index["pos"].astype(str) + ":" + index["allele1"]
                        + ":" + index["allele2"].astype(str))
    bim = pd.DataFrame({"chrom": chrom, "variant_id": ids,
                        "cm": 0.0, "pos": index["pos"].astype(np.int64),
                        "a1": index["allele2"].astype(str), "a2": index["allele1"]})[BIM_COLUMNS]
    start = index["start"].to_numpy(np.int64)
    plink2_input = f"--bgen {path} ref-last" + (f" --sample {sample}" if sample else "")
    keep, excluded = find_excluded(bim, (index["n_alleles"] != 2).to_numpy(),
                                   lambda r: [f"{path}, byte {start[i]}" for i in r],
                                   plink2_input)
    multi = (~keep) & (index["n_alleles"] != 2).to_numpy()
    excluded.loc[multi[~keep], "alleles"] = [      # the index lists the first two alleles
        f"{a}, and {k - 2} more" for a, k in zip(excluded["alleles"][multi[~keep]],
                                                 index["n_alleles"][multi])]
    target = samples if fam is None else fam
    rows = match_sample_file(target, samples, sample if sample is not None else path)
    if sample is not None:
        check_embedded_ids(path, head["sample_ids"], samples, sample)
    src = BgenFile(path, target.reset_index(drop=True), bim, start,
                   index["size"].to_numpy(np.int64), rows, head,
                   index["rsid"].astype(str).to_numpy(), excluded)
    src.keep(keep)
    return src

def read_mfi(path: str | os.PathLike) -> pd.DataFrame:
    """A UK Biobank mfi table (headerless, tab-separated: alternate_id rsid position
    allele1 allele2 maf minor_allele info): columns rsid, pos, allele1, allele2, info."""
    path = input_file(path, "mfi (imputation INFO) file")
    raw = read_table(path, "mfi (imputation INFO) file", sep="\t", header=None, dtype=str,
                     na_filter=False, engine="c")
    if raw.shape[1] < 8:
        raise CmixError(f"{path}: expected 8 tab-separated columns (alternate_id rsid "
                        f"position allele1 allele2 maf minor_allele info), found {raw.shape[1]}")
    info = pd.to_numeric(raw[7], errors="coerce")
    if info.isna().any():
        i = int(np.flatnonzero(info.isna().to_numpy())[0])
        raise CmixError(f"{path}, line {i + 1}, column 8: expected an INFO score, found "
                        f"{raw[7].iloc[i]!r}")
    pos, _ = position_columns(raw[2], None, path, lambda i: i + 1, ("3", ""))
    return pd.DataFrame({"rsid": raw[1], "pos": pos, "allele1": raw[3], "allele2": raw[4],
                         "info": info.to_numpy()})


def info_scores(bim: pd.DataFrame, mfi_files) -> np.ndarray:
    """INFO of each variant of ``bim`` (a BGEN source's table): float64, NaN where the
    mfi files (a list of paths) do not list it; variants are matched by rsid, position
    and alleles."""
    tables = [read_mfi(p) for p in mfi_files]
    table = pd.concat(tables, ignore_index=True)
    key_m = (table["rsid"] + ":" + table["pos"].astype(str) + ":" + table["allele1"] + ":"
             + table["allele2"])
    key_b = (bim["variant_id"] + ":" + bim["pos"].astype(str) + ":" + bim["a2"] + ":"
             + bim["a1"])
    clash = key_m.duplicated(keep=False) & ~pd.DataFrame(
        {"k": key_m, "i": table["info"]}).duplicated(keep=False)
    if clash.any():       # one variant, two INFO scores: which one is meant cannot be told
        key = key_m[clash].iloc[0]
        raise CmixError(f"{', '.join(map(str, mfi_files))}: variant {key} (rsid:position:"
                        f"allele1:allele2) is listed with INFO scores "
                        f"{', '.join(map(str, table['info'][key_m == key]))}")
    first = ~key_m.duplicated()
    table = table[first]
    pos = pd.Index(key_m[first]).get_indexer(key_b)
    return np.where(pos >= 0, table["info"].to_numpy()[np.maximum(pos, 0)], np.nan)
