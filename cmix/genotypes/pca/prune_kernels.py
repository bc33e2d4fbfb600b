"""The numba kernels of plink2's ``--indep-pairwise`` (:mod:`cmix.genotypes.pca.prune`).

.bed rows become plink2's two bit vectors per variant (:func:`pack_hom_r2h`), a pair's
unphased hardcall r^2 is tested against the threshold from popcounts in plink2's order
of operations (:func:`_r2_exceeds`), and one contig piece is pruned window by window in
plink2 2.00a3.5's order of comparisons (:func:`prune_subcontig`).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from ..kernels import K_SMALL_EPSILON, popcount


@njit(cache=True, nogil=True)
def pack_hom_r2h(packed, byte_idx, shift, slots, hom, r2h, counts):
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
def prune_subcontig(hom, r2h, nm, vsum, vssq, maj, mono, bp, n, window, step, kb, thresh,
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
    """Prune one complete window in place, in plink2's order (see :func:`prune_subcontig`).

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
