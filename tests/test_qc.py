"""cmix qc against plink2 2.00a3.5 run on the same files, and against a dense exact
HWE computation. Every expected value comes from plink2 or from the direct formula."""

from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy.special import gammaln, logsumexp

from cmix.readers import plink
from cmix.genotypes import selection
from cmix.genotypes import hwe, qc
from cmix.cli import main
from cmix.errors import CmixError

from conftest import requires_plink2

pytestmark = [requires_plink2, pytest.mark.plink2]


# ------------------------------------------------------------------ helpers
def make_bfile(prefix, dosage, father=None, mother=None, chrom=None):
    m, n = dosage.shape
    fam = pd.DataFrame({"fid": [f"F{i}" for i in range(n)], "iid": [f"S{i}" for i in range(n)],
                        "father": father or ["0"] * n, "mother": mother or ["0"] * n,
                        "sex": ["1"] * n, "phenotype": ["-9"] * n})
    bim = pd.DataFrame({"chrom": chrom or ["1"] * m, "variant_id": [f"rs{j}" for j in range(m)],
                        "cm": [0.0] * m, "pos": np.arange(1, m + 1) * 100,
                        "a1": ["A"] * m, "a2": ["G"] * m})
    plink.write_bfile(prefix, np.asarray(dosage, np.int8), fam, bim)
    return Path(prefix)


def plink2(*args, cwd=None):
    r = subprocess.run(["plink2", *map(str, args)], capture_output=True, text=True, cwd=cwd)
    assert r.returncode == 0, r.stdout + r.stderr
    return r


def read_lines(path):
    path = Path(path)
    return path.read_text().split() if path.exists() else []


def cmix_qc(*args):
    return main(["qc", *map(str, args)])


def exact_hwe_p(het, hom1, hom2, midp=False):
    """Dense reference: enumerate every het count with the same allele counts."""
    n = het + hom1 + hom2
    rare = 2 * min(hom1, hom2) + het
    hets = np.arange(rare % 2, rare + 1, 2)
    homr = (rare - hets) // 2
    homc = n - hets - homr
    logp = (gammaln(n + 1) - gammaln(homr + 1) - gammaln(hets + 1) - gammaln(homc + 1)
            + hets * np.log(2.0))
    logp -= logsumexp(logp)
    obs = logp[hets == het][0]
    tail = logp <= obs + 1e-9  # plink2 treats tables within ~1e-13 relative as ties
    p = np.exp(logsumexp(logp[tail]))
    if midp:
        ties = np.abs(logp - obs) <= 1e-9
        p -= 0.5 * np.exp(obs) * ties.sum()
    return p


# ------------------------------------------------------------------ fixtures
@pytest.fixture(scope="module")
def edge(tmp_path_factory):
    """600 samples x 400 variants with every edge case the filters have.

    Missing calls (incl. high-missingness variants and samples), planted HWE failures
    (all het, no het), monomorphic and singleton variants, MAF exactly 0.01 in the
    --keep subset (502 samples, 500 founders: 10 of 1,000 alleles), two non-founders.
    """
    d = tmp_path_factory.mktemp("edge")
    rng = np.random.default_rng(3)
    n, m = 600, 400
    af = np.concatenate([rng.beta(0.4, 2.0, 300).clip(0, 0.5), rng.uniform(0.05, 0.5, 100)])
    g = rng.binomial(2, af[:, None], (m, n)).astype(np.int8)
    keep = np.sort(rng.choice(n, 502, replace=False))
    g[0] = 0                                   # monomorphic
    g[1] = 2
    g[2] = 0; g[2, keep[7]] = 1                # singleton in the kept set
    g[3] = 0; g[3, keep[:10]] = 1              # MAF exactly 0.01 among kept founders
    g[4] = 2; g[4, keep[:10]] = 1              # same, minor allele is A2
    g[5] = 0; g[5, keep[:9]] = 1               # just below 0.01
    g[6] = 1                                   # all het: extreme HWE failure
    g[7, :300] = 0; g[7, 300:] = 2             # no het: extreme HWE failure
    for j in range(8, 40):                     # graded het deficit/excess
        p = rng.uniform(0.1, 0.5)
        shift = rng.uniform(-0.2, 0.2)
        probs = np.array([(1 - p) ** 2, 2 * p * (1 - p), p * p])
        probs[1] = np.clip(probs[1] * (1 + shift), 0, 1)
        probs /= probs.sum()
        g[j] = rng.choice(3, n, p=probs)
    g[8:][rng.random((m - 8, n)) < 0.01] = -1  # sporadic missing calls
    for j, rate in zip(range(40, 50), np.linspace(0.02, 0.2, 10)):
        g[j, rng.random(n) < rate] = -1        # high-missingness variants
    for i, rate in zip(keep[20:26], [0.05, 0.08, 0.1, 0.12, 0.2, 0.5]):
        g[8:, i][rng.random(m - 8) < rate] = -1  # high-missingness samples
    g[8:, keep[100]] = -1                      # a sample with almost no calls
    father = ["0"] * n
    mother = ["0"] * n
    father[keep[30]] = "S1"                    # non-founder with a parent in the file
    mother[keep[31]] = "NOTHERE"               # non-founder with an absent parent
    prefix = make_bfile(d / "edge", g, father, mother)
    keep_path = d / "keep.txt"
    keep_path.write_text("".join(f"F{i} S{i}\n" for i in keep) + "F999 S999\n")
    return prefix, keep_path


