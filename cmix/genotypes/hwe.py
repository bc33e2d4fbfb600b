"""The Hardy-Weinberg exact test as plink2 (2.00a3.5) computes it, and where it is taken.

- :func:`hwe_exact_p`: plink2's HweP (Wigginton, Cutler and Abecasis 2005), ported line
  by line, on genotype counts of founders (missing calls excluded).
- Where: pooled over the kept founders (plink2 ``--hwe``), among a subset only (controls:
  plink2 ``--keep controls.txt --hwe``), or within each of several groups (ancestries),
  a variant failing where it fails in any group: :func:`read_hwe_groups` reads the groups
  from a table, :func:`grouped_hwe_p` tests each. A pooled test across ancestries
  rejects HWE for ancestry-informative variants (fewer heterozygotes than the pooled
  frequency predicts: a Wahlund effect); :func:`structure_signal` tells that pattern
  from genotyping error, so a pooled run can say when within-group tests are the right
  ones.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from numba import njit, prange

from ..errors import CmixError
from ..text import first_line, input_file
from .kernels import K_SMALL_EPSILON, Counts, count_genotypes
from .samples import read_tidy_sample_qc

# plink2's constants (plink2_stats.cc): the probability scale of the observed table and
# the relative tolerance below which two tables count as equally likely.
K_EXACT_TEST_BIAS = 0.00000000000000000000000010339757656912845935892608650874535669572651386260986328125
_DBL_MAX = 1.7976931348623157e308


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


def het_excess(het, hom_a1, hom_a2) -> np.ndarray:
    """bool (n_variants,): more heterozygotes than expected under HWE given the allele
    counts (plink2's test of the keep-fewhet modifier: a variant without an excess is
    kept)."""
    het, hom_a1, hom_a2 = (np.asarray(a, np.int64) for a in (het, hom_a1, hom_a2))
    g2 = 2 * (het + hom_a1 + hom_a2)
    rare = 2 * np.minimum(hom_a1, hom_a2) + het
    return het * g2 > rare * (g2 - rare)


# ---------------------------------------------------------------- groups
@dataclass(frozen=True)
class HweGroups:
    """The samples the HWE test is taken over, as int indices into the .fam.

    groups: group name -> sorted sample indices (each group is tested on its own; a
    variant fails where its p is below the threshold in any group). source: where the
    groups came from, for logs ("FILE column COL", "FILE"): never a sample ID.
    """

    groups: dict
    source: str

    def restrict(self, sample_idx: np.ndarray) -> "HweGroups":
        """The groups cut to the samples in ``sample_idx`` (the samples kept after
        --keep/--remove and --mind); a group left empty is dropped."""
        kept = {name: np.intersect1d(idx, sample_idx) for name, idx in self.groups.items()}
        return HweGroups({n: i for n, i in kept.items() if len(i)}, self.source)


def read_hwe_groups(path, fam: pd.DataFrame, column: str | None = None,
                    keep: np.ndarray | None = None) -> HweGroups:
    """The HWE groups of ``fam``'s samples from a table with a header (tabs, commas or
    spaces) holding an ID column (eid, IID or #IID, matched to the .fam IID) and a group
    column: ``column``, or the table's one other column. A sample the table does not list,
    or lists with an empty or NA group, is not tested; ``keep`` (bool (n_samples,), e.g.
    the controls) restricts every group further. ``path`` None with ``keep``: one group,
    the kept samples. CmixError: no such column (naming the columns there are), no sample
    of the .fam listed."""
    if path is None:
        return HweGroups({"kept": np.flatnonzero(keep)}, "the --hwe-keep samples")
    path = input_file(path, "HWE groups table")
    table, id_col, _ = read_tidy_sample_qc(path, first_line(path, "HWE groups table"))
    others = [c for c in table.columns if c != id_col]
    if column is None:
        if len(others) != 1:
            raise CmixError(f"{path}: name the group column (--hwe-group-column); the table "
                            f"has {len(others)} besides {id_col}: {', '.join(others[:12])}")
        column = others[0]
    if column not in table.columns:
        raise CmixError(f"{path}: no column {column!r} for the HWE groups; the table has "
                        f"{', '.join(table.columns[:20])}")
    labels = pd.Series(table[column].to_numpy(), index=table[id_col].to_numpy())
    group = labels.reindex(fam["iid"].astype(str).to_numpy()).to_numpy(dtype=object)
    tested = pd.notna(group) & ~np.isin(group.astype(str), ["", "NA", "nan", "NaN"])
    if keep is not None:
        tested &= keep
    if not tested.any():
        raise CmixError(f"{path}: no sample of the .fam has a group in column {column!r}"
                        + (" among the --hwe-keep samples" if keep is not None else ""))
    names = sorted(set(group[tested].astype(str)))
    groups = {n: np.flatnonzero(tested & (group.astype(str) == n)) for n in names}
    return HweGroups(groups, f"{path} column {column}")


def grouped_hwe_p(bf, groups: HweGroups, variant_ok: np.ndarray, midp: bool = False, *,
                  threads: int | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The HWE test of each variant within each group: one counting pass over the
    genotypes per group, each p as plink2 ``--keep GROUP --hardy`` gives it (founders of
    the group, missing calls skipped). Returns (p float64 (n_groups, n_variants) in
    ``groups.groups`` order; excess bool (n_groups, n_variants), more heterozygotes than
    expected in that group (:func:`het_excess`); the name of the group with the smallest
    p, object (n_variants,)). Variants outside ``variant_ok`` get p 1."""
    n = len(variant_ok)
    p = np.ones((len(groups.groups), n), np.float64)
    excess = np.zeros((len(groups.groups), n), bool)
    for g, idx in enumerate(groups.groups.values()):
        counts = count_genotypes(bf, idx, variant_ok=variant_ok, threads=threads)
        p[g] = hwe_exact_p(counts.het, counts.hom_a1, counts.hom_a2, midp=midp)
        excess[g] = het_excess(counts.het, counts.hom_a1, counts.hom_a2)
    p[:, ~variant_ok] = 1.0
    names = np.array(list(groups.groups), dtype=object)
    return p, excess, names[np.argmin(p, axis=0)]


# ------------------------------------------------------------ structure
#: a pooled test whose failures are at least this share heterozygote-deficient (and at
#: least STRUCTURE_MIN_FAILURES of them) reads as pooled ancestries, not genotyping error
STRUCTURE_DEFICIT_SHARE = 0.8
STRUCTURE_MIN_FAILURES = 20


def structure_signal(counts: Counts, fail: np.ndarray) -> tuple[int, int]:
    """(HWE failures, of them with fewer heterozygotes than expected) among ``fail``
    (bool (n_variants,)). Genotyping errors fail HWE on either side; pooled ancestries
    fail it by a heterozygote deficit at the ancestry-informative variants."""
    deficit = ~het_excess(counts.het, counts.hom_a1, counts.hom_a2)
    return int(fail.sum()), int((fail & deficit).sum())


def structure_warning(n_fail: int, n_deficit: int, n_tested: int) -> str | None:
    """The warning a pooled HWE test earns when its failures look like pooled ancestries
    (:func:`structure_signal`), else None. Counts only."""
    if n_fail < STRUCTURE_MIN_FAILURES or n_deficit < STRUCTURE_DEFICIT_SHARE * n_fail:
        return None
    return (f"qc: warning: the pooled HWE test removed {n_fail} of {n_tested} variants, "
            f"{n_deficit} of them ({100 * n_deficit / n_fail:.0f}%) with fewer heterozygotes "
            "than expected: the sign of ancestries pooled in one test (a Wahlund effect), not "
            "of genotyping error. Test HWE within ancestry groups (cmix qc --hwe-groups; the "
            "workflow's variant_qc.hwe_groups), as plink2 users do with --keep per group")


def grouped_summary(groups: HweGroups, fail_within: np.ndarray,
                    fail_pooled: np.ndarray) -> list[str]:
    """Log lines (counts only) comparing the within-group test with a pooled one."""
    sizes = ", ".join(f"{name} {len(idx)}" for name, idx in groups.groups.items())
    lines = [f"qc: HWE within {len(groups.groups)} group(s) from {groups.source} "
             f"(samples: {sizes}): {int(fail_within.sum())} variants fail in at least one; "
             f"a pooled test of all kept samples would remove {int(fail_pooled.sum())}"]
    if fail_pooled.sum() >= STRUCTURE_MIN_FAILURES and fail_pooled.sum() > 2 * fail_within.sum():
        lines.append(f"qc: the pooled test would remove {int(fail_pooled.sum())} variants where "
                     f"the groups remove {int(fail_within.sum())}: most pooled failures are "
                     "differences between the groups, not genotyping error")
    return lines
