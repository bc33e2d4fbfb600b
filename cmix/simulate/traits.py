"""The four traits of the paper and the covariates: published architectures
(:data:`TRAITS`, :data:`RED_HAIR`), sex and age, each trait's liability from its genetic
components, and its UK Biobank coding in phenotypes.tsv."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd


# Each trait's liability (SD units) = large loci + polygenic background (together h2 of
# the liability variance in the first population, net of covariates) + covariate effects
# (per male, per year of age above 55, region) + N(0, 1 - h2). Large loci: A1 is the
# effect allele, "var" the liability variance it explains in the first population
# (2 p (1 - p) beta^2, so beta = sign * sqrt(var / (2 p (1 - p)))); they sit on the SNP
# nearest the named gene's GRCh37 position when that chromosome is simulated.
# - Mean platelet volume and mean sphered cell volume: SNP h2 ~0.3-0.4 with several loci
#   of 1-3% variance each (Astle et al. 2016 Cell, Fig. 2 and Table S3; Vuckovic et al.
#   2020 Cell); sex and age differences are why both papers adjust for them.
# - Smoking status: SNP h2 ~0.08 for smoking initiation, highly polygenic with no locus
#   of large effect (Liu et al. 2019 Nat Genet, GSCAN); more men and older people ever
#   smoked (UK Biobank: ~51% of men and ~40% of women ever smoked).
# - Hair colour: a darkness liability from HERC2/OCA2, SLC45A2, IRF4, TYR-like large loci
#   plus a polygenic background (Morgan et al. 2018 Nat Commun; Hysi et al. 2018 Nat
#   Genet: >100 loci, most SNP h2 explained; HERC2 rs12913832 the largest). Light alleles
#   are common in Europeans and rare elsewhere ("non_european_factor" scales their A1
#   frequency outside Europe). Red hair: see RED_HAIR.
TRAITS = {
    "mean_platelet_volume": {
        "field": 30100, "kind": "continuous", "h2": 0.35, "n_causal": 300,
        "mean": 9.3, "sd": 1.1, "decimals": 2, "male": -0.10, "age": 0.0,
        "large_loci": [
            {"locus": "ARHGEF3", "chrom": 3, "pos": 56_850_000, "a1_freq": 0.42, "var": 0.025, "sign": 1},
            {"locus": "TPM4", "chrom": 19, "pos": 16_180_000, "a1_freq": 0.20, "var": 0.02, "sign": -1},
            {"locus": "JMJD1C", "chrom": 10, "pos": 65_000_000, "a1_freq": 0.35, "var": 0.015, "sign": 1},
            {"locus": "GP1BA", "chrom": 17, "pos": 4_836_000, "a1_freq": 0.12, "var": 0.01, "sign": 1},
        ]},
    "mean_sphered_cell_volume": {
        "field": 30270, "kind": "continuous", "h2": 0.3, "n_causal": 300,
        "mean": 82.0, "sd": 5.5, "decimals": 2, "male": -0.15, "age": 0.015,
        "large_loci": [
            {"locus": "HBS1L-MYB", "chrom": 6, "pos": 135_420_000, "a1_freq": 0.26, "var": 0.025, "sign": 1},
            {"locus": "TMPRSS6", "chrom": 22, "pos": 37_462_000, "a1_freq": 0.44, "var": 0.02, "sign": -1},
            {"locus": "HFE", "chrom": 6, "pos": 26_093_000, "a1_freq": 0.07, "var": 0.015, "sign": 1},
            {"locus": "CCND3", "chrom": 6, "pos": 41_925_000, "a1_freq": 0.25, "var": 0.01, "sign": 1},
        ]},
    "smoking_status": {
        "field": 20116, "kind": "categorical", "h2": 0.08, "n_causal": 400,
        "male": 0.25, "age": 0.01, "large_loci": [],
        # liability quantiles in the first population -> 0 never, 1 previous, 2 current
        # (UK Biobank: 55% never, 34% previous, 10% current)
        "codes": [0, 1, 2], "shares": [0.55, 0.34, 0.11], "special": {-3: 0.01}},
    "hair_colour": {
        "field": 1747, "kind": "categorical", "h2": 0.6, "n_causal": 200,
        "male": 0.1, "age": 0.0,
        # darkness (A1 = light allele, so sign -1) -> 1 blonde, 3 light brown,
        # 4 dark brown, 5 black, as quantiles of the first population's non-red people
        # (UK Biobank: 12% blonde, 43% light brown, 39% dark brown, 6% black of non-red)
        "large_loci": [
            {"locus": "HERC2", "chrom": 15, "pos": 28_365_618, "a1_freq": 0.78, "var": 0.12, "sign": -1,
             "non_european_factor": 0.1},
            {"locus": "SLC45A2", "chrom": 5, "pos": 33_951_693, "a1_freq": 0.95, "var": 0.04, "sign": -1,
             "non_european_factor": 0.1},
            {"locus": "IRF4", "chrom": 6, "pos": 396_321, "a1_freq": 0.17, "var": 0.05, "sign": -1,
             "non_european_factor": 0.1},
            {"locus": "OCA2", "chrom": 15, "pos": 28_230_318, "a1_freq": 0.07, "var": 0.02, "sign": -1,
             "non_european_factor": 0.1},
            {"locus": "TYR", "chrom": 11, "pos": 89_017_961, "a1_freq": 0.35, "var": 0.02, "sign": -1,
             "non_european_factor": 0.1},
        ],
        "codes": [1, 3, 4, 5], "shares": [0.12, 0.43, 0.39, 0.06],
        "other_share": 0.007, "special": {-1: 0.005, -3: 0.005}},
}
# Red hair: recessive-acting MC1R "R" alleles (R151C rs1805007, R160W rs1805008, D294H
# rs1805009) at their British frequencies (gnomAD non-Finnish Europeans ~0.08, 0.07, 0.02),
# on three adjacent SNPs near MC1R (chr16) in linkage equilibrium with one another. Red
# when carrying two R alleles (homozygous or compound heterozygous) with penetrance 0.85,
# rarely otherwise: ~4% red in the British, as in UK Biobank (Morgan et al. 2018 Nat
# Commun: ~4.5% red; most red-haired people carry two R alleles; Hysi et al. 2018).
# R alleles are near absent outside Europe (factor 0.05 on their frequency).
RED_HAIR = {"locus": "MC1R", "chrom": 16, "pos": 89_986_000,
            "alleles": [{"name": "R151C", "a1_freq": 0.09}, {"name": "R160W", "a1_freq": 0.07},
                        {"name": "D294H", "a1_freq": 0.02}],
            "penetrance": {"0": 0.002, "1": 0.01, "2+": 0.85}, "non_european_factor": 0.05}
AGE_RANGE = (40, 70)   # UK Biobank recruited people aged 40-69 (field 21022, years)
AGE_CENTRE = 55.0
MISSING_SHARE = 0.02          # blank phenotype values per trait


def simulate_covariates(rng, sex: pd.Series, n_discovery: int):
    """Sex and age of the cohort then the discovery cohort: male bool (n_samples +
    n_discovery,) (cohort: .fam sex "1"; discovery: a coin flip) and age at recruitment in
    whole years in :data:`AGE_RANGE` (40 + 30 Beta(1.3, 1), floored)."""
    n_total = len(sex) + n_discovery
    male = np.r_[(sex == "1").to_numpy(), rng.random(n_discovery) < 0.5]
    age = np.floor(AGE_RANGE[0] + (AGE_RANGE[1] - AGE_RANGE[0])
                   * rng.beta(1.3, 1.0, size=n_total)).astype(int)
    return male, age


def add_covariate_columns(pheno: pd.DataFrame, eids, male: np.ndarray, age: np.ndarray,
                          population_code) -> None:
    """In place: eid first, then f.31.0.0 sex (1 male), f.21022.0.0 age and f.21000.0.0
    ethnic background (``population_code``, (n_samples,)) after the traits. male and age
    may be longer than the cohort (discovery people after it)."""
    n_samples = len(pheno)
    pheno.insert(0, "eid", eids)
    pheno["f.31.0.0"] = male[:n_samples].astype(int)
    pheno["f.21022.0.0"] = age[:n_samples]
    pheno["f.21000.0.0"] = population_code


def causal_truth(components: dict, trait_truth: dict, vid: np.ndarray, red_idx) -> dict:
    """{trait: {"variant_ids", "betas_a1"}}: every causal SNP in .bim order with its final
    per-A1 effect (polygenic effects times the trait's ``polygenic_scale``). Also sets, in
    place, each trait's ``large_loci`` (with variant_id and beta_a1) and hair colour's
    ``red_hair`` (with the MC1R variant_ids) in ``trait_truth``."""
    truth = {}
    for t in TRAITS:
        idx, beta = components[t]
        lidx, lbeta = components[t + "/large"]
        all_idx = np.r_[lidx, idx]
        all_beta = np.r_[lbeta, beta * trait_truth[t]["polygenic_scale"]]
        order = np.argsort(all_idx, kind="stable")                  # .bim order
        truth[t] = {"variant_ids": vid[all_idx[order]].tolist(),
                    "betas_a1": all_beta[order].tolist()}
        trait_truth[t]["large_loci"] = [
            {**lc, "variant_id": vid[i], "beta_a1": float(b)}
            for lc, i, b in zip(TRAITS[t]["large_loci"], lidx, lbeta)]
    trait_truth["hair_colour"]["red_hair"] = {**RED_HAIR, "variant_ids": vid[red_idx].tolist()}
    return truth


def simulate_phenotypes(rng, genetic: dict, components: dict, n_samples: int, male, age,
                        reference, smoking_shift):
    """UKB-coded trait values for the cohort, liabilities for cohort + discovery.

    genetic: component -> genetic value (n_samples + n_discovery,) with components
    "<trait>" (polygenic, raw effects), "<trait>/large" (large loci, final effects) and
    "_red" (MC1R R-allele count). male, age, reference (member of the first population),
    smoking_shift: per person, cohort then discovery. The polygenic part is rescaled so
    that it explains h2 minus the large loci's share of liability variance in the first
    population. Returns (DataFrame of the cohort's coded values with columns
    f.<field>.0.0, {trait: the discovery GWAS phenotype (n_samples + n_discovery,): the
    liability, or for hair colour its code 1-5 as a number}, {trait: parameters and
    realised variances}).
    """
    n_total = len(male)
    table, liabilities, truth = {}, {}, {}
    ref = np.asarray(reference, dtype=bool)
    for name, spec in TRAITS.items():
        h2_large = sum(lc["var"] for lc in spec["large_loci"])
        poly = genetic[name]
        sd = poly[ref].std() if ref.sum() > 1 else poly.std()
        scale = math.sqrt(max(spec["h2"] - h2_large, 0.0)) / sd if sd > 0 else 0.0
        g = genetic[name + "/large"] + scale * poly
        g = g - (g[ref].mean() if ref.any() else g.mean())
        cov = spec["male"] * male + spec["age"] * (age - AGE_CENTRE)
        if name == "smoking_status":
            cov = cov + smoking_shift
        liab = g + cov + rng.normal(scale=math.sqrt(1 - spec["h2"]), size=n_total)
        liabilities[name] = liab
        truth[name] = {k: v for k, v in spec.items() if k != "large_loci"}
        truth[name].update({
            "polygenic_scale": scale, "h2_large_loci": h2_large,
            "realised_genetic_variance_first_population": float(g[ref].var()) if ref.any() else None,
            "liability": "genetic + male * sex + age * (age - 55) + region smoking_shift "
                         "(smoking only) + N(0, 1 - h2)"})
        if spec["kind"] == "continuous":
            values = np.round(spec["mean"] + spec["sd"] * liab[:n_samples], spec["decimals"])
        else:
            coded = _categorical_codes(rng, name, spec, liab, ref, genetic["_red"])
            if name == "hair_colour":
                # the discovery GWAS of hair colour regresses on the code as a number
                # (1 blonde, 2 red, 3 light brown, 4 dark brown, 5 black), as a naive GWAS
                # of field 1747 would: darkness loci and MC1R both show up
                liabilities[name] = coded
                truth[name]["gwas_phenotype"] = "hair colour code (1-5) as a number"
            values = _cohort_codes(rng, name, spec, coded[:n_samples].copy())
        values[rng.random(n_samples) < MISSING_SHARE] = np.nan
        table[f"f.{spec['field']}.0.0"] = values
    df = pd.DataFrame(table)
    for name, spec in TRAITS.items():
        col = f"f.{spec['field']}.0.0"
        if spec["kind"] == "categorical":
            df[col] = df[col].astype("Int64")
    return df, liabilities, truth


def _categorical_codes(rng, name: str, spec: dict, liab: np.ndarray, ref: np.ndarray,
                       red_count: np.ndarray) -> np.ndarray:
    """A categorical trait's codes (float, like liab (n_total,)): liability quantiles of
    the reference people (``ref``, bool; everyone when none) cut at the spec's shares
    into its codes; for hair colour, red (2) overrides darkness with the penetrance of
    the person's MC1R R-allele count (``red_count``, (n_total,))."""
    cut_ref = liab[ref] if ref.any() else liab
    cuts = np.quantile(cut_ref, np.cumsum(spec["shares"])[:-1])
    coded = np.asarray(spec["codes"], dtype=float)[np.searchsorted(cuts, liab)]
    if name == "hair_colour":
        r_count = np.rint(red_count).astype(int)
        pen = RED_HAIR["penetrance"]
        p_red = np.select([r_count >= 2, r_count == 1], [pen["2+"], pen["1"]], pen["0"])
        coded[rng.random(len(liab)) < p_red] = 2
    return coded


def _cohort_codes(rng, name: str, spec: dict, values: np.ndarray) -> np.ndarray:
    """In place and returned: the cohort's codes (n_samples,) with hair colour's "other"
    (6) and the spec's special answers (e.g. -3 prefer not to answer) at their shares."""
    n_samples = len(values)
    if name == "hair_colour":
        values[rng.random(n_samples) < spec["other_share"]] = 6
    for code, share in spec["special"].items():
        values[rng.random(n_samples) < share] = code
    return values
