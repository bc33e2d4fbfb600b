"""Where the SNPs come from, on simulated cohorts: causal-locus recovery of a discovery-
split GWAS vs the simulator's external discovery cohort, and how much a GWAS that
includes the test people inflates prs / logreg test accuracy.

Per seed: simulate a cohort; sample filters, variant QC and the unrelated set as the
workflow does; then per trait four SNP sources, each giving a top-k selection
(``cmix select``) and a store of the SAME target people (the unrelated QC-passing people
outside the trait's discovery set, same test split), on which ``prs`` and ``logreg`` train
with one labeled budget:

- ``discovery``: plink2 --glm on the trait's discovery set (``fraction`` of the people
  with a phenotype), the route of ``config: discovery``. No overlap.
- ``external``: the simulator's summary statistics (a separate cohort of
  ``--n-external`` people). No overlap.
- ``full``: plink2 --glm on every unrelated QC-passing person with a phenotype, the
  store's test people included (overlap yes; also twice the discovery set's size).
- ``swap``: plink2 --glm on as many people as the discovery set, the store's test
  people swapped in for randomly chosen discovery people (overlap yes, same size: the
  overlap's effect alone).

Writes one JSON per seed (``OUT/seed<k>.json``) and, with ``--summarise``, the paired
comparison over the seeds present. Usage::

    python benchmarks/discovery_overlap.py --out /tmp/overlap --seeds 1 2 3 ... 10
    python benchmarks/discovery_overlap.py --out /tmp/overlap --summarise
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

from cmix.cli import main as cmix
from cmix.genotypes.covariates import SampleTables
from cmix.genotypes.gwas import GwasModel, GwasPeople, run_gwas
from cmix.genotypes.selection import read_sample_ids
from cmix.readers.sources import GenotypeFiles
from cmix.genotypes.build_store import StoreInputs, StoreOptions, StoreSamples, build_store
from cmix.simulate.balding_nichols import simulate_cohort

COVARIATES = {"fields": [21022, 31], "pcs": 10, "pcs_from": "sample_qc"}
TRAITS = {
    "mean_platelet_volume": ({"field": 30100, "kind": "continuous", "binarise": "median"},
                             None),
    "mean_sphered_cell_volume": ({"field": 30270, "kind": "continuous",
                                  "binarise": {"quantiles": [0.25, 0.75]}}, None),
    "smoking_status": ({"field": 20116, "kind": "categorical",
                        "classes": {"never": [0], "ever": [1, 2]}}, None),
    "hair_colour": ({"field": 1747, "kind": "categorical",
                     "classes": {"blonde": [1], "red": [2], "light_brown": [3],
                                 "dark_brown": [4], "black": [5]}}, "class_index"),
}
ARMS = ("discovery", "external", "full", "swap")
METHODS = ("prs", "logreg")


def run(cmd):
    assert cmix([str(c) for c in cmd]) == 0, cmd


def one_seed(out: Path, seed: int, args) -> dict:
    d = out / f"seed{seed}"
    c = d / "cohort"
    truth = simulate_cohort(c, n_samples=args.n_samples, n_variants=args.n_variants,
                            n_discovery=args.n_external, seed=seed)
    bfile = c / "genotypes"
    run(["samples", "--fam", f"{bfile}.fam", "--sqc", c / "sample_qc.tsv", "--withdrawn",
         c / "withdrawn.txt", "--out", d / "samples"])
    run(["qc", "--bfile", bfile, "--keep", d / "samples.keep", "--maf", "0.01", "--hwe", "1e-7",
         "--geno", "0.05", "--out", d / "variants"])
    run(["unrelated", "--kinship", c / "kinship.dat", "--fam", f"{bfile}.fam", "--keep",
         d / "samples.keep", "--cutoff", "0.0884", "--out", d / "unrelated"])
    keep, snplist = d / "unrelated.king.cutoff.in.id", d / "variants.snplist"
    result = {"seed": seed, "traits": {}}
    rng = np.random.default_rng(seed)
    for trait, (config, multiclass) in TRAITS.items():
        t = d / trait
        t.mkdir(parents=True, exist_ok=True)
        common = (GenotypeFiles(bfile=bfile),
                  GwasModel(trait=trait, trait_config=config, multiclass=multiclass,
                            covariates=COVARIATES),
                  SampleTables(pheno=c / "phenotypes.tsv", sample_qc=c / "sample_qc.tsv"))
        ids = t / "discovery.id"
        sizes = {}
        people = GwasPeople(keep=keep, discovery_fraction=0.5, discovery_seed=0, ids_out=ids)
        sizes["discovery"] = run_gwas(t / "discovery.gz", *common, people=people,
                                      extract=snplist)["n_tested"]
        sizes["full"] = run_gwas(t / "full.gz", *common, people=GwasPeople(keep=keep),
                                 extract=snplist)["n_tested"]
        sumstats = {"discovery": t / "discovery.gz", "full": t / "full.gz",
                    "external": c / "sumstats" / f"{trait}.txt.gz", "swap": t / "swap.gz"}
        rec = {"n_gwas": sizes, "recovery": {}, "accuracy": {}}
        for arm in ARMS:
            if arm == "swap":    # needs the test people of the discovery arm's store
                test = store_test_ids(t / "discovery.zarr")
                disc = read_sample_ids(ids)
                n_keep = len(disc) - len(test)
                pick = np.sort(rng.choice(len(disc), size=n_keep, replace=False))
                swap = pd.concat([disc.iloc[pick], test], ignore_index=True)
                swap_ids = t / "swap.id"
                swap.rename(columns={"fid": "#FID", "iid": "IID"}).to_csv(
                    swap_ids, sep="\t", index=False)
                sizes["swap"] = run_gwas(t / "swap.gz", *common, people=GwasPeople(keep=swap_ids),
                                         extract=snplist)["n_tested"]
            snps = t / f"{arm}.snps.tsv"
            run(["select", "--sumstats", sumstats[arm], "--bfile", bfile, "--extract", snplist,
                 "--top", args.top, "--out", snps])
            selected = set(pd.read_csv(snps, sep="\t")["variant_id"])
            causal = truth["causal"][trait]["variant_ids"]
            large = [lc["variant_id"] for lc in truth["traits"][trait]["large_loci"]]
            rec["recovery"][arm] = {
                "causal_in_top": len(selected & set(causal)), "n_causal": len(causal),
                "large_in_top": len(selected & set(large)), "n_large": len(large),
                "n_top": len(selected)}
            store = t / f"{arm}.zarr"
            build_store(store, GenotypeFiles(bfile=bfile),
                        StoreInputs(snps=snps, pheno=c / "phenotypes.tsv", trait=trait,
                                    trait_config=config),
                        StoreSamples(keep=keep, discovery=ids, covariates=COVARIATES,
                                     sample_qc=c / "sample_qc.tsv"),
                        StoreOptions(force=True, test_fraction=0.2, split_seed=0))
            rec["accuracy"][arm] = {}
            for method in METHODS:
                run_dir = t / "runs" / arm / method
                run(["train", "--store", store, "--budget", args.budget, "--seed", seed,
                     "--method", method, "--device", "cpu", "--out", run_dir])
                m = json.loads((run_dir / "metrics.json").read_text())
                rec["accuracy"][arm][method] = m["test"]["accuracy"]
        result["traits"][trait] = rec
        print(f"seed {seed} {trait}: {rec['accuracy']}", file=sys.stderr, flush=True)
    return result


def store_test_ids(store) -> pd.DataFrame:
    import zarr

    root = zarr.open_group(str(store), mode="r")
    iid = np.array([str(i) for i in root["sample_id"][:]])[root["sample_split"][:] == 1]
    return pd.DataFrame({"fid": iid, "iid": iid})   # the simulated .fam has FID = IID


def summarise(out: Path) -> str:
    from scipy import stats

    res = [json.loads(p.read_text()) for p in sorted(out.glob("seed*.json"))]
    lines = [f"{len(res)} seeds", "", "| trait | GWAS | n GWAS (mean) | large loci in top | "
             "causal in top (share of causal) | top that are causal |", "|---|---|---|---|---|---|"]
    for trait in TRAITS:
        for arm in ARMS:
            r = [s["traits"][trait]["recovery"][arm] for s in res]
            n = [s["traits"][trait]["n_gwas"].get(arm, np.nan) for s in res]
            lines.append(
                f"| {trait} | {arm} | {np.nanmean(n):.0f} | "
                f"{sum(x['large_in_top'] for x in r)}/{sum(x['n_large'] for x in r)} | "
                f"{np.mean([x['causal_in_top'] / x['n_causal'] for x in r]):.3f} | "
                f"{np.mean([x['causal_in_top'] / x['n_top'] for x in r]):.3f} |")
    lines += ["", "| trait | method | discovery acc | vs full: diff +- sd (p) | "
              "vs swap: diff +- sd (p) | vs external: diff +- sd (p) |",
              "|---|---|---|---|---|---|"]
    for trait in TRAITS:
        for method in METHODS:
            acc = {a: np.array([s["traits"][trait]["accuracy"][a][method] for s in res])
                   for a in ARMS}
            cells = []
            for arm in ("full", "swap", "external"):
                diff = acc[arm] - acc["discovery"]
                p = stats.ttest_rel(acc[arm], acc["discovery"]).pvalue if len(res) > 1 else np.nan
                cells.append(f"{diff.mean():+.3f} +- {diff.std(ddof=1):.3f} (p={p:.2g})")
            lines.append(f"| {trait} | {method} | {acc['discovery'].mean():.3f} | "
                         + " | ".join(cells) + " |")
    return "\n".join(lines)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--seeds", nargs="*", type=int, default=[])
    ap.add_argument("--n-samples", type=int, default=3000)
    ap.add_argument("--n-variants", type=int, default=5000)
    ap.add_argument("--n-external", type=int, default=3000,
                    help="size of the simulator's separate discovery cohort")
    ap.add_argument("--top", type=int, default=500)
    ap.add_argument("--budget", type=int, default=200)
    ap.add_argument("--summarise", action="store_true")
    a = ap.parse_args()
    a.out.mkdir(parents=True, exist_ok=True)
    for s in a.seeds:
        t0 = time.time()
        r = one_seed(a.out, s, a)
        r["seconds"] = time.time() - t0
        (a.out / f"seed{s}.json").write_text(json.dumps(r, indent=1))
    if a.summarise:
        print(summarise(a.out))
