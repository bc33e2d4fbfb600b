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
        assert f'| <a id="{gen.key_anchor(key)}"></a>`{key}` |' in config_md, key
    for _, _, keys in gen.train_keys():
        for key, _, _ in keys:
            assert f"`{key}` |" in config_md, key


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


def _check_render():
    spec = importlib.util.spec_from_file_location("check_render", ROOT / "docs" / "check_render.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


check_render = _check_render()


def test_list_layout_check_finds_the_lists_markdown_breaks():
    """The two ways a list leaves its layout in Python-Markdown, and layouts that render
    as written."""
    broken = ("1. Install:\n\n   ```bash\n   cmix install-profile slurm\n   ```\n\n"
              "   It is described in the guide.\n2. Run it.\n")
    assert [line for line, _ in check_render.list_layout_problems(broken)] == [3, 8]
    joined = "A paragraph:\n- **conda**: an environment\n"
    assert [line for line, _ in check_render.list_layout_problems(joined)] == [2]
    after_paragraph = ("1. Install:\n\n    ```bash\n    cmix\n    ```\n\n    Described.\n"
                       "2. Run it.\n")
    assert [line for line, _ in check_render.list_layout_problems(after_paragraph)] == [8]
    good = ("Text.\n\n1. Install:\n\n    ```bash\n    cmix install-profile slurm\n    ```\n\n"
            "    It is described\n    in the guide.\n\n2. Run it,\n   on two lines.\n"
            "3. Stop.\n\n# Heading\n- a\n- b\n\nAfter the list.\n")
    assert check_render.list_layout_problems(good) == []
    assert [line for line, _ in check_render.list_layout_problems("- a\n\n  more\n")] == [3]


def test_every_docs_page_lays_its_lists_out_as_written():
    found = [f"{path.relative_to(ROOT)}:{line}: {why}"
             for path in sorted((ROOT / "docs").rglob("*.md"))
             for line, why in check_render.list_layout_problems(path.read_text())]
    assert not found, "\n".join(found)


@pytest.mark.skipif(check_render.shutil.which("chromium") is None, reason="needs chromium")
def test_render_check_sees_what_a_reader_sees(tmp_path):
    """On a laid-out page in headless Chromium: a code line past the page's edge, a
    table key broken inside a name and a list item run into a paragraph are found; the
    same page with the site's stylesheet and hook applied is clean."""
    sys.path.insert(0, str(ROOT / "docs"))
    import hooks

    long_line = "pip install torch==2.13.0   # " + "a comment that runs on " * 8
    rows = "".join(f"<tr><td><code>simulate.n_samples_{i}_of_a_long_key</code></td>"
                   f"<td>{'word ' * 30}</td></tr>" for i in range(3))
    body = (f'<div class="md-typeset"><pre><code>{long_line}</code></pre>'
            f'<div class="md-typeset__scrollwrap"><table style="width: 300px">{rows}</table></div>'
            "<p>It is described in the guide. 3. One trait at a time.</p></div>")
    css = (ROOT / "docs" / "stylesheets" / "extra.css").read_text()
    site = tmp_path / "site"
    site.mkdir()
    base = ("<style>body{width:700px} pre>code{display:block;overflow:auto} "
            ".md-typeset table code{word-break:break-all}</style>")
    (site / "bad.html").write_text(f"<html><head>{base}</head><body>{body}</body></html>")
    problems = check_render.check_site(site)
    assert any("code block wider than the page" in p for p in problems), problems
    assert any("table code broken inside a name" in p for p in problems), problems
    assert any("a list item runs into a paragraph" in p for p in problems), problems
    good = hooks.on_page_content(body.replace(" 3. One trait at a time.", ""))
    (site / "bad.html").unlink()
    (site / "good.html").write_text(
        f"<html><head>{base}<style>{css}</style></head><body>{good}</body></html>")
    assert check_render.check_site(site) == []
