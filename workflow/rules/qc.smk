# Sample filters -> variant QC on kept samples -> unrelated set.


# inputs.sample_qc and inputs.withdrawn are optional: a filter without its input is
# skipped, and samples.filters.json records it as "not given". A checkpoint: the number
# of KING tiles (relatedness.tile_block) follows from how many samples it keeps.
checkpoint sample_filters:
    input:
        fam=fam_file(),
        sqc=input_path("sample_qc") or [],
        withdrawn=input_path("withdrawn") or [],
    output:
        keep=SAMPLES_KEEP,
        table=step_file("samples", SAMPLES, "table"),
        summary=step_file("samples", SAMPLES, "summary"),
    log:
        f"{OUT}/logs/sample_filters.log",
    benchmark:
        f"{OUT}/benchmarks/sample_filters.tsv"
    conda:
        "../envs/cmix.yaml"
    params:
        out=lambda wc, output: step_prefix("samples", "keep", output.keep),
        filters=lambda wc, input: (["--sqc", input.sqc] if input.sqc else [])
        + (["--withdrawn", input.withdrawn] if input.withdrawn else []),
        extra=(
            ["--sqc-headerless"]
            if config.get("inputs", {}).get("sample_qc_headerless")
            else []
        )
        + shlex.split(config["sample_qc"].get("extra", "")),
    shell:
        "cmix samples --fam {input.fam:q} {params.filters:q} "
        "{params.extra:q} --out {params.out:q} 2> {log:q}"


# Variant QC: one job per chromosome with split_by_chrom (the cluster runs them side by
# side), else one job over the whole .bed (chrom "all"); the outputs are concatenated in
# chromosome order (= .bim order for a sorted .bim).
rule variant_qc:
    input:
        genotypes=lambda wc: genotype_files(wc.chrom),
        keep=SAMPLES_KEEP,
        hwe_samples=hwe_sample_files(),
    output:
        snplist=step_file("qc", f"{OUT}/qc/chrom/variants.{{chrom}}", "snplist"),
        table=step_file("qc", f"{OUT}/qc/chrom/variants.{{chrom}}", "table"),
    log:
        f"{OUT}/logs/variant_qc/{{chrom}}.log",
    benchmark:
        f"{OUT}/benchmarks/variant_qc/{{chrom}}.tsv"
    conda:
        "../envs/cmix.yaml"
    threads: 2
    params:
        genotypes=lambda wc: genotype_args(wc.chrom),
        out=lambda wc, output: step_prefix("qc", "snplist", output.snplist),
        maf=config["variant_qc"]["maf"],
        hwe=[str(config["variant_qc"]["hwe"])]
        + (["midp"] if config["variant_qc"].get("hwe_midp") else []),
        hwe_samples=hwe_sample_args(),
        geno=config["variant_qc"]["geno"],
    shell:
        "cmix qc {params.genotypes:q} --keep {input.keep:q} "
        "--maf {params.maf:q} --hwe {params.hwe:q} {params.hwe_samples:q} "
        "--geno {params.geno:q} --threads {threads} --out {params.out:q} 2> {log:q}"


localrules:
    variant_qc_merge,


rule variant_qc_merge:
    input:
        snplists=expand(
            step_file("qc", f"{OUT}/qc/chrom/variants.{{chrom}}", "snplist"),
            chrom=QC_JOBS,
        ),
        tables=expand(
            step_file("qc", f"{OUT}/qc/chrom/variants.{{chrom}}", "table"),
            chrom=QC_JOBS,
        ),
    output:
        snplist=VARIANTS_SNPLIST,
        table=step_file("qc", VARIANTS, "table"),
    log:
        f"{OUT}/logs/variant_qc_merge.log",
    conda:
        "../envs/cmix.yaml"
    shell:
        "(cat {input.snplists:q} > {output.snplist:q}.tmp && "
        "awk 'FNR > 1 || NR == 1' {input.tables:q} > {output.table:q}.tmp && "
        "mv {output.snplist:q}.tmp {output.snplist:q} && "
        "mv {output.table:q}.tmp {output.table:q}) 2> {log:q}"


rule unrelated:
    input:
        genotypes=lambda wc: genotype_files(),
        keep=SAMPLES_KEEP,
        snplist=VARIANTS_SNPLIST,
        kinship=input_path("kinship") if input_path("kinship") else [],
        tiles=king_tile_files,
    output:
        keep=UNRELATED_KEEP,
        out=step_file("unrelated", UNRELATED, "out"),
    log:
        f"{OUT}/logs/unrelated.log",
    benchmark:
        f"{OUT}/benchmarks/unrelated.tsv"
    conda:
        "../envs/cmix.yaml"
    threads: 2
    params:
        out=lambda wc, output: step_prefix("unrelated", "keep", output.keep),
        cutoff=config["relatedness"]["cutoff"],
        # config-derived params apart from the file paths taken from input: Snakemake
        # reruns a job when a param changes, but not a param computed from its input
        source=lambda wc: (
            ["--fam", fam_file()] if input_path("kinship") else genotype_args()
        ),
        files=lambda wc, input: (
            ["--kinship", input.kinship]
            if input.kinship
            else ["--extract", input.snplist]
            + (["--king-tiles", *input.tiles] if input.tiles else [])
        ),
    shell:
        "cmix unrelated {params.files:q} {params.source:q} --keep {input.keep:q} --cutoff {params.cutoff:q} "
        "--threads {threads} --out {params.out:q} 2> {log:q}"


# KING-robust over the cluster (relatedness.tile_block): the kept samples in blocks, one
# job per pair of blocks, gathered by `cmix unrelated --king-tiles` into the same pairs
# and the same kept set as the one-process run.
rule king_tile:
    input:
        genotypes=lambda wc: genotype_files(),
        keep=SAMPLES_KEEP,
        snplist=VARIANTS_SNPLIST,
    output:
        tile=f"{OUT}/qc/king_tiles/tile.{{i}}.{{j}}.npz",
    log:
        f"{OUT}/logs/king_tile.{{i}}.{{j}}.log",
    benchmark:
        f"{OUT}/benchmarks/king_tile.{{i}}.{{j}}.tsv"
    wildcard_constraints:
        i=r"\d+",
        j=r"\d+",
    conda:
        "../envs/cmix.yaml"
    threads: 2
    params:
        source=lambda wc: genotype_args(),
        cutoff=config["relatedness"]["cutoff"],
        block=config["relatedness"].get("tile_block"),
    shell:
        "cmix king-tile {params.source:q} --extract {input.snplist:q} --keep {input.keep:q} "
        "--cutoff {params.cutoff:q} --tile-block {params.block} --tile {wildcards.i} {wildcards.j} "
        "--threads {threads} --out {output.tile:q} 2> {log:q}"
