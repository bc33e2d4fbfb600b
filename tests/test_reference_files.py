"""The format authors' own files, read as shipped and compared with the truth shipped
beside them (tests/data/reference/README.md: origin and licence of each), and files
plink2 writes in the forms plink2 reads (BGEN v1.1, phased BGEN v1.2, .pvar.zst,
.bim.zst), compared with what they were written from.

Every BGEN is compared to the file's own precision: a probability of B bits is a
multiple of 1/(2^B - 1), so a dosage is within 1/(2^B - 1) of the truth (plus float32
rounding); layout 1 stores 1/32768 steps. ``cmix store`` from each gives the dosages
the reader gives, to the store's 1/125 quantisation."""

import gzip
import os
import shutil
import struct
import subprocess
import zlib
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import requires_plink2

from cmix.cli import main
from cmix.errors import CmixError
from cmix.store.read import load_rows, open_store
from cmix.readers import bgen_blocks
from cmix.readers.bgen import open_bgen, write_bgi
from cmix.readers.pgen import open_pfile
from cmix.readers.plink import open_bfile
from cmix.readers.sources import open_source

REF = Path(__file__).resolve().parent / "data" / "reference"
BGEN = REF / "bgen"
FLOAT32 = 2e-7           # float32 rounding of a dosage up to 2, and the .gen's 6 digits


def _copy(tmp_path, *names, folder=BGEN):
    for name in names:
        shutil.copy(folder / name, tmp_path / name)
    return tmp_path / names[0]


def _indexed(tmp_path, name, sample=None):
    """A copy of the shipped BGEN ``name`` with a cmix-written .bgi, opened (with its
    ``sample`` copied too when given)."""
    path = _copy(tmp_path, name)
    write_bgi(path)
    if sample is not None:
        sample = _copy(tmp_path, sample)
    return open_bgen(path, sample)


def _gen_truth() -> pd.DataFrame:
    """example.gen's expected count of the second allele, normalised (its probabilities
    sum to 1 only within 3e-5): samples x rsids, NaN where all three are 0."""
    with gzip.open(BGEN / "example.gen.gz", "rt") as fh:
        gen = pd.read_csv(fh, sep=" ", header=None)
    p = gen.iloc[:, 6:].to_numpy(float).reshape(len(gen), -1, 3)
    total = p.sum(axis=2)
    with np.errstate(invalid="ignore", divide="ignore"):
        dosage = np.where(total > 0, (p[:, :, 1] + 2 * p[:, :, 2]) / total, np.nan)
    return pd.DataFrame(dosage.T, columns=gen[2].tolist())


def _recompressed(src: Path, dst: Path) -> Path:
    """``src`` rewritten with uncompressed genotype blocks (layout 1 or 2, whose blocks
    it inflates), header flags changed to match: a file the specification allows that
    neither the BGEN project nor plink2 ships. Parsed here from the specification."""
    data = src.read_bytes()
    offset, hlen = struct.unpack_from("<II", data, 0)
    flags = struct.unpack_from("<I", data, 4 + hlen - 4)[0]
    layout, n_samples = (flags >> 2) & 15, struct.unpack_from("<I", data, 12)[0]
    n_variants = struct.unpack_from("<I", data, 8)[0]
    head = bytearray(data[:4 + offset])
    struct.pack_into("<I", head, 4 + hlen - 4, flags & ~3)
    out, at = [bytes(head)], 4 + offset
    for _ in range(n_variants):
        start = at
        at += 4 if layout == 1 else 0
        for _ in range(3):
            at += 2 + struct.unpack_from("<H", data, at)[0]
        at += 4
        n_alleles = 2 if layout == 1 else struct.unpack_from("<H", data, at)[0]
        at += 0 if layout == 1 else 2
        for _ in range(n_alleles):
            at += 4 + struct.unpack_from("<I", data, at)[0]
        (c,) = struct.unpack_from("<I", data, at)
        if layout == 1:
            raw = zlib.decompress(data[at + 4:at + 4 + c])
            assert len(raw) == 6 * n_samples
            out += [data[start:at], raw]
        else:
            raw = zlib.decompress(data[at + 8:at + 4 + c])
            out += [data[start:at], struct.pack("<I", len(raw)), raw]
        at += 4 + c
    dst.write_bytes(b"".join(out))
    return dst


