#!/usr/bin/env python3
"""A stand-in for the SLURM commands snakemake-executor-plugin-slurm calls, for tests.

Installed on PATH under each command's name (sbatch, srun, sacct, squeue, sinfo,
sacctmgr, scontrol, scancel); the name it is called by picks the behaviour. State lives
in $FAKE_SLURM_DIR:
  jobs/<id>.name   the --job-name (the plugin's run id), queried by sacct/squeue --name
  jobs/<id>.rc     the payload's exit status, once it has finished
  sbatch.log       one line per sbatch call (its arguments), for tests to inspect
  srun.log         the same for srun (job steps inside a submitted job)

sbatch runs the submitted payload (--wrap or the script on stdin) in the background on
this machine, as SLURM would on a node; sacct answers `JobIdRaw|State` lines
(RUNNING / COMPLETED / FAILED) in the `--parsable2 --noheader` format the plugin parses.
"""

import os
import shlex
import subprocess
import sys
from pathlib import Path

STATE = Path(os.environ.get("FAKE_SLURM_DIR", "/tmp/fake_slurm"))
JOBS = STATE / "jobs"


def option(args, *names):
    """The value of the first of `names` in args (`--x v` or `--x=v`), else None."""
    for i, a in enumerate(args):
        for n in names:
            if a == n and i + 1 < len(args):
                return args[i + 1]
            if a.startswith(n + "="):
                return a[len(n) + 1:]
    return None


def sbatch(args):
    JOBS.mkdir(parents=True, exist_ok=True)
    with open(STATE / "sbatch.log", "a") as log:
        log.write(shlex.join(args) + "\n")
    jobid = str(len(list(JOBS.glob("*.name"))) + 1000)
    (JOBS / f"{jobid}.name").write_text(option(args, "--job-name", "-J") or "")
    payload = option(args, "--wrap")
    if payload is None:          # the script comes on stdin (pass_command_as_script)
        payload = sys.stdin.read()
    out = (option(args, "--output", "-o") or os.devnull).replace("%j", jobid)
    env = dict(os.environ, SLURM_JOB_ID=jobid, SLURM_JOBID=jobid)
    gpus = option(args, "--gpus")
    if gpus:
        env["SLURM_GPUS"] = gpus
    rc = JOBS / f"{jobid}.rc"
    runner = f"( {payload}\n) > {shlex.quote(out)} 2>&1; echo $? > {shlex.quote(str(rc))}.tmp; " \
             f"mv {shlex.quote(str(rc))}.tmp {shlex.quote(str(rc))}"
    subprocess.Popen(["sh", "-c", runner], env=env, start_new_session=True,
                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                     stderr=subprocess.DEVNULL)
    print(jobid)


def states(args):
    """(jobid, state) of the jobs submitted under the --name asked for."""
    name = option(args, "--name")
    for f in sorted(JOBS.glob("*.name")) if JOBS.exists() else []:
        jobid = f.name[: -len(".name")]
        if name is not None and f.read_text() != name:
            continue
        rc = JOBS / f"{jobid}.rc"
        if not rc.exists():
            yield jobid, "RUNNING"
        else:
            yield jobid, "COMPLETED" if rc.read_text().strip() == "0" else "FAILED"


def srun(args):
    """Drop srun's options and run the command (a job step on the allocated node)."""
    with open(STATE / "srun.log", "a") as log:
        log.write(shlex.join(args) + "\n")
    i = 0
    while i < len(args) and args[i].startswith("-"):
        i += 1
    cmd = args[i:]
    if cmd == ["sh", "-s"]:
        return subprocess.call(["sh", "-s"])
    return subprocess.call(shlex.join(cmd) if len(cmd) > 1 else cmd[0], shell=True)


def main():
    cmd, args = Path(sys.argv[0]).name, sys.argv[1:]
    if cmd == "sbatch":
        sbatch(args)
    elif cmd == "sacct":
        if "-nu" in args:            # the account lookup fallback
            print("fake_account")
        else:
            for jobid, state in states(args):
                print(f"{jobid}|{state}")
    elif cmd == "squeue":
        for jobid, state in states(args):
            print(f"{jobid}|{state}")
    elif cmd == "sacctmgr" or cmd == "sshare":
        print("your_account")
    elif cmd == "sinfo":
        print("PARTITION\ncpu\ngpu")
    elif cmd == "srun":
        sys.exit(srun(args))
    elif cmd in ("scontrol", "scancel"):
        pass
    else:
        sys.exit(f"fake_slurm: unknown command {cmd}")


if __name__ == "__main__":
    main()
