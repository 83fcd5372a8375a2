"""The package layout: no import cycles, no reaching into another sub-package's privates.

Read from the source with :mod:`ast` (nothing is imported), so a new cycle or a new
cross-package private import fails here with the modules named. Imports under
``if TYPE_CHECKING:`` are left out: they never run.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "streamk"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in PACKAGE.rglob("*.py")}


def _compiled() -> set[str]:
    """Modules of the optional compiled core: leaves of the graph (no Python imports)."""
    return {_module_name(p) for p in PACKAGE.rglob("*.pyx")}


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(path: Path, module: str) -> list[tuple[str, list[str], int]]:
    """``(imported module, names, line)`` for every import that runs, resolved to absolute."""
    tree = ast.parse(path.read_text(), filename=str(path))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: list[tuple[str, list[str], int]] = []

    def visit(body: list[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, ast.If) and _is_type_checking(node):
                visit(node.orelse)
                continue
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")
                    base = base[: len(base) - (node.level - 1)]
                    target = ".".join(base + ([node.module] if node.module else []))
                else:
                    target = node.module or ""
                found.append((target, [a.name for a in node.names], node.lineno))
            elif isinstance(node, ast.Import):
                found.extend((a.name, [], node.lineno) for a in node.names)
            for field in ("body", "orelse", "finalbody", "handlers"):
                inner = getattr(node, field, None)
                if isinstance(inner, list) and not isinstance(node, ast.If | ast.ImportFrom):
                    visit([n for n in inner if isinstance(n, ast.stmt | ast.ExceptHandler)])
                elif isinstance(node, ast.If) and isinstance(inner, list):
                    visit(inner)
            if isinstance(node, ast.ExceptHandler):
                visit(node.body)

    visit(tree.body)
    return found


def _edges(top_level_only: bool) -> dict[str, set[str]]:
    """Module -> modules it imports. ``top_level_only``: imports at module level only
    (the ones that run at import time, where a cycle breaks start-up)."""
    mods = _modules()
    compiled = _compiled()
    graph: dict[str, set[str]] = {m: set() for m in mods}
    for mod, path in mods.items():
        tree = ast.parse(path.read_text())
        top_lines = {n.lineno for n in tree.body}
        for target, names, line in _imports(path, mod):
            if top_level_only and line not in top_lines:
                continue
            for cand in [f"{target}.{n}" for n in names] + [target]:
                if cand in compiled:
                    break
                if cand in mods and cand != mod:
                    graph[mod].add(cand)
                    break
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    counter = [0]

    def strong(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            strong(v)
    return out


#: private to the package as a whole, for every part: the compiled core and the version
_PACKAGE_PRIVATE = {"streamk._core", "streamk._version"}


def _package_of(module: str) -> str:
    """The sub-package a module belongs to (``streamk.engine``), or the module itself."""
    parts = module.split(".")
    return ".".join(parts[:2])


def test_no_import_cycle_between_modules():
    """No module imports itself back through others, at import time or lazily."""
    cycles = _cycles(_edges(top_level_only=False))
    assert not cycles, f"import cycles: {cycles}"


def test_no_private_names_across_sub_packages():
    """A sub-package uses another's public names only (a leading ``_`` stays home)."""
    bad = []
    for mod, path in _modules().items():
        for target, names, line in _imports(path, mod):
            if not target.startswith("streamk") or _package_of(target) == _package_of(mod):
                continue
            if target in _PACKAGE_PRIVATE:
                continue
            for name in names:
                if f"{target}.{name}" in _PACKAGE_PRIVATE:
                    continue
                if name.startswith("_") and not name.startswith("__"):
                    bad.append(f"{path.relative_to(PACKAGE.parent)}:{line} {target}.{name}")
            if any(part.startswith("_") for part in target.split(".")[2:]):
                bad.append(f"{path.relative_to(PACKAGE.parent)}:{line} {target}")
    assert not bad, "private names used across sub-packages:\n" + "\n".join(bad)


def test_few_loose_modules():
    """The package's top level holds only what every part uses (issue 14: at most 6), and
    docs/architecture.md names each of them (it had left ``randomness.py`` out)."""
    loose = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert len(loose) <= 6, loose
    text = (PACKAGE.parent / "docs" / "architecture.md").read_text()
    said = text[text.index("At the top level only") :].split("\n\n", 1)[0]
    named = set(re.findall(r"`(\w+\.pyx?)`", said))
    assert named == set(loose) | {p.name for p in PACKAGE.glob("_core.pyx")}, named


@pytest.mark.parametrize(
    "graph, expected",
    [
        ({"a": {"b"}, "b": {"a"}, "c": set()}, [["a", "b"]]),
        ({"a": {"b"}, "b": {"c"}, "c": set()}, []),
        ({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}, [["a", "b", "c"]]),
    ],
)
def test_cycle_finder_finds_cycles(graph, expected):
    """The checker itself: it reports a planted cycle and nothing else."""
    assert _cycles(graph) == expected
