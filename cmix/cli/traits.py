"""The per-trait steps: ``cmix gwas`` (a discovery GWAS), ``cmix select`` (the top
SNPs of summary statistics), ``cmix store`` (the trait's Zarr store), ``cmix verify``
and ``cmix bgen-index``."""

from __future__ import annotations

from ..outputs import Output
from .args import (MAX_THREADS, add_genotype_args, bounded_int, file_output, fraction,
                   genotype_kwargs, no_outputs, positive_int, seed_number)


def _bgi_outputs(args) -> list[Output]:
    return [Output("", f"{f}.bgi") for f in args.bgen]


def _select_outputs(args) -> list[Output]:
    return [Output("--out", args.out, suffixes=(".steps.tsv", ".source.json"))]


def _store_outputs(args) -> list[Output]:
    return [Output("--out", args.out, "folder", zarr_store=True)]


def _gwas_outputs(args) -> list[Output]:
    if args.ids_out is None:
        return file_output(args)
    return [Output("--out", args.out, suffixes=(".discovery.json",)),
            Output("--ids-out", args.ids_out)]


def add_bgen_index(sub):
    p = sub.add_parser(
        "bgen-index",
        help="write the .bgi index (bgenix's SQLite format) that cmix reads a BGEN through",
        description="Index BGEN files (v1.1-v1.3) as `bgenix -index` does: FILE.bgi beside each, "
                    "listing every variant's position and byte range (only the variant "
                    "headers are read).")
    p.add_argument("bgen", nargs="+", help="BGEN file(s)")
    p.set_defaults(func=_run_bgen_index, _outputs=_bgi_outputs)


def _run_bgen_index(args):
    from ..readers.bgen import write_bgi
    from ..logs import log

    for path in args.bgen:
        log(f"wrote {write_bgi(path)}")


# ---------------------------------------------------------------------------- select
def add_select(sub):
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
    add_genotype_args(p, bgen=True)
    p.add_argument("--extract", help="QC-passed SNPs (.snplist, one ID a line)")
    p.add_argument("--min-info", type=fraction, default=None,
                   help="keep imputed variants with INFO >= this (from --mfi, else the "
                        "sumstats' INFO column); replaces the array QC for --bgen")
    p.add_argument("--mfi", help="UK Biobank imputation mfi file, or a {chrom} pattern "
                                 "(ukb_mfi_chr{chrom}_v3.txt), giving INFO for --min-info")
    p.add_argument("--top", type=positive_int, default=1000, help="SNPs to keep (default 1000)")
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
    p.add_argument("--clump-r2", type=fraction, default=0.5, help="r2 threshold (default 0.5)")
    p.add_argument("--clump-kb", type=float, default=250.0, help="window in kb (default 250)")
    p.add_argument("--clump-p1", type=fraction, default=1.0,
                   help="p threshold for index SNPs (default 1)")
    p.add_argument("--clump-p2", type=fraction, default=None,
                   help="p threshold for clumped SNPs (default: --clump-p1)")
    p.add_argument("--keep", help="samples whose genotypes give the clumping r2 "
                                  "(plink --keep list, e.g. unrelated.id; default all)")
    p.add_argument("--out", required=True, help="output table (tab-separated)")
    p.set_defaults(func=_run_select, _outputs=_select_outputs)


def _run_select(args):
    from ..logs import log
    from ..readers.sources import GenotypeFiles
    from ..genotypes.sumstats.select import SelectionOptions, select_snps
    from ..genotypes.sumstats.selection_files import selection_source, write_selection

    column_map = {k: v for k, v in (("id", args.col_id), ("chrom", args.col_chrom),
                                    ("pos", args.col_pos), ("effect_allele", args.col_effect),
                                    ("other_allele", args.col_other), ("beta", args.col_beta),
                                    ("or", args.col_or), ("p", args.col_p),
                                    ("log10p", args.col_log10p)) if v}
    if args.keep is not None and not args.clump:
        from ..errors import CmixError

        raise CmixError(f"--keep {args.keep}: gives the samples of clumping's r2, and no "
                        "--clump was given, so it would change nothing; add --clump, or "
                        "leave --keep out")
    clump = None
    if args.clump:
        clump = {"r2": args.clump_r2, "kb": args.clump_kb, "p1": args.clump_p1,
                 "p2": args.clump_p2}
    selected, steps = select_snps(
        args.sumstats, GenotypeFiles(**genotype_kwargs(args)),
        SelectionOptions(top=args.top, extract=args.extract, column_map=column_map,
                         keep_ambiguous=args.keep_ambiguous, clump_params=clump,
                         keep=args.keep, mfi=args.mfi, min_info=args.min_info))
    out, steps_path = write_selection(args.out, selected, steps,
                                      selection_source(args.sumstats))
    for row in steps.itertuples(index=False):
        log(f"  {row.step}: -{row.n_removed} -> {row.n_remaining}")
    log(f"wrote {out} ({len(selected)} SNPs) and {steps_path}")


