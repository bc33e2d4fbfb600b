"""Argument types, the genotype options and the output declarations shared by the
steps' parsers: each type is an argparse ``type=`` that refuses a bad value with one
line naming what was expected."""

from __future__ import annotations

import argparse

from ..outputs import Output


def file_output(args) -> list[Output]:
    """A step's outputs when it writes the one file --out names."""
    return [Output("--out", args.out)]


def no_outputs(args) -> list[Output]:
    """A step's outputs when it writes none (it checks or prints)."""
    return []


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value}")
    return value


def bounded_int(low: int, high: int, what: str):
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


def nonneg_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer >= 0, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected an integer >= 0, got {value}")
    return value


MAX_SEED = 2 ** 32 - 1


def seed_number(text: str) -> int:
    """A seed: an integer in [0, 2^32 - 1] (numpy's seeding takes no negative one, and
    the random streams keep 32 bits, so a larger seed would repeat a smaller one's)."""
    value = nonneg_int(text)
    if value > MAX_SEED:
        raise argparse.ArgumentTypeError(f"expected a seed <= 2^32 - 1, got {value}")
    return value


def fraction(text: str) -> float:
    """A number in [0, 1] (thresholds such as --maf, --geno, --mind)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number between 0 and 1, got {text!r}") from None
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"expected a number between 0 and 1, got {value}")
    return value


# ------------------------------------------------------------------------- genotypes
CHROMS_HELP = ("only these chromosomes, as plink2 --chr: codes 1-22, X, Y, XY, MT (chr1 "
                "and 01 read as 1), comma lists and ranges (e.g. 1-4,22, or 1 2 3); with a "
                "{chrom} pattern only their files are read (default for a pattern: 1-22, "
                "else all)")


def add_chroms_arg(p):
    p.add_argument("--chroms", nargs="+", metavar="SPEC", default=None, help=CHROMS_HELP)


def add_genotype_args(p, *, bgen: bool = False, fam: bool = True):
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
    add_chroms_arg(g)
    if bgen:
        g.add_argument("--bgen", help="BGEN file (v1.1-v1.3), or a {chrom} pattern (e.g. "
                                      "ukb_imp_chr{chrom}_v3.bgen), each with its .bgi index")
        g.add_argument("--sample", help="the .sample file of the BGEN (or a {chrom} pattern; "
                                        "default: the sample IDs the BGEN embeds)")


def genotype_kwargs(args) -> dict:
    """The genotype arguments of a step as keyword arguments, --chroms parsed."""
    from ..readers.chroms import parse_chroms
    from ..errors import CmixError

    given = [k for k in ("bfile", "pfile", "bgen") if getattr(args, k, None) is not None]
    if len(given) != 1:
        names = "--bfile, --pfile" + (" or --bgen" if hasattr(args, "bgen") else "")
        raise CmixError(f"give exactly one of {names} (got {len(given) or 'none'})")
    kwargs = {k: getattr(args, k, None) for k in ("bfile", "pfile", "fam", "bgen", "sample")
              if getattr(args, k, None) is not None}
    chroms = parse_chroms(getattr(args, "chroms", None))
    return {**kwargs, "chroms": chroms} if chroms is not None else kwargs
