"""One A2A call at the HTTP edge, whatever the binding: parse it into a ``Call`` (operation,
version, canonical params), admit it (the caller's key, the target, the task a message opens:
one hop to a database thread), execute it on the target, and render results, errors and stream frames in the caller's binding and version.

The one place A2A answers are rendered: ``answer`` serves every A2A protocol call for the
Channels consumer (``tasks_app.consumers``), and the task API's DRF views render through the
same functions.
"""

from __future__ import annotations

import io
import json
import logging
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any

from django.conf import settings
from django.core.exceptions import DisallowedHost
from django.core.handlers.asgi import ASGIRequest
from rest_framework import exceptions

from registry.auth import (
    REALM,
    REALM_INVALID_TOKEN,
    KeyLookup,
    api_key_counted,
    api_key_lookup,
    key_may_call,
)
from relay_project import ratelimit
from relay_project.database import database_sync_to_async
from relay_project.public_url import relay_base_url
from relay_project.redis_clients import UNREACHABLE, UNREACHABLE_MESSAGE
from tasks_app import client_ids, delegation, gateway, relay_endpoint, skill_targets
from tasks_app.gateway import ownership
from tasks_app.protocol import early, jsonrpc, rest
from tasks_app.protocol.convert import parse_request_v1
from tasks_app.protocol.errors import (
    A2AError,
    FieldViolation,
    InternalError,
    InvalidParams,
    InvalidRequest,
    JSONParseError,
    MethodNotFound,
    RateLimited,
    Unauthenticated,
    Unavailable,
    jsonrpc_error_body,
    rest_error_body,
)
from tasks_app.protocol.limits import (
    Limits,
    body_too_large,
    check_body,
    check_params,
    nul_violations,
)
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
TARGET_KEYS = {"agentId": "agent", "teamId": "team", "skill": skill_targets.SKILL}
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


@dataclass(frozen=True)
class Reply:
    status: int
    body: Any
    content_type: str
    headers: tuple[tuple[str, str], ...] = ()

    def encoded(self) -> bytes:
        return json.dumps(self.body, separators=(",", ":"), ensure_ascii=False).encode()


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


@dataclass(frozen=True)
class Stream:
    """A streaming call that opened: SSE frames of ``events`` follow a 200 with ``headers``."""

    call: Call
    headers: tuple[tuple[str, str], ...]
    events: AsyncIterator[Any]


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
                    FieldViolation(named[1], "name one target: agentId, teamId or skill, not two")
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


def task_api_call(operation: Operation, send: TaskApiSend, headers) -> Call:
    """A task API call: HTTP+JSON, A2A 1.0 ProtoJSON inside, answered in the shape it came
    in."""
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
    )


def parse_http_call(request: HttpCall) -> tuple[str, str, Call]:
    """(kind, target id, call) of a call as it arrived; raises A2AError for one that is not
    an A2A call (a wrong verb included)."""
    limits = current_limits()
    if request.oversized:
        raise body_too_large(limits)
    if request.kind == TASK_API:
        send = task_api_send(parse_task_api_body(request.body), Operation.STREAM)
        return send.kind, send.target_id, task_api_call(Operation.STREAM, send, request.headers)
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
        call = replace(call, delegation=delegation.inbound(request.headers))
    except A2AError as error:
        error.request_id, error.request_version = call.request_id, str(call.version)
        raise
    return request.kind, request.target_id, call


def error_reply(binding: str, version: str, error: A2AError, request_id: Any = None) -> Reply:
    headers: list[tuple[str, str]] = []
    if isinstance(error, Unauthenticated):
        headers.append(
            ("WWW-Authenticate", REALM_INVALID_TOKEN if isinstance(error, InvalidApiKey) else REALM)
        )
    if isinstance(error, RateLimited) and error.retry_after:
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
    """JSON-RPC errors travel with HTTP 200, except a wrong URL, authentication, rate limits
    and an unavailable relay, which HTTP clients and proxies must see."""
    return isinstance(error, Unauthenticated | RateLimited | TargetNotFound | Unavailable)


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


async def _refused(error: A2AError):
    """A stream that ends at once with ``error``."""
    raise error
    yield  # an async generator, so the error comes when the stream is read


def context_for(call: Call, caller) -> gateway.CallContext:
    return gateway.CallContext(
        caller=caller,
        version=str(call.version),
        extensions=call.extensions,
        delegation=call.delegation,
    )


def echoed(call: Call, target: gateway.Target) -> tuple[str, ...]:
    """The requested extensions the target supports: those are the ones applied."""
    return tuple(uri for uri in call.extensions if uri in target.declared_extensions)


