"""The package layers: cmix.genotypes never reaches cmix.learn, and no module imports
another module's private names."""

import ast
import subprocess
import sys
from pathlib import Path

PKG = Path(__file__).resolve().parent.parent / "cmix"


def _imports(path: Path):
    """(absolute module imported, names imported) for every import in a cmix module."""
    package = ["cmix", *path.relative_to(PKG).parent.parts]
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            yield module, [a.name for a in node.names]
        elif isinstance(node, ast.Import):
            for a in node.names:
                yield a.name, []


def _targets(module: str, names: list[str]) -> list[str]:
    """The modules an import statement reaches (``from cmix import learn`` reaches cmix.learn)."""
    return [module] + [f"{module}.{n}" for n in names]


def test_genotypes_never_imports_learn_cli_or_simulate():
    bad = []
    for path in sorted((PKG / "genotypes").glob("*.py")):
        for module, names in _imports(path):
            for target in _targets(module, names):
                if target.startswith(("cmix.learn", "cmix.cli", "cmix.simulate", "cmix.report")):
                    bad.append(f"{path.name}: {target}")
    assert not bad, bad


def test_learn_never_imports_cli_simulate_or_report():
    bad = [f"{p.name}: {t}" for p in sorted((PKG / "learn").glob("*.py"))
           for m, n in _imports(p) for t in _targets(m, n)
           if t.startswith(("cmix.cli", "cmix.simulate", "cmix.report"))]
    assert not bad, bad


def test_no_private_names_cross_modules():
    bad = [f"{p.relative_to(PKG)}: {m}.{name}" for p in sorted(PKG.rglob("*.py"))
           for m, names in _imports(p) if m.startswith("cmix")
           for name in names if name.startswith("_") and name != "__version__"]
    assert not bad, bad


def _module_aliases(path: Path) -> set[str]:
    """Local names bound to cmix modules in a module (``from . import phenotypes as ph``,
    ``from .. import simulate as sim``, ``import cmix.io as io``)."""
    package = ["cmix", *path.relative_to(PKG).parent.parts]
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level and not node.module:
            names |= {a.asname or a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level:
            base = package[: len(package) - node.level + 1]
            parent = PKG.parent.joinpath(*base, *node.module.split("."))
            names |= {a.asname or a.name for a in node.names
                      if (parent / f"{a.name}.py").exists()}
        elif isinstance(node, ast.Import):
            names |= {a.asname for a in node.names if a.name.startswith("cmix") and a.asname}
    return names


def test_no_private_attribute_of_another_module():
    """``ph._numeric`` on a module alias is a private name crossing modules too."""
    bad = []
    for path in sorted(PKG.rglob("*.py")):
        aliases = _module_aliases(path)
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                    and node.value.id in aliases and node.attr.startswith("_")
                    and not node.attr.startswith("__")):
                bad.append(f"{path.relative_to(PKG)}:{node.lineno}: {node.value.id}.{node.attr}")
    assert not bad, bad


def test_importing_every_genotype_step_loads_nothing_of_learn_or_torch():
    modules = [f"cmix.genotypes.{p.stem}" for p in sorted((PKG / "genotypes").glob("*.py"))
               if p.stem != "__init__"]
    code = ("import importlib, sys\n"
            f"for m in {modules!r}: importlib.import_module(m)\n"
            "print(sorted(m for m in sys.modules if m.startswith('cmix.learn') or m == 'torch'))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=PKG.parent, check=True).stdout.strip()
    assert out == "[]", out
