"""Unrelated samples: kinship tables, KING-robust kinship from genotypes, plink2's pruning.

Two routes lead to the same output, the samples to keep so that no two kept samples
have kinship above a cutoff (plink2 ``--king-cutoff``):

* a kinship table: UK Biobank's ``ukb_rel.dat`` (``ID1 ID2 HetHet IBS0 Kinship``) or a
  ``plink2 --make-king-table`` ``.kin0`` file (:func:`read_kinship_table`);
* KING-robust kinship computed from genotypes (:func:`king_robust`).

KING-robust (Manichaikul et al. 2010; plink2's between-family estimator), over the
variants called in both samples i and j, chrX, chrY and MT excluded (as plink2 does: the
pseudo-autosomal XY, unplaced chromosome 0 and contigs are counted as autosomal):

    phi_ij = 0.5 - (4 N_IBS0 + N_het_i,hom_j + N_hom_i,het_j) / (4 min(N_het_i, N_het_j))

On the CPU (:func:`_king_bitplanes`) the counts come from bit planes, as in plink2: per
sample and 64 variants, one word each for "homozygous", "A1/A1" and "het"; a pair's
counts are popcounts of ANDs of its two samples' words (:mod:`cmix.genotypes.kernels`),
integers summed per pair over variant blocks, so the result does not depend on the
thread count. Memory: 12 bytes per pair of a pass's row strip (capped, 256 MiB by
default; more strips mean more passes over the .bed) plus one block of 4,096 variants.

On a GPU (:func:`_king_int8`) the same integers come from int8 matrix products on the
tensor cores, with int32 sums. Per variant block, each sample's calls become 0/1
indicators A (A1/A1), B (A2/A2), H (het) and C (called), built on the device from the
.bed bytes; over the variants called in both samples of a pair,

    IBS0 = A_i.B_j + B_i.A_j,   HETHET = H_i.H_j,   het_i = H_i.C_j,   het_j = C_i.H_j

(het_i: het in i, called in j), and the numerator is 4 IBS0 + het_i + het_j - 2 HETHET.
Row strips of samples against the samples from the strip's first row on take three
products a strip and block: [B | A] [A | B]^T (IBS0), [H ; C] H^T (HETHET and het_j
stacked) and H C^T (het_i): 5 multiply-adds per pair and variant, the fewest for these
counts (the numerator is a rank-3 form of two samples' states). Exact, so the route gives
the bit-plane route's counts and kinship to the last bit; it runs on the CPU too (tests).
Memory: 16 bytes per sample pair of a pass's strips (capped by ``max_memory_bytes``; more
strips mean more passes over the .bed) plus one variant block (5 bytes per sample and
variant) and one strip's products. Only the pairs above the threshold leave the device.

Pairs above the reporting threshold are then recounted exactly (NSNP, HETHET, IBS0) from
the genotypes, and the two must agree.

plink2's pruning order (``KinshipPruneDestructive`` in plink2_matrix_calc.cc): while
related pairs remain, if some sample has exactly one remaining relative, the first such
sample in .fam order keeps its place and its relative is dropped; otherwise the first
sample (in .fam order) with the most remaining relatives is dropped.
"""

from __future__ import annotations

import heapq
import math
import os
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from . import plink
from .selection import chrom_codes, chrom_mask, chrom_text, extract_mask, sample_rows
from ..atomic import atomic_outputs
from ..errors import CmixError
from ..logs import log, progress
from ..runtime import resolve_device
from ..text import data_line_numbers, input_file

if TYPE_CHECKING:
    from .sources import GenotypeFiles

#: lower kinship bounds of the degrees plink2/KING report (Manichaikul et al. 2010)
DEGREES = (("duplicate/MZ twin", 0.354), ("first degree", 0.177),
           ("second degree", 0.0884), ("third degree", 0.0442))
#: pairs above this kinship are written to the .kin0 table (KING's "third degree")
REPORT_MIN_KINSHIP = 0.0442
DEFAULT_CUTOFF = 0.0884
KIN0_COLUMNS = ["#FID1", "IID1", "FID2", "IID2", "NSNP", "HETHET", "IBS0", "KINSHIP"]
#: variants KING-robust takes at most; a pair's int32 sums (up to 4 V) stay far from 2^31
_MAX_VARIANTS = 40_000_000


# ----------------------------------------------------------------------------- checks
def check_cutoff(cutoff: float) -> float:
    """A kinship cutoff must lie strictly between 0 and 0.5."""
    try:
        cutoff = float(cutoff)
    except (TypeError, ValueError):
        raise CmixError(f"--cutoff: expected a number between 0 and 0.5, got {cutoff!r}") from None
    if not (0.0 < cutoff < 0.5) or math.isnan(cutoff):
        raise CmixError(f"--cutoff {cutoff:g}: a kinship cutoff must lie strictly between 0 "
                        "and 0.5 (0.0884 drops second-degree relatives and closer, 0.177 "
                        "first-degree, 0.354 duplicates)")
    return cutoff


