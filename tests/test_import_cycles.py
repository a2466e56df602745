"""No import circles among the relay's modules.

The rule: an edge A -> B is an import that runs when A is imported. The source of every module
of ``relay_project``, ``registry``, ``tasks_app`` and ``routing`` is parsed (never imported) and
its import statements at module level are read, also those inside top-level ``if``, ``try``,
``with`` and loops and in class bodies, since they run on import too. Imports inside functions
and methods run only when called and are not edges; nor are those under ``if TYPE_CHECKING``
(its ``else`` is). ``import a.b.c`` and ``from a.b import c`` lead to the deepest project module
they name (``a.b.c`` when it is a module, else ``a.b``) and to the packages above it, whose
``__init__`` runs first, except the importing module's own packages, already being imported.
"""

from __future__ import annotations

import ast
from collections import deque
from dataclasses import dataclass
from pathlib import Path

from tests.test_layers import module_name, resolve_from, write

ROOT = Path(__file__).resolve().parent.parent

PACKAGES = ("relay_project", "registry", "tasks_app", "routing")


@dataclass(frozen=True)
class Edge:
    """Module ``source`` imports ``target`` when it is imported, at ``path``:``line``."""

    source: str
    target: str
    path: Path
    line: int


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _run_on_import(body: list[ast.stmt]):
    """The import statements of ``body`` that run when it runs: functions are skipped, and
    so is the body of ``if TYPE_CHECKING``."""
    for node in body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        elif isinstance(node, ast.If) and _is_type_checking(node.test):
            yield from _run_on_import(node.orelse)
        elif isinstance(node, ast.Match):
            for case in node.cases:
                yield from _run_on_import(case.body)
        else:
            for field in ("body", "orelse", "finalbody", "handlers"):
                inner = getattr(node, field, None)
                if isinstance(inner, list):
                    yield from _run_on_import(inner)


def project_modules(root: Path, packages=PACKAGES) -> dict[str, Path]:
    """Every module of ``packages`` under ``root``, by dotted name."""
    return {
        module_name(path, root): path
        for package in packages
        for path in sorted((root / package).rglob("*.py"))
    }


def import_edges(root: Path, packages=PACKAGES) -> list[Edge]:
    """Every edge between the modules of ``packages``, by the rule in this module's doc."""
    modules = project_modules(root, packages)

    def reached(name: str, importer: str) -> list[str]:
        parts = name.split(".")
        prefixes = [".".join(parts[:end]) for end in range(len(parts), 0, -1)]
        found = [prefix for prefix in prefixes if prefix in modules]
        deepest = found[:1]
        own_packages = {prefix for prefix in found if importer.startswith(prefix + ".")}
        return [
            target
            for target in dict.fromkeys([*deepest, *found[1:]])
            if target != importer and target not in own_packages
        ]

    edges = []
    for module, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in _run_on_import(tree.body):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            else:
                base = resolve_from(node, module, path.name == "__init__.py")
                names = [base if a.name == "*" else f"{base}.{a.name}" for a in node.names]
            for name in names:
                for target in reached(name, module):
                    edges.append(Edge(module, target, path.relative_to(root), node.lineno))
    return edges


def _strongly_connected(graph: dict[str, list[str]]) -> list[list[str]]:
    """Tarjan's components of ``graph`` with more than one module (a module importing itself
    is not an edge)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in graph.get(node, ()):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                components.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(components)


def _shortest_cycle(graph: dict[str, list[str]], component: list[str]) -> list[str]:
    """The shortest circle from the component's first module back to it, within it."""
    start, inside = component[0], set(component)
    came_from: dict[str, str | None] = {start: None}
    queue = deque([start])
    while queue:
        node = queue.popleft()
        for target in graph[node]:
            if target == start:
                path = [node]
                while came_from[path[-1]] is not None:
                    path.append(came_from[path[-1]])
                return [*reversed(path), start]
            if target in inside and target not in came_from:
                came_from[target] = node
                queue.append(target)
    raise AssertionError(f"{component} is not strongly connected")


