"""The genotype readers: .bed, .pgen and BGEN files (and one of any of them per
chromosome) behind one source protocol, :mod:`cmix.readers.sources`."""
