"""Genotype steps, each checked against plink2: reading .bed/.pgen/BGEN, sample and
variant QC, relatedness, PCA, GWAS-based SNP selection, phenotypes and covariates, and
the per-trait Zarr store they end in. Nothing here imports :mod:`cmix.learn`."""
