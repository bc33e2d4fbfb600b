"""cmix unrelated against plink2 2.00a3.5 run on the same files.

References: plink2 --make-king-table (kinship, NSNP, HETHET, IBS0 of every pair),
plink2 --king-cutoff on the genotypes (the kept/dropped sets), plink2 --king-cutoff fed
a triangular .king.bin we write (pruning order on arbitrary relatedness graphs), and a
direct per-pair count in numpy (cmix.simulate.kinship.king_robust_pair). The cohorts are built
here by inheritance (founder haplotypes, gametes with crossovers), so the relatives are
known by construction.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from cmix.readers import chroms, plink
from cmix.genotypes.relatedness import int8 as int8_route
from cmix.genotypes.relatedness.bitplanes import king_bitplanes
from cmix.genotypes.relatedness.cutoff import prune_king_cutoff
from cmix.genotypes.relatedness.int8 import int8_matmul, king_int8
from cmix.genotypes.relatedness.king import king_kinship, king_robust, king_variants, pair_counts
from cmix.genotypes.relatedness.unrelated import KIN0_COLUMNS, unrelated_from_genotypes
from cmix.cli import main
from cmix.simulate.kinship import king_robust_pair

from conftest import requires_plink2

pytestmark = [requires_plink2, pytest.mark.plink2]


# ---------------------------------------------------------------------------- fixtures
def make_family_cohort(prefix, seed=0, n_unrelated=120, n_variants=6000, missing_rate=0.01,
                       n_x=20) -> np.ndarray:
    """Write a cohort with planted relatives; returns each sample's label (.fam order).

    Founders: haplotypes with allele frequencies uniform in 0.05-0.5 on two autosomes
    (plus ``n_x`` chromosome-23 variants, which KING must ignore). Relatives: a
    duplicate (0.3% discordant calls), a parent-offspring trio, full sibs, half sibs,
    a nuclear family with three children (everyone related to 3-4 others), three
    generations, first cousins (third degree), a path A-B-C-D of haplotype sharers and
    a star (X shares half of each haplotype with four unrelated people). Calls are
    missing at ``missing_rate`` and one sample misses 10% more. Sample order is shuffled.
    """
    rng = np.random.default_rng(seed)
    half_a = n_variants // 2
    chrom = np.r_[np.repeat(["1", "2"], [half_a, n_variants - half_a]), np.repeat("23", n_x)]
    n_tot = len(chrom)
    freq = rng.uniform(0.05, 0.5, n_tot)
    bounds = [(0, half_a), (half_a, n_variants), (n_variants, n_tot)]

    def founder():
        return (rng.random((2, n_tot)) < freq).astype(np.int8)

    def gamete(h):
        out = np.empty(n_tot, np.int8)
        for a, b in bounds:
            cuts = np.sort(rng.integers(a + 1, b, rng.integers(1, 3))) if b - a > 2 else []
            src, last = rng.integers(0, 2), a
            for c in [*cuts, b]:
                out[last:c] = h[src, last:c]
                src, last = 1 - src, c
        return out

    def child(h1, h2):
        return np.stack([gamete(h1), gamete(h2)])

    people = []

    def add(label, h):
        people.append((label, h))
        return h

    for _ in range(n_unrelated):
        add("unrelated", founder())
    dup = add("dup1", founder())
    add("dup2", dup.copy())
    fa, mo = add("trio_father", founder()), add("trio_mother", founder())
    add("trio_child", child(fa, mo))
    p1, p2 = founder(), founder()
    add("sib1", child(p1, p2))
    add("sib2", child(p1, p2))
    shared, q1, q2 = founder(), founder(), founder()
    add("halfsib1", child(shared, q1))
    add("halfsib2", child(shared, q2))
    fa, mo = add("family_father", founder()), add("family_mother", founder())
    for k in range(3):
        add(f"family_child{k}", child(fa, mo))
    grand = add("grandparent", founder())
    parent = add("parent", child(grand, founder()))
    add("grandchild", child(parent, founder()))
    a, b = founder(), founder()
    s1, s2 = child(a, b), child(a, b)
    add("cousin1", child(s1, founder()))
    add("cousin2", child(s2, founder()))
    ha, hb, hc, hd, he = (founder()[0] for _ in range(5))
    for label, pair in (("pathA", (ha, hb)), ("pathB", (hb, hc)), ("pathC", (hc, hd)),
                        ("pathD", (hd, he))):
        add(label, np.stack(pair))
    x = add("starX", founder())
    first_half = np.zeros(n_tot, bool)
    for lo, hi in bounds:
        first_half[lo:(lo + hi) // 2] = True
    for hap in (0, 1):
        for part in (first_half, ~first_half):
            h = founder()
            h[0, part] = x[hap, part]
            add("starY", h)
    labels = np.array([lab for lab, _ in people])
    geno = np.stack([h.sum(0) for _, h in people], axis=1).astype(np.int8)
    d2 = int(np.flatnonzero(labels == "dup2")[0])
    flip = rng.random(n_tot) < 0.003
    geno[flip, d2] = (geno[flip, d2] + 1) % 3
    miss = rng.random(geno.shape) < missing_rate
    miss[:, rng.integers(0, geno.shape[1])] |= rng.random(n_tot) < 0.1
    geno[miss] = -1
    order = rng.permutation(geno.shape[1])
    geno, labels = geno[:, order], labels[order]
    ids = (rng.choice(900_000, len(labels), replace=False) + 1_000_000).astype(str)
    fam = pd.DataFrame({"fid": ids, "iid": ids, "father": "0", "mother": "0", "sex": "1",
                        "phenotype": "-9"})
    bim = pd.DataFrame({"chrom": chrom, "variant_id": [f"v{i}" for i in range(n_tot)],
                        "cm": 0.0, "pos": np.arange(n_tot) * 1000 + 1, "a1": "A", "a2": "G"})
    plink.write_bfile(prefix, geno, fam, bim)
    return labels


def run_plink2(*args):
    res = subprocess.run(["plink2", "--threads", "1", *map(str, args)], capture_output=True,
                         text=True)
    assert res.returncode == 0, res.stdout + res.stderr


def read_kin0(path) -> pd.DataFrame:
    return pd.read_csv(path, sep="\t", dtype={"#FID1": str, "IID1": str, "FID2": str,
                                              "IID2": str})


@pytest.fixture(scope="module")
def families(tmp_path_factory):
    """The family cohort, plus plink2's kinship table and --king-cutoff on it, with and
    without a keep list (which drops one child of the family and 20 others)."""
    d = tmp_path_factory.mktemp("families")
    labels = make_family_cohort(d / "fam", seed=3)
    bf = plink.open_bfile(d / "fam")
    rng = np.random.default_rng(5)
    drop = set(rng.choice(len(labels), 20, replace=False)) | {int(np.flatnonzero(
        labels == "family_child1")[0])}
    keep_idx = np.array([i for i in range(len(labels)) if i not in drop])
    plink.write_sample_ids(d / "samples.keep", bf.fam, keep_idx)  # the --keep list
    run_plink2("--bfile", d / "fam", "--make-king-table", "--out", d / "p2all")
    run_plink2("--bfile", d / "fam", "--make-king-table", "--king-table-filter", "0.0442",
               "--out", d / "p2rep")
    run_plink2("--bfile", d / "fam", "--king-cutoff", "0.0884", "--out", d / "p2cut")
    run_plink2("--bfile", d / "fam", "--keep", d / "samples.keep", "--king-cutoff", "0.0884",
               "--out", d / "p2cutkeep")
    run_plink2("--bfile", d / "fam", "--keep", d / "samples.keep", "--make-king-table",
               "--out", d / "p2allkeep")
    return {"dir": d, "labels": labels, "bf": bf, "keep_idx": keep_idx}


# ------------------------------------------------------------------- kinship values
def _merge_with_plink2(pairs, bf, kin0):
    pos = pd.Index(bf.fam["iid"])
    kin0 = kin0.assign(i1=pos.get_indexer(kin0["IID1"]), i2=pos.get_indexer(kin0["IID2"]))
    return pairs.merge(kin0, left_on=["idx1", "idx2"], right_on=["i1", "i2"], how="outer",
                       indicator=True)


def test_kinship_counts_match_plink2_all_pairs(families):
    bf = families["bf"]
    pairs = king_robust(bf, min_kinship=None, device="cpu")
    kin0 = read_kin0(families["dir"] / "p2all.kin0")
    n = bf.n_samples
    assert len(pairs) == len(kin0) == n * (n - 1) // 2
    m = _merge_with_plink2(pairs, bf, kin0)
    assert (m["_merge"] == "both").all()            # same pairs, same (later, earlier) order
    # plink2 prints 6 significant digits: agreement to 1e-6 absolute
    assert np.abs(m["kinship"] - m["KINSHIP"]).max() < 1e-6
    assert (m["nsnp"] == m["NSNP"]).all()
    assert np.abs(m["hethet"] / m["nsnp"] - m["HETHET"]).max() < 1e-6
    assert np.abs(m["ibs0"] / m["nsnp"] - m["IBS0"]).max() < 1e-6
    # missing calls: jointly called only (NSNP varies by pair, below the 6,000 autosomal)
    assert m["nsnp"].max() < 6000 and m["nsnp"].min() < 5500


def test_kinship_matches_direct_pair_computation(families):
    """Dense reference: per-pair counts written out directly (cmix.simulate)."""
    bf = families["bf"]
    auto = np.flatnonzero(bf.bim["chrom"] != "23")
    geno = plink.read_genotypes(bf, auto)
    pairs = king_robust(bf, min_kinship=None, device="cpu")
    rng = np.random.default_rng(0)
    for k in rng.choice(len(pairs), 40, replace=False):
        r = pairs.iloc[k]
        phi, hethet, ibs0, nsnp = king_robust_pair(geno[:, int(r.idx1)], geno[:, int(r.idx2)])
        assert abs(phi - r.kinship) < 1e-12 and nsnp == r.nsnp
        assert abs(hethet - r.hethet / r.nsnp) < 1e-12 and abs(ibs0 - r.ibs0 / r.nsnp) < 1e-12


def test_block_sizes_and_passes_do_not_change_results(families):
    bf = families["bf"]
    ref = king_robust(bf, min_kinship=None, device="cpu")
    tiled = king_robust(bf, min_kinship=None, device="cpu", block_size=50,
                        max_memory_bytes=30_000)  # 5 passes
    pd.testing.assert_frame_equal(ref, tiled)


def test_bitplane_counts_match_direct_counts():
    """The packing and pair kernels against counts written out in numpy: 150 samples
    (tiles of 64 cut short), 5,000 variants (a 4,096-variant block and a part block),
    sample subset in .fam positions not divisible by 4, 5% missing calls."""
    from cmix.genotypes import kernels

    rng = np.random.default_rng(3)
    n_all, n_var = 157, 5000
    geno = rng.choice(np.array([-1, 0, 1, 2], np.int8), size=(n_var, n_all),
                      p=[0.05, 0.4, 0.35, 0.2])
    bed = plink.encode(geno)
    pos = np.sort(rng.choice(n_all, 150, replace=False)).astype(np.int64)
    n = len(pos)
    offsets = np.r_[0, np.cumsum(n - 1 - np.arange(n - 1))].astype(np.int64)
    tiles = np.array([(r, c) for r in range(0, n, 64) for c in range(r, n, 64)], np.int64)
    acc = np.zeros((3, n * (n - 1) // 2), np.int32)
    planes = np.empty((n, kernels.KING_PLANES, 64), np.uint64)
    for v0 in range(0, n_var, 4096):
        v1 = min(v0 + 4096, n_var)
        kernels.pack_king_planes(bed[v0:v1], pos, planes)
        kernels.king_accumulate(planes, (v1 - v0 + 63) // 64, 0, n, offsets, tiles, acc)
    g = geno[:, pos]
    i, j = np.triu_indices(n, 1)          # row-major, as the accumulators are laid out
    a, b = g[:, i], g[:, j]
    both = (a >= 0) & (b >= 0)
    ibs0 = (both & (np.abs(a - b) == 2)).sum(0)
    hethet = (both & (a == 1) & (b == 1)).sum(0)
    het_hom = (both & (a == 1) & (b != 1)).sum(0)
    hom_het = (both & (a != 1) & (b == 1)).sum(0)
    np.testing.assert_array_equal(acc[0], 4 * ibs0 + het_hom + hom_het)
    np.testing.assert_array_equal(acc[1], hethet + het_hom)
    np.testing.assert_array_equal(acc[2], hethet + hom_het)
    si, sj, kin = kernels.king_select(acc, offsets, 0, n, n, 0.0, False)
    ref = king_kinship(ibs0, hethet, het_hom, hom_het)
    np.testing.assert_array_equal(si, i[ref > 0])
    np.testing.assert_array_equal(sj, j[ref > 0])
    np.testing.assert_array_equal(kin, ref[ref > 0])


def test_bitplanes_match_int8_products_and_thread_count(families):
    """The CPU route (bit planes) and the GPU route's int8 products (run on the CPU)
    give the same kinship for every pair, with 1 or 2 numba threads."""
    import numba
    import torch

    bf = families["bf"]
    auto = np.flatnonzero(chroms.is_autosome(bf.bim["chrom"]))
    samples = np.arange(bf.n_samples)
    ref = king_int8(bf, auto, samples, None, 64, 2048, torch.device("cpu"), 1 << 30)
    order = np.lexsort((ref[1], ref[0]))
    before = numba.get_num_threads()
    try:
        for threads in (1, min(2, numba.config.NUMBA_NUM_THREADS)):
            numba.set_num_threads(threads)
            got = king_bitplanes(bf, auto, samples, None, 40_000)
            np.testing.assert_array_equal(got[0], ref[0][order])
            np.testing.assert_array_equal(got[1], ref[1][order])
            np.testing.assert_array_equal(got[2], ref[2][order])
            assert got[3] == ref[3]             # pairs of NaN kinship
    finally:
        numba.set_num_threads(before)


def test_relatives_are_found(families):
    """The planted relationships land in their KING degrees (a sanity check of the fixture)."""
    bf, labels = families["bf"], families["labels"]
    pairs = king_robust(bf, device="cpu")
    lab = {frozenset((labels[a], labels[b])): k for a, b, k in
           zip(pairs["idx1"], pairs["idx2"], pairs["kinship"])}
    assert lab[frozenset(("dup1", "dup2"))] > 0.354
    assert 0.177 < lab[frozenset(("trio_father", "trio_child"))] < 0.354
    # sibs and second degree vary with the few crossovers of two simulated chromosomes
    assert 0.0884 < lab[frozenset(("sib1", "sib2"))] < 0.354
    assert 0.0884 < lab[frozenset(("grandparent", "parent"))] < 0.354
    assert 0.0442 < lab[frozenset(("grandparent", "grandchild"))] < 0.354
    assert 0.177 < lab[frozenset(("family_child0", "family_father"))] < 0.354
    assert 0.177 < lab[frozenset(("pathB", "pathC"))] < 0.354
    assert frozenset(("pathA", "pathC")) not in lab


# --------------------------------------------------------------- kept sets vs plink2
def _read(path):
    return Path(path).read_text()


@pytest.mark.parametrize("with_keep", [False, True])
def test_genotype_route_matches_plink2_king_cutoff(families, with_keep, tmp_path):
    d = families["dir"]
    args = ["unrelated", "--bfile", str(d / "fam"), "--cutoff", "0.0884", "--out",
            str(tmp_path / "o"), "--device", "cpu", "--block-size", "64"]
    ref = "p2cut"
    if with_keep:
        args += ["--keep", str(d / "samples.keep")]
        ref = "p2cutkeep"
    assert main(args) == 0
    for ext in ("king.cutoff.in.id", "king.cutoff.out.id"):
        assert _read(tmp_path / f"o.{ext}") == _read(d / f"{ref}.{ext}")
    if not with_keep:
        # the .kin0 of pairs > 0.0442: plink2 --make-king-table --king-table-filter 0.0442
        ours, theirs = read_kin0(tmp_path / "o.kin0"), read_kin0(d / "p2rep.kin0")
        assert list(ours.columns) == list(theirs.columns) == KIN0_COLUMNS
        pd.testing.assert_frame_equal(ours.drop(columns=["HETHET", "IBS0", "KINSHIP"]),
                                      theirs.drop(columns=["HETHET", "IBS0", "KINSHIP"]))
        for col in ("HETHET", "IBS0", "KINSHIP"):
            assert np.abs(ours[col] - theirs[col]).max() < 1e-6
    summary = pd.read_csv(tmp_path / "o.king.summary.tsv", sep="\t", index_col=0)["value"]
    n_out = len(_read(tmp_path / "o.king.cutoff.out.id").splitlines()) - 1
    assert summary["samples_dropped"] == n_out > 0


def test_genotype_route_cutoff_below_report_threshold_matches_plink2(families, tmp_path):
    """A cutoff below 0.0442 prunes every pair above it, as plink2 --king-cutoff 0.03
    (genotype route and table route); the .kin0 still holds the pairs > 0.0442 only."""
    d = families["dir"]
    every = read_kin0(d / "p2all.kin0")["KINSHIP"]
    assert ((every > 0.03) & (every <= 0.0442)).sum() > 0      # pairs only this cutoff prunes
    run_plink2("--bfile", d / "fam", "--king-cutoff", "0.03", "--out", tmp_path / "p")
    assert main(["unrelated", "--bfile", str(d / "fam"), "--cutoff", "0.03", "--out",
                 str(tmp_path / "o"), "--device", "cpu"]) == 0
    for ext in ("king.cutoff.in.id", "king.cutoff.out.id"):
        assert _read(tmp_path / f"o.{ext}") == _read(tmp_path / f"p.{ext}")
    assert _read(tmp_path / "o.king.cutoff.out.id") != _read(d / "p2cut.king.cutoff.out.id")
    ours, theirs = read_kin0(tmp_path / "o.kin0"), read_kin0(d / "p2rep.kin0")
    pd.testing.assert_frame_equal(ours[["IID1", "IID2", "NSNP"]], theirs[["IID1", "IID2", "NSNP"]])
    summary = pd.read_csv(tmp_path / "o.king.summary.tsv", sep="\t", index_col=0)["value"]
    assert summary["pairs_above_cutoff"] == (every > 0.03).sum()
    assert summary["pairs_third_degree"] == ((every > 0.0442) & (every <= 0.0884)).sum()
    # the table route on plink2's table of all pairs: the same sets
    assert main(["unrelated", "--kinship", str(d / "p2all.kin0"), "--bfile", str(d / "fam"),
                 "--cutoff", "0.03", "--out", str(tmp_path / "t")]) == 0
    for ext in ("king.cutoff.in.id", "king.cutoff.out.id"):
        assert _read(tmp_path / f"t.{ext}") == _read(tmp_path / f"p.{ext}")


@pytest.mark.parametrize("with_keep", [False, True])
def test_table_route_on_plink2_table_matches_plink2(families, with_keep, tmp_path):
    d = families["dir"]
    table = d / ("p2allkeep.kin0" if with_keep else "p2all.kin0")
    args = ["unrelated", "--kinship", str(table), "--bfile", str(d / "fam"), "--out",
            str(tmp_path / "o")]
    ref = "p2cut"
    if with_keep:
        args += ["--keep", str(d / "samples.keep")]
        ref = "p2cutkeep"
    assert main(args) == 0
    for ext in ("king.cutoff.in.id", "king.cutoff.out.id"):
        assert _read(tmp_path / f"o.{ext}") == _read(d / f"{ref}.{ext}")
    assert not (tmp_path / "o.kin0").exists()


def test_table_route_ukb_format_matches_plink2(families, tmp_path):
    """The same pairs written as ukb_rel.dat (eids, > 0.0442 only) give plink2's kept set."""
    d = families["dir"]
    kin0 = read_kin0(d / "p2rep.kin0")
    ukb = tmp_path / "ukb_rel.dat"
    kin0[["IID1", "IID2", "HETHET", "IBS0", "KINSHIP"]].set_axis(
        ["ID1", "ID2", "HetHet", "IBS0", "Kinship"], axis=1).to_csv(ukb, sep=" ", index=False)
    # the table route only needs the sample list: a .fam
    assert main(["unrelated", "--kinship", str(ukb), "--fam", str(d / "fam.fam"), "--out",
                 str(tmp_path / "o")]) == 0
    for ext in ("king.cutoff.in.id", "king.cutoff.out.id"):
        assert _read(tmp_path / f"o.{ext}") == _read(d / f"p2cut.{ext}")


