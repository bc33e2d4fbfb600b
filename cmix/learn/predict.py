"""Apply finished runs to new people: class probabilities from their genotypes (a .bed,
.pgen or BGEN, or a per-chromosome set of them: :func:`cmix.readers.sources.open_source`).

A run's checkpoint holds what prediction needs: ``parts["predict"]`` (written by
:func:`cmix.learn.results.finish`): the store's variants and their effect alleles and the
standardisation moments of the covariates; ``parts["model"]``: the fitted method's state
dict (:mod:`cmix.learn.methods`). :func:`predict` rebuilds the method of each run from
that dict alone, with no code per method, reads the same variants from
the new file set (matched by ID, else by chrom:pos with the same two alleles; swapped
alleles flip the dosage), gives variants the file set lacks the training mean (a missing
call), and averages the class probabilities over the runs (an ensemble of seeds).
Dosages are read as ``cmix store`` reads them: hard calls, or expected copies on the
fractional store's 1/125 grid where the file holds fractional dosages.

Refusals (one clear message each): a checkpoint that fails its CRC32 check, or whose run
key is not its metrics.json's; runs of different stores or methods; ``--pca`` of another
``cmix pca`` fit than the run's PCs came from; a file set that
shares fewer than ``min_shared`` of the variants; a variant whose alleles differ from the
store's (another allele coding or strand); people who were among the run's training rows,
unless ``allow_overlap``; people of the discovery GWAS that chose the run's SNPs (the
store's ``discovery_id``), unless ``allow_discovery`` (then a warning gives their count,
never their IDs); a run trained with covariates when none are supplied;
fractional dosages for a run that encodes SNPs as categorical levels.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from ..atomic import atomic_path, load_torch
from ..errors import CmixError
from ..genotypes.build_store import effect_dosage_fractional
from ..genotypes.covariates import SampleTables, covariate_matrix
from ..genotypes.pca.projection import pca_identity, project_new_people, read_pca_model
from ..genotypes.phenotypes import read_phenotypes
from ..logs import log
from ..readers.chroms import chrom_codes, chrom_mask
from ..readers.plink import allele_flips
from ..readers.sources import HARD_CALLS
from ..readers.usable import refuse_excluded
from ..store.read import open_store, store_fingerprint
from ..store.schema import DOSAGE_ENCODINGS, fractional_copies, hard_call_codes
from .methods import from_state_dict
from .stages import DONE


if TYPE_CHECKING:
    from ..readers.sources import GenotypeFiles


def load_run(run_dir) -> dict:
    """metrics.json and the checkpoint's parts of a finished run, checked to belong
    together (the same run key) and to be intact (:func:`cmix.atomic.load_torch`)."""
    run_dir = Path(run_dir)
    metrics_path, ckpt = run_dir / "metrics.json", run_dir / "checkpoint.pt"
    if not metrics_path.is_file() or not ckpt.is_file():
        raise CmixError(f"{run_dir}: not a finished cmix run (needs metrics.json and "
                        "checkpoint.pt)")
    try:
        metrics = json.loads(metrics_path.read_text())
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise CmixError(f"{metrics_path}: not valid JSON ({err}); the run's record is "
                        "damaged: retrain it or restore the file") from None
    if not isinstance(metrics, dict):
        raise CmixError(f"{metrics_path}: expected a JSON object (a cmix run's metrics)")
    state = load_torch(ckpt)
    if not isinstance(state, dict) or state.get("stage") != DONE or \
            not {"predict", "model"} <= set(state.get("parts", {})):
        raise CmixError(f"{ckpt}: the checkpoint has no prediction record (a run that is "
                        "not finished, or one trained by an older cmix: retrain it)")
    if "run_key" not in metrics:
        raise CmixError(f"{metrics_path}: no run_key (a run of an older cmix); cannot check "
                        f"that {ckpt.name} is this run's checkpoint: retrain it")
    if metrics.get("run_key") != state.get("run_key"):
        raise CmixError(f"{ckpt}: not the checkpoint of the run {metrics_path.name} "
                        "describes (another seed, budget, method, config or store); "
                        "put the run's own checkpoint back, or retrain it")
    return {"dir": run_dir, "metrics": metrics, "parts": state["parts"]}


def match_variants(info: dict, bim: pd.DataFrame, where: str) -> tuple[np.ndarray, np.ndarray]:
    """(row of each store variant in ``bim`` or -1, flip (bool): the effect allele is the
    file's A2). Matched by ID, else by chrom:pos, the chromosome as its code on both sides
    (``chr2``, ``02`` and ``2`` are one; :func:`cmix.readers.chroms.chrom_code`; a
    position that ``bim`` lists twice matches by ID only); a variant found whose alleles are not
    the store's two alleles is an error (:func:`cmix.readers.plink.allele_flips`)."""
    ids = pd.Index(bim["variant_id"].astype(str))
    pos = ids.get_indexer(np.asarray(info["variant_id"], dtype=str))
    by_pos = pd.Series(chrom_codes(bim["chrom"])) + ":" + bim["pos"].astype(str).to_numpy()
    unique = ~by_pos.duplicated(keep=False).to_numpy()     # a shared position matches none
    key = (pd.Series(chrom_codes(info["contig"])) + ":"
           + np.asarray(info["position"]).astype(str)).to_numpy(str)
    alt = pd.Index(by_pos[unique]).get_indexer(key)
    alt = np.where(alt >= 0, np.flatnonzero(unique)[np.maximum(alt, 0)], -1)
    row = np.where(pos >= 0, pos, alt)
    other, effect = np.asarray(info["allele"], dtype=str).T
    flip = allele_flips(bim, row, info["variant_id"], effect, other, where, "the run's store")
    return row, flip


def _dosages(src, row, flip, sample_idx) -> np.ndarray:
    """Effect-allele dosages (n_samples, n_variants) of a genotype source, as a store
    holds them: int8 hard calls, -1 missing or absent, when every value read is a whole
    number of copies; else float32 expected copies rounded to the fractional store's
    1/125 steps, -1.0 missing or absent (:func:`cmix.store.read.load_rows`)."""
    have = np.flatnonzero(row >= 0)
    if src.encoding == HARD_CALLS:
        out = np.full((len(sample_idx), len(row)), -1, np.int8)
        if len(have):
            g = src.read(row[have], sample_idx).T
            out[:, have] = np.where(flip[have][None, :] & (g >= 0), 2 - g, g)
        return out
    codes = np.full((len(sample_idx), len(row)), DOSAGE_ENCODINGS["fractional"]["missing"],
                    np.uint8)
    if len(have):
        codes[:, have] = effect_dosage_fractional(src, row[have], sample_idx, flip[have])
    hard = hard_call_codes(codes)
    return hard if hard is not None else fractional_copies(codes)


def _model_probabilities(run: dict, x: np.ndarray, cov: np.ndarray) -> np.ndarray:
    """Class probabilities (n, C) of one run for int8 dosages x (n, M) and standardised
    covariates cov (n, K): the run's method rebuilt from its state dict
    (:func:`cmix.learn.methods.from_state_dict`)."""
    return from_state_dict(run["parts"]["model"]).predict_proba(x, cov)


def predict(run_dirs, out, genotypes: GenotypeFiles, tables: SampleTables = SampleTables(),
            *, pca=None, min_shared: float = 0.8, allow_overlap: bool = False,
            allow_discovery: bool = False) -> dict:
    """Write ``out`` (TSV: FID, IID, one probability column per class, averaged over the
    runs) for every person of the genotypes; returns counts (no IDs).

    ``genotypes`` as ``cmix store`` takes them (:func:`cmix.readers.sources.open_source`):
    ``bfile`` or ``pfile`` (a prefix or ``{chrom}`` pattern, shared ``fam``), or ``bgen``
    with its ``sample`` file (``fam``: the people to match the .sample to); ``chroms``:
    only these chromosomes' variants are read (a --chroms spec,
    :func:`cmix.readers.chroms.parse_chroms`; for a pattern its files, default 1-22),
    the run's variants elsewhere count as absent.

    The covariates come from ``tables``: ``pheno`` (fields), ``sample_qc`` (PCs, array)
    and, for a run with ``pcs_from: eigenvec``, either ``eigenvec`` (the new people's PCs)
    or ``pca``: the prefix of the ``cmix pca`` outputs the run's PCs came from, onto whose
    axes the new people are projected
    (:func:`cmix.genotypes.pca.projection.project_new_people`)."""
    runs = _load_ensemble(run_dirs)
    first = runs[0]["parts"]["predict"]
    bf = genotypes.open()
    row, flip = _shared_variants(bf, first, genotypes.chroms, min_shared)
    iids = bf.fam["iid"].astype(str).to_numpy()
    if not allow_overlap:
        overlap = _training_overlap(first, iids)
        if overlap:
            raise CmixError(f"{bf.prefix}: {overlap} people were training rows of the run "
                            "(their probabilities would be optimistic); leave them out, or "
                            "pass --allow-overlap")
    n_discovery = _discovery_overlap(first, iids, allow_discovery)
    if n_discovery and not allow_discovery:
        raise CmixError(f"{bf.prefix}: {n_discovery} people are in the discovery set of the "
                        f"run's store ({first['store_path']}): the GWAS that chose its SNPs and "
                        "betas tested them, so their probabilities would be optimistic; leave "
                        "them out, or pass --allow-discovery")
    if n_discovery:
        log(f"predict: warning: {n_discovery} people are in the discovery set of the run's "
            "store (the GWAS that chose its SNPs tested them): their probabilities are "
            "optimistic (--allow-discovery)")
    cov = _new_covariates(bf, runs, tables, pca, min_shared)
    keep = ~np.isnan(cov).any(axis=1) if cov.shape[1] else np.ones(len(iids), bool)
    present = bf.samples_present()          # a BGEN's .sample may lack some of --fam
    sample_idx = np.flatnonzero(keep & present)
    prob = _ensemble_probabilities(runs, _dosages(bf, row, flip, sample_idx), cov[sample_idx],
                                   bf.prefix)
    table = pd.DataFrame({"FID": bf.fam["fid"].to_numpy()[sample_idx],
                          "IID": iids[sample_idx]})
    for c, name in enumerate(first["class_names"]):
        table[f"prob_{name}"] = prob[:, c]
    with atomic_path(out) as tmp:
        table.to_csv(tmp, sep="\t", index=False, float_format="%.8g")
    n_shared = int((row >= 0).sum())
    summary = {"n_people": int(len(sample_idx)), "n_left_out_missing_covariate":
               int((~keep).sum()), "n_left_out_not_in_file": int((keep & ~present).sum()),
               "n_variants": len(row), "n_shared": n_shared,
               "n_flipped": int(flip.sum()), "n_runs": len(runs)}
    _log_prediction(summary, bf.prefix)
    return summary


def _load_ensemble(run_dirs) -> list[dict]:
    """The finished runs (:func:`load_run`) of ``run_dirs``, checked to be distinct seeds
    of one method, budget, config and covariates on one store with the same classes
    (CmixError naming what differs, or the seed given twice)."""
    runs = [load_run(d) for d in run_dirs]
    first, m0 = runs[0]["parts"]["predict"], runs[0]["metrics"]
    seeds = {}
    for r in runs:
        info, m = r["parts"]["predict"], r["metrics"]
        differ = [what for what, a, b in (
            ("store", info["store_sha256"], first["store_sha256"]),
            (f"method ({m.get('method')} vs {m0.get('method')})", m.get("method"),
             m0.get("method")),
            ("classes", info["class_names"], first["class_names"]),
            (f"budget ({m.get('budget')} vs {m0.get('budget')})", m.get("budget"),
             m0.get("budget")),
            ("trainer config", m.get("config"), m0.get("config")),
            ("covariates", list(info["cov_names"]), list(first["cov_names"]))) if a != b]
        if differ:
            raise CmixError(f"{r['dir']}: not the same {', '.join(differ)} as "
                            f"{runs[0]['dir']}; an ensemble averages seeds of one method, "
                            "budget and config on one store")
        if m.get("seed") in seeds:
            raise CmixError(f"{r['dir']}: seed {m.get('seed')} again (as {seeds[m.get('seed')]}); "
                            "an ensemble averages each seed once")
        seeds[m.get("seed")] = r["dir"]
    return runs


def _shared_variants(bf, info: dict, chroms, min_shared: float) -> tuple[np.ndarray, np.ndarray]:
    """(row, flip) of the run's store variants in ``bf`` (:func:`match_variants`), looked
    for only on ``chroms`` (a parsed --chroms spec; None = all): row int (n_variants,) a
    variant index of ``bf`` or -1, flip bool (n_variants,). CmixError when fewer than
    ``min_shared`` (a fraction) of them are found."""
    on_chroms = np.flatnonzero(chrom_mask(bf.bim["chrom"], chroms))

    row, flip = match_variants(info, bf.bim.iloc[on_chroms], str(bf.variant_file))
    row = np.where(row >= 0, on_chroms[np.maximum(row, 0)], -1)
    absent = row < 0
    refuse_excluded(bf.excluded[chrom_mask(bf.excluded["chrom"], chroms)],
                    "the run's store variants",
                    ids=np.asarray(info["variant_id"])[absent],
                    chrom=np.asarray(info["contig"])[absent],
                    pos=np.asarray(info["position"])[absent])
    n_shared = int((row >= 0).sum())
    if n_shared < min_shared * len(row):
        raise CmixError(f"{bf.variant_file}: shares {n_shared} of the run's {len(row)} variants "
                        f"(fewer than {min_shared:.0%}); predictions would rest on imputed "
                        "means")
    return row, flip


def _new_covariates(bf, runs: list[dict], tables: SampleTables, pca,
                    min_shared: float) -> np.ndarray:
    """Raw covariates float64 (n_fam, K) of the people of ``bf`` in the runs' order (NaN
    where missing; (n_fam, 0) for runs without covariates), the PCs from ``tables``'
    .eigenvec or projected onto the saved PCA at prefix ``pca``. CmixError when
    --pca / --eigenvec is given to a run whose PCs do not come from a .eigenvec."""
    first = runs[0]["parts"]["predict"]
    eigenvec = tables.eigenvec
    spec = first.get("cov_spec") or {}
    if (pca or eigenvec) and not (spec.get("pcs") and spec.get("pcs_from") == "eigenvec"):
        raise CmixError(f"{runs[0]['dir']}: --pca / --eigenvec given, but the run's PCs do not "
                        "come from a .eigenvec (covariates pcs_from: "
                        f"{spec.get('pcs_from', '-')}, pcs: {spec.get('pcs', 0)}); leave them out")
    if pca is not None:
        eigenvec = _projected_pcs(bf, pca, min_shared, first.get("pca_sha256"), runs[0]["dir"])
    return _covariates(first, bf.fam, tables.pheno, tables.sample_qc, eigenvec)


def _ensemble_probabilities(runs: list[dict], x: np.ndarray, cov: np.ndarray,
                            where) -> np.ndarray:
    """Class probabilities float (n, C) averaged over the runs, for dosages x (n, M) (int8
    hard calls or float32 fractional, :func:`_dosages`) and raw covariates cov (n, K),
    standardised with the training moments. CmixError for fractional dosages and a run
    that encodes SNPs as categorical levels (``where``: the genotypes, for the message)."""
    first = runs[0]["parts"]["predict"]
    categorical = [str(r["dir"]) for r in runs
                   if r["parts"]["model"]["cfg"].get("encoding") == "categorical"]
    if x.dtype != np.int8 and categorical:
        raise CmixError(f"{where}: holds fractional dosages, which have no 0/1/2 levels "
                        f"for the categorical SNP encoding of {categorical[0]}; give hard "
                        "calls (--bfile or --pfile of the array calls)")
    cov_std = ((cov - np.asarray(first["cov_mu"])) / np.asarray(first["cov_sd"])
               if cov.shape[1] else np.zeros((len(x), 0)))
    return np.mean([_model_probabilities(r, x, cov_std) for r in runs], axis=0)


def _log_prediction(summary: dict, prefix) -> None:
    """Log what :func:`predict` did from its ``summary`` (``prefix``: the genotypes)."""
    n_shared, n_variants = summary["n_shared"], summary["n_variants"]
    log(f"predict: {summary['n_people']} people, {n_shared} of {n_variants} variants shared "
        f"({summary['n_flipped']} with swapped alleles), {n_variants - n_shared} absent and "
        f"given the training mean; {summary['n_runs']} run(s) averaged"
        + (f"; {summary['n_left_out_missing_covariate']} people miss a covariate and are "
           "left out" if summary["n_left_out_missing_covariate"] else "")
        + (f"; {summary['n_left_out_not_in_file']} people are not in {prefix} and are "
           "left out" if summary["n_left_out_not_in_file"] else ""))


def _training_overlap(info: dict, iids: np.ndarray) -> int:
    """How many of ``iids`` were training-split rows of the run's store."""
    path = Path(info["store_path"])
    if not path.exists():
        raise CmixError(f"{path}: the run's store is not there to check that the new people "
                        "were not its training rows; restore it, or pass --allow-overlap")
    root = open_store(path)
    if store_fingerprint(root) != info["store_sha256"]:
        raise CmixError(f"{path}: the store has changed since the run; cannot tell its "
                        "training rows (pass --allow-overlap to skip the check)")
    ids = np.array([str(v) for v in root["sample_id"][:]])
    train = ids[np.asarray(root["sample_split"][:]) == 0]
    return int(np.isin(iids, train).sum())


def _discovery_overlap(info: dict, iids: np.ndarray, allow_discovery: bool) -> int:
    """How many of ``iids`` are in the discovery set the run's store recorded (its
    ``discovery_id``; 0 for a store without one). A store that is gone or changed is a
    CmixError unless ``allow_discovery`` (then 0: nothing can be checked)."""
    path = Path(info["store_path"])
    if not path.exists():
        if allow_discovery:
            return 0
        raise CmixError(f"{path}: the run's store is not there to check that the new people "
                        "were not in its discovery set; restore it, or pass --allow-discovery")
    root = open_store(path)
    if store_fingerprint(root) != info["store_sha256"]:
        if allow_discovery:
            return 0
        raise CmixError(f"{path}: the store has changed since the run; cannot tell its "
                        "discovery set (pass --allow-discovery to skip the check)")
    if "discovery_id" not in root:
        return 0
    disc = np.array([str(v) for v in root["discovery_id"][:]])
    return int(np.isin(iids, disc).sum())


def _projected_pcs(bf, pca_prefix, min_shared: float, want: str | None,
                   run_dir) -> pd.DataFrame:
    """The people of ``bf`` projected onto a saved PCA: a table IID, PC1.. (.eigenvec's
    columns) for the covariates. The PCA must be the fit the run's PCs came from: its
    :func:`cmix.genotypes.pca.projection.pca_identity` equal to ``want``, the run's
    record."""
    model = read_pca_model(pca_prefix)
    if want is None:
        raise CmixError(f"{run_dir}: the run did not record which cmix pca fit its PCs came "
                        "from (its store was built from an .eigenvec without the "
                        ".eigenvec.allele, .acount and .eigenval beside it); give the new "
                        "people's PCs with --eigenvec instead of --pca")
    if pca_identity(pca_prefix) != want:
        raise CmixError(f"{pca_prefix}: not the PCA the run's PCs came from (its "
                        ".eigenvec.allele, .acount or .eigenval differ from those of the fit "
                        f"recorded by {run_dir}); the projected PCs would be on other axes: "
                        "give that fit's prefix")
    scores, counts = project_new_people(bf, model, min_shared=min_shared)
    log(f"predict: PCs projected onto {pca_prefix}'s axes: {counts['n_shared']} of its "
        f"{counts['n_variants']} variants shared ({counts['n_flipped']} with swapped alleles), "
        f"{counts['n_variants'] - counts['n_shared']} absent and taken at their mean")
    table = pd.DataFrame(scores, columns=model["pcs"])
    table.insert(0, "IID", bf.fam["iid"].astype(str).to_numpy())
    return table


def _covariates(info: dict, fam, pheno, sample_qc, eigenvec) -> np.ndarray:
    """Raw covariates (n_fam, K) of the new people in the run's order, or (n, 0)."""
    names = list(info["cov_names"])
    if not names:
        return np.zeros((len(fam), 0))
    if pheno is None and sample_qc is None and eigenvec is None:
        raise CmixError(f"the run was trained with covariates ({', '.join(names)}); supply "
                        "them with --pheno / --sample-qc / --eigenvec or --pca")

    got, values, _ = covariate_matrix(info["cov_spec"], fam, np.arange(len(fam)),
                                   pheno=read_phenotypes(pheno) if pheno else None,
                                   pheno_path=pheno, sample_qc=sample_qc, eigenvec=eigenvec)
    if got != names:
        raise CmixError(f"covariates {got} are not the run's {names}")
    return values
