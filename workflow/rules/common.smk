# Paths, wildcard constraints and arguments; the checks that must fail before any job
# runs are cmix.preflight's, called once below.
import json
import os
import re
import shlex
import sys

from cmix.cli.cohort import PREFIX_OUTPUTS


def fail(msg):
    """Stop before the DAG is built: one line on stderr, exit status 1."""
    sys.exit(f"config error: {msg}")


REPO_DIR = os.path.dirname(workflow.basedir)


def check_config():
    """Every pre-flight check of the config (cmix.preflight, also `cmix check-config`),
    once, while the workflow is read: the first problem stops the run as one line. The
    jobs re-read the Snakefile; they skip reading the phenotype and sample-QC tables,
    which the main process checked."""
    from cmix.errors import CmixError
    from cmix.preflight import check_workflow_config

    try:
        check_workflow_config(
            config,
            REPO_DIR,
            workflow.configfiles or ["config/config.yaml"],
            read_tables=workflow.is_main_process,
        )
    except CmixError as err:
        fail(str(err))


check_config()

OUT = f"results/{config['run_name']}"


def step_file(step, prefix, name):
    """The file ``cmix STEP --out PREFIX`` writes as its output ``name``: PREFIX and the
    suffix the step declares (cmix.cli.cohort.PREFIX_OUTPUTS, also the CLI's checks)."""
    return prefix + PREFIX_OUTPUTS[step][name]


def step_prefix(step, name, path):
    """The --out PREFIX of ``cmix STEP`` whose output ``name`` is ``path``."""
    return path[: -len(PREFIX_OUTPUTS[step][name])]


SAMPLES = f"{OUT}/qc/samples"  # cmix samples --out
VARIANTS = f"{OUT}/qc/variants"  # cmix qc --out (merged over chromosomes)
UNRELATED = f"{OUT}/qc/unrelated"  # cmix unrelated --out
PCS = f"{OUT}/pca/pcs"  # cmix pca --out
SAMPLES_KEEP = step_file("samples", SAMPLES, "keep")
VARIANTS_SNPLIST = step_file("qc", VARIANTS, "snplist")
UNRELATED_KEEP = step_file("unrelated", UNRELATED, "keep")
PCS_EIGENVEC = step_file("pca", PCS, "eigenvec")
SIMULATED = "simulate" in config
TRAITS = list(config["traits"])
TRAIT_DEFINITIONS = config["trait_definitions"]
BUDGETS = [int(b) for b in config["budgets"]]
SEEDS = [int(s) for s in config["seeds"]]
METHODS = list(config["methods"])


def network_methods(methods):
    """The methods of ``methods`` that train a torch network (GPU jobs on a cluster,
    rule train); the others fit scikit-learn or numpy models (rule train_cpu)."""
    from cmix.learn.methods import METHODS as REGISTRY

    return [m for m in methods if m in REGISTRY and REGISTRY[m].network]


GPU_METHODS = network_methods(METHODS)
CPU_METHODS = [m for m in METHODS if m not in GPU_METHODS]
# the {method} wildcard of rule train (networks) and of rule train_cpu (the others)
GPU_METHOD = "{method,%s}" % ("|".join(GPU_METHODS) or "NONE")
CPU_METHOD = "{method,%s}" % ("|".join(CPU_METHODS) or "NONE")
# covariates stored beside the dosages (cmix.genotypes.covariates); PCs from the sample QC
COVARIATES = config.get("covariates") or {}
# traits whose SNPs come from the cohort's own discovery GWAS (rules/discovery.smk)
DISCOVERY = config.get("discovery") or {}
DISCOVERY_TRAITS = [t for t in DISCOVERY.get("traits", []) if t in TRAITS]
RUNS_PER_JOB = int(config["train"].get("runs_per_job", 1))
QC_CHROMS = [str(c) for c in config["variant_qc"].get("chromosomes", range(1, 23))]
# the manifest of fetchable public files (rule fetch_resource), relative to the repository
FETCH_MANIFEST = os.path.join(
    workflow.basedir,
    "..",
    config.get("fetch_manifest", "resources/sumstats.manifest.tsv"),
)
if not os.path.isfile(FETCH_MANIFEST):
    fail(
        f"fetch_manifest: {os.path.normpath(FETCH_MANIFEST)} not found (a path relative "
        "to the repository, or absolute)"
    )
