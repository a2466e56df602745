"""Helpers for tests that need real HTTP servers on 127.0.0.1 (no Django, no pytest plugins).

    with running(echo_agent) as url:            # an app, or a factory `base_url -> app`
        httpx.get(f"{url}/.well-known/agent-card.json")

As a module-scoped fixture:

    @pytest.fixture(scope="module")
    def echo_url():
        with running(echo_agent) as url:
            yield url
"""

from __future__ import annotations

import socket
from collections.abc import Iterator, Mapping
from contextlib import contextmanager

from routing.demo.serve import AppFactory, ASGIApp, serve, serve_many


@contextmanager
def running(app: ASGIApp | AppFactory) -> Iterator[str]:
    """Serves `app` on a free port for the duration of the block; yields its base URL."""
    with serve(app) as server:
        yield server.url


@contextmanager
def running_many(apps: Mapping[str, ASGIApp | AppFactory]) -> Iterator[dict[str, str]]:
    """Serves each app on its own free port; yields {name: base URL}."""
    with serve_many(apps) as group:
        yield group.urls


def closed_port_url(host: str = "127.0.0.1") -> str:
    """A URL on a port nothing listens on (just released by the OS), for connection failures."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        port = sock.getsockname()[1]
    return f"http://{host}:{port}"
