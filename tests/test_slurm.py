"""Reading a SLURM cluster and fitting the profile to it (cmix.slurm), on command outputs
recorded from real clusters: tests/data/slurm/onenode.* from the one-node cluster CI
starts (.ci/slurm-cluster), multinode.* from a slurmctld given multinode.slurm.conf. The
parsed nodes and partitions are checked against what the same cluster's sinfo printed
and against the slurm.conf that defined it. The node lock of packed training jobs
(cmix.slurm_jobs), and `cmix install-profile` without SLURM, run here too."""

import dataclasses
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from cmix import slurm, slurm_jobs

REPO = Path(__file__).resolve().parent.parent
DATA = REPO / "tests/data/slurm"
TEMPLATE = yaml.safe_load((REPO / "cmix/profiles/slurm/config.yaml").read_text())


def recorded(name: str) -> slurm.Cluster:
    text = {k: (DATA / f"{name}.{k}.txt").read_text()
            for k in ("node", "partition", "config", "user", "assoc")}
    return slurm.cluster_from(text["node"], text["partition"], text["config"], text["user"],
                              text["assoc"])


def sinfo_rows(name: str) -> dict[str, dict]:
    """sinfo -h -o '%P|%a|%D|%c|%m|%G' of the same cluster: per partition its
    availability, node count, CPUs, memory (MB) and GRES (one value: the nodes agree, or
    sinfo prints a row per kind of node, summed up here by count)."""
    rows = {}
    for line in (DATA / f"{name}.sinfo.txt").read_text().splitlines():
        part, avail, count, cpus, mem, gres = line.split("|")
        row = rows.setdefault(part.rstrip("*"), {"default": part.endswith("*"), "kinds": []})
        row["avail"] = avail
        row["kinds"].append((int(count), int(cpus.rstrip("+")), int(mem.rstrip("+")), gres))
    return rows


@pytest.mark.parametrize("name", ["onenode", "multinode"])
def test_scontrol_tables_agree_with_sinfo(name):
    """Partitions, their default and state, their nodes' CPUs (CPUTot), memory
    (RealMemory) and GPUs as scontrol's records give them, against sinfo's rows."""
    cluster = recorded(name)
    raw = {r["NodeName"]: r for r in slurm.parse_records((DATA / f"{name}.node.txt").read_text())}
    rows = sinfo_rows(name)
    assert sorted(p.name for p in cluster.partitions) == sorted(rows)
    for part in cluster.partitions:
        row = rows[part.name]
        assert part.default == row["default"] and part.up == (row["avail"] == "up")
        nodes = [n for n in cluster.nodes if part.name in n.partitions]
        keys = [(int(raw[n.name]["CPUTot"]), int(raw[n.name]["RealMemory"]), n.gpus)
                for n in nodes]
        kinds = sorted((keys.count(k),) + k for k in set(keys))
        want = sorted((c, cpus, mem, slurm.parse_gpus(g)) for c, cpus, mem, g in row["kinds"])
        assert kinds == want, (part.name, kinds, want)


def test_the_accounts_are_the_clusters_own():
    cluster = recorded("multinode")        # sacctmgr listed two clusters' associations
    assert cluster.name == "hpc" and cluster.default_account == "proj_a"
    assert cluster.accounts == ("proj_a", "proj_gpu", "root")
    assert cluster.min_job_age_s == 600 and cluster.preempt_mode == "REQUEUE"


def conf_nodes(path: Path) -> dict[str, dict[str, str]]:
    """NodeName lines of a slurm.conf: {node: {key: value}} (hostlists written out)."""
    import re

    nodes = {}
    for line in path.read_text().splitlines():
        if not line.startswith("NodeName="):
            continue
        fields = dict(f.split("=", 1) for f in line.split())
        name = fields.pop("NodeName")
        m = re.fullmatch(r"(\w+)\[(\d+)-(\d+)\]", name)
        names = ([f"{m.group(1)}{i:0{len(m.group(2))}d}"
                  for i in range(int(m.group(2)), int(m.group(3)) + 1)] if m else [name])
        for n in names:
            nodes[n] = fields
    return nodes


