"""The relay's ``A2AService``: every gRPC call runs through what a JSON-RPC or HTTP+JSON call
runs through (``tasks_app.api.calls``): the API key from the ``authorization`` metadata and its
rate limit, the target and the key's scope, the agent's rate limit, the stream slots, the
request limits, then the gateway's operations (tasks persisted, the state machine, events fanned
out to every binding's subscribers).

A request's protobuf message becomes the canonical 1.0 ProtoJSON dict the gateway takes
(``MessageToDict``, integral Struct numbers back to ints: ``tasks_app.grpc.values``; then
the same validation as the other bindings: ``parse_request_v1``), and canonical results
become the response messages (``ParseDict``). Its ``tenant`` names the target
(``tasks_app.grpc.targets``). Metadata read: ``authorization`` (``Bearer <key>``),
``a2a-version`` (absent or 1.x: this service is the 1.0 one), ``a2a-extensions`` (the
extensions the caller activates; those the target supports are named back in the response's
initial metadata, as ``a2a-extensions``) and ``x-relay-chain`` (delegation between relays).

Errors end the call with the ``google.rpc.Code`` of the spec's mapping and a
``google.rpc.Status`` in ``grpc-status-details-bin`` carrying the ErrorInfo (domain
``a2a-protocol.org`` and the A2A reason, or ``brass-relay`` for the relay's own: unauthenticated,
rate limited, unavailable), then BadRequest field violations or RetryInfo where they apply: what
a2a-sdk's gRPC client turns back into its typed errors.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass, replace
from functools import partial
from typing import Any

import grpc
from a2a.types import a2a_pb2, a2a_pb2_grpc
from a2a.utils.grpc_status import status_to_grpc
from django.conf import settings
from google.protobuf import empty_pb2
from google.protobuf.json_format import ParseDict, ParseError
from google.protobuf.message import Message
from google.rpc import error_details_pb2, status_pb2  # noqa: F401  (registers the detail types)
from prometheus_client import Counter, Histogram

from relay_project import ratelimit, tracing
from relay_project.request_metrics import REGISTRY
from tasks_app import delegation, streams
from tasks_app.api import admission, calls, parsing, traces
from tasks_app.grpc.targets import target_of_tenant
from tasks_app.grpc.values import message_to_json
from tasks_app.protocol.errors import (
    A2AError,
    InternalError,
    InvalidAgentResponse,
    InvalidRequest,
    UnsupportedOperation,
    VersionNotSupported,
)
from tasks_app.protocol.limits import check_params
from tasks_app.protocol.validation import parse_request_v1
from tasks_app.protocol.versions import (
    VERSION_HEADER,
    Operation,
    ProtocolVersion,
    negotiate_version,
    requested_extensions,
)

logger = logging.getLogger(__name__)

GRPC = "GRPC"

CALLS = Counter(
    "relay_grpc_calls",
    "gRPC calls the relay answered, by method and status code.",
    ["method", "code"],
    registry=REGISTRY,
)
DURATION = Histogram(
    "relay_grpc_call_duration_seconds",
    "Seconds until a unary gRPC call was answered or a stream sent its first event.",
    ["method"],
    registry=REGISTRY,
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0),
)

RESULT_TYPES: dict[Operation, type[Message]] = {
    Operation.SEND: a2a_pb2.SendMessageResponse,
    Operation.GET_TASK: a2a_pb2.Task,
    Operation.LIST_TASKS: a2a_pb2.ListTasksResponse,
    Operation.CANCEL: a2a_pb2.Task,
    Operation.PUSH_CREATE: a2a_pb2.TaskPushNotificationConfig,
    Operation.PUSH_GET: a2a_pb2.TaskPushNotificationConfig,
    Operation.PUSH_LIST: a2a_pb2.ListTaskPushNotificationConfigsResponse,
    Operation.PUSH_DELETE: empty_pb2.Empty,
    Operation.EXTENDED_CARD: a2a_pb2.AgentCard,
}


# --- requests, results, errors ----------------------------------------------------------


def metadata_pairs(context: grpc.aio.ServicerContext) -> list[tuple[str, str]]:
    """The call's text metadata as (name, value) pairs (binary ``-bin`` entries left out)."""
    return [
        (key, value)
        for key, value in (context.invocation_metadata() or ())
        if isinstance(value, str)
    ]


def authorization_of(pairs: Iterable[tuple[str, str]]) -> str | None:
    return next((value for key, value in pairs if key.lower() == "authorization"), None)


def grpc_version(pairs: list[tuple[str, str]]) -> ProtocolVersion:
    """The call's version: 1.0, whether ``a2a-version`` says so or is absent (the service is
    the 1.0 ``lf.a2a.v1`` one; 0.3 gRPC was another service). Raises VersionNotSupported for
    any other."""
    if not any(key.lower() == VERSION_HEADER.lower() and value.strip() for key, value in pairs):
        return ProtocolVersion.V1_0
    version = negotiate_version(pairs)
    if version != ProtocolVersion.V1_0:
        raise VersionNotSupported(
            f"the gRPC binding serves A2A 1.0 only, not {version}",
            metadata={"requestedVersion": str(version), "supportedVersions": "1.0"},
        )
    return version


