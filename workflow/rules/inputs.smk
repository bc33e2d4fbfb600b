# The demo's cohort: simulated when the config has a `simulate` section.
if SIMULATED:

    rule simulate:
        output:
            bfile_files(f"{OUT}/cohort/genotypes"),
            f"{OUT}/cohort/sample_qc.tsv",
            f"{OUT}/cohort/withdrawn.txt",
            f"{OUT}/cohort/kinship.dat",
            f"{OUT}/cohort/phenotypes.tsv",
            expand(f"{OUT}/cohort/sumstats/{{trait}}.txt.gz", trait=TRAITS),
        log:
            f"{OUT}/logs/simulate.log",
        benchmark:
            f"{OUT}/benchmarks/simulate.tsv"
        conda:
            "../envs/cmix.yaml"
        params:
            out=lambda wc, output: os.path.dirname(output[0]),
            n_samples=config["simulate"]["n_samples"],
            n_variants=config["simulate"]["n_variants"],
            seed=config["simulate"]["seed"],
            extra=shlex.split(config["simulate"].get("extra", "")),
        shell:
            "cmix simulate --out {params.out:q} --n-samples {params.n_samples:q} "
            "--n-variants {params.n_variants:q} --seed {params.seed:q} {params.extra:q} 2> {log:q}"