def test_multinode_nodes_are_the_slurm_conf_ones():
    cluster = recorded("multinode")
    conf = conf_nodes(DATA / "multinode.slurm.conf")
    assert sorted(n.name for n in cluster.nodes) == sorted(conf)
    for node in cluster.nodes:
        c = conf[node.name]
        assert node.cpus == int(c["CPUs"]) - int(c.get("CoreSpecCount", 0))
        assert node.memory_mb == int(c["RealMemory"]) - int(c.get("MemSpecLimit", 0))
        assert node.gpus == sum(int(g.split("(")[0].split(":")[-1])
                                for g in c.get("Gres", "").split(",") if g.startswith("gpu"))


@pytest.mark.parametrize("text, minutes", [
    ("UNLIMITED", None), ("INFINITE", None), ("30", 30), ("45:30", 45), ("01:30:00", 90),
    ("2-12", 2 * 1440 + 12 * 60), ("1-02:03", 1440 + 123), ("5-00:00:00", 5 * 1440),
    ("00:30:59", 30)])
def test_time_limits_in_minutes(text, minutes):
    assert slurm.parse_minutes(text) == minutes


@pytest.mark.parametrize("gres, gpus", [
    ("(null)", 0), ("gpu:1", 1), ("gpu:a100:4(S:0-1)", 4), ("gpu:v100:2,mps:200", 2),
    ("gpu:a100:2(S:0),gpu:v100:1(S:1)", 3), ("mps:100", 0)])
def test_gpus_of_a_gres_field(gres, gpus):
    assert slurm.parse_gpus(gres) == gpus


def requests_of(prof: dict) -> list[tuple]:
    """(rule, partition, threads, mem_mb, gpus) of every rule a profile sizes."""
    defaults = prof["default-resources"]
    rules = set(prof.get("set-threads", {})) | set(prof.get("set-resources", {}))
    out = []
    for rule in sorted(rules):
        res = {**defaults, **prof.get("set-resources", {}).get(rule, {})}
        out.append((rule, res["slurm_partition"], prof.get("set-threads", {}).get(rule, 1),
                    res["mem_mb"], res.get("gpu", 0)))
    return out


def test_the_template_does_not_fit_one_small_node_and_the_fitted_profile_does():
    cluster = recorded("onenode")             # 2 CPUs, 24,105 MB, one GPU, cpu and gpu
    problems = slurm.oversized(requests_of(TEMPLATE), cluster)
    assert any(p.startswith("rule variant_qc asks for 8 threads") and "vm, has 2 CPUs" in p
               for p in problems), problems
    prof, notes = slurm.fit_profile(TEMPLATE, cluster)
    assert slurm.oversized(requests_of(prof), cluster) == []
    assert prof["default-resources"]["slurm_account"] == "cmix_ci"      # sacctmgr's default
    assert prof["default-resources"]["slurm_partition"] == "cpu"
    assert prof["set-resources"]["train"]["slurm_partition"] == "gpu"
    assert prof["set-resources"]["train"]["gpu"] == 1
    for rule, want in TEMPLATE["set-threads"].items():
        assert prof["set-threads"][rule] == min(want, 2)
    for rule, res in TEMPLATE["set-resources"].items():
        assert prof["set-resources"][rule]["mem_mb"] == min(res["mem_mb"], 24105)
    assert prof["slurm-status-command"] == "squeue"                     # MinJobAge 300 s
    assert any("rule unrelated: mem_mb 24105, not 32000" in n for n in notes), notes
    # nothing else of the template changes
    rest = {k: v for k, v in prof.items() if k not in ("default-resources", "set-threads",
                                                        "set-resources")}
    assert rest == {k: v for k, v in TEMPLATE.items()
                    if k not in ("default-resources", "set-threads", "set-resources")}


