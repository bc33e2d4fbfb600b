"""The ``cmix pca`` step (:func:`run_pca`): variant choice, fit, projection, outputs.

Three steps, each checked against plink2 by tests/test_pca.py:

1. Variant choice. Autosomal variants (optionally only those of a QC ``.snplist``),
   minus long-range LD regions (:mod:`cmix.genotypes.pca.regions`), LD-pruned exactly
   as plink2 ``--indep-pairwise`` on the fitted samples (:mod:`cmix.genotypes.pca.prune`).
2. PCA of the fitted samples (the unrelated set) and 3. projection of every other
   sample asked for (:mod:`cmix.genotypes.pca.fit`).

The outputs are plink2's layouts (:mod:`cmix.genotypes.pca.outputs`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ...errors import CmixError
from ...logs import log
from ...readers.chroms import chrom_mask, is_autosome
from ..kernels import set_numba_threads
from ..selection import extract_mask, sample_rows
from .fit import fit_and_project
from .outputs import write_pca_outputs
from .prune import PruneSettings, ld_prune
from .regions import HIGH_LD_REGIONS, in_regions, read_regions

if TYPE_CHECKING:
    from ...readers.sources import GenotypeFiles


def check_n_pcs(n_pcs: int, n_fit: int, what: str = "fitted samples") -> None:
    """CmixError unless 1 <= n_pcs <= n_fit - 1 (n centred samples span n - 1
    dimensions); ``what`` describes n_fit in the message."""
    if n_pcs < 1:
        raise CmixError(f"--pcs: expected a positive number of PCs, got {n_pcs}")
    if n_pcs > n_fit - 1:
        raise CmixError(f"--pcs {n_pcs}: {n_fit} {what} give at most "
                        f"{max(n_fit - 1, 0)} PCs (n centred samples span n - 1 dimensions)")


@dataclass(frozen=True)
class PcaVariants:
    """The variants a PCA may use, among the autosomal ones on --chroms. extract:
    candidate variant IDs (a .snplist path; None = all). regions: a file of long-range LD
    regions to drop (chrom start end [label]; None = none). prune: --indep-pairwise
    settings, applied on the fitted samples (None = no pruning)."""

    extract: object = None
    regions: object = HIGH_LD_REGIONS
    prune: PruneSettings | None = None


@dataclass(frozen=True)
class PcaSettings:
    """How the PCs are fitted: n_pcs PCs, ``seed`` of the randomized start, ``threads``
    numba and BLAS threads (None = all cores), ``block_bytes`` bytes of genotypes read
    per block of variants."""

    n_pcs: int = 10
    seed: int = 0
    threads: int | None = None
    block_bytes: int = 64 << 20


def run_pca(genotypes: GenotypeFiles, out_prefix, *, keep=None, project=None,
            variants: PcaVariants = PcaVariants(),
            settings: PcaSettings = PcaSettings()) -> dict:
    """What ``cmix pca`` does; returns a summary (counts, no sample IDs).

    genotypes: as every step takes them (:func:`cmix.readers.sources.open_source`): a
    .bed or .pgen prefix, or a ``{chrom}`` pattern of per-chromosome files read as if
    merged; its chroms: only these chromosomes (a --chroms spec,
    :func:`cmix.readers.chroms.parse_chroms`). keep: samples to
    fit on (plink --keep list, e.g. the unrelated set; None = all). project: more
    samples (list) to project onto the fitted axes. variants: the candidate variants
    (:class:`PcaVariants`); settings: the fit (:class:`PcaSettings`).
    """
    n_pcs, chroms = settings.n_pcs, genotypes.chroms
    extract, regions, prune = variants.extract, variants.regions, variants.prune
    if n_pcs < 1:
        raise CmixError(f"--pcs: expected a positive number of PCs, got {n_pcs}")
    if out_prefix is None:
        raise CmixError("cmix pca needs --out")
    bf = genotypes.open()
    fit_idx = (sample_rows(bf.fam, keep, step="pca")[0] if keep
               else np.arange(bf.n_samples))
    other_idx = np.zeros(0, np.int64)
    if project:
        other_idx = np.setdiff1d(sample_rows(bf.fam, project, step="pca",
                                             keep_flag="--project")[0], fit_idx)
    n_fit = len(fit_idx)
    check_n_pcs(n_pcs, n_fit)

    bim = bf.bim
    candidate = is_autosome(bim["chrom"])
    steps = {"variants in the genotypes": bf.n_variants, "autosomal": int(candidate.sum())}
    on_chroms = chrom_mask(bim["chrom"], chroms)
    if not on_chroms.all():
        candidate &= on_chroms
        steps["on --chroms"] = int(candidate.sum())
    if extract:
        candidate &= extract_mask(bim["variant_id"], extract, f"{bf.prefix}.bim",
                                  excluded=bf.excluded)[0]
        steps["in --extract"] = int(candidate.sum())
    if regions is not None:
        candidate &= ~in_regions(bim, read_regions(regions))
        steps["outside long-range LD regions"] = int(candidate.sum())
    variant_idx = np.flatnonzero(candidate)
    n_threads = set_numba_threads(settings.threads)
    prune_ids = None
    if prune is not None and len(variant_idx):
        kept = ld_prune(bf, variant_idx, fit_idx, prune, threads=n_threads)
        ids = bim["variant_id"].to_numpy()
        prune_ids = (ids[variant_idx[kept]], ids[variant_idx[~kept]])
        variant_idx = variant_idx[kept]
        steps[f"kept by --indep-pairwise {prune}"] = len(variant_idx)
    counts = "; ".join(f"{k}: {v}" for k, v in steps.items())
    if len(variant_idx) == 0:
        raise CmixError(f"no variants left for the PCA ({counts})")
    if len(variant_idx) < n_pcs:
        raise CmixError(f"--pcs {n_pcs}: only {len(variant_idx)} variants are left for "
                        f"the PCA ({counts}); ask for fewer PCs or keep more variants")
    pca = fit_and_project(bf, variant_idx, fit_idx, other_idx, n_pcs, seed=settings.seed,
                          threads=n_threads, block_bytes=settings.block_bytes)
    all_idx = np.concatenate([fit_idx, other_idx])
    order = np.argsort(all_idx, kind="stable")
    write_pca_outputs(out_prefix, fam=bf.fam, sample_rows=all_idx[order],
                      scores=np.vstack([pca.eigenvectors, pca.projected])[order], pca=pca,
                      bim=bim.iloc[variant_idx[pca.used]], prune=prune_ids)
    steps["varying among the fitted founders (m)"] = pca.n_variants
    summary = {**steps, "fitted samples": n_fit, "projected samples": len(other_idx),
               "PCs": n_pcs, "passes over the .bed": pca.n_passes + 1,
               "eigenvalues": [round(float(v), 4) for v in pca.eigenvalues]}
    for key, value in summary.items():
        log(f"pca: {key}: {value}")
    return summary
