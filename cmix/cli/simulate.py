"""``cmix simulate``: a simulated UK Biobank-style cohort into a folder with a manifest."""

from __future__ import annotations

from ..outputs import Output
from .args import bounded_int, MAX_SIMULATED, nonneg_int, positive_int, seed_number


# --------------------------------------------------------------------------- simulate
def add_simulate(sub):
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
    p.add_argument("--n-samples", type=bounded_int(2, MAX_SIMULATED, "a cohort size"),
                   default=2000, help="cohort size (default 2000)")
    p.add_argument("--n-variants", type=bounded_int(1, MAX_SIMULATED, "a SNP count"),
                   default=5000, help="number of SNPs (default 5000)")
    p.add_argument("--n-chrom", type=positive_int, default=None,
                   help="number of autosomes to spread SNPs over (default: up to 22, >= 200 SNPs each)")
    p.add_argument("--n-discovery", type=nonneg_int, default=None,
                   help="size of the separate GWAS discovery cohort (default max(5000, n-samples))")
    p.add_argument("--seed", type=seed_number, default=1, help="random seed (default 1)")
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
    p.set_defaults(func=_run_simulate, _outputs=lambda args: [
        Output("--out", args.out, "folder", manifest="simulate")])


def _run_simulate(args):
    from ..errors import CmixError
    from ..simulate.balding_nichols import simulate_cohort
    from ..simulate.fast import simulate_genotypes_fast

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
        from ..simulate.coalescent import CoalescentDesign, simulate_coalescent_cohort

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
