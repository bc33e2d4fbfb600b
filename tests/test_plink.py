"""The PLINK reader/writer against bed-reader (an independent decoder) and plink2."""

import subprocess

import numpy as np
import pandas as pd
import pytest
from bed_reader import open_bed

from cmix.readers import plink
from cmix.genotypes import selection
from cmix.errors import CmixError
from conftest import requires_plink2


def random_trio(tmp_path, n_samples=13, n_variants=9, seed=0):
    rng = np.random.default_rng(seed)
    g = rng.integers(-1, 3, size=(n_variants, n_samples)).astype(np.int8)
    ids = [f"s{i}" for i in range(n_samples)]
    fam = pd.DataFrame({"fid": ids, "iid": ids, "father": "0", "mother": "0", "sex": "1",
                        "phenotype": "-9"})
    bim = pd.DataFrame({"chrom": "1", "variant_id": [f"rs{i}" for i in range(n_variants)],
                        "cm": 0.0, "pos": np.arange(n_variants) + 100, "a1": "A", "a2": "G"})
    plink.write_bfile(tmp_path / "x", g, fam, bim)
    return tmp_path / "x", g


@pytest.mark.parametrize("n_samples", [1, 4, 13, 102])
def test_roundtrip_matches_bed_reader(tmp_path, n_samples):
    prefix, g = random_trio(tmp_path, n_samples=n_samples)
    with open_bed(f"{prefix}.bed") as bed:
        ref = bed.read(dtype="int8").T                 # counts of allele 1 (.bim col 5), -127 missing
    assert (np.where(ref == -127, -1, ref) == g).all()
    bf = plink.open_bfile(f"{prefix}.bed")
    assert (plink.read_genotypes(bf) == g).all()
    rng = np.random.default_rng(1)
    si = rng.permutation(n_samples)[: max(1, n_samples // 2)]
    vi = np.array([7, 0, 3])
    assert (plink.read_genotypes(bf, vi, si) == g[vi][:, si]).all()
    assert (plink.genotypes_dask(bf, si, variant_chunk=4).compute() == g[:, si]).all()


@requires_plink2
def test_plink2_reads_what_we_write(tmp_path):
    prefix, g = random_trio(tmp_path, n_samples=30, n_variants=20)
    subprocess.run(["plink2", "--bfile", str(prefix), "--export", "A", "--out", str(tmp_path / "e")],
                   check=True, capture_output=True)
    raw = pd.read_csv(tmp_path / "e.raw", sep=r"\s+")
    assert all(c.endswith("_G") for c in raw.columns[6:])   # plink2 counts the .bim col-6 allele
    dos = raw.iloc[:, 6:].to_numpy(dtype=float).T
    assert np.array_equal(np.where(np.isnan(dos), -1, 2 - dos), g)


def test_nonzero_padding_is_caught_at_open_and_when_read(tmp_path, monkeypatch):
    """13 samples: the last byte of each variant holds 1 sample and 3 padding pairs."""
    prefix, g = random_trio(tmp_path, n_samples=13, n_variants=9)
    bed = tmp_path / "x.bed"
    data = bytearray(bed.read_bytes())
    data[3 + 6 * 4 - 1] |= 0b01 << 2        # variant 6 (0-based 5): sample 14's pair
    bed.write_bytes(bytes(data))
    with pytest.raises(CmixError, match=r"x\.bed: non-zero padding bits after sample 13 .* "
                                        r"\.bim line 6 .* the \.fam probably has fewer lines"):
        plink.open_bfile(prefix)
    monkeypatch.setattr(plink, "PADDING_CHECK_VARIANTS", 1)   # open samples variant 1 only
    bf = plink.open_bfile(prefix)
    assert (plink.read_genotypes(bf, [0, 4, 6]) == g[[0, 4, 6]]).all()
    with pytest.raises(CmixError, match=r"\.bim line 6"):
        plink.read_genotypes(bf, [4, 5])


def test_bad_files_give_one_clear_message(tmp_path):
    prefix, g = random_trio(tmp_path)
    bed = tmp_path / "x.bed"
    data = bed.read_bytes()
    bed.write_bytes(data[:-1])
    with pytest.raises(CmixError, match=r"x\.bed: size .* truncated"):
        plink.open_bfile(prefix)
    bed.write_bytes(b"\x00\x00" + data[2:])
    with pytest.raises(CmixError, match="not a PLINK .bed file"):
        plink.open_bfile(prefix)
    bed.write_bytes(data)
    bim = tmp_path / "x.bim"
    lines = bim.read_text().splitlines()
    bim.write_text("\n".join(lines[:3] + [lines[0]] + lines[4:]) + "\n")
    bf = plink.open_bfile(prefix)     # a duplicate ID: both rows left out, not refused
    assert bf.excluded["where"].tolist() == [f"{bim}, line 1", f"{bim}, line 4"]
    assert (bf.excluded["reason"] == "duplicate ID").all() and "rs0" not in set(bf.bim["variant_id"])
    assert (bf.read() == g[[1, 2, 4, 5, 6, 7, 8]]).all()
    bim.write_text("\n".join(lines[:4] + [lines[4].replace("104", "1o4")] + lines[5:]) + "\n")
    with pytest.raises(CmixError, match=r"line 5, column 4: expected an integer"):
        plink.open_bfile(prefix)
    bim.write_text("\n".join(lines[:4] + [lines[4].replace("104", "99999999999999999999999")]
                             + lines[5:]) + "\n")
    with pytest.raises(CmixError, match=r"line 5, column 4: expected an integer"):
        plink.open_bfile(prefix)
    bim.write_text("\n".join(lines[:-1]) + "\n")
    with pytest.raises(CmixError, match="does not match the .bim"):
        plink.open_bfile(prefix)
    with pytest.raises(CmixError, match="file not found"):
        plink.open_bfile(tmp_path / "nope")


@pytest.mark.parametrize("kind", ["bim", "pvar"])
@pytest.mark.parametrize("bad, column, problem", [
    ("1184781.9", "pos", "expected an integer base-pair position, found '1184781.9'"),
    ("-104", "pos", "expected a position >= 0 (plink2 skips a variant with a negative one"),
    ("abc", "cm", "expected a number (cM), found 'abc'"),
])
def test_positions_and_cm_refused_alike_in_bim_and_pvar(tmp_path, kind, bad, column, problem):
    """A fractional or negative position, or a cM that is no number, on the 5th variant:
    refused naming line and column in both readers (the .pvar reader truncated 1184781.9,
    read abc as 0 cM, and kept a negative position plink2 skips)."""
    from cmix.readers.pgen import read_pvar

    rows = [f"1\trs{j}\t0.5\t{100 + j}\tA\tG" for j in range(8)]
    fields = rows[4].split("\t")
    fields[3 if column == "pos" else 2] = bad
    rows[4] = "\t".join(fields)
    if kind == "bim":
        path = tmp_path / "x.bim"
        path.write_text("\n".join(rows) + "\n")
        where = f"line 5, column {4 if column == 'pos' else 3}"
        read = plink.read_bim
    else:
        path = tmp_path / "x.pvar"
        body = ["\t".join([c, p, i, a2, a1, cm]) for c, i, cm, p, a1, a2 in
                (r.split("\t") for r in rows)]
        path.write_text("##fileformat=PVARv1.0\n#CHROM\tPOS\tID\tREF\tALT\tCM\n"
                        + "\n".join(body) + "\n")
        where = f"line 7, column {'POS' if column == 'pos' else 'CM'}"
        read = read_pvar
    with pytest.raises(CmixError) as err:
        read(path)
    assert f"{where}: {problem}" in str(err.value)


def test_sample_id_lists(tmp_path):
    fam = pd.DataFrame({"fid": ["a", "b", "c"], "iid": ["1", "2", "3"]})
    (tmp_path / "k1").write_text("#FID\tIID\nc\t3\na\t1\nz\t9\n")
    (tmp_path / "k2").write_text("2\n3\n")
    idx, unknown = selection.match_samples(selection.read_sample_ids(tmp_path / "k1"), fam)
    assert list(idx) == [0, 2] and unknown == 1
    ids = selection.read_sample_ids(tmp_path / "k2")     # one column: an IID without a FID
    assert list(ids.fid) == [None, None]
    with pytest.raises(CmixError, match="none of its 2 IDs"):
        selection.match_samples(ids, fam, tmp_path / "k2")


@requires_plink2
@pytest.mark.parametrize("fam_fids", ["zero", "iid", "family"])
def test_sample_id_lists_match_as_plink2_keep(tmp_path, fam_fids):
    """Each list form against .fam files whose FIDs are 0 (plink2's "no family ID"), equal
    to the IID (UK Biobank's eid eid) or real families, compared with plink2 --keep. The
    one difference is deliberate: a one-column list names the samples of a FID = IID
    .fam (plink2 keeps none of them)."""
    ids = [f"id{i}" for i in range(4)]
    fids = {"zero": ["0"] * 4, "iid": ids, "family": ["f1", "f1", "f2", "f2"]}[fam_fids]
    fam = pd.DataFrame({"fid": fids, "iid": ids, "father": "0", "mother": "0", "sex": "1",
                        "phenotype": "-9"})
    bim = pd.DataFrame({"chrom": "1", "variant_id": [f"v{i}" for i in range(20)], "cm": 0.0,
                        "pos": np.arange(20) + 1, "a1": "A", "a2": "G"})
    geno = np.random.default_rng(0).binomial(2, 0.3, (20, 4)).astype(np.int8)
    plink.write_bfile(tmp_path / "c", geno, fam, bim)
    lists = {"one column": "id0\nid2\n", "#IID": "#IID\nid0\nid2\n",
             "0 IID": "0 id0\n0 id2\n", "IID IID": "id0 id0\nid2 id2\n",
             "FID IID": "f1 id0\nf2 id2\n"}
    for name, text in lists.items():
        path = tmp_path / "keep.txt"
        path.write_text(text)
        r = subprocess.run(["plink2", "--bfile", tmp_path / "c", "--keep", path,
                            "--write-samples", "--out", tmp_path / "p"], capture_output=True,
                           text=True)
        theirs = ([] if r.returncode else
                  [ln.split()[-1] for ln in (tmp_path / "p.id").read_text().splitlines()[1:]])
        ours, _ = selection.listed_rows(selection.read_sample_ids(path), fam)
        ours = [ids[i] for i in ours]
        if fam_fids == "iid" and name in ("one column", "#IID"):
            assert theirs == [] and ours == ["id0", "id2"]
        else:
            assert ours == theirs, name
