"""A trait's own GWAS on a held-out discovery set of the cohort (plink2 ``--glm``).

Summary statistics from a GWAS that included the cohort's test people let those people's
phenotypes choose the SNPs and set the PRS weights, which makes every test metric
optimistic. The discovery route sets part of the cohort aside instead:

Discovery set (:func:`discovery_split`)
    Drawn among the candidate samples (the unrelated, QC-passing ones of the keep list)
    that have a phenotype for the trait (categorical: a listed code; continuous: a value
    not in ``missing_codes``) and every configured covariate. Stratified like the test
    split (categorical: by class; continuous: by decile of the raw value) and seeded:
    in each stratum ``round(n_stratum * fraction)`` samples
    (:func:`cmix.genotypes.phenotypes.test_split`). These people never enter the
    trait's store (``cmix store --discovery``); the store's test split is drawn among
    the rest.

GWAS phenotype (:func:`gwas_phenotype`)
    continuous: the raw measurement, linear regression. Categorical with 2 classes:
    logistic regression, the second class of ``classes`` the case (plink2 code 2), the
    first the control (1); ``firth-fallback``; a ``multiclass`` class name makes that
    class the case instead. Categorical with more than 2 classes has no single GWAS;
    the trait's ``multiclass`` setting must choose one, else the route is refused (and
    a continuous trait refuses any ``multiclass``):
    ``"class_index"``: linear regression of the class index (0, 1, ... in the order of
    ``classes``, written to plink2 as 1..K), sensible when the classes are ordered
    (what a GWAS of the UKB field's codes as a number does); a class name, e.g.
    ``"never"``: logistic regression of that class (case) against the other listed
    classes (control), e.g. never vs ever smoking ("smoking initiation").

Association (:func:`run_gwas`)
    plink2 ``--glm hide-covar no-x-sex`` (``firth-fallback`` for a binary phenotype;
    ``allow-no-covars`` without covariates) with ``--covar-variance-standardize``, run
    once per chromosome that holds a variant to test (one file per chromosome of a
    ``{chrom}`` pattern, else ``--chr`` on the one file set) on the discovery people,
    restricted to ``extract`` (the QC-passed SNPs) when given. ``no-x-sex``: every
    chromosome's model has the same covariates, the store's (plink2 would add the .fam
    sex on chrX, which stops it when sex is a covariate already). Covariates are those
    of the store (:func:`cmix.genotypes.covariates.covariate_matrix`: age, sex, PCs,
    ...). A measured phenotype goes to plink2 centred, and with ``--no-input-missing-phenotype``,
    so that plink2 neither reads a trait of values 0/1/2 as case/control nor a -9 value
    as missing: it tests exactly the people cmix chose, and a table of the other
    regression is refused.

Output: the per-chromosome results merged, in chromosome order, into one gzipped,
tab-separated table in the UK Biobank BOLT-LMM layout that ``cmix select`` reads
without options::

    SNP CHR BP ALLELE1 ALLELE0 A1FREQ INFO BETA SE P_BOLT_LMM

SNP, CHR, BP: plink2's ID, #CHROM, POS. ALLELE1 is plink2's A1 (the tested, counted
allele), ALLELE0 the variant's other allele; A1FREQ plink2's A1_FREQ among the people
tested; INFO 1 for hard calls, and for dosages (BGEN, a .pgen that may hold dosages)
plink2's MACH_R2 among the people tested, the imputation quality ``select
--min-info`` filters on when no mfi file is given. BETA and SE are the linear BETA
and SE, or for a binary phenotype the log odds ratio and its SE (plink2's
``cols=+beta``, printed by plink2: no re-rounding). P is plink2's P as printed. A test plink2 could not run (a variant
constant among the discovery people, a failed fit) is written with NA, which
``cmix select`` drops.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from ..atomic import atomic_outputs, file_sha256, scratch_folder
from ..errors import CmixError
from ..logs import log
from ..readers.chroms import chrom_code, chrom_mask
from ..readers.plink import write_sample_ids
from ..readers.sources import expand, is_pattern, may_hold_dosages
from ..text import write_gzip
from . import phenotypes as ph
from .selection import extract_mask, read_sample_ids, sample_rows


if TYPE_CHECKING:
    from ..readers.sources import GenotypeFiles
    from .covariates import SampleTables

BOLT_COLUMNS = ["SNP", "CHR", "BP", "ALLELE1", "ALLELE0", "A1FREQ", "INFO", "BETA", "SE",
                "P_BOLT_LMM"]
ENGINE = "plink2 --glm"


def ids_sha256(iids) -> str:
    """sha256 hex of the sorted IIDs (str) joined by newlines: identifies a sample set
    without listing it."""
    return hashlib.sha256("\n".join(sorted(str(i) for i in iids)).encode()).hexdigest()


def gwas_phenotype(pheno: pd.DataFrame, trait: str, config: dict, iids,
                   multiclass: str | None = None, path="") -> tuple[np.ndarray, bool, str]:
    """The GWAS phenotype of samples ``iids`` (see the module docstring).

    Returns (values float64 (n,), NaN = no phenotype; binary (bool): values are plink2
    case/control codes 1/2; a description of the phenotype for the log). Raises
    CmixError for a categorical trait of more than 2 classes without ``multiclass``, a
    ``multiclass`` that is neither "class_index" nor one of its classes, or any
    ``multiclass`` for a continuous trait.
    """
    kind = ph.check_trait_config(config, trait)
    column = ph.trait_column(pheno.columns, config, trait, path)
    path = path or pheno.attrs.get("path", "phenotype table")
    if kind == "continuous":
        values = ph.trait_values(pheno, column, iids, path, trait)
        if multiclass is not None:
            raise CmixError(f"trait {trait!r}: multiclass {multiclass!r} given for a "
                            "continuous trait; it chooses the GWAS of a categorical one")
        codes = [float(c) for c in config.get("missing_codes", [])]
        values[np.isin(values, codes)] = np.nan
        return values, False, f"{column} as measured (linear)"
    names = [str(c) for c in config["classes"]]
    label = ph.class_labels(pheno, column, config["classes"], iids, path, trait)[0].astype(float)
    label[label < 0] = np.nan
    if len(names) == 2 and multiclass is None:
        return label + 1, True, f"{names[1]} (case) vs {names[0]} (control), logistic"
    if multiclass is None:
        raise CmixError(f"trait {trait!r}: {len(names)} classes ({', '.join(names)}) have no "
                        "single GWAS; choose one (config discovery: multiclass: {TRAIT: ...}, or "
                        "`cmix gwas --multiclass`): 'class_index' (linear "
                        "regression on the class index, in the order of 'classes': for "
                        "ordered classes) or one class name (that class vs the other "
                        "classes, logistic)")
    if multiclass == "class_index":
        return label + 1, False, f"class index over {', '.join(names)} (linear)"
    if multiclass not in names:
        raise CmixError(f"trait {trait!r}: multiclass {multiclass!r} is neither 'class_index' "
                        f"nor one of its classes ({', '.join(names)})")
    k = names.index(multiclass)
    binary = np.where(np.isnan(label), np.nan, np.where(label == k, 2.0, 1.0))
    others = ", ".join(n for n in names if n != multiclass)
    return binary, True, f"{multiclass} (case) vs {others} (control), logistic"


#: The second word of the discovery draw's seed: a random stream of its own, never the
#: store's test split's (:func:`discovery_split`).
DISCOVERY_STREAM = 0xD15C0


def discovery_split(pheno: pd.DataFrame, trait: str, config: dict, iids, fraction: float,
                    seed: int, complete=None, path="") -> np.ndarray:
    """Positions (int64, sorted) into ``iids`` of the trait's discovery set.

    iids: the candidate samples (str (n,), e.g. the unrelated kept samples in .fam
    order); complete: bool (n,), samples with every covariate (default all). Drawn among
    the candidates with a phenotype and complete covariates, stratified by class
    (categorical) or by decile of the raw value (continuous), ``fraction`` of each
    stratum, seeded. The draw's random stream, ``default_rng([seed, DISCOVERY_STREAM])``,
    is apart from the store's test split's (``default_rng(split_seed)``,
    :func:`cmix.genotypes.phenotypes.test_split`): with equal seeds the two would be the
    same permutation, and the test split would fall inside the discovery set.
    """
    if not 0.0 < fraction < 1.0:
        raise CmixError(f"trait {trait!r}: discovery fraction must be in (0, 1), got {fraction}")
    kind = ph.check_trait_config(config, trait)
    column = ph.trait_column(pheno.columns, config, trait, path)
    iids = np.asarray(iids, dtype=str)
    path = path or pheno.attrs.get("path", "phenotype table")
    if kind == "categorical":
        strata = ph.class_labels(pheno, column, config["classes"], iids, path,
                                 trait)[0].astype(np.int64)
        ok = strata >= 0
    else:
        values = ph.trait_values(pheno, column, iids, path, trait)
        codes = [float(c) for c in config.get("missing_codes", [])]
        ok = np.isfinite(values) & ~np.isin(values, codes)
    if complete is not None:
        ok &= np.asarray(complete, dtype=bool)
    if kind != "categorical":    # deciles of the people drawn among, not of everyone
        strata = np.full(len(iids), -1, dtype=np.int64)
        strata[ok] = ph.continuous_strata(values[ok])
    has = np.flatnonzero(ok)
    if len(has) == 0:
        raise CmixError(f"{path}: trait {trait!r}: no candidate sample has a phenotype (and "
                        "every covariate) to draw a discovery set from")
    rng = np.random.default_rng([int(seed), DISCOVERY_STREAM])
    chosen = ph.stratified_draw(strata[has], fraction, rng)
    return has[chosen].astype(np.int64)


def find_plink2(plink2: str = "plink2") -> str:
    """The plink2 executable (a name on PATH or a path); CmixError naming it if absent."""
    found = shutil.which(plink2)
    if found is None:
        raise CmixError(f"{plink2}: not found; the discovery GWAS runs plink2 --glm. Install "
                        "plink2 (e.g. `conda install -c bioconda plink2`, as in "
                        "workflow/envs/cmix.yaml) or put it on PATH")
    return found


def _plink2(exe: str, args: list, out_prefix: Path, chrom: str) -> None:
    """Run plink2; on failure a CmixError naming the chromosome and quoting plink2's
    whole error paragraph (its "Error:" line and the lines up to the next blank one)."""
    res = subprocess.run([exe, *map(str, args), "--out", str(out_prefix)],
                         capture_output=True, text=True)
    if res.returncode != 0:
        logfile = Path(f"{out_prefix}.log")
        text = logfile.read_text() if logfile.exists() else res.stdout + res.stderr
        lines = text.splitlines()
        start = next((i for i, ln in enumerate(lines) if ln.startswith("Error")), None)
        if start is None:
            err = lines[-3:]
        else:
            end = next((i for i in range(start, len(lines)) if not lines[i].strip()), len(lines))
            err = lines[start:end]
        raise CmixError(f"plink2 --glm failed on chromosome {chrom} (exit {res.returncode}): "
                        f"{' '.join(ln.strip() for ln in err)}")


def _chrom_inputs(genotypes: GenotypeFiles, bim_chroms=()) -> list[tuple[str, list]]:
    """[(chrom, plink2 input arguments)] of one run per chromosome of ``bim_chroms``
    (the chromosome names that hold a variant to test): one per such file of a
    ``{chrom}`` pattern, else ``--chr`` on the one file set."""
    bfile, pfile, fam, bgen, sample, chroms = (
        genotypes.bfile, genotypes.pfile, genotypes.fam, genotypes.bgen, genotypes.sample,
        genotypes.chroms)

    if bgen is not None:
        def args(path, c):
            s = sample.replace("{chrom}", c) if sample and "{chrom}" in sample else sample
            return ["--bgen", path, "ref-first", "--sample", s]
        src = bgen
    elif pfile is not None:
        def args(path, c):
            return ["--pgen", f"{path}.pgen", "--pvar", f"{path}.pvar",
                    "--psam", fam or f"{path}.psam"]
        src = pfile
    else:
        def args(path, c):
            return ["--bed", f"{path}.bed", "--bim", f"{path}.bim", "--fam", fam or f"{path}.fam"]
        src = str(bfile)
        for ext in (".bed", ".bim", ".fam"):
            src = src[: -len(ext)] if src.endswith(ext) else src
    if is_pattern(src):
        having = {chrom_code(c) for c in bim_chroms}
        return [(c, args(p, c)) for c, p in expand(src, chroms) if chrom_code(c) in having]
    return [(c, args(src, c) + ["--chr", c]) for c in bim_chroms]


def _merge_glm(files: list[Path], binary: bool, n_people: int) -> pd.DataFrame:
    """plink2 .glm.linear / .glm.logistic.hybrid tables -> the BOLT-LMM layout (str cells).

    Refuses a table of the other regression than ``binary`` asks for, or one whose
    observation count (OBS_CT) at some variant exceeds the ``n_people`` cmix chose;
    returns the largest OBS_CT in ``attrs["max_obs"]`` (below n_people only when every
    variant has a missing call, or plink2 left people out)."""
    parts, max_obs = [], 0
    for f in files:
        if (".glm.logistic" in f.name) != binary:
            raise CmixError(f"{f}: plink2 ran {'logistic' if not binary else 'linear'} "
                            f"regression where cmix asked for "
                            f"{'logistic' if binary else 'linear'}; its phenotype was "
                            "read as another kind")
        t = pd.read_csv(f, sep="\t", dtype=str, keep_default_na=False)
        if "OBS_CT" in t.columns and len(t):
            obs = pd.to_numeric(t["OBS_CT"], errors="coerce")
            if (obs > n_people).any():
                raise CmixError(f"{f}: plink2 counted {int(obs.max())} people at a variant "
                                f"where cmix chose {n_people}")
            max_obs = max(max_obs, int(obs.max()) if obs.notna().any() else 0)
        t = t[t["TEST"] == "ADD"]
        beta = "BETA" if "BETA" in t.columns else None
        se = "SE" if "SE" in t.columns else "LOG(OR)_SE"
        if beta is None:
            raise CmixError(f"{f}: no BETA column in plink2's output (columns "
                            f"{', '.join(t.columns)})")
        other = np.where(t["A1"] == t["ALT"], t["REF"], t["ALT"])
        info = t["MACH_R2"] if "MACH_R2" in t.columns else "1"
        parts.append(pd.DataFrame({
            "SNP": t["ID"], "CHR": t["#CHROM"], "BP": t["POS"], "ALLELE1": t["A1"],
            "ALLELE0": other, "A1FREQ": t["A1_FREQ"], "INFO": info, "BETA": t[beta],
            "SE": t[se], "P_BOLT_LMM": t["P"]}))
    merged = (pd.concat(parts, ignore_index=True) if parts
              else pd.DataFrame(columns=BOLT_COLUMNS))
    merged.attrs["max_obs"] = max_obs
    return merged


def _glm_inputs(tmp: Path, fid: np.ndarray, iid: np.ndarray, y: np.ndarray,
                cov: np.ndarray, binary: bool, dosages: bool = False) -> tuple[list, list[str]]:
    """Write plink2's phenotype table ``tmp/pheno.tsv`` (#FID IID Y) and, with covariates
    (cov: (n, n_covariates), n = len(iid)), ``tmp/covar.tsv`` (COV1..), both at full
    precision. Returns (the --pheno/--covar arguments, the --glm words: hide-covar, A1
    frequency and beta columns, with ``dosages`` (fractional input) MaCH r2 too,
    firth-fallback for a binary trait, allow-no-covars without covariates).

    plink2 reads a phenotype whose values are all 0, 1 or 2 as case/control (0 =
    missing) and -9 as missing wherever it is: a measured trait is written centred (its
    mean subtracted: the same slopes, standard errors and p-values, and never all 0/1/2
    unless constant), and ``--no-input-missing-phenotype`` keeps a -9 in a trait or
    covariate a value (cmix has already made the trait's own missing codes NA)."""
    if not binary:
        y = y - np.nanmean(y)
    table = pd.DataFrame({"#FID": fid, "IID": iid, "Y": y})
    table.to_csv(tmp / "pheno.tsv", sep="\t", index=False, na_rep="NA", float_format="%.17g")
    glm = ["--glm", "hide-covar", "no-x-sex",
           "cols=+a1freq,+beta" + (",+machr2" if dosages else "")]
    glm += ["firth-fallback"] if binary else []
    args = ["--pheno", tmp / "pheno.tsv", "--pheno-name", "Y", "--no-input-missing-phenotype"]
    if cov.shape[1]:
        names = [f"COV{j + 1}" for j in range(cov.shape[1])]
        ctab = pd.DataFrame(cov, columns=names)
        ctab.insert(0, "IID", iid)
        ctab.insert(0, "#FID", fid)
        ctab.to_csv(tmp / "covar.tsv", sep="\t", index=False, float_format="%.17g")
        args += ["--covar", tmp / "covar.tsv", "--covar-variance-standardize"]
    else:
        glm.append("allow-no-covars")
    return args, glm


def _run_glm(exe: str, runs: list, args: list, tmp: Path) -> list[Path]:
    """Run plink2 once per (chromosome, genotype input arguments) of ``runs`` with the
    shared ``args``, output prefix ``tmp/chr<chrom>``. Returns the .glm tables written."""
    files = []
    for chrom, inputs in runs:
        prefix = tmp / f"chr{chrom}"
        _plink2(exe, inputs + args, prefix, chrom)
        found = sorted(tmp.glob(f"chr{chrom}.Y.glm.*"))
        files += [f for f in found if not f.name.endswith(".id")]
    return files


@dataclass(frozen=True)
class GwasModel:
    """What a GWAS regresses on what. trait: the trait's name (a column of the phenotype
    table); trait_config: its config, as for ``cmix store`` (kind, classes or missing
    codes); multiclass: the GWAS phenotype of a trait with more than 2 classes
    ("class_index" or one class name, :func:`gwas_phenotype`; None otherwise);
    covariates: the covariate config, as for ``cmix store`` (None = no covariates)."""

    trait: str
    trait_config: dict
    multiclass: str | None = None
    covariates: dict | None = None


@dataclass(frozen=True)
class GwasPeople:
    """Who a GWAS tests and where their IDs go. keep: the candidate samples (a plink
    --keep list; None = all); discovery_fraction: test only this stratified fraction of
    the candidates, drawn with ``discovery_seed`` (:func:`discovery_split`; None = all of
    them); ids_out: write the people tested there (a plink2 ``#FID IID`` list, the
    ``cmix store --discovery`` input; None = not written)."""

    keep: object = None
    discovery_fraction: float | None = None
    discovery_seed: int = 0
    ids_out: object = None


@dataclass(frozen=True)
class Plink2Run:
    """How plink2 runs: ``exe``, the executable's name on PATH or path; ``threads`` its
    --threads."""

    exe: str = "plink2"
    threads: int = 1


def run_gwas(out, genotypes: GenotypeFiles, model: GwasModel, tables: SampleTables, *,
             people: GwasPeople = GwasPeople(), extract=None,
             plink2: Plink2Run = Plink2Run()) -> dict:
    """GWAS of one trait with plink2 --glm, written to ``out`` (BOLT-LMM layout, gzipped).

    The people tested (:class:`GwasPeople`): its ``keep`` samples (default all) with a
    phenotype and every covariate; with its ``discovery_fraction``, only the trait's
    discovery set drawn among them (:func:`discovery_split`); their IDs are written to
    its ``ids_out``. ``genotypes`` as for ``cmix store`` (a .bed/.pgen
    prefix or ``{chrom}`` pattern with fam; or bgen + sample); ``model``: the trait and
    covariates; ``tables``: the phenotype table (``pheno``, required) and the sample QC
    table and .eigenvec the covariates may read; extract: QC-passed SNP list. Returns a
    summary (counts, the IDs' sha256; no IDs). The people's IDs and phenotypes go to
    plink2 through a scratch folder beside ``out`` (:func:`cmix.atomic.scratch_folder`),
    removed at the end; those a killed run left are removed by the next one. The
    summary statistics and the ID list appear together or not at all.
    """
    trait, ids_out, threads = model.trait, people.ids_out, plink2.threads
    exe = find_plink2(plink2.exe)
    bf = genotypes.open()
    sample_idx = (sample_rows(bf.fam, people.keep, step=f"gwas {trait}")[0]
                  if people.keep is not None else np.arange(bf.n_samples))
    bim_chrom = bf.bim["chrom"].astype(str)
    tested = chrom_mask(bim_chrom, genotypes.chroms)
    if extract is not None:   # a missing or empty list fails here, not in plink2
        tested &= extract_mask(bf.bim["variant_id"], extract, f"{bf.prefix} variants",
                               excluded=bf.excluded)[0]
    if not tested.any():
        raise CmixError(f"{bf.prefix}: no variant to test"
                        + (f" on --chroms {genotypes.chroms}" if genotypes.chroms else "")
                        + (f" among the {extract} list" if extract is not None else ""))
    # plink2 stops on a chromosome with no variant left: run only those with one
    bim_chroms = list(dict.fromkeys(bim_chrom[tested]))
    iids = bf.fam["iid"].astype(str).to_numpy()[sample_idx]
    chosen, y, binary, what, cov_names, cov = _tested_people(bf.fam, sample_idx, iids, model,
                                                             tables, people)
    fam_rows = sample_idx[chosen]
    fid = bf.fam["fid"].astype(str).to_numpy()[fam_rows]
    iid = iids[chosen]
    runs = _chrom_inputs(genotypes, bim_chroms)
    log(f"gwas {trait}: {len(chosen)} people, phenotype {what}, {len(cov_names)} covariates, "
        f"{len(runs)} chromosome run(s)")
    with scratch_folder(Path(out).parent, "cmix_gwas") as tmp:
        keep_file = tmp / "people.id"
        write_sample_ids(keep_file, bf.fam, fam_rows)
        pheno_args, glm = _glm_inputs(tmp, fid, iid, y[chosen], cov[chosen], binary,
                                      may_hold_dosages(bf))
        args = ["--keep", keep_file, *pheno_args]
        args += ["--extract", extract] if extract is not None else []
        args += [*glm, "--threads", threads]
        merged = _merge_glm(_run_glm(exe, runs, args, tmp), binary, len(chosen))
        outs = [Path(out)] + ([Path(ids_out), discovery_record_path(out)]
                              if ids_out is not None else [])
        with atomic_outputs(*outs) as tmps:
            write_gzip(tmps[0], merged[BOLT_COLUMNS].to_csv(sep="\t", index=False).encode())
            if ids_out is not None:
                write_sample_ids(tmps[1], bf.fam, np.sort(fam_rows))
                write_discovery_record(tmps[2], tmps[0], iid, bf.bim)
    n_na = int((merged["P_BOLT_LMM"].isin(["NA", "nan", ""])).sum())
    log(f"gwas {trait}: wrote {out} ({len(merged)} variants, {n_na} without a test; "
        f"at most {merged.attrs['max_obs']} of the {len(chosen)} people at a variant, "
        "the others' calls missing there)")
    return {"n_tested": int(len(chosen)), "n_variants": int(len(merged)), "n_na": n_na,
            "binary": bool(binary), "phenotype": what, "covariates": list(cov_names),
            "ids_sha256": ids_sha256(iid)}


def _tested_people(fam, sample_idx: np.ndarray, iids: np.ndarray, model: GwasModel,
                   tables: SampleTables, people: GwasPeople):
    """Who a GWAS tests, among the candidates ``sample_idx`` (fam rows; iids: their IIDs)
    and with what phenotype and covariates. Returns (chosen: int positions into
    sample_idx of the people tested, those with a phenotype and every covariate (within
    the discovery draw when there is one); y float64 (n_candidates,) the GWAS phenotype,
    NaN where missing; binary; what: the phenotype's description; the covariate names;
    cov float64 (n_candidates, n_covariates)). Raises CmixError for fewer than 2 people
    or a phenotype of one value among them."""
    trait, trait_config, pheno = model.trait, model.trait_config, tables.pheno
    pheno_table = ph.read_phenotypes(pheno)
    cov_names, cov = [], np.zeros((len(sample_idx), 0))
    if model.covariates:
        from .covariates import covariate_matrix

        cov_names, cov, _ = covariate_matrix(model.covariates, fam, sample_idx,
                                             pheno=pheno_table, pheno_path=pheno,
                                             sample_qc=tables.sample_qc,
                                             eigenvec=tables.eigenvec)
    complete = ~np.isnan(cov).any(axis=1)
    y, binary, what = gwas_phenotype(pheno_table, trait, trait_config, iids, model.multiclass,
                                     pheno)
    if people.discovery_fraction is not None:
        chosen = discovery_split(pheno_table, trait, trait_config, iids,
                                 people.discovery_fraction, people.discovery_seed, complete,
                                 pheno)
    else:
        chosen = np.flatnonzero(complete & np.isfinite(y))
    chosen = chosen[np.isfinite(y[chosen])]
    if len(chosen) < 2:
        raise CmixError(f"trait {trait!r}: {len(chosen)} sample(s) with a phenotype and every "
                        "covariate to run the GWAS on")
    if len(np.unique(y[chosen])) < 2:
        raise CmixError(f"trait {trait!r}: all {len(chosen)} people tested have the same "
                        f"phenotype ({what}); a GWAS needs two values")
    return chosen, y, binary, what, cov_names, cov


def discovery_record_path(sumstats) -> Path:
    """Where a discovery GWAS records whose summary statistics ``sumstats`` are:
    ``SUMSTATS.discovery.json`` beside them."""
    return Path(f"{sumstats}.discovery.json")


def variants_sha256(bim: pd.DataFrame) -> str:
    """sha256 of a genotype source's variant table (chromosome, ID, position and both
    alleles of every variant, in file order): the same for the same variants however
    they are stored, so a selection can tell that summary statistics were computed on
    the very genotypes it harmonises against."""
    rows = bim[["chrom", "variant_id", "pos", "a1", "a2"]].astype(str).agg("\t".join, axis=1)
    return hashlib.sha256("\n".join(rows).encode()).hexdigest()


def write_discovery_record(path, sumstats_written, iids, bim: pd.DataFrame) -> None:
    """Write the discovery record (:func:`discovery_record_path`): the sha256 of the
    summary statistics file ``sumstats_written``, the size and sha256 of the people
    ``iids`` it tested (no IDs) and the sha256 of the genotypes' variant table ``bim``
    (:func:`variants_sha256`)."""


    Path(path).write_text(json.dumps({
        "sumstats_sha256": file_sha256(sumstats_written), "n_discovery": int(len(iids)),
        "ids_sha256": ids_sha256(iids), "variants_sha256": variants_sha256(bim),
        "engine": ENGINE}, indent=1) + "\n")


def read_discovery_record(sumstats, sha256: str) -> dict | None:
    """The discovery record beside the summary statistics ``sumstats`` when there is one
    and it names these very bytes (``sha256``); None otherwise (external summary
    statistics, or a record of an earlier file of that name)."""
    path = discovery_record_path(sumstats)
    if not path.is_file():
        return None
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(record, dict) or record.get("sumstats_sha256") != sha256:
        return None
    return {k: record.get(k) for k in ("n_discovery", "ids_sha256", "variants_sha256")}


def snp_source(*, discovery=None, sumstats=None, overlap: str = "unknown",
               selection_source: dict | None = None) -> dict | None:
    """The store's ``provenance["snp_source"]``: discovery (the ``discovery`` ID list's size
    and sha256 of the sorted IIDs) or external (the ``sumstats`` file's name and whether
    its GWAS may include this cohort); None when neither is given. Both record the
    sha256 of the summary statistics the SNPs were selected from (``sumstats_sha256``)
    and whether they are a discovery GWAS of this cohort (``discovery_gwas``), from
    ``selection_source`` (what ``cmix select`` recorded,
    :func:`cmix.genotypes.sumstats.selection_files.read_selection_source`). CmixError when the route
    contradicts the selection: ``discovery`` people whose GWAS did not give the
    selection's summary statistics, or a ``sumstats`` file other than the one selected
    from."""
    src = selection_source
    if discovery is not None:
        iids = read_sample_ids(discovery)["iid"]
        disc_sha = ids_sha256(iids)
        if src is None:
            raise CmixError(f"--discovery {discovery}: the SNP table does not record which "
                            "summary statistics it was selected from (no .source.json "
                            "beside it): rerun `cmix select` on the discovery GWAS")
        if (src.get("discovery_gwas") or {}).get("ids_sha256") != disc_sha:
            raise CmixError(f"--discovery {discovery}: the SNPs were selected from "
                            f"{src['sumstats']} (sha256 {src['sha256'][:12]}...), which is not "
                            "the GWAS of these discovery people (cmix gwas --ids-out wrote no "
                            "record of them for that file); for external summary statistics "
                            f"give --sumstats {src['sumstats']} instead")
        return {"kind": "discovery", "n_discovery": int(len(iids)), "ids_sha256": disc_sha,
                "engine": ENGINE, "sumstats_sha256": src["sha256"], "discovery_gwas": True}
    if sumstats is not None:
        if overlap not in ("yes", "no", "unknown"):
            raise CmixError(f"overlap must be yes, no or unknown, got {overlap!r}")
        sha = file_sha256(sumstats)
        if src is not None and src["sha256"] != sha:
            raise CmixError(f"--sumstats {sumstats}: the SNPs were selected from "
                            f"{src['sumstats']} (sha256 {src['sha256'][:12]}...), not from this "
                            f"file (sha256 {sha[:12]}...); give the file they were selected "
                            "from")
        _refuse_own_discovery_gwas(src, f"--sumstats {sumstats}")
        return {"kind": "external", "file": os.path.basename(str(sumstats)), "overlap": overlap,
                "sumstats_sha256": sha, "discovery_gwas": False}
    _refuse_own_discovery_gwas(src, "no --discovery")
    return None


def _refuse_own_discovery_gwas(src: dict | None, given: str) -> None:
    """CmixError when the selection record ``src`` says its SNPs came from cmix's
    discovery GWAS of this cohort: the store must leave those people out (--discovery)."""
    gwas = (src or {}).get("discovery_gwas")
    if gwas:
        raise CmixError(f"{given}: the SNPs were selected from {src['sumstats']}, cmix's "
                        f"discovery GWAS of {gwas.get('n_discovery')} people of this cohort "
                        "(its record beside that file); give --discovery with that GWAS's "
                        "--ids-out list, so those people are left out of the store and its "
                        "test split")
