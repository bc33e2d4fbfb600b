"""cmix.genotypes.build_store.build_store and `cmix store` on a simulated cohort.

References: bed-reader and `plink2 --export A --export-allele` on the same .bed (every
sample and SNP), the phenotype file's UKB codings mapped here, plain zarr reading, and
sgkit in its own environment when CMIX_SGKIT_PYTHON names its python.
"""

import json
import os
import shutil
import subprocess

import numpy as np
import pandas as pd
import pytest

from cmix.readers import plink
from cmix.store.read import open_store
from cmix.store.schema import default_sample_chunk
from cmix.cli import main
from cmix.errors import CmixError

HAIR = {"field": 1747, "kind": "categorical",
        "classes": {"blonde": [1], "red": [2], "brown": [3, 4], "black": [5]}}
MPV = {"field": 30100, "kind": "continuous", "binarise": {"quantiles": [0.25, 0.75]}}


@pytest.fixture(scope="module")
def built(cohort, tmp_path_factory):
    """Select 300 hair-colour SNPs, make a third of them count the .bim A2, build a store."""
    d = tmp_path_factory.mktemp("store")
    bf = plink.open_bfile(cohort / "genotypes")
    keep = d / "keep.id"
    iids = bf.fam.iid.to_numpy()
    keep.write_text("#FID\tIID\n" + "".join(f"{i}\t{i}\n" for i in iids[1::2][::-1]))
    snps = d / "hair.snps.tsv"
    assert main(["select", "--sumstats", str(cohort / "sumstats" / "hair_colour.txt.gz"),
                 "--bfile", str(cohort / "genotypes"), "--top", "300",
                 "--out", str(snps)]) == 0
    table = pd.read_csv(snps, sep="\t", dtype={"p": str})
    flip = np.arange(len(table)) % 3 == 1
    table.loc[flip, ["effect_allele", "other_allele"]] = \
        table.loc[flip, ["other_allele", "effect_allele"]].to_numpy()
    table.loc[flip, "beta"] = -table.loc[flip, "beta"]
    table.to_csv(snps, sep="\t", index=False)
    out = d / "hair.zarr"
    assert main(["store", "--bfile", str(cohort / "genotypes"), "--keep", str(keep),
                 "--snps", str(snps), "--pheno", str(cohort / "phenotypes.tsv"),
                 "--trait", "hair_colour", "--trait-config", json.dumps(HAIR),
                 "--test-fraction", "0.25", "--split-seed", "3", "--out", str(out)]) == 0
    return {"dir": d, "out": out, "snps": snps, "keep": keep, "table": table, "bf": bf,
            "cohort": cohort}


def _read(out):
    import zarr

    return zarr.open_group(str(out), mode="r", zarr_format=2)


def test_dosages_equal_bed_reader_for_every_sample_and_snp(built):
    from bed_reader import open_bed

    root = _read(built["out"])
    bf, table = built["bf"], built["table"]
    sample_pos = pd.Index(bf.fam.iid).get_indexer(root["sample_id"][:])
    var_pos = pd.Index(bf.bim.variant_id).get_indexer(table.variant_id)
    with open_bed(str(bf.bed_path), count_A1=True) as bed:
        a1 = bed.read(index=np.s_[sample_pos, var_pos], dtype="int8")
    effect_is_a1 = (table.effect_allele.to_numpy() == bf.bim.a1.to_numpy()[var_pos])
    expected = np.where(a1 == -127, -1, np.where(effect_is_a1[None, :], a1, 2 - a1))
    got = root["call_dosage"][:]
    assert got.dtype == np.int8 and got.shape == expected.shape
    assert np.array_equal(got, expected)
    assert (~effect_is_a1).sum() == 100 and (got == -1).any()
    assert list(root["variant_id"][:]) == list(table.variant_id)
    assert [list(a) for a in root["variant_allele"][:]] == \
        [[o, e] for o, e in zip(table.other_allele, table.effect_allele)]
    np.testing.assert_allclose(root["variant_beta"][:], table.beta)


