"""KING-robust in tiles of sample blocks (cmix king-tile, cmix unrelated --king-tiles)
against the one-process run and against plink2 --king-cutoff on a cohort with planted
families (tests/test_relatedness.make_family_cohort)."""

from __future__ import annotations

import subprocess

import numpy as np
import pytest

from cmix.cli import main
from cmix.errors import CmixError
from cmix.genotypes.relatedness.king import king_robust
from cmix.genotypes.relatedness.tiles import gather_tiles, tile_list
from cmix.readers import plink
from conftest import requires_plink2
from test_relatedness import make_family_cohort

pytestmark = [requires_plink2, pytest.mark.plink2]


@pytest.fixture(scope="module")
def cohort(tmp_path_factory):
    d = tmp_path_factory.mktemp("tiles")
    make_family_cohort(d / "fam", seed=4, n_unrelated=60, n_variants=3000)
    bf = plink.open_bfile(d / "fam")
    keep = np.setdiff1d(np.arange(bf.n_samples), [3, 17, 40])
    plink.write_sample_ids(d / "samples.keep", bf.fam, keep)
    for cut in ("0.0884", "0.03"):
        res = subprocess.run(["plink2", "--threads", "1", "--bfile", str(d / "fam"), "--keep",
                              str(d / "samples.keep"), "--king-cutoff", cut, "--out",
                              str(d / f"p2_{cut}")], capture_output=True, text=True)
        assert res.returncode == 0, res.stdout + res.stderr
    return d, len(keep)


def _tiles(d, out, block, n, cutoff):
    paths = []
    for i, j in tile_list(n, block):
        path = out / f"tile_{i}_{j}.npz"
        assert main(["king-tile", "--bfile", str(d / "fam"), "--keep", str(d / "samples.keep"),
                     "--cutoff", cutoff, "--tile-block", str(block), "--tile", str(i), str(j),
                     "--device", "cpu", "--out", str(path)]) == 0
        paths.append(str(path))
    return paths


@pytest.mark.parametrize("cutoff", ["0.0884", "0.03"])
def test_tiles_equal_one_process_and_plink2(cohort, cutoff, tmp_path):
    d, n = cohort
    block = 23                          # several blocks, the last one smaller
    assert n % block and n // block >= 3
    common = ["--bfile", str(d / "fam"), "--keep", str(d / "samples.keep"), "--cutoff", cutoff]
    assert main(["unrelated", *common, "--device", "cpu", "--out", str(tmp_path / "one")]) == 0
    paths = _tiles(d, tmp_path, block, n, cutoff)
    assert main(["unrelated", *common, "--king-tiles", *paths[::-1],
                 "--out", str(tmp_path / "tiled")]) == 0
    for ext in ("kin0", "king.cutoff.in.id", "king.cutoff.out.id", "king.summary.tsv"):
        one = (tmp_path / f"one.{ext}").read_bytes()
        assert (tmp_path / f"tiled.{ext}").read_bytes() == one, ext
    for ext in ("king.cutoff.in.id", "king.cutoff.out.id"):
        assert (tmp_path / f"tiled.{ext}").read_text() == (d / f"p2_{cutoff}.{ext}").read_text()
    assert len((tmp_path / "tiled.king.cutoff.out.id").read_text().splitlines()) > 1


def test_each_pair_in_one_tile_once(cohort, tmp_path):
    """With a cutoff near zero about half of all pairs are written (unrelated pairs lie
    around 0): no pair twice, none lost against a direct count over all pairs."""
    d, n = cohort
    bf = plink.open_bfile(d / "fam")
    keep = np.setdiff1d(np.arange(bf.n_samples), [3, 17, 40])
    direct = king_robust(bf, None, keep, min_kinship=0.001, device="cpu")
    pairs, info = gather_tiles(_tiles(d, tmp_path, 40, n, "0.001"))
    assert len(pairs) > n * (n - 1) // 8
    assert not pairs.duplicated(["idx1", "idx2"]).any()
    assert (pairs["idx1"] > pairs["idx2"]).all()
    assert pairs[["idx1", "idx2"]].values.tolist() == direct[["idx1", "idx2"]].values.tolist()
    assert info["undefined"] == direct.attrs["undefined_kinship_pairs"]


def test_gather_refuses_missing_or_repeated_tiles(cohort, tmp_path):
    d, n = cohort
    paths = _tiles(d, tmp_path, 40, n, "0.0884")
    with pytest.raises(CmixError, match="missing"):
        gather_tiles(paths[1:])
    with pytest.raises(CmixError, match="twice"):
        gather_tiles(paths + paths[:1])
