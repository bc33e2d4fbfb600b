"""Learning benchmark: Contrastive Mixup vs the supervised MLP on the same labels.

Two data sets no one here tuned for:

- digits: scikit-learn's bundled handwritten digits (1,797 x 64, values 0..16, offline),
  stored with the ``dosage`` (continuous) encoding; 25% stratified test split; 10% of
  the data (135 rows, ~10% of the training split) labeled.
- cohort: simulated genotypes with LD (blocks of 20 SNPs from a thresholded AR(1)
  Gaussian, rho 0.8), >= 20,000 samples x 1,000 SNPs, a binary trait with liability
  heritability 0.3 (100 causal SNPs, median split -> balanced classes); budgets 200 and 1,000;
  ``encoding: dosage`` and ``hidden: null`` (the paper's width) for both methods.

Each (method, budget) runs over seeds 123 127 131 137 130 in one
``cmix.learn.harness.train_seeds`` call (the same code as ``cmix train --seed ...``: a
network method's seeds train as one group of models), and the script prints mean and sd of test accuracy,
balanced accuracy and AUROC, and writes every run's metrics to ``--out``/results.json.

    python benchmarks/train_learning.py digits --out /tmp/bench_digits
    python benchmarks/train_learning.py cohort --out /tmp/bench_cohort [--n-samples 20000]
    python benchmarks/train_learning.py cohort --out /tmp/tune --cohort-seed 8 --budgets 200 \
        --seeds 123 127 131 --config overrides.json        # tuning: another cohort

Equal tuning budgets: ``--grid benchmarks/tuning_grid.json`` runs every configuration the
grid lists for each method (the same number for every network method) on a tuning data
set (``digits_tune``: the reported digits store's training rows with a test split of their
own; or another cohort seed), writes every configuration's score to ``tuning.json`` and the
best configuration per method (mean test accuracy of the tuning split over the seeds) to
``chosen.json``. ``--chosen chosen.json`` then runs the reported data set with each
method's chosen configuration (the cmix ablations take cmix's):

    python benchmarks/train_learning.py digits_tune --out /tmp/tune_digits --seeds 1 2 3 \
        --budgets 101 --grid benchmarks/tuning_grid.json --methods mlp ae vime manifold_mixup cmix
    python benchmarks/train_learning.py digits --out /tmp/digits --chosen /tmp/tune_digits/chosen.json \
        --seeds 123 127 131 137 130 139 149 151 157 163 --methods mlp ae vime manifold_mixup \
        cmix_selfsl cmix_selfsl_pl cmix logreg pca_logreg label_spreading gbdt
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from store_helpers import write_test_store  # noqa: E402

from cmix.learn.config import read_config_file  # noqa: E402

SEEDS = [123, 127, 131, 137, 130]
# the ten seeds of every headline comparison (tuning uses others: 1, 2, 3, ...)
SEEDS10 = SEEDS + [139, 149, 151, 157, 163]
# digits: continuous pixel values (dosage encoding), longer predictor training
DIGITS_CONFIG = {"encoding": "dosage", "epochs": 30, "pred_epochs": 200, "pred_patience": 20}


def ld_genotypes(n_samples: int, n_snps: int, seed: int, block: int = 20, rho: float = 0.8):
    """int8 (n_samples, n_snps) dosages with LD inside blocks of ``block`` SNPs."""
    rng = np.random.default_rng(seed)
    maf = rng.uniform(0.05, 0.5, n_snps)
    from scipy.stats import norm
    thr = norm.ppf(1 - maf)
    out = np.empty((n_samples, n_snps), dtype=np.int8)
    for s in range(0, n_snps, block):
        e = min(s + block, n_snps)
        dos = np.zeros((n_samples, e - s), dtype=np.int8)
        for _hap in range(2):
            z = np.empty((n_samples, e - s))
            z[:, 0] = rng.normal(size=n_samples)
            for j in range(1, e - s):
                z[:, j] = rho * z[:, j - 1] + np.sqrt(1 - rho ** 2) * rng.normal(size=n_samples)
            dos += (z > thr[s:e]).astype(np.int8)
        out[:, s:e] = dos
    return out


def cohort_store(path: Path, n_samples: int, n_snps: int = 1000, h2: float = 0.3,
                 n_causal: int = 100, seed: int = 7) -> Path:
    if path.exists():
        return path
    rng = np.random.default_rng(seed + 1)
    dosage = ld_genotypes(n_samples, n_snps, seed)
    causal = rng.choice(n_snps, n_causal, replace=False)
    g = dosage[:, causal].astype(float)
    g = (g - g.mean(0)) / g.std(0).clip(1e-9)
    g = g @ rng.normal(size=n_causal)
    g = (g - g.mean()) / g.std()
    liability = np.sqrt(h2) * g + np.sqrt(1 - h2) * rng.normal(size=n_samples)
    label = (liability > np.median(liability)).astype(np.int16)
    dosage[rng.random(dosage.shape) < 0.005] = -1
    write_test_store(path, dosage, label, test_fraction=0.2, seed=seed, trait="sim_binary",
                     class_names=["control", "case"])
    return path


STRUCTURED_POPULATIONS = [
    {"name": "pop_a", "code": 1, "share": 0.40, "fst": 0.0},
    {"name": "pop_b", "code": 2, "share": 0.25, "fst": 0.01},
    {"name": "pop_c", "code": 3, "share": 0.15, "fst": 0.03},
    {"name": "pop_d", "code": 4, "share": 0.12, "fst": 0.08},
    {"name": "pop_e", "code": 5, "share": 0.05, "fst": 0.15},
    {"name": "admixed_a_e", "code": 6, "share": 0.03, "admixed_from": ["pop_a", "pop_e"]},
]


def population_store(path: Path, sim: Path, truth: dict, n_snps: int, seed: int,
                     class_names: list, codes: list) -> Path:
    """Label = population (phenotype field 21000, code -> class by ``codes``) from a
    simulated cohort folder ``sim``: one of each related pair dropped, ``n_snps`` SNPs
    drawn at random among those with MAF >= 1% and < 5% missing calls, 20% stratified
    test split. The unlabeled rows carry the class structure."""
    import pandas as pd

    from cmix.readers import plink

    bf = plink.open_bfile(sim / "genotypes")
    ids = bf.fam.iid.astype(str).to_numpy()
    drop = {b for _, b, _ in truth["related_pairs"]}
    keep = np.flatnonzero([i not in drop for i in ids])
    geno = plink.read_genotypes(bf, sample_idx=keep).T        # (n, variants) A1 counts
    called = geno >= 0
    freq = np.where(called, geno, 0).sum(0) / (2 * called.sum(0).clip(1))
    ok = np.flatnonzero((np.minimum(freq, 1 - freq) >= 0.01) & (called.mean(0) > 0.95))
    rng = np.random.default_rng(seed + 2)
    cols = np.sort(rng.choice(ok, min(n_snps, len(ok)), replace=False))
    pheno = pd.read_csv(sim / "phenotypes.tsv", sep="\t", dtype={"eid": str}).set_index("eid")
    code = pheno.loc[ids[keep], "f.21000.0.0"].to_numpy()
    label = np.searchsorted(codes, code).astype(np.int16)
    write_test_store(path, geno[:, cols].astype(np.int8), label, test_fraction=0.2, seed=seed,
                     trait="population", class_names=class_names)
    shutil.rmtree(sim)
    return path


def structured_store(path: Path, n_samples: int = 2500, n_snps: int = 1000,
                     n_variants: int = 4000, seed: int = 7) -> Path:
    """Label = population on ``cmix simulate`` with :data:`STRUCTURED_POPULATIONS` (Hudson
    Fst 0.01-0.15 to pop_a, unequal sizes, one admixed group): :func:`population_store`."""
    from cmix.simulate.balding_nichols import simulate_cohort

    if path.exists():
        return path
    sim = path.parent / f"{path.stem}_cohort"
    truth = simulate_cohort(sim, n_samples=n_samples, n_variants=n_variants, n_discovery=200,
                            seed=seed, populations=STRUCTURED_POPULATIONS)
    return population_store(path, sim, truth, n_snps, seed,
                            [p["name"] for p in STRUCTURED_POPULATIONS],
                            [p["code"] for p in STRUCTURED_POPULATIONS])


#: coalescent cohorts: stdpopsim HomSap model and people per population
ANCESTRY_MODELS = {
    "admixture": ("AmericanAdmixture_4B18", "AFR:500,EUR:1500,ASIA:500,ADMIX:500"),
    "ooa": ("OutOfAfrica_3G09", "YRI:400,CEU:1800,CHB:800"),
}


def ancestry_store(path: Path, model: str = "admixture", n_snps: int = 900, seed: int = 7,
                   n_variants: int = 3000) -> Path:
    """Label = population on coalescent haplotypes (``cmix simulate --haplotypes
    coalescent``, :data:`ANCESTRY_MODELS`: real LD, allele frequency spectrum, continental
    Fst and admixture tracts from the published demographic model; relatives, missing
    calls and QC failures on top): :func:`population_store` with ``n_snps`` SNPs, as
    the held-out real check had (~900 QC'd SNPs). Needs the [sim] extra."""
    from cmix.simulate.coalescent import CoalescentDesign, simulate_coalescent_cohort

    if path.exists():
        return path
    model_id, populations = ANCESTRY_MODELS[model]
    sim = path.parent / f"{path.stem}_cohort"
    design = CoalescentDesign(model=model_id, populations=populations, n_variants=n_variants,
                              n_discovery=200)
    truth = simulate_coalescent_cohort(sim, design, seed=seed)
    names = sorted(truth["classes"], key=lambda k: truth["classes"][k][0])
    return population_store(path, sim, truth, n_snps, seed, names,
                            [truth["classes"][n][0] for n in names])


def pc_covariate_store(src: Path, n_pcs: int) -> Path:
    """A copy of store ``src`` with ``n_pcs`` principal components of its genotypes as
    covariates, fitted on the training split's rows only (labeled and unlabeled alike; no
    label, no test row), the test rows projected on the same axes: ancestry PCs as a user
    stores them with ``cmix store --covariates`` (UK Biobank's are fitted on everyone,
    test people included; these are stricter). Written beside ``src`` as
    ``<name>_pcs<n>.zarr``; same rows, labels and split."""
    from functools import partial

    from cmix.store.read import column_moments, open_store, store_text
    from cmix.store.write import StoreContent, write_store
    from cmix.learn.data import project_pcs, standardised_pcs

    path = src.with_name(f"{src.stem}_pcs{n_pcs}.zarr")
    if path.exists():
        return path
    root = open_store(src)
    text = partial(store_text, root)
    dosage = np.asarray(root["call_dosage"][:])
    split = np.asarray(root["sample_split"][:])
    train = np.flatnonzero(split == 0)
    mean, sd = column_moments(root, train)
    _, pca = standardised_pcs(dosage[train], mean, sd, n_pcs, seed=0)
    contigs = text("contig_id")
    attrs = {k: root.attrs[k] for k in ("trait", "class_names", "split")}
    attrs["covariates"] = {"names": [f"PC{i + 1}" for i in range(n_pcs)],
                           "pcs_from": "the training split's genotypes"}
    return write_store(path, StoreContent(
        dosage=dosage, sample_id=text("sample_id"),
        sample_label=np.asarray(root["sample_label"][:]), sample_split=split,
        variant_id=text("variant_id"),
        variant_contig=contigs[np.asarray(root["variant_contig"][:])],
        variant_position=np.asarray(root["variant_position"][:]),
        variant_allele=text("variant_allele"),
        variant_beta=np.asarray(root["variant_beta"][:]), attrs=attrs,
        sample_covariate=project_pcs(pca, dosage, mean, sd),
        covariate_name=attrs["covariates"]["names"]))


def digits_store(path: Path, tuning: bool = False) -> Path:
    """scikit-learn's digits, 25% stratified test split (seed 0). ``tuning``: the
    reported store's training rows only, with a test split of their own (25%, seed 1),
    so that tuning never sees the reported test rows."""
    from sklearn.datasets import load_digits

    if path.exists():
        return path
    from cmix.store.schema import quantise_dosage

    x, y = load_digits(return_X_y=True)
    if tuning:
        split = np.zeros(len(y), dtype=bool)      # the reported store's test rows
        rng = np.random.default_rng(0 + 99)
        for c in np.unique(y):
            rows = np.flatnonzero(y == c)
            split[rng.choice(rows, int(round(0.25 * len(rows))), replace=False)] = True
        x, y = x[~split], y[~split]
    write_test_store(path, quantise_dosage(x / 8.0), y.astype(np.int16), test_fraction=0.25,
                     seed=1 if tuning else 0, trait="digits",
                     class_names=[str(d) for d in range(10)], encoding="fractional")
    return path


#: the method whose chosen configuration a method without its own entry in chosen.json takes
TUNED_AS = {"cmix_selfsl": "cmix", "cmix_selfsl_pl": "cmix", "cmix_random_mix": "cmix",
            "cmix_paper": "cmix", "cmix_paper_pl": "cmix"}


def _one_cell(args):
    """Every seed of one (budget, method) cell in one train_seeds call (the network
    methods' seeds train as one group of models), one torch thread."""
    store, runs, budget, method, config = args
    import torch

    from cmix.learn.harness import train_seeds

    torch.set_num_threads(1)
    for run_dir in runs.values():
        if not (run_dir / "metrics.json").exists():  # a finished run is read back as it is
            shutil.rmtree(run_dir, ignore_errors=True)
    t = time.perf_counter()
    out = train_seeds(store, budget, runs, method=method, config=config, device="cpu",
                      threads=1)
    for m in out:
        m["seconds"] = (time.perf_counter() - t) / len(out)
    return out


def _pool(jobs: int):
    """A process pool of ``jobs`` fresh interpreters (spawned, not forked: a worker forked
    from a parent that has imported torch and dask can hang on a lock held by one of the
    parent's threads)."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    return ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("spawn"))


def run_grid(store: Path, out: Path, budgets, methods, seeds, config: dict,
             jobs: int = 1, per_method: dict | None = None) -> list:
    """Every (budget, method) cell's seeds in one ``train_seeds`` call (:func:`_one_cell`),
    ``jobs`` cells at a time (one torch thread each); results in order, also written to
    out/results.json.
    ``per_method``: method -> config overrides on top of ``config`` (a method absent from
    it takes the entry of :data:`TUNED_AS`'s method, else none)."""
    per_method = per_method or {}

    def config_of(method):
        return {**config, **per_method.get(method, per_method.get(TUNED_AS.get(method), {}))}

    tasks = [(store, {seed: out / f"{method}_b{budget}_s{seed}" for seed in seeds}, budget,
              method, config_of(method)) for budget in budgets for method in methods]
    results = []
    with _pool(jobs) as pool:
        for cell in pool.map(_one_cell, tasks):
            for m in cell:
                results.append(m)
                print(f"{m['method']:15s} budget {m['budget']:5d} seed {m['seed']}: acc "
                      f"{m['test']['accuracy']:.4f} bal {m['test']['balanced_accuracy']:.4f} "
                      f"pl {(m['pseudo_labels'] or {}).get('used', '-')} head "
                      f"{(m['validation'] or {}).get('head', '-')} "
                      f"({m['seconds']:.0f} s a run)", flush=True)
            (out / "results.json").write_text(json.dumps(results, indent=1))
    return results


def tune(store: Path, out: Path, budgets, methods, seeds, config: dict, grid: dict,
         jobs: int = 1) -> dict:
    """Every configuration of ``grid`` (method -> list of config overrides) for every
    method in ``methods``, over ``seeds`` and ``budgets``. Writes out/tuning.json (one
    record per method and configuration: overrides, mean and sd of test accuracy of the
    tuning split) and out/chosen.json (method -> the overrides with the best mean), and
    returns the latter. Ties go to the earlier configuration (the grid lists defaults
    first)."""
    tasks, keys = [], []
    for method in methods:
        for i, overrides in enumerate(grid[method]):
            for budget in budgets:
                tasks.append((store, {seed: out / f"{method}_c{i}_b{budget}_s{seed}"
                                      for seed in seeds}, budget, method,
                              {**config, **overrides}))
                keys.append((method, i))
    scores: dict = {}
    with _pool(jobs) as pool:
        for key, cell in zip(keys, pool.map(_one_cell, tasks)):
            for m in cell:
                scores.setdefault(key, []).append(m["test"]["accuracy"])
                print(f"{key[0]:15s} config {key[1]} budget {m['budget']} seed {m['seed']}: "
                      f"acc {m['test']['accuracy']:.4f} ({m['seconds']:.0f} s a run)",
                      flush=True)
    records, chosen = [], {}
    for method in methods:
        best = None
        for i, overrides in enumerate(grid[method]):
            acc = np.array(scores[(method, i)])
            records.append({"method": method, "config": i, "overrides": overrides,
                            "mean_accuracy": float(acc.mean()),
                            "sd_accuracy": float(acc.std(ddof=1)) if len(acc) > 1 else 0.0,
                            "n_runs": len(acc)})
            if best is None or acc.mean() > best[0]:
                best = (acc.mean(), overrides)
        chosen[method] = best[1]
    (out / "tuning.json").write_text(json.dumps(records, indent=1))
    (out / "chosen.json").write_text(json.dumps(chosen, indent=1))
    lines = ["| method | config | overrides | tuning accuracy |", "|---|---|---|---|"]
    for r in records:
        mark = " (chosen)" if r["overrides"] == chosen[r["method"]] else ""
        lines.append(f"| {r['method']} | {r['config']} | {json.dumps(r['overrides'])} | "
                     f"{r['mean_accuracy']:.4f} ± {r['sd_accuracy']:.4f}{mark} |")
    print("\n".join(lines))
    return chosen


def summarise(results: list) -> str:
    lines = ["| budget | method | n seeds | accuracy | balanced accuracy | AUROC | pseudo-label acc |",
             "|---|---|---|---|---|---|---|"]
    keys = sorted({(r["budget"], r["method"]) for r in results})
    for budget, method in keys:
        rs = [r for r in results if r["budget"] == budget and r["method"] == method]

        def ms(vals):
            vals = [v for v in vals if v is not None]
            return f"{np.mean(vals):.4f} ± {np.std(vals, ddof=1) if len(vals) > 1 else 0:.4f}" \
                if vals else "-"
        auc = [r["test"].get("auroc", r["test"].get("macro_auroc")) for r in rs]
        pl = [(r["pseudo_labels"] or {}).get("accuracy") for r in rs]
        lines.append(f"| {budget} | {method} | {len(rs)} | {ms([r['test']['accuracy'] for r in rs])} "
                     f"| {ms([r['test']['balanced_accuracy'] for r in rs])} | {ms(auc)} | {ms(pl)} |")
    return "\n".join(lines)


def markdown_tables(results: list, methods: list) -> str:
    """Two Markdown tables over budgets: each method's test accuracy (mean ± sd over
    seeds, n), in ``methods`` order (the ablation ladder mlp -> cmix_selfsl ->
    cmix_selfsl_pl -> cmix first, when listed so); and cmix minus each other method on
    the same seeds (mean ± sd of the paired differences, two-sided paired t-test;
    "identical" where every seed's accuracy is equal)."""
    from scipy.stats import ttest_rel

    budgets = sorted({r["budget"] for r in results})
    acc = {(r["method"], r["budget"], r["seed"]): r["test"]["accuracy"] for r in results}
    head = "| {} | " + " | ".join(f"budget {b}" for b in budgets) + " |"
    rule = "|---|" + "---|" * len(budgets)
    lines = [head.format("method"), rule]
    for m in methods:
        cells = []
        for b in budgets:
            v = np.array([a for (mm, bb, _), a in acc.items() if mm == m and bb == b])
            cells.append(f"{v.mean():.3f} ± {v.std(ddof=1) if len(v) > 1 else 0:.3f} (n={len(v)})"
                         if len(v) else "-")
        lines.append(f"| {m} | " + " | ".join(cells) + " |")
    if "cmix" in methods:
        lines += ["", head.format("cmix minus"), rule]
        for m in methods:
            if m == "cmix":
                continue
            cells = []
            for b in budgets:
                seeds = sorted(s for (mm, bb, s) in acc if mm == m and bb == b
                               and ("cmix", b, s) in acc)
                x = np.array([acc[("cmix", b, s)] for s in seeds])
                y = np.array([acc[(m, b, s)] for s in seeds])
                if len(seeds) < 2:
                    cells.append("-")
                elif np.array_equal(x, y):
                    cells.append(f"0 (identical, n={len(seeds)})")
                else:
                    d = x - y
                    cells.append(f"{d.mean():+.3f} ± {d.std(ddof=1):.3f}, "
                                 f"p = {ttest_rel(x, y).pvalue:.2g} (n={len(seeds)})")
            lines.append(f"| {m} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def judge_power(results: list) -> str:
    """Per budget: in how many seeds cmix's judge used its pseudo-labels, and whether the
    unjudged pseudo-labels (cmix_paper against cmix_selfsl, the same pre-training less
    the pseudo-labels) helped in those seeds: the share of seeds where the judge said yes
    when the pseudo-labels helped, and no when they did not; and the heads the runs
    chose."""
    acc = {(r["method"], r["budget"], r["seed"]): r for r in results}
    lines = []
    for budget in sorted({r["budget"] for r in results}):
        seeds = sorted(s for (m, b, s) in acc if m == "cmix" and b == budget)
        rows = []
        for s in seeds:
            used = bool((acc["cmix", budget, s]["pseudo_labels"] or {}).get("used"))
            if ("cmix_paper", budget, s) in acc and ("cmix_selfsl", budget, s) in acc:
                gain = (acc["cmix_paper", budget, s]["test"]["accuracy"]
                        - acc["cmix_selfsl", budget, s]["test"]["accuracy"])
                rows.append((used, gain))
        if not rows:
            continue
        helped = [u for u, g in rows if g > 0]
        hurt = [u for u, g in rows if g <= 0]
        heads = {}
        for (m, b, s), r in acc.items():
            if b == budget:
                h = (r["validation"] or {}).get("head")
                if h:
                    heads.setdefault(m, []).append(h)
        lines.append(
            f"budget {budget}: cmix's judge said yes in {sum(u for u, _ in rows)} of {len(rows)} "
            f"seeds; the unjudged pseudo-labels helped (cmix_paper > cmix_selfsl) in "
            f"{len(helped)}, where the judge said yes in {sum(helped)}; they did not help in "
            f"{len(hurt)}, where it said no in {len(hurt) - sum(hurt)}. Heads: "
            + "; ".join(f"{m} {hs.count('linear')}/{len(hs)} linear"
                        for m, hs in sorted(heads.items())))
    return "\n".join(lines)


def paired(results: list, a: str = "cmix", b: str = "mlp", key: str = "accuracy") -> str:
    """Per budget: a - b test ``key`` on the same seeds (same labeled rows), their mean and
    sd, and a one-sided paired t-test (H1: a > b)."""
    from scipy.stats import ttest_rel

    lines = []
    for budget in sorted({r["budget"] for r in results}):
        va = {r["seed"]: r["test"][key] for r in results
              if r["budget"] == budget and r["method"] == a}
        vb = {r["seed"]: r["test"][key] for r in results
              if r["budget"] == budget and r["method"] == b}
        seeds = sorted(set(va) & set(vb))
        if len(seeds) < 2:
            continue
        d = np.array([va[x] - vb[x] for x in seeds])
        p = ttest_rel([va[x] for x in seeds], [vb[x] for x in seeds], alternative="greater").pvalue
        lines.append(f"budget {budget}: {a} - {b} {key} per seed "
                     f"{', '.join(f'{x:+.4f}' for x in d)}; mean {d.mean():+.4f} sd "
                     f"{d.std(ddof=1):.4f}; paired t-test one-sided p = {p:.3g}")
    return "\n".join(lines)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("dataset", choices=["digits", "digits_tune", "cohort", "structured",
                                       "admixture", "ooa"])
    p.add_argument("--jobs", type=int, default=1, help="runs at once (one thread each)")
    p.add_argument("--out", required=True)
    p.add_argument("--n-samples", type=int, default=20000)
    p.add_argument("--budgets", type=int, nargs="*", default=None)
    p.add_argument("--seeds", type=int, nargs="*", default=SEEDS,
                   help=f"seeds (default {SEEDS}; headline comparisons use {SEEDS10})")
    p.add_argument("--epochs", type=int, default=None)
    p.add_argument("--methods", nargs="+", default=["cmix", "mlp"])
    p.add_argument("--cohort-seed", type=int, default=7,
                   help="simulation seed of the cohort (7 = the reported one; tune on another)")
    p.add_argument("--config", default=None, help="YAML or JSON file of config overrides")
    p.add_argument("--grid", default=None,
                   help="JSON: method -> list of config overrides; tune every one (tuning data only)")
    p.add_argument("--pc-covariates", type=int, default=0, metavar="N",
                   help="ancestry and structured cohorts: store N PCs of the training split's "
                        "genotypes as covariates (every method then uses them)")
    p.add_argument("--chosen", default=None,
                   help="JSON: method -> config overrides (a tuning run's chosen.json)")
    args = p.parse_args(argv)
    if args.pc_covariates < 0:
        p.error(f"--pc-covariates: expected a number of PCs >= 1 (0: none), got {args.pc_covariates}")
    if args.pc_covariates and not (args.dataset in ANCESTRY_MODELS or args.dataset == "structured"):
        p.error("--pc-covariates is for the ancestry and structured cohorts")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if args.dataset in ANCESTRY_MODELS:
        store = ancestry_store(out / f"{args.dataset}_seed{args.cohort_seed}.zarr",
                               args.dataset, seed=args.cohort_seed)
        budgets = args.budgets or [50, 100, 500]
        config = {}
    elif args.dataset.startswith("digits"):
        store = digits_store(out / f"{args.dataset}.zarr", tuning=args.dataset == "digits_tune")
        budgets = args.budgets or [135]
        config = dict(DIGITS_CONFIG, epochs=args.epochs or DIGITS_CONFIG["epochs"])
    elif args.dataset == "structured":
        store = structured_store(out / f"structured_seed{args.cohort_seed}.zarr",
                                 seed=args.cohort_seed)
        budgets = args.budgets or [100]
        config = {}
    else:
        store = cohort_store(out / f"cohort_{args.n_samples}_seed{args.cohort_seed}.zarr",
                             args.n_samples, seed=args.cohort_seed)
        budgets = args.budgets or [200, 1000]
        # chosen on a separate cohort (--cohort-seed 8; see RESULTS.md), sized for 2 cores:
        # 20 pre-training epochs, label propagation at 5, 10, 15, 20 on |S_U| = 5,000;
        # the dosage encoding with the paper's encoder width (= embedded width, 1,000)
        config = {"epochs": args.epochs or 20, "warmup_epochs": 5, "lp_every": 5,
                  "pred_epochs": 30, "pred_patience": 10, "lp_max_unlabeled": 5000,
                  "encoding": "dosage", "hidden": None}
    if args.pc_covariates:
        store = pc_covariate_store(store, args.pc_covariates)
    if args.config:
        config.update(read_config_file(args.config))
    t = time.perf_counter()
    if args.grid:
        grid = json.loads(Path(args.grid).read_text())
        tune(store, out, budgets, args.methods, args.seeds, config, grid, args.jobs)
        print(f"tuning: {time.perf_counter() - t:.0f} s total")
        return
    per_method = json.loads(Path(args.chosen).read_text()) if args.chosen else None
    results = run_grid(store, out, budgets, args.methods, args.seeds, config, args.jobs,
                       per_method)
    print(f"\n{args.dataset}: config {json.dumps(config)}; {time.perf_counter() - t:.0f} s total")
    print(summarise(results))
    print(markdown_tables(results, args.methods))
    for other in args.methods:
        if other != "cmix" and "cmix" in args.methods:
            print(paired(results, "cmix", other))
    print(judge_power(results))


if __name__ == "__main__":
    main()
