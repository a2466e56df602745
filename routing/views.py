"""The routing pages for people: one task's conversation, drawn as a sequence diagram."""

from __future__ import annotations

from django.contrib.admin.views.decorators import staff_member_required
from django.shortcuts import render

from routing import selectors
from routing.diagram import HopView, sequence_diagram
from tasks_app.lifecycle import TaskState


@staff_member_required
def task_page(request, task_id: str):
    """``/tasks/<task_id>/``: the picture of a team task's conversation and its hop table.
    Staff only (a browser cannot send a task's API key); other users go to the admin login."""
    found = selectors.trace_of(task_id)
    if found is None:
        return render(request, "routing/task_not_found.html", {"task_id": task_id}, status=404)
    task, hops = found
    diagram = sequence_diagram(
        [
            HopView(
                order=hop.order,
                from_id=hop.from_id,
                to_id=hop.to_id,
                reason=hop.reason,
                routing_error=hop.routing_error,
                outcome=hop.outcome,
                next_id=hop.next_id,
                latency_ms=hop.latency_ms,
            )
            for hop in hops
        ],
        ending="canceled" if task.state == TaskState.CANCELED else None,
    )
    answer = task.status_message or {}
    answer_text = "\n".join(
        part["text"] for part in answer.get("parts", []) if isinstance(part.get("text"), str)
    )
    return render(
        request,
        "routing/task_trace.html",
        {
            "task": task,
            "hops": hops,
            "diagram": diagram,
            "answer_text": answer_text,
        },
    )
