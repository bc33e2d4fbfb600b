"""``cmix check-config`` and ``cmix install-profile``: before a workflow run."""

from __future__ import annotations

from pathlib import Path

from ..outputs import Output
from .args import no_outputs


def _profile_outputs(args) -> list[Output]:
    return [Output("--dest", str(_profile_dest(args)), "folder", lock=False)]


def _profile_dest(args) -> Path:
    """--dest, else ~/.config/snakemake/NAME (where snakemake --profile NAME looks)."""
    return Path(args.dest) if args.dest else Path.home() / ".config" / "snakemake" / args.name


# ------------------------------------------------------------------ check-config
def add_check_config(sub):
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
    p.set_defaults(func=_run_check_config, _outputs=no_outputs)


def _run_check_config(args):
    from ..preflight import check_config_file, summary_line

    print(summary_line(check_config_file(args.config)))


# ------------------------------------------------------------------ install-profile
def add_install_profile(sub):
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
    p.set_defaults(func=_run_install_profile, _outputs=_profile_outputs)


def _run_install_profile(args):
    from importlib.resources import files

    from ..atomic import atomic_path
    from ..errors import CmixError
    from ..logs import log

    src = files("cmix") / "profiles" / args.name / "config.yaml"    # package data
    if not src.is_file():
        raise CmixError(f"{src}: profile not found in the installed cmix package "
                        "(its package data is missing; reinstall cmix)")
    dest = _profile_dest(args)
    if (dest / "config.yaml").exists() and not args.force:
        raise CmixError(f"{dest}: a profile is already installed there (use --force to replace it)")
    text = src.read_text()
    fitted = None
    if args.name == "slurm":                # sized to the cluster scontrol reports
        from ..slurm import fitted_profile

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
