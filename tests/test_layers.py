"""Imports go down the layers only: registry at the bottom, then tasks_app, then routing.

Every ``.py`` file of each app is parsed (never imported) and every import in it is checked:
top-level ones and those inside functions, ``import x`` and ``from x import y``, relative ones
resolved against the module's package, and imports by name (``importlib.import_module("x")``,
``__import__``, Django's ``import_string`` and ``apps.get_model("app", ...)``) when the name is
written in the code. ``relay_project`` glues the apps together and may import them all.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

FORBIDDEN = {
    "registry": ("tasks_app", "routing"),
    "tasks_app": ("routing",),
}
"""For each app, the apps above it, which none of its modules may import."""

_IMPORT_BY_NAME = {"import_module", "__import__", "import_string"}


@dataclass(frozen=True)
class Import:
    """One import found in a module's source: the dotted name it reaches, where, and how."""

    module: str
    path: Path
    line: int
    target: str
    statement: str

    def __str__(self) -> str:
        return f"{self.module} ({self.path}:{self.line}) imports {self.target}: {self.statement}"


def module_name(path: Path, root: Path) -> str:
    """``registry/api/views.py`` -> ``registry.api.views``; a package's ``__init__.py`` is the
    package itself."""
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def resolve_from(node: ast.ImportFrom, module: str, is_package: bool) -> str:
    """The absolute module a ``from ... import`` names; a relative one is resolved against the
    importing module's package, as Python does."""
    if not node.level:
        return node.module or ""
    package = module.split(".") if is_package else module.split(".")[:-1]
    up = node.level - 1
    if up >= len(package):
        return "<beyond the top-level package>"
    base = package[: len(package) - up]
    return ".".join([*base, node.module] if node.module else base)


def _name_called(node: ast.Call) -> str:
    function = node.func
    if isinstance(function, ast.Name):
        return function.id
    if isinstance(function, ast.Attribute):
        return function.attr
    return ""


def _constant_text(node: ast.AST) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def imports_in(path: Path, root: Path) -> Iterator[Import]:
    """Every import of the module at ``path`` (anywhere in it: module level, functions,
    classes, ``if TYPE_CHECKING`` blocks), with the dotted name it reaches."""
    source = path.read_text(encoding="utf-8")
    tree = ast.parse(source, filename=str(path))
    module = module_name(path, root)
    is_package = path.name == "__init__.py"
    relative_path = path.relative_to(root)

    def found(node: ast.AST, target: str) -> Import:
        statement = ast.get_source_segment(source, node) or ast.unparse(node)
        return Import(module, relative_path, node.lineno, target, " ".join(statement.split()))

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield found(node, alias.name)
        elif isinstance(node, ast.ImportFrom):
            base = resolve_from(node, module, is_package)
            for alias in node.names:
                # ``from a import b`` reaches module a.b when b is a module, else a name of a.
                yield found(node, base if alias.name == "*" else f"{base}.{alias.name}")
        elif isinstance(node, ast.Call) and node.args:
            called = _name_called(node)
            first = _constant_text(node.args[0])
            if first is None:
                continue
            if called in _IMPORT_BY_NAME:
                yield found(node, first)
            elif called == "get_model":
                # apps.get_model("routing", "RoutingHop") or apps.get_model("routing.RoutingHop")
                yield found(node, first.split(".")[0])


def modules_of(package: str, root: Path) -> list[Path]:
    return sorted((root / package).rglob("*.py"))


def upward_imports(root: Path, forbidden: dict[str, tuple[str, ...]] = FORBIDDEN) -> list[Import]:
    """Every import, in the apps of ``forbidden`` under ``root``, of an app above them."""
    wrong = []
    for package, above in forbidden.items():
        for path in modules_of(package, root):
            for found in imports_in(path, root):
                if found.target.split(".")[0] in above:
                    wrong.append(found)
    return sorted(wrong, key=lambda found: (str(found.path), found.line, found.target))


# --- The project ------------------------------------------------------------------------------


def test_the_walk_reads_every_module_of_each_app():
    for package in FORBIDDEN:
        paths = modules_of(package, ROOT)
        assert ROOT / package / "__init__.py" in paths
        assert len(paths) > 10, package
    # The walk sees the imports the apps are known to make downwards.
    targets = {found.target for found in imports_in(ROOT / "routing" / "apps.py", ROOT)}
    assert {"registry.models.Agent", "tasks_app.gateway"} <= targets


