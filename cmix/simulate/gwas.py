"""The discovery GWAS behind a simulated cohort's summary statistics: per-SNP regression
in a separate discovery cohort, written in the BOLT-LMM layout (sumstats/<trait>.txt.gz)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import special

from ..atomic import atomic_path
from ..errors import CmixError
from ..readers import plink
from ..text import write_gzip
from .traits import TRAITS


SUMSTATS_COLUMNS = ["SNP", "CHR", "BP", "ALLELE1", "ALLELE0", "A1FREQ", "INFO", "BETA", "SE",
                    "P_BOLT_LMM_INF", "P_BOLT_LMM"]


#: The smallest discovery cohort: the summary statistics' P-values are the normal
#: approximation of each SNP's regression t statistic (n - 2 degrees of freedom), which
#: with a handful of people makes chance effects look genome-wide significant.
MIN_DISCOVERY = 50


def check_discovery_size(n_discovery: int) -> None:
    """CmixError unless the discovery cohort has at least :data:`MIN_DISCOVERY` people,
    enough for the normal-approximation P-values of its per-SNP regressions."""
    if n_discovery < MIN_DISCOVERY:
        raise CmixError(f"--n-discovery must be at least {MIN_DISCOVERY}, got {n_discovery}: "
                        "the summary statistics' P-values are the normal approximation of "
                        "each SNP's regression t statistic, which with fewer people makes "
                        "chance effects look significant")


def discovery_sumstats(rng, out: Path, variants: pd.DataFrame, disc_path: Path,
                       n_discovery: int, disc_y: np.ndarray, block_size: int) -> None:
    """Regress each trait (disc_y: (n_discovery, n_traits), TRAITS order) on the discovery
    dosages packed in ``disc_path`` (removed afterwards) and write out/sumstats/<trait>.txt.gz
    (:func:`sumstats_table`)."""
    disc_packed = np.memmap(disc_path, dtype=np.uint8, mode="r",
                            shape=(len(variants), (n_discovery + 3) // 4))
    beta, se, freq = discovery_regression(disc_packed, n_discovery, disc_y, block_size)
    del disc_packed
    disc_path.unlink()
    write_sumstats(rng, out, variants, beta, se, freq)


def write_sumstats(rng, out: Path, variants: pd.DataFrame, beta: np.ndarray, se: np.ndarray,
                   freq: np.ndarray) -> None:
    """out/sumstats/TRAIT.txt.gz for each of :data:`TRAITS` (:func:`sumstats_table` of
    column k of beta and se (n_variants, n_traits)), each written atomically."""
    (out / "sumstats").mkdir(exist_ok=True)
    for k, t in enumerate(TRAITS):
        ss_table = sumstats_table(rng, variants, beta[:, k], se[:, k], freq)
        with atomic_path(out / "sumstats" / f"{t}.txt.gz") as tmp_path:
            write_gzip(tmp_path, ss_table.to_csv(sep="\t", index=False).encode())


def format_p(log10_p: np.ndarray) -> list[str]:
    """p-values from log10 p as BOLT-LMM prints them: two significant digits, e.g.
    ``3.1E-01`` or ``1.2E-400`` (no underflow, since the text comes from log10)."""
    out = []
    for lp in np.asarray(log10_p, dtype=float):
        if lp >= 0:
            out.append("1.0E+00")
            continue
        e = math.floor(lp)
        m = round(10 ** (lp - e), 1)
        if m >= 10:
            m, e = 1.0, e + 1
        out.append(f"{m:.1f}E{e:+03d}")
    return out


def discovery_regression(packed: np.ndarray, n_discovery: int, y: np.ndarray,
                         block_size: int = 512):
    """Per-SNP least squares of each column of ``y`` on the discovery dosages.

    packed: uint8 (n_variants, ceil(n_discovery / 4)) .bed rows of the discovery cohort.
    y: (n_discovery, n_traits). Returns beta, se (n_variants, n_traits) per copy of A1,
    and the A1 frequency (n_variants,); monomorphic SNPs get NaN.
    """
    y = y - y.mean(axis=0)
    n = len(y)
    yy = (y * y).sum(axis=0)
    beta, se, freq = [], [], []
    for v0, v1 in plink.variant_blocks(packed.shape[0], block_size):
        x = plink.decode(packed[v0:v1], n_samples=n_discovery).astype(np.float64)
        xm = x.mean(axis=1, keepdims=True)
        xc = x - xm
        sxx = (xc * xc).sum(axis=1)[:, None]
        sxy = xc @ y
        with np.errstate(divide="ignore", invalid="ignore"):
            b = sxy / sxx
            beta.append(b)
            se.append(np.sqrt((yy - b * sxy) / (n - 2) / sxx))
        freq.append(xm[:, 0] / 2)
    return np.concatenate(beta), np.concatenate(se), np.concatenate(freq)


def sumstats_table(rng, variants: pd.DataFrame, beta: np.ndarray, se: np.ndarray,
                   freq: np.ndarray) -> pd.DataFrame:
    """The BOLT-LMM table from per-A1 effects (n_variants,): ~5% of SNPs absent (and all
    monomorphic ones), ~30% with ALLELE1 = .bim A2 and BETA, A1FREQ flipped to match."""
    keep = (freq > 0) & (freq < 1) & (rng.random(len(beta)) >= 0.05)
    t = np.abs(beta / se)
    log10_p = (special.log_ndtr(-t) + math.log(2)) / math.log(10)
    swap = rng.random(len(beta)) < 0.3
    table = pd.DataFrame({
        "SNP": variants.variant_id, "CHR": variants.chrom, "BP": variants.pos,
        "ALLELE1": np.where(swap, variants.a2, variants.a1),
        "ALLELE0": np.where(swap, variants.a1, variants.a2),
        "A1FREQ": np.round(np.where(swap, 1 - freq, freq), 6),
        "INFO": np.round(rng.uniform(0.9, 1.0, size=len(beta)), 3),
        "BETA": np.where(swap, -beta, beta), "SE": se,
    })
    table["BETA"] = table["BETA"].map(lambda v: f"{v:.6g}")
    table["SE"] = table["SE"].map(lambda v: f"{v:.6g}")
    p_text = np.array(format_p(np.where(np.isfinite(log10_p), log10_p, 0.0)), dtype=object)
    table["P_BOLT_LMM_INF"] = p_text
    table["P_BOLT_LMM"] = p_text
    return table[keep].reset_index(drop=True)
