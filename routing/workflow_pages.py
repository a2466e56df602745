"""The workflow pages for people: the list of workflows, one workflow's page (a drawing of its
steps, how to call it, its latest runs for staff) and a run's page (its steps on a timeline,
with their state, input and output, and the run as a sequence diagram).

The list and the workflow page have the agent pages' read guard (``registry_read``); a run
page shows what callers sent, so it is for staff only, as the task pages are (a browser cannot
send a task's API key). Each page runs a fixed number of queries, whatever the number of steps
or runs.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.contrib.admin.views.decorators import staff_member_required
from django.shortcuts import render

from registry.views import registry_read
from relay_project.public_url import relay_base_url
from routing import selectors as routing_selectors
from routing.call_snippets import call_snippets
from routing.diagram import USER, HopView, sequence_diagram
from routing.models import WorkflowStepRun
from routing.workflows import selectors
from routing.workflows.definition import WorkflowInvalid, parse
from routing.workflows.drawing import workflow_drawing
from routing.workflows.run_steps import caller_message, output_of, text_of
from tasks_app.lifecycle import TaskState
from tasks_app.models import Task

RECENT_RUNS = 10
HOP_OUTCOMES = {
    TaskState.COMPLETED: "replied",
    TaskState.INPUT_REQUIRED: "parked",
    TaskState.AUTH_REQUIRED: "parked",
    TaskState.FAILED: "failed",
    TaskState.REJECTED: "failed",
    TaskState.CANCELED: "canceled",
}


@registry_read
def workflow_list_page(request):
    """``/workflows/``: every workflow with its steps' ids (two queries)."""
    workflows = list(selectors.workflow_list())
    return render(request, "routing/workflow_list.html", {"workflows": workflows})


@registry_read
def workflow_page(request, workflow_id: str):
    """``/workflows/{id}/``: one workflow. Staff also see its latest runs."""
    workflow = selectors.workflow_get(workflow_id=workflow_id)
    if workflow is None:
        return render(
            request, "routing/workflow_not_found.html", {"workflow_id": workflow_id}, status=404
        )
    try:
        drawing = workflow_drawing(parse(workflow.definition).steps)
        invalid = ""
    except WorkflowInvalid as error:  # saved before a rule it breaks
        drawing, invalid = None, str(error)
    user = request.user
    staff = user.is_active and user.is_staff
    context = {
        "workflow": workflow,
        "steps": workflow.steps.all(),
        "drawing": drawing,
        "invalid": invalid,
        "call": call_snippets(
            relay_base_url(request, f"/a2a/workflows/{workflow.pk}/"),
            agui_url=relay_base_url(request, f"/agui/workflows/{workflow.pk}"),
        ),
        "task_templates": routing_selectors.task_templates_for(
            kind="workflow", target_id=workflow.pk
        ),
        "show_runs": staff,
        "runs": selectors.workflow_runs(workflow_id=workflow.pk, limit=RECENT_RUNS)
        if staff
        else [],
    }
    return render(request, "routing/workflow_detail.html", context)


@dataclass(frozen=True)
class StepView:
    """One row of a run's timeline."""

    key: str
    child: Task
    input: str
    output: str
    seconds: float | None
    offset: float
    width: float

    @property
    def state(self) -> str:
        return self.child.state

    @property
    def is_workflow(self) -> bool:
        return self.child.target_kind == "workflow"


def _seconds(task: Task) -> float | None:
    if task.completed_at is None:
        return None
    return max((task.completed_at - task.created_at).total_seconds(), 0.0)


def _step_views(run: Task, rows: list[WorkflowStepRun]) -> list[StepView]:
    """The timeline: each step's bar starts where the step started in the run and is as long
    as it took (to now for a step still running), as percentages of the run's span."""
    ends = [row.child.completed_at or row.child.updated_at for row in rows]
    end = max([run.completed_at or run.updated_at, *ends])
    span = max((end - run.created_at).total_seconds(), 0.001)
    views = []
    for row, child_end in zip(rows, ends, strict=True):
        child = row.child
        start = max((child.created_at - run.created_at).total_seconds(), 0.0)
        length = max((child_end - child.created_at).total_seconds(), 0.0)
        views.append(
            StepView(
                key=row.key,
                child=child,
                input=caller_message(child).text,
                output=output_of(child).text,
                seconds=_seconds(child),
                offset=round(100 * start / span, 2),
                width=max(round(100 * length / span, 2), 0.6),
            )
        )
    return views


@staff_member_required
def workflow_run_page(request, workflow_id: str, task_id: str):
    """``/workflows/{id}/runs/{task_id}/``: one run of the workflow. Staff only."""
    found = selectors.workflow_run(task_id=task_id)
    if found is None or found[0].target_id != workflow_id:
        return render(request, "routing/task_not_found.html", {"task_id": task_id}, status=404)
    run, rows = found
    steps = _step_views(run, rows)
    hops = [HopView(order=0, from_id=USER, to_id=workflow_id, reason="message")]
    hops += [
        HopView(
            order=index,
            from_id=workflow_id,
            to_id=view.child.target_id,
            reason=view.key,
            outcome=HOP_OUTCOMES.get(view.state, ""),
            latency_ms=view.seconds * 1000 if view.seconds is not None else None,
        )
        for index, view in enumerate(steps, start=1)
    ]
    diagram = sequence_diagram(
        hops, ending=HOP_OUTCOMES.get(run.state, ""), answered_by=workflow_id
    )
    answer = text_of((run.status_message or {}).get("parts"))
    context = {
        "workflow_id": workflow_id,
        "task": run,
        "input": caller_message(run).text,
        "answer_text": answer,
        "steps": steps,
        "diagram": diagram,
        "hop_count": len(steps),
    }
    return render(request, "routing/workflow_run.html", context)
