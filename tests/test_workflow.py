"""The Snakemake workflow: lint, formatting, the SLURM plan, config errors, an end-to-end run."""

import copy
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from cmix.genotypes.phenotypes import TRAIT_KEYS
from cmix.simulate.balding_nichols import simulate_cohort

REPO = Path(__file__).resolve().parent.parent


# snakemake of the environment under test, whatever else PATH holds (a pyenv shim named
# snakemake, for one, puts its own interpreter's bin folder, and its cmix, ahead on PATH)
SNAKEMAKE = [sys.executable, "-m", "snakemake"]


def snakemake(*args, cwd=REPO):
    return subprocess.run([*SNAKEMAKE, *args], cwd=cwd, capture_output=True, text=True)


def message_lines(out: str) -> list[str]:
    """The non-blank lines of a run's output but Snakemake's own notice that it reads the
    workflow's default profile (workflow/profiles/default) and cmix's notes."""
    return [line for line in out.splitlines()
            if line.strip() and not line.startswith(("Using workflow specific profile",
                                                     "cmix: note: "))]


def test_lint_and_format_are_clean():
    res = snakemake("--lint")
    assert res.returncode == 0, res.stdout + res.stderr
    if shutil.which("snakefmt"):
        res = subprocess.run(["snakefmt", "--check", "workflow/"], cwd=REPO, capture_output=True,
                             text=True)
        assert res.returncode == 0, res.stdout + res.stderr


@pytest.fixture(scope="module")
def ukb_standin(tmp_path_factory):
    """A tiny simulated cohort laid out like real inputs, and a config naming its paths."""
    d = tmp_path_factory.mktemp("ukb")
    simulate_cohort(d / "c", n_samples=300, n_variants=1000, n_discovery=500, seed=2)
    cfg = yaml.safe_load((REPO / "config/ukb.yaml").read_text())
    cfg["run_name"] = "ukbtiny"
    c = d / "c"
    cfg["inputs"] = {
        "bfile": str(c / "genotypes"), "sample_qc": str(c / "sample_qc.tsv"),
        "withdrawn": str(c / "withdrawn.txt"), "kinship": str(c / "kinship.dat"),
        "phenotypes": str(c / "phenotypes.tsv"),
        "sumstats": {t: str(c / f"sumstats/{t}.txt.gz") for t in cfg["traits"]},
    }
    cfg["variant_qc"]["chromosomes"] = [1, 2, 3, 4, 5]   # the stand-in's autosomes
    cfg["budgets"] = [50, 100]
    cfg["seeds"] = [1, 2]
    # the external summary statistics route (the discovery route has its own tests in
    # tests/test_gwas.py)
    cfg["discovery"]["traits"] = []
    path = d / "ukb.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path, cfg


def plan(output: str) -> list[dict]:
    """Parse a dry run's jobs: rule name and resources per job."""
    jobs = []
    # jobs of a group are indented under "Group job NAME"
    job = r"(?:local)?(?:rule|checkpoint) "          # a checkpoint is a rule in the plan
    for block in re.split(rf"\n(?=\s*\[[^\]]*\]\n\s*{job})|\n(?=\s*{job})", output):
        m = re.search(rf"^\s*{job}(\w+):", block, re.M)
        if not m:
            continue
        res = re.search(r"^\s+resources: (.*)$", block, re.M)
        resources = dict(kv.split("=", 1) for kv in res.group(1).split(", ")) if res else {}
        jobs.append({"rule": m.group(1), "resources": resources})
    return jobs


def test_slurm_dry_run_plans_gpu_training_jobs(ukb_standin, tmp_path):
    cfg_path, cfg = ukb_standin
    res = snakemake("-n", "--profile", "profiles/slurm", "--configfile", str(cfg_path),
                    "--directory", str(REPO))
    assert res.returncode == 0, res.stdout + res.stderr
    jobs = plan(res.stdout)
    rules = [j["rule"] for j in jobs]
    from cmix.learn.methods import METHODS

    n_net = sum(METHODS[m].network for m in cfg["methods"])
    assert 0 < n_net < len(cfg["methods"])
    n_budgets = 2                                           # every seed in one job
    assert rules.count("train") == len(cfg["traits"]) * n_net * n_budgets
    assert rules.count("train_cpu") == len(cfg["traits"]) * (len(cfg["methods"]) - n_net) * 2
    assert "simulate" not in rules                      # real inputs: nothing simulated
    for rule in ("sample_filters", "variant_qc_merge", "unrelated"):
        assert rules.count(rule) == 1
    assert rules.count("variant_qc") == 5          # UKB template: QC split per chromosome
    qc_jobs = [j for j in jobs if j["rule"] == "variant_qc"]
    # the profile's threads and memory for variant_qc reach the per-chromosome jobs
    assert all(j["resources"].get("mem_mb") == "16000" for j in qc_jobs), qc_jobs
    assert rules.count("select_snps") == rules.count("store") == len(cfg["traits"])
    for job in jobs:
        if job["rule"] == "all":
            continue
        r = job["resources"]
        if job["rule"] == "train":
            assert r.get("slurm_partition") == "gpu" and r.get("gpu") == "1", r
        else:      # the scikit-learn methods' training jobs hold no GPU
            assert r.get("slurm_partition") == "cpu" and "gpu" not in r, (job["rule"], r)


def test_one_trait_by_config_alone(ukb_standin):
    cfg_path, cfg = ukb_standin
    res = snakemake("-n", "--cores", "1", "--configfile", str(cfg_path),
                    "--config", 'traits=["hair_colour"]', "budgets=[50]")
    assert res.returncode == 0, res.stderr
    rules = [j["rule"] for j in plan(res.stdout)]
    # every seed in one job
    assert rules.count("train") + rules.count("train_cpu") == len(cfg["methods"])
    assert rules.count("store") == 1


