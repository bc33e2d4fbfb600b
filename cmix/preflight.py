"""The workflow's pre-flight checks: everything a job would refuse, found before any job.

``snakemake`` calls :func:`check_workflow_config` once, while it reads the workflow
(``workflow/rules/common.smk``), and ``cmix check-config`` runs the same function on a
config file without Snakemake. Each problem is one :class:`CmixError` naming the key or
file; the workflow prints it as ``config error: ...`` and stops before the DAG is built.

The checks, in order: each config file is UTF-8, parses and gives no key twice
(:func:`check_config_files`); the config matches the workflow schema, whose defaults are
then filled in (:func:`check_schema`); the grid lists (:func:`check_grid_lists`); the
values the jobs' own validators would refuse, and the input files
(:func:`check_values`); and, reading the phenotype and sample-QC tables, every budget
against the training split each trait can give (:func:`check_sizes`).
"""

from __future__ import annotations

import os
import re
import shlex
from pathlib import Path

from .configfile import check_config_files, check_finite, check_schema, config_bytes, config_text
from .errors import CmixError
from .genotypes.covariates import check_spec, sample_qc_table
from .genotypes.pca.prune import PruneSettings
from .genotypes.pca.run import check_n_pcs
from .genotypes.phenotypes import (N_CONTINUOUS_STRATA, check_trait_config, label_trait,
                                   max_training_split, read_phenotypes, trait_column)
from .genotypes.samples import read_sample_qc, read_withdrawn, sample_filters
from .learn.config import resolve_config
from .learn.methods import get_method
from .readers.pgen import read_psam
from .simulate.sample_qc import SIMULATED_PCS
from .text import first_line, first_repeated, input_file, parse_yaml, sniff_sep, split_header


#: a trait or run name: it names files, folders, jobs and command arguments
NAME = re.compile(r"[A-Za-z0-9_.-]+")

#: the chromosome field of per-chromosome file patterns
CHROM = "{chrom}"


def schema_path(repo: str | os.PathLike) -> Path:
    """The workflow schema of the repository at ``repo``."""
    return Path(repo) / "workflow" / "schemas" / "config.schema.yaml"


def check_workflow_config(config: dict, repo: str | os.PathLike, configfiles=(),
                          read_tables: bool = True) -> None:
    """Every pre-flight check of the workflow config ``config`` (a dict, completed in
    place with the schema's defaults). repo: the repository (its schema and the fetch
    manifest); configfiles: the files ``config`` was read from (a key given twice in
    one is refused); read_tables: run :func:`check_sizes`, which reads the phenotype and
    sample-QC tables (the workflow does so in its main process only). Raises CmixError."""
    check_config_files(configfiles)
    check_finite(config)
    check_schema(config, schema_path(repo))
    fetchable = fetchable_files(config, repo)
    check_grid_lists(config)
    check_values(config, fetchable)
    if read_tables:
        check_sizes(config)


def fetch_manifest(config: dict, repo: str | os.PathLike) -> str:
    """The manifest of fetchable public files (``fetch_manifest``, relative to the
    repository or absolute)."""
    return os.path.join(repo, config.get("fetch_manifest", "resources/sumstats.manifest.tsv"))


def fetchable_files(config: dict, repo: str | os.PathLike) -> list[str]:
    """The file names the fetch manifest lists (rule fetch_resource makes each as
    resources/sumstats/NAME); CmixError when the manifest is absent."""
    manifest = fetch_manifest(config, repo)
    if not os.path.isfile(manifest):
        raise CmixError(f"fetch_manifest: {os.path.normpath(manifest)} not found (a path "
                        "relative to the repository, or absolute)")
    with open(manifest) as fh:
        lines = [line for line in fh if line.strip() and not line.startswith("#")]
    return [line.split("\t")[0] for line in lines][1:]


# ------------------------------------------------------------------ the grid
def grid(config: dict) -> dict:
    """The grid as the jobs read it: traits, budgets and seeds as integers, methods."""
    return {"traits": list(config["traits"]), "budgets": [int(b) for b in config["budgets"]],
            "seeds": [int(s) for s in config["seeds"]], "methods": list(config["methods"])}


