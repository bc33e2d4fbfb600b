"""The selection ``cmix select`` writes, its steps table and the record of its source.

Output table (tab-separated, one row per selected SNP, best first):
    variant_id chrom pos effect_allele other_allele beta log10_p p bim_index
    ``p`` is the p-value text of the summary statistics; ``bim_index`` the 0-based row of
    the SNP in the .bim. The steps table is ``<path>.steps.tsv``; the record of where the
    SNPs come from (:func:`selection_source`) is ``<path>.source.json``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pandas as pd

from ...atomic import atomic_outputs, file_sha256
from ...errors import CmixError
from ...text import input_file
from ..gwas import read_discovery_record
from .read import with_p_text


OUTPUT_COLUMNS = ["variant_id", "chrom", "pos", "effect_allele", "other_allele", "beta",
                  "log10_p", "p", "bim_index"]


def selection_source(sumstats) -> dict:
    """Where a selection's SNPs come from: the summary statistics file's name and sha256,
    and, when ``cmix gwas --ids-out`` wrote them (its record beside them names these
    bytes), the discovery people's count and IDs' sha256 (``discovery_gwas``; else None)."""
    sha = file_sha256(sumstats)
    return {"sumstats": os.path.basename(str(sumstats)), "sha256": sha,
            "discovery_gwas": read_discovery_record(sumstats, sha)}


def selection_source_path(path) -> Path:
    """The record of where a selection's SNPs come from: ``<path>.source.json``."""
    return Path(f"{path}.source.json")


def read_selection_source(path) -> dict | None:
    """The :func:`selection_source` record beside the selection ``path``; None when there
    is none (a selection written before cmix recorded it, or by hand). CmixError for an
    unreadable one."""
    src = selection_source_path(path)
    if not src.exists():
        return None
    try:
        record = json.loads(src.read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise CmixError(f"{src}: unreadable record of the selection's summary statistics "
                        f"({err}); rerun `cmix select`") from None
    if not isinstance(record, dict) or not isinstance(record.get("sha256"), str):
        raise CmixError(f"{src}: not a record of `cmix select` (expected a JSON object with "
                        "the summary statistics' sha256); rerun `cmix select`")
    return record


def write_selection(path, selected: pd.DataFrame, steps: pd.DataFrame,
                    source: dict | None = None) -> tuple[Path, Path]:
    """Write the selection (tab-separated :data:`OUTPUT_COLUMNS`) and its steps table,
    and with ``source`` (:func:`selection_source`) its record of where the SNPs come from.

    The steps table goes to ``<path>.steps.tsv``, the record to ``<path>.source.json``.
    All appear together or not at all.
    """
    path = Path(path)
    steps_path = path.with_name(path.name + ".steps.tsv")
    out = with_p_text(selected[OUTPUT_COLUMNS]).copy()
    out["beta"] = out["beta"].map(lambda x: f"{x:.10g}")
    out["log10_p"] = out["log10_p"].map(lambda x: f"{x:.10g}")
    paths = [path, steps_path] + ([selection_source_path(path)] if source is not None else [])
    stale = [] if source is not None else [selection_source_path(path)]
    stale = [p for p in stale if p.is_file()]
    with atomic_outputs(*paths, remove=stale) as tmps:
        out.to_csv(tmps[0], sep="\t", index=False)
        steps.to_csv(tmps[1], sep="\t", index=False)
        if source is not None:
            tmps[2].write_text(json.dumps(source, indent=1) + "\n")
    return path, steps_path


def read_selection(path: str | os.PathLike) -> pd.DataFrame:
    """Read a selection written by :func:`write_selection` (checks the columns)."""
    path = input_file(path, "selected SNP table from `cmix select`")
    try:
        df = pd.read_csv(path, sep="\t", dtype={"variant_id": str, "chrom": str,
                                                 "effect_allele": str, "other_allele": str,
                                                 "p": str})
    except (pd.errors.ParserError, pd.errors.EmptyDataError) as err:
        raise CmixError(f"{path}: cannot parse as a tab-separated table ({err})") from None
    missing = [c for c in ("variant_id", "effect_allele", "other_allele", "beta")
               if c not in df.columns]
    if missing:
        raise CmixError(f"{path}: missing column(s) {', '.join(missing)} (expected the "
                        f"header {' '.join(OUTPUT_COLUMNS)})")
    if len(df) == 0:
        raise CmixError(f"{path}: no SNPs listed")
    beta = pd.to_numeric(df["beta"], errors="coerce").to_numpy(dtype=float)
    bad = ~np.isfinite(beta)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise CmixError(f"{path}, line {i + 2}, column beta: expected a finite number for "
                        f"every selected SNP, found {str(df['beta'].iloc[i])!r}")
    return df