@pytest.fixture(scope="module")
def edge_plink2(edge):
    prefix, keep = edge
    out = prefix.parent / "p2"
    plink2("--bfile", prefix, "--keep", keep, "--hardy", "--freq", "counts", "--out", out)
    plink2("--bfile", prefix, "--keep", keep, "--hardy", "midp", "--out", f"{out}.midp")
    hardy = pd.read_csv(f"{out}.hardy", sep="\t")
    midp = pd.read_csv(f"{out}.midp.hardy", sep="\t")
    acount = pd.read_csv(f"{out}.acount", sep="\t")
    return hardy, midp, acount


def cmix_result(prefix, keep_path=None, *, threads=None, block_bytes=32 << 20, **filters):
    """qc.run_qc on the .bed at ``prefix``, ``filters`` as :class:`qc.QcFilters`' fields."""
    bf = plink.open_bfile(prefix)
    idx = None
    if keep_path is not None:
        idx, _ = selection.match_samples(selection.read_sample_ids(keep_path), bf.fam)
    return qc.run_qc(bf, idx, qc.QcFilters(**filters), threads=threads,
                     block_bytes=block_bytes)


# ------------------------------------------------------------------ counts, MAF, HWE p
def test_counts_maf_and_hwe_p_match_plink2(edge, edge_plink2):
    prefix, keep = edge
    hardy, hardy_midp, acount = edge_plink2
    t = cmix_result(prefix, keep).table
    # plink2 --hardy: A1 = REF = .bim column 6 (our A2), AX = our A1; founders only.
    assert (t["hom_a2"].to_numpy() == hardy["HOM_A1_CT"].to_numpy()).all()
    assert (t["het"].to_numpy() == hardy["HET_A1_CT"].to_numpy()).all()
    assert (t["hom_a1"].to_numpy() == hardy["TWO_AX_CT"].to_numpy()).all()
    # plink2 prints 6 significant digits: agreement to that printed precision.
    np.testing.assert_allclose(t["hwe_p"], hardy["P"], rtol=5e-6, atol=0)
    midp = cmix_result(prefix, keep, hwe_midp=True).table["hwe_p"]
    np.testing.assert_allclose(midp, hardy_midp["MIDP"], rtol=5e-6, atol=0)
    # --freq counts gives exact integers: MAF = min(f, 1 - f) from them.
    f = acount["ALT_CTS"] / acount["OBS_CT"]
    np.testing.assert_allclose(t["maf"], np.minimum(f, 1 - f), rtol=1e-12, atol=1e-15)
    assert t["maf"].iloc[3] == 0.01 and t["maf"].iloc[4] == 0.01


