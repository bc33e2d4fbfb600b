"""Coalescent benchmark cohorts: time to make them, and their checks against plink2/plink1.9.

For each model (OutOfAfrica_3G09: YRI, CEU, CHB 1,000 each; AmericanAdmixture_4B18: AFR,
EUR, ASIA, ADMIX 750 each; 5,000 SNPs on ten 2 Mb pieces, seed 1) this writes the cohort
with :func:`cmix.simulate.coalescent.simulate_coalescent_cohort`, then prints markdown tables:

- Hudson Fst per population pair: plink2 --fst method=hudson on the .bed, Hudson Fst from
  the tree sequences' own allele frequencies on the same SNPs (every sampled haplotype of
  each population), and the model's expectation over the whole pieces (tskit branch-mode
  Fst of the same sample sets: no SNP ascertainment, no sampling of mutations);
- LD decay: plink1.9 --r2 (genotype r2, SNPs with MAF >= 5% in that population) among the
  cohort's people of one population on chromosome 1, binned by distance, against
  the haplotype r2 of the same pairs over every sampled haplotype of that population.

    PYTHONPATH=. python benchmarks/coalescent_checks.py --out /tmp/coalescent_bench
"""

import argparse
import json
import resource
import subprocess
import time
from pathlib import Path

import numpy as np
import pandas as pd

from cmix.simulate.coalescent import CoalescentDesign, simulate_coalescent_cohort
from cmix.simulate.trees import simulate_trees

MODELS = {
    "OutOfAfrica_3G09": ("YRI:1000,CEU:1000,CHB:1000", "CEU"),
    "AmericanAdmixture_4B18": ("AFR:750,EUR:750,ASIA:750,ADMIX:750", "EUR"),
}
EDGES = np.array([0, 5e3, 20e3, 50e3, 150e3, 400e3, 1e6])


def run(*args, cwd):
    subprocess.run([*args, "--threads", "2"], cwd=cwd, check=True, capture_output=True)


def hudson(p1, p2, n1, n2):
    num = (p1 - p2) ** 2 - p1 * (1 - p1) / (n1 - 1) - p2 * (1 - p2) / (n2 - 1)
    return num.mean() / (p1 * (1 - p2) + p2 * (1 - p1)).mean()


