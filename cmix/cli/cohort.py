"""The cohort-wide steps checked against plink2: ``cmix samples`` (sample filters),
``cmix qc`` (variant QC), ``cmix unrelated`` and ``cmix king-tile`` (KING-robust and
the unrelated set) and ``cmix pca``.

Each writes files named by a prefix ``--out``; :data:`PREFIX_OUTPUTS` names them, once,
for the CLI's output checks and for the workflow's rules."""

from __future__ import annotations

import argparse
import os
import sys

from ..outputs import Output
from .args import (MAX_THREADS, add_chroms_arg, add_genotype_args, bounded_int, file_output,
                   fraction, genotype_kwargs, positive_int, seed_number)

#: The files each prefix step writes, PREFIX + suffix, by the name the workflow's rules
#: give them: what the CLI checks and locks before the step runs (every file the step
#: may write, optional ones included) and what the rules name as outputs.
PREFIX_OUTPUTS = {
    "samples": {"keep": ".keep", "table": ".filters.tsv", "summary": ".filters.json"},
    "qc": {"snplist": ".snplist", "table": ".vqc.tsv", "mind_removed": ".mindrem.id"},
    "unrelated": {"keep": ".king.cutoff.in.id", "out": ".king.cutoff.out.id",
                  "summary": ".king.summary.tsv", "kin0": ".kin0"},
    "pca": {"eigenvec": ".eigenvec", "eigenval": ".eigenval", "allele": ".eigenvec.allele",
            "acount": ".acount", "prune_in": ".prune.in", "prune_out": ".prune.out"},
}


def prefix_outputs(args) -> list[Output]:
    """The files a prefix step's --out names (:data:`PREFIX_OUTPUTS`)."""
    return [Output("--out", args.out, "prefix", tuple(PREFIX_OUTPUTS[args.command].values()))]


# --------------------------------------------------------------------------- samples
def add_samples(sub):
    p = sub.add_parser(
        "samples",
        help="UK Biobank sample filters (withdrawn, QC outliers, ancestry) -> O.keep",
        description="Remove withdrawn participants and samples failing the UK Biobank sample "
                    "QC table (het.missing.outliers, putative.sex.chromosome.aneuploidy, "
                    "excess.relatives, not in.white.British.ancestry.subset). Writes O.keep "
                    "(#FID IID, for --keep), O.filters.tsv (filter, n_removed, n_remaining) "
                    "and O.filters.json (which filters ran, for `cmix store --sample-filters`). "
                    "Without --sqc or --withdrawn that filter is skipped; a tidy --sqc table "
                    "applies the named columns it has.")
    p.add_argument("--fam", required=True, help=".fam file (or PLINK prefix) whose samples to filter")
    p.add_argument("--sqc", help="sample QC table: ukb_sqc_v2.txt (headerless, .fam order) or a "
                                 "tidy table with an eid/IID column and the named columns")
    fmt = p.add_mutually_exclusive_group()
    fmt.add_argument("--sqc-headerless", dest="sqc_headerless", action="store_const", const=True,
                     default=None, help="--sqc is headerless ukb_sqc_v2 (default: detect)")
    fmt.add_argument("--sqc-tidy", dest="sqc_headerless", action="store_const", const=False,
                     help="--sqc has a header with named columns (default: detect)")
    p.add_argument("--withdrawn", help="withdrawn participants: one ID a line")
    p.add_argument("--no-ancestry-filter", action="store_true",
                   help="keep samples outside the white British ancestry subset")
    p.add_argument("--out", required=True, help="output prefix: writes OUT.keep, OUT.filters.tsv")
    p.set_defaults(func=_run_samples, _outputs=prefix_outputs)


def _run_samples(args):
    from ..readers.plink import bfile_prefix
    from ..genotypes.samples import run_samples

    prefix = bfile_prefix(args.fam)
    from pathlib import Path

    fam = Path(args.fam) if args.fam.endswith(".psam") else prefix.with_name(prefix.name + ".fam")
    run_samples(fam, args.out, sqc_path=args.sqc, withdrawn_path=args.withdrawn,
                headerless=args.sqc_headerless, ancestry=not args.no_ancestry_filter)


# --------------------------------------------------------------------------- qc
def _hwe_args(values):
    """--hwe P [midp] [keep-fewhet] -> (p, midp, keep_fewhet)."""
    p = fraction(values[0])
    mods = values[1:]
    bad = [m for m in mods if m not in ("midp", "keep-fewhet")]
    if bad or len(set(mods)) != len(mods):
        raise argparse.ArgumentTypeError(
            f"--hwe modifiers must be 'midp' and/or 'keep-fewhet', got {' '.join(mods)!r}")
    return p, "midp" in mods, "keep-fewhet" in mods


