"""The outbound client for MCP servers: the official ``mcp`` SDK speaks over ``httpx2``, so
this builds an ``httpx2.AsyncClient`` with the same SSRF guard as ``outbound``'s clients. The
guard sits in the connection layer (an httpcore2 network backend resolves the host once,
checks every address and connects to a checked one), so redirects and DNS rebinding cannot
reach an address the relay must not reach; loopback and private addresses are refused unless
``RELAY_ALLOW_PRIVATE_URLS`` is on.
"""

from __future__ import annotations

import asyncio
import socket

import httpcore2
import httpx2

from relay_project.outbound import (
    USER_AGENT,
    OutboundPolicy,
    UnsafeURLError,
    check_url_shape,
    is_public_address,
)


class _GuardedBackend(httpcore2.AsyncNetworkBackend):
    """Resolves, checks, then connects to the checked address."""

    def __init__(self) -> None:
        self._inner = httpcore2.AnyIOBackend()

    async def connect_tcp(self, host, port, timeout=None, local_address=None, socket_options=None):
        loop = asyncio.get_running_loop()
        try:
            infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except socket.gaierror as error:
            raise httpcore2.ConnectError(f"cannot resolve {host}: {error}") from error
        addresses = [str(info[4][0]) for info in infos]
        if not addresses:
            raise httpcore2.ConnectError(f"{host} did not resolve to any address")
        refused = [address for address in addresses if not is_public_address(address)]
        if refused:
            raise UnsafeURLError(
                f"{host} resolves to {refused[0]}, a private or reserved address the relay "
                "does not reach"
            )
        return await self._inner.connect_tcp(
            addresses[0],
            port,
            timeout=timeout,
            local_address=local_address,
            socket_options=socket_options,
        )

    async def connect_unix_socket(self, *args, **kwargs):
        raise UnsafeURLError("unix sockets are not reachable through the relay")

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


async def _check_request(request: httpx2.Request) -> None:
    check_url_shape(str(request.url))


def mcp_client(
    headers: dict[str, str] | None = None, *, timeout: float | None = None
) -> httpx2.AsyncClient:
    """An httpx2 client for ``mcp.client.streamable_http.streamable_http_client``: the relay's
    User-Agent, ``headers`` (the server's credentials), the fetch timeout (or ``timeout``), and
    the guard unless private URLs are allowed."""
    policy = OutboundPolicy.from_settings()
    transport = httpx2.AsyncHTTPTransport(trust_env=False)
    if not policy.allow_private:
        transport._pool._network_backend = _GuardedBackend()
    return httpx2.AsyncClient(
        transport=transport,
        timeout=timeout or policy.timeout,
        headers={"User-Agent": USER_AGENT, **(headers or {})},
        event_hooks={"request": [_check_request]},
        trust_env=False,
    )
