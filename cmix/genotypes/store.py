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

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ..atomic import atomic_path, file_sha256
from ..errors import CmixError

if TYPE_CHECKING:
    from ..readers.sources import GenotypeFiles

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


def check_encoding(root, encoding: str, name: str) -> None:
    """Refuse the categorical SNP encoding (levels 0/1/2) on a fractional store."""
    if encoding == "categorical" and dosage_encoding(root)["kind"] == "fractional":
        raise CmixError(f"{name}: holds fractional (imputed) dosages, which have no 0/1/2 "
                        "levels for the categorical encoding; use the dosage encoding "
                        "(train config encoding: dosage, the default)")
REQUIRED_ARRAYS = ("call_dosage", "sample_id", "sample_label", "sample_split", "variant_id",
                   "variant_allele", "variant_beta")
REQUIRED_ATTRS = ("trait", "class_names", "complete")


def default_sample_chunk(n_variants: int) -> int:
    """Rows per chunk: about 1 MiB of int8 dosages, between 256 and 16,384 rows."""
    return int(np.clip((1 << 20) // max(n_variants, 1), 256, 16384))


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
    import zarr
    from numcodecs import Blosc

    n_variants = content.dosage.shape[1]
    _check_store_attrs(content.attrs)
    chunk = sample_chunk or default_sample_chunk(n_variants)
    compressor = Blosc(cname="zstd", clevel=5, shuffle=Blosc.BITSHUFFLE)
    path = Path(path)
    with atomic_path(path, is_dir=True, replaceable=_is_cmix_store) as tmp:
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
    import dask.array as da

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
    root.attrs["checksums"] = {"algorithm": "sha256", "files": _array_files(tmp),
                               "attrs": _attrs_digest(root.attrs.asdict())}
    root.attrs["complete"] = True


def _attrs_digest(attrs: dict) -> str:
    """sha256 of the group attributes (trait, class names, encoding, covariates,
    provenance, ...) less ``checksums`` and ``complete``, as canonical JSON."""
    import hashlib
    import json

    kept = {k: v for k, v in attrs.items() if k not in ("checksums", "complete")}
    return hashlib.sha256(json.dumps(kept, sort_keys=True).encode()).hexdigest()


def _array_files(path: Path) -> dict:
    """{relative path: [size in bytes, sha256 hex]} of every file of the store's arrays
    (chunks and .zarray/.zattrs), not the group's own metadata."""
    files = {}
    for sub in sorted(p for p in path.iterdir() if p.is_dir()):
        for f in sorted(sub.rglob("*")):
            if f.is_file():
                files[f.relative_to(path).as_posix()] = [f.stat().st_size, file_sha256(f)]
    return files


def verify_store(path: str | os.PathLike, root=None, *, decode: bool = False) -> dict:
    """Check a store's array files and group attributes against the checksums written
    with it.

    Every recorded file must exist with its size and sha256, no array may hold a chunk
    file that was not recorded, and the group attributes must have the recorded sha256
    (class names swapped in the .zattrs would relabel every prediction). ``decode=True`` also reads every call_dosage chunk
    and checks its values lie in the store's encoding (:data:`DOSAGE_ENCODINGS`). Raises CmixError naming the
    first damaged files; returns {"files", "bytes"} checked.
    """
    path = Path(path)
    root = open_store(path) if root is None else root
    recorded = root.attrs["checksums"]["files"]
    bad = []
    for rel, (size, digest) in recorded.items():
        f = path / rel
        if not f.is_file():
            bad.append(f"{rel} is missing")
        elif f.stat().st_size != size:
            bad.append(f"{rel} has {f.stat().st_size} bytes, {size} were written")
        elif file_sha256(f) != digest:
            bad.append(f"{rel} has changed (sha256 differs)")
    present = set(_array_file_names(path))
    bad += [f"{rel} was not written with the store" for rel in sorted(present - set(recorded))]
    digest = root.attrs["checksums"].get("attrs")     # stores written before it: files only
    if digest is not None and _attrs_digest(root.attrs.asdict()) != digest:
        bad.insert(0, "its group attributes (.zattrs: trait, class names, encoding, ...) "
                      "have changed")
    if bad:
        more = f" (and {len(bad) - 3} more)" if len(bad) > 3 else ""
        raise CmixError(f"{path}: damaged store: {'; '.join(bad[:3])}{more}; rebuild it with "
                        "`cmix store --force`")
    if decode:

        call = root["call_dosage"]
        step = int(call.chunks[0])
        for start in range(0, call.shape[0], step):
            load_rows(root, np.arange(start, min(start + step, call.shape[0])), path.name)
    return {"files": len(recorded), "bytes": int(sum(v[0] for v in recorded.values()))}


def _array_file_names(path: Path) -> list[str]:
    return [f.relative_to(path).as_posix() for sub in path.iterdir() if sub.is_dir()
            for f in sub.rglob("*") if f.is_file()]


def store_fingerprint(root) -> str:
    """sha256 of the store's attributes, which hold the checksum of every array file:
    identifies its content (dosages, labels, splits, variants, trait config) for run
    keys."""
    import hashlib
    import json

    return hashlib.sha256(json.dumps(dict(root.attrs), sort_keys=True, default=str)
                          .encode()).hexdigest()


def check_store_unchanged(store_path, sha256: str) -> None:
    """Refuse (CmixError) to go on when the store at ``store_path`` is no longer the one
    a run opened (fingerprint ``sha256``, :func:`store_fingerprint`):
    replaced (``cmix store --force``), removed or being rebuilt while the run read it.
    Called before a run writes its results, after its last read of the store, so the
    results never mix two stores' rows."""
    try:
        now = store_fingerprint(open_store(store_path))
    except CmixError:
        now = None
    if now != sha256:
        raise CmixError(f"{store_path}: the store changed while this run read it (replaced, "
                        "removed or rebuilt since the run opened it); its results would mix "
                        "two stores' rows, so none were written: rerun `cmix train`")


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
    version = root.attrs.get("cmix_store_version")
    if version != STORE_VERSION or "checksums" not in root.attrs:
        raise CmixError(f"{path}: store format {version}, this cmix reads format "
                        f"{STORE_VERSION} (with checksums); rebuild it with `cmix store --force`")
    missing = [a for a in REQUIRED_ARRAYS if a not in root]
    missing += [f"attribute {a}" for a in REQUIRED_ATTRS if a not in root.attrs]
    if missing:
        raise CmixError(f"{path}: store lacks {', '.join(missing)}")
    return root


def _is_cmix_store(path: Path) -> bool:
    """Whether ``path`` is a folder holding a cmix store's group metadata."""
    import json

    try:
        attrs = json.loads((path / ".zattrs").read_text())
    except (OSError, ValueError):
        return False
    return path.is_dir() and (path / ".zgroup").is_file() and "cmix_store_version" in attrs


# ------------------------------------------------------------------- building from a .bed
#: How many 1 MiB blocks, evenly spaced from the first to the last, identify a genotype file.
FINGERPRINT_BLOCKS = 64


def bed_fingerprint(path: str | os.PathLike) -> dict:
    """An identity of a (possibly 100+ GB) genotype file by its content alone: its size
    and the sha256 of :data:`FINGERPRINT_BLOCKS` 1 MiB blocks spread evenly over it,
    first and last included (the whole file when it is smaller), about 0.1 s a file.
    A copy of the file, or the same file written again, has the same identity; its
    modification time does not enter."""
    import hashlib

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
    import dask.array as da

    from ..readers.plink import decode

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

    import dask

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


def hard_call_codes(codes: np.ndarray) -> np.ndarray | None:
    """The int8 hard calls (-1 missing) that fractional ``codes`` (uint8, any shape, of
    :func:`quantise_dosage`) stand for when every one is a whole number of copies or
    missing; None when any is fractional."""
    enc = DOSAGE_ENCODINGS["fractional"]
    missing = codes == enc["missing"]
    if not ((codes % enc["scale"] == 0) | missing).all():
        return None
    return np.where(missing, -1, codes // enc["scale"]).astype(np.int8)


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
    from . import phenotypes as ph
    from .selection import read_sample_ids
    from ..logs import log

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
    if out.exists() and not _is_cmix_store(out):
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
    import zarr

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
    from ..readers.chroms import chrom_mask, chrom_text
    from .sumstats.selection_files import read_selection

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
    import pandas as pd

    from ..readers.usable import refuse_excluded

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
    import pandas as pd

    from ..logs import log
    from .selection import listed_rows, read_sample_ids, sample_rows

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
    from ..logs import log

    covariates = samples.covariates
    names, matrix, n_missing_cov, pca_sha256 = [], None, 0, None
    if covariates and covariates.get("pcs") and covariates.get("pcs_from") == "eigenvec" \
            and samples.eigenvec is not None:      # which cmix pca fit the PCs came from
        from .pca.projection import pca_identity

        pca_sha256 = pca_identity(samples.eigenvec)
    if covariates:
        from .covariates import covariate_matrix

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
    from .covariates import covariate_matrix

    names, matrix, spec = covariate_matrix(
        samples.covariates, bf.fam, rows, pheno=pheno_table, pheno_path=inputs.pheno,
        sample_qc=samples.sample_qc, eigenvec=samples.eigenvec)
    return {**covariates, "names": names, "matrix": matrix, "spec": spec}


def _effect_dosages(bf, bim_pos, rows, count_a2, chunk: int):
    """(dosage (len(rows), n_variants), encoding, dosage source text): a lazy int8 dask
    array from hard calls; from dosages, uint8 fractional codes, or int8 hard calls when
    every dosage is a whole number of copies (a .pgen of hard calls only)."""
    from ..readers.sources import FRACTIONAL, HARD_CALLS

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
    from ..readers.sources import expand, is_pattern

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
    from . import phenotypes as ph

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


# Reading a store

def dosage_dask(root):
    """The store's call_dosage as a dask array with one dask chunk per Zarr chunk."""
    import dask.array as da

    return da.from_zarr(root["call_dosage"])


def store_text(root, name: str) -> np.ndarray:
    """Array ``name`` of a store's string arrays (sample_id, variant_id, variant_allele,
    contig_id, covariate_name) as a numpy ``str`` array of its shape (zarr returns numpy's
    variable-width string dtype, which cannot be cast to a fixed width)."""
    return np.array([str(v) for v in np.asarray(root[name][:]).ravel()]).reshape(
        root[name].shape)


def store_name(root) -> str:
    """The folder name of an open store, for messages."""
    where = getattr(root.store, "root", None)
    return Path(str(where)).name if where is not None else "store"


def decode_rows(x: np.ndarray, enc: dict, rows: np.ndarray, name: str, chunk_rows: int):
    """Check raw call_dosage values against the store's encoding and decode them.

    x: raw (len(rows), n_variants) values; enc: :func:`dosage_encoding`.
    Hard calls come back as int8 (-1 missing); fractional codes as float32 expected
    copies (code / scale), -1.0 where missing. A value outside the encoding (as an
    absent chunk's fill) raises CmixError naming the store rows of the first one.
    """
    lo, hi = enc["valid"]
    bad = ((x < lo) | (x > hi)) & (x != enc["missing"])
    if bad.any():
        bad_row, bad_col = np.argwhere(bad)[0]
        chunk = int(rows[bad_row]) // chunk_rows
        raise CmixError(f"{name}: call_dosage chunk {chunk}.0 (store row {rows[bad_row]}, "
                        f"variant {bad_col}) holds {int(x[bad_row, bad_col])}, outside "
                        f"{lo}..{hi} ({enc['kind']}, missing {enc['missing']}): the chunk is "
                        "missing or damaged; rebuild the store")
    if enc["kind"] == "hard calls":
        return np.asarray(x, dtype=np.int8)
    return fractional_copies(x, enc)


def fractional_copies(codes: np.ndarray, enc: dict = DOSAGE_ENCODINGS["fractional"]) -> np.ndarray:
    """Fractional codes (uint8, any shape, :func:`quantise_dosage`) -> float32 expected
    copies (code / scale), -1.0 where missing; enc: the store's encoding (its scale and
    missing code)."""
    out = codes.astype(np.float32) / np.float32(enc["scale"])
    out[codes == enc["missing"]] = -1.0
    return out


#: Zarr chunks read at most in one slice by :func:`load_rows` (bounds its temporary memory)
READ_CHUNKS = 64


def load_rows(root, rows: np.ndarray, name: str | None = None) -> np.ndarray:
    """Dosages of ``rows`` (sorted indices): (len(rows), n_variants). Only the Zarr
    chunks that hold a row are read, each run of consecutive ones (at most
    :data:`READ_CHUNKS`) as one slice whose chunks zarr fetches concurrently. int8 (-1
    missing) for a hard-call store, float32 expected copies (-1.0 missing) for a
    fractional one (:func:`decode_rows`).

    Raises CmixError when a chunk cannot be read or decoded (a store damaged or removed
    while in use) or holds a value outside the store's encoding (an absent chunk reads
    as its fill value, never a valid one), naming the store rows of the first bad value.
    """
    rows = np.asarray(rows, dtype=np.int64)
    enc = dosage_encoding(root)
    if len(rows) == 0:
        dtype = np.int8 if enc["kind"] == "hard calls" else np.float32
        return np.zeros((0, root["call_dosage"].shape[1]), dtype=dtype)
    name = name or store_name(root)
    try:
        call = root["call_dosage"]
        chunk_rows = int(call.chunks[0])
        touched = np.unique(rows // chunk_rows)
        runs = np.split(touched, np.flatnonzero(np.diff(touched) > 1) + 1)
        x = np.empty((len(rows), call.shape[1]), dtype=call.dtype)
        for run in runs:                          # consecutive chunks, READ_CHUNKS a read
            for chunks in np.split(run, range(READ_CHUNKS, len(run), READ_CHUNKS)):
                lo = int(chunks[0]) * chunk_rows
                hi = min((int(chunks[-1]) + 1) * chunk_rows, call.shape[0])
                pos = np.flatnonzero((rows >= lo) & (rows < hi))
                x[pos] = np.asarray(call[lo:hi])[rows[pos] - lo]
    except (OSError, RuntimeError, ValueError, KeyError, IndexError) as err:
        raise CmixError(f"{name}: cannot read call_dosage rows {rows[0]}-{rows[-1]} "
                        f"({type(err).__name__}: {err}); was the store changed or removed "
                        "while in use? Check it with `cmix verify`") from None
    return decode_rows(x, enc, rows, name, chunk_rows)


def column_moments(root, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Mean and standard deviation (float32, n_variants) of each column's dosage (expected
    copies for a fractional store) over ``rows``, missing calls left out; for the dosage encoding (training rows only)."""
    import dask.array as da

    enc = dosage_encoding(root)
    x = dosage_dask(root)[np.asarray(rows, dtype=np.int64)]
    xf = da.where(x == enc["missing"], np.nan, x.astype(np.float32) / np.float32(enc["scale"]))
    valid = da.where(x == enc["missing"], enc["valid"][0], x)
    try:
        mean, sd, lo, hi = da.compute(da.nanmean(xf, axis=0), da.nanstd(xf, axis=0),
                                      valid.min(), valid.max())
    except (OSError, RuntimeError, ValueError, KeyError) as err:
        raise CmixError(f"{store_name(root)}: cannot read call_dosage ({type(err).__name__}: "
                        f"{err}); was the store changed or removed while in use? Check it "
                        "with `cmix verify`") from None
    if lo < enc["valid"][0] or hi > enc["valid"][1]:
        raise CmixError(f"{store_name(root)}: call_dosage holds values {int(lo)}..{int(hi)}, "
                        f"outside {enc['valid'][0]}..{enc['valid'][1]} ({enc['kind']}): a chunk "
                        "is missing or damaged; rebuild the store")
    mean = np.nan_to_num(np.asarray(mean, dtype=np.float32))
    sd = np.asarray(sd, dtype=np.float32)
    sd = np.where(np.isfinite(sd) & (sd > 1e-6), sd, 1.0).astype(np.float32)
    return mean, sd
