"""The per-trait Zarr dosage store: schema, writer, reader.

One store per trait holds the labeled samples' dosages for the trait's selected SNPs.
It is Zarr format 2 (the format of the VCF Zarr spec, readable by sgkit/xarray), with
VCF Zarr names where they apply. Schema (dims in brackets):

===================  ====================  =====  =============================================
array                dims                  dtype  meaning
===================  ====================  =====  =============================================
call_dosage          (samples, variants)   int8   copies of the effect allele, -1 missing.
                                                  Sample-major (a documented transpose of VCF
                                                  Zarr) so a batch of rows is one chunk read.
sample_id            (samples,)            str    .fam IID
sample_label         (samples,)            int16  class index into attrs["class_names"]
sample_phenotype     (samples,)            f8     raw phenotype value (code or measurement)
sample_split         (samples,)            int8   0 = training split, 1 = test split
variant_id           (variants,)           str    .bim ID
contig_id            (contigs,)            str    chromosome names
variant_contig       (variants,)           int16  index into contig_id
variant_position     (variants,)           int64  bp position
variant_allele       (variants, alleles)   str    [other allele, effect allele]: the dosage
                                                  counts allele 1, as VCF Zarr's ALT
variant_beta         (variants,)           f8     summary-statistic effect of the effect allele
variant_log10_p      (variants,)           f8     log10 of the summary-statistic p-value
variant_bim_index    (variants,)           int64  row of the variant in the source .bim
===================  ====================  =====  =============================================

Group attributes: ``cmix_store_version`` (1), ``trait`` (name), ``class_names`` (list),
``trait_config`` (dict), ``split`` ({"seed", "test_fraction"}), ``input_checksums``
(file name -> sha256 of the inputs), ``complete`` (True, written last).

A store is written under a temporary name and renamed when complete, so a store that
exists is whole; :func:`open_store` refuses one without ``complete``.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from .io import CmixError, atomic_path

STORE_VERSION = 1
REQUIRED_ARRAYS = ("call_dosage", "sample_id", "sample_label", "sample_split", "variant_id",
                   "variant_allele", "variant_beta")
REQUIRED_ATTRS = ("trait", "class_names", "complete")


def default_sample_chunk(n_variants: int) -> int:
    """Rows per chunk: about 1 MiB of int8 dosages, between 256 and 16,384 rows."""
    return int(np.clip((1 << 20) // max(n_variants, 1), 256, 16384))


def write_store(path: str | os.PathLike, *, dosage, sample_id, sample_label, sample_split,
                variant_id, variant_contig, variant_position, variant_allele, variant_beta,
                variant_log10_p=None, variant_bim_index=None, sample_phenotype=None,
                attrs: dict, sample_chunk: int | None = None) -> Path:
    """Write a complete store atomically.

    dosage: int8 (n_samples, n_variants), a numpy or dask array (dask chunks are
    rechunked to the store's chunks, one dask chunk per Zarr chunk, then stored in
    parallel). variant_contig: chromosome names (str, n_variants). variant_allele:
    str (n_variants, 2) = [other, effect]. attrs must hold ``trait`` and ``class_names``.
    """
    import dask.array as da
    import zarr
    from numcodecs import Blosc

    n_samples, n_variants = dosage.shape
    for key in ("trait", "class_names"):
        if key not in attrs:
            raise ValueError(f"store attrs need {key!r}")
    chunk = sample_chunk or default_sample_chunk(n_variants)
    contigs, contig_index = np.unique(np.asarray(variant_contig, dtype=str), return_inverse=True)
    compressor = Blosc(cname="zstd", clevel=5, shuffle=Blosc.BITSHUFFLE)
    path = Path(path)
    with atomic_path(path, is_dir=True) as tmp:
        root = zarr.open_group(str(tmp), mode="w", zarr_format=2)

        def put(name, values, dims, dtype, chunks=None):
            values = np.asarray(values)
            arr = root.create_array(name, shape=values.shape, dtype=dtype,
                                    chunks=chunks or values.shape or (1,),
                                    compressors=compressor if values.dtype != object else None,
                                    fill_value=None,
                                    attributes={"_ARRAY_DIMENSIONS": list(dims)})
            arr[...] = values.astype(dtype) if dtype is not str else values.astype(str)

        call = root.create_array("call_dosage", shape=(n_samples, n_variants), dtype="int8",
                                 chunks=(chunk, n_variants), compressors=compressor,
                                 fill_value=None,
                                 attributes={"_ARRAY_DIMENSIONS": ["samples", "variants"]})
        dask_dosage = da.asarray(dosage).astype(np.int8).rechunk((chunk, n_variants))
        da.store(dask_dosage, call, lock=False, compute=True)

        put("sample_id", np.asarray(sample_id, dtype=str), ["samples"], str)
        put("sample_label", sample_label, ["samples"], "int16")
        put("sample_split", sample_split, ["samples"], "int8")
        put("sample_phenotype",
            np.full(n_samples, np.nan) if sample_phenotype is None else sample_phenotype,
            ["samples"], "float64")
        put("variant_id", np.asarray(variant_id, dtype=str), ["variants"], str)
        put("contig_id", contigs.astype(str), ["contigs"], str)
        put("variant_contig", contig_index, ["variants"], "int16")
        put("variant_position", variant_position, ["variants"], "int64")
        put("variant_allele", np.asarray(variant_allele, dtype=str), ["variants", "alleles"], str)
        put("variant_beta", variant_beta, ["variants"], "float64")
        put("variant_log10_p",
            np.full(n_variants, np.nan) if variant_log10_p is None else variant_log10_p,
            ["variants"], "float64")
        put("variant_bim_index",
            np.full(n_variants, -1) if variant_bim_index is None else variant_bim_index,
            ["variants"], "int64")
        root.attrs.update({"cmix_store_version": STORE_VERSION, **attrs})
        root.attrs["complete"] = True
    return path


def open_store(path: str | os.PathLike):
    """Open a store read-only and check it is complete and has the schema's arrays.

    Returns the zarr Group. Raises :class:`CmixError` naming what is missing.
    """
    import zarr

    path = Path(path)
    if not path.exists():
        raise CmixError(f"{path}: store not found")
    try:
        root = zarr.open_group(str(path), mode="r", zarr_format=2)
    except Exception as err:  # zarr raises several types for a non-store folder
        raise CmixError(f"{path}: not a cmix Zarr store ({err})") from None
    if not root.attrs.get("complete", False):
        raise CmixError(f"{path}: incomplete store (no 'complete' attribute): it was not "
                        "written to the end; delete it and run `cmix store` again")
    missing = [a for a in REQUIRED_ARRAYS if a not in root]
    missing += [f"attribute {a}" for a in REQUIRED_ATTRS if a not in root.attrs]
    if missing:
        raise CmixError(f"{path}: store lacks {', '.join(missing)}")
    return root
