"""BGEN v1.2 imputed dosages: .bgi random access, .sample matching, INFO filter.

The variants of a .bgen are listed from its .bgi index (bgenix's SQLite table
``Variant``), never by scanning the file; the genotype probabilities of a selected
variant are decoded by cbgen (the C bgen library's Python binding) from the offset the
index gives, so only the selected SNPs are ever read. The dosage is the expected count
of BGEN allele 2, ``P(het) + 2 P(hom allele 2)``, float32 with NaN for a missing call;
as a .bim table allele 2 is ``a1`` (the counted allele) and allele 1 is ``a2``. Only
unphased biallelic variants are read (UK Biobank's imputed data); a haploid call (males
on chrX as ``plink2 --export bgen-1.2`` writes them) counts ``2 P(allele 2)``, as plink2
reads it.

Sample order comes from the .sample file (two header lines, ``ID_1 ID_2 ...``, or
``ID ...`` in the sample-v2 layout); a target sample table (.fam) is matched to it by ID:
by (ID_1, ID_2) = (FID, IID), or by ID_2 = IID alone when every ID_1 is 0 (as plink2
writes it), or, where no IID matches, by the one ID = FID_IID (as plink2 writes a
sample-v2 file of samples with family IDs).
"""

from __future__ import annotations

import os
import sqlite3
import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from ..errors import CmixError
from ..text import input_file, read_table, text_lines
from .plink import BIM_COLUMNS, FAM_COLUMNS, Tables, position_columns

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


def _header(path: Path) -> dict:
    """The BGEN header: {first_variant, n_variants, n_samples, compression, layout}."""
    with open(path, "rb") as fh:
        head = fh.read(24)
        if len(head) < 24:
            raise CmixError(f"{path}: not a BGEN file (shorter than its header)")
        offset, hlen, m, n, magic = struct.unpack("<IIII4s", head[:20])
        if magic not in (b"bgen", b"\x00\x00\x00\x00"):
            raise CmixError(f"{path}: not a BGEN file (bytes 16-19 are {magic!r}, expected "
                            "the BGEN magic b'bgen')")
        size = os.fstat(fh.fileno()).st_size
        if hlen < 20 or offset < hlen or 4 + offset > size:
            raise CmixError(f"{path}: not a BGEN file, or a truncated one (its header gives "
                            f"a header length of {hlen} and the first variant at byte "
                            f"{4 + offset}; the file has {size} bytes)")
        fh.seek(4 + hlen - 4)
        flags = struct.unpack("<I", fh.read(4))[0]
        sample_ids = None
        if flags >> 31:             # a sample identifier block follows the header
            sample_ids = _sample_block(fh.read(max(0, offset - hlen)), n, path)
    layout = (flags >> 2) & 0xF
    if layout != 2:
        raise CmixError(f"{path}: BGEN layout {layout}; cmix reads BGEN v1.2 (layout 2), "
                        "as UK Biobank ships and `plink2 --export bgen-1.2` writes")
    if flags & 3 == 0:
        raise CmixError(f"{path}: its genotype blocks are uncompressed (BGEN compression "
                        "flag 0), which the decoder cmix uses cannot read; cmix reads zlib- "
                        "or zstd-compressed BGEN v1.2/v1.3, as UK Biobank ships and plink2 "
                        f"writes: recompress it with `plink2 --bgen {path} ref-last --sample "
                        "FILE.sample --export bgen-1.2`")
    return {"first_variant": 4 + offset, "n_variants": m, "n_samples": n,
            "compression": flags & 3, "layout": layout, "sample_ids": sample_ids}


def _sample_block(buf: bytes, n: int, path) -> list[str]:
    """The sample IDs a BGEN embeds after its header (flag bit 31): uint32 block length,
    uint32 count, then a uint16 length and the bytes of each ID."""
    try:
        length, count = struct.unpack_from("<II", buf, 0)
        at, ids = 8, []
        for _ in range(count):
            text, at = _prefixed_text(buf, at, "<H")
            ids.append(text)
    except (IndexError, struct.error, UnicodeDecodeError):
        raise CmixError(f"{path}: its sample identifier block is cut short or damaged "
                        "(truncated file?)") from None
    if count != n:
        raise CmixError(f"{path}: its sample identifier block lists {count} samples, its "
                        f"header {n}; the file is damaged")
    return ids


def _prefixed_text(buf: bytes, at: int, length_format: str) -> tuple[str, int]:
    """A UTF-8 string stored as its byte length (struct ``length_format``, "<H" or "<I")
    then its bytes, at ``at`` in ``buf``: (text, offset after it). IndexError or
    struct.error when ``buf`` is too short; UnicodeDecodeError for bytes that are not
    UTF-8."""
    (k,) = struct.unpack_from(length_format, buf, at)
    start = at + struct.calcsize(length_format)
    if start + k > len(buf):
        raise IndexError
    return buf[start:start + k].decode(), start + k


