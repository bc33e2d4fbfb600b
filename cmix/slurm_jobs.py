"""What runs in and around a SLURM run's jobs: the node lock that runs the training jobs
of one packed job one at a time on its GPU (``python -m cmix.slurm_jobs COMMAND...``),
and, when a run stops, the cancelling and naming of its jobs that did not complete."""

from __future__ import annotations

import fcntl
import getpass
import glob
import os
import re
import shutil
import signal
import subprocess
import tempfile


# ------------------------------------------------------------ a stopped run's jobs
def run_id(logfiles) -> str | None:
    """The executor plugin's run ID (every job of the run is named for it) in a
    Snakemake log file (or the first of a list that has one): its line ``SLURM run ID:
    <id>``."""
    for logfile in [logfiles] if isinstance(logfiles, (str, os.PathLike)) else logfiles:
        try:
            with open(logfile, errors="replace") as fh:
                for line in fh:
                    m = re.search(r"SLURM run ID: (\S+)", line)
                    if m:
                        return m.group(1)
        except OSError:
            continue
    return None


def cancel_run_jobs(logfile, user: str | None = None) -> list[str]:
    """When a run stops on an error or Ctrl-C: cancel, in one scancel, the user's jobs
    named for the run ID in ``logfile`` that are still queued or running, then print one
    line per job of the run that ended otherwise than COMPLETED (job ID, sacct's state,
    its log under .snakemake/slurm_logs, which names the rule: Snakemake prints no
    state for a grouped job). Returns the job IDs cancelled."""
    rid = run_id(logfile) if logfile else None
    if rid is None or shutil.which("squeue") is None:
        return []
    user = user or getpass.getuser()
    res = subprocess.run(["squeue", "-h", "--user", user, "--name", rid, "-o", "%i"],
                         capture_output=True, text=True, timeout=60)
    jobs = res.stdout.split() if res.returncode == 0 else []
    if jobs:
        subprocess.run(["scancel", *jobs], timeout=60)
        print(f"cmix: cancelled the {len(jobs)} SLURM jobs of this run still queued or "
              f"running: {' '.join(jobs)}", flush=True)
    for job, state in unfinished_jobs(rid, user):
        logs = sorted(glob.glob(f".snakemake/slurm_logs/**/{job}.log", recursive=True))
        print(f"cmix: SLURM job {job} ended {state}"
              + (f" (log: {logs[0]})" if logs else ""), flush=True)
    return jobs


def unfinished_jobs(rid: str, user: str) -> list[tuple[str, str]]:
    """(job ID, state) of each job named ``rid`` that ended otherwise than COMPLETED:
    sacct's states, overridden by squeue's for the jobs it still lists (the controller's
    own, which the accounting database may trail by seconds)."""
    states = {}
    for cmd in (["sacct", "-X", "-n", "-P", "--user", user, "--name", rid, "-S", "now-7days",
                 "-o", "JobID,State"],
                ["squeue", "-h", "--states=all", "--user", user, "--name", rid, "-o", "%i|%T"]):
        if shutil.which(cmd[0]) is None:
            continue
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
        states.update(line.split("|") for line in res.stdout.splitlines() if line.count("|") == 1)
    active = ("COMPLETED", "PENDING", "RUNNING", "REQUEUED", "RESIZING", "SUSPENDED",
              "CONFIGURING", "COMPLETING")
    return [(job, state) for job, state in sorted(states.items(), key=lambda js: int(js[0])
                                                  if js[0].isdigit() else 0)
            if not state.startswith(active)]


# ------------------------------------------------------------ one at a time on a node
def lock_path(job_id: str, tmpdir: str | None = None) -> str:
    """The node lock of SLURM job ``job_id``: ``cmix-train.<job>.lock`` in the node's
    temporary folder ($TMPDIR, else /tmp)."""
    return os.path.join(tmpdir or os.environ.get("TMPDIR") or tempfile.gettempdir(),
                        f"cmix-train.{job_id}.lock")


def hold_lock(path: str) -> int:
    """Wait for, then hold, an exclusive flock on the file ``path`` (made if missing);
    the open descriptor. A holder removes the file before it lets go (:func:`release`),
    so a waiter that wakes on a removed file starts over on the path's new one."""
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            now = os.stat(path, follow_symlinks=False)
        except FileNotFoundError:
            now = None
        held = os.fstat(fd)
        if now is not None and (now.st_dev, now.st_ino) == (held.st_dev, held.st_ino):
            return fd
        os.close(fd)


def release(path: str, fd: int) -> None:
    """Remove the lock file ``path``, then let go of its lock (descriptor ``fd``)."""
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    os.close(fd)


def one_at_a_time(command: list[str], job_id: str | None = None) -> int:
    """Run ``command`` (an argv) alone among the commands of SLURM job ``job_id`` (the
    training jobs a packed job runs on its one GPU): each waits for the node lock of the
    allocation, and the lock file is gone when the last one ends. Outside SLURM (no
    job ID) the command just runs. Returns its exit status (128 + N for signal N).
    SIGTERM and SIGINT (scancel, Ctrl-C) are passed on to the command, and the lock is
    released when it ends."""
    job_id = job_id or os.environ.get("SLURM_JOB_ID")
    if not job_id:
        return subprocess.call(command)
    path = lock_path(job_id)
    fd = hold_lock(path)
    try:
        proc = subprocess.Popen(command)
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda signum, frame: proc.send_signal(signum))
        code = proc.wait()
        return 128 - code if code < 0 else code
    finally:
        release(path, fd)


if __name__ == "__main__":       # python -m cmix.slurm_jobs COMMAND...: one_at_a_time
    import sys

    sys.exit(one_at_a_time(sys.argv[1:]))