def add_qc(sub):
    p = sub.add_parser(
        "qc",
        help="variant QC as plink2 (--mind, --geno, --hwe, --maf) -> O.snplist, O.vqc.tsv",
        description="Per-variant genotype counts over the kept samples, missingness, minor "
                    "allele frequency and the exact Hardy-Weinberg test, filtered in plink2's "
                    "order (sample filters, --mind, --geno, --hwe, --maf) with plink2 "
                    "2.00a3.5's boundary rules. Writes OUT.snplist (IDs passing, as plink2 "
                    "--write-snplist), OUT.vqc.tsv (per-variant table) and OUT.mindrem.id "
                    "(samples --mind removed). Without --mind, runs on disjoint --chroms "
                    "(one job per chromosome) concatenated in .bim order equal one whole run.")
    add_genotype_args(p)
    p.add_argument("--keep", help="keep only these samples (plink --keep file: FID IID or IID)")
    p.add_argument("--remove", help="remove these samples (plink --remove file)")
    p.add_argument("--maf", type=fraction, nargs="?", const=0.01, default=None,
                   help="remove variants with minor allele frequency < MAF (default 0.01)")
    p.add_argument("--hwe", nargs="+", metavar="P [midp] [keep-fewhet]", default=None,
                   help="remove variants with HWE exact test p < P (founders only)")
    p.add_argument("--geno", type=fraction, nargs="?", const=0.1, default=None,
                   help="remove variants with missing call rate > T (default 0.1)")
    p.add_argument("--mind", type=fraction, nargs="?", const=0.1, default=None,
                   help="remove samples with missing call rate > T first (default 0.1)")
    p.add_argument("--hwe-groups", metavar="FILE", default=None,
                   help="take the HWE test within each group of this table (a header, an ID "
                        "column eid/IID and a group column, e.g. ancestry): a variant fails "
                        "where it fails in any group, as plink2 --keep GROUP --hwe run per "
                        "group; samples it does not list are not tested")
    p.add_argument("--hwe-group-column", metavar="NAME", default=None,
                   help="the group column of --hwe-groups (default: its one non-ID column)")
    p.add_argument("--hwe-keep", metavar="FILE", default=None,
                   help="take the HWE test among these samples only (plink --keep file; "
                        "e.g. the controls), within each --hwe-groups group if given")
    p.add_argument("--autosome", action="store_true",
                   help="drop variants outside chromosomes 1-22 (otherwise they are an error)")
    p.add_argument("--threads", type=bounded_int(1, MAX_THREADS, "a thread count"), default=None,
                   help="threads (default: all cores)")
    p.add_argument("--out", required=True, help="output prefix")
    p.set_defaults(func=_run_qc, _parser=p, _outputs=prefix_outputs)


def _run_qc(args):
    hwe = None
    if args.hwe is not None:
        try:
            hwe = _hwe_args(args.hwe)
        except argparse.ArgumentTypeError as err:
            args._parser.error(f"argument --hwe: {err}")
    if os.path.basename(sys.argv[0]) == "cmix" and "scipy.linalg" not in sys.modules:
        # Start-up: numba's first kernel load imports scipy.linalg (0.6 s) only to
        # offer BLAS inside jitted code, which cmix qc never uses. In a `cmix qc`
        # process (not when main() is called from Python) tell numba there is no BLAS.
        sys.modules["scipy.linalg.cython_blas"] = None
    from ..genotypes.qc import HweSamples, QcFilters, run_qc_cli
    from ..readers.sources import GenotypeFiles

    hwe_p, midp, fewhet = hwe if hwe is not None else (None, False, False)
    filters = QcFilters(maf=args.maf, hwe=hwe_p, hwe_midp=midp, hwe_keep_fewhet=fewhet,
                        geno=args.geno, mind=args.mind, autosome_only=args.autosome)
    hwe_samples = HweSamples(groups=args.hwe_groups, group_column=args.hwe_group_column,
                             keep=args.hwe_keep)
    run_qc_cli(GenotypeFiles(**genotype_kwargs(args)), args.out, filters, keep=args.keep,
               remove=args.remove, hwe_samples=hwe_samples, threads=args.threads)


