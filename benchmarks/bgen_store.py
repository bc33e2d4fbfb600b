"""Benchmark: a 1,000-SNP fractional store from 22 BGEN files against plink2 --export A.

Makes UK Biobank-like imputed data: 22 per-chromosome BGEN v1.2 files, 8-bit, of
``--n-samples`` people (default 20,000; RESULTS.md's 50,000 with the flag), with variants per chromosome in proportion to
GRCh37 chromosome lengths (default 16,000 in all). Dosages are written with pgenlib
(hard calls from random allele frequencies plus noise, 0.1% missing) and exported by
plink2 (--export bgen-1.2 bits=8); cmix bgen-index writes each .bgi. Then times, in the
same run on the same files:

  cmix store   --bgen imp_chr{chrom}.bgen --sample ... --snps (1,000 SNPs in random
               order, a third counting BGEN allele 1) -> fractional Zarr store
  plink2       --bgen FILE ref-last --sample ... --extract --export A --export-allele,
               one run per chromosome (plink2 reads one BGEN per run), summed

both as whole commands with peak RSS (/usr/bin/time), in ``--repeats`` alternating
rounds (benchmarks/alternate.py: median and min of the per-round ratio, load average), checks the store's dosages
against plink2's to the stated quantisation, and compares cmix's peak RSS for 200
SNPs from the longest chromosome's file and from the shortest (memory must not grow
with chromosome length). Goal: cmix <= 2x plink2.

With ``--reference-tree DIR`` (a checkout of another cmix version, e.g. ``git worktree
add /tmp/cmix-main main``) it first times the reader alone on a UK Biobank-sized chunk:
one BGEN of ``--chunk-samples`` people (default 487,409, UK Biobank's imputed release)
and ``--chunk-variants`` variants (8-bit, zlib, as UK Biobank ships them), every block
decoded to dosages by ``open_bgen(...).read_dosages`` of this tree and of DIR, each in
its own process with the other's code off the path, in alternating rounds; it prints
the ratio and checks the two readers' dosages are identical. ``--reader-only`` stops
there.

    python benchmarks/bgen_store.py [--n-samples 20000] [--n-variants 16000] [--repeats 3] [--workdir DIR]
    python benchmarks/bgen_store.py --reference-tree /tmp/cmix-main --reader-only
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
from alternate import alternate, load_summary, ratios, run_process, summary  # noqa: E402

# GRCh37 autosome lengths in Mb (chromosome 1..22)
CHROM_MB = [249, 243, 198, 191, 181, 171, 159, 146, 141, 136, 135, 134, 115, 107, 103, 90,
            81, 78, 59, 63, 48, 51]
TRAIT_CONFIG = {"field": 30100, "kind": "continuous", "binarise": "median"}


def timed(cmd: list[str], log: Path) -> tuple[float, int]:
    """Run a command; (wall seconds, peak RSS in MiB) from /usr/bin/time."""
    stats = log.with_suffix(".time")
    with open(log, "w") as fh:
        r = subprocess.run(["/usr/bin/time", "-f", "%e %M", "-o", str(stats), *cmd],
                           stdout=fh, stderr=subprocess.STDOUT)
    if r.returncode != 0:
        sys.exit(f"failed ({r.returncode}): {' '.join(cmd)}; see {log}")
    wall, kib = stats.read_text().split()[-2:]
    return float(wall), int(kib) // 1024


def make_chromosome(work: Path, chrom: int, n_variants: int, ids: np.ndarray, rng) -> Path:
    """Write imp_chr{chrom}.bgen (+ .sample, .bgi) from pgenlib dosages; return the .bgen."""
    import pgenlib

    n = len(ids)
    stem = work / f"dos_chr{chrom}"
    writer = pgenlib.PgenWriter(f"{stem}.pgen".encode(), n, n_variants, False,
                                dosage_present=True)
    for s in range(0, n_variants, 100):
        k = min(100, n_variants - s)
        af = rng.uniform(0.02, 0.5, k).astype(np.float32)
        g = (rng.random((k, n), dtype=np.float32) < af[:, None]).astype(np.float32)
        g += rng.random((k, n), dtype=np.float32) < af[:, None]
        d = np.clip(g + rng.normal(0, 0.15, (k, n)).astype(np.float32), 0, 2)
        d[rng.random((k, n), dtype=np.float32) < 0.001] = -9
        writer.append_dosages_batch(np.ascontiguousarray(d, dtype=np.float32))
    writer.close()
    pos = np.sort(rng.choice(CHROM_MB[chrom - 1] * 1_000_000, n_variants, replace=False)) + 1
    alleles = rng.choice(list("ACGT"), (n_variants, 2))
    same = alleles[:, 0] == alleles[:, 1]
    alleles[same, 1] = np.where(alleles[same, 0] == "A", "G", "A")
    pd.DataFrame({"#CHROM": chrom, "POS": pos, "ID": [f"rs{chrom}_{j}" for j in range(n_variants)],
                  "REF": alleles[:, 0], "ALT": alleles[:, 1]}).to_csv(
        f"{stem}.pvar", sep="\t", index=False)
    pd.DataFrame({"#FID": ids, "IID": ids}).to_csv(f"{stem}.psam", sep="\t", index=False)
    out = work / f"imp_chr{chrom}"
    subprocess.run(["plink2", "--pfile", str(stem), "--export", "bgen-1.2", "bits=8",
                    "--threads", "2", "--out", str(out)], check=True, capture_output=True)
    for ext in (".pgen", ".pvar", ".psam"):
        Path(f"{stem}{ext}").unlink()
    subprocess.run([sys.executable, "-m", "cmix.cli", "bgen-index", f"{out}.bgen"], check=True,
                   capture_output=True)
    return Path(f"{out}.bgen")


# one process: open the BGEN with the tree on PYTHONPATH, decode every variant, write
# the open + read time (s) and the dosages for the comparison
READ_CHUNK = """
import sys, time, numpy as np
from cmix.readers.bgen import open_bgen
t = time.perf_counter()
bg = open_bgen(sys.argv[1], sys.argv[2])
d = bg.read_dosages(np.arange(bg.n_variants))
t = time.perf_counter() - t
np.save(sys.argv[3], d)
open(sys.argv[4], "w").write(str(t))
"""


def reader_speed(work: Path, reference: Path, n: int, m: int, repeats: int, rng) -> None:
    """Time this tree's BGEN reader against the one in ``reference`` on one chunk of
    ``n`` samples x ``m`` variants (see the module docstring); print the ratio."""
    stem = work / "chunk"
    if not Path(f"{stem}.bgen.bgi").exists():
        make_chromosome(work, 1, m, np.array([str(1_000_000 + i) for i in range(n)]), rng)
        for ext in (".bgen", ".sample", ".bgen.bgi"):
            os.replace(work / f"imp_chr1{ext}", f"{stem}{ext}")
    ours_root = Path(__file__).resolve().parent.parent
    trees = {"this tree": ours_root, "reference": Path(reference).resolve()}

    def run(name):
        env = {**os.environ, "PYTHONPATH": str(trees[name])}
        out = work / f"chunk_{name.replace(' ', '_')}"
        res = run_process([sys.executable, "-c", READ_CHUNK, f"{stem}.bgen", f"{stem}.sample",
                           f"{out}.npy", f"{out}.time"], env=env, cwd=work)
        return {"read": float(Path(f"{out}.time").read_text()), **res}

    got, loads = alternate({name: (lambda name=name: run(name)) for name in trees}, repeats)
    a = np.load(work / "chunk_this_tree.npy")
    b = np.load(work / "chunk_reference.npy")
    same = bool(np.array_equal(np.isnan(a), np.isnan(b)))
    diff = float(np.nanmax(np.abs(a - b))) if a.size else 0.0
    size = Path(f"{stem}.bgen").stat().st_size / 2**20
    print(f"reader on one BGEN chunk ({n} samples x {m} variants, 8-bit zlib, {size:.0f} MiB):")
    for name in trees:
        print(f"  {name} ({trees[name]}): open + read {summary([r['read'] for r in got[name]], ' s', '{:.2f}')}, "
              f"whole process {summary([r['wall'] for r in got[name]], ' s', '{:.1f}')}, "
              f"peak RSS {max(r['rss'] for r in got[name]):.0f} MiB")
    read = {name: [r["read"] for r in got[name]] for name in trees}
    print(f"  this tree / reference (open + read), {repeats} alternating rounds: "
          f"{summary(ratios(read['this tree'], read['reference']))}")
    print(f"  {load_summary(loads)}")
    print(f"  dosages: same missing calls {same}, max |difference| {diff:.2e}")


def write_selection(path: Path, bim: pd.DataFrame, rows: np.ndarray, rng) -> pd.DataFrame:
    """A `cmix select`-style table of ``bim`` rows, a third counting BGEN allele 1."""
    from cmix.genotypes.sumstats.selection_files import write_selection as write

    sel = bim.iloc[rows]
    flip = rng.random(len(sel)) < 1 / 3
    effect = np.where(flip, sel["a2"], sel["a1"])
    other = np.where(flip, sel["a1"], sel["a2"])
    log10_p = -np.sort(rng.uniform(8, 30, len(sel)))[::-1]
    table = pd.DataFrame({"variant_id": sel["variant_id"].to_numpy(), "chrom": sel["chrom"].to_numpy(),
                          "pos": sel["pos"].to_numpy(), "effect_allele": effect,
                          "other_allele": other, "beta": rng.normal(0, 0.05, len(sel)),
                          "log10_p": log10_p, "p": [f"1E{v:.2f}" for v in log10_p],
                          "bim_index": rows})
    write(path, table, pd.DataFrame({"step": ["random"], "n_removed": [0],
                                     "n_remaining": [len(sel)]}))
    return table


def store_cmd(work: Path, snps: Path, out: Path, chroms: list[int]) -> list[str]:
    return [sys.executable, "-m", "cmix.cli", "store", "--bgen", str(work / "imp_chr{chrom}.bgen"),
            "--sample", str(work / "imp_chr{chrom}.sample"), "--fam", str(work / "cohort.fam"),
            "--chroms", *map(str, chroms), "--snps", str(snps), "--pheno",
            str(work / "pheno.tsv"), "--trait", "mpv", "--trait-config",
            json.dumps(TRAIT_CONFIG), "--force", "--out", str(out)]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n-samples", type=int, default=20_000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--n-variants", type=int, default=16_000)
    ap.add_argument("--n-snps", type=int, default=1000)
    ap.add_argument("--workdir", default=None)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--reference-tree", default=None,
                    help="a checkout of another cmix version: time its BGEN reader against "
                         "this tree's on one UK Biobank-sized chunk first")
    ap.add_argument("--chunk-samples", type=int, default=487_409)
    ap.add_argument("--chunk-variants", type=int, default=200)
    ap.add_argument("--reader-only", action="store_true",
                    help="stop after the reader comparison")
    args = ap.parse_args()

    from cmix.readers.sources import open_source
    from cmix.store.read import load_rows
    from cmix.store.read import open_store

    work = Path(args.workdir or tempfile.mkdtemp(prefix="cmix_bgen_bench_"))
    work.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(args.seed)
    if args.reference_tree:
        reader_speed(work, args.reference_tree, args.chunk_samples, args.chunk_variants,
                     args.repeats, rng)
        if args.reader_only:
            return
    n = args.n_samples
    ids = np.array([str(1_000_000 + i) for i in range(n)])
    chroms = list(range(1, 23))
    per_chrom = np.maximum(50, np.round(args.n_variants * np.array(CHROM_MB) / sum(CHROM_MB)))
    t = time.perf_counter()
    if not (work / "imp_chr22.bgen.bgi").exists():
        for c in chroms:
            make_chromosome(work, c, int(per_chrom[c - 1]), ids, rng)
    print(f"22 BGEN files, {n} samples, {int(per_chrom.sum())} variants "
          f"({int(per_chrom.min())}-{int(per_chrom.max())} per chromosome), "
          f"{sum((work / f'imp_chr{c}.bgen').stat().st_size for c in chroms) / 2**30:.2f} GiB, "
          f"made in {time.perf_counter() - t:.0f} s")
    pd.DataFrame({"fid": ids, "iid": ids, "f": "0", "m": "0", "sex": "0", "ph": "-9"}).to_csv(
        work / "cohort.fam", sep=" ", header=False, index=False)
    pd.DataFrame({"eid": ids, "f.30100.0.0": np.round(rng.normal(9, 1, n), 2)}).to_csv(
        work / "pheno.tsv", sep="\t", index=False)

    src = open_source(bgen=work / "imp_chr{chrom}.bgen", sample=work / "imp_chr{chrom}.sample",
                      fam=work / "cohort.fam")
    bim = src.bim
    rows = rng.choice(len(bim), args.n_snps, replace=False)
    sel = write_selection(work / "sel.tsv", bim, rows, rng)

    # cmix store and plink2 --export A (one run per chromosome), alternating rounds
    def cmix_run():
        t, rss = timed(store_cmd(work, work / "sel.tsv", work / "store.zarr", chroms),
                       work / "cmix_store.log")
        return {"wall": t, "rss": rss}

    def plink2_run():
        t_p2, rss_p2 = 0.0, 0
        for c in chroms:
            part = sel[sel["chrom"] == str(c)]
            if not len(part):
                continue
            part["variant_id"].to_csv(work / "extract.txt", index=False, header=False)
            part[["variant_id", "effect_allele"]].to_csv(work / "allele.txt", sep="\t",
                                                        index=False, header=False)
            t_c, rss_c = timed(["plink2", "--bgen", str(work / f"imp_chr{c}.bgen"), "ref-last",
                                "--sample", str(work / f"imp_chr{c}.sample"), "--extract",
                                str(work / "extract.txt"), "--export", "A", "--export-allele",
                                str(work / "allele.txt"), "--threads", "2", "--out",
                                str(work / f"p2_chr{c}")], work / f"p2_chr{c}.log")
            t_p2 += t_c
            rss_p2 = max(rss_p2, rss_c)
        return {"wall": t_p2, "rss": rss_p2}

    got, loads = alternate({"cmix": cmix_run, "plink2": plink2_run}, args.repeats)
    ref = []
    for c in chroms:
        if not (sel["chrom"] == str(c)).any():
            continue
        raw = pd.read_csv(work / f"p2_chr{c}.raw", sep="\t", dtype={"IID": str},
                          usecols=lambda col: col not in ("FID", "PAT", "MAT", "SEX",
                                                          "PHENOTYPE"))
        ref.append(raw.set_index("IID").rename(columns=lambda col: col.rsplit("_", 1)[0]))
    ref = pd.concat(ref, axis=1)
    t_cmix = [r["wall"] for r in got["cmix"]]
    t_p2 = [r["wall"] for r in got["plink2"]]
    rss_cmix = max(r["rss"] for r in got["cmix"])
    rss_p2 = max(r["rss"] for r in got["plink2"])

    root = open_store(work / "store.zarr")
    x = load_rows(root, np.arange(root["call_dosage"].shape[0]))
    sid = root["sample_id"][:].tolist()
    vid = root["variant_id"][:].tolist()
    r = ref.loc[sid, vid].to_numpy(np.float32)
    called = ~np.isnan(r)
    same_missing = bool(np.array_equal(x == -1, ~called))
    max_err = float(np.abs(x[called] - r[called]).max())
    size = sum(p.stat().st_size for p in (work / "store.zarr").rglob("*") if p.is_file())

    # memory against chromosome length: 200 SNPs from the longest vs the shortest file
    mem = {}
    k_mem = min(200, int((bim["chrom"] == "21").sum()))
    for c in (1, 21):
        part = np.flatnonzero(bim["chrom"].to_numpy() == str(c))
        write_selection(work / f"sel_chr{c}.tsv", bim, rng.choice(part, k_mem, replace=False),
                        rng)
        mem[c] = timed(store_cmd(work, work / f"sel_chr{c}.tsv", work / f"store_chr{c}.zarr",
                                 chroms), work / f"cmix_store_chr{c}.log")

    print(f"cmix store (22 BGEN -> {args.n_snps} SNPs x {len(sid)} samples): "
          f"{summary(t_cmix, ' s', '{:.1f}')}, peak RSS {rss_cmix} MiB, store {size / 2**20:.1f} MiB")
    print(f"plink2 --extract --export A (22 runs): {summary(t_p2, ' s', '{:.1f}')}, "
          f"peak RSS {rss_p2} MiB")
    print(f"cmix / plink2 (goal <= 2x), {args.repeats} alternating rounds: "
          f"{summary(ratios(t_cmix, t_p2))}")
    print(load_summary(loads))
    print(f"dosages vs plink2: max |difference| {max_err:.5f} (stated quantisation 0.004 + "
          f"plink2's 3 printed decimals), missing calls identical: {same_missing}")
    for c, (t_c, rss_c) in mem.items():
        print(f"{k_mem} SNPs from chromosome {c} ({int(per_chrom[c - 1])} variants in its file): "
              f"{t_c:.1f} s, peak RSS {rss_c} MiB")


if __name__ == "__main__":
    main()
