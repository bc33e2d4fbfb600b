# Per trait: top SNPs from the summary statistics, then the Zarr dosage store.


rule select_snps:
    input:
        bfile_files(input_path("bfile")),
        sumstats=lambda wc: sumstats_path(wc.trait),
        snplist=f"{OUT}/qc/variants.snplist",
    output:
        f"{OUT}/traits/{{trait}}.snps.tsv",
    params:
        bfile=input_path("bfile"),
        top=config["selection"]["top"],
    log:
        f"{OUT}/logs/select_snps/{{trait}}.log",
    benchmark:
        f"{OUT}/benchmarks/select_snps/{{trait}}.tsv"
    shell:
        "cmix select --sumstats {input.sumstats} --bfile {params.bfile} "
        "--extract {input.snplist} --top {params.top} --out {output} 2> {log}"


rule store:
    input:
        bfile_files(input_path("bfile")),
        keep=f"{OUT}/qc/unrelated.king.cutoff.in.id",
        snps=f"{OUT}/traits/{{trait}}.snps.tsv",
        pheno=input_path("phenotypes"),
    output:
        directory(f"{OUT}/traits/{{trait}}.zarr"),
    params:
        bfile=input_path("bfile"),
        trait_config=lambda wc: json.dumps(config["traits"][wc.trait]),
        test_fraction=config["split"]["test_fraction"],
        split_seed=config["split"]["seed"],
    threads: 2
    log:
        f"{OUT}/logs/store/{{trait}}.log",
    benchmark:
        f"{OUT}/benchmarks/store/{{trait}}.tsv"
    shell:
        "cmix store --bfile {params.bfile} --keep {input.keep} --snps {input.snps} "
        "--pheno {input.pheno} --trait {wildcards.trait} --trait-config '{params.trait_config}' "
        "--test-fraction {params.test_fraction} --split-seed {params.split_seed} --force "
        "--out {output} 2> {log}"