def ts_sub(ts, positions_1based):
    pos = ts.tables.sites.position
    ids = np.searchsorted(pos, np.asarray(positions_1based) - 1)
    assert np.array_equal(pos[ids], np.asarray(positions_1based) - 1)
    return ts.delete_sites(np.setdiff1d(np.arange(ts.num_sites), ids))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--n-variants", type=int, default=5000)
    args = ap.parse_args()
    for model, (pops, ld_pop) in MODELS.items():
        d = Path(args.out) / model
        t0, c0 = time.time(), resource.getrusage(resource.RUSAGE_SELF).ru_utime
        truth = simulate_coalescent_cohort(
            d, CoalescentDesign(model=model, populations=pops, n_variants=args.n_variants),
            seed=1)
        wall = time.time() - t0
        cpu = resource.getrusage(resource.RUSAGE_SELF).ru_utime - c0
        load = Path("/proc/loadavg").read_text().split()[:3]
        print(f"\n## {model}: {truth['n_samples']} people x {truth['n_variants']} SNPs, "
              f"{truth['n_chrom']} pieces: {wall:.1f} s wall, {cpu:.1f} s CPU (load {' '.join(load)})")
        names = [p["name"] for p in truth["populations"]]
        s = truth["samples"]
        (d / "pop.txt").write_text("#FID\tIID\tPOP\n" + "".join(
            f"{e}\t{e}\t{p}\n" for e, p in zip(s["eid"], s["population"])))
        run("plink2", "--bfile", "genotypes", "--pheno", "pop.txt", "--fst", "POP",
            "method=hudson", "--out", "fst", cwd=d)
        got = pd.read_csv(d / "fst.fst.summary", sep="\t")
        got = {frozenset((a, b)): v for a, b, v in zip(got["#POP1"], got.POP2, got.HUDSON_FST)}
        bim = pd.read_csv(d / "genotypes.bim", sep="\t", header=None,
                          names=["chrom", "id", "cm", "pos", "a1", "a2"])
        trees = simulate_trees(model, truth["msprime_samples"], truth["n_chrom"],
                               truth["piece_mb"], truth["seed"])
        freq, branch_num, branch_den = [], {}, {}
        for chrom, ts, _ in trees:
            sub = ts_sub(ts, bim[bim.chrom == chrom].pos)
            g = sub.genotype_matrix()
            node_pop = ts.tables.nodes.population[ts.samples()]
            pid = {p.metadata["name"]: p.id for p in ts.populations()}
            freq.append(np.column_stack([g[:, node_pop == pid[n]].mean(axis=1) for n in names]))
            sets = [ts.samples()[node_pop == pid[n]] for n in names]
            for i in range(len(names)):
                for j in range(i + 1, len(names)):
                    # Hudson Fst = 1 - pi_within / pi_between, sums over the pieces (branch mode)
                    w = ts.diversity([sets[i], sets[j]], mode="branch", span_normalise=False)
                    b = ts.divergence([sets[i], sets[j]], mode="branch", span_normalise=False)
                    branch_num[(i, j)] = branch_num.get((i, j), 0) + w.mean()
                    branch_den[(i, j)] = branch_den.get((i, j), 0) + b
        freq = np.concatenate(freq)
        print("\n| pair | plink2 --fst hudson (cohort .bed) | tree sequence, same SNPs | "
              "difference | model expectation (branch Fst, whole pieces) |\n|---|---|---|---|---|")
        for i in range(len(names)):
            for j in range(i + 1, len(names)):
                a, b = names[i], names[j]
                n1, n2 = 2 * truth["msprime_samples"][a], 2 * truth["msprime_samples"][b]
                ts_f = hudson(freq[:, i], freq[:, j], n1, n2)
                pl = got[frozenset((a, b))]
                br = 1 - branch_num[(i, j)] / branch_den[(i, j)]
                print(f"| {a}-{b} | {pl:.4f} | {ts_f:.4f} | {100 * (pl - ts_f) / ts_f:+.1f}% | {br:.4f} |")
        # LD decay in one population, chromosome 1
        (d / "ld_keep.txt").write_text("".join(f"{e} {e}\n" for e, p in zip(s["eid"], s["population"])
                                               if p == ld_pop))
        run("plink1.9", "--bfile", "genotypes", "--keep", "ld_keep.txt", "--maf", "0.05", "--r2",
            "--ld-window", "100000", "--ld-window-kb", "1000", "--ld-window-r2", "0", "--chr", "1",
            "--out", "ld", cwd=d)
        ld = pd.read_csv(d / "ld.ld", sep=r"\s+")
        chrom, ts, rate = trees[0]
        node_pop = ts.tables.nodes.population[ts.samples()]
        keep = node_pop == {p.metadata["name"]: p.id for p in ts.populations()}[ld_pop]
        snps = np.unique(np.r_[ld.BP_A, ld.BP_B])
        sub = ts_sub(ts, snps)
        h = sub.genotype_matrix()[:, keep].astype(float)
        z = (h - h.mean(axis=1, keepdims=True)) / h.std(axis=1, keepdims=True)
        row = {int(x) + 1: k for k, x in enumerate(sub.tables.sites.position)}
        a = np.array([row[x] for x in ld.BP_A])
        b = np.array([row[x] for x in ld.BP_B])
        hap_r2 = ((z @ z.T / h.shape[1]) ** 2)[a, b]
        dist = (ld.BP_B - ld.BP_A).to_numpy()
        bins = np.digitize(dist, EDGES) - 1
        print(f"\nLD decay, {ld_pop}, chromosome 1 piece (recombination rate {rate:.3g} per bp, "
              f"{(keep.sum())} haplotypes in the tree sequence, "
              f"{sum(p == ld_pop for p in s['population'])} people in the cohort):\n")
        print("| distance | pairs | plink1.9 --r2 (genotype r2, cohort) | haplotype r2 (tree sequence) |"
              "\n|---|---|---|---|")
        for k in range(len(EDGES) - 1):
            m = bins == k
            print(f"| {EDGES[k] / 1e3:g}-{EDGES[k + 1] / 1e3:g} kb | {m.sum()} | "
                  f"{ld.R2.to_numpy()[m].mean():.4f} | {hap_r2[m].mean():.4f} |")
        (d / "check.json").write_text(json.dumps({"wall_s": wall, "cpu_s": cpu, "load": load}))


if __name__ == "__main__":
    main()
