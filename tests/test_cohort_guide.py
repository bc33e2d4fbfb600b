"""docs/guide/plink-cohort.md runs as written: its complete configuration, its example
phenotype table and each of its changes, on a simulated cohort laid out as the page
says, through `cmix check-config` and the workflow to the report."""

import copy
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from cmix.cli import main
from cmix.genotypes.phenotypes import label_trait, read_phenotypes
from cmix.simulate.balding_nichols import simulate_cohort

from conftest import requires_plink2

REPO = Path(__file__).resolve().parent.parent
PAGE = REPO / "docs" / "guide" / "plink-cohort.md"
SMOKING_TEXT = {0: "never", 1: "previous", 2: "current", -3: "prefer not to answer"}
POPULATION_TEXT = {1001: "EUR", 1002: "EUR", 1003: "EUR", 2001: "AMR", 3001: "SAS",
                   4002: "AFR", 5: "EAS"}


def _blocks(kind: str) -> list[str]:
    """The page's fenced code blocks of one kind (yaml, text, bash), as written."""
    text = PAGE.read_text()
    return [inspect_block(b) for b in re.findall(rf"^ *```{kind}\n(.*?)^ *```", text, re.M | re.S)]


def inspect_block(block: str) -> str:
    """A code block without the indentation it has inside a list item."""
    lines = block.splitlines()
    indent = min(len(line) - len(line.lstrip()) for line in lines if line.strip())
    return "\n".join(line[indent:] for line in lines) + "\n"


def page_config() -> dict:
    complete = [b for b in _blocks("yaml") if b.startswith("# my_cohort.yaml")]
    assert len(complete) == 1, "the page has one complete configuration"
    return yaml.safe_load(complete[0])


def page_changes() -> dict:
    return {b.splitlines()[0]: yaml.safe_load(b) for b in _blocks("yaml")
            if b.startswith("# in my_cohort.yaml")}


def _merge(base: dict, change: dict) -> dict:
    out = copy.deepcopy(base)
    for key, value in change.items():
        out[key] = _merge(out[key], value) if isinstance(value, dict) and isinstance(
            out.get(key), dict) and value else copy.deepcopy(value)
    return out


def _with_paths(cfg, c: Path):
    """The page's /path/to/ placeholders pointed at the simulated cohort's files."""
    text = yaml.safe_dump(cfg)
    text = text.replace("/path/to/cohort/genotypes", str(c / "genotypes"))
    text = text.replace("/path/to/cohort/phenotypes.tsv", str(c / "my_phenotypes.tsv"))
    text = text.replace("/path/to/gwas/smoking.sumstats.gz",
                        str(c / "sumstats/smoking_status.txt.gz"))
    text = text.replace("/path/to/gwas/platelet_volume.sumstats.gz",
                        str(c / "sumstats/mean_platelet_volume.txt.gz"))
    assert "/path/to" not in text, text
    return yaml.safe_load(text)


@pytest.fixture(scope="module")
def cohort(tmp_path_factory):
    """A simulated cohort with the page's phenotype table: the header of its example,
    smoking as text categories, and a super_pop column of text ancestry groups."""
    d = tmp_path_factory.mktemp("guide")
    c = d / "cohort"
    simulate_cohort(c, n_samples=3000, n_variants=1500, n_discovery=1000, seed=11)
    pheno = pd.read_csv(c / "phenotypes.tsv", sep="\t", dtype={"eid": str})
    header = _blocks("text")[0].splitlines()[0].split("\t")
    table = pd.DataFrame({
        "IID": pheno["eid"],
        "smoking": pheno["f.20116.0.0"].map(SMOKING_TEXT),
        "platelet_volume": pheno["f.30100.0.0"],
        "age": pheno["f.21022.0.0"], "sex": pheno["f.31.0.0"],
        "super_pop": pheno["f.21000.0.0"].map(POPULATION_TEXT)})
    assert header == list(table.columns[:len(header)]), header
    table.to_csv(c / "my_phenotypes.tsv", sep="\t", index=False)
    return c


def test_the_example_table_reads_as_the_configuration_defines_it(tmp_path):
    """The page's example phenotype table, as written, labelled by its trait definition:
    never -> never; previous and current -> ever; other text missing."""
    path = tmp_path / "example.tsv"
    path.write_text(_blocks("text")[0])
    table = read_phenotypes(path)
    cfg = page_config()
    out = label_trait(table, "smoking", cfg["trait_definitions"]["smoking"], list(table.index),
                      test_fraction=0.0)
    cells = table["smoking"].to_numpy()
    expected = np.array([0 if v == "never" else 1 if v in ("previous", "current") else -1
                         for v in cells])
    np.testing.assert_array_equal(out["keep"], np.flatnonzero(expected >= 0))
    np.testing.assert_array_equal(out["label"], expected[expected >= 0])


def test_the_page_s_configuration_and_each_change_pass_the_check(cohort, tmp_path, capsys):
    cfg = _with_paths(page_config(), cohort)
    path = tmp_path / "my_cohort.yaml"
    path.write_text(yaml.safe_dump(cfg))
    assert main(["check-config", str(path)]) == 0, capsys.readouterr().err
    assert capsys.readouterr().out.startswith("config ok: my_cohort")
    changes = page_changes()
    assert len(changes) == 3, list(changes)
    for title, change in changes.items():
        changed = tmp_path / "changed.yaml"
        changed.write_text(yaml.safe_dump(_with_paths(_merge(page_config(), change), cohort)))
        assert main(["check-config", str(changed)]) == 0, (title, capsys.readouterr().err)
        capsys.readouterr()


@requires_plink2                 # the discovery route runs plink2 --glm
@pytest.mark.slow
def test_the_page_s_configuration_runs_to_the_report(cohort, tmp_path):
    """The page's configuration through the workflow to its report, made small only in
    the grid (one budget, one seed, three methods) and the trainer's epochs."""
    cfg = _with_paths(page_config(), cohort)
    cfg.update(budgets=[100], seeds=[1], methods=["covariates", "logreg", "cmix"],
               selection={"top": 100},
               train={"device": "cpu", "config": {"hidden": 32, "d_proj": 16, "epochs": 2,
                                                  "warmup_epochs": 1, "lp_every": 1}})
    path = tmp_path / "my_cohort.yaml"
    path.write_text(yaml.safe_dump(cfg))
    res = subprocess.run([sys.executable, "-m", "snakemake", "--cores", "2", "--configfile",
                          str(path), "--directory", str(tmp_path)], cwd=REPO,
                         capture_output=True, text=True)
    assert res.returncode == 0, res.stderr[-3000:]
    report = tmp_path / "results/my_cohort/report/report.html"
    assert report.exists()
    assert len(list((tmp_path / "results/my_cohort/runs").glob("*/*/budget100/seed1/"
                                                                "metrics.json"))) == 6