# ------------------------------------------------------------------------------ pruning
def prune_king_cutoff(n_samples: int, idx_a: np.ndarray, idx_b: np.ndarray) -> np.ndarray:
    """Choose the samples to drop so that no related pair remains, in plink2's order.

    idx_a, idx_b: int arrays (n_pairs,) of sample positions (in .fam order, 0-based) of
    the related pairs (kinship above the cutoff; order within a pair does not matter,
    duplicates and self-pairs are ignored).
    Returns bool (n_samples,): True for the samples to drop.

    While pairs remain: if a sample has exactly one remaining relative, take the first
    such sample (lowest position) and drop its relative; otherwise drop the first sample
    with the most remaining relatives. Lazy heaps make it O(pairs log pairs).
    """
    idx_a = np.asarray(idx_a, dtype=np.int64)
    idx_b = np.asarray(idx_b, dtype=np.int64)
    removed = np.zeros(n_samples, dtype=bool)
    keep = idx_a != idx_b
    lo = np.minimum(idx_a[keep], idx_b[keep])
    hi = np.maximum(idx_a[keep], idx_b[keep])
    if len(lo) == 0:
        return removed
    edges = np.unique(np.stack([lo, hi], axis=1), axis=0)
    neighbours: dict[int, set[int]] = {}
    for a, b in edges.tolist():
        neighbours.setdefault(a, set()).add(b)
        neighbours.setdefault(b, set()).add(a)
    degree = {v: len(s) for v, s in neighbours.items()}
    degree_one = sorted(v for v, d in degree.items() if d == 1)      # a sorted list is a heap
    by_degree = [(-d, v) for v, d in degree.items()]
    heapq.heapify(by_degree)
    n_active = len(degree)
    while n_active:
        while degree_one and degree[degree_one[0]] != 1:
            heapq.heappop(degree_one)
        if degree_one:
            drop = next(iter(neighbours[degree_one[0]]))
        else:
            while True:
                d, v = by_degree[0]
                if degree[v] == -d and d != 0:
                    break
                heapq.heappop(by_degree)
            drop = v
        for u in neighbours[drop]:
            neighbours[u].discard(drop)
            degree[u] -= 1
            if degree[u] == 0:
                n_active -= 1
            else:
                heapq.heappush(by_degree, (-degree[u], u))
                if degree[u] == 1:
                    heapq.heappush(degree_one, u)
        neighbours[drop] = set()
        degree[drop] = 0
        removed[drop] = True
        n_active -= 1
    return removed


# ------------------------------------------------------------------------ kinship table
_ID_COLUMNS = {  # normalised header name -> role
    "ID1": "iid1", "IID1": "iid1", "ID2": "iid2", "IID2": "iid2",
    "FID1": "fid1", "FID2": "fid2", "KINSHIP": "kinship", "NSNP": "nsnp",
    "HETHET": "hethet", "IBS0": "ibs0",
}


def read_kinship_table(path) -> pd.DataFrame:
    """Read a kinship table: UKB ``ukb_rel.dat`` or plink2 ``.kin0`` (whitespace separated).

    Columns are found by header name (case-insensitive, leading ``#`` ignored):
    ``ID1 ID2 ... Kinship`` (UK Biobank: IDs are eids, matched to the .fam IID) or
    ``FID1 IID1 FID2 IID2 ... KINSHIP`` (plink2; ``IID1 IID2`` alone when there is no
    FID). A kinship of ``nan`` (plink2 writes it for a pair with no variant called in
    both, or no heterozygous call) is read as NaN: no estimate. Returns a DataFrame with
    columns key1, key2 (str: ``FID<TAB>IID`` when the
    table has FIDs, else IID), kinship (float64) and hethet/ibs0/nsnp when present;
    ``df.attrs["has_fid"]`` says which key form was used.
    """
    from ..text import first_line, read_table

    path = input_file(path, "kinship table")
    header = first_line(path, "kinship table").split()
    if not header:
        raise CmixError(f"{path}, line 1: empty file; expected a header such as "
                        "'ID1 ID2 HetHet IBS0 Kinship' or plink2's '#FID1 IID1 FID2 IID2 "
                        "NSNP HETHET IBS0 KINSHIP'")
    roles = _kinship_columns(path, header)
    has_fid = "fid1" in roles          # with fid2: checked by _kinship_columns
    lines = data_line_numbers(path, len(header), None, "kinship table")
    raw = read_table(path, "kinship table, whitespace-separated",
                     empty=pd.DataFrame({c: pd.Series(dtype=str) for c in range(len(header))}),
                     sep=r"\s+", header=None, skiprows=1, names=range(len(header)), dtype=str,
                     na_filter=False, engine="c", comment=None)
    out = pd.DataFrame(index=raw.index)
    if has_fid:
        out["key1"] = raw[roles["fid1"]] + "\t" + raw[roles["iid1"]]
        out["key2"] = raw[roles["fid2"]] + "\t" + raw[roles["iid2"]]
    else:
        out["key1"] = raw[roles["iid1"]]
        out["key2"] = raw[roles["iid2"]]
    _check_pairs_once(out["key1"], out["key2"], path, lines)
    for role in ("kinship", "hethet", "ibs0", "nsnp"):
        if role not in roles:
            continue
        values = pd.to_numeric(raw[roles[role]], errors="coerce")
        bad = values.isna() & (raw[roles[role]].str.lower() != "nan")
        if role == "kinship" and bad.any():
            i = int(np.flatnonzero(bad.to_numpy())[0])
            raise CmixError(f"{path}, line {lines[i]}, column {roles[role] + 1} "
                            f"({header[roles[role]]}): expected a number (or nan), found "
                            f"{raw[roles[role]].iloc[i]!r}")
        out[role] = values.astype(np.float64)
    out.attrs["has_fid"] = has_fid
    return out


def _check_pairs_once(key1: pd.Series, key2: pd.Series, path, lines: np.ndarray) -> None:
    """CmixError naming the line(s) of a kinship table's first row that pairs a sample
    with itself, or that repeats an earlier row's pair (in either order): each pair is
    one relationship, and a repeat would be counted twice in the summary."""
    same = (key1 == key2).to_numpy()
    if same.any():
        raise CmixError(f"{path}, line {lines[int(np.flatnonzero(same)[0])]}: a sample paired "
                        "with itself; a kinship table lists pairs of two samples")
    low = np.where(key1 <= key2, key1, key2)
    high = np.where(key1 <= key2, key2, key1)
    dup = plink.first_duplicate_lines(pd.Series(low + "\n" + high))
    if dup:
        raise CmixError(f"{path}: the same pair of samples on lines {lines[dup[0] - 1]} and "
                        f"{lines[dup[1] - 1]}; a kinship table lists each pair once")


