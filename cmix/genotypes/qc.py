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

from ..atomic import atomic_outputs
from ..errors import CmixError
from ..logs import log
from ..readers.chroms import chrom_mask, chrom_text, is_autosome
from ..readers.plink import variant_blocks, write_sample_ids
from ..readers.sources import may_hold_dosages
from .hwe import (HweGroups, grouped_hwe_p, grouped_summary, het_excess, hwe_exact_p,
                  read_hwe_groups, structure_signal, structure_warning)
from .kernels import K_SMALL_EPSILON, Counts, count_genotypes, founder_flags
from .selection import sample_rows


if TYPE_CHECKING:
    from ..readers.sources import GenotypeFiles

def _subtract_samples(bf, counts: Counts, removed_idx: np.ndarray) -> None:
    """Remove the contribution of samples ``removed_idx`` from ``counts`` (in place)."""
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
    them), hwe_p (with HWE groups the smallest within a group, and two more columns,
    hwe_group and hwe_p_pooled), status
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
           chroms: list[str] | None = None, hwe_groups: HweGroups | None = None,
           threads: int | None = None, block_bytes: int = 32 << 20) -> QcResult:
    """Variant QC in plink2's order: sample filters -> --mind -> --geno -> --hwe -> --maf.

    bf: opened Bfile; sample_idx: kept samples (sorted int indices, None = all).
    filters: the thresholds (:class:`QcFilters`). ``chroms``: only these chromosomes
    (a --chroms spec, :func:`cmix.readers.chroms.parse_chroms`; "1" also selects a
    .bim's "chr1" or "01"); the table then holds only their variants. Every filter but
    --mind is per variant, so per-chromosome runs concatenated in .bim order equal one
    whole run; --mind counts all variants and is refused with ``chroms``.
    ``hwe_groups``: take the HWE test within each group (cut to the kept samples) instead
    of pooled (:mod:`cmix.genotypes.hwe`); MAF and missingness stay pooled.
    Returns a :class:`QcResult`.
    """
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
    hwe = _hwe_tests(bf, counts, variant_ok, filters,
                     None if hwe_groups is None else hwe_groups.restrict(sample_idx), threads)
    status = _variant_status(counts, variant_ok, maf_v, hwe["fail"], filters, summary)
    table = _qc_table(bf.bim, counts, maf_v, hwe, status)
    if chroms is not None:
        table = table[selected].reset_index(drop=True)
    for k, v in summary.items():
        log(f"qc: {k}: {v}")
    for line in hwe["notes"]:
        log(line)
    return QcResult(table=table, sample_idx=sample_idx, mind_removed=mind_removed,
                    summary=summary)


def _hwe_tests(bf, counts: Counts, variant_ok: np.ndarray, filters: QcFilters,
               groups: HweGroups | None, threads: int | None) -> dict:
    """The HWE test of every variant: {"p": float64 (n_variants,), the p the filter reads
    (pooled, or the smallest within a group); "fail": bool (n_variants,), below
    ``filters.hwe`` (keep-fewhet exempting a variant with fewer heterozygotes than
    expected, within the failing group); "group": the group of that p (None when
    pooled); "pooled": the pooled p; "notes": log lines (counts only)}. Without groups
    a pooled test whose failures look like pooled ancestries earns a warning."""
    pooled = hwe_exact_p(counts.het, counts.hom_a1, counts.hom_a2, midp=filters.hwe_midp)
    threshold = -np.inf if filters.hwe is None else filters.hwe
    exempt = filters.hwe_keep_fewhet & ~het_excess(counts.het, counts.hom_a1, counts.hom_a2)
    fail_pooled = variant_ok & (pooled < threshold) & ~exempt
    if groups is None:
        notes = []
        if filters.hwe is not None:
            warning = structure_warning(*structure_signal(counts, fail_pooled),
                                        int(variant_ok.sum()))
            notes = [warning] if warning else []
        return {"p": pooled, "fail": fail_pooled, "group": None, "pooled": pooled,
                "notes": notes}
    if not groups.groups:
        raise CmixError(f"HWE groups ({groups.source}): none of their samples is among the "
                        "samples QC keeps")
    p, excess, group = grouped_hwe_p(bf, groups, variant_ok, filters.hwe_midp, threads=threads)
    fail = variant_ok & ((p < threshold) & (excess | (not filters.hwe_keep_fewhet))).any(axis=0)
    notes = grouped_summary(groups, fail, fail_pooled) if filters.hwe is not None else []
    return {"p": p.min(axis=0), "fail": fail, "group": group, "pooled": pooled,
            "notes": notes}


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
                    hwe_fail: np.ndarray, filters: QcFilters, summary: dict) -> np.ndarray:
    """Object array (n_variants,): "PASS", "non-autosomal" or the first failing filter
    (geno, hwe, maf, applied in that order); each filter's count goes into ``summary``,
    then the number passing. maf_v: float64 (n_variants,); hwe_fail: bool (n_variants,),
    the HWE test's verdict (:func:`_hwe_tests`)."""
    status = np.where(variant_ok, "PASS", "non-autosomal").astype(object)
    if filters.geno is not None:
        fail = (variant_ok & (status == "PASS")
                & missing_exceeds(counts.missing, filters.geno, counts.n_samples))
        status[fail] = "geno"
        summary["removed by --geno"] = int(fail.sum())
    if filters.hwe is not None:
        fail = hwe_fail & (status == "PASS")
        status[fail] = "hwe"
        summary["removed by --hwe"] = int(fail.sum())
    if filters.maf is not None:
        fail = (status == "PASS") & (maf_v < filters.maf)  # NaN (no calls) is kept, as in plink2
        status[fail] = "maf"
        summary["removed by --maf"] = int(fail.sum())
    summary["variants passing"] = int((status == "PASS").sum())
    return status