def check_grid_lists(config: dict) -> None:
    """The grid as the jobs will read it: no trait, budget or seed listed twice (after
    reading "100" as 100; a repeat would be one more identical cell, counted twice in
    the report), budgets of at least 2 and seeds from 0 to 2^32 - 1 however they are
    written, a run name and trait names that can name files and jobs
    (:func:`check_name`), the covariates method only with covariates, per-trait input
    keys that name a defined trait."""
    g = grid(config)
    for key in ("traits", "budgets", "seeds"):
        repeated = first_repeated(g[key])
        if repeated is not None:
            raise CmixError(f"{key}: {repeated!r} is listed twice; list each once")
    if min(g["budgets"]) < 2:
        raise CmixError(f"budgets: {min(g['budgets'])} labeled samples; a budget needs at "
                        "least 2")
    if min(g["seeds"]) < 0 or max(g["seeds"]) > 2**32 - 1:
        bad = min(g["seeds"]) if min(g["seeds"]) < 0 else max(g["seeds"])
        raise CmixError(f"seeds: {bad}; seeds are integers from 0 to 2^32 - 1")
    check_name(str(config["run_name"]), "run_name", "a run name")
    for trait in g["traits"]:
        check_name(trait, "traits", "a trait name")
    train_cov = config.get("train", {}).get("config", {}).get("covariates", True)
    if "covariates" in g["methods"] and not (config.get("covariates") and train_cov):
        raise CmixError("methods: covariates needs covariates to fit: give the covariates "
                        "section (and leave train.config.covariates true), or drop the method")
    definitions = config["trait_definitions"]
    for key in ("sumstats_overlap", "sumstats_columns"):
        per_trait = inputs_of(config).get(key)
        if isinstance(per_trait, dict):
            unknown = [t for t in per_trait if t not in definitions]
            if unknown:
                raise CmixError(f"inputs.{key}: unknown trait {unknown[0]!r}; defined in "
                                f"trait_definitions: {', '.join(definitions)}")




def check_name(name: str, key: str, what: str) -> None:
    """A run or trait name that can name a folder, files, jobs and command arguments:
    letters, digits, '_', '.' and '-', neither '.' nor '..' (the folder itself or its
    parent) and not starting with '-' (read as an option). CmixError naming ``key``."""
    if not NAME.fullmatch(name):
        raise CmixError(f"{key}: {name!r}: {what} holds letters, digits, '_', '.' and '-' "
                        "only (it names files, jobs and command arguments)")
    if name in (".", ".."):
        raise CmixError(f"{key}: {name!r}: {what} cannot be '.' or '..' (it names a folder)")
    if name.startswith("-"):
        raise CmixError(f"{key}: {name!r}: {what} cannot start with '-' (a command would "
                        "read it as an option)")


def check_discovery_or_sumstats(config: dict) -> None:
    """A trait listed both in ``discovery.traits`` (its own GWAS on this cohort) and in
    ``inputs.sumstats`` (external summary statistics) is a CmixError naming both. Not
    among the workflow's checks: config/ukb.yaml lists every trait in both on purpose
    (the discovery route wins; the summary statistics are the documented alternative)."""
    listed = (config.get("discovery") or {}).get("traits") or []
    sumstats = inputs_of(config).get("sumstats") or {}
    both = [t for t in listed if t in sumstats]
    if both:
        raise CmixError(f"discovery.traits and inputs.sumstats both list trait {both[0]!r}: "
                        "its SNPs come either from its own discovery GWAS or from the "
                        "summary statistics; remove it from one of them")
# ------------------------------------------------------------------ inputs
def simulated(config: dict) -> bool:
    """Whether the cohort is simulated (the demo: a ``simulate`` section)."""
    return "simulate" in config


def inputs_of(config: dict) -> dict:
    """The ``inputs`` section ({} for a simulated cohort)."""
    return {} if simulated(config) else (config.get("inputs") or {})


def qc_chroms(config: dict) -> list[str]:
    """The chromosomes a ``{chrom}`` pattern stands for (``variant_qc.chromosomes``)."""
    return [str(c) for c in config["variant_qc"].get("chromosomes", range(1, 23))]


def per_chrom(path: str, chroms) -> list[str]:
    """A ``{chrom}`` pattern's files, or the path itself."""
    return [path.replace(CHROM, c) for c in chroms] if CHROM in path else [path]


def genotype_calls(config: dict) -> tuple[str, str]:
    """("bfile" or "pfile", prefix or {chrom} pattern) of a real cohort's genotype calls."""
    inputs = inputs_of(config)
    key = "pfile" if "pfile" in inputs else "bfile"
    return key, inputs[key]