def admit_caller(lookup: KeyLookup):
    """The caller's usable API key, with this call counted against the key's rate limit, from
    the cache's answer (``api_key_lookup``). Raises Unauthenticated for no key or a bad one,
    or RateLimited over the limit."""
    try:
        caller, refusal = api_key_counted(lookup)
    except exceptions.AuthenticationFailed as error:
        raise InvalidApiKey(str(error.detail)) from error
    if caller is None:
        raise Unauthenticated(NO_KEY)
    if refusal is not None:
        raise RateLimited(refusal.message, retry_after=refusal.retry_after)
    return caller


def count_target(target: gateway.Target) -> None:
    """Counts a call to an agent against RELAY_RATE_LIMIT_PER_AGENT; raises RateLimited over
    it. Teams and the relay's own endpoint have no limit of their own."""
    if target.kind != "agent":
        return
    refusal = ratelimit.hit_agent(target.id)
    if refusal is not None:
        raise RateLimited(refusal.message, retry_after=refusal.retry_after)


@dataclass(frozen=True)
class Admitted:
    caller: Any
    target: gateway.Target
    opened: gateway.Opened | None
    call: Call
    """The call to run: the one admitted, with the task it continues named."""


def callable_target(caller, kind: str, target_id: str) -> gateway.Target:
    """The target, when it exists and the caller's key may call it. Raises TargetNotFound
    otherwise, with the same words either way: a key learns nothing of agents and teams
    outside its scope. (For the relay's own endpoint the scope applies to the agent or team
    it forwards to.)"""
    if kind == skill_targets.SKILL:
        target = skill_targets.skill_target(caller, target_id)
        if target is None:
            raise TargetNotFound(
                f"no healthy agent at this relay has a skill like {target_id[:80]!r}"
            )
        return target
    target = gateway.resolve_target(kind, target_id)
    if target is None or not key_may_call(caller, target.kind, target.id):
        raise TargetNotFound(f"no {kind} {target_id!r} at this relay")
    return target


class Refused(Exception):
    """Admission refused a call with ``error``; ``call`` is the call as parsed, None when it
    could not be parsed or its caller has no valid key (answered like an unparsed call)."""

    def __init__(self, error: Exception, call: Call | None) -> None:
        super().__init__(error)
        self.error = error
        self.call = call


Parsed = tuple[str, str, Call]
"""A call as parsed: its target's kind and id, and the call."""


async def admission(authorization: str | None, parse: Callable[[], Parsed]) -> Admitted:
    """A call, parsed (``parse``, on the event loop: pure) and admitted in a database thread:
    its caller's key looked up and counted against its rate limit, its target resolved, its
    task opened (``admit``). A caller without a valid key is refused whatever else is wrong
    with its call. Raises Refused."""
    try:
        parsed: Parsed | A2AError = parse()
    except A2AError as error:
        parsed = error
    return await database_sync_to_async(admit_parsed)(authorization, parsed)


def admit_parsed(authorization: str | None, parsed: Parsed | A2AError) -> Admitted:
    """A parsed call admitted (``admit``), or the error that refused it unparsed raised once
    its caller's key is found valid. Raises Refused."""
    call = None if isinstance(parsed, A2AError) else parsed[2]
    try:
        lookup = api_key_lookup(authorization)
        if call is None:
            admit_caller(lookup)
            raise parsed
        return admit(lookup, *parsed)
    except Unauthenticated as error:
        raise Refused(error, None) from None
    except Exception as error:
        raise Refused(error, call) from None


def admit(lookup: KeyLookup, kind: str, target_id: str, call: Call) -> Admitted:
    """Who calls (the key's ``lookup``), on what, and for a message the task it opens: the
    work before a call goes upstream. Counts the call against the agent's rate limit (the
    key's was counted with its lookup), and takes a stream slot of the key for a streaming
    call (the caller gives it back). Raises Unauthenticated, RateLimited, TargetNotFound
    (also for a target outside the key's scope), or the error that refuses the message, with
    no slot held and nothing stored. What it reads that the process's caches do not hold, it
    reads from the database; its effects beyond memory (the agent's count, the slot, a task
    stored at once) come after every read (``admission`` relies on it)."""
    caller = admit_caller(lookup)
    if call.task_api:
        task_api_target_check(kind)
    target = callable_target(caller, kind, target_id)
    count_target(target)
    streaming = call.operation in STREAMING
    if streaming:
        ownership.process_id()  # the slot is this process's: it must hold a lease
        refusal = ratelimit.stream_slot_take(caller)
        if refusal is not None:
            raise RateLimited(refusal.message)
    try:
        opened, call = open_message_task(target, call, caller)
    except BaseException:
        if streaming:
            ratelimit.stream_slot_give_back(caller)
        raise
    return Admitted(caller, target, opened, call)


