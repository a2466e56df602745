"""Reads of workflows (with their steps in one more query) and of their runs."""

from __future__ import annotations

from django.db.models import QuerySet

from routing.models import Workflow, WorkflowStepRun
from tasks_app.models import Task


def workflow_list() -> QuerySet[Workflow]:
    return Workflow.objects.prefetch_related("steps").order_by("id")


def workflow_get(*, workflow_id: str) -> Workflow | None:
    return workflow_list().filter(pk=workflow_id).first()


def workflow_runs(*, workflow_id: str, limit: int = 10) -> list[Task]:
    """A workflow's latest runs (its own tasks, not its steps'), newest first (one query)."""
    return list(
        Task.objects.filter(target_kind="workflow", target_id=workflow_id)
        .only("id", "state", "created_at", "completed_at", "error")
        .order_by("-created_at", "-id")[:limit]
    )


def workflow_run(*, task_id: str) -> tuple[Task, list[WorkflowStepRun]] | None:
    """A workflow task and its step rows in the order they started, each with its child task
    (two queries, whatever the number of steps); None when no workflow task has that id."""
    task = Task.objects.filter(pk=task_id, target_kind="workflow").first()
    if task is None:
        return None
    steps = WorkflowStepRun.objects.filter(run=task).select_related("child")
    return task, list(steps.order_by("created_at", "id"))
