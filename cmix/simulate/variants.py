"""The simulated SNPs: positions, rsIDs, alleles, a realistic allele-frequency spectrum and
LD blocks (:func:`simulate_variants`), and the traits' large loci placed on them."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..errors import CmixError
from .traits import RED_HAIR, TRAITS


# GRCh37 autosome lengths in Mb (rounded); 1 cM per Mb is assumed for crossovers.
CHROM_MB = np.array([249, 243, 198, 191, 181, 171, 159, 146, 141, 136, 135, 134, 115, 107,
                     102, 90, 81, 78, 59, 63, 48, 51])


def simulate_variants(rng: np.random.Generator, n_variants: int, n_chrom: int) -> pd.DataFrame:
    """The .bim table plus simulation columns.

    Returns a DataFrame (n_variants rows) with the .bim columns (chrom, variant_id, cm,
    pos, a1, a2) and p_a1 (population frequency of A1), rho (latent AR(1) correlation
    with the previous SNP, 0 at LD-block starts) and chrom_index (0-based).
    """
    lengths = CHROM_MB[:n_chrom].astype(float)
    counts = np.maximum(1, np.floor(n_variants * lengths / lengths.sum()).astype(int))
    counts[0] += n_variants - counts.sum()
    if counts[0] < 1:
        raise CmixError(f"--n-variants {n_variants} is too small for {n_chrom} chromosomes")
    chrom_index = np.repeat(np.arange(n_chrom), counts)
    pos = np.concatenate([np.sort(rng.choice(int(lengths[c] * 1e6), size=k, replace=False)) + 1
                          for c, k in enumerate(counts)])
    rs = rng.permutation(max(10 * n_variants, 1000))[:n_variants] + 10_000
    # alleles: transitions twice as common as transversions; A/T and C/G about 10%
    pairs = np.array(["AG", "GA", "CT", "TC", "AC", "CA", "GT", "TG", "AT", "TA", "CG", "GC"])
    weights = np.array([4, 4, 4, 4, 1, 1, 1, 1, 0.6, 0.6, 0.6, 0.6])
    allele_pair = pairs[rng.choice(len(pairs), size=n_variants, p=weights / weights.sum())]
    # MAF spectrum: 0.5 * Beta(0.3, 1) puts ~31% below 0.01; A1 is the minor allele 85% of the time
    maf = 0.5 * rng.beta(0.3, 1.0, size=n_variants)
    p_a1 = np.where(rng.random(n_variants) < 0.85, maf, 1 - maf)
    # LD blocks: geometric lengths (mean 25 SNPs), latent correlation 0.5-0.97 inside
    new_block = rng.random(n_variants) < 1 / 25
    new_block[np.r_[0, np.flatnonzero(np.diff(chrom_index)) + 1]] = True
    block_rho = rng.uniform(0.5, 0.97, size=n_variants)
    rho = np.where(new_block, 0.0, block_rho[np.cumsum(new_block) - 1])
    return pd.DataFrame({
        "chrom": (chrom_index + 1).astype(str), "variant_id": [f"rs{r}" for r in rs],
        "cm": pos / 1e6, "pos": pos.astype(np.int64),
        "a1": [a[0] for a in allele_pair], "a2": [a[1] for a in allele_pair],
        "p_a1": p_a1, "rho": rho, "chrom_index": chrom_index,
    })


def place_loci(rng, variants: pd.DataFrame, n_chrom: int) -> dict:
    """Put the traits' large loci and the MC1R trio on SNPs (in place on ``variants``).

    Each locus takes the free SNP nearest its GRCh37 position on its chromosome (a
    random free SNP when that chromosome is not simulated); the MC1R alleles take three
    adjacent SNPs. Their ``p_a1`` becomes the locus's first-population A1 frequency and
    their ``rho`` 0 (independent of the SNP before). Returns {"<trait>": [index, ...],
    "_red": [index, index, index]} in TRAITS / RED_HAIR order.
    """
    chrom_index = variants.chrom_index.to_numpy()
    pos = variants.pos.to_numpy()
    n = len(variants)
    taken = np.zeros(n, dtype=bool)

    def place(chrom, bp, k):
        if chrom <= n_chrom:
            cand = np.flatnonzero(chrom_index == chrom - 1)
            order = cand[np.argsort(np.abs(pos[cand] - bp), kind="stable")]
        else:
            order = rng.permutation(n)
        for i in order:
            if (i + k <= n and not taken[i:i + k].any()
                    and chrom_index[i + k - 1] == chrom_index[i]):
                taken[i:i + k] = True
                return list(range(i, i + k))
        raise CmixError(f"--n-variants {n} is too small to place the traits' large-effect loci")

    placed = {}
    p_a1, rho = variants.p_a1.to_numpy().copy(), variants.rho.to_numpy().copy()
    for name, spec in TRAITS.items():
        placed[name] = []
        for locus in spec["large_loci"]:
            (i,) = place(locus["chrom"], locus["pos"], 1)
            p_a1[i], rho[i] = locus["a1_freq"], 0.0
            placed[name].append(i)
    placed["_red"] = place(RED_HAIR["chrom"], RED_HAIR["pos"], len(RED_HAIR["alleles"]))
    for i, allele in zip(placed["_red"], RED_HAIR["alleles"]):
        p_a1[i], rho[i] = allele["a1_freq"], 0.0
    variants["p_a1"], variants["rho"] = p_a1, rho
    return placed
