"""The bytes of a BGEN file: its header, variant headers and genotype blocks.

Both layouts of the BGEN specification are read, with every compression it allows:
layout 1 (BGEN v1.1: zlib or none) and layout 2 (v1.2, v1.3: zlib, zstd or none). A
genotype block decodes to the expected count of the variant's second allele, float64
(n_samples,), NaN for a missing call or a call of ploidy 0:

- layout 1: three 16-bit probabilities per sample, ``(P(het) + 2 P(hom 2)) / sum``
  (normalised by their sum, as plink2 reads them); all three 0 is missing;
- layout 2, unphased: ``P(het) + 2 P(hom 2)`` for a diploid call, ``2 P(allele 2)``
  for a haploid one (males on chrX as plink2 writes them), from probabilities of 1 to
  32 bits (value / (2^bits - 1));
- layout 2, phased: the sum over the haplotypes of P(haplotype carries allele 2), as
  plink2 computes the dosage of a phased call; ``2 P(allele 2)`` for a haploid one.

Calls of ploidy above 2, and blocks the specification calls invalid, are a CmixError
naming the file and the variant. Decoding is vectorised numpy over the samples.
"""

from __future__ import annotations

import os
import struct
import zlib

import numpy as np

from ..errors import CmixError

#: header flag bits 0-1: how genotype blocks are compressed
COMPRESSIONS = {0: "uncompressed", 1: "zlib", 2: "zstd"}


def read_header(path) -> dict:
    """The BGEN header: {first_variant (byte offset), n_variants, n_samples, compression
    (0 none, 1 zlib, 2 zstd), layout (1 or 2), sample_ids (list of str, or None when
    the file embeds none)}. CmixError for a file that is not BGEN, is cut short, or has
    a layout or compression the specification does not define."""
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
            sample_ids = sample_block(fh.read(max(0, offset - hlen)), n, path)
    layout, compression = (flags >> 2) & 0xF, flags & 3
    if layout not in (1, 2):
        raise CmixError(f"{path}: BGEN layout {layout} (header flags bits 2-5), which cmix "
                        "does not read; cmix reads layouts 1 and 2 (BGEN v1.1 to v1.3): "
                        f"rewrite it with `qctool -g {path} -og NEW.bgen`")
    if compression == 3 or (layout == 1 and compression == 2):
        raise CmixError(f"{path}: compression flag {compression} in a layout-{layout} BGEN, "
                        "which the BGEN specification does not define (layout 1: none or "
                        "zlib; layout 2: none, zlib or zstd); the file is damaged")
    return {"first_variant": 4 + offset, "n_variants": m, "n_samples": n,
            "compression": compression, "layout": layout, "sample_ids": sample_ids}


def sample_block(buf: bytes, n: int, path) -> list[str]:
    """The sample IDs a BGEN embeds after its header (flag bit 31): uint32 block length,
    uint32 count, then a uint16 length and the bytes of each ID."""
    try:
        _, count = struct.unpack_from("<II", buf, 0)
        at, ids = 8, []
        for _ in range(count):
            text, at = prefixed_text(buf, at, "<H")
            ids.append(text)
    except (IndexError, struct.error, UnicodeDecodeError):
        raise CmixError(f"{path}: its sample identifier block is cut short or damaged "
                        "(truncated file?)") from None
    if count != n:
        raise CmixError(f"{path}: its sample identifier block lists {count} samples, its "
                        f"header {n}; the file is damaged")
    return ids


def prefixed_text(buf: bytes, at: int, length_format: str) -> tuple[str, int]:
    """A UTF-8 string stored as its byte length (struct ``length_format``, "<H" or "<I")
    then its bytes, at ``at`` in ``buf``: (text, offset after it). IndexError or
    struct.error when ``buf`` is too short; UnicodeDecodeError for bytes that are not
    UTF-8."""
    (k,) = struct.unpack_from(length_format, buf, at)
    start = at + struct.calcsize(length_format)
    if start + k > len(buf):
        raise IndexError
    return buf[start:start + k].decode(), start + k


