"""Ancestry of a Balding-Nichols cohort: the resolved populations' frequency rows and
leaves (:class:`Ancestry`), each row's allele frequencies, which row every simulated
haplotype draws from (admixed ones per LD block: local ancestry tracts), and the
ancestry part of truth.json."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from .pedigree import CohortRelatives, family_components, founder_ancestors
from .traits import RED_HAIR, TRAITS


class Ancestry:
    """Resolved populations: groups (rows of the frequency table) and leaves.

    Frequency rows: one per non-admixed population (its population-level frequency)
    then one per region. A leaf is what an individual belongs to: a region row, or the
    population row for a population without regions, or an admixed population
    (leaf row -1, haplotype sources drawn per LD block from its sources' rows).
    """

    def __init__(self, pops: list[dict]):
        self.pops = pops
        self.row_names, self.row_parent, self.row_F, row_pop = [], [], [], []
        self.pop_row = {}
        for k, p in enumerate(pops):
            if "admixed_from" not in p:
                self.pop_row[p["name"]] = len(self.row_names)
                self.row_names.append(p["name"])
                self.row_parent.append(-1)            # drawn around the first population
                row_pop.append(k)
                self.row_F.append(2 * p["fst"])       # Balding-Nichols F = 2 x Hudson Fst
        # leaves: (pop index, region name, frequency row, share of all people)
        self.leaves = []
        for k, p in enumerate(pops):
            if p.get("regions"):
                for r in p["regions"]:
                    row = len(self.row_names)
                    self.row_names.append(f"{p['name']}/{r['name']}")
                    self.row_parent.append(self.pop_row[p["name"]])
                    row_pop.append(k)
                    self.row_F.append(2 * r["fst"])
                    self.leaves.append((k, r["name"], row, p["share"] * r["share"],
                                        p["smoking_shift"] + r["smoking_shift"]))
            else:
                row = self.pop_row.get(p["name"], -1)
                self.leaves.append((k, "", row, p["share"], p["smoking_shift"]))
        self.leaf_share = np.array([lf[3] for lf in self.leaves])
        self.leaf_pop = np.array([lf[0] for lf in self.leaves])
        self.leaf_row = np.array([lf[2] for lf in self.leaves])
        self.leaf_smoking = np.array([lf[4] for lf in self.leaves])
        self.row_european = np.array([pops[k]["european"] for k in row_pop], dtype=bool)

    def frequencies(self, rng, p_ref: np.ndarray) -> np.ndarray:
        """Allele-1 frequencies (n_rows, n_variants): population rows ~ BN(p_ref, F),
        region rows ~ BN(their population's row, F); the first population's row is p_ref.

        Balding-Nichols: Beta(p (1 - F) / F, (1 - p)(1 - F) / F), mean p, variance
        F p (1 - p). For p2 ~ BN(p1, F), E[(p1 - p2)^2] = F p1 (1 - p1) and
        E[p1 (1 - p2) + p2 (1 - p1)] = 2 p1 (1 - p1), so Hudson's Fst (a ratio of these
        averages over SNPs) is F / 2: hence F = 2 x the configured Fst.
        """
        freqs = np.empty((len(self.row_names), len(p_ref)))
        for i, (parent, F) in enumerate(zip(self.row_parent, self.row_F)):
            base = p_ref if parent < 0 else freqs[parent]
            if F == 0:
                freqs[i] = base
            else:
                a = np.maximum(base * (1 - F) / F, 1e-12)
                b = np.maximum((1 - base) * (1 - F) / F, 1e-12)
                freqs[i] = rng.beta(a, b)
        return freqs


@dataclass(frozen=True)
class HaplotypeColumns:
    """Which frequency row each simulated haplotype column draws its alleles from.

    Columns are two per person: the pedigree founders (``founder_rows``, sorted by leaf)
    then the discovery people. ped_leaf: int (n_ped,) and disc_leaf: int (n_discovery,),
    each person's :class:`Ancestry` leaf. runs: (first column, end column, frequency row)
    for contiguous columns of one non-admixed row. adm_cols: int (n_adm,) the admixed
    columns; adm_src: int32 (n_adm, n_ld_blocks), their frequency row per LD block.
    person_props: {person (founder/discovery index): ancestry proportions (n_sources,)}.
    """

    ped_leaf: np.ndarray
    disc_leaf: np.ndarray
    founder_rows: np.ndarray
    n_hap: int
    runs: list
    adm_cols: np.ndarray
    adm_src: np.ndarray
    person_props: dict


def population_frequencies(rng, anc: Ancestry, variants: pd.DataFrame, loci: dict) -> np.ndarray:
    """A1 frequencies (n_rows, n_variants) per :class:`Ancestry` row around ``variants.p_a1``,
    with the pigmentation loci that have a ``non_european_factor`` and the MC1R alleles
    scaled down to that factor of the first population's frequency in non-European rows."""
    p_all = variants.p_a1.to_numpy()
    freqs = anc.frequencies(rng, p_all)
    non_eu = ~anc.row_european
    for name, spec in TRAITS.items():
        for i, locus in zip(loci[name], spec["large_loci"]):
            if "non_european_factor" in locus:
                freqs[non_eu, i] = p_all[i] * locus["non_european_factor"]
    freqs[np.ix_(non_eu, loci["_red"])] = p_all[loci["_red"]] * RED_HAIR["non_european_factor"]
    return freqs


def haplotype_columns(rng, anc: Ancestry, relatives: CohortRelatives, n_discovery: int,
                      n_ld_blocks: int) -> HaplotypeColumns:
    """Ancestry leaves (one per family, one per discovery person, drawn by leaf share) and
    the frequency row of every founder and discovery haplotype (:class:`HaplotypeColumns`)."""
    n_leaves = len(anc.leaves)
    family = family_components(relatives.father, relatives.mother, relatives.dup_of)
    ped_leaf = rng.choice(n_leaves, size=family.max() + 1, p=anc.leaf_share)[family]
    disc_leaf = np.sort(rng.choice(n_leaves, size=n_discovery, p=anc.leaf_share))
    founder_rows = np.flatnonzero(relatives.is_founder)
    founder_rows = founder_rows[np.argsort(ped_leaf[founder_rows], kind="stable")]
    person_leaf = np.r_[ped_leaf[founder_rows], disc_leaf]           # founders + discovery
    col_row = np.repeat(anc.leaf_row[person_leaf], 2)                 # frequency row per haplotype
    n_hap = len(col_row)
    adm_cols = np.flatnonzero(col_row < 0)
    adm_src, person_props = _admixture_sources(rng, anc, person_leaf, adm_cols, n_ld_blocks)
    # contiguous runs of haplotype columns that share a frequency row
    edges = np.flatnonzero(np.diff(col_row)) + 1
    runs = [(a, b, int(col_row[a])) for a, b in zip(np.r_[0, edges], np.r_[edges, n_hap])
            if col_row[a] >= 0]
    return HaplotypeColumns(ped_leaf, disc_leaf, founder_rows, n_hap, runs, adm_cols, adm_src,
                            person_props)


def _admixture_sources(rng, anc: Ancestry, person_leaf: np.ndarray, adm_cols: np.ndarray,
                       n_ld_blocks: int):
    """Admixed people's ancestry proportions (~ Dirichlet around their population's means)
    and, per admixed haplotype column and LD block, the source population's frequency row
    (local ancestry). person_leaf: (n_people,) leaf of each founder/discovery person;
    adm_cols: sorted admixed columns (2 per admixed person). Returns (adm_src int32
    (len(adm_cols), n_ld_blocks), {person index: proportions (n_sources,)})."""
    adm_src = np.zeros((len(adm_cols), n_ld_blocks), dtype=np.int32)
    person_props = {}
    for k, p in enumerate(anc.pops):
        if "admixed_from" not in p:
            continue
        people = np.flatnonzero(anc.leaf_pop[person_leaf] == k)
        src_rows = np.array([anc.pop_row[s] for s in p["admixed_from"]])
        means = np.array(list(p["admixed_from"].values()))
        props = rng.dirichlet(means * p["admixture_concentration"], size=len(people))
        for person, q in zip(people, props):
            person_props[int(person)] = q
            cum = np.cumsum(q)[:-1]
            for col in (2 * person, 2 * person + 1):
                u = rng.random(n_ld_blocks)
                adm_src[np.searchsorted(adm_cols, col)] = src_rows[np.searchsorted(cum, u, side="right")]
    return adm_src, person_props


def ancestry_truth(pops: list[dict], anc: Ancestry, rel: CohortRelatives,
                   cols: HaplotypeColumns, fam_eid: np.ndarray) -> dict:
    """truth.json's "populations", "frequency_model" and "samples" (population, region and,
    for admixed people, the mean ancestry proportions of their pedigree founders)."""
    cohort_leaf = cols.ped_leaf[rel.cohort_members]
    pop_names = np.array([p["name"] for p in pops])
    region_names = np.array([lf[1] or pops[lf[0]]["name"] for lf in anc.leaves])
    founder_pos = {int(r): k for k, r in enumerate(cols.founder_rows)}
    admixture = {}
    for m, i in enumerate(rel.cohort_members):
        if anc.leaf_row[cols.ped_leaf[i]] >= 0:
            continue
        anc_founders = founder_ancestors(int(i), rel.father, rel.mother, rel.dup_of)
        q = np.mean([cols.person_props[founder_pos[f]] for f in anc_founders], axis=0)
        srcs = pops[anc.leaf_pop[cols.ped_leaf[i]]]["admixed_from"]
        admixture[fam_eid[m]] = {s: round(float(v), 4) for s, v in zip(srcs, q)}
    return {
        "populations": pops,
        "frequency_model": {
            "model": "Balding-Nichols: each population's A1 frequency ~ BN(first population's "
                     "p_a1, F = 2 fst); each region's ~ BN(its population's, F = 2 region fst); "
                     "admixed haplotypes take one source per LD block with the person's "
                     "ancestry proportions",
            "rows": anc.row_names, "balding_nichols_F": anc.row_F,
            "non_european_rows": [n for n, e in zip(anc.row_names, anc.row_european) if not e]},
        "samples": {"eid": fam_eid.tolist(),
                    "population": pop_names[anc.leaf_pop[cohort_leaf]].tolist(),
                    "region": region_names[cohort_leaf].tolist(),
                    "admixture": admixture},
    }
