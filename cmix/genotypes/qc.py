"""Variant QC as plink2 (2.00a3.5) does it: genotype counts, MAF, missingness, HWE.

One pass over the packed .bed bytes (:func:`cmix.genotypes.kernels.count_genotypes`)
counts, per variant, the genotypes of the kept founders (for --maf and --hwe) and the
missing calls of all kept samples (for --geno); with --mind it also counts each
sample's missing calls. The .bed is read in blocks of variants into two reusable
buffers (the next block is read while the current one is counted), so memory stays flat
in the number of variants. The counting kernel works on 64-bit words (32 samples each)
with three popcounts per word; a per-word bit mask selects the kept (founder) samples,
so --keep, --remove, founders and the padding of each variant's last byte are handled
by the same AND.

Filters, in plink2's order: sample filters (--keep/--remove) -> --mind -> --geno ->
--hwe -> --maf. Counts for --hwe/--maf are taken once, after --mind. Boundary rules
(each checked against plink2 by tests/test_qc.py):

- --geno t / --mind t: removed if missing_count > t * N (strict; N = kept samples for
  --geno, variants for --mind), with plink2's 2^-44 relative tolerance on t * N, so
  --geno 0.29 with N = 100 keeps 29 missing calls although 0.29 * 100 < 29 in floats.
- Founders: both parent columns "0" (a parent ID absent from the .fam still makes a
  non-founder; removing a parent does not make the child a founder), as plink2.
- --maf t: removed if min(f_A2, 1 - f_A2) < t over non-missing founder calls
  (exactly t is kept). A variant with no non-missing founder call is kept (plink2).
  From a .pgen that holds dosages, f comes from the founders' dosages, as plink2
  takes it (one more pass over the file); --geno and --hwe count its hard calls.
- --hwe t: removed if the exact test p (plink2's HweP, including its tie tolerance
  between tables of equal probability) < t. ``midp`` subtracts half the probability of
  the observed table(s); ``keep-fewhet`` keeps variants whose heterozygote count is
  below its expectation.

Genotype counts use .bim column 5 (A1; plink2's ALT) and column 6 (A2; plink2's REF):
``hom_a1`` = two copies of A1.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from numba import njit, prange

from ..errors import CmixError
from .kernels import K_SMALL_EPSILON, Counts, count_genotypes, founder_flags
from .selection import chrom_mask, chrom_text, is_autosome

if TYPE_CHECKING:
    from .sources import GenotypeFiles

# plink2's constants (plink2_stats.cc): the probability scale of the observed table and
# the relative tolerance below which two tables count as equally likely.
K_EXACT_TEST_BIAS = 0.00000000000000000000000010339757656912845935892608650874535669572651386260986328125
_DBL_MAX = 1.7976931348623157e308


# ---------------------------------------------------------------- HWE exact test
@njit(cache=True, nogil=True)
def _hwe_p_one(obs_hets, obs_hom1, obs_hom2, midp):
    """plink2's HweP(): exact HWE p-value for one variant (a line-by-line port).

    Not split: it follows plink2_stats.cc's HweP statement by statement, so that it can
    be diffed against plink2's source; named steps would hide that correspondence."""
    if obs_hom1 < obs_hom2:
        obs_homc = obs_hom2
        obs_homr = obs_hom1
    else:
        obs_homc = obs_hom1
        obs_homr = obs_hom2
    rare_copies = 2 * obs_homr + obs_hets
    genotypes2 = (obs_hets + obs_homc + obs_homr) * 2
    if genotypes2 == 0:
        return 0.5 if midp else 1.0
    tie_ct = 1
    curr_hets_t2 = float(obs_hets)
    curr_homr_t2 = float(obs_homr)
    curr_homc_t2 = float(obs_homc)
    tailp = (1 - K_SMALL_EPSILON) * K_EXACT_TEST_BIAS
    centerp = 0.0
    lastp2 = tailp
    lastp1 = tailp
    if obs_hets * genotypes2 > rare_copies * (genotypes2 - rare_copies):
        # tail 1 = upper
        while curr_hets_t2 > 1.5:
            curr_homr_t2 += 1
            curr_homc_t2 += 1
            lastp2 *= (curr_hets_t2 * (curr_hets_t2 - 1)) / (4 * curr_homr_t2 * curr_homc_t2)
            curr_hets_t2 -= 2
            if lastp2 < K_EXACT_TEST_BIAS:
                if lastp2 > (1 - 2 * K_SMALL_EPSILON) * K_EXACT_TEST_BIAS:
                    tie_ct += 1
                tailp += lastp2
                break
            centerp += lastp2
            if centerp > _DBL_MAX:
                return 0.0
        if centerp == 0 and not midp:
            return 1.0
        while curr_hets_t2 > 1.5:
            curr_homr_t2 += 1
            curr_homc_t2 += 1
            lastp2 *= (curr_hets_t2 * (curr_hets_t2 - 1)) / (4 * curr_homr_t2 * curr_homc_t2)
            curr_hets_t2 -= 2
            preaddp = tailp
            tailp += lastp2
            if tailp <= preaddp:
                break
        curr_hets_t1 = float(obs_hets + 2)
        curr_homr_t1 = float(obs_homr)
        curr_homc_t1 = float(obs_homc)
        while curr_homr_t1 > 0.5:
            lastp1 *= (4 * curr_homr_t1 * curr_homc_t1) / (curr_hets_t1 * (curr_hets_t1 - 1))
            preaddp = tailp
            tailp += lastp1
            if tailp <= preaddp:
                break
            curr_hets_t1 += 2
            curr_homr_t1 -= 1
            curr_homc_t1 -= 1
    else:
        # tail 1 = lower
        while curr_homr_t2 > 0.5:
            curr_hets_t2 += 2
            lastp2 *= (4 * curr_homr_t2 * curr_homc_t2) / (curr_hets_t2 * (curr_hets_t2 - 1))
            curr_homr_t2 -= 1
            curr_homc_t2 -= 1
            if lastp2 < K_EXACT_TEST_BIAS:
                if lastp2 > (1 - 2 * K_SMALL_EPSILON) * K_EXACT_TEST_BIAS:
                    tie_ct += 1
                tailp += lastp2
                break
            centerp += lastp2
            if centerp > _DBL_MAX:
                return 0.0
        if centerp == 0 and not midp:
            return 1.0
        while curr_homr_t2 > 0.5:
            curr_hets_t2 += 2
            lastp2 *= (4 * curr_homr_t2 * curr_homc_t2) / (curr_hets_t2 * (curr_hets_t2 - 1))
            curr_homr_t2 -= 1
            curr_homc_t2 -= 1
            preaddp = tailp
            tailp += lastp2
            if tailp <= preaddp:
                break
        curr_hets_t1 = float(obs_hets)
        curr_homr_t1 = float(obs_homr)
        curr_homc_t1 = float(obs_homc)
        while curr_hets_t1 > 1.5:
            curr_homr_t1 += 1
            curr_homc_t1 += 1
            lastp1 *= (curr_hets_t1 * (curr_hets_t1 - 1)) / (4 * curr_homr_t1 * curr_homc_t1)
            preaddp = tailp
            tailp += lastp1
            if tailp <= preaddp:
                break
            curr_hets_t1 -= 2
    if not midp:
        return tailp / (tailp + centerp)
    return (tailp - ((1 - K_SMALL_EPSILON) * K_EXACT_TEST_BIAS * 0.5) * tie_ct) / (tailp + centerp)


