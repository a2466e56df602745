"""Choosing agents for a message: ``POST /a2a/select`` and sends that name a skill.

A selector is a callable ``(*, request: SelectRequest) -> Selected`` (or a plain list of
:class:`Selection`), named by the ``RELAY_AGENT_SELECTOR`` setting; :func:`select` calls it.
The default, :func:`rank_by_meaning`, ranks skills with ``registry.semantic`` and keeps each
agent's best skill, with the example of that skill closest to the message as the reason.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from django.conf import settings
from django.utils.module_loading import import_string

from registry import embeddings, semantic
from registry.filters import InvalidQueryError
from registry.models import Skill, TeamMembership


@dataclass(frozen=True)
class SelectRequest:
    """What to choose for: the message's text and the filters an agent must pass."""

    text: str
    team_id: str = ""
    tags: tuple[str, ...] = ()
    input_modes: tuple[str, ...] = ()
    output_modes: tuple[str, ...] = ()
    limit: int = 5
    healthy_only: bool = False
    agent_ids: frozenset[str] | None = None  # the agents the caller may call (None: any)


@dataclass(frozen=True)
class Selection:
    """One agent, with the skill that made it a match."""

    agent_id: str
    score: float
    skill: Skill
    example: str = ""
    meaning: float = 0.0
    words: float = 0.0

    @property
    def why(self) -> str:
        said = f"skill {self.skill.name!r}"
        if self.meaning:
            said += f" means much the same (similarity {self.meaning:.2f})"
        if self.words:
            said += f"; shares {self.words:.0%} of the words"
        if self.example:
            said += f"; for example {self.example!r}"
        return said


@dataclass(frozen=True)
class Selected:
    selections: list[Selection]
    search: semantic.SearchMode = field(default_factory=lambda: semantic.SearchMode("custom"))


def message_text(message: Mapping) -> str:
    """The text of an A2A message (1.0 ``parts`` with ``text``; 0.3 ``parts`` of kind text, or
    ``content`` in 0.3 REST). Raises InvalidQueryError when it has none."""
    if not isinstance(message, Mapping):
        raise InvalidQueryError("message must be an A2A message object")
    parts = message.get("parts", message.get("content"))
    if not isinstance(parts, list) or not parts:
        raise InvalidQueryError("message.parts must be a list with at least one part")
    texts = []
    for part in parts:
        if isinstance(part, Mapping) and isinstance(part.get("text"), str):
            texts.append(part["text"])
    text = " ".join(t.strip() for t in texts if t.strip())
    if not text:
        raise InvalidQueryError("message has no text part to choose an agent by")
    return text


def team_member_ids(team_id: str) -> frozenset[str]:
    """The enabled members of a team. Raises InvalidQueryError for an unknown team."""
    from registry.models import Team

    if not Team.objects.filter(pk=team_id).exists():
        raise InvalidQueryError(f"filters.team: no team with id {team_id!r}")
    return frozenset(
        TeamMembership.objects.filter(team_id=team_id, enabled=True).values_list(
            "agent_id", flat=True
        )
    )


def rank_by_meaning(*, request: SelectRequest) -> Selected:
    """The default selector: agents by their best skill, as ``registry.semantic`` ranks them."""
    agent_ids = request.agent_ids
    if request.team_id:
        members = team_member_ids(request.team_id)
        agent_ids = members if agent_ids is None else members & agent_ids
    matches, mode = semantic.skill_find(
        semantic.SkillQuery(
            text=request.text,
            tags=request.tags,
            input_modes=request.input_modes,
            output_modes=request.output_modes,
            agent_ids=agent_ids,
            healthy_only=request.healthy_only,
        ),
        # Several skills of one agent may match: ask for more, keep each agent's best.
        limit=min(100, request.limit * 4),
    )
    best: dict[str, semantic.SkillMatch] = {}
    for match in matches:
        best.setdefault(match.skill.agent_id, match)
    chosen = list(best.values())[: request.limit]
    examples = _closest_examples(request.text, [m.skill for m in chosen])
    return Selected(
        [
            Selection(
                agent_id=match.skill.agent_id,
                score=match.score,
                skill=match.skill,
                example=examples.get(match.skill.pk, ""),
                meaning=match.meaning,
                words=match.words,
            )
            for match in chosen
        ],
        mode,
    )


def _closest_examples(text: str, skills: list[Skill]) -> dict[int, str]:
    """Each skill's example closest in meaning to ``text`` (its first one without the model)."""
    examples = {s.pk: [str(e) for e in s.examples if str(e).strip()][:10] for s in skills}
    flat = [(pk, example) for pk, items in examples.items() for example in items]
    if not flat:
        return {}
    try:
        model = embeddings.embedder()
    except embeddings.EmbeddingsUnavailable:
        return {pk: items[0] for pk, items in examples.items() if items}
    vectors = model.encode([text] + [example for _pk, example in flat])
    similarity = vectors[1:] @ vectors[0]
    closest: dict[int, tuple[float, str]] = {}
    for (pk, example), value in zip(flat, similarity, strict=True):
        if pk not in closest or value > closest[pk][0]:
            closest[pk] = (float(value), example)
    return {pk: example for pk, (_value, example) in closest.items()}


def callable_agent_ids(api_key) -> frozenset[str] | None:
    """The agents ``api_key`` may call (``registry.auth.key_may_call``), or None when it may
    call any: a key scoped to teams reaches their members through them."""
    if api_key is None:
        return None
    if not api_key.can_call:
        return frozenset()
    agents = frozenset(api_key.agents.values_list("pk", flat=True))
    teams = frozenset(api_key.teams.values_list("pk", flat=True))
    if not agents and not teams:
        return None
    members = TeamMembership.objects.filter(team_id__in=teams).values_list("agent_id", flat=True)
    return agents | frozenset(members)


def selector_name() -> str:
    return settings.RELAY_AGENT_SELECTOR


def select(*, request: SelectRequest) -> Selected:
    """Agents for ``request``, best first, by the selector ``RELAY_AGENT_SELECTOR`` names."""
    chosen = import_string(selector_name())(request=request)
    if not isinstance(chosen, Selected):
        chosen = Selected(list(chosen))
    return Selected(chosen.selections[: request.limit], chosen.search)
