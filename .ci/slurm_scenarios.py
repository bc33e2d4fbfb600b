#!/usr/bin/env python3
"""The workflow on the running one-node SLURM cluster of .ci/slurm-cluster, as a user
runs it, then what goes wrong on clusters. Each check that fails stops the script with
exit status 1 and says which; it prints the time each part took.

1. `cmix install-profile slurm` reads the cluster and writes a profile whose requests
   fit the node (checked against sinfo).
2. The profile template, unfitted (8 threads on a 2-CPU node), is refused before any
   job is submitted, naming the rule, its request and the node.
3. A small config through `snakemake --profile <fitted>` to its report. Its two
   network training jobs are packed into one SLURM job (`-p gpu --gpus=1`, wall time the
   sum); `cmix train` is killed inside that job after its first checkpoint (the job
   fails, is resubmitted, and the run resumes from the checkpoint); the resubmitted job
   is cancelled with scancel while it runs (noticed, resubmitted within 5 minutes); the
   third attempt completes and the report is written. No node-lock file is left.
4. Ctrl-C (through a terminal) of a run whose two jobs are pending behind another job:
   both are cancelled in one scancel, snakemake exits, nothing of the run stays queued.

Needs the cluster up, cmix and snakemake on PATH (the jobs inherit this environment).
"""

from __future__ import annotations

import argparse
import glob
import os
import pty
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import yaml

from cmix.slurm import parse_minutes

REPO = Path(__file__).resolve().parent.parent
WORK = Path(os.environ.get("CMIX_SLURM_WORK", "/tmp/cmix-slurm/work"))
PROFILE = WORK / "profile"
RUN = WORK / "run"
CONFIG = WORK / "ci.yaml"
# status checks every few seconds, not the plugin's 40 s and more (CI time only; the
# profile is not edited)
FAST = ["--slurm-init-seconds-before-status-checks", "5"]
TIMES: dict[str, float] = {}


def fail(msg: str) -> None:
    sys.exit(f".ci/slurm_scenarios.py: FAILED: {msg}")


def check(ok: bool, msg: str) -> None:
    if not ok:
        fail(msg)


def out(*args: str) -> str:
    return subprocess.run(args, capture_output=True, text=True, check=True).stdout


def squeue(*fields: str) -> list[list[str]]:
    """The queue's jobs (every state squeue still lists), as fields %i, %T, %P ..."""
    text = out("squeue", "-h", "--states=all", "-o", "|".join(fields))
    return [line.split("|") for line in text.splitlines() if line.strip()]


def sacct(since: str) -> dict[str, dict[str, str]]:
    """Jobs submitted since ``since`` (sacct -S): JobID -> State, Partition, Timelimit,
    AllocTRES, JobName."""
    keys = ["JobID", "State", "Partition", "Timelimit", "AllocTRES", "JobName"]
    text = out("sacct", "-X", "-n", "-P", "-S", since, "-o", ",".join(keys))
    rows = (line.split("|") for line in text.splitlines())
    return {r[0]: dict(zip(keys, r, strict=True)) for r in rows}


def write_config() -> None:
    cfg = yaml.safe_load((REPO / "config/config.yaml").read_text())
    cfg.update(run_name="ci", simulate={"n_samples": 500, "n_variants": 1000, "seed": 5},
               selection={"top": 80}, traits=["hair_colour"], budgets=[100], seeds=[1, 2],
               methods=["mlp", "manifold_mixup"],
               train={"device": "auto", "runs_per_job": 4,      # both network jobs in one
                      "config": {"hidden": 32, "d_proj": 16, "epochs": 3, "warmup_epochs": 1,
                                 "pred_epochs": 60, "pred_patience": 60,
                                 "batch_size": 64}})
    CONFIG.write_text(yaml.safe_dump(cfg))


def snakemake_args(profile: Path, *extra: str) -> list[str]:
    return ["snakemake", "--profile", str(profile), "--configfile", str(CONFIG),
            "--directory", str(RUN), *extra]