def import_cycles(edges: list[Edge]) -> list[str]:
    """One line per circle (per strongly connected set of modules): its shortest circle
    through its first module, each step with the file and line of the import."""
    graph: dict[str, list[str]] = {}
    where: dict[tuple[str, str], Edge] = {}
    for edge in edges:
        graph.setdefault(edge.source, [])
        graph.setdefault(edge.target, [])
        if (edge.source, edge.target) not in where:
            graph[edge.source].append(edge.target)
            where[edge.source, edge.target] = edge
    for targets in graph.values():
        targets.sort()
    found = []
    for component in _strongly_connected(graph):
        cycle = _shortest_cycle(graph, component)
        steps = "; ".join(
            f"{where[a, b].path}:{where[a, b].line} imports {b}"
            for a, b in zip(cycle, cycle[1:], strict=False)
        )
        found.append(f"{' -> '.join(cycle)} ({len(component)} modules in the circle; {steps})")
    return found


# --- The project ------------------------------------------------------------------------------


def test_the_walk_reads_every_package_and_its_module_level_imports():
    modules = project_modules(ROOT)
    assert {"relay_project", "registry", "tasks_app", "routing"} <= set(modules)
    assert len(modules) > 100
    edges = {(edge.source, edge.target) for edge in import_edges(ROOT)}
    assert ("tasks_app.gateway", "tasks_app.gateway.driving") in edges
    assert ("routing.admin", "registry.admin_agents") in edges
    assert ("registry.admin", "registry.admin_agents") in edges


def test_no_import_circles():
    cycles = import_cycles(import_edges(ROOT))
    assert not cycles, "import circles (module-level imports):\n" + "\n".join(cycles)


# --- The walker, on a small project written for it --------------------------------------------


def test_a_module_level_circle_is_named_with_its_files_and_lines(tmp_path):
    write(
        tmp_path,
        {
            "app/__init__.py": "",
            "app/a.py": "import os\nfrom app import b\n",
            "app/b.py": "try:\n    from app.c import thing\nexcept ImportError:\n    pass\n",
            "app/c.py": "class Thing:\n    from . import a\n",
            "app/d.py": "from app import a\n",
        },
    )

    assert import_cycles(import_edges(tmp_path, ("app",))) == [
        "app.a -> app.b -> app.c -> app.a (3 modules in the circle; "
        "app/a.py:2 imports app.b; app/b.py:2 imports app.c; app/c.py:2 imports app.a)"
    ]


def test_imports_in_functions_and_for_type_checking_are_not_edges(tmp_path):
    write(
        tmp_path,
        {
            "app/__init__.py": "",
            "app/a.py": "from app import b\n",
            "app/b.py": (
                "from typing import TYPE_CHECKING\n"
                "if TYPE_CHECKING:\n"
                "    from app import a\n"
                "else:\n"
                "    import app.c\n"
                "def later():\n"
                "    from app import a\n"
                "class Page:\n"
                "    async def get(self):\n"
                "        import app.a\n"
            ),
            "app/c.py": "",
        },
    )

    edges = import_edges(tmp_path, ("app",))

    assert sorted((edge.source, edge.target, edge.line) for edge in edges) == [
        ("app.a", "app.b", 1),
        ("app.b", "app.c", 5),
    ]
    assert import_cycles(edges) == []


def test_a_circle_through_a_package_init_is_found(tmp_path):
    write(
        tmp_path,
        {
            "app/__init__.py": "",
            "app/gateway/__init__.py": "from .driving import run\n",
            "app/gateway/driving.py": "from app.services import record\n",
            "app/gateway/targets.py": "",
            "app/services.py": "from app.gateway.targets import pick\n",
        },
    )

    assert import_cycles(import_edges(tmp_path, ("app",))) == [
        "app.gateway -> app.gateway.driving -> app.services -> app.gateway "
        "(3 modules in the circle; app/gateway/__init__.py:1 imports app.gateway.driving; "
        "app/gateway/driving.py:1 imports app.services; "
        "app/services.py:1 imports app.gateway)"
    ]
