"""Reads of workflows, with their steps in one more query."""

from __future__ import annotations

from django.db.models import QuerySet

from routing.models import Workflow


def workflow_list() -> QuerySet[Workflow]:
    return Workflow.objects.prefetch_related("steps").order_by("id")


def workflow_get(*, workflow_id: str) -> Workflow | None:
    return workflow_list().filter(pk=workflow_id).first()
