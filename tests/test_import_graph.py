"""The import graph of ``src/subagents`` has no cycles (issue 27).

Why a test: a circle of imports is a layer that imports from one above it
(docs/architecture.md: "nothing imports from a layer above it"). Hidden inside a function
or under ``TYPE_CHECKING`` it still ties the two layers together: the lower one cannot be
read, tested or moved without the upper one. So every import counts, wherever it is
written: at module level, inside a function or method, and under ``if TYPE_CHECKING:``
(an annotation naming a class of an upper layer is a dependency on it too; the lower layer
states what it needs as a ``Protocol`` instead, as ``runtime/_run_handle.py`` does).
Imports by string (``importlib.import_module``, the lazy exports of ``subagents/__init__``)
are not imports of the code that writes them and are not followed.

An edge ``a -> b`` is written for ``import b``, ``from b import name`` and, when
``b.name`` is a module, ``from b import name`` gives ``a -> b.name`` instead (importing a
submodule through its package). A module importing itself is ignored.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

SRC = Path(__file__).resolve().parent.parent / "src" / "subagents"


def _module_names() -> dict[str, tuple[Path, bool]]:
    """Every module under ``src/subagents`` by dotted name: its path, and whether it is a
    package's ``__init__``."""
    found: dict[str, tuple[Path, bool]] = {}
    for path in sorted(SRC.rglob("*.py")):
        parts = list(path.relative_to(SRC.parent).with_suffix("").parts)
        package = parts[-1] == "__init__"
        if package:
            parts = parts[:-1]
        found[".".join(parts)] = (path, package)
    assert found, f"no sources under {SRC}"
    return found


def _imports(tree: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    """Every import statement of a module, at any depth (functions, classes, ``if
    TYPE_CHECKING:`` blocks, ``try``...)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node


def import_graph() -> dict[str, set[str]]:
    """Module -> the modules of the package it imports."""
    modules = _module_names()
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, (path, package) in modules.items():
        here = name if package else name.rpartition(".")[0]
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in _imports(tree):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                if node.level:
                    base = here.split(".")[: len(here.split(".")) - node.level + 1]
                    source = ".".join([*base, *([node.module] if node.module else [])])
                else:
                    source = node.module or ""
                targets = [
                    f"{source}.{alias.name}" if f"{source}.{alias.name}" in modules else source
                    for alias in node.names
                ]
            graph[name].update(t for t in targets if t in modules and t != name)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each given as
    one circle through it, starting from its first module by name."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                components.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return [_circle(graph, set(component)) for component in sorted(components)]


def _circle(graph: dict[str, set[str]], component: set[str]) -> list[str]:
    """One path from the component's first module back to it, inside the component
    (breadth first: a shortest one)."""
    start = min(component)
    paths = {start: [start]}
    queue = [start]
    while queue:
        node = queue.pop(0)
        for nxt in sorted(graph[node] & component):
            if nxt == start:
                return [*paths[node], start]
            if nxt not in paths:
                paths[nxt] = [*paths[node], nxt]
                queue.append(nxt)
    raise AssertionError(f"{sorted(component)} is not a cycle")


def test_the_graph_sees_imports_at_every_level() -> None:
    """The walk finds an import inside a function and one under TYPE_CHECKING (else the
    test below would pass by seeing nothing)."""
    graph = import_graph()
    assert "subagents.runtime" in graph["subagents.cli.demo_cmd"]  # inside a function only
    assert "subagents.runtime" in graph["subagents"]  # under TYPE_CHECKING only
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c", "a"]]


def test_no_import_cycles() -> None:
    found = cycles(import_graph())
    assert not found, "import cycles:\n" + "\n".join(" -> ".join(c) for c in found)


LOWER = ("actors", "behaviour", "cluster", "definitions", "isolation", "mcp", "models")
LOWER += ("store", "supervision", "tools")
UPPER = ("subagents.runtime", "subagents.cli", "subagents.console")


def test_the_layers_below_the_runtime_do_not_import_it() -> None:
    """``cluster/`` and every layer below the runtime reach it only through what it hands
    them (``runtime/_cluster_backend.py``: the backend protocol, the behaviours function),
    never by importing it or the CLI; no module but the CLI imports the package's public
    face (``subagents/__init__``), which names everything."""
    graph = import_graph()
    upward = sorted(
        f"{module} -> {target}"
        for module, targets in graph.items()
        if module.split(".")[1:2] and module.split(".")[1] in LOWER
        for target in targets
        if target.startswith(UPPER) or target == "subagents"
    )
    assert not upward, "imports from a layer above:\n" + "\n".join(upward)


def test_the_console_is_the_top_layer_nothing_imports() -> None:
    """``console/`` (`subagents serve`) sits above ``cli/``: it opens stores, names runs and
    reads transcripts as the inspecting commands do, by importing them; nothing imports it
    (``cli/main.py`` names its command's module by string, loaded only for `serve`), so the
    other commands never load Starlette or uvicorn."""
    graph = import_graph()
    assert "subagents.cli.state" in graph["subagents.console.feed"]  # the walk sees it
    inward = sorted(
        f"{module} -> {target}"
        for module, targets in graph.items()
        if not module.startswith("subagents.console")
        for target in targets
        if target.startswith("subagents.console")
    )
    assert not inward, "imports of the console from below it:\n" + "\n".join(inward)


def pykka_importers() -> list[str]:
    """The modules outside ``subagents.actors`` that import pykka, at any depth."""
    found = []
    for name, (path, _) in _module_names().items():
        if name == "subagents.actors" or name.startswith("subagents.actors."):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in _imports(tree):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module]
            if any(n is not None and (n == "pykka" or n.startswith("pykka.")) for n in names):
                found.append(name)
                break
    return found


def test_only_the_actors_layer_imports_pykka() -> None:
    """docs/architecture.md: ``actors/`` is the only place that imports pykka (the layers
    above reach actors through it: a pykka type above it ties them to the actor library)."""
    assert pykka_importers() == []
