"""MkDocs hook: writes the reference pages from the code at every build, so they cannot drift.

- ``reference/settings.md``: every environment variable ``relay_project/settings.py`` reads
  (``env(...)``, ``env.<kind>(...)``, the defaults given to ``environ.Env``), with its default and
  the comment above it;
- ``reference/commands.md``: every management command of the relay's apps with its ``--help``;
- ``reference/endpoints.md``: every URL pattern of the URLconf with its view's first docstring
  line.

The pages exist only in the built site (``mkdocs.yml`` names them in the nav).
"""

from __future__ import annotations

import ast
import inspect
import os
import re
from pathlib import Path

from mkdocs.structure.files import File

ROOT = Path(__file__).resolve().parent.parent
APPS = ("registry", "routing", "tasks_app")


def on_files(files, config):
    for name, build in (
        ("settings", settings_page),
        ("commands", commands_page),
        ("endpoints", endpoints_page),
    ):
        files.append(File.generated(config, f"reference/{name}.md", content=build()))
    return files


def _setup_django() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "relay_project.settings")
    import django

    django.setup()


def environment_settings() -> list[tuple[str, str, str, str]]:
    """(name, kind, default, comment) of every variable settings.py reads, in file order."""
    path = ROOT / "relay_project" / "settings.py"
    source = path.read_text()
    lines = source.splitlines()
    found: dict[str, tuple[str, str, str, str]] = {}
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call):
            continue
        function = ast.unparse(node.func)
        if function.endswith("environ.Env") or function == "environ.Env":
            for keyword in node.keywords:
                kind, default = keyword.value.elts
                found[keyword.arg] = (
                    keyword.arg,
                    ast.unparse(kind),
                    ast.unparse(default),
                    _comment_above(lines, node.lineno),
                )
            continue
        is_env = function == "env" or (
            function.startswith(("env.", "environ.Env().")) and function.count("(") <= 1
        )
        if not is_env or not node.args or not isinstance(node.args[0], ast.Constant):
            continue
        name = node.args[0].value
        if not isinstance(name, str) or name in found:
            continue
        default = next((ast.unparse(k.value) for k in node.keywords if k.arg == "default"), "")
        if not default and len(node.args) > 1:
            default = ast.unparse(node.args[1])
        kind = function.rsplit(".", 1)[-1] if "." in function else "declared above"
        found[name] = (name, kind, default, _comment_above(lines, node.lineno))
    return sorted(found.values(), key=lambda row: source.index(f'"{row[0]}"'))


def _comment_above(lines: list[str], lineno: int) -> str:
    """The ``#`` comment lines right above line ``lineno`` (1-based), joined."""
    comment = []
    index = lineno - 2
    while index >= 0 and lines[index].strip().startswith("#"):
        comment.insert(0, lines[index].strip().lstrip("#").strip())
        index -= 1
    return " ".join(comment)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def settings_page() -> str:
    rows = [
        f"| `{name}` | {kind} | `{_cell(default)}` | {_cell(comment)} |"
        if default
        else f"| `{name}` | {kind} | | {_cell(comment)} |"
        for name, kind, default, comment in environment_settings()
    ]
    return "\n".join(
        [
            "# Settings",
            "",
            "Every environment variable `relay_project/settings.py` reads, generated from the file"
            " at each docs build: the kind it is parsed as, its default as written in the code,"
            " and the comment above it. The pages of the [concepts](../concepts/registry.md) and"
            " [production](../production/index.md) sections say more about each.",
            "",
            "| Variable | Kind | Default (code) | Note in the code |",
            "| --- | --- | --- | --- |",
            *rows,
            "",
        ]
    )


def commands_page() -> str:
    _setup_django()
    from django.core.management import get_commands, load_command_class

    sections = [
        "# Management commands",
        "",
        "Every management command of the relay's apps, with its `--help`, generated at each docs"
        " build. Run them as `.venv/bin/python manage.py NAME ...`.",
        "",
    ]
    for name, app in sorted(get_commands().items()):
        if app not in APPS:
            continue
        command = load_command_class(app, name)
        help_text = command.create_parser("manage.py", name).format_help()
        sections += [
            f"## `{name}`",
            "",
            f"From `{app}`.",
            "",
            "```text",
            help_text.rstrip(),
            "```",
            "",
        ]
    return "\n".join(sections)


def endpoints_page() -> str:
    _setup_django()
    from django.urls import URLPattern, URLResolver, get_resolver

    rows = []
    operations = schema_summaries()

    def walk(patterns, prefix: str) -> None:
        for pattern in patterns:
            route = prefix + str(pattern.pattern)
            if isinstance(pattern, URLResolver):
                walk(pattern.url_patterns, route)
            elif isinstance(pattern, URLPattern):
                if route.startswith(("admin/", "static/", "^static")):
                    continue
                view = pattern.callback
                view = getattr(view, "cls", None) or getattr(view, "view_class", None) or view
                own = view.__dict__.get("__doc__") if inspect.isclass(view) else view.__doc__
                doc = inspect.cleandoc(own or "").split("\n\n")[0].replace("\n", " ")
                doc = doc or operations.get("/" + re.sub(r"<(?:\w+:)?(\w+)>", r"{\1}", route), "")
                methods = [
                    method.upper()
                    for method in ("get", "post", "put", "patch", "delete")
                    if inspect.isclass(view) and hasattr(view, method)
                ]
                where = f"{view.__module__}.{getattr(view, '__qualname__', view)}"
                verbs = " ".join(methods) or "any"
                rows.append(f"| `/{_cell(route)}` | {verbs} | `{where}` | {_cell(doc)} |")

    walk(get_resolver().url_patterns, "")
    import relay_project.routing

    a2a = inspect.cleandoc(relay_project.routing.__doc__ or "")
    return "\n".join(
        [
            "# Endpoints",
            "",
            "Every URL of the relay (the admin's own pages left out), generated from the URLconf"
            " at each docs build, with the view that answers it and the first paragraph of its"
            " docstring. The request and response shapes of the JSON APIs are in the OpenAPI"
            " schema the relay serves at `/api/schema` (browsable at `/api/docs`).",
            "",
            "| Path | Methods | View | What it does |",
            "| --- | --- | --- | --- |",
            *rows,
            "",
            "## A2A endpoints",
            "",
            "From the docstring of `relay_project/routing.py`, the ASGI router in front of Django:",
            "",
            a2a,
            "",
        ]
    )


def schema_summaries() -> dict[str, str]:
    """``{path: "GET: summary; POST: summary"}`` from the relay's OpenAPI schema."""
    from drf_spectacular.generators import SchemaGenerator

    schema = SchemaGenerator().get_schema(request=None, public=True)
    found = {}
    for path, operations in schema["paths"].items():
        found[path] = "; ".join(
            f"{method.upper()}: {operation.get('summary') or operation.get('description', '')}"
            for method, operation in operations.items()
            if isinstance(operation, dict)
        )
    return found
