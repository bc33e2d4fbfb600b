"""Building a trait's store from genotype files: the selected SNPs matched to the
source, the kept and labeled samples, their covariates, the effect-allele dosages
(hard calls or quantised expected copies) and the provenance attributes, written with
:func:`cmix.store.write.write_store`."""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

import dask
import dask.array as da
import numpy as np
import pandas as pd
import zarr

from ..atomic import file_sha256
from ..errors import CmixError
from ..logs import log
from ..readers.chroms import chrom_mask, chrom_text
from ..readers.plink import decode
from ..readers.sources import FRACTIONAL, HARD_CALLS, GenotypeFiles, expand, is_pattern
from ..readers.usable import refuse_excluded
from ..store.read import is_cmix_store
from ..store.schema import default_sample_chunk, hard_call_codes, quantise_dosage
from ..store.write import StoreContent, write_store
from . import phenotypes as ph
from .covariates import covariate_matrix
from .pca.projection import pca_identity
from .selection import listed_rows, read_sample_ids, sample_rows
from .sumstats.selection_files import read_selection

#: How many 1 MiB blocks, evenly spaced from the first to the last, identify a genotype file.
FINGERPRINT_BLOCKS = 64


def bed_fingerprint(path: str | os.PathLike) -> dict:
    """An identity of a (possibly 100+ GB) genotype file by its content alone: its size
    and the sha256 of :data:`FINGERPRINT_BLOCKS` 1 MiB blocks spread evenly over it,
    first and last included (the whole file when it is smaller), about 0.1 s a file.
    A copy of the file, or the same file written again, has the same identity; its
    modification time does not enter."""
    path = Path(path)
    size = path.stat().st_size
    block = 1 << 20
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        if size <= FINGERPRINT_BLOCKS * block:
            for chunk in iter(lambda: fh.read(block), b""):
                h.update(chunk)
        else:
            step = (size - block) / (FINGERPRINT_BLOCKS - 1)
            for i in range(FINGERPRINT_BLOCKS):
                fh.seek(int(round(i * step)))
                h.update(fh.read(block))
    return {"size": size, "sha256_sampled_mib": h.hexdigest(), "blocks": FINGERPRINT_BLOCKS}


def effect_dosage_dask(bf, variant_idx, sample_idx, count_a2, sample_chunk: int):
    """Lazy dosages of the effect allele: dask int8 (n_samples, n_variants), -1 missing.

    bf: an opened hard-call source (:class:`cmix.readers.sources.PackedSource`); variant_idx:
    .bim rows (n_variants,); sample_idx: .fam rows (n_samples,), in output order;
    count_a2: bool (n_variants,), True where the effect allele is the .bim A2 (dosage =
    2 - A1 count). The packed bytes of the selected variants are read once (n_variants
    x n_fam / 4 bytes); each chunk of ``sample_chunk`` samples is decoded and
    transposed on its own.
    """


    variant_idx = np.asarray(variant_idx, dtype=np.int64)
    sample_idx = np.asarray(sample_idx, dtype=np.int64)
    count_a2 = np.asarray(count_a2, dtype=bool)
    packed = bf.packed_rows(variant_idx)
    n = len(sample_idx)
    starts = list(range(0, n, sample_chunk)) or [0]

    def block(start):
        rows = sample_idx[start:start + sample_chunk]
        a1 = decode(packed, rows).T  # (rows, variants)
        return np.where(count_a2[None, :] & (a1 >= 0), 2 - a1, a1).astype(np.int8)


    blocks = [da.from_delayed(dask.delayed(block)(s), shape=(min(sample_chunk, n - s),
                                                             len(variant_idx)), dtype=np.int8)
              for s in starts]
    return da.concatenate(blocks, axis=0) if blocks else da.zeros((0, len(variant_idx)), np.int8)


#: variants decoded at once for a fractional store (bounds the float32 block in memory)
FRACTIONAL_VARIANT_BLOCK = 64


