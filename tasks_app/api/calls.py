"""One A2A call at the HTTP edge, whatever the binding: parse it into a ``Call`` (operation,
version, canonical params), execute it on a target, and render results, errors and stream
frames in the caller's binding and version. Shared by the DRF views and the SSE consumer."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tasks_app import gateway
from tasks_app.protocol import jsonrpc, rest
from tasks_app.protocol.errors import (
    A2AError,
    InternalError,
    MethodNotFound,
    RateLimited,
    Unauthenticated,
    jsonrpc_error_body,
    rest_error_body,
)
from tasks_app.protocol.versions import (
    Operation,
    ProtocolVersion,
    check_method_version,
    lookup_method,
    negotiate_version,
    requested_extensions,
)

JSONRPC = "JSONRPC"
REST = "HTTP+JSON"
A2A_JSON = "application/a2a+json"
STREAMING = {Operation.STREAM, Operation.SUBSCRIBE}


class TargetNotFound(MethodNotFound):
    """The URL names no agent or team the caller can reach: HTTP 404 in every binding."""

    http_status = 404


@dataclass(frozen=True)
class Call:
    binding: str
    version: ProtocolVersion
    operation: Operation
    params: dict[str, Any]
    request_id: Any = None
    extensions: tuple[str, ...] = ()


@dataclass(frozen=True)
class Reply:
    status: int
    body: Any
    content_type: str
    headers: tuple[tuple[str, str], ...] = ()

    def encoded(self) -> bytes:
        return json.dumps(self.body, separators=(",", ":"), ensure_ascii=False).encode()


def parse_jsonrpc_call(headers: Mapping[str, str], body: bytes) -> Call:
    """Raises A2AError (with ``request_id`` and ``request_version`` set when they could be
    read)."""
    request = jsonrpc.parse_jsonrpc(body)
    try:
        # A 0.3 method name decides the version whatever the header says; a 1.0 name needs
        # a header naming a supported 1.x (and an unsupported one is named in the error).
        if request.version == ProtocolVersion.V1_0:
            check_method_version(lookup_method(request.method), negotiate_version(headers))
        params = jsonrpc.canonical_params(request.operation, request.version, request.params)
    except A2AError as error:
        error.request_id = request.id
        error.request_version = str(request.version)
        raise
    return Call(JSONRPC, request.version, request.operation, params, request.id,
                requested_extensions(headers))


def rest_version(path: str, headers: Mapping[str, str]) -> ProtocolVersion:
    """0.3 REST lives under ``v1/``; everything else is 1.0 (and needs the version header)."""
    if path.startswith("v1/") or path == "v1":
        return ProtocolVersion.V0_3
    return negotiate_version(headers)


def parse_rest_call(http_method: str, path: str, query: Mapping[str, Any],
                    headers: Mapping[str, str], body: bytes) -> Call:
    version = rest_version(path, headers)
    operation, params = rest.parse_rest_request(http_method, path, query, body, version)
    return Call(REST, version, operation, params, None, requested_extensions(headers))


def error_reply(binding: str, version: str, error: A2AError, request_id: Any = None) -> Reply:
    headers: list[tuple[str, str]] = []
    if isinstance(error, Unauthenticated):
        headers.append(("WWW-Authenticate", 'Bearer realm="brass-relay"'))
    if isinstance(error, RateLimited) and error.retry_after:
        headers.append(("Retry-After", str(error.retry_after)))
    if binding == JSONRPC:
        body = jsonrpc_error_body(error, request_id, version)
        # JSON-RPC errors travel with HTTP 200, except a wrong URL, authentication and rate
        # limits, which HTTP clients and proxies must see.
        transport_level = isinstance(error, Unauthenticated | RateLimited | TargetNotFound)
        status = error.http_status if transport_level else 200
        return Reply(status, body, "application/json", tuple(headers))
    status, body = rest_error_body(error)
    return Reply(status, body, A2A_JSON, tuple(headers))


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
    if call.binding == JSONRPC:
        body = jsonrpc.jsonrpc_result_body(call.request_id, call.operation, call.version, result)
        return Reply(200, body, "application/json", headers)
    return Reply(200, rest.rest_result_body(call.operation, call.version, result), A2A_JSON,
                 headers)


def extension_headers(call: Call, echo: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
    """The response header naming the extensions applied (the SHOULD of the extensions
    guide), in the caller's version's spelling."""
    if not echo:
        return ()
    name = "A2A-Extensions" if call.version == ProtocolVersion.V1_0 else "X-A2A-Extensions"
    return ((name, ", ".join(echo)),)


def stream_frame(call: Call, event: dict[str, Any]) -> bytes:
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
    else:
        payload = rest_error_body(error)[1]
    return b"event: error\ndata: " + json.dumps(payload).encode() + b"\n\n"


def context_for(call: Call, caller) -> gateway.CallContext:
    return gateway.CallContext(caller=caller, version=str(call.version),
                               extensions=call.extensions)


def echoed(call: Call, target: gateway.Target) -> tuple[str, ...]:
    """The requested extensions the target supports: those are the ones applied."""
    return tuple(uri for uri in call.extensions if uri in target.declared_extensions)


async def execute(target: gateway.Target, call: Call, caller) -> Any:
    """Runs a non-streaming call and returns its canonical result."""
    ctx = context_for(call, caller)
    params = call.params
    match call.operation:
        case Operation.SEND:
            return await gateway.send_message(target, ctx, params)
        case Operation.GET_TASK:
            return await gateway.get_task(target, ctx, params["id"],
                                          history_length=params.get("historyLength"))
        case Operation.LIST_TASKS:
            return await gateway.list_tasks(target, ctx, params)
        case Operation.CANCEL:
            return await gateway.cancel_task(target, ctx, params["id"])
        case Operation.PUSH_CREATE:
            return await gateway.push_config_create(target, ctx, params)
        case Operation.PUSH_GET:
            return await gateway.push_config_get(target, ctx, params)
        case Operation.PUSH_LIST:
            return await gateway.push_config_list(target, ctx, params)
        case Operation.PUSH_DELETE:
            return await gateway.push_config_delete(target, ctx, params)
        case Operation.EXTENDED_CARD:
            return await gateway.extended_card(target, ctx)
    raise InternalError(f"{call.operation} is not a unary operation")


async def open_stream(target: gateway.Target, call: Call, caller):
    """Starts a streaming call; errors before the first event are raised here."""
    ctx = context_for(call, caller)
    if call.operation is Operation.STREAM:
        return await gateway.stream_message(target, ctx, call.params)
    return await gateway.subscribe(target, ctx, call.params["id"])
