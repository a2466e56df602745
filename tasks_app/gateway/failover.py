"""Failover to an agent's alternates (docs/concepts/retries.md): when the agent a send names is
unhealthy, its circuit breaker is open, or the send did not reach it (``retries``: refused,
unresolved, TLS, 502/503/504, 429) after its retries, the send goes to the next alternate, in
the order the admin set, that is healthy and the caller's key may call. The task records which
agent served it and why (``Task.agent`` and ``metadata.relaySelection``); its follow-ups,
cancels, refreshes and takeovers go to that agent (``serving``).

An agent with ``failover_same_skill`` on also fails over, once its alternates are spent, to
other agents declaring a skill with the same id: the skill the send named (the task API's
``skill``), or else any of the agent's own. Only agents not disabled, not unhealthy and whose
breaker is not open qualify, healthy ones first, then by id; at most ``SAME_SKILL_CANDIDATES``
are tried.

Only a task's first send fails over: once an agent has the task, the task lives there.

Each send another agent took is counted in Prometheus once that agent answered, by the agent
the send named, the agent that took it and how that one was chosen (``FAILOVERS``:
``alternate`` or ``same_skill``).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

from prometheus_client import Counter

from registry.auth import key_may_call
from registry.models import Agent, Skill
from relay_project.database import database_sync_to_async
from relay_project.request_metrics import REGISTRY
from tasks_app import services
from tasks_app.gateway.retries import NOT_AVAILABLE, NOT_SENT
from tasks_app.gateway.targets import Step, resolve_target
from tasks_app.upstream_errors import UpstreamError

BREAKER_OPEN = "unavailable"
"""The category of the circuit breaker's refusal (``routing.breaker``): nothing was sent."""
SAME_SKILL_CANDIDATES = 5
"""Agents sharing a skill tried at most, so a storm of sends never walks the whole registry."""
ALTERNATE = "alternate"
SAME_SKILL = "same_skill"

FAILOVERS = Counter(
    "relay_agent_failovers",
    "Sends that went to another agent than the one they named, by the agent named, the agent "
    "that took the send, and how it was chosen (alternate: the ordered list; same_skill: an "
    "agent declaring the same skill).",
    ["agent", "to", "kind"],
    registry=REGISTRY,
)


def not_started(error: BaseException) -> bool:
    """Whether a failed send provably never started on its agent."""
    if not isinstance(error, UpstreamError):
        return False
    if error.category in NOT_SENT or error.category == BREAKER_OPEN:
        return True
    return error.category == "http_status" and (
        error.status in NOT_AVAILABLE or (error.status == 429 and error.retry_after is not None)
    )


def first_send(target, task) -> bool:
    """Whether ``task`` is opened by the send now running: no agent has it yet."""
    return not task.upstream_task_id and len(task.history) <= 1 and task.agent_id == target.id


async def serving(target, task):
    """The agent target that holds ``task``: ``target``, or the alternate that served it."""
    if not task.agent_id or task.agent_id == target.id:
        return target
    held = await database_sync_to_async(resolve_target)("agent", task.agent_id)
    return held if held is not None else target


async def run_with_alternates(primary, task, request, ctx, *, stream: bool) -> AsyncIterator[Step]:
    """``primary``'s steps for the task's first send, or, when it is down or the send did not
    start on it, those of its first alternate that takes it."""
    passed: list[dict[str, str]] = []
    last: UpstreamError | None = None
    async with contextlib.aclosing(_in_turn(primary, ctx)) as candidates:
        async for candidate, skill in candidates:
            unfit = "unhealthy" if candidate.health == Agent.Health.UNHEALTHY else ""
            if unfit and candidate is not primary:
                passed.append({"agentId": candidate.id, "reason": unfit})
                continue
            if candidate is not primary:
                selection = _selection(primary, candidate, passed, skill)
                await database_sync_to_async(services.task_serving_set)(
                    task=task, agent_id=candidate.id, selection=selection
                )
            started = False
            try:
                if unfit:
                    raise UpstreamError(BREAKER_OPEN, f"agent {candidate.id!r} is unhealthy")
                async for step in candidate.run_here(task, request, ctx, stream=stream):
                    if not started and candidate is not primary:  # it took the send
                        kind = ALTERNATE if skill is None else SAME_SKILL
                        FAILOVERS.labels(agent=primary.id, to=candidate.id, kind=kind).inc()
                    started = True
                    yield step
                return
            except UpstreamError as error:
                if started or not not_started(error):
                    raise
                last = error
                passed.append({"agentId": candidate.id, "reason": error.message})
    if last is None:
        raise UpstreamError(BREAKER_OPEN, f"agent {primary.id!r} and its alternates are down")
    raise last


