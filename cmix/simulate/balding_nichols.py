"""Balding-Nichols cohorts: simulated UK Biobank-style cohorts, the fixtures of every test
and of the demo.

:func:`simulate_cohort` writes, into one folder:

- ``genotypes.bed/.bim/.fam``: autosomes with increasing positions, rsIDs and alleles;
  a realistic allele-frequency spectrum (about a third of SNPs with MAF < 1%); LD from
  haplotypes whose alleles are thresholds of a latent AR(1) process along each LD block;
  population structure (by default UK Biobank-like, :data:`DEFAULT_POPULATIONS`): each
  population's allele frequencies drawn by the Balding-Nichols model around the first
  (British) population's, calibrated so the configured value is the Hudson Fst plink2
  --fst reports; regions inside a population the same way; admixed people whose
  haplotypes take their source population per LD block (local ancestry tracts). The
  latent process is shared by all, so LD is the same; a haplotype's allele is
  ``z < ndtri(p)`` with its own population's p. Planted Hardy-Weinberg failures (strong
  ones and borderline ones near p = 1e-7, made by within-person allele copying, i.e.
  inbreeding-like het deficit); sporadic missing calls plus a few high-missingness
  samples and variants; and relatives made by actual inheritance (meiosis with
  crossovers from parents' haplotypes), always within one population: duplicates,
  parent-offspring pairs, full siblings, half siblings, first cousins and nuclear
  families of four. As in UK Biobank, every .fam row is a founder (parents "0").
- ``kinship.dat``: the UKB ``ukb_rel.dat`` layout (ID1 ID2 HetHet IBS0 Kinship), KING-robust
  over all SNPs for pairs of relatives with kinship > 0.0442.
- ``sample_qc.tsv`` (named ukb_sqc_v2 columns: array, batch, QC flags, in.white.British.ancestry.subset
  from the ancestry, used.in.pca.calculation, PC1..PC10 fitted on unrelated samples and
  LD-thinned common SNPs, everyone projected) and ``withdrawn.txt`` (one eid a line).
- ``phenotypes.tsv``: eid, the four traits of the paper with UKB codings (f.30100.0.0
  mean platelet volume, f.30270.0.0 mean sphered cell volume, f.20116.0.0 smoking
  status, f.1747.0.0 hair colour) from published architectures (:data:`TRAITS`,
  :data:`RED_HAIR`), then f.31.0.0 sex (0 female, 1 male, as in the .fam), f.21022.0.0
  age at recruitment and f.21000.0.0 ethnic background (each population's code).
- ``sumstats/<trait>.txt.gz``: BOLT-LMM layout, from per-SNP regression of the trait's
  liability (hair colour: its code 1-5 as a number, so both the darkness loci and MC1R
  show) in a separate discovery cohort of the same structure (never the cohort's own
  samples); about 5% of SNPs absent, about 30% reported with ALLELE1 = the .bim A2
  (swapped), p-values printed with two significant digits in mantissa/exponent form.
- ``truth.json``: every parameter (populations, Balding-Nichols F per frequency row,
  trait architectures), each sample's population, region and admixture proportions,
  causal SNPs and effects, related pairs and degrees, planted HWE SNPs.

The haplotype engine is this module's (the streamed pass of :func:`simulate_cohort`); the
cohort parts it shares with :mod:`cmix.simulate.coalescent` live in the other modules of
:mod:`cmix.simulate`. :func:`cmix.simulate.fast.simulate_genotypes_fast` writes only an
LD-free .bed/.bim/.fam for benchmark-sized cohorts.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import special

from ..atomic import atomic_path
from ..errors import CmixError
from ..logs import log, progress
from ..outputs import staged_folder
from ..readers import plink
from .ancestry import (Ancestry, HaplotypeColumns, ancestry_truth, haplotype_columns,
                       population_frequencies)
from .gwas import check_discovery_size, discovery_sumstats
from .pedigree import CohortRelatives, cohort_relatives, inherit_block
from .populations import resolve_populations
from .qc_failures import (missingness_rates, plant_het_deficit, plant_hwe, qc_truth,
                          with_missing_calls)
from .sample_qc import PCA_METHOD, pca_variants, write_sample_files
from .traits import (TRAITS, add_covariate_columns, causal_truth, simulate_covariates,
                     simulate_phenotypes)
from .variants import place_loci, simulate_variants


@dataclass(frozen=True)
class GenotypeModel:
    """Everything the streamed genotype pass of :func:`simulate_cohort` draws from.

    variants: the .bim plus p_a1, rho, chrom_index (:func:`simulate_variants`);
    freqs: (n_rows, n_variants) A1 frequency per :class:`Ancestry` row; hwe_f:
    (n_variants,) planted within-person allele-copying probability (0 for most SNPs);
    sample_miss (n_samples,) and variant_miss (n_variants,): missing-call rates.
    """

    variants: pd.DataFrame
    freqs: np.ndarray
    hwe_f: np.ndarray
    relatives: CohortRelatives
    columns: HaplotypeColumns
    sample_miss: np.ndarray
    variant_miss: np.ndarray


def simulate_cohort(out_dir, n_samples: int = 2000, n_variants: int = 5000,
                    n_chrom: int | None = None, n_discovery: int | None = None,
                    seed: int = 1, block_size: int = 512, populations="default") -> dict:
    """Write a simulated UK Biobank-like cohort into ``out_dir`` (see the module doc).

    populations: "default" (:data:`DEFAULT_POPULATIONS`), None or "none" (one panmictic
    British population, no regions), a path to an ancestry JSON file, or a list of
    population dicts (see :func:`check_populations`). Returns the truth dictionary also
    written to ``truth.json``. Memory is bounded by ``block_size`` variants x (cohort +
    discovery) haplotypes; the .bed is streamed. ``out_dir`` must be new, empty or an
    earlier simulation's (:func:`cmix.outputs.staged_folder`: a folder holding other files is
    refused before any work, and only files a simulation wrote are replaced).
    """
    if n_samples < 1 or n_variants < 1:
        raise CmixError("--n-samples and --n-variants must be positive")
    pops = resolve_populations(populations)
    anc = Ancestry(pops)
    n_chrom = n_chrom or int(np.clip(n_variants // 200, 1, 22))
    if not 1 <= n_chrom <= 22:
        raise CmixError(f"--n-chrom must be between 1 and 22, got {n_chrom}")
    n_discovery = max(5000, n_samples) if n_discovery is None else n_discovery
    check_discovery_size(n_discovery)
    with staged_folder(out_dir) as out:       # a failure leaves out_dir as it was
        truth = _simulate_cohort(out, n_samples, n_variants, n_chrom, n_discovery, seed,
                                 block_size, anc)
    planted = truth["hwe_planted"]
    log(f"wrote {out_dir} ({len(truth['related_pairs'])} related pairs, "
        f"{len(planted['strong']) + len(planted['borderline'])} planted HWE failures, "
        f"{len(pops)} population(s))")
    return truth


def _simulate_cohort(out: Path, n_samples: int, n_variants: int, n_chrom: int,
                     n_discovery: int, seed: int, block_size: int, anc: "Ancestry") -> dict:
    """The body of :func:`simulate_cohort`, writing into ``out`` (a staged folder);
    ``anc`` holds the populations (``anc.pops``)."""
    pops = anc.pops
    ss = np.random.SeedSequence(seed)
    rng_var, rng_ped, rng_hap, rng_miss, rng_trait, rng_out, rng_pop, rng_cov = (
        np.random.default_rng(s) for s in ss.spawn(8))

    variants = simulate_variants(rng_var, n_variants, n_chrom)
    loci = place_loci(rng_var, variants, n_chrom)
    log(f"simulating {n_samples} samples x {n_variants} SNPs on {n_chrom} chromosomes "
        f"(discovery cohort {n_discovery}; {len(pops)} population(s))")
    freqs = population_frequencies(rng_pop, anc, variants, loci)
    relatives, fam_eid, spare_eids, fam = cohort_relatives(rng_ped, n_samples, n_chrom)
    columns = haplotype_columns(rng_pop, anc, relatives, n_discovery,
                                n_ld_blocks=int((variants.rho.to_numpy() == 0).sum()))
    n_founder_cohort = int((relatives.is_founder & relatives.in_cohort).sum())
    hwe_idx, hwe_f, not_locus = plant_hwe(rng_var, variants, loci, n_founder_cohort)
    sample_miss, variant_miss, bad, bad_v = missingness_rates(rng_miss, n_samples, n_variants)
    components = _trait_components(rng_trait, variants, loci, not_locus)
    model = GenotypeModel(variants, freqs, hwe_f, relatives, columns, sample_miss, variant_miss)

    bed_path, disc_tmp = out / "genotypes", out / f".discovery.{seed}.tmp"
    genetic = _write_genotypes(rng_hap, rng_miss, model, components, fam, bed_path, disc_tmp,
                               block_size)
    male, age = simulate_covariates(rng_cov, fam.sex, n_discovery)
    cohort_leaf = columns.ped_leaf[relatives.cohort_members]
    leaf = np.r_[cohort_leaf, columns.disc_leaf]
    pheno, liabilities, trait_truth = simulate_phenotypes(
        rng_trait, genetic, components, n_samples, male, age, anc.leaf_pop[leaf] == 0,
        anc.leaf_smoking[leaf])
    population_code = np.array([p["code"] for p in pops])[anc.leaf_pop[cohort_leaf]]
    add_covariate_columns(pheno, fam_eid, male, age, population_code)
    vid = variants.variant_id.to_numpy()
    truth_causal = causal_truth(components, trait_truth, vid, loci["_red"])
    disc_y = np.column_stack([liabilities[t][n_samples:] for t in TRAITS])
    discovery_sumstats(rng_out, out, variants, disc_tmp, n_discovery, disc_y, block_size)
    with atomic_path(out / "phenotypes.tsv") as tmp_path:
        pheno.to_csv(tmp_path, sep="\t", index=False)

    pairs = relatives.pairs()
    white_british_pop = np.array([p["white_british"] for p in pops])[anc.leaf_pop[cohort_leaf]]
    pca_snps = pca_variants(variants, np.r_[hwe_idx, bad_v, np.flatnonzero(~not_locus)])
    pca_fit = write_sample_files(rng_out, out, fam_eid, spare_eids[0], sample_miss, pairs,
                                 white_british_pop, pca_snps)

    truth = {
        "seed": seed, "n_samples": n_samples, "n_variants": n_variants, "n_chrom": n_chrom,
        "n_discovery": n_discovery,
        **ancestry_truth(pops, anc, relatives, columns, fam_eid),
        "traits": trait_truth,
        "causal": truth_causal,
        **qc_truth(fam_eid, vid, pairs, hwe_idx, bad, bad_v),
        "pca": {"variant_ids": vid[pca_snps].tolist(), "n_fit_samples": int(pca_fit.sum()),
                "method": PCA_METHOD},
    }
    with atomic_path(out / "truth.json") as tmp_path:
        tmp_path.write_text(json.dumps(truth, indent=1))
    return truth


def _trait_components(rng, variants: pd.DataFrame, loci: dict, not_locus: np.ndarray) -> dict:
    """Each trait's genetic components: {"<trait>": (polygenic causal SNPs among MAF >= 1%
    non-locus SNPs, raw effects N(0, 1) per standardised genotype, rescaled once the
    genotypes are drawn), "<trait>/large": (its large loci, exact per-A1 effects),
    "_red": (the MC1R SNPs, ones)}; each value is (sorted variant indices, effects)."""
    p_all = variants.p_a1.to_numpy()
    maf = np.minimum(variants.p_a1, 1 - variants.p_a1).to_numpy()
    eligible = np.flatnonzero((maf >= 0.01) & not_locus)
    components = {}
    for name, spec in TRAITS.items():
        k = min(spec["n_causal"], len(eligible))
        idx = np.sort(rng.choice(eligible, size=k, replace=False))
        p = p_all[idx]
        components[name] = (idx, rng.normal(size=k) / np.sqrt(2 * p * (1 - p)))
        large_idx = np.array(loci[name], dtype=int)
        large_beta = np.array([lc["sign"] * math.sqrt(lc["var"] / (2 * lc["a1_freq"] * (1 - lc["a1_freq"])))
                               for lc in spec["large_loci"]])
        components[name + "/large"] = (large_idx, large_beta)
    components["_red"] = (np.array(loci["_red"]), np.ones(len(loci["_red"])))
    return components


def _write_genotypes(rng_hap, rng_miss, model: GenotypeModel, components: dict,
                     fam: pd.DataFrame, bed_path: Path, disc_path: Path,
                     block_size: int) -> dict:
    """Stream the cohort's .bed/.bim/.fam to ``bed_path`` and the discovery cohort's packed
    .bed rows (n_variants, ceil(n_discovery / 4)) to ``disc_path``, ``block_size`` SNPs at
    a time: founders' latent haplotypes -> alleles -> planted het deficit -> pedigree ->
    dosages -> missing calls. Returns {component: genetic value (n_samples + n_discovery,)},
    the sum of effect x A1 dosage over each component's SNPs (cohort, then discovery)."""
    variants, rel, cols = model.variants, model.relatives, model.columns
    n_samples, n_variants = len(fam), len(variants)
    n_f = len(cols.founder_rows)
    n_discovery = cols.n_hap // 2 - n_f
    genetic = {c: np.zeros(n_samples + n_discovery) for c in components}
    ld_block = np.cumsum(variants.rho.to_numpy() == 0) - 1          # LD-block index per SNP
    global_cm = variants.chrom_index.to_numpy() * 1000.0 + variants.cm.to_numpy()
    rho_all = variants.rho.to_numpy()
    z = np.zeros(cols.n_hap, dtype=np.float32)
    with open(disc_path, "wb") as disc_fh, \
            plink.BedWriter(bed_path, fam, variants[plink.BIM_COLUMNS]) as writer:
        for v0, v1 in progress(list(plink.variant_blocks(n_variants, block_size)),
                               desc="simulate", unit="block"):
            zs = _latent_block(rng_hap, z, rho_all[v0:v1])
            z = zs[-1].copy()
            hap_block = _allele_block(zs, model.freqs[:, v0:v1], cols, ld_block[v0:v1])
            del zs
            hap0, hap1 = hap_block[:, 0::2], hap_block[:, 1::2]   # (bl, n_f + n_discovery)
            plant_het_deficit(rng_hap, hap0, hap1, model.hwe_f[v0:v1])
            ped_h0, ped_h1 = inherit_block(hap0[:, :n_f], hap1[:, :n_f], rel, cols.founder_rows,
                                           global_cm[v0:v1])
            cohort_dosage = (ped_h0[rel.cohort_members].astype(np.int8)
                             + ped_h1[rel.cohort_members].astype(np.int8)).T   # (bl, n)
            disc_dosage = (hap0[:, n_f:].astype(np.int8) + hap1[:, n_f:].astype(np.int8))
            _add_genetic_values(genetic, components, v0, cohort_dosage, disc_dosage)
            disc_fh.write(plink.encode(disc_dosage).tobytes())
            writer.write(with_missing_calls(rng_miss, cohort_dosage, model.variant_miss[v0:v1],
                                            model.sample_miss))
    return genetic


