"""How much a cohort's labels allow: linear references, and what a trained encoder keeps.

On a store written by ``benchmarks/train_learning.py cohort`` (tune on ``--cohort-seed 8``,
never on the reported cohort), for each budget and seed (the same labeled rows as
``cmix train``: ``cmix.learn.data.make_splits``), test accuracy of:

- ``logreg``: the ``logreg`` baseline's fit (``cmix.learn.linear.fit_logreg_cv``: L2, C by
  5-fold CV of the log-loss on all ``budget`` labeled rows) on the dosages standardised
  with the training rows' moments (missing -> mean), its default folds and C grid;
- ``pca{k}``: the same on the top k principal components fitted on all training rows
  (labeled and unlabeled): what an unsupervised linear representation keeps;
- ``all_labels``: logistic regression (C = 0.01) on every training row's label, once:
  the ceiling of a linear model on this trait.

With ``--runs DIR ...`` (finished cmix, cmix ablation, ae or vime runs on the same store),
also what each run's frozen encoder keeps: nearest class mean (cosine) and CV logistic
regression on the latent z of the labeled rows (the nearest class mean also scored on
the training labeled rows themselves, which the encoder saw with their labels), and
label-propagation pseudo-label accuracy on up to 5,000 unlabeled rows for k = 3, 10, 30,
100 neighbours; then, under "graphs", the pseudo-labels' accuracy on all unlabeled rows
for each space (the latent; 20 PCs of the inputs, fitted on the nodes without labels), k
(3, 10) and alpha (0.5, 0.9, 0.99, 0.999), on a graph whose nodes are the training labeled
rows (seeded), the validation rows and the unlabeled rows.

    python benchmarks/cohort_ceiling.py STORE [--budgets 200 1000] [--runs RUN_DIR ...]
"""

from __future__ import annotations

import argparse
import json
import warnings

import numpy as np

from cmix.learn.data import standardised_dosage
from cmix.learn.linear import fit_logreg_cv
from cmix.learn.config import DEFAULTS, PseudoLabels
from cmix.learn.data import make_splits
from cmix.store.read import column_moments
from cmix.store.read import open_store

SEEDS = [123, 127, 131, 137, 130]


def cv_logreg(x, y, n_classes: int, seed: int):
    """The logreg baseline's fit with its default folds and C grid."""
    return fit_logreg_cv(x, y, n_classes, DEFAULTS["logreg_folds"],
                         DEFAULTS["logreg_n_c"], seed)[0]


def linear_references(root, x, budgets, seeds) -> None:
    from sklearn.decomposition import PCA
    from sklearn.linear_model import LogisticRegression

    for budget in budgets:
        res: dict = {"logreg": [], "pca20": [], "pca50": [], "pca100": []}
        for seed in seeds:
            s = make_splits(root, budget, seed)
            lab, y, test = s.labeled, s.label, s.test
            train = np.sort(np.concatenate([lab, s.unlabeled]))
            res["logreg"].append(cv_logreg(x[lab], y[lab], s.n_classes, seed)
                                 .score(x[test], y[test]))
            for k in (20, 50, 100):
                pca = PCA(k, random_state=0).fit(x[train])
                m = cv_logreg(pca.transform(x[lab]), y[lab], s.n_classes, seed)
                res[f"pca{k}"].append(m.score(pca.transform(x[test]), y[test]))
        print(f"budget {budget}: " + ", ".join(
            f"{k} {np.mean(v):.4f} ± {np.std(v, ddof=1):.4f}" for k, v in res.items()), flush=True)
    s = make_splits(root, budgets[0], seeds[0])
    train = np.sort(np.concatenate([s.labeled, s.unlabeled]))
    m = LogisticRegression(C=0.01, max_iter=3000).fit(x[train], s.label[train])
    print(f"all_labels ({len(train)} rows): {m.score(x[s.test], s.label[s.test]):.4f}")


