"""Methods from installed packages (entry-point group cmix.methods): the example package of
docs/guide/plugins.md, written into a folder on PYTHONPATH with its dist-info (no pip),
trained by `cmix train`, reported, planned by the workflow, and the one-line refusals."""

import json
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from sklearn.linear_model import LogisticRegression

from cmix.store.read import open_store
from store_helpers import simulate_labels, write_test_store

REPO = Path(__file__).resolve().parent.parent
GUIDE = REPO / "docs/guide/plugins.md"
FACTORY, CLASS = "demo_logreg", "demo_centroid"
C_GIVEN = 0.05


def guide_files() -> dict:
    """path -> text of every code block of the guide marked ``<!-- file: PATH -->``."""
    text = GUIDE.read_text()
    return dict(re.findall(r"^<!-- file: (\S+) -->\n```\w*\n(.*?)^```", text, re.M | re.S))


def write_distribution(site: Path, name: str, version: str, entry_points: dict,
                       modules: dict) -> None:
    """A package as an installer leaves it in site-packages: ``modules`` (path -> text)
    and NAME-VERSION.dist-info with METADATA and entry_points.txt (group cmix.methods)."""
    for path, text in modules.items():
        (site / path).parent.mkdir(parents=True, exist_ok=True)
        (site / path).write_text(text)
    info = site / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    lines = "".join(f"{k} = {v}\n" for k, v in entry_points.items())
    (info / "entry_points.txt").write_text(f"[cmix.methods]\n{lines}")


def guide_distribution(site: Path, **extra_entry_points) -> None:
    """The guide's package (its pyproject.toml's name, version and entry points, its
    module) written into ``site``, with ``extra_entry_points`` beside its own."""
    files = guide_files()
    project = tomllib.loads(files.pop("pyproject.toml"))["project"]
    write_distribution(site, project["name"], project["version"],
                       {**project["entry-points"]["cmix.methods"], **extra_entry_points},
                       files)


def cmix(site: Path, *args, cwd=None) -> subprocess.CompletedProcess:
    """`cmix ARGS` in a fresh interpreter that finds the packages in ``site``."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(site), str(REPO)]))
    return subprocess.run([sys.executable, "-m", "cmix.cli", *args], env=env, cwd=cwd,
                          capture_output=True, text=True)


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    """A folder holding the guide's package, installed as pip would leave it."""
    path = tmp_path_factory.mktemp("site")
    guide_distribution(path)
    return path


@pytest.fixture(scope="module")
def store_and_dosage(tmp_path_factory):
    """A 2-class store of 400 rows x 40 SNPs, with its dosages and labels."""
    dosage, label = simulate_labels(400, 40, n_classes=2, n_causal=8, h2=0.8, seed=3)
    path = tmp_path_factory.mktemp("plugin_store") / "toy.zarr"
    write_test_store(path, dosage, label)
    return path, dosage, label


@pytest.fixture(scope="module")
def runs(site, store_and_dosage, tmp_path_factory) -> Path:
    """runs/METHOD/SEED of both plugin methods (seeds 1 and 2) and logreg (seed 1), every
    training row labeled; the factory's C given by a config file."""
    store, dosage, _ = store_and_dosage
    root = tmp_path_factory.mktemp("plugin_runs")
    cfg = root / "plugin.yaml"
    cfg.write_text(yaml.safe_dump({"plugin_config": {FACTORY: {"C": C_GIVEN}}}))
    n_train = int(np.sum(np.asarray(open_store(store)["sample_split"][:]) == 0))
    for method, seeds in ((FACTORY, (1, 2)), (CLASS, (1, 2)), ("logreg", (1,))):
        for seed in seeds:
            res = cmix(site, "train", "--store", str(store), "--budget", str(n_train),
                       "--seed", str(seed), "--method", method, "--config", str(cfg),
                       "--out", str(root / "runs" / method / str(seed)))
            assert res.returncode == 0, res.stderr[-3000:]
    return root / "runs"


def run_of(runs: Path, method: str, seed: int = 1):
    """(metrics.json, predictions.npz) of one run."""
    folder = runs / method / str(seed)
    return (json.loads((folder / "metrics.json").read_text()),
            np.load(folder / "predictions.npz"))