# ------------------------------------------------------------- the BGEN project's examples
EXAMPLES = [("example.1bits.bgen", 1), ("example.3bits.bgen", 3), ("example.8bits.bgen", 8),
            ("example.16bits.bgen", 16), ("example.16bits.zstd.bgen", 16),
            ("example.v11.bgen", 15), ("uncompressed layout 2", 16),
            ("uncompressed layout 1", 15)]


def _example(tmp_path, name):
    if name.startswith("uncompressed"):
        src = "example.16bits.bgen" if "2" in name else "example.v11.bgen"
        path = _recompressed(BGEN / src, tmp_path / "raw.bgen")
        assert bgen_blocks.read_header(path)["compression"] == 0
        write_bgi(path)
        return open_bgen(path, _copy(tmp_path, "example.sample"))
    return _indexed(tmp_path, name, "example.sample")


@pytest.mark.parametrize("name, bits", EXAMPLES)
def test_bgen_examples_equal_example_gen_to_their_precision(tmp_path, name, bits):
    """Every layout, compression (zlib, zstd, none) and a range of bit depths read as
    shipped, equal to example.gen within one step of the file's precision; missing calls
    are the .gen's all-zero triples."""
    bg = _example(tmp_path, name)
    assert bg.file_format == ("BGEN v1.1" if "v11" in name or "layout 1" in name
                              else "BGEN v1.2")
    assert bg.n_samples == 500 and bg.n_variants == 199 and not len(bg.excluded)
    truth = _gen_truth()[bg.bim["variant_id"]].to_numpy()
    ours = bg.read_dosages(np.arange(bg.n_variants)).T
    assert np.array_equal(np.isnan(ours), np.isnan(truth)) and np.isnan(truth).any()
    called = ~np.isnan(truth)
    assert np.abs(ours[called] - truth[called]).max() <= 1 / (2 ** bits - 1) + FLOAT32


@pytest.mark.parametrize("name", ["example.3bits.bgen", "example.8bits.bgen",
                                  "example.16bits.zstd.bgen", "haplotypes.bgen"])
def test_bgen_decoder_equals_cbgen(tmp_path, name):
    """Layout-2 compressed files, which the C bgen library's binding (cbgen) reads too:
    the same dosages from its probabilities (phased: the haplotypes' sum)."""
    import cbgen

    bg = _indexed(tmp_path, name)
    ours = bg.read_dosages(np.arange(bg.n_variants))
    fd = os.open(bg.path, os.O_RDONLY)
    try:
        genotype_at = [int(s) + bgen_blocks.read_variant_header(fd, int(s), bg.path, 2)[-1]
                       for s in bg.start]
    finally:
        os.close(fd)
    with cbgen.bgen_file(bg.path) as f:
        for v in range(bg.n_variants):
            gt = f.read_genotype(genotype_at[v], precision=64)
            p = gt.probability
            theirs = p[:, 1] + p[:, 3] if gt.phased else p[:, 1] + 2 * p[:, 2]
            theirs[np.asarray(gt.missing, bool)] = np.nan
            assert np.array_equal(np.isnan(ours[v]), np.isnan(theirs))
            assert np.nanmax(np.abs(ours[v] - theirs)) <= FLOAT32


def test_all_bit_depths_of_complex_bgen_read_alike(tmp_path):
    """complex.Nbits.bgen for N = 1..32: every bit depth, the same dosages (its
    probabilities are 0 or 1, exact at any depth)."""
    first = None
    for bits in range(1, 33):
        bg = _indexed(tmp_path, f"complex.{bits}bits.bgen", "complex.sample")
        d = bg.read_dosages([0, 1, 2])
        if first is None:
            first = d
        assert np.array_equal(d, first), bits


def test_embedded_sample_ids_stand_in_for_a_missing_sample_file(tmp_path, capsys):
    """Without --sample the .bgen's embedded IDs are the samples (plink2 reads them so):
    the same samples and dosages as with example.sample (header ID_1 alone). A .bgen
    that embeds none (v1.1) needs its .sample, and says so."""
    with_sample = _indexed(tmp_path, "example.16bits.bgen", "example.sample")
    embedded = open_bgen(tmp_path / "example.16bits.bgen")
    assert embedded.fam["iid"].tolist() == with_sample.fam["iid"].tolist()
    assert embedded.fam["iid"].iloc[0] == "sample_001" and (embedded.fam["fid"] == "0").all()
    idx = np.arange(20)
    assert np.array_equal(embedded.read_dosages(idx), with_sample.read_dosages(idx),
                          equal_nan=True)
    write_bgi(_copy(tmp_path, "example.v11.bgen"))
    with pytest.raises(CmixError, match=r"example.v11.bgen: embeds no sample IDs, and no "
                                        r"\.sample file was given"):
        open_bgen(tmp_path / "example.v11.bgen")


