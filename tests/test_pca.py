"""cmix pca against plink2 2.00a3.5: --indep-pairwise .prune.in (identical lists), --pca
(canonical correlations, eigenvalues) and --score with the saved allele weights
(projection of held-out people), plus bad input."""

import subprocess

import numpy as np
import pandas as pd
import pytest
from scipy.linalg import subspace_angles

from cmix.readers import plink
from cmix.genotypes import selection
from cmix.cli import main
from cmix.errors import CmixError
from cmix.genotypes.pca.prune import PruneSettings, ld_prune
from cmix.genotypes.pca.regions import HIGH_LD_REGIONS, read_regions
from cmix.genotypes.pca.run import PcaSettings, PcaVariants, run_pca
from cmix.readers.sources import GenotypeFiles
from conftest import requires_plink2

pytestmark = requires_plink2

N_HELD_OUT = 150


def plink2(*args, cwd):
    res = subprocess.run(["plink2", *map(str, args), "--threads", "2"], cwd=cwd,
                         capture_output=True, text=True)
    assert res.returncode == 0, res.stdout + res.stderr
    return res


def cmix(*args):
    assert main([str(a) for a in args]) == 0


def lines(path):
    return open(path).read().split()


def write_ids(path, fam, idx):
    plink.write_sample_ids(path, fam, idx)
    return path


@pytest.fixture(scope="module")
def setup(cohort, tmp_path_factory):
    """The structured default cohort: QC on all non-withdrawn samples (no ancestry
    filter), unrelated set from the kinship table, 150 unrelated people held out.
    fit.id: the people PCs are fitted on; everyone.id: all QC-passing people."""
    d = tmp_path_factory.mktemp("pca")
    cmix("samples", "--fam", cohort / "genotypes", "--sqc", cohort / "sample_qc.tsv",
         "--withdrawn", cohort / "withdrawn.txt", "--no-ancestry-filter", "--out", d / "all")
    cmix("qc", "--bfile", cohort / "genotypes", "--keep", d / "all.keep", "--maf", "0.01",
         "--hwe", "1e-7", "--geno", "0.05", "--out", d / "qc")
    cmix("unrelated", "--kinship", cohort / "kinship.dat", "--bfile", cohort / "genotypes",
         "--keep", d / "all.keep", "--out", d / "unrel")
    bf = plink.open_bfile(cohort / "genotypes")
    unrel, _ = selection.match_samples(selection.read_sample_ids(d / "unrel.king.cutoff.in.id"), bf.fam)
    held = np.random.default_rng(0).choice(unrel, N_HELD_OUT, replace=False)
    write_ids(d / "fit.id", bf.fam, np.setdiff1d(unrel, held))
    (d / "everyone.id").write_text((d / "all.keep").read_text())
    ranges = [ln for ln in HIGH_LD_REGIONS.read_text().splitlines() if not ln.startswith("#")]
    (d / "highld.range").write_text("\n".join(ranges) + "\n")
    return {"dir": d, "bfile": cohort / "genotypes", "bf": bf}


def plink2_prune(setup, settings, extract=True, out="p2"):
    d = setup["dir"]
    extra = ["--extract", d / "qc.snplist"] if extract else []
    plink2("--bfile", setup["bfile"], "--keep", d / "fit.id", *extra,
           "--indep-pairwise", *settings, "--out", out, cwd=d)
    return lines(d / f"{out}.prune.in")


# ------------------------------------------------------------------------ LD pruning
@pytest.mark.parametrize("settings, extract", [
    (["50", "5", "0.2"], True),
    (["2000kb", "1", "0.1"], True),
    (["10", "3", "0.05"], True),
    (["500kb", "0.02"], False),        # every variant: rare, monomorphic, HWE failures
])
def test_prune_in_identical_to_plink2(setup, settings, extract):
    bf, d = setup["bf"], setup["dir"]
    fit, _ = selection.match_samples(selection.read_sample_ids(d / "fit.id"), bf.fam)
    ids = bf.bim["variant_id"]
    candidates = (np.flatnonzero(ids.isin(set(lines(d / "qc.snplist"))).to_numpy())
                  if extract else np.arange(bf.n_variants))
    kept = ld_prune(bf, candidates, fit, PruneSettings.parse(settings))
    theirs = plink2_prune(setup, settings, extract)
    assert 0 < len(theirs) < len(candidates)
    assert ids.to_numpy()[candidates[kept]].tolist() == theirs