def effect_dosage_fractional(src, variant_idx, sample_idx, count_a2) -> np.ndarray:
    """Fractional dosages of the effect allele, quantised: uint8 (n_samples, n_variants)
    codes of :func:`quantise_dosage`. src: a :class:`cmix.readers.sources.GenotypeSource`;
    count_a2 as in :func:`effect_dosage_dask`. Read :data:`FRACTIONAL_VARIANT_BLOCK`
    variants at a time, so memory is the uint8 result plus one float32 block.
    """
    variant_idx = np.asarray(variant_idx, dtype=np.int64)
    sample_idx = np.asarray(sample_idx, dtype=np.int64)
    out = np.empty((len(sample_idx), len(variant_idx)), np.uint8)
    for s in range(0, len(variant_idx), FRACTIONAL_VARIANT_BLOCK):
        e = min(s + FRACTIONAL_VARIANT_BLOCK, len(variant_idx))
        d = src.read_dosages(variant_idx[s:e], sample_idx)          # (v, n) A1 copies
        d = np.where(np.asarray(count_a2[s:e])[:, None], 2.0 - d, d)
        out[:, s:e] = quantise_dosage(d).T
    return out


def _input_checksums(src, extra_files) -> dict:
    """{file name: sha256} of the small inputs, {file name: bed_fingerprint} of large
    genotype files (.bed, .pgen, .bgen, .bgi: size and 64 evenly spaced MiB),
    as the source lists them (``input_files``)."""
    checksums = {Path(f).name: file_sha256(f) for f in extra_files if f is not None}
    for f, how in src.input_files().items():
        checksums[Path(f).name] = bed_fingerprint(f) if how == "fingerprint" else file_sha256(f)
    return checksums


@dataclass(frozen=True, kw_only=True)
class StoreInputs:
    """The trait's inputs of a store.

    snps: path of the selected-SNP table
    (:func:`cmix.genotypes.sumstats.selection_files.write_selection`);
    pheno: phenotype table path; trait: trait name; trait_config: see
    :mod:`cmix.genotypes.phenotypes`; snp_source: where the SNPs and betas came from
    (:func:`cmix.genotypes.gwas.snp_source`), recorded as attrs["provenance"]["snp_source"]
    (None: not recorded).
    """
    snps: object
    pheno: object
    trait: str
    trait_config: dict
    snp_source: dict | None = None


@dataclass(frozen=True, kw_only=True)
class StoreSamples:
    """Which samples enter a store and what is stored beside their dosages.

    keep: plink sample list (e.g. unrelated.id), None: every .fam sample; discovery: the
    trait's discovery-set ID list, whose people are left out; covariates: covariate spec
    (:mod:`cmix.genotypes.covariates`), samples missing one are left out; sample_qc,
    eigenvec: the tables the covariates' PCs may come from; sample_filters: which sample
    filters made ``keep`` (:func:`cmix.genotypes.samples.read_filters_summary`), recorded
    as attrs["provenance"]["sample_filters"].
    """
    keep: object = None
    discovery: object = None
    covariates: dict | None = None
    sample_qc: object = None
    eigenvec: object = None
    sample_filters: dict | None = None


@dataclass(frozen=True, kw_only=True)
class StoreOptions:
    """How a store is split and written: test_fraction of the labeled samples in the test
    split, drawn with split_seed; force: replace an existing store; sample_chunk: rows per
    call_dosage chunk (None: :func:`default_sample_chunk`)."""
    test_fraction: float = 0.2
    split_seed: int = 0
    force: bool = False
    sample_chunk: int | None = None