def fam_file(config: dict) -> str:
    """The samples of a real cohort's genotype calls: inputs.fam, else the .fam / .psam."""
    key, src = genotype_calls(config)
    fam = inputs_of(config).get("fam")
    return fam or src + (".fam" if key == "bfile" else ".psam")


def input_genotype_files(config: dict) -> list[str]:
    """Every genotype file a real cohort's jobs read: the calls of every chromosome with
    their sample file, and the BGEN files with their .bgi, .sample and mfi files."""
    inputs, chroms = inputs_of(config), qc_chroms(config)
    key, src = genotype_calls(config)
    exts = (".bed", ".bim") if key == "bfile" else (".pgen", ".pvar")
    files = [p + e for p in per_chrom(src, chroms) for e in exts] + [fam_file(config)]
    if "bgen" in inputs:
        files += [p + e for p in per_chrom(inputs["bgen"], chroms) for e in ("", ".bgi")]
        files += per_chrom(inputs["bgen_sample"], chroms) if inputs.get("bgen_sample") else []
        files += per_chrom(inputs["mfi"], chroms) if inputs.get("mfi") else []
    return files


def pca_reads_the_calls(config: dict) -> bool:
    """Whether the workflow's PCs are a final output by themselves: for one
    .bed/.bim/.fam trio (the simulated cohort's, or a real one without ``fam``)."""
    if simulated(config):
        return True
    key, src = genotype_calls(config)
    return key == "bfile" and CHROM not in src and not inputs_of(config).get("fam")


def discovery_traits(config: dict) -> list[str]:
    """The configured traits whose SNPs come from the cohort's own discovery GWAS."""
    listed = (config.get("discovery") or {}).get("traits", [])
    return [t for t in listed if t in config["traits"]]


def is_fetchable(path: str, fetchable: list[str]) -> bool:
    """Whether rule fetch_resource makes ``path`` (resources/sumstats/NAME of the manifest)."""
    folder, name = os.path.split(os.path.normpath(path))
    return folder == os.path.join("resources", "sumstats") and name in fetchable


# ------------------------------------------------------------------ values and inputs
def check_values(config: dict, fetchable: list[str]) -> None:
    """What a job would refuse, through the validators the jobs run: each trait defined
    and its definition valid, the PCA pruning settings, the covariate spec (PCs from the
    pca rule within pca.n_pcs; sample-QC covariates only with a sample QC table), a real
    cohort's inputs (present, readable, one genotype source, a .fam with a
    per-chromosome pattern, summary statistics for every trait not of the discovery
    route, present or fetchable) and the trainer config."""
    definitions = config["trait_definitions"]
    for trait in config["traits"]:
        if trait not in definitions:
            raise CmixError(f"traits: unknown trait {trait!r}; defined in trait_definitions: "
                            f"{', '.join(definitions)}")
        check_trait_config(definitions[trait], trait, "trait_definitions")
    if config["pca"]["indep_pairwise"]:
        PruneSettings.parse(str(config["pca"]["indep_pairwise"]).split())
    covariates = config.get("covariates") or {}
    inputs = inputs_of(config)
    if covariates:
        spec = check_spec(covariates, "covariates")
        if spec["pcs_from"] == "eigenvec" and spec["pcs"] > config["pca"]["n_pcs"]:
            raise CmixError(f"covariates.pcs: {spec['pcs']} PCs from the pca rule, which "
                            f"computes pca.n_pcs = {config['pca']['n_pcs']}")
        from_sqc = spec["array"] or spec["batch"] or (spec["pcs"]
                                                      and spec["pcs_from"] == "sample_qc")
        if simulated(config) and spec["pcs_from"] == "sample_qc" and spec["pcs"] > SIMULATED_PCS:
            raise CmixError(f"covariates.pcs: {spec['pcs']} PCs from the sample QC, whose "
                            f"simulated table holds {SIMULATED_PCS}; give at most "
                            f"{SIMULATED_PCS}, or pcs_from: eigenvec")
        if from_sqc and not simulated(config) and not inputs.get("sample_qc"):
            raise CmixError("covariates: the PCs (pcs_from: sample_qc), array or batch come "
                            "from inputs.sample_qc, which is not given; use pcs_from: "
                            "eigenvec for PCs from `cmix pca`")
    if not simulated(config):
        check_inputs(config, fetchable)
        check_hwe_samples(config)
        check_covariate_columns(config)
    try:
        cfg = resolve_config(config.get("train", {}).get("config", {}), where="train.config")
    except CmixError:
        raise
    except Exception as err:
        raise CmixError(str(err)) from None
    check_graph_size(config, cfg)