def _variant_header(buf: bytes, at: int = 0):
    """Parse a layout-2 variant identifying block from ``buf`` at ``at``.

    Returns (varid, rsid, chrom, pos, alleles, end offset in buf); raises IndexError
    or struct.error when ``buf`` is too short.
    """
    out = []
    for _ in range(3):
        text, at = _prefixed_text(buf, at, "<H")
        out.append(text)
    pos, n_alleles = struct.unpack_from("<IH", buf, at)
    at += 6
    alleles = []
    for _ in range(n_alleles):
        text, at = _prefixed_text(buf, at, "<I")
        alleles.append(text)
    return out[0], out[1], out[2], pos, alleles, at


def _read_variant_header(fd: int, start: int, path):
    """The identifying block of the variant at file offset ``start`` (one or two preads).
    Raises CmixError naming ``path`` when the file ends inside it, or UnicodeDecodeError
    when the bytes there are not a variant header."""
    size = 1024
    while True:
        buf = os.pread(fd, size, start)
        try:
            return _variant_header(buf)
        except (IndexError, struct.error):
            if len(buf) < size:
                raise CmixError(f"{path}: the file ends inside the header of the variant at "
                                f"byte {start} (truncated?)") from None
            size *= 16


def write_bgi(bgen: str | os.PathLike, out: str | os.PathLike | None = None) -> Path:
    """Index a BGEN v1.2 file as bgenix does: an SQLite ``.bgi`` (table ``Variant``).

    Reads only the variant headers (the genotype blocks are skipped by their stated
    length). Written to a temporary name and renamed. Returns the .bgi path.
    """
    from ..atomic import atomic_path

    bgen = input_file(bgen, "BGEN file")
    out = Path(out) if out is not None else bgen.with_name(bgen.name + ".bgi")
    head = _header(bgen)
    rows = []
    fd = os.open(bgen, os.O_RDONLY)
    try:
        file_size = os.fstat(fd).st_size
        at = head["first_variant"]
        for _ in range(head["n_variants"]):
            try:
                _, rsid, chrom, pos, alleles, used = _read_variant_header(fd, at, bgen)
            except UnicodeDecodeError:
                raise CmixError(f"{bgen}: no variant header at byte {at} (a damaged "
                                "file)") from None
            raw = os.pread(fd, 4, at + used)
            if len(raw) < 4:
                raise CmixError(f"{bgen}: the file ends inside the variant at byte {at} "
                                "(truncated?)")
            (glen,) = struct.unpack("<I", raw)
            size = used + 4 + glen
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


def read_sample_file(path: str | os.PathLike) -> pd.DataFrame:
    """A BGEN .sample file as .fam columns (fid = ID_1, iid = ID_2), in file order. The
    sample-v2 layout (``plink2 --export bgen-1.2 sample-v2``: one ``ID`` column) reads
    as plink2 reads it: IID = the whole ID, FID 0."""
    path = input_file(path, "BGEN .sample file")
    lines = text_lines(path, "BGEN .sample file")
    head = next(lines, (1, ""))[1].split()
    types = next(lines, (2, ""))[1].split()
    single = head[:1] == ["ID"]
    if not single and head[:2] != ["ID_1", "ID_2"]:
        raise CmixError(f"{path}, line 1: expected a .sample header starting ID_1 ID_2 (or "
                        f"ID, sample-v2), found {' '.join(head[:2])!r}")
    n_ids = 1 if single else 2
    if types[:n_ids] != ["0"] * n_ids:
        raise CmixError(f"{path}, line 2: expected the column types line (starting "
                        f"{' '.join(['0'] * n_ids)}, e.g. `{' '.join(['0'] * n_ids)} 0 D`), "
                        "found another line: a .sample has two header lines before its "
                        "samples")
    names = ["iid"] if single else ["fid", "iid"]
    raw = read_table(path, "BGEN .sample file",
                     empty=pd.DataFrame({n: pd.Series(dtype=str) for n in names}),
                     sep=r"\s+", header=None, skiprows=2, usecols=list(range(n_ids)),
                     dtype=str, names=names, na_filter=False, engine="c")
    if single:
        raw.insert(0, "fid", "0")
    fam = raw.assign(father="0", mother="0", sex="0", phenotype="-9")[FAM_COLUMNS]
    return fam