@pytest.mark.parametrize("method", [FACTORY, CLASS])
def test_both_forms_train_with_sane_test_metrics(runs, store_and_dosage, method):
    _, _, label = store_and_dosage
    metrics, pred = run_of(runs, method)
    assert metrics["method"] == method
    assert metrics["n_test"] == 100 and pred["prob"].shape == (100, 2)
    assert np.allclose(pred["prob"].sum(axis=1), 1)
    assert metrics["test"]["accuracy"] == pytest.approx(
        np.mean(pred["prob"].argmax(axis=1) == pred["y"]))
    # h2 = 0.8 over 8 of 40 SNPs: a real classifier beats chance clearly
    assert metrics["test"]["auroc"] > 0.7, metrics["test"]


def test_the_factory_gets_its_plugin_config(runs):
    metrics, _ = run_of(runs, FACTORY)
    assert metrics["validation"]["plugin_config"] == {"C": C_GIVEN}


def test_the_factory_predicts_as_a_logistic_regression_fitted_here(runs, store_and_dosage):
    """Every training row labeled: the factory's classifier is LogisticRegression(C) on
    the training rows' dosages standardised with their own moments (missing -> 0)."""
    store, dosage, label = store_and_dosage
    split = np.asarray(open_store(store)["sample_split"][:])
    train, test = split == 0, split == 1
    calls = np.where(dosage >= 0, dosage, np.nan).astype(np.float64)
    mean, sd = np.nanmean(calls[train], axis=0), np.nanstd(calls[train], axis=0)
    z = np.nan_to_num((calls - mean) / sd)
    model = LogisticRegression(C=C_GIVEN, max_iter=1000).fit(z[train], label[train])
    _, pred = run_of(runs, FACTORY)
    assert np.array_equal(pred["y"], label[test])
    assert np.allclose(pred["prob"], model.predict_proba(z[test]), atol=1e-4)
    # another C gives other probabilities: the comparison can tell C apart
    other = LogisticRegression(C=1.0, max_iter=1000).fit(z[train], label[train])
    assert not np.allclose(pred["prob"], other.predict_proba(z[test]), atol=1e-4)


def test_report_lists_the_plugin_methods(site, runs, tmp_path):
    res = cmix(site, "report", "--runs", str(runs), "--out", str(tmp_path / "rep"))
    assert res.returncode == 0, res.stderr[-3000:]
    table = pd.read_csv(tmp_path / "rep" / "results.tsv", sep="\t")
    assert sorted(table["method"]) == sorted([FACTORY, FACTORY, CLASS, CLASS, "logreg"])
    page = (tmp_path / "rep" / "report.html").read_text()
    assert FACTORY in page and CLASS in page


def workflow_config(tmp_path: Path) -> Path:
    """The demo workflow config with both plugin methods and the factory's C."""
    cfg = yaml.safe_load((REPO / "config/config.yaml").read_text())
    cfg["methods"] = ["logreg", FACTORY, CLASS]
    cfg.setdefault("train", {}).setdefault("config", {})["plugin_config"] = {
        FACTORY: {"C": C_GIVEN}}
    path = tmp_path / "plugins.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def test_check_config_takes_the_plugin_methods(site, tmp_path):
    path = workflow_config(tmp_path)
    res = cmix(site, "check-config", str(path))
    assert res.returncode == 0, res.stderr[-3000:]
    # without the package the same config names an unknown method
    res = cmix(tmp_path / "empty", "check-config", str(path))
    assert res.returncode == 1 and "is not one of" in res.stderr, res.stderr
    assert re.search(rf"'({FACTORY}|{CLASS})' is not one of", res.stderr), res.stderr


def test_the_workflow_plans_training_jobs_for_the_plugin_methods(site, tmp_path):
    path = workflow_config(tmp_path)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(site), str(REPO)]))
    res = subprocess.run([sys.executable, "-m", "snakemake", "-n", "--cores", "1",
                          "--configfile", str(path), "--directory", str(tmp_path)],
                         cwd=REPO, env=env, capture_output=True, text=True)
    assert res.returncode == 0, (res.stdout + res.stderr)[-3000:]
    # neither method is a torch network: both train in CPU jobs
    rules = {method: re.findall(rf"^\s*(?:local)?rule (\w+):\n(?:\s+\w+: .*\n)*?"
                                rf"\s+wildcards: .*method={method}\b", res.stdout, re.M)
             for method in (FACTORY, CLASS)}
    assert rules[FACTORY] and set(rules[FACTORY]) == set(rules[CLASS]) == {"train_cpu"}, rules


