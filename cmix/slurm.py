"""What a SLURM cluster offers, and a Snakemake profile whose every request fits it.

The cluster is read from the text of ``scontrol --oneliner show node`` and ``show
partition`` (one ``Key=Value ...`` record a line), ``scontrol show config`` (``Key =
Value`` lines) and ``sacctmgr -n -P`` tables of the user's accounts, parsed by plain
functions into :class:`Node` and :class:`Partition` records; :func:`read_cluster` runs the
commands. On these records :func:`fit_profile` caps a profile template's threads, memory,
GPUs and wall times at the largest node of each rule's partition, and
:func:`oversized` names the requests no node of their partition can hold (a job asking
for them would pend for ever, reason ``PartitionConfig``).
"""

from __future__ import annotations

import copy
import getpass
import re
import shutil
import subprocess
from dataclasses import dataclass

from .errors import CmixError

#: node states a job cannot start on now (``DOWN*``, ``IDLE+DRAIN`` and the like)
UNUSABLE_STATES = ("DOWN", "DRAIN", "FAIL", "FUTURE", "INVAL", "NOT_RESPONDING", "POWERED_DOWN")

#: the plugin's first status check comes this long after a submission (its default);
#: squeue forgets a finished job MinJobAge seconds after it ends, and the plugin uses
#: squeue only when MinJobAge is at least three such intervals
STATUS_INTERVAL_S = 40


@dataclass(frozen=True)
class Node:
    """One compute node: what one job can get on it (CPUs, memory in MB, GPUs)."""

    name: str
    cpus: int
    memory_mb: int
    gpus: int
    partitions: tuple[str, ...]
    state: str

    @property
    def usable(self) -> bool:
        """Whether a job could start on it now (not down, drained, failed, future)."""
        return not any(s in self.state.upper() for s in UNUSABLE_STATES)


@dataclass(frozen=True)
class Partition:
    """One partition: its limits (None: unlimited) and who may use it."""

    name: str
    default: bool
    up: bool
    max_time_min: int | None
    max_cpus_per_node: int | None
    max_mem_per_node_mb: int | None
    allow_accounts: tuple[str, ...] | None      # None: every account


@dataclass(frozen=True)
class Cluster:
    """A cluster as one user sees it."""

    name: str
    nodes: tuple[Node, ...]
    partitions: tuple[Partition, ...]
    min_job_age_s: int | None
    preempt_mode: str
    default_account: str | None
    accounts: tuple[str, ...]

    def partition(self, name: str) -> Partition | None:
        return next((p for p in self.partitions if p.name == name), None)


# ------------------------------------------------------------------------ parsing
def parse_records(text: str) -> list[dict[str, str]]:
    """``scontrol --oneliner show node|partition`` output: one dict a line. A word
    without ``=`` belongs to the value before it (``OS=Linux 6.1 #1 SMP``, reasons)."""
    records = []
    for line in text.splitlines():
        record: dict[str, str] = {}
        key = None
        for word in line.split():
            name, eq, value = word.partition("=")
            if eq and re.fullmatch(r"[A-Za-z][A-Za-z0-9_:/.]*", name):
                key = name
                record[key] = value
            elif key is not None:
                record[key] += " " + word
        if record:
            records.append(record)
    return records


def parse_gpus(gres: str) -> int:
    """The GPUs of a node's ``Gres=`` field: ``gpu:4``, ``gpu:a100:4(S:0-1)``,
    ``gpu:v100:2,mps:200`` or ``(null)`` (0)."""
    total = 0
    for item in re.split(r",(?![^(]*\))", gres or ""):
        fields = re.sub(r"\(.*\)", "", item).split(":")
        if fields[0] == "gpu" and len(fields) >= 2 and fields[-1].isdigit():
            total += int(fields[-1])
        elif fields == ["gpu"]:
            total += 1
    return total


def parse_minutes(value: str) -> int | None:
    """A SLURM time limit in whole minutes (seconds dropped, so that a wall time asked
    for fits under it): ``UNLIMITED``/``INFINITE``/``NONE`` (None), ``D-HH[:MM[:SS]]``,
    ``HH:MM:SS``, ``MM:SS`` or ``MM``."""
    value = (value or "").strip()
    if not value or value.upper() in ("UNLIMITED", "INFINITE", "NONE"):
        return None
    days, dash, clock = value.partition("-") if "-" in value else ("0", "", value)
    parts = [int(p) for p in clock.split(":")]
    if dash:
        hours, minutes = (parts + [0, 0])[:2]
    elif len(parts) == 3:
        hours, minutes = parts[:2]
    else:
        hours, minutes = 0, parts[0]
    return int(days) * 1440 + hours * 60 + minutes