# ---------------------------------------------------------- pruning order vs plink2
def _plink2_prune(tmp: Path, kinship: np.ndarray, cutoff=0.0884) -> np.ndarray:
    """plink2 --king-cutoff on a kinship matrix we write as .king.bin (triangular)."""
    n = kinship.shape[0]
    ids = [f"S{i}" for i in range(n)]
    fam = pd.DataFrame({"fid": ids, "iid": ids, "father": "0", "mother": "0", "sex": "1",
                        "phenotype": "-9"})
    bim = pd.DataFrame({"chrom": ["1"], "variant_id": ["v"], "cm": [0.0], "pos": [1],
                        "a1": ["A"], "a2": ["G"]})
    plink.write_bfile(tmp / "g", np.zeros((1, n), np.int8), fam, bim)
    with open(tmp / "k.king.id", "w") as fh:
        fh.write("#FID\tIID\n" + "".join(f"{i}\t{i}\n" for i in ids))
    tri = np.concatenate([kinship[i, :i] for i in range(1, n)]).astype(np.float64)
    tri.tofile(tmp / "k.king.bin")
    run_plink2("--bfile", tmp / "g", "--king-cutoff", tmp / "k", cutoff, "--out", tmp / "p")
    out = pd.read_csv(tmp / "p.king.cutoff.out.id", sep="\t")["IID"].astype(str)
    removed = np.zeros(n, bool)
    removed[[int(s[1:]) for s in out]] = True
    return removed


