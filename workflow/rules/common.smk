# Paths, wildcard constraints and the checks that must fail before any job runs.
import json
import os
import re
import shlex
import sys

from snakemake.utils import validate


def fail(msg):
    """Stop before the DAG is built: one line on stderr, exit status 1."""
    sys.exit(f"config error: {msg}")


def check_schema():
    """The config against workflow/schemas/config.schema.yaml: the first problem as one
    line naming the key (no schema dump), then the schema's defaults filled in."""
    import jsonschema
    import yaml

    schema_path = os.path.join(workflow.basedir, "schemas", "config.schema.yaml")
    with open(schema_path) as fh:
        schema = yaml.safe_load(fh)
    error = jsonschema.exceptions.best_match(
        jsonschema.Draft202012Validator(schema).iter_errors(config)
    )
    if error is not None:
        where = ".".join(str(k) for k in error.absolute_path)
        fail(f"{where or 'top level'}: {error.message}{schema_hint(error)}")
    validate(config, schema_path)


def schema_hint(error) -> str:
    """A hint for two schema errors a user can fix at once: a number YAML read as text
    (YAML 1.1 reads 1e-7 as a string; 1.0e-7 is a number), and an unknown key close to
    a known one (its likely spelling)."""
    import difflib

    if error.validator == "type" and isinstance(error.instance, str):
        try:
            float(error.instance)
            return f" (YAML reads {error.instance} as text: write it with a decimal point, e.g. 1.0e-7)"
        except ValueError:
            return ""
    if error.validator == "additionalProperties" and isinstance(error.instance, dict):
        known = list(error.schema.get("properties", {}))
        for key in error.instance:
            if key not in known:
                close = difflib.get_close_matches(str(key), known, n=1)
                if close:
                    return f" (did you mean {close[0]!r}?)"
    return ""


def check_unique_keys():
    """Each config file read (--configfile, else the demo's): a key given twice in one
    mapping, which YAML would resolve silently to the last (a trait definition or a
    setting lost), stops the run naming the file and line."""
    from cmix.errors import CmixError
    from cmix.text import parse_yaml

    for path in workflow.configfiles or ["config/config.yaml"]:
        try:
            with open(path) as fh:
                parse_yaml(fh.read(), str(path))
        except OSError:
            continue  # Snakemake itself names a config file it cannot read
        except CmixError as err:
            fail(str(err))


check_unique_keys()
check_schema()

OUT = f"results/{config['run_name']}"
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

REPO_DIR = os.path.dirname(workflow.basedir)


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


def check_grid_lists():
    """The grid as the jobs will read it: no trait, budget or seed listed twice (after
    reading "100" as 100; a repeat would be one more identical cell, counted twice in
    the report), budgets of at least 2 and seeds from 0 to 2^32 - 1 however they are written,
    trait names that can name files and jobs, the covariates method only with
    covariates, and per-trait input keys that name a defined trait."""
    from cmix.text import first_repeated

    for key, values in (("traits", TRAITS), ("budgets", BUDGETS), ("seeds", SEEDS)):
        repeated = first_repeated(values)
        if repeated is not None:
            fail(f"{key}: {repeated!r} is listed twice; list each once")
    if min(BUDGETS) < 2:
        fail(f"budgets: {min(BUDGETS)} labeled samples; a budget needs at least 2")
    if min(SEEDS) < 0 or max(SEEDS) > 2**32 - 1:
        bad = min(SEEDS) if min(SEEDS) < 0 else max(SEEDS)
        fail(f"seeds: {bad}; seeds are integers from 0 to 2^32 - 1")
    for trait in TRAITS:
        if not re.fullmatch(r"[A-Za-z0-9_.-]+", trait):
            fail(
                f"traits: {trait!r}: a trait name holds letters, digits, '_', '.' and "
                "'-' only (it names files, jobs and command arguments)"
            )
    train_cov = config.get("train", {}).get("config", {}).get("covariates", True)
    if "covariates" in METHODS and not (COVARIATES and train_cov):
        fail(
            "methods: covariates needs covariates to fit: give the covariates section "
            "(and leave train.config.covariates true), or drop the method"
        )
    for key in ("sumstats_overlap", "sumstats_columns"):
        per_trait = INPUTS.get(key)
        if isinstance(per_trait, dict):
            unknown = [t for t in per_trait if t not in TRAIT_DEFINITIONS]
            if unknown:
                fail(
                    f"inputs.{key}: unknown trait {unknown[0]!r}; defined in "
                    f"trait_definitions: {', '.join(TRAIT_DEFINITIONS)}"
                )


