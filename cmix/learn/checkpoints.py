"""A run's folder and checkpoint: the files it holds, the checkpoint's state and the
checks that tell a run's own checkpoint and finished record from another run's.

Run folder: ``checkpoint.pt``, ``train_log.jsonl``, ``predictions.npz`` (the test rows'
classes, probabilities and, where the method has one, latent; no IDs), ``metrics.json``
(written last), ``.cmix.lock`` (held while the run is going).

- :class:`RunState`: the checkpoint. ``stage`` and ``epoch`` say where the run is;
  ``parts`` holds what each stage saved (model and optimiser states, pseudo-labels; the
  fitted method's state dict as ``model`` with its ``report``, the record ``cmix
  predict`` checks new data against as ``predict``); ``history`` is train_log.jsonl.
  It is written atomically (:meth:`cmix.learn.context.RunContext.save`) after the first
  epoch, then at most every :data:`CHECKPOINT_SECONDS`, and when the method is fitted
  and when the run is done, so a killed run of any method resumes to the same metrics
  (on CPU, bit for bit).
- :func:`run_key_of`: the key of a run, which its checkpoint and metrics.json carry;
  :func:`saved_state` and :func:`finished_metrics`: the checkpoint and the metrics.json
  in a folder, when they are of the run with that key.
- :func:`cpu_state`: the detached CPU copy of a state dict a checkpoint holds.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from dataclasses import dataclass, field
from pathlib import Path

from .. import __version__
from ..atomic import atomic_path, load_torch
from ..errors import CmixError
from ..logs import log
from .config import sections_config
from .stages import START


METRICS_FILE = "metrics.json"
#: The first file a run writes in its folder: its run key. A folder is a run folder
#: (cmix train may write into it) when it holds this file, not when it holds a file
#: with a run file's name (:func:`is_run_folder`).
RUN_FILE = ".cmix-run.json"
PREDICTIONS_FILE = "predictions.npz"
CHECKPOINT_FILE = "checkpoint.pt"
LOG_FILE = "train_log.jsonl"

#: least seconds between two checkpoint writes inside a run's epoch loops. The first
#: epoch's checkpoint, the fitted method's and the finished run's are always written; a
#: killed run loses at most this much work plus one epoch, and a run of many short epochs
#: does not spend a tenth of its time serialising itself. Read by
#: :meth:`cmix.learn.context.RunContext.save` and ``save_due``, which import it by name.
CHECKPOINT_SECONDS = 60.0


@dataclass
class RunState:
    """The checkpoint of a run (see the module docstring)."""

    run_key: str
    stage: str = START
    epoch: int = 0
    history: list = field(default_factory=list)
    times: dict = field(default_factory=dict)
    parts: dict = field(default_factory=dict)

    def add_time(self, key: str, since: float) -> float:
        """Add the seconds since ``since`` to times[key]; returns now."""
        now = time.perf_counter()
        self.times[key] = self.times.get(key, 0.0) + now - since
        return now


def run_key_of(root, method, budget: int, seed: int, cfg, test_hash: str,
               store_sha256: str) -> str:
    """sha256 hex of what makes a run: the trait, budget, seed, method, the config
    sections the method reads, the test split and the store's content."""
    return hashlib.sha256(json.dumps(
        {"trait": str(root.attrs["trait"]), "budget": int(budget), "seed": int(seed),
         "method": method.name, "config": sections_config(cfg, method.sections),
         "test": test_hash, "store": store_sha256},
        sort_keys=True, default=str).encode()).hexdigest()


def write_run_file(out_dir: Path, run_key: str) -> None:
    """Record (atomically) that ``out_dir`` is the folder of run ``run_key``."""
    if _run_key_in(out_dir / RUN_FILE) != run_key:
        with atomic_path(out_dir / RUN_FILE) as tmp:
            tmp.write_text(json.dumps({"run_key": run_key, "cmix": __version__}) + "\n")


