"""kinship.dat, the UK Biobank ukb_rel.dat layout: KING-robust kinship over all SNPs of
the pairs inside each simulated family, computed pair by pair."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..atomic import atomic_path
from ..readers import plink


def king_robust_pair(g_i: np.ndarray, g_j: np.ndarray) -> tuple[float, float, float, int]:
    """KING-robust kinship of two samples from A1 counts (int8, -1 missing).

    Over jointly called SNPs: phi = 0.5 - (4 IBS0 + het_i hom_j + het_j hom_i) /
    (4 min(het_i, het_j)). Returns (kinship, HetHet share, IBS0 share, n_snps).
    """
    called = (g_i >= 0) & (g_j >= 0)
    a, b = g_i[called], g_j[called]
    het_a, het_b = a == 1, b == 1
    ibs0 = int(((a == 0) & (b == 2)).sum() + ((a == 2) & (b == 0)).sum())
    hethet = int((het_a & het_b).sum())
    n_het_a, n_het_b = int(het_a.sum()), int(het_b.sum())
    phi = 0.5 - (4 * ibs0 + (n_het_a - hethet) + (n_het_b - hethet)) / (4 * min(n_het_a, n_het_b))
    n_called = int(called.sum())
    return phi, hethet / n_called, ibs0 / n_called, n_called


def write_kinship_table(path: Path, bed_prefix: Path, eids: np.ndarray,
                        pairs: list[tuple[int, int, int]]) -> None:
    """Write the ukb_rel.dat-style table for all pairs within families with kinship > 0.0442."""
    bf = plink.open_bfile(bed_prefix)
    members = sorted({i for a, b, _ in pairs for i in (a, b)})
    # every pair inside a connected family, not only the planted ones
    parent = {m: m for m in members}

    def root(x):
        while parent[x] != x:
            x = parent[x]
        return x

    for a, b, _ in pairs:
        parent[root(a)] = root(b)
    groups: dict[int, list[int]] = {}
    for m in members:
        groups.setdefault(root(m), []).append(m)
    rows = []
    if members:
        geno = plink.read_genotypes(bf, sample_idx=np.array(members))
        col = {m: k for k, m in enumerate(members)}
        for group in groups.values():
            for x in range(len(group)):
                for y in range(x + 1, len(group)):
                    i, j = group[x], group[y]
                    phi, hethet, ibs0, _ = king_robust_pair(geno[:, col[i]], geno[:, col[j]])
                    if phi > 0.0442:
                        rows.append((eids[i], eids[j], round(hethet, 4), round(ibs0, 4),
                                     round(phi, 4)))
    with atomic_path(path) as tmp:
        with open(tmp, "w") as fh:
            fh.write("ID1 ID2 HetHet IBS0 Kinship\n")
            for r in rows:
                fh.write(" ".join(str(x) for x in r) + "\n")
