"""Kinship degrees and plink2's ``--king-cutoff`` choice of the samples to drop.

plink2's pruning order (``KinshipPruneDestructive`` in plink2_matrix_calc.cc): while
related pairs remain, if some sample has exactly one remaining relative, the first such
sample in .fam order keeps its place and its relative is dropped; otherwise the first
sample (in .fam order) with the most remaining relatives is dropped
(:func:`prune_king_cutoff`).
"""

from __future__ import annotations

import heapq
import math

import numpy as np

from ...errors import CmixError


#: lower kinship bounds of the degrees plink2/KING report (Manichaikul et al. 2010)
DEGREES = (("duplicate/MZ twin", 0.354), ("first degree", 0.177),
           ("second degree", 0.0884), ("third degree", 0.0442))
#: pairs above this kinship are written to the .kin0 table (KING's "third degree")
REPORT_MIN_KINSHIP = 0.0442
DEFAULT_CUTOFF = 0.0884


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


def degree_counts(kinship: np.ndarray) -> dict[str, int]:
    """Pairs per KING degree among kinship values (each pair counted in its own degree)."""
    kinship = np.asarray(kinship, np.float64)
    out, upper = {}, np.inf
    for name, lower in DEGREES:
        out[name] = int(((kinship > lower) & (kinship <= upper)).sum())
        upper = lower
    return out
