# Public files fetched into resources/sumstats/ from a manifest (file, URL, sha256): a
# config may name resources/sumstats/FILE for any FILE listed there.


localrules:
    fetch_resource,


rule fetch_resource:
    output:
        "resources/sumstats/{file}",
    log:
        "resources/logs/{file}.log",
    conda:
        "../envs/cmix.yaml"
    params:
        manifest=FETCH_MANIFEST,
    script:
        "../scripts/fetch_resource.py"
