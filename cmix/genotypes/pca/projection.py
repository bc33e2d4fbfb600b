"""Projecting new people onto a saved PCA's axes (:func:`project_new_people`).

What it needs is read back from ``cmix pca``'s outputs (:func:`read_pca_model`), and
one fit is named by the sha256 of those outputs (:func:`pca_identity`). plink2 gives the
same scores: ``plink2 --read-freq OUT.acount --score OUT.eigenvec.allele 2 5
header-read no-mean-imputation variance-standardize cols=+scoresums --score-col-nums
6-...``: PCk of OUT.eigenvec = PCk_SUM / (m sqrt(eigenvalue_k)), m the number of
variants in OUT.acount: those that vary among the fitted founders
(:meth:`cmix.genotypes.pca.fit.Pca.score_scale`). plink2 2.00a3.5 needs
'no-mean-imputation' here: with mean imputation and variance-standardize it adds w (2p /
sd) for a missing call instead of 0.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pandas as pd

from ...errors import CmixError
from ...readers import plink
from ...readers.usable import refuse_excluded
from ...text import input_file


def _read_output_table(path, required: list[str]) -> pd.DataFrame:
    """A tab-separated output of cmix pca / plink2 as text, with its ``required`` columns
    read as text; CmixError for an empty or ragged file or a column absent."""
    try:
        table = pd.read_csv(path, sep="\t", dtype=str, keep_default_na=False)
    except (pd.errors.ParserError, pd.errors.EmptyDataError) as err:
        raise CmixError(f"{path}: not a tab-separated table ({type(err).__name__}: "
                        f"{str(err).strip()})") from None
    missing = [c for c in required if c not in table.columns]
    if missing:
        raise CmixError(f"{path}: no {', '.join(missing)} column (expected the columns "
                        f"{' '.join(required)}, as cmix pca writes them)")
    return table


def _finite(table: pd.DataFrame, column: str, path) -> np.ndarray:
    """float64 values of a column; CmixError naming the line of the first one that is not
    a finite number."""
    values = pd.to_numeric(table[column], errors="coerce").to_numpy(np.float64)
    bad = ~np.isfinite(values)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise CmixError(f"{path}, line {i + 2}, column {column}: {table[column].iloc[i]!r} "
                        "is not a finite number")
    return values


def read_pca_model(prefix) -> dict:
    """What projecting new people needs, from ``cmix pca``'s outputs at ``prefix``:
    OUT.eigenvec.allele (the ALT weights), OUT.acount (the fitted founders' ALT
    frequency) and OUT.eigenval. Returns {"variant_id", "ref", "alt" (m,) str arrays,
    "w_alt" float64 (m, k), "p_alt" float64 (m,), "eigenvalues" float64 (k,), "pcs"
    the PC column names}. Raises CmixError when a file is missing, malformed (a column
    absent, a value not a number) or the three disagree."""
    prefix = Path(prefix)
    paths = {s: input_file(prefix.with_name(f"{prefix.name}.{s}"), f"cmix pca output ({s})")
             for s in ("eigenvec.allele", "acount", "eigenval")}
    weights = _read_output_table(paths["eigenvec.allele"], ["ID", "REF", "ALT", "A1"])
    pcs = [c for c in weights.columns if c.startswith("PC")]
    if not pcs:
        raise CmixError(f"{paths['eigenvec.allele']}: no PC1.. columns (expected cmix pca / "
                        "plink2 --pca allele-wts weights)")
    w_all = np.column_stack([_finite(weights, c, paths["eigenvec.allele"]) for c in pcs])
    is_alt = (weights["A1"] == weights["ALT"]).to_numpy()
    alt = weights[is_alt].reset_index(drop=True)
    counts = _read_output_table(paths["acount"], ["ID", "ALT_CTS", "OBS_CT"])
    if is_alt.sum() != len(weights) // 2 or counts["ID"].tolist() != alt["ID"].tolist():
        raise CmixError(f"{paths['acount']}: its variants are not those of "
                        f"{paths['eigenvec.allele']} (one ALT line per variant, same order)")
    try:
        eigenvalues = np.loadtxt(paths["eigenval"], ndmin=1)
    except ValueError as err:
        raise CmixError(f"{paths['eigenval']}: expected one eigenvalue a line ({err})") from None
    if len(eigenvalues) < len(pcs) or not (eigenvalues[: len(pcs)] > 0).all():
        raise CmixError(f"{paths['eigenval']}: expected {len(pcs)} positive eigenvalues, "
                        f"found {eigenvalues[: len(pcs)].tolist()}")
    obs = _finite(counts, "OBS_CT", paths["acount"])
    alt_count = _finite(counts, "ALT_CTS", paths["acount"])
    with np.errstate(invalid="ignore", divide="ignore"):
        p_alt = np.where(obs > 0, alt_count / obs, np.nan)
    return {"variant_id": alt["ID"].to_numpy(str), "ref": alt["REF"].to_numpy(str),
            "alt": alt["ALT"].to_numpy(str), "w_alt": w_all[is_alt],
            "p_alt": p_alt, "eigenvalues": eigenvalues[: len(pcs)], "pcs": pcs}


def pca_identity(prefix) -> str | None:
    """sha256 hex identifying one ``cmix pca`` fit: of the bytes of OUT.eigenvec.allele
    (the allele weights), OUT.acount (the fitted allele counts) and OUT.eigenval, in
    that order. prefix: OUT, or OUT.eigenvec. None when one of the three is absent."""
    prefix = Path(prefix)
    if prefix.name.endswith(".eigenvec"):
        prefix = prefix.with_name(prefix.name[: -len(".eigenvec")])
    paths = [prefix.with_name(f"{prefix.name}.{s}") for s in ("eigenvec.allele", "acount",
                                                              "eigenval")]
    if not all(p.is_file() for p in paths):
        return None
    h = hashlib.sha256()
    for path in paths:
        with open(path, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                h.update(chunk)
        h.update(b"\0")
    return h.hexdigest()


def project_new_people(bf, model: dict, sample_idx=None, *, min_shared: float = 0.8,
                       block: int = 4096) -> tuple[np.ndarray, dict]:
    """PC scores of new people on a saved PCA's axes (:func:`read_pca_model`).

    bf: a :class:`cmix.readers.sources.GenotypeSource` of hard calls (any samples, any
    variant order); sample_idx: its
    samples to score (None = all). Variants are matched by ID; a variant whose ALT is
    the file's A2 is flipped; one with other alleles is an error. Each call becomes
    z = (g_ALT - 2p) / sqrt(2p(1-p)) with the fitted p, missing calls and absent
    variants z = 0 (the mean), and PC_k = 2 sum_j z_j w_ALT,jk / (m sqrt(eigenvalue_k)),
    m = the number of variants of the fit: the scale of the fitted samples' PCs, and
    what ``plink2 --score ... variance-standardize no-mean-imputation`` gives after the
    same division. Returns (scores float64 (n, k), counts {"n_variants", "n_shared",
    "n_flipped"}); CmixError when fewer than ``min_shared`` of the variants are found.
    """
    sample_idx = np.arange(bf.n_samples) if sample_idx is None else np.asarray(sample_idx)
    ids = model["variant_id"]
    row = pd.Index(bf.bim["variant_id"].astype(str)).get_indexer(ids)
    found = row >= 0
    where = str(bf.variant_file)
    refuse_excluded(bf.excluded, "the PCA's variants", ids=np.asarray(ids)[~found])
    flip = plink.allele_flips(bf.bim, row, ids, model["alt"], model["ref"], where,
                              "the PCA (ALT/REF)")
    m = len(ids)
    n_shared = int(found.sum())
    if n_shared < min_shared * m:
        raise CmixError(f"{where}: shares {n_shared} of the PCA's {m} variants (fewer than "
                        f"{min_shared:.0%}); the projected PCs would shrink towards 0")
    p = model["p_alt"]
    with np.errstate(invalid="ignore", divide="ignore"):
        sd = np.sqrt(2 * p * (1 - p))
        usable = found & np.isfinite(sd) & (sd > 0)
    have = np.flatnonzero(usable)
    scores = np.zeros((len(sample_idx), model["w_alt"].shape[1]))
    for s in range(0, len(have), block):         # fixed order: the same sum every run
        j = have[s:s + block]
        a1_count = bf.read(row[j], sample_idx).astype(np.float64)
        g = np.where(flip[j, None], 2 - a1_count, a1_count)                  # ALT counts
        z = (g - 2 * p[j, None]) / sd[j, None]
        z[a1_count < 0] = 0.0                                                # missing
        scores += z.T @ model["w_alt"][j]
    scores *= 2 / (m * np.sqrt(model["eigenvalues"]))
    return scores, {"n_variants": m, "n_shared": n_shared, "n_flipped": int(flip.sum())}