def test_no_module_of_tasks_app_imports_routing():
    wrong = upward_imports(ROOT, {"tasks_app": ("routing",)})
    assert not wrong, "tasks_app must not import routing:\n" + "\n".join(map(str, wrong))


def test_no_module_of_registry_imports_tasks_app_or_routing():
    wrong = upward_imports(ROOT, {"registry": ("tasks_app", "routing")})
    assert not wrong, "registry must not import tasks_app or routing:\n" + "\n".join(
        map(str, wrong)
    )


# --- The walker, on a small project written for it --------------------------------------------


def write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


def test_the_walker_finds_every_kind_of_upward_import_with_its_module_and_line(tmp_path):
    write(
        tmp_path,
        {
            "registry/__init__.py": "",
            "registry/models.py": "import os\nfrom registry import cards\n",
            "registry/cards.py": "",
            "registry/views.py": (
                "from __future__ import annotations\n"
                "\n"
                "def page():\n"
                "    from routing import metrics\n"
                "    return metrics\n"
            ),
            "registry/api/__init__.py": "import tasks_app.models as task_models\n",
            "registry/api/views.py": (
                "from .. import models\n"
                "from ..cards import parse\n"
                "from . import serializers\n"
                "class View:\n"
                "    def get(self):\n"
                "        from tasks_app.api.cards import (\n"
                "            agent_relay_card,\n"
                "        )\n"
            ),
            "registry/admin.py": (
                "import importlib\n"
                "from django.apps import apps\n"
                "hops = apps.get_model('routing', 'RoutingHop')\n"
                "tasks = apps.get_model('tasks_app.Task')\n"
                "own = apps.get_model('registry', 'Agent')\n"
                "health = importlib.import_module('routing.health')\n"
            ),
            "tasks_app/__init__.py": "",
            "tasks_app/gateway/__init__.py": "from .targets import run\n",
            "tasks_app/gateway/targets.py": (
                "from registry.models import Agent\n"
                "from typing import TYPE_CHECKING\n"
                "if TYPE_CHECKING:\n"
                "    from routing.router import Decision\n"
            ),
            "routing/__init__.py": "",
            "routing/apps.py": "from tasks_app import gateway\nfrom registry.models import Team\n",
        },
    )

    wrong = upward_imports(tmp_path)

    assert [(str(found.path), found.line, found.target) for found in wrong] == [
        ("registry/admin.py", 3, "routing"),
        ("registry/admin.py", 4, "tasks_app"),
        ("registry/admin.py", 6, "routing.health"),
        ("registry/api/__init__.py", 1, "tasks_app.models"),
        ("registry/api/views.py", 6, "tasks_app.api.cards.agent_relay_card"),
        ("registry/views.py", 4, "routing.metrics"),
        ("tasks_app/gateway/targets.py", 4, "routing.router.Decision"),
    ]
    message = str(wrong[4])
    assert message == (
        "registry.api.views (registry/api/views.py:6) imports "
        "tasks_app.api.cards.agent_relay_card: "
        "from tasks_app.api.cards import ( agent_relay_card, )"
    )


def test_relative_imports_are_resolved_against_the_package(tmp_path):
    write(
        tmp_path,
        {
            "registry/__init__.py": "from . import models\n",
            "registry/models.py": "",
            "registry/api/__init__.py": "",
            "registry/api/views.py": "from .. import models\nfrom ..cards import parse\n"
            "from . import serializers\nfrom .errors import *\n",
        },
    )

    targets = {
        module_name(path, tmp_path): [found.target for found in imports_in(path, tmp_path)]
        for path in modules_of("registry", tmp_path)
    }

    assert targets == {
        "registry": ["registry.models"],
        "registry.models": [],
        "registry.api": [],
        "registry.api.views": [
            "registry.models",
            "registry.cards.parse",
            "registry.api.serializers",
            "registry.api.errors",
        ],
    }


def test_imports_downwards_and_of_other_libraries_pass(tmp_path):
    write(
        tmp_path,
        {
            "registry/__init__.py": "import django\nfrom relay_project import outbound\n",
            "tasks_app/__init__.py": "from registry import models\nimport registry.cards\n"
            "import routingtable\n",
        },
    )

    assert upward_imports(tmp_path) == []