@pytest.mark.parametrize("override, message", [
    (['traits=["eye_colour"]'], "traits: unknown trait 'eye_colour'"),
    (["budgets=[100000]"], "budgets: 100000 labeled samples asked for"),
    (["bogus_key=1"], "'bogus_key' was unexpected"),
    (['methods=["cmix","svm"]'], "'svm' is not one of"),
    (["train={'config': {'vime_kk': 3}}"], "'vime_kk' was unexpected) (did you mean 'vime_k'?)"),
    (["train={'config': {'lr': 'abc'}}"], "'abc' does not match"),
    (["train={'config': {'alpha': 0.9}}"], "train.config: alpha = 0.9, expected a number in [0.0, 0.5]"),
])
def test_config_errors_fail_before_any_job(ukb_standin, tmp_path, override, message):
    cfg_path, _ = ukb_standin
    res = snakemake("--cores", "1", "--configfile", str(cfg_path), "--config", *override,
                    "--directory", str(tmp_path))
    assert res.returncode != 0
    assert message in res.stdout + res.stderr
    assert not (tmp_path / "results").exists()


def test_a_number_yaml_reads_as_text_gets_its_spelling(ukb_standin, tmp_path):
    """YAML 1.1 reads `hwe: 1e-7` as the text '1e-7'; the message says how to write it."""
    cfg_path, _ = ukb_standin
    bad = tmp_path / "bad.yaml"
    text = cfg_path.read_text()
    assert text.count("hwe: 1.0e-07") == 1
    bad.write_text(text.replace("hwe: 1.0e-07", "hwe: 1e-7"))
    res = snakemake("--cores", "1", "--configfile", str(bad), "--directory", str(tmp_path))
    assert res.returncode != 0
    assert ("variant_qc.hwe: '1e-7' is not of type 'number' (YAML reads 1e-7 as text: write "
            "it with a decimal point, e.g. 1.0e-7)") in res.stdout + res.stderr
    assert not (tmp_path / "results").exists()


@pytest.mark.parametrize("trait, change, message", [
    ("hair_colour", {"instanse": 2}, "'instanse' was unexpected"),
    ("mean_platelet_volume", {"binarize": "median"}, "'binarize' was unexpected"),
    ("hair_colour", {"classes": {"blonde": [1.5], "red": [2]}}, "1.5 is not of type"),
])
def test_trait_definition_errors_fail_before_any_job(ukb_standin, tmp_path, trait, change,
                                                     message):
    cfg_path, cfg = ukb_standin
    cfg = copy.deepcopy(cfg)
    cfg["trait_definitions"][trait].update(change)
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(cfg))
    res = snakemake("--cores", "1", "--configfile", str(bad), "--directory", str(tmp_path))
    assert res.returncode != 0
    assert message in res.stdout + res.stderr
    assert f"config error: trait_definitions.{trait}" in res.stdout + res.stderr
    assert not (tmp_path / "results").exists()


def test_the_demo_is_short_answers_and_the_full_grid_is_one_config_away():
    """config/config.yaml (the README's first command) is the short demo: cmix, its
    self-supervised ablation, an MLP and a linear baseline, two budgets, and the fewest
    seeds with which its report can show a difference in either table: best against
    runner-up (Holm over traits x budgets) and cmix's family against the best other method
    (Holm over cmix-family methods x traits x budgets; cmix.report.verdicts.seeds_needed).
    config/demo_full.yaml keeps the full demo grid (every trait, nine methods)."""
    from cmix.report.verdicts import is_cmix, seeds_needed

    demo = yaml.safe_load((REPO / "config/config.yaml").read_text())
    full = yaml.safe_load((REPO / "config/demo_full.yaml").read_text())
    assert {"cmix", "cmix_selfsl", "mlp", "logreg"} <= set(demo["methods"])
    assert len(demo["budgets"]) >= 2
    cells = len(demo["traits"]) * len(demo["budgets"])
    n_cmix = sum(is_cmix(m) for m in demo["methods"])
    assert len(demo["seeds"]) == seeds_needed(n_cmix * cells) >= seeds_needed(cells)
    assert len(set(demo["seeds"])) == len(demo["seeds"])
    assert len(demo["traits"]) * len(demo["methods"]) * len(demo["budgets"]) <= 20
    assert full["traits"] == list(full["trait_definitions"]) and len(full["methods"]) == 9
    assert full["run_name"] != demo["run_name"]
    assert full["trait_definitions"] == demo["trait_definitions"]


def test_schema_knows_the_trait_keys_cmix_knows():
    schema = yaml.safe_load((REPO / "workflow/schemas/config.schema.yaml").read_text())
    definition = schema["properties"]["trait_definitions"]["additionalProperties"]
    assert definition["additionalProperties"] is False
    assert set(definition["properties"]) == set(TRAIT_KEYS)


def test_schema_knows_the_methods_and_train_keys_cmix_knows():
    """The schema's method enum is the registry, and its train.config keys and types are
    cmix.learn.config's, so a wrong key stops snakemake before any job."""
    from cmix.learn.config import CHOICES, DEFAULTS, NULLABLE
    from cmix.learn.methods import METHODS

    schema = yaml.safe_load((REPO / "workflow/schemas/config.schema.yaml").read_text())
    props = schema["properties"]
    assert props["methods"]["items"]["enum"] == list(METHODS)
    train = props["train"]["properties"]["config"]
    assert train["additionalProperties"] is False
    assert set(train["properties"]) == set(DEFAULTS) | {"preset"}
    for key, default in DEFAULTS.items():
        spec = train["properties"][key]
        if isinstance(default, bool):
            assert spec == {"type": "boolean"}, key
        elif isinstance(default, int):
            assert spec["type"] == (["integer", "null"] if key in NULLABLE else "integer"), key
        elif isinstance(default, float):
            assert "number" in spec["type"], key
        elif key in CHOICES:
            assert spec["enum"] == list(CHOICES[key]), key
        else:                           # plugin_config: a mapping per plugin method
            assert "object" in spec["type"], key


FAST_TRAIN = {"hidden": 32, "d_proj": 16, "epochs": 3, "warmup_epochs": 1, "lp_every": 1,
              "pred_epochs": 15, "pred_patience": 5, "batch_size": 128}


