"""What every genotype source derives from its sample and variant tables, and what the
PLINK trios (.bed/.bim/.fam, .pgen/.pvar/.psam) share: the file names beside one prefix,
the map from usable variants to file rows, and the check of a shared sample file."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from ..errors import CmixError
from .usable import excluded_rows


class Tables:
    """What every genotype source derives from its ``fam`` and ``bim`` tables: sample and
    variant counts, and the bytes of one variant's 2-bit calls (plink's packing). The
    subclass holds ``fam`` and ``bim`` (columns FAM_COLUMNS and BIM_COLUMNS)."""

    @property
    def n_samples(self) -> int:
        return len(self.fam)

    @property
    def n_variants(self) -> int:
        return len(self.bim)

    @property
    def bytes_per_variant(self) -> int:
        return (self.n_samples + 3) // 4


class PlinkTrio(Tables):
    """A genotype file, its variant table and its sample table sharing one ``prefix``
    (.bed/.bim/.fam, .pgen/.pvar/.psam): the subclass names them in ``EXTENSIONS``
    (genotypes, variants, samples).

    The subclass holds ``bim``: the variants cmix can select (:mod:`cmix.readers.usable`),
    ``file_row``: int64 (n_variants,), each one's row in the file (None: every row is
    one), ``excluded``: the rows left out, and ``header_lines``: the lines of the
    variant table above its first variant."""

    EXTENSIONS: tuple[str, str, str]
    PLINK2_FLAG: str            # the plink2 flag that reads the trio (--bfile, --pfile)

    def beside(self, extension: str) -> Path:
        """The file ``prefix`` + ``extension``."""
        return self.prefix.with_name(self.prefix.name + extension)

    @property
    def variant_file(self) -> Path:
        """The variant table: prefix + .bim / .pvar, or its zstd-compressed .zst beside
        the prefix when only that is there (as ``plink2 --make-pgen vzs`` writes it)."""
        return variant_table(self.prefix, self.EXTENSIONS[1])

    @property
    def n_file_variants(self) -> int:
        """The variants of the file, those left out included."""
        return self.n_variants + len(self.excluded)

    def file_rows(self, variant_idx) -> np.ndarray:
        """int64: the file row of each of the variants ``variant_idx`` (bim rows)."""
        variant_idx = np.asarray(variant_idx, dtype=np.int64)
        return variant_idx if self.file_row is None else self.file_row[variant_idx]

    def where(self, file_rows) -> list[str]:
        """"path, line N" of each file row (0-based), for messages."""
        return [f"{self.variant_file}, line {int(r) + 1 + self.header_lines}"
                for r in np.asarray(file_rows)]

    def leave_out(self, out: np.ndarray) -> None:
        """Leave out the variants ``out`` (bool (n_variants,)) as sharing their IDs with
        variants of other files of a per-chromosome set."""
        if not out.any():
            return
        rows = self.file_rows(np.arange(self.n_variants))
        self.excluded = pd.concat([self.excluded, excluded_rows(
            self.bim, out, np.zeros(len(out), bool), lambda r: self.where(rows[r]),
            f"{self.PLINK2_FLAG} {self.prefix}")], ignore_index=True)
        self.file_row = rows[~out]
        self.bim = self.bim[~out].reset_index(drop=True)

    def input_files(self) -> dict:
        """{path: "fingerprint" for the genotype file, "sha256" for the variant table and
        the sample table beside the prefix (when there is one)}."""
        files = {self.beside(self.EXTENSIONS[0]): "fingerprint", self.variant_file: "sha256"}
        samples = self.beside(self.EXTENSIONS[2])
        return {**files, samples: "sha256"} if samples.is_file() else files

    def samples_present(self) -> np.ndarray:
        """bool (n_samples,): every sample of the sample table has calls."""
        return np.ones(self.n_samples, bool)


def variant_table(prefix: Path, extension: str) -> Path:
    """prefix + ``extension`` (.bim, .pvar), or that name + .zst when only the
    compressed one is there."""
    plain = prefix.with_name(prefix.name + extension)
    zst = plain.with_name(plain.name + ".zst")
    return zst if not plain.exists() and zst.exists() else plain


def check_own_samples(prefix: Path, own_ext: str, given: pd.DataFrame, given_path: Path,
                      reader) -> None:
    """With a sample file given for genotype files of ``prefix`` (a shared .fam/.psam,
    as UK Biobank ships one .fam for every chromosome), the files' own sample file
    (prefix + ``own_ext``), where there is one, must list the same IIDs in the same
    order: the genotypes are stored in its order, and any other would put each person's
    genotypes on someone else. CmixError naming both files and the first differing
    sample's position (no IDs)."""
    own = prefix.with_name(prefix.name + own_ext)
    if not own.is_file() or own.resolve() == Path(given_path).resolve():
        return
    ours = reader(own)["iid"].astype(str).to_numpy()
    theirs = given["iid"].astype(str).to_numpy()
    if len(ours) == len(theirs) and (ours == theirs).all():
        return
    n = min(len(ours), len(theirs))
    differ = np.flatnonzero(ours[:n] != theirs[:n])
    k = int(differ[0]) + 1 if len(differ) else n + 1
    raise CmixError(f"{given_path}: its samples are not those of {own} in the same order "
                    f"(sample {k} differs; {len(theirs)} against {len(ours)} samples); the "
                    f"genotypes are stored in {own.name}'s order, so another order would "
                    f"give people other people's genotypes. Give {own.name} itself, rewrite "
                    "the genotypes in the shared file's order (plink2 --indiv-sort f FILE), "
                    f"or move {own.name} away if the shared file is meant to replace it")
