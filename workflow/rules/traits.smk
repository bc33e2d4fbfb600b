# Per trait: top SNPs from the summary statistics, then the Zarr dosage store.


rule select_snps:
    input:
        bfile_files(input_path("bfile")),
        sumstats=lambda wc: sumstats_path(wc.trait),
        snplist=f"{OUT}/qc/variants.snplist",
    output:
        f"{OUT}/traits/{{trait}}.snps.tsv",
    log:
        f"{OUT}/logs/select_snps/{{trait}}.log",
    benchmark:
        f"{OUT}/benchmarks/select_snps/{{trait}}.tsv"
    conda:
        "../envs/cmix.yaml"
    params:
        bfile=lambda wc, input: bfile_prefix(input),
        top=config["selection"]["top"],
    shell:
        "cmix select --sumstats {input.sumstats:q} --bfile {params.bfile:q} "
        "--extract {input.snplist:q} --top {params.top:q} --out {output:q} 2> {log:q}"


rule store:
    input:
        bfile_files(input_path("bfile")),
        keep=f"{OUT}/qc/unrelated.king.cutoff.in.id",
        snps=f"{OUT}/traits/{{trait}}.snps.tsv",
        pheno=input_path("phenotypes"),
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
        bfile=lambda wc, input: bfile_prefix(input),
        trait_config=lambda wc: json.dumps(TRAIT_DEFINITIONS[wc.trait]),
        test_fraction=config["split"]["test_fraction"],
        split_seed=config["split"]["seed"],
    shell:
        "cmix store --bfile {params.bfile:q} --keep {input.keep:q} --snps {input.snps:q} "
        "--pheno {input.pheno:q} --trait {wildcards.trait} --trait-config {params.trait_config:q} "
        "--test-fraction {params.test_fraction:q} --split-seed {params.split_seed:q} --force "
        "--out {output:q} 2> {log:q}"
