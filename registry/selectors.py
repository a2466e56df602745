"""Reads from the registry: listing, searching and filtering agents and skills.

The agent list's filters are declared in ``registry.filters``; the API's lists page with
``registry.api.pagination``, the same keyset paging (and cursors) as :func:`agent_list`.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from django.db.models import Case, IntegerField, Prefetch, QuerySet, Value, When
from django.db.models.functions import Coalesce

from registry.filters import ASK_RANK, agent_filter, facet, words

# InvalidQueryError is raised by every list here (and by filters): the API answers it with 400.
from registry.filters import InvalidQueryError as InvalidQueryError
from registry.models import Agent, CardSnapshot, Skill, Team, TeamMembership

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


@dataclass(frozen=True)
class SkillFilters:
    q: str = ""
    tag: str = ""
    input_mode: str = ""
    output_mode: str = ""
    extension: str = ""


# Weights of a query word found in a skill's tags, name, id or description.
_WEIGHT_TAG = 3
_WEIGHT_NAME = 3
_WEIGHT_ID = 2
_WEIGHT_DESCRIPTION = 1
_HEALTH_ORDER = Case(
    When(agent__health=Agent.Health.HEALTHY, then=Value(0)),
    When(agent__health=Agent.Health.UNKNOWN, then=Value(1)),
    When(agent__health=Agent.Health.DEGRADED, then=Value(2)),
    default=Value(3),
    output_field=IntegerField(),
)


def skill_search(
    *, filters: SkillFilters, limit: int = 20, agent_ids: Iterable[str] | None = None
) -> list[tuple[Skill, float]]:
    """Skills that match, best first, with a relevance score in (0, 1].

    Every query word must occur somewhere in the skill (name, id, description or tags); the score
    weighs where each word was found (tag or name 3, id 2, description 1) against the best
    possible. Ties go to healthier agents, then by agent and skill id. Disabled agents are left
    out, and so are agents not in ``agent_ids`` when given. Scoring and ordering run in the
    database, so the cost does not grow with the result.
    """
    if not 1 <= limit <= MAX_PAGE_SIZE:
        raise InvalidQueryError(f"limit must be between 1 and {MAX_PAGE_SIZE}")
    query_words = words(filters.q)
    queryset = Skill.objects.select_related("agent").exclude(agent__status=Agent.Status.DISABLED)
    for word in query_words:
        queryset = queryset.filter(search_text__contains=word)
    if filters.tag:
        queryset = queryset.filter(tag_facets__contains=facet(filters.tag))
    if filters.input_mode:
        queryset = queryset.filter(input_mode_facets__contains=facet(filters.input_mode))
    if filters.output_mode:
        queryset = queryset.filter(output_mode_facets__contains=facet(filters.output_mode))
    if filters.extension:
        queryset = queryset.filter(agent__extension_facets__contains=f"|{filters.extension}|")
    if agent_ids is not None:
        queryset = queryset.filter(agent_id__in=list(agent_ids))
    if query_words:
        points = Value(0)
        for word in query_words:
            points = points + Case(
                When(tag_facets__contains=facet(word), then=Value(_WEIGHT_TAG)),
                When(name__icontains=word, then=Value(_WEIGHT_NAME)),
                When(skill_id__icontains=word, then=Value(_WEIGHT_ID)),
                default=Value(_WEIGHT_DESCRIPTION),
                output_field=IntegerField(),
            )
        best = _WEIGHT_TAG * len(query_words)
        queryset = queryset.annotate(points=Coalesce(points, Value(0)))
    else:
        best = 1
        queryset = queryset.annotate(points=Value(1, output_field=IntegerField()))
    queryset = queryset.annotate(health_rank=_HEALTH_ORDER).order_by(
        "-points", "health_rank", "agent_id", "position"
    )
    return [(skill, round(skill.points / best, 3)) for skill in queryset[:limit]]


# --- Teams ----------------------------------------------------------------------------------


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
