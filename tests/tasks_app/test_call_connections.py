"""The database connection at a call's first hop: closed when broken or too old, as Django
does at each request, and health-checked only after it has been idle a while."""

from __future__ import annotations

import pytest
from django.db import connection

from tasks_app.api import calls

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def open_connection():
    connection.ensure_connection()
    connection.relay_call_began_at = None
    yield connection
    connection.relay_call_began_at = None


def test_a_connection_that_began_a_call_within_the_second_is_not_pinged_again(open_connection):
    calls._close_old_connections(1000.0)
    assert open_connection.health_check_done is False  # no call seen yet: checked
    calls._close_old_connections(1000.0 + calls.HEALTH_CHECK_IDLE_SECONDS / 2)
    assert open_connection.health_check_done is True


def test_a_connection_idle_for_the_second_is_pinged_before_the_next_call(open_connection):
    calls._close_old_connections(1000.0)
    calls._close_old_connections(1000.0 + calls.HEALTH_CHECK_IDLE_SECONDS)
    assert open_connection.health_check_done is False


def test_a_connection_broken_by_an_error_is_still_closed_at_once(open_connection, monkeypatch):
    calls._close_old_connections(1000.0)
    open_connection.errors_occurred = True
    monkeypatch.setattr(open_connection, "is_usable", lambda: False)
    closed = []
    monkeypatch.setattr(open_connection, "close", lambda: closed.append(True))
    calls._close_old_connections(1000.1)
    assert closed == [True]
