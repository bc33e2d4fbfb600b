"""The ``cmix`` command: one subcommand per pipeline step, each a thin shell over the package.

Imports of heavy modules happen inside each subcommand, so ``cmix --help`` and the
start-up of every step stay fast. A :class:`cmix.errors.CmixError` (a user's mistake) is
printed as one line, ``cmix <step>: error: ...``, with exit status 1. Before a step runs,
the outputs its command line names are checked against its inputs and locked
(:func:`cmix.outputs.claim_outputs`): an output never deletes a folder cmix did not write, never
overwrites an input, never lands in a store or names the current folder, and has one
writer at a time.
"""

from __future__ import annotations

import argparse
import errno
import os
import sys


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value}")
    return value


def _bounded_int(low: int, high: int, what: str):
    """An argparse type: an integer in [low, high] (``what`` names it in the message)."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"expected {what} from {low:,} to {high:,}, got "
                                             f"{value:,}")
        return value
    return parse


#: The largest simulated cohort and SNP count (10 million: 2.5 GB of .bed per 1,000 SNPs).
MAX_SIMULATED = 10_000_000
#: The most CPU threads a command takes (torch and BLAS fail beyond their pools).
MAX_THREADS = 1024


def _nonneg_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer >= 0, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected an integer >= 0, got {value}")
    return value


MAX_SEED = 2 ** 32 - 1


def _seed(text: str) -> int:
    """A seed: an integer in [0, 2^32 - 1] (numpy's seeding takes no negative one, and
    the random streams keep 32 bits, so a larger seed would repeat a smaller one's)."""
    value = _nonneg_int(text)
    if value > MAX_SEED:
        raise argparse.ArgumentTypeError(f"expected a seed <= 2^32 - 1, got {value}")
    return value


def _fraction(text: str) -> float:
    """A number in [0, 1] (thresholds such as --maf, --geno, --mind)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number between 0 and 1, got {text!r}") from None
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"expected a number between 0 and 1, got {value}")
    return value


# --------------------------------------------------------------------------- simulate
def _add_simulate(sub):
    p = sub.add_parser(
        "simulate",
        help="write a simulated UK Biobank-style cohort (PLINK trio, QC tables, "
             "phenotypes, summary statistics, kinship table)",
        description="Simulate a UK Biobank-like cohort with population structure (ancestries "
                    "by a Balding-Nichols model, British regions, an admixed group), LD "
                    "blocks, a realistic allele frequency spectrum, planted Hardy-Weinberg "
                    "failures, missing calls, related individuals made by inheritance, four "
                    "traits with published genetic architectures and UKB codings, sex, age "
                    "and ethnic background, and GWAS summary statistics from a separate "
                    "discovery cohort.")
    p.add_argument("--out", required=True, help="output folder (created if needed)")
    p.add_argument("--n-samples", type=_bounded_int(2, MAX_SIMULATED, "a cohort size"),
                   default=2000, help="cohort size (default 2000)")
    p.add_argument("--n-variants", type=_bounded_int(1, MAX_SIMULATED, "a SNP count"),
                   default=5000, help="number of SNPs (default 5000)")
    p.add_argument("--n-chrom", type=_positive_int, default=None,
                   help="number of autosomes to spread SNPs over (default: up to 22, >= 200 SNPs each)")
    p.add_argument("--n-discovery", type=_nonneg_int, default=None,
                   help="size of the separate GWAS discovery cohort (default max(5000, n-samples))")
    p.add_argument("--seed", type=_seed, default=1, help="random seed (default 1)")
    p.add_argument("--ancestry", default="default", metavar="default|none|FILE.json",
                   help="population structure: 'default' (UK Biobank-like: British regions, "
                        "Irish, other white, South Asian, African, East Asian, one admixed "
                        "group), 'none' (one panmictic population) or a JSON file with a list "
                        "of populations (name, code, share, fst or admixed_from, regions; see "
                        "docs/guide/simulator.md)")
    p.add_argument("--fast", action="store_true",
                   help="genotypes only, no LD, relatives or traits: for large benchmark cohorts")
    co = p.add_argument_group("coalescent haplotypes (needs msprime and stdpopsim: pip install 'cmix[sim]')")
    co.add_argument("--haplotypes", choices=["balding-nichols", "coalescent"],
                    default="balding-nichols",
                    help="haplotype source: 'balding-nichols' (default; --ancestry) or "
                         "'coalescent' (a stdpopsim HomSap demographic model, msprime)")
    co.add_argument("--model", default=None,
                    help="stdpopsim HomSap demographic model id (default OutOfAfrica_3G09; "
                         "e.g. AmericanAdmixture_4B18)")
    co.add_argument("--populations", default=None, metavar="POP:N,...",
                    help="cohort size per model population: counts (YRI:500,CEU:2000,CHB:500; "
                         "they replace --n-samples) or shares of --n-samples (YRI:0.2,CEU:0.8); "
                         "default: --n-samples shared equally")
    co.add_argument("--piece-mb", type=float, default=None,
                    help="length of each contig piece in Mb (one piece per chromosome, "
                         "--n-chrom pieces; default 2)")
    co.add_argument("--maf-floor", type=float, default=None,
                    help="SNPs are drawn among biallelic sites with MAF above this (default 0.01)")
    p.set_defaults(func=_run_simulate)


def _run_simulate(args):
    from .errors import CmixError
    from .simulate.balding_nichols import simulate_cohort
    from .simulate.fast import simulate_genotypes_fast

    # an option the chosen simulator does not use is refused, not ignored
    coalescent_only = {"--model": args.model, "--populations": args.populations,
                       "--piece-mb": args.piece_mb, "--maf-floor": args.maf_floor}
    if args.fast:
        unused = {**coalescent_only, "--n-chrom": args.n_chrom,
                  "--n-discovery": args.n_discovery,
                  "--haplotypes": None if args.haplotypes == "balding-nichols" else 1,
                  "--ancestry": None if args.ancestry == "default" else 1}
        given = [flag for flag, value in unused.items() if value is not None]
        if given:
            raise CmixError(f"--fast writes genotypes only (no LD, ancestry, relatives or "
                            f"traits); it does not use {', '.join(given)}")
        simulate_genotypes_fast(args.out, args.n_samples, args.n_variants, seed=args.seed)
    elif args.haplotypes == "coalescent":
        from .simulate.coalescent import CoalescentDesign, simulate_coalescent_cohort

        if args.ancestry != "default":
            raise CmixError("--ancestry is for --haplotypes balding-nichols; with coalescent "
                            "haplotypes the model (--model, --populations) sets the ancestry")
        defaults = CoalescentDesign()
        design = CoalescentDesign(
            model=args.model or defaults.model, populations=args.populations,
            n_samples=args.n_samples, n_variants=args.n_variants, n_chrom=args.n_chrom,
            piece_mb=defaults.piece_mb if args.piece_mb is None else args.piece_mb,
            n_discovery=args.n_discovery,
            maf_floor=defaults.maf_floor if args.maf_floor is None else args.maf_floor)
        simulate_coalescent_cohort(args.out, design, seed=args.seed)
    else:
        given = [flag for flag, value in coalescent_only.items() if value is not None]
        if given:
            raise CmixError(f"{', '.join(given)} need --haplotypes coalescent")
        ancestry = args.ancestry
        ancestry = None if ancestry == "none" else ancestry
        simulate_cohort(args.out, n_samples=args.n_samples, n_variants=args.n_variants,
                        n_chrom=args.n_chrom, n_discovery=args.n_discovery, seed=args.seed,
                        populations=ancestry)


# --------------------------------------------------------------------------- train
def _add_train(sub):
    p = sub.add_parser(
        "train",
        help="train Contrastive Mixup (or a baseline) on one trait store for one labeled "
             "budget and one or more seeds; writes metrics.json per seed",
        description="Split the store's training rows into a stratified labeled subset of "
                    "BUDGET samples (validation carved from it) and unlabeled rows, train the "
                    "method, evaluate on the store's fixed test split. Checkpoints after "
                    "the first epoch, then at most once a minute; rerunning the same "
                    "command resumes. Several seeds each go "
                    "into their own folder, as many single-seed commands would. A network "
                    "method (mlp, ae, vime, manifold_mixup, the cmix methods) trains them "
                    "as one group, their models taking every step together, on the CPU "
                    "or a GPU; the other methods run min(seeds, threads) of them at once "
                    "on the CPU, in worker processes that share the threads (peak memory "
                    "is that many runs').")
    p.add_argument("--store", required=True, help="per-trait Zarr store (cmix store)")
    p.add_argument("--budget", required=True, type=_positive_int,
                   help="number of labeled training samples")
    p.add_argument("--seed", required=True, type=_seed, nargs="+",
                   help="seed of the labeled subset and training; several seeds run in "
                        "this one command (--out then holds {seed})")
    from .learn.methods import METHODS

    p.add_argument("--method", default="cmix", metavar="METHOD",
                   help="; ".join(f"{m.name}: {m.summary}" for m in METHODS.values())
                   + " (default cmix)")
    p.add_argument("--config", default=None,
                   help="YAML or JSON file of config keys overriding the defaults")
    p.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"],
                   help="auto (CUDA if available), cpu or cuda")
    p.add_argument("--resume", action="store_true",
                   help="continue from the checkpoint in --out (required to exist)")
    p.add_argument("--threads", type=_bounded_int(1, MAX_THREADS, "a thread count"), default=None,
                   help="CPU threads for the whole command (default: the cores it may use); "
                        "with several seeds on the CPU each seed gets an equal share")
    p.add_argument("--out", required=True,
                   help="run folder (metrics.json, train_log.jsonl, checkpoint.pt); the "
                        "literal {seed} in it is replaced by the seed")
    p.add_argument("--shared-encoders", default=None, metavar="DIR",
                   help="folder where the cmix methods' runs leave their pre-trained "
                        "encoders and take them from when another run (cmix_selfsl, "
                        "cmix_selfsl_pl, another config file) made the same one; the "
                        "metrics are the same either way (default: none, every run "
                        "pre-trains for itself)")
    p.set_defaults(func=_run_train)


def _run_train(args):
    from .learn.config import check_validation_rows, read_config_file, resolve_config
    from .learn.context import Reuse
    from .learn.harness import train_seeds
    from .learn.methods import get_method

    seed_dirs = _seed_dirs(args.seed, args.out)
    config = read_config_file(args.config) if args.config else {}
    method = get_method(args.method)
    where = args.config or "config"
    cfg = resolve_config(config, method.switches, where=where)
    check_validation_rows(cfg.data.val_fraction, args.budget, method.name, method.network,
                          where)
    train_seeds(args.store, args.budget, seed_dirs, method=args.method, config=config,
                device=args.device, threads=args.threads,
                reuse=Reuse(args.resume, args.shared_encoders))


def _seed_dirs(seeds: list[int], out: str) -> dict[int, str]:
    """Seed -> run folder: ``out`` with the literal ``{seed}`` replaced by the seed (a
    lone seed may go without it)."""
    from .errors import CmixError

    if len(seeds) > 1 and "{seed}" not in out:
        raise CmixError(f"--out {out}: several seeds need a folder per seed; put the "
                        "literal {seed} in --out (e.g. runs/seed{seed})")
    twice = sorted({seed for seed in seeds if seeds.count(seed) > 1})
    if twice:
        raise CmixError(f"--seed: seed {twice[0]} given twice")
    return {seed: out.replace("{seed}", str(seed)) for seed in seeds}


# ---------------------------------------------------------------------------- predict
def _add_predict(sub):
    p = sub.add_parser(
        "predict",
        help="class probabilities for new people from finished runs (an ensemble of seeds)",
        description="Rebuild the model of each --run folder, read the store's variants from "
                    "the genotypes (by ID, else chrom:pos with the same alleles; swapped "
                    "alleles flip the dosage; absent variants get the training mean), "
                    "standardise with the training moments and write a TSV of class "
                    "probabilities (FID, IID, prob_<class>), averaged over the runs.")
    p.add_argument("--run", nargs="+", required=True, metavar="RUN_DIR",
                   help="finished run folder(s) of one method and store")
    _add_genotype_args(p, bgen=True)
    p.add_argument("--pheno", help="phenotype table with the covariate fields (if the run used them)")
    p.add_argument("--sample-qc", help="sample QC table with the PCs / array (if the run used them)")
    pcs = p.add_mutually_exclusive_group()
    pcs.add_argument("--eigenvec", help="a .eigenvec with the new people's PCs (if the run used "
                     "pcs_from: eigenvec)")
    pcs.add_argument("--pca", metavar="PREFIX",
                     help="the cmix pca output prefix the run's PCs came from: the new people "
                          "are projected onto its axes with its saved allele weights and "
                          "frequencies (PREFIX.eigenvec.allele, .acount, .eigenval)")
    p.add_argument("--min-shared", type=_fraction, default=0.8,
                   help="least share of the run's variants the file set must have (default 0.8)")
    p.add_argument("--allow-overlap", action="store_true",
                   help="allow people who were training rows of the run")
    p.add_argument("--allow-discovery", action="store_true",
                   help="allow people of the discovery GWAS that chose the run's SNPs (a "
                        "warning gives their count)")
    p.add_argument("--out", required=True, help="output TSV")
    p.set_defaults(func=_run_predict)


def _run_predict(args):
    from .genotypes.covariates import SampleTables
    from .readers.sources import GenotypeFiles
    from .learn.predict import predict

    tables = SampleTables(pheno=args.pheno, sample_qc=args.sample_qc, eigenvec=args.eigenvec)
    predict(args.run, args.out, GenotypeFiles(**_genotype_kwargs(args)), tables, pca=args.pca,
            min_shared=args.min_shared, allow_overlap=args.allow_overlap,
            allow_discovery=args.allow_discovery)


# ---------------------------------------------------------------------------- report
def _add_report(sub):
    p = sub.add_parser(
        "report",
        help="collect run folders' metrics.json into tables, plots and an HTML report",
        description="Find every metrics.json under --runs and write results.tsv (one row per "
                    "trait x method x budget x seed), summary.tsv (mean, sd, n over seeds), "
                    "headline.tsv (paired gains, Holm-adjusted p), missing.tsv (grid cells "
                    "without a run), per-trait PNG figures and a self-contained report.html "
                    "into --out.")
    p.add_argument("--runs", required=True, help="folder holding run folders (searched recursively)")
    p.add_argument("--out", required=True, help="report folder")
    grid = p.add_argument_group(
        "grid", "the runs asked for; cells without a run are reported as missing. Give all "
                "four or none: without them the grid is every trait, method, budget and seed "
                "seen in any run, crossed")
    grid.add_argument("--traits", nargs="+", metavar="TRAIT")
    grid.add_argument("--methods", nargs="+", metavar="METHOD")
    grid.add_argument("--budgets", nargs="+", type=_positive_int, metavar="N")
    grid.add_argument("--seeds", nargs="+", type=_seed, metavar="SEED")
    p.set_defaults(func=_run_report)


def _run_report(args):
    from .errors import CmixError
    from .text import first_repeated
    from .report.write import write_report

    parts = {k: getattr(args, k) for k in ("traits", "methods", "budgets", "seeds")}
    given = [k for k, v in parts.items() if v is not None]
    if given and len(given) < 4:
        raise CmixError(f"--{', --'.join(given)} given without --"
                        f"{', --'.join(k for k in parts if k not in given)}: give the whole "
                        "grid or none of it")
    for key in given:                   # a repeat would count each of its cells twice
        repeated = first_repeated(parts[key])
        if repeated is not None:
            raise CmixError(f"--{key}: {repeated} is given twice; give each once")
    write_report(args.runs, args.out, grid=parts if given else None)


# ------------------------------------------------------------------------- genotypes
_CHROMS_HELP = ("only these chromosomes, as plink2 --chr: codes 1-22, X, Y, XY, MT (chr1 "
                "and 01 read as 1), comma lists and ranges (e.g. 1-4,22, or 1 2 3); with a "
                "{chrom} pattern only their files are read (default for a pattern: 1-22, "
                "else all)")


def _add_chroms_arg(p):
    p.add_argument("--chroms", nargs="+", metavar="SPEC", default=None, help=_CHROMS_HELP)


def _add_genotype_args(p, *, bgen: bool = False, fam: bool = True):
    """--bfile / --pfile (prefix or {chrom} pattern), --fam and --chroms; with bgen,
    --bgen and --sample too."""
    g = p.add_argument_group("genotypes (one of --bfile, --pfile" + (", --bgen)" if bgen else ")"))
    g.add_argument("--bfile", help="PLINK .bed/.bim/.fam prefix, or a pattern with {chrom} "
                                   "for one .bed/.bim per chromosome 1-22 (e.g. "
                                   "ukb_cal_chr{chrom}_v2) sharing --fam")
    g.add_argument("--pfile", help="PLINK 2 .pgen/.pvar/.psam prefix, or a {chrom} pattern")
    if fam:
        g.add_argument("--fam", help="the sample file shared by per-chromosome files (.fam, "
                                     "or .psam for --pfile)" + ("; with --bgen, the samples "
                                                                "to match the .sample to"
                                                                if bgen else ""))
    _add_chroms_arg(g)
    if bgen:
        g.add_argument("--bgen", help="BGEN file (v1.1-v1.3), or a {chrom} pattern (e.g. "
                                      "ukb_imp_chr{chrom}_v3.bgen), each with its .bgi index")
        g.add_argument("--sample", help="the .sample file of the BGEN (or a {chrom} pattern; "
                                        "default: the sample IDs the BGEN embeds)")


def _genotype_kwargs(args) -> dict:
    """The genotype arguments of a step as keyword arguments, --chroms parsed."""
    from .readers.chroms import parse_chroms
    from .errors import CmixError

    given = [k for k in ("bfile", "pfile", "bgen") if getattr(args, k, None) is not None]
    if len(given) != 1:
        names = "--bfile, --pfile" + (" or --bgen" if hasattr(args, "bgen") else "")
        raise CmixError(f"give exactly one of {names} (got {len(given) or 'none'})")
    kwargs = {k: getattr(args, k, None) for k in ("bfile", "pfile", "fam", "bgen", "sample")
              if getattr(args, k, None) is not None}
    chroms = parse_chroms(getattr(args, "chroms", None))
    return {**kwargs, "chroms": chroms} if chroms is not None else kwargs


def _add_bgen_index(sub):
    p = sub.add_parser(
        "bgen-index",
        help="write the .bgi index (bgenix's SQLite format) that cmix reads a BGEN through",
        description="Index BGEN files (v1.1-v1.3) as `bgenix -index` does: FILE.bgi beside each, "
                    "listing every variant's position and byte range (only the variant "
                    "headers are read).")
    p.add_argument("bgen", nargs="+", help="BGEN file(s)")
    p.set_defaults(func=_run_bgen_index)


def _run_bgen_index(args):
    from .readers.bgen import write_bgi
    from .logs import log

    for path in args.bgen:
        log(f"wrote {write_bgi(path)}")


# ---------------------------------------------------------------------------- select
def _add_select(sub):
    p = sub.add_parser(
        "select",
        help="harmonise GWAS summary statistics to the .bim and keep the top-k QC-passed SNPs",
        description="Read summary statistics (plain or gzipped, tab or whitespace separated, "
                    "layout recognised from the header), match them to the .bim by ID or "
                    "chrom:pos+alleles, orient beta to the .bim A1 (flipped where alleles are "
                    "swapped), drop strand-ambiguous and non-QC-passed SNPs, rank by p "
                    "(ties by chromosome, position) and keep the top k, optionally after "
                    "plink 1.9-style LD clumping. Writes OUT and OUT.steps.tsv (counts per "
                    "step).")
    p.add_argument("--sumstats", required=True, help="summary statistics file (.gz or plain)")
    _add_genotype_args(p, bgen=True)
    p.add_argument("--extract", help="QC-passed SNPs (.snplist, one ID a line)")
    p.add_argument("--min-info", type=_fraction, default=None,
                   help="keep imputed variants with INFO >= this (from --mfi, else the "
                        "sumstats' INFO column); replaces the array QC for --bgen")
    p.add_argument("--mfi", help="UK Biobank imputation mfi file, or a {chrom} pattern "
                                 "(ukb_mfi_chr{chrom}_v3.txt), giving INFO for --min-info")
    p.add_argument("--top", type=_positive_int, default=1000, help="SNPs to keep (default 1000)")
    for field, what in (("id", "variant ID"), ("chrom", "chromosome"), ("pos", "position"),
                        ("effect", "effect allele"), ("other", "other allele"),
                        ("beta", "effect size"), ("or", "odds ratio (read as beta = ln OR)"),
                        ("p", "p-value"), ("log10p", "-log10 p-value")):
        names = [f"--col-{field}"] + ([f"--col-{field}-allele"] if field in ("effect", "other")
                                      else [])
        p.add_argument(*names, metavar="NAME",
                       help=f"column of the {what} (default: as the header's layout has "
                            "it: plink2 --glm, regenie, GWAS-SSF, SAIGE, METAL, BOLT-LMM)")
    p.add_argument("--keep-ambiguous", action="store_true",
                   help="keep strand-ambiguous A/T and C/G SNPs (dropped by default)")
    p.add_argument("--clump", action="store_true", help="LD-clump before taking the top k")
    p.add_argument("--clump-r2", type=_fraction, default=0.5, help="r2 threshold (default 0.5)")
    p.add_argument("--clump-kb", type=float, default=250.0, help="window in kb (default 250)")
    p.add_argument("--clump-p1", type=_fraction, default=1.0,
                   help="p threshold for index SNPs (default 1)")
    p.add_argument("--clump-p2", type=_fraction, default=None,
                   help="p threshold for clumped SNPs (default: --clump-p1)")
    p.add_argument("--keep", help="samples whose genotypes give the clumping r2 "
                                  "(plink --keep list, e.g. unrelated.id; default all)")
    p.add_argument("--out", required=True, help="output table (tab-separated)")
    p.set_defaults(func=_run_select)


def _run_select(args):
    from .logs import log
    from .readers.sources import GenotypeFiles
    from .genotypes.sumstats.select import SelectionOptions, select_snps
    from .genotypes.sumstats.selection_files import selection_source, write_selection

    column_map = {k: v for k, v in (("id", args.col_id), ("chrom", args.col_chrom),
                                    ("pos", args.col_pos), ("effect_allele", args.col_effect),
                                    ("other_allele", args.col_other), ("beta", args.col_beta),
                                    ("or", args.col_or), ("p", args.col_p),
                                    ("log10p", args.col_log10p)) if v}
    if args.keep is not None and not args.clump:
        from .errors import CmixError

        raise CmixError(f"--keep {args.keep}: gives the samples of clumping's r2, and no "
                        "--clump was given, so it would change nothing; add --clump, or "
                        "leave --keep out")
    clump = None
    if args.clump:
        clump = {"r2": args.clump_r2, "kb": args.clump_kb, "p1": args.clump_p1,
                 "p2": args.clump_p2}
    selected, steps = select_snps(
        args.sumstats, GenotypeFiles(**_genotype_kwargs(args)),
        SelectionOptions(top=args.top, extract=args.extract, column_map=column_map,
                         keep_ambiguous=args.keep_ambiguous, clump_params=clump,
                         keep=args.keep, mfi=args.mfi, min_info=args.min_info))
    out, steps_path = write_selection(args.out, selected, steps,
                                      selection_source(args.sumstats))
    for row in steps.itertuples(index=False):
        log(f"  {row.step}: -{row.n_removed} -> {row.n_remaining}")
    log(f"wrote {out} ({len(selected)} SNPs) and {steps_path}")


# ----------------------------------------------------------------------------- store
def _add_store(sub):
    p = sub.add_parser(
        "store",
        help="write a trait's Zarr store: effect-allele dosages of the labeled kept samples",
        description="Label the kept samples for one trait (see cmix.genotypes.phenotypes for the trait "
                    "config), fix a stratified test split, and write the dosages of the "
                    "selected SNPs' effect alleles (int8, -1 missing) to a chunked, "
                    "compressed Zarr (format 2) store with VCF Zarr names. From a BGEN (or a "
                    ".pgen with dosages) the store holds fractional dosages: uint8 = "
                    "round(expected copies x 125), 255 missing.")
    _add_genotype_args(p, bgen=True)
    p.add_argument("--keep", help="samples to use (plink --keep list, e.g. unrelated.id)")
    p.add_argument("--snps", required=True, help="selected SNP table from `cmix select`")
    p.add_argument("--pheno", required=True, help="phenotype table (eid + trait columns)")
    p.add_argument("--trait", required=True, help="trait name (stored in the attributes)")
    p.add_argument("--trait-config", required=True, metavar="JSON_OR_FILE",
                   help='trait config as JSON text or a .json file, e.g. \'{"field": 1747, '
                        '"kind": "categorical", "classes": {"blonde": [1], "red": [2]}}\'')
    p.add_argument("--test-fraction", type=_fraction, default=0.2,
                   help="fraction of labeled samples in the fixed test split (default 0.2)")
    p.add_argument("--split-seed", type=_seed, default=0, help="seed of the test split (default 0)")
    p.add_argument("--covariates", metavar="JSON_OR_FILE",
                   help='covariates to store beside the dosages (see cmix.genotypes.covariates), e.g. '
                        '\'{"fields": [21022, 31], "pcs": 10, "pcs_from": "sample_qc"}\'; '
                        "samples missing one are left out")
    p.add_argument("--sample-qc", help="UK Biobank sample QC table (PCs, genotyping array)")
    p.add_argument("--eigenvec", help="cmix pca / plink2 .eigenvec (pcs_from: eigenvec)")
    p.add_argument("--sample-filters", metavar="FILTERS_JSON",
                   help="OUT.filters.json of the `cmix samples` run that made --keep: "
                        "recorded in the store's provenance (with --relatedness)")
    p.add_argument("--relatedness", default="not applied",
                   choices=["kinship table", "KING from genotypes", "not applied"],
                   help="how --keep's unrelated set was chosen, for the provenance record "
                        "(default: not applied)")
    src = p.add_argument_group("where the SNPs came from (the store's provenance)")
    src.add_argument("--discovery", metavar="IDS",
                     help="the trait's discovery set (`cmix gwas --ids-out`): its people are "
                          "left out of the store, which records its size and IDs' sha256")
    src.add_argument("--sumstats", help="the external summary statistics the SNPs were "
                                        "selected from (its file name is recorded)")
    src.add_argument("--overlap", choices=("yes", "no", "unknown"), default="unknown",
                     help="with --sumstats: may its GWAS include this cohort's people "
                          "(default unknown)")
    p.add_argument("--force", action="store_true", help="overwrite an existing store")
    p.add_argument("--out", required=True, help="output store (folder, e.g. trait.zarr)")
    p.set_defaults(func=_run_store)


def _load_trait_config(text: str, trait: str) -> dict:
    """The --trait-config JSON (text starting with ``{`` or ``[``, else a file name),
    checked by :func:`cmix.genotypes.phenotypes.check_trait_config`."""
    from .errors import CmixError
    from .text import parse_json, read_config_text
    from .genotypes.phenotypes import check_trait_config

    source = "--trait-config"
    if not text.lstrip().startswith(("{", "[")):
        path, text = read_config_text(text, "--trait-config expects JSON text or a JSON file")
        source = str(path)
    config = parse_json(text, source)
    if not isinstance(config, dict):
        raise CmixError(f"{source}: the trait config must be a JSON object of trait settings "
                        '(e.g. {"field": 1747, "kind": "categorical", "classes": {...}}), '
                        f"got a JSON {type(config).__name__}")
    check_trait_config(config, trait, source)
    return config


def _load_covariates(text: str | None) -> dict | None:
    """The --covariates JSON (text starting with ``{``, else a file name), checked."""
    from .genotypes.covariates import check_spec
    from .text import parse_json, read_config_text

    if text is None:
        return None
    source = "--covariates"
    if not text.lstrip().startswith(("{", "[")):
        path, text = read_config_text(text, "--covariates expects JSON text or a JSON file")
        source = str(path)
    return check_spec(parse_json(text, source), source)


def _run_store(args):
    from .errors import CmixError
    from .logs import log
    from .genotypes.gwas import snp_source
    from .genotypes.sumstats.selection_files import read_selection_source
    from .readers.sources import GenotypeFiles
    from .genotypes.build_store import StoreInputs, StoreOptions, StoreSamples, build_store

    trait_config = _load_trait_config(args.trait_config, args.trait)
    if args.discovery is not None and args.sumstats is not None:
        raise CmixError("give --discovery (SNPs from the cohort's own discovery GWAS) or "
                        "--sumstats (external summary statistics), not both")
    sample_filters = None
    if args.sample_filters:
        from .genotypes.samples import read_filters_summary

        sample_filters = read_filters_summary(args.sample_filters, args.relatedness)
    summary = build_store(
        args.out, GenotypeFiles(**_genotype_kwargs(args)),
        StoreInputs(snps=args.snps, pheno=args.pheno, trait=args.trait,
                    trait_config=trait_config,
                    snp_source=snp_source(discovery=args.discovery, sumstats=args.sumstats,
                                          overlap=args.overlap,
                                          selection_source=read_selection_source(args.snps))),
        StoreSamples(keep=args.keep, discovery=args.discovery,
                     covariates=_load_covariates(args.covariates), sample_qc=args.sample_qc,
                     eigenvec=args.eigenvec, sample_filters=sample_filters),
        StoreOptions(test_fraction=args.test_fraction, split_seed=args.split_seed,
                     force=args.force))
    log(f"wrote {args.out}: {summary['n_samples']} samples x {summary['n_variants']} SNPs, "
        f"classes {summary['per_class']}, {summary['test']} in the test split")


def _add_gwas(sub):
    p = sub.add_parser(
        "gwas",
        help="GWAS of one trait with plink2 --glm on a held-out discovery set, for `cmix select`",
        description="Draw the trait's discovery set (a stratified, seeded fraction of the kept "
                    "samples with a phenotype and every covariate), run plink2 --glm on it "
                    "per chromosome with the covariates (hide-covar; firth-fallback for a "
                    "binary trait) and merge the results into one gzipped table in the "
                    "BOLT-LMM layout (SNP CHR BP ALLELE1 ALLELE0 A1FREQ INFO BETA SE "
                    "P_BOLT_LMM). See cmix.genotypes.gwas for the GWAS phenotype of each "
                    "trait kind.")
    _add_genotype_args(p, bgen=True)
    p.add_argument("--keep", help="candidate samples (plink --keep list, e.g. unrelated.id)")
    p.add_argument("--extract", help="QC-passed SNPs (.snplist, one ID a line)")
    p.add_argument("--pheno", required=True, help="phenotype table (eid + trait columns)")
    p.add_argument("--trait", required=True, help="trait name")
    p.add_argument("--trait-config", required=True, metavar="JSON_OR_FILE",
                   help="trait config as for `cmix store`")
    p.add_argument("--multiclass", metavar="class_index|CLASS",
                   help="GWAS phenotype of a trait with more than 2 classes: class_index "
                        "(linear on the class index, for ordered classes) or one class "
                        "name (that class vs the others, logistic)")
    p.add_argument("--covariates", metavar="JSON_OR_FILE",
                   help="covariates as for `cmix store` (samples missing one are left out)")
    p.add_argument("--sample-qc", help="UK Biobank sample QC table (PCs, genotyping array)")
    p.add_argument("--eigenvec", help="cmix pca / plink2 .eigenvec (pcs_from: eigenvec)")
    p.add_argument("--discovery-fraction", type=_fraction, default=None,
                   help="test only this stratified fraction of the candidates (the discovery "
                        "set, written to --ids-out); default: all of them")
    p.add_argument("--discovery-seed", type=_seed, default=0,
                   help="seed of the discovery draw (default 0)")
    p.add_argument("--ids-out", help="write the people tested here (#FID IID list)")
    p.add_argument("--plink2", default="plink2", help="plink2 executable (default: on PATH)")
    p.add_argument("--threads", type=_bounded_int(1, MAX_THREADS, "a thread count"), default=1, help="plink2 threads")
    p.add_argument("--out", required=True, help="output summary statistics (.gz)")
    p.set_defaults(func=_run_gwas)


def _run_gwas(args):
    from .logs import log
    from .genotypes.covariates import SampleTables
    from .genotypes.gwas import GwasModel, GwasPeople, Plink2Run, run_gwas
    from .errors import CmixError
    from .readers.sources import GenotypeFiles

    if args.discovery_fraction is not None and args.ids_out is None:
        raise CmixError("--discovery-fraction draws the people the GWAS tests; give "
                        "--ids-out FILE to write them (cmix store --discovery needs them to "
                        "keep the discovery people out of the trait's store)")
    model = GwasModel(trait=args.trait,
                      trait_config=_load_trait_config(args.trait_config, args.trait),
                      multiclass=args.multiclass, covariates=_load_covariates(args.covariates))
    people = GwasPeople(keep=args.keep, discovery_fraction=args.discovery_fraction,
                        discovery_seed=args.discovery_seed, ids_out=args.ids_out)
    s = run_gwas(args.out, GenotypeFiles(**_genotype_kwargs(args)), model,
                 SampleTables(pheno=args.pheno, sample_qc=args.sample_qc, eigenvec=args.eigenvec),
                 people=people, extract=args.extract,
                 plink2=Plink2Run(exe=args.plink2, threads=args.threads))
    log(f"gwas {args.trait}: {s['n_tested']} people tested ({s['phenotype']})")


def _add_verify(sub):
    p = sub.add_parser(
        "verify",
        help="check a store's files against its checksums and every dosage's range",
        description="Check every array file of a cmix store against the size and sha256 "
                    "recorded when it was written, then decode every call_dosage chunk and "
                    "check its values lie in the store's encoding (-1..2 for hard calls; 0..250 or 255 "
                    "missing for fractional dosages). Exit 1 naming the damaged files. "
                    "(`cmix train` does the checksum part before every run.)")
    p.add_argument("store", nargs="+", help="cmix Zarr store(s)")
    p.set_defaults(func=_run_verify)


def _run_verify(args):
    from .logs import log
    from .store.verify import verify_store

    for path in args.store:
        checked = verify_store(path, decode=True)
        log(f"{path}: OK ({checked['files']} files, {checked['bytes'] / 2**20:.1f} MiB, "
            "all dosages within the store's encoding)")


# --------------------------------------------------------------------------- samples
def _add_samples(sub):
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
    p.set_defaults(func=_run_samples)


def _run_samples(args):
    from .readers.plink import bfile_prefix
    from .genotypes.samples import run_samples

    prefix = bfile_prefix(args.fam)
    from pathlib import Path

    fam = Path(args.fam) if args.fam.endswith(".psam") else prefix.with_name(prefix.name + ".fam")
    run_samples(fam, args.out, sqc_path=args.sqc, withdrawn_path=args.withdrawn,
                headerless=args.sqc_headerless, ancestry=not args.no_ancestry_filter)


# --------------------------------------------------------------------------- qc
def _hwe_args(values):
    """--hwe P [midp] [keep-fewhet] -> (p, midp, keep_fewhet)."""
    p = _fraction(values[0])
    mods = values[1:]
    bad = [m for m in mods if m not in ("midp", "keep-fewhet")]
    if bad or len(set(mods)) != len(mods):
        raise argparse.ArgumentTypeError(
            f"--hwe modifiers must be 'midp' and/or 'keep-fewhet', got {' '.join(mods)!r}")
    return p, "midp" in mods, "keep-fewhet" in mods


def _add_qc(sub):
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
    _add_genotype_args(p)
    p.add_argument("--keep", help="keep only these samples (plink --keep file: FID IID or IID)")
    p.add_argument("--remove", help="remove these samples (plink --remove file)")
    p.add_argument("--maf", type=_fraction, nargs="?", const=0.01, default=None,
                   help="remove variants with minor allele frequency < MAF (default 0.01)")
    p.add_argument("--hwe", nargs="+", metavar="P [midp] [keep-fewhet]", default=None,
                   help="remove variants with HWE exact test p < P (founders only)")
    p.add_argument("--geno", type=_fraction, nargs="?", const=0.1, default=None,
                   help="remove variants with missing call rate > T (default 0.1)")
    p.add_argument("--mind", type=_fraction, nargs="?", const=0.1, default=None,
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
    p.add_argument("--threads", type=_bounded_int(1, MAX_THREADS, "a thread count"), default=None,
                   help="threads (default: all cores)")
    p.add_argument("--out", required=True, help="output prefix")
    p.set_defaults(func=_run_qc, _parser=p)


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
    from .genotypes.qc import HweSamples, QcFilters, run_qc_cli
    from .readers.sources import GenotypeFiles

    hwe_p, midp, fewhet = hwe if hwe is not None else (None, False, False)
    filters = QcFilters(maf=args.maf, hwe=hwe_p, hwe_midp=midp, hwe_keep_fewhet=fewhet,
                        geno=args.geno, mind=args.mind, autosome_only=args.autosome)
    hwe_samples = HweSamples(groups=args.hwe_groups, group_column=args.hwe_group_column,
                             keep=args.hwe_keep)
    run_qc_cli(GenotypeFiles(**_genotype_kwargs(args)), args.out, filters, keep=args.keep,
               remove=args.remove, hwe_samples=hwe_samples, threads=args.threads)


# ------------------------------------------------------------------ check-config
def _add_check_config(sub):
    p = sub.add_parser(
        "check-config",
        help="check a workflow config file before a run: prints its first problem, or a "
             "one-line summary",
        description="Run the workflow's pre-flight checks (cmix.preflight: the file is UTF-8 "
                    "YAML with no key twice, the schema, the grid, names, trait definitions, "
                    "inputs present and readable, budgets and PCs against the phenotype and "
                    "sample-QC tables) on CONFIG, as `snakemake --configfile CONFIG` does "
                    "while it reads the workflow. Paths are read relative to the working "
                    "directory. A problem is printed as one line, exit status 1; a config "
                    "that passes prints one summary line, exit status 0.")
    p.add_argument("config", help="workflow config file (YAML), e.g. config/ukb.yaml")
    p.set_defaults(func=_run_check_config)


def _run_check_config(args):
    from .preflight import check_config_file, summary_line

    print(summary_line(check_config_file(args.config)))


# ------------------------------------------------------------------ install-profile
def _add_install_profile(sub):
    p = sub.add_parser(
        "install-profile",
        help="install a Snakemake profile to ~/.config/snakemake/NAME (slurm: fitted to "
             "the cluster)",
        description="Install the profile NAME shipped in cmix/profiles/ (package data) so "
                    "that `snakemake --profile NAME` finds it. On a SLURM login node the "
                    "slurm profile is fitted to the cluster (scontrol, sacctmgr): your "
                    "default account, a CPU and a GPU partition, and every rule's threads, "
                    "memory and wall time capped at the largest node and time limit of its "
                    "partition; what it chose and why is printed and kept in the profile's "
                    "header. Without SLURM commands the template is installed as it is.")
    p.add_argument("name", choices=["slurm", "local"], help="profile to install")
    p.add_argument("--dest", default=None,
                   help="target folder (default ~/.config/snakemake/NAME)")
    p.add_argument("--force", action="store_true", help="overwrite an installed profile")
    p.set_defaults(func=_run_install_profile)


def _run_install_profile(args):
    from importlib.resources import files
    from pathlib import Path

    from .atomic import atomic_path
    from .errors import CmixError
    from .logs import log

    src = files("cmix") / "profiles" / args.name / "config.yaml"    # package data
    if not src.is_file():
        raise CmixError(f"{src}: profile not found in the installed cmix package "
                        "(its package data is missing; reinstall cmix)")
    dest = Path(args.dest) if args.dest else Path.home() / ".config" / "snakemake" / args.name
    if (dest / "config.yaml").exists() and not args.force:
        raise CmixError(f"{dest}: a profile is already installed there (use --force to replace it)")
    text = src.read_text()
    fitted = None
    if args.name == "slurm":                # sized to the cluster scontrol reports
        from .slurm import fitted_profile

        fitted = fitted_profile(text)
    with atomic_path(dest / "config.yaml") as tmp:
        tmp.write_text(fitted[0] if fitted else text)
    if fitted:
        for line in fitted[1]:
            log(line)
        log(f"installed the slurm profile, fitted to this cluster, to {dest}")
    elif args.name == "slurm":
        log(f"installed the slurm profile template to {dest}; no SLURM here (scontrol not "
            "found), so edit there: slurm_account, the partitions (slurm_partition), and "
            "threads (set-threads) and mem_mb to fit your nodes (docs/guide/slurm.md)")
    else:
        log(f"installed the {args.name} profile to {dest}")


# ------------------------------------------------------------------------- unrelated
def _add_unrelated(sub):
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
    _add_chroms_arg(p)
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
    p.add_argument("--block-size", type=_positive_int, default=None,
                   help="samples per row strip of the GPU route's int8 products (default "
                        "2048; rounded up to a multiple of 32)")
    p.add_argument("--threads", type=_bounded_int(1, MAX_THREADS, "a thread count"), default=None,
                   help="CPU threads (default: all cores)")
    p.add_argument("--king-tiles", nargs="+", default=None, metavar="TILE",
                   help="gather these cmix king-tile files (every tile of one run) instead "
                        "of computing KING-robust here; same outputs as the one-process run")
    p.set_defaults(func=_run_unrelated)


def _add_king_tile(sub):
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
    _add_chroms_arg(p)
    p.add_argument("--cutoff", default="0.0884", help="as for cmix unrelated")
    p.add_argument("--tile-block", type=_positive_int, required=True,
                   help="samples per block")
    p.add_argument("--tile", type=int, nargs=2, required=True, metavar=("I", "J"),
                   help="the tile's two block numbers, from 0, I <= J")
    p.add_argument("--out", required=True, help="tile file to write (.npz)")
    p.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"])
    p.add_argument("--threads", type=_positive_int, default=None,
                   help="CPU threads (default: all cores)")
    p.set_defaults(func=_run_king_tile)


def _run_king_tile(args):
    from .genotypes.relatedness.tiles import king_tile
    from .readers.chroms import parse_chroms
    from .readers.sources import GenotypeFiles

    if args.threads:
        from .genotypes.kernels import set_numba_threads

        set_numba_threads(args.threads)
    genotypes = GenotypeFiles(bfile=args.bfile, pfile=args.pfile, fam=args.fam,
                              chroms=parse_chroms(args.chroms))
    king_tile(genotypes, args.out, block=args.tile_block, tile=tuple(args.tile),
              cutoff=args.cutoff, extract=args.extract, keep=args.keep, device=args.device)


def _run_unrelated(args):
    from .errors import CmixError
    from .genotypes.relatedness.unrelated import (unrelated_from_genotypes,
                                                  unrelated_from_table)

    if (os.path.basename(sys.argv[0]) == "cmix" and args.device == "cpu"
            and "scipy.linalg" not in sys.modules):
        # as in _run_qc: numba's first kernel load would import scipy.linalg (0.6 s) to
        # offer BLAS inside jitted code, which the KING kernels never use
        sys.modules["scipy.linalg.cython_blas"] = None
    if args.threads:
        from .genotypes.kernels import set_numba_threads

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
        from .genotypes.relatedness.tiles import unrelated_from_tiles
        from .readers.chroms import parse_chroms
        from .readers.sources import GenotypeFiles

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
def _add_pca(sub):
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
    _add_genotype_args(p)
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
    p.add_argument("--pcs", type=_positive_int, default=10, help="number of PCs (default 10)")
    p.add_argument("--seed", type=_seed, default=0, help="seed of the random start (default 0)")
    p.add_argument("--threads", type=_bounded_int(1, MAX_THREADS, "a thread count"), default=None,
                   help="threads (default: all cores)")
    p.add_argument("--out", required=True, help="output prefix")
    p.set_defaults(func=_run_pca)


def _run_pca(args):
    from .genotypes.pca.prune import PruneSettings
    from .genotypes.pca.regions import HIGH_LD_REGIONS
    from .genotypes.pca.run import PcaSettings, PcaVariants, run_pca
    from .readers.sources import GenotypeFiles

    prune = None if args.no_prune else PruneSettings.parse(args.indep_pairwise)
    regions = None if args.no_exclude_regions else (args.exclude_regions or HIGH_LD_REGIONS)
    run_pca(GenotypeFiles(**_genotype_kwargs(args)), args.out, keep=args.keep,
            project=args.project,
            variants=PcaVariants(extract=args.extract, regions=regions, prune=prune),
            settings=PcaSettings(n_pcs=args.pcs, seed=args.seed, threads=args.threads))


# ------------------------------------------------------------------ outputs
#: The files a prefix --out of each step names (PREFIX + suffix).
_PREFIX_OUTPUTS = {
    "samples": (".keep", ".filters.tsv", ".filters.json"),
    "qc": (".snplist", ".vqc.tsv", ".mindrem.id"),
    "unrelated": (".king.cutoff.in.id", ".king.cutoff.out.id", ".king.summary.tsv", ".kin0"),
    "pca": (".eigenvec", ".eigenval", ".eigenvec.allele", ".acount", ".prune.in",
            ".prune.out"),
}
def _outputs(args) -> list:
    """The outputs a step's command line names (:class:`cmix.outputs.Output`): checked and
    locked by :func:`cmix.outputs.claim_outputs` before the step does any work."""
    from pathlib import Path

    from .outputs import Output

    step, out = args.command, getattr(args, "out", None)
    if step in _PREFIX_OUTPUTS:
        return [Output("--out", out, "prefix", _PREFIX_OUTPUTS[step])]
    if step == "select":
        return [Output("--out", out, suffixes=(".steps.tsv", ".source.json"))]
    if step == "gwas":
        if args.ids_out is None:
            return [Output("--out", out)]
        return [Output("--out", out, suffixes=(".discovery.json",)),
                Output("--ids-out", args.ids_out)]
    if step == "predict":
        return [Output("--out", out)]
    if step in ("simulate", "report"):       # folders they write into, with a manifest
        return [Output("--out", out, "folder", manifest=step)]
    if step == "store":
        return [Output("--out", out, "folder", zarr_store=True)]
    if step == "train":                      # each run folder has its own lock
        from .learn.checkpoints import is_run_folder

        runs = [Output("--out", d, "folder", lock=False, admits=is_run_folder)
                for d in _seed_dirs(args.seed, out).values()]
        shared = ([Output("--shared-encoders", args.shared_encoders, "folder", lock=False)]
                  if args.shared_encoders is not None else [])
        return runs + shared
    if step == "bgen-index":
        return [Output("", f"{f}.bgi") for f in args.bgen]
    if step == "install-profile":
        dest = args.dest if args.dest is not None else str(
            Path.home() / ".config" / "snakemake" / args.name)
        return [Output("--dest", dest, "folder", lock=False)]
    return []


def _inputs(args, outputs) -> list[tuple]:
    """(option, text) of every argument of a step that may name an input file, prefix
    or folder: all but its outputs (:func:`cmix.outputs.input_paths` finds what they name).
    bgen-index's BGEN files are exact paths (their .bgi is its output)."""
    from pathlib import Path

    if args.command == "bgen-index":
        return [("BGEN file", Path(f)) for f in args.bgen]
    flags = {o.flag for o in outputs} | {"--out", "--ids-out", "--dest"}
    pairs = []
    for dest, value in vars(args).items():
        flag = f"--{dest.replace('_', '-')}"
        if flag in flags or dest.startswith("_") or dest in ("func", "command", "name"):
            continue
        pairs += [(flag, v) for v in (value if isinstance(value, list) else [value])
                  if isinstance(v, str)]
    return pairs


# ------------------------------------------------------------------ parser and main
# Each step registers itself here; keep one _add_<step> function per subcommand.
_SUBCOMMANDS = [_add_simulate, _add_check_config, _add_install_profile, _add_samples, _add_qc, _add_unrelated, _add_king_tile,
               _add_pca, _add_gwas, _add_select, _add_bgen_index, _add_store, _add_verify, _add_train,
               _add_predict, _add_report]


def build_parser() -> argparse.ArgumentParser:
    from . import __version__

    parser = argparse.ArgumentParser(
        prog="cmix",
        description="Contrastive Mixup on UK Biobank-style genotypes. Each subcommand is "
                    "one pipeline step; `cmix STEP --help` describes it.")
    parser.add_argument("--version", action="version", version=f"cmix {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="STEP")
    sub.required = True
    for add in _SUBCOMMANDS:
        add(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    import atexit
    import gc

    from .errors import CmixError

    # At exit, before the interpreter's last garbage collections, move every object to
    # gc's permanent generation, so those collections skip the millions of objects of
    # torch, scikit-learn and dask (about 1 s after `import torch`). Every output is
    # written and closed before a step returns; memory goes back to the system at exit.
    atexit.unregister(gc.freeze)
    atexit.register(gc.freeze)
    try:
        parser = build_parser()         # reads the methods, installed plugins included
    except CmixError as err:
        print(f"cmix: error: {err}", file=sys.stderr)
        return 1
    args = parser.parse_args(argv)
    try:
        from .outputs import claim_outputs

        outputs = _outputs(args)
        with claim_outputs(args.command, outputs, _inputs(args, outputs)):
            args.func(args)
    except CmixError as err:
        print(f"cmix {args.command}: error: {err}", file=sys.stderr)
        return 1
    except OSError as err:
        # a file the step could not read or write (a folder, no permission, disk full)
        if err.errno in (errno.ENOSPC, errno.EDQUOT):
            what = "no space left on device"
        elif err.filename is not None:
            what = err.strerror or str(err)
        else:
            raise
        print(f"cmix {args.command}: error: {err.filename or 'output'}: {what}",
              file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"cmix {args.command}: interrupted", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