def build_store(out, genotypes: GenotypeFiles, inputs: StoreInputs,
                samples: StoreSamples = StoreSamples(),
                options: StoreOptions = StoreOptions()) -> dict:
    """Write the trait's store from genotypes, a `cmix select` table and a phenotype table.

    genotypes: a :class:`cmix.readers.sources.GenotypeFiles`: ``bfile`` or ``pfile``
    (a prefix or ``{chrom}`` pattern, shared ``fam``), or ``bgen`` (+ its ``sample``
    file, either a ``{chrom}`` pattern; ``fam`` gives the target samples, default the
    .sample's; ``chroms``: only these chromosomes, a --chroms spec: a pattern's files,
    default 1-22; every selected SNP must lie on them). A .bed gives hard calls (int8); a
    .bgen, or a .pgen holding dosages, gives a fractional store
    (:data:`DOSAGE_ENCODINGS`), each SNP read from its own chromosome's file (BGEN
    through the .bgi: only the selected SNPs are decoded). inputs, samples, options:
    :class:`StoreInputs`, :class:`StoreSamples`, :class:`StoreOptions`. The samples are
    the kept samples with a label, in .fam order; the dosage counts each SNP's
    ``effect_allele`` (the .bim A1 count, or 2 minus it where the effect allele is the
    .bim A2). An existing ``out`` is an error unless ``options.force``. Checksums in
    attrs["input_checksums"]: sha256 of the SNP table and the phenotype table, sha256 of
    the .bim and .fam, and for the .bed its size and a sha256 of 64 evenly spaced MiB
    (see :func:`bed_fingerprint`; by content: a copy has the same). Returns a summary dict (counts, no IDs).
    """
    out = Path(out)
    _check_output(out, options.force)
    snp_table = _read_snp_table(inputs.snps, genotypes.chroms)
    bf = genotypes.open(positions=_selected_positions(snp_table)
                        if genotypes.bgen is not None else None)
    bim_pos, count_a2 = _match_snps_to_source(snp_table, bf, inputs.snps)
    sample_idx, counts = _kept_sample_rows(bf, samples, inputs.trait)
    pheno_table = ph.read_phenotypes(inputs.pheno)
    sample_idx, covariates = _sample_covariates(bf, sample_idx, samples, pheno_table,
                                                inputs, counts)
    labels = ph.label_trait(pheno_table, inputs.trait, inputs.trait_config,
                            bf.fam["iid"].to_numpy()[sample_idx], options.test_fraction,
                            options.split_seed, path=inputs.pheno)
    rows = sample_idx[labels["keep"]]
    covariates = _stored_covariates(bf, rows, labels["keep"], samples, pheno_table, inputs,
                                    covariates)
    n_variants = len(bim_pos)
    chunk = options.sample_chunk or default_sample_chunk(n_variants)
    log(f"store {inputs.trait}: {len(rows)} labeled samples (of {len(sample_idx)} kept: "
        f"{label_steps(labels)}) x {n_variants} SNPs, {int(count_a2.sum())} counting the "
        ".bim A2")
    dosage, encoding, source = _effect_dosages(bf, bim_pos, rows, count_a2, chunk)
    attrs = _build_attrs(inputs, samples, options, labels, covariates, counts, {
        "dosage_source": source,
        "variants": int(n_variants),
        "variants_effect_is_bim_a2": int(count_a2.sum()),
        "input_checksums": _input_checksums(bf, [inputs.snps, inputs.pheno, samples.keep,
                                                 genotypes.fam, samples.discovery,
                                                 *_sample_files(genotypes)])})
    write_store(out, StoreContent(
        dosage=dosage, sample_id=bf.fam["iid"].to_numpy()[rows],
        sample_label=labels["label"], sample_split=labels["split"],
        sample_phenotype=labels["phenotype"],
        sample_covariate=covariates["matrix"],
        covariate_name=covariates["names"], attrs=attrs,
        discovery_id=(None if samples.discovery is None
                      else read_sample_ids(samples.discovery)["iid"].astype(str).to_numpy()),
        **_variant_arrays(snp_table, bf, bim_pos, genotypes.bgen is not None)),
        sample_chunk=chunk, encoding=encoding)
    return {"n_samples": int(len(rows)), "n_variants": int(n_variants), **attrs["counts"]}


def label_steps(labels: dict) -> str:
    """Where the kept samples without a label went, from label_trait's counts: e.g.
    "3290 in the phenotype table, 3177 with a listed code in column '1747-0.0'"."""
    c, column = labels["counts"], labels["column"]
    steps = [f"{c['in_phenotype_table']} in the phenotype table"]
    if "with_a_listed_code" in c:
        steps.append(f"{c['with_a_listed_code']} with a listed code in column {column!r}")
    else:
        steps.append(f"{c['with_a_value']} with a value in column {column!r} (not blank, "
                     "not a missing code)")
        if c["after_binarising"] != c["with_a_value"]:
            steps.append(f"{c['after_binarising']} outside the binarising gap")
    return ", ".join(steps)


def _variant_arrays(snp_table, bf, bim_pos, from_bgen: bool) -> dict:
    """The per-variant fields of :class:`StoreContent` for the selected SNPs (table
    order), their contig and position from the source. variant_bim_index: the
    selection table's bim_index for a BGEN (where the table has one), else the SNP's row
    in the source."""
    n_variants = len(bim_pos)
    effect = snp_table["effect_allele"].astype(str).to_numpy()
    other = snp_table["other_allele"].astype(str).to_numpy()
    return {
        "variant_id": snp_table["variant_id"].astype(str).to_numpy(),
        "variant_contig": bf.bim["chrom"].to_numpy()[bim_pos],
        "variant_position": bf.bim["pos"].to_numpy()[bim_pos],
        "variant_allele": np.stack([other, effect], axis=1),
        "variant_beta": snp_table["beta"].to_numpy(dtype=float),
        "variant_log10_p": (snp_table["log10_p"].to_numpy(dtype=float)
                            if "log10_p" in snp_table else np.full(n_variants, np.nan)),
        "variant_bim_index": (snp_table["bim_index"].to_numpy()
                              if from_bgen and "bim_index" in snp_table else bim_pos),
    }