@pytest.mark.parametrize("entry_point, message", [
    ({"logreg": "cmix_demo_plugin:demo_logreg"}, "has the name of a built-in cmix method"),
    ({"broken": "cmix_no_such_module:factory"}, "failed to import (ModuleNotFoundError"),
])
def test_a_bad_entry_point_is_one_line_naming_the_package(tmp_path, store_and_dosage,
                                                          entry_point, message):
    store, _, _ = store_and_dosage
    guide_distribution(tmp_path, **entry_point)
    res = cmix(tmp_path, "train", "--store", str(store), "--budget", "60", "--seed", "1",
               "--method", FACTORY, "--out", str(tmp_path / "run"))
    lines = res.stderr.strip().splitlines()
    assert res.returncode == 1 and len(lines) == 1, res.stderr[-3000:]
    assert "package 'cmix-demo-plugin'" in lines[0] and message in lines[0], lines[0]
    assert not (tmp_path / "run").exists()


def test_predict_rebuilds_both_forms_from_their_checkpoints(site, runs, store_and_dosage):
    """The checkpoint's state dict, rebuilt in a fresh interpreter (the method found by
    its class name among the installed ones), predicts the test rows as training did."""
    store, dosage, _ = store_and_dosage
    split = np.asarray(open_store(store)["sample_split"][:])
    for method in (FACTORY, CLASS):
        code = ("import sys, torch, numpy as np\n"
                "from cmix.learn.methods import from_state_dict\n"
                "state = torch.load(sys.argv[1], weights_only=False)['parts']['model']\n"
                "x = np.load(sys.argv[2])\n"
                "m = from_state_dict(state)\n"
                "np.save(sys.argv[3], m.predict_proba(x, np.zeros((len(x), 0))))\n")
        folder = runs / method / "1"
        np.save(folder / "x.npy", dosage[split == 1])
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(site), str(REPO)]))
        res = subprocess.run([sys.executable, "-c", code, str(folder / "checkpoint.pt"),
                              str(folder / "x.npy"), str(folder / "prob.npy")],
                             env=env, capture_output=True, text=True)
        assert res.returncode == 0, res.stderr[-3000:]
        _, pred = run_of(runs, method)
        assert np.allclose(np.load(folder / "prob.npy"), pred["prob"], atol=1e-6), method


def test_a_method_s_summary_is_its_docstring_s_first_paragraph(site):
    """The summary (`cmix train --help`, the docs) is the first paragraph of the entry
    point's docstring on one line, however it is wrapped, and names the package."""
    code = ("from cmix.learn.methods import METHODS\n"
            f"print(METHODS[{CLASS!r}].summary)\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(site), str(REPO)]))
    res = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True)
    assert res.returncode == 0, res.stderr[-3000:]
    assert res.stdout.strip() == ("Nearest class centroid of the standardised dosages, "
                                  "softmax of minus the mean squared distance to each "
                                  "centroid. (plugin, package cmix-demo-plugin)")


def test_two_packages_giving_one_name_is_one_line_naming_both(tmp_path, store_and_dosage):
    store, _, _ = store_and_dosage
    guide_distribution(tmp_path)
    write_distribution(tmp_path, "cmix-other-plugin", "0.2",
                       {FACTORY: "cmix_demo_plugin:demo_logreg"}, {})
    res = cmix(tmp_path, "train", "--store", str(store), "--budget", "60", "--seed", "1",
               "--method", FACTORY, "--out", str(tmp_path / "run"))
    lines = res.stderr.strip().splitlines()
    assert res.returncode == 1 and len(lines) == 1, res.stderr[-3000:]
    assert f"its method {FACTORY!r} has the name of package" in lines[0], lines[0]
    assert "'cmix-demo-plugin'" in lines[0] and "'cmix-other-plugin'" in lines[0], lines[0]
    assert not (tmp_path / "run").exists()
