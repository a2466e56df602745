"""Fixtures of the interop tests: a live relay per module and the @a2a-js/sdk agent. Every test
here needs node and the npm modules of tests/js (``bash scripts/ensure-js``); without them the
whole directory is skipped, with the reason."""

from __future__ import annotations

import pytest

from tests.jsinterop import js_agent, js_missing
from tests.live import live_relay

MISSING = js_missing()


def pytest_collection_modifyitems(config, items):
    if MISSING is None:
        return
    skip = pytest.mark.skip(reason=f"JavaScript interop: {MISSING}")
    for item in items:
        if "tests/interop/" in item.nodeid:
            item.add_marker(skip)


@pytest.fixture(scope="module")
def relay(tmp_path_factory, relay_template):
    """A live relay (daphne, its own copy of the run's template database) for the whole
    module."""
    with live_relay(tmp_path_factory.mktemp("interop-relay"), template=relay_template) as live:
        yield live


@pytest.fixture(scope="module")
def js():
    """The @a2a-js/sdk agent of tests/js/agent.js (1.0 and 0.3), for the whole module."""
    with js_agent() as agent:
        yield agent