def match_sample_file(fam: pd.DataFrame, sample: pd.DataFrame, path) -> np.ndarray:
    """Row of ``sample`` (.sample file order) for each ``fam`` row: int64, -1 where the
    sample is not in the .sample file. Raises CmixError when no sample matches."""
    by_iid = (sample["fid"] == "0").all()
    key_s = sample["iid"] if by_iid else sample["fid"] + "\t" + sample["iid"]
    key_f = fam["iid"] if by_iid else fam["fid"] + "\t" + fam["iid"]
    if key_s.duplicated().any():
        i = int(np.flatnonzero(key_s.duplicated().to_numpy())[0])
        raise CmixError(f"{path}, line {i + 3}: a sample ID listed twice")
    rows = pd.Index(key_s).get_indexer(key_f)
    if by_iid and len(fam) and (rows < 0).all():
        # one ID per sample that plink2 wrote as FID_IID (sample-v2, or ID_2 so written)
        rows = pd.Index(key_s).get_indexer(fam["fid"] + "_" + fam["iid"])
    if len(fam) and (rows < 0).all():
        raise CmixError(
            f"{path}: none of the {len(fam)} samples of the .fam is in this .sample file "
            f"({len(sample)} samples; matched by {'ID_2 = IID' if by_iid else 'ID_1 ID_2 = FID IID'}): "
            "the .sample does not belong to these genotype calls (another application's "
            "IDs, or the ID columns swapped?)")
    return rows.astype(np.int64)


def _check_embedded_ids(path, embedded, samples: pd.DataFrame, sample_path) -> None:
    """Compare the sample IDs a .bgen embeds (None: it embeds none) with its .sample
    rows, in order. An embedded ID may be the .sample's ID_2, its ID_1, or
    ``ID_1_ID_2`` (plink2 --export bgen-1.2 with family IDs). Raises CmixError naming
    the first .sample line that differs (no IDs in the message)."""
    if embedded is None:
        return
    got = np.asarray(embedded, dtype=object)
    fid, iid = samples["fid"].to_numpy(object), samples["iid"].to_numpy(object)
    candidates = [iid, fid, fid + "_" + iid]
    if any((got == c).all() for c in candidates):
        return
    # the ID form that shares the most IDs with the embedded ones (as sets: in another
    # order no position may match)
    best = max(candidates, key=lambda c: (len(set(got) & set(c)), int((got == c).sum())))
    i = int(np.flatnonzero(got != best)[0])
    same_set = set(got) == set(best)
    raise CmixError(f"{sample_path}, line {i + 3}: not the sample {path} holds at position "
                    f"{i + 1} (the .bgen embeds its sample IDs; "
                    + ("the .sample lists the same samples in another order" if same_set
                       else f"{int((got != best).sum())} of {len(got)} differ")
                    + "): the dosages would go to other people; use the .sample written "
                    "with this .bgen")