def variant_header(buf: bytes, layout: int, at: int = 0):
    """Parse a variant identifying block from ``buf`` at ``at``: layout 1 starts with
    the sample count and has two alleles, layout 2 gives the allele count.

    Returns (varid, rsid, chrom, pos, alleles, end offset in buf); raises IndexError
    or struct.error when ``buf`` is too short.
    """
    if layout == 1:
        at += 4                    # uint32 number of samples, checked with the block
    out = []
    for _ in range(3):
        text, at = prefixed_text(buf, at, "<H")
        out.append(text)
    if layout == 1:
        (pos,), n_alleles = struct.unpack_from("<I", buf, at), 2
        at += 4
    else:
        pos, n_alleles = struct.unpack_from("<IH", buf, at)
        at += 6
    alleles = []
    for _ in range(n_alleles):
        text, at = prefixed_text(buf, at, "<I")
        alleles.append(text)
    return out[0], out[1], out[2], pos, alleles, at


def read_variant_header(fd: int, start: int, path, layout: int):
    """The identifying block of the variant at file offset ``start`` (one or two preads),
    as :func:`variant_header` parses it. Raises CmixError naming ``path`` when the file
    ends inside it, or UnicodeDecodeError when the bytes there are not a variant
    header."""
    size = 1024
    while True:
        buf = os.pread(fd, size, start)
        try:
            return variant_header(buf, layout)
        except (IndexError, struct.error):
            if len(buf) < size:
                raise CmixError(f"{path}: the file ends inside the header of the variant at "
                                f"byte {start} (truncated?)") from None
            size *= 16


def data_length(fd: int, at: int, head: dict) -> tuple[int, bool]:
    """(bytes of the genotype data field at file offset ``at``, right after a variant's
    identifying block; whether the file holds them all). ``head``: :func:`read_header`."""
    if head["layout"] == 1 and head["compression"] == 0:
        return 6 * head["n_samples"], True
    raw = os.pread(fd, 4, at)
    if len(raw) < 4:
        return 4, False
    return 4 + struct.unpack("<I", raw)[0], True


def decode_dosage(block: bytes, head: dict, path, variant_id) -> np.ndarray:
    """The expected count of the second allele, float64 (n_samples,), NaN missing, from
    a variant's genotype data field ``block`` (the bytes after its identifying block;
    ``head``: :func:`read_header`). CmixError naming the file and ``variant_id`` for a
    block that does not decode, a call of ploidy above 2, or probabilities the
    specification calls invalid (stored ones summing past 1, none stored for a call)."""
    n = head["n_samples"]
    data = _uncompressed(block, head, path, variant_id)
    if head["layout"] == 1:
        if len(data) != 6 * n:
            raise _damaged(path, variant_id, f"{len(data)} bytes of probabilities for "
                           f"{n} samples (6 each)")
        prob = np.frombuffer(data, "<u2").reshape(n, 3).astype(np.float64)
        total = prob.sum(axis=1)
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(total > 0, (prob[:, 1] + 2 * prob[:, 2]) / total, np.nan)
    return _layout2_dosage(data, n, path, variant_id)


def _uncompressed(block: bytes, head: dict, path, variant_id) -> bytes:
    """The probability data of a genotype data field, decompressed."""
    layout, compression = head["layout"], head["compression"]
    if layout == 1 and compression == 0:
        return block
    body = block[4:]
    if compression == 0:
        return body
    expected = 6 * head["n_samples"] if layout == 1 else None
    if layout == 2:
        if len(body) < 4:
            raise _damaged(path, variant_id, "its genotype block is shorter than its header")
        (expected,), body = struct.unpack_from("<I", body), body[4:]
    try:
        if compression == 1:
            data = zlib.decompress(body, bufsize=max(expected, 1))
        else:
            from numcodecs import zstd  # numcodecs: with zarr, only where a store is written
            data = zstd.decompress(body)
    except (zlib.error, RuntimeError) as err:
        raise CmixError(f"{path}: the genotype block of variant {variant_id!r} cannot be "
                        f"decoded ({COMPRESSIONS[compression]}: {err}): the file is damaged "
                        "(plink2 calls it an invalid compressed SNP block)") from None
    if len(data) != expected:
        raise _damaged(path, variant_id, f"it decompresses to {len(data)} bytes, its "
                       f"header says {expected}")
    return data


