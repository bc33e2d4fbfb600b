"""The per-trait Zarr dosage store, below both the genotype steps that build it and the
learning layer that reads it: :mod:`.schema` (its arrays, attributes and encodings),
:mod:`.write`, :mod:`.read` and :mod:`.verify` (its checksums). The builder from
genotype files is :mod:`cmix.genotypes.build_store`."""
