"""Calls to upstream A2A agents: the one client the gateway, the team router and the health
probes share.

It picks the interface to use from what the agent declares (1.0 before 0.3, JSON-RPC before
HTTP+JSON, the invocation URL overriding the card's own), speaks that binding and version
through the protocol layer, and turns transport failures into ``UpstreamError`` with a stable
category (``dns``, ``refused``, ``tls``, ``timeout``, ``http_status``, ``protocol``,
``unsafe_url``) that the task record, the circuit breaker and the health probes all use. HTTP
goes through ``relay_project.outbound``, so the SSRF guard covers every call: through the
process's agent session (aiohttp, ``shared_session``), or for a non-streaming call through
the httpx client a caller hands in (the health probes do).
"""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
import itertools
import json
import ssl
import weakref
from collections.abc import AsyncIterator, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import aiohttp
import httpx
from opentelemetry.context import Context

from relay_project import outbound, tracing
from tasks_app import lifecycle, upstream_traces
from tasks_app.grpc import upstream as grpc_upstream
from tasks_app.protocol import jsonrpc, rest
from tasks_app.protocol.convert import stream_response_to_v1
from tasks_app.protocol.errors import (
    A2AError,
    InvalidAgentResponse,
    Unauthenticated,
    error_from_rest,
)
from tasks_app.protocol.objects import with_artifact_flags
from tasks_app.protocol.versions import (
    VERSION_HEADER,
    Dialect,
    Operation,
    activation_header_name,
)
from tasks_app.upstream_errors import UpstreamError

DRAIN_SECONDS = 0.25
"""How long a stream that sent its last event may take to end. Read to its end, its connection
goes back to the pool; one that stays open longer is closed."""
SPEAKS = ("1.0", "0.3", "0.2")
BINDINGS = ("JSONRPC", "HTTP+JSON", "GRPC")
"""In order of preference within a version. gRPC is A2A 1.0's only (0.3 gRPC was another
service), spoken through ``tasks_app.grpc.upstream``."""
GRPC_VERSIONS = ("1.0",)
_request_ids = itertools.count(1)


class StreamSilent(UpstreamError):
    """The agent's stream sent nothing for longer than the relay waits (``first``: no event at
    all since its headers)."""

    def __init__(self, agent_id: str, seconds: float, *, first: bool) -> None:
        what = "opened a stream and sent no event" if first else "sent no stream event"
        super().__init__("timeout", f"timeout: agent {agent_id!r} {what} for {seconds:g} s")


class NoUsableInterfaceError(UpstreamError):
    def __init__(self, agent_id: str) -> None:
        super().__init__(
            "protocol",
            f"agent {agent_id!r} declares no JSON-RPC or HTTP+JSON interface of A2A 1.0 or 0.3, "
            "and no gRPC one of A2A 1.0",
        )


@dataclass(frozen=True)
class Endpoint:
    """Where and how to call one agent."""

    agent_id: str
    url: str
    binding: str
    version: str  # "1.0" or "0.3" (0.2 agents are spoken to as 0.3)
    headers: tuple[tuple[str, str], ...] = field(default=(), repr=False)
    tenant: str = ""
    """The interface's ``tenant`` (gRPC requests carry it)."""
    name: str = ""
    """The agent's name (traces name the agent they call)."""

    @property
    def wire_version(self) -> str:
        return "1.0" if self.version == "1.0" else "0.3"


def choose_endpoint(
    *,
    agent_id: str,
    interfaces: Iterable[Mapping[str, str]],
    invocation_url: str = "",
    headers: Mapping[str, str] | None = None,
    name: str = "",
) -> Endpoint:
    """The interface the relay will use: the best version first, then the best binding; the
    invocation URL, when set, replaces that interface's URL."""
    candidates = [
        (SPEAKS.index(i.get("protocolVersion")), BINDINGS.index(i.get("protocolBinding")), i)
        for i in interfaces
        if i.get("protocolVersion") in SPEAKS
        and i.get("protocolBinding") in BINDINGS
        and (i.get("protocolBinding") != "GRPC" or i.get("protocolVersion") in GRPC_VERSIONS)
    ]
    if not candidates:
        if not invocation_url:
            raise NoUsableInterfaceError(agent_id)
        chosen = {"url": invocation_url, "protocolBinding": "JSONRPC", "protocolVersion": "0.3"}
    else:
        chosen = min(candidates, key=lambda c: (c[0], c[1]))[2]
    version = "1.0" if chosen["protocolVersion"] == "1.0" else "0.3"
    return Endpoint(
        agent_id=agent_id,
        url=invocation_url or chosen["url"],
        binding=chosen["protocolBinding"],
        version=version,
        headers=tuple((headers or {}).items()),
        tenant=chosen.get("tenant") or "",
        name=name,
    )


