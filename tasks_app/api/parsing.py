"""Parsing an A2A call as it arrived over HTTP, whatever the binding (JSON-RPC, HTTP+JSON, the
task API), into a ``Call``: its operation, its version, its canonical (1.0) params. Pure, but
for the settings' limits: raises the binding's A2A error for a call it cannot take."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from django.conf import settings
from django.core.exceptions import DisallowedHost
from django.core.handlers.asgi import ASGIRequest

from relay_project.public_url import relay_base_url
from tasks_app import delegation, idempotency, relay_endpoint, skill_targets
from tasks_app.protocol import early, jsonrpc, rest
from tasks_app.protocol.errors import (
    A2AError,
    FieldViolation,
    InvalidParams,
    InvalidRequest,
    JSONParseError,
    MethodNotFound,
    Unauthenticated,
)
from tasks_app.protocol.limits import (
    Limits,
    body_too_large,
    check_body,
    check_params,
    nul_violations,
)
from tasks_app.protocol.validation import parse_request_v1
from tasks_app.protocol.versions import (
    Operation,
    ProtocolVersion,
    check_method_version,
    lookup_method,
    negotiate_version,
    requested_extensions,
)

logger = logging.getLogger(__name__)

JSONRPC = "JSONRPC"
REST = "HTTP+JSON"
A2A_JSON = "application/a2a+json"
STREAMING = {Operation.STREAM, Operation.SUBSCRIBE}
OPENS_TASK = {Operation.SEND, Operation.STREAM}
TASK_API = "task-api"
"""The kind of ``POST /a2a/tasks/sendSubscribe``, whose body names the target."""
TASK_API_BODIES: dict[str, Callable[[bytes], bytes]] = {}
"""Other task API streams (``kind`` -> how their body becomes a task API send body, in the
database thread), registered by higher apps: task templates' ``sendSubscribe``."""


def register_task_api_body(kind: str, make: Callable[[bytes], bytes]) -> None:
    """Makes ``kind`` a task API stream whose body ``make`` turns into a task API send body
    (raising A2AError for a bad one); ``tasks_app.consumers`` streams it as sendSubscribe."""
    TASK_API_BODIES[kind] = make


TARGET_KEYS = {
    "agentId": "agent",
    "teamId": "team",
    "workflowId": "workflow",
    "skill": skill_targets.SKILL,
}
DEFAULT_TARGET = ("relay", "default")
"""The task API's target when the body names none: the relay's default target."""
REST_VERBS = {"GET", "POST", "DELETE", "HEAD"}
NO_KEY = "an API key is required: send Authorization: Bearer <key>"


def current_limits() -> Limits:
    """The request limits of the settings (RELAY_MAX_*)."""
    return Limits(
        max_body_bytes=settings.RELAY_MAX_BODY_BYTES,
        max_json_depth=settings.RELAY_MAX_JSON_DEPTH,
        max_parts=settings.RELAY_MAX_PARTS,
        max_metadata_bytes=settings.RELAY_MAX_METADATA_BYTES,
        max_metadata_depth=settings.RELAY_MAX_METADATA_DEPTH,
        max_history_length=settings.RELAY_MAX_HISTORY_LENGTH,
    )


class TargetNotFound(MethodNotFound):
    """The URL names no agent or team the caller can reach: HTTP 404 in every binding."""

    http_status = 404


class InvalidApiKey(Unauthenticated):
    """A key was sent but is unknown, revoked or expired: 401 with ``error="invalid_token"``
    in ``WWW-Authenticate`` (the three read the same)."""


@dataclass(frozen=True)
class Call:
    binding: str
    version: ProtocolVersion
    operation: Operation
    params: dict[str, Any]
    request_id: Any = None
    extensions: tuple[str, ...] = ()
    delegation: tuple[str, ...] = ()
    """The relays the call came through (``relay:<id>`` entries of X-Relay-Chain)."""
    task_api: bool = False
    """A task API call: its target may be the relay's default one."""
    client_task_id: str | None = None
    """The client's task id of a task API call in the early task shape (None otherwise):
    the call is answered in that shape."""
    early_stream: early.EarlyStream | None = field(default=None, compare=False)
    """For such a call's stream: the writer of its early frames."""
    idempotency_key: str | None = None
    """A send's Idempotency-Key (``tasks_app.idempotency``); None for other calls."""
    trace: Any = field(default=None, compare=False)
    """The OpenTelemetry context of the call's server span (None: tracing off)."""


