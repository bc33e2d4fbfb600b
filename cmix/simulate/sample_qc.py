"""The sample files of a simulated cohort: sample_qc.tsv (UK Biobank ukb_sqc_v2 columns,
ancestry PCs fitted the way UK Biobank fitted them), withdrawn.txt and kinship.dat."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from ..atomic import atomic_path
from ..genotypes.pca.fit import fit_and_project
from ..readers import plink
from .kinship import write_kinship_table


#: Ancestry PCs in a simulated sample_qc.tsv (UK Biobank's has 40).
SIMULATED_PCS = 10
WHITE_BRITISH_DROPOUT = 0.05   # self-reported British outside the genetic cluster (Bycroft 2018)


PCA_METHOD = ("fit on used.in.pca.calculation samples (unrelated, not het/missing outliers), "
              "SNPs with first-population MAF >= 5% LD-thinned to latent r2 <= 0.1 (at most "
              "2,000, evenly spaced), standardised; randomised subspace iteration; every "
              "sample projected")


def write_sample_files(rng, out: Path, eids: np.ndarray, spare_eid, sample_miss: np.ndarray,
                       pairs, white_british_population: np.ndarray,
                       pca_snps: np.ndarray) -> np.ndarray:
    """Write out/sample_qc.tsv (:func:`write_sample_qc`, PCs of out/genotypes fitted on
    ``pca_snps``), out/withdrawn.txt and out/kinship.dat (:func:`write_kinship_table`).

    Heterozygosity/missingness outliers: a random 0.2%, plus samples missing > 4% of calls
    (sample_miss: (n_samples,) rates); PCs are fitted on the others less the second of each
    related pair (pairs: (.fam row, .fam row, degree)). The withdrawals: max(2, n // 1000)
    random cohort eids plus ``spare_eid``, one not in the cohort (UKB lists also hold eids
    absent from a given dataset). Returns the PCA fit samples, bool (n_samples,).
    """
    het_missing = (rng.random(len(sample_miss)) < 0.002) | (sample_miss > 0.04)
    pca_fit = ~het_missing
    pca_fit[[b for _, b, _ in pairs]] = False        # one of each related pair
    pcs = ukb_pcs(out / "genotypes", pca_snps, np.flatnonzero(pca_fit))
    write_sample_qc(rng, out / "sample_qc.tsv", eids, het_missing, white_british_population,
                    pca_fit, pcs)
    withdrawn = list(rng.choice(eids, size=max(2, len(eids) // 1000), replace=False))
    withdrawn.append(str(spare_eid))
    with atomic_path(out / "withdrawn.txt") as tmp_path:
        tmp_path.write_text("".join(f"{e}\n" for e in withdrawn))
    write_kinship_table(out / "kinship.dat", out / "genotypes", eids, pairs)
    return pca_fit


def pca_variants(variants: pd.DataFrame, exclude: np.ndarray, min_maf: float = 0.05,
                 max_latent_r2: float = 0.1, max_snps: int = 2000) -> np.ndarray:
    """SNPs for ancestry PCs, chosen as UK Biobank chose them: common (first-population
    MAF >= ``min_maf``), not failing QC (``exclude``: planted HWE failures,
    high-missingness SNPs, trait loci) and LD-thinned: walking along each chromosome, a
    SNP is kept when its latent correlation with the last kept SNP (the product of the
    AR(1) ``rho`` between them) has square <= ``max_latent_r2`` (UKB pruned to r2 < 0.1);
    at most ``max_snps``, evenly spaced, are returned (sorted variant indices)."""
    p = variants.p_a1.to_numpy()
    ok = np.minimum(p, 1 - p) >= min_maf
    ok[np.asarray(exclude, dtype=int)] = False
    rho = variants.rho.to_numpy()
    keep, corr = [], 0.0
    for i in range(len(p)):
        corr *= rho[i]
        if ok[i] and corr * corr <= max_latent_r2:
            keep.append(i)
            corr = 1.0
    keep = np.array(keep, dtype=int)
    if len(keep) > max_snps:
        keep = keep[np.linspace(0, len(keep) - 1, max_snps).astype(int)]
    return keep


def ukb_pcs(bed_prefix, variant_idx: np.ndarray, fit_samples: np.ndarray,
            n_pcs: int = SIMULATED_PCS) -> np.ndarray:
    """Ancestry principal components of every sample, the way UK Biobank computed them.

    Fit on ``fit_samples`` (unrelated, QC-passing) over ``variant_idx`` with
    :func:`cmix.genotypes.pca.fit.fit_and_project` (genotypes standardised by the fit
    samples' allele frequencies, missing calls at the mean), every other sample projected
    onto the same SNP loadings. Returns float64 (n_samples, n_pcs): PC scores (Z v, the eigenvector
    times sqrt(m lambda)), zero columns beyond the available rank.
    """
    bf = plink.open_bfile(bed_prefix)
    out = np.zeros((bf.n_samples, n_pcs))
    variant_idx = np.asarray(variant_idx, dtype=np.int64)
    fit_samples = np.sort(np.asarray(fit_samples, dtype=np.int64))
    if len(variant_idx) < 2 or len(fit_samples) < 3:
        return out
    others = np.setdiff1d(np.arange(bf.n_samples), fit_samples)
    k = int(min(n_pcs, len(variant_idx), len(fit_samples) - 1))
    pca = fit_and_project(bf, variant_idx, fit_samples, others, k)
    scale = np.sqrt(pca.eigenvalues * len(variant_idx))
    out[fit_samples, :k] = pca.eigenvectors * scale
    out[others, :k] = pca.projected * scale
    return out


def write_sample_qc(rng, path: Path, eids: np.ndarray, het_missing: np.ndarray,
                    white_british_population: np.ndarray, pca_fit: np.ndarray,
                    pcs: np.ndarray) -> None:
    """UKB sample-QC flags, array, batch and PCs as a tidy table (ukb_sqc_v2 column names).

    het_missing, white_british_population, pca_fit: bool (n,); pcs: (n, k). The white
    British flag is 1 for members of a white-British population except a random
    WHITE_BRITISH_DROPOUT share (outside the genetic cluster); 0 for everyone else.
    genotyping.array is UKBL (UK BiLEVE) for a random 10% (UK Biobank: 50k of 488k),
    else UKBB; Batch is UKBiLEVEAX_b1.. or Batch_b001.. by array, about 500 people a
    batch, at random (no effect on genotypes or traits). Array and batch come from a
    generator spawned from ``rng``, so the draws of ``rng`` are as without them.
    """
    n = len(eids)
    white = white_british_population & (rng.random(n) >= WHITE_BRITISH_DROPOUT)
    side = rng.spawn(1)[0]
    bileve = side.random(n) < 0.10
    batch = np.empty(n, dtype=object)
    for is_l, name in ((True, "UKBiLEVEAX_b{}"), (False, "Batch_b{:03d}")):
        rows = np.flatnonzero(bileve == is_l)
        n_batches = max(1, round(len(rows) / 500))
        batch[rows] = [name.format(k + 1) for k in side.integers(0, n_batches, len(rows))]
    table = pd.DataFrame({
        "eid": eids,
        "genotyping.array": np.where(bileve, "UKBL", "UKBB"),
        "Batch": batch,
        "het.missing.outliers": het_missing.astype(int),
        "putative.sex.chromosome.aneuploidy": (rng.random(n) < 0.001).astype(int),
        "excess.relatives": (rng.random(n) < 0.0005).astype(int),
        "in.white.British.ancestry.subset": white.astype(int),
        "used.in.pca.calculation": pca_fit.astype(int),
    })
    for k in range(pcs.shape[1]):
        table[f"PC{k + 1}"] = [f"{v:.6g}" for v in pcs[:, k]]
    with atomic_path(path) as tmp:
        table.to_csv(tmp, sep="\t", index=False)
