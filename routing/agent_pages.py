"""The registry's pages for people, with each agent's health: the agent list with search,
filters and probe sparklines, and one agent's page with its card history, metrics and health
events. They are routing's because routing records the health they show; the card history and
the read guard come from ``registry.views``.

Views parse the query, call selectors and render; what a page shows is decided in its template.
Both pages run a fixed number of queries, whatever the number of agents, skills or snapshots.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from django.shortcuts import render

from registry import selectors
from registry.api.views import agent_filters_from
from registry.cards import CLIENT_ROUTING_URI
from registry.models import Agent
from registry.views import card_history, pretty_json, registry_read, web_url
from relay_project.public_url import relay_base_url
from routing import metrics
from routing import selectors as routing_selectors
from routing.call_snippets import call_snippets
from routing.mcp.tools import tool_name


@registry_read
def registry_page(request):
    """The agent list. A bad filter value or cursor shows the message with status 400."""
    params = request.GET
    error = ""
    try:
        page = selectors.agent_list(
            filters=agent_filters_from(params), cursor=params.get("cursor") or None
        )
    except selectors.InvalidQueryError as invalid:
        error = str(invalid)
        page = selectors.Page(items=[], next_cursor=None)
    _attach_sparklines(page.items)
    filtered = any(value for name, value in params.items() if name != "cursor")
    context = {
        "params": params,
        "agents": page.items,
        "next_query": next_page_query(params, page.next_cursor) if page.next_cursor else "",
        "first_query": next_page_query(params, None) if params.get("cursor") else None,
        "filtered": filtered,
        "error": error,
        "statuses": Agent.Status.choices,
        "healths": Agent.Health.choices,
        "client_routing_uri": CLIENT_ROUTING_URI,
    }
    return render(request, "registry/agent_list.html", context, status=400 if error else 200)


def _attach_sparklines(agents: list[Agent]) -> None:
    """Gives each agent of a page ``sparkline``: the layout of its recent probe latencies, or
    None. One query for the whole page."""
    samples = routing_selectors.recent_probe_samples(agent_ids=[agent.pk for agent in agents])
    for agent in agents:
        agent.sparkline = metrics.sparkline(samples.get(agent.pk, []))


def next_page_query(params, cursor: str | None) -> str:
    """The query string of another page: the same filters (empty ones dropped), a new cursor."""
    kept = {name: value for name, value in params.items() if value and name != "cursor"}
    if cursor:
        kept["cursor"] = cursor
    return urlencode(kept)


@registry_read
def agent_page(request, agent_id: str):
    """Everything the registry knows about one agent, with its card history and diffs."""
    agent = selectors.agent_get(agent_id=agent_id)
    if agent is None:
        return render(request, "registry/agent_not_found.html", {"agent_id": agent_id}, status=404)
    snapshot = agent.current_snapshot
    context = {
        "agent": agent,
        "skills": agent.skills.all(),
        "extensions": [
            (extension, pretty_json(extension.params) if extension.params else "")
            for extension in agent.extensions.all()
        ],
        "card_json": pretty_json(snapshot.raw) if snapshot else "",
        # Card URLs become links only when they are http(s): a card could say "javascript:".
        "links": {
            "card": web_url(agent.card_url),
            "provider": web_url(agent.provider_url),
            "documentation": web_url(agent.documentation_url),
            "icon": web_url(agent.icon_url),
        },
        "history": card_history(selectors.agent_snapshots(agent=agent)),
        "client_routing_uri": CLIENT_ROUTING_URI,
        "call": call_snippets(
            relay_base_url(request, f"/a2a/agents/{agent.pk}/"),
            agui_url=relay_base_url(request, f"/agui/agents/{agent.pk}"),
            mcp_url=relay_base_url(request, f"/mcp/agents/{agent.pk}"),
            mcp_tool=tool_name("agent", agent.pk),
        ),
        "call_blocked": _call_blocked(agent),
        "task_templates": routing_selectors.task_templates_for(kind="agent", target_id=agent.pk),
        "alternates": list(agent.alternate_links.values_list("alternate_id", flat=True)),
        **_health_context(agent),
    }
    return render(request, "registry/agent_detail.html", context)


def _call_blocked(agent: Agent) -> str:
    """Why calls to the agent through the relay cannot work now, or "" when they can."""
    if agent.status == Agent.Status.DISABLED:
        return (
            "This agent is disabled: the relay answers calls to it with 404 until it is "
            "enabled again."
        )
    if agent.current_snapshot is None:
        return "The relay has no card of this agent yet, so it cannot serve one or call it."
    return ""


def _health_context(agent: Agent) -> dict[str, Any]:
    """The agent page's metrics of the last 24 hours, their hourly chart, and the latest
    health and breaker changes (five queries)."""
    found = routing_selectors.agent_metrics(agent_id=agent.pk)
    return {
        "metrics": found,
        "metrics_chart": metrics.hour_chart(found.series),
        "health_events": routing_selectors.recent_health_events(agent_id=agent.pk),
    }
