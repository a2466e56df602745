"""Fixtures of the gateway tests: the echo agent on 127.0.0.1, and for the live-relay tests a
relay of real processes per test module.

A module may set ``RELAY_ENV = {...}`` for extra environment of its relay processes (e.g. a
small RELAY_UPSTREAM_TIMEOUT), and registers the agents it needs with ``relay.serve_agent``.
A value of ``tests.live.FREE_PORT`` becomes a port that is free when the relay starts; tests
read it from ``relay.env``. ``RELAY_SERVER = "uvicorn"`` serves the module's relay with uvicorn
instead of daphne.
"""

from __future__ import annotations

import pytest

from tests.live import FREE_PORT, free_port, live_relay


@pytest.fixture(scope="module")
def relay(request, tmp_path_factory, relay_template):
    """A live relay (its database and keys copied from the run's template, daphne) for the
    whole test module."""
    env = {
        name: str(free_port()) if value == FREE_PORT else value
        for name, value in getattr(request.module, "RELAY_ENV", {}).items()
    }
    server = getattr(request.module, "RELAY_SERVER", "daphne")
    with live_relay(
        tmp_path_factory.mktemp("relay"), template=relay_template, server=server, **env
    ) as live:
        yield live


@pytest.fixture(scope="module")
def echo_url():
    """The demo echo agent (a2a-sdk, 1.0 and 0.3) on 127.0.0.1, for the whole test module."""
    from routing.demo.agents import ECHO, build_agent_app
    from tests.servers import running

    with running(lambda url: build_agent_app(ECHO, base_url=url)) as url:
        yield url


@pytest.fixture
def echo(echo_url, transactional_db):
    """The echo agent registered at the relay; its id."""
    from tests.tasks_app.a2a_http import register

    return register(echo_url)
