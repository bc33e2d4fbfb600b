# Paths, wildcard constraints and the checks that must fail before any job runs.
import json
import os
import shlex

OUT = f"results/{config['run_name']}"
SIMULATED = "simulate" in config
TRAITS = list(config["traits"])
TRAIT_DEFINITIONS = config["trait_definitions"]
BUDGETS = [int(b) for b in config["budgets"]]
SEEDS = [int(s) for s in config["seeds"]]
METHODS = list(config["methods"])
QC_CHROMS = [str(c) for c in config["variant_qc"].get("chromosomes", range(1, 23))]
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
    chrom="|".join(QC_CHROMS),


def fail(msg):
    raise ValueError(f"config error: {msg}")


def check_config():
    """Problems a user must fix before any job runs (the schema catches types and keys)."""
    for trait in TRAITS:
        if trait not in TRAIT_DEFINITIONS:
            fail(
                f"traits: unknown trait {trait!r}; defined in trait_definitions: "
                f"{', '.join(TRAIT_DEFINITIONS)}"
            )
    if not SIMULATED:
        inputs = config.get("inputs") or fail(
            "'inputs' is required when 'simulate' is absent"
        )
        for key in ("bfile", "sample_qc", "withdrawn", "phenotypes"):
            if key not in inputs:
                fail(f"inputs.{key} is required")
        for ext in (".bed", ".bim", ".fam"):
            if not os.path.exists(inputs["bfile"] + ext):
                fail(f"inputs.bfile: {inputs['bfile'] + ext} not found")
        for key in ("sample_qc", "withdrawn", "phenotypes", "kinship"):
            if inputs.get(key) and not os.path.exists(inputs[key]):
                fail(f"inputs.{key}: {inputs[key]} not found")
        for trait in TRAITS:
            path = (inputs.get("sumstats") or {}).get(trait)
            if not path:
                fail(
                    f"inputs.sumstats.{trait}: no summary statistics for trait {trait!r}"
                )
            if not os.path.exists(path):
                fail(f"inputs.sumstats.{trait}: {path} not found")
        n_samples = sum(1 for _ in open(inputs["bfile"] + ".fam"))
    else:
        n_samples = config["simulate"]["n_samples"]
    test_fraction = config["split"]["test_fraction"]
    largest = max(BUDGETS)
    if largest > (1 - test_fraction) * n_samples:
        fail(
            f"budgets: {largest} labeled samples asked for, but the cohort has only "
            f"{n_samples} samples ({(1 - test_fraction) * n_samples:.0f} in training splits)"
        )


check_config()


def input_path(key):
    """A cohort input: the simulated one in the demo, the configured one otherwise."""
    if SIMULATED:
        sim = f"{OUT}/cohort"
        return {
            "bfile": f"{sim}/genotypes",
            "sample_qc": f"{sim}/sample_qc.tsv",
            "withdrawn": f"{sim}/withdrawn.txt",
            "kinship": f"{sim}/kinship.dat",
            "phenotypes": f"{sim}/phenotypes.tsv",
        }[key]
    return config["inputs"].get(key)


def sumstats_path(trait):
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
        + list(pca_outputs())
    )
