"""A workflow's YAML document, read and checked: :func:`parse_yaml` and :func:`parse` return a
:class:`Workflow` of frozen :class:`Step` values, or raise :class:`WorkflowInvalid` listing
every problem with the step (by position and id) and the field it is in. Plain Python.

Steps, each a mapping with exactly one of these:

- ``agent: NAME`` / ``team: NAME`` / ``workflow: NAME``: call it with ``input`` (a template,
  default ``{{.originalMessage}}``). A call without ``id`` is named after its target, less a
  trailing ``-agent``: ``troubleshooting-agent`` is step ``troubleshooting``.
- ``sequence: [steps]``: the steps in order; its output is the last one's.
- ``condition`` + ``branches: {value: [steps]}``: the branch whose name equals the
  condition's value (exactly, else ignoring case; else the ``default`` branch) runs; its output
  is that branch's last step's.
- ``parallel: [steps]`` with ``join: all | first | quorum`` (and ``quorum: N``).
- ``loop: [steps]`` with ``max_iterations: N`` (1 to 100) and an optional ``until``
  condition, checked after each iteration.

A template or condition may read only steps that finish before it: earlier steps of its
sequence and of the sequences around it, never a step running beside it in a ``parallel``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import yaml

from routing.workflows.expressions import (
    NAME,
    RESERVED,
    Condition,
    ExpressionError,
    references,
)

AGENT, TEAM, WORKFLOW = "agent", "team", "workflow"
SEQUENCE, BRANCH, PARALLEL, LOOP = "sequence", "branch", "parallel", "loop"
CALLS = (AGENT, TEAM, WORKFLOW)
JOINS = ("all", "first", "quorum")
MAX_ITERATIONS = 100
DEFAULT_INPUT = "{{.originalMessage}}"
DEFAULT_BRANCH = "default"

_COMMON = {"id", "output", "description"}
_KEYS = {
    AGENT: _COMMON | {AGENT, "input"},
    TEAM: _COMMON | {TEAM, "input"},
    WORKFLOW: _COMMON | {WORKFLOW, "input"},
    SEQUENCE: _COMMON | {SEQUENCE},
    BRANCH: _COMMON | {"condition", "branches"},
    PARALLEL: _COMMON | {PARALLEL, "join", "quorum"},
    LOOP: _COMMON | {LOOP, "max_iterations", "until"},
}
_KIND_OF_KEY = {
    AGENT: AGENT,
    TEAM: TEAM,
    WORKFLOW: WORKFLOW,
    SEQUENCE: SEQUENCE,
    "condition": BRANCH,
    "branches": BRANCH,
    PARALLEL: PARALLEL,
    LOOP: LOOP,
}
_TOP_KEYS = {"name", "slug", "version", "description", "steps"}
_ID = re.compile(NAME)


@dataclass(frozen=True)
class Problem:
    """One thing wrong, where: ``steps[2] (route)``, the field, what is wrong."""

    where: str
    field: str
    message: str

    def __str__(self) -> str:
        place = f"{self.where}: " if self.where else ""
        return f"{place}{self.field}: {self.message}" if self.field else f"{place}{self.message}"


class WorkflowInvalid(ValueError):
    """The document is not a valid workflow; ``problems`` lists every reason."""

    def __init__(self, problems: list[Problem]):
        self.problems = tuple(problems)
        super().__init__("; ".join(str(problem) for problem in self.problems))


@dataclass(frozen=True)
class Step:
    id: str
    kind: str
    where: str
    target: str = ""
    input: str = ""
    output: str = ""
    description: str = ""
    condition: Condition | None = None
    branches: tuple[tuple[str, tuple[Step, ...]], ...] = ()
    children: tuple[Step, ...] = ()
    join: str = "all"
    quorum: int = 0
    max_iterations: int = 0
    until: Condition | None = None

    @property
    def is_call(self) -> bool:
        return self.kind in CALLS

    def walk(self) -> Iterator[Step]:
        """This step and every step inside it, in document order."""
        yield self
        for _, steps in self.branches:
            for step in steps:
                yield from step.walk()
        for step in self.children:
            yield from step.walk()


@dataclass(frozen=True)
class Workflow:
    name: str
    version: str
    description: str
    steps: tuple[Step, ...]
    slug: str = ""

    def walk(self) -> Iterator[Step]:
        for step in self.steps:
            yield from step.walk()

    @property
    def output_step(self) -> Step:
        """The top-level step marked ``output``, else the last one: its output is the answer."""
        return next((step for step in self.steps if step.output), self.steps[-1])

    def targets(self, kind: str) -> list[tuple[Step, str]]:
        """Each call step of ``kind`` (agent, team, workflow) with the name it calls."""
        return [(step, step.target) for step in self.walk() if step.kind == kind]


MAX_STEPS = 500


MAX_DOCUMENT_BYTES = 512 * 1024
"""A workflow of MAX_STEPS steps fits in a tenth of this."""

# libyaml when it is there (a third of the pure loader's time; it caps nesting at 1000 levels).
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def parse_yaml(text: str) -> Workflow:
    """Read a YAML document (plain data, no aliases) as a workflow."""
    return parse(load_yaml(text))


def load_yaml(text: str) -> Any:
    """The data of a YAML document (plain data, no aliases); :class:`WorkflowInvalid` when it
    is not YAML."""
    if len(text) > MAX_DOCUMENT_BYTES or len(text.encode("utf-8")) > MAX_DOCUMENT_BYTES:
        raise WorkflowInvalid(
            [Problem("", "", f"the document is larger than {MAX_DOCUMENT_BYTES // 1024} KiB")]
        )
    try:
        # Aliases are refused before anything is built: "*name" can repeat a subtree
        # exponentially often in a few lines, and a workflow has no need of it.
        for event in yaml.parse(text, Loader=_LOADER):
            if isinstance(event, yaml.AliasEvent):
                raise yaml.composer.ComposerError(
                    None, None, "aliases (*name) are not read in a workflow", event.start_mark
                )
        document = yaml.load(text, Loader=_LOADER)  # noqa: S506 - a safe loader
    except RecursionError:
        raise WorkflowInvalid([Problem("", "", "the document is nested too deep")]) from None
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        reason = getattr(error, "problem", None) or str(error)
        raise WorkflowInvalid([Problem("", "", f"not YAML{at}: {reason}")]) from None
    return document


def dump_yaml(document: Any) -> str:
    """YAML text for plain data, keys in their order (the export and the admin's steps)."""
    return yaml.safe_dump(document, sort_keys=False, allow_unicode=True, width=100)


def parse(document: Any) -> Workflow:
    """Check ``document`` (the YAML's data) and return the workflow it describes."""
    try:
        return _parse(document)
    except RecursionError:
        raise WorkflowInvalid([Problem("", "", "the document is nested too deep")]) from None


def _parse(document: Any) -> Workflow:
    problems: list[Problem] = []
    if not isinstance(document, Mapping):
        raise WorkflowInvalid([Problem("", "", "a workflow is a mapping with name and steps")])
    for key in document:
        if key not in _TOP_KEYS:
            problems.append(Problem("", str(key), f"unknown field; use {_listed(_TOP_KEYS)}"))
    name = document.get("name")
    if not isinstance(name, str) or not name.strip():
        problems.append(Problem("", "name", "is required (the workflow's name)"))
    version = document.get("version", "1")
    if not isinstance(version, str | int | float) or isinstance(version, bool):
        problems.append(Problem("", "version", "must be text such as 1.0.0"))
    description = document.get("description") or ""
    if not isinstance(description, str):
        problems.append(Problem("", "description", "must be text"))
    slug = document.get("slug") or ""
    if slug and not (isinstance(slug, str) and re.fullmatch(r"[-a-zA-Z0-9_]{1,64}", slug)):
        problems.append(Problem("", "slug", "must be letters, digits, - and _ (64 at most)"))
    raw_steps = document.get("steps")
    reader = _Reader(problems)
    steps = reader.sequence(raw_steps, "steps", "")
    if steps:
        outputs = [step for step in steps if step.output]
        if len(outputs) > 1:
            names = ", ".join(step.id for step in outputs)
            problems.append(Problem("", "output", f"only one step may give the output ({names})"))
        inner = [step for step in reader.all if step.output and step not in steps]
        for step in inner:
            problems.append(
                Problem(step.where, "output", "only a top-level step may give the output")
            )
        _check_references(steps, set(), problems)
    if problems:
        raise WorkflowInvalid(problems)
    return Workflow(
        name=name.strip(),
        version=str(version),
        description=description,
        steps=steps,
        slug=slug,
    )


def _listed(names) -> str:
    return ", ".join(sorted(names))


class _Reader:
    def __init__(self, problems: list[Problem]):
        self.problems = problems
        self.ids: dict[str, str] = {}
        self.all: list[Step] = []
        self.count = 0

    def problem(self, where: str, field: str, message: str) -> None:
        self.problems.append(Problem(where, field, message))

    def sequence(self, raw: Any, field: str, where: str) -> tuple[Step, ...]:
        if not isinstance(raw, list) or not raw:
            self.problem(where, field, "must be a non-empty list of steps")
            return ()
        prefix = f"{where}.{field}" if where else field
        steps = []
        for index, item in enumerate(raw):
            step = self.step(item, f"{prefix}[{index}]")
            if step is not None:
                steps.append(step)
        return tuple(steps)

    def step(self, raw: Any, where: str) -> Step | None:
        self.count += 1
        if self.count > MAX_STEPS:
            # Stop reading: a huge document should cost little and list one problem.
            raise WorkflowInvalid([Problem("", "steps", f"more than {MAX_STEPS} steps")])
        if not isinstance(raw, Mapping):
            self.problem(where, "", "a step is a mapping such as {agent: NAME, input: ...}")
            return None
        kinds = {_KIND_OF_KEY[key] for key in raw if key in _KIND_OF_KEY}
        if len(kinds) != 1:
            named = "none" if not kinds else _listed(kinds)
            self.problem(
                where,
                "",
                "a step needs exactly one of agent, team, workflow, sequence, parallel, loop, "
                f"or condition with branches (found {named})",
            )
            return None
        kind = kinds.pop()
        step_id = self.step_id(raw, kind, where)
        where = f"{where} ({step_id})" if step_id else where
        for key in raw:
            if key not in _KEYS[kind]:
                self.problem(where, str(key), f"unknown field for {kind} steps")
        fields: dict[str, Any] = {"id": step_id, "kind": kind, "where": where}
        output = raw.get("output") or ""
        if not isinstance(output, str) or (output and not _ID.fullmatch(output)):
            self.problem(where, "output", "must be a name such as final_response")
        else:
            fields["output"] = output
        description = raw.get("description") or ""
        fields["description"] = description if isinstance(description, str) else ""
        if kind in CALLS:
            fields.update(self.call(raw, kind, where))
        elif kind == SEQUENCE:
            fields["children"] = self.sequence(raw.get(SEQUENCE), SEQUENCE, where)
        elif kind == BRANCH:
            fields.update(self.branch(raw, where))
        elif kind == PARALLEL:
            fields.update(self.parallel(raw, where))
        else:
            fields.update(self.loop(raw, where))
        step = Step(**fields)
        self.all.append(step)
        return step

    def step_id(self, raw: Mapping, kind: str, where: str) -> str:
        given = raw.get("id")
        if given is None:
            target = raw.get(kind) if kind in CALLS else None
            if not isinstance(target, str) or not target:
                if kind not in CALLS:
                    self.problem(where, "id", f"a {kind} step needs an id")
                return ""
            given = target.removesuffix("-agent") or target
            implicit = True
        else:
            implicit = False
        if implicit and not _ID.fullmatch(given):
            self.problem(
                where, "id", f"{given!r} is no id (letters, digits, - or _): give the step an id"
            )
            return ""
        if not isinstance(given, str) or not _ID.fullmatch(given):
            self.problem(where, "id", "must start with a letter and hold letters, digits, - or _")
            return ""
        if given in RESERVED:
            self.problem(where, "id", f"{given!r} names the caller's message; pick another id")
            return ""
        if given in self.ids:
            hint = " (named after its target: give it an id)" if implicit else ""
            self.problem(where, "id", f"{given!r} is also the id of {self.ids[given]}{hint}")
            return given
        self.ids[given] = f"{where} ({given})"
        return given

    def call(self, raw: Mapping, kind: str, where: str) -> dict[str, Any]:
        target = raw.get(kind)
        if not isinstance(target, str) or not target.strip():
            self.problem(where, kind, f"needs the name of the {kind} to call")
            target = ""
        template = raw.get("input", DEFAULT_INPUT)
        if not isinstance(template, str):
            self.problem(where, "input", "must be text (a template such as {{.originalMessage}})")
            template = ""
        else:
            self.template(template, where, "input")
        return {"target": target.strip(), "input": template}

    def template(self, template: str, where: str, field: str) -> None:
        try:
            references(template)
        except ExpressionError as error:
            self.problem(where, field, str(error))

    def condition(self, raw: Any, where: str, field: str) -> Condition | None:
        try:
            return Condition.parse(raw)
        except ExpressionError as error:
            self.problem(where, field, str(error))
            return None

    def branch(self, raw: Mapping, where: str) -> dict[str, Any]:
        condition = self.condition(raw.get("condition"), where, "condition")
        branches = raw.get("branches")
        if not isinstance(branches, Mapping) or not branches:
            self.problem(where, "branches", "must map each value to a list of steps")
            return {"condition": condition}
        read = []
        for value, steps in branches.items():
            name = ("true" if value else "false") if isinstance(value, bool) else str(value)
            read.append((name, self.sequence(steps, f"branches.{name}", where)))
        return {"condition": condition, "branches": tuple(read)}

    def parallel(self, raw: Mapping, where: str) -> dict[str, Any]:
        children = self.sequence(raw.get(PARALLEL), PARALLEL, where)
        join = raw.get("join", "all")
        quorum = raw.get("quorum")
        if join not in JOINS:
            self.problem(where, "join", f"{join!r} is not one of all, first, quorum")
        elif join == "quorum":
            if isinstance(quorum, bool) or not isinstance(quorum, int):
                self.problem(where, "quorum", "join: quorum needs quorum: N (a whole number)")
            elif children and not 1 <= quorum <= len(children):
                self.problem(where, "quorum", f"must be from 1 to {len(children)}, not {quorum}")
        elif quorum is not None:
            self.problem(where, "quorum", "is only read with join: quorum")
        return {
            "children": children,
            "join": join if join in JOINS else "all",
            "quorum": quorum if isinstance(quorum, int) else 0,
        }

    def loop(self, raw: Mapping, where: str) -> dict[str, Any]:
        children = self.sequence(raw.get(LOOP), LOOP, where)
        limit = raw.get("max_iterations")
        if limit is None:
            self.problem(where, "max_iterations", "a loop needs a limit (1 to 100)")
            limit = 0
        elif isinstance(limit, bool) or not isinstance(limit, int):
            self.problem(where, "max_iterations", "must be a whole number from 1 to 100")
            limit = 0
        elif not 1 <= limit <= MAX_ITERATIONS:
            self.problem(where, "max_iterations", f"must be from 1 to 100, not {limit}")
        until = None
        if raw.get("until") is not None:
            until = self.condition(raw.get("until"), where, "until")
        return {"children": children, "max_iterations": limit, "until": until}


def _check_references(steps: tuple[Step, ...], visible: set[str], problems: list) -> set[str]:
    """Check each template against the steps finished before it; returns what a sequence makes
    visible after it."""
    seen = set(visible)
    for step in steps:
        seen |= _check_step(step, seen, problems)
    return seen


def _check_step(step: Step, visible: set[str], problems: list) -> set[str]:
    def check(template: str, field: str, allowed: set[str]) -> None:
        try:
            found = references(template)
        except ExpressionError:
            return  # reported when the step was read
        for reference in found:
            name = reference.step_id
            if name is None or name in allowed:
                continue
            problem = Problem(step.where, field, f"{reference.raw} names no step before this one")
            problems.append(problem)

    inside = {inner.id for inner in step.walk()} - {step.id}
    if step.is_call:
        check(step.input, "input", visible)
    elif step.kind == SEQUENCE:
        _check_references(step.children, visible, problems)
    elif step.kind == BRANCH:
        if step.condition is not None:
            check(
                step.condition.source if step.condition.compiled is None else "",
                "condition",
                visible,
            )
        for _, branch in step.branches:
            _check_references(branch, visible, problems)
    elif step.kind == PARALLEL:
        for child in step.children:
            _check_step(child, visible, problems)
    elif step.kind == LOOP:
        after = _check_references(step.children, visible, problems)
        if step.until is not None and step.until.compiled is None:
            check(step.until.source, "until", after)
    return inside | {step.id}