def _check_output(out: Path, force: bool) -> None:
    """Refuse an existing ``out`` without ``force``, and anything but a cmix store with it."""
    if out.exists() and not force:
        raise CmixError(f"{out}: already exists; remove it or pass --force to overwrite")
    if out.exists() and not is_cmix_store(out):
        raise CmixError(f"{out}: exists and is not a cmix store; --force replaces only a "
                        "cmix store, so remove it yourself or choose another --out")
    if out.exists():
        foreign = _files_not_of_the_store(out)
        if foreign:
            raise CmixError(f"{out}: holds {len(foreign)} file(s) that are not the store's "
                            f"(e.g. {foreign[0]}); --force replaces the whole folder, so "
                            "move them out first or choose another --out")


def _files_not_of_the_store(path: Path) -> list[str]:
    """The files under the store folder ``path`` (relative, sorted) that are not the
    store's own: neither in its checksum list nor its group and array metadata."""
    try:
        listed = set(zarr.open_group(str(path), mode="r", zarr_format=2)
                     .attrs.get("checksums", {}).get("files", {}))
    except Exception:       # noqa: BLE001 - an unreadable store lists nothing as its own
        listed = set()
    meta = {".zgroup", ".zattrs", ".zarray", ".zmetadata"}
    return sorted(rel for f in path.rglob("*") if f.is_file() or f.is_symlink()
                  for rel in [f.relative_to(path).as_posix()]
                  if rel not in listed and f.name not in meta)


def _read_snp_table(snps, chroms):
    """The selected-SNP table
    (:func:`cmix.genotypes.sumstats.selection_files.read_selection`); raises CmixError
    naming the line of the first SNP outside ``chroms``."""
    snp_table = read_selection(snps)
    off_chroms = ~chrom_mask(snp_table["chrom"].astype(str), chroms)
    if off_chroms.any():
        i = int(np.flatnonzero(off_chroms)[0])
        raise CmixError(f"{snps}, line {i + 2}: variant {snp_table['variant_id'].iloc[i]!r} is "
                        f"on chromosome {snp_table['chrom'].iloc[i]}, outside --chroms "
                        f"{chrom_text(chroms)} ({int(off_chroms.sum())} such variants)")
    return snp_table


def _selected_positions(snp_table) -> dict:
    """{chromosome name: bp positions (int, n_snps_on_it)} of the selected SNPs: the
    only variants a BGEN's .bgi indexes are asked to list."""
    return {str(c): g["pos"].to_numpy()
            for c, g in snp_table.assign(chrom=snp_table["chrom"].astype(str)).groupby("chrom")}


def _match_snps_to_source(snp_table, bf, snps) -> tuple[np.ndarray, np.ndarray]:
    """Each selected SNP's row in the source's variants and whether its effect allele
    is the .bim A2: (int64 (n_variants,), bool (n_variants,)). Raises CmixError naming
    the table line of the first SNP not in the source or whose alleles differ."""


    bim_pos = pd.Index(bf.bim["variant_id"].astype(str)).get_indexer(
        snp_table["variant_id"].astype(str))
    if (bim_pos < 0).any():
        absent = np.flatnonzero(bim_pos < 0)
        refuse_excluded(bf.excluded, str(snps), ids=snp_table["variant_id"].iloc[absent],
                        chrom=snp_table["chrom"].iloc[absent], pos=snp_table["pos"].iloc[absent],
                        lines=absent + 2)
        i = int(absent[0])
        raise CmixError(f"{snps}, line {i + 2}: variant {snp_table['variant_id'].iloc[i]!r} is "
                        f"not in the variants of {bf.prefix} (was the selection made on other "
                        "genotype files?)")
    a1 = bf.bim["a1"].to_numpy()[bim_pos]
    a2 = bf.bim["a2"].to_numpy()[bim_pos]
    effect = snp_table["effect_allele"].astype(str).to_numpy()
    other = snp_table["other_allele"].astype(str).to_numpy()
    count_a2 = (effect == a2) & (other == a1)
    wrong = ~(((effect == a1) & (other == a2)) | count_a2)
    if wrong.any():
        i = int(np.flatnonzero(wrong)[0])
        raise CmixError(f"{snps}, line {i + 2}: alleles {effect[i]}/{other[i]} of "
                        f"{snp_table['variant_id'].iloc[i]!r} are not the .bim's {a1[i]}/{a2[i]}")
    return bim_pos, count_a2


