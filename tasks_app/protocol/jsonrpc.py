"""The JSON-RPC binding (1.0 and 0.3): parse requests, render results, errors and SSE frames.

A request goes through two steps, so the caller can negotiate the version and answer with
the request id in between:

1. :func:`parse_jsonrpc` checks the envelope and finds the method. The method name fixes
   the version (1.0 and 0.3 names are disjoint); see
   :func:`tasks_app.protocol.versions.check_method_version` for the ``A2A-Version`` rule.
2. :func:`canonical_params` validates the params and turns them into canonical 1.0.

Results go back with :func:`jsonrpc_result_body` / :func:`jsonrpc_stream_frame`, errors
with :func:`tasks_app.protocol.errors.jsonrpc_error_body`. For calling upstream agents:
:func:`jsonrpc_request_body` and :func:`parse_jsonrpc_response`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tasks_app.protocol.convert import (
    request_from_v1,
    request_to_v1,
    result_from_v1,
    result_to_v1,
    stream_response_from_v1,
)
from tasks_app.protocol.errors import (
    A2AError,
    InvalidAgentResponse,
    InvalidParams,
    InvalidRequest,
    JSONParseError,
    JsonRpcId,
    error_from_jsonrpc,
)
from tasks_app.protocol.validation import parse_request_v03, parse_request_v1
from tasks_app.protocol.versions import (
    Dialect,
    Operation,
    ProtocolVersion,
    lookup_method,
    method_name,
)


@dataclass(frozen=True)
class JsonRpcRequest:
    """A well-formed JSON-RPC request for a known A2A method. ``params`` is still raw."""

    id: JsonRpcId
    method: str
    operation: Operation
    version: ProtocolVersion
    params: dict[str, Any]


def parse_jsonrpc(body: bytes | str) -> JsonRpcRequest:
    """Parse a JSON-RPC 2.0 request body.

    Raises :class:`JSONParseError` (-32700) for bytes that are not JSON,
    :class:`InvalidRequest` (-32600) for a batch, a non-object, or a missing or ill-typed
    ``jsonrpc`` / ``id`` / ``method``, :class:`InvalidParams` (-32602) for ``params`` that
    are not an object (A2A has no positional params), and :class:`MethodNotFound` (-32601).
    Each error carries the request id it could read in ``error.request_id`` (None when the
    id itself is the problem, as JSON-RPC requires).
    """
    try:
        payload = json.loads(body, parse_constant=_reject_constant)
    except (ValueError, RecursionError) as problem:
        raise JSONParseError(f"Invalid JSON payload: {problem}") from None
    if isinstance(payload, list):
        raise InvalidRequest("Batch requests are not supported")
    if not isinstance(payload, dict):
        raise InvalidRequest("A JSON-RPC request must be a JSON object")
    if "id" not in payload:
        raise InvalidRequest("'id' is required: A2A has no notifications")
    request_id = payload["id"]
    if not _is_valid_id(request_id):
        raise InvalidRequest("'id' must be a string, an integer or null")
    try:
        if payload.get("jsonrpc") != "2.0":
            raise InvalidRequest("'jsonrpc' must be exactly \"2.0\"")
        method = payload.get("method")
        if not isinstance(method, str) or not method:
            raise InvalidRequest("'method' must be a non-empty string")
        params = payload.get("params")
        if params is None:
            params = {}
        elif not isinstance(params, dict):
            raise InvalidParams("'params' must be a JSON object")
        found = lookup_method(method)
    except A2AError as error:
        error.request_id = request_id
        raise
    return JsonRpcRequest(request_id, method, found.operation, found.version, params)


def canonical_params(
    operation: Operation, version: ProtocolVersion | str, params: Mapping[str, Any]
) -> dict[str, Any]:
    """Validate the params of a request and return them as canonical 1.0.

    1.0 params are checked against the 1.0 protos; 0.3 params against the 0.3 JSON schema
    (the SDK's pydantic models), then converted. Either way the result passed the 1.0
    checks (required fields, parts with content, pageSize 1..100...). Raises
    :class:`InvalidParams` with field violations.
    """
    if version == ProtocolVersion.V1_0:
        return parse_request_v1(operation, params)
    legacy = parse_request_v03(operation, params)
    return parse_request_v1(operation, request_to_v1(operation, legacy, Dialect.V03_JSONRPC))


def jsonrpc_result_body(
    request_id: JsonRpcId, operation: Operation, version: ProtocolVersion | str, result: Any
) -> dict[str, Any]:
    """The success response for a canonical ``result`` of a non-streaming ``operation``.

    1.0 results are sent as they are (SendMessage ``{"task": ...}`` or ``{"message": ...}``,
    DeleteTaskPushNotificationConfig ``null``); 0.3 ones take the 0.3 shape (a bare Task or
    Message with ``kind``, a bare array of push configs...).
    """
    if operation.streaming:
        raise ValueError(f"{operation.value} streams: use jsonrpc_stream_frame")
    if version != ProtocolVersion.V1_0:
        result = result_from_v1(operation, result, Dialect.V03_JSONRPC)
    return {"jsonrpc": "2.0", "id": request_id, "result": result}


def jsonrpc_stream_frame(
    request_id: JsonRpcId, version: ProtocolVersion | str, event: Mapping[str, Any]
) -> dict[str, Any]:
    """The JSON-RPC response carried by one SSE ``data:`` line, for a canonical
    StreamResponse. 0.3: the bare object with ``kind`` (status updates get ``final``)."""
    if version != ProtocolVersion.V1_0:
        event = stream_response_from_v1(event, Dialect.V03_JSONRPC)
    return {"jsonrpc": "2.0", "id": request_id, "result": event}


def jsonrpc_request_body(
    request_id: JsonRpcId,
    operation: Operation,
    version: ProtocolVersion | str,
    params: Mapping[str, Any],
) -> dict[str, Any]:
    """The request to send a ``version`` agent for canonical ``params`` of ``operation``.

    Raises :class:`UnsupportedOperation` for ListTasks on 0.3, which had no such method.
    """
    if version != ProtocolVersion.V1_0:
        params = request_from_v1(operation, params, Dialect.V03_JSONRPC)
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": method_name(operation, version),
        "params": params,
    }


def parse_jsonrpc_response(
    response: bytes | str | Mapping[str, Any],
    operation: Operation,
    version: ProtocolVersion | str,
) -> Any:
    """The canonical result in an upstream agent's JSON-RPC response (or SSE frame).

    Raises the A2AError the agent answered with (rebuilt by :func:`error_from_jsonrpc`), or
    :class:`InvalidAgentResponse` when the response is not a JSON-RPC response. 1.0 results
    are returned as sent: validate them with ``validation.parse_v1`` when you must.
    """
    if isinstance(response, bytes | str):
        try:
            response = json.loads(response)
        except ValueError:
            raise InvalidAgentResponse("the agent's response is not JSON") from None
    if not isinstance(response, Mapping):
        raise InvalidAgentResponse("the agent's response is not a JSON-RPC response object")
    if response.get("error") is not None:
        raise error_from_jsonrpc(response["error"])
    if "result" not in response:
        raise InvalidAgentResponse("the agent's response has neither 'result' nor 'error'")
    result = response["result"]
    if version == ProtocolVersion.V1_0:
        return result
    return result_to_v1(operation, result, Dialect.V03_JSONRPC)


def _is_valid_id(value: object) -> bool:
    # bool is an int in Python but not a valid JSON-RPC id; fractional ids are discouraged
    # by the spec and no A2A client sends them.
    return value is None or isinstance(value, str) or type(value) is int


def _reject_constant(name: str) -> None:
    raise ValueError(f"{name} is not valid JSON")