def _qc_table(bim, counts: Counts, maf_v: np.ndarray, hwe: dict, status: np.ndarray):
    """The :class:`QcResult` table, one row per variant of ``bim`` (see there); the
    missing rate is missing / kept samples (NaN with none kept). With HWE groups, two
    more columns: ``hwe_group`` (the group whose p is ``hwe_p``, the smallest) and
    ``hwe_p_pooled`` (the test over all kept founders)."""
    import pandas as pd  # pandas: ~0.3 s; off the path of `cmix --help`

    n_kept = counts.n_samples
    with np.errstate(invalid="ignore", divide="ignore"):
        missing_rate = counts.missing / n_kept if n_kept else np.full(len(bim), np.nan)
    columns = {
        "variant_id": bim["variant_id"].to_numpy(), "a1": bim["a1"].to_numpy(),
        "a2": bim["a2"].to_numpy(), "hom_a1": counts.hom_a1, "het": counts.het,
        "hom_a2": counts.hom_a2, "missing": counts.missing, "n_kept": n_kept,
        "missing_rate": missing_rate, "maf": maf_v, "hwe_p": hwe["p"],
    }
    if hwe["group"] is not None:
        columns.update(hwe_group=hwe["group"], hwe_p_pooled=hwe["pooled"])
    return pd.DataFrame({**columns, "status": status})


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


@dataclass(frozen=True)
class HweSamples:
    """Where ``cmix qc`` takes the HWE test (all None: pooled over the kept founders).

    groups: a table with an ID column and a group column (:func:`read_hwe_groups`);
    group_column: that column's name (None: the table's one other column); keep: an ID
    list (plink --keep form), the only samples tested (e.g. the controls).
    """
    groups: str | None = None
    group_column: str | None = None
    keep: str | None = None

    def read(self, fam) -> HweGroups | None:
        """The :class:`~cmix.genotypes.hwe.HweGroups` of ``fam``'s samples, or None."""
        if self.groups is None and self.keep is None:
            if self.group_column is not None:
                raise CmixError("--hwe-group-column names a column of --hwe-groups, which "
                                "is not given")
            return None
        keep = None
        if self.keep is not None:
            keep = np.zeros(len(fam), bool)
            keep[sample_rows(fam, self.keep, None, step="qc --hwe-keep")[0]] = True
        return read_hwe_groups(self.groups, fam, self.group_column, keep)


def run_qc_cli(genotypes: GenotypeFiles, out_prefix, filters: QcFilters, *, keep=None,
               remove=None, hwe_samples: HweSamples = HweSamples(), threads=None) -> QcResult:
    """What ``cmix qc`` does: open and validate, apply --keep/--remove, run the filters,
    write the outputs.

    IDs in --keep/--remove that are not in the .fam are counted and reported (plink2
    ignores them too); a --keep file matching no sample is an error. ``genotypes``' bfile
    or pfile may be a ``{chrom}`` pattern (:func:`cmix.readers.sources.open_source`,
    shared ``fam``); with its ``chroms`` only those chromosomes' files are opened.
    ``hwe_samples``: where the HWE test is taken (:class:`HweSamples`).
    """
    bf = genotypes.open()
    sample_idx, _ = sample_rows(bf.fam, keep, remove, step="qc")
    groups = hwe_samples.read(bf.fam)
    if groups is not None and filters.hwe is None:
        raise CmixError("--hwe-groups and --hwe-keep say where the HWE test is taken; "
                        "give --hwe too")
    result = run_qc(bf, sample_idx, filters, chroms=genotypes.chroms, hwe_groups=groups,
                    threads=threads)
    paths = write_qc_outputs(result, bf.fam, out_prefix)
    log("qc: wrote " + ", ".join(str(p) for p in paths))
    return result
