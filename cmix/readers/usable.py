"""The variants of a genotype file that cmix can select, and those it leaves out.

Left out: a multiallelic site (a .pvar ALT or a .bim allele naming several alleles with
commas, a BGEN variant of more than two alleles) and every biallelic variant whose ID
another biallelic variant of the file (or of its per-chromosome set) carries too. They
are not in the source's ``bim``, so no step reads them: QC, PCA and KING run on the
rest, as plink2 does on the same file with ``--max-alleles 2 --rm-dup exclude-all``. The source lists
them in ``excluded`` (columns :data:`EXCLUDED_COLUMNS`); a selection that names one, by
ID or by chromosome and position, is refused by :func:`refuse_excluded`, naming it and
the plink2 command that makes it usable.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..errors import CmixError
from .chroms import chrom_codes

MULTIALLELIC = "multiallelic"
DUPLICATE_ID = "duplicate ID"
#: a left-out variant: its chromosome, ID, position, alleles as the file gives them
#: (REF/ALT), why (MULTIALLELIC or DUPLICATE_ID), where in which file (for messages:
#: "path, line 12"), and the plink2 input flags that read the file ("--pfile PREFIX")
EXCLUDED_COLUMNS = ["chrom", "variant_id", "pos", "alleles", "reason", "where", "plink2_input"]


def no_exclusions() -> pd.DataFrame:
    """An empty ``excluded`` table."""
    return pd.DataFrame({c: pd.Series(dtype=np.int64 if c == "pos" else object)
                         for c in EXCLUDED_COLUMNS})


def find_excluded(bim: pd.DataFrame, multiallelic: np.ndarray, where_of,
                  plink2_input: str) -> tuple[np.ndarray, pd.DataFrame]:
    """(keep, excluded) for a variant table ``bim`` (.bim columns) in file order.

    multiallelic: bool (n,), the rows of multiallelic sites; where_of: a function of
    int64 row numbers (0-based) giving each row's place for messages ("x.pvar, line
    12"); plink2_input: the plink2 flags that read the file. keep: bool (n,), False for
    a multiallelic row and for every biallelic row whose ID another biallelic row
    carries too (plink2 applies --max-alleles 2 before --rm-dup); excluded: those rows
    (:data:`EXCLUDED_COLUMNS`).
    """
    multiallelic = np.asarray(multiallelic, bool)
    duplicate = np.zeros(len(bim), bool)      # among the biallelic rows, as plink2
    duplicate[~multiallelic] = bim["variant_id"][~multiallelic].duplicated(keep=False)
    keep = ~(multiallelic | duplicate)
    return keep, excluded_rows(bim, ~keep, multiallelic, where_of, plink2_input)


def excluded_rows(bim: pd.DataFrame, out: np.ndarray, multiallelic: np.ndarray, where_of,
                  plink2_input: str) -> pd.DataFrame:
    """The ``excluded`` table (:data:`EXCLUDED_COLUMNS`) of the rows ``out`` (bool (n,))
    of ``bim``: multiallelic where ``multiallelic`` (bool (n,)), else a duplicate ID;
    ``where_of`` and ``plink2_input`` as :func:`find_excluded` takes them."""
    if not out.any():
        return no_exclusions()
    rows = bim[out]
    return pd.DataFrame({
        "chrom": rows["chrom"].astype(str).to_numpy(),
        "variant_id": rows["variant_id"].astype(str).to_numpy(),
        "pos": rows["pos"].to_numpy(np.int64),
        "alleles": (rows["a2"].astype(str) + "/" + rows["a1"].astype(str)).to_numpy(),
        "reason": np.where(np.asarray(multiallelic, bool)[out], MULTIALLELIC,
                           DUPLICATE_ID).astype(object),
        "where": np.asarray(where_of(np.flatnonzero(out)), dtype=object),
        "plink2_input": plink2_input,
    })[EXCLUDED_COLUMNS]


def duplicates_across(bims: list[pd.DataFrame]) -> list[np.ndarray]:
    """For the variant tables of a per-chromosome set's files: bool (n_part,) per file,
    True for each row whose ID a row of another file (or of the same one) carries."""
    ids = pd.concat([b["variant_id"] for b in bims], ignore_index=True)
    dup = ids.duplicated(keep=False).to_numpy()
    ends = np.cumsum([len(b) for b in bims])
    return np.split(dup, ends[:-1])


def summary(excluded: pd.DataFrame, n_usable: int) -> str | None:
    """One log line on what was left out (None when nothing was): the counts by reason
    and the plink2 options that make those variants usable. No variant IDs."""
    if excluded is None or not len(excluded):
        return None
    n_multi = int((excluded["reason"] == MULTIALLELIC).sum())
    n_dup = len(excluded) - n_multi
    parts = []
    if n_multi:
        parts.append(f"{n_multi} multiallelic (plink2 --max-alleles 2 drops them; "
                     "--make-pgen multiallelics=- splits them)")
    if n_dup:
        parts.append(f"{n_dup} sharing their ID with another variant (plink2 "
                     "--set-all-var-ids gives each its own)")
    return (f"{len(excluded)} of {len(excluded) + n_usable} variants left out, cmix cannot "
            f"select them: {'; '.join(parts)}")


def fix_command(reason: str, plink2_input: str, output: str) -> str:
    """The plink2 command that makes a left-out variant usable: ``output`` is the flag
    that writes the new file set (--make-pgen, --make-bed)."""
    if reason == MULTIALLELIC:
        return (f"Drop such sites with `plink2 {plink2_input} --max-alleles 2 {output} "
                f"--out NEW`, or split them into biallelic variants with `plink2 "
                f"{plink2_input} --make-pgen multiallelics=- --set-all-var-ids "
                "'@:#:$r:$a' --new-id-max-allele-len 100 --out NEW`")
    return (f"Give every variant its own ID with `plink2 {plink2_input} --set-all-var-ids "
            f"'@:#:$r:$a' --new-id-max-allele-len 100 {output} --out NEW` (the selection "
            "must then name the new IDs, or the positions)")


def refuse_excluded(excluded: pd.DataFrame, what: str, ids=None, chrom=None, pos=None,
                    lines=None) -> None:
    """CmixError when a selection names a left-out variant of a source (``excluded``, its
    table): by ID (``ids``), or by chromosome and position (``chrom``, ``pos``;
    chromosomes matched by code, so ``chr1`` is ``1``). The three are sequences over the
    selection's entries (any may be None); pass only the entries that matched no usable
    variant. ``what`` names the selection ("x.snplist", "summary statistics x.tsv"),
    ``lines`` (the file line of each entry) the entry in it. The message names the
    first such entry, the variant, why it was left out and the plink2 command that makes
    it usable."""
    if excluded is None or not len(excluded):
        return
    n = len(ids) if ids is not None else (len(chrom) if chrom is not None else 0)
    hit_id, hit_pos = np.zeros(n, bool), np.zeros(n, bool)
    if ids is not None:
        ids = np.asarray(ids, dtype=object).astype(str)
        hit_id = pd.Index(ids).isin(excluded["variant_id"].astype(str))
    if chrom is not None and n:
        # positions first (integers, fast), chromosome codes only where one is shared
        pos = pd.to_numeric(pd.Series(np.asarray(pos, dtype=object)), errors="coerce")
        near = pos.isin(excluded["pos"]).to_numpy()
        if near.any():
            own = _position_keys(excluded["chrom"], excluded["pos"])
            hit_pos[near] = pd.Index(_position_keys(
                np.asarray(chrom, dtype=object)[near], pos[near])).isin(own)
    hit = hit_id | hit_pos
    if not hit.any():
        return
    k = int(np.flatnonzero(hit)[0])
    if hit_id[k]:
        row = excluded[excluded["variant_id"].astype(str).to_numpy() == ids[k]].iloc[0]
    else:
        key = _position_keys(np.asarray(chrom, dtype=object)[[k]], pos.iloc[[k]])[0]
        row = excluded[_position_keys(excluded["chrom"], excluded["pos"]) == key].iloc[0]
    n_more = int(hit.sum()) - 1
    output = "--make-bed" if row["plink2_input"].startswith("--bfile") else "--make-pgen"
    why = ("is multiallelic (alleles " + row["alleles"].replace(",", "/") + ")"
           if row["reason"] == MULTIALLELIC else "shares its ID with another variant")
    entry = f"{what}, line {int(np.asarray(lines)[k])}" if lines is not None else what
    raise CmixError(
        f"{entry}: selects variant {row['variant_id']!r} (chromosome {row['chrom']}, "
        f"position {row['pos']}; {row['where']}), which {why}: cmix leaves such variants "
        f"out{f' ({n_more} more such entries)' if n_more else ''}. "
        + fix_command(row["reason"], row["plink2_input"], output)
        + ", and give the new files")


def _position_keys(chrom, pos) -> np.ndarray:
    """"code:position" (object (n,)) of each pair of a chromosome and a whole-number
    position (pos: numbers, NaN for none)."""
    pos = pd.Series(np.asarray(pos, dtype=np.float64))
    text = pos.astype("Int64").astype(str).to_numpy(dtype=object)
    return np.asarray(chrom_codes(chrom), dtype=object) + ":" + text
