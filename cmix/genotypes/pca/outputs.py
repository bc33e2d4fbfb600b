"""The files ``cmix pca`` writes, in plink2's layouts (:func:`write_pca_outputs`).

OUT.eigenvec (fitted and projected samples, .fam order), OUT.eigenval,
OUT.eigenvec.allele (allele weights, as ``plink2 --pca allele-wts``), OUT.acount
(allele counts of the fitted founders, as ``plink2 --freq counts``), OUT.prune.in /
OUT.prune.out.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from ...atomic import atomic_outputs
from .fit import Pca


def write_pca_outputs(out_prefix, *, fam: pd.DataFrame, sample_rows: np.ndarray,
                      scores: np.ndarray, pca: Pca, bim: pd.DataFrame,
                      prune: tuple[np.ndarray, np.ndarray] | None) -> list[Path]:
    """Write the PCA outputs, all or none (temporary names, renamed at the end).

    OUT.eigenvec: ``#FID IID PC1..PCk`` for the .fam rows ``sample_rows`` (scores
    (n, k)). OUT.eigenval: one GRM eigenvalue a line. OUT.eigenvec.allele: plink2's
    allele-weight layout ``#CHROM ID REF ALT A1 PC1..``, a REF line then an ALT line per
    variant of ``bim`` (the PCA's variants), weights w_ALT = sqrt(m)/2 x loading =
    -w_REF (plink2's scale). OUT.acount: ``#CHROM ID REF ALT ALT_CTS OBS_CT`` of the
    fitted founders (plink2 --freq counts). ``prune``: (kept, removed) variant IDs for
    OUT.prune.in / OUT.prune.out. REF is .bim column 6 and ALT column 5, as plink2 reads
    a .bim. Numbers are written with 9 significant digits, in row chunks.
    """
    prefix = Path(out_prefix)
    names = ["eigenvec", "eigenval", "eigenvec.allele", "acount"]
    if prune is not None:
        names += ["prune.in", "prune.out"]
    paths = [prefix.with_name(f"{prefix.name}.{s}") for s in names]
    pcs = "\t".join(f"PC{i + 1}" for i in range(scores.shape[1]))
    variant_cols = [bim[c].to_numpy() for c in ("chrom", "variant_id", "a2", "a1")]
    w_alt = pca.loadings * (np.sqrt(pca.n_variants) / 2)

    def allele_rows(s, e):          # a REF line then an ALT line per variant
        cols = [np.repeat(c[s:e], 2) for c in variant_cols]
        a1 = np.column_stack([variant_cols[2][s:e], variant_cols[3][s:e]]).ravel()
        w = np.empty((2 * (e - s), w_alt.shape[1]))
        w[0::2], w[1::2] = 0.0 - w_alt[s:e], w_alt[s:e]
        return [*cols, a1, w]

    stale = ([] if prune is not None else      # of an earlier pruned run into this prefix
             [prefix.with_name(f"{prefix.name}.{x}") for x in ("prune.in", "prune.out")])
    with atomic_outputs(*paths, remove=stale) as tmp:
        sub = fam.iloc[sample_rows]
        _write_table(tmp[0], "#FID\tIID\t" + pcs, len(sub),
                     lambda s, e: [sub["fid"].to_numpy()[s:e], sub["iid"].to_numpy()[s:e],
                                   scores[s:e]])
        _write_table(tmp[1], None, len(pca.eigenvalues),
                     lambda s, e: [pca.eigenvalues[s:e, None]])
        _write_table(tmp[2], "#CHROM\tID\tREF\tALT\tA1\t" + pcs, len(bim), allele_rows)
        _write_table(tmp[3], "#CHROM\tID\tREF\tALT\tALT_CTS\tOBS_CT", len(bim),
                     lambda s, e: [c[s:e] for c in variant_cols]
                     + [pca.alt_count[s:e], pca.allele_count[s:e]])
        if prune is not None:
            for path, ids in zip(tmp[4:], prune):
                _write_table(path, None, len(ids), lambda s, e, ids=ids: [ids[s:e]])
    return paths


def _write_table(path, header: str | None, n_rows: int, rows, chunk: int = 20_000) -> None:
    """Tab-separated lines; ``rows(start, stop)`` gives a chunk's columns (1-d arrays,
    or 2-d float arrays for several columns). Floats get 9 significant digits."""
    with open(path, "w") as fh:
        if header is not None:
            fh.write(header + "\n")
        for s in range(0, n_rows, chunk):
            cols = []
            for c in rows(s, min(s + chunk, n_rows)):
                c = np.asarray(c)
                if c.dtype.kind == "f":
                    cols.extend(np.char.mod("%.9g", c.reshape(len(c), -1)).T)
                else:
                    cols.append(c.astype(str))
            fh.write("".join("\t".join(r) + "\n" for r in zip(*cols)))
