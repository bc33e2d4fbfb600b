"""Genotypes as UK Biobank ships them: per-chromosome .bed sets with one .fam, PLINK 2
.pgen, BGEN v1.2 imputed dosages. Every fixture is written by plink2 from a simulated
cohort (--make-pgen, --chr N --make-bed, --export bgen-1.2 bits=8 from dosages imported
from a VCF DS field), and every expected value comes from plink2 on the same files, from
cbgen's own index, or from a direct pandas computation on the summary statistics."""

import gzip
import shutil
import subprocess

import numpy as np
import pandas as pd
import pytest

from cmix.readers import bgen as bgen_mod
from cmix.readers import bgen_blocks, oxford
from cmix.cli import main
from cmix.store.read import load_rows
from cmix.readers.plink import open_bfile
from cmix.simulate.balding_nichols import simulate_cohort
from cmix.store.read import open_store
from conftest import requires_plink2

pytestmark = [requires_plink2, pytest.mark.plink2]

CHROMS = ["1", "2", "3"]
QC_FLAGS = ["--maf", "0.01", "--hwe", "1e-7", "--geno", "0.05"]
TRAIT_CONFIG = '{"field": 30100, "kind": "continuous", "binarise": "median"}'
# stated store quantisation (1/125, error <= 0.004) + plink2 --export A's 3 decimals
# (0.0005) + plink2's internal dosage precision (1/16384)
FRACTIONAL_TOLERANCE = 0.004 + 0.0005 + 1 / 16384 + 1e-6


def plink2(*args):
    r = subprocess.run(["plink2", "--threads", "1", *map(str, args)], capture_output=True,
                       text=True)
    assert r.returncode == 0, r.stdout + r.stderr


def write_dosage_vcf(path, bf, seed=1):
    """A VCF whose only FORMAT field is DS (ALT dosage): each hard call plus noise,
    clipped to 0..2, missing calls '.'."""
    g = bf.read()
    rng = np.random.default_rng(seed)
    ds = np.clip(g + rng.normal(0, 0.2, g.shape), 0, 2)
    with open(path, "w") as f:
        f.write('##fileformat=VCFv4.2\n##FORMAT=<ID=DS,Number=1,Type=Float,Description="d">\n')
        f.write("#CHROM\tPOS\tID\tREF\tALT\tQUAL\tFILTER\tINFO\tFORMAT\t"
                + "\t".join(bf.fam["iid"]) + "\n")
        for j, r in enumerate(bf.bim.itertuples()):
            vals = np.char.mod("%.3f", ds[j])
            vals[g[j] < 0] = "."
            f.write(f"{r.chrom}\t{r.pos}\t{r.variant_id}\t{r.a2}\t{r.a1}\t.\t.\t.\tDS\t"
                    + "\t".join(vals) + "\n")


@pytest.fixture(scope="module")
def ukb(tmp_path_factory):
    d = tmp_path_factory.mktemp("ukb")
    simulate_cohort(d / "c", n_samples=500, n_variants=1500, n_chrom=3, n_discovery=1500,
                    seed=5)
    merged = d / "c" / "genotypes"
    plink2("--bfile", merged, "--make-pgen", "--out", d / "merged")
    shutil.copy(f"{merged}.fam", d / "cal.fam")
    shutil.copy(d / "merged.psam", d / "shared.psam")
    for c in CHROMS:
        plink2("--bfile", merged, "--chr", c, "--make-bed", "--out", d / f"cal_chr{c}")
        (d / f"cal_chr{c}.fam").unlink()                     # one shared .fam, as UKB
        plink2("--bfile", merged, "--chr", c, "--make-pgen", "--out", d / f"pg_chr{c}")
        (d / f"pg_chr{c}.psam").unlink()
    bf = open_bfile(merged)
    write_dosage_vcf(d / "frac.vcf", bf)
    plink2("--vcf", d / "frac.vcf", "dosage=DS", "--make-pgen", "--out", d / "frac")
    rng = np.random.default_rng(2)
    pvar = pd.read_csv(d / "frac.pvar", sep="\t", comment=None, dtype=str)
    for c in CHROMS:
        plink2("--pfile", d / "frac", "--chr", c, "--export", "bgen-1.2", "bits=8",
               "--out", d / f"imp_chr{c}")
        assert main(["bgen-index", str(d / f"imp_chr{c}.bgen")]) == 0
        # mfi: plink2's BGEN writes allele1 = ALT, allele2 = REF (ref-last)
        v = pvar[pvar["#CHROM"] == c]
        info = np.round(rng.uniform(0.3, 1.0, len(v)), 4)
        pd.DataFrame({"alt": v["ID"], "rsid": v["ID"], "pos": v["POS"], "a1": v["ALT"],
                      "a2": v["REF"], "maf": 0.1, "minor": v["ALT"], "info": info}).to_csv(
            d / f"mfi_chr{c}.txt", sep="\t", header=False, index=False)
    return d


def _qc(args, out):
    assert main(["qc", *args, *QC_FLAGS, "--out", str(out)]) == 0
    return (out.with_name(out.name + ".snplist").read_text(),
            pd.read_csv(out.with_name(out.name + ".vqc.tsv"), sep="\t"))


def test_qc_on_chromosome_sets_and_pgen_equals_merged_and_plink2(ukb, tmp_path):
    merged = str(ukb / "c" / "genotypes")
    plink2("--bfile", merged, *QC_FLAGS, "--write-snplist", "--out", tmp_path / "p2")
    reference = (tmp_path / "p2.snplist").read_text()
    snps, table = _qc(["--bfile", merged], tmp_path / "merged")
    assert snps == reference
    pgen_snps, pgen_table = _qc(["--pfile", str(ukb / "merged")], tmp_path / "pgen")
    assert pgen_snps == reference
    pd.testing.assert_frame_equal(pgen_table, table)
    for flag, pattern, shared in (("--bfile", "cal_chr{chrom}", "cal.fam"),
                                  ("--pfile", "pg_chr{chrom}", "shared.psam")):
        parts = [_qc([flag, str(ukb / pattern), "--fam", str(ukb / shared), "--chroms", c],
                     tmp_path / f"{flag[2:]}{c}") for c in CHROMS]
        assert "".join(p[0] for p in parts) == reference
        pd.testing.assert_frame_equal(pd.concat([p[1] for p in parts], ignore_index=True),
                                      table)


def test_unrelated_on_chromosome_set_and_pgen_equals_plink2(ukb, tmp_path):
    merged = ukb / "c" / "genotypes"
    plink2("--bfile", merged, "--king-cutoff", "0.0884", "--out", tmp_path / "p2")
    runs = {"set": ["--bfile", str(ukb / "cal_chr{chrom}"), "--fam", str(ukb / "cal.fam"),
                    "--chroms", *CHROMS],
            "pgen": ["--pfile", str(ukb / "merged")],
            "pgen_set": ["--pfile", str(ukb / "pg_chr{chrom}"), "--fam",
                         str(ukb / "shared.psam"), "--chroms", *CHROMS]}
    for name, args in runs.items():
        assert main(["unrelated", *args, "--out", str(tmp_path / name), "--device", "cpu"]) == 0
        for ext in ("king.cutoff.in.id", "king.cutoff.out.id"):
            assert ((tmp_path / f"{name}.{ext}").read_text()
                    == (tmp_path / f"p2.{ext}").read_text()), (name, ext)
    assert main(["unrelated", "--bfile", str(merged), "--out", str(tmp_path / "merged"),
                 "--device", "cpu"]) == 0
    assert (tmp_path / "set.kin0").read_text() == (tmp_path / "merged.kin0").read_text()


