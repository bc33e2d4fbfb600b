"""The shipped reference tables (cmix/data/), and fetching public files from a manifest."""

import hashlib
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

from cmix.genotypes.samples import SQC_FIELDS

REPO = Path(__file__).resolve().parent.parent
DATA = REPO / "cmix" / "data"


def read_table(path):
    return pd.read_csv(path, sep="\t", comment="#", dtype=str)


def test_sqc_columns_agree_with_the_sample_filters():
    columns = read_table(DATA / "ukb_sqc_v2.columns.tsv")
    assert columns["column"].astype(int).tolist() == list(range(1, 69))
    assert columns["name"].is_unique
    by_number = dict(zip(columns["column"].astype(int), columns["name"]))
    for name, (number, _) in SQC_FIELDS.items():
        assert by_number[number] == name
    assert [by_number[i] for i in (26, 65)] == ["PC1", "PC40"]


@pytest.mark.parametrize("config", ["config/config.yaml", "config/ukb.yaml"])
def test_trait_classes_use_the_fields_data_codings(config):
    codings = read_table(DATA / "ukb_datacodings.tsv")
    definitions = yaml.safe_load((REPO / config).read_text())["trait_definitions"]
    for trait, definition in definitions.items():
        rows = codings[codings["field"] == str(definition["field"])]
        assert len(rows), f"{trait}: field {definition['field']} not in ukb_datacodings.tsv"
        if definition["kind"] == "continuous":
            assert rows["coding"].tolist() == ["-"]
            continue
        codes = set(rows["code"].astype(int))
        used = [c for cls in definition["classes"].values() for c in cls]
        assert set(used) <= codes, trait
        assert all(c >= 0 for c in used), trait        # negative codes are non-answers


def fetch(tmp_path, manifest_lines, target):
    manifest = tmp_path / "manifest.tsv"
    manifest.write_text("# test manifest\nfile\turl\tsha256\n" + "".join(manifest_lines))
    return subprocess.run(
        [sys.executable, "-m", "snakemake", f"resources/sumstats/{target}", "--cores", "1",
         "--directory", str(tmp_path), "--configfile", str(REPO / "config/config.yaml"),
         "--config", f"fetch_manifest={manifest}"],
        cwd=REPO, capture_output=True, text=True)


def test_fetch_keeps_a_file_only_when_its_sha256_matches(tmp_path):
    source = tmp_path / "public" / "trait.sumstats.gz"
    source.parent.mkdir()
    source.write_bytes(bytes(range(256)) * 5000)
    sha = subprocess.run(["sha256sum", str(source)], capture_output=True, text=True,
                         check=True).stdout.split()[0]
    assert sha == hashlib.sha256(source.read_bytes()).hexdigest()
    url = source.as_uri()
    wrong = "0" * 64
    lines = [f"trait.sumstats.gz\t{url}\t{sha}\n", f"bad.sumstats.gz\t{url}\t{wrong}\n",
             f"unrecorded.sumstats.gz\t{url}\t-\n"]
    res = fetch(tmp_path, lines, "trait.sumstats.gz")
    assert res.returncode == 0, res.stderr[-3000:]
    fetched = tmp_path / "resources/sumstats/trait.sumstats.gz"
    assert fetched.read_bytes() == source.read_bytes()

    res = fetch(tmp_path, lines, "bad.sumstats.gz")
    assert res.returncode != 0
    assert f"does not match the manifest's {wrong}" in res.stderr
    assert not list((tmp_path / "resources/sumstats").glob("*bad*"))   # no partial file

    res = fetch(tmp_path, lines, "unrecorded.sumstats.gz")
    assert res.returncode != 0
    assert "line 5: no sha256 recorded for unrecorded.sumstats.gz" in res.stderr
    assert not (tmp_path / "resources/sumstats/unrecorded.sumstats.gz").exists()


def test_the_shipped_manifest_names_the_ukb_template_sumstats():
    manifest = read_table(REPO / "resources/sumstats.manifest.tsv")
    sumstats = yaml.safe_load((REPO / "config/ukb.yaml").read_text())["inputs"]["sumstats"]
    for path in sumstats.values():
        assert Path(path).parent == Path("resources/sumstats")
        assert Path(path).name in set(manifest["file"])
    assert all(u.startswith("https://") for u in manifest["url"])


def test_fetched_files_stay_out_of_git():
    if subprocess.run(["git", "rev-parse"], cwd=REPO, capture_output=True).returncode:
        pytest.skip("not a git checkout")

    def ignored(path):
        return subprocess.run(["git", "check-ignore", "-q", path], cwd=REPO).returncode == 0

    assert ignored("resources/sumstats/x.sumstats.gz") and ignored("resources/logs/x.log")
    assert not ignored("cmix/data/ukb_datacodings.tsv")