def test_prune_edge_cases_identical_to_plink2(tmp_path):
    """Ties in MAF (identical and mirrored variants, with and without missing calls:
    plink2 keeps the earlier of a tied pair), missing calls in either variant of a
    pair, a variant with only heterozygotes, monomorphic ones, a chromosome with one
    variant, variants sharing a position, and kb windows whose bounds fall exactly on
    variants."""
    rng = np.random.default_rng(5)
    n = 203
    base = rng.binomial(2, 0.3, size=(12, n)).astype(np.int8)
    rows = [base[0], base[0], 2 - base[0], base[1], base[1], np.ones(n, np.int8),
            np.zeros(n, np.int8), base[2], base[3], base[2], base[4], base[5]]
    g = np.array(rows)
    for r, frac in ((1, 0.1), (4, 0.3), (7, 0.05), (9, 0.2)):
        g[r, rng.random(n) < frac] = -1
    # chains in LD (each variant copies the last one's genotype with probability c), on
    # a 100 bp grid or exactly 500 bp apart: kb windows start and end exactly on variants
    def chain(c, k=60):
        rows = [rng.binomial(2, 0.4, n)]
        for _ in range(k - 1):
            rows.append(np.where(rng.random(n) < c, rows[-1], rng.binomial(2, 0.4, n)))
        return np.array(rows, np.int8)

    chains = [chain(c) for c in (0.6, 0.75, 0.9, 0.6, 0.75, 0.9)]
    chain_pos = [(np.cumsum(rng.integers(1, 9, 60)) * 100).tolist() if i % 2 == 0
                 else list(range(500, 30_500, 500)) for i in range(len(chains))]
    g = np.vstack([g, base[6], base[6], base[7], 2 - base[7], base[8], base[11][None],
                   *chains])
    m = len(g)
    chrom = ["1"] * 12 + ["2"] * 5 + ["3"] + [str(4 + i) for i in range(6) for _ in range(60)]
    pos = ([100, 100, 250, 400, 900, 1000, 1500, 4000, 4100, 9000, 9050, 20000,
            10, 20, 30, 40, 50, 5] + sum(chain_pos, []))
    bim = pd.DataFrame({"chrom": chrom, "variant_id": [f"v{i}" for i in range(m)],
                        "cm": 0.0, "pos": pos, "a1": "A", "a2": "G"})
    ids = [f"s{i}" for i in range(n)]
    fam = pd.DataFrame({"fid": ids, "iid": ids, "father": "0", "mother": "0",
                        "sex": "1", "phenotype": "-9"})
    plink.write_bfile(tmp_path / "e", g, fam, bim)
    bf = plink.open_bfile(tmp_path / "e")
    for settings in (["4", "1", "0.3"], ["6", "2", "0.05"], ["1kb", "1", "0.1"],
                     ["1kb", "1", "0.25"], ["2kb", "1", "0.2"], ["1.5kb", "1", "0.4"]):
        kept = ld_prune(bf, np.arange(m), np.arange(n), PruneSettings.parse(settings))
        plink2("--bfile", "e", "--indep-pairwise", *settings, "--out", "e", cwd=tmp_path)
        assert bim["variant_id"][kept].tolist() == lines(tmp_path / "e.prune.in"), settings


# ------------------------------------------------------------------------ PCA and projection
@pytest.fixture(scope="module")
def pca_run(setup):
    d = setup["dir"]
    cmix("pca", "--bfile", setup["bfile"], "--keep", d / "fit.id", "--project",
         d / "everyone.id", "--extract", d / "qc.snplist", "--indep-pairwise", "1000kb", "1",
         "0.05", "--pcs", "10", "--threads", "2", "--out", d / "cm")
    return d


