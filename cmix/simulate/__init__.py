"""Simulated UK Biobank-style cohorts (``cmix simulate``): the fixtures of every test and
of the demo. Two haplotype engines, each writing the same cohort files:

- :mod:`cmix.simulate.balding_nichols`: :func:`~cmix.simulate.balding_nichols.simulate_cohort`,
  haplotypes from a latent AR(1) process thresholded at each population's
  Balding-Nichols allele frequencies (the default);
- :mod:`cmix.simulate.coalescent`:
  :func:`~cmix.simulate.coalescent.simulate_coalescent_cohort`, haplotypes from a
  stdpopsim demographic model (msprime; the optional ``sim`` extra), the sites and
  haplotypes read in :mod:`cmix.simulate.trees`.

The cohort parts they share: :mod:`~cmix.simulate.populations` (population specs),
:mod:`~cmix.simulate.ancestry` (Balding-Nichols frequency rows, admixture),
:mod:`~cmix.simulate.variants` (SNPs, LD blocks, large loci), :mod:`~cmix.simulate.pedigree`
(relatives by meiosis), :mod:`~cmix.simulate.traits` (traits and covariates),
:mod:`~cmix.simulate.qc_failures` (planted HWE failures, missing calls),
:mod:`~cmix.simulate.gwas` (the discovery GWAS's summary statistics),
:mod:`~cmix.simulate.sample_qc` (sample_qc.tsv with PCs, withdrawals),
:mod:`~cmix.simulate.kinship` (kinship.dat). :mod:`~cmix.simulate.fast` writes LD-free
genotypes only, for benchmark-sized cohorts.
"""