def test_sample_file_that_disagrees_with_embedded_ids_is_refused(tmp_path):
    """A .sample whose rows are not the embedded IDs in order: refused, naming the
    .sample's line and the .bgen (and no sample ID)."""
    write_bgi(_copy(tmp_path, "complex.bgen"))
    lines = (BGEN / "complex.sample").read_text().splitlines()
    (tmp_path / "swapped.sample").write_text("\n".join(lines[:2] + [lines[3], lines[2]]
                                                       + lines[4:]) + "\n")
    with pytest.raises(CmixError) as err:
        open_bgen(tmp_path / "complex.bgen", tmp_path / "swapped.sample")
    msg = str(err.value)
    assert msg.startswith(f"{tmp_path / 'swapped.sample'}, line 3: not the sample "
                          f"{tmp_path / 'complex.bgen'} holds at position 1")
    assert "another order" in msg and "sample_0" not in msg


def test_bgenix_index_is_read_and_equals_cmix_index(tmp_path):
    """The .bgi bgenix wrote for example.16bits.bgen is read as shipped (same dosages as
    through cmix's own index), and cmix's index lists the same rows."""
    import sqlite3

    path = _copy(tmp_path, "example.16bits.bgen", "example.16bits.bgen.bgi")
    theirs = open_bgen(path, _copy(tmp_path, "example.sample"))
    cols = ("chromosome, position, rsid, number_of_alleles, allele1, allele2, "
            "file_start_position, size_in_bytes")
    con = sqlite3.connect(path.with_name(path.name + ".bgi"))
    bgenix = con.execute(f"SELECT {cols} FROM Variant ORDER BY file_start_position").fetchall()
    con.close()
    write_bgi(path, tmp_path / "ours.bgi")
    con = sqlite3.connect(tmp_path / "ours.bgi")
    ours = con.execute(f"SELECT {cols} FROM Variant ORDER BY file_start_position").fetchall()
    con.close()
    assert ours == bgenix and len(ours) == 199
    (tmp_path / "ours.bgi").replace(path.with_name(path.name + ".bgi"))
    again = open_bgen(path, tmp_path / "example.sample")
    idx = np.arange(199)
    assert np.array_equal(theirs.read_dosages(idx), again.read_dosages(idx), equal_nan=True)


def _vcf_truth(path) -> dict:
    """{position: (alleles, [(ploidy, phased, dosage of the second allele) per sample])}
    of complex.vcf's GP (unphased genotype) and HP (haplotype) probabilities."""
    out = {}
    for line in path.read_text().splitlines():
        if line.startswith("#"):
            continue
        f = line.split("\t")
        calls = []
        for field in f[9:]:
            gt, probs = field.split(":")
            p = np.array(probs.split(","), float)
            ploidy = len(gt.replace("|", "/").split("/"))
            phased = f[8] == "GT:HP"
            if f[4].count(",") or ploidy > 2:
                calls.append((ploidy, phased, None))
            elif phased:
                calls.append((ploidy, True, p[1::2].sum() * (2 if ploidy == 1 else 1)))
            else:
                calls.append((ploidy, False, 2 * p[1] if ploidy == 1 else p[1] + 2 * p[2]))
        out[int(f[1])] = (f[3], f[4], calls)
    return out


def test_complex_bgen_equals_its_vcf(tmp_path):
    """complex.bgen (header `id` .sample): its haploid, diploid, phased and unphased
    biallelic calls equal complex.vcf's GP/HP; its multiallelic sites are left out of
    what can be selected (not refused); a variant with calls of ploidy 3 or 4 is
    refused when read, naming the file, the variant and the ploidy. Read through the
    .bgi bgenix wrote for it."""
    bg = open_bgen(_copy(tmp_path, "complex.bgen", "complex.bgen.bgi"),
                   _copy(tmp_path, "complex.sample"))
    truth = _vcf_truth(BGEN / "complex.vcf")
    assert bg.fam["iid"].tolist() == [f"sample_{i}" for i in range(4)]
    assert sorted(bg.excluded["variant_id"]) == ["M4", "M6", "M7", "M8", "M9"]
    assert (bg.excluded["reason"] == "multiallelic").all()
    for v, pos in enumerate(bg.bim["pos"]):
        calls = truth[pos][2]
        if max(c[0] for c in calls) > 2:
            with pytest.raises(CmixError) as err:
                bg.read_dosages([v])
            assert str(err.value).startswith(
                f"{tmp_path / 'complex.bgen'}: variant {bg.bim['variant_id'][v]!r} has")
            assert "ploidy" in str(err.value) and "bgenix" in str(err.value)
            continue
        assert bg.bim["a2"][v] == truth[pos][0] and bg.bim["a1"][v] == truth[pos][1]
        got = bg.read_dosages([v])[0]
        assert np.abs(got - np.array([c[2] for c in calls])).max() < 1e-6
    assert set(bg.bim["variant_id"]) >= {"V1", "V2", "V3"}