def _kept_sample_rows(bf, samples: StoreSamples, trait: str) -> tuple[np.ndarray, dict]:
    """.fam rows (int64, in .fam order) of the kept samples that are neither in the
    discovery set nor absent from a BGEN's .sample, and the counts of those left out:
    {"kept_not_in_fam", "kept_not_in_bgen", "discovery_left_out"}."""


    if samples.keep is not None:
        sample_idx, n_unknown = sample_rows(bf.fam, samples.keep, step=f"store {trait}")
    else:
        sample_idx, n_unknown = np.arange(bf.n_samples), 0
    n_discovery_left_out = 0
    if samples.discovery is not None:   # the discovery GWAS's people never enter the store
        disc = read_sample_ids(samples.discovery)
        if len(disc) == 0:
            raise CmixError(f"{samples.discovery}: no sample IDs in the discovery list "
                            "(cmix gwas --ids-out writes the people its GWAS tested)")
        disc_rows, known = listed_rows(disc, bf.fam)
        n_unmatched = int((~known).sum())
        if n_unmatched:     # unrecognised GWAS people would enter the store, test split too
            raise CmixError(f"{samples.discovery}: {n_unmatched} of its {len(disc)} discovery "
                            "IDs are not in the sample file (FID/IID written otherwise, or "
                            "another cohort); the GWAS's people must be recognised to be "
                            "left out of the store")
        in_disc = np.isin(sample_idx, disc_rows)
        n_discovery_left_out = int(in_disc.sum())
        sample_idx = sample_idx[~in_disc]
        log(f"store {trait}: {n_discovery_left_out} kept samples are in the discovery set; "
            "left out")
    in_file = bf.samples_present()[sample_idx]    # a BGEN's .sample may lack kept samples
    n_not_in_bgen = int((~in_file).sum())
    if n_not_in_bgen:
        log(f"store {trait}: {n_not_in_bgen} kept samples are not in the BGEN .sample "
            "file; left out")
    return sample_idx[in_file], {"kept_not_in_fam": int(n_unknown),
                                 "kept_not_in_bgen": n_not_in_bgen,
                                 "discovery_left_out": n_discovery_left_out}


def _sample_covariates(bf, sample_idx, samples: StoreSamples, pheno_table, inputs: StoreInputs,
                       counts: dict) -> tuple[np.ndarray, dict]:
    """The samples of ``sample_idx`` with every covariate, and their covariates:
    {"names", "matrix" (float64 (n_samples, n_covariates), None without a spec),
    "spec" (as checked by covariate_matrix), "pca_sha256" (the cmix pca fit eigenvec PCs
    came from, else None)}. Adds "left_out_missing_covariate" to ``counts``."""
    covariates = samples.covariates
    names, matrix, n_missing_cov, pca_sha256 = [], None, 0, None
    if covariates and covariates.get("pcs") and covariates.get("pcs_from") == "eigenvec" \
            and samples.eigenvec is not None:      # which cmix pca fit the PCs came from

        pca_sha256 = pca_identity(samples.eigenvec)
    if covariates:

        names, matrix, covariates = covariate_matrix(
            covariates, bf.fam, sample_idx, pheno=pheno_table, pheno_path=inputs.pheno,
            sample_qc=samples.sample_qc, eigenvec=samples.eigenvec)
        complete = ~np.isnan(matrix).any(axis=1)
        n_missing_cov = int((~complete).sum())
        sample_idx, matrix = sample_idx[complete], matrix[complete]
        if n_missing_cov:
            log(f"store {inputs.trait}: {n_missing_cov} kept samples miss a covariate and "
                "are left out")
    counts["left_out_missing_covariate"] = n_missing_cov
    return sample_idx, {"names": names, "matrix": matrix, "spec": covariates,
                        "pca_sha256": pca_sha256}