def parse_limit(value: str) -> int | None:
    """An integer limit (CPUs, MB) of ``scontrol`` output; ``UNLIMITED`` is None."""
    value = (value or "").strip()
    return int(value) if value.isdigit() else None


def nodes_from(text: str) -> list[Node]:
    """The nodes of ``scontrol --oneliner show node``: CPUs a job can have (CPUEfctv,
    else CPUTot), memory (RealMemory less MemSpecLimit), GPUs (Gres)."""
    nodes = []
    for r in parse_records(text):
        if "NodeName" not in r:
            continue
        cpus = parse_limit(r.get("CPUEfctv", "")) or parse_limit(r.get("CPUTot", "")) or 0
        memory = (parse_limit(r.get("RealMemory", "")) or 0) - (
            parse_limit(r.get("MemSpecLimit", "")) or 0)
        parts = tuple(p for p in r.get("Partitions", "").split(",") if p)
        nodes.append(Node(r["NodeName"], cpus, memory, parse_gpus(r.get("Gres", "")), parts,
                          r.get("State", "")))
    return nodes


def partitions_from(text: str) -> list[Partition]:
    """The partitions of ``scontrol --oneliner show partition``."""
    parts = []
    for r in parse_records(text):
        if "PartitionName" not in r:
            continue
        allow = r.get("AllowAccounts", "ALL")
        parts.append(Partition(
            name=r["PartitionName"], default=r.get("Default", "NO") == "YES",
            up=r.get("State", "UP") == "UP", max_time_min=parse_minutes(r.get("MaxTime", "")),
            max_cpus_per_node=parse_limit(r.get("MaxCPUsPerNode", "")),
            max_mem_per_node_mb=parse_limit(r.get("MaxMemPerNode", "")),
            allow_accounts=None if allow == "ALL" else tuple(allow.split(","))))
    return parts


def config_from(text: str) -> dict[str, str]:
    """``scontrol show config``: its ``Key = Value`` lines as a dict."""
    out = {}
    for line in text.splitlines():
        key, eq, value = line.partition("=")
        if eq and key.strip() and " " not in key.strip():
            out[key.strip()] = value.strip()
    return out


def seconds(value: str) -> int | None:
    """``300 sec`` / ``1h`` / ``300`` (MinJobAge in ``scontrol show config``) in seconds."""
    m = re.match(r"(\d+)\s*([a-z]*)", (value or "").strip().lower())
    if not m:
        return None
    return int(m.group(1)) * (3600 if m.group(2).startswith("h") else 1)


def accounts_from(default_text: str, assoc_text: str, cluster: str | None = None
                  ) -> tuple[str | None, tuple[str, ...]]:
    """(default account, every account on ``cluster``; None: on any) of ``sacctmgr -n -P
    show user U format=defaultaccount`` and ``sacctmgr -n -P show assoc user=U
    format=cluster,account,partition``."""
    default = next((line.strip() for line in default_text.splitlines() if line.strip()), None)
    accounts = []
    for line in assoc_text.splitlines():
        fields = line.strip().split("|")
        if (len(fields) >= 2 and fields[1] and fields[1] not in accounts
                and cluster in (None, fields[0])):
            accounts.append(fields[1])
    return default, tuple(accounts)


def cluster_from(node_text: str, partition_text: str, config_text: str, default_text: str = "",
                 assoc_text: str = "") -> Cluster:
    """A :class:`Cluster` from the recorded outputs of the five commands."""
    config = config_from(config_text)
    default, accounts = accounts_from(default_text, assoc_text, config.get("ClusterName"))
    return Cluster(name=config.get("ClusterName", "?"), nodes=tuple(nodes_from(node_text)),
                   partitions=tuple(partitions_from(partition_text)),
                   min_job_age_s=seconds(config.get("MinJobAge", "")),
                   preempt_mode=config.get("PreemptMode", "OFF"),
                   default_account=default, accounts=accounts)


