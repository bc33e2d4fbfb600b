"""The Hardy-Weinberg test taken where the field takes it: within ancestry groups and among
controls only, each group's p equal to plink2 --keep GROUP --hardy, and a pooled test's
warning when its failures are those of pooled ancestries."""

import json
import subprocess

import numpy as np
import pandas as pd
import pytest

from cmix.cli import main
from cmix.simulate.balding_nichols import simulate_cohort

from conftest import requires_plink2

TWO_POPULATIONS = [
    {"name": "british", "code": 1001, "share": 0.5,
     "regions": [{"name": "south", "share": 1.0, "fst": 0.001}]},
    {"name": "distant", "code": 4002, "share": 0.5, "fst": 0.15},
]


@pytest.fixture(scope="module")
def structured(tmp_path_factory):
    """Two populations of equal size, far apart (Fst 0.15): pooled, their
    ancestry-informative SNPs fail HWE by a heterozygote deficit."""
    d = tmp_path_factory.mktemp("hwe")
    spec = d / "pops.json"
    spec.write_text(json.dumps(TWO_POPULATIONS))
    simulate_cohort(d / "c", n_samples=1500, n_variants=2500, n_discovery=100, seed=5,
                    populations=str(spec))
    groups = d / "groups.tsv"
    pheno = pd.read_csv(d / "c" / "phenotypes.tsv", sep="\t", dtype=str)
    pheno[["eid", "f.21000.0.0"]].rename(columns={"f.21000.0.0": "ancestry"}).to_csv(
        groups, sep="\t", index=False)
    return d / "c" / "genotypes", groups, pheno


def _plink2(*args):
    subprocess.run(["plink2", "--silent", *map(str, args)], check=True, capture_output=True)


def _keep_file(path, fam: pd.DataFrame, iids) -> str:
    rows = fam[fam["iid"].isin(set(iids))]
    rows[["fid", "iid"]].to_csv(path, sep="\t", index=False, header=["#FID", "IID"])
    return str(path)


def _fam(prefix) -> pd.DataFrame:
    return pd.read_csv(f"{prefix}.fam", sep=r"\s+", header=None, dtype=str,
                       names=["fid", "iid", "f", "m", "sex", "pheno"])


@requires_plink2
@pytest.mark.plink2
def test_hwe_within_groups_is_plink2_per_group(structured, tmp_path, capsys):
    """Each variant's hwe_p is its smallest p over the groups, each group's p being
    plink2 --keep GROUP --hardy's; the kept SNPs are those plink2 keeps with --maf and
    --geno on everyone and --hwe within every group."""
    prefix, groups, pheno = structured
    out = tmp_path / "grouped"
    main(["qc", "--bfile", str(prefix), "--maf", "0.01", "--hwe", "1e-7", "--geno", "0.05",
          "--hwe-groups", str(groups), "--out", str(out)])
    vqc = pd.read_csv(f"{out}.vqc.tsv", sep="\t", keep_default_na=False, na_values=["NA"],
                      dtype={"hwe_group": str})
    fam = _fam(prefix)
    per_group, passing = {}, None
    for code in ("1001", "4002"):
        keep = _keep_file(tmp_path / f"{code}.keep", fam, pheno.loc[pheno["f.21000.0.0"] == code, "eid"])
        _plink2("--bfile", prefix, "--keep", keep, "--hardy", "--out", tmp_path / code)
        per_group[code] = pd.read_csv(tmp_path / f"{code}.hardy", sep="\t")["P"].to_numpy()
        _plink2("--bfile", prefix, "--keep", keep, "--hwe", "1e-7", "--write-snplist",
                "--out", tmp_path / f"{code}.hwe")
        kept = set((tmp_path / f"{code}.hwe.snplist").read_text().split())
        passing = kept if passing is None else passing & kept
    p = np.vstack([per_group["1001"], per_group["4002"]])
    np.testing.assert_allclose(vqc["hwe_p"], p.min(axis=0), rtol=5e-6, atol=0)
    clear = np.abs(np.log(p[0]) - np.log(p[1])) > 1e-3
    np.testing.assert_array_equal(vqc["hwe_group"][clear], np.where(p[0] < p[1], "1001", "4002")[clear])
    _plink2("--bfile", prefix, "--maf", "0.01", "--geno", "0.05", "--write-snplist",
            "--out", tmp_path / "pooled")
    expected = set((tmp_path / "pooled.snplist").read_text().split()) & passing
    assert set(open(f"{out}.snplist").read().split()) == expected
    _plink2("--bfile", prefix, "--hardy", "--out", tmp_path / "all")
    np.testing.assert_allclose(vqc["hwe_p_pooled"], pd.read_csv(tmp_path / "all.hardy", sep="\t")["P"],
                               rtol=5e-6, atol=0)
    log = capsys.readouterr().err
    assert "HWE within 2 group(s)" in log and "pooled test would remove" in log


