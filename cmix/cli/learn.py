"""``cmix train``, ``cmix predict`` and ``cmix report``: the steps over trait stores
and run folders."""

from __future__ import annotations

from ..learn.checkpoints import is_run_folder
from ..outputs import Output
from .args import (MAX_THREADS, add_genotype_args, bounded_int, file_output, fraction,
                   genotype_kwargs, positive_int, seed_number)


def _train_outputs(args) -> list[Output]:
    """Each seed's run folder (each has its own lock) and the shared-encoder folder."""
    runs = [Output("--out", d, "folder", lock=False, admits=is_run_folder)
            for d in seed_dirs(args.seed, args.out).values()]
    shared = ([Output("--shared-encoders", args.shared_encoders, "folder", lock=False)]
              if args.shared_encoders is not None else [])
    return runs + shared


def _report_outputs(args) -> list[Output]:
    return [Output("--out", args.out, "folder", manifest="report")]


# --------------------------------------------------------------------------- train
def add_train(sub):
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
    p.add_argument("--budget", required=True, type=positive_int,
                   help="number of labeled training samples")
    p.add_argument("--seed", required=True, type=seed_number, nargs="+",
                   help="seed of the labeled subset and training; several seeds run in "
                        "this one command (--out then holds {seed})")
    from ..learn.methods import METHODS

    p.add_argument("--method", default="cmix", metavar="METHOD",
                   help="; ".join(f"{m.name}: {m.summary}" for m in METHODS.values())
                   + " (default cmix)")
    p.add_argument("--config", default=None,
                   help="YAML or JSON file of config keys overriding the defaults")
    p.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"],
                   help="auto (CUDA if available), cpu or cuda")
    p.add_argument("--resume", action="store_true",
                   help="continue from the checkpoint in --out (required to exist)")
    p.add_argument("--threads", type=bounded_int(1, MAX_THREADS, "a thread count"), default=None,
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
    p.set_defaults(func=_run_train, _outputs=_train_outputs)


def _run_train(args):
    from ..learn.config import check_validation_rows, read_config_file, resolve_config
    from ..learn.context import Reuse
    from ..learn.harness import train_seeds
    from ..learn.methods import get_method

    run_dirs = seed_dirs(args.seed, args.out)
    config = read_config_file(args.config) if args.config else {}
    method = get_method(args.method)
    where = args.config or "config"
    cfg = resolve_config(config, method.switches, where=where)
    check_validation_rows(cfg.data.val_fraction, args.budget, method.name, method.network,
                          where)
    train_seeds(args.store, args.budget, run_dirs, method=args.method, config=config,
                device=args.device, threads=args.threads,
                reuse=Reuse(args.resume, args.shared_encoders))


def seed_dirs(seeds: list[int], out: str) -> dict[int, str]:
    """Seed -> run folder: ``out`` with the literal ``{seed}`` replaced by the seed (a
    lone seed may go without it)."""
    from ..errors import CmixError

    if len(seeds) > 1 and "{seed}" not in out:
        raise CmixError(f"--out {out}: several seeds need a folder per seed; put the "
                        "literal {seed} in --out (e.g. runs/seed{seed})")
    twice = sorted({seed for seed in seeds if seeds.count(seed) > 1})
    if twice:
        raise CmixError(f"--seed: seed {twice[0]} given twice")
    return {seed: out.replace("{seed}", str(seed)) for seed in seeds}


# ---------------------------------------------------------------------------- predict
def add_predict(sub):
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
    add_genotype_args(p, bgen=True)
    p.add_argument("--pheno", help="phenotype table with the covariate fields (if the run used them)")
    p.add_argument("--sample-qc", help="sample QC table with the PCs / array (if the run used them)")
    pcs = p.add_mutually_exclusive_group()
    pcs.add_argument("--eigenvec", help="a .eigenvec with the new people's PCs (if the run used "
                     "pcs_from: eigenvec)")
    pcs.add_argument("--pca", metavar="PREFIX",
                     help="the cmix pca output prefix the run's PCs came from: the new people "
                          "are projected onto its axes with its saved allele weights and "
                          "frequencies (PREFIX.eigenvec.allele, .acount, .eigenval)")
    p.add_argument("--min-shared", type=fraction, default=0.8,
                   help="least share of the run's variants the file set must have (default 0.8)")
    p.add_argument("--allow-overlap", action="store_true",
                   help="allow people who were training rows of the run")
    p.add_argument("--allow-discovery", action="store_true",
                   help="allow people of the discovery GWAS that chose the run's SNPs (a "
                        "warning gives their count)")
    p.add_argument("--out", required=True, help="output TSV")
    p.set_defaults(func=_run_predict, _outputs=file_output)


def _run_predict(args):
    from ..genotypes.covariates import SampleTables
    from ..readers.sources import GenotypeFiles
    from ..learn.predict import predict

    tables = SampleTables(pheno=args.pheno, sample_qc=args.sample_qc, eigenvec=args.eigenvec)
    predict(args.run, args.out, GenotypeFiles(**genotype_kwargs(args)), tables, pca=args.pca,
            min_shared=args.min_shared, allow_overlap=args.allow_overlap,
            allow_discovery=args.allow_discovery)


# ---------------------------------------------------------------------------- report
def add_report(sub):
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
    grid.add_argument("--budgets", nargs="+", type=positive_int, metavar="N")
    grid.add_argument("--seeds", nargs="+", type=seed_number, metavar="SEED")
    p.set_defaults(func=_run_report, _outputs=_report_outputs)


def _run_report(args):
    from ..errors import CmixError
    from ..text import first_repeated
    from ..report.write import write_report

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