def _damaged(path, variant_id, what: str) -> CmixError:
    return CmixError(f"{path}: the genotype block of variant {variant_id!r} is damaged "
                     f"({what}); plink2 refuses it too")


def _layout2_dosage(data: bytes, n: int, path, variant_id) -> np.ndarray:
    """:func:`decode_dosage` of a decompressed layout-2 probability block."""
    if len(data) < 10 + n:
        raise _damaged(path, variant_id, "its probability data is shorter than its header")
    n_block, n_alleles = struct.unpack_from("<IH", data, 0)
    if n_block != n or n_alleles != 2:
        raise _damaged(path, variant_id, f"its probability data is for {n_block} samples "
                       f"and {n_alleles} alleles, the file's header says {n} and its index 2")
    byte = np.frombuffer(data, np.uint8, n, 8)
    ploidy = (byte & 63).astype(np.int64)
    missing = (byte >> 7).astype(bool) | (ploidy == 0)
    phased, bits = data[8 + n], data[9 + n]
    if ploidy.max(initial=0) > 2:
        big = ploidy > 2
        raise CmixError(f"{path}: variant {variant_id!r} has {int(big.sum())} call(s) of "
                        f"ploidy {int(ploidy[big][0])}; cmix reads haploid and diploid calls "
                        "only (plink2 too): leave the variant out, e.g. `bgenix -g "
                        f"{path} -excl-rsids {variant_id} > NEW.bgen`")
    if phased > 1 or bits > 32:
        raise _damaged(path, variant_id, f"phased flag {phased}, {bits} bits per probability")
    if bits == 0:
        if not missing.all():
            raise CmixError(f"{path}: variant {variant_id!r}: {int((~missing).sum())} call(s) "
                            "flagged present have no decodable probabilities (a bit depth of "
                            "0); the block is invalid (plink2 refuses it too)")
        return np.full(n, np.nan)
    n_values = int(ploidy.sum())
    payload = np.frombuffer(data, np.uint8, offset=10 + n)
    if len(payload) * 8 < n_values * bits:
        raise _damaged(path, variant_id, f"{len(payload)} bytes of probabilities for "
                       f"{n_values} values of {bits} bits")
    values = unpack_bits(payload, n_values, bits)
    top = float(2 ** bits - 1)
    if (ploidy == 2).all():
        first, second = values[0::2], values[1::2]
        haploid = np.zeros(n, bool)
    else:
        at = np.cumsum(ploidy) - ploidy
        first = np.where(ploidy >= 1, values[np.minimum(at, max(n_values - 1, 0))], 0)
        second = np.where(ploidy == 2, values[np.minimum(at + 1, max(n_values - 1, 0))], 0)
        haploid = ploidy == 1
    if phased:      # P(each haplotype carries allele 1) stored
        d = np.where(haploid, 2 * (top - first), 2 * top - first - second) / top
    else:           # P(hom 1), P(het) stored; P(hom 2) is what remains
        past_one = (first + second > top) & ~haploid & ~missing
        if past_one.any():
            raise CmixError(f"{path}: variant {variant_id!r}: the stored genotype "
                            f"probabilities of {int(past_one.sum())} call(s) sum to more "
                            "than 1; the block is invalid (plink2 refuses it too)")
        d = np.where(haploid, 2 * (top - first), 2 * top - 2 * first - second) / top
    d[missing] = np.nan
    return d


def unpack_bits(payload: np.ndarray, n_values: int, bits: int) -> np.ndarray:
    """The first ``n_values`` unsigned integers of ``bits`` bits (1-32) packed little-end
    first into the uint8 array ``payload``: float64 (n_values,)."""
    if bits in (8, 16, 32):
        width = bits // 8
        return np.frombuffer(payload[:n_values * width], f"<u{width}").astype(np.float64)
    at = np.arange(n_values, dtype=np.int64) * bits
    first, shift = at >> 3, (at & 7).astype(np.uint64)
    padded = np.concatenate([payload, np.zeros(8, np.uint8)])
    word = np.zeros(n_values, np.uint64)
    for k in range((bits + 7 + 7) // 8):
        word |= padded[first + k].astype(np.uint64) << np.uint64(8 * k)
    return ((word >> shift) & np.uint64(2 ** bits - 1)).astype(np.float64)