def _select(ukb, out, *genotypes, top=60):
    args = ["select", "--sumstats", str(ukb / "c" / "sumstats" / "mean_platelet_volume.txt.gz"),
            *genotypes, "--top", str(top), "--out", str(out)]
    assert main(args) == 0
    return pd.read_csv(out, sep="\t", dtype={"chrom": str})


def _store(ukb, out, snps, *genotypes):
    assert main(["store", *genotypes, "--snps", str(snps), "--pheno",
                 str(ukb / "c" / "phenotypes.tsv"), "--trait", "mpv", "--trait-config",
                 TRAIT_CONFIG, "--out", str(out)]) == 0
    root = open_store(out)
    x = load_rows(root, np.arange(root["call_dosage"].shape[0]))
    return root, pd.DataFrame(x.astype(float), index=root["sample_id"][:].tolist(),
                              columns=root["variant_id"][:].tolist())


def _plink2_export_a(tmp_path, name, snps_table, *source):
    """plink2 --extract --export A counting each SNP's effect allele: samples x SNPs."""
    snps_table["variant_id"].to_csv(tmp_path / "extract.txt", index=False, header=False)
    snps_table[["variant_id", "effect_allele"]].to_csv(tmp_path / "allele.txt", sep="\t",
                                                       index=False, header=False)
    plink2(*source, "--extract", tmp_path / "extract.txt", "--export", "A", "--export-allele",
           tmp_path / "allele.txt", "--out", tmp_path / name)
    raw = pd.read_csv(tmp_path / f"{name}.raw", sep="\t", dtype={"IID": str})
    raw.index = raw["IID"]
    raw = raw.iloc[:, 6:]
    raw.columns = [c.rsplit("_", 1)[0] for c in raw.columns]
    return raw


def test_store_from_pgen_chromosome_set_equals_plink2_export(ukb, tmp_path):
    sel = _select(ukb, tmp_path / "sel.tsv", "--pfile", str(ukb / "pg_chr{chrom}"), "--fam",
                  str(ukb / "shared.psam"), "--chroms", *CHROMS)
    root, ours = _store(ukb, tmp_path / "s.zarr", tmp_path / "sel.tsv", "--pfile",
                        str(ukb / "pg_chr{chrom}"), "--fam", str(ukb / "shared.psam"),
                        "--chroms", *CHROMS)
    assert root.attrs["dosage_encoding"]["kind"] == "hard calls"
    assert root["call_dosage"].dtype == np.int8
    ref = _plink2_export_a(tmp_path, "p2", sel, "--pfile", ukb / "merged")
    ref = ref.loc[ours.index, ours.columns]
    assert np.array_equal(ours.to_numpy(), ref.fillna(-1).to_numpy())


@pytest.mark.parametrize("source", ["bgen", "pgen"])
def test_fractional_store_equals_plink2_export_up_to_quantisation(ukb, tmp_path, source,
                                                                   monkeypatch):
    if source == "bgen":
        geno = ["--bgen", str(ukb / "imp_chr{chrom}.bgen"), "--sample",
                str(ukb / "imp_chr{chrom}.sample"), "--fam", str(ukb / "cal.fam"),
                "--chroms", *CHROMS]
    else:
        geno = ["--pfile", str(ukb / "frac")]
    sel = _select(ukb, tmp_path / "sel.tsv", *geno)
    decoded, listed = [], []
    real = bgen_mod.decode_dosage
    monkeypatch.setattr(bgen_mod, "decode_dosage",
                        lambda *a, **k: decoded.append(1) or real(*a, **k))
    real_bgi = bgen_mod.read_bgi
    monkeypatch.setattr(bgen_mod, "read_bgi",
                        lambda *a: listed.append(len(real_bgi(*a)[0])) or real_bgi(*a))
    root, ours = _store(ukb, tmp_path / "s.zarr", tmp_path / "sel.tsv", *geno)
    enc = root.attrs["dosage_encoding"]
    assert enc["kind"] == "fractional" and root["call_dosage"].dtype == np.uint8
    assert enc["scale"] == 125 and enc["missing"] == 255
    if source == "bgen":
        assert len(decoded) == len(sel) < 1500 // 10     # only the selected SNPs decoded
        assert sum(listed) == len(sel)     # and only their index rows are listed
        refs = [_plink2_export_a(tmp_path, f"p2_{c}", sel[sel["chrom"] == c], "--bgen",
                                 ukb / f"imp_chr{c}.bgen", "ref-last", "--sample",
                                 ukb / f"imp_chr{c}.sample") for c in CHROMS
                if (sel["chrom"] == c).any()]
        ref = pd.concat(refs, axis=1)
    else:
        ref = _plink2_export_a(tmp_path, "p2", sel, "--pfile", ukb / "frac")
    ref = ref.loc[ours.index, ours.columns].to_numpy()
    ours = ours.to_numpy()
    assert np.array_equal(ours == -1, np.isnan(ref))
    called = ~np.isnan(ref)
    err = np.abs(ours[called] - ref[called])
    assert err.max() <= FRACTIONAL_TOLERANCE
    assert (ours[called] % 1 != 0).mean() > 0.5          # fractional, not hard calls


def test_bgi_offsets_match_cbgen_index(ukb, tmp_path):
    import cbgen

    path = ukb / "imp_chr2.bgen"
    ours = bgen_mod.open_bgen(path, ukb / "imp_chr2.sample")
    with cbgen.bgen_file(path) as bg:
        bg.create_metafile(tmp_path / "mf")
    with cbgen.bgen_metafile(tmp_path / "mf") as mf:
        parts = [mf.read_partition(i).variants for i in range(mf.npartitions)]
    offsets = np.concatenate([p.offset for p in parts])
    rsids = [r.decode() for p in parts for r in p.rsid]
    fd = __import__("os").open(path, __import__("os").O_RDONLY)
    try:
        starts = [int(s) + bgen_blocks.read_variant_header(fd, int(s), path, 2)[-1]
                  for s in ours.start]
    finally:
        __import__("os").close(fd)
    assert starts == offsets.tolist()
    assert ours.bim["variant_id"].tolist() == rsids


