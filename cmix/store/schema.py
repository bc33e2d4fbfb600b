"""The per-trait Zarr dosage store's schema: its arrays, attributes and dosage encodings.

One store per trait holds the labeled samples' dosages for the trait's selected SNPs.
It is Zarr format 2 (the format of the VCF Zarr spec, readable by sgkit/xarray), with
VCF Zarr names where they apply. Schema (dims in brackets):

===================  ====================  =====  =============================================
array                dims                  dtype  meaning
===================  ====================  =====  =============================================
call_dosage          (samples, variants)   int8   copies of the effect allele, -1 missing.
                                                  Sample-major (a documented transpose of VCF
                                                  Zarr) so a batch of rows is one chunk read.
                                           uint8  fractional stores (BGEN, dosage .pgen):
                                                  expected copies x 125 rounded, 0..250;
                                                  255 missing (attrs["dosage_encoding"])
sample_id            (samples,)            str    .fam IID
sample_label         (samples,)            int16  class index into attrs["class_names"]
sample_phenotype     (samples,)            f8     raw phenotype value (code or measurement)
sample_split         (samples,)            int8   0 = training split, 1 = test split
sample_covariate     (samples, covariates) f8     covariates (cmix.genotypes.covariates), no missing
covariate_name       (covariates,)         str    their names (age column, PC1, ...)
discovery_id         (discovery,)          str    IIDs of the discovery GWAS's people (left out
                                                  of the store; only with ``--discovery``),
                                                  sorted: cmix predict refuses them
variant_id           (variants,)           str    .bim/.pvar ID (BGEN: rsid)
contig_id            (contigs,)            str    chromosome names
variant_contig       (variants,)           int16  index into contig_id
variant_position     (variants,)           int64  bp position
variant_allele       (variants, alleles)   str    [other allele, effect allele]: the dosage
                                                  counts allele 1, as VCF Zarr's ALT
variant_beta         (variants,)           f8     summary-statistic effect of the effect allele
variant_log10_p      (variants,)           f8     log10 of the summary-statistic p-value
variant_bim_index    (variants,)           int64  row of the variant in the source .bim (of
                                                  the chromosome set's files in order)
===================  ====================  =====  =============================================

Group attributes: ``cmix_store_version`` (2), ``trait`` (name), ``class_names`` (list),
``trait_config`` (dict), ``split`` ({"seed", "test_fraction", "stratified_by"}),
``input_checksums`` (file name -> sha256 of the inputs; for the .bed/.pgen/.bgen/.bgi,
whose full hash would take minutes at UKB size, {"size", "sha256_sampled_mib", "blocks"}:
the sha256 of 64 evenly spaced MiB, :func:`bed_fingerprint`),
``checksums`` ({"algorithm": "sha256", "files": {relative path: [size, sha256]}} of every
array file: chunks and .zarray metadata), ``complete`` (True, written last). Stores written by :func:`build_store` also hold
``phenotype_column`` (the table column used), ``thresholds`` (continuous traits:
[low_max, high_min], computed on the training split; null for categorical ones) and
``counts`` (samples and SNPs at each step, no IDs), ``provenance`` ({"snp_source": where
the SNPs and betas came from, :func:`cmix.genotypes.gwas.snp_source`}; absent: not
recorded), and ``dosage_encoding`` ({"kind":
"hard calls" or "fractional", "dtype", "scale", "valid", "missing", "fill", "source":
which files and precision the dosages came from}; a store without it holds hard calls).
:func:`load_rows` decodes a fractional store to float32 expected copies.

A store is written under a temporary name and renamed when complete, so a store that
exists is whole; :func:`open_store` refuses one without ``complete``. An absent
``call_dosage`` chunk reads as its fill value (:data:`DOSAGE_FILL`, or 254 in a
fractional store; never a dosage or the missing code), and every read of
dosages checks their range, so a lost chunk can never pass as genotypes.
:func:`verify_store` checks the files against ``checksums`` (every training run does
this before it starts; ``cmix verify`` also decodes every chunk).
"""


from __future__ import annotations

import numpy as np

STORE_VERSION = 2
DOSAGE_FILL = -128       # what an absent call_dosage chunk reads as; never a valid dosage
DOSAGE_RANGE = (-1, 2)   # valid call_dosage values: -1 missing, 0-2 copies
#: How call_dosage holds dosages (the store attribute ``dosage_encoding``; a store
#: without it holds hard calls). "hard calls": int8 copies 0/1/2, -1 missing.
#: "fractional": uint8 code = round(expected copies x 125), 0..250 (steps of 0.008,
#: rounding error <= 0.004), 255 missing; 251..254 are never written, and an absent
#: chunk reads as 254, so it can never pass as dosages.
DOSAGE_ENCODINGS = {
    "hard calls": {"dtype": "int8", "scale": 1, "valid": [-1, 2], "missing": -1,
                   "fill": DOSAGE_FILL},
    "fractional": {"dtype": "uint8", "scale": 125, "valid": [0, 250], "missing": 255,
                   "fill": 254},
}


def dosage_encoding(root) -> dict:
    """The store's call_dosage encoding: {"kind", "dtype", "scale", "valid", "missing",
    "fill", "source"} (see :data:`DOSAGE_ENCODINGS`); hard calls for a store without the
    attribute."""
    enc = dict(root.attrs.get("dosage_encoding") or {"kind": "hard calls"})
    return {**DOSAGE_ENCODINGS[enc["kind"]], **enc}


def quantise_dosage(dosage: np.ndarray) -> np.ndarray:
    """Expected copies float (any shape, NaN missing, 0..2) -> uint8 fractional codes."""
    enc = DOSAGE_ENCODINGS["fractional"]
    d = np.asarray(dosage, dtype=np.float32)
    code = np.rint(np.clip(d, 0.0, 2.0) * enc["scale"])
    return np.where(np.isnan(d), enc["missing"], code).astype(np.uint8)



REQUIRED_ARRAYS = ("call_dosage", "sample_id", "sample_label", "sample_split", "variant_id",
                   "variant_allele", "variant_beta")
REQUIRED_ATTRS = ("trait", "class_names", "complete")


def default_sample_chunk(n_variants: int) -> int:
    """Rows per chunk: about 1 MiB of int8 dosages, between 256 and 16,384 rows."""
    return int(np.clip((1 << 20) // max(n_variants, 1), 256, 16384))



def fractional_copies(codes: np.ndarray, enc: dict = DOSAGE_ENCODINGS["fractional"]) -> np.ndarray:
    """Fractional codes (uint8, any shape, :func:`quantise_dosage`) -> float32 expected
    copies (code / scale), -1.0 where missing; enc: the store's encoding (its scale and
    missing code)."""
    out = codes.astype(np.float32) / np.float32(enc["scale"])
    out[codes == enc["missing"]] = -1.0
    return out



def hard_call_codes(codes: np.ndarray) -> np.ndarray | None:
    """The int8 hard calls (-1 missing) that fractional ``codes`` (uint8, any shape, of
    :func:`quantise_dosage`) stand for when every one is a whole number of copies or
    missing; None when any is fractional."""
    enc = DOSAGE_ENCODINGS["fractional"]
    missing = codes == enc["missing"]
    if not ((codes % enc["scale"] == 0) | missing).all():
        return None
    return np.where(missing, -1, codes // enc["scale"]).astype(np.int8)

