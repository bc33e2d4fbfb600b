# Where each trait's SNPs and prs betas come from: external summary statistics
# (inputs.sumstats, with their overlap with this cohort) or the trait's own discovery
# GWAS (config `discovery:`, rules/discovery.smk). Checked before any job runs.


def discovery_ids(trait):
    """The discovery set of a discovery-route trait ([] for the others)."""
    return f"{OUT}/discovery/{trait}.discovery.id" if trait in DISCOVERY_TRAITS else []


def sumstats_overlap(trait):
    """yes / no / unknown: may the external GWAS of `trait` include this cohort. The
    simulator's summary statistics come from a separate discovery cohort: no."""
    if SIMULATED:
        return "no"
    value = INPUTS.get("sumstats_overlap", "unknown")
    value = value.get(trait, "unknown") if isinstance(value, dict) else value
    return {True: "yes", False: "no"}.get(value, value)  # YAML reads a bare yes as true


def snp_source_args(trait, discovery):
    """`cmix store` arguments recording where the trait's SNPs came from."""
    if trait in DISCOVERY_TRAITS:
        return ["--discovery", discovery]
    return ["--sumstats", sumstats_path(trait), "--overlap", sumstats_overlap(trait)]


def check_discovery_config():
    """Discovery settings a user must fix before any job runs."""
    fraction = float(DISCOVERY.get("fraction", 0.5))
    for trait in DISCOVERY.get("traits", []):
        if trait not in TRAIT_DEFINITIONS:
            fail(f"discovery.traits: unknown trait {trait!r}")
    multiclass = DISCOVERY.get("multiclass") or {}
    for trait, choice in multiclass.items():
        classes = TRAIT_DEFINITIONS.get(trait, {}).get("classes")
        if trait not in TRAIT_DEFINITIONS or not classes:
            fail(f"discovery.multiclass: {trait!r} is not a categorical trait")
        if choice != "class_index" and choice not in classes:
            fail(
                f"discovery.multiclass.{trait}: {choice!r} is neither class_index nor one "
                f"of its classes ({', '.join(classes)})"
            )
    external = (INPUTS.get("sumstats") or {}) if not SIMULATED else {}
    both = [t for t in DISCOVERY_TRAITS if t in external]
    if both:
        print(
            f"cmix: note: {', '.join(both)}: SNPs and prs betas from the discovery GWAS "
            "(discovery.traits); their inputs.sumstats files are not used (take a trait "
            "out of discovery.traits to use its file)",
            file=sys.stderr,
        )
    for trait in DISCOVERY_TRAITS:
        classes = TRAIT_DEFINITIONS[trait].get("classes") or {}
        if len(classes) > 2 and trait not in multiclass:
            fail(
                f"discovery.multiclass.{trait}: {len(classes)} classes have no single GWAS; "
                "give class_index (linear on the class index, for ordered classes) or one "
                "class name (that class vs the others, logistic)"
            )
    if DISCOVERY_TRAITS:
        n = (
            config["simulate"]["n_samples"]
            if SIMULATED
            else sum(1 for line in open(fam_file()) if not line.startswith("#"))
        )
        left = (1 - fraction) * (1 - config["split"]["test_fraction"]) * n
        if max(BUDGETS) > left:
            fail(
                f"budgets: {max(BUDGETS)} labeled samples asked for, but with "
                f"discovery.fraction {fraction} the training splits hold at most "
                f"{left:.0f} of the {n} samples"
            )


check_discovery_config()