# ------------------------------------------------------------------------- unrelated
def add_unrelated(sub):
    p = sub.add_parser(
        "unrelated",
        help="choose unrelated samples (plink2 --king-cutoff order) from a kinship table "
             "or from KING-robust kinship computed on the genotypes",
        description="Write OUT.king.cutoff.in.id / OUT.king.cutoff.out.id (plink2's format) "
                    "and OUT.king.summary.tsv. Route 1: --kinship ukb_rel.dat (or a plink2 "
                    ".kin0) with the sample table from --bfile or --fam (and --keep). "
                    "Route 2: --bfile alone: KING-robust kinship over jointly called "
                    "variants off chrX, chrY and MT (as plink2) (bit-packed counts on the "
                    "CPU, int8 matrix products on a GPU's tensor cores; the same integers), "
                    "also writing OUT.kin0 (pairs > 0.0442).")
    p.add_argument("--kinship", default=None,
                   help="kinship table: UK Biobank ukb_rel.dat (ID1 ID2 HetHet IBS0 Kinship) "
                        "or plink2 --make-king-table output (.kin0)")
    p.add_argument("--bfile", default=None,
                   help="PLINK .bed/.bim/.fam prefix or {chrom} pattern: the genotypes (route "
                        "2, read across the chromosome set) or, with --kinship, the sample "
                        "list and its order")
    p.add_argument("--pfile", default=None,
                   help="PLINK 2 .pgen/.pvar/.psam prefix or {chrom} pattern (route 2)")
    p.add_argument("--fam", default=None, help="with --kinship: a .fam giving the samples; "
                                               "with a {chrom} pattern: the shared .fam")
    add_chroms_arg(p)
    p.add_argument("--extract", default=None,
                   help="variant IDs to use (e.g. the QC's .snplist; those on chrX, chrY and MT "
                        "are left out, as plink2 does); default all")
    p.add_argument("--keep", default=None, help="samples to consider (plink --keep format)")
    p.add_argument("--cutoff", default="0.0884",
                   help="drop one of each pair with kinship above this, in (0, 0.5) "
                        "(default 0.0884: second-degree relatives and closer)")
    p.add_argument("--out", required=True, help="output prefix")
    p.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"],
                   help="where to compute KING (default auto: CUDA when torch sees a GPU)")
    p.add_argument("--block-size", type=positive_int, default=None,
                   help="samples per row strip of the GPU route's int8 products (default "
                        "2048; rounded up to a multiple of 32)")
    p.add_argument("--threads", type=bounded_int(1, MAX_THREADS, "a thread count"), default=None,
                   help="CPU threads (default: all cores)")
    p.add_argument("--king-tiles", nargs="+", default=None, metavar="TILE",
                   help="gather these cmix king-tile files (every tile of one run) instead "
                        "of computing KING-robust here; same outputs as the one-process run")
    p.set_defaults(func=_run_unrelated, _outputs=prefix_outputs)


def add_king_tile(sub):
    p = sub.add_parser(
        "king-tile",
        help="KING-robust pairs of one tile (two blocks of samples) for cmix unrelated "
             "--king-tiles",
        description="Cut the kept samples (in .fam order) into blocks of --tile-block "
                    "samples and write the pairs of tile I J (I <= J: one sample in block "
                    "I, the other in block J; both in block I when I == J) with kinship "
                    "above min(cutoff, 0.0442) to OUT (.npz).")
    for name in ("--bfile", "--pfile", "--fam", "--extract", "--keep"):
        p.add_argument(name, default=None, help="as for cmix unrelated")
    add_chroms_arg(p)
    p.add_argument("--cutoff", default="0.0884", help="as for cmix unrelated")
    p.add_argument("--tile-block", type=positive_int, required=True,
                   help="samples per block")
    p.add_argument("--tile", type=int, nargs=2, required=True, metavar=("I", "J"),
                   help="the tile's two block numbers, from 0, I <= J")
    p.add_argument("--out", required=True, help="tile file to write (.npz)")
    p.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"])
    p.add_argument("--threads", type=positive_int, default=None,
                   help="CPU threads (default: all cores)")
    p.set_defaults(func=_run_king_tile, _outputs=file_output)


def _run_king_tile(args):
    from ..genotypes.relatedness.tiles import king_tile
    from ..readers.chroms import parse_chroms
    from ..readers.sources import GenotypeFiles

    if args.threads:
        from ..genotypes.kernels import set_numba_threads

        set_numba_threads(args.threads)
    genotypes = GenotypeFiles(bfile=args.bfile, pfile=args.pfile, fam=args.fam,
                              chroms=parse_chroms(args.chroms))
    king_tile(genotypes, args.out, block=args.tile_block, tile=tuple(args.tile),
              cutoff=args.cutoff, extract=args.extract, keep=args.keep, device=args.device)


