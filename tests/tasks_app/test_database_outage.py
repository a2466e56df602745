"""A task whose exchange cannot be recorded because the database is away: its writes are retried
with backoff and the task ends as the agent ended it; when the database stays away too long the
process gives the task up for takeover, never leaving it owned by a process that stopped."""

from __future__ import annotations

import asyncio

import pytest
from django.db import OperationalError

from relay_project.database import database_sync_to_async
from tasks_app import services
from tasks_app.gateway import ownership
from tasks_app.models import Task
from tests.tasks_app.a2a_http import JSONRPC_1, call, relay_client

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("allow_private_urls"),
]


@pytest.fixture
def writes_fail(monkeypatch):
    """The next ``count`` event writes fail as a restarting PostgreSQL fails them."""
    state = {"left": 0, "failed": 0}
    record = services.task_record_many

    def failing(**arguments):
        if state["left"]:
            state["left"] -= 1
            state["failed"] += 1
            raise OperationalError("terminating connection due to administrator command")
        return record(**arguments)

    monkeypatch.setattr(services, "task_record_many", failing)
    return state


async def test_an_event_write_the_database_refused_is_retried_and_the_task_ends_completed(
    echo, api_key, writes_fail
):
    writes_fail["left"] = 2
    async with relay_client() as client:
        response = await call(client, echo, JSONRPC_1.send(), JSONRPC_1.headers(api_key[1]))
    assert "result" in response.json(), response.text
    assert writes_fail["failed"] == 2
    task = await Task.objects.aget()
    assert task.state == "completed" and task.owner == ""


async def test_a_task_whose_writes_fail_past_the_outage_window_is_given_up_for_takeover(
    echo, api_key, writes_fail, settings
):
    settings.RELAY_DATABASE_OUTAGE_SECONDS = 0.3
    writes_fail["left"] = 10**6
    async with relay_client() as client:
        response = await call(client, echo, JSONRPC_1.send(), JSONRPC_1.headers(api_key[1]))
    error = response.json()["error"]
    assert error["code"] == -31503 and "database is unavailable" in error["message"]
    task = None
    for _ in range(50):
        task = await Task.objects.aget()
        if task.owner == ownership.RELEASED:
            break
        await asyncio.sleep(0.05)
    assert task.state == "submitted" and task.owner == ownership.RELEASED
    # No process holds a lease by that name: the next takeover scan claims it.
    claimed = await database_sync_to_async(ownership.claim_orphans)()
    assert [t.pk for t in claimed] == [task.pk]