def test_prune_in_with_regions_identical_to_plink2(setup, pca_run):
    d = pca_run
    plink2("--bfile", setup["bfile"], "--keep", d / "fit.id", "--extract", d / "qc.snplist",
           "--exclude", "range", d / "highld.range", "--indep-pairwise", "1000kb", "1", "0.05",
           "--out", "p2r", cwd=d)
    assert lines(d / "cm.prune.in") == lines(d / "p2r.prune.in")
    removed = set(lines(d / "cm.prune.out"))
    assert removed and not removed & set(lines(d / "cm.prune.in"))


def test_pcs_match_plink2_pca(setup, pca_run):
    """All 10 PCs (the structured default populations give 3 clearly separated ones;
    the randomized Krylov basis resolves the rest too) against plink2's exact --pca on
    the same pruned variants and fitted samples."""
    d = pca_run
    plink2("--bfile", setup["bfile"], "--keep", d / "fit.id", "--extract", d / "cm.prune.in",
           "--pca", "10", "meanimpute", "--out", "p2pca", cwd=d)
    theirs = pd.read_csv(d / "p2pca.eigenvec", sep="\t")
    ours = pd.read_csv(d / "cm.eigenvec", sep="\t").set_index("IID").loc[theirs["IID"]]
    a = ours[[f"PC{k}" for k in range(1, 11)]].to_numpy()
    b = theirs[[f"PC{k}" for k in range(1, 11)]].to_numpy()
    canon = np.cos(subspace_angles(a, b))
    assert canon.min() >= 0.99, canon
    for k in range(10):        # and each PC on its own (up to sign)
        assert abs(np.corrcoef(a[:, k], b[:, k])[0, 1]) >= 0.99, k
    ev, ev2 = np.loadtxt(d / "cm.eigenval"), np.loadtxt(d / "p2pca.eigenval")
    np.testing.assert_allclose(ev, ev2, rtol=0.01)
    assert ev[0] > 2 * ev[3]                            # real structure on top


def test_projection_matches_plink2_score(setup, pca_run):
    """Held-out people: plink2 --score with OUT.eigenvec.allele and OUT.acount gives the
    same scores as OUT.eigenvec, after the documented scale m sqrt(eigenvalue)."""
    d = pca_run
    bf = setup["bf"]
    fit, _ = selection.match_samples(selection.read_sample_ids(d / "fit.id"), bf.fam)
    everyone, _ = selection.match_samples(selection.read_sample_ids(d / "everyone.id"), bf.fam)
    held = np.setdiff1d(everyone, fit)
    assert len(held) >= N_HELD_OUT
    write_ids(d / "held.id", bf.fam, held)
    plink2("--bfile", setup["bfile"], "--keep", d / "held.id", "--read-freq", d / "cm.acount",
           "--score", d / "cm.eigenvec.allele", "2", "5", "header-read", "no-mean-imputation",
           "variance-standardize", "cols=+scoresums", "--score-col-nums", "6-15",
           "--out", "proj", cwd=d)
    score = pd.read_csv(d / "proj.sscore", sep="\t")
    ours = pd.read_csv(d / "cm.eigenvec", sep="\t")
    assert ours["IID"].astype(str).tolist() == bf.fam["iid"].iloc[everyone].tolist()
    ours = ours.set_index("IID").loc[score["IID"]]
    m = len(lines(d / "cm.prune.in"))
    ev = np.loadtxt(d / "cm.eigenval")
    expected = score[[f"PC{k}_SUM" for k in range(1, 11)]].to_numpy() / (m * np.sqrt(ev))
    got = ours[[f"PC{k}" for k in range(1, 11)]].to_numpy()
    assert np.abs(got).max() > 0.05
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-6)


