"""The one outbound HTTP module: every request the relay makes goes through a client built here.

It owns timeouts (each read, and a total deadline for a whole fetch), redirect and size limits,
the default headers, and the SSRF guard. The guard sits in the connection layer: the socket
connects only to an address that was checked (for httpx clients an httpcore network backend
resolves the host once and checks every address; for the agent session, its socket factory
checks the address each socket is about to connect to). So redirects are re-checked on every
hop, and DNS rebinding between a check and the connect cannot happen. Loopback, private, link-local, shared, reserved and metadata addresses are
refused unless ``RELAY_ALLOW_PRIVATE_URLS`` is on.

Two HTTP clients, each where it serves best:

- ``agent_session``, on aiohttp: the A2A calls to agents (``tasks_app.upstream``), the one
  request on the path of every relayed call. aiohttp parses HTTP in C: measured side by side
  against the same agent, a call costs it 160-210 µs of CPU where httpx spends 630-900 µs,
  which was a third of a relay process's CPU per relayed call.
- httpx (``client``, ``async_client``) for everything else: cards, catalogs, webhooks, health
  probes, where a call's CPU does not count and ``httpx.MockTransport`` serves tests.

Services take the client as an argument (``client=None`` means "build the default one"), so
tests can hand in an ``httpx.MockTransport``.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
import ssl
import time
from collections.abc import AsyncIterator, Iterable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from functools import cache
from urllib.parse import urljoin, urlsplit

import aiohttp
import httpcore
import httpx

USER_AGENT = "BrassRelay/0.1 (+https://github.com/brass-relay)"

# Addresses the relay must never reach on behalf of a caller, beyond what ``is_global`` catches.
_METADATA_ADDRESSES = {
    ipaddress.ip_address("169.254.169.254"),
    ipaddress.ip_address("fd00:ec2::254"),
    ipaddress.ip_address("100.100.100.200"),
}


class UnsafeURLError(Exception):
    """The URL is not one the relay may fetch: wrong scheme, no host, or a non-public address."""


class ResponseTooLargeError(Exception):
    """The response body was larger than the limit the caller set."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"response is larger than {limit} bytes")
        self.limit = limit


@dataclass(frozen=True)
class OutboundPolicy:
    allow_private: bool = False
    timeout: float = 10.0
    max_redirects: int = 3
    deadline: float = 30.0

    @classmethod
    def from_settings(cls) -> OutboundPolicy:
        from django.conf import settings

        return cls(
            allow_private=settings.RELAY_ALLOW_PRIVATE_URLS,
            timeout=settings.RELAY_FETCH_TIMEOUT,
            max_redirects=settings.RELAY_MAX_REDIRECTS,
            deadline=settings.RELAY_FETCH_DEADLINE,
        )


def _embedded_ipv4(ip: ipaddress.IPv6Address) -> list[ipaddress.IPv4Address]:
    """The IPv4 addresses a 6to4 or Teredo address carries: the relay's traffic to it can end
    up there. (NAT64 ``64:ff9b::/96`` and IPv4-compatible ``::/96`` lie in ``::/8``, which is
    reserved and so refused whole; IPv4-mapped addresses are judged as IPv4.)"""
    return [address for address in (ip.sixtofour, *(ip.teredo or ())) if address is not None]


def is_public_address(address: str) -> bool:
    """Whether an IP address is a public unicast destination. An IPv6 address that embeds an
    IPv4 one (``2002:7f00:1::`` is 127.0.0.1 over 6to4) is public only if that one is too;
    IPv4-mapped addresses are judged as their IPv4 address alone."""
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return False
    if ip.version == 6 and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    if ip.version == 6 and not all(_is_public(v4) for v4 in _embedded_ipv4(ip)):
        return False
    return _is_public(ip)


