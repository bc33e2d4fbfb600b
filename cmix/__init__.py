"""cmix: Contrastive Mixup on UK Biobank-style genotype data.

Every step of the pipeline is a plain function in one module of this package;
``cmix.cli`` and the Snakemake rules are thin shells around them.
"""

__version__ = "0.1.0"