def test_dosages_equal_plink2_export_a(built, tmp_path):
    if shutil.which("plink2") is None:
        pytest.skip("plink2 not installed")
    root = _read(built["out"])
    table = built["table"]
    ids = root["sample_id"][:]
    (tmp_path / "keep").write_text("".join(f"{i}\t{i}\n" for i in ids))
    table[["variant_id"]].to_csv(tmp_path / "extract", index=False, header=False)
    table[["variant_id", "effect_allele"]].to_csv(tmp_path / "allele", sep="\t", index=False,
                                                  header=False)
    subprocess.run(["plink2", "--bfile", str(built["cohort"] / "genotypes"), "--keep",
                    str(tmp_path / "keep"), "--extract", str(tmp_path / "extract"),
                    "--export", "A", "--export-allele", str(tmp_path / "allele"),
                    "--out", str(tmp_path / "x")], check=True, capture_output=True)
    raw = pd.read_csv(tmp_path / "x.raw", sep=r"\s+", dtype={"IID": str})
    raw = raw.set_index("IID").loc[list(ids)]
    cols = {c.rsplit("_", 1)[0]: c for c in raw.columns[5:]}
    for j, (v, eff) in enumerate(zip(table.variant_id, table.effect_allele)):
        assert cols[v].endswith("_" + eff)           # plink2 counted the effect allele
        expected = raw[cols[v]].fillna(-1).to_numpy().astype(int)
        assert np.array_equal(root["call_dosage"][:, j], expected), v


def test_labels_split_and_attrs(built):
    root = _read(built["out"])
    pheno = pd.read_csv(built["cohort"] / "phenotypes.tsv", sep="\t", dtype=str,
                        keep_default_na=False).set_index("eid")
    code_to_class = {"1": 0, "2": 1, "3": 2, "4": 2, "5": 3}
    kept = [line.split()[1] for line in built["keep"].read_text().splitlines()[1:]]
    fam_order = [i for i in built["bf"].fam.iid if i in set(kept)]
    expected_ids = [i for i in fam_order if pheno.loc[i, "f.1747.0.0"] in code_to_class]
    assert list(root["sample_id"][:]) == expected_ids
    assert list(root["sample_label"][:]) == \
        [code_to_class[pheno.loc[i, "f.1747.0.0"]] for i in expected_ids]
    attrs = dict(root.attrs)
    assert attrs["class_names"] == ["blonde", "red", "brown", "black"]
    assert attrs["trait_config"] == HAIR and attrs["complete"] is True
    assert attrs["split"]["seed"] == 3 and attrs["split"]["test_fraction"] == 0.25
    split = root["sample_split"][:]
    labels = root["sample_label"][:]
    for k in range(4):
        assert split[labels == k].sum() == round((labels == k).sum() * 0.25)
    import hashlib

    assert attrs["input_checksums"]["hair.snps.tsv"] == \
        hashlib.sha256(built["snps"].read_bytes()).hexdigest()
    assert attrs["input_checksums"]["genotypes.bed"]["size"] == built["bf"].bed_path.stat().st_size
    # layout: sample-major chunks, compressed, VCF Zarr dimension names
    call = root["call_dosage"]
    assert call.chunks == (default_sample_chunk(call.shape[1]), call.shape[1])
    assert call.attrs["_ARRAY_DIMENSIONS"] == ["samples", "variants"]
    assert call.compressors
    assert open_store(built["out"]) is not None


def test_split_is_reproducible_and_continuous_traits_work(built, tmp_path):
    cohort = built["cohort"]
    args = ["store", "--bfile", str(cohort / "genotypes"), "--keep", str(built["keep"]),
            "--snps", str(built["snps"]), "--pheno", str(cohort / "phenotypes.tsv"),
            "--trait", "mscv", "--trait-config", json.dumps(MPV)]
    assert main(args + ["--split-seed", "3", "--out", str(tmp_path / "a.zarr")]) == 0
    assert main(args + ["--split-seed", "3", "--out", str(tmp_path / "b.zarr")]) == 0
    assert main(args + ["--split-seed", "4", "--out", str(tmp_path / "c.zarr")]) == 0
    a, b, c = (_read(tmp_path / f"{x}.zarr") for x in "abc")
    assert np.array_equal(a["sample_split"][:], b["sample_split"][:])
    assert not np.array_equal(a["sample_split"][:], c["sample_split"][:])
    values = a["sample_phenotype"][:]
    lo, hi = a.attrs["thresholds"]
    assert set(a["sample_label"][:]) == {0, 1}
    assert np.array_equal(a["sample_label"][:], (values >= hi).astype(int))
    assert ((values <= lo) | (values >= hi)).all()


