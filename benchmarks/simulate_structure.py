"""The simulator's population structure and trait architectures: speed, memory and the
checks against plink2, as numbers for RESULTS.md.

    python benchmarks/simulate_structure.py speed [--baseline-src DIR]
    python benchmarks/simulate_structure.py checks [--work DIR]

speed: wall time and peak RSS of ``simulate_cohort`` (each run in its own process) at
4,000 x 8,000 and 10,000 x 20,000, structured (default) and unstructured (none);
with --baseline-src, also the code under DIR (e.g. ``git archive <commit> cmix | tar -x
-C DIR``), alternating runs so both see the same machine load.

checks: on the test suite's cohorts (scripted structure 1,500 x 3,000; default
2,000 x 4,000 and 5,000 x 3,000): plink2 --fst (Hudson) per population against the
configured value, canonical correlations of sample_qc.tsv PCs with plink2 --pca,
plink2 --glm minimum p at MC1R (red hair) and genome-wide (ever smoked), SNP heritability
from truth.json effects and the genotypes. Needs plink2 on PATH.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd

RUN = """
import resource, sys, tempfile, time
from cmix.simulate.balding_nichols import simulate_cohort
n, m, anc = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
kw = {} if anc == "old" else {"populations": None if anc == "none" else "default"}
with tempfile.TemporaryDirectory() as d:
    t = time.perf_counter()
    simulate_cohort(d, n_samples=n, n_variants=m, seed=1, **kw)
    dt = time.perf_counter() - t