@pytest.mark.parametrize("kind", ["pfile", "bfile"])
def test_shared_sample_file_must_be_the_files_own_order(ukb, tmp_path, capsys, kind):
    """A per-chromosome set whose chromosome-2 file was written with its people in
    another order, given a shared sample file (as the set-check's advice once said):
    cmix read chromosome 2's genotypes in the shared file's order, i.e. on other people
    (15% of cells agreed with plink2), exit 0. Now refused, naming the file; the same
    files with their own sample file equal to the shared one are read as before."""
    merged = ukb / "c" / "genotypes"
    make = "--make-pgen" if kind == "pfile" else "--make-bed"
    own = ".psam" if kind == "pfile" else ".fam"
    for c in ("1", "2"):
        extra = ["--indiv-sort", "n"] if c == "2" else []      # natural sort: another order
        plink2("--bfile", merged, "--chr", c, *extra, make, "--out", tmp_path / f"s_chr{c}")
    shared = tmp_path / f"s_chr1{own}"
    args = [f"--{kind}", str(tmp_path / "s_chr{chrom}"), "--fam", str(shared),
            "--chroms", "1-2", *QC_FLAGS, "--out", str(tmp_path / "q")]
    assert main(["qc", *args]) == 1
    err = capsys.readouterr().err
    assert f"its samples are not those of {tmp_path / f's_chr2{own}'} in the same order" in err
    assert not list(tmp_path.glob("q.*"))
    # one file, another order given as --fam: the same refusal
    assert main(["qc", f"--{kind}", str(tmp_path / "s_chr1"), "--fam",
                 str(tmp_path / f"s_chr2{own}"), *QC_FLAGS, "--out", str(tmp_path / "q1")]) == 1
    assert "in the same order (sample 1 differs" in capsys.readouterr().err
    # chromosome 2 rewritten in the shared order: read, and equal to plink2
    plink2(f"--{kind}", tmp_path / "s_chr2", "--indiv-sort", "f", shared, make,
           "--out", tmp_path / "s_chr2")
    snps, _ = _qc(args[:-2], tmp_path / "q")
    plink2("--bfile", merged, "--chr", "1-2", *QC_FLAGS, "--write-snplist",
           "--out", tmp_path / "p2")
    assert snps == (tmp_path / "p2.snplist").read_text()


def test_bgen_rsid_listed_twice(ukb, tmp_path, capsys):
    """(a) a per-chromosome BGEN set with one rsid in two chromosomes' files: select
    listed it twice (exit 0) and the store crashed; now both are left out, and summary
    statistics that name it are refused, naming it.
    (b) one BGEN with an rsid at two positions: select named both rows chrom:pos:a1:a2
    (over the whole index) but the store, listing only the selected positions, kept the
    rsid and refused its own selection; both now name them alike, and the store holds
    plink2's dosages of the SNP at the selected position."""
    merged = ukb / "c" / "genotypes"
    ss = ukb / "c" / "sumstats" / "mean_platelet_volume.txt.gz"
    table = pd.read_csv(ss, sep="\t", dtype={"CHR": str})
    best = table.sort_values("P_BOLT_LMM").groupby("CHR")["SNP"].first()
    null = table[(table["CHR"] == "2") & (table["P_BOLT_LMM"] > 0.9)]["SNP"].iloc[0]
    bim = pd.read_csv(f"{merged}.bim", sep="\t", header=None, dtype=str)
    for name, renamed in (("d", best["2"]), ("e", null)):
        b = bim.copy()
        b.loc[b[1] == renamed, 1] = best["1"]
        b.to_csv(tmp_path / f"{name}.bim", sep="\t", header=False, index=False)
        for ext in ("bed", "fam"):
            shutil.copy(f"{merged}.{ext}", tmp_path / f"{name}.{ext}")
    for c in ("1", "2"):
        plink2("--bfile", tmp_path / "d", "--chr", c, "--export", "bgen-1.2", "bits=8",
               "--out", tmp_path / f"set{c}")
        assert main(["bgen-index", str(tmp_path / f"set{c}.bgen")]) == 0
    out = tmp_path / "a.tsv"
    assert main(["select", "--bgen", str(tmp_path / "set{chrom}.bgen"), "--sample",
                 str(tmp_path / "set{chrom}.sample"), "--chroms", "1-2", "--sumstats", str(ss),
                 "--top", "50", "--out", str(out)]) == 1
    err = capsys.readouterr().err
    assert f"selects variant '{best['1']}'" in err and "shares its ID with another" in err
    assert not out.exists()
    plink2("--bfile", tmp_path / "e", "--export", "bgen-1.2", "bits=8", "--out", tmp_path / "e")
    assert main(["bgen-index", str(tmp_path / "e.bgen")]) == 0
    bgen = ["--bgen", str(tmp_path / "e.bgen"), "--sample", str(tmp_path / "e.sample")]
    assert main(["select", *bgen, "--sumstats", str(ss), "--top", "50",
                 "--out", str(tmp_path / "b.tsv")]) == 0
    sel = pd.read_csv(tmp_path / "b.tsv", sep="\t")
    row = bim[bim[1] == best["1"]].iloc[0]
    assert f"1:{row[3]}:" in " ".join(sel["variant_id"])       # renamed chrom:pos:a1:a2
    store = tmp_path / "b.zarr"
    assert main(["store", *bgen, "--snps", str(tmp_path / "b.tsv"), "--pheno",
                 str(ukb / "c" / "phenotypes.tsv"), "--trait", "mpv", "--trait-config",
                 '{"field": 30100, "kind": "continuous", "binarise": "median"}',
                 "--out", str(store)]) == 0
    assert len(open_store(store)["variant_id"][:]) == 50


@pytest.mark.parametrize("case, problem", [
    ("position", "line 2, column 3: expected an integer base-pair position, found '12x'"),
    ("two_scores", "is listed with INFO scores"),
])
def test_bad_mfi_is_refused(ukb, tmp_path, capsys, case, problem):
    """A position that is no number was a ValueError traceback; one variant listed with
    two INFO scores kept the first silently."""
    lines = (ukb / "mfi_chr1.txt").read_text().splitlines(True)
    if case == "position":
        fields = lines[1].split("\t")
        fields[2] = "12x"
        lines[1] = "\t".join(fields)
    else:
        fields = lines[3].split("\t")
        fields[7] = "0.123\n" if fields[7].strip() != "0.123" else "0.456\n"
        lines.append("\t".join(fields))
    mfi = tmp_path / "mfi_chr1.txt"
    mfi.write_text("".join(lines))
    out = tmp_path / "sel.tsv"
    assert main(["select", "--sumstats",
                 str(ukb / "c" / "sumstats" / "mean_platelet_volume.txt.gz"),
                 "--bgen", str(ukb / "imp_chr1.bgen"), "--sample", str(ukb / "imp_chr1.sample"),
                 "--mfi", str(mfi), "--min-info", "0.8", "--top", "20",
                 "--out", str(out)]) == 1
    err = capsys.readouterr().err
    assert problem in err and "Traceback" not in err
    assert not out.exists()


def test_sumstats_info_column_missing_values_and_misread_text(ukb, tmp_path, capsys):
    """--min-info from the sumstats' INFO column: NA or an empty cell is a missing INFO,
    dropped and counted with the low ones; "0,9" (a decimal comma) is refused by line
    and column instead of passing as missing."""
    with gzip.open(ukb / "c" / "sumstats" / "mean_platelet_volume.txt.gz", "rt") as fh:
        ss = pd.read_csv(fh, sep="\t", dtype=str, keep_default_na=False)
    ss.loc[:9, "INFO"] = "NA"
    ss.to_csv(tmp_path / "na.tsv", sep="\t", index=False)
    bgen = ["--bgen", str(ukb / "imp_chr{chrom}.bgen"), "--sample", str(ukb / "imp_chr1.sample"),
            "--chroms", *CHROMS]
    args = ["select", *bgen, "--min-info", "0.95", "--top", "20"]
    assert main([*args, "--sumstats", str(tmp_path / "na.tsv"),
                 "--out", str(tmp_path / "na_sel.tsv")]) == 0
    steps = pd.read_csv(tmp_path / "na_sel.tsv.steps.tsv", sep="\t")
    low = (ss["INFO"].replace("NA", "0").astype(float) < 0.95).sum()
    row = steps[steps.iloc[:, 0].str.startswith("INFO < 0.95 or missing")]
    assert len(row) == 1 and int(row.iloc[0, 1]) == low
    ss.loc[4, "INFO"] = "0,9"
    ss.to_csv(tmp_path / "comma.tsv", sep="\t", index=False)
    assert main([*args, "--sumstats", str(tmp_path / "comma.tsv"),
                 "--out", str(tmp_path / "comma_sel.tsv")]) == 1
    assert "comma.tsv, line 6, column INFO: expected an INFO score, found '0,9'" in \
        capsys.readouterr().err