@dataclass(frozen=True)
class HttpCall:
    """An A2A call as it arrived. ``kind`` and ``target_id`` come from the URL (for the task
    API's ``sendSubscribe``, ``kind`` is TASK_API and the body names the target); ``rest`` is
    the path under the target's base URL, empty for JSON-RPC. ``headers`` are the raw ASGI
    pairs, so repeated headers all count; ``oversized`` says the body was too large to keep."""

    kind: str
    target_id: str
    rest: str
    http_method: str
    query: Mapping[str, list[str]]
    headers: Sequence[tuple[bytes, bytes]]
    body: bytes
    oversized: bool = False
    scope: Mapping[str, Any] | None = field(default=None, compare=False, repr=False)
    """The ASGI scope the call came in (for the relay's public URL), when there is one."""

    def base_url(self) -> str:
        """The public URL of the called target at the relay (the request's path without
        ``rest``), as its card states it; empty without a scope."""
        if self.scope is None:
            return ""
        path = self.scope.get("path", "")
        base = (
            path[: len(path) - len(self.rest)] if self.rest and path.endswith(self.rest) else path
        )
        try:
            return relay_base_url(ASGIRequest(self.scope, io.BytesIO()), base)
        except DisallowedHost as error:
            raise InvalidRequest(f"the Host header names no host of this relay: {error}") from None

    @property
    def binding(self) -> str:
        return JSONRPC if self.kind != TASK_API and self.rest == "" else REST

    @property
    def authorization(self) -> str | None:
        for name, value in self.headers:
            if name.lower() == b"authorization":
                return value.decode("latin-1")
        return None


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
    return Call(
        JSONRPC,
        request.version,
        request.operation,
        params,
        request.id,
        requested_extensions(headers),
    )


def rest_version(path: str, headers: Mapping[str, str]) -> ProtocolVersion:
    """0.3 REST lives under ``v1/``; everything else is 1.0 (and needs the version header)."""
    if path.startswith("v1/") or path == "v1":
        return ProtocolVersion.V0_3
    return negotiate_version(headers)


def parse_rest_call(
    http_method: str, path: str, query: Mapping[str, Any], headers: Mapping[str, str], body: bytes
) -> Call:
    version = rest_version(path, headers)
    operation, params = rest.parse_rest_request(http_method, path, query, body, version)
    return Call(REST, version, operation, params, None, requested_extensions(headers))


def parse_task_api_body(body: bytes) -> Any:
    check_body(body, current_limits())
    try:
        payload = json.loads(body)
    except (ValueError, UnicodeDecodeError) as error:
        raise JSONParseError(f"the body is not JSON: {error}") from None
    if b"\\u0000" in body:
        refuse_nul(payload)
    return payload


@dataclass(frozen=True)
class TaskApiSend:
    """A task API send, parsed: its target, the canonical 1.0 request, and the client's task
    id when it came in the early task shape (None for the current shape)."""

    kind: str
    target_id: str
    params: dict[str, Any]
    client_task_id: str | None = None


def task_api_send(
    payload: Any, operation: Operation, *, early_only: bool = False, field_prefix: str = ""
) -> TaskApiSend:
    """Parses the task API's ``{"agentId"|"teamId"?: ..., <send>}``, where the send is a 1.0
    SendMessageRequest or an early A2A send (``early.is_early`` tells them apart;
    ``early_only`` reads every body as early). No target key names the relay's default
    target; both is an error. Raises InvalidParams naming the fields (prefixed with
    ``field_prefix``, for a batch entry), InvalidRequest for a body that is no object."""
    if not isinstance(payload, dict):
        raise InvalidRequest(f"{field_prefix or 'the body'} must be a JSON object")
    try:
        named = [key for key in TARGET_KEYS if payload.get(key) not in (None, "")]
        if len(named) > 1:
            raise InvalidParams(
                field_violations=[
                    FieldViolation(
                        named[1], "name one target: agentId, teamId, workflowId or skill, not two"
                    )
                ]
            )
        if named and not isinstance(payload[named[0]], str):
            raise InvalidParams(field_violations=[FieldViolation(named[0], "must be a string")])
        kind, target_id = (TARGET_KEYS[named[0]], payload[named[0]]) if named else DEFAULT_TARGET
        request = {key: value for key, value in payload.items() if key not in TARGET_KEYS}
        client_task_id = None
        if early_only or early.is_early(request):
            sent = early.send_request(request)
            request, client_task_id = sent.request, sent.client_task_id
        params = parse_request_v1(operation, request)
        check_params(params, current_limits())
    except InvalidParams as error:
        if not field_prefix or not error.field_violations:
            raise
        raise InvalidParams(
            field_violations=[
                FieldViolation(f"{field_prefix}.{violation.field}", violation.description)
                for violation in error.field_violations
            ]
        ) from error
    return TaskApiSend(kind, target_id, params, client_task_id)


