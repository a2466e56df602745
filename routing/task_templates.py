"""Task templates, the pure part: a saved first message with ``{{name}}`` variables, each
declared with a type (``string``, ``integer``, ``number``, ``boolean``), an optional default
and a description. :func:`check` reads the declarations and the text (every variable used is
declared); :func:`render` fills the text from a caller's values, and raises
:class:`VariableError` naming the variable for one that is missing, unknown or of the wrong
type. Plain Python, no Django."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

TYPES = ("string", "integer", "number", "boolean")
NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_VARIABLE = re.compile(r"\{\{(.*?)\}\}", re.DOTALL)
_MISSING = object()


class VariableError(ValueError):
    """A variable's value or declaration that will not do; ``name`` is the variable (or the
    declaration's field), ``message`` says why."""

    def __init__(self, name: str, message: str):
        super().__init__(f"{name}: {message}")
        self.name = name
        self.message = message


@dataclass(frozen=True)
class Variable:
    name: str
    type: str = "string"
    default: Any = _MISSING
    description: str = ""

    @property
    def required(self) -> bool:
        return self.default is _MISSING

    def as_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"name": self.name, "type": self.type}
        if not self.required:
            data["default"] = self.default
        if self.description:
            data["description"] = self.description
        return data


def variables(declared: Any) -> tuple[Variable, ...]:
    """The declarations (a list of ``{name, type?, default?, description?}``)."""
    if not isinstance(declared, list):
        raise VariableError("variables", "must be a list of {name, type, default, description}")
    found: dict[str, Variable] = {}
    for index, item in enumerate(declared):
        where = f"variables[{index}]"
        if not isinstance(item, Mapping):
            raise VariableError(where, "must be an object with a name")
        unknown = set(item) - {"name", "type", "default", "description"}
        if unknown:
            raise VariableError(where, f"unknown field {sorted(unknown)[0]!r}")
        name = item.get("name")
        if not isinstance(name, str) or not NAME.fullmatch(name):
            raise VariableError(
                where, "name must be letters, digits and _, not starting with a digit"
            )
        if name in found:
            raise VariableError(where, f"{name!r} is declared twice")
        kind = item.get("type", "string")
        if kind not in TYPES:
            raise VariableError(where, f"type must be one of {', '.join(TYPES)}, not {kind!r}")
        description = item.get("description", "")
        if not isinstance(description, str):
            raise VariableError(where, "description must be text")
        default = item.get("default", _MISSING)
        if default is not _MISSING:
            _typed(name, kind, default)
        found[name] = Variable(name, kind, default, description)
    return tuple(found.values())


def used(text: str) -> tuple[str, ...]:
    """The variables ``text`` uses, in order of first use; VariableError for a ``{{...}}``
    that is not ``{{name}}``."""
    names: list[str] = []
    for match in _VARIABLE.finditer(text):
        name = match.group(1).strip()
        if not NAME.fullmatch(name):
            raise VariableError("text", f"{match.group(0)!r} is not a variable: write {{{{name}}}}")
        if name not in names:
            names.append(name)
    return tuple(names)


def check(text: str, declared: Any) -> tuple[Variable, ...]:
    """The declarations, once every variable ``text`` uses is declared."""
    found = variables(declared)
    names = {variable.name for variable in found}
    for name in used(text):
        if name not in names:
            raise VariableError("text", f"{{{{{name}}}}} is not declared in variables")
    return found


def render(text: str, declared: Any, values: Any) -> str:
    """``text`` with each variable replaced by the caller's value, else its default."""
    found = check(text, declared)
    if values is None:
        values = {}
    if not isinstance(values, Mapping):
        raise VariableError("variables", "must be an object of name: value")
    names = {variable.name: variable for variable in found}
    for name in values:
        if name not in names:
            known = ", ".join(names) or "none"
            raise VariableError(name, f"is not a variable of this template (it has: {known})")
    filled: dict[str, str] = {}
    for variable in found:
        value = values.get(variable.name, _MISSING)
        if value is _MISSING:
            if variable.required:
                article = "an" if variable.type == "integer" else "a"
                raise VariableError(
                    variable.name, f"missing ({article} {variable.type}, no default)"
                )
            value = variable.default
        filled[variable.name] = _as_text(_typed(variable.name, variable.type, value))
    return _VARIABLE.sub(lambda match: filled[match.group(1).strip()], text)


def _typed(name: str, kind: str, value: Any) -> Any:
    ok = {
        "string": isinstance(value, str),
        "integer": isinstance(value, int) and not isinstance(value, bool),
        "number": isinstance(value, int | float) and not isinstance(value, bool),
        "boolean": isinstance(value, bool),
    }[kind]
    if not ok:
        article = "an" if kind == "integer" else "a"
        raise VariableError(name, f"must be {article} {kind}, not {json.dumps(value)[:40]}")
    return value


def _as_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value)
