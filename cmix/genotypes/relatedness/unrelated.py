"""Unrelated samples, the ``cmix unrelated`` step: two routes, one output.

The samples to keep so that no two kept samples have kinship above a cutoff (plink2
``--king-cutoff``, :mod:`cmix.genotypes.relatedness.cutoff`) come from

* a kinship table: UK Biobank's ``ukb_rel.dat`` or a ``plink2 --make-king-table``
  ``.kin0`` file (:func:`unrelated_from_table`,
  :mod:`cmix.genotypes.relatedness.kinship_table`);
* KING-robust kinship computed from genotypes (:func:`unrelated_from_genotypes`,
  :mod:`cmix.genotypes.relatedness.king`).

Both write ``OUT.king.cutoff.in.id``, ``.out.id`` and ``.king.summary.tsv`` (and the
genotype route ``OUT.kin0``) with :func:`write_unrelated`.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from ...atomic import atomic_outputs
from ...errors import CmixError
from ...logs import log
from ...readers import plink
from ...readers.chroms import chrom_mask, chrom_text
from ...readers.pgen import read_psam
from ...readers.sources import open_source
from ...runtime import resolve_device
from ..selection import extract_mask, sample_rows
from .cutoff import (DEFAULT_CUTOFF, REPORT_MIN_KINSHIP, check_cutoff, degree_counts,
                     prune_king_cutoff)
from .king import king_robust, king_variants
from .kinship_table import match_kinship_pairs, read_kinship_table

if TYPE_CHECKING:
    from ...readers.sources import GenotypeFiles


KIN0_COLUMNS = ["#FID1", "IID1", "FID2", "IID2", "NSNP", "HETHET", "IBS0", "KINSHIP"]


def _format_g(x: float) -> str:
    return "nan" if x != x else f"{x:.6g}"


def write_unrelated(out: str | os.PathLike, fam: pd.DataFrame, sample_idx: np.ndarray,
                    related: pd.DataFrame, cutoff: float, *, kin0: pd.DataFrame | None = None,
                    extra_summary: dict | None = None) -> dict:
    """Prune and write ``out.king.cutoff.in.id``, ``.out.id``, ``.king.summary.tsv``
    (and ``out.kin0`` when ``kin0`` is given), all atomically.

    fam: the sample table (fid, iid) in .fam order; sample_idx: sorted positions of the
    samples considered (the keep list); related: pairs among them with columns idx1,
    idx2, kinship (at least every pair > min(cutoff, REPORT_MIN_KINSHIP); all pairs >
    cutoff prune, the degree counts take those > REPORT_MIN_KINSHIP).
    Returns the summary as a dict.
    """
    out = str(out)
    sample_idx = np.sort(np.asarray(sample_idx, np.int64))
    local = np.full(len(fam), -1, np.int64)
    local[sample_idx] = np.arange(len(sample_idx))
    above = related[related["kinship"].to_numpy() > cutoff]
    drop_local = prune_king_cutoff(len(sample_idx), local[above["idx1"].to_numpy()],
                                   local[above["idx2"].to_numpy()])
    kept, dropped = sample_idx[~drop_local], sample_idx[drop_local]
    related_samples = np.unique(np.concatenate([above["idx1"].to_numpy(), above["idx2"].to_numpy()]))
    summary = {"samples_considered": len(sample_idx)}
    summary.update(extra_summary or {})
    reported = related[related["kinship"].to_numpy() > REPORT_MIN_KINSHIP]
    for name, count in degree_counts(reported["kinship"].to_numpy()).items():
        summary[f"pairs_{name.replace('/', '_').replace(' ', '_')}"] = count
    summary.update({"kinship_cutoff": cutoff, "pairs_above_cutoff": len(above),
                    "samples_with_relatives": len(related_samples),
                    "samples_dropped": len(dropped), "samples_kept": len(kept)})
    paths = [f"{out}.king.cutoff.in.id", f"{out}.king.cutoff.out.id", f"{out}.king.summary.tsv"]
    if kin0 is not None:
        paths.append(f"{out}.kin0")
    with atomic_outputs(*paths) as tmps:
        plink.write_sample_ids(tmps[0], fam, np.sort(kept))
        plink.write_sample_ids(tmps[1], fam, np.sort(dropped))
        with open(tmps[2], "w") as fh:
            fh.write("metric\tvalue\n")
            for k, v in summary.items():
                fh.write(f"{k}\t{v:g}\n" if isinstance(v, float) else f"{k}\t{v}\n")
        if kin0 is not None:
            _write_kin0(tmps[3], fam, kin0)
    deg = ", ".join(f"{summary[k]} {k[6:].replace('_', ' ')}" for k in summary if k.startswith("pairs_")
                    and k != "pairs_above_cutoff")
    log(f"unrelated: {len(sample_idx)} samples considered; related pairs (kinship > 0.0442): "
        f"{deg}; {len(above)} pairs > {cutoff:g} involve {len(related_samples)} samples; "
        f"dropped {len(dropped)}, kept {len(kept)}")
    if summary.get("undefined_kinship_pairs"):
        log(f"unrelated: {summary['undefined_kinship_pairs']} pairs have no kinship estimate "
            "(nan: no variant called in both, or no heterozygous call in either) and count "
            "as not related, as in plink2 --king-cutoff; a sample with (nearly) every call "
            "missing is the usual cause")
    return summary


def _write_kin0(path, fam: pd.DataFrame, pairs: pd.DataFrame) -> None:
    fid, iid = fam["fid"].to_numpy(), fam["iid"].to_numpy()
    with open(path, "w") as fh:
        fh.write("\t".join(KIN0_COLUMNS) + "\n")
        for r in pairs.itertuples(index=False):
            nsnp = int(r.nsnp)
            fh.write(f"{fid[r.idx1]}\t{iid[r.idx1]}\t{fid[r.idx2]}\t{iid[r.idx2]}\t{nsnp}\t"
                     f"{_format_g(r.hethet / nsnp if nsnp else float('nan'))}\t"
                     f"{_format_g(r.ibs0 / nsnp if nsnp else float('nan'))}\t"
                     f"{_format_g(r.kinship)}\n")


def _sample_universe(bfile=None, fam_path=None, keep=None):
    """(fam, sample_idx): the sample table in .fam order and the kept positions."""
    if fam_path is not None:
        fam = read_psam(fam_path)       # a .fam, or a PLINK 2 .psam
    elif bfile is not None:
        fam = open_source(bfile=bfile).fam
    else:
        raise CmixError("the kinship-table route needs the sample table: give --bfile or --fam "
                        "(plink2 prunes related pairs in .fam order, which a --keep list "
                        "alone does not give)")
    if keep is None:
        return fam, np.arange(len(fam))
    return fam, sample_rows(fam, keep, step="unrelated")[0]


def unrelated_from_table(kinship_path, out, *, cutoff: float = DEFAULT_CUTOFF, bfile=None,
                         fam_path=None, keep=None) -> dict:
    """Table route: read ukb_rel.dat / .kin0, prune pairs > cutoff among kept samples, write.

    Pairs naming an ID outside the sample table are counted and reported (never
    listed); a table none of whose pairs match is an error (wrong ID columns).
    """
    cutoff = check_cutoff(cutoff)
    fam, sample_idx = _sample_universe(bfile, fam_path, keep)
    table = read_kinship_table(kinship_path)
    pairs, n_unknown = match_kinship_pairs(table, fam)
    if len(table) and len(pairs) == 0:
        raise CmixError(f"{kinship_path}: none of its {len(table)} pairs names two samples of "
                        "the cohort; check that its IDs are the .fam IIDs (UK Biobank eids of "
                        "the same application)")
    in_keep = np.zeros(len(fam), bool)
    in_keep[sample_idx] = True
    inside = in_keep[pairs["idx1"].to_numpy()] & in_keep[pairs["idx2"].to_numpy()]
    n_outside = int((~inside).sum())
    if n_unknown:
        log(f"unrelated: {n_unknown} of {len(table)} kinship-table pairs name a sample not in "
            "the cohort; ignored")
    pairs = pairs[inside].reset_index(drop=True)
    summary_extra = {"table_pairs": len(table), "table_pairs_unknown_ids": n_unknown,
                     "table_pairs_outside_keep": n_outside,
                     "undefined_kinship_pairs": int(np.isnan(pairs["kinship"].to_numpy()).sum())}
    return write_unrelated(out, fam, sample_idx, pairs, cutoff, extra_summary=summary_extra)


def king_inputs(genotypes: GenotypeFiles, *, extract=None, keep=None):
    """The genotypes, samples and variants KING-robust runs on: (bf, sample_idx,
    variant_idx, n_sex_mt, n_extract_unknown); sample_idx: sorted .fam positions of the
    keep list (all samples without one), variant_idx: the (extracted) variants off chrX,
    chrY and MT; n_sex_mt: chosen variants left out for lying on X, Y or MT."""
    chroms = genotypes.chroms
    bf = genotypes.open()
    fam = bf.fam
    sample_idx = (sample_rows(fam, keep, step="unrelated")[0] if keep is not None
                  else np.arange(len(fam)))
    chosen = chrom_mask(bf.bim["chrom"], chroms)
    n_extract_unknown = 0
    if extract is not None:
        listed, n_extract_unknown = extract_mask(bf.bim["variant_id"], extract,
                                                 f"{bf.prefix}.bim", excluded=bf.excluded)
        chosen &= listed
    usable = king_variants(bf.bim["chrom"])
    n_sex_mt = int((chosen & ~usable).sum())
    variant_idx = np.flatnonzero(chosen & usable)
    if len(variant_idx) == 0:
        raise CmixError(f"{bf.prefix}.bim: no variants off chrX, chrY and MT to compute "
                        "kinship from" + (f" on --chroms {chrom_text(chroms)}" if chroms else ""))
    if len(sample_idx) < 2:
        raise CmixError("KING-robust kinship needs at least 2 samples; the keep list leaves "
                        f"{len(sample_idx)}")
    return bf, sample_idx, variant_idx, n_sex_mt, n_extract_unknown


def unrelated_from_genotypes(genotypes: GenotypeFiles, out, *, cutoff: float = DEFAULT_CUTOFF,
                             extract=None, keep=None, device: str = "auto",
                             block_size: int | None = None, route: str | None = None) -> dict:
    """Genotype route: KING-robust over autosomal (extracted) variants, prune every pair
    above the cutoff (pairs are computed down to it when it is below 0.0442), write the
    .id files, the .kin0 of pairs > 0.0442 and the summary. ``genotypes``: its bfile
    or pfile a prefix or a ``{chrom}`` pattern read across the chromosome set (shared
    fam); its chroms: only these chromosomes (a --chroms spec); ``keep``: a --keep list;
    block_size: samples per row strip of the GPU route's products (default 2,048);
    route: as :func:`king_robust` (default: bit planes on the CPU, int8 products on a GPU)."""
    cutoff = check_cutoff(cutoff)
    bf, sample_idx, variant_idx, n_sex_mt, n_extract_unknown = king_inputs(
        genotypes, extract=extract, keep=keep)
    fam = bf.fam
    dev = "cpu" if device == "cpu" else resolve_device(device).type
    how = route or ("bitplanes" if dev == "cpu" else "int8")
    how = {"bitplanes": "bit planes", "int8": "int8 products"}.get(how, how)
    log(f"unrelated: KING-robust over {len(variant_idx)} variants "
        f"({n_sex_mt} on chrX, chrY or MT excluded, as plink2 does"
        + (f", {n_extract_unknown} --extract IDs not in the .bim" if n_extract_unknown else "")
        + f") and {len(sample_idx)} samples on {dev} ({how})")
    # pairs down to the cutoff when it lies below the report threshold: they all prune
    pairs = king_robust(bf, variant_idx, sample_idx, min_kinship=min(cutoff, REPORT_MIN_KINSHIP),
                        block_size=block_size, device=device, route=route)
    kin0 = pairs[pairs["kinship"].to_numpy() > REPORT_MIN_KINSHIP].reset_index(drop=True)
    extra = {"variants_used": len(variant_idx), "variants_x_y_mt_excluded": n_sex_mt,
             "undefined_kinship_pairs": pairs.attrs["undefined_kinship_pairs"]}
    return write_unrelated(out, fam, sample_idx, pairs, cutoff, kin0=kin0, extra_summary=extra)
