"""The circuit breaker on real calls, plugged into the gateway as its call guard.

Each agent target carries the breaker as its row had it when the target was loaded; the guard
counts every outcome on the row (``health_services.breaker_record``: locked, so concurrent
outcomes all count) and keeps the newest copy it has seen in this process (by the row's
version: the copy never goes back). A closed breaker with no failures costs a call nothing: no
query, no write.
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


def adopt(target, breaker: health.Breaker | None) -> health.Breaker:
    """Keeps ``breaker`` as this process's copy for the target unless the copy it has is newer
    (a higher version); returns the copy kept."""
    known = breaker_of(target)
    if breaker is not None and breaker.version >= known.version:
        target.extra["breaker"] = breaker
        return breaker
    return known


def remember(target, row: tuple[str, int, datetime | None, int]) -> None:
    """Learns the agent's breaker from its stored row (state, failures, since, version): a
    target kept across calls learns what other processes wrote, never an older copy."""
    adopt(target, health.Breaker(*row))


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
            # Past the cool-down as this process knows it: the row decides who takes the trial.
            allowed, stored = await sync_to_async(health_services.breaker_trial_take)(
                agent_id=target.id
            )
            breaker = adopt(target, stored)
            if allowed:
                return
            admission = health.breaker_admit(
                breaker, now=timezone.now(), settings=health_services.breaker_settings()
            )
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
        if ok and breaker_of(target) == health.Breaker():
            return
        failed = (
            None
            if ok
            else probes.LevelResult("call", False, round(latency_ms or 0, 2), category, detail)
        )
        stored = await sync_to_async(health_services.breaker_record)(
            agent_id=target.id, ok=ok, failed_call=failed
        )
        adopt(target, stored)
