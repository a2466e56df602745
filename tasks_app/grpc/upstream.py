"""Calling upstream agents over gRPC: what ``tasks_app.upstream`` does for an endpoint whose
binding is ``GRPC`` (an agent whose card offers A2A 1.0 over gRPC and no JSON-RPC or HTTP+JSON
interface of a version as good).

The interface URL is the channel target as a2a-sdk's client takes it (``host:port``; a
``grpcs://`` or ``https://`` URL asks for TLS, ``grpc://`` and ``http://`` for plaintext), the
interface's ``tenant`` goes into every request. Canonical 1.0 params become the request message
(``ParseDict``) and answers the canonical dicts (``MessageToDict``, integral Struct numbers
back to ints: ``tasks_app.grpc.values``). Metadata: ``a2a-version: 1.0``, the activated
extensions, the agent's stored credentials and the relay's own headers (delegation), names
lowercased as gRPC wants them.

The SSRF guard applies as for HTTP: the host is resolved here and every address checked
(``relay_project.outbound``), and the channel connects to the checked address, the host name
kept as the authority (and the TLS name), so a second resolution cannot lead elsewhere.
Channels are kept per event loop and target, like the pooled HTTP client.

Failures: an A2A error the agent answered (a ``google.rpc.Status`` with an ErrorInfo reason, or
a code alone) is raised as the A2AError, rebuilt by ``error_from_rest`` from the status; a
channel that cannot connect, a deadline, or the agent refusing the relay's credentials is an
``UpstreamError`` with the categories of the HTTP path.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator, Iterable, Mapping
from typing import Any
from urllib.parse import urlsplit

import grpc
from a2a.types import a2a_pb2, a2a_pb2_grpc
from a2a.utils.grpc_status import status_from_call
from google.protobuf import empty_pb2
from google.protobuf.json_format import MessageToDict, ParseDict, ParseError
from google.protobuf.message import Message

from relay_project import outbound
from tasks_app.grpc.values import message_to_json
from tasks_app.protocol.errors import A2AError, InvalidAgentResponse, InvalidParams, error_from_rest
from tasks_app.protocol.versions import Operation
from tasks_app.upstream_errors import UpstreamError

REQUEST_TYPES: dict[Operation, type[Message]] = {
    Operation.SEND: a2a_pb2.SendMessageRequest,
    Operation.STREAM: a2a_pb2.SendMessageRequest,
    Operation.GET_TASK: a2a_pb2.GetTaskRequest,
    Operation.LIST_TASKS: a2a_pb2.ListTasksRequest,
    Operation.CANCEL: a2a_pb2.CancelTaskRequest,
    Operation.SUBSCRIBE: a2a_pb2.SubscribeToTaskRequest,
    Operation.PUSH_CREATE: a2a_pb2.TaskPushNotificationConfig,
    Operation.PUSH_GET: a2a_pb2.GetTaskPushNotificationConfigRequest,
    Operation.PUSH_LIST: a2a_pb2.ListTaskPushNotificationConfigsRequest,
    Operation.PUSH_DELETE: a2a_pb2.DeleteTaskPushNotificationConfigRequest,
    Operation.EXTENDED_CARD: a2a_pb2.GetExtendedAgentCardRequest,
}

HTTP_STATUS = {
    grpc.StatusCode.INVALID_ARGUMENT: 400,
    grpc.StatusCode.FAILED_PRECONDITION: 400,
    grpc.StatusCode.NOT_FOUND: 404,
    grpc.StatusCode.UNIMPLEMENTED: 501,
    grpc.StatusCode.RESOURCE_EXHAUSTED: 429,
    grpc.StatusCode.INTERNAL: 500,
    grpc.StatusCode.UNKNOWN: 500,
}
"""The HTTP status of a gRPC code, as the spec maps them: ``error_from_rest`` picks the error
class from it when the status carries no A2A reason."""

TRANSPORT_CODES = {
    grpc.StatusCode.UNAVAILABLE: "refused",
    grpc.StatusCode.DEADLINE_EXCEEDED: "timeout",
    grpc.StatusCode.CANCELLED: "protocol",
}


def _upstream_error(category: str, message: str):
    return UpstreamError(category, message)


def parse_target(url: str) -> tuple[str, int, bool]:
    """(host, port, tls) of a gRPC interface URL. Raises UnsafeURLError for one that names no
    host and port."""
    secure = url.startswith(("grpcs://", "https://"))
    parts = urlsplit(url if "://" in url else f"//{url}")
    try:
        port = parts.port
    except ValueError as error:
        raise outbound.UnsafeURLError(f"not a valid gRPC address: {url!r}") from error
    if not parts.hostname or parts.username or parts.password:
        raise outbound.UnsafeURLError(f"not a valid gRPC address: {url!r}")
    if port is None:
        port = 443 if secure else 80
    return parts.hostname, port, secure


async def checked_address(host: str, port: int) -> str:
    """An address of ``host`` the relay may call (all must be, as for HTTP): the SSRF guard."""
    policy = outbound.OutboundPolicy.from_settings()
    loop = asyncio.get_running_loop()
    try:
        infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as error:
        raise _upstream_error("dns", f"cannot resolve {host} ({error})") from error
    addresses = [str(info[4][0]) for info in infos]
    if not addresses:
        raise _upstream_error("dns", f"{host} did not resolve to any address")
    if not policy.allow_private:
        refused = [a for a in addresses if not outbound.is_public_address(a)]
        if refused:
            raise outbound.UnsafeURLError(
                f"{host} resolves to a non-public address ({refused[0]}); the relay does not "
                "call loopback, private, link-local or metadata addresses"
            )
    return addresses[0]


_channels: dict[tuple[int, str], grpc.aio.Channel] = {}


async def channel_for(url: str) -> grpc.aio.Channel:
    """This loop's channel to the agent at ``url`` (resolved and checked once per channel)."""
    loop_id = id(asyncio.get_running_loop())
    channel = _channels.get((loop_id, url))
    if channel is not None:
        return channel
    host, port, secure = parse_target(url)
    address = await checked_address(host, port)
    target = f"[{address}]:{port}" if ":" in address else f"{address}:{port}"
    options = [("grpc.default_authority", f"{host}:{port}")]
    if secure:
        options.append(("grpc.ssl_target_name_override", host))
        channel = grpc.aio.secure_channel(target, grpc.ssl_channel_credentials(), options=options)
    else:
        channel = grpc.aio.insecure_channel(target, options=options)
    _channels[(loop_id, url)] = channel
    return channel