# ---------------------------------------------------------------------- 1 and 2
def install_profile(account: str) -> None:
    res = subprocess.run(["cmix", "install-profile", "slurm", "--dest", str(PROFILE),
                          "--force"], capture_output=True, text=True)
    print(res.stderr, end="")
    check(res.returncode == 0, f"cmix install-profile slurm: exit {res.returncode}")
    for said in (f"account: {account}", "GPU jobs: partition gpu", "status command: squeue"):
        check(said in res.stderr, f"install-profile did not say '{said}'")
    prof = yaml.safe_load((PROFILE / "config.yaml").read_text())
    cpus, mem = (int(v) for v in out("sinfo", "-h", "-p", "cpu", "-o", "%c|%m").split("|"))
    check(all(t <= cpus for t in prof["set-threads"].values()),
          f"a rule's threads exceed the node's {cpus} CPUs: {prof['set-threads']}")
    mems = [r.get("mem_mb", 0) for r in prof["set-resources"].values()]
    check(max(mems + [prof["default-resources"]["mem_mb"]]) <= mem,
          f"a rule's mem_mb exceeds the node's {mem} MB")
    check(prof["default-resources"]["slurm_account"] == account, "not the default account")


def refuse_template(since: str) -> None:
    res = subprocess.run(snakemake_args(REPO / "cmix/profiles/slurm"), capture_output=True,
                         text=True, timeout=300)
    said = res.stdout + res.stderr
    check(res.returncode != 0, "the unfitted template was not refused")
    check(re.search(r"SLURM profile error: rule variant_qc asks for 8 threads.* partition "
                    r"cpu.*its largest, \S+, has 2 CPUs", said) is not None,
          f"the refusal does not name variant_qc, its 8 threads and the node:\n{said[-2000:]}")
    check(not sacct(since), f"jobs were submitted before the refusal: {sacct(since)}")


# ---------------------------------------------------------------------- 3
def run_ids(text: str) -> list[str]:
    return re.findall(r"SLURM run ID: (\S+)", text)


def training_pids(job: str) -> list[int]:
    """The `cmix train` processes of SLURM job ``job`` (scontrol listpids)."""
    res = subprocess.run(["scontrol", "listpids", job], capture_output=True, text=True)
    pids = []
    for line in res.stdout.splitlines()[1:]:
        pid = line.split()[0]
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        # the trainer, not the node lock around it (python -m cmix.slurm_jobs cmix train ...)
        trainer = any(a.endswith(b"cmix") for a in cmd) and b"train" in cmd
        if trainer and b"cmix.slurm_jobs" not in cmd:
            pids.append(int(pid))
    return pids


def gpu_jobs() -> dict[str, str]:
    """Job ID -> state of the jobs squeue lists on the gpu partition."""
    return {j: s for j, s, p in squeue("%i", "%T", "%P") if p == "gpu"}


def wait_for(what: str, seconds: float, probe):
    """Poll ``probe`` every 0.2 s until it returns something true; fail after ``seconds``."""
    deadline = time.time() + seconds
    while time.time() < deadline:
        got = probe()
        if got:
            return got
        time.sleep(0.2)
    fail(f"{what}: not within {seconds:.0f} s")