async def _in_turn(primary, ctx) -> AsyncIterator[tuple[Any, str | None]]:
    """The primary and its alternates in order (with no skill), then, when it opted in, the
    agents sharing a skill with it (with that skill's id), looked up only when reached."""
    tried = set()
    for candidate in await _candidates(primary, ctx):
        tried.add(candidate.id)
        yield candidate, None
    if primary.failover_same_skill:
        for found in await database_sync_to_async(_same_skill)(primary, ctx, tried):
            yield found


def _same_skill(primary, ctx, tried: set[str]) -> list[tuple[Any, str]]:
    """Up to SAME_SKILL_CANDIDATES agents other than ``tried`` that declare the skill the send
    named, or else one of the primary's skills, and may take the send: (target, skill id)."""
    named = (primary.extra.get("selection") or {}).get("skillId")
    wanted = (
        [named]
        if named
        else list(Skill.objects.filter(agent_id=primary.id).values_list("skill_id", flat=True))
    )
    rows = (
        Skill.objects.filter(skill_id__in=wanted)
        .exclude(agent_id__in=tried)
        .exclude(agent__status=Agent.Status.DISABLED)
        .exclude(agent__health=Agent.Health.UNHEALTHY)
        .exclude(agent__breaker_state=Agent.Breaker.OPEN)
        .values_list("agent_id", "skill_id", "agent__health")
    )
    first_skill: dict[str, str] = {}
    healthy: set[str] = set()
    for agent_id, skill_id, health in sorted(rows):
        first_skill.setdefault(agent_id, skill_id)
        if health == Agent.Health.HEALTHY:
            healthy.add(agent_id)
    found = []
    for agent_id in sorted(first_skill, key=lambda agent_id: (agent_id not in healthy, agent_id)):
        if ctx.caller is not None and not key_may_call(ctx.caller, "agent", agent_id):
            continue
        target = resolve_target("agent", agent_id)
        if target is not None:
            found.append((target, first_skill[agent_id]))
        if len(found) == SAME_SKILL_CANDIDATES:
            break
    return found


async def _candidates(primary, ctx) -> list:
    """The primary, then its alternates the caller may call, in order."""

    def resolve() -> list:
        found = [primary]
        for agent_id in primary.alternates:
            target = resolve_target("agent", agent_id)
            # A call the relay makes without a caller's key (none is scoped) may use them all.
            allowed = ctx.caller is None or key_may_call(ctx.caller, "agent", agent_id)
            if target is not None and allowed:
                found.append(target)
        return found

    if not primary.alternates:
        return [primary]
    return await database_sync_to_async(resolve)()


def _selection(
    primary, candidate, passed: list[dict[str, str]], skill: str | None
) -> dict[str, Any]:
    if skill is None:
        why = f"agent {primary.id!r} could not take the send; {candidate.id!r} is its alternate"
    else:
        why = (
            f"agent {primary.id!r} and its alternates could not take the send; "
            f"{candidate.id!r} declares the same skill {skill!r}"
        )
    return {
        "agentId": candidate.id,
        "failoverFrom": primary.id,
        "why": why,
        **({"sameSkill": skill} if skill is not None else {}),
        "passed": list(passed),
    }
