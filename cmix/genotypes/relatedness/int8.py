"""KING-robust counts from int8 matrix products, the GPU route (:func:`king_int8`).

The same integers as the bit planes' (:mod:`cmix.genotypes.relatedness.bitplanes`) come
from int8 matrix products on the tensor cores, with int32 sums. Per variant block, each
sample's calls become 0/1 indicators A (A1/A1), B (A2/A2), H (het) and C (called), built
on the device from the .bed bytes; over the variants called in both samples of a pair,

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
"""

from __future__ import annotations

import numpy as np

from ...logs import log, progress
from ...readers import plink


#: samples per row strip of the int8 route (rounded to a multiple of 32)
INT8_STRIP = 2048
#: variants per block of the int8 route (rounded up to a multiple of 64)
INT8_VARIANTS = 8192
#: bytes per sample pair of the int8 route's accumulators (IBS0, HETHET, het_j, het_i)
_INT8_PAIR_BYTES = 16


def int8_memory(dev) -> int:
    """Default cap on the int8 route's accumulators: a third of a CUDA device's free
    memory (the variant block and one strip's products come on top), 1 GiB on the CPU."""
    import torch  # heavy to import (seconds); only the int8 route needs it

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
    import torch  # heavy to import (seconds); only the int8 route needs it

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
    with j <= i or a padding sample are not pairs. See :func:`king_int8`.
    """
    import torch  # heavy to import (seconds); only the int8 route needs it

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


def king_int8(bf, variant_idx, sample_idx, min_kinship, block_size, variant_block, dev,
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
    Returns (i, j, kinship, n_undefined) as
    :func:`cmix.genotypes.relatedness.bitplanes.king_bitplanes`.
    """
    import torch  # heavy to import (seconds); only the int8 route needs it

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