def read_cluster(user: str | None = None, timeout: float = 60) -> Cluster | None:
    """The cluster this machine submits to, read with scontrol and sacctmgr (None
    without scontrol, or when it lists no node or no partition). A sacctmgr that fails
    (no accounting) leaves the accounts empty; a failing scontrol is a CmixError."""
    if shutil.which("scontrol") is None:
        return None
    user = user or getpass.getuser()

    def out(*args, required=True):
        res = subprocess.run(args, capture_output=True, text=True, timeout=timeout)
        if res.returncode != 0 and required:
            raise CmixError(f"`{' '.join(args)}` failed: {res.stderr.strip() or res.returncode}")
        return res.stdout if res.returncode == 0 else ""

    has_sacctmgr = shutil.which("sacctmgr") is not None
    cluster = cluster_from(
        out("scontrol", "--oneliner", "show", "node"),
        out("scontrol", "--oneliner", "show", "partition"),
        out("scontrol", "show", "config"),
        out("sacctmgr", "-n", "-P", "show", "user", user, "format=defaultaccount",
            required=False) if has_sacctmgr else "",
        out("sacctmgr", "-n", "-P", "show", "assoc", f"user={user}",
            "format=cluster,account,partition", required=False) if has_sacctmgr else "")
    return cluster if cluster.nodes and cluster.partitions else None


# ------------------------------------------------------------------ node sizes
@dataclass(frozen=True)
class Capacity:
    """What the largest node of a partition gives one job (its limits applied)."""

    node: str
    cpus: int
    memory_mb: int
    gpus: int

    def __str__(self):
        return (f"{self.node}, has {self.cpus} CPUs, {self.memory_mb} MB and "
                f"{self.gpus} GPU{'' if self.gpus == 1 else 's'}")


def capacities(cluster: Cluster, partition: str, usable_only: bool = True) -> list[Capacity]:
    """Each node of ``partition`` as one job can have it (the partition's per-node CPU
    and memory limits applied), nodes a job cannot start on now left out when any other
    is usable (``usable_only``)."""
    part = cluster.partition(partition)
    if part is None:
        return []
    nodes = [n for n in cluster.nodes if partition in n.partitions]
    if usable_only and any(n.usable for n in nodes):
        nodes = [n for n in nodes if n.usable]
    cap_cpu, cap_mem = part.max_cpus_per_node, part.max_mem_per_node_mb
    return [Capacity(n.name, min(n.cpus, cap_cpu or n.cpus),
                     min(n.memory_mb, cap_mem or n.memory_mb), n.gpus) for n in nodes]


def largest(caps: list[Capacity], gpus_first: bool = False) -> Capacity | None:
    """The largest of ``caps``: most GPUs first (for a GPU partition), then CPUs, then memory."""
    key = (lambda c: (c.gpus, c.cpus, c.memory_mb)) if gpus_first else (
        lambda c: (c.cpus, c.memory_mb, c.gpus))
    return max(caps, key=key, default=None)


def fits(cap: Capacity, threads: int, memory_mb: int, gpus: int) -> bool:
    return threads <= cap.cpus and memory_mb <= cap.memory_mb and gpus <= cap.gpus


def oversized(requests, cluster: Cluster) -> list[str]:
    """One line for each request no node of its partition can hold, and for each that
    names a partition the cluster lacks. requests: (rule, partition, threads, memory
    in MB, GPUs) tuples. Every configured node counts (a node down now may return)."""
    problems = []
    names = ", ".join(p.name for p in cluster.partitions)
    for rule, partition, threads, memory_mb, gpus in requests:
        caps = capacities(cluster, partition, usable_only=False)
        ask = f"{threads} threads, {memory_mb} MB, {gpus} GPU{'' if gpus == 1 else 's'}"
        if cluster.partition(partition) is None:
            problems.append(f"rule {rule} asks for partition '{partition}', which cluster "
                            f"{cluster.name} does not have (partitions: {names})")
        elif not any(fits(c, threads, memory_mb, gpus) for c in caps):
            big = largest(caps, gpus_first=gpus > 0)
            problems.append(f"rule {rule} asks for {ask} on partition {partition}, more than "
                            f"any of its nodes has: its largest, {big}")
    return problems