def crash_then_cancel(proc: subprocess.Popen, log: Path) -> dict[str, str]:
    """Kill `cmix train` in the packed GPU job after its first checkpoint; scancel its
    resubmission while it runs; measure how long the plugin took to notice each."""
    runs = RUN / "results/ci/runs/hair_colour"

    def checkpointed_job():
        if proc.poll() is not None:
            fail(f"snakemake ended (exit {proc.returncode}) before the crash:\n"
                 + log.read_text()[-3000:])
        running = [j for j, s in gpu_jobs().items() if s == "RUNNING"]
        ckpts = [p for p in runs.glob("*/budget100/seed*/checkpoint.pt")
                 if not (p.parent / "metrics.json").exists()]
        return running and ckpts and training_pids(running[0]) and running[0]

    first = wait_for("a checkpoint of the packed training job", 600, checkpointed_job)
    t0 = time.time()
    for pid in training_pids(first):
        os.kill(pid, signal.SIGKILL)
    print(f"  killed cmix train in SLURM job {first}")
    second = wait_for("the crashed job's resubmission", 300,
                      lambda: [j for j in gpu_jobs() if int(j) > int(first)])[0]
    TIMES["crash: resubmitted after"] = time.time() - t0
    wait_for(f"job {second} running", 300, lambda: gpu_jobs().get(second) == "RUNNING")
    t1 = time.time()
    subprocess.run(["scancel", second], check=True)
    print(f"  scancel {second} (running)")
    third = wait_for("the cancelled job's resubmission (or a stop naming it)", 300, lambda: (
        [j for j in gpu_jobs() if int(j) > int(second)]
        or (proc.poll() is not None and fail("snakemake stopped after the scancel:\n"
                                             + log.read_text()[-2000:]))))[0]
    TIMES["scancel: resubmitted after"] = time.time() - t1
    said = log.read_text()
    check(f"group_train_train/{second}.log" in said and "Trying to restart job" in said,
          f"the log does not name job {second}'s failure and its restart")
    return {"crashed": first, "cancelled": second, "completed": third}


def run_workflow(since: str) -> None:
    log = WORK / "workflow.log"
    t0 = time.time()
    with open(log, "w") as fh:
        proc = subprocess.Popen(snakemake_args(PROFILE, *FAST), stdout=fh,
                                stderr=subprocess.STDOUT)
        try:
            jobs = crash_then_cancel(proc, log)
            rc = proc.wait(timeout=900)
        finally:
            if proc.poll() is None:
                proc.kill()
    TIMES["workflow (with the crash and the scancel)"] = time.time() - t0
    said = log.read_text()
    check(rc == 0, f"snakemake exit {rc}:\n{said[-3000:]}")
    out_dir = RUN / "results/ci"
    check((out_dir / "report/report.html").exists(), "no report")
    check(len(list(out_dir.glob("runs/*/*/*/*/metrics.json"))) == 4, "not every run's metrics")
    train_logs = "".join(p.read_text() for p in out_dir.glob("logs/train/hair_colour/*/*.log"))
    check("resuming from" in train_logs, "no training run resumed from its checkpoint")
    acct = sacct(since)
    gpu = {j: r for j, r in acct.items() if r["Partition"] == "gpu"}
    check(sorted(gpu) == sorted(jobs.values()),
          f"the two network training jobs were not one SLURM job per attempt: {gpu}")
    states = [gpu[jobs[k]]["State"] for k in ("crashed", "cancelled", "completed")]
    check(states[0] == "FAILED" and states[1].startswith("CANCELLED") and states[2] == "COMPLETED",
          f"GPU job states {states}")
    for job in gpu.values():
        check("gres/gpu=1" in job["AllocTRES"], f"job {job['JobID']} had no GPU: {job}")
        # two training jobs of `runtime` minutes each, one after another
        want = 2 * yaml.safe_load((PROFILE / "config.yaml").read_text())[
            "set-resources"]["train"]["runtime"]
        check(parse_minutes(job["Timelimit"]) == want,
              f"job {job['JobID']} time limit {job['Timelimit']}, not {want} min")
    # the node lock of each of this run's jobs (the jobs' $TMPDIR is this one's)
    tmp = os.environ.get("TMPDIR") or "/tmp"
    left = [p for j in acct for p in glob.glob(f"{tmp}/cmix-train.{j}.lock")]
    check(not left, f"node-lock files left behind: {left}")
    print(f"  packed GPU jobs {jobs}: {states}; report written; no lock file left")