def _run_key_in(path: Path) -> str | None:
    """The run key a JSON file (the run file, or a run's metrics.json) holds; None when
    it is absent, not JSON or holds no run key (64 hex digits)."""
    try:
        record = json.loads(path.read_bytes().decode("utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    key = record.get("run_key") if isinstance(record, dict) else None
    return key if isinstance(key, str) and re.fullmatch(r"[0-9a-f]{64}", key) else None


def is_run_folder(folder: Path) -> bool:
    """Whether ``folder`` is a folder cmix train made: it holds the run file
    (:data:`RUN_FILE`) with a run key, or (a run folder of a cmix release before the run
    file) a metrics.json carrying a run key, or a checkpoint that holds one."""
    folder = Path(folder)
    if _run_key_in(folder / RUN_FILE) or _run_key_in(folder / METRICS_FILE):
        return True
    if [p.name for p in folder.iterdir()] == [".cmix.lock"]:
        return _a_lock(folder / ".cmix.lock")
    if (folder / CHECKPOINT_FILE).is_file() and not (folder / RUN_FILE).exists():
        try:
            saved = load_torch(folder / CHECKPOINT_FILE)
        except CmixError:
            return False
        return isinstance(saved, dict) and isinstance(saved.get("run_key"), str)
    return False


def _a_lock(path: Path) -> bool:
    """Whether ``path``, the only file of a folder, is a run's lock: a link, soft or hard
    (the lock refuses it, naming it) or a file holding nothing or a lock holder's line, as a run
    just started writes it before its run file."""
    if path.is_symlink() or not path.is_file() or path.stat().st_nlink > 1:
        return True
    try:
        text = path.read_bytes()[:4096].decode("utf-8")
    except (OSError, UnicodeDecodeError):
        return False
    return text == "" or (text.startswith("cmix ") and " (pid " in text)


def saved_state(out_dir: Path, run_key: str, resume: bool) -> RunState | None:
    """The checkpoint in ``out_dir`` when it is of run ``run_key``, else None.

    A checkpoint of another run is discarded (logged) when metrics.json is absent, as
    after Snakemake removes a job's outputs to rerun it; beside a metrics.json, or with
    ``resume``, it is an error. ``resume`` without a checkpoint is an error.
    """
    metrics_path, ckpt_path = out_dir / METRICS_FILE, out_dir / CHECKPOINT_FILE
    if not ckpt_path.exists():
        if resume:
            raise CmixError(f"{out_dir}: --resume given but there is no {CHECKPOINT_FILE}")
        return None
    saved = load_torch(ckpt_path)
    try:
        state = RunState(**saved)
    except Exception as err:
        raise CmixError(f"{ckpt_path}: unreadable checkpoint ({type(err).__name__}: "
                        f"{err}); delete it to start over") from None
    if state.run_key == run_key:
        return state
    if resume or metrics_path.exists():
        raise CmixError(f"{out_dir}: holds a {'finished ' * metrics_path.exists()}"
                        "run with another store content, budget, seed, method or "
                        "config; use another --out, or delete its metrics.json to "
                        "replace it")
    log(f"{out_dir}: the checkpoint there is of another run (store content, budget, "
        "seed, method or config changed); starting this run afresh")
    for name in (CHECKPOINT_FILE, LOG_FILE):
        (out_dir / name).unlink(missing_ok=True)
    return None


def finished_metrics(out_dir: Path, run_key: str) -> bool:
    """Whether ``out_dir``'s metrics.json proves that run ``run_key`` finished there: a
    JSON object carrying that run key (beside the finished checkpoint of that key).

    A metrics.json that is no run's record (not JSON, not an object, no run key) is
    logged and False is returned: the run's results are written again from its finished
    checkpoint, replacing it. One carrying another run's key is a CmixError naming it:
    it is another run's record, which cmix never deletes."""
    path = out_dir / METRICS_FILE
    if not path.exists():
        return False
    try:
        metrics = json.loads(path.read_bytes().decode("utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as err:
        metrics, why = None, f"not JSON ({type(err).__name__})"
    else:
        why = "not a JSON object of a run's metrics"
    if isinstance(metrics, dict) and "run_key" in metrics:
        if metrics["run_key"] == run_key:
            return True
        raise CmixError(f"{path}: the metrics of another run (its run_key is not that of "
                        f"this run's finished checkpoint, {CHECKPOINT_FILE}); move it away "
                        "or use another --out")
    if isinstance(metrics, dict):
        why = "no run_key"
    log(f"{path}: {why}, not this finished run's record; writing it again from "
        f"{CHECKPOINT_FILE}")
    return False


def cpu_state(sd: dict) -> dict:
    """A detached CPU copy of a (nested) state dict."""
    import torch  # torch: ~1.5 s to import; only where a network or tensor is used

    if isinstance(sd, torch.Tensor):
        return sd.detach().cpu().clone()
    if isinstance(sd, dict):
        return {k: cpu_state(v) for k, v in sd.items()}
    if isinstance(sd, list):
        return [cpu_state(v) for v in sd]
    return sd