def task_api_target_check(kind: str) -> None:
    """Raises InvalidParams when a task API call names no target and the relay has no default
    target to send it to."""
    if kind == DEFAULT_TARGET[0] and relay_endpoint.default_target() is None:
        raise InvalidParams(
            field_violations=[
                FieldViolation(
                    "agentId",
                    "name the target (agentId or teamId): this relay has no default target",
                )
            ]
        )


def _may_hold_nul(request: HttpCall) -> bool:
    """Whether a NUL may be anywhere in the call: JSON spells it ``\\u0000``, a URL ``%00``
    (decoded in the path and query before they reach us)."""
    return (
        b"\\u0000" in request.body
        or "\x00" in request.rest
        or any("\x00" in value for values in request.query.values() for value in values)
    )


def refuse_nul(params: dict[str, Any]) -> None:
    """Raises InvalidParams naming each field that holds U+0000 (no database stores it as
    text: the call is refused before anything is written)."""
    violations = nul_violations(params)
    if violations:
        raise InvalidParams(field_violations=violations)


def send_key_of(operation: Operation, headers) -> str | None:
    """The Idempotency-Key of a send (None for other calls, whose key is ignored), from raw
    header pairs or a mapping of headers. Raises InvalidParams for a malformed key."""
    if operation not in OPENS_TASK:
        return None
    pairs = headers.items() if isinstance(headers, Mapping) else headers
    return idempotency.key_of(pairs)


def task_api_call(
    operation: Operation, send: TaskApiSend, headers, *, key: str | None = None
) -> Call:
    """A task API call: HTTP+JSON, A2A 1.0 ProtoJSON inside, answered in the shape it came
    in. ``key``: its idempotency key (``send_key_of``)."""
    stream = (
        early.EarlyStream(send.client_task_id)
        if send.client_task_id is not None and operation in STREAMING
        else None
    )
    return Call(
        REST,
        ProtocolVersion.V1_0,
        operation,
        send.params,
        None,
        requested_extensions(headers),
        delegation.inbound(headers),
        task_api=True,
        client_task_id=send.client_task_id,
        early_stream=stream,
        idempotency_key=key,
    )


def parse_http_call(request: HttpCall) -> tuple[str, str, Call]:
    """(kind, target id, call) of a call as it arrived; raises A2AError for one that is not
    an A2A call (a wrong verb included)."""
    limits = current_limits()
    if request.oversized:
        raise body_too_large(limits)
    if request.kind == TASK_API:
        send = task_api_send(parse_task_api_body(request.body), Operation.STREAM)
        key = send_key_of(Operation.STREAM, request.headers)
        call = task_api_call(Operation.STREAM, send, request.headers, key=key)
        return send.kind, send.target_id, call
    verbs = {"POST"} if request.binding == JSONRPC else REST_VERBS
    if request.http_method not in verbs:
        raise MethodNotFound(f"{request.http_method} is not an A2A call here")
    check_body(request.body, limits)
    if request.binding == JSONRPC:
        call = parse_jsonrpc_call(request.headers, request.body)
    else:
        call = parse_rest_call(
            request.http_method, request.rest, request.query, request.headers, request.body
        )
    try:
        check_params(call.params, limits)
        if _may_hold_nul(request):
            refuse_nul(call.params)
        call = replace(
            call,
            delegation=delegation.inbound(request.headers),
            idempotency_key=send_key_of(call.operation, request.headers),
        )
    except A2AError as error:
        error.request_id, error.request_version = call.request_id, str(call.version)
        raise
    return request.kind, request.target_id, call