def check_graph_size(config: dict, cfg) -> None:
    """CmixError when label propagation's ``lp_k`` neighbours reach every node of its
    graph (the labeled rows and at most ``lp_max_unlabeled`` unlabeled ones; for a
    simulated cohort, at most its training split): the graph would be complete, not
    a neighbourhood graph."""
    lp = cfg.pseudo_labels
    nodes = lp.lp_max_unlabeled + min(int(b) for b in config["budgets"])
    if simulated(config):
        nodes = min(nodes, int(config["simulate"]["n_samples"]
                               * (1 - float(config["split"]["test_fraction"]))))
    if lp.lp_k >= nodes:
        raise CmixError(f"train.config: lp_k = {lp.lp_k} neighbours, but the label "
                        f"propagation graph holds at most {nodes} rows; give lp_k well "
                        "below that (the paper: 3)")


def check_inputs(config: dict, fetchable: list[str]) -> None:
    """A real cohort's ``inputs``: present, one genotype source, every file there and
    readable, summary statistics for every trait not of the discovery route."""
    inputs = config.get("inputs")
    if not inputs:
        raise CmixError("'inputs' is required when 'simulate' is absent")
    if "phenotypes" not in inputs:
        raise CmixError("inputs.phenotypes is required")
    if ("bfile" in inputs) == ("pfile" in inputs):
        raise CmixError("inputs: give the genotype calls as exactly one of bfile or pfile")
    key, src = genotype_calls(config)
    if CHROM in src and not inputs.get("fam"):
        raise CmixError(f"inputs.fam: required with a per-chromosome inputs.{key} pattern")
    for path in input_genotype_files(config):
        if not os.path.exists(path):
            how = "; index the .bgen with `cmix bgen-index`" if path.endswith(".bgi") else ""
            raise CmixError(f"inputs: {path} not found{how}")
    if "bgen" in inputs and "bgen_sample" not in inputs:
        raise CmixError("inputs.bgen_sample: the .sample file of inputs.bgen is required")
    for key in ("sample_qc", "withdrawn", "phenotypes", "kinship"):
        if inputs.get(key) and not os.path.exists(inputs[key]):
            raise CmixError(f"inputs.{key}: {inputs[key]} not found")
        if inputs.get(key):
            input_file(inputs[key], f"inputs.{key}")
    discovery = discovery_traits(config)
    for trait in (t for t in config["traits"] if t not in discovery):
        path = (inputs.get("sumstats") or {}).get(trait)
        if not path:
            raise CmixError(f"inputs.sumstats.{trait}: no summary statistics for trait "
                            f"{trait!r}")
        if not os.path.exists(path) and not is_fetchable(path, fetchable):
            raise CmixError(f"inputs.sumstats.{trait}: {path} not found (nor listed in "
                            f"{config.get('fetch_manifest', 'resources/sumstats.manifest.tsv')}"
                            " to be fetched as resources/sumstats/FILE)")
        if os.path.exists(path):
            input_file(path, f"inputs.sumstats.{trait}")


def check_covariate_columns(config: dict) -> None:
    """Each ``covariates.fields`` entry of a real cohort names a column of the phenotype
    table (its header only is read); one that does not is refused before any job, naming
    the entry to remove and the columns there are."""
    fields = (config.get("covariates") or {}).get("fields") or []
    path = inputs_of(config).get("phenotypes")
    if not fields or not path:
        return
    header = first_line(input_file(path, "inputs.phenotypes"), "phenotype table")
    columns = [n.strip() for n in split_header(header, sniff_sep(header))]
    for entry in fields:
        cfg = entry if isinstance(entry, dict) else {"field": entry}
        try:
            trait_column(columns, cfg, path=path, who="covariates.fields")
        except CmixError:
            wanted = (repr(cfg["column"]) if "column" in cfg
                      else f"f.{cfg['field']}.0.0 or {cfg['field']}-0.0")
            shown = ", ".join(columns[:15]) + (", ..." if len(columns) > 15 else "")
            raise CmixError(f"covariates.fields: {json_text(entry)} names no column of "
                            f"{path} (no column {wanted}; its columns: {shown}); remove it "
                            "from covariates.fields (or covariates: {} for none), or add "
                            "the column") from None