@dataclass(frozen=True)
class Unparsable:
    """A request body that did not decode as the method's request message, and why
    (``tasks_app.grpc.server`` hands it in instead of failing the call in gRPC)."""

    reason: str


def parse_call(operation: Operation, request: Message | Unparsable, pairs: list[tuple[str, str]]):
    """(kind, target id, Call) of a gRPC request; raises A2AError for a bad one."""
    if isinstance(request, Unparsable):
        raise InvalidRequest(
            f"the request body is not a valid {operation.value} request message: {request.reason}"
        )
    version = grpc_version(pairs)
    raw = message_to_json(request)
    tenant = raw.pop("tenant", "")
    kind, target_id = target_of_tenant(tenant)
    params = parse_request_v1(operation, raw)
    limits = parsing.current_limits()
    check_params(params, limits)
    parsing.refuse_nul(params)
    raw_headers = [
        (key.encode("latin-1"), value.encode("latin-1", "replace")) for key, value in pairs
    ]
    call = parsing.Call(
        GRPC,
        version,
        operation,
        params,
        None,
        requested_extensions(pairs),
        delegation.inbound(raw_headers),
        idempotency_key=parsing.send_key_of(operation, pairs),
    )
    return kind, target_id, call


def as_message(result_type: type[Message], result: Any) -> Message:
    """A canonical result as its response message. A result the message cannot hold (an
    agent's answer that is not valid A2A) is an InvalidAgentResponse."""
    if result_type is empty_pb2.Empty or result is None:
        return result_type()
    try:
        return ParseDict(result, result_type(), ignore_unknown_fields=True)
    except ParseError as error:
        raise InvalidAgentResponse(
            f"the answer is not a valid {result_type.__name__}: {error}"
        ) from error


def rich_status(error: A2AError) -> tuple[grpc.StatusCode, str, tuple[tuple[str, bytes], ...]]:
    """The gRPC code, message and trailing metadata (``grpc-status-details-bin``) of an error."""
    code = getattr(grpc.StatusCode, error.status, grpc.StatusCode.INTERNAL)
    status = status_pb2.Status(code=code.value[0], message=error.message)
    for detail in error.details():
        try:
            ParseDict(detail, status.details.add())
        except ParseError:
            logger.warning("could not encode the error detail %r", detail.get("@type"))
            del status.details[-1]
    rendered = status_to_grpc(status)
    return rendered.code, rendered.details, tuple(rendered.trailing_metadata)


async def abort(context: grpc.aio.ServicerContext, method: str, error: A2AError) -> None:
    code, message, trailing = rich_status(error)
    CALLS.labels(method, code.name).inc()
    await context.abort(code, message, trailing_metadata=trailing)


def failure(error: BaseException, what: str) -> A2AError:
    """The A2AError an exception of a call is answered with."""
    if isinstance(error, A2AError):
        return error
    if isinstance(error, calls.UNAVAILABLE):
        return calls.unavailable(error, what)
    logger.exception("gRPC call failed", exc_info=error)
    return InternalError("the relay failed to handle this call")


async def admitted_call(
    operation: Operation, request: Message, context, trace: traces.CallTrace | None = None
) -> admission.Admitted:
    """Parses and admits a call, as ``calls.answer`` does: a caller without a valid key is
    refused as unauthenticated whatever else is wrong with its call. With tracing on, the
    call's spans go where its ``trace`` says (``traces.CallTrace.admitted``)."""
    pairs = metadata_pairs(context)
    try:
        admitted = await admission.admission(
            authorization_of(pairs), partial(parse_call, operation, request, pairs)
        )
    except admission.Refused as refused:
        raise refused.error from None
    if trace is not None:
        admitted = replace(admitted, call=trace.admitted(admitted.call))
    return admitted


def call_trace(operation: Operation, request: Message, context) -> traces.CallTrace | None:
    """The trace of a gRPC call, continuing the caller's ``traceparent`` metadata (None when
    tracing is off); its target is the request's tenant."""
    if not tracing.enabled():
        return None
    tenant = getattr(request, "tenant", "")
    return traces.CallTrace(metadata_pairs(context), f"grpc:{tenant}", operation)


async def announce_extensions(context, admitted: admission.Admitted) -> None:
    echo = admission.echoed(admitted.call, admitted.target)
    if echo:
        await context.send_initial_metadata((("a2a-extensions", ", ".join(echo)),))