def test_hwe_p_matches_dense_enumeration():
    rng = np.random.default_rng(5)
    tables = [(0, 0, 0), (1, 0, 0), (0, 5, 5), (10, 0, 0), (50, 0, 0), (0, 300, 300),
              (600, 0, 0), (2, 1, 1), (1, 1, 0), (3, 0, 1)]
    for _ in range(300):
        n = int(rng.integers(1, 3000))
        het = int(rng.integers(0, n + 1))
        hom1 = int(rng.integers(0, n - het + 1))
        tables.append((het, hom1, n - het - hom1))
    het, hom1, hom2 = map(np.array, zip(*tables))
    for midp in (False, True):
        ours = hwe.hwe_exact_p(het, hom1, hom2, midp=midp)
        ref = np.array([exact_hwe_p(*t, midp=midp) if sum(t) else (0.5 if midp else 1.0)
                        for t in tables])
        tiny = ref < 1e-300  # plink2 reports 0 below double range; so do we
        np.testing.assert_allclose(ours[~tiny], ref[~tiny], rtol=1e-9)
        assert (ours[tiny] < 1e-290).all()


def test_hwe_p_agrees_with_plink2_threshold_to_1e6(edge):
    """plink2's --hwe filter (its own HweThresh code) brackets our p to 1e-6 relative."""
    prefix, keep = edge
    t = cmix_result(prefix, keep).table
    out = prefix.parent / "bracket"
    p = t["hwe_p"].to_numpy()
    for j in [6, 7] + list(range(8, 40, 3)):
        if not 1e-300 < p[j] < 0.4:
            continue
        for factor, removed in ((1 + 1e-6, True), (1 - 1e-6, False)):
            plink2("--bfile", prefix, "--keep", keep, "--hwe", repr(float(p[j] * factor)),
                   "--write-snplist", "--out", out)
            assert (t["variant_id"].iloc[j] not in read_lines(f"{out}.snplist")) == removed, j


# ------------------------------------------------------------------ filters
FLAG_SETS = [
    ["--maf", "0.01", "--hwe", "1e-7"],
    ["--maf", "0.01", "--hwe", "1e-3", "--geno", "0.05", "--mind", "0.1"],
    ["--hwe", "0.01", "midp"],
    ["--hwe", "0.01", "keep-fewhet"],
    ["--hwe", "0.001", "midp", "keep-fewhet", "--maf", "0.05"],
    ["--geno", "0.02", "--mind", "0.05"],
    ["--mind", "0.09", "--maf", "0.2"],
    ["--maf", "0.0100001"],
]


@pytest.mark.parametrize("flags", FLAG_SETS, ids=lambda f: " ".join(f))
def test_snplist_and_mindrem_identical_to_plink2(edge, flags, tmp_path):
    prefix, keep = edge
    plink2("--bfile", prefix, "--keep", keep, *flags, "--write-snplist", "--out", tmp_path / "p")
    assert cmix_qc("--bfile", prefix, "--keep", keep, *flags, "--threads", 2,
                   "--out", tmp_path / "c") == 0
    ours = read_lines(tmp_path / "c.snplist")
    assert ours == read_lines(tmp_path / "p.snplist")
    assert 0 < len(ours)
    assert read_lines(tmp_path / "c.mindrem.id") == read_lines(tmp_path / "p.mindrem.id")
    vqc = pd.read_csv(tmp_path / "c.vqc.tsv", sep="\t")
    assert list(vqc.loc[vqc["status"] == "PASS", "variant_id"]) == ours


def test_geno_mind_boundaries_match_plink2(tmp_path):
    """t x N that floating point puts just below an integer (0.29 x 100 = 28.999...)."""
    rng = np.random.default_rng(2)
    g = rng.binomial(2, 0.3, (61, 100)).astype(np.int8)
    for k in range(61):
        g[k, :k] = -1                            # variant k: k missing calls of 100
    make_bfile(tmp_path / "geno", g)
    g = rng.binomial(2, 0.3, (100, 61)).astype(np.int8)
    for i in range(61):
        g[:i, i] = -1                            # sample i: i missing calls of 100
    make_bfile(tmp_path / "mind", g)
    for t in ["0.29", "0.07", "0.14", "0.57", "0.05", "0.3", "0.1"]:
        for kind in ("geno", "mind"):
            plink2("--bfile", tmp_path / kind, f"--{kind}", t, "--write-snplist",
                   "--out", tmp_path / "p")
            assert cmix_qc("--bfile", tmp_path / kind, f"--{kind}", t,
                           "--out", tmp_path / "c") == 0
            for ext in (".snplist", ".mindrem.id"):
                assert read_lines(tmp_path / f"c{ext}") == read_lines(tmp_path / f"p{ext}"), (kind, t)
            (tmp_path / "p.mindrem.id").unlink(missing_ok=True)