def json_text(value) -> str:
    """A config value as the YAML flow text a user would write: {column: age}, 21022."""
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {v}" for k, v in value.items()) + "}"
    return str(value)


def check_hwe_samples(config: dict) -> None:
    """variant_qc.hwe_groups and hwe_keep of a real cohort: the table there, with its
    group column in the header; the ID list there."""
    qc, inputs = config["variant_qc"], inputs_of(config)
    groups = qc.get("hwe_groups")
    if groups:
        table = groups["table"]
        if table in ("phenotypes", "sample_qc"):
            if not inputs.get(table):
                raise CmixError(f"variant_qc.hwe_groups.table: {table}, but inputs.{table} "
                                "is not given")
            table = inputs[table]
        if not os.path.exists(table):
            raise CmixError(f"variant_qc.hwe_groups.table: {table} not found")
        header = first_line(input_file(table, "variant_qc.hwe_groups.table"), "HWE groups")
        names = [n.strip() for n in split_header(header, sniff_sep(header))]
        if groups["column"] not in names:
            raise CmixError(f"variant_qc.hwe_groups.column: no column {groups['column']!r} "
                            f"in {table} (its columns: {', '.join(names[:20])})")
    if qc.get("hwe_keep") and not os.path.exists(qc["hwe_keep"]):
        raise CmixError(f"variant_qc.hwe_keep: {qc['hwe_keep']} not found")


# ------------------------------------------------------------------ sizes
def sample_qc_headerless(config: dict) -> bool | None:
    """Whether the sample QC table is headerless (ukb_sqc_v2.txt): True / False as the
    config says (inputs.sample_qc_headerless, sample_qc.extra flags), None to tell by
    its content."""
    extra = shlex.split((config.get("sample_qc") or {}).get("extra", ""))
    if inputs_of(config).get("sample_qc_headerless") or "--sqc-headerless" in extra:
        return True
    return False if "--sqc-tidy" in extra else None


def filtered_samples(config: dict):
    """IIDs (str array) of the .fam samples that pass the withdrawals and the sample QC,
    filtered by the functions `cmix samples` runs. The unrelated set and the stores can
    only be smaller."""
    inputs = inputs_of(config)
    fam = read_psam(fam_file(config))
    extra = shlex.split((config.get("sample_qc") or {}).get("extra", ""))
    sqc = (read_sample_qc(inputs["sample_qc"], fam, sample_qc_headerless(config))
           if inputs.get("sample_qc") else None)
    withdrawn = read_withdrawn(inputs["withdrawn"]) if inputs.get("withdrawn") else None
    idx, _ = sample_filters(fam, sqc, withdrawn, "--no-ancestry-filter" not in extra)
    return fam["iid"].to_numpy()[idx]


def check_sample_qc_pcs(config: dict) -> None:
    """``covariates.pcs`` PCs from the sample QC (pcs_from: sample_qc) against the PCs
    its table holds: more is a CmixError naming the key and the table."""
    covariates = config.get("covariates") or {}
    path = inputs_of(config).get("sample_qc")
    if not covariates or not path:
        return
    spec = check_spec(covariates, "covariates")
    if not spec["pcs"] or spec["pcs_from"] != "sample_qc":
        return
    try:
        sample_qc_table(path, read_psam(fam_file(config)), spec["pcs"], array=False)
    except CmixError as err:
        raise CmixError(f"covariates.pcs: {spec['pcs']} PCs from the sample QC: {err}") from None


