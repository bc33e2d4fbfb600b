# Sample filters -> variant QC on kept samples -> unrelated set.


rule sample_filters:
    input:
        fam=input_path("bfile") + ".fam",
        sqc=input_path("sample_qc"),
        withdrawn=input_path("withdrawn"),
    output:
        keep=f"{OUT}/qc/samples.keep",
        table=f"{OUT}/qc/samples.filters.tsv",
    log:
        f"{OUT}/logs/sample_filters.log",
    benchmark:
        f"{OUT}/benchmarks/sample_filters.tsv"
    conda:
        "../envs/cmix.yaml"
    params:
        out=lambda wc, output: output.keep[: -len(".keep")],
        extra=" ".join(
            (
                ["--sqc-headerless"]
                if config.get("inputs", {}).get("sample_qc_headerless")
                else []
            )
            + [config["sample_qc"].get("extra", "")]
        ),
    shell:
        "cmix samples --fam {input.fam} --sqc {input.sqc} --withdrawn {input.withdrawn} "
        "{params.extra} --out {params.out} 2> {log}"


if not config["variant_qc"].get("split_by_chrom", False):

    rule variant_qc:
        input:
            bfile_files(input_path("bfile")),
            keep=f"{OUT}/qc/samples.keep",
        output:
            snplist=f"{OUT}/qc/variants.snplist",
            table=f"{OUT}/qc/variants.vqc.tsv",
        log:
            f"{OUT}/logs/variant_qc.log",
        benchmark:
            f"{OUT}/benchmarks/variant_qc.tsv"
        conda:
            "../envs/cmix.yaml"
        threads: 2
        params:
            bfile=lambda wc, input: input[0][: -len(".bed")],
            out=lambda wc, output: output.snplist[: -len(".snplist")],
            maf=config["variant_qc"]["maf"],
            hwe=config["variant_qc"]["hwe"],
            geno=config["variant_qc"]["geno"],
        shell:
            "cmix qc --bfile {params.bfile} --keep {input.keep} --maf {params.maf} "
            "--hwe {params.hwe} --geno {params.geno} --threads {threads} --out {params.out} 2> {log}"

else:

    # UKB-sized inputs: one job per chromosome (the cluster runs them side by side), then
    # the outputs concatenated in chromosome order (= .bim order for a sorted .bim).
    rule variant_qc_chrom:
        input:
            bfile_files(input_path("bfile")),
            keep=f"{OUT}/qc/samples.keep",
        output:
            snplist=f"{OUT}/qc/chrom/variants.chr{{chrom}}.snplist",
            table=f"{OUT}/qc/chrom/variants.chr{{chrom}}.vqc.tsv",
        log:
            f"{OUT}/logs/variant_qc/chr{{chrom}}.log",
        benchmark:
            f"{OUT}/benchmarks/variant_qc/chr{{chrom}}.tsv"
        conda:
            "../envs/cmix.yaml"
        threads: 2
        params:
            bfile=lambda wc, input: input[0][: -len(".bed")],
            out=lambda wc, output: output.snplist[: -len(".snplist")],
            maf=config["variant_qc"]["maf"],
            hwe=config["variant_qc"]["hwe"],
            geno=config["variant_qc"]["geno"],
        shell:
            "cmix qc --bfile {params.bfile} --keep {input.keep} --chr {wildcards.chrom} "
            "--maf {params.maf} --hwe {params.hwe} --geno {params.geno} "
            "--threads {threads} --out {params.out} 2> {log}"

    rule variant_qc_merge:
        input:
            snplists=expand(
                f"{OUT}/qc/chrom/variants.chr{{chrom}}.snplist", chrom=QC_CHROMS
            ),
            tables=expand(
                f"{OUT}/qc/chrom/variants.chr{{chrom}}.vqc.tsv", chrom=QC_CHROMS
            ),
        output:
            snplist=f"{OUT}/qc/variants.snplist",
            table=f"{OUT}/qc/variants.vqc.tsv",
        log:
            f"{OUT}/logs/variant_qc_merge.log",
        conda:
            "../envs/cmix.yaml"
        shell:
            "(cat {input.snplists} > {output.snplist} && "
            "awk 'FNR > 1 || NR == 1' {input.tables} > {output.table}) 2> {log}"


rule unrelated:
    input:
        bfile_files(input_path("bfile")),
        keep=f"{OUT}/qc/samples.keep",
        snplist=f"{OUT}/qc/variants.snplist",
        kinship=input_path("kinship") if input_path("kinship") else [],
    output:
        keep=f"{OUT}/qc/unrelated.king.cutoff.in.id",
        out=f"{OUT}/qc/unrelated.king.cutoff.out.id",
    log:
        f"{OUT}/logs/unrelated.log",
    benchmark:
        f"{OUT}/benchmarks/unrelated.tsv"
    conda:
        "../envs/cmix.yaml"
    threads: 2
    params:
        bfile=lambda wc, input: input[0][: -len(".bed")],
        out=lambda wc, output: output.keep[: -len(".king.cutoff.in.id")],
        cutoff=config["relatedness"]["cutoff"],
        source=lambda wc, input: (
            f"--kinship {input.kinship} --fam {input[2]}"
            if input.kinship
            else f"--bfile {input[0][: -len('.bed')]} --extract {input.snplist}"
        ),
    shell:
        "cmix unrelated {params.source} --keep {input.keep} --cutoff {params.cutoff} "
        "--out {params.out} 2> {log}"