def _is_public(ip: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    return not (
        not ip.is_global
        or ip.is_loopback
        or ip.is_link_local
        or ip.is_multicast
        or ip.is_reserved
        or ip.is_unspecified
        or ip in _METADATA_ADDRESSES
    )


def check_url_shape(url: str) -> str:
    """Checks scheme and host of a URL before any network use; returns the host.

    Raises UnsafeURLError for anything but http(s) URLs with a host and without credentials.
    """
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError for a bad port
    except ValueError as error:
        raise UnsafeURLError(f"not a valid URL: {url!r}") from error
    if "://" not in url:
        raise UnsafeURLError(
            f"{url[:200]!r} has no scheme: write the full URL, e.g. 'https://{url[:200]}' "
            "(or http:// for a plain HTTP agent)"
        )
    if parts.scheme not in ("http", "https"):
        raise UnsafeURLError(f"only http and https URLs can be fetched, not {parts.scheme!r}")
    if not parts.hostname:
        raise UnsafeURLError("the URL has no host")
    if parts.username or parts.password:
        raise UnsafeURLError("credentials inside the URL are not accepted")
    return parts.hostname


ALLOW_PRIVATE_HINT = (
    " (set RELAY_ALLOW_PRIVATE_URLS=true to let it, e.g. for agents on this machine)"
)
"""Ends every refusal of a non-public address, so whoever meets it learns the way out."""


def check_literal_address(url: str, policy: OutboundPolicy | None = None) -> None:
    """Refuses, with no DNS lookup, a URL whose host is a non-public IP literal or
    ``localhost``, unless private URLs are allowed: for URLs stored now and fetched later
    (webhooks), so an obviously private one is refused when it is given. A host name is checked
    when the relay connects, as every URL is. Raises UnsafeURLError."""
    policy = policy or OutboundPolicy.from_settings()
    if policy.allow_private:
        return
    host = check_url_shape(url).lower().rstrip(".")
    if host == "localhost" or host.endswith(".localhost"):
        raise UnsafeURLError(
            f"{host} is a loopback name; the relay does not call loopback, "
            f"private, link-local or metadata addresses{ALLOW_PRIVATE_HINT}"
        )
    try:
        ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return
    if not is_public_address(host):
        raise UnsafeURLError(
            f"{host} is a non-public address; the relay does not call "
            f"loopback, private, link-local or metadata addresses{ALLOW_PRIVATE_HINT}"
        )


def _refusal(address: str, host: str = "") -> str:
    """Why a connection to ``address`` (resolved from ``host``, when named) is refused."""
    where = f"{host} resolves to a non-public address" if host else "a non-public address"
    return (
        f"{where} ({address}); the relay does not fetch loopback, private, link-local or "
        f"metadata addresses{ALLOW_PRIVATE_HINT}"
    )


def _checked_addresses(host: str, infos: Iterable[tuple]) -> list[str]:
    addresses = [str(info[4][0]) for info in infos]
    if not addresses:
        raise httpcore.ConnectError(f"{host} did not resolve to any address")
    refused = [address for address in addresses if not is_public_address(address)]
    if refused:
        raise UnsafeURLError(_refusal(refused[0], host))
    return addresses


# --- the total deadline ----------------------------------------------------------------------
# httpx bounds each read, not a whole fetch: a server sending a byte a second keeps every read
# short and the fetch going for ever. The client sets the fetch's deadline in this context
# variable for the time of ``send`` and of each read of a streamed body; the network streams
# below cut every connect, read and write to what is left of it.
_deadline: ContextVar[tuple[float, float] | None] = ContextVar("outbound_deadline", default=None)


def _within_deadline(timeout: float | None, exceeded: type[Exception]) -> float | None:
    """``timeout`` cut to what is left of the current fetch's deadline; raises ``exceeded``
    (an httpcore timeout, which httpx turns into its own) once nothing is left."""
    current = _deadline.get()
    if current is None:
        return timeout
    ends_at, seconds = current
    left = ends_at - time.monotonic()
    if left <= 0:
        raise exceeded(f"the fetch did not finish within its deadline of {seconds:g} s")
    return left if timeout is None else min(timeout, left)


class _DeadlineStream(httpcore.NetworkStream):
    def __init__(self, inner: httpcore.NetworkStream) -> None:
        self._inner = inner

    def read(self, max_bytes, timeout=None):
        return self._inner.read(max_bytes, _within_deadline(timeout, httpcore.ReadTimeout))

    def write(self, buffer, timeout=None):
        self._inner.write(buffer, _within_deadline(timeout, httpcore.WriteTimeout))

    def close(self):
        self._inner.close()

    def start_tls(self, ssl_context, server_hostname=None, timeout=None):
        timeout = _within_deadline(timeout, httpcore.ConnectTimeout)
        return _DeadlineStream(self._inner.start_tls(ssl_context, server_hostname, timeout))

    def get_extra_info(self, info):
        return self._inner.get_extra_info(info)


class _AsyncDeadlineStream(httpcore.AsyncNetworkStream):
    def __init__(self, inner: httpcore.AsyncNetworkStream) -> None:
        self._inner = inner

    async def read(self, max_bytes, timeout=None):
        return await self._inner.read(max_bytes, _within_deadline(timeout, httpcore.ReadTimeout))

    async def write(self, buffer, timeout=None):
        await self._inner.write(buffer, _within_deadline(timeout, httpcore.WriteTimeout))

    async def aclose(self):
        await self._inner.aclose()

    async def start_tls(self, ssl_context, server_hostname=None, timeout=None):
        timeout = _within_deadline(timeout, httpcore.ConnectTimeout)
        return _AsyncDeadlineStream(
            await self._inner.start_tls(ssl_context, server_hostname, timeout)
        )

    def get_extra_info(self, info):
        return self._inner.get_extra_info(info)


class _DeadlineBody(httpx.SyncByteStream):
    """A streamed body read under its fetch's deadline."""

    def __init__(self, inner: httpx.SyncByteStream, deadline: tuple[float, float]) -> None:
        self._inner, self._deadline = inner, deadline

    def __iter__(self) -> Iterator[bytes]:
        chunks = iter(self._inner)
        while True:
            token = _deadline.set(self._deadline)
            try:
                chunk = next(chunks, None)
            finally:
                _deadline.reset(token)
            if chunk is None:
                return
            yield chunk

    def close(self) -> None:
        self._inner.close()


class _AsyncDeadlineBody(httpx.AsyncByteStream):
    """A streamed body read under its fetch's deadline (async clients)."""

    def __init__(self, inner: httpx.AsyncByteStream, deadline: tuple[float, float]) -> None:
        self._inner, self._deadline = inner, deadline

    async def __aiter__(self) -> AsyncIterator[bytes]:
        chunks = aiter(self._inner)
        while True:
            token = _deadline.set(self._deadline)
            try:
                chunk = await anext(chunks, None)
            finally:
                _deadline.reset(token)
            if chunk is None:
                return
            yield chunk

    async def aclose(self) -> None:
        await self._inner.aclose()


class _Client(httpx.Client):
    """httpx's client with a total deadline on each fetch, redirects and body included."""

    def __init__(self, *, deadline: float, **kwargs) -> None:
        super().__init__(**kwargs)
        self._deadline_seconds = deadline

    def send(self, request, **kwargs):
        deadline = (time.monotonic() + self._deadline_seconds, self._deadline_seconds)
        token = _deadline.set(deadline)
        try:
            response = super().send(request, **kwargs)
        finally:
            _deadline.reset(token)
        if not response.is_stream_consumed:
            response.stream = _DeadlineBody(response.stream, deadline)
        return response


class _AsyncClient(httpx.AsyncClient):
    """httpx's async client with a total deadline on each fetch, redirects and body included."""

    def __init__(self, *, deadline: float, **kwargs) -> None:
        super().__init__(**kwargs)
        self._deadline_seconds = deadline

    async def send(self, request, **kwargs):
        deadline = (time.monotonic() + self._deadline_seconds, self._deadline_seconds)
        token = _deadline.set(deadline)
        try:
            response = await super().send(request, **kwargs)
        finally:
            _deadline.reset(token)
        if not response.is_stream_consumed:
            response.stream = _AsyncDeadlineBody(response.stream, deadline)
        return response


# --- the connection layer: the guard and the deadline -----------------------------------------


class _GuardedBackend(httpcore.NetworkBackend):
    """Resolves, checks (when ``guard``), then connects to the checked address (sync clients);
    its streams keep the fetch's deadline."""

    def __init__(self, *, guard: bool = True) -> None:
        self._inner = httpcore.SyncBackend()
        self._guard = guard

    def connect_tcp(self, host, port, timeout=None, local_address=None, socket_options=None):
        timeout = _within_deadline(timeout, httpcore.ConnectTimeout)
        if self._guard:
            try:
                infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
            except socket.gaierror as error:
                raise httpcore.ConnectError(f"cannot resolve {host}: {error}") from error
            host = _checked_addresses(host, infos)[0]
        stream = self._inner.connect_tcp(
            host, port, timeout=timeout, local_address=local_address, socket_options=socket_options
        )
        return _DeadlineStream(stream)

    def connect_unix_socket(self, *args, **kwargs):
        raise UnsafeURLError("unix sockets are not reachable through the relay")

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)