# ------------------------------------------------------------------ the profile
def usable_partitions(cluster: Cluster, account: str | None) -> list[Partition]:
    """The partitions that are up, have nodes and admit ``account``."""
    return [p for p in cluster.partitions if p.up and capacities(cluster, p.name)
            and (p.allow_accounts is None or account in p.allow_accounts)]


def choose_partitions(cluster: Cluster, account: str | None, wanted_cpu: str,
                      wanted_gpu: str) -> tuple[str | None, str | None, list[str]]:
    """(CPU partition, GPU partition or None, why). The profile's own names where the
    cluster has them (and the GPU one has GPUs); else the default partition for CPU
    jobs, and the partition whose largest node has the most GPUs for GPU jobs."""
    parts = usable_partitions(cluster, account)
    by_name = {p.name: p for p in parts}
    gpu_parts = [p for p in parts if largest(capacities(cluster, p.name), True).gpus > 0]
    why = []
    if wanted_cpu in by_name:
        cpu = wanted_cpu
        why.append(f"CPU jobs: partition {cpu} (the profile's name; it exists here)")
    else:
        default = next((p.name for p in parts if p.default), None)
        no_gpu = [p.name for p in parts if p not in gpu_parts]
        cpu = default or (no_gpu or [p.name for p in parts] or [None])[0]
        why.append(f"CPU jobs: partition {cpu} (" + ("the cluster's default" if cpu == default
                   else "the first one open to you") + ")")
    if wanted_gpu in {p.name for p in gpu_parts}:
        gpu = wanted_gpu
        why.append(f"GPU jobs: partition {gpu} (the profile's name; its nodes have GPUs)")
    elif gpu_parts:
        gpu = max(gpu_parts, key=lambda p: largest(capacities(cluster, p.name), True).gpus).name
        why.append(f"GPU jobs: partition {gpu} (its nodes have GPUs)")
    else:
        gpu = None
        why.append("GPU jobs: none of the partitions open to you has GPUs (no GPU GRES): "
                   f"training goes to partition {cpu} and runs on the CPUs")
    return cpu, gpu, why


def fit_profile(template: dict, cluster: Cluster) -> tuple[dict, list[str]]:
    """The profile ``template`` (a parsed profile config.yaml) fitted to ``cluster``, and
    one line per choice saying what and why. Partitions, account and status command are
    chosen from the cluster; every rule's threads, memory and wall time are the
    template's, capped at the largest node (and the wall-time limit) of its partition."""
    prof = copy.deepcopy(template)
    defaults = prof.setdefault("default-resources", {})
    per_rule = prof.setdefault("set-resources", {})
    threads = prof.setdefault("set-threads", {})
    notes = []
    account = cluster.default_account or (cluster.accounts[0] if cluster.accounts else None)
    if account:
        defaults["slurm_account"] = account
        notes.append(f"account: {account} (" + ("your default account" if
                     account == cluster.default_account else "your first account") + ")")
    else:
        defaults.pop("slurm_account", None)
        notes.append("account: none set (sacctmgr lists no account of yours); SLURM uses "
                     "your default, if the cluster has accounts")
    wanted_gpu = next((r["slurm_partition"] for r in per_rule.values()
                       if isinstance(r, dict) and r.get("gpu")), "gpu")
    cpu, gpu, why = choose_partitions(cluster, account, str(defaults.get("slurm_partition", "")),
                                      str(wanted_gpu))
    notes += why
    if cpu is None:
        raise CmixError(f"cluster {cluster.name}: no partition is up and open to account "
                        f"{account}: cannot fit a profile (ask your admins which to use)")
    defaults["slurm_partition"] = cpu
    for res in per_rule.values():
        if isinstance(res, dict) and res.get("gpu"):
            if gpu:
                res["slurm_partition"] = gpu
            else:
                res.pop("gpu", None)
                res["slurm_partition"] = cpu
        elif isinstance(res, dict) and "slurm_partition" in res:
            res["slurm_partition"] = cpu
    for rule in sorted(set(per_rule) | set(threads)):
        notes += fit_rule(prof, rule, cluster)
    notes += fit_rule(prof, None, cluster)
    notes += choose_status_command(prof, cluster)
    return prof, notes