def open_message_task(
    target: gateway.Target, call: Call, caller
) -> tuple[gateway.Opened | None, Call]:
    """The task a message call opens or continues (None for other calls), and the call to
    run: for a call in the early task shape, the task is found by the client's task id, and
    a message continuing a task names it (``message.taskId``) as a 1.0 client's would."""
    if call.operation not in OPENS_TASK:
        return None, call
    ctx, stream = context_for(call, caller), call.operation is Operation.STREAM
    if call.client_task_id is None:
        return gateway.open_task(target, ctx, call.params, stream=stream), call
    opened = client_ids.client_task_open(
        target=target, ctx=ctx, request=call.params, client_id=call.client_task_id, stream=stream
    )
    if not opened.fresh:
        message = dict(call.params["message"], taskId=opened.task.id)
        call = replace(call, params=dict(call.params, message=message))
    return opened, call


class HoldingSlot:
    """A stream's events that give the caller's stream slot back once, when the stream ends,
    fails or is closed (also when it is closed before its first event)."""

    def __init__(self, events: AsyncIterator[Any], caller) -> None:
        self._events = events
        self._caller = caller
        self._held = True

    def __aiter__(self):
        return self

    async def __anext__(self):
        try:
            return await self._events.__anext__()
        except BaseException:
            self.give_back()
            raise

    async def aclose(self) -> None:
        try:
            await self._events.aclose()
        finally:
            self.give_back()

    def give_back(self) -> None:
        if self._held:
            self._held = False
            ratelimit.stream_slot_give_back(self._caller)


async def answer(request: HttpCall) -> Reply | Stream:
    """Answers one A2A call: a Reply, or a Stream to send as SSE (a streaming call refused
    before its first event gets a Reply). Never raises: every failure is rendered in the
    call's binding, with its id and in its version as far as they are known. A caller without
    a valid key gets 401 whatever else is wrong with its call."""
    call: Call | None = None
    try:
        try:
            admitted = await admission(request.authorization, partial(parse_http_call, request))
        except Refused as refused:
            call = refused.call
            raise refused.error from None
        call = admitted.call
        echo = echoed(call, admitted.target)
        if call.operation in STREAMING:
            try:
                events = await open_stream(
                    admitted.target, call, admitted.caller, opened=admitted.opened
                )
            except BaseException as error:
                ratelimit.stream_slot_give_back(admitted.caller)
                if isinstance(error, A2AError) and answered_in_stream(call, error):
                    return Stream(call, extension_headers(call, echo), _refused(error))
                raise
            return Stream(call, extension_headers(call, echo), HoldingSlot(events, admitted.caller))
        base_url = request.base_url() if call.operation is Operation.EXTENDED_CARD else ""
        result = await execute(
            admitted.target, call, admitted.caller, opened=admitted.opened, base_url=base_url
        )
        return result_reply(call, result, echo_extensions=echo)
    except A2AError as error:
        return failure_reply(request.binding, error, call)
    except UNREACHABLE as error:
        refused = redis_unreachable(error, f"an A2A call to {request.kind} {request.target_id!r}")
        return failure_reply(request.binding, refused, call)
    except Exception:
        logger.exception("A2A call failed")
        return failure_reply(
            request.binding, InternalError("the relay failed to handle this call"), call
        )


def redis_unreachable(error: Exception, what: str) -> Unavailable:
    """The error answering a call that Redis being unreachable stopped (``what`` names the
    call), logged as one WARNING line. Admission (the API key lookup and the rate limits,
    both in the cache) runs before a message opens its task, so such a call stored nothing."""
    logger.warning("refused %s: %s (%s)", what, UNREACHABLE_MESSAGE, error)
    return Unavailable(UNREACHABLE_MESSAGE)


async def execute(
    target: gateway.Target,
    call: Call,
    caller,
    *,
    opened: gateway.Opened | None = None,
    base_url: str = "",
) -> Any:
    """Runs a non-streaming call and returns its canonical result. ``opened``: the task a
    SendMessage opened in ``admit``; ``base_url``: the target's public URL, for a card."""
    ctx = replace(context_for(call, caller), base_url=base_url)
    params = call.params
    match call.operation:
        case Operation.SEND:
            return await gateway.send_message(target, ctx, params, opened=opened)
        case Operation.GET_TASK:
            return await gateway.get_task(
                target, ctx, params["id"], history_length=params.get("historyLength")
            )
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


async def open_stream(
    target: gateway.Target, call: Call, caller, *, opened: gateway.Opened | None = None
):
    """Starts a streaming call; errors before the first event are raised here."""
    ctx = context_for(call, caller)
    if call.operation is Operation.STREAM:
        return await gateway.stream_message(target, ctx, call.params, opened=opened)
    return await gateway.subscribe(target, ctx, call.params["id"])