class _AsyncGuardedBackend(httpcore.AsyncNetworkBackend):
    """Resolves, checks (when ``guard``), then connects to the checked address (async
    clients); its streams keep the fetch's deadline."""

    def __init__(self, *, guard: bool = True) -> None:
        self._inner = httpcore.AnyIOBackend()
        self._guard = guard

    async def connect_tcp(self, host, port, timeout=None, local_address=None, socket_options=None):
        timeout = _within_deadline(timeout, httpcore.ConnectTimeout)
        if self._guard:
            loop = asyncio.get_running_loop()
            try:
                infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
            except socket.gaierror as error:
                raise httpcore.ConnectError(f"cannot resolve {host}: {error}") from error
            host = _checked_addresses(host, infos)[0]
        stream = await self._inner.connect_tcp(
            host, port, timeout=timeout, local_address=local_address, socket_options=socket_options
        )
        return _AsyncDeadlineStream(stream)

    async def connect_unix_socket(self, *args, **kwargs):
        raise UnsafeURLError("unix sockets are not reachable through the relay")

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


def _check_request(request: httpx.Request) -> None:
    check_url_shape(str(request.url))


async def _check_request_async(request: httpx.Request) -> None:
    check_url_shape(str(request.url))


def _transport(policy: OutboundPolicy, *, asynchronous: bool, **kwargs):
    cls = httpx.AsyncHTTPTransport if asynchronous else httpx.HTTPTransport
    transport = cls(trust_env=False, **kwargs)
    # httpx builds its pool without a way to pass a network backend; swapping the backend
    # keeps every other pool setting httpx chose.
    guard = not policy.allow_private
    transport._pool._network_backend = (
        _AsyncGuardedBackend(guard=guard) if asynchronous else _GuardedBackend(guard=guard)
    )
    return transport


