"""Test data built the way production builds it: cards go through the registry's services.

``card(**overrides)`` is a valid A2A 1.0 card; ``make_agent(**overrides)`` registers one through
``services.agent_register`` with an ``httpx.MockTransport`` serving it, so no test touches the
network and every agent has its snapshot, skills, extensions and facets as a real one would.
"""

from __future__ import annotations

import itertools
from typing import Any

import httpx
from django.utils import timezone
from django.utils.text import slugify

from registry import services
from registry.models import Agent

CARD_PATH = "/.well-known/agent-card.json"
_numbers = itertools.count(1)


def skill(skill_id: str = "forecast", **overrides: Any) -> dict[str, Any]:
    """A skill of a 1.0 card."""
    return {
        "id": skill_id,
        "name": skill_id.replace("-", " ").title(),
        "description": f"Does {skill_id}.",
        "tags": [skill_id],
        **overrides,
    }


def extension(uri: str, **overrides: Any) -> dict[str, Any]:
    """An entry of ``capabilities.extensions``."""
    return {"uri": uri, "description": "", "required": False, **overrides}


def card(**overrides: Any) -> dict[str, Any]:
    """A valid A2A 1.0 Agent Card; top-level keys in ``overrides`` replace the defaults."""
    return {
        "name": "Weather Agent",
        "description": "Forecasts and current conditions for any city.",
        "supportedInterfaces": [
            {
                "url": "http://agent.test/a2a/v1",
                "protocolBinding": "JSONRPC",
                "protocolVersion": "1.0",
            }
        ],
        "version": "1.0.0",
        "capabilities": {"streaming": False, "pushNotifications": False},
        "defaultInputModes": ["text/plain"],
        "defaultOutputModes": ["text/plain"],
        "skills": [
            skill(
                "forecast",
                name="Forecast",
                tags=["weather", "forecast"],
                examples=["Will it rain in Lyon tomorrow?"],
            ),
        ],
        **overrides,
    }


def card_client(
    document: dict[str, Any], *, seen: list[httpx.Request] | None = None
) -> httpx.Client:
    """An httpx client whose every host serves ``document`` at the well-known card path (and
    404 elsewhere). Requests are appended to ``seen`` when given."""

    def handler(request: httpx.Request) -> httpx.Response:
        if seen is not None:
            seen.append(request)
        if request.url.path.endswith(CARD_PATH):
            return httpx.Response(200, json=document)
        return httpx.Response(404, text="not found")

    return httpx.Client(transport=httpx.MockTransport(handler))


def make_agent(
    *,
    url: str | None = None,
    agent_id: str | None = None,
    status: str | None = None,
    health: str | None = None,
    document: dict[str, Any] | None = None,
    **card_overrides: Any,
) -> Agent:
    """Registers an agent through ``services.agent_register`` from ``card(**card_overrides)``
    (or ``document``), served at ``url`` (default: a fresh ``http://agent.test/...`` path).

    ``status`` goes through ``services.agent_update``. ``health`` stands in for a health probe:
    it is written to the row with the time of the check.
    """
    document = document if document is not None else card(**card_overrides)
    url = url or f"http://agent.test/{slugify(document.get('name', 'agent'))}-{next(_numbers)}"
    with card_client(document) as client:
        agent = services.agent_register(url=url, agent_id=agent_id, client=client)
    if status is not None:
        services.agent_update(agent=agent, fields={"status": status})
    if health is not None:
        Agent.objects.filter(pk=agent.pk).update(health=health, health_checked_at=timezone.now())
    agent.refresh_from_db()
    return agent


def make_task(agent: Agent, *, state: str = "working", target_kind: str = "agent", expires_at=None):
    """A task called at ``agent``, opened and moved to ``state`` through the task services,
    so its events are stored as the gateway stores them."""
    from tasks_app import services

    task = services.task_open(
        caller=None,
        target_kind=target_kind,
        target_id=agent.pk,
        agent_id=agent.pk,
        message={
            "messageId": f"m-{next(_numbers)}",
            "role": "ROLE_USER",
            "parts": [{"text": "hi"}],
        },
        client_version="1.0",
        expires_at=expires_at,
    )
    if state != "submitted":
        services.task_record(task=task, event=services.status_event(task, state, state))
    return task
