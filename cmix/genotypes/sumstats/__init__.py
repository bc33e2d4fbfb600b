"""GWAS summary statistics and ``cmix select``, one concern a module (import each name
from the module that defines it; this package re-exports nothing):

* ``layouts``: the six tools' layouts recognised by header (plink2 --glm, regenie,
  GWAS-SSF, SAIGE, METAL, BOLT-LMM), common names, the column map;
* ``read``: reading a file into one row per data line, p-values as log10 from text;
* ``harmonise``: matching to the .bim, orienting to its A1, and ranking by p;
* ``clump``: plink 1.9 ``--clump`` with its EM haplotype r2;
* ``info``: the imputation-INFO filter (mfi files or the INFO column);
* ``selection_files``: the selection table, its steps table and source record;
* ``select``: the ``cmix select`` step (read, harmonise, rank, clump, top-k).
"""