def test_phased_haplotypes_bgen_equals_its_haps(tmp_path):
    """haplotypes.bgen (phased, embedded IDs, no .sample): the dosage of the second
    allele is the sum of its haplotype probabilities, here the .haps file's alleles
    (read through the .bgi bgenix wrote for it)."""
    bg = open_bgen(_copy(tmp_path, "haplotypes.bgen", "haplotypes.bgen.bgi"))
    haps = pd.read_csv(BGEN / "haplotypes.haps", sep=" ", header=None)
    truth = haps.iloc[:, 6::2].to_numpy() + haps.iloc[:, 7::2].to_numpy()
    assert bg.bim["pos"].tolist() == haps[3].tolist()
    assert np.array_equal(bg.read_dosages(np.arange(4)), truth)


# ------------------------------------------------------------------ bed-reader's files
def test_bed_reader_some_missing_equals_its_values():
    """bed-reader's some_missing.bed: every call equals its shipped .val.npy (A1 counts,
    NaN missing), as cmix reads it."""
    bf = open_bfile(REF / "bed-reader" / "some_missing")
    truth = np.load(REF / "bed-reader" / "some_missing.val.npy")
    ours = bf.read_dosages(np.arange(bf.n_variants)).T
    assert np.array_equal(np.isnan(ours), np.isnan(truth)) and np.isnan(truth).any()
    assert np.array_equal(ours[~np.isnan(truth)], truth[~np.isnan(truth)])


@requires_plink2
def test_sample_major_bed_is_refused_with_the_command_that_converts_it(tmp_path, capsys):
    """bed-reader's smallmode0.bed (sample-major; the bytes of its small.bed, 4 x 3,
    read the other way round): refused before any output, naming the file and the
    plink2 command; that command writes its genotypes variant-major: small.bed's,
    transposed."""
    for ext in (".bed", ".bim", ".fam"):
        _copy(tmp_path, f"smallmode0{ext}", folder=REF / "bed-reader")
    assert main(["qc", "--bfile", str(tmp_path / "smallmode0"), "--out",
                 str(tmp_path / "q")]) == 1
    err = capsys.readouterr().err
    assert f"{tmp_path / 'smallmode0.bed'}: a sample-major .bed" in err
    command = err.split("`")[1].replace("NEW", str(tmp_path / "fixed")).split()
    assert command[:3] == ["plink2", "--bfile", str(tmp_path / "smallmode0")]
    assert not list(tmp_path.glob("q*"))
    subprocess.run(command, check=True, capture_output=True)
    fixed = open_bfile(tmp_path / "fixed").read()
    assert np.array_equal(fixed, open_bfile(REF / "bed-reader" / "small").read().T)


# ------------------------------------------------------ files plink2 writes, read as plink2
def _plink2(*args):
    r = subprocess.run(["plink2", "--threads", "1", *map(str, args)], capture_output=True,
                       text=True)
    assert r.returncode == 0, r.stdout + r.stderr


def _dosage_pgen(d: Path, n=120, m=40, seed=2) -> Path:
    """A dosage .pgen written by pgenlib (hard calls plus noise, 3% missing) with its
    .pvar/.psam: the truth the plink2 exports below are made from."""
    import pgenlib

    rng = np.random.default_rng(seed)
    g = rng.binomial(2, rng.uniform(0.1, 0.5, (m, 1)), (m, n)).astype(np.float32)
    dosage = np.clip(g + rng.normal(0, 0.2, (m, n)), 0, 2).astype(np.float32)
    dosage[rng.random((m, n)) < 0.03] = -9
    writer = pgenlib.PgenWriter(bytes(d / "dos.pgen"), n, m, False, dosage_present=True)
    writer.append_dosages_batch(np.ascontiguousarray(dosage))
    writer.close()
    pd.DataFrame({"#CHROM": "1", "POS": 1000 + 10 * np.arange(m), "ID": [f"v{j}" for j in range(m)],
                  "REF": "A", "ALT": "G"}).to_csv(d / "dos.pvar", sep="\t", index=False)
    pd.DataFrame({"#FID": [f"f{i}" for i in range(n)], "IID": [f"s{i}" for i in range(n)]}
                 ).to_csv(d / "dos.psam", sep="\t", index=False)
    return d / "dos"


