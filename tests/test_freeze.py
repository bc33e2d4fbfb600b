"""Every registered method's numbers on one small fixed store, held against a reference.

tests/data/freeze_metrics.json was produced by running this file as a script on each
kind of CPU:

    PYTHONPATH=$PWD python tests/test_freeze.py --write

It holds, per kind of CPU numerics (:func:`numerics`: the CPU's vendor and the vector
instructions torch's kernels use, which with MKL's dispatch decide a network's float
bits; the network runs of one store differed by up to 0.1 in a validation loss between
an AVX2 AMD and an AVX-512 Intel VM), for each method of
:data:`cmix.learn.methods.METHODS`, the run's test and validation metrics, its
pseudo-label summary and its test probabilities. The test trains every method again
(torch on one thread, CPU) and asks for the same accuracies exactly and every other
number to 1e-6: every method against the reference of this kind of CPU (skipped, saying
so, on a kind without one), the methods without a network against every reference. The
networks' references were recorded again when the seeds of a method began to train as
one group of models (on an AMD AVX-512 VM) and then on an Intel AVX-512 VM; the AMD
AVX2 kind keeps only the methods without a network, until someone records them on such
a CPU.
Then ``cmix predict`` on a PLINK file set of the store's test people (written from the
store's dosages, covariates from a .eigenvec) must give each run's test probabilities to
1e-6. A change that moves any of them changes a result of the pipeline; regenerate the
references only for a change meant to move them, and say so in its commit.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

REFERENCE = Path(__file__).resolve().parent / "data" / "freeze_metrics.json"
N_SAMPLES, N_SNPS, N_CLASSES, BUDGET, SEED = 400, 60, 3, 45, 3
CONFIG = {"hidden": 32, "d_proj": 16, "epochs": 2, "warmup_epochs": 1, "lp_every": 1,
          "batch_size": 64, "labeled_batch_size": 32, "pred_epochs": 5, "pred_patience": 3,
          "pred_hidden": 16, "pred_lr": 0.01, "vime_k": 2, "semi_pcs": 5, "gbdt_max_iter": 20,
          "logreg_n_c": 4, "logreg_folds": 3}
DIFFERENTIATION = 0.15
# networks whose early stopping kept the covariates-only start above: run again without
# covariates, so that their encoders reach the probabilities
WITHOUT_COVARIATES = ("ae", "vime", "cmix_selfsl")
EXACT = ("accuracy", "balanced_accuracy")


def numerics() -> str:
    """The kind of CPU numerics a reference holds, e.g. "AuthenticAMD AVX2"
    (:func:`cmix.learn.results.numerics_kind` less its "cpu")."""
    from cmix.learn.results import numerics_kind

    return numerics_kind("cpu").removeprefix("cpu ")


def references() -> dict:
    """numerics -> run name -> reference record."""
    return json.loads(REFERENCE.read_text())


def without_network() -> list[str]:
    """The methods whose numbers do not depend on the kind of CPU (no torch network:
    scikit-learn and numpy on one BLAS thread; measured equal to 1e-14 across the two
    kinds of references)."""
    from cmix.learn.methods import METHODS

    return [name for name, m in METHODS.items() if not m.network]


def write_freeze_store(folder: Path) -> tuple[Path, Path, Path]:
    """A 400 x 60 store of 3 classes with summary-statistic betas and two covariates
    (PCs from a .eigenvec), and a PLINK file set + .eigenvec of its test people.
    Returns (store, bfile prefix, eigenvec)."""
    from cmix.readers.plink import write_bfile
    from cmix.store.write import StoreContent, write_store

    rng = np.random.default_rng(12)
    n = N_SAMPLES
    label = np.arange(n) % N_CLASSES
    maf = rng.uniform(0.1, 0.5, N_SNPS)
    # each class its own allele frequencies at the first 30 SNPs: clusters a kNN graph sees
    shift = np.zeros((N_CLASSES, N_SNPS))
    shift[:, :30] = rng.normal(0, DIFFERENTIATION, (N_CLASSES, 30))
    freq = np.clip(maf + shift[label], 0.02, 0.98)
    dosage = rng.binomial(2, freq).astype(np.int8)
    dosage[rng.random(dosage.shape) < 0.01] = -1
    split = np.zeros(n, dtype=np.int8)
    for c in range(N_CLASSES):
        rows = np.flatnonzero(label == c)
        split[rng.choice(rows, len(rows) // 4, replace=False)] = 1
    beta = rng.normal(size=N_SNPS) * (rng.random(N_SNPS) < 0.5)
    cov = np.column_stack([0.5 * label + rng.normal(size=n), rng.normal(size=n)])
    ids = [f"s{i}" for i in range(n)]
    store = write_store(folder / "freeze.zarr", StoreContent(
        dosage=dosage, sample_id=ids, sample_label=label,
        sample_split=split, variant_id=[f"rs{j}" for j in range(N_SNPS)],
        variant_contig=["1"] * N_SNPS, variant_position=np.arange(N_SNPS) * 100 + 1,
        variant_allele=np.array([["A", "G"]] * N_SNPS), variant_beta=beta,
        sample_covariate=cov, covariate_name=["PC1", "PC2"],
        attrs={"trait": "freeze", "class_names": [f"c{c}" for c in range(N_CLASSES)],
               "covariates": {"spec": {"pcs": 2, "pcs_from": "eigenvec"},
                              "names": ["PC1", "PC2"]}}))
    test = np.flatnonzero(split == 1)
    fam = pd.DataFrame({"fid": [ids[i] for i in test], "iid": [ids[i] for i in test],
                        "father": "0", "mother": "0", "sex": 0, "phenotype": -9})
    bim = pd.DataFrame({"chrom": "1", "variant_id": [f"rs{j}" for j in range(N_SNPS)],
                        "cm": 0.0, "pos": np.arange(N_SNPS) * 100 + 1, "a1": "G", "a2": "A"})
    write_bfile(folder / "test_people", dosage[test].T.copy(), fam, bim)
    eigenvec = folder / "test_people.eigenvec"
    pd.DataFrame({"#FID": fam["fid"], "IID": fam["iid"], "PC1": cov[test, 0],
                  "PC2": cov[test, 1]}).to_csv(eigenvec, sep="\t", index=False,
                                               float_format="%.17g")
    return store, folder / "test_people", eigenvec


def run_every_method(folder: Path) -> dict:
    """run name (the method's, or "<method> without covariates") -> {"metrics": test/validation/pseudo-label record, "prob": test
    probabilities of the run, "predicted": those of ``cmix predict``}."""
    import torch

    from cmix.cli import main
    from cmix.learn.harness import train_run
    from cmix.learn.methods import METHODS

    store, bfile, eigenvec = write_freeze_store(folder)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    out = {}
    try:
        runs = [(name, name, CONFIG) for name in METHODS] + [
            (f"{name} without covariates", name, {**CONFIG, "covariates": False})
            for name in WITHOUT_COVARIATES]
        for name, method, config in runs:
            run = folder / "runs" / name.replace(" ", "_")
            m = train_run(store, BUDGET, SEED, run, method=method, config=config, device="cpu")
            prob = np.load(run / "predictions.npz")["prob"]
            tsv = folder / f"{name.replace(' ', '_')}.predicted.tsv"
            assert main(["predict", "--run", str(run), "--bfile", str(bfile), "--out", str(tsv)]
                        + (["--eigenvec", str(eigenvec)] if config.get("covariates", True) else [])) == 0
            table = pd.read_csv(tsv, sep="\t")
            out[name] = {"metrics": {k: m[k] for k in ("test", "validation", "pseudo_labels")},
                         "prob": prob.tolist(),
                         "predicted": table.filter(like="prob_").to_numpy().tolist()}
    finally:
        torch.set_num_threads(threads)
    return out


def assert_same(got, want, where: str) -> None:
    """Accuracies equal; other numbers within 1e-6; everything else equal."""
    if isinstance(want, dict):
        assert isinstance(got, dict) and sorted(got) == sorted(want), (where, got, want)
        for k in want:
            assert_same(got[k], want[k], f"{where}.{k}") if k not in EXACT else \
                (_exact(got[k], want[k], f"{where}.{k}"))
    elif isinstance(want, list):
        assert isinstance(got, list) and len(got) == len(want), (where, got, want)
        for i, (g, w) in enumerate(zip(got, want)):
            assert_same(g, w, f"{where}[{i}]")
    elif isinstance(want, float) and not isinstance(want, bool):
        assert isinstance(got, (int, float)) and abs(got - want) <= 1e-6, (where, got, want)
    else:
        assert got == want, (where, got, want)


def _exact(got, want, where):
    assert got == want, (where, got, want)


@pytest.fixture(scope="module")
def frozen(tmp_path_factory):
    return run_every_method(tmp_path_factory.mktemp("freeze"))


def test_each_reference_covers_every_method():
    """Every kind of CPU holds the methods without a network; a kind recorded with the
    current trainer holds every run (a kind whose networks predate it keeps only the
    others, which its CPU still reproduces)."""
    from cmix.learn.methods import METHODS

    refs = references()
    every = sorted([*METHODS, *(f"{name} without covariates" for name in WITHOUT_COVARIATES)])
    assert len(refs) >= 2, sorted(refs)
    for kind, want in refs.items():
        assert sorted(want) in (every, sorted(without_network())), kind
    assert any(sorted(want) == every for want in refs.values())


def _assert_reference(frozen, want: dict, names, kind: str) -> None:
    for name in names:
        ref = want[name]
        assert_same(frozen[name]["metrics"], ref["metrics"], f"{kind}: {name}")
        np.testing.assert_allclose(frozen[name]["prob"], ref["prob"], rtol=0, atol=1e-6,
                                   err_msg=f"{kind}: {name}")


def test_metrics_and_probabilities_are_this_cpu_s_reference(frozen):
    refs, kind = references(), numerics()
    with_networks = sorted(k for k, v in refs.items() if len(v) > len(without_network()))
    if kind not in with_networks:
        pytest.skip(f"no reference of the networks for this kind of CPU ({kind}; there are "
                    f"{', '.join(with_networks)}): record one with "
                    "PYTHONPATH=$PWD python tests/test_freeze.py --write")
    _assert_reference(frozen, refs[kind], list(refs[kind]), kind)


def test_methods_without_a_network_are_every_reference(frozen):
    for kind, want in references().items():
        _assert_reference(frozen, want, without_network(), kind)


def test_predict_reproduces_every_method_s_test_probabilities(frozen):
    for name, run in frozen.items():
        np.testing.assert_allclose(run["predicted"], run["prob"], rtol=0, atol=1e-6,
                                   err_msg=name)


def test_a_network_that_keeps_the_covariates_start_is_the_covariates_baseline(frozen):
    """When early stopping keeps the untrained head (the covariates-only start, epoch 0)
    and the MLP head stays (no linear probe chosen), the run's model is the covariates
    baseline's: the start refitted on every labeled row
    (training and validation), as the ``covariates`` method fits it, so its test
    probabilities equal that method's (float32 head against float64 scikit-learn)."""
    kept = [name for name, run in frozen.items()
            if (run["metrics"]["validation"] or {}).get("best_epoch") == 0
            and run["metrics"]["validation"].get("head", "mlp") == "mlp"]
    assert len(kept) >= 2, kept          # the store makes several networks keep the start
    for name in kept:
        np.testing.assert_allclose(frozen[name]["prob"], frozen["covariates"]["prob"],
                                   rtol=0, atol=1e-6, err_msg=name)


if __name__ == "__main__":
    import tempfile

    if sys.argv[1:] != ["--write"]:
        sys.exit("usage: PYTHONPATH=$PWD python tests/test_freeze.py --write")
    with tempfile.TemporaryDirectory() as tmp:
        result = run_every_method(Path(tmp))
    for record in result.values():
        del record["predicted"]          # the test holds predict to the run's own "prob"
    refs = references() if REFERENCE.exists() else {}
    refs[numerics()] = result
    REFERENCE.parent.mkdir(exist_ok=True)
    REFERENCE.write_text(json.dumps(refs, indent=1, sort_keys=True) + "\n")
    print(f"wrote the {numerics()} reference in {REFERENCE}")