def test_log_says_where_the_unlabeled_samples_went(built, tmp_path, capsys):
    """The store's log line breaks the kept samples down, counted here with pandas from
    the phenotype table: a value in the trait's column, then a listed code (categorical)
    or a number outside the binarising gap (continuous quartiles)."""
    cohort = built["cohort"]
    pheno = pd.read_csv(cohort / "phenotypes.tsv", sep="\t", dtype=str,
                        keep_default_na=False).set_index("eid")
    kept = [line.split()[1] for line in built["keep"].read_text().splitlines()[1:]]
    cells = pheno.reindex(kept)
    for trait, cfg, column in (("hair_colour", HAIR, "f.1747.0.0"),
                               ("mscv", MPV, "f.30100.0.0")):
        capsys.readouterr()
        assert main(["store", "--bfile", str(cohort / "genotypes"), "--keep",
                     str(built["keep"]), "--snps", str(built["snps"]), "--pheno",
                     str(cohort / "phenotypes.tsv"), "--trait", trait, "--trait-config",
                     json.dumps(cfg), "--out", str(tmp_path / f"{trait}.zarr")]) == 0
        line = next(x for x in capsys.readouterr().err.splitlines() if "labeled samples" in x)
        col = cells[column]
        in_table = int(pheno.index.isin(kept).sum())
        if trait == "hair_colour":
            n_label = int(col.isin(["1", "2", "3", "4", "5"]).sum())
            steps = f"{n_label} with a listed code in column '{column}'"
            assert n_label < int((col != "").sum()) < in_table     # blank cells, other codes
        else:
            n_value = int(pd.to_numeric(col, errors="coerce").notna().sum())
            n_label = int(_read(tmp_path / f"{trait}.zarr")["sample_label"].shape[0])
            steps = (f"{n_value} with a value in column '{column}' (not blank, not a missing "
                     f"code), {n_label} outside the binarising gap")
            assert n_label < 0.6 * n_value          # quartiles: the middle half is left out
        assert (f"{n_label} labeled samples (of {len(kept)} kept: {in_table} in the phenotype "
                f"table, {steps})") in line, line


def test_incomplete_store_is_refused(built, tmp_path):
    import zarr

    copy = tmp_path / "copy.zarr"
    shutil.copytree(built["out"], copy)
    root = zarr.open_group(str(copy), mode="r+", zarr_format=2)
    del root.attrs["complete"]
    with pytest.raises(CmixError, match="incomplete store"):
        open_store(copy)
    with pytest.raises(CmixError, match="store not found"):
        open_store(tmp_path / "nothing.zarr")


def test_existing_output_needs_force(built, tmp_path, capsys):
    out = tmp_path / "x.zarr"
    out.mkdir()
    (out / "marker").write_text("old")
    cohort = built["cohort"]
    args = ["store", "--bfile", str(cohort / "genotypes"), "--snps", str(built["snps"]),
            "--pheno", str(cohort / "phenotypes.tsv"), "--trait", "hair_colour",
            "--trait-config", json.dumps(HAIR), "--out", str(out)]
    assert main(args) == 1
    assert "already exists; remove it or pass --force" in capsys.readouterr().err
    assert (out / "marker").exists()
    # --force replaces a cmix store only, never some other folder
    assert main(args + ["--force"]) == 1
    assert "is not a cmix store" in capsys.readouterr().err.splitlines()[0]
    assert (out / "marker").read_text() == "old"
    (out / "marker").unlink()
    out.rmdir()
    assert main(args) == 0
    # --force replaced the whole folder, a user's NOTES.txt and runs/ inside it included:
    # files that are not the store's own (its checksum list and metadata) refuse it
    capsys.readouterr()
    for extra in ("call_dosage/marker", "NOTES.txt", "runs/hair/metrics.json"):
        (out / extra).parent.mkdir(parents=True, exist_ok=True)
        (out / extra).write_text("old")
        assert main(args + ["--force"]) == 1
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "that are not the store's" in err[0] and extra in err[0], err
        assert (out / extra).read_text() == "old"
        (out / extra).unlink()
    (out / "runs/hair").rmdir()
    assert main(args + ["--force"]) == 0
    assert open_store(out).attrs["trait"] == "hair_colour"