def test_maf_edge_cases_match_plink2(tmp_path):
    """MAF exactly at the threshold, A2-minor, all missing, one call."""
    n = 50
    rows = []
    for k in range(4):
        r = np.zeros(n); r[:k] = 1; rows.append(r)
        r = np.full(n, 2); r[:k] = 1; rows.append(r)
    rows.append(np.full(n, -1))                  # no calls: plink2 keeps it
    r = np.full(n, -1); r[0] = 1; rows.append(r)  # one het call
    rows.append(np.ones(n))
    make_bfile(tmp_path / "m", np.array(rows))
    for t in ["0.01", "0.02", "0.03", "0.5"]:
        plink2("--bfile", tmp_path / "m", "--maf", t, "--write-snplist", "--out", tmp_path / "p")
        assert cmix_qc("--bfile", tmp_path / "m", "--maf", t, "--out", tmp_path / "c") == 0
        assert read_lines(tmp_path / "c.snplist") == read_lines(tmp_path / "p.snplist"), t


def test_simulated_cohort_matches_plink2(cohort, tmp_path):
    prefix = cohort / "genotypes"
    flags = ["--maf", "0.01", "--hwe", "1e-7"]
    plink2("--bfile", prefix, *flags, "--write-snplist", "--hardy", "--freq", "counts",
           "--out", tmp_path / "p")
    assert cmix_qc("--bfile", prefix, *flags, "--out", tmp_path / "c") == 0
    assert read_lines(tmp_path / "c.snplist") == read_lines(tmp_path / "p.snplist")
    vqc = pd.read_csv(tmp_path / "c.vqc.tsv", sep="\t")
    hardy = pd.read_csv(tmp_path / "p.hardy", sep="\t")
    acount = pd.read_csv(tmp_path / "p.acount", sep="\t")
    np.testing.assert_allclose(vqc["hwe_p"], hardy["P"], rtol=5e-6, atol=0)
    f = acount["ALT_CTS"] / acount["OBS_CT"]
    np.testing.assert_allclose(vqc["maf"], np.minimum(f, 1 - f), rtol=1e-12, atol=1e-15)
    assert (vqc["status"] == "hwe").sum() > 0  # the planted failures are caught


def test_streaming_and_threads_do_not_change_results(edge):
    prefix, keep = edge
    kw = dict(maf=0.01, hwe=1e-3, geno=0.05, mind=0.1)
    a = cmix_result(prefix, keep, threads=1, **kw).table
    b = cmix_result(prefix, keep, threads=2, block_bytes=1000, **kw).table  # 6 variants a block
    pd.testing.assert_frame_equal(a, b)


def test_counts_match_dense_decode(edge):
    prefix, keep = edge
    bf = plink.open_bfile(prefix)
    idx, _ = selection.match_samples(selection.read_sample_ids(keep), bf.fam)
    c = qc.count_genotypes(bf, idx, sample_missing=True, block_bytes=3000)
    g = plink.read_genotypes(bf)
    founders = qc.founder_flags(bf.fam)
    gf = g[:, idx[founders[idx]]]
    assert (c.hom_a1 == (gf == 2).sum(1)).all() and (c.het == (gf == 1).sum(1)).all()
    assert (c.hom_a2 == (gf == 0).sum(1)).all()
    assert (c.missing == (g[:, idx] == -1).sum(1)).all()
    assert (c.sample_missing[idx] == (g[:, idx] == -1).sum(0)).all()
    assert c.n_founders == len(idx) - 2