@dataclass
class _Session:
    loop: weakref.ref
    session: aiohttp.ClientSession
    keeper: AsyncIterator[None]


_sessions: dict[tuple[int, outbound.OutboundPolicy], _Session] = {}


async def shared_session(policy: outbound.OutboundPolicy | None = None) -> aiohttp.ClientSession:
    """The agent session of the running event loop under ``policy`` (the settings' by default;
    a relay process has one loop). It is closed when its loop shuts down: ``asyncio.run``,
    uvicorn and pytest-asyncio finalize a loop's async generators then, and ``_keeper`` is
    one."""
    loop = asyncio.get_running_loop()
    key = (id(loop), policy or outbound.OutboundPolicy.from_settings())
    held = _sessions.get(key)
    if held is None or held.session.closed or held.loop() is not loop:
        session = outbound.agent_session(key[1])
        held = _sessions[key] = _Session(weakref.ref(loop), session, _keeper(key, session))
        await anext(held.keeper)  # the loop now tracks it
    return held.session


async def _keeper(key, session: aiohttp.ClientSession) -> AsyncIterator[None]:
    """Waits at its one ``yield`` for as long as its loop runs; closed with the loop's async
    generators, it forgets and closes the session."""
    try:
        yield
    finally:
        if _sessions.get(key) is not None and _sessions[key].session is session:
            del _sessions[key]
        await session.close()


@dataclass(frozen=True, slots=True)
class Answer:
    """An agent's whole HTTP answer to a non-streaming call."""

    status: int
    content_type: str
    content: bytes
    retry_after: str = ""
    """Its Retry-After header (empty without one)."""


async def _exchange(
    method: str,
    url: str,
    query: Mapping[str, str] | None,
    headers: Mapping[str, str],
    content: bytes | None,
    timeout: float | None,
    client: httpx.AsyncClient | None,
) -> Answer:
    """One request and its whole answer: through ``client`` when one is given, else through
    the process's agent session."""
    if client is not None:
        response = await client.request(
            method,
            url,
            params=query,
            content=content,
            headers=headers,
            **({"timeout": timeout} if timeout else {}),
        )
        return Answer(
            response.status_code,
            response.headers.get("content-type", ""),
            response.content,
            response.headers.get("retry-after", ""),
        )
    policy = outbound.OutboundPolicy.from_settings()
    session = await shared_session(policy)
    outbound.check_url_shape(url)
    async with session.request(
        method,
        url,
        params=query,
        data=content,
        headers=headers,
        max_redirects=outbound.agent_max_redirects(policy),
        **({"timeout": outbound.agent_timeout(timeout)} if timeout else {}),
    ) as response:
        return Answer(
            response.status,
            response.headers.get("Content-Type", ""),
            await response.read(),
            response.headers.get("Retry-After", ""),
        )


def _headers(
    endpoint: Endpoint, extensions: Iterable[str], extra: Mapping[str, str] | None
) -> dict[str, str]:
    headers = dict(endpoint.headers)
    headers["Content-Type"] = "application/json"
    if endpoint.wire_version == "1.0":
        headers[VERSION_HEADER] = "1.0"
    extensions = list(dict.fromkeys(extensions))
    if extensions:
        headers[activation_header_name(endpoint.wire_version)] = ", ".join(extensions)
    if extra:
        # The relay's own headers win over an agent's stored credential of the same name,
        # whatever its case: it must not send both.
        names = {name.lower() for name in extra}
        headers = {name: value for name, value in headers.items() if name.lower() not in names}
        headers.update(extra)
    return headers


