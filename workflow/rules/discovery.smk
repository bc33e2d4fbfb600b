# The discovery route (config `discovery:`): per listed trait, a stratified, seeded share
# of the unrelated, QC-passing people with a phenotype is set aside; plink2 --glm on them
# (with the configured covariates) gives the summary statistics that `cmix select` ranks
# and whose betas the prs uses; the store leaves them out (cmix.genotypes.gwas).


rule gwas:
    input:
        genotypes=lambda wc: bgen_files() or genotype_files(),
        keep=UNRELATED_KEEP,
        snplist=VARIANTS_SNPLIST,
        pheno=input_path("phenotypes"),
        sample_qc=(input_path("sample_qc") or []) if COVARIATES else [],
        eigenvec=(PCS_EIGENVEC if COVARIATES.get("pcs_from") == "eigenvec" else []),
    output:
        sumstats=f"{OUT}/discovery/{{trait}}.sumstats.gz",
        ids=f"{OUT}/discovery/{{trait}}.discovery.id",
    log:
        f"{OUT}/logs/gwas/{{trait}}.log",
    benchmark:
        f"{OUT}/benchmarks/gwas/{{trait}}.tsv"
    conda:
        "../envs/cmix.yaml"
    threads: 2
    params:
        # config-derived params apart from the file paths taken from input: Snakemake
        # reruns a job when a param changes, but not a param computed from its input
        genotypes=lambda wc: bgen_args() if bgen_files() else genotype_args(),
        extract=lambda wc, input: [] if bgen_files() else ["--extract", input.snplist],
        trait_config=lambda wc: json.dumps(TRAIT_DEFINITIONS[wc.trait]),
        multiclass=lambda wc: (
            ["--multiclass", DISCOVERY["multiclass"][wc.trait]]
            if wc.trait in (DISCOVERY.get("multiclass") or {})
            else []
        ),
        covariates=lambda wc: covariate_args(),
        covariate_files=lambda wc, input: covariate_file_args(input),
        fraction=DISCOVERY.get("fraction", 0.5),
        seed=DISCOVERY.get("seed", 0),
    shell:
        "cmix gwas {params.genotypes:q} {params.extract:q} --keep {input.keep:q} "
        "--pheno {input.pheno:q} "
        "--trait {wildcards.trait} --trait-config {params.trait_config:q} "
        "{params.multiclass:q} {params.covariates:q} {params.covariate_files:q} "
        "--discovery-fraction {params.fraction:q} --discovery-seed {params.seed:q} "
        "--threads {threads} --ids-out {output.ids:q} --out {output.sumstats:q} 2> {log:q}"