def encoder_probe(root, dosage: np.ndarray, run_dir: str) -> dict:
    """dosage: int8 (n_samples, n_snps), the whole store."""
    import torch

    from cmix.learn import methods
    from cmix.learn.labelprop import label_propagation
    from cmix.learn.predict import load_run

    run = load_run(run_dir)
    m = run["metrics"]
    fitted = methods.from_state_dict(run["parts"]["model"])
    s = make_splits(root, m["budget"], m["seed"], m["config"]["val_fraction"])
    z = fitted.encode(torch.from_numpy(dosage)).numpy()
    zn = z / np.linalg.norm(z, axis=1, keepdims=True).clip(1e-9)
    y, lab, test = s.label, s.labeled, s.test
    mean = np.stack([zn[lab][y[lab] == c].mean(0) for c in range(s.n_classes)])
    tl = s.train_labeled
    out = {"method": m["method"], "seed": m["seed"], "test": m["test"]["accuracy"],
           "nearest_mean": float(np.mean((zn[test] @ mean.T).argmax(1) == y[test])),
           "nearest_mean_labeled": float(np.mean((zn[tl] @ mean.T).argmax(1) == y[tl])),
           "logreg_z": float(cv_logreg(z[lab], y[lab], s.n_classes, m["seed"])
                             .score(z[test], y[test]))}
    su = np.random.default_rng(0).choice(s.unlabeled, min(5000, len(s.unlabeled)), replace=False)
    zz = torch.from_numpy(np.concatenate([zn[s.train_labeled], zn[su]]))
    n_l = len(s.train_labeled)
    for k in (3, 10, 30, 100):
        r = label_propagation(zz, np.arange(n_l), y[s.train_labeled], s.n_classes,
                              PseudoLabels(lp_k=k))
        out[f"lp_k{k}"] = float(np.mean(r.pseudo_label[n_l:] == y[su]))
    out["graphs"] = propagation_graphs(root, dosage, s, z)
    return out


def propagation_graphs(root, dosage: np.ndarray, s, z: np.ndarray) -> dict:
    """Pseudo-label accuracy on the unlabeled rows, by space, k and alpha. dosage: int8
    (n_samples, n_snps), the whole store; s: the run's splits; z: (n_samples, H) its
    latent. The PCs are of the nodes' dosages standardised with the nodes' moments
    (:func:`column_moments`, missing calls left out and set to the mean), as the
    trainer's input PCs are."""
    from dataclasses import replace

    from cmix.learn.data import standardised_pcs
    from cmix.learn.labelprop import graph_from_neighbours, knn_neighbours, propagate

    nodes = np.concatenate([s.train_labeled, s.validation, s.unlabeled])
    n_seeded, n_val = len(s.train_labeled), len(s.validation)
    pcs = standardised_pcs(dosage[nodes], *column_moments(root, nodes), 20, 0)[0]
    y = s.label[nodes]
    unl = slice(n_seeded + n_val, None)
    out = {}
    for space, f in (("latent", z[nodes]), ("pcs", pcs)):
        index, sim = knn_neighbours(f, 10, 4096)
        for k in (3, 10):
            w = graph_from_neighbours(index, sim, k)
            for alpha in (0.5, 0.9, 0.99, 0.999):
                r = propagate(w, np.arange(n_seeded), y[:n_seeded], s.n_classes,
                              replace(PseudoLabels(), lp_alpha=alpha))
                out[f"{space} k{k} alpha{alpha:g}"] = float(
                    np.mean(r.pseudo_label[unl] == y[unl]))
    return out


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("store")
    p.add_argument("--budgets", type=int, nargs="+", default=[200, 1000])
    p.add_argument("--seeds", type=int, nargs="+", default=SEEDS)
    p.add_argument("--runs", nargs="*", default=[])
    args = p.parse_args(argv)
    warnings.filterwarnings("ignore")       # sklearn's FutureWarnings on every CV fit
    root = open_store(args.store)
    dosage = np.asarray(root["call_dosage"][:])
    for run in args.runs:
        print(json.dumps(encoder_probe(root, dosage, run)), flush=True)
    train_rows = np.flatnonzero(np.asarray(root["sample_split"][:]) == 0)
    x = standardised_dosage(dosage, *column_moments(root, train_rows))
    linear_references(root, x, args.budgets, args.seeds)


if __name__ == "__main__":
    main()
