"""The registry's pages for people: the agent list with search and filters, and one agent's page.

Views parse the query, call selectors and render; what a page shows is decided in its template.
Both pages run a fixed number of queries, whatever the number of agents, skills or snapshots.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import wraps
from typing import Any
from urllib.parse import urlencode, urlsplit

from django.conf import settings
from django.contrib.auth.views import redirect_to_login
from django.shortcuts import render

from registry import selectors
from registry.api.views import agent_filters_from
from registry.cards import CLIENT_ROUTING_URI, card_diff
from registry.models import Agent, CardSnapshot


@dataclass(frozen=True)
class DiffLine:
    """One line of a unified diff; ``kind`` is file, hunk, added, removed or context."""

    kind: str
    text: str


@dataclass(frozen=True)
class HistoryEntry:
    """A snapshot and the diff from the snapshot before it (empty for the first one)."""

    snapshot: CardSnapshot
    diff: list[DiffLine]
    is_first: bool


def pretty_json(value: Any) -> str:
    """JSON for people to read: indented, keys in the card's own order, non-ASCII kept."""
    return json.dumps(value, indent=2, ensure_ascii=False)


def card_history(snapshots: list[CardSnapshot]) -> list[HistoryEntry]:
    """Snapshots (newest first, as ``selectors.agent_snapshots`` gives them), each with its diff
    to the previous one. Pure: runs no queries."""
    older_ones: list[CardSnapshot | None] = [*snapshots[1:], None][: len(snapshots)]
    return [
        HistoryEntry(
            snapshot=newer,
            diff=_diff_lines(older, newer) if older is not None else [],
            is_first=older is None,
        )
        for newer, older in zip(snapshots, older_ones, strict=True)
    ]


def _diff_lines(older: CardSnapshot, newer: CardSnapshot) -> list[DiffLine]:
    lines = card_diff(
        older.raw,
        newer.raw,
        old_label=f"{older.content_hash[:12]}  {older.fetched_at:%Y-%m-%d %H:%M:%S}",
        new_label=f"{newer.content_hash[:12]}  {newer.fetched_at:%Y-%m-%d %H:%M:%S}",
    )
    return [DiffLine(kind=_diff_kind(line), text=line) for line in lines]


def _diff_kind(line: str) -> str:
    if line.startswith(("+++", "---")):
        return "file"
    if line.startswith("@@"):
        return "hunk"
    if line.startswith("+"):
        return "added"
    if line.startswith("-"):
        return "removed"
    return "context"


def _web_url(url: str) -> str:
    """``url`` when it is an http(s) URL, else ""."""
    try:
        scheme = urlsplit(url).scheme
    except ValueError:
        return ""
    return url if scheme in ("http", "https") else ""


def registry_read(view):
    """Lets everyone in while RELAY_REGISTRY_PUBLIC is on; otherwise only active staff users,
    and sends everyone else to the admin login (LOGIN_URL), as the API does for reads."""

    @wraps(view)
    def guarded(request, *args, **kwargs):
        user = request.user
        if not settings.RELAY_REGISTRY_PUBLIC and not (user.is_active and user.is_staff):
            return redirect_to_login(request.get_full_path())
        return view(request, *args, **kwargs)

    return guarded


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
        "next_query": _next_page_query(params, page.next_cursor) if page.next_cursor else "",
        "first_query": _next_page_query(params, None) if params.get("cursor") else None,
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
    # Probe results are recorded by routing, above the registry; the pages read them there.
    from routing import metrics
    from routing import selectors as routing_selectors

    samples = routing_selectors.recent_probe_samples(agent_ids=[agent.pk for agent in agents])
    for agent in agents:
        agent.sparkline = metrics.sparkline(samples.get(agent.pk, []))


def _next_page_query(params, cursor: str | None) -> str:
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
            "card": _web_url(agent.card_url),
            "provider": _web_url(agent.provider_url),
            "documentation": _web_url(agent.documentation_url),
            "icon": _web_url(agent.icon_url),
        },
        "history": card_history(selectors.agent_snapshots(agent=agent)),
        "client_routing_uri": CLIENT_ROUTING_URI,
        **_health_context(agent),
    }
    return render(request, "registry/agent_detail.html", context)


def _health_context(agent: Agent) -> dict[str, Any]:
    """The agent page's metrics of the last 24 hours, their hourly chart, and the latest
    health and breaker changes (five queries)."""
    from routing import metrics
    from routing import selectors as routing_selectors

    found = routing_selectors.agent_metrics(agent_id=agent.pk)
    return {
        "metrics": found,
        "metrics_chart": metrics.hour_chart(found.series),
        "health_events": routing_selectors.recent_health_events(agent_id=agent.pk),
    }