def _run_unrelated(args):
    from ..errors import CmixError
    from ..genotypes.relatedness.unrelated import (unrelated_from_genotypes,
                                                  unrelated_from_table)

    if (os.path.basename(sys.argv[0]) == "cmix" and args.device == "cpu"
            and "scipy.linalg" not in sys.modules):
        # as in _run_qc: numba's first kernel load would import scipy.linalg (0.6 s) to
        # offer BLAS inside jitted code, which the KING kernels never use
        sys.modules["scipy.linalg.cython_blas"] = None
    if args.threads:
        from ..genotypes.kernels import set_numba_threads

        set_numba_threads(args.threads)             # the CPU route's kernels
        if args.device != "cpu":
            import torch

            torch.set_num_threads(args.threads)
    if args.kinship is not None:
        if args.extract is not None:
            raise CmixError("--extract applies to kinship from genotypes; it cannot be used "
                            "with --kinship")
        unrelated_from_table(args.kinship, args.out, cutoff=args.cutoff, bfile=args.bfile,
                             fam_path=args.fam, keep=args.keep)
    elif args.bfile is not None or args.pfile is not None:
        from ..genotypes.relatedness.tiles import unrelated_from_tiles
        from ..readers.chroms import parse_chroms
        from ..readers.sources import GenotypeFiles

        genotypes = GenotypeFiles(bfile=args.bfile, pfile=args.pfile, fam=args.fam,
                                  chroms=parse_chroms(args.chroms))
        if args.king_tiles:
            return unrelated_from_tiles(genotypes, args.king_tiles, args.out, cutoff=args.cutoff,
                                        extract=args.extract, keep=args.keep)
        unrelated_from_genotypes(genotypes, args.out, cutoff=args.cutoff, extract=args.extract,
                                 keep=args.keep, device=args.device, block_size=args.block_size)
    else:
        raise CmixError("give --kinship TABLE (with --bfile, --fam or --keep for the samples) "
                        "or --bfile PREFIX to compute kinship from genotypes")


# ------------------------------------------------------------------------------ pca
def add_pca(sub):
    p = sub.add_parser(
        "pca",
        help="genetic PCs: plink2 --indep-pairwise pruning, randomized PCA of the --keep "
             "samples, projection of the --project samples",
        description="Choose autosomal variants (--extract, minus long-range LD regions), "
                    "LD-prune them on the fitted samples exactly as plink2 "
                    "--indep-pairwise, fit PCs on the --keep samples (standardised as "
                    "plink2 --pca, mean-imputed; randomized block Krylov streamed over the "
                    ".bed) and project the --project samples onto them. Writes OUT.eigenvec, "
                    "OUT.eigenval, OUT.eigenvec.allele, OUT.acount (plink2's layouts) and "
                    "OUT.prune.in/.prune.out. Project new people with plink2 --read-freq "
                    "OUT.acount --score OUT.eigenvec.allele 2 5 header-read no-mean-imputation "
                    "variance-standardize cols=+scoresums; PCk = PCk_SUM / (m sqrt(eigenvalue "
                    "k)), m = variants in OUT.acount.")
    add_genotype_args(p)
    p.add_argument("--keep", default=None,
                   help="samples to fit on (plink --keep list, e.g. unrelated.king.cutoff.in.id; "
                        "default all)")
    p.add_argument("--project", default=None,
                   help="samples to project onto the fitted PCs (plink --keep list, e.g. "
                        "samples.keep; those also in --keep are fitted)")
    p.add_argument("--extract", default=None,
                   help="candidate variant IDs (e.g. the QC's .snplist; default all autosomal)")
    regions = p.add_mutually_exclusive_group()
    regions.add_argument("--exclude-regions", default=None, metavar="FILE",
                         help="long-range LD regions to leave out (chrom start end [label]; "
                              "default: the GRCh37 list shipped in cmix/data/)")
    regions.add_argument("--no-exclude-regions", action="store_true",
                         help="keep variants in long-range LD regions")
    prune = p.add_mutually_exclusive_group()
    prune.add_argument("--indep-pairwise", nargs="+", default=["1000kb", "1", "0.1"],
                       metavar="ARG",
                       help="WINDOW[kb] [STEP] R2 as plink2 (default 1000kb 1 0.1)")
    prune.add_argument("--no-prune", action="store_true", help="use the variants unpruned")
    p.add_argument("--pcs", type=positive_int, default=10, help="number of PCs (default 10)")
    p.add_argument("--seed", type=seed_number, default=0, help="seed of the random start (default 0)")
    p.add_argument("--threads", type=bounded_int(1, MAX_THREADS, "a thread count"), default=None,
                   help="threads (default: all cores)")
    p.add_argument("--out", required=True, help="output prefix")
    p.set_defaults(func=_run_pca, _outputs=prefix_outputs)


def _run_pca(args):
    from ..genotypes.pca.prune import PruneSettings
    from ..genotypes.pca.regions import HIGH_LD_REGIONS
    from ..genotypes.pca.run import PcaSettings, PcaVariants, run_pca
    from ..readers.sources import GenotypeFiles

    prune = None if args.no_prune else PruneSettings.parse(args.indep_pairwise)
    regions = None if args.no_exclude_regions else (args.exclude_regions or HIGH_LD_REGIONS)
    run_pca(GenotypeFiles(**genotype_kwargs(args)), args.out, keep=args.keep,
            project=args.project,
            variants=PcaVariants(extract=args.extract, regions=regions, prune=prune),
            settings=PcaSettings(n_pcs=args.pcs, seed=args.seed, threads=args.threads))
