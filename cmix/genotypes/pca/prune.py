"""LD pruning exactly as plink2 2.00a3.5 ``--indep-pairwise WINDOW[kb] STEP R2`` does it.

Run on the founders among the fitted samples (:func:`ld_prune`), so OUT.prune.in equals
plink2's .prune.in: chromosomes (and, with a kb window, pieces between gaps wider than
the window) are pruned independently, each streamed from the .bed in batches into a
ring buffer of bit vectors (kernels: :mod:`cmix.genotypes.pca.prune_kernels`).
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ...errors import CmixError
from ..kernels import K_SMALL_EPSILON, founder_flags
from .prune_kernels import pack_hom_r2h, prune_subcontig
from .standardize import sample_offsets


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
    while not prune_subcontig(hom, r2h, nm, vsum, vssq, maj, mono, pos, n, settings.window,
                               settings.step, settings.kb, thresh, loaded, state, win, wrem,
                               first_unchecked, removed):
        stop = min(L, loaded + batch)
        rows = bf.packed_rows(gv[loaded:stop])
        counts = np.zeros((stop - loaded, 4), np.int64)
        pack_hom_r2h(rows, byte_idx, shift, np.arange(loaded, stop) % cap, hom, r2h, counts)
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
