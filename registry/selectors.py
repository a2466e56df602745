"""Reads from the registry: listing, searching and filtering agents and skills.

The agent list's filters are declared in ``registry.filters``; the API's lists page with
``registry.api.pagination``, the same keyset paging (and cursors) as :func:`agent_list`.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from dataclasses import dataclass

from django.db.models import Prefetch, QuerySet

from registry.filters import ASK_RANK, agent_filter
from registry.models import Agent, CardSnapshot, Team, TeamMembership

# InvalidQueryError is raised by every list here (and by filters): the API answers it with 400.
from registry.search_text import InvalidQueryError as InvalidQueryError

DEFAULT_PAGE_SIZE = 30
MAX_PAGE_SIZE = 100


class AgentFilters(dict):
    """Filters of an agent list by their query parameter names, e.g.
    ``AgentFilters(tag="weather", streaming="true")``; what each one means and accepts is
    :class:`registry.filters.AgentFilterSet`'s to say."""


@dataclass(frozen=True)
class Page:
    items: list
    next_cursor: str | None


def filter_agents(queryset: QuerySet[Agent], filters: Mapping[str, str]) -> QuerySet[Agent]:
    """``queryset`` narrowed by ``filters``. Raises InvalidQueryError for a bad value."""
    return agent_filter(queryset, filters)


def encode_cursor(agent_id: str) -> str:
    return base64.urlsafe_b64encode(agent_id.encode()).decode().rstrip("=")


def decode_cursor(cursor: str) -> str:
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        agent_id = base64.b64decode(padded, altchars=b"-_", validate=True).decode()
    except (binascii.Error, UnicodeDecodeError, ValueError) as error:
        raise InvalidQueryError("cursor is not one this registry gave out") from error
    if not agent_id:
        raise InvalidQueryError("cursor is not one this registry gave out")
    return agent_id


def agent_list(
    *,
    filters: Mapping[str, str] | None = None,
    limit: int = DEFAULT_PAGE_SIZE,
    cursor: str | None = None,
) -> Page:
    """One page of agents ordered by id, with skills and extensions loaded; with ``ask``, the
    agents able to answer it, best first, on one page.

    Keyset paging: ``cursor`` is the opaque token of the last agent of the previous page, so
    pages stay stable while agents are added, and deep pages cost the same as the first.
    """
    if not 1 <= limit <= MAX_PAGE_SIZE:
        raise InvalidQueryError(f"limit must be between 1 and {MAX_PAGE_SIZE}")
    queryset = agent_filter(Agent.objects.all(), filters or {})
    if (filters or {}).get("ask", "").strip():
        # A question's agents, best first, on one page (at most 100 skills match).
        agents = list(queryset.order_by(ASK_RANK, "id").with_card()[:limit])
        return Page(items=agents, next_cursor=None)
    if cursor:
        queryset = queryset.filter(id__gt=decode_cursor(cursor))
    agents = list(queryset.order_by("id").with_card()[: limit + 1])
    next_cursor = encode_cursor(agents[limit - 1].id) if len(agents) > limit else None
    return Page(items=agents[:limit], next_cursor=next_cursor)


def agent_get(*, agent_id: str) -> Agent | None:
    return Agent.objects.with_card().select_related("current_snapshot").filter(pk=agent_id).first()


def agent_exists(*, agent_id: str) -> bool:
    """Whether an agent with this id is registered (one small query, nothing loaded)."""
    return Agent.objects.filter(pk=agent_id).exists()


def agent_snapshots(*, agent: Agent) -> list[CardSnapshot]:
    """The agent's card history, newest first."""
    return list(CardSnapshot.objects.filter(agent=agent).order_by("-fetched_at", "-id"))


def teams_with_members(queryset: QuerySet[Team]) -> QuerySet[Team]:
    """``queryset`` with each team's memberships (in team order) and their agents loaded in one
    more query, whatever the number of teams or members."""
    return queryset.prefetch_related(
        Prefetch(
            "memberships",
            queryset=TeamMembership.objects.select_related("agent").order_by("order", "agent_id"),
        )
    )


def team_list(*, limit: int = DEFAULT_PAGE_SIZE, cursor: str | None = None) -> Page:
    """One page of teams ordered by id, with their members, for the team pages: two queries,
    keyset paging as :func:`agent_list` (the team API pages through DRF instead)."""
    if not 1 <= limit <= MAX_PAGE_SIZE:
        raise InvalidQueryError(f"limit must be between 1 and {MAX_PAGE_SIZE}")
    queryset = Team.objects.all()
    if cursor:
        queryset = queryset.filter(id__gt=decode_cursor(cursor))
    teams = list(teams_with_members(queryset.order_by("id"))[: limit + 1])
    next_cursor = encode_cursor(teams[limit - 1].id) if len(teams) > limit else None
    return Page(items=teams[:limit], next_cursor=next_cursor)


def team_get(*, team_id: str) -> Team | None:
    return teams_with_members(Team.objects.filter(pk=team_id)).first()


REMOVED_PAGE_SIZE = 1000


def agents_removed(*, since) -> list[dict]:
    """Agents deleted at or after ``since`` (from the audit log), oldest first: ``{"id",
    "at"}``, at most REMOVED_PAGE_SIZE; a follower asks again from the last ``at``."""
    from registry.models import AuditEntry

    rows = (
        AuditEntry.objects.filter(
            object_type="agent", action=AuditEntry.Action.DELETE, at__gte=since
        )
        .order_by("at", "id")
        .values("object_id", "at")[:REMOVED_PAGE_SIZE]
    )
    return [{"id": row["object_id"], "at": row["at"]} for row in rows]
