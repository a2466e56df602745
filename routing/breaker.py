"""The circuit breaker on real calls, plugged into the gateway as its call guard.

Each agent target carries the breaker as its row had it when the target was loaded; the guard
keeps that copy current in this process and writes every change to the row (compare-and-set),
so other processes see it when they load the agent again. A closed breaker with no failures
costs a call nothing: no query, no write.
"""

from __future__ import annotations

from datetime import datetime

from asgiref.sync import sync_to_async
from django.utils import timezone

from routing import health, health_services, probes
from tasks_app import upstream

UNAVAILABLE = "unavailable"
"""The UpstreamError category of a call the breaker refused."""


def breaker_of(target) -> health.Breaker:
    """The breaker of an agent target, as this process knows it."""
    breaker = target.extra.get("breaker")
    if breaker is None:
        breaker = health.Breaker(*target.breaker_row)
        target.extra["breaker"] = breaker
    return breaker


def remember(target, row: tuple[str, int, datetime | None]) -> None:
    """Sets the breaker this process knows for an agent target from its stored row (state,
    failures, since): a target kept across calls learns what other processes wrote."""
    target.extra["breaker"] = health.Breaker(*row)


def blocks(target) -> bool:
    """Whether a call to this agent would be refused now (the router skips it)."""
    breaker = breaker_of(target)
    if breaker.state == health.CLOSED:
        return False
    return health.breaker_blocks(
        breaker, now=timezone.now(), settings=health_services.breaker_settings()
    )


class BreakerGuard:
    """The gateway's call guard: refuses calls while the breaker is open, lets one trial call
    through after the cool-down, and counts how calls went."""

    async def admit(self, target) -> None:
        breaker = breaker_of(target)
        if breaker.state == health.CLOSED:
            return
        admission = health.breaker_admit(
            breaker, now=timezone.now(), settings=health_services.breaker_settings()
        )
        if admission.allowed:
            stored = await sync_to_async(health_services.breaker_move)(
                agent_id=target.id,
                before=breaker,
                after=admission.breaker,
                reason="cool-down over: one trial call goes through",
            )
            if stored == admission.breaker:
                target.extra["breaker"] = stored
                return
            # Another process took the trial (or closed the breaker): follow the row.
            target.extra["breaker"] = stored or breaker
            if stored is not None and stored.state == health.CLOSED:
                return
            admission = health.breaker_admit(
                target.extra["breaker"],
                now=timezone.now(),
                settings=health_services.breaker_settings(),
            )
            if admission.allowed:
                return
        retry = (
            f"; the relay tries it again at {admission.retry_at:%H:%M:%S} UTC"
            if admission.retry_at
            else ""
        )
        raise upstream.UpstreamError(
            UNAVAILABLE,
            f"agent {target.id!r} is unavailable: its circuit breaker is open after "
            f"{breaker.failures} failed calls in a row{retry}",
        )

    async def report(
        self,
        target,
        *,
        ok: bool,
        category: str = "",
        detail: str = "",
        latency_ms: float | None = None,
    ) -> None:
        before = breaker_of(target)
        if ok and before == health.Breaker():
            return
        failed = (
            None
            if ok
            else probes.LevelResult("call", False, round(latency_ms or 0, 2), category, detail)
        )
        for _attempt in range(3):
            after = health.breaker_after_call(
                before, ok=ok, now=timezone.now(), settings=health_services.breaker_settings()
            )
            reason = (
                "a call succeeded"
                if ok
                else f"{after.failures} calls failed in a row, the last: {detail}"
            )
            stored = await sync_to_async(health_services.breaker_move)(
                agent_id=target.id, before=before, after=after, reason=reason, failed_call=failed
            )
            target.extra["breaker"] = stored or after
            if stored is None or stored == after:
                return
            # Another process moved the breaker first: count this call on top of its move.
            before, failed = stored, None