def test_discovery_gwas_on_dosages_writes_their_imputation_quality(ukb, tmp_path):
    """cmix gwas on a BGEN of dosages writes plink2's MaCH r2 among the people tested
    as INFO (it wrote 1, so select --min-info without an mfi file removed nothing),
    equal to plink2 --freq cols=+machr2 on the same people; on hard calls INFO stays 1."""
    mpv = '{"field": 30100, "kind": "continuous"}'
    common = ["--pheno", str(ukb / "c" / "phenotypes.tsv"), "--trait", "mpv",
              "--trait-config", mpv, "--discovery-fraction", "0.5"]
    out, ids = tmp_path / "bgen.gz", tmp_path / "disc.id"
    assert main(["gwas", "--bgen", str(ukb / "imp_chr1.bgen"), "--sample",
                 str(ukb / "imp_chr1.sample"), *common, "--ids-out", str(ids),
                 "--out", str(out)]) == 0
    ours = pd.read_csv(out, sep="\t", na_values=["NA"])
    plink2("--bgen", ukb / "imp_chr1.bgen", "ref-first", "--sample", ukb / "imp_chr1.sample",
           "--keep", ids, "--freq", "cols=+machr2", "--out", tmp_path / "f")
    freq = pd.read_csv(tmp_path / "f.afreq", sep="\t", na_values=["NA"]).set_index("ID")
    r2 = freq.loc[ours["SNP"], "MACH_R2"].to_numpy()
    assert len(ours) > 200 and np.nanmin(r2) < 0.99 and np.nanmax(r2) > 1.0
    np.testing.assert_allclose(ours["INFO"], r2, rtol=1e-5)
    hard = tmp_path / "hard.gz"
    assert main(["gwas", "--bfile", str(ukb / "c" / "genotypes"), "--chroms", "1", *common,
                 "--ids-out", str(tmp_path / "hard.id"), "--out", str(hard)]) == 0
    assert (pd.read_csv(hard, sep="\t")["INFO"] == 1).all()

@pytest.mark.parametrize("info_from", ["mfi", "sumstats"])
def test_bgen_selection_equals_independent_top_k(ukb, tmp_path, info_from):
    top = 40
    min_info = 0.8 if info_from == "mfi" else 0.95   # simulated sumstats' INFO: 0.9-1
    mfi_args = ["--mfi", str(ukb / "mfi_chr{chrom}.txt")] if info_from == "mfi" else []
    sel = _select(ukb, tmp_path / "sel.tsv", "--bgen", str(ukb / "imp_chr{chrom}.bgen"),
                  "--sample", str(ukb / "imp_chr1.sample"), "--chroms", *CHROMS,
                  *mfi_args, "--min-info", str(min_info), top=top)
    # independent: the sumstats rows whose ID is a BGEN variant (plink2's .pvar of the
    # same dosages) with the same two alleles, not strand-ambiguous, INFO >= min_info
    pvar = pd.read_csv(ukb / "frac.pvar", sep="\t", dtype=str)
    mfi = pd.concat([pd.read_csv(ukb / f"mfi_chr{c}.txt", sep="\t", header=None, dtype=str)
                     for c in CHROMS])
    with gzip.open(ukb / "c" / "sumstats" / "mean_platelet_volume.txt.gz", "rt") as fh:
        ss = pd.read_csv(fh, sep="\t", dtype={"CHR": str})
    info = (dict(zip(mfi[1], mfi[7].astype(float))) if info_from == "mfi"
            else dict(zip(ss["SNP"], ss["INFO"])))
    v = ss.merge(pvar, left_on="SNP", right_on="ID")
    same = (((v["ALLELE1"] == v["ALT"]) & (v["ALLELE0"] == v["REF"]))
            | ((v["ALLELE1"] == v["REF"]) & (v["ALLELE0"] == v["ALT"])))
    pair = v["ALLELE1"] + v["ALLELE0"]
    ambiguous = pair.isin(["AT", "TA", "CG", "GC"])
    v = v[same & ~ambiguous & (v["SNP"].map(info) >= min_info)]
    v = v.assign(p=v["P_BOLT_LMM"].astype(float), chrom=v["CHR"].astype(int))
    expected = v.sort_values(["p", "chrom", "BP"], kind="stable").head(top)
    assert sel["variant_id"].tolist() == expected["SNP"].tolist()
    assert (sel["log10_p"] > -np.inf).all()


# ----------------------------------------------------------------------- bad inputs
def _error(capsys, args) -> str:
    assert main(args) == 1
    return capsys.readouterr().err


def test_missing_chromosome_file(ukb, capsys, tmp_path):
    err = _error(capsys, ["qc", "--bfile", str(ukb / "cal_chr{chrom}"), "--fam",
                          str(ukb / "cal.fam"), "--maf", "0.01", "--out", str(tmp_path / "q")])
    assert "cal_chr4.bed: missing chromosome 4 file" in err and "1-22" in err
    assert err.count("\n") == 1 and not list(tmp_path.iterdir())


def test_sample_file_not_matching_fam(ukb, capsys, tmp_path):
    lines = (ukb / "imp_chr1.sample").read_text().splitlines()
    other = lines[:2] + [" ".join(["0", "x" + ln.split()[1], *ln.split()[2:]])
                         for ln in lines[2:]]
    (tmp_path / "other.sample").write_text("\n".join(other) + "\n")
    err = _error(capsys, ["select", "--sumstats",
                          str(ukb / "c" / "sumstats" / "mean_platelet_volume.txt.gz"),
                          "--bgen", str(ukb / "imp_chr1.bgen"), "--sample",
                          str(tmp_path / "other.sample"), "--fam", str(ukb / "cal.fam"),
                          "--out", str(tmp_path / "sel.tsv")])
    assert "none of the 500 samples of the .fam is in this .sample file" in err
    assert not (tmp_path / "sel.tsv").exists()
    fam_ids = set(pd.read_csv(ukb / "cal.fam", sep=r"\s+", header=None, dtype=str)[1])
    assert not any(i in err for i in fam_ids)                  # no sample IDs in messages