def classify(error: BaseException, agent_id: str) -> UpstreamError:
    """A transport failure as an UpstreamError naming the agent and the problem."""
    name = f"agent {agent_id!r}"
    if isinstance(error, UpstreamError):
        return error
    if isinstance(error, outbound.UnsafeURLError):
        return UpstreamError(
            "unsafe_url", f"{name} is at an address the relay may not call: {error}"
        )
    if isinstance(error, httpx.TimeoutException | TimeoutError):
        return UpstreamError("timeout", f"{name} did not answer in time")
    if isinstance(error, aiohttp.ClientConnectorDNSError):
        return UpstreamError("dns", f"{name}: cannot resolve its host ({error.os_error})")
    if isinstance(error, aiohttp.ClientConnectorCertificateError | aiohttp.ClientSSLError):
        return UpstreamError("tls", f"{name}: TLS handshake failed ({error})")
    if isinstance(error, aiohttp.ClientConnectorError):
        return UpstreamError("refused", f"{name} refused the connection")
    if isinstance(error, aiohttp.ClientError):
        return UpstreamError("protocol", f"{name} broke the HTTP exchange: {error}")
    if isinstance(error, httpx.ConnectError):
        text = str(error)
        if "resolve" in text or "Name or service not known" in text:
            return UpstreamError("dns", f"{name}: cannot resolve its host ({text})")
        if isinstance(error.__cause__, ssl.SSLError) or "SSL" in text or "certificate" in text:
            return UpstreamError("tls", f"{name}: TLS handshake failed ({text})")
        return UpstreamError("refused", f"{name} refused the connection")
    if isinstance(error, httpx.RemoteProtocolError):
        return UpstreamError("protocol", f"{name} broke the HTTP exchange: {error}")
    if isinstance(error, httpx.HTTPError):
        return UpstreamError("protocol", f"{name}: {type(error).__name__}: {error}")
    raise error


async def call(
    endpoint: Endpoint,
    operation: Operation,
    params: Mapping[str, Any],
    *,
    trace_parent: Context | None = None,
    **options: Any,
) -> Any:
    """``_call`` in an ``invoke_agent`` span under ``trace_parent`` when tracing is on."""
    if not tracing.enabled():
        return await _call(endpoint, operation, params, **options)
    return await upstream_traces.traced_call(
        _call, endpoint, operation, params, trace_parent, options
    )


def stream(
    endpoint: Endpoint,
    operation: Operation,
    params: Mapping[str, Any],
    *,
    trace_parent: Context | None = None,
    **options: Any,
) -> AsyncIterator[dict[str, Any]]:
    """``_stream`` in an ``invoke_agent`` span under ``trace_parent`` when tracing is on."""
    if not tracing.enabled():
        return _stream(endpoint, operation, params, **options)
    return upstream_traces.traced_stream(
        _stream, endpoint, operation, params, trace_parent, options
    )


async def _call(
    endpoint: Endpoint,
    operation: Operation,
    params: Mapping[str, Any],
    *,
    extensions: Iterable[str] = (),
    extra_headers: Mapping[str, str] | None = None,
    timeout: float | None = None,
    client: httpx.AsyncClient | None = None,
) -> Any:
    """Calls one non-streaming operation and returns the canonical (1.0) result.

    Raises the A2AError the agent answered with, InvalidAgentResponse for an answer that is
    not A2A, and UpstreamError when the agent cannot be reached or answers an HTTP error
    without an A2A body.
    """
    if endpoint.binding == "GRPC":
        try:
            return await grpc_upstream.call(
                endpoint,
                operation,
                params,
                extensions=extensions,
                extra_headers=extra_headers,
                timeout=timeout or outbound.OutboundPolicy.from_settings().timeout,
            )
        except outbound.UnsafeURLError as error:
            raise classify(error, endpoint.agent_id) from error
    headers = _headers(endpoint, extensions, extra_headers)
    method, url, query, content = _request(endpoint, operation, params)
    try:
        answer = await _exchange(method, url, query, headers, content, timeout, client)
    except (aiohttp.ClientError, httpx.HTTPError, TimeoutError, outbound.UnsafeURLError) as error:
        # The SSRF guard refuses in the connection layer, outside the clients' own errors.
        raise classify(error, endpoint.agent_id) from error
    return _parse(endpoint, operation, answer)


def _request(
    endpoint: Endpoint, operation: Operation, params: Mapping[str, Any]
) -> tuple[str, str, dict[str, str] | None, bytes | None]:
    """The HTTP request of a call in the endpoint's binding: verb, URL, query and body."""
    if endpoint.binding == "JSONRPC":
        body = jsonrpc.jsonrpc_request_body(
            next(_request_ids), operation, endpoint.wire_version, params
        )
        return "POST", endpoint.url, None, json.dumps(body).encode()
    # The 0.3 routes carry their /v1 themselves.
    planned = rest.rest_upstream_request(operation, endpoint.wire_version, params)
    content = json.dumps(planned.body).encode() if planned.body is not None else None
    url = endpoint.url.rstrip("/") + planned.path
    return planned.http_method, url, planned.query or None, content


