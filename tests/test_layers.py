"""The layers of docs/architecture.md, checked: every import of every module of ours (those inside
functions too), read with ``ast``, goes to the module's own layer or a lower one, and no modules
import each other in a loop. A failure names the import's file and line."""
from __future__ import annotations

import ast
import re
from fnmatch import fnmatchcase
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "architecture.md"
PACKAGES = ("curate", "annotate", "scoring", "generate", "schemas")


def layer_table(text: str) -> list[tuple[str, list[str]]]:
    """(layer name, module patterns) per row of the doc's layer table, lowest layer first."""
    block = re.search(r"<!-- layers:.*?-->(.*?)<!-- /layers -->", text, re.S)
    assert block, f"{DOC}: no layer table between <!-- layers: ... --> and <!-- /layers -->"
    rows = []
    for line in block.group(1).splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 3 and cells[0].isdigit():
            rows.append((f"{cells[0]} ({cells[1].split(':')[0]})", re.findall(r"`([^`]+)`", cells[2])))
    return rows


def matches(module: str, pattern: str) -> bool:
    """``X`` names X; ``X.*`` names X and everything under it; other globs as fnmatch reads them."""
    return fnmatchcase(module, pattern) or (pattern.endswith(".*") and module == pattern[:-2])


def layer_of(module: str, table) -> int | None:
    """The highest layer any pattern of which names ``module``; None when none does."""
    found = [i for i, (_, patterns) in enumerate(table) if any(matches(module, p) for p in patterns)]
    return max(found, default=None)


def our_modules() -> dict[str, Path]:
    """Dotted module name -> file, for every module of our packages."""
    out = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def imports(module: str, source: str, known) -> list[tuple[str, int]]:
    """(module of ours imported, line) for every import statement in ``source``, wherever it is.
    ``from X import name`` imports the module ``X.name`` when there is one, else ``X``."""
    is_package = module in known and known[module].name == "__init__.py"
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                here = module.split(".") if is_package else module.split(".")[:-1]
                here = here[:len(here) - (node.level - 1)]
                base = ".".join(here + ([base] if base else []))
            targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base for alias in node.names]
        else:
            continue
        for target in targets:
            while target and target not in known:  # ``import a.b.c`` of a name inside a module
                target = target.rpartition(".")[0]
            if target and target != module and (target, node.lineno) not in out:
                out.append((target, node.lineno))
    return out


def import_graph(sources: dict[str, tuple[str, str]]) -> dict[str, list[tuple[str, str, int]]]:
    """module -> [(imported module, file, line)], from module -> (file name, source text)."""
    known = {m: Path(f) for m, (f, _) in sources.items()}
    return {m: [(t, f, line) for t, line in imports(m, text, known)] for m, (f, text) in sources.items()}


def upward_imports(graph, table) -> list[str]:
    problems = []
    for module, targets in sorted(graph.items()):
        for target, file, line in targets:
            mine, theirs = layer_of(module, table), layer_of(target, table)
            if mine is not None and theirs is not None and theirs > mine:
                problems.append(f"{file}:{line}: {module} (layer {table[mine][0]}) imports {target} "
                                f"(layer {table[theirs][0]}), a higher layer")
    return problems


def path_between(graph, start: str, goal: str) -> list[str] | None:
    """The modules on one import path from ``start`` to ``goal`` (breadth first), or None."""
    previous, frontier = {start: None}, [start]
    while frontier:
        following = []
        for module in frontier:
            if module == goal:
                path = []
                while module is not None:
                    path.append(module)
                    module = previous[module]
                return path[::-1]
            for target, _, _ in graph.get(module, []):
                if target not in previous:
                    previous[target] = module
                    following.append(target)
        frontier = following
    return None


def import_loops(graph) -> list[str]:
    """Each import that closes a loop: it goes to a module that imports its importer back."""
    problems = []
    for module, targets in sorted(graph.items()):
        for target, file, line in targets:
            back = path_between(graph, target, module)
            if back:
                problems.append(f"{file}:{line}: {module} imports {target}, which imports it back "
                                f"({' -> '.join(back)})")
    return problems


def sources_of_ours() -> dict[str, tuple[str, str]]:
    return {m: (str(p.relative_to(ROOT)), p.read_text(encoding="utf-8")) for m, p in our_modules().items()}


def test_every_module_is_in_a_layer():
    table = layer_table(DOC.read_text(encoding="utf-8"))
    assert len(table) >= 5
    missing = [f"{p.relative_to(ROOT)} ({m})" for m, p in our_modules().items() if layer_of(m, table) is None]
    assert not missing, f"modules in no layer of {DOC.relative_to(ROOT)} (add each to its row): {', '.join(missing)}"


def test_no_import_goes_up_a_layer():
    problems = upward_imports(import_graph(sources_of_ours()), layer_table(DOC.read_text(encoding="utf-8")))
    assert not problems, "imports against the layers of docs/architecture.md:\n" + "\n".join(problems)


def test_no_import_loops():
    problems = import_loops(import_graph(sources_of_ours()))
    assert not problems, "import loops:\n" + "\n".join(problems)


def test_the_checks_catch_an_upward_import_and_a_loop_inside_a_function():
    """The checks themselves, on a made-up tree: an import inside a function counts, a relative
    one is resolved, and ``from package import module`` is the module."""
    table = [("0 (low)", ["low", "low.*"]), ("1 (high)", ["high.*", "*.cli"])]
    sources = {
        "low": ("low/__init__.py", ""),
        "low.a": ("low/a.py", "def f():\n    from high.b import thing\n"),
        "low.cli": ("low/cli.py", "from high import b\n"),
        "high": ("high/__init__.py", ""),
        "high.b": ("high/b.py", "from . import c\nthing = 1\n"),
        "high.c": ("high/c.py", "import high.b\n"),
    }
    graph = import_graph(sources)
    assert upward_imports(graph, table) == [
        "low/a.py:2: low.a (layer 0 (low)) imports high.b (layer 1 (high)), a higher layer"]
    assert import_loops(graph) == ["high/b.py:1: high.b imports high.c, which imports it back (high.c -> high.b)",
                                   "high/c.py:1: high.c imports high.b, which imports it back (high.b -> high.c)"]