def test_bgen_without_index(ukb, capsys, tmp_path):
    shutil.copy(ukb / "imp_chr1.bgen", tmp_path / "x.bgen")
    err = _error(capsys, ["select", "--sumstats",
                          str(ukb / "c" / "sumstats" / "mean_platelet_volume.txt.gz"),
                          "--bgen", str(tmp_path / "x.bgen"), "--sample",
                          str(ukb / "imp_chr1.sample"), "--out", str(tmp_path / "sel.tsv")])
    assert "no index x.bgen.bgi" in err and f"cmix bgen-index {tmp_path / 'x.bgen'}" in err
    assert main(["bgen-index", str(tmp_path / "x.bgen")]) == 0
    assert main(["select", "--sumstats",
                 str(ukb / "c" / "sumstats" / "mean_platelet_volume.txt.gz"),
                 "--bgen", str(tmp_path / "x.bgen"), "--sample",
                 str(ukb / "imp_chr1.sample"), "--out", str(tmp_path / "sel.tsv")]) == 0


def test_pgen_not_matching_psam(ukb, capsys, tmp_path):
    for ext in (".pgen", ".pvar"):
        shutil.copy(ukb / f"merged{ext}", tmp_path / f"m{ext}")
    lines = (ukb / "merged.psam").read_text().splitlines()
    (tmp_path / "m.psam").write_text("\n".join(lines[:-1]) + "\n")
    err = _error(capsys, ["qc", "--pfile", str(tmp_path / "m"), "--maf", "0.01", "--out",
                          str(tmp_path / "q")])
    assert "m.pgen: does not match the .pvar (1500 variants) and .psam (499 samples)" in err
    assert "contains 500 samples" in err and "b'" not in err


def test_multiallelic_pgen_is_read_without_its_multiallelic_site(capsys, tmp_path):
    """A multiallelic site (refused before, the whole file with it) is left out: QC runs
    on the rest, as plink2 --max-alleles 2, and the log counts what was left out."""
    n = 4
    with open(tmp_path / "m.vcf", "w") as f:
        f.write("##fileformat=VCFv4.2\n#CHROM\tPOS\tID\tREF\tALT\tQUAL\tFILTER\tINFO\tFORMAT\t"
                + "\t".join(f"s{i}" for i in range(n)) + "\n")
        f.write("1\t100\trs1\tA\tG\t.\t.\t.\tGT\t0/1\t0/0\t1/1\t0/1\n")
        f.write("1\t200\trs2\tA\tG,T\t.\t.\t.\tGT\t0/1\t0/2\t1/1\t2/2\n")
    plink2("--vcf", tmp_path / "m.vcf", "--make-pgen", "--out", tmp_path / "m")
    assert main(["qc", "--pfile", str(tmp_path / "m"), "--maf", "0.01", "--out",
                 str(tmp_path / "q")]) == 0
    err = capsys.readouterr().err
    assert "1 of 2 variants left out" in err and "1 multiallelic" in err
    assert "--max-alleles 2" in err and "rs2" not in err
    assert (tmp_path / "q.snplist").read_text() == "rs1\n"


def test_categorical_encoding_refused_on_fractional_store(ukb, capsys, tmp_path):
    geno = ["--bgen", str(ukb / "imp_chr{chrom}.bgen"), "--sample",
            str(ukb / "imp_chr1.sample"), "--chroms", *CHROMS]
    _select(ukb, tmp_path / "sel.tsv", *geno)
    _store(ukb, tmp_path / "s.zarr", tmp_path / "sel.tsv", *geno)
    (tmp_path / "cfg.json").write_text('{"encoding": "categorical"}')
    for method in ("cmix", "ae"):
        err = _error(capsys, ["train", "--store", str(tmp_path / "s.zarr"), "--budget", "50",
                              "--seed", "1", "--method", method, "--config",
                              str(tmp_path / "cfg.json"), "--device", "cpu", "--out",
                              str(tmp_path / method)])
        assert "fractional (imputed) dosages" in err and "encoding: dosage" in err


# ------------------------------------------------- a BGEN checked against its index and .sample
@pytest.fixture(scope="module")
def bgen_sel(ukb, tmp_path_factory):
    """A selection from the BGEN set (its SNPs on chromosomes 1-3) for `cmix store`."""
    d = tmp_path_factory.mktemp("bgen_sel")
    _select(ukb, d / "sel.tsv", "--bgen", str(ukb / "imp_chr{chrom}.bgen"), "--sample",
            str(ukb / "imp_chr{chrom}.sample"), "--fam", str(ukb / "cal.fam"), "--chroms",
            *CHROMS, top=30)
    plink2("--pfile", ukb / "frac", "--chr", "1", "--export", "bgen-1.2", "bits=16",
           "--out", d / "imp16_chr1")
    assert main(["bgen-index", str(d / "imp16_chr1.bgen")]) == 0
    return d / "sel.tsv", d


def _bgen_copy(ukb, d):
    for c in CHROMS:
        for ext in (".bgen", ".bgen.bgi", ".sample"):
            shutil.copy(ukb / f"imp_chr{c}{ext}", d / f"imp_chr{c}{ext}")
    return d


def _bgen_store_error(capsys, sel, d, out):
    err = _error(capsys, ["store", "--bgen", str(d / "imp_chr{chrom}.bgen"), "--sample",
                          str(d / "imp_chr{chrom}.sample"), "--fam", str(d.parent / "cal.fam")
                          if (d.parent / "cal.fam").exists() else str(d / "cal.fam"),
                          "--chroms", *CHROMS, "--snps", str(sel), "--pheno",
                          str(d / "phenotypes.tsv"), "--trait", "mpv", "--trait-config",
                          TRAIT_CONFIG, "--out", str(out)])
    assert "Traceback" not in err
    assert not out.exists() and not list(out.parent.glob(f".{out.name}*"))
    return [ln for ln in err.splitlines() if "error" in ln][0]


