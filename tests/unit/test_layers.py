"""The package layout is the architecture: one layer per package, imports flowing one way.

Layers are ranked (docs/architecture.md); a module may import its own layer and the ones ranked
below it, never one above. Imports inside functions count too (``LAZY_UPWARD`` is empty: a class
a dataset.yaml names is looked up by name in stoker's export table, not imported). Imports under
``TYPE_CHECKING`` are never executed and may name any layer. Imports, counting those inside
functions, form no circle, except the few edges named in ``LAZY_CIRCLE_EDGES``.
"""

from __future__ import annotations

import ast
import dataclasses
import pathlib

import pytest

SRC = pathlib.Path(__file__).resolve().parents[2] / "src" / "stoker"

#: Rank of each layer: imports go to the same rank or lower.
RANKS = {
    "errors": 0,
    "storage": 1,
    "format": 2,
    "metadataset": 3,
    "plan": 3,
    "media": 4,
    "pipeline": 5,
    "model": 6,
    "sources": 6,
    "runtime": 7,
    "wrappers": 8,
    "flavors": 8,
    "api": 9,
    "energon_alias": 9,
    "integrations": 9,
    "cli": 9,
    "preview": 9,
    "__init__": 9,
}

#: Modules allowed outside a layer package: the package's entry points and the exception tree.
TOP_LEVEL = {"__init__.py", "errors.py"}

#: Imports inside functions that go up a layer on purpose: (importer, imported, why).
LAZY_UPWARD: set[tuple[str, str, str]] = set()

#: Imports inside functions that close a circle on purpose: (importer, imported, why).
LAZY_CIRCLE_EDGES = {
    (
        "stoker.storage",
        "stoker.storage.epath",
        "open_store('dss://...') resolves the path as EPath does; EPath opens stores",
    ),
    (
        "stoker.energon_alias.hook",
        "stoker.energon_alias",
        "a spawned child installs the alias before it loads anything else",
    ),
}


@dataclasses.dataclass(frozen=True)
class Edge:
    importer: str
    imported: str
    lazy: bool
    typing_only: bool
    line: int


def _module_name(path: pathlib.Path) -> str:
    parts = list(path.relative_to(SRC.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, pathlib.Path]:
    return {_module_name(p): p for p in SRC.rglob("*.py")}


def _resolve(name: str, modules: dict[str, pathlib.Path]) -> str | None:
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def _edges() -> list[Edge]:
    modules = _modules()
    edges = []
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        edges += _EdgeFinder(name, package, modules).run(ast.parse(path.read_text()))
    return edges


class _EdgeFinder(ast.NodeVisitor):
    def __init__(self, name: str, package: str, modules: dict[str, pathlib.Path]) -> None:
        self.name, self.package, self.modules = name, package, modules
        self.depth, self.typing = 0, 0
        self.found: list[Edge] = []

    def run(self, tree: ast.Module) -> list[Edge]:
        self.visit(tree)
        return self.found

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        self.depth += 1
        self.generic_visit(node)
        self.depth -= 1

    visit_AsyncFunctionDef = visit_FunctionDef  # type: ignore[assignment]

    def visit_If(self, node: ast.If) -> None:
        typing_only = isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"
        self.typing += typing_only
        for child in node.body:
            self.visit(child)
        self.typing -= typing_only
        for child in node.orelse:
            self.visit(child)

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self._add(alias.name, node.lineno)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        base = node.module or ""
        if node.level:
            parts = self.package.split(".")[: len(self.package.split(".")) - node.level + 1]
            base = ".".join([*parts, *([node.module] if node.module else [])])
        for alias in node.names:
            self._add(f"{base}.{alias.name}", node.lineno)

    def _add(self, target: str, line: int) -> None:
        if not target.startswith("stoker"):
            return
        imported = _resolve(target, self.modules)
        if imported and imported != self.name:
            self.found.append(Edge(self.name, imported, self.depth > 0, self.typing > 0, line))


def _layer(module: str) -> str:
    parts = module.split(".")
    if len(parts) == 1:
        return "__init__"
    return parts[1]


def test_every_module_is_in_a_ranked_layer() -> None:
    stray = sorted(p.name for p in SRC.glob("*.py") if p.name not in TOP_LEVEL)
    assert not stray, f"modules outside a layer package: {stray}"
    unranked = sorted({_layer(m) for m in _modules()} - RANKS.keys())
    assert not unranked, f"packages missing from RANKS (and docs/architecture.md): {unranked}"


def test_imports_flow_down() -> None:
    allowed = {(a, b) for a, b, _ in LAZY_UPWARD}
    upward = [
        f"{e.importer}:{e.line} imports {e.imported}"
        for e in _edges()
        if not e.typing_only
        and RANKS[_layer(e.imported)] > RANKS[_layer(e.importer)]
        and not (e.lazy and (e.importer, e.imported) in allowed)
    ]
    assert not upward, "imports going up a layer:\n" + "\n".join(upward)


def test_lazy_exceptions_are_all_used() -> None:
    used = {(e.importer, e.imported) for e in _edges() if e.lazy}
    listed = [*LAZY_UPWARD, *LAZY_CIRCLE_EDGES]
    stale = [(a, b) for a, b, _ in listed if (a, b) not in used]
    assert not stale, f"LAZY_UPWARD / LAZY_CIRCLE_EDGES list imports that no longer exist: {stale}"


def _import_graph(lazy: bool) -> dict[str, set[str]]:
    """Who imports whom when run: top-level imports, and with ``lazy`` those in functions too
    (but for the edges of ``LAZY_CIRCLE_EDGES``)."""
    skip = {(a, b) for a, b, _ in LAZY_CIRCLE_EDGES}
    graph: dict[str, set[str]] = {}
    for e in _edges():
        if e.typing_only or _layer(e.importer) == "__init__":
            continue
        if e.lazy and (not lazy or (e.importer, e.imported) in skip):
            continue
        graph.setdefault(e.importer, set()).add(e.imported)
    return graph


@pytest.mark.parametrize("lazy", [False, True], ids=["top-level", "with-function-imports"])
def test_no_import_circles(lazy: bool) -> None:
    circle = _find_circle(_import_graph(lazy))
    assert circle is None, "import circle: " + " -> ".join(circle or [])


def _find_circle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt) :], nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return None


@pytest.mark.parametrize(
    ("graph", "expected"),
    [({"a": {"b"}, "b": {"c"}}, None), ({"a": {"b"}, "b": {"a"}}, ["a", "b", "a"])],
)
def test_circle_finder(graph: dict[str, set[str]], expected: list[str] | None) -> None:
    assert _find_circle(graph) == expected


def test_function_level_imports_are_in_the_circle_check() -> None:
    """The second circle check sees edges the first does not (imports inside functions)."""
    top, every = _import_graph(False), _import_graph(True)
    extra = {(a, b) for a, targets in every.items() for b in targets} - {
        (a, b) for a, targets in top.items() for b in targets
    }
    assert extra, "no function-level import reached the circle check"
    assert _find_circle({**every, "stoker.x": {"stoker.y"}, "stoker.y": {"stoker.x"}})