def _store_rows(tmp_path, name, *genotypes, src) -> pd.DataFrame:
    """`cmix store` of every variant of ``src`` (counting its a1): samples x variants."""
    bim = src.bim
    snps = tmp_path / f"{name}.snps.tsv"
    pd.DataFrame({"variant_id": bim["variant_id"], "chrom": bim["chrom"], "pos": bim["pos"],
                  "effect_allele": bim["a1"], "other_allele": bim["a2"], "beta": 0.1}
                 ).to_csv(snps, sep="\t", index=False)
    pheno = tmp_path / f"{name}.pheno.tsv"
    pd.DataFrame({"eid": src.fam["iid"], "y": np.arange(src.n_samples) % 7}).to_csv(
        pheno, sep="\t", index=False)
    out = tmp_path / f"{name}.zarr"
    assert main(["store", *map(str, genotypes), "--snps", str(snps), "--pheno", str(pheno),
                 "--trait", "t", "--trait-config", '{"column": "y", "kind": "continuous"}',
                 "--test-fraction", "0.25", "--out", str(out)]) == 0
    root = open_store(out)
    x = load_rows(root, np.arange(root["call_dosage"].shape[0])).astype(float)
    x[x == -1] = np.nan
    return pd.DataFrame(x, index=root["sample_id"][:].tolist(),
                        columns=root["variant_id"][:].tolist())


def _same_as_store(stored: pd.DataFrame, src) -> None:
    """A store's dosages equal the source's, to the store's 1/125 quantisation."""
    rows = pd.Index(src.fam["iid"]).get_indexer(stored.index)
    cols = pd.Index(src.bim["variant_id"]).get_indexer(stored.columns)
    ours = src.read_dosages(cols, rows).T
    got = stored.to_numpy()
    assert np.array_equal(np.isnan(got), np.isnan(ours))
    assert np.nanmax(np.abs(got - ours)) <= 0.004 + 1e-6


@pytest.mark.parametrize("name", ["example.16bits.zstd.bgen", "example.v11.bgen",
                                  "uncompressed layout 2"])
def test_store_from_each_bgen_example_holds_its_dosages(tmp_path, name):
    bg = _example(tmp_path, name)
    stored = _store_rows(tmp_path, "s", "--bgen", bg.path, "--sample",
                         tmp_path / "example.sample", src=bg)
    assert stored.shape[1] == 199
    _same_as_store(stored, bg)


@requires_plink2
def test_bgen_v11_from_plink2_equals_the_dosages_it_was_written_from(tmp_path):
    """plink2 --export bgen-1.1 (layout 1, zlib): the dosages of the .pgen it was
    written from, to layout 1's 1/32768 steps plus the .pgen's 1/16384; the store from
    it holds them too."""
    pfile = _dosage_pgen(tmp_path)
    _plink2("--pfile", pfile, "--export", "bgen-1.1", "--out", tmp_path / "v11")
    assert main(["bgen-index", str(tmp_path / "v11.bgen")]) == 0
    bg = open_bgen(tmp_path / "v11.bgen", tmp_path / "v11.sample")
    assert bg.file_format == "BGEN v1.1"
    pf = open_pfile(pfile)
    truth = pf.read_dosages(np.arange(pf.n_variants))
    truth = np.where(bg.bim["a1"].to_numpy()[:, None] == pf.bim["a1"].to_numpy()[:, None],
                     truth, 2 - truth)
    ours = bg.read_dosages(np.arange(bg.n_variants))
    assert np.array_equal(np.isnan(ours), np.isnan(truth))
    assert np.nanmax(np.abs(ours - truth)) <= 1 / 32768 + 1 / 16384 + FLOAT32
    stored = _store_rows(tmp_path, "v11", "--bgen", tmp_path / "v11.bgen", "--sample",
                         tmp_path / "v11.sample", src=bg)
    _same_as_store(stored, bg)