# ------------------------------------------------------------------ chromosomes
def test_non_autosomal_is_an_error_and_autosome_matches_plink2(tmp_path, capsys):
    rng = np.random.default_rng(9)
    g = rng.binomial(2, 0.3, (6, 40)).astype(np.int8)
    make_bfile(tmp_path / "x", g, chrom=["1", "2", "X", "23", "MT", "22"])
    assert cmix_qc("--bfile", tmp_path / "x", "--maf", "0.01", "--out", tmp_path / "c") == 1
    assert "--autosome" in capsys.readouterr().err
    assert not (tmp_path / "c.snplist").exists()
    plink2("--bfile", tmp_path / "x", "--autosome", "--maf", "0.01", "--write-snplist",
           "--out", tmp_path / "p")
    assert cmix_qc("--bfile", tmp_path / "x", "--autosome", "--maf", "0.01",
                   "--out", tmp_path / "c") == 0
    assert read_lines(tmp_path / "c.snplist") == read_lines(tmp_path / "p.snplist")


# ------------------------------------------------------------------ bad inputs
@pytest.fixture()
def small(tmp_path):
    rng = np.random.default_rng(4)
    return make_bfile(tmp_path / "s", rng.binomial(2, 0.3, (20, 30)))


def _fails(capsys, tmp_path, *args, expect):
    rc = cmix_qc(*args, "--out", tmp_path / "o")
    err = capsys.readouterr().err
    assert rc == 1 and expect in err, err
    assert len(err.strip().splitlines()) == 1
    assert not list(tmp_path.glob("o.*")) and not list(tmp_path.glob(".o.*"))


def test_bad_bed_files(small, tmp_path, capsys):
    bed = small.with_suffix(".bed")
    data = bed.read_bytes()
    bed.write_bytes(b"\x00\x00\x01" + data[3:])
    _fails(capsys, tmp_path, "--bfile", small, "--maf", "0.01", expect="not a PLINK .bed")
    bed.write_bytes(data[:-5])
    _fails(capsys, tmp_path, "--bfile", small, expect="truncated")
    bed.write_bytes(data)
    bim = small.with_suffix(".bim")
    bim.write_text("".join(bim.read_text().splitlines(True)[:-1]))
    _fails(capsys, tmp_path, "--bfile", small, expect="does not match the .bim")


def test_duplicate_ids(small, tmp_path, capsys):
    fam = small.with_suffix(".fam")
    lines = fam.read_text().splitlines(True)
    fam.write_text("".join([lines[0], lines[0]] + lines[2:]))
    _fails(capsys, tmp_path, "--bfile", small, expect="duplicate sample ID on lines 1 and 2")
    fam.write_text("".join(lines))
    assert "S0" not in capsys.readouterr().err
    bim = small.with_suffix(".bim")
    blines = bim.read_text().splitlines(True)
    bim.write_text("".join([blines[0], blines[0].replace("\t100\t", "\t150\t")] + blines[2:]))
    # a duplicate variant ID: both variants left out (as plink2 --rm-dup exclude-all), logged
    assert cmix_qc("--bfile", small, "--out", tmp_path / "o") == 0
    assert "2 of 20 variants left out" in capsys.readouterr().err
    dup = blines[0].split()[1]
    vqc = pd.read_csv(tmp_path / "o.vqc.tsv", sep="\t")
    assert len(vqc) == 18 and dup not in set(vqc["variant_id"])


def test_keep_files(small, tmp_path, capsys):
    keep = tmp_path / "k.txt"
    keep.write_text("F0 S0\nF1 S1\nNOPE NOPE\nF2 S2\n")
    assert cmix_qc("--bfile", small, "--keep", keep, "--out", tmp_path / "k") == 0
    err = capsys.readouterr().err
    assert "1 of 4 IDs" in err and "NOPE" not in err
    assert pd.read_csv(tmp_path / "k.vqc.tsv", sep="\t")["n_kept"].iloc[0] == 3
    keep.write_text("X1 X1\nX2 X2\n")
    _fails(capsys, tmp_path, "--bfile", small, "--keep", keep, expect="none of its 2 IDs")


