"""Relatives made by inheritance: the pedigree of a cohort (duplicates, parent-offspring
pairs, siblings, half siblings, cousins, nuclear families), its people's .fam rows and
ids, and meiosis with crossovers from the parents' haplotypes: in global cM for
Balding-Nichols cohorts (:func:`inherit_block`), on a coalescent cohort's contig pieces
(:func:`pedigree_haplotypes`)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from .variants import CHROM_MB


def family_components(father, mother, dup_of) -> np.ndarray:
    """Connected component (family) index of each pedigree individual (n_ped,)."""
    n = len(father)
    parent = np.arange(n)

    def root(x):
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for i in range(n):
        for j in (father[i], mother[i], dup_of[i]):
            if j >= 0:
                parent[root(i)] = root(j)
    roots = np.array([root(i) for i in range(n)])
    return np.unique(roots, return_inverse=True)[1]


class Pedigree:
    """Individuals with parents (-1 = founder), duplicates, and related cohort pairs.

    Parents and duplicated individuals always have smaller indices than their
    children/duplicates, so haplotypes can be filled in index order.
    """

    def __init__(self):
        self.father, self.mother, self.dup_of, self.in_cohort = [], [], [], []
        self.pairs: list[tuple[int, int, int]] = []   # (i, j, degree), degree 0 = duplicate

    def add(self, father=-1, mother=-1, dup_of=-1, in_cohort=True) -> int:
        self.father.append(father)
        self.mother.append(mother)
        self.dup_of.append(dup_of)
        self.in_cohort.append(in_cohort)
        return len(self.father) - 1

    def arrays(self):
        return (np.array(self.father), np.array(self.mother), np.array(self.dup_of),
                np.array(self.in_cohort, dtype=bool))


def simulate_pedigree(n_samples: int) -> Pedigree:
    """Families sized to the cohort, then unrelated founders up to ``n_samples``.

    Per 1,000 cohort members about: 2.5 duplicate pairs, 5 parent-offspring pairs,
    5 full-sibling pairs, 3 half-sibling pairs, 2 first-cousin pairs, 1 nuclear family.
    """
    ped = Pedigree()
    scale = n_samples / 1000
    n = {k: int(max(1, round(v * scale))) if n_samples >= 60 else 0 for k, v in
         {"dup": 2.5, "po": 5, "fs": 5, "hs": 3, "cousin": 2, "nuclear": 1}.items()}
    for _ in range(n["dup"]):
        a = ped.add()
        ped.pairs.append((a, ped.add(dup_of=a), 0))
    for _ in range(n["po"]):
        p, g = ped.add(), ped.add(in_cohort=False)
        ped.pairs.append((p, ped.add(p, g), 1))
    for _ in range(n["fs"]):
        g1, g2 = ped.add(in_cohort=False), ped.add(in_cohort=False)
        ped.pairs.append((ped.add(g1, g2), ped.add(g1, g2), 1))
    for _ in range(n["hs"]):
        g1, g2, g3 = (ped.add(in_cohort=False) for _ in range(3))
        ped.pairs.append((ped.add(g1, g2), ped.add(g1, g3), 2))
    for _ in range(n["cousin"]):
        gp1, gp2, s1, s2 = (ped.add(in_cohort=False) for _ in range(4))
        a, b = ped.add(gp1, gp2, in_cohort=False), ped.add(gp1, gp2, in_cohort=False)
        ped.pairs.append((ped.add(a, s1), ped.add(b, s2), 3))
    for _ in range(n["nuclear"]):
        p1, p2 = ped.add(), ped.add()
        c1, c2 = ped.add(p1, p2), ped.add(p1, p2)
        ped.pairs += [(p1, c1, 1), (p1, c2, 1), (p2, c1, 1), (p2, c2, 1), (c1, c2, 1)]
    while sum(ped.in_cohort) < n_samples:
        ped.add()
    return ped


def simulate_crossovers(rng, n_meioses: int, n_chrom: int) -> list[np.ndarray]:
    """Per meiosis, sorted switch points in global cM (chrom_index * 1000 + cM).

    A switch at a chromosome's start (probability 1/2) picks which parental haplotype
    that chromosome starts on; crossovers are Poisson (1 per 100 cM) and uniform.
    """
    out = []
    for _ in range(n_meioses):
        pts = []
        for c in range(n_chrom):
            if rng.random() < 0.5:
                pts.append(c * 1000.0 - 0.5)
            k = rng.poisson(CHROM_MB[c] / 100)
            pts.extend(c * 1000.0 + rng.uniform(0, CHROM_MB[c], size=k))
        out.append(np.sort(np.array(pts)))
    return out


@dataclass(frozen=True)
class CohortRelatives:
    """The cohort's pedigree and where its members sit in the .fam.

    father, mother, dup_of: int (n_ped,), pedigree indices or -1 (founder / not a
    duplicate); in_cohort: bool (n_ped,); cohort_members: int (n_samples,), the pedigree
    index of each .fam row; row_of: int (n_ped,), the .fam row of each pedigree
    individual or -1; crossovers: per meiosis (two per child, father's first, in
    pedigree order) the sorted switch points in global cM.
    """

    pedigree: Pedigree
    father: np.ndarray
    mother: np.ndarray
    dup_of: np.ndarray
    in_cohort: np.ndarray
    cohort_members: np.ndarray
    row_of: np.ndarray
    crossovers: list

    @property
    def is_founder(self) -> np.ndarray:
        """bool (n_ped,): neither a child nor a duplicate."""
        return (self.father < 0) & (self.dup_of < 0)

    def pairs(self) -> list[tuple[int, int, int]]:
        """The planted related pairs as (.fam row, .fam row, degree), degree 0 = duplicate."""
        return [(int(self.row_of[i]), int(self.row_of[j]), d) for i, j, d in self.pedigree.pairs]


def simulate_fam(rng, n_samples: int):
    """Random UKB-style eids and the .fam table of the cohort.

    Returns (fam_eid: str (n_samples,), spare_eids: int (50,) eids not in the cohort,
    fam: DataFrame (n_samples rows) with fid = iid = eid, parents "0", random sex "1"/"2",
    phenotype "-9").
    """
    eids = rng.permutation(np.sort(rng.choice(np.arange(1_000_000, 6_000_000),
                                              size=n_samples + 50, replace=False)))
    fam_eid, spare_eids = eids[:n_samples].astype(str), eids[n_samples:]
    fam = pd.DataFrame({"fid": fam_eid, "iid": fam_eid, "father": "0", "mother": "0",
                        "sex": rng.choice(["1", "2"], size=n_samples), "phenotype": "-9"})
    return fam_eid, spare_eids, fam


def cohort_relatives(rng, n_samples: int, n_chrom: int):
    """The pedigree (:func:`simulate_pedigree`), its members in a random .fam order, their
    ids (:func:`simulate_fam`) and one crossover set per meiosis.

    Returns (CohortRelatives, fam_eid (n_samples,), spare_eids, fam DataFrame).
    """
    ped = simulate_pedigree(n_samples)
    father, mother, dup_of, in_cohort = ped.arrays()
    cohort_members = np.flatnonzero(in_cohort)
    cohort_members = cohort_members[rng.permutation(len(cohort_members))]  # .fam order
    fam_eid, spare_eids, fam = simulate_fam(rng, n_samples)
    row_of = np.full(len(father), -1)
    row_of[cohort_members] = np.arange(n_samples)
    crossovers = simulate_crossovers(rng, 2 * int((father >= 0).sum()), n_chrom)
    relatives = CohortRelatives(ped, father, mother, dup_of, in_cohort, cohort_members,
                                row_of, crossovers)
    return relatives, fam_eid, spare_eids, fam


def inherit_block(founder_h0: np.ndarray, founder_h1: np.ndarray, rel: CohortRelatives,
                  founder_rows: np.ndarray, global_cm: np.ndarray):
    """Both haplotypes of every pedigree individual over one block, bool (n_ped, bl) each.

    founder_h0/h1: bool (bl, n_founders) in ``founder_rows`` order; duplicates copy,
    children take one meiosis from the father (haplotype 0) and one from the mother
    (haplotype 1), switching parental haplotype at the crossovers before each SNP's
    ``global_cm`` (bl,)."""
    n_ped = len(rel.father)
    ped_h0 = np.zeros((n_ped, len(global_cm)), dtype=bool)
    ped_h1 = np.zeros((n_ped, len(global_cm)), dtype=bool)
    ped_h0[founder_rows] = founder_h0.T
    ped_h1[founder_rows] = founder_h1.T
    ci = 0
    for i in range(n_ped):
        if rel.dup_of[i] >= 0:
            ped_h0[i], ped_h1[i] = ped_h0[rel.dup_of[i]], ped_h1[rel.dup_of[i]]
        elif rel.father[i] >= 0:
            for parent, target in ((rel.father[i], ped_h0), (rel.mother[i], ped_h1)):
                switch = np.searchsorted(rel.crossovers[ci], global_cm) % 2 == 1
                target[i] = np.where(switch, ped_h1[parent], ped_h0[parent])
                ci += 1
    return ped_h0, ped_h1


def founder_ancestors(i: int, father, mother, dup_of) -> list[int]:
    """Pedigree founders from whom individual ``i`` descends (itself if a founder)."""
    if dup_of[i] >= 0:
        return founder_ancestors(int(dup_of[i]), father, mother, dup_of)
    if father[i] < 0:
        return [i]
    return (founder_ancestors(int(father[i]), father, mother, dup_of)
            + founder_ancestors(int(mother[i]), father, mother, dup_of))


@dataclass(frozen=True)
class GeneticMap:
    """Where each SNP sits for meiosis: pos (n_variants,) bp and piece (n_variants,) its
    contig piece; per piece its (left, right) bp bounds and recombination rate per bp per
    generation."""

    pos: np.ndarray
    piece: np.ndarray
    bounds: list
    rates: list


def _meiosis(rng, hap_a, hap_b, gmap: GeneticMap):
    """One transmitted haplotype (n_sites,) from a parent's two (n_sites,) bool arrays:
    per piece, the first haplotype at its start is a coin flip, crossovers are Poisson
    (piece length x rate, in Morgans) at uniform positions."""
    switch = np.zeros(len(gmap.pos), dtype=bool)
    for k, (left, right) in enumerate(gmap.bounds):
        sl = gmap.piece == k
        pts = np.sort(rng.uniform(left, right, size=rng.poisson((right - left) * gmap.rates[k])))
        switch[sl] = (np.searchsorted(pts, gmap.pos[sl]) + (rng.random() < 0.5)) % 2 == 1
    return np.where(switch, hap_b, hap_a)


def pedigree_haplotypes(rng, ped: Pedigree, founder_h0: np.ndarray,
                        founder_h1: np.ndarray, gmap: GeneticMap):
    """Both haplotypes of every individual of one population's pedigree, bool (n_ped,
    n_variants) each: founders take founder_h0/h1 (n_variants, n_founders) in pedigree
    order, duplicates copy, children take a meiosis (:func:`_meiosis`) from each parent."""
    father, mother, dup_of, _ = ped.arrays()
    n_ped = len(father)
    ph0 = np.zeros((n_ped, len(gmap.pos)), dtype=bool)
    ph1 = np.zeros((n_ped, len(gmap.pos)), dtype=bool)
    is_founder = (father < 0) & (dup_of < 0)
    ph0[is_founder], ph1[is_founder] = founder_h0.T, founder_h1.T
    for i in range(n_ped):
        if dup_of[i] >= 0:
            ph0[i], ph1[i] = ph0[dup_of[i]], ph1[dup_of[i]]
        elif father[i] >= 0:
            for parent, target in ((father[i], ph0), (mother[i], ph1)):
                target[i] = _meiosis(rng, ph0[parent], ph1[parent], gmap)
    return ph0, ph1