@njit(parallel=True, cache=True, nogil=True)
def _hwe_p_many(het, hom1, hom2, midp, out):
    for i in prange(het.shape[0]):
        out[i] = _hwe_p_one(np.int64(het[i]), np.int64(hom1[i]), np.int64(hom2[i]), midp)


def hwe_exact_p(het, hom_a1, hom_a2, midp: bool = False) -> np.ndarray:
    """Exact Hardy-Weinberg p-values (Wigginton et al. 2005), exactly as plink2 --hardy.

    het, hom_a1, hom_a2: integer arrays (n_variants,) of genotype counts (founders,
    missing calls excluded). Returns float64 (n_variants,). Each variant walks out
    from the observed table only while terms still change the sums (plink2's HweP),
    so the cost per variant is about the distribution's width (~sqrt(n)), not n.
    Runs in parallel over variants on numba's threads.
    """
    het = np.ascontiguousarray(het, dtype=np.int64)
    hom_a1 = np.ascontiguousarray(hom_a1, dtype=np.int64)
    hom_a2 = np.ascontiguousarray(hom_a2, dtype=np.int64)
    out = np.empty(het.shape[0], np.float64)
    if het.shape[0]:
        _hwe_p_many(het, hom_a1, hom_a2, bool(midp), out)
    return out


