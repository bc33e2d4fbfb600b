"""Coalescent cohorts: haplotypes from a published human demographic model (msprime +
stdpopsim), with the shared cohort parts of :mod:`cmix.simulate` on top.

:func:`simulate_coalescent_cohort` writes the same files as
:func:`cmix.simulate.balding_nichols.simulate_cohort` (``genotypes.bed/.bim/.fam``,
``kinship.dat``, ``sample_qc.tsv``, ``withdrawn.txt``, ``phenotypes.tsv``, ``sumstats/``,
``truth.json``),
but the haplotypes are sampled from a stdpopsim HomSap demographic model (e.g.
``OutOfAfrica_3G09``: YRI, CEU, CHB; ``AmericanAdmixture_4B18``: AFR, EUR, ASIA, ADMIX),
so allele frequencies, population differentiation, LD and admixture come from the
model's history rather than from Balding-Nichols draws:

- One msprime simulation per contig piece: ``piece_mb`` Mb of chromosome c (c = 1, 2, ...)
  starting at 20 Mb, with the chromosome's mean recombination rate (uniform: genetic maps
  are a download) and the model's mutation rate. Pieces on different chromosomes are
  independent, as chromosomes are.
- Sites: biallelic (one mutation), minor allele frequency above ``maf_floor`` among all
  sampled haplotypes; ``n_variants`` of them drawn at random, evenly over the pieces.
  A1 is the derived allele, A2 the ancestral one; .bim cM = bp x rate x 100.
- Each model population gets its own pedigree
  (:func:`cmix.simulate.pedigree.simulate_pedigree`): founders are the sampled diploids
  (consecutive haplotype pairs, as msprime makes individuals), so relatives always share a
  population; children inherit by meiosis with Poisson crossovers at the piece's
  recombination rate. The discovery cohort behind the summary statistics is further
  sampled diploids of the same simulation, in the cohort's population proportions (never
  the cohort's own people).
- Planted Hardy-Weinberg failures, missing calls, traits (large loci on SNPs whose
  first-population frequency is nearest the published one; polygenic background on
  first-population MAF >= 1% SNPs; the first population is the trait reference), sample QC
  with PCs, kinship and withdrawals as in :mod:`cmix.simulate.balding_nichols`.
  ``f.21000.0.0`` is the population's code: its 1-based index in the model's population
  list.

msprime and stdpopsim are imported only in :mod:`cmix.simulate.trees`, on use
(``pip install cmix[sim]``).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..atomic import atomic_path
from ..errors import CmixError
from ..logs import log
from ..outputs import staged_folder
from ..readers import plink
from .gwas import check_discovery_size, discovery_regression, write_sumstats
from .pedigree import (GeneticMap, Pedigree, pedigree_haplotypes, simulate_fam,
                       simulate_pedigree)
from .populations import parse_population_counts, parse_population_spec
from .qc_failures import missingness_rates, qc_truth
from .sample_qc import write_sample_files
from .traits import (RED_HAIR, TRAITS, add_covariate_columns, causal_truth, simulate_covariates,
                     simulate_phenotypes)
from .trees import get_model, model_populations, sample_sites, simulate_trees


WHITE_BRITISH_IDS = {"CEU", "GBR", "EUR"}   # model populations flagged white British in the QC table
PCA_METHOD = ("fit on used.in.pca.calculation samples; SNPs with pooled MAF >= 5% thinned to "
              "haplotype r2 <= 0.1 with the last kept SNP (at most 2,000, evenly spaced); "
              "every sample projected")


def _split(total: int, weights: dict[str, int]) -> dict[str, int]:
    """``total`` split over the keys in proportion to ``weights`` (largest remainder)."""
    w = np.array(list(weights.values()), dtype=float)
    exact = total * w / w.sum()
    counts = np.floor(exact).astype(int)
    order = np.argsort(-(exact - counts), kind="stable")
    counts[order[: total - counts.sum()]] += 1
    return {k: int(c) for k, c in zip(weights, counts)}


def _greedy_ld_thin(hap: np.ndarray, ok: np.ndarray, piece: np.ndarray,
                    max_r2: float = 0.1) -> np.ndarray:
    """Walk along each piece keeping an ``ok`` SNP when its haplotype r2 with the last kept
    SNP is <= ``max_r2``. hap: bool (n_sites, n_haplotypes). Returns kept site indices."""
    keep, last = [], None
    for i in np.flatnonzero(ok):
        if last is not None and piece[last] == piece[i]:
            x, y = hap[last].astype(np.float64), hap[i].astype(np.float64)
            r = np.corrcoef(x, y)[0, 1]
            if not (r * r <= max_r2):
                continue
        keep.append(i)
        last = i
    return np.array(keep, dtype=int)


@dataclass(frozen=True)
class CoalescentDesign:
    """What a coalescent cohort holds. model: a stdpopsim HomSap demographic model id.
    populations: cohort size per model population (see :func:`parse_population_counts`:
    None shares ``n_samples`` equally; "YRI:500,CEU:2000" counts; "YRI:0.2,CEU:0.8"
    shares). n_samples: people in the cohort; n_variants: SNPs. n_chrom: contig pieces,
    one per chromosome (None: clip(n_variants // 500, 2, 22)), each ``piece_mb`` Mb.
    n_discovery: discovery cohort size (None: the cohort size), in the cohort's
    population proportions. maf_floor: sites need a minor allele frequency above it among
    all sampled haplotypes."""

    model: str = "OutOfAfrica_3G09"
    populations: object = None
    n_samples: int = 2000
    n_variants: int = 5000
    n_chrom: int | None = None
    piece_mb: float = 2.0
    n_discovery: int | None = None
    maf_floor: float = 0.01


@dataclass
class CohortGenotypes:
    """The simulated people of a coalescent cohort, between the steps of
    :func:`simulate_coalescent_cohort`.

    n_samples, n_pieces: cohort size and contig pieces; disc_counts: people per
    population in the discovery cohort; msprime_samples: diploids sampled
    per population; pieces_truth: per-piece truth records. variants: the .bim columns
    (+ piece); gmap: their GeneticMap. h0, h1: bool (n_variants, n_individuals), the two
    haplotypes of every sampled individual (planted HWE failures in h1). reference: the
    first population's name; all_founders: int, the pedigree founders' individual
    columns; p_ref, p_pool: float (n_variants,) A1 frequency among the reference
    population's founders and among all founders; hwe_idx: SNPs with planted HWE
    failures. dos: int8 (n_variants, n_samples) cohort dosages (.fam order, before
    missing calls); pop_of: (n_samples,) population names; pairs: related pairs (.fam
    row, .fam row, degree). disc_dos: int8 (n_variants, n_discovery); disc_pop:
    (n_discovery,) population names. fam_eid, spare_eids, sex: the .fam's eids, unused
    eids, sexes. sample_miss: (n_samples,) missing rates; bad / bad_v: high-missingness
    samples / SNPs.
    """

    n_samples: int
    n_pieces: int
    disc_counts: dict
    msprime_samples: dict
    pieces_truth: list
    variants: pd.DataFrame
    gmap: object
    h0: np.ndarray
    h1: np.ndarray
    reference: str
    all_founders: np.ndarray
    p_ref: np.ndarray
    p_pool: np.ndarray
    hwe_idx: np.ndarray
    dos: np.ndarray
    pop_of: np.ndarray
    pairs: list
    disc_dos: np.ndarray
    disc_pop: np.ndarray
    fam_eid: np.ndarray
    spare_eids: np.ndarray
    sex: pd.Series
    sample_miss: np.ndarray
    bad: np.ndarray
    bad_v: np.ndarray


def simulate_coalescent_cohort(out_dir, design: CoalescentDesign = CoalescentDesign(),
                               seed: int = 1) -> dict:
    """Write a cohort whose haplotypes come from stdpopsim HomSap ``design.model`` (module
    doc; :class:`CoalescentDesign`), every draw from ``seed``. Returns the truth
    dictionary written to ``truth.json``. Memory: the (n_variants x haplotypes) matrices
    are held in memory.
    """
    _check_options(design)
    if design.populations is not None:       # a wrong spec is told before msprime is needed
        parse_population_spec(design.populations)
    mdl = get_model(design.model)
    names = model_populations(mdl)
    counts = parse_population_counts(design.populations, design.n_samples, names)
    n_discovery = (sum(counts.values()) if design.n_discovery is None
                   else design.n_discovery)
    check_discovery_size(n_discovery)
    with staged_folder(out_dir) as out:       # a failure leaves out_dir as it was
        truth = _simulate_coalescent_cohort(out, design, seed, mdl, names, counts,
                                            n_discovery)
    log(f"wrote {out_dir} ({len(truth['related_pairs'])} related pairs, {len(counts)} "
        f"populations of {design.model})")
    return truth


def _simulate_coalescent_cohort(out, design: CoalescentDesign, seed: int, mdl, names: list,
                                counts: dict, n_discovery: int) -> dict:
    """The body of :func:`simulate_coalescent_cohort`, writing into ``out`` (a staged
    folder)."""
    ss = np.random.SeedSequence(seed)
    rngs = dict(zip(("variants", "pedigree", "haplotypes", "missing", "traits", "outputs",
                     "covariates"), (np.random.default_rng(s) for s in ss.spawn(7))))
    g = _simulate_genotypes(out, design, mdl, counts, n_discovery, rngs, seed)
    code = {name: names.index(name) + 1 for name in counts}
    trait_truth, truth_causal, taken = _simulate_traits(out, g, n_discovery, code, rngs)

    # sample QC with PCs (pooled MAF >= 5%, haplotype r2 <= 0.1 greedy thinning), kinship
    pca_snps = _pca_variants(np.c_[g.h0[:, g.all_founders], g.h1[:, g.all_founders]],
                             g.p_pool, np.r_[g.hwe_idx, g.bad_v, np.flatnonzero(taken)],
                             g.gmap.piece)
    white = np.array([p in WHITE_BRITISH_IDS for p in g.pop_of])
    pca_fit = write_sample_files(rngs["outputs"], out, g.fam_eid, g.spare_eids[0],
                                 g.sample_miss, g.pairs, white, pca_snps)
    vid = g.variants.variant_id.to_numpy()
    truth = {
        "seed": seed, "haplotypes": "coalescent", "n_samples": g.n_samples,
        "n_variants": design.n_variants, "n_chrom": g.n_pieces, "n_discovery": n_discovery,
        **_model_truth(mdl, names, counts, g.disc_counts, code),
        "msprime_samples": g.msprime_samples,
        "pieces": g.pieces_truth, "piece_mb": design.piece_mb, "maf_floor": design.maf_floor,
        "reference_population": g.reference,
        "samples": {"eid": g.fam_eid.tolist(), "population": g.pop_of.tolist()},
        "traits": trait_truth, "causal": truth_causal,
        **qc_truth(g.fam_eid, vid, g.pairs, g.hwe_idx, g.bad, g.bad_v),
        "pca": {"variant_ids": vid[pca_snps].tolist(), "n_fit_samples": int(pca_fit.sum()),
                "method": PCA_METHOD},
    }
    with atomic_path(out / "truth.json") as tmp_path:
        tmp_path.write_text(json.dumps(truth, indent=1))
    return truth


def _simulate_genotypes(out, design: CoalescentDesign, mdl, counts: dict, n_discovery: int,
                        rngs: dict, seed: int) -> CohortGenotypes:
    """The cohort's people and genotypes: one pedigree per population (founders are
    sampled diploids), the msprime haplotypes of ``design``'s pieces, the planted HWE
    failures, the cohort's and the discovery people's dosages; writes out/genotypes.bed
    (.bim, .fam) with missing calls. counts: people per population; rngs: the named
    random streams of :func:`simulate_coalescent_cohort`."""
    n_samples = sum(counts.values())
    n_pieces = design.n_chrom or int(np.clip(design.n_variants // 500, 2, 22))
    disc_counts = _split(n_discovery, counts)
    peds = {name: simulate_pedigree(n) for name, n in counts.items()}
    n_founders = {name: _n_founders(ped) for name, ped in peds.items()}
    samples = {name: n_founders[name] + disc_counts[name] for name in counts}
    log(f"coalescent cohort: {design.model}, {n_samples} samples ({counts}) + discovery "
        f"{n_discovery}, {design.n_variants} SNPs on {n_pieces} pieces of "
        f"{design.piece_mb:g} Mb")
    trees = simulate_trees(design.model, samples, n_pieces, design.piece_mb, seed)
    hap, variants, gmap, ind_pop, pieces_truth = sample_sites(
        rngs["variants"], trees, design.n_variants, design.maf_floor, design.piece_mb,
        mdl.mutation_rate, seed)
    founder_cols, disc_cols = _individual_columns(trees[0][1], ind_pop, n_founders, disc_counts)
    h0_all, h1_all = hap[:, 0::2], hap[:, 1::2]      # (n_variants, n_individuals)
    first = list(counts)[0]
    all_founders = np.concatenate(list(founder_cols.values()))
    p_ref, p_pool = _founder_frequencies(hap, founder_cols[first], all_founders)
    hwe_idx = _plant_hwe(rngs["variants"], rngs["haplotypes"], h0_all, h1_all, p_pool,
                         len(all_founders))
    dos, pop_of, pairs = _cohort_dosages(rngs["pedigree"], peds, founder_cols, h0_all, h1_all,
                                         gmap)
    disc_dos, disc_pop = _discovery_dosages(h0_all, h1_all, disc_cols)
    fam_eid, spare_eids, fam = simulate_fam(rngs["pedigree"], n_samples)
    sample_miss, bad, bad_v = _write_bed(rngs["missing"], out / "genotypes", fam, variants, dos)
    return CohortGenotypes(
        n_samples=n_samples, n_pieces=n_pieces, disc_counts=disc_counts,
        msprime_samples=samples, pieces_truth=pieces_truth, variants=variants, gmap=gmap,
        h0=h0_all, h1=h1_all, reference=first, all_founders=all_founders, p_ref=p_ref,
        p_pool=p_pool, hwe_idx=hwe_idx, dos=dos, pop_of=pop_of, pairs=pairs,
        disc_dos=disc_dos, disc_pop=disc_pop, fam_eid=fam_eid, spare_eids=spare_eids,
        sex=fam.sex, sample_miss=sample_miss, bad=bad, bad_v=bad_v)


def _simulate_traits(out, g: CohortGenotypes, n_discovery: int, code: dict,
                     rngs: dict) -> tuple[dict, dict, np.ndarray]:
    """The traits, the first population as the reference: writes out/phenotypes.tsv (with
    the covariate columns; ``code``: population name -> its f.21000.0.0 code) and the
    summary statistics of the discovery cohort (out/sumstats/). Returns (the traits'
    truth, the causal SNPs' truth, bool (n_variants,) the SNPs the large loci took)."""
    n_samples = g.n_samples
    loci, taken = _trait_loci(rngs["traits"], g.p_ref, g.hwe_idx)
    components = _trait_components(rngs["traits"], g.p_ref, loci, taken)
    genetic = _genetic_values(components, g.dos, g.disc_dos)
    male, age = simulate_covariates(rngs["covariates"], g.sex, n_discovery)
    reference = np.r_[g.pop_of == g.reference, g.disc_pop == g.reference]
    pheno, liabilities, trait_truth = simulate_phenotypes(
        rngs["traits"], genetic, components, n_samples, male, age, reference,
        np.zeros(n_samples + n_discovery))
    add_covariate_columns(pheno, g.fam_eid, male, age, [code[p] for p in g.pop_of])
    vid = g.variants.variant_id.to_numpy()
    truth_causal = _causal_truth(components, trait_truth, vid, loci["_red"], g.p_ref)
    disc_y = np.column_stack([liabilities[t][n_samples:] for t in TRAITS])
    _write_sumstats(rngs["outputs"], out, g.variants, g.disc_dos, disc_y)
    with atomic_path(out / "phenotypes.tsv") as tmp_path:
        pheno.to_csv(tmp_path, sep="\t", index=False)
    return trait_truth, truth_causal, taken


def _check_options(design: CoalescentDesign) -> None:
    """CmixError naming the option when a size, --n-chrom, --piece-mb or --maf-floor is out
    of range."""
    n_samples, n_variants, n_chrom = design.n_samples, design.n_variants, design.n_chrom
    piece_mb, maf_floor = design.piece_mb, design.maf_floor
    if n_samples < 1 or n_variants < 1:
        raise CmixError("--n-samples and --n-variants must be positive")
    if not 0 <= maf_floor < 0.5:
        raise CmixError(f"--maf-floor must be in [0, 0.5), got {maf_floor}")
    if not 0.01 <= piece_mb <= 20:
        raise CmixError(f"--piece-mb must be between 0.01 and 20, got {piece_mb}")
    if n_chrom is not None and not 1 <= n_chrom <= 22:
        raise CmixError(f"--n-chrom (contig pieces) must be between 1 and 22, got {n_chrom}")


def _n_founders(ped: Pedigree) -> int:
    """Pedigree individuals that are neither children nor duplicates."""
    father, _, dup_of, _ = ped.arrays()
    return int(((father < 0) & (dup_of < 0)).sum())


def _individual_columns(ts, ind_pop: np.ndarray, n_founders: dict, disc_counts: dict):
    """Per population (in ``n_founders`` order), the sampled individuals (indices into
    ind_pop, (n_individuals,) population ids of tree sequence ``ts``) that are its pedigree
    founders (the first n_founders[name]) and its discovery people (the next
    disc_counts[name]). Returns two {name: int array} dicts."""
    pop_id = {p.metadata["name"]: p.id for p in ts.populations()}
    founder_cols, disc_cols = {}, {}
    for name in n_founders:
        members = np.flatnonzero(ind_pop == pop_id[name])
        founder_cols[name] = members[: n_founders[name]]
        disc_cols[name] = members[n_founders[name]: n_founders[name] + disc_counts[name]]
    return founder_cols, disc_cols


def _plant_hwe(rng_var, rng_hap, h0: np.ndarray, h1: np.ndarray, p_pool: np.ndarray,
               n_founders: int) -> np.ndarray:
    """In place on h1: planted Hardy-Weinberg failures on founders and discovery people, as in
    :mod:`cmix.simulate.balding_nichols`: max(4, n_variants // 500) common (pooled MAF >=
    0.1) SNPs, alternately strong (copy haplotype 0 onto 1 with probability 0.3) and borderline (near
    p = 1e-7 over ``n_founders``). h0, h1: bool (n_variants, n_individuals); p_pool:
    (n_variants,) the founders' A1 frequency. Returns the sorted SNP indices."""
    n_variants = len(p_pool)
    common = np.flatnonzero(np.minimum(p_pool, 1 - p_pool) >= 0.1)
    n_hwe = min(len(common), max(4, n_variants // 500))
    hwe_idx = np.sort(rng_var.choice(common, size=n_hwe, replace=False))
    f_borderline = math.sqrt(28.4 / max(n_founders, 1))
    for j, f in zip(hwe_idx, np.where(np.arange(n_hwe) % 2 == 0, 0.3, f_borderline)):
        copy = rng_hap.random(h0.shape[1]) < f
        h1[j, copy] = h0[j, copy]
    return hwe_idx


def _cohort_dosages(rng, peds: dict, founder_cols: dict, h0: np.ndarray, h1: np.ndarray,
                    gmap: GeneticMap):
    """The cohort's A1 dosages in .fam order (all populations' pedigree members, permuted).

    peds: {population: Pedigree}; founder_cols: {population: its founders' columns of
    h0/h1 (n_variants, n_individuals)}. Returns (int8 (n_variants, n_samples), population
    name per .fam row (n_samples,), related pairs as (.fam row, .fam row, degree))."""
    cohort_dos, cohort_pop, pairs_local = [], [], []
    for name, ped in peds.items():
        fc = founder_cols[name]
        ph0, ph1 = pedigree_haplotypes(rng, ped, h0[:, fc], h1[:, fc], gmap)
        members = np.flatnonzero(ped.arrays()[3])
        row = np.full(len(ph0), -1)
        row[members] = np.arange(len(members)) + sum(len(d) for d in cohort_pop)
        pairs_local += [(int(row[i]), int(row[j]), d) for i, j, d in ped.pairs]
        cohort_dos.append(ph0[members].astype(np.int8) + ph1[members].astype(np.int8))
        cohort_pop.append(np.full(len(members), name, dtype=object))
    dos = np.concatenate(cohort_dos).T                   # (n_variants, n_samples), pop-grouped
    pop_of = np.concatenate(cohort_pop)
    n_samples = len(pop_of)
    order = rng.permutation(n_samples)                   # fam row r is pop-grouped row order[r]
    dos, pop_of = dos[:, order], pop_of[order]
    fam_row = np.empty(n_samples, dtype=int)
    fam_row[order] = np.arange(n_samples)
    pairs = [(int(fam_row[a]), int(fam_row[b]), d) for a, b, d in pairs_local]
    return dos, pop_of, pairs


def _write_bed(rng, bed_path, fam: pd.DataFrame, variants: pd.DataFrame, dos: np.ndarray):
    """Write dosages (n_variants, n_samples) as the .bed/.bim/.fam with missing calls
    (:func:`cmix.simulate.qc_failures.missingness_rates`). Returns (per-sample missing rate
    (n_samples,), the high-missingness samples, the high-missingness SNPs)."""
    n_variants, n_samples = dos.shape
    sample_miss, variant_miss, bad, bad_v = missingness_rates(rng, n_samples, n_variants)
    miss_p = 1 - np.outer(1 - variant_miss, 1 - sample_miss)
    called = dos.copy()
    called[rng.random(dos.shape, dtype=np.float32) < miss_p] = -1
    with plink.BedWriter(bed_path, fam, variants[plink.BIM_COLUMNS]) as writer:
        writer.write(called)
    return sample_miss, bad, bad_v


def _trait_loci(rng, p_ref: np.ndarray, hwe_idx: np.ndarray):
    """Each trait's large loci and the MC1R alleles on distinct SNPs (not planted HWE
    failures, reference MAF >= 1%) whose first-population A1 frequency (p_ref,
    (n_variants,)) is nearest the published one, ties broken at random. Returns
    ({"<trait>": [index, ...], "_red": [index, ...]}, taken: bool (n_variants,) the SNPs
    used by loci or HWE failures)."""
    n_variants = len(p_ref)
    maf_ref = np.minimum(p_ref, 1 - p_ref)
    taken = np.zeros(n_variants, dtype=bool)
    taken[hwe_idx] = True

    def nearest(freq):
        free = np.flatnonzero(~taken & (maf_ref >= 0.01))
        if not len(free):
            raise CmixError(f"--n-variants {n_variants} is too small to place the traits' loci")
        i = free[np.argmin(np.abs(p_ref[free] - freq) + 1e-9 * rng.random(len(free)))]
        taken[i] = True
        return int(i)

    loci = {t: [nearest(lc["a1_freq"]) for lc in spec["large_loci"]] for t, spec in TRAITS.items()}
    loci["_red"] = [nearest(a["a1_freq"]) for a in RED_HAIR["alleles"]]
    return loci, taken


def _trait_components(rng, p_ref: np.ndarray, loci: dict, taken: np.ndarray) -> dict:
    """The traits' genetic components as :func:`cmix.simulate.traits.simulate_phenotypes` takes
    them: polygenic causal SNPs among the free SNPs with reference MAF >= 1% (raw effects
    per standardised genotype), large loci (effects from their variance share at the
    reference frequency ``p_ref``) and the MC1R SNPs; each (variant indices, effects)."""
    maf_ref = np.minimum(p_ref, 1 - p_ref)
    eligible = np.flatnonzero((maf_ref >= 0.01) & ~taken)
    components = {}
    for name, spec in TRAITS.items():
        k = min(spec["n_causal"], len(eligible))
        idx = np.sort(rng.choice(eligible, size=k, replace=False))
        p = p_ref[idx]
        components[name] = (idx, rng.normal(size=k) / np.sqrt(2 * p * (1 - p)))
        lidx = np.array(loci[name], dtype=int)
        lbeta = np.array([lc["sign"] * math.sqrt(lc["var"] / (2 * p_ref[i] * (1 - p_ref[i])))
                          for lc, i in zip(spec["large_loci"], lidx)])
        components[name + "/large"] = (lidx, lbeta)
    components["_red"] = (np.array(loci["_red"]), np.ones(len(loci["_red"])))
    return components


def _genetic_values(components: dict, dos: np.ndarray, disc_dos: np.ndarray) -> dict:
    """{component: effect x A1 dosage summed over its SNPs (n_samples + n_discovery,)},
    cohort (dos: (n_variants, n_samples)) then discovery (disc_dos)."""
    n_total = dos.shape[1] + disc_dos.shape[1]
    return {c: np.r_[b @ dos[idx], b @ disc_dos[idx]] if len(idx) else np.zeros(n_total)
            for c, (idx, b) in components.items()}


def _causal_truth(components: dict, trait_truth: dict, vid: np.ndarray, red_idx: list,
                  p_ref: np.ndarray) -> dict:
    """:func:`cmix.simulate.traits.causal_truth`, with each large locus's and the MC1R alleles'
    first-population A1 frequency (``a1_freq_first_population``) added to ``trait_truth``."""
    truth_causal = causal_truth(components, trait_truth, vid, red_idx)
    for t in TRAITS:
        for lc, i in zip(trait_truth[t]["large_loci"], components[t + "/large"][0]):
            lc["a1_freq_first_population"] = float(p_ref[i])
    trait_truth["hair_colour"]["red_hair"]["a1_freq_first_population"] = p_ref[red_idx].tolist()
    return truth_causal


def _write_sumstats(rng, out, variants: pd.DataFrame, disc_dos: np.ndarray,
                    disc_y: np.ndarray) -> None:
    """out/sumstats/<trait>.txt.gz from per-SNP regression of disc_y (n_discovery,
    n_traits) on the discovery dosages (n_variants, n_discovery); gzip headers hold no
    file name or time, so the same seed writes the same bytes."""
    beta, se, freq = discovery_regression(plink.encode(disc_dos), disc_dos.shape[1], disc_y)
    write_sumstats(rng, out, variants, beta, se, freq)


def _model_truth(mdl, names: list[str], counts: dict, disc_counts: dict, code: dict) -> dict:
    """truth.json's "model" (id, description, citations, mutation rate, the populations it
    can sample), "populations" (the sampled ones in ``counts`` order with code,
    description, cohort and discovery sizes and the white-British flag) and "classes"
    ({population: [code]})."""
    pop_truth = []
    for p in mdl.populations:
        if p.name in counts:
            pop_truth.append({"name": p.name, "code": code[p.name], "description": p.description,
                              "n_cohort": counts[p.name], "n_discovery": disc_counts[p.name],
                              "white_british": p.name in WHITE_BRITISH_IDS})
    pop_truth.sort(key=lambda d: list(counts).index(d["name"]))
    return {"model": {"id": mdl.id, "description": mdl.description,
                      "citations": [str(c) for c in mdl.citations],
                      "mutation_rate": mdl.mutation_rate, "engine": "msprime (stdpopsim)",
                      "populations_in_model": names},
            "populations": pop_truth,
            "classes": {p["name"]: [p["code"]] for p in pop_truth}}


def _founder_frequencies(hap: np.ndarray, reference_founders: np.ndarray,
                         all_founders: np.ndarray):
    """A1 frequencies (n_variants,) among the reference (first) population's founders and
    among all founders. hap: bool (n_variants, 2 x n_individuals), two columns a person."""
    h0, h1 = hap[:, 0::2], hap[:, 1::2]
    p_ref = hap[:, np.r_[2 * reference_founders, 2 * reference_founders + 1]].mean(axis=1)
    p_pool = np.c_[h0[:, all_founders], h1[:, all_founders]].mean(axis=1)
    return p_ref, p_pool


def _discovery_dosages(h0: np.ndarray, h1: np.ndarray, disc_cols: dict):
    """The discovery people's A1 dosages int8 (n_variants, n_discovery), populations in
    ``disc_cols`` order, and each one's population name (n_discovery,)."""
    disc = np.concatenate(list(disc_cols.values()))
    disc_dos = (h0[:, disc].astype(np.int8) + h1[:, disc].astype(np.int8))
    disc_pop = np.concatenate([np.full(len(cols), n, dtype=object) for n, cols in disc_cols.items()])
    return disc_dos, disc_pop


def _pca_variants(founder_hap: np.ndarray, p_pool: np.ndarray, exclude: np.ndarray,
                  piece: np.ndarray, max_snps: int = 2000) -> np.ndarray:
    """SNPs for the ancestry PCs: pooled MAF >= 5%, not in ``exclude`` (planted HWE
    failures, high-missingness SNPs, trait loci), thinned to haplotype r2 <= 0.1 with the
    last kept SNP of the piece (founder_hap: bool (n_variants, n_founder_haplotypes)); at
    most ``max_snps``, evenly spaced. Returns sorted SNP indices."""
    ok = np.minimum(p_pool, 1 - p_pool) >= 0.05
    ok[exclude] = False
    pca_snps = _greedy_ld_thin(founder_hap, ok, piece)
    if len(pca_snps) > max_snps:
        pca_snps = pca_snps[np.linspace(0, len(pca_snps) - 1, max_snps).astype(int)]
    return pca_snps