@pytest.mark.parametrize("case, message", [
    ("sample_reordered", "imp_chr1.sample, line 3: not the sample"),
    ("bgi_rows_swapped", "imp_chr1.bgen.bgi: its entry for variant"),
    ("bgi_of_16_bit_file", "imp_chr1.bgen.bgi: its entry for variant"),
    ("truncated_in_genotypes", "imp_chr1.bgen: the file ends inside the genotype block"),
    ("truncated_in_header", "imp_chr1.bgen: the file ends inside the header of the variant"),
    ("truncated_before_variant", "points at byte"),
    ("sample_of_other_size", "imp_chr1.sample: 499 samples, but"),
    ("files_swapped", "imp_chr1.bgen: the file of chromosome 1 in the set"),
])
def test_bgen_that_does_not_fit_its_index_or_sample_is_refused(ukb, bgen_sel, tmp_path, capsys,
                                                               case, message):
    """Each way a BGEN set can disagree with itself is one message naming the file, exit
    1, no store: a .sample with its rows reordered (the .bgen embeds the IDs), a .bgi
    whose rows point at each other's blocks or that indexes the 16-bit export of the same
    variants, a .bgen cut inside a genotype block or a variant header, a .sample short
    of a line, and chromosome files swapped."""
    import sqlite3

    sel, d16 = bgen_sel
    d = _bgen_copy(ukb, tmp_path)
    shutil.copy(ukb / "cal.fam", d / "cal.fam")
    shutil.copy(ukb / "c" / "phenotypes.tsv", d / "phenotypes.tsv")
    chosen = pd.read_csv(sel, sep="\t", dtype={"chrom": str})
    on1 = chosen[chosen["chrom"] == "1"]["variant_id"].tolist()
    bgi = d / "imp_chr1.bgen.bgi"
    if case == "sample_reordered":
        lines = (d / "imp_chr1.sample").read_text().splitlines()
        rows = lines[2:]
        rows[0], rows[1] = rows[1], rows[0]
        (d / "imp_chr1.sample").write_text("\n".join(lines[:2] + rows) + "\n")
    elif case == "bgi_rows_swapped":
        con = sqlite3.connect(bgi)
        (a, sa), (b, sb) = con.execute(
            "SELECT rsid, file_start_position FROM Variant WHERE rsid IN (?, ?)",
            on1[:2]).fetchall()
        con.execute("UPDATE Variant SET file_start_position = -1 WHERE rsid = ?", (a,))
        con.execute("UPDATE Variant SET file_start_position = ? WHERE rsid = ?", (sa, b))
        con.execute("UPDATE Variant SET file_start_position = ? WHERE rsid = ?", (sb, a))
        con.commit()
        con.close()
    elif case == "bgi_of_16_bit_file":
        shutil.copy(d16 / "imp16_chr1.bgen.bgi", bgi)
    elif case.startswith("truncated"):
        con = sqlite3.connect(bgi)
        start, size = max(con.execute(       # the last selected variant in the file
            "SELECT file_start_position, size_in_bytes FROM Variant WHERE rsid IN "
            f"({','.join('?' * len(on1))})", on1).fetchall())
        con.close()
        data = (d / "imp_chr1.bgen").read_bytes()
        cut = {"truncated_in_genotypes": start + size - 5, "truncated_in_header": start + 10,
               "truncated_before_variant": start}[case]
        (d / "imp_chr1.bgen").write_bytes(data[:cut])
        # the .bgi still lists every variant; only the selected ones are read
    elif case == "sample_of_other_size":
        lines = (d / "imp_chr1.sample").read_text().splitlines()
        (d / "imp_chr1.sample").write_text("\n".join(lines[:-1]) + "\n")
    else:
        for ext in (".bgen", ".bgen.bgi", ".sample"):
            (d / f"imp_chr1{ext}").rename(d / f"x{ext}")
            (d / f"imp_chr2{ext}").rename(d / f"imp_chr1{ext}")
            (d / f"x{ext}").rename(d / f"imp_chr2{ext}")
    line = _bgen_store_error(capsys, sel, d, tmp_path / "s.zarr")
    assert message in line, line
    if case == "truncated_before_variant":       # it said "truncated?" of the header
        assert "past the end of" in line and "or this one is cut short" in line, line
    if case in ("truncated_in_genotypes", "truncated_in_header"):  # indexing it again too
        err = _error(capsys, ["bgen-index", str(d / "imp_chr1.bgen")])
        assert f"{d / 'imp_chr1.bgen'}: the file ends inside" in err and "Traceback" not in err
    ids = set(pd.read_csv(ukb / "cal.fam", sep=r"\s+", header=None, dtype=str)[1])
    assert not any(i in line for i in ids)                    # no sample IDs in messages


def test_bgen_contigs_spelled_chr_match_a_selection_of_codes(ukb, bgen_sel, tmp_path):
    """A BGEN whose contigs are chr1-chr3 (plink2 --output-chr chrM) serves a selection
    table of 1-3, and a table of chr1-chr3 is served by BGENs of 1-3: the dosages are
    plink2's --export A of the same files."""
    sel, _ = bgen_sel
    plink2("--pfile", ukb / "frac", "--chr", *CHROMS, "--output-chr", "chrM", "--export",
           "bgen-1.2", "bits=8", "--out", tmp_path / "chr")
    assert main(["bgen-index", str(tmp_path / "chr.bgen")]) == 0
    table = pd.read_csv(sel, sep="\t", dtype={"chrom": str})
    assert set(table["chrom"]) <= set(CHROMS)
    _, ours = _store(ukb, tmp_path / "a.zarr", sel, "--bgen", str(tmp_path / "chr.bgen"),
                     "--sample", str(tmp_path / "chr.sample"), "--fam", str(ukb / "cal.fam"))
    ref = _plink2_export_a(tmp_path, "p2", table, "--bgen", tmp_path / "chr.bgen", "ref-last",
                           "--sample", tmp_path / "chr.sample")
    ref = ref.loc[ours.index, ours.columns].to_numpy()
    called = ~np.isnan(ref)
    assert np.array_equal(ours.to_numpy() == -1, ~called)
    assert np.abs(ours.to_numpy()[called] - ref[called]).max() <= FRACTIONAL_TOLERANCE
    prefixed = table.assign(chrom="chr" + table["chrom"])
    prefixed.to_csv(tmp_path / "sel_chr.tsv", sep="\t", index=False)
    _, theirs = _store(ukb, tmp_path / "b.zarr", tmp_path / "sel_chr.tsv", "--bgen",
                       str(ukb / "imp_chr{chrom}.bgen"), "--sample",
                       str(ukb / "imp_chr{chrom}.sample"), "--fam", str(ukb / "cal.fam"),
                       "--chroms", *CHROMS)
    assert theirs.columns.tolist() == ours.columns.tolist()
    assert np.abs(theirs.to_numpy()[called] - ref[called]).max() <= FRACTIONAL_TOLERANCE
    assert np.array_equal(theirs.to_numpy() == -1, ~called)


@pytest.mark.parametrize("source", ["bfile", "pfile"])
def test_sample_v2_file_reads_as_plink2_reads_it(ukb, bgen_sel, tmp_path, source):
    """plink2 --export bgen-1.2 sample-v2 writes one ID column: FID_IID for samples with
    family IDs (the .bed's), the IID without (the dosage .pgen's). Its IIDs are what
    plink2 reads from it (the whole ID), it matches the .fam, and the store from it
    equals the store from the same BGEN with a two-column .sample."""
    sel, _ = bgen_sel
    src = ("--bfile", ukb / "c" / "genotypes") if source == "bfile" else ("--pfile", ukb / "frac")
    for name, extra in (("v1", ()), ("v2", ("sample-v2",))):
        plink2(*src, "--chr", *CHROMS, "--export", "bgen-1.2", "bits=8", *extra,
               "--out", tmp_path / name)
        assert main(["bgen-index", str(tmp_path / f"{name}.bgen")]) == 0
    assert (tmp_path / "v2.sample").read_text().startswith("ID missing sex\n")
    plink2("--bgen", tmp_path / "v2.bgen", "ref-last", "--sample", tmp_path / "v2.sample",
           "--make-just-psam", "--out", tmp_path / "p2")
    psam = pd.read_csv(tmp_path / "p2.psam", sep="\t", dtype=str)
    sample = oxford.read_sample_file(tmp_path / "v2.sample")
    assert sample["iid"].tolist() == psam["#IID"].tolist()
    assert (sample["fid"] == "0").all()
    fam = pd.read_csv(ukb / "cal.fam", sep=r"\s+", header=None, dtype=str)
    if source == "bfile":            # the IDs are FID_IID, no IID alone
        assert not set(sample["iid"]) & set(fam[1])
    stores = [_store(ukb, tmp_path / f"{name}.zarr", sel, "--bgen", str(tmp_path / f"{name}.bgen"),
                     "--sample", str(tmp_path / f"{name}.sample"), "--fam",
                     str(ukb / "cal.fam"))[1] for name in ("v1", "v2")]
    assert len(stores[1]) > 0.9 * len(fam) * 0.5       # every person with a label is there
    pd.testing.assert_frame_equal(stores[0], stores[1])