def client(policy: OutboundPolicy | None = None, **kwargs) -> httpx.Client:
    """A sync client with the relay's limits (each read within ``policy.timeout``, the whole
    fetch within ``policy.deadline``) and, unless private URLs are allowed, the guard."""
    policy = policy or OutboundPolicy.from_settings()
    transport = kwargs.pop("transport", None) or _transport(policy, asynchronous=False)
    return _Client(
        deadline=policy.deadline,
        transport=transport,
        timeout=policy.timeout,
        follow_redirects=True,
        max_redirects=policy.max_redirects,
        headers={"User-Agent": USER_AGENT},
        event_hooks={"request": [_check_request]},
        trust_env=False,
        **kwargs,
    )


KEEPALIVE_EXPIRY_SECONDS = 2.0


def async_client(policy: OutboundPolicy | None = None, **kwargs) -> httpx.AsyncClient:
    """``client``, asynchronous."""
    policy = policy or OutboundPolicy.from_settings()
    # Idle connections are dropped after KEEPALIVE_EXPIRY_SECONDS: agents' servers close theirs
    # after about 5 s (uvicorn's and Node's default), and a request sent on a connection the
    # agent is closing at that moment fails with a read error.
    limits = kwargs.pop(
        "limits",
        httpx.Limits(
            max_connections=200,
            max_keepalive_connections=50,
            keepalive_expiry=KEEPALIVE_EXPIRY_SECONDS,
        ),
    )
    # ``verify``: an ssl.SSLContext to share between many clients (building one is slow).
    verify = kwargs.pop("verify", True)
    transport = kwargs.pop("transport", None) or _transport(
        policy, asynchronous=True, limits=limits, verify=verify
    )
    return _AsyncClient(
        deadline=policy.deadline,
        transport=transport,
        timeout=policy.timeout,
        follow_redirects=True,
        max_redirects=policy.max_redirects,
        headers={"User-Agent": USER_AGENT},
        event_hooks={"request": [_check_request_async]},
        trust_env=False,
        **kwargs,
    )


