"""Rendering an A2A call's outcome in its binding and version: a result or an error as a
``Reply``, and a stream's events and errors as SSE frames."""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from registry.auth import (
    REALM,
    REALM_INVALID_TOKEN,
)
from tasks_app.api.parsing import A2A_JSON, JSONRPC, Call, InvalidApiKey, TargetNotFound
from tasks_app.protocol import early, jsonrpc, rest
from tasks_app.protocol.errors import (
    A2AError,
    PermissionDenied,
    RateLimited,
    Unauthenticated,
    Unavailable,
    jsonrpc_error_body,
    rest_error_body,
)
from tasks_app.protocol.versions import (
    ProtocolVersion,
)

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Reply:
    status: int
    body: Any
    content_type: str
    headers: tuple[tuple[str, str], ...] = ()

    def encoded(self) -> bytes:
        return json.dumps(self.body, separators=(",", ":"), ensure_ascii=False).encode()


@dataclass(frozen=True)
class Stream:
    """A streaming call that opened: SSE frames of ``events`` follow a 200 with ``headers``."""

    call: Call
    headers: tuple[tuple[str, str], ...]
    events: AsyncIterator[Any]


def error_reply(binding: str, version: str, error: A2AError, request_id: Any = None) -> Reply:
    headers: list[tuple[str, str]] = []
    if isinstance(error, Unauthenticated):
        headers.append(
            ("WWW-Authenticate", REALM_INVALID_TOKEN if isinstance(error, InvalidApiKey) else REALM)
        )
    if isinstance(error, RateLimited | Unavailable) and error.retry_after:
        headers.append(("Retry-After", str(error.retry_after)))
    if binding == JSONRPC:
        body = jsonrpc_error_body(error, request_id, version)
        status = error.http_status if transport_level(error) else 200
        return Reply(status, body, "application/json", tuple(headers))
    status, body = rest_error_body(error, version)
    # Error bodies are google.rpc.Status in plain JSON (the spec's error mapping; the SDK
    # answers them so), results application/a2a+json.
    return Reply(status, body, "application/json", tuple(headers))


def transport_level(error: A2AError) -> bool:
    """JSON-RPC errors travel with HTTP 200, except a wrong URL, authentication, access
    rules, rate limits and an unavailable relay, which HTTP clients and proxies must see."""
    return isinstance(
        error, Unauthenticated | PermissionDenied | RateLimited | TargetNotFound | Unavailable
    )


def failure_reply(binding: str, error: A2AError, call: Call | None) -> Reply:
    """The error reply for a call that failed anywhere, before or after it was parsed: with
    the request id and in the version as far as they are known."""
    request_id = error.request_id
    if request_id is None and call is not None:
        request_id = call.request_id
    version = error.request_version or (str(call.version) if call is not None else "1.0")
    return error_reply(binding, version, error, request_id)


def result_reply(call: Call, result: Any, *, echo_extensions: tuple[str, ...] = ()) -> Reply:
    headers = extension_headers(call, echo_extensions)
    if call.client_task_id is not None:
        history = (call.params.get("configuration") or {}).get("historyLength") is not None
        body = early.early_result(result, client_task_id=call.client_task_id, with_history=history)
        return Reply(200, body, "application/json", headers)
    if call.binding == JSONRPC:
        body = jsonrpc.jsonrpc_result_body(call.request_id, call.operation, call.version, result)
        return Reply(200, body, "application/json", headers)
    return Reply(
        200, rest.rest_result_body(call.operation, call.version, result), A2A_JSON, headers
    )


def extension_headers(call: Call, echo: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
    """The response header naming the extensions applied (the SHOULD of the extensions
    guide), in the caller's version's spelling."""
    if not echo:
        return ()
    name = "A2A-Extensions" if call.version == ProtocolVersion.V1_0 else "X-A2A-Extensions"
    return ((name, ", ".join(echo)),)


def stream_frame(call: Call, event: dict[str, Any]) -> bytes:
    if call.early_stream is not None:
        return call.early_stream.encode(event)
    if call.binding == JSONRPC:
        payload = jsonrpc.jsonrpc_stream_frame(call.request_id, call.version, event)
    else:
        payload = rest.rest_stream_frame(call.version, event)
    # ASCII-escaped: clients that split lines like str.splitlines (httpx's aiter_lines) would
    # cut a frame at a U+2028 or U+0085 inside the text.
    return b"data: " + json.dumps(payload, separators=(",", ":")).encode() + b"\n\n"


def stream_error_frame(call: Call, error: A2AError) -> bytes:
    if call.binding == JSONRPC:
        payload = jsonrpc_error_body(error, call.request_id, call.version)
        if call.version == ProtocolVersion.V0_3:
            # The 0.3 SDK server sends a stream's error as an ordinary frame: the JSON-RPC
            # error response is one of the SendStreamingMessageResponse shapes.
            return b"data: " + json.dumps(payload, separators=(",", ":")).encode() + b"\n\n"
    else:
        payload = rest_error_body(error, str(call.version))[1]
    return b"event: error\ndata: " + json.dumps(payload).encode() + b"\n\n"


def answered_in_stream(call: Call, error: A2AError) -> bool:
    """Whether a streaming call refused before its first event gets its error as a stream
    of that one frame rather than as a plain reply: so on 0.3 JSON-RPC, as the 0.3 SDK
    server answers (its client reads any other reply to message/stream or
    tasks/resubscribe as a broken stream, HTTP 400). Errors HTTP must see stay replies."""
    return (
        call.binding == JSONRPC
        and call.version == ProtocolVersion.V0_3
        and call.client_task_id is None
        and not transport_level(error)
    )
