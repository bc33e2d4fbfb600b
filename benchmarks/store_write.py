"""Benchmark: write a trait store (default 100,000 samples x 1,000 SNPs) from a .bed.

Makes an LD-free cohort with cmix.simulate.fast.simulate_genotypes_fast (300,000 x 2,000
SNPs; 1,000 of them, in random order as a p-value ranking gives, are selected and a
third count the .bim A2), a phenotype table with a categorical trait, then times, in
the same run on the same inputs:

  cmix      build_store: labels + split + effect-allele dosages -> compressed Zarr
  bed-reader  reading the same samples x SNPs into memory as int8 (no writing)
  plink2    --keep --extract --make-bed (writes the same subset as a .bed)

and checks the store's dosages against bed-reader's. Then times the store's checksum
check (what every training run does first) and ``cmix verify``'s full check against
reading every row. The compared runs alternate over ``--repeats`` rounds
(benchmarks/alternate.py); prints the median and min of the per-round ratios, the load
average, the median times and the store's size on disk. Goals at UK Biobank size
(--n-samples 300000): < 60 s on 2 cores, < 300 MB.

    python benchmarks/store_write.py [--n-samples 100000] [--n-snps 1000] [--repeats 3] [--workdir DIR]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
from alternate import alternate, load_summary, ratios, run_process  # noqa: E402
from alternate import summary as summary_of  # noqa: E402


def du(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n-samples", type=int, default=100_000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--n-snps", type=int, default=1000)
    ap.add_argument("--workdir", default=None)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()

    from cmix.genotypes import build_store as store
    from cmix.store.verify import verify_store
    from cmix.readers.plink import open_bfile
    from cmix.readers.sources import GenotypeFiles
    from cmix.simulate.fast import simulate_genotypes_fast

    work = Path(args.workdir or tempfile.mkdtemp(prefix="cmix_store_bench_"))
    work.mkdir(parents=True, exist_ok=True)
    n, k = args.n_samples, args.n_snps
    t = time.perf_counter()
    prefix = simulate_genotypes_fast(work / "cohort", n, 2 * k, seed=args.seed)
    print(f"simulated {n} x {2 * k} .bed in {time.perf_counter() - t:.1f} s")
    bf = open_bfile(prefix)
    rng = np.random.default_rng(args.seed)

    # inputs: 1,000 SNPs in random order, a third counting A2; 95% of samples kept
    var = rng.choice(bf.n_variants, k, replace=False)
    bim = bf.bim.iloc[var]
    flip = np.arange(k) % 3 == 1
    snps = pd.DataFrame({"variant_id": bim.variant_id.to_numpy(), "chrom": bim.chrom.to_numpy(),
                         "pos": bim.pos.to_numpy(),
                         "effect_allele": np.where(flip, bim.a2, bim.a1),
                         "other_allele": np.where(flip, bim.a1, bim.a2),
                         "beta": rng.normal(0, 0.05, k), "log10_p": -np.sort(rng.uniform(2, 30, k))[::-1],
                         "p": "1e-5", "bim_index": var})
    snps.to_csv(work / "trait.snps.tsv", sep="\t", index=False)
    keep_mask = rng.random(n) < 0.95
    iids = bf.fam.iid.to_numpy()
    (work / "keep.id").write_text("#FID\tIID\n" + "".join(f"{i}\t{i}\n" for i in iids[keep_mask]))
    codes = rng.choice(["1", "2", "3", "4", "5", "6", "-1", "-3", ""], n,
                       p=[.11, .04, .38, .37, .06, .01, .01, .01, .01])
    pd.DataFrame({"eid": iids, "f.1747.0.0": codes}).to_csv(work / "pheno.tsv", sep="\t",
                                                           index=False)
    config = {"field": 1747, "kind": "categorical",
              "classes": {"blonde": [1], "red": [2], "brown": [3, 4], "black": [5]}}

    import zarr
    from bed_reader import open_bed

    from cmix.store.read import load_rows

    out = work / "trait.zarr"
    (work / "snps.extract").write_text("\n".join(snps.variant_id) + "\n")
    built = {}

    def build():
        t = time.perf_counter()
        built["summary"] = store.build_store(
            out, GenotypeFiles(bfile=prefix),
            store.StoreInputs(snps=work / "trait.snps.tsv", pheno=work / "pheno.tsv",
                              trait="hair_colour", trait_config=config),
            store.StoreSamples(keep=work / "keep.id"), store.StoreOptions(force=True))
        wall = time.perf_counter() - t
        if "ids" not in built:
            ids = zarr.open_group(str(out), mode="r", zarr_format=2)["sample_id"][:]
            built["ids"] = ids
            (work / "ids.keep").write_text("".join(f"{i}\t{i}\n" for i in ids))
        return {"wall": wall}

    def bedreader():
        sample_pos = pd.Index(bf.fam.iid).get_indexer(built["ids"])
        t = time.perf_counter()
        with open_bed(str(bf.bed_path), count_A1=True, num_threads=2) as bed:
            built["a1"] = bed.read(index=np.s_[sample_pos, var], dtype="int8")
        return {"wall": time.perf_counter() - t}

    def plink2():
        return run_process(["plink2", "--bfile", str(prefix), "--keep", str(work / "ids.keep"),
                            "--extract", str(work / "snps.extract"), "--make-bed", "--threads",
                            "2", "--out", str(work / "subset")])

    runs = {"cmix": build, "bed-reader": bedreader}
    if shutil.which("plink2"):
        runs["plink2"] = plink2
    build()                      # untimed: page cache, numba's kernel cache
    got, loads = alternate(runs, args.repeats)
    wall = {name: [r["wall"] for r in rs] for name, rs in got.items()}
    summary = built["summary"]
    t_cmix = statistics.median(wall["cmix"])
    t_bedreader = statistics.median(wall["bed-reader"])
    size = du(out)
    root = zarr.open_group(str(out), mode="r", zarr_format=2)
    expected = np.where(built["a1"] == -127, -1, np.where(flip[None, :], 2 - built["a1"], built["a1"]))
    t = time.perf_counter()
    same = np.array_equal(root["call_dosage"][:], expected)
    t_read = time.perf_counter() - t

    # the checksum check every training run does first, and cmix verify's full check,
    # against reading every row as memory-mode training does (alternating rounds)
    def timer(fn):
        def run():
            t = time.perf_counter()
            fn()
            return {"wall": time.perf_counter() - t}
        return run

    checks, check_loads = alternate({
        "load": timer(lambda: load_rows(root, np.arange(root["call_dosage"].shape[0]))),
        "verify": timer(lambda: verify_store(out)),
        "verify_full": timer(lambda: verify_store(out, decode=True))}, args.repeats)
    cwall = {name: [r["wall"] for r in rs] for name, rs in checks.items()}
    t_load, t_verify = statistics.median(cwall["load"]), statistics.median(cwall["verify"])
    t_verify_full = statistics.median(cwall["verify_full"])
    t_plink2 = statistics.median(wall["plink2"]) if "plink2" in wall else None
    print(f"store write, {args.repeats} alternating rounds: cmix build_store "
          f"{summary_of(wall['cmix'], ' s')}")
    print(f"  ratio cmix / bed-reader read: {summary_of(ratios(wall['cmix'], wall['bed-reader']))}")
    if t_plink2 is not None:
        print(f"  ratio cmix / plink2 --make-bed subset: "
              f"{summary_of(ratios(wall['cmix'], wall['plink2']))}")
    print(f"  {load_summary(loads)}")
    print(f"  checksum check / loading every row: "
          f"{summary_of(ratios(cwall['verify'], cwall['load']))}; {load_summary(check_loads)}")

    result = {
        "n_samples_stored": summary["n_samples"], "n_snps": k,
        "bed_bytes": bf.bed_path.stat().st_size,
        "cmix_build_store_s": round(t_cmix, 2),
        "bed_reader_read_s": round(t_bedreader, 2),
        "plink2_make_bed_subset_s": None if t_plink2 is None else round(t_plink2, 2),
        "ratio_cmix_over_bed_reader": round(t_cmix / t_bedreader, 2),
        "ratio_cmix_over_plink2": None if t_plink2 is None else round(t_cmix / t_plink2, 2),
        "store_mb": round(size / 1e6, 1),
        "raw_int8_mb": round(summary["n_samples"] * k / 1e6, 1),
        "compression": round(summary["n_samples"] * k / size, 2),
        "full_read_back_s": round(t_read, 2),
        "load_all_rows_s": round(t_load, 2),
        "verify_checksums_s": round(t_verify, 2),
        "ratio_verify_checksums_over_load": round(t_verify / t_load, 2),
        "verify_full_s": round(t_verify_full, 2),
        "dosages_equal_bed_reader": bool(same),
    }
    result["load_average"] = [round(x, 1) for x in loads]
    print(json.dumps(result, indent=1))
    if not same:
        raise SystemExit("store dosages differ from bed-reader's")


if __name__ == "__main__":
    main()
