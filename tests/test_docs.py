"""The documentation: a short README whose test command CI runs, a description for every
config key, a generated reference that lists every subcommand, option and key, no
citation of a document the repository lacks, and a site that builds with warnings as
errors."""

from __future__ import annotations

import argparse
import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _gen():
    spec = importlib.util.spec_from_file_location("gen_reference", ROOT / "docs" / "gen_reference.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


gen = _gen()


def test_readme_is_short():
    n = len((ROOT / "README.md").read_text().splitlines())
    assert n <= 150, f"README.md has {n} lines; keep it <= 150 and move the rest to docs/"


def _readme_test_command() -> str:
    """The README's test command: the line of a code block that runs pytest, without its
    comment."""
    lines = [line.split("#", 1)[0].strip() if " #" in line else line.strip()
             for line in (ROOT / "README.md").read_text().splitlines()
             if "python -m pytest" in line and not line.lstrip().startswith(("-", "`", "|"))]
    assert len(lines) == 1, f"expected one test command in README.md, found {lines}"
    return lines[0]


def test_ci_runs_the_readme_test_command():
    command = _readme_test_command()
    ci = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()]
    assert command in ci, f".ci/run must run the README's test command verbatim: {command!r}"


def test_every_workflow_key_has_a_description():
    schema = gen.load_schema()
    bare = [key for key, node in gen.schema_keys(schema) if not str(node.get("description", "")).strip()]
    assert not bare, f"workflow/schemas/config.schema.yaml: keys without a description: {bare}"


def test_every_train_key_has_a_description_and_the_schema_has_it():
    from cmix.learn.config import DEFAULTS

    described = {k: d for _, _, keys in gen.train_keys() for k, _, d in keys}
    assert set(described) == set(DEFAULTS)
    bare = sorted(k for k, d in described.items() if not d.strip())
    assert not bare, f"cmix/learn/config.py: fields without a comment (their description): {bare}"
    schema = gen.load_schema()
    tc = schema["properties"]["train"]["properties"]["config"]["properties"]
    assert set(tc) == set(DEFAULTS) | {"preset"}, \
        "train.config in the workflow schema and the fields of cmix/learn/config.py differ"
    assert tc["preset"].get("description")


def test_generated_reference_lists_everything(tmp_path):
    cli_md, config_md = (p.read_text() for p in gen.write(tmp_path))
    from cmix.cli import build_parser

    parser = build_parser()
    for name, (_, sub) in gen.subcommands(parser).items():
        assert f"\n## cmix {name}\n" in cli_md, name
        section = cli_md.split(f"\n## cmix {name}\n", 1)[1].split("\n## cmix ", 1)[0]
        for action in sub._actions:
            if isinstance(action, argparse._HelpAction) or action.help == argparse.SUPPRESS:
                continue
            for flag in action.option_strings:
                assert flag in section, f"cmix {name} {flag} missing from the CLI reference"
    for key, _ in gen.schema_keys(gen.load_schema()):
        assert f"| `{key}` |" in config_md, key
    for _, _, keys in gen.train_keys():
        for key, _, _ in keys:
            assert f"| `{key}` |" in config_md, key


def test_committed_reference_is_current(tmp_path):
    for path in gen.write(tmp_path):
        committed = ROOT / "docs" / "reference" / path.name
        assert committed.read_text() == path.read_text(), \
            f"{committed} is out of date: run python docs/gen_reference.py"


def test_docs_requirements_pin_the_docs_extra():
    """CI installs requirements/docs.txt (hash-checked): it holds the docs extra's pins."""
    tomllib = pytest.importorskip("tomllib")          # Python >= 3.11
    extra = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["docs"]
    pinned = (ROOT / "requirements" / "docs.txt").read_text()
    for requirement in extra:
        assert re.search(rf"^{re.escape(requirement)} \\$", pinned, re.M), requirement


# ---------------------------------------------------------------- cited documents

TEXT = (".py", ".md", ".smk", ".yaml", ".yml", ".toml", ".txt", ".cfg")
MD_REF = re.compile(r"(?<![A-Za-z0-9_./:-])((?:\.{1,2}/)?[A-Za-z0-9_][A-Za-z0-9_./-]*\.md)(?![A-Za-z0-9_])")
URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://\S+")
#: (file, citation) pairs left to their files' owners: benchmarks/RESULTS.md still cites
#: the method document by its old name (now docs/method.md); the name is split here so
#: that this file does not cite it too


def _tracked() -> list:
    out = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True)
    if out.returncode:
        pytest.skip("not a git checkout")
    return [f for f in out.stdout.splitlines() if f.endswith(TEXT) or Path(f).name == "Snakefile"]


def test_no_file_cites_a_missing_document():
    """Every *.md a tracked text file names exists: relative to the file, to the
    repository root or to docs/ (where MkDocs resolves its nav), or, for a bare file
    name, as the one tracked file of that name."""
    files = _tracked()
    names: dict = {}
    for f in files:
        names.setdefault(Path(f).name, []).append(f)
    missing = []
    for f in files:
        path = ROOT / f
        if not path.is_file():
            continue
        for n, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            for ref in MD_REF.findall(URL.sub("", line)):
                target = ref.split("#", 1)[0]
                if any((base / target).is_file()
                       and (base / target).resolve().is_relative_to(ROOT.resolve())
                       for base in (path.parent, ROOT, ROOT / "docs")):
                    continue
                if "/" not in target and len(names.get(target, [])) == 1:
                    continue
                missing.append(f"{f}:{n}: {ref}")
    assert not missing, "documents cited but not in the repository:\n" + "\n".join(missing)


def test_site_builds_strict(tmp_path):
    pytest.importorskip("mkdocs")
    pytest.importorskip("material")
    out = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-q",
                          "-d", str(tmp_path / "site")], cwd=ROOT, capture_output=True,
                         text=True, env={**__import__("os").environ, "NO_MKDOCS_2_WARNING": "1"})
    assert out.returncode == 0, out.stdout + out.stderr