@pytest.mark.parametrize("args", [["--maf", "abc"], ["--geno", "1.5"], ["--hwe", "x"],
                                  ["--hwe", "1e-7", "mdp"], ["--mind", "-0.1"]])
def test_bad_thresholds(small, tmp_path, capsys, args):
    with pytest.raises(SystemExit) as exc:
        cmix_qc("--bfile", small, *args, "--out", tmp_path / "o")
    assert exc.value.code == 2
    assert "error: argument" in capsys.readouterr().err
    assert not list(tmp_path.glob("o.*"))


def test_run_qc_rejects_mind_removing_everyone(small):
    bf = plink.open_bfile(small)
    g = plink.read_genotypes(bf)
    g[:, :] = -1
    plink.write_bfile(small, g, bf.fam, bf.bim)
    with pytest.raises(CmixError, match="all 30 samples"):
        qc.run_qc(plink.open_bfile(small), filters=qc.QcFilters(mind=0.1))


def test_remove_and_keep_together_match_plink2(edge, tmp_path):
    prefix, keep = edge
    remove = tmp_path / "rm.txt"
    remove.write_text("#FID\tIID\n" + "".join(f"F{i}\tS{i}\n" for i in range(0, 600, 7)))
    flags = ["--keep", keep, "--remove", remove, "--maf", "0.02", "--hwe", "1e-4",
             "--mind", "0.1", "--geno", "0.05"]
    plink2("--bfile", prefix, *flags, "--write-snplist", "--out", tmp_path / "p")
    assert cmix_qc("--bfile", prefix, *flags, "--out", tmp_path / "c") == 0
    assert read_lines(tmp_path / "c.snplist") == read_lines(tmp_path / "p.snplist")
    assert read_lines(tmp_path / "c.mindrem.id") == read_lines(tmp_path / "p.mindrem.id")


def test_per_chromosome_runs_concatenate_to_the_whole_run(cohort, tmp_path):
    """The workflow's split: one `cmix qc --chroms C` job per chromosome, outputs concatenated
    in .bim order, equals one whole run (and plink2's snplist)."""
    import subprocess
    import sys

    import pandas as pd

    def qc(*extra, out):
        res = subprocess.run([sys.executable, "-m", "cmix.cli", "qc", "--bfile",
                              str(cohort / "genotypes"), "--maf", "0.01", "--hwe", "1e-7",
                              "--geno", "0.05", *extra, "--out", str(out)],
                             capture_output=True, text=True)
        assert res.returncode == 0, res.stderr
        return out

    whole = qc(out=tmp_path / "whole")
    chroms = pd.read_csv(cohort / "genotypes.bim", sep="\t", header=None)[0].astype(str).unique()
    parts = [qc("--chroms", c, out=tmp_path / f"chr{c}") for c in chroms]
    snps = "".join(p.with_suffix(".snplist").read_text() for p in parts)
    assert snps == whole.with_suffix(".snplist").read_text()
    vqc = pd.concat([pd.read_csv(p.with_suffix(".vqc.tsv"), sep="\t") for p in parts],
                    ignore_index=True)
    pd.testing.assert_frame_equal(vqc, pd.read_csv(whole.with_suffix(".vqc.tsv"), sep="\t"))
    subprocess.run(["plink2", "--bfile", str(cohort / "genotypes"), "--maf", "0.01", "--hwe",
                    "1e-7", "--geno", "0.05", "--write-snplist", "--out", str(tmp_path / "p2")],
                   check=True, capture_output=True)
    assert snps == (tmp_path / "p2.snplist").read_text()
    res = subprocess.run([sys.executable, "-m", "cmix.cli", "qc", "--bfile",
                          str(cohort / "genotypes"), "--mind", "0.1", "--chroms", "1", "--out",
                          str(tmp_path / "bad")], capture_output=True, text=True)
    assert res.returncode == 1 and "cannot be combined with --chroms" in res.stderr


