# Per trait: top SNPs from the summary statistics, then the Zarr dosage store.


# With inputs.bgen the SNPs come from the imputed variants (INFO filter, no array QC)
# and the store holds their fractional dosages; otherwise both use the genotype calls.
rule select_snps:
    input:
        genotypes=lambda wc: bgen_files() or genotype_files(),
        sumstats=lambda wc: sumstats_path(wc.trait),
        snplist=VARIANTS_SNPLIST,
    output:
        f"{OUT}/traits/{{trait}}.snps.tsv",
    log:
        f"{OUT}/logs/select_snps/{{trait}}.log",
    benchmark:
        f"{OUT}/benchmarks/select_snps/{{trait}}.tsv"
    conda:
        "../envs/cmix.yaml"
    params:
        # config-derived params apart from the file paths taken from input: Snakemake
        # reruns a job when a param changes, but not a param computed from its input
        genotypes=lambda wc: selection_args(),
        extract=lambda wc, input: [] if bgen_files() else ["--extract", input.snplist],
        top=config["selection"]["top"],
        columns=lambda wc: [
            arg
            for field, name in INPUTS.get("sumstats_columns", {})
            .get(wc.trait, {})
            .items()
            for arg in (f"--col-{field.replace('_', '-')}", name)
        ],
    shell:
        "cmix select --sumstats {input.sumstats:q} {params.genotypes:q} {params.extract:q} "
        "{params.columns:q} --top {params.top:q} --out {output:q} 2> {log:q}"


rule store:
    input:
        genotypes=lambda wc: (
            bgen_files() + [fam_file()] if bgen_files() else genotype_files()
        ),
        keep=UNRELATED_KEEP,
        snps=f"{OUT}/traits/{{trait}}.snps.tsv",
        pheno=input_path("phenotypes"),
        filters=step_file("samples", SAMPLES, "summary"),
        sample_qc=(input_path("sample_qc") or []) if COVARIATES else [],
        eigenvec=(PCS_EIGENVEC if COVARIATES.get("pcs_from") == "eigenvec" else []),
        discovery=lambda wc: discovery_ids(wc.trait),
    output:
        directory(f"{OUT}/traits/{{trait}}.zarr"),
    log:
        f"{OUT}/logs/store/{{trait}}.log",
    benchmark:
        f"{OUT}/benchmarks/store/{{trait}}.tsv"
    conda:
        "../envs/cmix.yaml"
    threads: 2
    params:
        genotypes=lambda wc: bgen_args() if bgen_files() else genotype_args(),
        trait_config=lambda wc: json.dumps(TRAIT_DEFINITIONS[wc.trait]),
        test_fraction=config["split"]["test_fraction"],
        split_seed=config["split"]["seed"],
        covariates=lambda wc: covariate_args(),
        covariate_files=lambda wc, input: covariate_file_args(input),
        relatedness=(
            "kinship table" if input_path("kinship") else "KING from genotypes"
        ),
        snp_source=lambda wc: snp_source_args(wc.trait, discovery_ids(wc.trait)),
    shell:
        "cmix store {params.genotypes:q} --keep {input.keep:q} --snps {input.snps:q} "
        "--pheno {input.pheno:q} --trait {wildcards.trait} --trait-config {params.trait_config:q} "
        "{params.covariates:q} {params.covariate_files:q} {params.snp_source:q} "
        "--sample-filters {input.filters:q} "
        "--relatedness {params.relatedness:q} --test-fraction {params.test_fraction:q} --split-seed {params.split_seed:q} --force "
        "--out {output:q} 2> {log:q}"
