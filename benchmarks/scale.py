"""What the workflow costs as the cohort grows: per-rule wall time and peak memory.

    python benchmarks/scale.py run --n 10000 30000 --variants 100000 --out DIR
    python benchmarks/scale.py run --fast --n 100000 --variants 100000 --out DIR
    python benchmarks/scale.py king --n 2000 4000 8000 --variants 20000 --out DIR
    python benchmarks/scale.py report --out DIR [--plot benchmarks/scale.png]

`run`: the whole workflow (Snakemake, --cores 2) on a simulated cohort per size, with the
kinship-table route for relatedness (the simulator writes a ukb_rel.dat-like table, as UK
Biobank ships one), one trait and a short training config (SHORT_TRAINING below); each
rule's cost is read from the benchmark files Snakemake writes (`benchmark:` directives):
wall seconds (`s`) and peak resident memory (`max_rss`, MB), summed (time) and maxed
(memory) over the rule's jobs.

`king`: KING-robust from genotypes alone (`cmix unrelated --bfile`) per size, the route
for cohorts without a kinship table; it grows with the square of the number of people.

`report`: a table per rule and size, the log-log slope of time against people between
the two largest sizes, the plot, and the extrapolation to UK Biobank: 500,000 people x
800,000 array variants, 1,000 training runs (`extrapolate`).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

REPO = Path(__file__).resolve().parent.parent

# Short training for the scale runs: one trait, two methods, one budget and seed, two
# pre-training epochs. Training cost per run is then scaled to the paper's config below.
SHORT_TRAINING = {
    "traits": ["hair_colour"], "methods": ["cmix", "mlp"], "budgets": [1000], "seeds": [1],
    "train": {"device": "cpu", "config": {"epochs": 2, "warmup_epochs": 1, "lp_every": 1,
                                          "pred_epochs": 10, "pred_patience": 3}},
}
RULES_BY_PEOPLE = ["sample_filters", "variant_qc", "unrelated", "select_snps", "store",
                   "train/cmix", "train/mlp"]


def run_cohort(n: int, variants: int, out: Path, fast: bool = False) -> None:
    """The workflow on one simulated cohort of n people x `variants`: the full simulator
    as the workflow's own `simulate` rule, or with ``fast`` a :func:`fast_cohort` made
    beforehand and given as `inputs:`."""
    work = out / f"n{n}"
    work.mkdir(parents=True, exist_ok=True)
    cfg = yaml.safe_load((REPO / "config/config.yaml").read_text())
    cfg.update(run_name="scale", selection={"top": 1000}, **SHORT_TRAINING)
    if fast:
        start = time.time()
        cfg.pop("simulate")
        cfg["inputs"] = fast_cohort(n, variants, work / "cohort")
        print(f"n={n}: fast cohort {time.time() - start:.0f} s", file=sys.stderr)
    else:
        cfg["simulate"] = {"n_samples": n, "n_variants": variants, "seed": 1}
    (work / "config.yaml").write_text(yaml.safe_dump(cfg))
    start = time.time()
    subprocess.run(["snakemake", "--cores", "2", "--configfile", str(work / "config.yaml"),
                    "--directory", str(work)], cwd=REPO, check=True)
    print(f"n={n}: workflow {time.time() - start:.0f} s", file=sys.stderr)


def fast_cohort(n: int, variants: int, out: Path, seed: int = 1) -> dict:
    """A cohort with the simulator's file layout, made in about a minute at 100,000 x
    100,000: LD-free genotypes (the compiled kernel of ``cmix simulate --fast``), hair
    colour (UKB field 1747, codes 1-5) from 200 causal SNPs at h2 0.3, age and sex, a
    BOLT-LMM-layout GWAS of a 100,000-person discovery cohort (the true effects plus
    their sampling noise), a sample QC table with random PCs, a withdrawal list, and a
    ukb_rel.dat-layout table of n/200 first-degree pairs. Per-rule costs depend on the
    sizes, not on LD or ancestry; the full simulator (pedigrees, LD, populations) took
    33 min for 30,000 people here. Returns the workflow's ``inputs:`` section."""
    sys.path.insert(0, str(REPO))
    from cmix.readers import plink
    from cmix.genotypes.kernels import count_genotypes
    from cmix.simulate.fast import simulate_genotypes_fast
    from cmix.simulate.gwas import sumstats_table
    from cmix.simulate.sample_qc import write_sample_qc

    out.mkdir(parents=True, exist_ok=True)
    prefix = simulate_genotypes_fast(out, n, variants, seed=seed)
    bf = plink.open_bfile(prefix)
    rng = np.random.default_rng(seed + 1)
    counts = count_genotypes(bf, show_progress=False)
    called = counts.hom_a1 + counts.het + counts.hom_a2
    freq = (2 * counts.hom_a1 + counts.het) / np.maximum(2 * called, 1)
    causal = np.sort(rng.choice(np.flatnonzero((freq > 0.05) & (freq < 0.95)), 200,
                                replace=False))
    beta = np.zeros(variants)
    beta[causal] = rng.normal(0, 1, len(causal))
    g = plink.read_genotypes(bf, causal).astype(float)               # (200, n) A1 counts
    g = np.where(g < 0, 2 * freq[causal, None], g)
    genetic = beta[causal] @ g
    genetic = (genetic - genetic.mean()) / genetic.std()
    liability = np.sqrt(0.3) * genetic + np.sqrt(0.7) * rng.normal(size=n)
    hair = 1 + np.searchsorted(np.quantile(liability, [0.12, 0.16, 0.55, 0.9]), liability)
    eids = bf.fam["iid"].astype(str).to_numpy()
    pd.DataFrame({"eid": eids, "f.1747.0.0": hair,
                  "f.21022.0.0": rng.integers(40, 71, n),
                  "f.31.0.0": (bf.fam["sex"].astype(str) == "1").astype(int)}).to_csv(
        out / "phenotypes.tsv", sep="\t", index=False)
    n_discovery = 100_000
    se = 1 / np.sqrt(n_discovery * np.maximum(2 * freq * (1 - freq), 1e-6))
    effect = beta * np.sqrt(0.3 / len(causal)) / np.sqrt(np.maximum(2 * freq * (1 - freq), 1e-6))
    (out / "sumstats").mkdir(exist_ok=True)
    table = sumstats_table(rng, bf.bim, effect + se * rng.normal(size=variants), se, freq)
    table.to_csv(out / "sumstats" / "hair_colour.txt.gz", sep=" ", index=False)
    write_sample_qc(rng, out / "sample_qc.tsv", eids, np.zeros(n, bool), np.ones(n, bool),
                    np.ones(n, bool), rng.normal(size=(n, 10)))
    (out / "withdrawn.txt").write_text("".join(f"{e}\n" for e in rng.choice(eids, 5)))
    pairs = rng.choice(n, size=(n // 200, 2), replace=False)
    with open(out / "kinship.dat", "w") as fh:
        fh.write("ID1 ID2 HetHet IBS0 Kinship\n")
        for a, b in pairs:
            fh.write(f"{eids[a]} {eids[b]} 0.1 0.0015 0.25\n")
    return {"bfile": str(prefix), "sample_qc": str(out / "sample_qc.tsv"),
            "withdrawn": str(out / "withdrawn.txt"), "kinship": str(out / "kinship.dat"),
            "phenotypes": str(out / "phenotypes.tsv"),
            "sumstats": {"hair_colour": str(out / "sumstats" / "hair_colour.txt.gz")}}


def run_king(sizes: list[int], variants: int, out: Path) -> None:
    """`cmix unrelated --bfile` on LD-free genotypes, one size at a time."""
    from cmix.simulate.fast import simulate_genotypes_fast

    rows = []
    for n in sizes:
        prefix = simulate_genotypes_fast(out / f"king_n{n}", n, variants, seed=1)
        cmd = ["/usr/bin/time", "-f", "%e %M", "cmix", "unrelated", "--bfile", str(prefix),
               "--cutoff", "0.0884", "--threads", "2", "--device", "cpu",
               "--out", str(out / f"king_n{n}" / "unrelated")]
        res = subprocess.run(cmd, capture_output=True, text=True, check=True)
        wall, rss_kb = res.stderr.strip().splitlines()[-1].split()
        rows.append({"n": n, "variants": variants, "s": float(wall),
                     "max_rss": int(rss_kb) / 1024})
        print(rows[-1], file=sys.stderr)
    path = out / "king.tsv"
    old = pd.read_csv(path, sep="\t") if path.exists() else pd.DataFrame()
    table = pd.concat([old, pd.DataFrame(rows)]).drop_duplicates(["n", "variants"], keep="last")
    table.sort_values("n").to_csv(path, sep="\t", index=False)


def rule_costs(work: Path) -> pd.DataFrame:
    """Per rule (training per method): wall seconds summed and peak RSS (MB) maxed over
    its jobs' Snakemake benchmark files."""
    rows = []
    bench = work / "results/scale/benchmarks"
    for f in bench.rglob("*.tsv"):
        parts = f.relative_to(bench).parts
        rule = parts[0][: -len(".tsv")] if len(parts) == 1 else parts[0]
        if rule == "train":
            rule = f"train/{parts[2]}"
        t = pd.read_csv(f, sep="\t")
        rows.append({"rule": rule, "s": float(t["s"].iloc[0]),
                     "max_rss": pd.to_numeric(t["max_rss"], errors="coerce").iloc[0]})
    df = pd.DataFrame(rows)
    return df.groupby("rule").agg(s=("s", "sum"), max_rss=("max_rss", "max"), jobs=("s", "size"))


def slope(n: np.ndarray, s: np.ndarray) -> float:
    """Least-squares slope of log(time) on log(people)."""
    return float(np.polyfit(np.log(n), np.log(s), 1)[0])


def extrapolate(costs: pd.DataFrame, king: pd.DataFrame, variants: int) -> pd.DataFrame:
    """Each rule's time at 500,000 people x 800,000 variants and 1,000 training runs.

    From the largest measured cohort, time scales by (500,000 / n) ** max(slope, 1) (never
    better than linear) and, for rules that read every variant (variant QC, KING from
    genotypes, SNP selection's .bim and summary statistics), by 800,000 / variants.
    Training: the measured per-run time x 1,000 runs (a CPU figure, and a short config:
    see docs/guide/slurm.md for the GPU estimate). Memory: peak RSS scaled the same way, by
    (500,000 / n) ** max(memory slope, 1).
    """
    target_n, target_m, runs = 500_000, 800_000, 1000
    largest = costs["n"].max()
    rows = []
    for rule, g in costs.groupby("rule"):
        g = g.sort_values("n")
        k = slope(g["n"].to_numpy(), g["s"].to_numpy()) if len(g) > 1 else 1.0
        at = g[g["n"] == largest].iloc[0]
        scale_n = (target_n / largest) ** max(k, 1.0)
        scale_m = target_m / variants if rule in ("variant_qc", "select_snps") else 1.0
        s = at["s"] * scale_n * scale_m
        if rule.startswith("train/"):
            s *= runs / at["jobs"]              # as if all 1,000 runs were this method
        k_mem = slope(g["n"].to_numpy(), g["max_rss"].to_numpy()) if len(g) > 1 else 1.0
        rows.append({"rule": rule, "slope": k, "mem_slope": k_mem, "s_at_largest": at["s"],
                     "hours_500k": s / 3600, "core_hours_500k": 2 * s / 3600,
                     "rss_gb_500k": at["max_rss"] * (target_n / largest) ** max(k_mem, 1.0)
                     / 1024})
    if len(king):
        k = slope(king["n"].to_numpy(), king["s"].to_numpy())
        big = king.iloc[-1]
        s = big["s"] * (target_n / big["n"]) ** 2 * target_m / big["variants"]
        rows.append({"rule": "unrelated (KING from genotypes)", "slope": k,
                     "s_at_largest": big["s"], "hours_500k": s / 3600,
                     "core_hours_500k": 2 * s / 3600, "rss_gb_500k": np.nan})
    return pd.DataFrame(rows).set_index("rule")


def report(out: Path, plot: Path | None, variants: int) -> None:
    frames = []
    for work in sorted(out.glob("n*")):
        if (work / "results/scale/report/report.html").exists():   # finished runs only
            c = rule_costs(work).reset_index()
            c["n"] = int(work.name[1:])
            frames.append(c)
    costs = pd.concat(frames)
    king = pd.read_csv(out / "king.tsv", sep="\t") if (out / "king.tsv").exists() \
        else pd.DataFrame()
    pd.set_option("display.width", 250)
    pd.set_option("display.max_columns", None)
    print(costs.pivot_table(index="rule", columns="n", values=["s", "max_rss"]).round(1))
    if len(king):
        print(king)
    print(extrapolate(costs, king, variants).round(2))
    if plot:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(7, 5))
        for rule, g in costs.groupby("rule"):
            g = g.sort_values("n")
            ax.plot(g["n"], g["s"], "o-", label=rule)
        if len(king):
            ax.plot(king["n"], king["s"], "s--", color="k",
                    label=f"unrelated, KING from genotypes ({king['variants'].iloc[0]:,} variants)")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("people")
        ax.set_ylabel("wall time per rule (s, 2 cores)")
        ax.set_title(f"cmix workflow, {variants:,} variants, 2 cores")
        ax.legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(plot, dpi=120)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("what", choices=["run", "king", "report"])
    p.add_argument("--n", type=int, nargs="+", default=[10_000, 30_000, 100_000])
    p.add_argument("--variants", type=int, default=100_000)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--plot", type=Path)
    p.add_argument("--fast", action="store_true",
                   help="run: make each cohort with fast_cohort (LD-free, minutes at 100k) "
                        "instead of the workflow's simulate rule")
    a = p.parse_args()
    a.out.mkdir(parents=True, exist_ok=True)
    if a.what == "run":
        for n in a.n:
            run_cohort(n, a.variants, a.out, fast=a.fast)
    elif a.what == "king":
        run_king(a.n, a.variants, a.out)
    else:
        report(a.out, a.plot, a.variants)


if __name__ == "__main__":
    main()