def http_base_url(target) -> str:
    """The target's HTTP address at the relay (RELAY_PUBLIC_URL and its path), which the
    extended card names beside the gRPC interface. A gRPC call has no HTTP request to read the
    address from: without RELAY_PUBLIC_URL the card cannot be made."""
    if not settings.RELAY_PUBLIC_URL:
        raise UnsupportedOperation(
            "the relay's gRPC server cannot name the relay's HTTP address in an extended card: "
            "RELAY_PUBLIC_URL is not set for it"
        )
    path = {
        "agent": f"agents/{target.id}",
        "team": f"teams/{target.id}",
        "workflow": f"workflows/{target.id}",
    }.get(target.kind, "relay")
    return f"{settings.RELAY_PUBLIC_URL.rstrip('/')}/a2a/{path}/"


# --- the service --------------------------------------------------------------------------


class RelayA2AService(a2a_pb2_grpc.A2AServiceServicer):
    """Every A2A operation, for every target the request's tenant names."""

    async def _unary(self, operation: Operation, request: Message, context) -> Message:
        method = operation.value
        began = time.monotonic()
        trace = call_trace(operation, request, context)
        with trace or contextlib.nullcontext():
            try:
                admitted = await admitted_call(operation, request, context, trace)
                await announce_extensions(context, admitted)
                card = operation is Operation.EXTENDED_CARD
                result = await calls.execute(
                    admitted.target,
                    admitted.call,
                    admitted.caller,
                    opened=admitted.opened,
                    base_url=http_base_url(admitted.target) if card else "",
                )
                answer = as_message(RESULT_TYPES[operation], result)
            except Exception as error:  # noqa: BLE001 - every failure is answered as a status
                refused = failure(error, f"a gRPC {method}")
                if trace is not None:
                    trace.failed(refused)
            else:
                CALLS.labels(method, grpc.StatusCode.OK.name).inc()
                DURATION.labels(method).observe(time.monotonic() - began)
                return answer
            DURATION.labels(method).observe(time.monotonic() - began)
            await abort(context, method, refused)
            raise AssertionError("abort returned")  # pragma: no cover

    async def _stream(
        self, operation: Operation, request: Message, context
    ) -> AsyncIterator[a2a_pb2.StreamResponse]:
        method = operation.value
        began = time.monotonic()
        events = None
        refused: A2AError | None = None
        trace = call_trace(operation, request, context)
        with trace or contextlib.nullcontext():
            try:
                admitted = await admitted_call(operation, request, context, trace)
                try:
                    opened = await calls.open_stream(
                        admitted.target, admitted.call, admitted.caller, opened=admitted.opened
                    )
                except BaseException:
                    ratelimit.stream_slot_give_back(admitted.caller)
                    raise
                if trace is not None:
                    opened = traces.streamed(opened, admitted.call)
                events = admission.HoldingSlot(opened, admitted.caller)
            except Exception as error:  # noqa: BLE001
                refused = failure(error, f"a gRPC {method}")
                if trace is not None:
                    trace.failed(refused)
        DURATION.labels(method).observe(time.monotonic() - began)
        if refused is not None:
            await abort(context, method, refused)
            return
        try:
            # From here on the slot goes back however the stream ends (the client leaving
            # cancels this task).
            await announce_extensions(context, admitted)
            async for event in events:
                if event is streams.KEEPALIVE:
                    continue
                yield as_message(a2a_pb2.StreamResponse, event)
        except Exception as error:  # noqa: BLE001
            refused = failure(error, "a gRPC stream, after it opened")
        finally:
            await events.aclose()
        if refused is not None:
            await abort(context, method, refused)
            return
        CALLS.labels(method, grpc.StatusCode.OK.name).inc()

    async def SendMessage(self, request, context):  # noqa: N802 - the proto's names
        return await self._unary(Operation.SEND, request, context)

    async def SendStreamingMessage(self, request, context):  # noqa: N802
        async for event in self._stream(Operation.STREAM, request, context):
            yield event

    async def GetTask(self, request, context):  # noqa: N802
        return await self._unary(Operation.GET_TASK, request, context)

    async def ListTasks(self, request, context):  # noqa: N802
        return await self._unary(Operation.LIST_TASKS, request, context)

    async def CancelTask(self, request, context):  # noqa: N802
        return await self._unary(Operation.CANCEL, request, context)

    async def SubscribeToTask(self, request, context):  # noqa: N802
        async for event in self._stream(Operation.SUBSCRIBE, request, context):
            yield event

    async def CreateTaskPushNotificationConfig(self, request, context):  # noqa: N802
        return await self._unary(Operation.PUSH_CREATE, request, context)

    async def GetTaskPushNotificationConfig(self, request, context):  # noqa: N802
        return await self._unary(Operation.PUSH_GET, request, context)

    async def ListTaskPushNotificationConfigs(self, request, context):  # noqa: N802
        return await self._unary(Operation.PUSH_LIST, request, context)

    async def DeleteTaskPushNotificationConfig(self, request, context):  # noqa: N802
        return await self._unary(Operation.PUSH_DELETE, request, context)

    async def GetExtendedAgentCard(self, request, context):  # noqa: N802
        return await self._unary(Operation.EXTENDED_CARD, request, context)