def _matrix(n, edges):
    k = np.zeros((n, n))
    for a, b in edges:
        k[a, b] = k[b, a] = 0.25
    return k


GRAPHS = {
    # path 0-1-2-3 listed so that degree-one and most-relatives rules disagree
    "path": (4, [(1, 0), (1, 2), (2, 3)]),
    "path_reordered": (4, [(0, 2), (2, 1), (1, 3)]),
    "star_centre_first": (5, [(0, 1), (0, 2), (0, 3), (0, 4)]),
    "star_centre_last": (5, [(4, 0), (4, 1), (4, 2), (4, 3)]),
    "isolated_pairs": (6, [(0, 5), (3, 1), (2, 4)]),
    "family_of_five": (5, [(a, b) for a in range(5) for b in range(a + 1, 5) if (a, b) != (0, 1)]),
    "triangle_with_tail": (5, [(0, 1), (1, 2), (0, 2), (2, 3), (3, 4)]),
}


@pytest.mark.parametrize("name", sorted(GRAPHS))
def test_prune_order_matches_plink2_on_shaped_graphs(name, tmp_path):
    n, edges = GRAPHS[name]
    ours = prune_king_cutoff(n, *np.array(edges).T)
    np.testing.assert_array_equal(ours, _plink2_prune(tmp_path, _matrix(n, edges)))


