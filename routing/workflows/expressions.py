"""Step inputs and conditions: the ``{{.name.field}}`` templates and the JMESPath expressions of
a workflow, over the original message and the outputs of the steps that finished. Plain Python.

A template is text with ``{{ .root.path }}`` variables (the seed's Go-template style):

- ``{{.originalMessage}}``: the text of the caller's message.
- ``{{.originalData.a.b}}``: a field of the caller's message's data part (``{{.originalData}}``
  is the whole data part as JSON).
- ``{{.metadata.key}}``: a field of the caller's message's metadata.
- ``{{.step}}``: the text of step ``step``'s output (its final message and artifacts' text).
- ``{{.step.field.sub}}``: the field ``field.sub`` of that step's data part; when its data has
  no such field (or the step answered with text only), the step's text. So an agent that
  answers ``billing`` and one that answers ``{"intent": "billing"}`` both give
  ``{{.classify.intent}}`` = ``billing``.

A value that is not a string is written as JSON. A step that did not run (a branch not taken,
a step still running) or a caller field that is absent is a :class:`MissingVariable` naming the
variable. Field access is JMESPath (``jmespath``), never ``eval``.

A condition is either a template (its rendered text picks the branch) or a JMESPath expression
over the document ``{"originalMessage": text, "originalData": {...}, "metadata": {...},
"<step>": {"text": ..., <data fields>}}``, e.g. ``review.approved == `true```.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import jmespath
from jmespath.exceptions import JMESPathError

ORIGINAL_MESSAGE = "originalMessage"
ORIGINAL_DATA = "originalData"
METADATA = "metadata"
RESERVED = frozenset({ORIGINAL_MESSAGE, ORIGINAL_DATA, METADATA})
"""Roots that name the caller's message, never a step."""

NAME = r"[A-Za-z_][A-Za-z0-9_-]*"
_VARIABLE = re.compile(r"\{\{(.*?)\}\}", re.DOTALL)
_REFERENCE = re.compile(rf"\s*\.({NAME})((?:\.{NAME})*)\s*")


class ExpressionError(ValueError):
    """A template or a condition that cannot be read."""


class MissingVariable(LookupError):
    """A template variable with no value (yet): the message names the variable."""

    def __init__(self, variable: str, reason: str):
        super().__init__(f"{variable}: {reason}")
        self.variable = variable
        self.reason = reason


@dataclass(frozen=True)
class Message:
    """The caller's first message, as the workflow sees it."""

    text: str
    data: Mapping[str, Any] = field(default_factory=dict)
    metadata: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class StepOutput:
    """What a finished step gave: its text (final message and artifacts), its data part
    fields, and ``seq``, the order in which it finished (for ``join: first``)."""

    text: str = ""
    data: Mapping[str, Any] = field(default_factory=dict)
    seq: int = 0


@dataclass(frozen=True)
class Reference:
    """One ``{{ .root.path }}`` variable of a template."""

    raw: str
    root: str
    path: tuple[str, ...]

    @property
    def step_id(self) -> str | None:
        return None if self.root in RESERVED else self.root


@dataclass(frozen=True)
class Scope:
    """What templates and conditions may read: the caller's message and finished steps."""

    original: Message
    steps: Mapping[str, StepOutput]


def references(template: str) -> tuple[Reference, ...]:
    """The variables of ``template``; :class:`ExpressionError` for a ``{{...}}`` that is not
    ``{{ .name }}`` or ``{{ .name.field... }}``."""
    found = []
    for match in _VARIABLE.finditer(template):
        inner = _REFERENCE.fullmatch(match.group(1))
        if inner is None:
            raise ExpressionError(
                f"{match.group(0)!r} is not a variable: write {{{{.originalMessage}}}}, "
                "{{.step}} or {{.step.field}}"
            )
        path = tuple(part for part in inner.group(2).split(".") if part)
        if inner.group(1) == ORIGINAL_MESSAGE and path:
            raise ExpressionError(f"{match.group(0)!r}: originalMessage is text and has no fields")
        found.append(Reference(raw=match.group(0), root=inner.group(1), path=path))
    return tuple(found)


def is_template(text: str) -> bool:
    return "{{" in text


def render(template: str, scope: Scope) -> str:
    """``template`` with every variable replaced; :class:`MissingVariable` for the first
    variable without a value."""
    references(template)  # a malformed template is an ExpressionError, not a MissingVariable

    def value(match: re.Match) -> str:
        inner = _REFERENCE.fullmatch(match.group(1))
        path = tuple(part for part in inner.group(2).split(".") if part)
        return as_text(resolve(Reference(match.group(0), inner.group(1), path), scope))

    return _VARIABLE.sub(value, template)


def resolve(reference: Reference, scope: Scope) -> Any:
    """The value of one variable (see the module's docstring)."""
    root, path = reference.root, reference.path
    if root == ORIGINAL_MESSAGE:
        return scope.original.text
    if root in (ORIGINAL_DATA, METADATA):
        source = scope.original.data if root == ORIGINAL_DATA else scope.original.metadata
        found = _field(source, path) if path else dict(source)
        if found is None:
            raise MissingVariable(reference.raw, f"the caller's message has no {root} field")
        return found
    output = scope.steps.get(root)
    if output is None:
        raise MissingVariable(reference.raw, f"step {root!r} has not run before this one")
    if not path:
        return output.text
    found = _field(output.data, path)
    return output.text if found is None else found


def _field(source: Mapping[str, Any], path: tuple[str, ...]) -> Any:
    # Quoted identifiers: field names may hold dashes, which bare JMESPath would read as minus.
    return jmespath.search(".".join(json.dumps(part) for part in path), dict(source))


def as_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False)


@dataclass(frozen=True)
class Condition:
    """A compiled condition: a template, or a JMESPath expression."""

    source: str
    compiled: Any = None

    @classmethod
    def parse(cls, source: str) -> Condition:
        if not isinstance(source, str) or not source.strip():
            raise ExpressionError("must be a template such as {{.step.field}} or a JMESPath")
        if is_template(source):
            references(source)
            return cls(source=source)
        try:
            return cls(source=source, compiled=jmespath.compile(source))
        except JMESPathError as error:
            raise ExpressionError(f"{source!r} is not a JMESPath expression: {error}") from None

    @property
    def references(self) -> tuple[Reference, ...]:
        return references(self.source) if self.compiled is None else ()

    def value(self, scope: Scope) -> Any:
        if self.compiled is None:
            return render(self.source, scope)
        return self.compiled.search(document(scope))

    def holds(self, scope: Scope) -> bool:
        """Truth as JMESPath has it (false, null, "", [] and {} are false); a template's text
        is false when empty or one of false, no, 0, null."""
        found = self.value(scope)
        if self.compiled is None:
            return found.strip().lower() not in {"", "false", "no", "0", "null"}
        return found not in (False, None, "", [], {})


def document(scope: Scope) -> dict[str, Any]:
    """The JSON document a JMESPath condition reads."""
    doc: dict[str, Any] = {
        step_id: {"text": output.text, **output.data} for step_id, output in scope.steps.items()
    }
    doc[ORIGINAL_MESSAGE] = scope.original.text
    doc[ORIGINAL_DATA] = dict(scope.original.data)
    doc[METADATA] = dict(scope.original.metadata)
    return doc


def branch_key(value: Any) -> str:
    """A condition's value as a branch name: booleans as ``true``/``false``, text trimmed."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return ""
    return as_text(value).strip()
