"""The pinned environments agree with each other and with pyproject.toml."""

import re
import tomllib
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parent.parent


def norm(name):
    return re.sub(r"[-_.]+", "-", name).lower()


def lock_pins():
    text = (REPO / "requirements/lock.txt").read_text()
    return {norm(k): v for k, v in re.findall(r"^([A-Za-z0-9_.-]+)==([^ \\]+)", text, re.M)}


def test_lock_pins_every_dependency_with_hashes_but_torch():
    pins = lock_pins()
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    wanted = project["dependencies"] + extras["test"] + extras["sim"]
    names = {norm(re.split(r"[<>=!~ \[;]", req)[0]) for req in wanted}
    assert names - {"torch"} <= set(pins), names - set(pins)
    assert "torch" not in pins               # installed first, per machine (CPU / CUDA)
    entries = re.split(r"\n(?=[A-Za-z0-9])", (REPO / "requirements/lock.txt").read_text())
    assert all("--hash=sha256:" in e for e in entries if re.match(r"[A-Za-z0-9]", e))


def test_conda_environment_is_the_lock():
    env = yaml.safe_load((REPO / "workflow/envs/cmix.yaml").read_text())
    pip = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))
    pinned = dict(p.split("==") for p in pip if "==" in p)
    assert pinned.pop("torch") == "2.13.0"
    assert {norm(k): v for k, v in pinned.items()} == lock_pins()
    assert "python=3.11" in env["dependencies"]


def test_container_installs_the_lock():
    definition = (REPO / "cmix.def").read_text()
    assert "--require-hashes -r /opt/cmix/requirements/lock.txt" in definition
    assert "torch==2.13.0" in definition


def test_license_matches_pyproject():
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert project["license"] == {"text": "MIT"}
    assert (REPO / "LICENSE").read_text().startswith("MIT License\n")