print(dt, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
"""


def one_run(n, m, ancestry, src=None):
    env = dict(os.environ)
    if src:
        env["PYTHONPATH"] = str(src)
    res = subprocess.run([sys.executable, "-c", RUN, str(n), str(m), ancestry], env=env,
                         capture_output=True, text=True, cwd=tempfile.gettempdir())
    if res.returncode != 0:
        raise SystemExit(res.stderr)
    secs, mb = map(float, res.stdout.split())
    return secs, mb


def speed(args):
    print("| cohort (samples x SNPs) | code | ancestry | wall s (runs) | peak RSS MB |")
    print("|---|---|---|---|---|")
    for n, m in ((4000, 8000), (10000, 20000)):
        rows = {}
        for _ in range(args.repeats):
            if args.baseline_src:
                rows.setdefault(("before", "none (only option)"), []).append(
                    one_run(n, m, "old", args.baseline_src))
            rows.setdefault(("after", "default"), []).append(one_run(n, m, "default"))
            rows.setdefault(("after", "none"), []).append(one_run(n, m, "none"))
        for (code, anc), runs in rows.items():
            secs = ", ".join(f"{s:.1f}" for s, _ in runs)
            print(f"| {n:,} x {m:,} | {code} | {anc} | {secs} | {max(r for _, r in runs):.0f} |")


def plink2(*args, cwd):
    res = subprocess.run(["plink2", *args, "--threads", "2"], cwd=cwd, capture_output=True, text=True)
    if res.returncode:
        raise SystemExit(res.stdout + res.stderr)


def cancorr(a, b):
    qa, _ = np.linalg.qr(a - a.mean(axis=0))
    qb, _ = np.linalg.qr(b - b.mean(axis=0))
    return np.linalg.svd(qa.T @ qb, compute_uv=False)


def checks(args):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    from bed_reader import open_bed
    from test_simulate_structure import SCRIPTED

    from cmix.simulate.traits import TRAITS
    from cmix.simulate.balding_nichols import simulate_cohort

    work = Path(args.work or tempfile.mkdtemp())
    # Fst
    d = work / "scripted"
    truth = simulate_cohort(d, n_samples=1500, n_variants=3000, n_discovery=200, seed=3,
                            populations=SCRIPTED)
    s = truth["samples"]
    (d / "pop.txt").write_text("#FID\tIID\tPOP\tREGION\n" + "".join(
        f"{e}\t{e}\t{p}\t{r}\n" for e, p, r in zip(s["eid"], s["population"], s["region"])))
    plink2("--bfile", "genotypes", "--pheno", "pop.txt", "--fst", "POP", "method=hudson",
           "--out", "fst", cwd=d)
    plink2("--bfile", "genotypes", "--pheno", "pop.txt", "--fst", "REGION", "method=hudson",
           "--out", "fstr", cwd=d)
    fst = pd.read_csv(d / "fst.fst.summary", sep="\t")
    pooled = sum(r["share"] ** 2 * r["fst"] for r in truth["populations"][0]["regions"])
    print("Hudson Fst to the British (scripted 1,500 x 3,000): population, configured "
          "(+ pooled-region term), plink2")
    for pop in truth["populations"][1:]:
        row = fst[(fst["#POP1"] == "british") & (fst.POP2 == pop["name"])]
        cfg = f"{pop['fst'] + pooled:.4f}" if "fst" in pop else "admixed"
        print(f"  {pop['name']}: {cfg} -> {float(row.HUDSON_FST.iloc[0]):.4f}")
    fr = pd.read_csv(d / "fstr.fst.summary", sep="\t")
    fr = fr[fr["#POP1"].isin(["north", "south"]) & fr.POP2.isin(["north", "south"])]
    print(f"  regions north-south: 0.0040 -> {float(fr.HUDSON_FST.iloc[0]):.4f}")
    # PCA on the default 2,000 x 4,000 (the test fixture)
    d = work / "default"
    truth = simulate_cohort(d, n_samples=2000, n_variants=4000, seed=7)
    (d / "pca_snps.txt").write_text("\n".join(truth["pca"]["variant_ids"]) + "\n")
    plink2("--bfile", "genotypes", "--extract", "pca_snps.txt", "--pca", "10", "--out", "same", cwd=d)
    plink2("--bfile", "genotypes", "--maf", "0.05", "--pca", "10", "--out", "all", cwd=d)
    sqc = pd.read_csv(d / "sample_qc.tsv", sep="\t", dtype={"eid": str}).set_index("eid")
    ours = sqc[[f"PC{k}" for k in range(1, 4)]].to_numpy()
    for name in ("same", "all"):
        ev = pd.read_csv(d / f"{name}.eigenvec", sep="\t", dtype={"IID": str}).set_index("IID")
        ev = ev.loc[sqc.index, [f"PC{k}" for k in range(1, 4)]].to_numpy()
        print(f"PCA default 2,000 x 4,000, plink2 on {name} SNPs: canonical correlations top 2 "
              f"{np.round(cancorr(ours[:, :2], ev[:, :2]), 4).tolist()}, top 3 "
              f"{np.round(cancorr(ours, ev), 4).tolist()}")
    # h2 from truth effects
    pheno = pd.read_csv(d / "phenotypes.tsv", sep="\t", dtype={"eid": str})
    bim = pd.read_csv(d / "genotypes.bim", sep="\t", header=None)
    col = pd.Series(np.arange(len(bim)), index=bim[1])
    brit = np.array(truth["samples"]["population"]) == "british"
    with open_bed(d / "genotypes.bed") as bed:
        geno = bed.read(dtype="float32")
    geno = np.where(np.isnan(geno), np.nanmean(geno, axis=0), geno)
    male, age = pheno["f.31.0.0"].to_numpy(), pheno["f.21022.0.0"].to_numpy()
    for name, spec in TRAITS.items():
        c = truth["causal"][name]
        g = geno[:, col[c["variant_ids"]].to_numpy()] @ np.asarray(c["betas_a1"])
        g -= g[brit].mean()
        line = f"h2 {name}: configured {spec['h2']}, var(truth effects x genotypes) in British {g[brit].var():.3f}"
        if spec["kind"] == "continuous":
            y = (pheno[f"f.{spec['field']}.0.0"].to_numpy() - spec["mean"]) / spec["sd"]
            ok = brit & ~np.isnan(y)
            resid = y - g - spec["male"] * male - spec["age"] * (age - 55)
            line += f", var(g)/(var(g)+var(residual)) {g[ok].var() / (g[ok].var() + resid[ok].var()):.3f}"
        print(line)
    # GWAS on 5,000 x 3,000
    d = work / "gwas"
    truth = simulate_cohort(d, n_samples=5000, n_variants=3000, n_chrom=16, n_discovery=200, seed=21)
    pheno = pd.read_csv(d / "phenotypes.tsv", sep="\t", dtype={"eid": str})
    hair, smoke = pheno["f.1747.0.0"], pheno["f.20116.0.0"]
    pd.DataFrame({"#FID": pheno.eid, "IID": pheno.eid,
                  "RED": np.where(hair == 2, 2, np.where(hair.isin([1, 3, 4, 5]), 1, -9)),
                  "EVER": np.where(smoke.isin([1, 2]), 2, np.where(smoke == 0, 1, -9))}).to_csv(
        d / "bin.txt", sep="\t", index=False)
    sqc = pd.read_csv(d / "sample_qc.tsv", sep="\t", dtype={"eid": str})
    sqc.insert(0, "#FID", sqc.eid)
    sqc.rename(columns={"eid": "IID"})[["#FID", "IID", "PC1", "PC2", "PC3", "PC4"]].to_csv(
        d / "covar.txt", sep="\t", index=False)
    plink2("--bfile", "genotypes", "--pheno", "bin.txt", "--covar", "covar.txt", "--maf", "0.01",
           "--glm", "hide-covar", "--out", "glm", cwd=d)
    red = pd.read_csv(d / "glm.RED.glm.logistic.hybrid", sep="\t").set_index("ID")
    mc1r = truth["traits"]["hair_colour"]["red_hair"]["variant_ids"]
    ever = pd.read_csv(d / "glm.EVER.glm.logistic.hybrid", sep="\t")
    pop = np.array(truth["samples"]["population"])
    print(f"GWAS 5,000 x 3,000 (PC1-4 covariates): red hair cases {int((hair == 2).sum())}, "
          f"MC1R min p {red.loc[mc1r, 'P'].min():.2e} (ORs {np.round(red.loc[mc1r, 'OR'], 2).tolist()}); "
          f"red-hair min p elsewhere {red.drop(index=mc1r).P.min():.2e}; ever smoked min p "
          f"{ever.P.min():.2e}; red share in British {(hair[pop == 'british'] == 2).mean():.3f}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="what", required=True)
    sp = sub.add_parser("speed")
    sp.add_argument("--baseline-src", default=None)
    sp.add_argument("--repeats", type=int, default=2)
    ck = sub.add_parser("checks")
    ck.add_argument("--work", default=None)
    args = ap.parse_args()
    speed(args) if args.what == "speed" else checks(args)


if __name__ == "__main__":
    main()