def _stored_covariates(bf, rows, keep, samples: StoreSamples, pheno_table,
                       inputs: StoreInputs, covariates: dict) -> dict:
    """:func:`_sample_covariates`' result for the stored samples ``rows`` (the labeled
    ones, ``keep`` (n_kept,) bool of the kept samples): the matrix's rows of those
    samples. A batch covariate is made again on them alone, so that its levels and
    reference level are the stored samples' (a batch of kept but unlabeled people only
    would otherwise be a level of all-zero column that ``cmix predict`` accepts)."""
    if covariates["matrix"] is None:
        return covariates
    if not covariates["spec"].get("batch"):
        return {**covariates, "matrix": covariates["matrix"][keep]}

    names, matrix, spec = covariate_matrix(
        samples.covariates, bf.fam, rows, pheno=pheno_table, pheno_path=inputs.pheno,
        sample_qc=samples.sample_qc, eigenvec=samples.eigenvec)
    return {**covariates, "names": names, "matrix": matrix, "spec": spec}


def _effect_dosages(bf, bim_pos, rows, count_a2, chunk: int):
    """(dosage (len(rows), n_variants), encoding, dosage source text): a lazy int8 dask
    array from hard calls; from dosages, uint8 fractional codes, or int8 hard calls when
    every dosage is a whole number of copies (a .pgen of hard calls only)."""
    encoding, source = "hard calls", f"{bf.file_format} hard calls"
    if bf.encoding == HARD_CALLS:
        return effect_dosage_dask(bf, bim_pos, rows, count_a2, chunk), encoding, source
    codes = effect_dosage_fractional(bf, bim_pos, rows, count_a2)
    dosage = None if bf.encoding == FRACTIONAL else hard_call_codes(codes)
    if dosage is None:
        encoding, dosage = "fractional", codes
        source = f"{bf.file_format} " + ("genotype probabilities (expected copies)"
                                         if bf.encoding == FRACTIONAL else "dosages")
    return dosage, encoding, source


def _sample_files(genotypes: GenotypeFiles) -> list:
    """The BGEN .sample file(s) of ``genotypes`` (each once), [] without one."""
    if genotypes.sample is None:
        return []
    files = ([p for _, p in expand(genotypes.sample, genotypes.chroms)]
             if is_pattern(genotypes.sample) else [genotypes.sample])
    return list(dict.fromkeys(files))


def _build_attrs(inputs: StoreInputs, samples: StoreSamples, options: StoreOptions, labels: dict,
                 covariates: dict, counts: dict, written: dict) -> dict:
    """The store's group attributes (see the module doc). labels: of
    :func:`cmix.genotypes.phenotypes.label_trait`; covariates: of
    :func:`_sample_covariates`; counts: samples left out at each step; written: the
    dosage source, variant counts and input checksums."""
    kind = inputs.trait_config.get("kind")
    attrs = {
        "dosage_source": written["dosage_source"],
        "trait": inputs.trait,
        "class_names": labels["class_names"],
        "trait_config": inputs.trait_config,
        "phenotype_column": labels["column"],
        "thresholds": labels["thresholds"],
        "split": {"seed": int(options.split_seed), "test_fraction": float(options.test_fraction),
                  "stratified_by": ("class" if kind == "categorical"
                                    else f"{ph.N_CONTINUOUS_STRATA} quantile bins of the "
                                         "raw value")},
        "covariates": {"spec": covariates["spec"] or {}, "names": list(covariates["names"]),
                       "pca_sha256": covariates["pca_sha256"],
                       "missing_rule": "samples missing a covariate are left out"},
        "counts": {**labels["counts"], "kept_not_in_fam": counts["kept_not_in_fam"],
                   "left_out_missing_covariate": counts["left_out_missing_covariate"],
                   "kept_not_in_bgen": counts["kept_not_in_bgen"],
                   "discovery_left_out": counts["discovery_left_out"],
                   "variants": written["variants"],
                   "variants_effect_is_bim_a2": written["variants_effect_is_bim_a2"]},
        "input_checksums": written["input_checksums"],
    }
    if inputs.snp_source is not None:
        attrs.setdefault("provenance", {})["snp_source"] = inputs.snp_source
    if samples.sample_filters is not None:
        attrs.setdefault("provenance", {})["sample_filters"] = samples.sample_filters
    return attrs