@pytest.mark.slow
def test_demo_end_to_end_then_reruns_only_what_changed(tmp_path):
    """A small demo, simulated cohort -> metrics (and report), through real jobs, in a
    folder whose path has a space (every path in the rules is quoted)."""
    tmp_path = tmp_path / "work dir"
    tmp_path.mkdir()
    cfg = yaml.safe_load((REPO / "config/config.yaml").read_text())
    cfg.update(run_name="ci", simulate={"n_samples": 800, "n_variants": 1500, "seed": 3},
               selection={"top": 100}, traits=["mean_platelet_volume", "hair_colour"],
               budgets=[60], seeds=[1], methods=["cmix", "mlp"],
               train={"device": "cpu", "config": FAST_TRAIN})
    path = tmp_path / "ci.yaml"
    path.write_text(yaml.safe_dump(cfg))
    args = ("--cores", "2", "--configfile", str(path), "--directory", str(tmp_path))
    res = snakemake(*args)
    assert res.returncode == 0, res.stderr[-3000:]
    out = tmp_path / "results/ci"
    # it ends by naming the report
    assert f"cmix: done. The report (which method is best at which budget): " \
           f"{out / 'report/report.html'}" in res.stdout + res.stderr
    metrics = sorted(out.glob("runs/*/*/*/*/metrics.json"))
    assert len(metrics) == 2 * 2
    for m in metrics:
        assert 0 <= yaml.safe_load(m.read_text())["test"]["accuracy"] <= 1
    for report_table in ("report/results.tsv", "report/summary.tsv"):
        table = (out / report_table).read_text().splitlines()
        assert len(table) >= 1 + 2 * 2 if "results" in report_table else len(table) >= 2
    # snakemake --report bundles cmix's report
    res = snakemake(*args, "--report", str(tmp_path / "snakemake_report.html"))
    assert res.returncode == 0 and (tmp_path / "snakemake_report.html").stat().st_size > 10_000
    # nothing to do after success
    res = snakemake("-n", *args)
    assert res.returncode == 0 and "Nothing to be done" in res.stdout + res.stderr
    # a changed covariate spec rebuilds both stores (it reran nothing: the param that
    # carried it also held input paths, and Snakemake ignores such params' changes)
    changed = tmp_path / "changed.yaml"
    changed.write_text(yaml.safe_dump({**cfg, "covariates": {**cfg["covariates"], "pcs": 5}}))
    res = snakemake("-n", "--cores", "2", "--configfile", str(changed), "--directory",
                    str(tmp_path))
    assert [j["rule"] for j in plan(res.stdout)].count("store") == 2, res.stdout[-2000:]
    # deleting one trait's store reruns that trait's store and training jobs only
    shutil.rmtree(out / "traits/hair_colour.zarr")
    res = snakemake("-n", *args)
    jobs = [(j["rule"]) for j in plan(res.stdout)]
    assert jobs.count("store") == 1 and jobs.count("train") == 2
    assert "hair_colour" in res.stdout and "wildcards: trait=mean_platelet_volume" not in res.stdout
    # a changed train config reruns the training jobs afresh, with no manual deletion
    snakemake(*args)
    cfg["train"]["config"] = dict(FAST_TRAIN, pred_lr=FAST_TRAIN.get("pred_lr", 1e-3) * 2)
    path.write_text(yaml.safe_dump(cfg))
    res = snakemake(*args)
    assert res.returncode == 0, res.stderr[-3000:]
    logs = list(out.glob("logs/train/*/cmix/*.log"))
    assert len(logs) == 2
    for log in logs:
        assert "starting this run afresh" in log.read_text(), log
    # no individual-level IDs in the logs
    eids = set((out / "cohort/genotypes.fam").read_text().split()[1::6])
    for log in out.glob("logs/**/*.log"):
        words = set(re.findall(r"\d{7}", log.read_text()))
        assert not words & eids, log