@dataclass
class BgenFile(Tables):
    """One indexed .bgen with its .sample, matched to a target sample table.

    fam: the target samples (.fam columns); sample_row: int64 (len(fam),), each one's
    row in the .bgen (-1 = not in it). bim: the .bgi's variants as .bim columns;
    start: int64 (n_variants,) byte offset of each variant block; rsid: the index's
    rsid of each (the .bim ID differs for an rsid listed twice). Each block read is
    checked against its index entry (:meth:`_check_variant`). A
    :class:`cmix.genotypes.sources.GenotypeSource` of expected copies; it has no hard calls.
    """

    path: Path
    fam: pd.DataFrame
    bim: pd.DataFrame
    start: np.ndarray
    sample_row: np.ndarray
    n_bgen_samples: int
    rsid: np.ndarray = None     # str (n_variants,) the rsid each block's header must carry

    file_format = "BGEN v1.2"
    encoding = "fractional"          # one of cmix.genotypes.sources.ENCODINGS

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

    def read(self, variant_idx=None, sample_idx=None) -> np.ndarray:
        """A BGEN holds genotype probabilities, no hard calls: always CmixError."""
        raise CmixError(f"{self.path}: a BGEN holds genotype probabilities, not the hard "
                        "calls this step reads; give the array calls with --bfile or --pfile")


    def read_dosages(self, variant_idx, sample_idx=None) -> np.ndarray:
        """Expected allele-2 counts: float32 (n_selected_variants, n_selected_samples),
        NaN where missing or where the sample is not in the .bgen. Only the selected
        variants' blocks are read (one header pread and one decode each)."""
        import cbgen

        variant_idx = np.asarray(variant_idx, dtype=np.int64)
        sample_idx = np.arange(self.n_samples) if sample_idx is None else np.asarray(sample_idx)
        rows = self.sample_row[sample_idx]
        present = rows >= 0
        out = np.full((len(variant_idx), len(sample_idx)), np.nan, np.float32)
        if len(variant_idx) == 0:
            return out
        fd = os.open(self.path, os.O_RDONLY)
        try:
            size = os.fstat(fd).st_size
            with cbgen.bgen_file(self.path) as bg:
                for k, v in enumerate(variant_idx):
                    start = int(self.start[v])
                    used = self._check_variant(fd, v, start, size)
                    try:
                        gt = bg.read_genotype(start + used, precision=32)
                    except RuntimeError:
                        raise CmixError(
                            f"{self.path}: the genotype block of variant {self.rsid[v]!r} "
                            f"(byte {start}) cannot be decoded: the file is damaged "
                            "(plink2 calls it an invalid compressed SNP block)") from None
                    d = _expected_copies(gt, self.path, self.bim["variant_id"].iloc[v])
                    out[k, present] = d[rows[present]]
        finally:
            os.close(fd)
        return out

    def _check_variant(self, fd: int, v: int, start: int, size: int) -> int:
        """Check that the block at ``start`` is variant ``v`` of the index (rsid,
        position, alleles) and lies whole inside the file; returns the length of its
        identifying block. CmixError otherwise: an index of another file, or a damaged or
        truncated .bgen."""
        bgi = f"{self.path}.bgi"
        fix = f"remake it with `cmix bgen-index {self.path}`"
        if start >= size:
            raise CmixError(f"{bgi}: its entry for variant {self.rsid[v]!r} points at byte "
                            f"{start}, past the end of {self.path} ({size} bytes): the "
                            "index belongs to another (longer) file, or this one is cut "
                            f"short; if the .bgen is whole, {fix}")
        try:
            _, rsid, _, pos, alleles, used = _read_variant_header(fd, start, self.path)
        except UnicodeDecodeError:
            raise CmixError(f"{bgi}: its entry for variant {self.rsid[v]!r} points at byte "
                            f"{start} of {self.path}, where no variant starts; the index "
                            f"belongs to another file: {fix}") from None
        except CmixError:       # the lengths read there run past the end of the file
            raise CmixError(f"{self.path}: the file ends inside the header of the variant at "
                            f"byte {start} that {bgi} lists for {self.rsid[v]!r}: the .bgen is "
                            "cut short, or the index belongs to another file; if the .bgen "
                            f"is whole, {fix}") from None
        want = (str(self.rsid[v]), int(self.bim["pos"].iloc[v]),
                [str(self.bim["a2"].iloc[v]), str(self.bim["a1"].iloc[v])])
        if (rsid, pos, alleles) != want:
            raise CmixError(f"{bgi}: its entry for variant {want[0]!r} (position {want[1]}, "
                            f"alleles {'/'.join(want[2])}) points at byte {start} of "
                            f"{self.path}, which holds {rsid!r} (position {pos}, alleles "
                            f"{'/'.join(alleles)}); the index does not belong to this file: "
                            f"{fix}")
        raw = os.pread(fd, 4, start + used)
        end = start + used + 4 + (struct.unpack("<I", raw)[0] if len(raw) == 4 else 0)
        if len(raw) < 4 or end > size:
            raise CmixError(f"{self.path}: the file ends inside the genotype block of variant "
                            f"{want[0]!r} (byte {start}; {size} bytes in the file): "
                            "truncated?")
        return used