def retry_after_seconds(value: str) -> float | None:
    """The seconds a Retry-After header asks to wait (delay-seconds or an HTTP date); None
    for no header or one that is neither."""
    value = value.strip()
    if not value:
        return None
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        return None
    return max(0.0, (when - datetime.now(UTC)).total_seconds())


def _parse(endpoint: Endpoint, operation: Operation, response: Answer) -> Any:
    """The canonical result of an agent's answer. An HTTP error without an A2A body (a
    plain-text 404 from a wrong path, a proxy's 502) is the agent's failure, never an A2A
    error of the caller's; so is the agent refusing the relay's own credentials (401, 403),
    which must not reach the caller as if the caller's key were wrong."""
    name = f"agent {endpoint.agent_id!r}"
    status = response.status
    if status >= 400 and "json" not in response.content_type:
        raise UpstreamError(
            "http_status",
            f"{name} answered HTTP {status}",
            status=status,
            retry_after=retry_after_seconds(response.retry_after),
        )
    try:
        if endpoint.binding == "JSONRPC":
            return jsonrpc.parse_jsonrpc_response(
                response.content, operation, endpoint.wire_version
            )
        return rest.parse_rest_response(status, response.content, operation, endpoint.wire_version)
    except InvalidAgentResponse as error:
        if status >= 400:
            raise UpstreamError(
                "http_status", f"{name} answered HTTP {status}", status=status
            ) from error
        raise InvalidAgentResponse(
            f"{name} answered something that is not A2A: {error.message}"
        ) from error
    except A2AError as error:
        if isinstance(error, Unauthenticated) or status in (401, 403):
            raise UpstreamError(
                "http_status",
                f"{name} refused the relay's credentials (HTTP {status}: "
                f"{error.message}); check the agent's credentials in the registry",
                status=status,
            ) from error
        raise


async def _stream(
    endpoint: Endpoint,
    operation: Operation,
    params: Mapping[str, Any],
    *,
    extensions: Iterable[str] = (),
    extra_headers: Mapping[str, str] | None = None,
    timeout: float | None = None,
    session: aiohttp.ClientSession | None = None,
) -> AsyncIterator[dict[str, Any]]:
    """Calls a streaming operation and yields canonical StreamResponse dicts as they arrive,
    through ``session`` (the process's agent session by default).

    Raises like ``call``: before the first event for a refused request, or mid-stream when
    the agent sends an error event or breaks the stream. ``timeout`` bounds the wait for the
    agent to start answering (its response headers); once it streams, it may stay quiet.
    """
    if endpoint.binding == "GRPC":
        try:
            async for answer in grpc_upstream.stream(
                endpoint,
                operation,
                params,
                extensions=extensions,
                extra_headers=extra_headers,
                timeout=timeout,
            ):
                yield answer
        except outbound.UnsafeURLError as error:
            raise classify(error, endpoint.agent_id) from error
        return
    headers = _headers(endpoint, extensions, extra_headers)
    headers["Accept"] = "text/event-stream"
    method, url, query, content = _request(endpoint, operation, params)
    policy = outbound.OutboundPolicy.from_settings()
    session = session or await shared_session(policy)
    try:
        outbound.check_url_shape(url)
        async with contextlib.AsyncExitStack() as stack:
            try:
                async with asyncio.timeout(timeout):
                    response = await stack.enter_async_context(
                        session.request(
                            method,
                            url,
                            params=query,
                            data=content,
                            headers=headers,
                            max_redirects=outbound.agent_max_redirects(policy),
                            timeout=outbound.agent_timeout(policy.timeout, stream=True),
                        )
                    )
            except TimeoutError as error:
                raise UpstreamError(
                    "timeout", f"agent {endpoint.agent_id!r} did not answer in time"
                ) from error
            content_type = response.headers.get("Content-Type", "")
            if "text/event-stream" not in content_type:
                answer = Answer(
                    response.status,
                    content_type,
                    await response.read(),
                    response.headers.get("Retry-After", ""),
                )
                yield _single_answer(endpoint, operation, answer)
                return
            events, last = server_sent_events(response.content), False
            try:
                async for name, data in events:
                    if not data:
                        continue
                    answer = _stream_event(endpoint, operation, name, data)
                    last = ends_stream(answer)
                    yield answer
            finally:
                if last:
                    # The caller stops at the last event; reading the little that is left
                    # keeps the connection for the next call instead of closing it.
                    with contextlib.suppress(Exception):
                        async with asyncio.timeout(DRAIN_SECONDS):
                            async for _ in events:
                                pass
    except (aiohttp.ClientError, outbound.UnsafeURLError) as error:
        # The SSRF guard refuses in the connection layer, outside aiohttp's own errors.
        raise classify(error, endpoint.agent_id) from error
    except UnicodeDecodeError as error:
        raise UpstreamError(
            "protocol", f"agent {endpoint.agent_id!r} sent a stream that is not UTF-8"
        ) from error


