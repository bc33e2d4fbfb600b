"""Covariates per sample for a trait's store: phenotype fields (age, sex, ...), genetic
principal components and the genotyping array.

Spec (a dict: the workflow's ``covariates:`` section, ``cmix store --covariates JSON``)::

    {"fields": [21022, 31],      # UKB fields of the phenotype table (f.21022.0.0 or
                                 # 21022-0.0), or {"column": "name"} entries; numeric
     "pcs": 10,                  # the first N principal components ...
     "pcs_from": "sample_qc",    # ... of the UK Biobank sample QC (PC1-PC40: columns
                                 # 26-65 of ukb_sqc_v2.txt, or PC1.. columns of a tidy
                                 # table), or "eigenvec" (a cmix pca / plink2 .eigenvec)
     "array": true,              # genotyping array (sample QC column 3 or
                                 # genotyping.array: UKBB = 0, UKBL = 1)
     "batch": true}              # genotyping batch (sample QC column 4 or Batch): one
                                 # 0/1 column per batch but the reference one

The batch levels are those of the stored samples, the most common one the reference
(ties: the first in sort order); the store records them as ``batch_levels`` (reference
first), and a spec that gives ``batch_levels`` uses those, so predictions for new people
code batches as training did. A batch outside the levels is an error.

Missing values follow one rule: a sample missing any requested covariate is left out
of the store (the count is in the store's attributes), never given a made-up value. A
non-numeric cell that is not blank or NA is an error naming the file, line and column.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from ..errors import CmixError
from ..readers.plink import first_duplicate_lines
from ..text import data_line, data_line_numbers, first_line, input_file, read_table
from .phenotypes import numeric_column, trait_column
from .samples import read_tidy_sample_qc, sqc_is_headerless


SPEC_KEYS = {"fields", "pcs", "pcs_from", "array", "batch", "batch_levels"}
UKB_SQC_PC1_COLUMN = 26         # ukb_sqc_v2.txt: PC1..PC40 in columns 26..65 (1-based)
UKB_SQC_N_PCS = 40
UKB_SQC_ARRAY_COLUMN = 3        # genotyping.array: UKBB (Axiom) / UKBL (BiLEVE)
UKB_SQC_BATCH_COLUMN = 4        # Batch: Batch_b001.., UKBiLEVEAX_b1..
ARRAY_CODES = {"UKBB": 0.0, "UKBL": 1.0}


@dataclass(frozen=True)
class SampleTables:
    """The per-sample tables phenotypes and covariates are read from (paths; None = not
    given): pheno, the phenotype table (eid + UKB field or named columns); sample_qc, the
    UK Biobank sample QC table (PCs, genotyping array and batch); eigenvec, a cmix pca /
    plink2 .eigenvec (PCs for ``pcs_from: eigenvec``)."""

    pheno: object = None
    sample_qc: object = None
    eigenvec: object = None


def check_spec(spec: dict, where="covariates") -> dict:
    """The spec with defaults (no fields, no PCs, no array); CmixError for an unknown key
    or a wrong value."""
    if not isinstance(spec, dict):
        raise CmixError(f"{where}: expected a mapping like {{\"fields\": [21022, 31], "
                        "\"pcs\": 10}")
    unknown = sorted(set(spec) - SPEC_KEYS)
    if unknown:
        raise CmixError(f"{where}: unknown key(s) {unknown}; known: {sorted(SPEC_KEYS)}")
    out = {"fields": list(spec.get("fields", [])), "pcs": spec.get("pcs", 0),
           "pcs_from": spec.get("pcs_from", "sample_qc"), "array": spec.get("array", False),
           "batch": spec.get("batch", False)}
    if "batch_levels" in spec:
        levels = spec["batch_levels"]
        if not (isinstance(levels, list) and len(levels) >= 1
                and all(isinstance(v, str) for v in levels) and len(set(levels)) == len(levels)):
            raise CmixError(f"{where}: batch_levels = {levels!r}, expected a list of distinct "
                            "batch names, the reference first")
        out["batch_levels"] = list(levels)
    if not isinstance(out["pcs"], int) or isinstance(out["pcs"], bool) or out["pcs"] < 0:
        raise CmixError(f"{where}: pcs = {out['pcs']!r}, expected an integer >= 0")
    if out["pcs_from"] not in ("sample_qc", "eigenvec"):
        raise CmixError(f"{where}: pcs_from = {out['pcs_from']!r}, expected sample_qc or "
                        "eigenvec")
    for key in ("array", "batch"):
        if not isinstance(out[key], bool):
            raise CmixError(f"{where}: {key} = {out[key]!r}, expected true or false")
    for f in out["fields"]:
        if not (isinstance(f, int) and not isinstance(f, bool)) and not (
                isinstance(f, dict) and set(f) == {"column"}):
            raise CmixError(f"{where}: fields entry {f!r}: expected a UKB field number or "
                            "{\"column\": name}")
    seen = []
    for f in out["fields"]:
        if f in seen:
            raise CmixError(f"{where}: fields lists {f!r} twice; each covariate field must "
                            "be given once (a column stored twice makes the GWAS's "
                            "covariates collinear)")
        seen.append(f)
    return out


def _numbers(values: pd.Series, path, column: str, line_of) -> np.ndarray:
    """float (n,) of text cells; blank / NA -> NaN; other text is an error."""
    return numeric_column(values, path, column, line_of, "covariates must be numeric")


def _unique_ids(ids: pd.Series, path, line_of) -> None:
    """Raise naming the two lines of the first sample ID listed twice (line_of: 0-based
    row -> the file's line number)."""
    dup = first_duplicate_lines(ids.reset_index(drop=True))
    if dup:
        raise CmixError(f"{path}: the same sample ID on lines {line_of(dup[0] - 1)} and "
                        f"{line_of(dup[1] - 1)}; each sample must appear once")


def _field_covariates(spec, iids, pheno: pd.DataFrame, pheno_path):

    names, cols = [], []
    present = pheno.index.get_indexer(iids)
    for f in spec["fields"]:
        cfg = f if isinstance(f, dict) else {"field": f}
        col = trait_column(pheno.columns, cfg, path=pheno_path, who="covariates.fields")
        if col in names:
            raise CmixError(f"covariates: fields entry {f!r} reads column {col!r} of "
                            f"{pheno_path}, as an earlier entry does; each covariate column "
                            "must be given once")
        values = _numbers(pheno[col], pheno_path, col,
                          lambda i: data_line(pheno_path, i, "phenotype table"))
        out = np.full(len(iids), np.nan)
        out[present >= 0] = values[present[present >= 0]]
        names.append(col)
        cols.append(out)
    return names, cols


def sample_qc_table(path, fam: pd.DataFrame, n_pcs: int, array: bool, batch: bool = False):
    """(names, columns aligned to the .fam) of PCs / array from a sample QC table, and
    the batch of each .fam sample (str, "" = missing; None unless ``batch``)."""
    path = input_file(path, "sample QC table")
    first = first_line(path, "sample QC table")
    if not first.strip():
        raise CmixError(f"{path}: the file (or its first line) is empty (sample QC table "
                        "for covariates)")

    if sqc_is_headerless(path, first, flags=False):
        # a row with a field too few would read shifted (PC2 as PC1, ...)
        data_line_numbers(path, len(first.split()), None, "sample QC table", header=False)
        raw = read_table(path, "sample QC table", sep=r"\s+", header=None, dtype=str,
                         engine="python")
        if len(raw) != len(fam):
            raise CmixError(f"{path}: {len(raw)} lines, but the .fam has {len(fam)} samples "
                            "(a headerless ukb_sqc_v2 table is in .fam order)")
        pc_cols = [raw.columns[UKB_SQC_PC1_COLUMN - 1 + k] for k in range(n_pcs)
                   if UKB_SQC_PC1_COLUMN - 1 + k < raw.shape[1]]
        table = raw
        need = max(UKB_SQC_ARRAY_COLUMN * array, UKB_SQC_BATCH_COLUMN * batch)
        if raw.shape[1] < need:
            raise CmixError(f"{path}: {raw.shape[1]} columns, but the genotyping "
                            f"{'batch' if batch else 'array'} is column {need} of a "
                            "headerless ukb_sqc_v2 table")
        array_col = raw.columns[UKB_SQC_ARRAY_COLUMN - 1] if array else None
        batch_col = raw.columns[UKB_SQC_BATCH_COLUMN - 1] if batch else None
        line_of = (lambda i: i + 1)
        # columns 26-65 hold PC1-PC40; those after them are QC flags, never PCs
        available = min(max(raw.shape[1] - (UKB_SQC_PC1_COLUMN - 1), 0), UKB_SQC_N_PCS)
        pc_names = [f"PC{k + 1}" for k in range(len(pc_cols))]
    else:
        table, id_col, _ = read_tidy_sample_qc(path, first)
        pos = pd.Index(table[id_col]).get_indexer(fam["iid"].astype(str))
        table = table.drop(columns=id_col).iloc[np.where(pos >= 0, pos, 0)].reset_index(drop=True)
        table[pos < 0] = np.nan
        available = sum(1 for k in range(1, UKB_SQC_N_PCS + 1) if f"PC{k}" in table.columns)
        pc_cols = [f"PC{k + 1}" for k in range(min(n_pcs, available))]
        pc_names = pc_cols
        array_col = "genotyping.array" if array else None
        if array and array_col not in table.columns:
            raise CmixError(f"{path}: no genotyping.array column (covariates: array)")
        batch_col = "Batch" if batch else None
        if batch and batch_col not in table.columns:
            raise CmixError(f"{path}: no Batch column (covariates: batch)")
        line_of = (lambda i: f"(row of sample {i + 1} in .fam order)")
    if n_pcs > available:
        raise CmixError(f"{path}: {n_pcs} PCs asked for, the table has {available}")
    lacking = [c for c in pc_cols if c not in table.columns]
    if lacking:
        raise CmixError(f"{path}: no column {lacking[0]}; {n_pcs} PCs asked for need "
                        f"columns PC1-PC{n_pcs}")
    names, cols = [], []
    for name, col in zip(pc_names, pc_cols):
        names.append(name)
        cols.append(_numbers(table[col], path, name, line_of))
    if array:
        codes = table[array_col].astype(str).str.strip()
        value = codes.map(ARRAY_CODES)
        bad = value.isna() & ~codes.isin(["", "NA", "nan"])
        if bad.any():
            i = int(np.flatnonzero(bad.to_numpy())[0])
            raise CmixError(f"{path}: genotyping array {codes.iloc[i]!r} at {line_of(i)}; "
                            f"expected {' or '.join(ARRAY_CODES)}")
        names.append("genotyping_array_UKBL")
        cols.append(value.to_numpy(float))
    batches = None
    if batch:
        batches = table[batch_col].astype(str).str.strip()
        batches = batches.where(~batches.isin(["", "NA", "nan", "NaN"]), "").to_numpy(str)
    return names, cols, batches


def _batch_columns(batches: np.ndarray, levels: list[str] | None, where):
    """(names, columns, levels) of batch indicators for ``batches`` (str (n,), "" =
    missing: NaN in every column). levels: the reference first, then one 0/1 column
    each; None = the batches present, the most common the reference."""
    present = batches[batches != ""]
    if levels is None:
        if len(present) == 0:
            raise CmixError(f"{where}: the batch is missing for every sample")
        values, counts = np.unique(present, return_counts=True)
        ref = values[np.argmax(counts)]                 # np.unique sorts: ties -> first
        levels = [str(ref)] + [str(v) for v in values if v != ref]
    unknown = sorted(set(present.tolist()) - set(levels))
    if unknown:
        n = int(np.isin(batches, unknown).sum())
        raise CmixError(f"{where}: batch {unknown[0]!r} ({len(unknown)} unknown batch(es), "
                        f"{n} samples) is not among the training samples' batches "
                        f"({len(levels)} levels); their effect cannot be known")
    missing = batches == ""
    names, cols = [], []
    for level in levels[1:]:
        col = (batches == level).astype(float)
        col[missing] = np.nan
        names.append(f"batch_{level}")
        cols.append(col)
    return names, cols, levels


def _eigenvec(path, fam: pd.DataFrame, n_pcs: int):
    """(names, columns aligned to the .fam) of the first n_pcs PCs of a .eigenvec, or of
    a table with its columns (IID, PC1..) computed in memory."""
    if isinstance(path, pd.DataFrame):
        table, path = path, "the projected PCs"
    else:
        path = input_file(path, "PCA .eigenvec")
        data_line_numbers(path, len(first_line(path, "PCA .eigenvec").split()), None,
                          "PCA .eigenvec")         # a short row would read shifted
        table = read_table(path, "PCA .eigenvec", sep=r"\s+", dtype=str, engine="python")
    id_col = "IID" if "IID" in table.columns else ("#IID" if "#IID" in table.columns else None)
    if id_col is None:
        raise CmixError(f"{path}: no IID or #IID column (expected plink2's .eigenvec layout)")
    available = sum(1 for c in table.columns if c.startswith("PC"))
    if n_pcs > available:
        raise CmixError(f"{path}: {n_pcs} PCs asked for, the file has {available}")
    lacking = [f"PC{k + 1}" for k in range(n_pcs) if f"PC{k + 1}" not in table.columns]
    if lacking:
        raise CmixError(f"{path}: no column {lacking[0]}; {n_pcs} PCs asked for need "
                        f"columns PC1-PC{n_pcs}")
    line_of = (lambda i: i + 2) if not isinstance(path, Path) else (
        lambda i: data_line(path, i, "PCA .eigenvec"))
    _unique_ids(table[id_col], path, line_of)
    pos = pd.Index(table[id_col]).get_indexer(fam["iid"].astype(str))
    names, cols = [], []
    for k in range(n_pcs):
        v = _numbers(table[f"PC{k + 1}"], path, f"PC{k + 1}", line_of)
        out = np.full(len(fam), np.nan)
        out[pos >= 0] = v[pos[pos >= 0]]
        names.append(f"PC{k + 1}")
        cols.append(out)
    return names, cols


def covariate_matrix(spec: dict, fam: pd.DataFrame, sample_idx: np.ndarray, *, pheno=None,
                     pheno_path=None, sample_qc=None,
                     eigenvec=None) -> tuple[list, np.ndarray, dict]:
    """(names, values float64 (len(sample_idx), n_covariates), NaN = missing, the spec
    with its defaults and, with ``batch``, its ``batch_levels``) of the samples
    ``fam.iloc[sample_idx]``. Raises CmixError when a source the spec needs is not
    given, or when every sample misses a covariate."""
    spec = check_spec(spec)
    iids = fam["iid"].astype(str).to_numpy()[sample_idx]
    names, cols = [], []
    if spec["fields"]:
        if pheno is None:
            raise CmixError("covariates: fields need the phenotype table")
        n, c = _field_covariates(spec, iids, pheno, pheno_path)
        names += n
        cols += c
    if spec["pcs"] or spec["array"] or spec["batch"]:
        if spec["pcs_from"] == "eigenvec" and spec["pcs"]:
            if eigenvec is None:
                raise CmixError("covariates: pcs_from eigenvec needs --eigenvec (cmix pca's "
                                "OUT.eigenvec)")
            n, c = _eigenvec(eigenvec, fam, spec["pcs"])
            names += n
            cols += [x[sample_idx] for x in c]
        need_sqc = spec["array"] or spec["batch"] or (spec["pcs"]
                                                      and spec["pcs_from"] == "sample_qc")
        if need_sqc:
            if sample_qc is None:
                raise CmixError("covariates: PCs, the array or the batch from the sample QC "
                                "need --sample-qc")
            n, c, batches = sample_qc_table(
                sample_qc, fam, spec["pcs"] if spec["pcs_from"] == "sample_qc" else 0,
                spec["array"], spec["batch"])
            names += n
            cols += [x[sample_idx] for x in c]
            if spec["batch"]:
                n, c, spec["batch_levels"] = _batch_columns(
                    batches[sample_idx], spec.get("batch_levels"), sample_qc)
                names += n
                cols += c
    values = np.column_stack(cols) if cols else np.zeros((len(sample_idx), 0))
    for j, name in enumerate(names):
        if len(values) and np.isnan(values[:, j]).all():
            raise CmixError(f"covariates: {name} is missing for every sample")
    return names, values, spec