FETCHABLE = [
    line.split("\t")[0]
    for line in open(FETCH_MANIFEST)
    if line.strip() and not line.startswith("#")
][1:]
# variant QC jobs: one per chromosome, or one ("all") over the whole .bed
QC_JOBS = QC_CHROMS if config["variant_qc"].get("split_by_chrom", False) else ["all"]
INPUTS = {} if SIMULATED else (config.get("inputs") or {})
CHROM = "{chrom}"  # the chromosome field of per-chromosome file patterns


def pca_regions():
    """The long-range LD region list for `cmix pca`: a path as given (relative to the
    working directory, else to the repository, where the shipped list lives), or None
    for `exclude_regions: none`."""
    path = config["pca"]["exclude_regions"]
    if path == "none":
        return None
    if os.path.isabs(path) or os.path.exists(path):
        return path
    return os.path.join(REPO_DIR, path)


PCA_REGIONS = pca_regions()


wildcard_constraints:
    trait="|".join(TRAITS) if TRAITS else "NONE",
    budget=r"\d+",
    seed=r"\d+",
    method="|".join(METHODS) if METHODS else "NONE",
    chrom="|".join(QC_JOBS),
    file="|".join(re.escape(f) for f in FETCHABLE) if FETCHABLE else "NONE",


def genotype_source():
    """("bfile" or "pfile", prefix or {chrom} pattern) of the genotype calls."""
    if SIMULATED:
        return "bfile", f"{OUT}/cohort/genotypes"
    key = "pfile" if "pfile" in INPUTS else "bfile"
    return key, INPUTS[key]


def fam_file():
    """The samples of the genotype calls: inputs.fam, else the trio's .fam / .psam."""
    key, src = genotype_source()
    if INPUTS.get("fam"):
        return INPUTS["fam"]
    return src + (".fam" if key == "bfile" else ".psam")


def per_chrom(path, chroms):
    return [path.replace(CHROM, c) for c in chroms] if CHROM in path else [path]


def genotype_files(chrom="all"):
    """Input files of the genotype calls: one chromosome's (a QC job) or all of them."""
    key, src = genotype_source()
    exts = (".bed", ".bim") if key == "bfile" else (".pgen", ".pvar")
    chroms = QC_CHROMS if chrom == "all" else [chrom]
    return [p + e for p in per_chrom(src, chroms) for e in exts] + [fam_file()]


def genotype_args(chrom=None):
    """`cmix` arguments for the genotype calls: with a pattern, `--chroms` of its
    chromosomes; for a QC job (``chrom``), `--chroms` of its one chromosome."""
    key, src = genotype_source()
    args = [f"--{key}", src] + (["--fam", INPUTS["fam"]] if INPUTS.get("fam") else [])
    if chrom is not None and chrom != "all":
        return args + ["--chroms", chrom]
    return args + (["--chroms", *QC_CHROMS] if CHROM in src else [])


def covariate_args():
    """`--covariates SPEC` of the config's covariates ([] without). A param apart from
    the covariate files (:func:`covariate_file_args`): Snakemake reruns a job when a
    param changes, but not a param computed from its input."""
    return ["--covariates", json.dumps(COVARIATES)] if COVARIATES else []


def covariate_file_args(input):
    """`--sample-qc` / `--eigenvec` of a job's covariate inputs ([] for those it lacks)."""
    return (["--sample-qc", input.sample_qc] if input.sample_qc else []) + (
        ["--eigenvec", input.eigenvec] if input.eigenvec else []
    )


def bgen_files():
    """The imputed BGEN files, their .bgi indexes, .sample and mfi files ([] without)."""
    if "bgen" not in INPUTS:
        return []
    files = [p + e for p in per_chrom(INPUTS["bgen"], QC_CHROMS) for e in ("", ".bgi")]
    files += (
        per_chrom(INPUTS.get("bgen_sample", ""), QC_CHROMS)
        if INPUTS.get("bgen_sample")
        else []
    )
    return files + (per_chrom(INPUTS["mfi"], QC_CHROMS) if INPUTS.get("mfi") else [])


def selection_args():
    """`cmix select` genotype arguments: the imputed BGEN (INFO filter instead of the
    array QC) when configured, else the genotype calls with the QC-passed SNPs."""
    if "bgen" not in INPUTS:
        return genotype_args()
    args = bgen_args()
    if config["selection"].get("min_info") is not None:
        args += ["--min-info", config["selection"]["min_info"]]
        args += ["--mfi", INPUTS["mfi"]] if INPUTS.get("mfi") else []
    return args


