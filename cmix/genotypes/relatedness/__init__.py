"""Unrelated samples, ``cmix unrelated``, one concern a module (import each name from the
module that defines it; this package re-exports nothing):

* ``cutoff``: kinship degrees, the cutoff check and plink2's ``--king-cutoff`` choice;
* ``kinship_table``: UK Biobank ``ukb_rel.dat`` and plink2 ``.kin0`` tables;
* ``king``: KING-robust kinship from genotypes and the exact pair counts;
* ``bitplanes``: its counts on the CPU from bit planes;
* ``int8``: its counts from int8 matrix products (the GPU route);
* ``unrelated``: the step's two routes (table, genotypes) and their outputs.
"""