def check_config():
    """Problems a user must fix before any job runs: the schema catches types and keys;
    the values a job would refuse go through the cmix validators the jobs run."""
    from cmix.errors import CmixError

    check_grid_lists()
    try:
        check_values()
    except CmixError as err:
        fail(str(err))


def check_values():
    from cmix.genotypes.covariates import check_spec
    from cmix.genotypes.pca import PruneSettings
    from cmix.genotypes.phenotypes import check_trait_config
    from cmix.text import input_file

    for trait in TRAITS:
        if trait not in TRAIT_DEFINITIONS:
            fail(
                f"traits: unknown trait {trait!r}; defined in trait_definitions: "
                f"{', '.join(TRAIT_DEFINITIONS)}"
            )
        check_trait_config(TRAIT_DEFINITIONS[trait], trait, "trait_definitions")
    if config["pca"]["indep_pairwise"]:
        PruneSettings.parse(str(config["pca"]["indep_pairwise"]).split())
    if COVARIATES:
        spec = check_spec(COVARIATES, "covariates")
        if spec["pcs_from"] == "eigenvec" and spec["pcs"] > config["pca"]["n_pcs"]:
            fail(
                f"covariates.pcs: {spec['pcs']} PCs from the pca rule, which computes "
                f"pca.n_pcs = {config['pca']['n_pcs']}"
            )
        from_sqc = (
            spec["array"]
            or spec["batch"]
            or (spec["pcs"] and spec["pcs_from"] == "sample_qc")
        )
        if from_sqc and not SIMULATED and not INPUTS.get("sample_qc"):
            fail(
                "covariates: the PCs (pcs_from: sample_qc), array or batch come from "
                "inputs.sample_qc, which is not given; use pcs_from: eigenvec for PCs "
                "from `cmix pca`"
            )
    if not SIMULATED:
        inputs = config.get("inputs") or fail(
            "'inputs' is required when 'simulate' is absent"
        )
        if "phenotypes" not in inputs:
            fail("inputs.phenotypes is required")
        if ("bfile" in inputs) == ("pfile" in inputs):
            fail("inputs: give the genotype calls as exactly one of bfile or pfile")
        key, src = genotype_source()
        if CHROM in src and not inputs.get("fam"):
            fail(f"inputs.fam: required with a per-chromosome inputs.{key} pattern")
        for path in genotype_files("all") + bgen_files():
            if not os.path.exists(path):
                how = (
                    f"; index the .bgen with `cmix bgen-index`"
                    if path.endswith(".bgi")
                    else ""
                )
                fail(f"inputs: {path} not found{how}")
        if "bgen" in inputs and "bgen_sample" not in inputs:
            fail("inputs.bgen_sample: the .sample file of inputs.bgen is required")
        for key in ("sample_qc", "withdrawn", "phenotypes", "kinship"):
            if inputs.get(key) and not os.path.exists(inputs[key]):
                fail(f"inputs.{key}: {inputs[key]} not found")
            if inputs.get(key):
                input_file(inputs[key], f"inputs.{key}")
        for trait in (t for t in TRAITS if t not in DISCOVERY_TRAITS):
            path = (inputs.get("sumstats") or {}).get(trait)
            if not path:
                fail(
                    f"inputs.sumstats.{trait}: no summary statistics for trait {trait!r}"
                )
            if not os.path.exists(path) and not fetchable(path):
                fail(
                    f"inputs.sumstats.{trait}: {path} not found (nor listed in "
                    f"{FETCH_MANIFEST} to be fetched as resources/sumstats/FILE)"
                )
            if os.path.exists(path):
                input_file(path, f"inputs.sumstats.{trait}")
    from cmix.learn.config import resolve_config

    try:
        resolve_config(config.get("train", {}).get("config", {}), where="train.config")
    except Exception as err:
        fail(str(err))
    if workflow.is_main_process:  # jobs re-read the Snakefile; the plan was checked
        check_sizes()


def filtered_samples():
    """IIDs (str array) of the .fam samples that pass the withdrawals and the sample
    QC, filtered by the functions `cmix samples` runs. The unrelated set and the stores
    can only be smaller."""
    from cmix.genotypes.pgen import read_psam
    from cmix.genotypes.samples import read_sample_qc, read_withdrawn, sample_filters

    fam = read_psam(fam_file())
    extra = shlex.split(config["sample_qc"].get("extra", ""))
    headerless = (
        True
        if INPUTS.get("sample_qc_headerless") or "--sqc-headerless" in extra
        else (False if "--sqc-tidy" in extra else None)
    )
    sqc = (
        read_sample_qc(INPUTS["sample_qc"], fam, headerless)
        if INPUTS.get("sample_qc")
        else None
    )
    withdrawn = read_withdrawn(INPUTS["withdrawn"]) if INPUTS.get("withdrawn") else None
    idx, _ = sample_filters(fam, sqc, withdrawn, "--no-ancestry-filter" not in extra)
    return fam["iid"].to_numpy()[idx]


