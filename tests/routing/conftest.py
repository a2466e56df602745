"""Fixtures of the team and workflow tests (helpers: ``tests/routing/calls.py``)."""

from __future__ import annotations

import pytest

from routing.demo.agents import ECHO, app_factory
from tests.servers import running


@pytest.fixture(scope="module")
def echo_url():
    """The demo echo agent on 127.0.0.1."""
    with running(app_factory(ECHO)) as url:
        yield url
