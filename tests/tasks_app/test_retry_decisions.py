"""Which failed tries of a send are tried again (``tasks_app.gateway.retries.retryable``), and
how gRPC's UNAVAILABLE is read: only a failure to connect proves the agent got nothing."""

from __future__ import annotations

import grpc
import pytest
from grpc.aio import AioRpcError, Metadata

from tasks_app.gateway import retries
from tasks_app.gateway.retries import RetryPolicy, retryable, tried
from tasks_app.grpc.upstream import error_of
from tasks_app.protocol.errors import InvalidParams, Unavailable
from tasks_app.upstream import retry_after_seconds
from tasks_app.upstream_errors import UpstreamError

PLAIN, IDEMPOTENT = RetryPolicy(), RetryPolicy(idempotent=True)


@pytest.mark.parametrize(
    ("error", "plain", "idempotent"),
    [
        (UpstreamError("refused", "x"), True, True),
        (UpstreamError("dns", "x"), True, True),
        (UpstreamError("tls", "x"), True, True),
        (UpstreamError("http_status", "x", status=503), True, True),
        (UpstreamError("http_status", "x", status=429, retry_after=1.0), True, True),
        (UpstreamError("http_status", "x", status=429), False, False),
        (UpstreamError("http_status", "x", status=500), False, True),
        (UpstreamError("http_status", "x", status=401), False, False),
        (UpstreamError("http_status", "x", status=404), False, False),
        (UpstreamError("timeout", "x"), False, True),
        (UpstreamError("protocol", "x"), False, True),
        (UpstreamError("unsafe_url", "x"), False, False),
        (Unavailable("an A2A answer"), False, False),
        (InvalidParams("an A2A answer"), False, False),
    ],
    ids=lambda value: getattr(value, "category", None) or type(value).__name__,
)
def test_what_is_tried_again(error, plain, idempotent):
    assert retryable(error, PLAIN) is plain
    assert retryable(error, IDEMPOTENT) is idempotent


def unavailable(details: str) -> AioRpcError:
    return AioRpcError(grpc.StatusCode.UNAVAILABLE, Metadata(), Metadata(), details=details)


def test_grpc_unavailable_is_refused_only_when_no_connection_was_made():
    refused = error_of(
        unavailable("failed to connect to all addresses; last error: Connection refused"), "a"
    )
    assert refused.category == "refused"
    assert retryable(refused, PLAIN)
    taken = error_of(unavailable("Socket closed"), "a")
    assert taken.category == "protocol"
    assert not retryable(taken, PLAIN) and retryable(taken, IDEMPOTENT)


@pytest.mark.parametrize(
    ("header", "seconds"),
    [("", None), ("3", 3.0), ("soon", None), ("Wed, 21 Oct 2015 07:28:00 GMT", 0.0)],
)
def test_retry_after_in_seconds_or_a_date(header, seconds):
    assert retry_after_seconds(header) == seconds


async def test_a_send_answered_at_its_first_try_sets_up_no_retrying(monkeypatch):
    """Tenacity's machinery cost about 20 us of CPU on every send, the nearly all that need
    no retry: it is set up only once a try failed."""

    def refused(*args, **kwargs):
        raise AssertionError("AsyncRetrying was set up for a send that needed no retry")

    monkeypatch.setattr(retries, "AsyncRetrying", refused)
    attempts: list[dict] = []

    async def answered():
        return "the agent's answer"

    result = await tried(answered, policy=PLAIN, agent_id="echo", attempts=attempts)
    assert result == "the agent's answer" and attempts == []


async def test_a_send_refused_once_is_tried_once_more_and_each_try_recorded_once():
    outcomes = [UpstreamError("refused", "connection refused"), "the agent's answer"]
    attempts: list[dict] = []

    async def flaky():
        outcome = outcomes.pop(0)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    policy = RetryPolicy(attempts=3, base_delay=0.001)
    result = await tried(flaky, policy=policy, agent_id="echo", attempts=attempts)
    assert result == "the agent's answer" and outcomes == []
    assert [(entry["attempt"], entry["outcome"]) for entry in attempts] == [
        (1, "failed"),
        (2, "answered"),
    ]
    assert attempts[0]["reason"] == "refused" and "retryInSeconds" in attempts[0]


async def test_a_send_refused_at_every_try_stops_at_the_policys_attempts():
    calls: list[int] = []
    attempts: list[dict] = []

    async def refused():
        calls.append(1)
        raise UpstreamError("refused", "connection refused")

    policy = RetryPolicy(attempts=3, base_delay=0.001)
    with pytest.raises(UpstreamError):
        await tried(refused, policy=policy, agent_id="echo", attempts=attempts)
    assert len(calls) == 3
    assert [entry["attempt"] for entry in attempts] == [1, 2, 3]