@pytest.mark.slow
def test_killed_training_job_resumes_from_its_checkpoint(tmp_path):
    """Kill the training job mid-way (as a SLURM preemption would); the rerun of the
    workflow continues from the job's checkpoint.pt."""
    import os
    import signal
    import time

    cfg = yaml.safe_load((REPO / "config/config.yaml").read_text())
    cfg.update(run_name="kill", simulate={"n_samples": 600, "n_variants": 1200, "seed": 4},
               selection={"top": 100}, traits=["mean_platelet_volume"], budgets=[60],
               seeds=[1], methods=["cmix"],
               train={"device": "cpu", "config": dict(FAST_TRAIN, epochs=60)})
    path = tmp_path / "kill.yaml"
    path.write_text(yaml.safe_dump(cfg))
    args = [*SNAKEMAKE, "--cores", "2", "--configfile", str(path), "--directory", str(tmp_path)]
    proc = subprocess.Popen(args, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    run = tmp_path / "results/kill/runs/mean_platelet_volume/cmix/budget60/seed1"
    deadline = time.time() + 300
    while not (run / "checkpoint.pt").exists() and time.time() < deadline:
        time.sleep(0.5)
    train = subprocess.run(["pgrep", "-s", str(proc.pid), "-f", "cmix train"],
                           capture_output=True, text=True).stdout.split()
    assert train, "no training process found"
    for pid in train:
        os.kill(int(pid), signal.SIGKILL)
    assert proc.wait(timeout=120) != 0
    assert (run / "checkpoint.pt").exists() and not (run / "metrics.json").exists()
    res = subprocess.run(args, cwd=REPO, capture_output=True, text=True)
    assert res.returncode == 0, res.stderr[-2000:]
    log = (tmp_path / "results/kill/logs/train/mean_platelet_volume/cmix/budget60.log")
    assert "resuming from" in log.read_text()
    assert (run / "metrics.json").exists()


def test_a_crashed_run_is_resumed_by_the_plain_rerun(tmp_path):
    """Snakemake killed with its job (as when it dies of "can't start new thread" on a
    loaded machine) leaves the job's outputs marked incomplete. The plain rerun plans
    that job again (the workflow's default profile sets rerun-incomplete; every cmix step
    writes to a temporary name and renames, so rerunning is safe); without that profile
    the same rerun refuses with IncompleteFilesException."""
    import time

    cfg = yaml.safe_load((REPO / "config/config.yaml").read_text())
    cfg.update(run_name="crash", simulate={"n_samples": 600, "n_variants": 1200, "seed": 4},
               traits=["mean_platelet_volume"], budgets=[60], seeds=[1], methods=["logreg"])
    path = tmp_path / "crash.yaml"
    path.write_text(yaml.safe_dump(cfg))
    args = [*SNAKEMAKE, "--cores", "2", "--configfile", str(path), "--directory", str(tmp_path)]
    proc = subprocess.Popen(args, cwd=REPO, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    first_output = tmp_path / "results/crash/cohort/genotypes.bed"
    deadline = time.time() + 120
    while not first_output.exists() and time.time() < deadline:
        time.sleep(0.02)
    subprocess.run(["pkill", "-KILL", "-s", str(proc.pid)], check=True)
    proc.wait(timeout=60)
    # a crash that ends Snakemake's process releases its lock (a kill does not: that is
    # what `snakemake --unlock` is for)
    for lock in (tmp_path / ".snakemake/locks").iterdir():
        lock.unlink()
    refused = subprocess.run([*args, "-n", "--workflow-profile", "none"], cwd=REPO,
                             capture_output=True, text=True)
    assert refused.returncode != 0
    assert "IncompleteFilesException" in refused.stdout + refused.stderr
    rerun = subprocess.run([*args, "-n"], cwd=REPO, capture_output=True, text=True)
    assert rerun.returncode == 0, rerun.stderr[-2000:]
    assert "simulate" in [job["rule"] for job in plan(rerun.stdout)]


def test_missing_input_file_names_the_key(ukb_standin, tmp_path):
    cfg_path, cfg = ukb_standin
    cfg = dict(cfg, inputs=dict(cfg["inputs"], phenotypes=str(tmp_path / "nope.tsv")))
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(cfg))
    res = snakemake("-n", "--cores", "1", "--configfile", str(bad))
    assert res.returncode != 0
    assert "inputs.phenotypes:" in res.stdout + res.stderr and "not found" in res.stdout + res.stderr


@pytest.mark.plink2
@pytest.mark.skipif(not shutil.which("plink2"), reason="plink2 not installed")
def test_per_chromosome_calls_and_bgen_run_to_the_stores(ukb_standin, tmp_path):
    """UKB layout: one .bed/.bim per chromosome with one .fam, imputed BGENs with .bgi,
    .sample and mfi files. The merged variant QC equals plink2's on the merged .bed, and
    the store holds the BGEN's fractional dosages."""
    from test_ukb_inputs import plink2, write_dosage_vcf

    from cmix.cli import main
    from cmix.readers.plink import open_bfile
    from cmix.store.read import open_store

    _, cfg = ukb_standin
    c = Path(cfg["inputs"]["sample_qc"]).parent
    merged, d = c / "genotypes", tmp_path / "ukb data"
    d.mkdir()
    shutil.copy(f"{merged}.fam", d / "calls.fam")
    write_dosage_vcf(d / "imp.vcf", open_bfile(merged))
    plink2("--vcf", d / "imp.vcf", "dosage=DS", "--make-pgen", "--out", d / "imp")
    chroms = [str(k) for k in cfg["variant_qc"]["chromosomes"]]
    for k in chroms:
        plink2("--bfile", merged, "--chr", k, "--make-bed", "--out", d / f"cal_chr{k}")
        (d / f"cal_chr{k}.fam").unlink()
        plink2("--pfile", d / "imp", "--chr", k, "--export", "bgen-1.2", "bits=8", "--out",
               d / f"imp_chr{k}")
        assert main(["bgen-index", str(d / f"imp_chr{k}.bgen")]) == 0
    trait = "mean_platelet_volume"
    cfg = copy.deepcopy(cfg)
    cfg["run_name"] = "ukbset"
    cfg["traits"] = [trait]
    cfg["selection"] = {"top": 50, "min_info": None}
    cfg["inputs"].update({"bfile": str(d / "cal_chr{chrom}"), "fam": str(d / "calls.fam"),
                          "bgen": str(d / "imp_chr{chrom}.bgen"),
                          "bgen_sample": str(d / "imp_chr{chrom}.sample")})
    path = tmp_path / "ukbset.yaml"
    path.write_text(yaml.safe_dump(cfg))
    store = f"results/ukbset/traits/{trait}.zarr"
    res = snakemake("--cores", "2", "--configfile", str(path), "--directory", str(tmp_path),
                    store)
    assert res.returncode == 0, res.stdout + res.stderr
    out = tmp_path / "results" / "ukbset"
    plink2("--bfile", merged, "--keep", out / "qc" / "samples.keep", "--maf",
           cfg["variant_qc"]["maf"], "--hwe", cfg["variant_qc"]["hwe"], "--geno",
           cfg["variant_qc"]["geno"], "--write-snplist", "--out", tmp_path / "p2")
    assert ((out / "qc" / "variants.snplist").read_text()
            == (tmp_path / "p2.snplist").read_text())
    root = open_store(tmp_path / store)
    assert root.attrs["dosage_encoding"]["kind"] == "fractional"
    assert root["call_dosage"].shape[1] == 50


def test_slurm_dry_run_packs_training_runs(ukb_standin, tmp_path):
    """`train: runs_per_job` packs the training jobs (each of every seed) into Snakemake
    groups, one cluster job each."""
    cfg_path, cfg = ukb_standin
    cfg = copy.deepcopy(cfg)
    cfg["train"]["runs_per_job"] = 10
    path = tmp_path / "packed.yaml"
    path.write_text(yaml.safe_dump(cfg))
    res = snakemake("-n", "--profile", "profiles/slurm", "--configfile", str(path),
                    "--directory", str(REPO))
    assert res.returncode == 0, res.stdout + res.stderr
    from cmix.learn.methods import METHODS

    n_net = sum(METHODS[m].network for m in cfg["methods"])
    blocks = re.split(r"Group job (train_cpu|train) ", res.stdout)[1:]
    for name, n_methods in (("train", n_net), ("train_cpu", len(cfg["methods"]) - n_net)):
        n_train = len(cfg["traits"]) * n_methods * 2     # jobs of 2 seeds each
        groups = [blocks[i + 1] for i in range(0, len(blocks), 2) if blocks[i] == name]
        # ceil: 5 jobs, 10 runs, per submitted job, networks and the rest apart
        assert len(groups) == -(-n_train // 5), name
        assert sum(g.count(f"rule {name}:") for g in groups) == n_train
    for job in plan(res.stdout):
        if job["rule"] == "train":
            assert job["resources"].get("gpu") == "1", job


FAKE_SLURM = REPO / "tests/fake_slurm/fake_slurm.py"
SLURM_COMMANDS = ("sbatch", "srun", "sacct", "squeue", "sinfo", "sacctmgr", "sshare",
                  "scontrol", "scancel")

# A `cmix` ahead of the real one on PATH: the first `cmix train` of one run folder pattern
# is killed as soon as its first seed's first checkpoint is written (as a node failure or
# preemption would).
PREEMPT_ONCE = """#!/usr/bin/env python3
import os, signal, subprocess, sys, time
from pathlib import Path
args = sys.argv[1:]
out = args[args.index("--out") + 1] if "--out" in args else ""
if "--seed" in args:
    out = out.replace("{{seed}}", args[args.index("--seed") + 1])
out = Path(out)
flag = Path(os.environ["PREEMPT_FLAG"])
target = args[:1] == ["train"] and os.environ["PREEMPT_RUN"] in str(out)
start = time.time()
if not target or flag.exists():
    code = subprocess.call([{real!r}] + args)
else:
    flag.touch()
    proc = subprocess.Popen([{real!r}] + args)
    while not (out / "checkpoint.pt").exists() and proc.poll() is None:
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    code = 1
if args[:1] == ["train"]:     # when each training job ran, in which SLURM allocation
    with open(os.environ["TRAIN_TIMES"], "a") as fh:
        fh.write(f"{{os.environ.get('SLURM_JOB_ID')}} {{start}} {{time.time()}}\\n")
sys.exit(code)
"""


@pytest.mark.slow
def test_packed_training_on_a_fake_slurm(tmp_path):
    """The SLURM profile through stand-ins for sbatch/sacct/srun that run jobs here: one
    packed job of four runs (two training jobs of both seeds), one GPU asked for, its
    training jobs one at a time (they started together before: Snakemake does not pass
    the profile's gpu limit into a submitted job); one run is killed after its first
    checkpoint, its retry resumes from it, and every run's metrics appear."""
    work = tmp_path
    cfg = yaml.safe_load((REPO / "config/config.yaml").read_text())
    cfg.update(run_name="packed", simulate={"n_samples": 600, "n_variants": 1200, "seed": 3},
               selection={"top": 100}, traits=["hair_colour"], budgets=[60], seeds=[1, 2],
               methods=["cmix", "mlp"],
               train={"device": "cpu", "runs_per_job": 4,
                      "config": dict(FAST_TRAIN, epochs=8)})
    path = work / "packed.yaml"
    path.write_text(yaml.safe_dump(cfg))
    # everything before training runs here, as it would on the login node's first pass
    res = snakemake("--cores", "2", "--configfile", str(path), "--directory", str(work),
                    "--until", "store", "train_config")
    assert res.returncode == 0, res.stderr[-3000:]
    bin_dir = work / "bin"
    bin_dir.mkdir()
    for name in SLURM_COMMANDS:
        (bin_dir / name).symlink_to(FAKE_SLURM)
    cmix = bin_dir / "cmix"
    cmix.write_text(PREEMPT_ONCE.format(real=shutil.which("cmix")))
    cmix.chmod(0o755)
    run = "runs/hair_colour/cmix/budget60/seed1"          # the job's first seed
    env = dict(os.environ, PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
               FAKE_SLURM_DIR=str(work / "slurm"), PREEMPT_FLAG=str(work / "preempted"),
               PREEMPT_RUN=run, TRAIN_TIMES=str(work / "train_times"))
    res = subprocess.run(
        [*SNAKEMAKE, "--profile", "profiles/slurm", "--configfile", str(path),
         "--directory", str(work), "--set-threads", "train=1",
         "--slurm-init-seconds-before-status-checks", "1", "--latency-wait", "1",
         "--seconds-between-status-checks", "1"],
        cwd=REPO, env=env, capture_output=True, text=True)
    assert res.returncode == 0, (res.stdout + res.stderr)[-4000:]
    assert (work / "preempted").exists()                 # the kill did happen
    out = work / "results/packed"
    assert len(list(out.glob("runs/*/*/*/*/metrics.json"))) == 4
    log = (out / "logs/train/hair_colour/cmix/budget60.log").read_text()
    assert "resuming from" in log
    sbatch = (work / "slurm/sbatch.log").read_text().splitlines()
    train_jobs = [line for line in sbatch if "--comment rule_train" in line]
    # one packed job, plus one resubmission after the run was killed
    assert len(train_jobs) == 2, sbatch
    # within one allocation the training jobs never overlap
    times = [line.split() for line in (work / "train_times").read_text().splitlines()]
    assert len(times) >= 3 and all(job != "None" for job, _, _ in times), times
    for job in {t[0] for t in times}:
        spans = sorted((float(a), float(b)) for j, a, b in times if j == job)
        assert all(b0 <= a1 for (_, b0), (a1, _) in zip(spans, spans[1:])), spans
    for line in train_jobs:
        assert " -p gpu " in line and "--gpus=1" in line, line
        assert "--target-jobs" in line
    # inside each job, every step asks for that one GPU, never more
    steps = [s for s in (work / "slurm/srun.log").read_text().splitlines() if "--gpus" in s]
    assert steps and all("--gpus=1 " in s for s in steps), steps


# ------------------------------------------------------------------ any PLINK cohort
def cohort_config(c: Path, run_name="cohort") -> dict:
    """config/cohort.yaml pointed at a simulated cohort's files: the phenotype table
    rewritten with plain column names and an IID column, no sample QC, no withdrawals,
    no kinship table."""
    import pandas as pd

    pheno = pd.read_csv(c / "phenotypes.tsv", sep="\t", dtype=str).rename(columns={
        "eid": "IID", "f.1747.0.0": "hair_colour", "f.30100.0.0": "platelet_volume",
        "f.21022.0.0": "age", "f.31.0.0": "sex"})
    pheno[["IID", "hair_colour", "platelet_volume", "age", "sex"]].to_csv(
        c / "plain_phenotypes.tsv", sep="\t", index=False)
    cfg = yaml.safe_load((REPO / "config/cohort.yaml").read_text())
    cfg["run_name"] = run_name
    cfg["inputs"] = {"bfile": str(c / "genotypes"),
                     "phenotypes": str(c / "plain_phenotypes.tsv"),
                     "sumstats": {"hair_colour": str(c / "sumstats/hair_colour.txt.gz"),
                                  "platelet_volume":
                                      str(c / "sumstats/mean_platelet_volume.txt.gz")}}
    return cfg


@pytest.fixture(scope="module")
def plain_cohort(ukb_standin):
    """The stand-in cohort's files as a non-UKB cohort config (config/cohort.yaml)."""
    _, ukb = ukb_standin
    c = Path(ukb["inputs"]["sample_qc"]).parent
    cfg = cohort_config(c)
    cfg["budgets"], cfg["seeds"] = [50], [1]
    return c, cfg


def test_any_plink_cohort_runs_end_to_end(plain_cohort, tmp_path):
    """config/cohort.yaml on a simulated cohort: no sample QC, no withdrawals, no kinship
    table, KING from the genotypes, PCs from cmix pca. The run finishes and each store
    records which sample filters did not apply."""
    from cmix.store.read import open_store

    c, cfg = plain_cohort
    cfg = dict(cfg, selection={"top": 100}, methods=["covariates"],
               train={"device": "cpu", "config": FAST_TRAIN})
    path = tmp_path / "cohort.yaml"
    path.write_text(yaml.safe_dump(cfg))
    res = snakemake("--cores", "2", "--configfile", str(path), "--directory", str(tmp_path))
    assert res.returncode == 0, res.stderr[-3000:]
    out = tmp_path / "results/cohort"
    assert len(list(out.glob("runs/*/covariates/budget50/seed1/metrics.json"))) == 2
    assert (out / "report/report.html").exists() and (out / "pca/pcs.eigenvec").exists()
    log = (out / "logs/sample_filters.log").read_text()
    assert "no sample QC table given" in log and "no withdrawal list given" in log
    assert "--kinship" not in (out / "logs/unrelated.log").read_text()
    for trait in cfg["traits"]:
        attrs = dict(open_store(out / f"traits/{trait}.zarr").attrs)
        assert attrs["provenance"]["sample_filters"] == {
            "sample_qc": "not given", "withdrawn": "not given", "sample_qc_columns": [],
            "relatedness": "KING from genotypes"}
        assert attrs["covariates"]["names"][:2] == ["age", "sex"]


def test_king_in_tiles_as_jobs_gives_the_one_process_pairs_and_kept_set(plain_cohort,
                                                                        tmp_path):
    """relatedness.tile_block: sample_filters' kept samples cut into blocks, one
    king_tile job per pair of blocks, gathered by `cmix unrelated --king-tiles`; the
    kinship pairs (.kin0), the kept and removed sets and the summary are byte for byte
    those of KING in one process on the same cohort (which has planted relatives)."""
    c, cfg = plain_cohort
    n_kept = sum(1 for line in open(c / "genotypes.fam"))
    block = 100
    assert n_kept > 2 * block                  # at least three blocks: six tiles
    files = {}
    for name, tile_block in (("one", None), ("tiles", block)):
        run = dict(cfg, relatedness={"cutoff": 0.0884, "tile_block": tile_block})
        path = tmp_path / f"{name}.yaml"
        path.write_text(yaml.safe_dump(run))
        res = snakemake("--cores", "2", "--configfile", str(path), "--directory",
                        str(tmp_path / name), "results/cohort/qc/unrelated.king.cutoff.in.id")
        assert res.returncode == 0, res.stderr[-3000:]
        qc = tmp_path / name / "results/cohort/qc"
        files[name] = {p.name: p.read_bytes() for p in sorted(qc.glob("unrelated.*"))}
    tiles = sorted((tmp_path / "tiles/results/cohort/qc/king_tiles").glob("tile.*.npz"))
    keep = (tmp_path / "tiles/results/cohort/qc/samples.keep").read_text().splitlines()
    n_blocks = -(-sum(not line.startswith("#") for line in keep) // block)
    assert len(tiles) == n_blocks * (n_blocks + 1) // 2
    assert not (tmp_path / "one/results/cohort/qc/king_tiles").exists()
    log = (tmp_path / "tiles/results/cohort/logs/unrelated.log").read_text()
    assert f"gathered {len(tiles)} KING tiles" in log
    assert set(files["one"]) >= {"unrelated.king.cutoff.in.id", "unrelated.king.cutoff.out.id",
                                 "unrelated.kin0"}
    assert files["tiles"] == files["one"]
    assert files["one"]["unrelated.king.cutoff.out.id"].count(b"\n") > 1   # relatives removed


def test_a_covariate_the_phenotype_table_lacks_is_refused_before_any_job(plain_cohort,
                                                                        tmp_path):
    """The template's covariates (age, sex) on a phenotype table without an age column:
    one line naming the entry to remove and the columns there are, before any job."""
    import pandas as pd

    c, cfg = plain_cohort
    table = pd.read_csv(cfg["inputs"]["phenotypes"], sep="\t", dtype=str)
    no_age = tmp_path / "no_age.tsv"
    table.drop(columns="age").to_csv(no_age, sep="\t", index=False)
    cfg = copy.deepcopy(cfg)
    cfg["inputs"]["phenotypes"] = str(no_age)
    line = dry_run_refuses(cfg, tmp_path, "covariates.fields: {column: age} names no column of")
    assert "remove it from covariates.fields" in line and "IID, hair_colour" in line


def test_ukb_inputs_record_the_filters_they_applied(ukb_standin, tmp_path):
    """With a sample QC table, a withdrawal list and a kinship table, the store says so."""
    from cmix.store.read import open_store

    cfg_path, cfg = ukb_standin
    cfg = copy.deepcopy(cfg)
    cfg["traits"] = ["mean_platelet_volume"]
    path = tmp_path / "ukb.yaml"
    path.write_text(yaml.safe_dump(cfg))
    store = tmp_path / "results/ukbtiny/traits/mean_platelet_volume.zarr"
    res = snakemake("--cores", "2", "--configfile", str(path), "--directory", str(tmp_path),
                    str(store.relative_to(tmp_path)))
    assert res.returncode == 0, res.stderr[-3000:]
    assert dict(open_store(store).attrs)["provenance"]["sample_filters"] == {
        "sample_qc": "applied", "withdrawn": "applied", "relatedness": "kinship table",
        "sample_qc_columns": ["het.missing.outliers", "putative.sex.chromosome.aneuploidy",
                              "excess.relatives", "in.white.British.ancestry.subset"]}


# ------------------------------------------------- the config check, before any job
def dry_run_refuses(cfg: dict, tmp_path, message: str, *extra):
    """`snakemake -n` on cfg exits non-zero before any job, with one error line that
    holds ``message``, no traceback and no schema dump."""
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(cfg))
    res = snakemake("-n", "--cores", "1", "--configfile", str(path), "--directory",
                    str(tmp_path), *extra)
    out = res.stdout + res.stderr
    assert res.returncode != 0, out[-2000:]
    lines = message_lines(out)
    assert len(lines) == 1 and lines[0].startswith("config error: "), out[-2000:]
    assert message in lines[0], lines[0]
    assert not (tmp_path / "results").exists() and "rule " not in out
    return lines[0]


def _cohort_samples(c: Path, cfg: dict, trait: str) -> int:
    """Samples past the withdrawals and the sample QC with a listed code of a
    categorical trait, computed with pandas from the input files."""
    import pandas as pd

    fam = pd.read_csv(c / "genotypes.fam", sep=r"\s+", header=None, dtype=str)[1]
    sqc = pd.read_csv(c / "sample_qc.tsv", sep="\t", dtype={"eid": str}).set_index("eid")
    withdrawn = set((c / "withdrawn.txt").read_text().split())
    ok = sqc.loc[fam, ["het.missing.outliers", "putative.sex.chromosome.aneuploidy",
                       "excess.relatives"]].eq(0).all(axis=1).to_numpy().copy()
    ok &= sqc.loc[fam, "in.white.British.ancestry.subset"].eq(1).to_numpy()
    ok &= ~fam.isin(withdrawn).to_numpy()
    pheno = pd.read_csv(c / "phenotypes.tsv", sep="\t", dtype={"eid": str}).set_index("eid")
    definition = cfg["trait_definitions"][trait]
    codes = {v for vs in definition["classes"].values() for v in vs}
    values = pheno.reindex(fam[ok])[f"f.{definition['field']}.0.0"]
    return int(values.isin(codes).sum())


@pytest.mark.parametrize("case, message", [
    ("categorical_without_classes", "trait_definitions: trait 'hair_colour'"),
    ("indep_pairwise_r2", "--indep-pairwise: the r^2 threshold must be in [0, 1), got 1.5"),
    ("n_pcs", "pca.n_pcs: --pcs 100000:"),
    ("withdrawn_folder", "is a folder, expected a file (inputs.withdrawn)"),
    ("sumstats_missing", "inputs.sumstats.hair_colour: "),
    ("unknown_key", "top level: Additional properties are not allowed ('bogus_key' was"),
    ("covariate_pcs_without_sample_qc", "covariates: the PCs (pcs_from: sample_qc)"),
    ("trait_twice", "traits: 'hair_colour' is listed twice"),
    ("budget_twice_once_as_text", "budgets: 60 is listed twice"),
    ("budget_one_as_text", "budgets: 1 labeled samples; a budget needs at least 2"),
    ("negative_seed", "seeds: -1; seeds are integers from 0 to 2^32 - 1"),
    ("trait_name_with_a_space", "traits: 'hair colour': a trait name holds letters"),
    ("covariates_method_without_covariates", "methods: covariates needs covariates"),
    ("overlap_of_an_unknown_trait", "inputs.sumstats_overlap: unknown trait 'hair_color'"),
    ("fetch_manifest_absent", "fetch_manifest: "),
    ("covariate_field_absent", "covariates.fields: 54 names no column of"),
])
def test_dry_run_refuses_what_a_job_would(ukb_standin, tmp_path, case, message):
    """Each value a job would refuse, or that would make a grid other than the one meant
    (a cell twice, a per-trait key of a misspelt trait silently unused), stops the dry
    run with one line naming the key."""
    _, cfg = ukb_standin
    cfg = copy.deepcopy(cfg)
    if case == "categorical_without_classes":
        del cfg["trait_definitions"]["hair_colour"]["classes"]
    elif case == "indep_pairwise_r2":
        cfg["pca"]["indep_pairwise"] = "1000kb 1 1.5"
    elif case == "n_pcs":
        cfg["pca"]["n_pcs"] = 100000
    elif case == "withdrawn_folder":
        cfg["inputs"]["withdrawn"] = str(tmp_path)
    elif case == "sumstats_missing":
        cfg["inputs"]["sumstats"]["hair_colour"] = str(tmp_path / "nope.sumstats.gz")
    elif case == "unknown_key":
        cfg["bogus_key"] = 1
    elif case == "covariate_pcs_without_sample_qc":
        del cfg["inputs"]["sample_qc"]
    elif case == "trait_twice":
        cfg["traits"] = ["hair_colour", "hair_colour"]
    elif case == "budget_twice_once_as_text":
        cfg["budgets"] = [60, "60"]
    elif case == "budget_one_as_text":
        cfg["budgets"] = ["1", 60]
    elif case == "negative_seed":
        cfg["seeds"] = [-1, 2]
    elif case == "trait_name_with_a_space":
        cfg["trait_definitions"]["hair colour"] = cfg["trait_definitions"]["hair_colour"]
        cfg["traits"] = ["hair colour"]
        cfg["inputs"]["sumstats"]["hair colour"] = cfg["inputs"]["sumstats"]["hair_colour"]
    elif case == "covariates_method_without_covariates":
        cfg.pop("covariates", None)
        cfg["methods"] = ["covariates", "logreg"]
    elif case == "overlap_of_an_unknown_trait":
        cfg["inputs"]["sumstats_overlap"] = {"hair_color": "no"}
    elif case == "fetch_manifest_absent":
        cfg["fetch_manifest"] = "nope.tsv"
    elif case == "covariate_field_absent":
        cfg["covariates"] = {**cfg["covariates"], "fields": [21022, 54]}
    line = dry_run_refuses(cfg, tmp_path, message)
    if case == "covariate_field_absent":
        assert "(no column f.54.0.0 or 54-0.0; its columns: " in line
    if case == "sumstats_missing":
        assert "nope.sumstats.gz not found" in line
    if case == "fetch_manifest_absent":
        assert line.endswith("nope.tsv not found (a path relative to the repository, or "
                             "absolute)"), line


def test_a_config_key_given_twice_is_refused(ukb_standin, tmp_path):
    """YAML keeps the last of two equal keys: a second `budgets:` (or a class listed twice
    under a trait) would replace the first unseen. The dry run stops naming the file, the
    line of the second key and the key."""
    _, cfg = ukb_standin
    text = yaml.safe_dump(cfg)
    n_lines = len(text.splitlines())
    path = tmp_path / "bad.yaml"
    path.write_text(text + "budgets: [100]\n")
    res = snakemake("-n", "--cores", "1", "--configfile", str(path), "--directory",
                    str(tmp_path))
    out = res.stdout + res.stderr
    lines = message_lines(out)
    assert res.returncode != 0 and len(lines) == 1, out[-2000:]
    assert lines[0] == (f"config error: {path}, line {n_lines + 1}: key 'budgets' appears "
                        "twice in one mapping; which one is meant cannot be told")
    assert not (tmp_path / "results").exists()


def test_budgets_are_checked_against_the_training_split(ukb_standin, tmp_path):
    """A budget the cohort could hold (cohort x (1 - test_fraction)) but the trait's
    training split cannot is refused before any job; the largest budget the training
    split can hold passes. Sample counts from pandas on the input files."""
    _, cfg = ukb_standin
    c = Path(cfg["inputs"]["sample_qc"]).parent
    cfg = copy.deepcopy(cfg)
    cfg["traits"] = ["hair_colour"]
    n_fam = len((c / "genotypes.fam").read_text().splitlines())
    n = _cohort_samples(c, cfg, "hair_colour")
    n_classes = len(cfg["trait_definitions"]["hair_colour"]["classes"])
    most = int(n * 0.8 + n_classes / 2)          # test_split rounds per class
    assert most + 1 <= int(n_fam * 0.8)           # the cohort-size check let it through
    cfg["budgets"] = [most + 1]
    dry_run_refuses(cfg, tmp_path, f"budgets: {most + 1} labeled samples asked for, but "
                                   f"trait 'hair_colour' has at most {most}")
    cfg["budgets"] = [most]
    path = tmp_path / "ok.yaml"
    path.write_text(yaml.safe_dump(cfg))
    res = snakemake("-n", "--cores", "1", "--configfile", str(path), "--directory",
                    str(tmp_path))
    assert res.returncode == 0, res.stderr[-2000:]
    # the discovery route: its GWAS people never enter the store, so a budget the whole
    # cohort could hold (it passed, and the train job failed after queueing) is refused
    cfg["discovery"] = {"traits": ["hair_colour"], "fraction": 0.5, "seed": 0}
    n_store = int(0.5 * n + n_classes / 2)
    most = int(n_store * 0.8 + n_classes / 2)
    cfg["budgets"] = [most + 1]
    dry_run_refuses(cfg, tmp_path, f"budgets: {most + 1} labeled samples asked for, but "
                                   f"trait 'hair_colour' has at most {most} in its training "
                                   f"split ({n} samples past the withdrawals and sample QC "
                                   f"with a phenotype, {n - n_store} or more of them in its "
                                   "discovery GWAS")


def test_fetchable_sumstats_pass_the_check(ukb_standin, tmp_path):
    """A sumstats path absent on disk but listed in the fetch manifest is planned as a
    fetch_resource job (the documented first run of config/ukb.yaml)."""
    _, cfg = ukb_standin
    cfg = copy.deepcopy(cfg)
    ukb = yaml.safe_load((REPO / "config/ukb.yaml").read_text())
    cfg["inputs"]["sumstats"]["hair_colour"] = ukb["inputs"]["sumstats"]["hair_colour"]
    path = tmp_path / "fetch.yaml"
    path.write_text(yaml.safe_dump(cfg))
    res = snakemake("-n", "--cores", "1", "--configfile", str(path), "--directory",
                    str(tmp_path))
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    assert "rule fetch_resource" in res.stdout

@pytest.mark.plink2
@pytest.mark.skipif(not shutil.which("plink2"), reason="plink2 not installed")
@pytest.mark.parametrize("key", ["bfile", "pfile"])
def test_pca_rule_reads_every_chromosome_of_a_set(ukb_standin, tmp_path, key):
    """Per-chromosome .bed or .pgen sets with `pcs_from: eigenvec`: the pca job is given
    the whole set (the pattern, the shared sample file and every chromosome), not the
    first chromosome's files."""
    from test_ukb_inputs import plink2

    _, cfg = ukb_standin
    merged = Path(cfg["inputs"]["bfile"])
    chroms = [str(k) for k in cfg["variant_qc"]["chromosomes"]]
    make = "--make-bed" if key == "bfile" else "--make-pgen"
    for k in chroms:
        plink2("--bfile", merged, "--chr", k, make, "--out", tmp_path / f"g_chr{k}")
    shared = f"{merged}.fam" if key == "bfile" else str(tmp_path / "g_chr1.psam")
    cfg = copy.deepcopy(cfg)
    cfg["run_name"] = "pcaset"
    cfg["covariates"] = {"fields": [21022, 31], "pcs": 4, "pcs_from": "eigenvec"}
    cfg["inputs"].pop("bfile")
    cfg["inputs"].update({key: str(tmp_path / "g_chr{chrom}"), "fam": shared})
    path = tmp_path / "pcaset.yaml"
    path.write_text(yaml.safe_dump(cfg))
    res = snakemake("-n", "-p", "--configfile", str(path), "--directory", str(tmp_path),
                    "results/pcaset/pca/pcs.eigenvec")
    assert res.returncode == 0, res.stdout + res.stderr
    cmd = [ln.split("Shell command: ", 1)[-1] for ln in res.stdout.splitlines()
           if "cmix pca " in ln]
    assert len(cmd) == 1, res.stdout
    assert (f"--{key} {tmp_path}/g_chr{{chrom}} --fam {shared} --chroms {' '.join(chroms)} "
            in cmd[0].replace("'", "")), cmd[0]