def read_limited(response: httpx.Response, limit: int) -> bytes:
    """Reads a streamed response body, stopping with ResponseTooLargeError past ``limit`` bytes."""
    declared = response.headers.get("content-length")
    if declared and declared.isdigit() and int(declared) > limit:
        raise ResponseTooLargeError(limit)
    body = bytearray()
    for chunk in response.iter_bytes():
        body.extend(chunk)
        if len(body) > limit:
            raise ResponseTooLargeError(limit)
    return bytes(body)


async def aread_limited(response: httpx.Response, limit: int) -> bytes:
    """``read_limited`` for a streamed response of an async client."""
    declared = response.headers.get("content-length")
    if declared and declared.isdigit() and int(declared) > limit:
        raise ResponseTooLargeError(limit)
    body = bytearray()
    async for chunk in response.aiter_bytes():
        body.extend(chunk)
        if len(body) > limit:
            raise ResponseTooLargeError(limit)
    return bytes(body)


# --- the agent session (aiohttp) ------------------------------------------------------------


def _guarded_socket(addr_info: tuple) -> socket.socket:
    """The agent session's socket factory: the socket for an address the connector is about
    to connect to, once that address is checked (the host's resolved addresses and IP
    literals alike, redirects included)."""
    family, kind, proto, _, address = addr_info
    if not is_public_address(str(address[0])):
        raise UnsafeURLError(_refusal(str(address[0])))
    return socket.socket(family, kind, proto)


_REDIRECTS = frozenset({301, 302, 303, 307, 308})


async def _redirects_checked(
    request: aiohttp.ClientRequest, send: aiohttp.ClientHandlerType
) -> aiohttp.ClientResponse:
    """The agent session's middleware: holds a redirect to the rule of every URL the relay
    calls (``check_url_shape``) before aiohttp follows it: http or https, a host, no
    credentials (aiohttp itself would send those on as Basic auth). A middleware rather than
    aiohttp's tracing, whose hooks cost every call 20-30 µs of Python with no redirect."""
    response = await send(request)
    if response.status in _REDIRECTS:
        try:
            check_url_shape(urljoin(str(request.url), response.headers.get("Location", "")))
        except UnsafeURLError:
            response.close()
            raise
    return response


@cache
def _tls_context() -> ssl.SSLContext:
    """The certificates httpx trusts, so a call and a probe of the same agent agree."""
    return httpx.create_ssl_context()


def agent_timeout(seconds: float, *, stream: bool = False) -> aiohttp.ClientTimeout:
    """httpx's meaning of a timeout: so long to get a connection, and so long for each read
    (an answer may take longer in all, as long as bytes keep coming). A ``stream``'s reads
    have no limit here: its quiet spells are the caller's to bound."""
    return aiohttp.ClientTimeout(total=None, connect=seconds, sock_read=None if stream else seconds)


def agent_max_redirects(policy: OutboundPolicy) -> int:
    """aiohttp's ``max_redirects`` for the policy's: aiohttp counts the first response too."""
    return policy.max_redirects + 1


def agent_session(policy: OutboundPolicy | None = None) -> aiohttp.ClientSession:
    """A session for A2A calls to agents, with the relay's limits, the User-Agent, no cookies,
    and, unless private URLs are allowed, the guard. aiohttp follows redirects (pass
    ``max_redirects=agent_max_redirects(policy)`` with each request); each is checked like
    the first URL."""
    policy = policy or OutboundPolicy.from_settings()
    connector = aiohttp.TCPConnector(
        limit=200,
        keepalive_timeout=KEEPALIVE_EXPIRY_SECONDS,
        ssl=_tls_context(),
        socket_factory=None if policy.allow_private else _guarded_socket,
    )
    return aiohttp.ClientSession(
        connector=connector,
        headers={"User-Agent": USER_AGENT},
        cookie_jar=aiohttp.DummyCookieJar(),
        timeout=agent_timeout(policy.timeout),
        middlewares=(_redirects_checked,),
        trust_env=False,
    )
