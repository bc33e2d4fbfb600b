"""The ``cmix select`` step (:func:`select_snps`): read, harmonise, rank, clump, top-k.

Ranking and selection (:func:`select_top`): by log10 p ascending, ties by chromosome,
position and .bim row (:func:`cmix.genotypes.sumstats.harmonise.rank`); with clumping
(:func:`cmix.genotypes.sumstats.clump.clump`), the index SNPs, best first. Summary
statistics of cmix's own GWAS of the same genotypes keep their strand-ambiguous SNPs
(:func:`from_these_genotypes`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import pandas as pd

from ...atomic import file_sha256
from ...errors import CmixError
from ...logs import log
from ...readers.chroms import chrom_mask, chrom_text
from ...readers.sources import FRACTIONAL
from ...readers.usable import refuse_excluded
from ..gwas import discovery_record_path, read_discovery_record, variants_sha256
from ..selection import read_variant_ids, sample_rows
from .clump import clump
from .harmonise import harmonise, rank
from .info import info_filter
from .read import read_sumstats, with_p_text

if TYPE_CHECKING:
    from ...readers.sources import GenotypeFiles


def select_top(table: pd.DataFrame, top: int) -> pd.DataFrame:
    """The ``top`` best-ranked rows of a harmonised table (:func:`rank` order)."""
    return with_p_text(rank(table).head(top).reset_index(drop=True))


@dataclass(frozen=True, kw_only=True)
class SelectionOptions:
    """How ``cmix select`` picks SNPs.

    top: SNPs to keep (best p first). extract: path of a .snplist of QC-passed variants
    (None: all). column_map: {field: header name}
    (:func:`cmix.genotypes.sumstats.layouts.resolve_columns`).
    keep_ambiguous: keep strand-ambiguous (A/T, C/G) SNPs. clump_params: None (no
    clumping) or dict(r2=, kb=, p1=, p2=) of :func:`clump`; clumping needs hard calls
    (.bed/.pgen). keep: path of a plink sample list whose samples give the clumping r2
    (None: all). min_info: keep only variants with imputation INFO >= this (None: no
    INFO filter), from the ``mfi`` file(s) (UK Biobank ukb_mfi_chr{chrom}_v3.txt, or a
    ``{chrom}`` pattern) or else the sumstats' INFO column; it replaces the array QC for
    imputed variants.
    """

    top: int
    extract: object = None
    column_map: dict | None = None
    keep_ambiguous: bool = False
    clump_params: dict | None = None
    keep: object = None
    mfi: object = None
    min_info: float | None = None


def select_snps(sumstats_path, genotypes: GenotypeFiles, options: SelectionOptions
                ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The whole ``cmix select`` step in memory: read, harmonise, rank, clump, top-k.

    genotypes: ``bfile``/``pfile`` (prefix, ``{chrom}`` pattern with a shared ``fam``,
    or an opened source) or ``bgen`` + ``sample`` (indexed BGEN, or a ``{chrom}``
    pattern; ``chroms``: only these chromosomes, a --chroms spec, and for a pattern the
    files read, default 1-22): the summary statistics are harmonised against the union
    of the files' variants. options: :class:`SelectionOptions`. Returns (selected
    table, steps table).
    """
    bf = genotypes.open()
    sumstats = read_sumstats(sumstats_path, options.column_map)
    qc = set(read_variant_ids(options.extract)) if options.extract is not None else None
    if qc is not None:
        refuse_excluded(bf.excluded, f"{options.extract} (--extract)",
                        ids=sorted(qc - set(bf.bim["variant_id"])))
    info_step = None
    if options.min_info is not None:
        qc, sumstats, info_step = info_filter(sumstats_path, sumstats, qc, bf,
                                              options.min_info, options.mfi, genotypes.chroms)
    keep_ambiguous = options.keep_ambiguous or from_these_genotypes(sumstats_path, bf.bim)
    table, steps = harmonise(sumstats, bf.bim, qc, keep_ambiguous, bf.excluded,
                             f"summary statistics {sumstats_path}")
    if info_step is not None:
        steps = pd.concat([pd.DataFrame([info_step], columns=steps.columns), steps],
                          ignore_index=True)
    table, steps = _on_chroms(table, steps, genotypes.chroms)
    if len(table) == 0:
        raise CmixError(f"{sumstats_path}: no SNP left after harmonising with the variants "
                        f"of {bf.prefix} (steps: " + "; ".join(
                            f"{s}: {r} left" for s, _, r in steps.itertuples(index=False))
                        + "); check the IDs, chromosome names and positions")
    ranked = rank(table)
    steps_rows = list(steps.itertuples(index=False, name=None))
    if options.clump_params is not None:
        ranked = _clumped(ranked, bf, options, steps_rows)
    top = options.top
    selected = with_p_text(ranked.head(top).reset_index(drop=True))
    steps_rows.append((f"top {top} by p", len(ranked) - len(selected), len(selected)))
    return selected, pd.DataFrame(steps_rows, columns=["step", "n_removed", "n_remaining"])


def from_these_genotypes(sumstats_path, bim: pd.DataFrame) -> bool:
    """True when the summary statistics are cmix's own GWAS (``cmix gwas --ids-out``: its
    record beside them names these bytes) of the genotypes whose variant table is
    ``bim``. Their alleles are then the .bim's own, on its strand, so a strand-ambiguous
    (A/T, C/G) SNP is not ambiguous and is kept; external summary statistics keep the
    rule that drops them."""
    if not discovery_record_path(sumstats_path).is_file():
        return False
    record = read_discovery_record(sumstats_path, file_sha256(sumstats_path))
    own = bool(record) and record.get("variants_sha256") == variants_sha256(bim)
    if own:
        log(f"select: {sumstats_path} is cmix's own GWAS of these genotypes: its alleles "
            "are the .bim's, so strand-ambiguous (A/T, C/G) SNPs are kept")
    return own


def _on_chroms(table: pd.DataFrame, steps: pd.DataFrame, chroms
               ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Keep the harmonised SNPs on ``chroms`` (a --chroms spec, None: 1-22), adding a step
    when any is dropped."""
    on_chroms = chrom_mask(table["chrom"], chroms)
    if on_chroms.all():
        return table, steps
    steps = pd.concat([steps, pd.DataFrame(
        [(f"on --chroms {chrom_text(chroms)}", int((~on_chroms).sum()),
          int(on_chroms.sum()))], columns=steps.columns)], ignore_index=True)
    return table[on_chroms].reset_index(drop=True), steps


def _clumped(ranked: pd.DataFrame, bf, options: SelectionOptions, steps_rows: list
             ) -> pd.DataFrame:
    """The index SNPs of :func:`clump` (at most ``options.top``, best first), with r2
    from the ``options.keep`` samples; appends the step to ``steps_rows``. A source
    without hard calls raises."""
    clump_params, top = options.clump_params, options.top
    if bf.encoding == FRACTIONAL:
        raise CmixError(f"--clump computes LD from hard calls, which {bf.prefix} "
                        f"({bf.file_format}) does not hold: clump with --bfile or --pfile "
                        "(the array calls)")
    sample_idx = None
    if options.keep is not None:
        sample_idx, _ = sample_rows(bf.fam, options.keep, step="select")
    rows = clump(ranked, bf, sample_idx, max_index=top, **clump_params)
    steps_rows.append((f"clumped (r2 > {clump_params.get('r2', 0.5)}, "
                       f"{clump_params.get('kb', 250)} kb): index SNPs, stopped at {top}",
                       len(ranked) - len(rows), len(rows)))
    return ranked.iloc[rows].reset_index(drop=True)