def test_outputs_layout(setup, pca_run):
    d = pca_run
    assert open(d / "cm.eigenvec").readline().split() == ["#FID", "IID"] + [
        f"PC{k}" for k in range(1, 11)]
    allele = pd.read_csv(d / "cm.eigenvec.allele", sep="\t")
    assert list(allele.columns[:5]) == ["#CHROM", "ID", "REF", "ALT", "A1"]
    assert allele["ID"].iloc[::2].tolist() == lines(d / "cm.prune.in")
    np.testing.assert_array_equal(allele["PC1"].to_numpy()[::2], -allele["PC1"].to_numpy()[1::2])
    assert (allele["A1"].iloc[::2].to_numpy() == allele["REF"].iloc[::2].to_numpy()).all()
    acount = pd.read_csv(d / "cm.acount", sep="\t")
    assert list(acount.columns) == ["#CHROM", "ID", "REF", "ALT", "ALT_CTS", "OBS_CT"]
    plink2("--bfile", setup["bfile"], "--keep", d / "fit.id", "--extract", d / "cm.prune.in",
           "--freq", "counts", "--out", "fq", cwd=d)
    theirs = pd.read_csv(d / "fq.acount", sep="\t")
    pd.testing.assert_frame_equal(acount, theirs)


def test_same_result_at_any_thread_count(setup, tmp_path):
    d = setup["dir"]
    variants = PcaVariants(extract=d / "qc.snplist", prune=PruneSettings.parse(["50", "5", "0.2"]))
    for out, threads in ((tmp_path / "t1", 1), (tmp_path / "t2", 2)):
        run_pca(GenotypeFiles(bfile=setup["bfile"]), out, keep=d / "fit.id",
                project=d / "everyone.id", variants=variants,
                settings=PcaSettings(n_pcs=4, seed=3, threads=threads, block_bytes=1 << 20))
    for ext in ("eigenvec", "eigenval", "eigenvec.allele", "acount", "prune.in"):
        same = (tmp_path / f"t1.{ext}").read_bytes() == (tmp_path / f"t2.{ext}").read_bytes()
        assert same, ext


# ------------------------------------------------------------------------ bad input
def fails(capsys, *args, expect):
    assert main([str(a) for a in args]) == 1
    err = capsys.readouterr().err
    assert err.startswith("cmix pca: error: ") and expect in err, err
    assert len(err.strip().splitlines()) == 1
    return err


def test_more_pcs_than_samples(setup, tmp_path, capsys):
    bf = setup["bf"]
    write_ids(tmp_path / "few.id", bf.fam, np.arange(5))
    fails(capsys, "pca", "--bfile", setup["bfile"], "--keep", tmp_path / "few.id", "--pcs", 5,
          "--out", tmp_path / "o", expect="5 fitted samples give at most 4 PCs")
    assert not list(tmp_path.glob("o.*"))


def test_more_pcs_than_variants(setup, tmp_path, capsys):
    (tmp_path / "three.snplist").write_text("\n".join(setup["bf"].bim["variant_id"][:3]) + "\n")
    fails(capsys, "pca", "--bfile", setup["bfile"], "--extract", tmp_path / "three.snplist",
          "--no-prune", "--pcs", 4, "--out", tmp_path / "o",
          expect="--pcs 4: only 3 variants are left for the PCA")
    assert not list(tmp_path.glob("o.*"))


def test_no_variants_left(setup, tmp_path, capsys):
    (tmp_path / "all.tsv").write_text("".join(f"{c}\t0\t999999999\n" for c in range(1, 23)))
    err = fails(capsys, "pca", "--bfile", setup["bfile"], "--exclude-regions",
                tmp_path / "all.tsv", "--out", tmp_path / "o", expect="no variants left")
    assert "outside long-range LD regions: 0" in err
    assert not list(tmp_path.glob("o.*"))


@pytest.mark.parametrize("args, expect", [
    (["500kb", "2", "0.1"], "the step must be 1 when the window is in kb"),
    (["50", "5", "1.2"], "r^2 threshold must be in [0, 1)"),
    (["1", "1", "0.1"], "window must be a whole number of variants >= 2"),
    (["50", "60", "0.1"], "between 1 and the window size"),
    (["fifty", "5", "0.1"], "expects WINDOW[kb] [STEP] R2"),
])
def test_bad_indep_pairwise(setup, tmp_path, capsys, args, expect):
    fails(capsys, "pca", "--bfile", setup["bfile"], "--indep-pairwise", *args,
          "--out", tmp_path / "o", expect=expect)


