"""Shared fixtures: simulated cohorts made by cmix.simulate. The only checked-in data
are the format authors' reference files in tests/data/reference/ (see its README)."""

import shutil

import pytest

from cmix.simulate.balding_nichols import simulate_cohort


@pytest.fixture(scope="session")
def cohort(tmp_path_factory):
    """A simulated 2,000-sample x 4,000-SNP cohort folder (see cmix.simulate).

    Few SNPs: KING kinship is noisy here (sd ~0.03 for unrelated pairs); use
    ``cohort_dense`` where relatives must separate cleanly from noise.
    """
    out = tmp_path_factory.mktemp("cohort")
    simulate_cohort(out, n_samples=2000, n_variants=4000, seed=7)
    return out


@pytest.fixture(scope="session")
def cohort_dense(tmp_path_factory):
    """1,000 samples x 20,000 SNPs: enough SNPs for relatives to stand out in KING."""
    out = tmp_path_factory.mktemp("cohort_dense")
    simulate_cohort(out, n_samples=1000, n_variants=20000, n_discovery=2000, seed=11)
    return out


def plink2_available() -> bool:
    return shutil.which("plink2") is not None


requires_plink2 = pytest.mark.skipif(not plink2_available(), reason="plink2 not installed")
