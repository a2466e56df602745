"""Writes of workflows: import a YAML document (or the same as JSON data), replace it, delete
it. Every write checks the document (``definition``) and resolves the names its steps call
against the registry: ``agent:`` an agent's id or name, ``team:`` a team's id or name,
``workflow:`` another workflow's id (never itself, directly or through others).

Errors are :class:`WorkflowRejected` (400, every problem named by step and field) or the
registry's ``RegistryError`` (409 ``duplicate``)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.db import transaction
from django.db.models import Q
from django.utils import timezone
from django.utils.text import slugify

from registry.models import Agent
from registry.models import Team as RegistryTeam
from registry.services import SYSTEM, RegistryError, audit_record
from registry.usage_models import Quota
from routing.models import Workflow, WorkflowStep
from routing.workflows.definition import (
    AGENT,
    TEAM,
    WORKFLOW,
    Problem,
    WorkflowInvalid,
    dump_yaml,
    load_yaml,
    parse,
)
from routing.workflows.definition import Workflow as Definition

ID_LENGTH = 64


class WorkflowRejected(WorkflowInvalid):
    """A document that cannot be saved: not a valid workflow, or naming what is not there."""


def workflow_import(
    *,
    text: str | None = None,
    document: Any = None,
    workflow_id: str | None = None,
    replace: bool = False,
    actor: str = SYSTEM,
) -> Workflow:
    """Save a workflow from its YAML ``text`` (kept as its source) or its ``document`` data.
    Its id is ``workflow_id``, else the document's ``slug``, else its name slugified. An id
    that is taken is a 409 unless ``replace``."""
    if text is not None:
        document = _checked(lambda: load_yaml(text))
    definition = _checked(lambda: parse(document))
    found_id = workflow_id or definition.slug or slugify(definition.name)[:ID_LENGTH]
    if not found_id:
        raise WorkflowRejected([Problem("", "slug", "give the workflow a slug (its id)")])
    if definition.slug and workflow_id and definition.slug != workflow_id:
        raise WorkflowRejected(
            [Problem("", "slug", f"{definition.slug!r} is not this workflow's id {workflow_id!r}")]
        )
    targets, problems = resolve_targets(definition, own_id=found_id)
    if problems:
        raise WorkflowRejected(problems)
    source = text if text is not None else dump_yaml(document)
    with transaction.atomic():
        existing = Workflow.objects.select_for_update().filter(pk=found_id).first()
        if existing is not None and not replace:
            raise RegistryError(
                "duplicate", f"a workflow with id {found_id!r} already exists", status=409
            )
        workflow = existing or Workflow(pk=found_id)
        _store(workflow, definition, document, source=source, targets=targets)
        audit_record(
            actor=actor,
            action="update" if existing else "create",
            object_type="workflow",
            object_id=found_id,
            changes={"version": workflow.version},
        )
    return workflow


def workflow_delete(*, workflow: Workflow, actor: str = SYSTEM) -> None:
    """Deletes the workflow and its quota (named by id: ``registry.usage_models.Quota``)."""
    with transaction.atomic():
        audit_record(actor=actor, action="delete", object_type="workflow", object_id=workflow.pk)
        Quota.objects.filter(workflow=workflow.pk).delete()
        workflow.delete()


def workflow_document(
    *, name: str, version: str, description: str, slug: str, steps: Iterable[Any]
) -> dict[str, Any]:
    """The document a workflow's fields and its steps' data make (what the admin saves)."""
    document: dict[str, Any] = {"name": name}
    if slug:
        document["slug"] = slug
    document["version"] = version
    if description:
        document["description"] = description
    document["steps"] = list(steps)
    return document


def workflow_check(document: Any, *, own_id: str) -> tuple[Definition | None, list[Problem]]:
    """The document's problems, its targets' included (the admin shows them on its rows)."""
    try:
        definition = parse(document)
    except WorkflowInvalid as invalid:
        return None, list(invalid.problems)
    return definition, resolve_targets(definition, own_id=own_id)[1]


def workflow_store(
    *, workflow: Workflow, document: dict[str, Any], enabled: bool = True, actor: str = SYSTEM
) -> Workflow:
    """Save a checked document onto ``workflow`` (the admin's save): source, definition,
    targets and steps are rewritten together."""
    definition = _checked(lambda: parse(document))
    targets, problems = resolve_targets(definition, own_id=workflow.pk)
    if problems:
        raise WorkflowRejected(problems)
    with transaction.atomic():
        adding = workflow._state.adding
        workflow.enabled = enabled
        _store(workflow, definition, document, source=dump_yaml(document), targets=targets)
        audit_record(
            actor=actor,
            action="create" if adding else "update",
            object_type="workflow",
            object_id=workflow.pk,
            changes={"version": workflow.version},
        )
    return workflow


def _checked(read):
    try:
        return read()
    except WorkflowInvalid as invalid:
        raise WorkflowRejected(list(invalid.problems)) from None


def _store(workflow: Workflow, definition: Definition, document, *, source, targets) -> None:
    workflow.name = definition.name[:200]
    workflow.version = definition.version[:100]
    workflow.description = definition.description
    workflow.source = source
    workflow.definition = document
    workflow.targets = targets
    workflow.updated_at = timezone.now()
    workflow.save()
    workflow.steps.all().delete()
    WorkflowStep.objects.bulk_create(
        WorkflowStep(
            workflow=workflow,
            position=position,
            step_id=step.id,
            kind=step.kind,
            target=step.target[:200],
            source=dump_yaml(raw),
        )
        for position, (step, raw) in enumerate(
            zip(definition.steps, document["steps"], strict=True)
        )
    )


def resolve_targets(definition: Definition, *, own_id: str) -> tuple[dict, list[Problem]]:
    """``{"agent": {name: id}, "team": {...}, "workflow": {...}}`` and the problems: a name
    that matches nothing, a name two agents (or teams) share, a workflow that calls itself."""
    targets: dict[str, dict[str, str]] = {AGENT: {}, TEAM: {}, WORKFLOW: {}}
    problems: list[Problem] = []
    for kind, model in ((AGENT, Agent), (TEAM, RegistryTeam)):
        calls = definition.targets(kind)
        names = {name for _, name in calls}
        rows = list(model.objects.filter(Q(id__in=names) | Q(name__in=names)).values("id", "name"))
        for step, name in calls:
            by_id = [row["id"] for row in rows if row["id"] == name]
            by_name = sorted(row["id"] for row in rows if row["name"] == name)
            if by_id or len(by_name) == 1:
                targets[kind][name] = (by_id or by_name)[0]
            elif by_name:
                listed = ", ".join(by_name)
                problems.append(
                    Problem(
                        step.where,
                        kind,
                        f"{len(by_name)} {kind}s are named {name!r} ({listed}): use the id",
                    )
                )
            else:
                problems.append(
                    Problem(step.where, kind, f"no registered {kind} has the id or name {name!r}")
                )
    calls = definition.targets(WORKFLOW)
    known = dict(
        Workflow.objects.filter(id__in={name for _, name in calls}).values_list("id", "targets")
    )
    for step, name in calls:
        if name == own_id or (name in known and _calls(name, own_id, known)):
            problems.append(Problem(step.where, WORKFLOW, f"{name!r} calls this workflow back"))
        elif name in known:
            targets[WORKFLOW][name] = name
        else:
            problems.append(Problem(step.where, WORKFLOW, f"no workflow has the id {name!r}"))
    return targets, problems


def _calls(start: str, own_id: str, known: dict[str, dict]) -> bool:
    """Whether workflow ``start`` calls ``own_id``, directly or through other workflows."""
    seen, todo = set(), [start]
    while todo:
        current = todo.pop()
        if current in seen:
            continue
        seen.add(current)
        if current not in known:
            known[current] = (
                Workflow.objects.filter(pk=current).values_list("targets", flat=True).first() or {}
            )
        called = (known[current] or {}).get(WORKFLOW, {}).values()
        if own_id in called:
            return True
        todo.extend(called)
    return False