def check_sizes(config: dict) -> None:
    """Budgets and PCs against what the cohort can give. A trait's training split is at
    most phenotypes.max_training_split(n, test_fraction, strata) of its n candidates:
    the samples past the withdrawals and the sample QC with a label (categorical) or a
    value (continuous), as `cmix store` labels them; relatedness and missing covariates
    only remove more. The simulated demo's bound uses its cohort size for n. pca.n_pcs
    is checked against the samples past the filters (the unrelated set is a subset), and
    covariates.pcs against the sample QC's PCs (:func:`check_sample_qc_pcs`). A trait of
    the discovery route keeps at most the share 1 - discovery.fraction of them."""
    inputs = inputs_of(config)
    covariates = config.get("covariates") or {}
    test_fraction = config["split"]["test_fraction"]
    if simulated(config):
        iids, pheno = None, None
        n_cohort = int(config["simulate"]["n_samples"])
        what = "the simulated cohort's samples"
    else:
        check_sample_qc_pcs(config)
        iids = filtered_samples(config)
        pheno = read_phenotypes(inputs["phenotypes"])
        n_cohort = len(iids)
        what = "samples past the withdrawals and sample QC"
        for field in covariates.get("fields", []):
            trait_column(pheno.columns, field if isinstance(field, dict) else {"field": field},
                         path=inputs["phenotypes"], who="covariates.fields")
    if pca_reads_the_calls(config) or covariates.get("pcs_from") == "eigenvec":
        try:
            check_n_pcs(config["pca"]["n_pcs"], n_cohort, what)
        except Exception as err:
            raise CmixError(f"pca.n_pcs: {err}") from None
    budgets = [int(b) for b in config["budgets"]]
    discovery = discovery_traits(config)
    for trait in config["traits"]:
        definition = config["trait_definitions"][trait]
        categorical = definition["kind"] == "categorical"
        n_strata = len(definition["classes"]) if categorical else N_CONTINUOUS_STRATA
        n = n_cohort
        if pheno is not None:
            labels = label_trait(pheno, trait, definition, iids, test_fraction,
                                 config["split"]["seed"], path=inputs["phenotypes"])
            n = len(labels["keep"]) if categorical else labels["counts"]["with_a_value"]
        note, n_labeled = "", n
        if trait in discovery:
            # its discovery set never enters the store: round(n_s * fraction) of each
            # stratum's n_s, so at most (1 - fraction) * n + half a sample per stratum stay
            fraction = float((config.get("discovery") or {}).get("fraction", 0.5))
            n_store = int((1 - fraction) * n + n_strata / 2)
            note = f", {n - n_store} or more of them in its discovery GWAS"
            n = n_store
        bound = max_training_split(n, test_fraction, n_strata)
        if max(budgets) > bound:
            raise CmixError(f"budgets: {max(budgets)} labeled samples asked for, but trait "
                            f"{trait!r} has at most {bound} in its training split "
                            f"({n_labeled} {what} with a phenotype{note}; test_fraction "
                            f"{test_fraction})")
        if categorical and min(budgets) < n_strata:
            raise CmixError(f"budgets: {min(budgets)} labeled samples for trait {trait!r}, "
                            f"fewer than its {n_strata} classes; every class needs a labeled "
                            "sample")
        networks = [m for m in config["methods"] if _is_network(m)]
        if categorical and networks and min(budgets) < n_strata + 1:
            raise CmixError(f"budgets: {min(budgets)} labeled samples for trait {trait!r} of "
                            f"{n_strata} classes leave no validation row (each class keeps one "
                            f"training row), on which {networks[0]} early-stops; give budgets "
                            f"of at least {n_strata + 1}")


def _is_network(method: str) -> bool:
    """Whether ``method`` trains a network (early-stopped on validation rows)."""
    try:
        return bool(get_method(method).network)
    except CmixError:
        return False


# ------------------------------------------------------------------ the command
def check_config_file(path, repo: str | os.PathLike | None = None) -> dict:
    """``cmix check-config``: the config file at ``path`` read (UTF-8, no key twice) and
    put through every check (:func:`check_workflow_config`; input paths relative to the
    working directory, as in the workflow). repo: the repository (its schema and fetch
    manifest); None: the one this package lives in. Returns the completed config;
    raises CmixError."""
    try:
        data = config_bytes(path)
    except OSError as err:
        raise CmixError(f"{path}: cannot be read ({err.strerror})") from None
    config = parse_yaml(config_text(data, path), str(path))
    if not isinstance(config, dict):
        raise CmixError(f"{path}: a workflow config is a YAML mapping of keys")
    repo = Path(repo) if repo is not None else Path(__file__).resolve().parent.parent
    check_workflow_config(config, repo)
    return config


def summary_line(config: dict) -> str:
    """One line saying what a config that passed asks for."""
    g = grid(config)
    cohort = ("a simulated cohort of " f"{int(config['simulate']['n_samples']):,} people"
              if simulated(config) else "a real cohort")
    return (f"config ok: {config['run_name']}: {cohort}; {len(g['traits'])} trait(s), "
            f"{len(g['methods'])} method(s), budgets {', '.join(map(str, g['budgets']))}, "
            f"{len(g['seeds'])} seed(s): {len(g['traits']) * len(g['methods']) * len(g['budgets']) * len(g['seeds'])} training runs")