# ---------------------------------------------------------------------- 4
def ctrl_c() -> None:
    """Two pending jobs behind a job holding the node; Ctrl-C on snakemake's terminal."""
    shim = WORK / "shim"
    shim.mkdir(exist_ok=True)
    calls = WORK / "scancel.calls"
    calls.write_text("")
    real = shutil.which("scancel")
    (shim / "scancel").write_text(f'#!/bin/sh\necho "$*" >> {calls}\nexec {real} "$@"\n')
    (shim / "scancel").chmod(0o755)
    blocker = out("sbatch", "--parsable", "-p", "cpu", "-c", "2", "--mem=500", "-o", "/dev/null",
                  "--wrap", "sleep 900").strip()
    env = dict(os.environ, PATH=f"{shim}{os.pathsep}{os.environ['PATH']}")
    args = snakemake_args(PROFILE, *FAST, "--forcerun", "simulate", "train_config")
    pid, fd = pty.fork()
    if pid == 0:                                   # snakemake, in the terminal's foreground
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.execvpe(args[0], args, env)
    text = []
    reader = threading.Thread(target=read_all, args=(fd, text), daemon=True)
    reader.start()
    try:
        pending = wait_for("two jobs of the run pending", 300, lambda: (
            len(ids := [j for j, s, n in squeue("%i", "%T", "%j")
                        if s == "PENDING" and j != blocker]) >= 2 and ids))
        t0 = time.time()
        os.write(fd, b"\x03")                      # Ctrl-C
        code = wait_for("snakemake to exit after Ctrl-C", 300,
                        lambda: (c := exited(pid)) is not None and [c])[0]
        TIMES["ctrl-c: snakemake exited after"] = time.time() - t0
        left = [j for j, s in ((r[0], r[1]) for r in squeue("%i", "%T"))
                if j in pending and s in ("PENDING", "RUNNING")]
        check(not left, f"jobs left in the queue after Ctrl-C: {left}")
        lines = [line.split() for line in calls.read_text().splitlines()]
        check(len(lines) == 1 and set(pending) <= set(lines[0]),
              f"not one scancel of every pending job {pending}: {lines}")
        reader.join(timeout=30)                    # the terminal's last output
        said = "".join(text)
        check(all(re.search(rf"cmix: SLURM job {j} ended CANCELLED", said) for j in pending),
              f"the stopped run does not name its cancelled jobs:\n{said[-2000:]}")
        print(f"  Ctrl-C: {pending} cancelled in one scancel; snakemake exit {code}")
    finally:
        subprocess.run(["scancel", blocker])
        if exited(pid) is None:
            os.kill(pid, signal.SIGKILL)
        (WORK / "ctrl-c.log").write_text("".join(text))


def read_all(fd: int, text: list[str]) -> None:
    while True:
        try:
            chunk = os.read(fd, 4096)
        except OSError:
            return
        if not chunk:
            return
        text.append(chunk.decode(errors="replace"))


EXITED: dict[int, int] = {}


def exited(pid: int) -> int | None:
    """Exit status of child ``pid`` once it has ended (minus the signal number when
    killed), else None."""
    if pid not in EXITED:
        got, status = os.waitpid(pid, os.WNOHANG)
        if got == 0:
            return None
        EXITED[pid] = os.waitstatus_to_exitcode(status)
    return EXITED[pid]


# ---------------------------------------------------------------------- main
def timed(name: str, fn, *args) -> None:
    print(f".ci/slurm_scenarios.py: {name} ...", flush=True)
    t0 = time.time()
    fn(*args)
    TIMES[name] = time.time() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--account", required=True, help="the CI user's default account")
    parser.add_argument("--only", choices=["ctrl-c"], help="one part alone, on the work "
                        "folder of an earlier run")
    args = parser.parse_args()
    if args.only == "ctrl-c":
        return ctrl_c()
    shutil.rmtree(WORK, ignore_errors=True)
    WORK.mkdir(parents=True)
    write_config()
    since = out("date", "+%Y-%m-%dT%H:%M:%S").strip()
    time.sleep(1)
    timed("install-profile", install_profile, args.account)
    timed("template refused", refuse_template, since)
    timed("workflow to its report", run_workflow, since)
    timed("ctrl-c", ctrl_c)
    for name, seconds in TIMES.items():
        print(f".ci/slurm_scenarios.py: {name}: {seconds:.1f} s")


if __name__ == "__main__":
    main()
