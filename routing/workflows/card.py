"""A workflow's card at ``/a2a/workflows/{id}/.well-known/agent-card.json``: public, like
every agent card; 404 for an unknown or disabled workflow."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.http import require_safe

from registry import principals
from registry.models import Agent
from relay_project.public_url import relay_base_url
from routing.models import Workflow
from routing.workflows.definition import AGENT, WorkflowInvalid, parse
from tasks_app import cards
from tasks_app.api.cards import card_response, reader_version


def workflow_relay_card(workflow: Workflow, request: HttpRequest) -> dict:
    """The workflow's synthesized card: its own skill, then those of its first step's agent."""
    first_step, first_skills = "", []
    try:
        first = next((step for step in parse(workflow.definition).walk() if step.is_call), None)
    except WorkflowInvalid:
        first = None
    if first is not None:
        first_step = first.id
        if first.kind == AGENT:
            agent_id = (workflow.targets or {}).get(AGENT, {}).get(first.target, first.target)
            agent = Agent.objects.select_related("current_snapshot").filter(pk=agent_id).first()
            if agent is not None and agent.current_snapshot is not None:
                first_skills = agent.current_snapshot.normalized.get("skills") or []
    return cards.card_for_reader(
        cards.workflow_card(
            workflow_id=workflow.pk,
            name=workflow.name,
            description=workflow.description,
            base_url=relay_base_url(request, f"/a2a/workflows/{workflow.pk}/"),
            first_step=first_step,
            first_skills=first_skills,
            version=workflow.version or "1.0.0",
            security=principals.card_security_schemes(),
        ),
        version=reader_version(request),
    )


@require_safe
def workflow_agent_card(request: HttpRequest, workflow_id: str) -> HttpResponse:
    workflow = Workflow.objects.filter(pk=workflow_id, enabled=True).first()
    if workflow is None:
        return JsonResponse(
            {
                "error": {
                    "code": 404,
                    "status": "NOT_FOUND",
                    "message": f"no workflow {workflow_id!r} at this relay",
                }
            },
            status=404,
        )
    return card_response(request, workflow_relay_card(workflow, request))
