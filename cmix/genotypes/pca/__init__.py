"""Genetic principal components, ``cmix pca``, one concern a module (import each name
from the module that defines it; this package re-exports nothing):

* ``regions``: the long-range LD regions shipped with cmix and reading region lists;
* ``prune_kernels``: the numba kernels of plink2's ``--indep-pairwise``;
* ``prune``: plink2's LD pruning (``PruneSettings``, ``ld_prune``);
* ``standardize``: genotypes standardised as plink2 ``--pca`` does, streamed by dask;
* ``krylov``: the randomized block Krylov PCA over a dask array;
* ``fit``: the PCA of the fitted samples and the projection of the others;
* ``outputs``: the plink2-layout files (.eigenvec, .eigenval, .eigenvec.allele, .acount);
* ``projection``: projecting new people from those files, and a fit's identity;
* ``run``: the ``cmix pca`` step (variant choice, fit, projection, outputs).
"""