def _latent_block(rng, z_prev: np.ndarray, rho: np.ndarray) -> np.ndarray:
    """The latent AR(1) process over one block of SNPs: float32 (bl, n_hap) with
    zs[j] = rho[j] zs[j-1] + sqrt(1 - rho[j]^2) e (e ~ N(0, 1); zs[-1] is ``z_prev``, the
    last SNP of the previous block); rho[j] = 0 starts a new LD block."""
    zs = rng.standard_normal((len(rho), len(z_prev)), dtype=np.float32)
    tmp = np.empty(len(z_prev), dtype=np.float32)
    prev = z_prev
    for j, r in enumerate(rho):
        if r != 0:
            zs[j] *= np.float32(math.sqrt(1 - r * r))
            np.multiply(prev, np.float32(r), out=tmp)
            zs[j] += tmp
        prev = zs[j]
    return zs


def _allele_block(zs: np.ndarray, freqs: np.ndarray, cols: HaplotypeColumns,
                  ld_block: np.ndarray) -> np.ndarray:
    """Alleles of one block: bool (bl, n_hap), A1 where z < ndtri(p) of the haplotype's
    frequency row (per LD block for admixed columns). zs: (bl, n_hap) latent values;
    freqs: (n_rows, bl); ld_block: (bl,) LD-block index of each SNP."""
    bl = len(zs)
    thresh = special.ndtri(freqs).astype(np.float32)    # (rows, bl)
    hap_block = np.empty((bl, cols.n_hap), dtype=bool)
    for a, b, row in cols.runs:
        np.less(zs[:, a:b], thresh[row][:, None], out=hap_block[:, a:b])
    if len(cols.adm_cols):
        thr = thresh[cols.adm_src[:, ld_block], np.arange(bl)]  # (adm haps, bl)
        hap_block[:, cols.adm_cols] = zs[:, cols.adm_cols] < thr.T
    return hap_block


def _add_genetic_values(genetic: dict, components: dict, v0: int, cohort_dosage: np.ndarray,
                        disc_dosage: np.ndarray) -> None:
    """In place: add each component's effect x dosage over its SNPs in the block starting
    at SNP ``v0`` to ``genetic`` (cohort then discovery). cohort_dosage: int8 (bl,
    n_samples); disc_dosage: int8 (bl, n_discovery)."""
    n_samples = cohort_dosage.shape[1]
    v1 = v0 + len(cohort_dosage)
    for name, (idx, beta) in components.items():
        sel = (idx >= v0) & (idx < v1)
        if sel.any():
            rows = idx[sel] - v0
            b = beta[sel]
            genetic[name][:n_samples] += b @ cohort_dosage[rows]
            genetic[name][n_samples:] += b @ disc_dosage[rows]
