"""Does a frozen encoder memorise the labeled rows it was pre-trained with?

The label-aware terms of pre-training (the supervised contrastive loss and within-class
mixup over the training labeled rows) see those rows' labels; the validation rows' labels
they never see. A head is then fitted on the latent of the training labeled rows. This
script measures, on finished runs of ``benchmarks/train_learning.py``, how far the latent
of those rows is from the latent of rows the encoder has not seen labeled, against a
reference with no label-aware training measured in the same run: the leading principal
components of the training split's genotypes (``pca_logreg``'s features).

For every run (one seed and budget of a method with a frozen encoder) and for the PCs of
the same splits, with L2 logistic regression (C by 5-fold CV of the log-loss within the
rows it is fitted on, :func:`cmix.learn.linear.fit_logreg_cv`, features standardised
with those rows' moments):

- ``cv``: the CV accuracy of the probe on the training labeled rows (held-out folds of
  rows whose labels pre-training used);
- ``test``: the test accuracy of that probe (fitted on the training labeled rows);
- ``test_val``: the test accuracy of a probe fitted on the validation rows alone (fewer
  rows, none seen labeled by the encoder).

``cv - test`` is the optimism of a CV over memorised rows (near 0 for the PCs); ``test_val
- test`` what a row the encoder has not seen labeled is worth against one it has, per
row fewer. The run's own test accuracy (its chosen head, refitted on every labeled row)
is printed beside them. Test rows are read only to score.

    python benchmarks/memorisation.py DIR [DIR ...] [--methods cmix_selfsl cmix_paper]

DIR: a ``train_learning.py --out`` folder (its store, ``*.zarr``, and run folders
``METHOD_bBUDGET_sSEED``).
"""

from __future__ import annotations

import argparse
import glob
import os
import re
import warnings

import numpy as np

from cmix.store.read import column_moments, open_store
from cmix.learn.config import DEFAULTS
from cmix.learn.data import make_splits, project_pcs, standardised_pcs
from cmix.learn.linear import fit_logreg_cv

N_PCS = 20
FOLDS = 5


def probe_scores(x: np.ndarray, s, seed: int) -> dict:
    """cv, test and test_val (see the module docstring) of features x (n_samples, d) for
    the splits ``s``."""
    from sklearn.model_selection import StratifiedKFold, cross_val_predict

    def fit(rows):
        mu, sd = x[rows].mean(0), x[rows].std(0) + 1e-9
        y = s.label[rows]
        model, _, k, _ = fit_logreg_cv((x[rows] - mu) / sd, y, s.n_classes, FOLDS,
                                       DEFAULTS["logreg_n_c"], seed)
        return model, mu, sd, k

    def test_accuracy(fitted):
        model, mu, sd, _ = fitted
        return float(np.mean(model.predict((x[s.test] - mu) / sd) == s.label[s.test]))

    tl = s.train_labeled
    on_train = fit(tl)
    model, mu, sd, k = on_train
    cv_pred = cross_val_predict(model, (x[tl] - mu) / sd, s.label[tl],
                                cv=StratifiedKFold(k, shuffle=True, random_state=seed))
    out = {"cv": float(np.mean(cv_pred == s.label[tl])), "test": test_accuracy(on_train)}
    val_counts = np.bincount(s.label[s.validation], minlength=s.n_classes)
    out["test_val"] = (test_accuracy(fit(s.validation)) if val_counts.min() >= 2
                       else float("nan"))      # printed as "-"
    return out


def mean_or_dash(values: list[float]) -> str:
    """The mean to 3 decimals, "-" when a value is missing (a class with fewer than 2
    validation rows leaves no cross-validation to fit the validation-rows probe)."""
    return "-" if np.isnan(values).any() else f"{np.mean(values):.3f}"


def run_dirs(folder: str, methods: list[str]) -> list[tuple[str, int, int, str]]:
    """(method, budget, seed, path) of the finished runs of ``methods`` in ``folder``."""
    found = []
    for path in sorted(glob.glob(os.path.join(folder, "*_b*_s*"))):
        m = re.fullmatch(r"(.+)_b(\d+)_s(\d+)", os.path.basename(path))
        if m and m[1] in methods and os.path.isfile(os.path.join(path, "metrics.json")):
            found.append((m[1], int(m[2]), int(m[3]), path))
    return found


def main(argv=None):
    import torch

    from cmix.learn import methods as registry
    from cmix.learn.predict import load_run

    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("folders", nargs="+")
    p.add_argument("--methods", nargs="+", default=["cmix_selfsl", "cmix_paper"])
    args = p.parse_args(argv)
    warnings.filterwarnings("ignore")       # sklearn's FutureWarnings on every CV fit
    torch.set_num_threads(1)
    for folder in args.folders:
        stores = glob.glob(os.path.join(folder, "*.zarr"))
        if len(stores) != 1:
            raise SystemExit(f"{folder}: expected one store (*.zarr), found {len(stores)}")
        root = open_store(stores[0])
        dosage = np.asarray(root["call_dosage"][:])
        train = np.flatnonzero(np.asarray(root["sample_split"][:]) == 0)
        moments = column_moments(root, train)
        pca = standardised_pcs(dosage[train], *moments, N_PCS, 0)[1]
        pcs = project_pcs(pca, dosage, *moments)      # every row on the training rows' axes
        runs = run_dirs(folder, args.methods)
        table: dict = {}
        for i, (method, budget, seed, path) in enumerate(runs, 1):
            run = load_run(path)
            m = run["metrics"]
            s = make_splits(root, budget, seed, m["config"]["val_fraction"])
            fitted = registry.from_state_dict(run["parts"]["model"])
            z = fitted.encode(torch.from_numpy(dosage)).float().numpy().astype(np.float64)
            row = {"run": m["test"]["accuracy"], **{f"latent_{k}": v for k, v in
                                                    probe_scores(z, s, seed).items()}}
            key = ("pcs", budget, seed)
            if key not in table:
                table[key] = {f"pcs_{k}": v for k, v in probe_scores(pcs, s, seed).items()}
            row.update(table[key])
            table[(method, budget, seed)] = row
            print(f"[{i}/{len(runs)}] {os.path.basename(path)}: " + ", ".join(
                f"{k} {v:.3f}" for k, v in row.items()), flush=True)
        print(f"\n{folder}: means over seeds (n_train / n_val labeled rows per run)")
        print("| method | budget | seeds | run | latent cv | latent test | latent test_val "
              "| PCs cv | PCs test | PCs test_val |")
        print("|---|---|---|---|---|---|---|---|---|---|")
        for method in args.methods:
            for budget in sorted({b for (mm, b, _) in table if mm == method}):
                rows = [v for (mm, b, _), v in table.items() if mm == method and b == budget]
                mean = {k: mean_or_dash([r[k] for r in rows]) for k in rows[0]}
                print(f"| {method} | {budget} | {len(rows)} | " + " | ".join(
                    mean[k] for k in ("run", "latent_cv", "latent_test", "latent_test_val",
                                      "pcs_cv", "pcs_test", "pcs_test_val")) + " |",
                      flush=True)


if __name__ == "__main__":
    main()
