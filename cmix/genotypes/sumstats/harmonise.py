"""Harmonising summary statistics to the .bim (:func:`harmonise`) and ranking them by p.

Counts kept at each step:
    1. rows with a missing beta or p ("NA", empty) are dropped;
    2. matched to the .bim by variant ID, else by chromosome:position with the same two
       alleles; an ID match whose alleles are not the .bim's (on either strand) is dropped;
    3. SNP alleles given on the other strand (A/G for a .bim T/C) are complemented;
       indels and other multi-base alleles must match as given (or swapped);
    4. strand-ambiguous SNPs (.bim alleles A/T or C/G) are dropped unless
       ``keep_ambiguous`` (then their alleles are taken as given, on the .bim's strand);
    5. only QC-passed SNPs (the ``extract`` list) are kept;
    6. several rows on one .bim variant: the smallest p is kept (ties: first in the file).

The output orients every SNP to the .bim: ``effect_allele`` is the .bim A1 (column 5,
plink2's ALT, the allele ``plink2 --export A`` and the .bed count) and ``beta`` is the
effect per copy of it, its sign flipped where the summary statistics' effect allele
was the .bim A2 ("swapped"). So a PRS is ``A1 count @ beta``.

Ranking (:func:`rank`): by log10 p ascending, ties by chromosome (1..22, X, Y, XY, MT,
then others, :func:`chrom_sort_key`), position and .bim row.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ...readers.chroms import CHROM_ORDER, chrom_code
from ...readers.usable import refuse_excluded
from .read import map_unique


_CHROM_ORDER = {code: i + 1 for i, code in enumerate(CHROM_ORDER)}   # 1..22, X 23 .. MT 26


def _normalise_chrom(chrom) -> pd.Series:
    return pd.Series(map_unique(chrom, chrom_code))


def chrom_sort_key(chrom) -> np.ndarray:
    """Sort key for chromosome names: 1..22, X=23, Y=24, XY=25, MT=26, others after."""
    codes, uniques = pd.factorize(pd.Series(np.asarray(chrom, dtype=object)).astype(str))
    names = [chrom_code(u) for u in uniques]
    others = sorted(n for n in set(names) if n not in _CHROM_ORDER)
    order = {**{o: 100 + i for i, o in enumerate(others)}, **_CHROM_ORDER}
    return np.array([order[n] for n in names] + [999], dtype=np.int64)[codes]


def harmonise(sumstats: pd.DataFrame, bim: pd.DataFrame, extract: set[str] | None = None,
              keep_ambiguous: bool = False, excluded: pd.DataFrame | None = None,
              where: str = "summary statistics") -> tuple[pd.DataFrame, pd.DataFrame]:
    """Match summary statistics to the .bim and orient them to its A1 allele.

    sumstats: from :func:`cmix.genotypes.sumstats.read.read_sumstats`. bim:
    :func:`cmix.readers.plink.read_bim` table. extract: QC-passed variant IDs (None =
    all). excluded: the variants the genotype source left out
    (:mod:`cmix.readers.usable`): a row with a p and a beta that matches no usable
    variant but names one of them, by ID or chrom:pos, is a CmixError naming ``where``
    and its line. Returns (table, steps): the table has the
    :data:`cmix.genotypes.sumstats.selection_files.OUTPUT_COLUMNS` (one row per .bim
    variant, unsorted) plus ``line``; steps has columns step, n_removed, n_remaining.
    """
    steps = []
    df = sumstats.reset_index(drop=True)
    steps.append(("read", 0, len(df)))
    df = _count_step(steps, "missing beta or p", len(df),
                     df[df["beta"].notna() & df["log10_p"].notna()])
    bim_a1 = map_unique(bim["a1"], str.upper)
    bim_a2 = map_unique(bim["a2"], str.upper)
    alleles = _sumstats_alleles(df)
    idx, n_id = _bim_rows(df, bim, bim_a1, bim_a2, alleles)
    matched = idx >= 0
    if excluded is not None:
        un = ~matched
        refuse_excluded(excluded, where, ids=df["id"][un], chrom=df["chrom"][un],
                        pos=df["pos"][un], lines=df["line"][un].to_numpy())
    steps.append((f"matched to .bim ({n_id} by ID, {int(matched.sum()) - n_id} by chrom:pos)",
                  int((~matched).sum()), int(matched.sum())))
    df, idx = df[matched].reset_index(drop=True), idx[matched]
    ok, flip, ambiguous, n_comp = _orient_alleles(
        *(a[matched] for a in alleles), bim_a1[idx], bim_a2[idx])
    steps.append(("alleles match the .bim", int((~ok).sum()), int(ok.sum())))
    steps.append((f"on the other strand, complemented: {n_comp}", 0, int(ok.sum())))
    df = df.assign(bim_index=idx, flip=flip, ambiguous=ambiguous)[ok]
    df = _filter_matched(df, bim, extract, keep_ambiguous, steps)
    steps.append((f"allele-swapped, beta sign flipped: {int(df['flip'].sum())}", 0, len(df)))
    return _oriented_table(df, bim), pd.DataFrame(steps, columns=["step", "n_removed",
                                                                  "n_remaining"])


def _count_step(steps: list, name: str, n_before: int, df: pd.DataFrame) -> pd.DataFrame:
    """Append (name, rows removed, rows left) to ``steps``; return ``df``."""
    steps.append((name, n_before - len(df), len(df)))
    return df


def _sumstats_alleles(df: pd.DataFrame) -> tuple[np.ndarray, ...]:
    """(effect, other, effect complemented, other complemented): object arrays (n,),
    the complement being the other strand's base (A<->T, C<->G). Only single-base SNPs
    (both alleles one base) have a complement; for the other rows (indels, multi-base
    alleles) it is None, which matches no allele: they match only as given or swapped."""
    ea = df["effect_allele"].to_numpy()
    oa = df["other_allele"].to_numpy()
    table = str.maketrans("ACGT", "TGCA")
    ea_c = map_unique(ea, lambda a: a.translate(table))
    oa_c = map_unique(oa, lambda a: a.translate(table))
    snp = ((df["effect_allele"].str.len() == 1) & (df["other_allele"].str.len() == 1)
           ).to_numpy()
    ea_c[~snp] = oa_c[~snp] = None
    return ea, oa, ea_c, oa_c


def _bim_rows(df: pd.DataFrame, bim: pd.DataFrame, bim_a1, bim_a2, alleles
              ) -> tuple[np.ndarray, int]:
    """Each summary-statistics row's .bim row, int (n,), -1 where unmatched, and how many
    matched by ID. Rows are matched by variant ID (when the .bim IDs are unique), the
    rest by chromosome:position where the .bim has the same two alleles, for a SNP on
    either strand (:func:`_sumstats_alleles`; the first such .bim row)."""
    ea, oa, ea_c, oa_c = alleles
    by_id = pd.Index(bim["variant_id"])
    idx = by_id.get_indexer(df["id"]) if by_id.is_unique else np.full(len(df), -1)
    n_id = int((idx >= 0).sum())
    unmatched = np.flatnonzero(idx < 0)
    if len(unmatched):
        key_bim = pd.DataFrame({"chrom": _normalise_chrom(bim["chrom"]).to_numpy(),
                                "pos": bim["pos"].to_numpy(), "row": np.arange(len(bim))})
        q = pd.DataFrame({"chrom": _normalise_chrom(df["chrom"]).to_numpy()[unmatched],
                          "pos": df["pos"].to_numpy()[unmatched], "q": unmatched})
        cand = q.merge(key_bim, on=["chrom", "pos"], how="inner")
        qi, rows = cand["q"].to_numpy(), cand["row"].to_numpy()
        same = lambda x, y: ((x == bim_a1[rows]) & (y == bim_a2[rows])) | \
                            ((x == bim_a2[rows]) & (y == bim_a1[rows]))
        ok = same(ea[qi], oa[qi]) | same(ea_c[qi], oa_c[qi])
        cand = cand[ok].sort_values(["q", "row"]).drop_duplicates("q")
        idx[cand["q"].to_numpy()] = cand["row"].to_numpy()
    return idx, n_id


def _orient_alleles(ea, oa, ea_c, oa_c, a1, a2):
    """Compare matched rows' alleles (as given and complemented) with their .bim A1/A2,
    all object (n,). Returns (ok: alleles are the .bim's, flip: the effect allele is
    the .bim A2, ambiguous: the .bim alleles are A/T or C/G, n complemented); bool (n,)
    arrays and an int. Strand-ambiguous SNPs and indels (complement None,
    :func:`_sumstats_alleles`) are never complemented."""
    direct = (ea == a1) & (oa == a2)
    swapped = (ea == a2) & (oa == a1)
    ambiguous = (((a1 == "A") & (a2 == "T")) | ((a1 == "T") & (a2 == "A"))
                 | ((a1 == "C") & (a2 == "G")) | ((a1 == "G") & (a2 == "C")))
    comp_direct = (ea_c == a1) & (oa_c == a2) & ~ambiguous
    comp_swapped = (ea_c == a2) & (oa_c == a1) & ~ambiguous
    ok = direct | swapped | comp_direct | comp_swapped
    n_comp = int(((comp_direct | comp_swapped) & ~(direct | swapped)).sum())
    flip = (swapped | comp_swapped) & ~(direct | comp_direct)
    return ok, flip, ambiguous, n_comp


def _filter_matched(df: pd.DataFrame, bim: pd.DataFrame, extract: set[str] | None,
                    keep_ambiguous: bool, steps: list) -> pd.DataFrame:
    """Drop strand-ambiguous SNPs (unless ``keep_ambiguous``) and SNPs not in
    ``extract``, then keep the smallest p of each .bim variant (ties: first in the
    file), appending each step to ``steps``."""
    n = len(df)
    if not keep_ambiguous:
        df = _count_step(steps, "strand-ambiguous (A/T, C/G) dropped", n, df[~df["ambiguous"]])
    else:
        steps.append((f"strand-ambiguous kept: {int(df['ambiguous'].sum())}", 0, n))
    if extract is not None:
        n = len(df)
        ids = bim["variant_id"].to_numpy()[df["bim_index"].to_numpy()]
        df = _count_step(steps, "QC-passed (in --extract)", n,
                         df[pd.Index(ids).isin(list(extract))])
    n = len(df)
    df = df.sort_values(["bim_index", "log10_p", "line"], kind="stable")
    return _count_step(steps, "duplicates resolved (smallest p kept)", n,
                       df.drop_duplicates("bim_index"))


def _oriented_table(df: pd.DataFrame, bim: pd.DataFrame) -> pd.DataFrame:
    """The :data:`cmix.genotypes.sumstats.selection_files.OUTPUT_COLUMNS` plus ``line``
    of the harmonised rows: the .bim's ID, position and alleles (effect = A1), beta
    sign-flipped where the effect allele was the .bim A2."""
    bi = df["bim_index"].to_numpy()
    out = pd.DataFrame({
        "variant_id": bim["variant_id"].to_numpy()[bi],
        "chrom": bim["chrom"].to_numpy()[bi],
        "pos": bim["pos"].to_numpy()[bi],
        "effect_allele": bim["a1"].to_numpy()[bi],
        "other_allele": bim["a2"].to_numpy()[bi],
        "beta": np.where(df["flip"].to_numpy(), -df["beta"].to_numpy(), df["beta"].to_numpy()),
        "log10_p": df["log10_p"].to_numpy(),
        "p": df["p"].to_numpy(),
        "bim_index": bi.astype(np.int64),
        "line": df["line"].to_numpy(),
    })
    return out.reset_index(drop=True)


def rank(table: pd.DataFrame) -> pd.DataFrame:
    """Sort by log10_p ascending, ties by chromosome, position, .bim row."""
    key = table.assign(_chrom=chrom_sort_key(table["chrom"]))
    key = key.sort_values(["log10_p", "_chrom", "pos", "bim_index"], kind="stable")
    return key.drop(columns="_chrom").reset_index(drop=True)