# ----------------------------------------------------------------------------- store
def add_store(sub):
    p = sub.add_parser(
        "store",
        help="write a trait's Zarr store: effect-allele dosages of the labeled kept samples",
        description="Label the kept samples for one trait (see cmix.genotypes.phenotypes for the trait "
                    "config), fix a stratified test split, and write the dosages of the "
                    "selected SNPs' effect alleles (int8, -1 missing) to a chunked, "
                    "compressed Zarr (format 2) store with VCF Zarr names. From a BGEN (or a "
                    ".pgen with dosages) the store holds fractional dosages: uint8 = "
                    "round(expected copies x 125), 255 missing.")
    add_genotype_args(p, bgen=True)
    p.add_argument("--keep", help="samples to use (plink --keep list, e.g. unrelated.id)")
    p.add_argument("--snps", required=True, help="selected SNP table from `cmix select`")
    p.add_argument("--pheno", required=True, help="phenotype table (eid + trait columns)")
    p.add_argument("--trait", required=True, help="trait name (stored in the attributes)")
    p.add_argument("--trait-config", required=True, metavar="JSON_OR_FILE",
                   help='trait config as JSON text or a .json file, e.g. \'{"field": 1747, '
                        '"kind": "categorical", "classes": {"blonde": [1], "red": [2]}}\'')
    p.add_argument("--test-fraction", type=fraction, default=0.2,
                   help="fraction of labeled samples in the fixed test split (default 0.2)")
    p.add_argument("--split-seed", type=seed_number, default=0, help="seed of the test split (default 0)")
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
    p.set_defaults(func=_run_store, _outputs=_store_outputs)


def _load_trait_config(text: str, trait: str) -> dict:
    """The --trait-config JSON (text starting with ``{`` or ``[``, else a file name),
    checked by :func:`cmix.genotypes.phenotypes.check_trait_config`."""
    from ..errors import CmixError
    from ..text import parse_json, read_config_text
    from ..genotypes.phenotypes import check_trait_config

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
    from ..genotypes.covariates import check_spec
    from ..text import parse_json, read_config_text

    if text is None:
        return None
    source = "--covariates"
    if not text.lstrip().startswith(("{", "[")):
        path, text = read_config_text(text, "--covariates expects JSON text or a JSON file")
        source = str(path)
    return check_spec(parse_json(text, source), source)


def _run_store(args):
    from ..errors import CmixError
    from ..logs import log
    from ..genotypes.gwas import snp_source
    from ..genotypes.sumstats.selection_files import read_selection_source
    from ..readers.sources import GenotypeFiles
    from ..genotypes.build_store import StoreInputs, StoreOptions, StoreSamples, build_store

    trait_config = _load_trait_config(args.trait_config, args.trait)
    if args.discovery is not None and args.sumstats is not None:
        raise CmixError("give --discovery (SNPs from the cohort's own discovery GWAS) or "
                        "--sumstats (external summary statistics), not both")
    sample_filters = None
    if args.sample_filters:
        from ..genotypes.samples import read_filters_summary

        sample_filters = read_filters_summary(args.sample_filters, args.relatedness)
    summary = build_store(
        args.out, GenotypeFiles(**genotype_kwargs(args)),
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


def add_gwas(sub):
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
    add_genotype_args(p, bgen=True)
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
    p.add_argument("--discovery-fraction", type=fraction, default=None,
                   help="test only this stratified fraction of the candidates (the discovery "
                        "set, written to --ids-out); default: all of them")
    p.add_argument("--discovery-seed", type=seed_number, default=0,
                   help="seed of the discovery draw (default 0)")
    p.add_argument("--ids-out", help="write the people tested here (#FID IID list)")
    p.add_argument("--plink2", default="plink2", help="plink2 executable (default: on PATH)")
    p.add_argument("--threads", type=bounded_int(1, MAX_THREADS, "a thread count"), default=1, help="plink2 threads")
    p.add_argument("--out", required=True, help="output summary statistics (.gz)")
    p.set_defaults(func=_run_gwas, _outputs=_gwas_outputs)


def _run_gwas(args):
    from ..logs import log
    from ..genotypes.covariates import SampleTables
    from ..genotypes.gwas import GwasModel, GwasPeople, Plink2Run, run_gwas
    from ..errors import CmixError
    from ..readers.sources import GenotypeFiles

    if args.discovery_fraction is not None and args.ids_out is None:
        raise CmixError("--discovery-fraction draws the people the GWAS tests; give "
                        "--ids-out FILE to write them (cmix store --discovery needs them to "
                        "keep the discovery people out of the trait's store)")
    model = GwasModel(trait=args.trait,
                      trait_config=_load_trait_config(args.trait_config, args.trait),
                      multiclass=args.multiclass, covariates=_load_covariates(args.covariates))
    people = GwasPeople(keep=args.keep, discovery_fraction=args.discovery_fraction,
                        discovery_seed=args.discovery_seed, ids_out=args.ids_out)
    s = run_gwas(args.out, GenotypeFiles(**genotype_kwargs(args)), model,
                 SampleTables(pheno=args.pheno, sample_qc=args.sample_qc, eigenvec=args.eigenvec),
                 people=people, extract=args.extract,
                 plink2=Plink2Run(exe=args.plink2, threads=args.threads))
    log(f"gwas {args.trait}: {s['n_tested']} people tested ({s['phenotype']})")


def add_verify(sub):
    p = sub.add_parser(
        "verify",
        help="check a store's files against its checksums and every dosage's range",
        description="Check every array file of a cmix store against the size and sha256 "
                    "recorded when it was written, then decode every call_dosage chunk and "
                    "check its values lie in the store's encoding (-1..2 for hard calls; 0..250 or 255 "
                    "missing for fractional dosages). Exit 1 naming the damaged files. "
                    "(`cmix train` does the checksum part before every run.)")
    p.add_argument("store", nargs="+", help="cmix Zarr store(s)")
    p.set_defaults(func=_run_verify, _outputs=no_outputs)


def _run_verify(args):
    from ..logs import log
    from ..store.verify import verify_store

    for path in args.store:
        checked = verify_store(path, decode=True)
        log(f"{path}: OK ({checked['files']} files, {checked['bytes'] / 2**20:.1f} MiB, "
            "all dosages within the store's encoding)")
