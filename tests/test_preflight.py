"""cmix check-config and the workflow's pre-flight checks (cmix.preflight): names, the
sample QC's PCs, a trait on both SNP routes, a config that is not UTF-8."""

import copy

import pytest
import yaml

from cmix.cli import main
from cmix.errors import CmixError
from cmix.preflight import check_config_file, check_discovery_or_sumstats
from test_workflow import REPO, snakemake, ukb_standin  # noqa: F401  (a fixture)


def demo_config(**changes) -> dict:
    cfg = yaml.safe_load((REPO / "config/config.yaml").read_text())
    cfg.update(changes)
    return cfg


def write(tmp_path, cfg, name="c.yaml"):
    path = tmp_path / name
    path.write_text(yaml.safe_dump(cfg))
    return path


def test_the_demo_config_passes_with_one_summary_line(capsys):
    assert main(["check-config", str(REPO / "config/config.yaml")]) == 0
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 1 and out[0].startswith("config ok: demo: a simulated cohort")
    assert main(["check-config", str(REPO / "config/demo_full.yaml")]) == 0


@pytest.mark.parametrize("key", ["traits", "run_name"])
@pytest.mark.parametrize("name, message", [
    (".", "cannot be '.' or '..'"), ("..", "cannot be '.' or '..'"),
    ("-rf", "cannot start with '-'"),
])
def test_names_that_cannot_name_a_folder_or_argument_are_refused(tmp_path, capsys, key,
                                                                 name, message):
    cfg = demo_config()
    if key == "traits":
        cfg["trait_definitions"][name] = cfg["trait_definitions"]["mean_platelet_volume"]
        cfg["traits"] = [name]
    else:
        cfg["run_name"] = name
    path = write(tmp_path, cfg)
    assert main(["check-config", str(path)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"{key}: {name!r}" in err[0] and message in err[0], err


def test_a_config_that_is_not_utf8_gets_one_message(tmp_path, capsys):
    path = tmp_path / "latin1.yaml"
    path.write_bytes((REPO / "config/config.yaml").read_bytes()
                     + "# caf\u00e9\n".encode("latin-1"))
    assert main(["check-config", str(path)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(path) in err[0] and "expected in UTF-8" in err[0], err


def test_a_trait_on_both_snp_routes_names_both():
    cfg = {"discovery": {"traits": ["hair_colour"]},
           "inputs": {"sumstats": {"hair_colour": "h.txt.gz"}}}
    with pytest.raises(CmixError, match=r"discovery.traits and inputs.sumstats both list "
                                        r"trait 'hair_colour'"):
        check_discovery_or_sumstats(cfg)
    check_discovery_or_sumstats(dict(cfg, discovery={"traits": []}))


def test_more_pcs_than_the_sample_qc_holds_fail_the_dry_run(ukb_standin, tmp_path):
    cfg_path, cfg = ukb_standin
    sqc = cfg["inputs"]["sample_qc"]
    header = open(sqc).readline().split()
    n_pcs = sum(1 for c in header if c.startswith("PC") and c[2:].isdigit())
    assert 0 < n_pcs < 40
    cfg = copy.deepcopy(cfg)
    cfg["covariates"]["pcs"] = n_pcs + 1
    bad = write(tmp_path, cfg)
    with pytest.raises(CmixError, match=f"covariates.pcs: {n_pcs + 1} PCs from the sample "
                                        f"QC: .*{n_pcs + 1} PCs asked for, the table has "
                                        f"{n_pcs}"):
        check_config_file(bad, REPO)
    res = snakemake("-n", "--cores", "1", "--configfile", str(bad), "--directory",
                    str(tmp_path))
    assert res.returncode != 0
    assert f"config error: covariates.pcs: {n_pcs + 1} PCs" in res.stdout + res.stderr
