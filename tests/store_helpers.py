"""Small simulated per-trait stores for the training tests (written with store.write_store),
and a run's training log as they compare it."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from cmix.store.write import StoreContent, write_store


def simulate_labels(n_samples: int, n_snps: int, n_classes: int = 2, n_causal: int = 20,
                    h2: float = 0.6, missing: float = 0.01, seed: int = 0):
    """Independent SNPs (MAF U(0.05, 0.5)), a liability h2 from ``n_causal`` SNPs, classes
    by liability quantiles. Returns dosage int8 (n, m) with -1 missing, label int16 (n,)."""
    rng = np.random.default_rng(seed)
    maf = rng.uniform(0.05, 0.5, n_snps)
    dosage = rng.binomial(2, maf, size=(n_samples, n_snps)).astype(np.int8)
    causal = rng.choice(n_snps, min(n_causal, n_snps), replace=False)
    beta = rng.normal(size=len(causal))
    g = (dosage[:, causal] - 2 * maf[causal]) @ beta
    g = (g - g.mean()) / g.std()
    liab = np.sqrt(h2) * g + np.sqrt(1 - h2) * rng.normal(size=n_samples)
    cuts = np.quantile(liab, np.linspace(0, 1, n_classes + 1)[1:-1])
    label = np.searchsorted(cuts, liab).astype(np.int16)
    dosage[rng.random(dosage.shape) < missing] = -1
    return dosage, label


def write_test_store(path, dosage, label, *, test_fraction: float = 0.25, seed: int = 0,
                     class_names=None, sample_chunk: int | None = None, trait: str = "toy",
                     encoding: str = "hard calls"):
    """A complete store of ``dosage`` (n, m) / ``label`` (n,) with a stratified random
    test split of ``test_fraction``. encoding "fractional": dosage holds the uint8 codes
    of :func:`cmix.store.schema.quantise_dosage`."""
    rng = np.random.default_rng(seed + 99)
    n, m = dosage.shape
    split = np.zeros(n, dtype=np.int8)
    for c in np.unique(label):
        rows = np.flatnonzero(label == c)
        split[rng.choice(rows, int(round(test_fraction * len(rows))), replace=False)] = 1
    n_classes = int(label.max()) + 1
    return write_store(path, StoreContent(
        dosage=dosage, sample_id=[f"s{i}" for i in range(n)], sample_label=label,
        sample_split=split, variant_id=[f"rs{j}" for j in range(m)],
        variant_contig=["1"] * m, variant_position=np.arange(m) * 100 + 1,
        variant_allele=np.array([["A", "G"]] * m), variant_beta=np.zeros(m),
        attrs={"trait": trait, "class_names": class_names or [f"c{c}" for c in range(n_classes)],
               "split": {"seed": seed, "test_fraction": test_fraction}}),
        sample_chunk=sample_chunk, encoding=encoding)


def log_without_seconds(run_dir) -> list[dict]:
    """The records of a run folder's train_log.jsonl less their wall times ("seconds"):
    what two runs that should be the same run must agree on."""
    return [{k: v for k, v in json.loads(line).items() if k != "seconds"}
            for line in (Path(run_dir) / "train_log.jsonl").read_text().splitlines()]