def test_bad_region_file(setup, tmp_path, capsys):
    (tmp_path / "r.tsv").write_text("# comment\n6\t25000000\t35000000\tmhc\n8\tten\t12\n")
    fails(capsys, "pca", "--bfile", setup["bfile"], "--exclude-regions", tmp_path / "r.tsv",
          "--out", tmp_path / "o", expect="r.tsv, line 3: start and end must be whole")


def test_shipped_regions_cover_mhc_and_8p23():
    regions = read_regions(HIGH_LD_REGIONS)
    assert len(regions) == 24
    mhc = regions[(regions.chrom == "6") & (regions.start <= 29_000_000) & (regions.end >= 33_000_000)]
    inv8 = regions[(regions.chrom == "8") & (regions.start <= 8_000_000) & (regions.end >= 12_000_000)]
    assert len(mhc) == 1 and len(inv8) == 1


def test_unsorted_positions_with_kb_window(tmp_path, capsys):
    g = np.random.default_rng(1).binomial(2, 0.4, size=(4, 20)).astype(np.int8)
    bim = pd.DataFrame({"chrom": ["1", "1", "1", "2"], "variant_id": ["a", "b", "c", "d"],
                        "cm": 0.0, "pos": [100, 300, 200, 5], "a1": "A", "a2": "G"})
    ids = [f"s{i}" for i in range(20)]
    fam = pd.DataFrame({"fid": ids, "iid": ids, "father": "0", "mother": "0", "sex": "1",
                        "phenotype": "-9"})
    plink.write_bfile(tmp_path / "u", g, fam, bim)
    fails(capsys, "pca", "--bfile", tmp_path / "u", "--no-exclude-regions", "--pcs", 1,
          "--indep-pairwise", "1kb", "0.5", "--out", tmp_path / "o",
          expect="u.bim: variant 'c': position 200 is before the previous variant's (300)")
    bim["chrom"] = ["1", "2", "1", "2"]
    bim["pos"] = [1, 2, 3, 4]
    plink.write_bfile(tmp_path / "v", g, fam, bim)
    fails(capsys, "pca", "--bfile", tmp_path / "v", "--no-exclude-regions", "--pcs", 1,
          "--out", tmp_path / "o", expect="v.bim: variant 'c': chromosome 1 appears again")


def test_keep_matching_nobody(setup, tmp_path, capsys):
    (tmp_path / "nobody.id").write_text("x1 x1\nx2 x2\n")
    fails(capsys, "pca", "--bfile", setup["bfile"], "--keep", tmp_path / "nobody.id",
          "--out", tmp_path / "o", expect="none of its 2 IDs is in the .fam")


def test_prune_settings_parse_plink2_forms():
    assert PruneSettings.parse(["500", "kb", "0.5"]) == PruneSettings(500_000, 1, 0.5, True)
    assert PruneSettings.parse(["500kb", "0.5"]) == PruneSettings(500_000, 1, 0.5, True)
    assert PruneSettings.parse(["50", "0.2"]) == PruneSettings(50, 1, 0.2, False)
    with pytest.raises(CmixError):
        PruneSettings.parse(["50"])


def test_fewer_varying_variants_than_pcs(tmp_path, capsys):
    rng = np.random.default_rng(2)
    g = np.zeros((6, 40), np.int8)
    g[0] = rng.binomial(2, 0.5, 40)
    g[1, :] = 2
    bim = pd.DataFrame({"chrom": "1", "variant_id": [f"v{i}" for i in range(6)], "cm": 0.0,
                        "pos": np.arange(1, 7) * 1000, "a1": "A", "a2": "G"})
    ids = [f"s{i}" for i in range(40)]
    fam = pd.DataFrame({"fid": ids, "iid": ids, "father": "0", "mother": "0", "sex": "1",
                        "phenotype": "-9"})
    plink.write_bfile(tmp_path / "mono", g, fam, bim)
    fails(capsys, "pca", "--bfile", tmp_path / "mono", "--no-prune", "--pcs", 2,
          "--out", tmp_path / "o", expect="--pcs 2: only 1 of the 6 variants vary among the "
          "fitted founders")
    assert not list(tmp_path.glob("o.*"))