def test_bgen_embedding_sample_ids_matches_its_sample(ukb):
    """plink2's BGEN embeds its sample IDs; the .sample written with it agrees, row by row."""
    head = bgen_blocks.read_header(ukb / "imp_chr1.bgen")
    sample = oxford.read_sample_file(ukb / "imp_chr1.sample")
    assert head["sample_ids"] is not None and len(head["sample_ids"]) == len(sample) == 500
    oxford.check_embedded_ids(ukb / "imp_chr1.bgen", head["sample_ids"], sample,
                              ukb / "imp_chr1.sample")


def _x_bgen(d, phased=False, n=60, m=40, seed=4, chrom="X"):
    """A BGEN written by plink2 --export bgen-1.2 bits=16 from a chromosome X (or Y)
    dosage VCF (odd samples male: haploid calls; on Y the females get ploidy 0; 3%
    missing), indexed; its prefix."""
    rng = np.random.default_rng(seed)
    ids = [f"S{i}" for i in range(n)]
    fmt = "GT" if phased else "GT:DS"
    with open(d / "x.vcf", "w") as f:
        f.write(f'##fileformat=VCFv4.2\n##contig=<ID={chrom}>\n##FORMAT=<ID=GT,Number=1,'
                'Type=String,Description="g">\n##FORMAT=<ID=DS,Number=1,Type=Float,'
                'Description="d">\n#CHROM\tPOS\tID\tREF\tALT\tQUAL\tFILTER\tINFO\t'
                "FORMAT\t" + "\t".join(ids) + "\n")
        for j in range(m):
            g = rng.binomial(2, rng.uniform(0.1, 0.5), n)
            if phased:
                vals = np.array([f"{int(a)}|{int(b)}" for a, b in zip(g >= 1, g == 2)])
            else:
                ds = np.clip(g + rng.normal(0, 0.2, n), 0, 2)
                gt = np.array(["0/0", "0/1", "1/1"])[np.rint(ds).astype(int)]
                vals = np.char.add(np.char.add(gt, ":"), np.char.mod("%.3f", ds))
            vals[rng.random(n) < 0.03] = "./." if phased else "./.:."
            f.write(f"{chrom}\t{5_000_000 + 10 * j}\tx{j}\tG\tA\t.\t.\t.\t{fmt}\t"
                    + "\t".join(vals) + "\n")
    (d / "sex.txt").write_text("#IID\tSEX\n" + "".join(f"{s}\t{1 + i % 2}\n"
                                                        for i, s in enumerate(ids)))
    plink2("--vcf", d / "x.vcf", *([] if phased else ["dosage=DS"]), "--update-sex",
           d / "sex.txt", "--make-pgen", "--out", d / "x")
    plink2("--pfile", d / "x", "--export", "bgen-1.2", "bits=16", "--out", d / "xb")
    assert main(["bgen-index", str(d / "xb.bgen")]) == 0
    return d / "xb"


@pytest.mark.parametrize("chrom, phased", [("X", False), ("Y", False), ("X", True)])
def test_bgen_haploid_calls_read_as_plink2_reads_them(tmp_path, chrom, phased):
    """Males on chrX, as plink2 --export bgen-1.2 writes them (ploidy 1), read as plink2
    --bgen reads them (2 P(allele)); females' diploid calls and missing calls as before.
    On chrY plink2 writes some missing calls with ploidy 0 (refused before), which it
    reads as missing. Phased calls (refused before): the sum of the haplotypes'
    probabilities, as plink2 reads them."""
    prefix = _x_bgen(tmp_path, chrom=chrom, phased=phased)
    bg = bgen_mod.open_bgen(f"{prefix}.bgen", f"{prefix}.sample")
    ours = bg.read_dosages(np.arange(len(bg.bim))).T          # samples x variants
    table = bg.bim.rename(columns={"a1": "effect_allele"})
    ref = _plink2_export_a(tmp_path, "p2", table, "--bgen", f"{prefix}.bgen", "ref-last",
                           "--sample", f"{prefix}.sample")
    ref = ref.loc[bg.fam["iid"], bg.bim["variant_id"]].to_numpy()
    assert np.array_equal(np.isnan(ours), np.isnan(ref))
    called = ~np.isnan(ref)
    assert np.abs(ours[called] - ref[called]).max() <= 0.0005 + 1 / 16384 + 1e-6
    males = np.arange(len(ours)) % 2 == 1
    assert called[males].mean() > 0.9
    if not phased:
        assert (ours[males][called[males]] % 1 != 0).mean() > 0.5


