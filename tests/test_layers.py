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


def _module_name(path: Path) -> str:
    parts = ["cmix", *path.relative_to(PKG).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph() -> dict[str, set[str]]:
    """{cmix module: the cmix modules it imports}, from every import statement in it
    (module level or inside a function). ``from . import x`` reaches the module x when
    there is one, else the package it names from."""
    modules = {_module_name(p): p for p in sorted(PKG.rglob("*.py"))}
    graph = {}
    for name, path in modules.items():
        edges = set()
        for module, names in _imports(path):
            for target in _targets(module, names)[1:] or [module]:
                reached = target if target in modules else module
                if reached in modules and reached != name:
                    edges.add(reached)
        graph[name] = edges
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle as [a, b, ..., a], or None (depth-first search)."""
    state, stack = {}, []

    def visit(node):
        state[node] = "open"
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == "open":
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        stack.pop()
        state[node] = "done"
        return None

    for node in sorted(graph):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return None


def test_the_cycle_finder_finds_a_cycle():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": {"c"}, "d": {"a", "c"}}) is None


def test_the_import_graph_sees_function_level_and_package_imports():
    graph = import_graph()
    assert "cmix.genotypes.sources" in graph["cmix.genotypes.store"]
    assert "cmix.genotypes.phenotypes" in graph["cmix.genotypes.store"]   # from . import x


def test_no_import_cycle():
    """No cmix module reaches itself through imports, at module level or in a function."""
    cycle = find_cycle(import_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def _protocol_members(protocol) -> set[str]:
    names = set()
    for klass in protocol.__mro__:
        if klass.__module__ == "cmix.genotypes.sources":
            names |= set(getattr(klass, "__annotations__", {}))
            names |= {n for n in vars(klass) if not n.startswith("_")}
    return names


def test_every_reader_is_a_genotype_source():
    """The readers and the per-chromosome set carry every member of the source protocol
    (hard-call readers also the packed one), and say what they hold in the layer's names."""
    import dataclasses

    from cmix.genotypes import sources
    from cmix.genotypes.bgen import BgenFile
    from cmix.genotypes.pgen import Pfile
    from cmix.genotypes.plink import Bfile

    for cls, protocol in ((Bfile, sources.PackedSource), (Pfile, sources.PackedSource),
                          (sources.ChromSet, sources.PackedSource),
                          (BgenFile, sources.GenotypeSource)):
        fields = {f.name for f in dataclasses.fields(cls)}
        missing = sorted(n for n in _protocol_members(protocol)
                         if not hasattr(cls, n) and n not in fields)
        assert not missing, f"{cls.__name__} lacks {missing}"
    assert [c.encoding for c in (Bfile, Pfile, BgenFile)] == list(sources.ENCODINGS)


MAX_FUNCTION_LINES = 100
# Functions still over MAX_FUNCTION_LINES, by "module path:function". This list should
# only shrink: split a function into named steps and remove it here; never add to it.
LONG_FUNCTIONS_ALLOWED: set[str] = set()


def _long_functions(root: Path, max_lines: int) -> dict[str, int]:
    """{"module path:qualified name": lines} of every function or method under ``root``
    whose definition (decorators excluded, docstring included) spans more than
    ``max_lines`` lines."""
    found = {}
    for path in sorted(root.rglob("*.py")):
        def visit(node, prefix):
            for child in ast.iter_child_nodes(node):
                if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    name = f"{prefix}{child.name}"
                    if not isinstance(child, ast.ClassDef):
                        n_lines = child.end_lineno - child.lineno + 1
                        if n_lines > max_lines:
                            found[f"{path.relative_to(root)}:{name}"] = n_lines
                    visit(child, f"{name}.")
        visit(ast.parse(path.read_text()), "")
    return found


def test_long_functions_finds_a_planted_long_method(tmp_path):
    """A 12-line method (counted from its text) and a function nested in it are named
    with their class; a 3-line function is not."""
    body = "".join(f"        x{k} = {k}\n" for k in range(8))
    src = ("import os\n\n\nclass C:\n    @staticmethod\n    def long():\n" + body
           + "        def inner():\n            return 1\n        return inner\n\n\n"
           "def short():\n    y = 1\n    return y\n")
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "m.py").write_text(src)
    lines = src.splitlines()
    first = lines.index("    def long():")
    last = lines.index("        return inner")
    assert _long_functions(tmp_path, 3) == {"pkg/m.py:C.long": last - first + 1}
    assert _long_functions(tmp_path, 1) == {"pkg/m.py:C.long": last - first + 1,
                                            "pkg/m.py:C.long.inner": 2, "pkg/m.py:short": 3}


def test_no_function_over_100_lines():
    long = _long_functions(PKG, MAX_FUNCTION_LINES)
    new = {k: v for k, v in long.items() if k not in LONG_FUNCTIONS_ALLOWED}
    assert not new, ("functions over %d lines (split them into named steps): %s"
                     % (MAX_FUNCTION_LINES, ", ".join(f"{k} ({v})" for k, v in sorted(new.items()))))
    stale = sorted(LONG_FUNCTIONS_ALLOWED - set(long))
    assert not stale, f"no longer over {MAX_FUNCTION_LINES} lines; remove from the allow-list: {stale}"
