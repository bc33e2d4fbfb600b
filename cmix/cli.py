"""The ``cmix`` command: one subcommand per pipeline step, each a thin shell over the package.

Imports of heavy modules happen inside each subcommand, so ``cmix --help`` and the
start-up of every step stay fast. A :class:`cmix.io.CmixError` (a user's mistake) is
printed as one line, ``cmix <step>: error: ...``, with exit status 1.
"""

from __future__ import annotations

import argparse
import sys


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value}")
    return value


def _nonneg_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer >= 0, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected an integer >= 0, got {value}")
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
        description="Simulate a UK Biobank-like cohort with LD blocks, a realistic allele "
                    "frequency spectrum, planted Hardy-Weinberg failures, missing calls, "
                    "related individuals made by inheritance, four traits with UKB codings "
                    "and GWAS summary statistics from a separate discovery cohort.")
    p.add_argument("--out", required=True, help="output folder (created if needed)")
    p.add_argument("--n-samples", type=_positive_int, default=2000, help="cohort size (default 2000)")
    p.add_argument("--n-variants", type=_positive_int, default=5000, help="number of SNPs (default 5000)")
    p.add_argument("--n-chrom", type=_positive_int, default=None,
                   help="number of autosomes to spread SNPs over (default: up to 22, >= 200 SNPs each)")
    p.add_argument("--n-discovery", type=_nonneg_int, default=None,
                   help="size of the separate GWAS discovery cohort (default max(5000, n-samples))")
    p.add_argument("--seed", type=int, default=1, help="random seed (default 1)")
    p.add_argument("--fast", action="store_true",
                   help="genotypes only, no LD, relatives or traits: for large benchmark cohorts")
    p.set_defaults(func=_run_simulate)


def _run_simulate(args):
    from .simulate import simulate_cohort, simulate_genotypes_fast

    if args.fast:
        simulate_genotypes_fast(args.out, args.n_samples, args.n_variants, seed=args.seed)
    else:
        simulate_cohort(args.out, n_samples=args.n_samples, n_variants=args.n_variants,
                        n_chrom=args.n_chrom, n_discovery=args.n_discovery, seed=args.seed)


# --------------------------------------------------------------------------- train
def _add_train(sub):
    p = sub.add_parser(
        "train",
        help="train Contrastive Mixup (or a baseline) on one trait store for one labeled "
             "budget and seed; writes metrics.json",
        description="Split the store's training rows into a stratified labeled subset of "
                    "BUDGET samples (validation carved from it) and unlabeled rows, train the "
                    "method, evaluate on the store's fixed test split. Checkpoints every "
                    "epoch; rerunning the same command resumes.")
    p.add_argument("--store", required=True, help="per-trait Zarr store (cmix store)")
    p.add_argument("--budget", required=True, type=_positive_int,
                   help="number of labeled training samples")
    p.add_argument("--seed", required=True, type=int, help="seed of the labeled subset and training")
    p.add_argument("--method", default="cmix",
                   help="cmix (Contrastive Mixup, default) or mlp (supervised MLP baseline)")
    p.add_argument("--config", default=None,
                   help="YAML or JSON file of config keys overriding the defaults")
    p.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"],
                   help="auto (CUDA if available), cpu or cuda")
    p.add_argument("--resume", action="store_true",
                   help="continue from the checkpoint in --out (required to exist)")
    p.add_argument("--out", required=True, help="run folder (metrics.json, train_log.jsonl, checkpoint.pt)")
    p.set_defaults(func=_run_train)


def _run_train(args):
    from .train import train_run

    train_run(args.store, args.budget, args.seed, args.out, method=args.method,
              config_path=args.config, device=args.device, resume=args.resume)


# ------------------------------------------------------------------ parser and main
# Each step registers itself here; keep one _add_<step> function per subcommand.
_SUBCOMMANDS = [_add_simulate, _add_train]


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
    from .io import CmixError

    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        args.func(args)
    except CmixError as err:
        print(f"cmix {args.command}: error: {err}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"cmix {args.command}: interrupted", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