def usable(cluster: slurm.Cluster) -> slurm.Cluster:
    """The recorded multi-node cluster with every node up (the recording's nodes had no
    slurmd behind them: scontrol listed them as not responding)."""
    return dataclasses.replace(cluster, nodes=tuple(dataclasses.replace(n, state="IDLE")
                                                    for n in cluster.nodes))


def test_multinode_profile_takes_the_largest_node_of_each_partition():
    cluster = usable(recorded("multinode"))
    parts = {p.name: p for p in cluster.partitions}
    prof, notes = slurm.fit_profile(TEMPLATE, cluster)
    cpu = prof["default-resources"]["slurm_partition"]
    gpu = prof["set-resources"]["train"]["slurm_partition"]
    assert parts[cpu].default                           # no partition named cpu there
    gpu_parts = [p for p in cluster.partitions if p.up and any(
        n.gpus for n in cluster.nodes if p.name in n.partitions)]
    most = max(max(n.gpus for n in cluster.nodes if p.name in n.partitions) for p in gpu_parts)
    assert max(n.gpus for n in cluster.nodes if gpu in n.partitions) == most
    assert slurm.oversized(requests_of(prof), cluster) == []
    for rule, want in TEMPLATE["set-threads"].items():
        part = gpu if rule == "train" else cpu
        biggest = max(n.cpus for n in cluster.nodes if part in n.partitions)
        assert prof["set-threads"][rule] == min(want, biggest, parts[part].max_cpus_per_node
                                                or biggest)
    limit = parts[gpu].max_time_min
    assert prof["set-resources"]["train"].get("runtime", 0) <= (limit or 10**9)


def test_nodes_that_cannot_run_jobs_now_are_not_fitted_to():
    """With the two 4-GPU nodes drained, the gpu partition's profile is fitted to its
    2-GPU node; a request for 4 GPUs is still not refused (the nodes may return)."""
    cluster = usable(recorded("multinode"))
    four = {n.name for n in cluster.nodes if n.gpus == 4}
    assert len(four) == 2
    down = dataclasses.replace(cluster, nodes=tuple(
        dataclasses.replace(n, state="IDLE+DRAIN") if n.name in four else n
        for n in cluster.nodes))
    prof, _ = slurm.fit_profile(TEMPLATE, down)
    gpu = prof["set-resources"]["train"]["slurm_partition"]
    assert gpu == "gpu"
    assert {c.node for c in slurm.capacities(down, gpu)} == {"gpu03"}
    assert slurm.largest(slurm.capacities(cluster, gpu), gpus_first=True).gpus == 4
    assert slurm.oversized([("train", gpu, 32, 1000, 4)], down) == []
    assert slurm.oversized([("train", gpu, 33, 1000, 4)], down)     # MaxCPUsPerNode=32


def test_no_gpu_partition_sends_training_to_the_cpu_partition():
    cluster = recorded("onenode")
    cpu_only = dataclasses.replace(cluster, nodes=tuple(dataclasses.replace(n, gpus=0)
                                                        for n in cluster.nodes))
    prof, notes = slurm.fit_profile(TEMPLATE, cpu_only)
    assert prof["set-resources"]["train"]["slurm_partition"] == "cpu"
    assert "gpu" not in prof["set-resources"]["train"]
    assert any("none of the partitions open to you has GPUs" in n for n in notes)


def test_short_min_job_age_keeps_sacct_and_says_what_it_means():
    cluster = dataclasses.replace(recorded("onenode"), min_job_age_s=60)
    prof, notes = slurm.fit_profile(TEMPLATE, cluster)
    assert "slurm-status-command" not in prof
    assert any("status command: sacct" in n and "Ctrl-C" in n for n in notes)


