"""The skill search by words: the skills whose text has every word of a question, ranked by
where the words are (tags and names before descriptions) and by the agents' health.
``registry.semantic`` ranks by meaning and falls back to words through it."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from django.db.models import Case, IntegerField, Value, When
from django.db.models.functions import Coalesce

from registry.models import Agent, Skill
from registry.search_text import InvalidQueryError, facet, words

MAX_PAGE_SIZE = 100
"""The most skills one search returns (the registry's lists share it)."""


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
