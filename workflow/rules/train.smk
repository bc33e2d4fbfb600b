# One job per (trait, method, budget): `cmix train` runs every seed of config `seeds` in one
# command, each into its own run folder: a network method's seeds train as one group (their
# models take every step together, on the GPU or the CPU); the other methods run as many
# seeds at once as the job has threads. The cmix methods' runs share their pre-training
# through {OUT}/encoders (cmix's stages are cmix_selfsl_pl's and cmix_selfsl's; the metrics
# are the same either way). GPU jobs on a cluster, CPU anywhere. On a cluster,
# the jobs of `train: runs_per_job` runs are packed into one submitted job (a Snakemake
# group): they share one allocation and run one after another on its GPU.


rule train_config:
    output:
        f"{OUT}/train_config.json",
    log:
        f"{OUT}/logs/train_config.log",
    conda:
        "../envs/cmix.yaml"
    params:
        cfg=json.dumps(config.get("train", {}).get("config", {}), sort_keys=True),
    shell:
        "(printf '%s\\n' {params.cfg:q} > {output:q}.tmp && mv {output:q}.tmp {output:q}) "
        "2> {log:q}"


rule train:
    input:
        store=f"{OUT}/traits/{{trait}}.zarr",
        config=f"{OUT}/train_config.json",
    output:
        expand(
            f"{run_dir(method=GPU_METHOD)}/metrics.json",
            seed=SEEDS,
            allow_missing=True,
        ),
    log:
        f"{OUT}/logs/train/{{trait}}/{{method}}/budget{{budget}}.log",
    benchmark:
        f"{OUT}/benchmarks/train/{{trait}}/{{method}}/budget{{budget}}.tsv"
    group:
        lambda wildcards: packed_group("train")
    conda:
        "../envs/cmix.yaml"
    threads: 2
    params:
        out=lambda wc: run_dir(wc.trait, wc.method, wc.budget, seed="{seed}"),
        seeds=SEEDS,
        # the scikit-learn methods (rule train_cpu) on the CPU, side by side
        device=lambda wc: (
            config.get("train", {}).get("device", "auto")
            if wc.method in GPU_METHODS
            else "cpu"
        ),
        encoders=f"{OUT}/encoders",
        # how the job runs, not what it computes: a param of `threads` is no rerun
        # trigger (Snakemake leaves such derived params out of its params check)
        one_at_a_time=lambda wc, threads: (
            ONE_AT_A_TIME if wc.method in GPU_METHODS else ""
        ),
    shell:
        "{params.one_at_a_time}cmix train --store {input.store:q} --budget {wildcards.budget} "
        "--seed {params.seeds} --method {wildcards.method} --config {input.config:q} "
        "--device {params.device:q} --threads {threads} --out {params.out:q} "
        "--shared-encoders {params.encoders:q} 2> {log:q}"


# The scikit-learn methods (covariates, prs, logreg, pca_logreg, label_spreading, gbdt):
# the same command on the CPU partition, their seeds in parallel on the job's threads.
use rule train as train_cpu with:
    output:
        expand(
            f"{run_dir(method=CPU_METHOD)}/metrics.json",
            seed=SEEDS,
            allow_missing=True,
        ),
    group:
        lambda wildcards: packed_group("train_cpu")


rule report:
    input:
        all_metrics(),
    output:
        results=f"{OUT}/report/results.tsv",
        summary=f"{OUT}/report/summary.tsv",
        html=report(
            f"{OUT}/report/report.html",
            caption="../report/report.rst",
            category="cmix report",
        ),
    log:
        f"{OUT}/logs/report.log",
    conda:
        "../envs/cmix.yaml"
    params:
        runs=lambda wc, output: os.path.join(
            os.path.dirname(os.path.dirname(output.results)), "runs"
        ),
        out=lambda wc, output: os.path.dirname(output.results),
        traits=TRAITS,
        methods=METHODS,
        budgets=BUDGETS,
        seeds=SEEDS,
    shell:
        "cmix report --runs {params.runs:q} --out {params.out:q} --traits {params.traits:q} "
        "--methods {params.methods:q} --budgets {params.budgets:q} --seeds {params.seeds:q} "
        "2> {log:q}"
