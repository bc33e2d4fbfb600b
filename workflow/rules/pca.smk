# Genetic PCs: fitted on the unrelated samples, every QC-passing sample projected.


rule pca:
    input:
        genotypes=genotype_files(),
        fit=UNRELATED_KEEP,
        project=SAMPLES_KEEP,
        snplist=VARIANTS_SNPLIST,
        regions=PCA_REGIONS or [],
    output:
        pca_outputs(),
    log:
        f"{OUT}/logs/pca.log",
    benchmark:
        f"{OUT}/benchmarks/pca.tsv"
    conda:
        "../envs/cmix.yaml"
    threads: 2
    params:
        genotypes=lambda wc: genotype_args(),
        out=lambda wc, output: step_prefix("pca", "eigenvec", output[0]),
        regions=(
            f"--exclude-regions {shlex.quote(PCA_REGIONS)}"
            if PCA_REGIONS
            else "--no-exclude-regions"
        ),
        prune=(
            f"--indep-pairwise {config['pca']['indep_pairwise']}"
            if config["pca"]["indep_pairwise"]
            else "--no-prune"
        ),
        n_pcs=config["pca"]["n_pcs"],
        seed=config["pca"]["seed"],
    shell:
        "cmix pca {params.genotypes:q} --keep {input.fit:q} --project {input.project:q} "
        "--extract {input.snplist:q} {params.regions} {params.prune} --pcs {params.n_pcs} "
        "--seed {params.seed} --threads {threads} --out {params.out:q} 2> {log:q}"
