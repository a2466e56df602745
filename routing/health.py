"""The pure core of health: an agent's health state from consecutive probe rounds, and the
circuit breaker that real calls through the gateway drive. Plain values in, plain values out;
no Django, no I/O.

Health state (from the probes):

- ``unknown``: never probed yet.
- ``healthy``: the last round passed (and, after failures, ``healthy_after`` rounds in a row).
- ``degraded``: the agent answers but something is wrong (a level other than the transport
  failed, or it is recovering), or it failed fewer than ``unhealthy_after`` rounds in a row.
- ``unhealthy``: it failed ``unhealthy_after`` rounds in a row; the router skips it.

Circuit breaker (from real calls): ``closed`` lets calls through and counts consecutive
failures; after ``open_after`` of them it is ``open`` and calls fail fast; once ``cooldown``
has passed one call is let through (``half_open``); its success closes the breaker, its
failure opens it again.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta

UNKNOWN = "unknown"
HEALTHY = "healthy"
DEGRADED = "degraded"
UNHEALTHY = "unhealthy"

CLOSED = "closed"
OPEN = "open"
HALF_OPEN = "half_open"


class Verdict(enum.Enum):
    """What one probe round says about an agent."""

    OK = "ok"  # every level probed passed
    PARTIAL = "partial"  # it can take work, but a level other than the deepest one failed
    DOWN = "down"  # the deepest level probed failed: it cannot take work


@dataclass(frozen=True)
class Thresholds:
    """How many rounds in a row move an agent to unhealthy, and back to healthy."""

    unhealthy_after: int = 3
    healthy_after: int = 2

    def __post_init__(self) -> None:
        if self.unhealthy_after < 1 or self.healthy_after < 1:
            raise ValueError("health thresholds must be at least 1")


@dataclass(frozen=True)
class HealthCount:
    """An agent's health state with its consecutive failed and successful rounds."""

    state: str = UNKNOWN
    failures: int = 0
    successes: int = 0


def verdict_of(levels: dict[str, bool], *, deepest: str) -> Verdict:
    """The verdict of one round from each probed level's outcome. ``deepest`` is the level
    that says whether the agent can take work (the transport, or the card when only the card
    is probed)."""
    if not levels.get(deepest, False):
        return Verdict.DOWN
    return Verdict.OK if all(levels.values()) else Verdict.PARTIAL


def next_health(current: HealthCount, verdict: Verdict, thresholds: Thresholds) -> HealthCount:
    """The health state after one more round."""
    if verdict is Verdict.DOWN:
        failures = current.failures + 1
        state = UNHEALTHY if failures >= thresholds.unhealthy_after else DEGRADED
        if current.state == UNHEALTHY:
            state = UNHEALTHY
        return HealthCount(state, failures, 0)
    if verdict is Verdict.PARTIAL:
        return HealthCount(DEGRADED, 0, 0)
    successes = current.successes + 1
    if current.state in (UNKNOWN, HEALTHY) or successes >= thresholds.healthy_after:
        return HealthCount(HEALTHY, 0, successes)
    # Recovering from failures: it answers again, but not yet often enough to be trusted.
    return HealthCount(DEGRADED, 0, successes)


# --- circuit breaker ---------------------------------------------------------------------


@dataclass(frozen=True)
class BreakerSettings:
    open_after: int = 5
    cooldown: timedelta = timedelta(seconds=30)

    def __post_init__(self) -> None:
        if self.open_after < 1:
            raise ValueError("the breaker must open after at least one failure")


@dataclass(frozen=True)
class Breaker:
    """A breaker's state. ``since`` is when it last opened, or when its trial call began.
    ``version`` counts the writes of the stored breaker (each one adds 1): of two copies, the
    one with the higher version is the newer. Equality leaves it out."""

    state: str = CLOSED
    failures: int = 0
    since: datetime | None = None
    version: int = field(default=0, compare=False)


@dataclass(frozen=True)
class Admission:
    """Whether a call may go through, and the breaker after letting it (or not)."""

    allowed: bool
    breaker: Breaker
    retry_at: datetime | None = None


def breaker_admit(breaker: Breaker, *, now: datetime, settings: BreakerSettings) -> Admission:
    """Decides whether a call may go through. An open breaker whose cool-down has passed lets
    one trial call through and becomes half-open; a half-open breaker refuses others until the
    trial ends (or, should the trial never report, for another cool-down)."""
    if breaker.state == CLOSED:
        return Admission(True, breaker)
    ready_at = (breaker.since or now) + settings.cooldown
    if now >= ready_at:
        return Admission(True, replace(breaker, state=HALF_OPEN, since=now))
    return Admission(False, breaker, retry_at=ready_at)


def breaker_after_call(
    breaker: Breaker, *, ok: bool, now: datetime, settings: BreakerSettings
) -> Breaker:
    """The breaker after a call ended: a success closes it; a failure counts, and opens it at
    ``open_after`` failures in a row, or at once when it was the half-open trial."""
    if ok:
        return Breaker()
    failures = breaker.failures + 1
    if breaker.state == OPEN:
        # A call let through before it opened: the cool-down still runs from the opening.
        return Breaker(OPEN, failures, breaker.since)
    if breaker.state == HALF_OPEN or failures >= settings.open_after:
        return Breaker(OPEN, failures, now)
    return Breaker(CLOSED, failures, None)


def breaker_blocks(breaker: Breaker, *, now: datetime, settings: BreakerSettings) -> bool:
    """Whether the breaker would refuse a call now (the router treats such an agent as
    unavailable)."""
    return not breaker_admit(breaker, now=now, settings=settings).allowed