async def server_sent_events(body: aiohttp.StreamReader) -> AsyncIterator[tuple[str, str]]:
    """The ``(event, data)`` of each event of a ``text/event-stream`` body, as the HTML
    standard's event stream interpretation dispatches them (``event`` is ``message`` unless
    named; ``id`` and ``retry`` are not used by the relay). httpx-sse does this for httpx
    only, and aiohttp has no client of its own."""
    name, data = "", []
    async for line in _lines(body):
        if not line:
            if data:
                yield name or "message", "\n".join(data)
            name, data = "", []
        elif not line.startswith(":"):
            field, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            if field == "data":
                data.append(value)
            elif field == "event":
                name = value


async def _lines(body: aiohttp.StreamReader) -> AsyncIterator[str]:
    """The lines of an event stream as they arrive: each ends at CRLF, LF or CR (a CRLF split
    between two chunks still ends one line)."""
    pending, after_cr = b"", False
    async for chunk in body.iter_any():
        if after_cr and chunk.startswith(b"\n"):
            chunk = chunk[1:]
        after_cr = chunk.endswith(b"\r")
        lines = (pending + chunk).splitlines(keepends=True)
        pending = lines.pop() if lines and not lines[-1].endswith((b"\n", b"\r")) else b""
        for line in lines:
            yield line.rstrip(b"\r\n").decode()
    if pending:
        yield pending.decode()


def ends_stream(answer: Mapping[str, Any]) -> bool:
    """Whether a StreamResponse is the last one a stream sends: a message, or a task or status
    update whose state is final or waits on the client."""
    if "message" in answer:
        return True
    body = answer.get("task") or answer.get("statusUpdate")
    if not isinstance(body, Mapping):
        return False
    status = body.get("status")
    name = status.get("state") if isinstance(status, Mapping) else None
    try:
        state = lifecycle.from_wire(name) if isinstance(name, str) else None
    except ValueError:
        return False
    return state in lifecycle.TERMINAL or state in lifecycle.INTERRUPTED


def _single_answer(endpoint: Endpoint, operation: Operation, answer: Answer) -> dict[str, Any]:
    """An agent that answered a stream request with a plain JSON response: either an error
    (raised) or a single result, wrapped as the only stream event."""
    result = _parse(endpoint, operation, answer)
    if (
        isinstance(result, dict)
        and len(result) == 1
        and next(iter(result)) in ("task", "message", "statusUpdate", "artifactUpdate")
    ):
        return result
    raise InvalidAgentResponse(f"agent {endpoint.agent_id!r} did not stream")


def _stream_event(endpoint: Endpoint, operation: Operation, name: str, data: str) -> dict[str, Any]:
    try:
        if endpoint.binding == "JSONRPC":
            event = jsonrpc.parse_jsonrpc_response(data, operation, endpoint.wire_version)
        else:
            payload = json.loads(data)
            if name == "error" or (isinstance(payload, dict) and "error" in payload):
                raise error_from_rest(500, payload)
            if endpoint.wire_version != "1.0":
                return stream_response_to_v1(payload, Dialect.V03_REST)
            event = payload
        return with_artifact_flags(event) if endpoint.wire_version == "1.0" else event
    except (ValueError, TypeError) as error:
        raise InvalidAgentResponse(
            f"agent {endpoint.agent_id!r} sent a stream event that is not A2A"
        ) from error
    except A2AError:
        raise