def forget_channels() -> None:
    """Drops the kept channels (they close when collected), e.g. after a test's loop ended."""
    _channels.clear()


def metadata_for(
    headers: Iterable[tuple[str, str]],
    extensions: Iterable[str],
    extra: Mapping[str, str] | None,
) -> list[tuple[str, str]]:
    merged: dict[str, str] = {name.lower(): value for name, value in headers}
    merged["a2a-version"] = "1.0"
    extensions = list(dict.fromkeys(extensions))
    if extensions:
        merged["a2a-extensions"] = ", ".join(extensions)
    for name, value in (extra or {}).items():
        merged[name.lower()] = value
    merged.pop("content-type", None)
    return list(merged.items())


def request_message(operation: Operation, params: Mapping[str, Any], tenant: str) -> Message:
    body = dict(params)
    if tenant:
        body["tenant"] = tenant
    try:
        return ParseDict(body, REQUEST_TYPES[operation](), ignore_unknown_fields=True)
    except ParseError as error:
        raise InvalidParams(f"the request cannot be sent over gRPC: {error}") from error


def answer_dict(message: Message) -> Any:
    if isinstance(message, empty_pb2.Empty):
        return None
    return message_to_json(message)


def error_of(error: grpc.aio.AioRpcError, agent_id: str) -> Exception:
    """The A2AError or UpstreamError a failed call is."""
    name = f"agent {agent_id!r}"
    code = error.code()
    status = status_from_call(error)
    if code in (grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.PERMISSION_DENIED):
        return _upstream_error(
            "http_status",
            f"{name} refused the relay's credentials ({code.name}: {error.details()}); check "
            "the agent's credentials in the registry",
        )
    if code in TRANSPORT_CODES and not (status and status.details):
        category = TRANSPORT_CODES[code]
        if category == "refused" and not _not_connected(error.details() or ""):
            # UNAVAILABLE from a server that took the call (shutting down, overloaded): the
            # request may have reached the agent, which a retry must not assume it did not.
            category = "protocol"
        if category == "timeout":
            return _upstream_error("timeout", f"{name} did not answer in time")
        return _upstream_error(category, f"{name}: gRPC {code.name}: {error.details()}")
    body: dict[str, Any] = {"error": {"message": error.details() or code.name}}
    if status is not None:
        body["error"]["details"] = MessageToDict(status).get("details", [])
    return error_from_rest(HTTP_STATUS.get(code, 500), body)


NOT_CONNECTED = ("failed to connect", "connection refused", "dns resolution failed")
"""What gRPC's UNAVAILABLE says when no connection to the agent was made."""


def _not_connected(details: str) -> bool:
    return any(words in details.lower() for words in NOT_CONNECTED)


async def call(
    endpoint,
    operation: Operation,
    params: Mapping[str, Any],
    *,
    extensions: Iterable[str] = (),
    extra_headers: Mapping[str, str] | None = None,
    timeout: float | None = None,
) -> Any:
    """``tasks_app.upstream.call`` over gRPC."""
    request = request_message(operation, params, endpoint.tenant)
    metadata = metadata_for(endpoint.headers, extensions, extra_headers)
    try:
        stub = a2a_pb2_grpc.A2AServiceStub(await channel_for(endpoint.url))
        answer = await getattr(stub, operation.value)(request, metadata=metadata, timeout=timeout)
    except grpc.aio.AioRpcError as error:
        raise error_of(error, endpoint.agent_id) from error
    return answer_dict(answer)


async def stream(
    endpoint,
    operation: Operation,
    params: Mapping[str, Any],
    *,
    extensions: Iterable[str] = (),
    extra_headers: Mapping[str, str] | None = None,
    timeout: float | None = None,
) -> AsyncIterator[dict[str, Any]]:
    """``tasks_app.upstream.stream`` over gRPC: ``timeout`` bounds the wait for the agent to
    start answering (its initial metadata)."""
    request = request_message(operation, params, endpoint.tenant)
    metadata = metadata_for(endpoint.headers, extensions, extra_headers)
    stub = a2a_pb2_grpc.A2AServiceStub(await channel_for(endpoint.url))
    answers = getattr(stub, operation.value)(request, metadata=metadata)
    try:
        try:
            async with asyncio.timeout(timeout):
                await answers.initial_metadata()
        except TimeoutError as error:
            raise _upstream_error(
                "timeout", f"agent {endpoint.agent_id!r} did not answer in time"
            ) from error
        async for answer in answers:
            yield answer_dict(answer)
    except grpc.aio.AioRpcError as error:
        raise error_of(error, endpoint.agent_id) from error
    except A2AError:
        raise
    except (ValueError, TypeError) as error:
        raise InvalidAgentResponse(
            f"agent {endpoint.agent_id!r} sent a stream event that is not A2A"
        ) from error
    finally:
        answers.cancel()