def bgen_args():
    """`--bgen` and its samples: the .sample when configured, else the IDs it embeds."""
    chroms = ["--chroms", *QC_CHROMS] if CHROM in INPUTS["bgen"] else []
    sample = ["--sample", INPUTS["bgen_sample"]] if INPUTS.get("bgen_sample") else []
    return ["--bgen", INPUTS["bgen"], *sample, "--fam", fam_file(), *chroms]


def fetchable(path):
    """Whether rule fetch_resource makes `path` (resources/sumstats/FILE of the manifest)."""
    folder, name = os.path.split(os.path.normpath(path))
    return folder == os.path.join("resources", "sumstats") and name in FETCHABLE


def input_path(key):
    """A cohort input: the simulated one in the demo, the configured one otherwise."""
    if SIMULATED:
        sim = f"{OUT}/cohort"
        return {
            "sample_qc": f"{sim}/sample_qc.tsv",
            "withdrawn": f"{sim}/withdrawn.txt",
            "kinship": f"{sim}/kinship.dat",
            "phenotypes": f"{sim}/phenotypes.tsv",
        }[key]
    return config["inputs"].get(key)


def king_tile_files(wildcards):
    """The KING tiles `cmix unrelated` gathers: one file per pair of blocks (i, j), i <= j,
    of relatedness.tile_block samples among those sample_filters kept; [] (KING in one
    process) without tile_block, with a kinship table, or when the samples fit one block.
    """
    block = config["relatedness"].get("tile_block")
    if not block or input_path("kinship"):
        return []
    from cmix.genotypes.relatedness.tiles import tile_list

    with open(checkpoints.sample_filters.get().output.keep) as f:
        n_samples = sum(1 for line in f if line.strip() and not line.startswith("#"))
    tiles = tile_list(n_samples, block)
    if len(tiles) == 1:
        return []
    return [f"{OUT}/qc/king_tiles/tile.{i}.{j}.npz" for i, j in tiles]


def hwe_groups_table():
    """The table of variant_qc.hwe_groups: a cohort input named by key (phenotypes,
    sample_qc) or a path; None when the HWE test is pooled."""
    groups = config["variant_qc"].get("hwe_groups")
    if not groups:
        return None
    table = groups["table"]
    return input_path(table) if table in ("phenotypes", "sample_qc") else table


def hwe_sample_files():
    """The files that say where variant QC takes the HWE test (rule inputs)."""
    keep = config["variant_qc"].get("hwe_keep")
    return [f for f in (hwe_groups_table(), keep) if f]


def hwe_sample_args():
    """cmix qc's --hwe-groups / --hwe-group-column / --hwe-keep for the config."""
    qc, args = config["variant_qc"], []
    if qc.get("hwe_groups"):
        args += [
            "--hwe-groups",
            hwe_groups_table(),
            "--hwe-group-column",
            qc["hwe_groups"]["column"],
        ]
    if qc.get("hwe_keep"):
        args += ["--hwe-keep", qc["hwe_keep"]]
    return args


def sumstats_path(trait):
    if trait in DISCOVERY_TRAITS:
        return f"{OUT}/discovery/{trait}.sumstats.gz"
    if SIMULATED:
        return f"{OUT}/cohort/sumstats/{trait}.txt.gz"
    return config["inputs"]["sumstats"][trait]


def bfile_files(prefix):
    return multiext(prefix, ".bed", ".bim", ".fam")


def run_dir(trait="{trait}", method="{method}", budget="{budget}", seed="{seed}"):
    return f"{OUT}/runs/{trait}/{method}/budget{budget}/seed{seed}"


def all_metrics():
    """metrics.json of every trait x method x budget x seed run."""
    return expand(
        f"{run_dir()}/metrics.json",
        trait=TRAITS,
        method=METHODS,
        budget=BUDGETS,
        seed=SEEDS,
    )


def pca_outputs():
    """OUT.eigenvec/.eigenval/.eigenvec.allele/.acount of `cmix pca`, and the pruned
    variant lists when pruning is on."""
    names = ["eigenvec", "eigenval", "allele", "acount"]
    if config["pca"]["indep_pairwise"]:
        names += ["prune_in", "prune_out"]
    return [step_file("pca", PCS, name) for name in names]


def final_outputs():
    """Every run's metrics, and the per-trait stores themselves: a store deleted by hand
    is then rebuilt, and being newer than its runs' metrics, reruns that trait's jobs.
    The genetic PCs, for the covariates that use them.
    """
    return (
        all_metrics()
        + expand(f"{OUT}/traits/{{trait}}.zarr", trait=TRAITS)
        + [f"{OUT}/report/report.html"]
        + (list(pca_outputs()) if pca_reads_the_calls() else [])
    )


