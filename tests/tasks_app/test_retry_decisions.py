"""Which failed tries of a send are tried again (``tasks_app.gateway.retries.retryable``), and
how gRPC's UNAVAILABLE is read: only a failure to connect proves the agent got nothing."""

from __future__ import annotations

import grpc
import pytest
from grpc.aio import AioRpcError, Metadata

from tasks_app.gateway.retries import RetryPolicy, retryable
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