def check_sizes():
    """Budgets and PCs against what the cohort can give. A trait's training split is at
    most phenotypes.max_training_split(n, test_fraction, strata) of its n candidates:
    the samples past the withdrawals and the sample QC with a label (categorical) or a
    value (continuous), as `cmix store` labels them; relatedness and missing covariates
    only remove more. The simulated demo's bound uses its cohort size for n. pca.n_pcs
    is checked against the samples past the filters (the unrelated set is a subset). A
    trait of the discovery route keeps at most the share 1 - discovery.fraction of them.
    """
    from cmix.genotypes.pca import check_n_pcs
    from cmix.errors import CmixError
    from cmix.genotypes.phenotypes import (
        N_CONTINUOUS_STRATA,
        label_trait,
        max_training_split,
        read_phenotypes,
        trait_column,
    )

    test_fraction = config["split"]["test_fraction"]
    if SIMULATED:
        iids, pheno = None, None
        n_cohort = int(config["simulate"]["n_samples"])
        what = "the simulated cohort's samples"
    else:
        iids = filtered_samples()
        pheno = read_phenotypes(INPUTS["phenotypes"])
        n_cohort = len(iids)
        what = "samples past the withdrawals and sample QC"
        for field in COVARIATES.get("fields", []):
            try:
                trait_column(
                    pheno.columns,
                    field if isinstance(field, dict) else {"field": field},
                    path=INPUTS["phenotypes"],
                    who="covariates.fields",
                )
            except CmixError as err:
                fail(str(err))
    if pca_reads_the_calls() or COVARIATES.get("pcs_from") == "eigenvec":
        try:
            check_n_pcs(config["pca"]["n_pcs"], n_cohort, what)
        except Exception as err:
            fail(f"pca.n_pcs: {err}")
    largest = max(BUDGETS)
    for trait in TRAITS:
        definition = TRAIT_DEFINITIONS[trait]
        categorical = definition["kind"] == "categorical"
        n_strata = len(definition["classes"]) if categorical else N_CONTINUOUS_STRATA
        n = n_cohort
        if pheno is not None:
            labels = label_trait(
                pheno,
                trait,
                definition,
                iids,
                test_fraction,
                config["split"]["seed"],
                path=INPUTS["phenotypes"],
            )
            n = len(labels["keep"]) if categorical else labels["counts"]["with_a_value"]
        discovery, n_labeled = "", n
        if trait in DISCOVERY_TRAITS:
            # its discovery set never enters the store: round(n_s * fraction) of each
            # stratum's n_s, so at most (1 - fraction) * n + half a sample per stratum stay
            fraction = float(DISCOVERY.get("fraction", 0.5))
            n_store = int((1 - fraction) * n + n_strata / 2)
            discovery = f", {n - n_store} or more of them in its discovery GWAS"
            n = n_store
        bound = max_training_split(n, test_fraction, n_strata)
        if largest > bound:
            fail(
                f"budgets: {largest} labeled samples asked for, but trait {trait!r} has at "
                f"most {bound} in its training split ({n_labeled} {what} with a phenotype"
                f"{discovery}; test_fraction {test_fraction})"
            )
        if categorical and min(BUDGETS) < n_strata:
            fail(
                f"budgets: {min(BUDGETS)} labeled samples for trait {trait!r}, fewer than "
                f"its {n_strata} classes; every class needs a labeled sample"
            )


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
    chroms = ["--chroms", *QC_CHROMS] if CHROM in INPUTS["bgen"] else []
    return [
        "--bgen",
        INPUTS["bgen"],
        "--sample",
        INPUTS["bgen_sample"],
        "--fam",
        fam_file(),
        *chroms,
    ]


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
    exts = [".eigenvec", ".eigenval", ".eigenvec.allele", ".acount"]
    if config["pca"]["indep_pairwise"]:
        exts += [".prune.in", ".prune.out"]
    return multiext(f"{OUT}/pca/pcs", *exts)


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
# on the node, named for the allocation ($SLURM_JOB_ID; no lock outside SLURM). Snakemake
# no longer passes the profile's `resources: gpu: 1` to the processes inside a submitted
# job, which then started all of its jobs at once, and sized its job step (srun) for one
# GPU per training job, more than the allocation holds: the limit is restored here.
if not workflow.is_main_process and "gpu" not in workflow.global_resources:
    workflow.register_resource("gpu", 1)
ONE_AT_A_TIME = (
    '${SLURM_JOB_ID:+flock "${TMPDIR:-/tmp}/cmix-train.$SLURM_JOB_ID.lock"} '
)


check_config()
