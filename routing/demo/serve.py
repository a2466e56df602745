"""Run ASGI apps with uvicorn in background threads: for tests and for the demo agents.

`serve(app)` binds a socket first and only then builds the app, so an app factory can put
the real URL (with its ephemeral port) in its agent card:

    with serve(lambda url: build_agent_app(ECHO, base_url=url)) as server:
        httpx.get(f"{server.url}/.well-known/agent-card.json")

No Django here. uvicorn is a development dependency, imported when a server starts.
"""

from __future__ import annotations

import inspect
import socket
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

ASGIApp = Callable[..., Any]
"""An ASGI application: `async app(scope, receive, send)`."""

AppFactory = Callable[[str], ASGIApp]
"""A function that takes the server's base URL ("http://127.0.0.1:54321") and returns an app."""

STARTUP_TIMEOUT = 10.0
"""Seconds `serve` waits for uvicorn to listen before giving up."""

SHUTDOWN_TIMEOUT = 5.0
"""Seconds `RunningServer.stop` waits for the server thread before forcing the exit."""

GRACEFUL_SHUTDOWN = 1.0
"""Seconds open connections (such as never-ending SSE streams) get before they are cut."""


def is_app_factory(app: ASGIApp | AppFactory) -> bool:
    """True for a callable with exactly one positional parameter (the base URL).

    An ASGI app takes three (scope, receive, send), so the two cannot be confused.
    """
    try:
        parameters = inspect.signature(app).parameters.values()
    except (TypeError, ValueError):
        return False
    positional = [
        p
        for p in parameters
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty
    ]
    return len(positional) == 1


@dataclass
class RunningServer:
    """A uvicorn server running in a daemon thread. Stop it with `stop()` or a `with` block."""

    url: str
    app: ASGIApp
    _server: Any = field(repr=False)
    _thread: threading.Thread = field(repr=False)

    @property
    def port(self) -> int:
        return int(self.url.rsplit(":", 1)[1])

    @property
    def running(self) -> bool:
        """Whether the server thread still serves (False once stopped)."""
        return self._thread.is_alive()

    def stop(self) -> None:
        """Stops the server; returns within about `SHUTDOWN_TIMEOUT` seconds. Idempotent."""
        self._server.should_exit = True
        self._thread.join(SHUTDOWN_TIMEOUT)
        if self._thread.is_alive():
            self._server.force_exit = True
            self._thread.join(SHUTDOWN_TIMEOUT)

    def __enter__(self) -> RunningServer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


def serve(app: ASGIApp | AppFactory, host: str = "127.0.0.1", port: int = 0) -> RunningServer:
    """Serves `app` on host:port (port 0 picks a free one) and returns once it accepts connections.

    `app` is an ASGI app, or an `AppFactory` that is called with the base URL before serving.
    Raises RuntimeError when the server does not start within `STARTUP_TIMEOUT` seconds.
    """
    import uvicorn  # a development dependency: imported only when a server starts

    # IPPROTO_TCP, not 0: asyncio turns Nagle off only for sockets that say TCP, and with
    # Nagle on every keep-alive response waits ~40 ms for the client's delayed ACK.
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError:
        sock.close()
        raise
    bound_port = sock.getsockname()[1]
    url = f"http://{f'[{host}]' if ':' in host else host}:{bound_port}"
    if is_app_factory(app):
        try:
            app = app(url)
        except BaseException:
            sock.close()
            raise

    config = uvicorn.Config(
        app,
        log_level="warning",
        lifespan="auto",
        timeout_graceful_shutdown=GRACEFUL_SHUTDOWN,
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(
        target=server.run, kwargs={"sockets": [sock]}, name=f"uvicorn-{bound_port}", daemon=True
    )
    thread.start()

    deadline = time.monotonic() + STARTUP_TIMEOUT
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            server.should_exit = True
            thread.join(SHUTDOWN_TIMEOUT)
            sock.close()
            raise RuntimeError(f"server for {url} did not start")
        time.sleep(0.01)
    return RunningServer(url=url, app=app, _server=server, _thread=thread)


@dataclass
class ServerGroup:
    """Several running servers by name; `group["echo"].url`, `group.urls`, `with group: ...`."""

    servers: dict[str, RunningServer]

    def __getitem__(self, name: str) -> RunningServer:
        return self.servers[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self.servers)

    @property
    def urls(self) -> dict[str, str]:
        return {name: server.url for name, server in self.servers.items()}

    def stop(self) -> None:
        for server in self.servers.values():
            server.stop()

    def __enter__(self) -> ServerGroup:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


def serve_many(
    apps: Mapping[str, ASGIApp | AppFactory], host: str = "127.0.0.1", first_port: int = 0
) -> ServerGroup:
    """Serves each app on its own port: consecutive ports from `first_port`, or free ones for 0.

    If one fails to start, the ones already running are stopped and the error is raised.
    """
    servers: dict[str, RunningServer] = {}
    try:
        for offset, (name, app) in enumerate(apps.items()):
            servers[name] = serve(app, host=host, port=first_port + offset if first_port else 0)
    except BaseException:
        ServerGroup(servers).stop()
        raise
    return ServerGroup(servers)
