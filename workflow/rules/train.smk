# One job per (trait, method, budget, seed): GPU jobs on a cluster, CPU anywhere.


rule train_config:
    output:
        f"{OUT}/train_config.json",
    params:
        cfg=json.dumps(config.get("train", {}).get("config", {}), sort_keys=True),
    log:
        f"{OUT}/logs/train_config.log",
    run:
        from cmix.io import atomic_path

        with atomic_path(output[0]) as tmp:
            tmp.write_text(params.cfg + "\n")


rule train:
    input:
        store=f"{OUT}/traits/{{trait}}.zarr",
        config=f"{OUT}/train_config.json",
    output:
        run_dir() + "/metrics.json",
    params:
        out=run_dir(),
        device=config.get("train", {}).get("device", "auto"),
    threads: 2
    log:
        f"{OUT}/logs/train/{{trait}}/{{method}}/budget{{budget}}/seed{{seed}}.log",
    benchmark:
        f"{OUT}/benchmarks/train/{{trait}}/{{method}}/budget{{budget}}/seed{{seed}}.tsv"
    shell:
        "cmix train --store {input.store} --budget {wildcards.budget} --seed {wildcards.seed} "
        "--method {wildcards.method} --config {input.config} --device {params.device} "
        "--resume --out {params.out} 2> {log}"