@requires_plink2
def test_phased_bgen_from_plink2_counts_the_haplotypes(tmp_path):
    """plink2 --export bgen-1.2 from a phased VCF writes phased probabilities: the dosage
    is the sum over the haplotypes, the VCF's allele count, and equals plink2 reading
    the same BGEN (--export A); the store from it holds it."""
    rng = np.random.default_rng(3)
    n, m = 40, 25
    hap = rng.random((m, n, 2)) < rng.uniform(0.1, 0.5, (m, 1, 1))
    gt = np.char.add(np.char.add(hap[:, :, 0].astype(int).astype(str), "|"),
                     hap[:, :, 1].astype(int).astype(str))
    gt[rng.random((m, n)) < 0.05] = "./."
    with open(tmp_path / "ph.vcf", "w") as fh:
        fh.write('##fileformat=VCFv4.2\n##contig=<ID=1>\n##FORMAT=<ID=GT,Number=1,Type=String,'
                 'Description="g">\n#CHROM\tPOS\tID\tREF\tALT\tQUAL\tFILTER\tINFO\tFORMAT\t'
                 + "\t".join(f"s{i}" for i in range(n)) + "\n")
        for j in range(m):
            fh.write(f"1\t{100 + j}\tv{j}\tA\tG\t.\t.\t.\tGT\t" + "\t".join(gt[j]) + "\n")
    _plink2("--vcf", tmp_path / "ph.vcf", "--export", "bgen-1.2", "bits=16",
            "--out", tmp_path / "ph")
    assert main(["bgen-index", str(tmp_path / "ph.bgen")]) == 0
    bg = open_bgen(tmp_path / "ph.bgen", tmp_path / "ph.sample")
    ours = bg.read_dosages(np.arange(m))
    alt = hap.sum(axis=2).astype(float)
    alt[gt == "./."] = np.nan
    truth = np.where((bg.bim["a1"] == "G").to_numpy()[:, None], alt, 2 - alt)
    assert np.array_equal(np.isnan(ours), np.isnan(truth))
    assert np.nanmax(np.abs(ours - truth)) <= 1 / 65535 + FLOAT32
    (tmp_path / "allele.txt").write_text("".join(f"{v}\t{a}\n" for v, a in
                                                 zip(bg.bim["variant_id"], bg.bim["a1"])))
    _plink2("--bgen", tmp_path / "ph.bgen", "ref-last", "--sample", tmp_path / "ph.sample",
            "--export", "A", "--export-allele", tmp_path / "allele.txt", "--out", tmp_path / "p2")
    raw = pd.read_csv(tmp_path / "p2.raw", sep="\t").iloc[:, 6:].to_numpy(float).T
    assert np.array_equal(np.isnan(raw), np.isnan(ours))
    assert np.nanmax(np.abs(raw - ours)) <= 0.0005 + 1 / 16384
    stored = _store_rows(tmp_path, "ph", "--bgen", tmp_path / "ph.bgen", "--sample",
                         tmp_path / "ph.sample", src=bg)
    _same_as_store(stored, bg)


@requires_plink2
@pytest.mark.parametrize("kind", ["pfile", "bfile"])
def test_zstd_variant_tables_read_as_the_plain_ones(tmp_path, kind):
    """plink2 --make-pgen vzs / --make-bed vzs write the .pvar/.bim zstd-compressed
    (.pvar.zst, .bim.zst): read as the plain file, and the store from it holds the same
    dosages."""
    pfile = _dosage_pgen(tmp_path)
    make = "--make-pgen" if kind == "pfile" else "--make-bed"
    _plink2("--pfile", pfile, make, "--out", tmp_path / "plain")
    _plink2("--pfile", pfile, make, "vzs", "--out", tmp_path / "zs")
    ext = ".pvar" if kind == "pfile" else ".bim"
    assert (tmp_path / f"zs{ext}.zst").exists() and not (tmp_path / f"zs{ext}").exists()
    plain = open_source(**{kind: tmp_path / "plain"})
    zs = open_source(**{kind: tmp_path / "zs"})
    pd.testing.assert_frame_equal(zs.bim, plain.bim)
    assert zs.variant_file == tmp_path / f"zs{ext}.zst"
    idx = np.arange(plain.n_variants)
    assert np.array_equal(zs.read_dosages(idx), plain.read_dosages(idx), equal_nan=True)
    stored = _store_rows(tmp_path, "zs", f"--{kind}", tmp_path / "zs", src=zs)
    _same_as_store(stored, plain)
