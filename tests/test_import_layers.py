"""Imports among ``milepost`` modules run one way: no module reaches, directly or through others, back to itself.

The graph is read from the source with :mod:`ast` (nothing is imported), so it sees every import a reader sees:
module level and inside functions, relative (``from ..x import y``) and package-style (``from milepost.a import b``
where ``b`` is a submodule). Imports under ``if TYPE_CHECKING:`` count too: a module that names a higher layer's
type in its annotations still reads as depending on it, and the rule is that a module does not import a module
that imports it. Importing ``milepost.a.b`` also runs ``milepost/a/__init__``; that is the package's edge to
its own imports, not an edge of the importer, so it is not added.

A cycle is a strongly connected component of more than one module (or a module importing itself). Each failure
prints the component and one concrete loop through it, e.g. ``milepost.a -> milepost.b -> milepost.a``.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = "milepost"
ROOT = Path(__file__).resolve().parents[1] / PACKAGE

# Cycles that another branch breaks; each entry names the branch and is removed when it merges.
KNOWN: set[frozenset[str]] = set()


def module_names(root: Path = ROOT) -> dict[str, Path]:
    """Dotted name -> file for every module under ``root`` (a package's ``__init__`` is the package itself)."""
    names: dict[str, Path] = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        names[".".join(parts)] = path
    return names


def _imports(tree: ast.AST) -> list[ast.Import | ast.ImportFrom]:
    """Every import statement in ``tree``, at any depth (module level, functions, ``if TYPE_CHECKING:``)."""
    return [node for node in ast.walk(tree) if isinstance(node, (ast.Import, ast.ImportFrom))]


def _resolve(name: str, modules: dict[str, Path]) -> str | None:
    """The longest milepost module that ``name`` is or lies inside (``milepost.a.b.C`` -> ``milepost.a.b``)."""
    parts = name.split(".")
    while parts:
        candidate = ".".join(parts)
        if candidate in modules:
            return candidate
        parts.pop()
    return None


def import_graph(modules: dict[str, Path] | None = None) -> dict[str, set[str]]:
    """Module -> the milepost modules it imports (packages count as their ``__init__``)."""
    modules = module_names() if modules is None else modules
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        is_package = path.name == "__init__.py"
        package = name if is_package else name.rpartition(".")[0]
        for node in _imports(ast.parse(path.read_text(), filename=str(path))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                if node.level:
                    base_parts = package.split(".")
                    base_parts = base_parts[: len(base_parts) - (node.level - 1)]
                    base = ".".join(base_parts + ([node.module] if node.module else []))
                else:
                    base = node.module or ""
                # `from pkg import sub` imports the submodule when one exists, else a name from pkg itself.
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
            for target in targets:
                if not target.startswith(PACKAGE):
                    continue
                resolved = _resolve(target, modules)
                if resolved is not None and resolved != name:
                    graph[name].add(resolved)
                # Importing milepost.a.b runs milepost/a/__init__ first, but that is a package edge, not this
                # module's dependency on the package's contents; the package's own imports are its edges.
    return graph


def strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's components, iteratively (the graph has hundreds of nodes; recursion depth is not a worry, but the
    iterative form keeps the test independent of the interpreter's limit)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    components: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work: list[tuple[str, list[str]]] = [(root, sorted(graph[root]))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, pending = work[-1]
            if pending:
                nxt = pending.pop(0)
                if nxt not in index:
                    index[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, sorted(graph[nxt])))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                components.append(sorted(component))
    return components


def one_loop(graph: dict[str, set[str]], component: list[str]) -> list[str]:
    """A shortest loop from the component's first module back to itself, for the failure message."""
    members = set(component)
    start = component[0]
    previous: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for nxt in sorted(graph[node] & members):
                if nxt == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(previous[path[-1]])
                    return [start, *reversed(path[:-1]), start] if len(path) > 1 else [start, start]
                if nxt not in previous:
                    previous[nxt] = node
                    following.append(nxt)
        frontier = following
    return component


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    return sorted(c for c in strongly_connected(graph) if len(c) > 1 or c[0] in graph[c[0]])


@pytest.fixture(scope="module")
def graph() -> dict[str, set[str]]:
    return import_graph()


def test_graph_reads_the_package(graph: dict[str, set[str]]) -> None:
    # A handful of edges any reader can confirm, so the checker cannot pass by reading nothing.
    assert "milepost.registry" in graph["milepost.envs"]  # from milepost.registry import Registry
    assert {"milepost.envs.sudoku.render", "milepost.envs.sudoku.state"} <= graph["milepost.envs.sudoku.rules"]
    assert "milepost.envs.sudoku.state" in graph["milepost.envs.sudoku.render"]  # under TYPE_CHECKING
    assert "milepost.distributed.rollout" in graph["milepost.training.trainer"]  # inside a method
    assert sum(len(targets) for targets in graph.values()) > 300


def test_checker_finds_a_planted_cycle(tmp_path: Path) -> None:
    pkg = tmp_path / PACKAGE
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from milepost.sub import b\n")
    # function-level and relative imports both count
    (pkg / "sub" / "b.py").write_text("def f():\n    from .. import c\n")
    (pkg / "c.py").write_text("from . import a\n")
    # an annotation-only import still counts; a one-way import is no cycle
    (pkg / "d.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from milepost.e import E\n")
    (pkg / "e.py").write_text("import milepost.d\n")
    (pkg / "f.py").write_text("from milepost.sub.b import f\n")
    graph = import_graph(module_names(pkg))
    found = cycles(graph)
    assert found == [["milepost.a", "milepost.c", "milepost.sub.b"], ["milepost.d", "milepost.e"]]
    assert one_loop(graph, found[0]) == ["milepost.a", "milepost.sub.b", "milepost.c", "milepost.a"]


def test_no_import_cycles(graph: dict[str, set[str]]) -> None:
    found = [c for c in cycles(graph) if frozenset(c) not in KNOWN]
    if found:
        lines = [f"{len(found)} import cycle(s) among {PACKAGE} modules:"]
        for component in found:
            lines.append(f"  {{{', '.join(component)}}}")
            lines.append(f"    e.g. {' -> '.join(one_loop(graph, component))}")
        pytest.fail("\n".join(lines))


def test_known_exceptions_are_still_cycles(graph: dict[str, set[str]]) -> None:
    """An exception that no longer holds is deleted, so it cannot hide a new cycle among the same modules."""
    current = {frozenset(c) for c in cycles(graph)}
    assert current >= KNOWN, f"no longer cycles, remove from KNOWN: {sorted(map(sorted, KNOWN - current))}"