def _kinship_columns(path, header: list[str]) -> dict[str, int]:
    """{role: column index} of a kinship table's header (roles of :data:`_ID_COLUMNS`,
    names case-insensitive, leading ``#`` ignored, the first column of a role wins).
    CmixError naming ``path``, line 1, when ID1/ID2/Kinship is missing or only one of
    FID1 and FID2 is there."""
    from ..text import check_unique_header

    names = [h.lstrip("#").upper() for h in header]
    check_unique_header(names, path, "kinship table")
    roles = {}
    for col, name in enumerate(names):
        role = _ID_COLUMNS.get(name)
        if role and role not in roles:
            roles[role] = col
    missing = [r for r in ("iid1", "iid2", "kinship") if r not in roles]
    if missing or (("fid1" in roles) != ("fid2" in roles)):
        # line 1 is not quoted: in a table without a header it holds two participant IDs
        shown = {"iid1": "ID1 (or IID1)", "iid2": "ID2 (or IID2)", "kinship": "Kinship"}
        lacks = (f"no column named {', '.join(shown[r] for r in missing)}" if missing
                 else "only one of FID1 and FID2")
        raise CmixError(f"{path}, line 1: not a kinship table header ({lacks}); expected "
                        "the header 'ID1 ID2 HetHet IBS0 Kinship' (UK Biobank ukb_rel.dat) "
                        "or '#FID1 IID1 FID2 IID2 NSNP HETHET IBS0 KINSHIP' (plink2 "
                        "--make-king-table); add it if the file has none")
    return roles


def match_kinship_pairs(table: pd.DataFrame, fam: pd.DataFrame) -> tuple[pd.DataFrame, int]:
    """Map a kinship table's pairs onto .fam positions.

    Returns (pairs, n_unknown): pairs has columns idx1, idx2 (int64 positions in ``fam``)
    plus the table's value columns, for the rows whose two IDs are both in ``fam``;
    n_unknown counts rows naming an ID that is not.
    """
    if table.attrs.get("has_fid"):
        keys = fam["fid"] + "\t" + fam["iid"]
    else:
        keys = fam["iid"]
        if keys.duplicated().any():
            raise CmixError("the kinship table identifies samples by IID only, but the "
                            f"sample list has {int(keys.duplicated().sum())} repeated IIDs "
                            "(different FIDs); use a table with FID columns")
    index = pd.Index(keys.to_numpy())
    p1 = index.get_indexer(table["key1"].to_numpy())
    p2 = index.get_indexer(table["key2"].to_numpy())
    known = (p1 >= 0) & (p2 >= 0)
    pairs = table.loc[known].drop(columns=["key1", "key2"]).reset_index(drop=True)
    pairs.insert(0, "idx1", p1[known].astype(np.int64))
    pairs.insert(1, "idx2", p2[known].astype(np.int64))
    return pairs, int((~known).sum())


# ------------------------------------------------------------------- KING from genotypes
def king_variants(chrom) -> np.ndarray:
    """bool (n_variants,): the variants KING-robust uses, as plink2 chooses them: all but
    those on chrX, chrY and MT (however written: 23, chrX, ...); the pseudo-autosomal XY,
    the unplaced chromosome 0 and other contigs count as autosomal."""
    return ~np.isin(chrom_codes(chrom), ("X", "Y", "MT"))


def king_robust(bf: plink.Bfile, variant_idx=None, sample_idx=None, *,
                min_kinship: float | None = REPORT_MIN_KINSHIP, block_size: int | None = None,
                device: str = "auto", max_memory_bytes: int | None = None,
                route: str | None = None) -> pd.DataFrame:
    """KING-robust kinship of all pairs of the selected samples, over the variants off
    chrX, chrY and MT (:func:`king_variants`).

    bf: an opened .bed trio. variant_idx: int positions in the .bim to use (default all;
    those on X, Y and MT are dropped, as plink2 does). sample_idx: sorted int positions in
    the .fam (default all). min_kinship: keep pairs with kinship > this (None: all pairs).
    device "cpu" (or "auto" without a GPU): bit-packed pair counts on numba's threads
    (:func:`_king_bitplanes`); "cuda": int8 indicator products with torch
    (:func:`_king_int8`; block_size: samples per row strip, default 2,048; blocks of at
    most 8,192 variants). route: "bitplanes" or "int8" overrides the
    device's route (the int8 route runs on the CPU as well; the bit planes on the CPU only).
    max_memory_bytes bounds the per-pair accumulators held at once (default 256 MiB on
    the CPU, 12 bytes a pair; int8 route: a third of the GPU's free memory, 1 GiB on the
    CPU, 16 bytes a pair); further row strips are done in further passes over the .bed.

    Returns a DataFrame, one row per kept pair in plink2's .kin0 order (by the later
    sample, then the earlier): idx1 (later .fam position), idx2 (earlier), nsnp, hethet,
    ibs0, het1_hom2, het2_hom1 (int64 counts over jointly called variants), kinship.
    ``attrs["undefined_kinship_pairs"]``: how many pairs of all had a NaN kinship (never
    above min_kinship, so not among the rows when it is given).
    """
    variant_idx = np.arange(bf.n_variants) if variant_idx is None else np.asarray(variant_idx)
    variant_idx = np.sort(variant_idx[king_variants(bf.bim["chrom"].iloc[variant_idx])])
    sample_idx = np.arange(bf.n_samples) if sample_idx is None else np.sort(np.asarray(sample_idx))
    n, n_var = len(sample_idx), len(variant_idx)
    empty = pd.DataFrame({c: pd.Series(dtype=np.int64) for c in
                          ("idx1", "idx2", "nsnp", "hethet", "ibs0", "het1_hom2", "het2_hom1")})
    empty["kinship"] = pd.Series(dtype=np.float64)
    if n < 2 or n_var == 0:             # with no variant, every pair's kinship is 0/0
        empty.attrs["undefined_kinship_pairs"] = n * (n - 1) // 2
        return empty
    if n_var >= _MAX_VARIANTS:
        raise CmixError(f"KING-robust: {n_var} variants exceed the supported {_MAX_VARIANTS - 1}")
    on_cpu = device == "cpu" or resolve_device(device).type == "cpu"   # torch only if asked
    route = route or ("bitplanes" if on_cpu else "int8")
    if route == "bitplanes":
        if not on_cpu:
            raise ValueError("the bit-plane route runs on the CPU only")
        pos_i, pos_j, kin, n_undefined = _king_bitplanes(bf, variant_idx, sample_idx,
                                                         min_kinship,
                                                         max_memory_bytes or _CPU_MEMORY)
    elif route == "int8":
        dev = resolve_device(device)
        pos_i, pos_j, kin, n_undefined = _king_int8(
            bf, variant_idx, sample_idx, min_kinship, block_size or _INT8_STRIP,
            _INT8_VARIANTS, dev, max_memory_bytes or _int8_memory(dev))
    else:
        raise ValueError(f"unknown KING route {route!r} (bitplanes or int8)")
    if len(pos_i) == 0:
        empty.attrs["undefined_kinship_pairs"] = n_undefined
        return empty
    # exact counts for the kept pairs, in .kin0 order (later sample first)
    order = np.lexsort((pos_i, pos_j))
    later, earlier = pos_j[order], pos_i[order]
    counts = pair_counts(bf, variant_idx, sample_idx, later, earlier, block=8192)
    fast = kin[order]
    if not np.allclose(fast, counts["kinship"].to_numpy(), rtol=0, atol=1e-9, equal_nan=True):
        raise RuntimeError("KING-robust: blocked counts and exact pair counts disagree "
                           "(internal error; please report)")
    counts.insert(0, "idx1", sample_idx[later].astype(np.int64))
    counts.insert(1, "idx2", sample_idx[earlier].astype(np.int64))
    if min_kinship is not None:
        counts = counts[counts["kinship"] > min_kinship].reset_index(drop=True)
    counts.attrs["undefined_kinship_pairs"] = n_undefined
    return counts