def test_prune_order_matches_plink2_on_random_graphs(tmp_path):
    rng = np.random.default_rng(11)
    for trial in range(12):
        n = int(rng.integers(8, 60))
        kin = rng.uniform(-0.1, 0.08, (n, n))
        n_edges = int(rng.integers(1, 2 * n))
        a, b = rng.integers(0, n, n_edges), rng.integers(0, n, n_edges)
        kin[a, b] = kin[b, a] = rng.uniform(0.09, 0.5, n_edges)
        kin = np.triu(kin, 1) + np.triu(kin, 1).T
        iu = np.argwhere(np.triu(kin, 1) > 0.0884)
        ours = prune_king_cutoff(n, iu[:, 0], iu[:, 1])
        sub = tmp_path / f"t{trial}"
        sub.mkdir()
        np.testing.assert_array_equal(ours, _plink2_prune(sub, kin), err_msg=f"trial {trial}")


def test_prune_scales_to_ukb_table_size():
    """500,000 samples, 110,000 pairs (UK Biobank's table) prune without a dense matrix."""
    rng = np.random.default_rng(1)
    a = rng.integers(0, 500_000, 110_000)
    b = (a + rng.integers(1, 50, 110_000)) % 500_000   # local clusters and chains
    removed = prune_king_cutoff(500_000, a, b)
    kept = ~removed
    assert not (kept[a] & kept[b]).any()               # no related pair left
    assert 0 < removed.sum() < 110_000


# ------------------------------------------------------------------------- bad inputs
def _no_outputs(prefix: Path):
    return not list(prefix.parent.glob(prefix.name + ".*"))


def _fam_cli(families, table, out, *extra):
    return main(["unrelated", "--kinship", str(table), "--bfile",
                 str(families["dir"] / "fam"), "--out", str(out), *extra])


def test_table_missing_kinship_column(families, tmp_path, capsys):
    t = tmp_path / "t.dat"
    t.write_text("ID1 ID2 HetHet IBS0\n1 2 0.1 0.01\n")
    assert _fam_cli(families, t, tmp_path / "o") == 1
    err = capsys.readouterr().err
    assert "t.dat, line 1" in err and "kinship" in err.lower() and err.count("\n") == 1
    assert _no_outputs(tmp_path / "o")


def test_table_non_numeric_kinship(families, tmp_path, capsys):
    ids = families["bf"].fam["iid"]
    t = tmp_path / "t.dat"
    t.write_text(f"ID1 ID2 HetHet IBS0 Kinship\n{ids[0]} {ids[1]} 0.1 0.01 0.2\n"
                 f"{ids[2]} {ids[3]} 0.1 0.01 high\n")
    assert _fam_cli(families, t, tmp_path / "o") == 1
    err = capsys.readouterr().err
    assert "line 3, column 5 (Kinship): expected a number (or nan), found 'high'" in err
    assert _no_outputs(tmp_path / "o")


def test_table_route_needs_the_sample_table(families, tmp_path, capsys):
    """--kinship with --keep alone pruned in the keep file's line order (plink2 prunes in
    .fam order), so the dropped person depended on how the list was sorted: refused."""
    d = families["dir"]
    assert main(["unrelated", "--kinship", str(d / "p2all.kin0"), "--keep",
                 str(d / "samples.keep"), "--out", str(tmp_path / "o")]) == 1
    assert "give --bfile or --fam" in capsys.readouterr().err
    assert _no_outputs(tmp_path / "o")