def write_dosage_vcf(path, n=300, m=400, seed=11):
    """A GT:DS VCF on chromosomes 1-2: rare and common variants, each call a hard call
    plus noise (none, small, large, or a one-sided spread of up to 0.09 that moves a rare
    variant's dosage frequency away from its hard-call frequency), 2% missing."""
    rng = np.random.default_rng(seed)
    with open(path, "w") as f:
        f.write('##fileformat=VCFv4.2\n##contig=<ID=1>\n##contig=<ID=2>\n'
                '##FORMAT=<ID=GT,Number=1,Type=String,Description="g">\n'
                '##FORMAT=<ID=DS,Number=1,Type=Float,Description="d">\n'
                "#CHROM\tPOS\tID\tREF\tALT\tQUAL\tFILTER\tINFO\tFORMAT\t"
                + "\t".join(f"S{i}" for i in range(n)) + "\n")
        for j in range(m):
            g = rng.binomial(2, rng.choice([0.004, 0.008, 0.0105, 0.012, 0.02, 0.2]), n)
            noise = [np.zeros(n), rng.normal(0, 0.05, n), rng.normal(0, 0.3, n),
                     rng.uniform(0, 0.09, n)][j % 4]
            ds = np.round(np.clip(g + noise, 0, 2), 3)
            vals = np.char.add(np.array(["0/0", "0/1", "1/1"])[np.rint(ds).astype(int)],
                               np.char.mod(":%.3f", ds))
            vals[rng.random(n) < 0.02] = "./.:."
            f.write(f"{1 + 2 * j // m}\t{1000 + 10 * j}\tv{j}\tG\tA\t.\t.\t.\tGT:DS\t"
                    + "\t".join(vals) + "\n")


def test_maf_on_pgen_dosages_matches_plink2(tmp_path):
    """A .pgen holding dosages (ten non-founders among its samples): --maf takes the
    founders' dosage frequency as plink2 does (the kept list and the maf column equal
    plink2's --freq), --geno/--hwe its hard calls; a per-chromosome set of it the same."""
    write_dosage_vcf(tmp_path / "d.vcf")
    plink2("--vcf", tmp_path / "d.vcf", "dosage=DS", "--make-pgen", "--out", tmp_path / "d")
    (tmp_path / "d.psam").write_text("#IID\tPAT\tMAT\tSEX\n" + "".join(
        f"S{i}\t{'S20' if i < 10 else 0}\t{'S21' if i < 10 else 0}\tNA\n" for i in range(300)))
    (tmp_path / "keep.txt").write_text("".join(f"S{i}\n" for i in range(0, 300, 3)[5:]))
    for keep in ([], ["--keep", tmp_path / "keep.txt"]):
        flags = [*keep, "--maf", "0.01", "--geno", "0.05", "--hwe", "1e-7"]
        plink2("--pfile", tmp_path / "d", *flags, "--write-snplist", "--out", tmp_path / "p")
        plink2("--pfile", tmp_path / "d", *keep, "--freq", "--out", tmp_path / "p")
        assert cmix_qc("--pfile", tmp_path / "d", *flags, "--out", tmp_path / "c") == 0
        assert read_lines(tmp_path / "c.snplist") == read_lines(tmp_path / "p.snplist")
        vqc = pd.read_csv(tmp_path / "c.vqc.tsv", sep="\t")
        f = pd.read_csv(tmp_path / "p.afreq", sep="\t")["ALT_FREQS"]
        np.testing.assert_allclose(vqc["maf"], np.minimum(f, 1 - f), rtol=1e-5, atol=0)
        # the hard calls' frequencies would keep another list
        a1, a2 = 2 * vqc["hom_a1"] + vqc["het"], 2 * vqc["hom_a2"] + vqc["het"]
        hard_maf = np.minimum(a1, a2) / (a1 + a2)
        assert ((hard_maf < 0.01) != (vqc["maf"] < 0.01)).sum() > 10
    for c in ("1", "2"):
        plink2("--pfile", tmp_path / "d", "--chr", c, "--make-pgen", "--out", tmp_path / f"d{c}")
    assert cmix_qc("--pfile", tmp_path / "d{chrom}", "--fam", tmp_path / "d.psam", "--chroms",
                   "1-2", *flags, "--out", tmp_path / "s") == 0
    assert read_lines(tmp_path / "s.snplist") == read_lines(tmp_path / "p.snplist")
