"""Retrying a send to an agent that failed before the agent answered (docs/concepts/retries.md),
within the agent's policy: tenacity's exponential backoff with jitter, at most ``attempts``
tries, none starting past ``deadline`` seconds after the first.

A failure that provably did not reach the agent is retried for every agent: the connection
was refused, its host did not resolve, TLS failed (``refused``, ``dns``, ``tls``: nothing
was sent), or an answer without an A2A body said the agent is not available (HTTP 502, 503,
504), or asked to come back later (429 with Retry-After, waited for). A failure that may have
reached the agent (a timeout, a broken exchange, any other 5xx without an A2A body) is
retried only for an agent marked idempotent: one that runs a message id once. An A2A answer,
an error one included, is never retried, nor a refused credential or an unsafe URL.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TypeVar

from prometheus_client import Counter
from tenacity import (
    AsyncRetrying,
    RetryCallState,
    retry_if_exception,
    stop_after_attempt,
    stop_before_delay,
    wait_exponential_jitter,
)

from relay_project.request_metrics import REGISTRY
from tasks_app.snapshots import iso
from tasks_app.upstream_errors import UpstreamError

logger = logging.getLogger(__name__)

T = TypeVar("T")

NOT_SENT = frozenset({"refused", "dns", "tls"})
"""Categories of a call whose request never left the relay."""
NOT_AVAILABLE = frozenset({502, 503, 504})
"""HTTP statuses (without an A2A body) of an agent, or the proxy before it, not taking calls."""
MAYBE_REACHED = frozenset({"timeout", "protocol"})
"""Categories of a call that may have reached the agent."""

RETRIES = Counter(
    "relay_agent_send_retries",
    "Sends to an agent tried again, by agent and the reason the try before failed.",
    ["agent", "reason"],
    registry=REGISTRY,
)
EXHAUSTED = Counter(
    "relay_agent_send_retries_exhausted",
    "Sends to an agent that failed on their last allowed try, by agent.",
    ["agent"],
    registry=REGISTRY,
)


@dataclass(frozen=True)
class RetryPolicy:
    """An agent's retry policy (``registry.models.Agent.retry_*`` and ``idempotent``)."""

    attempts: int = 3
    base_delay: float = 0.2
    deadline: float = 10.0
    idempotent: bool = False

    @classmethod
    def of(cls, agent) -> RetryPolicy:
        """The policy a registered agent's row sets."""
        return cls(
            attempts=agent.retry_attempts,
            base_delay=agent.retry_base_delay_ms / 1000,
            deadline=float(agent.retry_deadline_seconds),
            idempotent=agent.idempotent,
        )


def reason_of(error: BaseException) -> str:
    """The short, stable reason of a failed try: its category, with the HTTP status."""
    if isinstance(error, UpstreamError):
        return f"http_{error.status}" if error.status else error.category
    return type(error).__name__


def retryable(error: BaseException, policy: RetryPolicy) -> bool:
    """Whether a try that failed with ``error`` may be tried again under ``policy``."""
    if not isinstance(error, UpstreamError):
        return False  # an A2A answer (an error one too), or the relay's own failure
    if error.category in NOT_SENT:
        return True
    if error.category == "http_status":
        if error.status in NOT_AVAILABLE:
            return True
        if error.status == 429:
            return error.retry_after is not None
        return policy.idempotent and (error.status or 0) >= 500
    return policy.idempotent and error.category in MAYBE_REACHED


async def tried(
    call: Callable[[], Awaitable[T]],
    *,
    policy: RetryPolicy,
    agent_id: str,
    attempts: list[dict[str, Any]],
) -> T:
    """``call()``'s result, tried again under ``policy`` while it fails in a retryable way.
    Appends to ``attempts`` one entry per try once one failed (number, time, reason, and the
    pause before the next); nothing when the first try succeeds. Raises the last try's
    error.

    The first try runs on its own: tenacity is set up only once it failed in a retryable
    way, so a send that succeeds at once (nearly every one) does not pay for it (about 20 µs
    of CPU per call, measured with the relay's cProfile under bench/gateway_bench.py)."""

    async def once() -> T:
        number = len(attempts) + 1
        started = datetime.now(UTC)
        try:
            result = await call()
        except Exception as error:
            attempts.append(
                {
                    "attempt": number,
                    "at": iso(started),
                    "outcome": "failed",
                    "reason": reason_of(error),
                    "detail": str(getattr(error, "message", error))[:300],
                }
            )
            raise
        if attempts:
            attempts.append({"attempt": number, "at": iso(started), "outcome": "answered"})
        return result

    began = time.monotonic()
    try:
        return await once()
    except Exception as error:
        if policy.attempts < 2 or not retryable(error, policy):
            raise
        first_failure: Exception | None = error

    async def again() -> T:
        # Tenacity's first try is the one already made: it gives back that try's failure.
        nonlocal first_failure
        if first_failure is not None:
            failure, first_failure = first_failure, None
            raise failure
        return await once()

    def before_sleep(state: RetryCallState) -> None:
        attempts[-1]["retryInSeconds"] = round(state.upcoming_sleep, 3)
        RETRIES.labels(agent_id, attempts[-1]["reason"]).inc()
        logger.info(
            "agent %s: try %d failed (%s); trying again in %.2f s",
            agent_id,
            state.attempt_number,
            attempts[-1]["reason"],
            state.upcoming_sleep,
        )

    # The deadline counts from the first try.
    left = max(0.0, policy.deadline - (time.monotonic() - began))
    retrying = AsyncRetrying(
        stop=stop_after_attempt(policy.attempts) | stop_before_delay(left),
        wait=_pause(policy),
        retry=retry_if_exception(lambda error: retryable(error, policy)),
        before_sleep=before_sleep,
        reraise=True,
    )
    try:
        return await retrying(again)
    except Exception as error:
        if len(attempts) > 1 and retryable(error, policy):
            EXHAUSTED.labels(agent_id).inc()
        raise


def _pause(policy: RetryPolicy):
    """Exponential backoff from the base delay with up to one base delay of jitter, or the
    agent's Retry-After when longer."""
    backoff = wait_exponential_jitter(
        initial=policy.base_delay, max=policy.deadline, jitter=policy.base_delay
    )

    def pause(state: RetryCallState) -> float:
        error = state.outcome.exception() if state.outcome is not None else None
        asked = getattr(error, "retry_after", None) or 0.0
        return max(backoff(state), asked)

    return pause