@pytest.mark.parametrize("case", ["absent_trait", "single_class", "unknown_snp", "bad_json"])
def test_bad_store_inputs(built, tmp_path, capsys, case):
    cohort = built["cohort"]
    config, snps = dict(HAIR), built["snps"]
    if case == "absent_trait":
        config = {"field": 12345, "kind": "continuous"}
        expect = "field 12345) is absent from the phenotype table"
    elif case == "single_class":
        config = {"field": 1747, "kind": "categorical", "classes": {"red": [2], "x": [99]}}
        expect = "class 'x' (codes [99]) has no sample after filtering"
    elif case == "unknown_snp":
        snps = tmp_path / "s.tsv"
        t = built["table"].copy()
        t.loc[3, "variant_id"] = "rs_missing"
        t.to_csv(snps, sep="\t", index=False)
        expect = "line 5: variant 'rs_missing' is not in"
    config_text = json.dumps(config) if case != "bad_json" else '{"field": 1747,'
    if case == "bad_json":
        expect = "--trait-config: not valid JSON"
    out = tmp_path / "o.zarr"
    rc = main(["store", "--bfile", str(cohort / "genotypes"), "--snps", str(snps), "--pheno",
               str(cohort / "phenotypes.tsv"), "--trait", "t", "--trait-config", config_text,
               "--out", str(out)])
    err = capsys.readouterr().err
    assert rc == 1 and expect in err and "Traceback" not in err
    assert not out.exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".o.zarr")]


SGKIT_SCRIPT = r"""
import sys, json, numpy as np, sgkit as sg
ds = sg.load_dataset(sys.argv[1])
d = ds["call_dosage"].values
ds["call_dosage_vm"] = ds["call_dosage"].T.astype("float64")
ds["sample_y"] = ds["sample_label"].astype("float64")
ds["sample_one"] = ds["sample_label"] * 0 + 1.0
res = sg.gwas_linear_regression(ds, dosage="call_dosage_vm", covariates=["sample_one"],
                                traits=["sample_y"], add_intercept=False)
print(json.dumps({"n_samples": int(ds.sizes["samples"]), "n_variants": int(ds.sizes["variants"]),
                  "dosage_sum": d.astype(np.int64).sum(axis=0).tolist(),
                  "beta": res["variant_linreg_beta"].values[:, 0].tolist(),
                  "sample_id": [str(x) for x in ds["sample_id"].values[:5]]}))
"""


def test_readable_by_sgkit(built):
    python = os.environ.get("CMIX_SGKIT_PYTHON")
    if not python:
        pytest.skip("set CMIX_SGKIT_PYTHON to a python with sgkit 0.10.0 (its own venv)")
    proc = subprocess.run([python, "-c", SGKIT_SCRIPT, str(built["out"])], capture_output=True,
                          text=True)
    assert proc.returncode == 0, proc.stderr[-2000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    root = _read(built["out"])
    dosage = root["call_dosage"][:].astype(np.float64)
    y = root["sample_label"][:].astype(np.float64)
    assert (got["n_samples"], got["n_variants"]) == dosage.shape
    assert got["dosage_sum"] == dosage.astype(np.int64).sum(axis=0).tolist()
    assert got["sample_id"] == list(root["sample_id"][:5])
    # the per-SNP regression slope of label on dosage (with intercept), by numpy
    x = dosage - dosage.mean(0)
    beta = (x * (y - y.mean())[:, None]).sum(0) / (x * x).sum(0)
    np.testing.assert_allclose(got["beta"], beta, rtol=1e-6, atol=1e-9)