def test_partition_limits_and_accounts():
    cluster = recorded("onenode")
    limited = dataclasses.replace(cluster, partitions=tuple(
        dataclasses.replace(p, max_time_min=90, max_mem_per_node_mb=10000)
        if p.name == "gpu" else p for p in cluster.partitions))
    prof, _ = slurm.fit_profile(TEMPLATE, limited)
    assert prof["set-resources"]["train"]["runtime"] == 90
    assert prof["set-resources"]["train"]["mem_mb"] == 10000
    closed = dataclasses.replace(cluster, partitions=tuple(
        dataclasses.replace(p, allow_accounts=("other",)) if p.name == "gpu" else p
        for p in cluster.partitions))
    prof, notes = slurm.fit_profile(TEMPLATE, closed)     # gpu is not open to cmix_ci
    assert prof["set-resources"]["train"]["slurm_partition"] == "cpu"
    nobody = dataclasses.replace(cluster, default_account=None, accounts=())
    prof, notes = slurm.fit_profile(TEMPLATE, nobody)
    assert "slurm_account" not in prof["default-resources"]


def test_a_partition_the_cluster_lacks_is_named():
    problems = slurm.oversized([("train", "a100", 1, 1, 1)], recorded("onenode"))
    assert problems == ["rule train asks for partition 'a100', which cluster cmixci does not "
                        "have (partitions: cpu, gpu)"]


def test_run_id_from_a_snakemake_log(tmp_path):
    log = tmp_path / "run.log"
    log.write_text("Using profile /x\nSLURM run ID: 51f6c02d-6e4e-4850-b60f-655eeeed42e9\n")
    assert slurm_jobs.run_id(log) == "51f6c02d-6e4e-4850-b60f-655eeeed42e9"
    assert slurm_jobs.run_id(tmp_path / "missing.log") is None
    assert slurm_jobs.run_id([str(tmp_path / "missing.log"), str(log)]).startswith("51f6c02d")


HOLDER = """
import sys, time
from cmix import slurm_jobs
sys.exit(slurm_jobs.one_at_a_time([sys.executable, "-c",
    "import sys, time; t = time.time(); time.sleep(float(sys.argv[1])); "
    "open(sys.argv[2], 'a').write(f'{t} {time.time()}\\\\n'); sys.exit(int(sys.argv[3]))",
    *sys.argv[1:]]))
"""


def test_node_lock_runs_one_at_a_time_and_leaves_no_file(tmp_path):
    """Four commands of one SLURM job (ID 4242) started together run one after another,
    each one's exit status comes back, and no lock file is left in $TMPDIR."""
    spans = tmp_path / "spans"
    env = dict(os.environ, SLURM_JOB_ID="4242", TMPDIR=str(tmp_path))
    procs = [subprocess.Popen([sys.executable, "-c", HOLDER, "0.3", str(spans), str(code)],
                              env=env) for code in (0, 3, 0, 5)]
    assert sorted(p.wait(timeout=60) for p in procs) == [0, 0, 3, 5]
    times = sorted(tuple(map(float, line.split())) for line in spans.read_text().splitlines())
    assert len(times) == 4
    assert all(end <= start for (_, end), (start, _) in zip(times, times[1:], strict=False)), times
    assert list(tmp_path.glob("cmix-train.*")) == []


def test_node_lock_passes_scancel_on_and_removes_its_file(tmp_path):
    env = dict(os.environ, SLURM_JOB_ID="4243", TMPDIR=str(tmp_path))
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, "60", str(tmp_path / "s"), "0"],
                            env=env)
    lock = tmp_path / "cmix-train.4243.lock"
    deadline = time.time() + 30
    while not lock.exists() and time.time() < deadline:
        time.sleep(0.05)
    assert lock.exists()
    time.sleep(0.5)
    proc.terminate()                                     # what scancel sends first
    assert proc.wait(timeout=30) == 128 + 15
    assert not lock.exists()


def test_install_profile_without_slurm_installs_the_template(tmp_path):
    env = dict(os.environ, PATH=os.path.dirname(sys.executable), HOME=str(tmp_path))
    res = subprocess.run([sys.executable, "-m", "cmix.cli", "install-profile", "slurm"],
                         env=env, capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    installed = tmp_path / ".config/snakemake/slurm/config.yaml"
    assert installed.read_bytes() == (REPO / "cmix/profiles/slurm/config.yaml").read_bytes()
    assert "no SLURM here" in res.stderr and "slurm_account" in res.stderr