# ------------------------------------------------- every genotype source, non-varying variants
def test_pca_of_chromosome_sets_and_pgen_equals_merged_bed(setup, tmp_path):
    """cmix pca on per-chromosome .bed files sharing one .fam, on a .pgen and on a
    per-chromosome .pgen set gives byte-identical outputs to cmix pca on the merged .bed
    (the files are written by plink2)."""
    d = setup["dir"]
    bed = setup["bfile"]
    chroms = sorted(setup["bf"].bim["chrom"].astype(str).unique(), key=int)
    plink2("--bfile", bed, "--make-pgen", "--out", tmp_path / "merged", cwd=tmp_path)
    for c in chroms:
        plink2("--bfile", bed, "--chr", c, "--make-bed", "--out", tmp_path / f"b{c}",
               cwd=tmp_path)
        plink2("--bfile", bed, "--chr", c, "--make-pgen", "--out", tmp_path / f"p{c}",
               cwd=tmp_path)
    common = ["--keep", d / "fit.id", "--project", d / "everyone.id", "--extract",
              d / "qc.snplist", "--indep-pairwise", "200kb", "1", "0.1", "--pcs", "4",
              "--threads", "2"]
    sources = {"bed": ["--bfile", bed],
               "bed_set": ["--bfile", tmp_path / "b{chrom}", "--fam", f"{bed}.fam",
                           "--chroms", *chroms],
               "pgen": ["--pfile", tmp_path / "merged"],
               "pgen_set": ["--pfile", tmp_path / "p{chrom}", "--fam",
                            tmp_path / "merged.psam", "--chroms", *chroms]}
    for name, args in sources.items():
        cmix("pca", *args, *common, "--out", tmp_path / name)
    for ext in ("eigenvec", "eigenval", "eigenvec.allele", "acount", "prune.in", "prune.out"):
        want = (tmp_path / f"bed.{ext}").read_bytes()
        for name in ("bed_set", "pgen", "pgen_set"):
            assert (tmp_path / f"{name}.{ext}").read_bytes() == want, (name, ext)
    assert len(chroms) > 1 and len(lines(tmp_path / "bed.eigenval")) == 4


def test_eigenvalues_leave_out_variants_that_do_not_vary(setup, tmp_path):
    """A .bed whose fitted founders are monomorphic or uncalled at some variants: cmix
    pca leaves those out of the PCA (and of m), so its eigenvalues equal plink2 --pca
    meanimpute on the varying variants alone; the outputs list only those."""
    d = setup["dir"]
    bf = setup["bf"]
    snps = lines(d / "qc.snplist")[:1500]
    rows = np.flatnonzero(bf.bim["variant_id"].isin(snps))
    g = plink.read_genotypes(bf, rows)
    bim = bf.bim.iloc[rows].reset_index(drop=True)
    g[::5] = 0                                         # monomorphic (A2/A2 everywhere)
    g[1::7] = -1                                       # no call at all
    flat = np.zeros(len(bim), bool)
    flat[::5] = flat[1::7] = True
    plink.write_bfile(tmp_path / "x", g, bf.fam, bim)
    bim.loc[~flat, "variant_id"].to_csv(tmp_path / "varying.txt", index=False, header=False)
    cmix("pca", "--bfile", tmp_path / "x", "--keep", d / "fit.id", "--no-prune",
         "--no-exclude-regions", "--pcs", "5", "--threads", "2", "--out", tmp_path / "cm")
    plink2("--bfile", tmp_path / "x", "--keep", d / "fit.id", "--extract",
           tmp_path / "varying.txt", "--pca", "5", "meanimpute", "--out", "p2", cwd=tmp_path)
    np.testing.assert_allclose(np.loadtxt(tmp_path / "cm.eigenval"),
                               np.loadtxt(tmp_path / "p2.eigenval"), rtol=0.01)
    acount = pd.read_csv(tmp_path / "cm.acount", sep="\t")
    assert acount["ID"].tolist() == bim.loc[~flat, "variant_id"].tolist()
