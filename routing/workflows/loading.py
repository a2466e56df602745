"""Loading a workflow as a gateway target (kind "workflow"): its checked definition and the
ids its names resolved to, kept per process and dropped when a workflow is saved or deleted."""

from __future__ import annotations

from routing.models import Workflow
from routing.workflows.definition import WorkflowInvalid, parse
from routing.workflows.runner import LoadedWorkflow, WorkflowTarget
from tasks_app import gateway


def _load_workflow(workflow_id: str) -> LoadedWorkflow | None:
    row = Workflow.objects.filter(pk=workflow_id, enabled=True).first()
    if row is None:
        return None
    try:
        definition = parse(row.definition)
    except WorkflowInvalid:  # saved before a rule it breaks: it cannot be called
        return None
    return LoadedWorkflow(
        id=row.pk,
        name=row.name,
        description=row.description,
        definition=definition,
        targets=row.targets or {},
    )


_workflows = gateway.TargetCache(_load_workflow, gateway.target_cache_seconds)


def workflow_target(workflow_id: str) -> WorkflowTarget | None:
    """The enabled workflow as a gateway target, or None."""
    loaded = _workflows.get(workflow_id)
    return WorkflowTarget(loaded) if loaded is not None else None


def workflow_changed(sender, instance, **kwargs) -> None:
    """post_save and post_delete receiver for Workflow."""
    _workflows.forget(instance.pk)