def fit_rule(prof: dict, rule: str | None, cluster: Cluster) -> list[str]:
    """Cap ``rule``'s threads, mem_mb and runtime in ``prof`` (None: the default
    resources) at the largest node and the time limit of its partition; lines for what
    changed."""
    defaults = prof["default-resources"]
    res = defaults if rule is None else prof["set-resources"].setdefault(rule, {})
    partition = res.get("slurm_partition", defaults["slurm_partition"])
    gpus = int(res.get("gpu", 0) or 0)
    big = largest(capacities(cluster, partition), gpus_first=gpus > 0)
    part = cluster.partition(partition)
    name = "default resources" if rule is None else f"rule {rule}"
    notes = []
    if rule is not None and rule in prof["set-threads"]:
        want = int(prof["set-threads"][rule])
        if want > big.cpus:
            prof["set-threads"][rule] = big.cpus
            notes.append(f"{name}: {big.cpus} threads, not {want}: the largest node of "
                         f"partition {partition} has {big.cpus} CPUs")
    for key, cap, unit in (("mem_mb", big.memory_mb, " MB"),
                           ("runtime", part.max_time_min, " min")):
        want = res.get(key, defaults.get(key))
        if cap is not None and isinstance(want, int) and want > cap:
            res[key] = cap
            where = (f"the largest node of partition {partition} has {cap}{unit}"
                     if key == "mem_mb" else f"partition {partition} allows {cap}{unit}")
            notes.append(f"{name}: {key} {cap}, not {want}: {where}")
    if gpus > big.gpus:
        res["gpu"] = big.gpus
        notes.append(f"{name}: {big.gpus} GPUs, not {gpus}: the largest node of partition "
                     f"{partition} has {big.gpus}")
    if rule is not None and not res:
        del prof["set-resources"][rule]
    return notes


def choose_status_command(prof: dict, cluster: Cluster) -> list[str]:
    """``slurm-status-command``: squeue where finished jobs stay listed long enough.
    sacct reports a cancelled job as ``CANCELLED by <uid>``, which the executor plugin
    (2.8.0) does not take for a failed state: the job is waited for for ever. squeue
    says ``CANCELLED``. squeue forgets a job MinJobAge after its end, so the plugin takes
    squeue only where MinJobAge is at least three of its status intervals."""
    age = cluster.min_job_age_s
    notes = []
    if age is not None and age >= 3 * STATUS_INTERVAL_S:
        prof["slurm-status-command"] = "squeue"
        notes.append(f"status command: squeue (MinJobAge {age} s keeps finished jobs listed; "
                     "sacct's 'CANCELLED by <uid>' would leave a cancelled job waited for)")
    else:
        prof.pop("slurm-status-command", None)
        notes.append(f"status command: sacct (MinJobAge {age} s is too short for squeue): a "
                     "job cancelled with scancel is not noticed; stop the run with Ctrl-C "
                     "and start it again (docs/guide/slurm.md)")
    if "CANCEL" in cluster.preempt_mode.upper():
        notes.append(f"preemption: PreemptMode {cluster.preempt_mode}: a preempted job ends "
                     "PREEMPTED, which the executor plugin waits for; use partitions and QOS "
                     "that do not preempt, or stop the run and start it again")
    return notes


def profile_text(prof: dict, notes: list[str], cluster: Cluster) -> str:
    """The fitted profile as config.yaml text, its choices listed in a header."""
    import yaml  # yaml: only where YAML is read or written

    head = [f"# snakemake --profile slurm, written by `cmix install-profile slurm` for cluster "
            f"{cluster.name}", "# from scontrol and sacctmgr. Every request fits the largest "
            "node of its partition. What was", "# chosen, and why:"]
    head += [f"#   {line}" for line in notes]
    head += ["# Sizing threads and memory for your data, and what to do when a job pends:",
             "# docs/guide/slurm.md. Run `cmix install-profile slurm --force` again after "
             "the cluster changes."]
    return "\n".join(head) + "\n" + yaml.safe_dump(prof, sort_keys=False)


def fitted_profile(template_text: str) -> tuple[str, list[str]] | None:
    """(profile text, what was chosen and why) of the profile template ``template_text``
    fitted to the cluster this machine submits to; None where there are no SLURM
    commands."""
    import yaml  # yaml: only where YAML is read or written

    cluster = read_cluster()
    if cluster is None:
        return None
    prof, notes = fit_profile(yaml.safe_load(template_text), cluster)
    return profile_text(prof, notes, cluster), notes
