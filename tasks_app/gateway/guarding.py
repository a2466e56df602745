"""The policy every registered agent's send goes through, whatever the agent speaks (an A2A
agent, ``AgentTarget``, or an MCP server, ``McpTarget``): the call guard (the routing app's
circuit breaker) admits the send and hears how it went, a send that did not reach the agent
is tried again under its retry policy (``retries``), and a task's first send fails over to
the agent's alternates (``failover``).

An agent target here has ``id``, ``health``, ``breaker_row``, ``retry_policy``,
``alternates``, ``failover_same_skill`` and ``run_here(task, request, ctx, stream=...)``.
"""

from __future__ import annotations

import contextlib
import time
from typing import Any, Protocol

from relay_project.database import database_sync_to_async
from tasks_app import services, upstream
from tasks_app.gateway import failover, retries
from tasks_app.protocol.errors import A2AError, InvalidAgentResponse


class CallGuard(Protocol):
    """Passive health for messages sent to agents (the routing app's circuit breaker)."""

    async def admit(self, target) -> None:
        """Lets the call go, or raises upstream.UpstreamError saying why it may not."""

    async def report(
        self,
        target,
        *,
        ok: bool,
        category: str = "",
        detail: str = "",
        latency_ms: float | None = None,
    ) -> None:
        """Hears how the call went: ``ok`` once the agent answered, or why it failed."""


class _NoGuard:
    """Lets every call go and hears nothing: the guard while none is plugged in."""

    async def admit(self, target) -> None:
        return None

    async def report(self, target, **outcome: Any) -> None:
        return None


_call_guard: CallGuard = _NoGuard()


def register_call_guard(guard: CallGuard | None) -> None:
    """The routing app plugs its circuit breaker in here (None unplugs it)."""
    global _call_guard
    _call_guard = guard if guard is not None else _NoGuard()


def take_policy(target, agent) -> None:
    """Sets on ``target`` what the call guard, retries and failover read, from its agent row:
    health, retry policy, alternates, same-skill failover and the circuit breaker as the row
    had it (the call guard keeps that up to date)."""
    target.health = agent.health
    target.retry_policy = retries.RetryPolicy.of(agent)
    target.alternates = tuple(agent.alternate_links.values_list("alternate_id", flat=True))
    target.failover_same_skill = agent.failover_same_skill
    target.breaker_row = (
        agent.breaker_state,
        agent.breaker_failures,
        agent.breaker_opened_at,
        agent.breaker_version,
    )


async def admit(target) -> None:
    """Lets a send to ``target`` go, or raises upstream.UpstreamError (the breaker is open)."""
    await _call_guard.admit(target)


async def served(target, task, request, ctx, *, stream: bool):
    """The send's steps on the agent that holds the task (an alternate that served it), or
    for the task's first send on ``target`` or, when it is down, an alternate."""
    held = await failover.serving(target, task)
    fails_over = target.alternates or target.failover_same_skill
    if held is target and fails_over and failover.first_send(target, task):
        steps = failover.run_with_alternates(target, task, request, ctx, stream=stream)
    else:
        steps = held.run_here(task, request, ctx, stream=stream)
    async with contextlib.aclosing(steps):
        async for step in steps:
            yield step


async def guarded(target, steps):
    """The steps, with their outcome reported to the call guard (the circuit breaker): a
    success once the agent's answer is whole (an event that ends the stream, or the call's
    answer), a failure for a transport failure, an answer that is not A2A, or a stream that
    breaks or falls silent before its end, so streams that keep breaking mid-way open the
    breaker as calls that fail at once do."""
    started = time.perf_counter()
    reported = False
    try:
        # Closed here when the caller stops early, as the driver closes these steps: left to
        # the garbage collector, an upstream stream would close in another task.
        async with contextlib.aclosing(steps):
            async for step in steps:
                if not reported and (step.answered or upstream.ends_stream(step.event)):
                    reported = True
                    await _call_guard.report(target, ok=True)
                yield step
        if not reported:
            reported = True
            await _call_guard.report(target, ok=True)
    except (upstream.UpstreamError, InvalidAgentResponse) as error:
        await _call_guard.report(
            target,
            ok=False,
            category=getattr(error, "category", "protocol"),
            detail=error.message,
            latency_ms=(time.perf_counter() - started) * 1000,
        )
        raise
    except A2AError:
        if not reported:  # the agent answered, with a protocol error: it is up
            await _call_guard.report(target, ok=True)
        raise


async def tried(target, task, call):
    """``call()`` tried again under the agent's retry policy while it fails before the agent
    answered (``retries``); the tries are recorded on the task when there was more than one,
    or the one failed."""
    attempts: list[dict[str, Any]] = []
    try:
        return await retries.tried(
            call, policy=target.retry_policy, agent_id=target.id, attempts=attempts
        )
    finally:
        if attempts:
            await database_sync_to_async(services.task_attempts_record)(
                task=task, attempts=attempts
            )