def test_truncated_pgen_is_one_message(ukb, capsys, tmp_path):
    """A .pgen cut short (a copy that stopped): qc refuses it, naming the file, with no
    traceback and no outputs."""
    for ext in (".pgen", ".pvar", ".psam"):
        shutil.copy(ukb / f"merged{ext}", tmp_path / f"cut{ext}")
    data = (tmp_path / "cut.pgen").read_bytes()
    (tmp_path / "cut.pgen").write_bytes(data[: len(data) * 2 // 3])
    err = _error(capsys, ["qc", "--pfile", str(tmp_path / "cut"), *QC_FLAGS,
                          "--out", str(tmp_path / "q")])
    line = [ln for ln in err.splitlines() if "error" in ln][0]
    assert f"{tmp_path / 'cut.pgen'}: cannot read variants" in line
    assert "truncated or damaged" in line and "Traceback" not in err
    assert not list(tmp_path.glob("q*"))


def _craft_bgen(path, stored, bits=8, compression=1, alleles=("A", "G"), n_variants=1):
    """A hand-made BGEN v1.2 (layout 2) of 4 diploid samples and ``n_variants`` copies of
    one biallelic variant whose per-sample stored probabilities (P(allele-1 hom), P(het),
    as integers of ``bits`` bits) are ``stored``; zlib blocks (compression 1) or raw ones
    (0); with its .sample. Written from the BGEN specification, not by cmix."""
    import struct
    import zlib

    def text(s, fmt):
        b = s.encode()
        return struct.pack(fmt, len(b)) + b

    n = len(stored)
    flags = compression | (2 << 2)
    out = bytearray(struct.pack("<I", 20) + struct.pack("<IIII", 20, n_variants, n, 0)
                    + struct.pack("<I", flags))
    out[16:20] = b"bgen"
    for j in range(n_variants):
        head = (text(f"rs{j}", "<H") + text(f"rs{j}", "<H") + text("01", "<H")
                + struct.pack("<IH", 100 + j, len(alleles))
                + b"".join(text(a, "<I") for a in alleles))
        acc, n_acc, packed = 0, 0, bytearray()
        for value in [v for call in stored for v in call]:
            acc |= int(value) << n_acc
            n_acc += bits
            while n_acc >= 8:
                packed.append(acc & 255)
                acc, n_acc = acc >> 8, n_acc - 8
        if n_acc:
            packed.append(acc & 255)
        data = (struct.pack("<IHBB", n, 2, 2, 2) + bytes([2] * n) + struct.pack("<BB", 0, bits)
                + bytes(packed))
        if compression:
            z = zlib.compress(data)
            out += head + struct.pack("<II", len(z) + 4, len(data)) + z
        else:
            out += head + struct.pack("<I", len(data)) + data
    path.write_bytes(bytes(out))
    path.with_suffix(".sample").write_text(
        "ID_1 ID_2 missing\n0 0 0\n" + "".join(f"0 s{i} 0\n" for i in range(n)))
    return path


def test_crafted_bgen_reads_as_plink2_reads_it(tmp_path):
    """The hand-made writer's valid file: cmix's dosages equal plink2's, so the damaged
    files below differ from a good one only where they are damaged."""
    path = _craft_bgen(tmp_path / "ok.bgen", [[51, 102], [255, 0], [0, 255], [0, 0]])
    assert main(["bgen-index", str(path)]) == 0
    ours = bgen_mod.open_bgen(path, path.with_suffix(".sample")).read_dosages([0])[0]
    plink2("--bgen", path, "ref-first", "--sample", path.with_suffix(".sample"),
           "--export", "Av", "--out", tmp_path / "p2")
    theirs = np.array(open(tmp_path / "p2.traw").read().splitlines()[1].split("\t")[6:],
                      dtype=float)                 # counts allele 1 (ref-first)
    assert np.abs((2 - ours) - theirs).max() < 1e-5


@pytest.mark.parametrize("case", ["sum above 1", "bit depth 0", "damaged zlib"])
def test_invalid_bgen_blocks_are_refused_as_plink2_refuses_them(tmp_path, capsys, case):
    """Blocks plink2 calls invalid (stored probabilities summing past 1, which decoded to
    a negative dosage that the store clipped to 0; a bit depth of 0, read as all missing;
    a zlib stream damaged inside: a RuntimeError traceback) are one message naming the
    file and variant, and the store writes nothing."""
    stored = [[200, 200], [255, 0], [0, 255], [0, 0]] if case == "sum above 1" else \
        [[51, 102], [255, 0], [0, 255], [0, 0]]
    path = _craft_bgen(tmp_path / "bad.bgen", [[]] * 40 if case == "bit depth 0" else
                       stored * 10, bits=0 if case == "bit depth 0" else 8)
    assert main(["bgen-index", str(path)]) == 0
    if case == "damaged zlib":
        data = bytearray(path.read_bytes())
        data[-6:-2] = b"\xff\x00\xff\x00"           # inside the deflate stream
        path.write_bytes(bytes(data))
    r = subprocess.run(["plink2", "--bgen", path, "ref-first", "--sample",
                        path.with_suffix(".sample"), "--export", "Av", "--out",
                        tmp_path / "p2"], capture_output=True, text=True)
    assert r.returncode != 0 and "Invalid" in r.stdout + r.stderr
    snps = tmp_path / "snps.tsv"
    snps.write_text("variant_id\tchrom\tpos\teffect_allele\tother_allele\tbeta\n"
                    "rs0\t1\t100\tG\tA\t0.1\n")
    pheno = tmp_path / "pheno.tsv"
    pheno.write_text("eid\ty\n" + "".join(f"s{i}\t{i % 7}\n" for i in range(40)))
    err = _error(capsys, ["store", "--bgen", str(path), "--sample",
                          str(path.with_suffix(".sample")), "--snps", str(snps),
                          "--pheno", str(pheno), "--trait", "t", "--trait-config",
                          '{"column": "y", "kind": "continuous"}', "--test-fraction", "0.25",
                          "--out", str(tmp_path / "s.zarr")])
    assert f"{path}: " in err and "'rs0'" in err and "Traceback" not in err
    assert {"sum above 1": "sum to more than 1", "bit depth 0": "no decodable",
            "damaged zlib": "cannot be decoded"}[case] in err
    assert not list(tmp_path.glob("s.zarr*"))


def test_uncompressed_bgen_is_read_and_one_allele_bgen_refused(tmp_path, capsys):
    """An uncompressed layout-2 BGEN (which cbgen could not read: a traceback, then a
    refusal) reads as plink2 reads it; a variant of one allele (an SQLite NOT NULL
    traceback while indexing; plink2 refuses it) is one message."""
    raw = _craft_bgen(tmp_path / "raw.bgen", [[51, 102], [255, 0], [0, 255], [0, 0]],
                      compression=0)
    assert main(["bgen-index", str(raw)]) == 0
    ours = bgen_mod.open_bgen(raw, raw.with_suffix(".sample")).read_dosages([0])[0]
    plink2("--bgen", raw, "ref-first", "--sample", raw.with_suffix(".sample"),
           "--export", "Av", "--out", tmp_path / "p2")
    theirs = np.array(open(tmp_path / "p2.traw").read().splitlines()[1].split("\t")[6:],
                      dtype=float)                 # counts allele 1 (ref-first)
    assert np.abs((2 - ours) - theirs).max() < 1e-5
    mono = _craft_bgen(tmp_path / "mono.bgen", [[255, 0]] * 4, alleles=("A",))
    err = _error(capsys, ["bgen-index", str(mono)])
    assert f"{mono}: variant 'rs0' (byte 24) lists 1 allele(s)" in err
    assert "Traceback" not in err and not list(tmp_path.glob("mono*.bgi*"))


def test_index_of_another_bgen_is_named_as_the_cause(tmp_path, capsys):
    """An index made for a file whose first block was longer points inside the second
    variant's block: the message says the index does not belong (it said the .bgen was
    truncated, and the .bgen was whole)."""
    long = _craft_bgen(tmp_path / "b.bgen", [[51 * 257, 102 * 257]] * 4, bits=16,
                       n_variants=2)
    assert main(["bgen-index", str(long)]) == 0
    bgi = long.with_name("b.bgen.bgi").read_bytes()
    short = _craft_bgen(tmp_path / "b.bgen", [[1, 2]] * 4, bits=2, n_variants=2)
    long.with_name("b.bgen.bgi").write_bytes(bgi)
    bg = bgen_mod.open_bgen(short, short.with_suffix(".sample"))
    with pytest.raises(bgen_mod.CmixError) as err:
        bg.read_dosages([1])
    assert str(err.value).startswith(f"{short}")
    assert "'rs1'" in str(err.value) and "the index belongs to another file" in str(err.value)
    assert f"cmix bgen-index {short}" in str(err.value)


def test_pvar_zst_beside_a_pgen_is_read(ukb, capsys, tmp_path):
    """`plink2 --make-pgen vzs` writes .pvar.zst (refused before, with a message to
    decompress it): QC on it equals QC on the plain .pvar."""
    for ext in (".pgen", ".psam"):
        shutil.copy(ukb / f"merged{ext}", tmp_path / f"z{ext}")
    plink2("--pfile", ukb / "merged", "--make-just-pvar", "zs", "--out", tmp_path / "z")
    assert not (tmp_path / "z.pvar").exists()
    (snps, table), (plain_snps, plain_table) = (
        _qc(["--pfile", str(tmp_path / "z")], tmp_path / "q"),
        _qc(["--pfile", str(ukb / "merged")], tmp_path / "plain"))
    assert snps == plain_snps
    pd.testing.assert_frame_equal(table, plain_table)