def _subtract_samples(bf, counts: Counts, removed_idx: np.ndarray) -> None:
    """Remove the contribution of samples ``removed_idx`` from ``counts`` (in place)."""
    from .plink import variant_blocks

    if len(removed_idx) == 0:
        return
    founders = founder_flags(bf.fam)[removed_idx]
    block = max(1, (64 << 20) // max(len(removed_idx), 1))
    for s, e in variant_blocks(bf.n_variants, block):
        g = bf.read(np.arange(s, e), removed_idx)  # (v, k) A1 counts, -1 missing
        gf = g[:, founders]
        counts.hom_a1[s:e] -= (gf == 2).sum(axis=1)
        counts.het[s:e] -= (gf == 1).sum(axis=1)
        counts.hom_a2[s:e] -= (gf == 0).sum(axis=1)
        counts.missing_founders[s:e] -= (gf == -1).sum(axis=1)
        counts.missing[s:e] -= (g == -1).sum(axis=1)
    counts.n_samples -= len(removed_idx)
    counts.n_founders -= int(founders.sum())


# ---------------------------------------------------------------- filters
def a2_frequency(counts: Counts) -> np.ndarray:
    """float64 (n_variants,): frequency of A2 (plink2's REF) among non-missing founder
    calls; NaN where there is none."""
    obs = 2 * (counts.hom_a1 + counts.het + counts.hom_a2)
    with np.errstate(invalid="ignore", divide="ignore"):
        return (2 * counts.hom_a2 + counts.het) / obs


def minor_allele_frequency(counts: Counts) -> np.ndarray:
    """float64 (n_variants,): minor allele count / non-missing founder allele count, as
    plink2 --maf (the ratio of counts, so 10 of 1,000 is exactly 0.01); NaN if no calls."""
    a2 = 2 * counts.hom_a2 + counts.het
    a1 = 2 * counts.hom_a1 + counts.het
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.minimum(a1, a2) / (a1 + a2)


def _dosage_maf(bf, sample_idx: np.ndarray, maf_v: np.ndarray) -> np.ndarray:
    """For a .pgen (or a set of them) whose header allows dosages: the minor allele
    frequency over the kept founders' dosages, as plink2 takes it for --maf and --freq
    (min(ALT, REF dosage sum) / their total; a hard call counts as a whole dosage, so
    variants of hard calls get the count ratio). Otherwise ``maf_v`` as it is."""
    from .sources import may_hold_dosages

    if not may_hold_dosages(bf):
        return maf_v
    parts, offsets = (bf.parts, bf.offsets) if hasattr(bf, "parts") else ([bf], [0])
    founders = sample_idx[founder_flags(bf.fam)[sample_idx]]
    out = maf_v.copy()
    for part, off in zip(parts, offsets):
        alt, n_obs = part.dosage_sums(founders)
        ref = 2 * n_obs - alt
        with np.errstate(invalid="ignore", divide="ignore"):
            out[off:off + part.n_variants] = np.minimum(alt, ref) / (alt + ref)
    return out


def missing_exceeds(missing: np.ndarray, threshold: float, total: int) -> np.ndarray:
    """plink2's --geno/--mind rule: True where missing > threshold * total.

    The product gets plink2's relative tolerance (2^-44), so 0.29 x 100 =
    28.999999999999996 in floating point still allows 29 missing calls, as plink2 does.
    """
    return np.asarray(missing) > threshold * total * (1 + K_SMALL_EPSILON)


@dataclass
class QcResult:
    """What :func:`run_qc` decided.

    table: one row per variant (.bim order) with columns variant_id, a1, a2 (.bim
    columns 5 and 6), hom_a1, het, hom_a2 (kept founders' genotype counts), missing,
    n_kept (all kept samples), missing_rate, maf (from dosages for a .pgen holding
    them), hwe_p, status
    ("PASS" or the first failing filter: geno, hwe, maf). sample_idx: int indices into
    the .fam of the samples the counts used (after --mind). mind_removed: int indices of
    samples --mind removed. summary: filter -> count, in application order.
    """

    table: "object"
    sample_idx: np.ndarray
    mind_removed: np.ndarray
    summary: dict = field(default_factory=dict)

    @property
    def passed(self) -> np.ndarray:
        return (self.table["status"] == "PASS").to_numpy()


def check_autosomes(bim, path) -> None:
    """Raise unless every variant is on an autosome (chrX/Y/XY/MT follow other rules)."""
    chrom = bim["chrom"]
    bad = ~is_autosome(chrom)
    if bad.any():
        first = int(np.flatnonzero(bad)[0])
        line = int(chrom.index[first]) + 1          # .bim row, also for a subset of rows
        raise CmixError(
            f"{path}, line {line}: {int(bad.sum())} variants are not on autosomes 1-22 "
            f"(first: chromosome {chrom.iloc[first]!r}); plink2 applies sex-specific "
            "rules to chrX/Y/MT that cmix qc does not implement. Add --autosome to drop "
            "them (as plink2 --autosome does)")


@dataclass(frozen=True)
class QcFilters:
    """The variant and sample filters of a QC run, as plink2's flags (None = filter off).

    maf: --maf, least minor allele frequency (a fraction). hwe: --hwe, least exact-test
    p-value; hwe_midp / hwe_keep_fewhet: its ``midp`` and ``keep-fewhet`` modifiers.
    geno: --geno, most missing-call rate of a variant (a fraction of kept samples).
    mind: --mind, most missing-call rate of a sample (a fraction of variants).
    autosome_only: --autosome, drop variants outside chromosomes 1-22 (otherwise they
    are an error).
    """

    maf: float | None = None
    hwe: float | None = None
    hwe_midp: bool = False
    hwe_keep_fewhet: bool = False
    geno: float | None = None
    mind: float | None = None
    autosome_only: bool = False


def run_qc(bf, sample_idx=None, filters: QcFilters = QcFilters(), *,
           chroms: list[str] | None = None, threads: int | None = None,
           block_bytes: int = 32 << 20) -> QcResult:
    """Variant QC in plink2's order: sample filters -> --mind -> --geno -> --hwe -> --maf.

    bf: opened Bfile; sample_idx: kept samples (sorted int indices, None = all).
    filters: the thresholds (:class:`QcFilters`). ``chroms``: only these chromosomes
    (a --chroms spec, :func:`cmix.genotypes.selection.parse_chroms`; "1" also selects a
    .bim's "chr1" or "01"); the table then holds only their variants. Every filter but
    --mind is per variant, so per-chromosome runs concatenated in .bim order equal one
    whole run; --mind counts all variants and is refused with ``chroms``.
    Returns a :class:`QcResult`.
    """
    from ..logs import log

    selected, variant_ok = _variants_considered(bf, filters, chroms)
    if sample_idx is None:
        sample_idx = np.arange(bf.n_samples)
    sample_idx = np.unique(np.asarray(sample_idx, np.int64))
    counts = count_genotypes(bf, sample_idx, sample_missing=filters.mind is not None,
                             variant_ok=variant_ok, threads=threads, block_bytes=block_bytes)
    summary = {"variants": int(variant_ok.sum()), "samples": len(sample_idx)}
    sample_idx, mind_removed = _apply_mind(bf, counts, sample_idx, variant_ok, filters.mind,
                                           summary)
    maf_v = _dosage_maf(bf, sample_idx, minor_allele_frequency(counts))
    hwe_p = hwe_exact_p(counts.het, counts.hom_a1, counts.hom_a2, midp=filters.hwe_midp)
    status = _variant_status(counts, variant_ok, maf_v, hwe_p, filters, summary)
    table = _qc_table(bf.bim, counts, maf_v, hwe_p, status)
    if chroms is not None:
        table = table[selected].reset_index(drop=True)
    for k, v in summary.items():
        log(f"qc: {k}: {v}")
    return QcResult(table=table, sample_idx=sample_idx, mind_removed=mind_removed,
                    summary=summary)


def _variants_considered(bf, filters: QcFilters,
                         chroms: list[str] | None) -> tuple[np.ndarray, np.ndarray]:
    """(selected, variant_ok), bool (n_variants,) each: the variants on ``chroms`` (all
    when None), and those of them the filters look at (with --autosome, only autosomal
    ones). Raises CmixError for --mind with ``chroms``, no variant on ``chroms``, or
    (without --autosome) a selected variant off the autosomes."""
    bim = bf.bim
    selected = np.ones(bf.n_variants, bool)
    if chroms is not None:
        if filters.mind is not None:
            raise CmixError("--mind counts each sample's missing calls over all variants: "
                            "it cannot be combined with --chroms")
        selected = chrom_mask(bim["chrom"], chroms)
        if not selected.any():
            raise CmixError(f"{bf.prefix}.bim: no variant on chromosome(s) "
                            f"{chrom_text(chroms)}")
    variant_ok = selected.copy()
    if filters.autosome_only:
        variant_ok &= is_autosome(bim["chrom"])
    else:
        check_autosomes(bim[selected], bf.prefix.with_name(bf.prefix.name + ".bim"))
    return selected, variant_ok


def _apply_mind(bf, counts: Counts, sample_idx: np.ndarray, variant_ok: np.ndarray,
                mind: float | None, summary: dict) -> tuple[np.ndarray, np.ndarray]:
    """--mind: drop the samples missing more than ``mind`` of the ``variant_ok`` calls and
    take their calls out of ``counts`` (in place); record the count in ``summary``.
    Returns (kept sample_idx, removed sample indices), int64. Raises CmixError when no
    sample is left."""
    mind_removed = np.zeros(0, np.int64)
    if mind is None:
        return sample_idx, mind_removed
    n_var = int(variant_ok.sum())
    bad = missing_exceeds(counts.sample_missing[sample_idx], mind, n_var)
    mind_removed = sample_idx[bad]
    sample_idx = sample_idx[~bad]
    summary["removed by --mind (samples)"] = len(mind_removed)
    if len(sample_idx) == 0:
        raise CmixError(f"--mind {mind}: all {len(mind_removed)} samples removed")
    _subtract_samples(bf, counts, mind_removed)
    return sample_idx, mind_removed


def _variant_status(counts: Counts, variant_ok: np.ndarray, maf_v: np.ndarray,
                    hwe_p: np.ndarray, filters: QcFilters, summary: dict) -> np.ndarray:
    """Object array (n_variants,): "PASS", "non-autosomal" or the first failing filter
    (geno, hwe, maf, applied in that order); each filter's count goes into ``summary``,
    then the number passing. maf_v, hwe_p: float64 (n_variants,)."""
    status = np.where(variant_ok, "PASS", "non-autosomal").astype(object)
    if filters.geno is not None:
        fail = (variant_ok & (status == "PASS")
                & missing_exceeds(counts.missing, filters.geno, counts.n_samples))
        status[fail] = "geno"
        summary["removed by --geno"] = int(fail.sum())
    if filters.hwe is not None:
        fail = hwe_p < filters.hwe
        if filters.hwe_keep_fewhet:
            g2 = 2 * (counts.het + counts.hom_a1 + counts.hom_a2)
            rare = 2 * np.minimum(counts.hom_a1, counts.hom_a2) + counts.het
            fail &= counts.het * g2 > rare * (g2 - rare)
        fail &= status == "PASS"
        status[fail] = "hwe"
        summary["removed by --hwe"] = int(fail.sum())
    if filters.maf is not None:
        fail = (status == "PASS") & (maf_v < filters.maf)  # NaN (no calls) is kept, as in plink2
        status[fail] = "maf"
        summary["removed by --maf"] = int(fail.sum())
    summary["variants passing"] = int((status == "PASS").sum())
    return status


def _qc_table(bim, counts: Counts, maf_v: np.ndarray, hwe_p: np.ndarray, status: np.ndarray):
    """The :class:`QcResult` table, one row per variant of ``bim`` (see there); the
    missing rate is missing / kept samples (NaN with none kept)."""
    import pandas as pd

    n_kept = counts.n_samples
    with np.errstate(invalid="ignore", divide="ignore"):
        missing_rate = counts.missing / n_kept if n_kept else np.full(len(bim), np.nan)
    return pd.DataFrame({
        "variant_id": bim["variant_id"].to_numpy(), "a1": bim["a1"].to_numpy(),
        "a2": bim["a2"].to_numpy(), "hom_a1": counts.hom_a1, "het": counts.het,
        "hom_a2": counts.hom_a2, "missing": counts.missing, "n_kept": n_kept,
        "missing_rate": missing_rate, "maf": maf_v, "hwe_p": hwe_p, "status": status,
    })


def _write_tsv(table, path, chunk: int = 20_000) -> None:
    """Tab-separated, floats as shortest round-trip repr, NaN as NA; formatted in row
    chunks so memory does not grow with the variant count (and several times faster
    than DataFrame.to_csv, which dominated the run time at 200k variants)."""
    arrays = [table[name].to_numpy() for name in table.columns]
    with open(path, "w") as fh:
        fh.write("\t".join(table.columns) + "\n")
        for start in range(0, len(table), chunk):
            cols = []
            for values in arrays:
                values = values[start:start + chunk]
                if values.dtype.kind == "f":
                    text = list(map(float.__repr__, values.tolist()))
                    for i in np.flatnonzero(np.isnan(values)).tolist():
                        text[i] = "NA"
                elif values.dtype.kind in "iub":
                    text = list(map(str, values.tolist()))
                else:
                    text = values.tolist()
                cols.append(text)
            fh.write("\n".join(map("\t".join, zip(*cols))))
            fh.write("\n")


def write_qc_outputs(result: QcResult, fam, out_prefix) -> list[Path]:
    """Write O.snplist, O.vqc.tsv and (when --mind removed samples) O.mindrem.id,
    all or none. Returns the paths written."""
    from ..atomic import atomic_outputs
    from .plink import write_sample_ids

    out_prefix = Path(out_prefix)
    snplist = out_prefix.with_name(out_prefix.name + ".snplist")
    vqc = out_prefix.with_name(out_prefix.name + ".vqc.tsv")
    paths = [snplist, vqc]
    mindrem = out_prefix.with_name(out_prefix.name + ".mindrem.id")
    if len(result.mind_removed):
        paths.append(mindrem)
    with atomic_outputs(*paths) as tmps:
        ids = result.table["variant_id"].to_numpy()[result.passed]
        with open(tmps[0], "w") as fh:
            fh.write("".join(f"{v}\n" for v in ids))
        _write_tsv(result.table, tmps[1])
        if len(result.mind_removed):
            write_sample_ids(tmps[2], fam, result.mind_removed)
    if not len(result.mind_removed) and mindrem.exists():
        mindrem.unlink()  # a stale file from an earlier run would mislead
    return paths


def run_qc_cli(genotypes: GenotypeFiles, out_prefix, filters: QcFilters, *, keep=None,
               remove=None, threads=None) -> QcResult:
    """What ``cmix qc`` does: open and validate, apply --keep/--remove, run the filters,
    write the outputs.

    IDs in --keep/--remove that are not in the .fam are counted and reported (plink2
    ignores them too); a --keep file matching no sample is an error. ``genotypes``' bfile
    or pfile may be a ``{chrom}`` pattern (:func:`cmix.genotypes.sources.open_source`,
    shared ``fam``); with its ``chroms`` only those chromosomes' files are opened.
    """
    from ..logs import log
    from .selection import sample_rows

    bf = genotypes.open()
    sample_idx, _ = sample_rows(bf.fam, keep, remove, step="qc")
    result = run_qc(bf, sample_idx, filters, chroms=genotypes.chroms, threads=threads)
    paths = write_qc_outputs(result, bf.fam, out_prefix)
    log("qc: wrote " + ", ".join(str(p) for p in paths))
    return result
