"""Sends that name a skill instead of an agent: ``{"skill": "<skill id or words>", ...}`` in
the task API. The relay sends to the best healthy match and records on the task which agent
it chose and why (``metadata.relaySelection``).

The choice is ``registry.selection``'s (the ``RELAY_AGENT_SELECTOR``): when the words are a
skill id some agents declare, only those agents are candidates; otherwise every agent the
caller's key may call. Candidates whose health is unhealthy or whose circuit breaker is open are
skipped (and listed as skipped), so a better match that is down never gets the message.
"""

from __future__ import annotations

import copy
from typing import Any

from registry import selection
from registry.auth import key_may_call
from registry.models import Agent, Skill
from tasks_app import gateway

SKILL = "skill"
CANDIDATES = 10


def skill_target(caller, words: str) -> gateway.Target | None:
    """The agent target chosen for ``words``, with ``extra["selection"]`` saying why; None
    when no callable, healthy agent matches."""
    scope = selection.callable_agent_ids(caller)
    declaring = frozenset(
        Skill.objects.filter(skill_id__iexact=words.strip()).values_list("agent_id", flat=True)
    )
    if declaring:
        scope = declaring if scope is None else scope & declaring
    chosen = selection.select(
        request=selection.SelectRequest(text=words, limit=CANDIDATES, agent_ids=scope)
    )
    skipped: list[dict[str, str]] = []
    for candidate in chosen.selections:
        agent = candidate.skill.agent
        reason = _unfit(agent)
        if reason:
            skipped.append({"agentId": agent.pk, "reason": reason})
            continue
        target = gateway.resolve_target("agent", candidate.agent_id)
        if target is None or not key_may_call(caller, "agent", candidate.agent_id):
            continue
        # A copy: resolved targets may be cached and shared between calls.
        target = copy.copy(target)
        target.extra = {**target.extra, "selection": _record(words, candidate, chosen, skipped)}
        return target
    return None


def _unfit(agent: Agent) -> str:
    if agent.health == Agent.Health.UNHEALTHY:
        return "unhealthy"
    if agent.breaker_state == Agent.Breaker.OPEN:
        return "circuit breaker open"
    return ""


def _record(words: str, candidate: selection.Selection, chosen, skipped) -> dict[str, Any]:
    return {
        "skill": words,
        "agentId": candidate.agent_id,
        "skillId": candidate.skill.skill_id,
        "score": candidate.score,
        "why": candidate.why,
        "search": chosen.search.mode,
        "selector": selection.selector_name(),
        **({"skipped": skipped} if skipped else {}),
    }
