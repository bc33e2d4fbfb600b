"""Genetic principal components: plink2's LD pruning, a streamed randomized PCA, projection.

Three steps, each checked against plink2 by tests/test_pca.py:

1. Variant choice. Autosomal variants (optionally only those of a QC ``.snplist``),
   minus long-range LD regions (``cmix/data/high_ld_regions_grch37.tsv``), LD-pruned
   exactly as plink2 2.00a3.5 ``--indep-pairwise WINDOW[kb] STEP R2`` does it on the
   fitted samples (:func:`ld_prune`), so OUT.prune.in equals plink2's .prune.in.
2. PCA of the fitted samples (the unrelated set). Genotypes are standardised as plink2
   ``--pca`` does: z = (g - 2p) / sqrt(2p(1-p)) with p the allele frequency among the
   fitted founders, missing calls mean-imputed (z = 0). The top PCs come from a
   randomized block Krylov method (:func:`randomized_pca`) whose every pass streams the
   .bed through dask in blocks of variants, so the n x m matrix is never in memory and
   memory stays flat in the number of variants.
3. Projection. Every other sample asked for is projected onto the same axes with the
   SNP loadings; its scores are on the scale of the fitted samples' eigenvectors.

Outputs, in plink2's layouts (:func:`write_pca_outputs`): OUT.eigenvec (fitted and
projected samples, .fam order), OUT.eigenval, OUT.eigenvec.allele (allele weights, as
``plink2 --pca allele-wts``), OUT.acount (allele counts of the fitted founders, as
``plink2 --freq counts``), OUT.prune.in / OUT.prune.out. New people are projected
with ``plink2 --read-freq OUT.acount --score OUT.eigenvec.allele 2 5 header-read
no-mean-imputation variance-standardize cols=+scoresums --score-col-nums 6-...``:
PCk of OUT.eigenvec = PCk_SUM / (m sqrt(eigenvalue_k)), m the number of variants in
OUT.acount: those that vary among the fitted founders (:meth:`Pca.score_scale`). plink2 2.00a3.5 needs 'no-mean-imputation' here: with mean
imputation and variance-standardize it adds w (2p / sd) for a missing call instead of 0.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
from numba import njit

from . import plink
from ..errors import CmixError
from ..logs import log
from .kernels import K_SMALL_EPSILON, count_genotypes, founder_flags, popcount, set_numba_threads
from .selection import (chrom_code, chrom_codes, chrom_mask, extract_mask, is_autosome,
                        sample_rows)

if TYPE_CHECKING:
    from .sources import GenotypeFiles

#: long-range LD regions shipped with cmix as package data (cmix/data/, GRCh37; see the
#: file's header); a real path in a source tree and in a pip install, -e or not
HIGH_LD_REGIONS = Path(str(files("cmix") / "data" / "high_ld_regions_grch37.tsv"))


# ---------------------------------------------------------------- long-range LD regions
def read_regions(path) -> pd.DataFrame:
    """Read a region list: columns chrom, start, end (1-based, inclusive bp), label.

    Whitespace separated; lines starting with '#' and blank lines are skipped. The
    chromosome may be written 6, 06 or chr6 (:func:`cmix.genotypes.selection.chrom_code`).
    Errors name the line.
    """
    path = Path(path)
    if not path.exists():
        raise CmixError(f"{path}: file not found (long-range LD region list)")
    rows = []
    from ..text import open_maybe_gzip  # gzip, a UTF-8 BOM and CRLF read as plain text

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


# ---------------------------------------------------------------- LD pruning (plink2)
@dataclass(frozen=True)
class PruneSettings:
    """``--indep-pairwise WINDOW[kb] STEP R2``: window in variants (or bp when
    ``kb``), step in variants (1 with a kb window), r^2 threshold."""

    window: int
    step: int
    r2: float
    kb: bool = False

    @classmethod
    def parse(cls, values: list[str]) -> "PruneSettings":
        """Parse plink2's argument forms: ``50 5 0.2``, ``500kb 1 0.2``, ``500 kb 0.2``,
        ``500kb 0.2`` (step 1). Raises CmixError with what was expected."""
        args = list(values)
        kb = False
        if len(args) >= 2 and args[1].lower() == "kb":
            kb = True
            del args[1]
        elif args and args[0].lower().endswith("kb"):
            kb = True
            args[0] = args[0][:-2]
        usage = ("--indep-pairwise expects WINDOW[kb] [STEP] R2, e.g. '1000kb 1 0.1' or "
                 "'50 5 0.2'")
        if len(args) not in (2, 3):
            raise CmixError(f"{usage}; got {' '.join(values)!r}")
        try:
            size = float(args[0])
            step = int(args[1]) if len(args) == 3 else 1
            r2 = float(args[-1])
        except ValueError:
            raise CmixError(f"{usage}; got {' '.join(values)!r}") from None
        if kb:
            window = int(size * 1000 + 0.5)
            if window < 1:
                raise CmixError(f"--indep-pairwise: a kb window must be positive, got {args[0]}kb")
            if step != 1:
                raise CmixError("--indep-pairwise: the step must be 1 when the window is in kb "
                                f"(as in plink2), got {step}")
        else:
            window = int(size)
            if window != size or window < 2:
                raise CmixError(f"--indep-pairwise: the window must be a whole number of "
                                f"variants >= 2, got {args[0]}")
            if not 1 <= step <= window:
                raise CmixError(f"--indep-pairwise: the step must be between 1 and the "
                                f"window size ({window}), got {step}")
        if not 0.0 <= r2 < 1.0:
            raise CmixError(f"--indep-pairwise: the r^2 threshold must be in [0, 1), got {r2}")
        return cls(window=window, step=step, r2=r2, kb=kb)

    def __str__(self) -> str:
        return (f"{self.window // 1000}kb {self.step} {self.r2:g}" if self.kb
                else f"{self.window} {self.step} {self.r2:g}")


@njit(cache=True, nogil=True)
def _pack_hom_r2h(packed, byte_idx, shift, slots, hom, r2h, counts):
    """Split .bed rows into plink2's two bit vectors per variant, for chosen samples.

    packed: uint8 (v, bytes_per_variant) .bed rows. byte_idx, shift: int64 (n,) byte and
    bit offset of each chosen sample. slots: int64 (v,) rows of hom/r2h to fill.
    hom, r2h: uint64 (cap, ceil(n/64)); bit s of hom is set when sample s is
    homozygous, of r2h when it carries an A2 (plink2's REF) allele: 11 or 10.
    counts: int64 (v, 4) <- the numbers of codes 00 (hom A1), 01 (missing), 10 (het),
    11 (hom A2) among the chosen samples.
    """
    n = byte_idx.shape[0]
    n_words = hom.shape[1]
    for j in range(packed.shape[0]):
        slot = slots[j]
        for w in range(n_words):
            hom[slot, w] = 0
            r2h[slot, w] = 0
        c0 = 0
        c1 = 0
        c2 = 0
        c3 = 0
        for s in range(n):
            code = (packed[j, byte_idx[s]] >> shift[s]) & 3
            bit = np.uint64(1) << np.uint64(s & 63)
            w = s >> 6
            if code == 0:
                c0 += 1
                hom[slot, w] |= bit
            elif code == 1:
                c1 += 1
            elif code == 2:
                c2 += 1
                r2h[slot, w] |= bit
            else:
                c3 += 1
                hom[slot, w] |= bit
                r2h[slot, w] |= bit
        counts[j, 0] = c0
        counts[j, 1] = c1
        counts[j, 2] = c2
        counts[j, 3] = c3


@njit(cache=True, nogil=True)
def _r2_exceeds(hom, r2h, a, b, nm_a, sum_a, ssq_a, nm_b, sum_b, ssq_b, n, thresh):
    """plink2's unphased hardcall r^2 > threshold test for rows a, b of hom/r2h.

    Genotypes are coded -1, 0, +1 (A1 hom, het, A2 hom); over the samples called in
    both, cov = N dot - S_a S_b and var = N Q - S^2 are exact integers, and the test is
    cov^2 > thresh * var_a * var_b in doubles, in plink2's order of operations.
    """
    n_words = hom.shape[1]
    both = 0
    neg = 0
    full = nm_a == n and nm_b == n
    n_joint = 0
    q_a = 0
    p_a = 0
    q_b = 0
    p_b = 0
    for w in range(n_words):
        ha = hom[a, w]
        hb = hom[b, w]
        ra = r2h[a, w]
        rb = r2h[b, w]
        hh = ha & hb
        both += popcount(hh)
        neg += popcount(hh & (ra ^ rb))
        if not full:
            nma = ha | ra
            nmb = hb | rb
            n_joint += popcount(nma & nmb)
            x = nmb & ha
            q_a += popcount(x)
            p_a += popcount(x & ra)
            y = nma & hb
            q_b += popcount(y)
            p_b += popcount(y & rb)
    dot = np.int64(both) - 2 * np.int64(neg)
    if full:
        nj = np.int64(n)
        s_a = np.int64(sum_a)
        s_b = np.int64(sum_b)
        sq_a = np.int64(ssq_a)
        sq_b = np.int64(ssq_b)
    else:
        nj = np.int64(n_joint)
        s_a = 2 * np.int64(p_a) - np.int64(q_a)
        s_b = 2 * np.int64(p_b) - np.int64(q_b)
        sq_a = np.int64(q_a)
        sq_b = np.int64(q_b)
    cov = np.float64(dot * nj - s_a * s_b)
    var_a = np.float64(sq_a * nj - s_a * s_a)
    var_b = np.float64(sq_b * nj - s_b * s_b)
    return cov * cov > thresh * var_a * var_b


@njit(cache=True, nogil=True)
def _prune_subcontig(hom, r2h, nm, vsum, vssq, maj, mono, bp, n, window, step, kb, thresh,
                     loaded_end, state, win, wrem, first_unchecked, removed):
    """Run plink2's --indep-pairwise over one contig piece as far as loaded data allows.

    Variant t (0..L-1) of the piece lives in row t % cap of hom/r2h. Per-variant inputs
    (L,): nm, vsum, vssq (called count, sum and sum of squares of the -1/0/+1 codes),
    maj (major allele frequency), mono (no variance: removed on loading), bp.
    state int64 [cur, window_start, window_end, window_size]; win/wrem: the current
    window's variants and removed flags; first_unchecked, removed: per variant.
    Returns True when the piece is finished, False when variant ``loaded_end`` is needed.

    Order of comparisons (plink2 2.00a3.5, plink_ld.cc IndepPairwiseThread): when a
    window is complete, passes over it repeat while they remove something; in a pass,
    each remaining variant f (in order) is compared with the later remaining variants
    it has not been compared with yet, until one pair has r^2 above the threshold: then
    the variant with the lower major allele frequency (the higher MAF) is kept
    (ties: the later one is removed), and f moves on.
    """
    L = bp.shape[0]
    cur = state[0]
    ws = state[1]
    ne = state[2]
    size = state[3]
    finished = False
    while True:
        if cur >= L:
            finished = True
            break
        if cur >= loaded_end:
            break
        win[size] = cur
        wrem[size] = mono[cur]
        if mono[cur]:
            removed[cur] = 1
        else:
            first_unchecked[cur] = cur + 1
        size += 1
        cur += 1
        if cur != ne:
            continue
        _prune_window(hom, r2h, nm, vsum, vssq, maj, n, thresh, win, wrem, size, cur,
                      first_unchecked, removed)
        if ne == L:
            cur = L
            finished = True
            break
        ws, ne = _next_window(bp, window, step, kb, ws, ne)
        size = _keep_window_tail(win, wrem, size, ws)
    state[0] = cur
    state[1] = ws
    state[2] = ne
    state[3] = size
    return finished


@njit(cache=True, nogil=True)
def _prune_window(hom, r2h, nm, vsum, vssq, maj, n, thresh, win, wrem, size, cur,
                  first_unchecked, removed):
    """Prune one complete window in place, in plink2's order (see :func:`_prune_subcontig`).

    win[:size]: the window's variants (piece indices, rows t % cap of hom/r2h); wrem[:size]
    their removed flags; cur: the first variant after the window. Passes repeat while
    they remove something; updates wrem, removed and first_unchecked (per variant).
    """
    cap = hom.shape[0]
    grow = 1.0 + K_SMALL_EPSILON
    n_removed = 0
    for i in range(size):
        n_removed += wrem[i]
    while True:
        prev_removed = n_removed
        fp = 0
        while True:
            while fp < size and wrem[fp]:
                fp += 1
            if fp == size:
                break
            f = win[fp]
            fu = first_unchecked[f]
            sp = fp + 1
            while sp < size and (wrem[sp] or win[sp] < fu):
                sp += 1
            if sp < size:
                while True:
                    s = win[sp]
                    if _r2_exceeds(hom, r2h, f % cap, s % cap, nm[f], vsum[f], vssq[f],
                                   nm[s], vsum[s], vssq[s], n, thresh):
                        if maj[f] > maj[s] * grow:
                            wrem[fp] = 1
                            removed[f] = 1
                        else:
                            wrem[sp] = 1
                            removed[s] = 1
                            nx = sp + 1
                            while nx < size and wrem[nx]:
                                nx += 1
                            first_unchecked[f] = win[nx] if nx < size else cur
                        break
                    sp += 1
                    while sp < size and wrem[sp]:
                        sp += 1
                    if sp == size:
                        first_unchecked[f] = cur
                        break
            fp += 1
        n_removed = 0
        for i in range(size):
            n_removed += wrem[i]
        if n_removed <= prev_removed:
            break


@njit(cache=True, nogil=True)
def _next_window(bp, window, step, kb, ws, ne):
    """The next window's (start, end) variant indices: with a kb window (``kb`` true), the
    start moves past the first variant and on until within ``window`` bp of the old end,
    and the end extends to every variant within ``window`` bp of the new start; else the
    start moves by ``step`` variants and the window holds ``window`` variants."""
    L = bp.shape[0]
    if kb:
        start_min = bp[ne] - window
        ws += 1
        while bp[ws] < start_min:
            ws += 1
        end_max = bp[ws] + window
        ne += 1
        while ne < L and bp[ne] <= end_max:
            ne += 1
    else:
        ws += step
        ne = min(ws + window, L)
    return ws, ne


@njit(cache=True, nogil=True)
def _keep_window_tail(win, wrem, size, ws):
    """In place: keep the not-removed variants of win[:size] at or after ``ws`` (in order)
    at the front of ``win`` and clear ``wrem``; returns their number."""
    k = 0
    for i in range(size):
        if wrem[i] == 0 and win[i] >= ws:
            win[k] = win[i]
            k += 1
        wrem[i] = 0
    return k


def _subcontigs(chrom: np.ndarray, pos: np.ndarray, settings: PruneSettings) -> list[np.ndarray]:
    """Split selected variants (in .bim order) into plink2's independent pieces.

    Pieces are chromosomes; with a kb window also split where consecutive positions are
    more than the window apart (no pair across such a gap is ever compared). Pieces of
    one variant are dropped: plink2 skips them, so they are never pruned.
    Returns int arrays of positions into the selected list.
    """
    pieces = []
    bounds = np.flatnonzero(chrom[1:] != chrom[:-1]) + 1
    for idx in np.split(np.arange(len(chrom)), bounds):
        if settings.kb and len(idx) > 1:
            gaps = np.flatnonzero(np.diff(pos[idx]) > settings.window) + 1
            parts = np.split(idx, gaps)
        else:
            parts = [idx]
        pieces.extend(p for p in parts if len(p) > 1)
    return pieces


def _window_max(pos: np.ndarray, settings: PruneSettings) -> int:
    """The most variants one window of this piece can hold."""
    if not settings.kb:
        return min(settings.window, len(pos))
    ends = np.searchsorted(pos, pos + settings.window, side="right")
    return int((ends - np.arange(len(pos))).max())


def sample_offsets(sample_idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Byte index and bit shift of each sample's 2-bit code in a .bed row."""
    sample_idx = np.asarray(sample_idx, np.int64)
    return sample_idx >> 2, ((sample_idx & 3) << 1).astype(np.int64)


def _prune_piece(bf, gv: np.ndarray, pos: np.ndarray, byte_idx, shift, settings,
                 batch: int) -> np.ndarray:
    """Prune one piece (global variant indices ``gv``); returns bool removed (len(gv),)."""
    L = len(gv)
    n = len(byte_idx)
    wmax = _window_max(pos, settings)
    cap = wmax + batch
    n_words = max(1, (n + 63) // 64)
    hom = np.zeros((cap, n_words), np.uint64)
    r2h = np.zeros((cap, n_words), np.uint64)
    nm = np.zeros(L, np.int64)
    vsum = np.zeros(L, np.int64)
    vssq = np.zeros(L, np.int64)
    maj = np.zeros(L, np.float64)
    mono = np.zeros(L, np.uint8)
    first_unchecked = np.zeros(L, np.int64)
    removed = np.zeros(L, np.uint8)
    win = np.zeros(wmax + 1, np.int64)
    wrem = np.zeros(wmax + 1, np.uint8)
    first_end = (min(L, settings.window) if not settings.kb
                 else int(np.searchsorted(pos, pos[0] + settings.window, side="right")))
    state = np.array([0, 0, min(first_end, L), 0], np.int64)
    thresh = settings.r2 * (1.0 + K_SMALL_EPSILON)
    loaded = 0
    while not _prune_subcontig(hom, r2h, nm, vsum, vssq, maj, mono, pos, n, settings.window,
                               settings.step, settings.kb, thresh, loaded, state, win, wrem,
                               first_unchecked, removed):
        stop = min(L, loaded + batch)
        rows = bf.packed_rows(gv[loaded:stop])
        counts = np.zeros((stop - loaded, 4), np.int64)
        _pack_hom_r2h(rows, byte_idx, shift, np.arange(loaded, stop) % cap, hom, r2h, counts)
        c00, _, c10, c11 = counts.T
        called = c00 + c10 + c11
        nm[loaded:stop] = called
        vsum[loaded:stop] = c11 - c00
        vssq[loaded:stop] = c11 + c00
        mono[loaded:stop] = (c00 + c11 == 0) | (c00 == called) | (c11 == called)
        maj[loaded:stop] = _major_frequency(2 * c11 + c10, 2 * called)
        loaded = stop
    return removed.astype(bool)


def _major_frequency(a2_count: np.ndarray, allele_count: np.ndarray) -> np.ndarray:
    """plink2's major allele frequency: f = count * (1 / total) for A2 (REF); the major
    allele's frequency is f, or 1 - f when f < 0.5 (bit for bit as plink2 computes it)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        f = a2_count * (1.0 / allele_count.astype(np.float64))
    f = np.where(allele_count > 0, f, 0.5)
    return np.where(f < 0.5, 1.0 - f, f)


def ld_prune(bf, variant_idx: np.ndarray, sample_idx: np.ndarray, settings: PruneSettings,
             threads: int | None = None, batch: int = 1024) -> np.ndarray:
    """plink2 ``--indep-pairwise`` on the founders among ``sample_idx``.

    variant_idx: sorted int indices (.bim order) of the candidate variants. Returns bool
    (len(variant_idx),): True for variants kept (plink2's .prune.in). Chromosomes are
    pruned independently (in parallel on ``threads`` threads); within one, the .bed is
    read in batches of ``batch`` variants into a ring buffer of bit vectors, so memory
    is about (window + batch) x n_samples / 4 bytes per thread.
    """
    variant_idx = np.asarray(variant_idx, np.int64)
    sample_idx = np.asarray(sample_idx, np.int64)
    founders = sample_idx[founder_flags(bf.fam)[sample_idx]]
    if len(founders) < 2:
        raise CmixError(f"--indep-pairwise needs at least 2 founders among the samples; "
                        f"found {len(founders)}")
    bim = bf.bim.iloc[variant_idx]
    chrom = bim["chrom"].astype(str).to_numpy()
    pos = bim["pos"].to_numpy(np.int64)
    _check_sorted(bf, variant_idx, chrom, pos, settings)
    byte_idx, shift = sample_offsets(founders)
    keep = np.ones(len(variant_idx), bool)
    pieces = _subcontigs(chrom, pos, settings)
    threads = max(1, min(threads or os.cpu_count() or 1, len(pieces) or 1))

    def run(piece):
        return piece, _prune_piece(bf, variant_idx[piece], pos[piece], byte_idx, shift,
                                   settings, batch)

    with ThreadPoolExecutor(threads) as pool:
        for piece, removed in pool.map(run, sorted(pieces, key=len, reverse=True)):
            keep[piece[removed]] = False
    return keep


def _check_sorted(bf, variant_idx, chrom, pos, settings) -> None:
    """plink2 needs each chromosome's variants together, and sorted by position for a
    kb window; say which variant (by ID, in the .bim/.pvar of the input) breaks that."""
    bim_path = bf.variant_file
    ids = bf.bim["variant_id"].to_numpy()
    change = np.flatnonzero(chrom[1:] != chrom[:-1]) + 1
    seen = chrom[np.r_[0, change]] if len(chrom) else chrom
    if len(set(seen)) != len(seen):
        dup = pd.Series(seen).duplicated().to_numpy()
        i = change[int(np.flatnonzero(dup)[0]) - 1]
        raise CmixError(f"{bim_path}: variant {ids[variant_idx[i]]!r}: chromosome {chrom[i]} "
                        "appears again after other chromosomes; LD pruning needs each "
                        "chromosome's variants together (sort the files, e.g. plink2 "
                        "--make-bed --sort-vars)")
    if settings.kb:
        same = chrom[1:] == chrom[:-1]
        back = np.flatnonzero(same & (pos[1:] < pos[:-1]))
        if len(back):
            i = back[0] + 1
            raise CmixError(f"{bim_path}: variant {ids[variant_idx[i]]!r}: position {pos[i]} is "
                            f"before the previous variant's ({pos[i - 1]}); a kb window needs "
                            "positions sorted within each chromosome")


# ---------------------------------------------------------------- standardised genotypes
@njit(cache=True, nogil=True)
def _standardize_block(packed, byte_idx, shift, lut, out):
    """out[j, s] = lut[j, code of sample s in .bed row j].

    packed: uint8 (b, bytes_per_variant); byte_idx, shift: int64 (n,); lut: (b, 4)
    standardised value of each 2-bit code; out: (b, n), float32 or float64. Serial:
    chunks run in parallel on dask's threads (the GIL is released).
    """
    n = byte_idx.shape[0]
    for j in range(packed.shape[0]):
        row = packed[j]
        t = lut[j]
        o = out[j]
        for s in range(n):
            o[s] = t[(row[byte_idx[s]] >> shift[s]) & 3]


def standardizing_table(hom_a1, het, hom_a2) -> tuple[np.ndarray, np.ndarray]:
    """plink2 --pca's variance standardisation from the fitted founders' counts.

    Inputs int (m,). p = A1 (ALT) frequency among called founders; the A1 count g of a
    call becomes z = (g - 2p) / sqrt(2p(1-p)), a missing call z = 0 (the mean).
    Returns (lut float64 (m, 4): z for codes 00, 01, 10, 11 (g = 2, missing, 1, 0),
    p_a1 float64 (m,)). A variant without variance (p = 0 or 1, or no call) gets z = 0
    everywhere: it adds nothing, as in plink2.
    """
    hom_a1 = np.asarray(hom_a1, np.int64)
    het = np.asarray(het, np.int64)
    called = hom_a1 + het + np.asarray(hom_a2, np.int64)
    with np.errstate(invalid="ignore", divide="ignore"):
        p = (2 * hom_a1 + het) / (2.0 * called)
        sd = np.sqrt(2 * p * (1 - p))
        ok = (called > 0) & (sd > 0)
        lut = np.stack([(2 - 2 * p) / sd, np.zeros_like(p), (1 - 2 * p) / sd, -2 * p / sd], 1)
    lut[~ok] = 0.0
    return lut, p


def _variant_chunks(n_variants: int, n_samples: int, itemsize: int, block_bytes: int):
    size = max(1, min(n_variants, block_bytes // max(1, n_samples * itemsize)))
    return tuple(b - a for a, b in plink.variant_blocks(n_variants, size)) or (0,)


def standardized_dask(bf, variant_idx: np.ndarray, sample_idx: np.ndarray, lut: np.ndarray,
                      dtype=np.float32, block_bytes: int = 64 << 20):
    """A lazy dask array of standardised genotypes, (n_variants, n_samples) of ``dtype``.

    Each chunk (about ``block_bytes``) reads its variants' .bed rows (``bf.packed_rows``:
    any genotype source of :mod:`cmix.genotypes.sources`) and decodes them through ``lut`` (see :func:`standardizing_table`), so any
    computation over it streams the file in bounded memory.
    """
    import dask.array as da

    variant_idx = np.asarray(variant_idx, np.int64)
    byte_idx, shift = sample_offsets(sample_idx)
    lut = np.asarray(lut, dtype)
    chunks = (_variant_chunks(len(variant_idx), len(byte_idx), np.dtype(dtype).itemsize,
                              block_bytes), (len(byte_idx),))

    def block(block_info=None):
        (v0, v1), _ = block_info[None]["array-location"]
        rows = bf.packed_rows(variant_idx[v0:v1])
        out = np.empty((v1 - v0, len(byte_idx)), dtype)
        _standardize_block(rows, byte_idx, shift, lut[v0:v1], out)
        return out

    return da.map_blocks(block, chunks=chunks, dtype=dtype, meta=np.empty((0, 0), dtype))


# ---------------------------------------------------------------- randomized PCA
def _orthonormalize(y: np.ndarray, against: list[np.ndarray]) -> np.ndarray:
    """Columns of ``y`` (float64, tall) made orthonormal and orthogonal to the
    orthonormal blocks ``against``: block Gram-Schmidt twice, then the eigenvectors of
    the small Gram matrix (Cholesky-QR2 style); directions already in the span (relative
    norm < 1e-10) are dropped. Returns (n, <= y.shape[1])."""
    q = y.copy()
    for _ in range(2):
        for b in against:
            q -= b @ (b.T @ q)
        w, v = np.linalg.eigh(q.T @ q)
        ok = w > max(w.max(), 0.0) * 1e-20
        if not ok.any():
            return q[:, :0]
        q = q @ (v[:, ok] / np.sqrt(w[ok]))
    return q


def randomized_pca(x, n_pcs: int, *, seed: int = 0, n_blocks: int | None = None,
                   block_width: int | None = None,
                   threads: int = 1) -> tuple[np.ndarray, np.ndarray, int]:
    """Top ``n_pcs`` eigenpairs of X' X / m for a dask array X (m variants x n samples).

    Randomized block Krylov (Musco & Musco 2015; the method of plink2 --pca approx,
    Galinsky et al. 2016, with the Krylov basis kept on the sample side): from a
    Gaussian start Q_0 (n x l, ``seed``), Q_{i+1} = orth(X' X Q_i) against all earlier
    blocks, for ``n_blocks`` blocks; the Ritz pairs of X' X on their span (the small
    matrix K' X' X K, from products already computed) give the PCs. Each block costs
    one pass over X, computing X' (X Q_i) chunk by chunk. Defaults follow plink2's
    approx: l = 2k, k + 1 blocks (fewer for k > 10, so the basis stays near 512
    columns). Memory: the basis and its image (n x 512 float64 each, at most) and one
    chunk of X.

    Returns (eigenvectors float64 (n, k) with unit columns, each signed so that its
    largest entry is positive; eigenvalues float64 (k,) of X' X / m, descending;
    number of passes over X).
    """
    m, n = x.shape
    k = n_pcs
    width = block_width or 2 * k
    n_blocks = n_blocks or min(k + 1, max(3, 512 // width))   # basis <= ~512 columns
    rng = np.random.default_rng(seed)
    q = _orthonormalize(rng.standard_normal((n, width)), [])
    basis, images = [], []
    for i in range(n_blocks):
        y = np.asarray(_gram_times(x, q.astype(x.dtype), threads), np.float64)
        basis.append(q)
        images.append(y)
        if i + 1 < n_blocks:
            q = _orthonormalize(y, basis)
            if q.shape[1] == 0:
                break
    kb = np.hstack(basis)
    t = kb.T @ np.hstack(images)
    theta, s = np.linalg.eigh((t + t.T) / 2)
    order = np.argsort(theta)[::-1][:k]
    u = kb @ s[:, order]
    u *= np.sign(u[np.abs(u).argmax(axis=0), np.arange(u.shape[1])])
    return u, theta[order] / m, len(basis)


def _gram_times(x, q: np.ndarray, threads: int) -> np.ndarray:
    """X' (X q) for dask X (m x n) and numpy q (n x l): one pass over X's chunks."""
    import dask

    q = dask.delayed(q)
    parts = [dask.delayed(_chunk_gram)(b, q) for b in x.to_delayed().ravel()]
    return _compute(threads, _tree_sum(parts))[0]


def _compute(threads: int, *delayed):
    """Compute on dask's threaded scheduler with ``threads`` workers, each chunk's
    products on one BLAS thread: every chunk is then computed the same way and the
    tree of sums is fixed, so the result does not depend on the thread count."""
    import dask
    from threadpoolctl import threadpool_limits

    with threadpool_limits(1):
        return dask.compute(*delayed, scheduler="threads", num_workers=threads)


def _chunk_gram(xb: np.ndarray, q: np.ndarray) -> np.ndarray:
    return xb.T @ (xb @ q)


# ---------------------------------------------------------------- loadings and projection
@dataclass
class Pca:
    """A fitted PCA and the projection of further samples.

    eigenvectors: float64 (n_fit, k), unit columns (plink2's .eigenvec values).
    eigenvalues: float64 (k,) of the GRM Z Z' / m (plink2's .eigenval), Z the
    standardised genotypes of the fitted samples (n_fit x m), m = number of variants
    that vary among the fitted founders.
    loadings: float64 (m, k), unit SNP loadings v_k = Z' u_k / sqrt(m lambda_k).
    projected: float64 (n_other, k), Z_other v_k / sqrt(m lambda_k): on the scale of
    the eigenvectors (a fitted sample would get back its own eigenvector entry).
    alt_count, allele_count: int64 (m,), A1 (ALT) alleles and called alleles among the
    fitted founders (the frequencies that standardise). n_passes: over the .bed.
    m counts only the variants that vary among the fitted founders (``used``); the
    others are not part of the PCA or its outputs.
    """

    eigenvectors: np.ndarray
    eigenvalues: np.ndarray
    loadings: np.ndarray
    projected: np.ndarray
    alt_count: np.ndarray
    allele_count: np.ndarray
    n_passes: int
    used: np.ndarray = None     # bool (len(variant_idx) given,): the variants that vary

    @property
    def n_variants(self) -> int:
        return self.loadings.shape[0]

    def score_scale(self) -> np.ndarray:
        """m sqrt(lambda_k), float64 (k,): plink2 ``--score OUT.eigenvec.allele ...
        variance-standardize no-mean-imputation cols=+scoresums`` with
        ``--read-freq OUT.acount`` gives PCk_SUM; PCk_SUM / this = PCk of OUT.eigenvec."""
        return self.n_variants * np.sqrt(self.eigenvalues)


def fit_and_project(bf, variant_idx: np.ndarray, fit_idx: np.ndarray, other_idx: np.ndarray,
                    n_pcs: int, *, seed: int = 0, threads: int | None = None,
                    block_bytes: int = 64 << 20) -> Pca:
    """PCA of samples ``fit_idx`` over variants ``variant_idx`` (int indices into the
    .fam/.bim), then the projection of samples ``other_idx``: a pass counting alleles,
    the Krylov passes in float32 and one final pass in float64 for loadings and
    projection. Raises CmixError when fewer than ``n_pcs`` variants vary.

    threads: allele counting threads and dask workers (None = all cores). BLAS runs on
    one thread throughout, so the result is the same at any thread count.
    """
    from threadpoolctl import threadpool_limits

    variant_idx = np.asarray(variant_idx, np.int64)
    fit_idx = np.asarray(fit_idx, np.int64)
    other_idx = np.asarray(other_idx, np.int64)
    counts = count_genotypes(bf, fit_idx, threads=threads, show_progress=False)
    hom_a1, het, hom_a2 = (counts.hom_a1[variant_idx], counts.het[variant_idx],
                           counts.hom_a2[variant_idx])
    lut, _ = standardizing_table(hom_a1, het, hom_a2)
    used = (lut != 0).any(axis=1)
    n_informative = int(used.sum())
    if n_informative < n_pcs:
        raise CmixError(f"--pcs {n_pcs}: only {n_informative} of the {len(variant_idx)} "
                        "variants vary among the fitted founders; ask for fewer PCs or "
                        "keep more variants")
    # a variant without variance among the fitted founders (monomorphic, or no call) adds
    # nothing to Z Z' and is left out of m too, so it does not dilute the eigenvalues
    variant_idx, lut = variant_idx[used], lut[used]
    hom_a1, het, hom_a2 = hom_a1[used], het[used], hom_a2[used]
    x = standardized_dask(bf, variant_idx, fit_idx, lut, np.float32, block_bytes)
    x_all = standardized_dask(bf, variant_idx, np.concatenate([fit_idx, other_idx]), lut,
                              np.float64, block_bytes)
    n_threads = set_numba_threads(threads)
    with threadpool_limits(1):
        u, eigenvalues, n_passes = randomized_pca(x, n_pcs, seed=seed, threads=n_threads)
        scale = np.sqrt(eigenvalues * len(variant_idx))
        loadings, projected = _loadings_and_projection(x_all, len(fit_idx), u / scale,
                                                       n_threads)
    return Pca(eigenvectors=u, eigenvalues=eigenvalues, loadings=loadings,
               projected=projected / scale, alt_count=2 * hom_a1 + het,
               allele_count=2 * (hom_a1 + het + hom_a2), n_passes=n_passes + 1, used=used)


def _loadings_and_projection(x_all, n_fit: int, u_scaled: np.ndarray, threads: int):
    """One pass over X (dask, m x (n_fit + n_other), fitted samples first):
    (X_fit u_scaled (m x k), X_other' X_fit u_scaled (n_other x k))."""
    import dask

    u = dask.delayed(u_scaled)
    parts = [dask.delayed(_chunk_project)(b, u, n_fit) for b in x_all.to_delayed().ravel()]
    loads = dask.delayed(np.vstack)([p[0] for p in parts])
    return _compute(threads, loads, _tree_sum([p[1] for p in parts]))


def _chunk_project(xb, u_scaled, n_fit):
    v = xb[:, :n_fit] @ u_scaled
    return v, xb[:, n_fit:].T @ v


def _tree_sum(parts: list):
    """Add delayed arrays pairwise (a fixed order, so the same result every run)."""
    import dask

    while len(parts) > 1:
        parts = [dask.delayed(np.add)(*parts[i:i + 2]) if i + 1 < len(parts) else parts[i]
                 for i in range(0, len(parts), 2)]
    return parts[0]


# ---------------------------------------------------------------- outputs
def write_pca_outputs(out_prefix, *, fam: pd.DataFrame, sample_rows: np.ndarray,
                      scores: np.ndarray, pca: Pca, bim: pd.DataFrame,
                      prune: tuple[np.ndarray, np.ndarray] | None) -> list[Path]:
    """Write the PCA outputs, all or none (temporary names, renamed at the end).

    OUT.eigenvec: ``#FID IID PC1..PCk`` for the .fam rows ``sample_rows`` (scores
    (n, k)). OUT.eigenval: one GRM eigenvalue a line. OUT.eigenvec.allele: plink2's
    allele-weight layout ``#CHROM ID REF ALT A1 PC1..``, a REF line then an ALT line per
    variant of ``bim`` (the PCA's variants), weights w_ALT = sqrt(m)/2 x loading =
    -w_REF (plink2's scale). OUT.acount: ``#CHROM ID REF ALT ALT_CTS OBS_CT`` of the
    fitted founders (plink2 --freq counts). ``prune``: (kept, removed) variant IDs for
    OUT.prune.in / OUT.prune.out. REF is .bim column 6 and ALT column 5, as plink2 reads
    a .bim. Numbers are written with 9 significant digits, in row chunks.
    """
    from ..atomic import atomic_outputs

    prefix = Path(out_prefix)
    names = ["eigenvec", "eigenval", "eigenvec.allele", "acount"]
    if prune is not None:
        names += ["prune.in", "prune.out"]
    paths = [prefix.with_name(f"{prefix.name}.{s}") for s in names]
    pcs = "\t".join(f"PC{i + 1}" for i in range(scores.shape[1]))
    variant_cols = [bim[c].to_numpy() for c in ("chrom", "variant_id", "a2", "a1")]
    w_alt = pca.loadings * (np.sqrt(pca.n_variants) / 2)

    def allele_rows(s, e):          # a REF line then an ALT line per variant
        cols = [np.repeat(c[s:e], 2) for c in variant_cols]
        a1 = np.column_stack([variant_cols[2][s:e], variant_cols[3][s:e]]).ravel()
        w = np.empty((2 * (e - s), w_alt.shape[1]))
        w[0::2], w[1::2] = 0.0 - w_alt[s:e], w_alt[s:e]
        return [*cols, a1, w]

    stale = ([] if prune is not None else      # of an earlier pruned run into this prefix
             [prefix.with_name(f"{prefix.name}.{x}") for x in ("prune.in", "prune.out")])
    with atomic_outputs(*paths, remove=stale) as tmp:
        sub = fam.iloc[sample_rows]
        _write_table(tmp[0], "#FID\tIID\t" + pcs, len(sub),
                     lambda s, e: [sub["fid"].to_numpy()[s:e], sub["iid"].to_numpy()[s:e],
                                   scores[s:e]])
        _write_table(tmp[1], None, len(pca.eigenvalues),
                     lambda s, e: [pca.eigenvalues[s:e, None]])
        _write_table(tmp[2], "#CHROM\tID\tREF\tALT\tA1\t" + pcs, len(bim), allele_rows)
        _write_table(tmp[3], "#CHROM\tID\tREF\tALT\tALT_CTS\tOBS_CT", len(bim),
                     lambda s, e: [c[s:e] for c in variant_cols]
                     + [pca.alt_count[s:e], pca.allele_count[s:e]])
        if prune is not None:
            for path, ids in zip(tmp[4:], prune):
                _write_table(path, None, len(ids), lambda s, e, ids=ids: [ids[s:e]])
    return paths


def _write_table(path, header: str | None, n_rows: int, rows, chunk: int = 20_000) -> None:
    """Tab-separated lines; ``rows(start, stop)`` gives a chunk's columns (1-d arrays,
    or 2-d float arrays for several columns). Floats get 9 significant digits."""
    with open(path, "w") as fh:
        if header is not None:
            fh.write(header + "\n")
        for s in range(0, n_rows, chunk):
            cols = []
            for c in rows(s, min(s + chunk, n_rows)):
                c = np.asarray(c)
                if c.dtype.kind == "f":
                    cols.extend(np.char.mod("%.9g", c.reshape(len(c), -1)).T)
                else:
                    cols.append(c.astype(str))
            fh.write("".join("\t".join(r) + "\n" for r in zip(*cols)))


# ---------------------------------------------------------------- projecting new people
def _read_output_table(path, required: list[str]) -> pd.DataFrame:
    """A tab-separated output of cmix pca / plink2 as text, with its ``required`` columns
    read as text; CmixError for an empty or ragged file or a column absent."""
    try:
        table = pd.read_csv(path, sep="\t", dtype=str, keep_default_na=False)
    except (pd.errors.ParserError, pd.errors.EmptyDataError) as err:
        raise CmixError(f"{path}: not a tab-separated table ({type(err).__name__}: "
                        f"{str(err).strip()})") from None
    missing = [c for c in required if c not in table.columns]
    if missing:
        raise CmixError(f"{path}: no {', '.join(missing)} column (expected the columns "
                        f"{' '.join(required)}, as cmix pca writes them)")
    return table


def _finite(table: pd.DataFrame, column: str, path) -> np.ndarray:
    """float64 values of a column; CmixError naming the line of the first one that is not
    a finite number."""
    values = pd.to_numeric(table[column], errors="coerce").to_numpy(np.float64)
    bad = ~np.isfinite(values)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise CmixError(f"{path}, line {i + 2}, column {column}: {table[column].iloc[i]!r} "
                        "is not a finite number")
    return values


def read_pca_model(prefix) -> dict:
    """What projecting new people needs, from ``cmix pca``'s outputs at ``prefix``:
    OUT.eigenvec.allele (the ALT weights), OUT.acount (the fitted founders' ALT
    frequency) and OUT.eigenval. Returns {"variant_id", "ref", "alt" (m,) str arrays,
    "w_alt" float64 (m, k), "p_alt" float64 (m,), "eigenvalues" float64 (k,), "pcs"
    the PC column names}. Raises CmixError when a file is missing, malformed (a column
    absent, a value not a number) or the three disagree."""
    from ..text import input_file

    prefix = Path(prefix)
    paths = {s: input_file(prefix.with_name(f"{prefix.name}.{s}"), f"cmix pca output ({s})")
             for s in ("eigenvec.allele", "acount", "eigenval")}
    weights = _read_output_table(paths["eigenvec.allele"], ["ID", "REF", "ALT", "A1"])
    pcs = [c for c in weights.columns if c.startswith("PC")]
    if not pcs:
        raise CmixError(f"{paths['eigenvec.allele']}: no PC1.. columns (expected cmix pca / "
                        "plink2 --pca allele-wts weights)")
    w_all = np.column_stack([_finite(weights, c, paths["eigenvec.allele"]) for c in pcs])
    is_alt = (weights["A1"] == weights["ALT"]).to_numpy()
    alt = weights[is_alt].reset_index(drop=True)
    counts = _read_output_table(paths["acount"], ["ID", "ALT_CTS", "OBS_CT"])
    if is_alt.sum() != len(weights) // 2 or counts["ID"].tolist() != alt["ID"].tolist():
        raise CmixError(f"{paths['acount']}: its variants are not those of "
                        f"{paths['eigenvec.allele']} (one ALT line per variant, same order)")
    try:
        eigenvalues = np.loadtxt(paths["eigenval"], ndmin=1)
    except ValueError as err:
        raise CmixError(f"{paths['eigenval']}: expected one eigenvalue a line ({err})") from None
    if len(eigenvalues) < len(pcs) or not (eigenvalues[: len(pcs)] > 0).all():
        raise CmixError(f"{paths['eigenval']}: expected {len(pcs)} positive eigenvalues, "
                        f"found {eigenvalues[: len(pcs)].tolist()}")
    obs = _finite(counts, "OBS_CT", paths["acount"])
    alt_count = _finite(counts, "ALT_CTS", paths["acount"])
    with np.errstate(invalid="ignore", divide="ignore"):
        p_alt = np.where(obs > 0, alt_count / obs, np.nan)
    return {"variant_id": alt["ID"].to_numpy(str), "ref": alt["REF"].to_numpy(str),
            "alt": alt["ALT"].to_numpy(str), "w_alt": w_all[is_alt],
            "p_alt": p_alt, "eigenvalues": eigenvalues[: len(pcs)], "pcs": pcs}


def pca_identity(prefix) -> str | None:
    """sha256 hex identifying one ``cmix pca`` fit: of the bytes of OUT.eigenvec.allele
    (the allele weights), OUT.acount (the fitted allele counts) and OUT.eigenval, in
    that order. prefix: OUT, or OUT.eigenvec. None when one of the three is absent."""
    import hashlib

    prefix = Path(prefix)
    if prefix.name.endswith(".eigenvec"):
        prefix = prefix.with_name(prefix.name[: -len(".eigenvec")])
    paths = [prefix.with_name(f"{prefix.name}.{s}") for s in ("eigenvec.allele", "acount",
                                                              "eigenval")]
    if not all(p.is_file() for p in paths):
        return None
    h = hashlib.sha256()
    for path in paths:
        with open(path, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                h.update(chunk)
        h.update(b"\0")
    return h.hexdigest()


def project_new_people(bf, model: dict, sample_idx=None, *, min_shared: float = 0.8,
                       block: int = 4096) -> tuple[np.ndarray, dict]:
    """PC scores of new people on a saved PCA's axes (:func:`read_pca_model`).

    bf: a :class:`cmix.genotypes.sources.GenotypeSource` of hard calls (any samples, any
    variant order); sample_idx: its
    samples to score (None = all). Variants are matched by ID; a variant whose ALT is
    the file's A2 is flipped; one with other alleles is an error. Each call becomes
    z = (g_ALT - 2p) / sqrt(2p(1-p)) with the fitted p, missing calls and absent
    variants z = 0 (the mean), and PC_k = 2 sum_j z_j w_ALT,jk / (m sqrt(eigenvalue_k)),
    m = the number of variants of the fit: the scale of the fitted samples' PCs, and
    what ``plink2 --score ... variance-standardize no-mean-imputation`` gives after the
    same division. Returns (scores float64 (n, k), counts {"n_variants", "n_shared",
    "n_flipped"}); CmixError when fewer than ``min_shared`` of the variants are found.
    """
    sample_idx = np.arange(bf.n_samples) if sample_idx is None else np.asarray(sample_idx)
    ids = model["variant_id"]
    row = pd.Index(bf.bim["variant_id"].astype(str)).get_indexer(ids)
    found = row >= 0
    where = str(bf.variant_file)
    flip = plink.allele_flips(bf.bim, row, ids, model["alt"], model["ref"], where,
                              "the PCA (ALT/REF)")
    m = len(ids)
    n_shared = int(found.sum())
    if n_shared < min_shared * m:
        raise CmixError(f"{where}: shares {n_shared} of the PCA's {m} variants (fewer than "
                        f"{min_shared:.0%}); the projected PCs would shrink towards 0")
    p = model["p_alt"]
    with np.errstate(invalid="ignore", divide="ignore"):
        sd = np.sqrt(2 * p * (1 - p))
        usable = found & np.isfinite(sd) & (sd > 0)
    have = np.flatnonzero(usable)
    scores = np.zeros((len(sample_idx), model["w_alt"].shape[1]))
    for s in range(0, len(have), block):         # fixed order: the same sum every run
        j = have[s:s + block]
        a1_count = bf.read(row[j], sample_idx).astype(np.float64)
        g = np.where(flip[j, None], 2 - a1_count, a1_count)                  # ALT counts
        z = (g - 2 * p[j, None]) / sd[j, None]
        z[a1_count < 0] = 0.0                                                # missing
        scores += z.T @ model["w_alt"][j]
    scores *= 2 / (m * np.sqrt(model["eigenvalues"]))
    return scores, {"n_variants": m, "n_shared": n_shared, "n_flipped": int(flip.sum())}


# ---------------------------------------------------------------- the `cmix pca` step
def check_n_pcs(n_pcs: int, n_fit: int, what: str = "fitted samples") -> None:
    """CmixError unless 1 <= n_pcs <= n_fit - 1 (n centred samples span n - 1
    dimensions); ``what`` describes n_fit in the message."""
    if n_pcs < 1:
        raise CmixError(f"--pcs: expected a positive number of PCs, got {n_pcs}")
    if n_pcs > n_fit - 1:
        raise CmixError(f"--pcs {n_pcs}: {n_fit} {what} give at most "
                        f"{max(n_fit - 1, 0)} PCs (n centred samples span n - 1 dimensions)")


@dataclass(frozen=True)
class PcaVariants:
    """The variants a PCA may use, among the autosomal ones on --chroms. extract:
    candidate variant IDs (a .snplist path; None = all). regions: a file of long-range LD
    regions to drop (chrom start end [label]; None = none). prune: --indep-pairwise
    settings, applied on the fitted samples (None = no pruning)."""

    extract: object = None
    regions: object = HIGH_LD_REGIONS
    prune: PruneSettings | None = None


@dataclass(frozen=True)
class PcaSettings:
    """How the PCs are fitted: n_pcs PCs, ``seed`` of the randomized start, ``threads``
    numba and BLAS threads (None = all cores), ``block_bytes`` bytes of genotypes read
    per block of variants."""

    n_pcs: int = 10
    seed: int = 0
    threads: int | None = None
    block_bytes: int = 64 << 20


def run_pca(genotypes: GenotypeFiles, out_prefix, *, keep=None, project=None,
            variants: PcaVariants = PcaVariants(),
            settings: PcaSettings = PcaSettings()) -> dict:
    """What ``cmix pca`` does; returns a summary (counts, no sample IDs).

    genotypes: as every step takes them (:func:`cmix.genotypes.sources.open_source`): a
    .bed or .pgen prefix, or a ``{chrom}`` pattern of per-chromosome files read as if
    merged; its chroms: only these chromosomes (a --chroms spec,
    :func:`cmix.genotypes.selection.parse_chroms`). keep: samples to
    fit on (plink --keep list, e.g. the unrelated set; None = all). project: more
    samples (list) to project onto the fitted axes. variants: the candidate variants
    (:class:`PcaVariants`); settings: the fit (:class:`PcaSettings`).
    """
    n_pcs, chroms = settings.n_pcs, genotypes.chroms
    extract, regions, prune = variants.extract, variants.regions, variants.prune
    if n_pcs < 1:
        raise CmixError(f"--pcs: expected a positive number of PCs, got {n_pcs}")
    if out_prefix is None:
        raise CmixError("cmix pca needs --out")
    bf = genotypes.open()
    fit_idx = (sample_rows(bf.fam, keep, step="pca")[0] if keep
               else np.arange(bf.n_samples))
    other_idx = np.zeros(0, np.int64)
    if project:
        other_idx = np.setdiff1d(sample_rows(bf.fam, project, step="pca",
                                             keep_flag="--project")[0], fit_idx)
    n_fit = len(fit_idx)
    check_n_pcs(n_pcs, n_fit)

    bim = bf.bim
    candidate = is_autosome(bim["chrom"])
    steps = {"variants in the genotypes": bf.n_variants, "autosomal": int(candidate.sum())}
    on_chroms = chrom_mask(bim["chrom"], chroms)
    if not on_chroms.all():
        candidate &= on_chroms
        steps["on --chroms"] = int(candidate.sum())
    if extract:
        candidate &= extract_mask(bim["variant_id"], extract, f"{bf.prefix}.bim")[0]
        steps["in --extract"] = int(candidate.sum())
    if regions is not None:
        candidate &= ~in_regions(bim, read_regions(regions))
        steps["outside long-range LD regions"] = int(candidate.sum())
    variant_idx = np.flatnonzero(candidate)
    n_threads = set_numba_threads(settings.threads)
    prune_ids = None
    if prune is not None and len(variant_idx):
        kept = ld_prune(bf, variant_idx, fit_idx, prune, threads=n_threads)
        ids = bim["variant_id"].to_numpy()
        prune_ids = (ids[variant_idx[kept]], ids[variant_idx[~kept]])
        variant_idx = variant_idx[kept]
        steps[f"kept by --indep-pairwise {prune}"] = len(variant_idx)
    counts = "; ".join(f"{k}: {v}" for k, v in steps.items())
    if len(variant_idx) == 0:
        raise CmixError(f"no variants left for the PCA ({counts})")
    if len(variant_idx) < n_pcs:
        raise CmixError(f"--pcs {n_pcs}: only {len(variant_idx)} variants are left for "
                        f"the PCA ({counts}); ask for fewer PCs or keep more variants")
    pca = fit_and_project(bf, variant_idx, fit_idx, other_idx, n_pcs, seed=settings.seed,
                          threads=n_threads, block_bytes=settings.block_bytes)
    all_idx = np.concatenate([fit_idx, other_idx])
    order = np.argsort(all_idx, kind="stable")
    write_pca_outputs(out_prefix, fam=bf.fam, sample_rows=all_idx[order],
                      scores=np.vstack([pca.eigenvectors, pca.projected])[order], pca=pca,
                      bim=bim.iloc[variant_idx[pca.used]], prune=prune_ids)
    steps["varying among the fitted founders (m)"] = pca.n_variants
    summary = {**steps, "fitted samples": n_fit, "projected samples": len(other_idx),
               "PCs": n_pcs, "passes over the .bed": pca.n_passes + 1,
               "eigenvalues": [round(float(v), 4) for v in pca.eigenvalues]}
    for key, value in summary.items():
        log(f"pca: {key}: {value}")
    return summary