@pytest.fixture(scope="module")
def undefined_pairs(tmp_path_factory):
    """60 people x 3,000 variants where person 0 has every call missing and persons 1
    and 2 are called on disjoint halves (no variant called in both) and otherwise
    identical, so plink2 writes their kinships as nan; with plink2's whole
    --make-king-table and its --king-cutoff."""
    d = tmp_path_factory.mktemp("undefined")
    rng = np.random.default_rng(7)
    n, m = 60, 3000
    geno = rng.binomial(2, rng.uniform(0.1, 0.5, m)[:, None], (m, n)).astype(np.int8)
    geno[:, 0] = -1
    geno[:, 2] = geno[:, 1]
    geno[: m // 2, 1] = -1
    geno[m // 2:, 2] = -1
    ids = [f"p{i}" for i in range(n)]
    fam = pd.DataFrame({"fid": ids, "iid": ids, "father": "0", "mother": "0", "sex": "1",
                        "phenotype": "-9"})
    bim = pd.DataFrame({"chrom": "1", "variant_id": [f"v{i}" for i in range(m)], "cm": 0.0,
                        "pos": np.arange(m) * 100 + 1, "a1": "A", "a2": "G"})
    plink.write_bfile(d / "u", geno, fam, bim)
    run_plink2("--bfile", d / "u", "--make-king-table", "--king-cutoff", "0.0884",
               "--out", d / "p")
    return d


def test_pairs_of_undefined_kinship_count_as_unrelated_in_both_routes(undefined_pairs,
                                                                       tmp_path, capsys):
    """plink2 writes nan for a pair with nothing to compare and treats it as not related:
    its own table is read (it was refused), both routes keep what plink2 keeps, and
    both count the nan pairs (the genotype route dropped them unseen)."""
    d = undefined_pairs
    theirs = read_kin0(d / "p.kin0")
    n_nan = int(theirs["KINSHIP"].isna().sum())
    assert n_nan >= 59 + 1                    # person 0 with everyone; persons 1 and 2
    for route in (["--bfile", str(d / "u")],
                  ["--kinship", str(d / "p.kin0"), "--bfile", str(d / "u")]):
        out = tmp_path / route[0].strip("-")
        assert main(["unrelated", *route, "--device", "cpu", "--out", str(out)]) == 0
        for ext in ("king.cutoff.in.id", "king.cutoff.out.id"):
            assert _read(f"{out}.{ext}") == _read(d / f"p.{ext}")
        summary = pd.read_csv(f"{out}.king.summary.tsv", sep="\t", index_col=0)["value"]
        assert summary["undefined_kinship_pairs"] == n_nan
        assert f"{n_nan} pairs have no kinship estimate" in capsys.readouterr().err


def test_int8_route_counts_undefined_pairs_as_the_cpu_route(undefined_pairs):
    import torch

    bf = plink.open_bfile(undefined_pairs / "u")
    samples, variants = np.arange(bf.n_samples), np.arange(bf.n_variants)
    cpu = king_bitplanes(bf, variants, samples, 0.0442, 1 << 20)
    gpu_code = king_int8(bf, variants, samples, 0.0442, 32, 512,
                         torch.device("cpu"), 1 << 20)
    n_nan = int(read_kin0(undefined_pairs / "p.kin0")["KINSHIP"].isna().sum())
    assert cpu[3] == gpu_code[3] == n_nan


def test_king_leaves_out_x_y_mt_only_as_plink2(tmp_path):
    """KING over every variant but chrX, chrY and MT, as plink2 chooses them: two people
    identical only on XY (pseudo-autosomal) and two only on chromosome 0 (unplaced) are
    related for plink2 and were not for cmix, which used 1-22 alone."""
    rng = np.random.default_rng(3)
    n = 60
    chrom = np.repeat(["1", "XY", "0", "X", "Y", "MT"], [2000, 1500, 1500, 300, 100, 50])
    m = len(chrom)
    geno = rng.binomial(2, rng.uniform(0.1, 0.5, m)[:, None], (m, n)).astype(np.int8)
    on_xy, on_0 = chrom == "XY", chrom == "0"
    geno[on_xy, 11] = geno[on_xy, 10]
    geno[on_0, 21] = geno[on_0, 20]
    ids = [f"p{i}" for i in range(n)]
    fam = pd.DataFrame({"fid": ids, "iid": ids, "father": "0", "mother": "0", "sex": "2",
                        "phenotype": "-9"})
    bim = pd.DataFrame({"chrom": chrom, "variant_id": [f"v{i}" for i in range(m)],
                        "cm": 0.0, "pos": np.arange(m) * 100 + 1, "a1": "A", "a2": "G"})
    plink.write_bfile(tmp_path / "c", geno, fam, bim)
    run_plink2("--bfile", tmp_path / "c", "--king-cutoff", "0.0884", "--make-king-table",
               "--king-table-filter", "0.0442", "--out", tmp_path / "p")
    assert main(["unrelated", "--bfile", str(tmp_path / "c"), "--device", "cpu",
                 "--out", str(tmp_path / "o")]) == 0
    for ext in ("king.cutoff.in.id", "king.cutoff.out.id"):
        assert _read(tmp_path / f"o.{ext}") == _read(tmp_path / f"p.{ext}")
    assert _read(tmp_path / "o.king.cutoff.out.id").split()[2:] == ["p11", "p11", "p21", "p21"]
    ours, theirs = read_kin0(tmp_path / "o.kin0"), read_kin0(tmp_path / "p.kin0")
    assert (ours["NSNP"].to_numpy() == theirs["NSNP"].to_numpy()).all()
    assert np.abs(ours["KINSHIP"] - theirs["KINSHIP"]).max() < 1e-6
    summary = pd.read_csv(tmp_path / "o.king.summary.tsv", sep="\t", index_col=0)["value"]
    assert summary["variants_used"] == 5000 and summary["variants_x_y_mt_excluded"] == 450


def test_table_short_row(families, tmp_path, capsys):
    ids = families["bf"].fam["iid"]
    t = tmp_path / "t.dat"
    t.write_text(f"ID1 ID2 HetHet IBS0 Kinship\n{ids[0]} {ids[1]} 0.1 0.01\n")
    assert _fam_cli(families, t, tmp_path / "o") == 1
    assert "line 2: expected 5 columns" in capsys.readouterr().err
    assert _no_outputs(tmp_path / "o")


def test_table_ids_not_in_cohort_counted_without_ids(families, tmp_path, capsys):
    ids = families["bf"].fam["iid"]
    t = tmp_path / "t.dat"
    t.write_text("ID1 ID2 HetHet IBS0 Kinship\n"
                 f"{ids[0]} {ids[1]} 0.1 0.01 0.25\n"
                 f"{ids[2]} 9999991 0.1 0.01 0.25\n"
                 f"9999992 9999993 0.1 0.01 0.3\n")
    assert _fam_cli(families, t, tmp_path / "o") == 0
    err = capsys.readouterr().err
    assert "2 of 3 kinship-table pairs name a sample not in the cohort" in err
    assert "999999" not in err and ids[0] not in err
    summary = pd.read_csv(tmp_path / "o.king.summary.tsv", sep="\t", index_col=0)["value"]
    assert summary["table_pairs_unknown_ids"] == 2 and summary["samples_dropped"] == 1
    # a table none of whose IDs are in the cohort is an error (wrong ID columns)
    t.write_text("ID1 ID2 HetHet IBS0 Kinship\n9999992 9999993 0.1 0.01 0.3\n")
    assert _fam_cli(families, t, tmp_path / "o2") == 1
    assert "none of its 1 pairs" in capsys.readouterr().err
    assert _no_outputs(tmp_path / "o2")


@pytest.mark.parametrize("cutoff", ["0", "0.5", "-0.1", "0.7", "abc", "nan"])
def test_cutoff_outside_range(families, cutoff, tmp_path, capsys):
    d = families["dir"]
    assert _fam_cli(families, d / "p2all.kin0", tmp_path / "o", "--cutoff", cutoff) == 1
    err = capsys.readouterr().err
    assert "--cutoff" in err and "between 0 and 0.5" in err and err.count("\n") == 1
    assert main(["unrelated", "--bfile", str(d / "fam"), "--out", str(tmp_path / "g"),
                 "--cutoff", cutoff]) == 1
    assert _no_outputs(tmp_path / "o") and _no_outputs(tmp_path / "g")


def test_cuda_requested_without_gpu(families, tmp_path, capsys):
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    assert main(["unrelated", "--bfile", str(families["dir"] / "fam"), "--out",
                 str(tmp_path / "o"), "--device", "cuda"]) == 1
    assert "no CUDA GPU" in capsys.readouterr().err
    assert _no_outputs(tmp_path / "o")


def test_no_route_given(tmp_path, capsys):
    assert main(["unrelated", "--out", str(tmp_path / "o")]) == 1
    assert "--kinship" in capsys.readouterr().err


def test_extract_subset_matches_plink2(families, tmp_path):
    """--extract: only listed variants (chrX ones still dropped), as plink2."""
    d, bf = families["dir"], families["bf"]
    rng = np.random.default_rng(2)
    chosen = bf.bim["variant_id"].to_numpy()[rng.random(bf.n_variants) < 0.5]
    (tmp_path / "qc.snplist").write_text("\n".join(chosen) + "\n")
    run_plink2("--bfile", d / "fam", "--extract", tmp_path / "qc.snplist", "--king-cutoff",
               "0.0884", "--make-king-table", "--king-table-filter", "0.0442", "--out",
               tmp_path / "p")
    assert main(["unrelated", "--bfile", str(d / "fam"), "--extract", str(tmp_path / "qc.snplist"),
                 "--out", str(tmp_path / "o"), "--device", "cpu"]) == 0
    for ext in ("king.cutoff.in.id", "king.cutoff.out.id"):
        assert _read(tmp_path / f"o.{ext}") == _read(tmp_path / f"p.{ext}")
    ours, theirs = read_kin0(tmp_path / "o.kin0"), read_kin0(tmp_path / "p.kin0")
    assert (ours["NSNP"].to_numpy() == theirs["NSNP"].to_numpy()).all()
    assert np.abs(ours["KINSHIP"] - theirs["KINSHIP"]).max() < 1e-6
    summary = pd.read_csv(tmp_path / "o.king.summary.tsv", sep="\t", index_col=0)["value"]
    n_x = int(np.isin(chosen, bf.bim["variant_id"][bf.bim["chrom"] == "23"]).sum())
    assert summary["variants_used"] == len(chosen) - n_x
    assert summary["variants_x_y_mt_excluded"] == n_x > 0


def test_ukb_table_of_simulated_cohort_matches_plink2(cohort, tmp_path):
    """cmix.simulate's ukb_rel.dat (eids) pruned by cmix and, as a .king.bin of the same
    pairs in .fam order, by plink2 --king-cutoff: same dropped samples."""
    fam = plink.read_fam(cohort / "genotypes.fam")
    assert main(["unrelated", "--kinship", str(cohort / "kinship.dat"), "--bfile",
                 str(cohort / "genotypes"), "--out", str(tmp_path / "o")]) == 0
    table = pd.read_csv(cohort / "kinship.dat", sep=r"\s+", dtype={"ID1": str, "ID2": str})
    pos = pd.Index(fam["iid"])
    kin = np.zeros((len(fam), len(fam)))
    i, j = pos.get_indexer(table["ID1"]), pos.get_indexer(table["ID2"])
    kin[i, j] = kin[j, i] = table["Kinship"]
    removed = _plink2_prune(tmp_path, kin)
    out = pd.read_csv(tmp_path / "o.king.cutoff.out.id", sep="\t", dtype=str)
    assert sorted(pos.get_indexer(out["IID"])) == list(np.flatnonzero(removed))
    assert removed.sum() > 0


def test_id_files_of_a_psam_without_fid_are_read_back_by_plink2(undefined_pairs, tmp_path):
    """A .psam without a FID column: cmix wrote `id id` lines (FID taken as the IID),
    which plink2 --keep matched to nobody; it now writes plink2's FID 0, and the kept
    set plink2 reads back is plink2's own --king-cutoff set."""
    fam = plink.read_fam(undefined_pairs / "u.fam").assign(fid="0")
    fam.to_csv(tmp_path / "z.fam", sep="\t", header=False, index=False)
    for ext in (".bed", ".bim"):
        (tmp_path / f"z{ext}").write_bytes((undefined_pairs / f"u{ext}").read_bytes())
    run_plink2("--bfile", tmp_path / "z", "--make-pgen", "--out", tmp_path / "zp")
    assert (tmp_path / "zp.psam").read_text().startswith("#IID")
    run_plink2("--pfile", tmp_path / "zp", "--king-cutoff", "0.0884", "--out", tmp_path / "p")
    assert main(["unrelated", "--pfile", str(tmp_path / "zp"), "--device", "cpu",
                 "--out", str(tmp_path / "o")]) == 0
    run_plink2("--pfile", tmp_path / "zp", "--keep", tmp_path / "o.king.cutoff.in.id",
               "--write-samples", "--out", tmp_path / "back")
    back = (tmp_path / "back.id").read_text().splitlines()[1:]
    assert back == (tmp_path / "p.king.cutoff.in.id").read_text().splitlines()[1:]
    assert len(back) == 60


# ------------------------------------------------ the GPU's int8 route, run on the CPU
def make_planted_cases(prefix, seed=0) -> dict:
    """Write 83 people x 1,587 variants (1,567 on chromosomes 1-2, 20 on chrX) with the
    cases KING's counts must get right; returns {label: .fam position}.

    Founders from haplotypes (allele frequencies 0.05-0.5); a duplicate and a near
    duplicate (0.5% of calls changed), parent-offspring (a trio), full sibs; 2% missing
    calls, one person missing 30%, one missing everything, two called on disjoint halves
    (no variant called in both), one homozygous everywhere (no het call); 50 variants
    A1/A1 in everyone, 50 A2/A2 in everyone, 20 het in everyone, 70 missing in everyone.
    The sample order is shuffled.
    """
    rng = np.random.default_rng(seed)
    n_auto, n_x = 1567, 20
    m = n_auto + n_x
    freq = rng.uniform(0.05, 0.5, m)

    def founder():
        return (rng.random((2, m)) < freq).astype(np.int8)

    def gamete(h):
        cut = rng.integers(1, m)
        src = rng.integers(0, 2)
        return np.r_[h[src, :cut], h[1 - src, cut:]]

    people = [(f"unrelated{k}", founder().sum(0)) for k in range(60)]
    dup = founder().sum(0)
    near = dup.copy()
    flip = rng.random(m) < 0.005
    near[flip] = (near[flip] + 1) % 3
    fa, mo = founder(), founder()
    child = np.stack([gamete(fa), gamete(mo)])
    p1, p2 = founder(), founder()
    sibs = [np.stack([gamete(p1), gamete(p2)]).sum(0) for _ in range(2)]
    people += [("dup1", dup), ("dup2", dup.copy()), ("near_dup", near),
               ("father", fa.sum(0)), ("mother", mo.sum(0)), ("child", child.sum(0)),
               ("sib1", sibs[0]), ("sib2", sibs[1]), ("all_missing", founder().sum(0)),
               ("first_half", founder().sum(0)), ("second_half", founder().sum(0)),
               ("homozygous", 2 * founder()[0]), ("much_missing", founder().sum(0))]
    people += [(f"filler{k}", founder().sum(0)) for k in range(83 - len(people))]
    labels = np.array([lab for lab, _ in people])
    geno = np.stack([g for _, g in people], axis=1).astype(np.int8)      # (m, n)
    geno[100:150], geno[200:250], geno[300:320], geno[400:470] = 2, 0, 1, -1
    geno[rng.random(geno.shape) < 0.02] = -1
    col = {lab: k for k, lab in enumerate(labels)}
    geno[rng.random(m) < 0.3, col["much_missing"]] = -1
    geno[:, col["all_missing"]] = -1
    geno[: n_auto // 2, col["first_half"]] = -1          # called on the second half only
    geno[n_auto // 2:, col["second_half"]] = -1          # (chrX too: KING ignores it)
    order = rng.permutation(geno.shape[1])
    geno, labels = geno[:, order], labels[order]
    ids = [f"q{k}" for k in range(len(labels))]
    fam = pd.DataFrame({"fid": ids, "iid": ids, "father": "0", "mother": "0", "sex": "1",
                        "phenotype": "-9"})
    chrom = np.r_[np.repeat(["1", "2"], [800, n_auto - 800]), np.repeat("23", n_x)]
    bim = pd.DataFrame({"chrom": chrom, "variant_id": [f"v{i}" for i in range(m)], "cm": 0.0,
                        "pos": np.arange(m) * 100 + 1, "a1": "A", "a2": "G"})
    plink.write_bfile(prefix, geno, fam, bim)
    return {lab: k for k, lab in enumerate(labels)}


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    """The planted cases, a keep list of 77 of them (odd .fam positions included, so
    samples do not start at a .bed byte), and plink2's table and --king-cutoff on both."""
    d = tmp_path_factory.mktemp("planted")
    where = make_planted_cases(d / "p", seed=4)
    bf = plink.open_bfile(d / "p")
    keep_idx = np.sort(np.random.default_rng(1).choice(bf.n_samples, 77, replace=False))
    for label in ("dup1", "dup2", "child", "father", "all_missing", "first_half",
                  "second_half", "homozygous"):
        keep_idx = np.union1d(keep_idx, [where[label]])
    plink.write_sample_ids(d / "p.keep", bf.fam, keep_idx)
    run_plink2("--bfile", d / "p", "--make-king-table", "--king-cutoff", "0.0884",
               "--out", d / "p2")
    run_plink2("--bfile", d / "p", "--keep", d / "p.keep", "--king-cutoff", "0.0884",
               "--out", d / "p2keep")
    return {"dir": d, "bf": bf, "where": where, "keep_idx": keep_idx}


def _int8_counts(bf, variant_idx, sample_idx, **kw):
    """The int8 route's raw counts, (4, n_pairs) int64 (IBS0, HETHET, het_i, het_j) over the
    pairs i < j in row-major order (the bit planes' accumulator order)."""
    import torch

    kw = {"block_size": 2048, "variant_block": 8192, "max_memory_bytes": 1 << 30, **kw}
    n = len(sample_idx)
    full = np.full((4, n, n), -1, np.int64)
    for r0, r1, counts in int8_route._int8_strip_counts(bf, variant_idx, sample_idx,
                                                        kw["block_size"], kw["variant_block"],
                                                        torch.device("cpu"),
                                                        kw["max_memory_bytes"]):
        c = counts.numpy()[:, : min(r1, n) - r0, : n - r0]
        full[:, r0:r0 + c.shape[1], r0:] = c[[0, 1, 3, 2]]
    i, j = np.triu_indices(n, 1)
    return full[:, i, j]


def _bitplane_acc(bf, variant_idx, sample_idx):
    """The bit-plane route's accumulators over all pairs: int32 (3, n_pairs), num, het_i,
    het_j in row-major order (kernels as :func:`king_bitplanes` calls them)."""
    from cmix.genotypes import kernels

    n = len(sample_idx)
    offsets = np.r_[0, np.cumsum(n - 1 - np.arange(n - 1))].astype(np.int64)
    tiles = np.array([(r, c) for r in range(0, n, 64) for c in range(r, n, 64)], np.int64)
    acc = np.zeros((3, n * (n - 1) // 2), np.int32)
    planes = np.empty((n, kernels.KING_PLANES, 64), np.uint64)
    pos = np.asarray(sample_idx, np.int64)
    for v0, v1 in plink.variant_blocks(len(variant_idx), 4096):
        kernels.pack_king_planes(bf.packed_rows(variant_idx[v0:v1]), pos, planes)
        kernels.king_accumulate(planes, (v1 - v0 + 63) // 64, 0, n, offsets, tiles, acc)
    return acc


#: (block_size, variant_block, max_memory_bytes): one strip and block; strips of 32 in
#: 128-variant blocks (a short last block), one pass a strip; strips of 64 (40 rounded
#: up) in blocks of 448 (500 evened out), two passes
INT8_SHAPES = [(2048, 8192, 1 << 30), (32, 128, 1), (40, 500, 100_000)]


@pytest.mark.parametrize("shape", INT8_SHAPES, ids=["one_strip", "strips32", "passes"])
@pytest.mark.parametrize("subset", [False, True], ids=["all", "keep"])
def test_int8_counts_equal_bitplanes_to_the_last_count(planted, shape, subset):
    """IBS0, HETHET, het_i and het_j of every pair from the int8 products equal the
    direct numpy counts (pair_counts), the numerator and het counts equal the bit planes'
    integers, and kinship, the pairs kept and the NaN count are the same to the bit."""
    import torch

    bf = planted["bf"]
    samples = planted["keep_idx"] if subset else np.arange(bf.n_samples)
    auto = np.flatnonzero(king_variants(bf.bim["chrom"]))
    block_size, variant_block, memory = shape
    ibs0, hethet, het_i, het_j = _int8_counts(bf, auto, samples, block_size=block_size,
                                              variant_block=variant_block,
                                              max_memory_bytes=memory)
    n = len(samples)
    i, j = np.triu_indices(n, 1)
    direct = pair_counts(bf, auto, samples, i, j)
    np.testing.assert_array_equal(ibs0, direct["ibs0"])
    np.testing.assert_array_equal(hethet, direct["hethet"])
    np.testing.assert_array_equal(het_i, direct["hethet"] + direct["het1_hom2"])
    np.testing.assert_array_equal(het_j, direct["hethet"] + direct["het2_hom1"])
    acc = _bitplane_acc(bf, auto, samples)
    np.testing.assert_array_equal(4 * ibs0 + het_i + het_j - 2 * hethet, acc[0])
    np.testing.assert_array_equal(het_i, acc[1])
    np.testing.assert_array_equal(het_j, acc[2])
    assert (direct["nsnp"] == 0).sum() >= n - 1         # all_missing; the two halves
    for min_kinship in (None, 0.0442):
        ref = king_bitplanes(bf, auto, samples, min_kinship, 1 << 20)
        got = king_int8(bf, auto, samples, min_kinship, block_size,
                        variant_block, torch.device("cpu"), memory)
        order = np.lexsort((got[1], got[0]))
        for a, b in zip(ref[:3], got[:3]):
            np.testing.assert_array_equal(a, b[order])       # NaN and -inf included
            assert ref[3] == got[3] >= n - 1
    assert len(ref[0]) > 5                               # relatives above 0.0442
    everyone = king_bitplanes(bf, auto, samples, None, 1 << 20)[2]
    assert np.isneginf(everyone).any()          # no het called in both: the homozygous one


@pytest.mark.parametrize("with_keep", [False, True])
def test_int8_route_kept_set_equals_bitplanes_and_plink2(planted, with_keep, tmp_path):
    """Whole genotype route: the int8 products (on the CPU) write the bit-plane route's
    files, byte for byte, and plink2 --king-cutoff's kept and dropped sets."""
    from cmix.readers.sources import GenotypeFiles

    d = planted["dir"]
    keep = str(d / "p.keep") if with_keep else None
    for route in ("bitplanes", "int8"):
        unrelated_from_genotypes(GenotypeFiles(bfile=str(d / "p")),
                                 tmp_path / route, keep=keep, device="cpu",
                                 route=route, block_size=32)
    for ext in ("king.cutoff.in.id", "king.cutoff.out.id", "kin0", "king.summary.tsv"):
        assert _read(tmp_path / f"int8.{ext}") == _read(tmp_path / f"bitplanes.{ext}")
    ref = "p2keep" if with_keep else "p2"
    for ext in ("king.cutoff.in.id", "king.cutoff.out.id"):
        assert _read(tmp_path / f"int8.{ext}") == _read(d / f"{ref}.{ext}")
    assert len(_read(tmp_path / "int8.king.cutoff.out.id").splitlines()) > 3


def test_int8_route_kinship_matches_plink2_table(planted):
    """Every pair's NSNP, HETHET, IBS0 and kinship through king_robust's int8 route
    against plink2 --make-king-table (nan where nothing is called in both; -inf where
    one of the two has no het call among the variants called in both, as plink2)."""
    bf = planted["bf"]
    pairs = king_robust(bf, min_kinship=None, device="cpu", route="int8",
                        block_size=32, max_memory_bytes=40_000)    # 3 passes
    kin0 = read_kin0(planted["dir"] / "p2.kin0")
    m = _merge_with_plink2(pairs, bf, kin0)
    assert (m["_merge"] == "both").all() and len(m) == bf.n_samples * (bf.n_samples - 1) // 2
    assert (m["nsnp"] == m["NSNP"]).all()
    # plink2 prints 6 significant digits (-18.9474 where few hets are called in both)
    assert np.isclose(m["kinship"], m["KINSHIP"], rtol=1e-5, atol=1e-6, equal_nan=True).all()
    assert np.isneginf(m["kinship"]).sum() == np.isneginf(m["KINSHIP"]).sum() > 0
    called = m["nsnp"] > 0
    assert np.abs((m["hethet"] / m["nsnp"] - m["HETHET"])[called]).max() < 1e-6
    assert np.abs((m["ibs0"] / m["nsnp"] - m["IBS0"])[called]).max() < 1e-6
    assert pairs.attrs["undefined_kinship_pairs"] == int(m["KINSHIP"].isna().sum()) > 0


def test_int8_route_equals_bitplanes_on_a_simulated_cohort(cohort, tmp_path):
    """The simulator's cohort (2,000 people, 4,000 SNPs, relatives planted by
    inheritance): every pair's kinship, the NaN count and the written files equal the
    bit-plane route's, and the kept set is plink2 --king-cutoff's."""
    import torch

    from cmix.readers.sources import GenotypeFiles

    bf = plink.open_bfile(cohort / "genotypes")
    auto = np.flatnonzero(king_variants(bf.bim["chrom"]))
    samples = np.arange(bf.n_samples)
    ref = king_bitplanes(bf, auto, samples, None, 256 << 20)
    got = king_int8(bf, auto, samples, None, 512, 1024, torch.device("cpu"),
                    1 << 30)
    order = np.lexsort((got[1], got[0]))
    assert len(ref[0]) == len(got[0]) == bf.n_samples * (bf.n_samples - 1) // 2
    for a, b in zip(ref[:3], got[:3]):
        np.testing.assert_array_equal(a, b[order])
    assert ref[3] == got[3]
    for route in ("bitplanes", "int8"):
        unrelated_from_genotypes(GenotypeFiles(bfile=str(cohort / "genotypes")),
                                 tmp_path / route, device="cpu", route=route)
    for ext in ("king.cutoff.in.id", "king.cutoff.out.id", "kin0", "king.summary.tsv"):
        assert _read(tmp_path / f"int8.{ext}") == _read(tmp_path / f"bitplanes.{ext}")
    run_plink2("--bfile", cohort / "genotypes", "--king-cutoff", "0.0884", "--out",
               tmp_path / "p2")
    for ext in ("king.cutoff.in.id", "king.cutoff.out.id"):
        assert _read(tmp_path / f"int8.{ext}") == _read(tmp_path / f"p2.{ext}")
    assert len(_read(tmp_path / "int8.king.cutoff.out.id").splitlines()) > 10


def test_int8_products_fit_cuda_int_mm_and_are_the_fewest(planted, monkeypatch):
    """Every product the route asks for is one torch._int_mm takes on CUDA (int8, more
    than 16 rows, a multiple of 8 inner and columns; rows of the left operand and
    columns of the right contiguous: cuBLASLt's int8 layout; a contiguous int32 result),
    three a strip and variant block, 5 h w vb multiply-adds in all."""
    import torch

    calls = []
    real = int8_matmul

    def checked(a, b, out=None):
        assert a.dtype == b.dtype == torch.int8 and a.dim() == b.dim() == 2
        assert a.shape[0] > 16 and a.shape[1] % 8 == 0 and b.shape[1] % 8 == 0
        assert a.shape[1] == b.shape[0]
        assert a.is_contiguous() and b.T.is_contiguous()
        assert out is not None and out.dtype == torch.int32 and out.is_contiguous()
        assert tuple(out.shape) == (a.shape[0], b.shape[1])
        calls.append(a.shape[0] * a.shape[1] * b.shape[1])
        return real(a, b, out=out)

    monkeypatch.setattr(int8_route, "int8_matmul", checked)
    bf = planted["bf"]
    auto = np.flatnonzero(king_variants(bf.bim["chrom"]))
    samples = planted["keep_idx"]                       # 81 people: padded to 96
    block_size, variant_block, memory = 32, 500, 60_000
    got = king_int8(bf, auto, samples, 0.0442, block_size, variant_block,
                    torch.device("cpu"), memory)
    n_pad, edges, passes, vb = int8_route._int8_plan(len(samples), len(auto), block_size,
                                                     variant_block, memory)
    assert len(passes) > 1 and (n_pad, vb) == (96, 448)      # 4 blocks of 1,567 variants
    n_blocks = -(-len(auto) // vb)
    strips = [(edges[s], edges[s + 1]) for s in range(len(edges) - 1)]
    assert len(calls) == 3 * len(strips) * n_blocks
    assert sum(calls) == 5 * vb * n_blocks * sum((r1 - r0) * (n_pad - r0) for r0, r1 in strips)
    ref = king_bitplanes(bf, auto, samples, 0.0442, 1 << 20)
    np.testing.assert_array_equal(np.sort(ref[2]), np.sort(got[2]))


def test_int8_route_float_stand_in_and_self_check(planted, monkeypatch):
    """Without torch._int_mm the float32 stand-in gives the same integers; a product
    that goes wrong is caught by the samples' own het counts (a pair of a sample with
    itself) instead of returning wrong kinship."""
    import torch

    bf = planted["bf"]
    auto = np.flatnonzero(king_variants(bf.bim["chrom"]))
    samples = np.arange(bf.n_samples)
    ref = king_bitplanes(bf, auto, samples, None, 1 << 20)
    monkeypatch.setitem(int8_route._INT_MM_OK, "cpu", False)
    got = king_int8(bf, auto, samples, None, 32, 256, torch.device("cpu"), 1 << 30)
    order = np.lexsort((got[1], got[0]))
    for a, b in zip(ref[:3], got[:3]):
        np.testing.assert_array_equal(a, b[order])
    real = int8_matmul

    def off_by_one(a, b, out=None):
        res = real(a, b, out=out)
        res[3, 3] += 1                  # one wrong count on a diagonal
        return res

    monkeypatch.setattr(int8_route, "int8_matmul", off_by_one)
    with pytest.raises(RuntimeError, match="disagree with the samples' own het counts"):
        king_int8(bf, auto, samples, None, 32, 256, torch.device("cpu"), 1 << 30)


def test_gpu_benchmark_runs_end_to_end_on_the_cpu(tmp_path, capsys):
    """benchmarks/gpu.py --device cpu at a small size: both parts run, the routes agree,
    the verdicts are ratios, and the JSON holds every part."""
    import json
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
    import gpu

    out = tmp_path / "gpu.json"
    gpu.main(["--device", "cpu", "--parts", "gemm,king", "--gemm-size", "64",
              "--king-samples", "300", "--king-variants", "700", "--block-size", "64",
              "--repeats", "1", "--workdir", str(tmp_path / "w"), "--json", str(out)])
    printed = capsys.readouterr().out
    assert "wall ratio GPU / CPU, king_robust" in printed and "x bf16" in printed
    got = json.loads(out.read_text())
    assert got["king"]["identical"] and got["king"]["multiply_adds"] > 0
    assert set(got["gemm"]["ops_per_s"]) == set(gpu.GEMM_KINDS)
    with pytest.raises(SystemExit):
        gpu.main(["--device", "cpu", "--parts", "gemm,nope"])


def test_gpu_benchmark_train_part_runs_on_the_cpu(tmp_path, capsys):
    """benchmarks/gpu.py's train part at a tiny size: pre-training epochs timed for each
    group size, one cmix train group against the same seeds alone, every seed's test
    accuracy identical to its lone run's on the CPU."""
    import json
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
    import gpu

    out = tmp_path / "gpu.json"
    gpu.main(["--device", "cpu", "--parts", "train", "--rows", "600", "--snps", "60",
              "--budget", "60", "--models", "1", "2", "--seeds", "2", "--repeats", "1",
              "--train-config", '{"epochs": 1, "lp_every": 1}', "--json", str(out)])
    got = json.loads(out.read_text())["train"]
    assert [r["models"] for r in got["pretrain"]] == [1, 2]
    assert got["cmix_train"]["seeds_identical_to_alone"] == 2
    assert "cmix train, 2 seeds: group" in capsys.readouterr().out