@requires_plink2
@pytest.mark.plink2
def test_hwe_among_controls_is_plink2_with_keep(structured, tmp_path):
    prefix, _, pheno = structured
    fam = _fam(prefix)
    controls = fam["iid"].to_numpy()[::3]
    keep = _keep_file(tmp_path / "controls.keep", fam, controls)
    out = tmp_path / "controls"
    main(["qc", "--bfile", str(prefix), "--hwe", "1e-7", "--hwe-keep", keep, "--out", str(out)])
    _plink2("--bfile", prefix, "--keep", keep, "--hardy", "--out", tmp_path / "c")
    vqc = pd.read_csv(f"{out}.vqc.tsv", sep="\t")
    np.testing.assert_allclose(vqc["hwe_p"], pd.read_csv(tmp_path / "c.hardy", sep="\t")["P"],
                               rtol=5e-6, atol=0)
    # the counts and the other filters stay those of everyone
    assert (vqc["n_kept"] == len(fam)).all()


def test_a_pooled_test_across_ancestries_warns_and_one_population_does_not(structured, tmp_path,
                                                                          capsys):
    prefix, groups, _ = structured
    main(["qc", "--bfile", str(prefix), "--hwe", "1e-7", "--out", str(tmp_path / "pooled")])
    log = capsys.readouterr().err
    assert "fewer heterozygotes than expected" in log and "--hwe-groups" in log
    pooled = pd.read_csv(tmp_path / "pooled.vqc.tsv", sep="\t")
    main(["qc", "--bfile", str(prefix), "--hwe", "1e-7", "--hwe-groups", str(groups),
          "--out", str(tmp_path / "grouped")])
    grouped = pd.read_csv(tmp_path / "grouped.vqc.tsv", sep="\t")
    n_pooled, n_grouped = (pooled["status"] == "hwe").sum(), (grouped["status"] == "hwe").sum()
    assert n_pooled >= 20 and n_grouped < n_pooled / 4, (n_pooled, n_grouped)
    assert "Wahlund" not in capsys.readouterr().err
    simulate_cohort(tmp_path / "one", n_samples=1500, n_variants=2500, n_discovery=100, seed=5,
                    populations=None)
    main(["qc", "--bfile", str(tmp_path / "one" / "genotypes"), "--hwe", "1e-7",
          "--out", str(tmp_path / "one_pooled")])
    assert "Wahlund" not in capsys.readouterr().err


@pytest.mark.parametrize("args, message", [
    (["--hwe-groups", "{groups}"], "give --hwe too"),
    (["--hwe", "1e-7", "--hwe-group-column", "ancestry"], "--hwe-groups, which is not given"),
    (["--hwe", "1e-7", "--hwe-groups", "{groups}", "--hwe-group-column", "region"],
     "no column 'region' for the HWE groups; the table has eid, ancestry"),
    (["--hwe", "1e-7", "--hwe-groups", "{empty}"], "no sample of the .fam has a group"),
])
def test_bad_hwe_groups_are_one_line_before_any_output(structured, tmp_path, capsys, args,
                                                       message):
    prefix, groups, _ = structured
    empty = tmp_path / "empty.tsv"
    empty.write_text("eid\tancestry\nnobody\t1\n")
    args = [a.format(groups=groups, empty=empty) for a in args]
    assert main(["qc", "--bfile", str(prefix), *args, "--out", str(tmp_path / "bad")]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0], err
    assert not list(tmp_path.glob("bad*"))


def test_the_workflow_takes_hwe_groups_from_its_config(structured, tmp_path):
    """variant_qc.hwe_groups of a real cohort: checked before any job (the table there,
    its column in the header), then passed to the variant_qc job."""
    import yaml

    from test_workflow import cohort_config, snakemake

    prefix, groups, _ = structured
    cfg = cohort_config(prefix.parent)
    cfg["variant_qc"]["hwe_groups"] = {"table": str(groups), "column": "ancestry"}
    path = tmp_path / "cohort.yaml"
    path.write_text(yaml.safe_dump(cfg))
    res = snakemake("-n", "-p", "--cores", "1", "--configfile", str(path),
                    "--directory", str(tmp_path))
    assert res.returncode == 0, res.stderr[-2000:]
    assert f"--hwe-groups {groups} --hwe-group-column ancestry" in res.stdout
    cfg["variant_qc"]["hwe_groups"]["column"] = "region"
    path.write_text(yaml.safe_dump(cfg))
    res = snakemake("-n", "--cores", "1", "--configfile", str(path), "--directory", str(tmp_path))
    assert res.returncode != 0
    assert (f"variant_qc.hwe_groups.column: no column 'region' in {groups} (its columns: "
            "eid, ancestry)") in res.stderr