#: default cap on the CPU route's pair accumulators (12 bytes a pair)
_CPU_MEMORY = 256 << 20
#: variants per bit-packed block of the CPU route (64 words of 64 variants)
_PLANE_VARIANTS = 4096


def _king_bitplanes(bf, variant_idx, sample_idx, min_kinship, max_memory_bytes):
    """KING-robust on the CPU from bit planes (:mod:`cmix.genotypes.kernels`).

    Rows (samples, in ``sample_idx`` order) are split into passes whose upper-triangle
    pairs fit ``max_memory_bytes`` at 12 bytes a pair (int32 num, het_i, het_j); each
    pass streams the .bed in blocks of 4,096 variants, packs the samples from its first
    row on into bit planes (n - a0, 3, 64) uint64 and adds every pair's counts. Memory:
    the accumulators plus one block (its .bed bytes and 24 bytes a sample).
    Returns (i, j, kinship) over pairs with kinship > min_kinship (all when None),
    positions within ``sample_idx``, and the number of pairs whose kinship is NaN.
    """
    from . import kernels

    n, n_var = len(sample_idx), len(variant_idx)
    passes, a0 = [], 0
    while a0 < n - 1:                   # greedy: add rows while the pass fits the budget
        a1, pairs = a0, 0
        while a1 < n - 1 and (a1 == a0 or 12 * (pairs + n - a1 - 1) <= max_memory_bytes):
            pairs += n - a1 - 1
            a1 += 1
        passes.append((a0, a1, pairs))
        a0 = a1
    blocks = list(plink.variant_blocks(n_var, _PLANE_VARIANTS))
    n_words = _PLANE_VARIANTS // 64
    tile = kernels.KING_TILE
    found_i, found_j, found_k, n_undefined = [], [], [], 0
    bar = progress(total=len(passes) * len(blocks), desc="KING-robust", unit="block")
    for a0, a1, n_pairs in passes:
        width = n - a0
        lens = width - 1 - np.arange(a1 - a0, dtype=np.int64)      # pairs of each row
        offsets = np.zeros(a1 - a0, np.int64)
        np.cumsum(lens[:-1], out=offsets[1:])
        tiles = np.array([(r, c) for r in range(0, a1 - a0, tile) for c in range(r, width, tile)],
                         np.int64).reshape(-1, 2)
        acc = np.zeros((3, n_pairs), np.int32)
        planes = np.empty((width, kernels.KING_PLANES, n_words), np.uint64)
        pos = np.ascontiguousarray(sample_idx[a0:], dtype=np.int64)
        for v0, v1 in blocks:
            kernels.pack_king_planes(bf.packed_rows(variant_idx[v0:v1]), pos, planes)
            kernels.king_accumulate(planes, (v1 - v0 + 63) // 64, 0, a1 - a0, offsets, tiles, acc)
            bar.update(1)
        i, j, kin = kernels.king_select(acc, offsets, 0, a1 - a0, width,
                                        -np.inf if min_kinship is None else float(min_kinship),
                                        min_kinship is None)
        n_undefined += int(kernels.king_count_undefined(acc))
        del acc
        found_i.append(i + a0)
        found_j.append(j + a0)
        found_k.append(kin)
    bar.close()
    return (np.concatenate(found_i), np.concatenate(found_j), np.concatenate(found_k),
            n_undefined)


#: samples per row strip of the int8 route (rounded to a multiple of 32)
_INT8_STRIP = 2048
#: variants per block of the int8 route (rounded up to a multiple of 64)
_INT8_VARIANTS = 8192
#: bytes per sample pair of the int8 route's accumulators (IBS0, HETHET, het_j, het_i)
_INT8_PAIR_BYTES = 16


def _int8_memory(dev) -> int:
    """Default cap on the int8 route's accumulators: a third of a CUDA device's free
    memory (the variant block and one strip's products come on top), 1 GiB on the CPU."""
    import torch

    if dev.type == "cuda":
        return int(torch.cuda.mem_get_info(dev)[0] // 3)
    return 1 << 30


def _round_up(x: int, m: int) -> int:
    return -(-int(x) // m) * m


def int8_matmul(a, b, out=None):
    """Exact a @ b of 0/1 int8 indicator matrices, int32 result (h, w).

    a: int8 (h, k), row-major; b: int8 (k, w), the transpose of a row-major (w, k) matrix
    (column-major: both operands hold each sample's variants contiguously, the layout
    cuBLASLt's int8 tensor-core kernels take). On CUDA ``torch._int_mm`` needs h > 16 and
    k, w multiples of 8; the route pads to that. Where ``torch._int_mm`` is missing on the
    device, float32 products stand in: exact, as every sum of a block is below 2^24.
    out: int32 (h, w) contiguous, overwritten (optional).
    """
    import torch

    if _INT_MM_OK.get(a.device.type, True):
        try:
            return torch._int_mm(a, b, out=out) if out is not None else torch._int_mm(a, b)
        except torch.cuda.OutOfMemoryError:
            raise
        except (RuntimeError, NotImplementedError, AttributeError):
            _INT_MM_OK[a.device.type] = False
            log(f"unrelated: torch._int_mm is not available on {a.device.type} here; float32 "
                "products stand in (exact, slower)")
    product = (a.to(torch.float32) @ b.to(torch.float32)).to(torch.int32)
    if out is None:
        return product
    return out.copy_(product)


_INT_MM_OK: dict = {}


def _int8_plan(n: int, n_var: int, block_size: int, variant_block: int, max_memory_bytes: int):
    """Strips, passes and variant block of the int8 route.

    Samples are padded to n_pad (a multiple of 32) and cut into row strips of equal
    height h (block_size rounded up to a multiple of 32, evened out over the strips;
    the last strip may be shorter); strip [r0, r1) is paired
    with the samples [r0, n_pad). A pass holds consecutive strips whose accumulators
    (16 bytes a pair) fit max_memory_bytes (one strip at least; h shrinks to fit).
    Returns (n_pad, edges, passes, vb): edges: strip boundaries (len n_strips + 1);
    passes: (first strip, end strip) pairs; vb: variants per block (variant_block evened
    out over the blocks and rounded up to a multiple of 64; a short last block is padded
    with variants no one is called at).
    """
    n_pad = _round_up(n, 32)
    h = _round_up(max(32, min(block_size, n_pad)), 32)
    h = max(32, min(h, (max_memory_bytes // (_INT8_PAIR_BYTES * n_pad)) // 32 * 32))
    n_strips = -(-n_pad // h)
    h = _round_up(-(-n_pad // n_strips), 32)          # equal strips, the last one shorter
    edges = list(range(0, n_pad, h)) + [n_pad]
    passes, s0, used = [], 0, 0
    for s in range(len(edges) - 1):
        size = _INT8_PAIR_BYTES * (edges[s + 1] - edges[s]) * (n_pad - edges[s])
        if s > s0 and used + size > max_memory_bytes:
            passes.append((s0, s))
            s0, used = s, 0
        used += size
    passes.append((s0, len(edges) - 1))
    n_blocks = -(-n_var // max(1, variant_block))
    vb = _round_up(-(-n_var // n_blocks), 64)         # equal blocks, the last one shorter
    return n_pad, edges, passes, vb


def _int8_strip_counts(bf, variant_idx, sample_idx, block_size, variant_block, dev,
                       max_memory_bytes):
    """Yield (r0, r1, counts) per row strip: the KING counts of the pairs (i, j),
    r0 <= i < r1, r0 <= j < n_pad (positions within ``sample_idx``, padded with samples
    that have no call), summed over all variant blocks by int8 products.

    counts: int32 tensor (4, r1 - r0, n_pad - r0) on ``dev``: IBS0, HETHET, het_j (j het,
    i called) and het_i (i het, j called), over the variants called in both; entries
    with j <= i or a padding sample are not pairs. See :func:`_king_int8`.
    """
    import torch

    n, n_var = len(sample_idx), len(variant_idx)
    n_pad, edges, passes, vb = _int8_plan(n, n_var, block_size, variant_block,
                                          max_memory_bytes)
    blocks = list(plink.variant_blocks(n_var, vb))
    bar = progress(total=len(passes) * len(blocks), desc="KING-robust", unit="block")
    for s0, s1 in passes:
        a0 = edges[s0]
        width = n_pad - a0
        pos = torch.as_tensor(np.asarray(sample_idx[a0:], np.int64), device=dev)
        byte_idx, shift = pos >> 2, (2 * (pos & 3)).to(torch.uint8)
        strips = [(edges[s], edges[s + 1]) for s in range(s0, s1)]
        acc = {r0: torch.empty((4, r1 - r0, n_pad - r0), dtype=torch.int32, device=dev)
               for r0, r1 in strips}
        h_max = max(r1 - r0 for r0, r1 in strips)
        scratch = torch.empty(2 * h_max * width, dtype=torch.int32, device=dev)
        het_total = torch.zeros(width, dtype=torch.int64, device=dev)
        codes = torch.ones((width, vb), dtype=torch.uint8, device=dev)   # 1: no call
        ab = torch.empty((width, 2 * vb), dtype=torch.int8, device=dev)  # [A1/A1 | A2/A2]
        het = torch.empty((width, vb), dtype=torch.int8, device=dev)
        called = torch.empty((width, vb), dtype=torch.int8, device=dev)
        for k, (v0, v1) in enumerate(blocks):
            packed = torch.from_numpy(bf.packed_rows(variant_idx[v0:v1])).to(dev)
            block = (packed.index_select(1, byte_idx) >> shift) & 3        # (v, n - a0)
            codes[:n - a0, :v1 - v0] = block.T
            if v1 - v0 < vb:
                codes[:, v1 - v0:] = 1
            ab[:, :vb] = codes == 0
            ab[:, vb:] = codes == 3
            het.copy_(codes == 2)
            called.copy_(codes != 1)
            het_total += het.sum(1, dtype=torch.int64)
            for r0, r1 in strips:
                lo, hi, h, w = r0 - a0, r1 - a0, r1 - r0, n_pad - r0
                ba = torch.cat([ab[lo:hi, vb:], ab[lo:hi, :vb]], 1)      # [A2/A2 | A1/A1]
                hc = torch.cat([het[lo:hi], called[lo:hi]], 0)           # (2h, vb)
                products = ((ba, ab[lo:].T, acc[r0][0]),                  # IBS0
                            (hc, het[lo:].T, acc[r0][1:3].view(2 * h, w)),  # HETHET; het_j
                            (het[lo:hi], called[lo:].T, acc[r0][3]))      # het_i
                for left, right, target in products:
                    if k == 0:
                        int8_matmul(left, right, out=target)
                    else:
                        target += int8_matmul(left, right,
                                              out=scratch[:target.numel()].view(target.shape))
            bar.update(1)
        bad = torch.zeros((), dtype=torch.bool, device=dev)
        for r0, r1 in strips:             # a pair of a sample with itself: 0 and its hets
            lo, h = r0 - a0, r1 - r0
            diag = torch.diagonal(acc[r0][:, :, :h], dim1=1, dim2=2)        # (4, h)
            bad |= (diag[0] != 0).any() | (diag[1:] != het_total[lo:lo + h]).any()
        if bool(bad):
            raise RuntimeError("KING-robust: the int8 products disagree with the samples' "
                               "own het counts (internal error; please report)")
        for r0, r1 in strips:
            yield r0, r1, acc.pop(r0)
    bar.close()


def _king_int8(bf, variant_idx, sample_idx, min_kinship, block_size, variant_block, dev,
               max_memory_bytes):
    """KING-robust from int8 indicator products (the GPU route; runs on the CPU too).

    Per variant block, each sample's calls become 0/1 int8 indicators on ``dev``: A (A1/A1),
    B (A2/A2), H (het), C (called). A pair's counts over the variants called in both are
    IBS0 = A_i.B_j + B_i.A_j, HETHET = H_i.H_j, het_i = H_i.C_j and het_j = C_i.H_j, so
    per row strip R against the samples S from its first row on, three products:

        [B_R | A_R] [A_S | B_S]^T          IBS0            (h, 2 vb) x (2 vb, w)
        [H_R ; C_R] H_S^T                  HETHET; het_j   (2 h, vb) x (vb, w)
        H_R C_S^T                          het_i           (h, vb) x (vb, w)

    5 h w vb multiply-adds, the fewest for these counts (KING's numerator is a rank-3
    form of the two samples' states, het_i and het_j rank 1 each), in int32, exact.
    Then num = 4 IBS0 + het_i + het_j - 2 HETHET and kinship = 0.5 - num / (4
    min(het_i, het_j)), the bit-plane route's integers and float64 formula; only pairs
    above min_kinship (and the NaN count) leave the device.
    Returns (i, j, kinship, n_undefined) as :func:`_king_bitplanes`.
    """
    import torch

    n = len(sample_idx)
    found, pending = [], []            # pairs on the host; pairs still on the device
    n_undefined = torch.zeros((), dtype=torch.int64, device=dev)

    def to_host():
        if pending:
            found.append([torch.cat(part).cpu().numpy() for part in zip(*pending)])
            pending.clear()

    for r0, r1, counts in _int8_strip_counts(bf, variant_idx, sample_idx, block_size,
                                             variant_block, dev, max_memory_bytes):
        w = counts.shape[2]
        cols = torch.arange(r0, r0 + w, device=dev)[None, :]
        rows_per_chunk = max(1, (1 << 24) // w)        # float64 temporaries of 128 MiB
        for c0 in range(0, min(r1, n) - r0, rows_per_chunk):
            c1 = min(c0 + rows_per_chunk, min(r1, n) - r0)
            ibs0, hethet, het_j, het_i = counts[:, c0:c1]
            num = 4 * ibs0 + het_i + het_j - 2 * hethet
            smaller = torch.minimum(het_i, het_j)
            kin = 0.5 - num.to(torch.float64) / (4.0 * smaller.to(torch.float64))
            rows = torch.arange(r0 + c0, r0 + c1, device=dev)[:, None]
            pair = (cols > rows) & (cols < n)
            n_undefined += ((num == 0) & (smaller == 0) & pair).sum()
            if min_kinship is not None:
                pair &= kin > min_kinship
            ii, jj = torch.nonzero(pair, as_tuple=True)
            pending.append((ii + (r0 + c0), jj + r0, kin[ii, jj]))
            if min_kinship is None:     # every pair: off the device chunk by chunk
                to_host()
        del counts
    to_host()
    if not found:
        return (np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.float64),
                int(n_undefined))
    i, j, kin = (np.concatenate(part) for part in zip(*found))
    return i.astype(np.int64), j.astype(np.int64), kin, int(n_undefined)


def pair_counts(bf: plink.Bfile, variant_idx, sample_idx, pos1, pos2,
                block: int = 8192) -> pd.DataFrame:
    """Exact KING counts for given pairs, streaming variant blocks of the .bed.

    pos1, pos2: positions within ``sample_idx`` of each pair's two samples.
    Returns nsnp, hethet, ibs0, het1_hom2, het2_hom1 (int64, jointly called variants)
    and kinship (float64, plink2's formula), one row per pair.
    """
    pos1, pos2 = np.asarray(pos1, np.int64), np.asarray(pos2, np.int64)
    involved, inv = np.unique(np.concatenate([pos1, pos2]), return_inverse=True)
    c1, c2 = inv[:len(pos1)], inv[len(pos1):]
    n_pairs = len(pos1)
    tot = np.zeros((5, n_pairs), dtype=np.int64)
    pair_chunk = max(1, (1 << 24) // max(1, block))
    for v0, v1 in plink.variant_blocks(len(variant_idx), block):
        geno = bf.read(variant_idx[v0:v1], np.asarray(sample_idx)[involved])
        for p0 in range(0, n_pairs, pair_chunk):
            a = geno[:, c1[p0:p0 + pair_chunk]]
            b = geno[:, c2[p0:p0 + pair_chunk]]
            both = (a >= 0) & (b >= 0)
            het_a, het_b = (a == 1) & both, (b == 1) & both
            hom_a, hom_b = both & (a != 1), both & (b != 1)
            sl = slice(p0, p0 + a.shape[1])
            tot[0, sl] += both.sum(0)
            tot[1, sl] += (het_a & het_b).sum(0)
            tot[2, sl] += (hom_a & hom_b & (a != b)).sum(0)
            tot[3, sl] += (het_a & hom_b).sum(0)
            tot[4, sl] += (hom_a & het_b).sum(0)
    out = pd.DataFrame(tot.T, columns=["nsnp", "hethet", "ibs0", "het1_hom2", "het2_hom1"])
    out["kinship"] = king_kinship(out["ibs0"].to_numpy(), out["hethet"].to_numpy(),
                                  out["het1_hom2"].to_numpy(), out["het2_hom1"].to_numpy())
    return out


def king_kinship(ibs0, hethet, het1_hom2, het2_hom1) -> np.ndarray:
    """plink2's KING-robust kinship from jointly-called counts (NaN/-inf when no hets)."""
    ibs0, hethet = np.asarray(ibs0, np.float64), np.asarray(hethet, np.float64)
    h12, h21 = np.asarray(het1_hom2, np.float64), np.asarray(het2_hom1, np.float64)
    smaller_het = hethet + np.minimum(h12, h21)
    with np.errstate(divide="ignore", invalid="ignore"):
        return 0.5 - (4.0 * ibs0 + h12 + h21) / (4.0 * smaller_het)


# ------------------------------------------------------------------------------- outputs
def degree_counts(kinship: np.ndarray) -> dict[str, int]:
    """Pairs per KING degree among kinship values (each pair counted in its own degree)."""
    kinship = np.asarray(kinship, np.float64)
    out, upper = {}, np.inf
    for name, lower in DEGREES:
        out[name] = int(((kinship > lower) & (kinship <= upper)).sum())
        upper = lower
    return out


def _format_g(x: float) -> str:
    return "nan" if x != x else f"{x:.6g}"


def write_unrelated(out: str | os.PathLike, fam: pd.DataFrame, sample_idx: np.ndarray,
                    related: pd.DataFrame, cutoff: float, *, kin0: pd.DataFrame | None = None,
                    extra_summary: dict | None = None) -> dict:
    """Prune and write ``out.king.cutoff.in.id``, ``.out.id``, ``.king.summary.tsv``
    (and ``out.kin0`` when ``kin0`` is given), all atomically.

    fam: the sample table (fid, iid) in .fam order; sample_idx: sorted positions of the
    samples considered (the keep list); related: pairs among them with columns idx1,
    idx2, kinship (at least every pair > min(cutoff, REPORT_MIN_KINSHIP); all pairs >
    cutoff prune, the degree counts take those > REPORT_MIN_KINSHIP).
    Returns the summary as a dict.
    """
    out = str(out)
    sample_idx = np.sort(np.asarray(sample_idx, np.int64))
    local = np.full(len(fam), -1, np.int64)
    local[sample_idx] = np.arange(len(sample_idx))
    above = related[related["kinship"].to_numpy() > cutoff]
    drop_local = prune_king_cutoff(len(sample_idx), local[above["idx1"].to_numpy()],
                                   local[above["idx2"].to_numpy()])
    kept, dropped = sample_idx[~drop_local], sample_idx[drop_local]
    related_samples = np.unique(np.concatenate([above["idx1"].to_numpy(), above["idx2"].to_numpy()]))
    summary = {"samples_considered": len(sample_idx)}
    summary.update(extra_summary or {})
    reported = related[related["kinship"].to_numpy() > REPORT_MIN_KINSHIP]
    for name, count in degree_counts(reported["kinship"].to_numpy()).items():
        summary[f"pairs_{name.replace('/', '_').replace(' ', '_')}"] = count
    summary.update({"kinship_cutoff": cutoff, "pairs_above_cutoff": len(above),
                    "samples_with_relatives": len(related_samples),
                    "samples_dropped": len(dropped), "samples_kept": len(kept)})
    paths = [f"{out}.king.cutoff.in.id", f"{out}.king.cutoff.out.id", f"{out}.king.summary.tsv"]
    if kin0 is not None:
        paths.append(f"{out}.kin0")
    with atomic_outputs(*paths) as tmps:
        plink.write_sample_ids(tmps[0], fam, np.sort(kept))
        plink.write_sample_ids(tmps[1], fam, np.sort(dropped))
        with open(tmps[2], "w") as fh:
            fh.write("metric\tvalue\n")
            for k, v in summary.items():
                fh.write(f"{k}\t{v:g}\n" if isinstance(v, float) else f"{k}\t{v}\n")
        if kin0 is not None:
            _write_kin0(tmps[3], fam, kin0)
    deg = ", ".join(f"{summary[k]} {k[6:].replace('_', ' ')}" for k in summary if k.startswith("pairs_")
                    and k != "pairs_above_cutoff")
    log(f"unrelated: {len(sample_idx)} samples considered; related pairs (kinship > 0.0442): "
        f"{deg}; {len(above)} pairs > {cutoff:g} involve {len(related_samples)} samples; "
        f"dropped {len(dropped)}, kept {len(kept)}")
    if summary.get("undefined_kinship_pairs"):
        log(f"unrelated: {summary['undefined_kinship_pairs']} pairs have no kinship estimate "
            "(nan: no variant called in both, or no heterozygous call in either) and count "
            "as not related, as in plink2 --king-cutoff; a sample with (nearly) every call "
            "missing is the usual cause")
    return summary


def _write_kin0(path, fam: pd.DataFrame, pairs: pd.DataFrame) -> None:
    fid, iid = fam["fid"].to_numpy(), fam["iid"].to_numpy()
    with open(path, "w") as fh:
        fh.write("\t".join(KIN0_COLUMNS) + "\n")
        for r in pairs.itertuples(index=False):
            nsnp = int(r.nsnp)
            fh.write(f"{fid[r.idx1]}\t{iid[r.idx1]}\t{fid[r.idx2]}\t{iid[r.idx2]}\t{nsnp}\t"
                     f"{_format_g(r.hethet / nsnp if nsnp else float('nan'))}\t"
                     f"{_format_g(r.ibs0 / nsnp if nsnp else float('nan'))}\t"
                     f"{_format_g(r.kinship)}\n")


# ---------------------------------------------------------------------------- the routes
def _sample_universe(bfile=None, fam_path=None, keep=None):
    """(fam, sample_idx): the sample table in .fam order and the kept positions."""
    if fam_path is not None:
        from .pgen import read_psam

        fam = read_psam(fam_path)       # a .fam, or a PLINK 2 .psam
    elif bfile is not None:
        from .sources import open_source

        fam = open_source(bfile=bfile).fam
    else:
        raise CmixError("the kinship-table route needs the sample table: give --bfile or --fam "
                        "(plink2 prunes related pairs in .fam order, which a --keep list "
                        "alone does not give)")
    if keep is None:
        return fam, np.arange(len(fam))
    return fam, sample_rows(fam, keep, step="unrelated")[0]


def unrelated_from_table(kinship_path, out, *, cutoff: float = DEFAULT_CUTOFF, bfile=None,
                         fam_path=None, keep=None) -> dict:
    """Table route: read ukb_rel.dat / .kin0, prune pairs > cutoff among kept samples, write.

    Pairs naming an ID outside the sample table are counted and reported (never
    listed); a table none of whose pairs match is an error (wrong ID columns).
    """
    cutoff = check_cutoff(cutoff)
    fam, sample_idx = _sample_universe(bfile, fam_path, keep)
    table = read_kinship_table(kinship_path)
    pairs, n_unknown = match_kinship_pairs(table, fam)
    if len(table) and len(pairs) == 0:
        raise CmixError(f"{kinship_path}: none of its {len(table)} pairs names two samples of "
                        "the cohort; check that its IDs are the .fam IIDs (UK Biobank eids of "
                        "the same application)")
    in_keep = np.zeros(len(fam), bool)
    in_keep[sample_idx] = True
    inside = in_keep[pairs["idx1"].to_numpy()] & in_keep[pairs["idx2"].to_numpy()]
    n_outside = int((~inside).sum())
    if n_unknown:
        log(f"unrelated: {n_unknown} of {len(table)} kinship-table pairs name a sample not in "
            "the cohort; ignored")
    pairs = pairs[inside].reset_index(drop=True)
    summary_extra = {"table_pairs": len(table), "table_pairs_unknown_ids": n_unknown,
                     "table_pairs_outside_keep": n_outside,
                     "undefined_kinship_pairs": int(np.isnan(pairs["kinship"].to_numpy()).sum())}
    return write_unrelated(out, fam, sample_idx, pairs, cutoff, extra_summary=summary_extra)


def unrelated_from_genotypes(genotypes: GenotypeFiles, out, *, cutoff: float = DEFAULT_CUTOFF,
                             extract=None, keep=None, device: str = "auto",
                             block_size: int | None = None, route: str | None = None) -> dict:
    """Genotype route: KING-robust over autosomal (extracted) variants, prune every pair
    above the cutoff (pairs are computed down to it when it is below 0.0442), write the
    .id files, the .kin0 of pairs > 0.0442 and the summary. ``genotypes``: its bfile
    or pfile a prefix or a ``{chrom}`` pattern read across the chromosome set (shared
    fam); its chroms: only these chromosomes (a --chroms spec); ``keep``: a --keep list;
    block_size: samples per row strip of the GPU route's products (default 2,048);
    route: as :func:`king_robust` (default: bit planes on the CPU, int8 products on a GPU)."""
    cutoff = check_cutoff(cutoff)
    chroms = genotypes.chroms
    bf = genotypes.open()
    fam = bf.fam
    sample_idx = (sample_rows(fam, keep, step="unrelated")[0] if keep is not None
                  else np.arange(len(fam)))
    chosen = chrom_mask(bf.bim["chrom"], chroms)
    n_extract_unknown = 0
    if extract is not None:
        listed, n_extract_unknown = extract_mask(bf.bim["variant_id"], extract,
                                                 f"{bf.prefix}.bim")
        chosen &= listed
    usable = king_variants(bf.bim["chrom"])
    n_sex_mt = int((chosen & ~usable).sum())
    variant_idx = np.flatnonzero(chosen & usable)
    if len(variant_idx) == 0:
        raise CmixError(f"{bf.prefix}.bim: no variants off chrX, chrY and MT to compute "
                        "kinship from" + (f" on --chroms {chrom_text(chroms)}" if chroms else ""))
    if len(sample_idx) < 2:
        raise CmixError("KING-robust kinship needs at least 2 samples; the keep list leaves "
                        f"{len(sample_idx)}")
    dev = "cpu" if device == "cpu" else resolve_device(device).type
    how = route or ("bitplanes" if dev == "cpu" else "int8")
    how = {"bitplanes": "bit planes", "int8": "int8 products"}.get(how, how)
    log(f"unrelated: KING-robust over {len(variant_idx)} variants "
        f"({n_sex_mt} on chrX, chrY or MT excluded, as plink2 does"
        + (f", {n_extract_unknown} --extract IDs not in the .bim" if n_extract_unknown else "")
        + f") and {len(sample_idx)} samples on {dev} ({how})")
    # pairs down to the cutoff when it lies below the report threshold: they all prune
    pairs = king_robust(bf, variant_idx, sample_idx, min_kinship=min(cutoff, REPORT_MIN_KINSHIP),
                        block_size=block_size, device=device, route=route)
    kin0 = pairs[pairs["kinship"].to_numpy() > REPORT_MIN_KINSHIP].reset_index(drop=True)
    extra = {"variants_used": len(variant_idx), "variants_x_y_mt_excluded": n_sex_mt,
             "undefined_kinship_pairs": pairs.attrs["undefined_kinship_pairs"]}
    return write_unrelated(out, fam, sample_idx, pairs, cutoff, kin0=kin0, extra_summary=extra)

