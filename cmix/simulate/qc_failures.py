"""What the QC steps must catch in a Balding-Nichols cohort: planted Hardy-Weinberg
failures (within-person allele copying) and missing calls, and the QC part of
truth.json."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd


def missingness_rates(rng, n_samples: int, n_variants: int):
    """Per-sample (n_samples,) and per-variant (n_variants,) missing-call rates: sporadic
    (exponential, mean 0.3%), plus one sample in 500 at 5-20% and one variant in 100 at
    5-30% (targets for --mind and --geno), and the indices of those bad samples and variants. Draws
    from ``rng`` in a fixed order."""
    sample_miss = rng.exponential(0.003, size=n_samples)
    bad = rng.choice(n_samples, size=max(1, n_samples // 500), replace=False)
    sample_miss[bad] = rng.uniform(0.05, 0.2, size=len(bad))
    variant_miss = rng.exponential(0.003, size=n_variants)
    bad_v = rng.choice(n_variants, size=max(1, n_variants // 100), replace=False)
    variant_miss[bad_v] = rng.uniform(0.05, 0.3, size=len(bad_v))
    return sample_miss, variant_miss, bad, bad_v


def plant_hwe(rng, variants: pd.DataFrame, loci: dict, n_founder_cohort: int):
    """Pick the SNPs with planted Hardy-Weinberg failures among common (MAF >= 0.1) non-locus
    SNPs, max(4, n_variants // 500) of them: alternately strong (copy probability 0.3) and
    borderline (N F^2 ~ the chi2 at p = 1e-7 over ``n_founder_cohort`` founders).

    Returns (hwe_idx sorted (n_hwe,), hwe_f (n_variants,) copy probability per SNP,
    not_locus bool (n_variants,): False on the traits' large loci and MC1R SNPs).
    """
    n_variants = len(variants)
    not_locus = np.ones(n_variants, dtype=bool)
    not_locus[[i for v in loci.values() for i in v]] = False
    common = np.flatnonzero((np.minimum(variants.p_a1, 1 - variants.p_a1) >= 0.1) & not_locus)
    n_hwe = min(len(common), max(4, n_variants // 500))
    hwe_idx = np.sort(rng.choice(common, size=n_hwe, replace=False))
    f_borderline = math.sqrt(28.4 / max(n_founder_cohort, 1))   # N F^2 ~ chi2 at p = 1e-7
    hwe_f = np.zeros(n_variants)
    hwe_f[hwe_idx] = np.where(np.arange(n_hwe) % 2 == 0, 0.3, f_borderline)
    return hwe_idx, hwe_f, not_locus


def plant_het_deficit(rng, hap0: np.ndarray, hap1: np.ndarray, hwe_f: np.ndarray) -> None:
    """In place: at SNPs with hwe_f > 0, copy each person's allele 0 onto allele 1 with
    probability hwe_f. hap0, hap1: bool (bl, n_people); hwe_f: (bl,)."""
    for j in np.flatnonzero(hwe_f > 0):
        copy = rng.random(hap0.shape[1]) < hwe_f[j]
        hap1[j, copy] = hap0[j, copy]


def with_missing_calls(rng, dosage: np.ndarray, variant_miss: np.ndarray,
                       sample_miss: np.ndarray) -> np.ndarray:
    """dosage int8 (bl, n_samples) with calls set to -1 at rate 1 - (1 - variant rate)
    (1 - sample rate)."""
    miss_p = 1 - np.outer(1 - variant_miss, 1 - sample_miss)
    return np.where(rng.random(dosage.shape, dtype=np.float32) < miss_p, np.int8(-1), dosage)


def qc_truth(fam_eid: np.ndarray, vid: np.ndarray, pairs, hwe_idx: np.ndarray,
             bad_samples: np.ndarray, bad_variants: np.ndarray) -> dict:
    """truth.json's "related_pairs" ([eid, eid, degree]), "hwe_planted" (strong: even
    positions of ``hwe_idx``, borderline: odd), "high_missing_samples" and
    "high_missing_variants" (.bim order)."""
    return {
        "related_pairs": [[fam_eid[a], fam_eid[b], d] for a, b, d in pairs],
        "hwe_planted": {
            "strong": vid[hwe_idx[0::2]].tolist(),
            "borderline": vid[hwe_idx[1::2]].tolist(),
        },
        "high_missing_samples": fam_eid[bad_samples].tolist(),
        "high_missing_variants": vid[np.sort(bad_variants)].tolist(),
    }