def _expected_copies(gt, path, variant_id) -> np.ndarray:
    """Expected allele-2 counts, float64 (n_bgen_samples,), of one decoded biallelic
    variant (a cbgen Genotype): ``P(het) + 2 P(hom allele 2)`` for a diploid call and
    ``2 P(allele 2)`` for a haploid one (ploidy 1, as plink2 writes males on chrX; plink2
    reads it so), NaN for a missing call or one of ploidy 0 (plink2 writes females on chrY
    so, and reads them as missing). CmixError naming the file and variant for a phased
    variant, a call of ploidy above 2, stored probabilities that sum to more than 1, or a
    call flagged present whose probabilities cannot be decoded (plink2 refuses the last
    two as invalid blocks)."""
    if gt.phased:
        raise CmixError(f"{path}: variant {variant_id!r} holds phased haplotype "
                        "probabilities (the file is phased); cmix reads unphased genotype "
                        "probabilities, as UK Biobank's imputed BGENs hold them: convert it "
                        f"with `plink2 --bgen {path} --sample FILE.sample --make-pgen` and "
                        "give the .pgen with --pfile")
    ploidy = np.asarray(gt.ploidy)
    prob = gt.probability
    haploid, diploid = ploidy == 1, ploidy == 2
    other = ploidy > 2
    if other.any():
        raise CmixError(f"{path}: variant {variant_id!r} has {int(other.sum())} calls of "
                        f"ploidy {int(ploidy[other][0])}; cmix reads haploid and diploid "
                        "calls only")
    called = (haploid | diploid) & ~np.asarray(gt.missing, bool)
    undecoded = int((np.isnan(prob[:, :2]).any(axis=1) & called).sum())
    if undecoded:
        raise CmixError(f"{path}: variant {variant_id!r}: {undecoded} call(s) flagged "
                        "present have no decodable probabilities (a bit depth of 0?); the "
                        "block is invalid (plink2 refuses it too)")
    # the last probability of a call is 1 - the stored ones: below 0 when they sum past 1
    past_one = int(((np.where(haploid, prob[:, 1], prob[:, -1]) < -1e-6) & called).sum())
    if past_one:
        raise CmixError(f"{path}: variant {variant_id!r}: the stored genotype probabilities of "
                        f"{past_one} call(s) sum to more than 1; the block is invalid (plink2 "
                        "refuses it too)")
    d = np.full(len(ploidy), np.nan)
    if diploid.any():
        d[diploid] = prob[diploid, 1] + 2 * prob[diploid, 2]
    if haploid.any():
        d[haploid] = 2 * prob[haploid, 1]
    return d


def _strip_chrom(chrom: pd.Series) -> pd.Series:
    """'01' -> '1' (UK Biobank's BGENs write two-digit chromosome codes)."""
    return chrom.astype(str).str.replace(r"^0+(?=\d)", "", regex=True)


def open_bgen(path: str | os.PathLike, sample: str | os.PathLike,
              fam: pd.DataFrame | None = None, positions=None) -> BgenFile:
    """Open a .bgen with its .bgi (``path + '.bgi'``) and .sample.

    fam: the target sample table (default: the .sample's own samples). positions: list
    only the variants at these positions (a store's SNPs; None = all, for selection).
    An rsid listed twice in the index (split multiallelic sites), whether or not both
    rows are listed here, gets the ID ``chrom:pos:allele1:allele2`` for all its rows,
    so IDs are unique and the same whichever positions are asked for. Raises CmixError
    for a missing .bgi (saying how to make one), a .sample whose size differs from the
    .bgen's or whose IDs match none of the target samples, or a multiallelic variant.
    """
    path = input_file(path, "BGEN file")
    bgi = path.with_name(path.name + ".bgi")
    if not bgi.is_file():
        raise CmixError(f"{path}: no index {bgi.name} beside it; cmix reads BGEN through its "
                        f"bgenix index: make one with `cmix bgen-index {path}` (or "
                        f"`bgenix -g {path} -index`)")
    head = _header(path)
    samples = read_sample_file(sample)
    if len(samples) != head["n_samples"]:
        raise CmixError(f"{sample}: {len(samples)} samples, but {path} holds "
                        f"{head['n_samples']}; the .sample does not belong to this .bgen")
    index, n_indexed = read_bgi(bgi, positions)
    if n_indexed != head["n_variants"]:
        raise CmixError(f"{bgi}: indexes {n_indexed} variants, {path} holds "
                        f"{head['n_variants']}; the index is stale: remake it with "
                        f"`cmix bgen-index {path}`")
    multi = index["n_alleles"] != 2
    if multi.any():
        i = int(np.flatnonzero(multi.to_numpy())[0])
        raise CmixError(f"{path}: variant {index['rsid'].iloc[i]!r} has "
                        f"{index['n_alleles'].iloc[i]} alleles ({int(multi.sum())} such); "
                        "cmix reads biallelic variants only")
    chrom = _strip_chrom(index["chrom"])
    ids = index["rsid"].astype(str)
    dup = index["repeated"]
    if dup.any():
        ids = ids.where(~dup, chrom + ":" + index["pos"].astype(str) + ":" + index["allele1"]
                        + ":" + index["allele2"].astype(str))
    bim = pd.DataFrame({"chrom": chrom, "variant_id": ids,
                        "cm": 0.0, "pos": index["pos"].astype(np.int64),
                        "a1": index["allele2"].astype(str), "a2": index["allele1"]})[BIM_COLUMNS]
    target = samples if fam is None else fam
    rows = match_sample_file(target, samples, sample)
    _check_embedded_ids(path, head["sample_ids"], samples, sample)
    return BgenFile(path, target.reset_index(drop=True), bim,
                    index["start"].to_numpy(np.int64), rows, head["n_samples"],
                    index["rsid"].astype(str).to_numpy())


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