def pca_reads_the_calls():
    """Whether the PCs are a final output by themselves: for one .bed/.bim/.fam trio.
    For per-chromosome sets or .pgen `cmix pca` runs when a trait's covariates use its
    PCs (covariates: pcs_from: eigenvec)."""
    key, src = genotype_source()
    return key == "bfile" and CHROM not in src and not INPUTS.get("fam")


def packed_group(name):
    """The group ``name`` of the training jobs ("train", the networks; "train_cpu", the
    scikit-learn methods), each running the seeds of one trait, method and budget;
    config `train: runs_per_job` sets how many runs one submitted job holds at most, in
    whole training jobs (at least one: runs_per_job // number of seeds). Snakemake takes
    group sizes only from --group-components and sets them after reading the Snakefile,
    so the config's value is added when the DAG first asks for a group; a
    --group-components NAME=N given by the user wins."""
    settings = workflow.group_settings
    if name not in settings.group_components:
        jobs = max(1, RUNS_PER_JOB // len(SEEDS))
        settings.group_components = dict(settings.group_components, **{name: jobs})
    return name


# The training jobs packed into one SLURM job run one at a time on its one GPU: a lock
# on the node, named for the allocation ($SLURM_JOB_ID; no lock outside SLURM), whose file
# each holder removes as it lets go (cmix.slurm_jobs.one_at_a_time: none is left behind). Snakemake no longer passes the
# profile's `resources: gpu: 1` to the processes inside a submitted job, which then
# started all of its jobs at once, and sized its job step (srun) for one GPU per training
# job, more than the allocation holds: the limit is restored here.
if not workflow.is_main_process and "gpu" not in workflow.global_resources:
    workflow.register_resource("gpu", 1)
# (the interpreter of this Snakemake, whose cmix the workflow imports)
ONE_AT_A_TIME = "${SLURM_JOB_ID:+%s -m cmix.slurm_jobs} " % shlex.quote(sys.executable)


# On a SLURM run (snakemake-executor-plugin-slurm): before the first submission, every
# job must fit a node of its partition (a job that fits none pends for ever, reason
# PartitionConfig, with no word from Snakemake); when the run stops on an error or
# Ctrl-C, jobs of the run still queued are cancelled (the plugin cancels only those it
# was tracking at that moment) and each failed job is named with its SLURM state.
def on_slurm():
    plugin = workflow.executor_plugin
    return workflow.is_main_process and plugin is not None and plugin.name == "slurm"


def slurm_requests():
    """(rule, partition, threads, mem_mb, GPUs) of each rule the run submits, as
    Snakemake will ask for them: a packed group of train_cpu jobs runs them side by side
    and asks for their sum (train's run one at a time on the GPU: the largest one)."""
    jobs = [job for job in workflow.dag.needrun_jobs() if not job.is_local]
    requests = {}
    for job in jobs:
        name = job.rule.name
        res = job.resources
        values = [
            res.get("slurm_partition"),
            job.threads,
            res.get("mem_mb", 0),
            res.get("gpu", 0),
        ]
        if name in requests or not values[0]:
            continue
        if all(isinstance(v, (int, str)) for v in values):
            n = 1
            if name == "train_cpu":
                n = min(
                    int(workflow.group_settings.group_components.get(name, 1)),
                    sum(j.rule.name == name for j in jobs),
                )
            part, threads, mem, gpu = values
            requests[name] = (name, part, n * threads, n * mem, gpu)
    return list(requests.values())


def check_slurm_fits():
    """Stop before any submission, one line per rule, when a rule's request exceeds
    every node of its partition."""
    from cmix.errors import CmixError
    from cmix.slurm import oversized, read_cluster

    try:
        cluster = read_cluster()
    except CmixError as err:
        print(f"cmix: requests not checked against the cluster: {err}", file=sys.stderr)
        return
    problems = oversized(slurm_requests(), cluster) if cluster else []
    if problems:
        sys.exit(
            "\n".join(f"SLURM profile error: {p}" for p in problems)
            + "\nNo job was submitted. Lower these requests in the profile (set-threads, "
            + "set-resources), or run `cmix install-profile slurm --force` to fit it to "
            + "this cluster (docs/guide/slurm.md)."
        )


def cancel_queued_jobs(logfile):
    """scancel, in one call, every job of this run's SLURM run ID (from the log) that is
    still queued or running; name each job that failed, and how."""
    from cmix.slurm_jobs import cancel_run_jobs

    cancel_run_jobs(logfile)
