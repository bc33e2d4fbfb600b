"""Writing a store: arrays in chunks, attributes, checksums, ``complete`` last, under a
temporary name renamed when whole (:mod:`cmix.store.schema` for what it holds)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import dask.array as da
import numpy as np
import zarr
from numcodecs import Blosc

from ..atomic import atomic_path
from .read import is_cmix_store
from .schema import DOSAGE_ENCODINGS, STORE_VERSION, default_sample_chunk
from .verify import array_files, attrs_digest


@dataclass(frozen=True, kw_only=True)
class StoreContent:
    """What one store holds: its arrays and its group attributes.

    dosage: (n_samples, n_variants), int8 hard calls (-1 missing), or uint8 codes of
    :func:`quantise_dosage` for a fractional store; a numpy or dask array.
    sample_id: str (n_samples,); sample_label: int class index (n_samples,);
    sample_split: 0 training / 1 test (n_samples,); sample_phenotype: float raw values
    (n_samples,), None: NaN; sample_covariate: float (n_samples, n_covariates), None: no
    covariates; covariate_name: str (n_covariates,).
    variant_id: str (n_variants,); variant_contig: chromosome names, str (n_variants,);
    variant_position: bp, int (n_variants,); variant_allele: str (n_variants, 2) =
    [other, effect]; variant_beta: effect per copy of the effect allele (n_variants,);
    variant_log10_p: (n_variants,), None: NaN; variant_bim_index: source .bim row
    (n_variants,), None: -1.
    attrs: group attributes; must hold ``trait`` and ``class_names``.
    """

    dosage: object
    sample_id: object
    sample_label: object
    sample_split: object
    variant_id: object
    variant_contig: object
    variant_position: object
    variant_allele: object
    variant_beta: object
    attrs: dict
    variant_log10_p: object = None
    variant_bim_index: object = None
    sample_phenotype: object = None
    sample_covariate: object = None
    covariate_name: object = ()
    discovery_id: object = None


def write_store(path: str | os.PathLike, content: StoreContent, *,
                sample_chunk: int | None = None, encoding: str = "hard calls") -> Path:
    """Write a complete store atomically.

    content: the arrays and attributes (:class:`StoreContent`). encoding: a key of
    :data:`DOSAGE_ENCODINGS`, recorded with ``attrs["dosage_source"]`` (if given) as the
    ``dosage_encoding`` attribute. A dask ``dosage`` is rechunked to the store's chunks
    (``sample_chunk`` rows, default :func:`default_sample_chunk`), one dask chunk per
    Zarr chunk, then stored in parallel. An existing folder at ``path`` is replaced
    only when it is a cmix store (any other folder is a CmixError, left as it was).
    """

    n_variants = content.dosage.shape[1]
    _check_store_attrs(content.attrs)
    chunk = sample_chunk or default_sample_chunk(n_variants)
    compressor = Blosc(cname="zstd", clevel=5, shuffle=Blosc.BITSHUFFLE)
    path = Path(path)
    with atomic_path(path, is_dir=True, replaceable=is_cmix_store) as tmp:
        root = zarr.open_group(str(tmp), mode="w", zarr_format=2)
        _write_dosage(root, content.dosage, encoding, chunk, compressor)
        _write_sample_arrays(root, content, compressor)
        _write_variant_arrays(root, content, compressor)
        _write_attrs(root, tmp, content.attrs, encoding)
    return path


def _check_store_attrs(attrs: dict) -> None:
    """Raise ValueError when the attributes lack ``trait`` or ``class_names``."""
    for key in ("trait", "class_names"):
        if key not in attrs:
            raise ValueError(f"store attrs need {key!r}")


def _write_dosage(root, dosage, encoding: str, chunk: int, compressor) -> None:
    """Write call_dosage (n_samples, n_variants) in chunks of ``chunk`` rows, in the
    dtype and fill value of ``encoding`` (:data:`DOSAGE_ENCODINGS`)."""

    n_samples, n_variants = dosage.shape
    enc = DOSAGE_ENCODINGS[encoding]
    call = root.create_array("call_dosage", shape=(n_samples, n_variants),
                             dtype=enc["dtype"],
                             chunks=(chunk, n_variants), compressors=compressor,
                             fill_value=enc["fill"],
                             attributes={"_ARRAY_DIMENSIONS": ["samples", "variants"]})
    dask_dosage = da.asarray(dosage).astype(enc["dtype"]).rechunk((chunk, n_variants))
    da.store(dask_dosage, call, lock=False, compute=True)


def _write_array(root, name: str, values, dims: list, dtype, compressor) -> None:
    """Write one array as a single chunk, with its dimension names (``dims``); str
    arrays uncompressed."""
    values = np.asarray(values)
    arr = root.create_array(name, shape=values.shape, dtype=dtype,
                            chunks=tuple(max(1, d) for d in values.shape) or (1,),
                            compressors=compressor if values.dtype != object else None,
                            fill_value=None,
                            attributes={"_ARRAY_DIMENSIONS": list(dims)})
    arr[...] = values.astype(dtype) if dtype is not str else values.astype(str)


def _write_sample_arrays(root, content: StoreContent, compressor) -> None:
    """Write the per-sample arrays and the covariate names."""
    n_samples = content.dosage.shape[0]
    put = lambda *args: _write_array(root, *args, compressor)   # noqa: E731
    put("sample_id", np.asarray(content.sample_id, dtype=str), ["samples"], str)
    put("sample_label", content.sample_label, ["samples"], "int16")
    put("sample_split", content.sample_split, ["samples"], "int8")
    put("sample_phenotype",
        np.full(n_samples, np.nan) if content.sample_phenotype is None
        else content.sample_phenotype, ["samples"], "float64")
    put("sample_covariate",
        np.zeros((n_samples, 0)) if content.sample_covariate is None
        else content.sample_covariate, ["samples", "covariates"], "float64")
    put("covariate_name", np.asarray(list(content.covariate_name), dtype=str),
        ["covariates"], str)
    if content.discovery_id is not None:
        put("discovery_id", np.asarray(sorted(map(str, content.discovery_id)), dtype=str),
            ["discovery"], str)


def _write_variant_arrays(root, content: StoreContent, compressor) -> None:
    """Write the per-variant arrays and contig_id (the sorted distinct chromosome
    names, which variant_contig indexes)."""
    n_variants = content.dosage.shape[1]
    contigs, contig_index = np.unique(np.asarray(content.variant_contig, dtype=str),
                                      return_inverse=True)
    put = lambda *args: _write_array(root, *args, compressor)   # noqa: E731
    put("variant_id", np.asarray(content.variant_id, dtype=str), ["variants"], str)
    put("contig_id", contigs.astype(str), ["contigs"], str)
    put("variant_contig", contig_index, ["variants"], "int16")
    put("variant_position", content.variant_position, ["variants"], "int64")
    put("variant_allele", np.asarray(content.variant_allele, dtype=str),
        ["variants", "alleles"], str)
    put("variant_beta", content.variant_beta, ["variants"], "float64")
    put("variant_log10_p",
        np.full(n_variants, np.nan) if content.variant_log10_p is None
        else content.variant_log10_p, ["variants"], "float64")
    put("variant_bim_index",
        np.full(n_variants, -1) if content.variant_bim_index is None
        else content.variant_bim_index, ["variants"], "int64")


def _write_attrs(root, tmp: Path, attrs: dict, encoding: str) -> None:
    """Write the group attributes: version, ``attrs``, the dosage encoding, the
    checksums of every array file written under ``tmp``, and ``complete`` last."""
    root.attrs.update({"cmix_store_version": STORE_VERSION, **attrs})
    root.attrs["dosage_encoding"] = {"kind": encoding, **DOSAGE_ENCODINGS[encoding],
                                     "source": attrs.get("dosage_source", "")}
    root.attrs["checksums"] = {"algorithm": "sha256", "files": array_files(tmp),
                               "attrs": attrs_digest(root.attrs.asdict())}
    root.attrs["complete"] = True

