"""The PostgreSQL listener that wakes a process's streams for events other processes record.
It listens while a stream is open; between streams it keeps its connection, not listening,
for the next one, and closes it once no stream came for LISTEN_KEEP_SECONDS. Against the
machine's PostgreSQL; skipped, saying why, where it is absent."""

from __future__ import annotations

import asyncio
import uuid

import psycopg
import pytest

from relay_project import database
from tasks_app import streams
from tests.live import POSTGRES_ADMIN_URL, eventually, named_postgres

pytestmark = [pytest.mark.production, pytest.mark.django_db(transaction=True)]

LISTENING = f"LISTEN {streams.NOTIFY_CHANNEL}"
NOT_LISTENING = f"UNLISTEN {streams.NOTIFY_CHANNEL}"


@pytest.fixture
def listener_name(monkeypatch) -> str:
    """This test's listener, by its application name, on the machine's PostgreSQL."""
    name, conninfo = named_postgres("listener-test")
    monkeypatch.setattr(streams, "_listens", lambda: True)
    monkeypatch.setattr(database, "postgresql_conninfo", lambda application_name: conninfo)
    monkeypatch.setattr(streams, "LISTEN_KEEP_SECONDS", 1.5)
    return name


async def listener_sessions(name: str) -> list[tuple[int, str]]:
    """(backend pid, last statement) of each connection the listener has open."""
    async with await psycopg.AsyncConnection.connect(POSTGRES_ADMIN_URL) as admin:
        rows = await admin.execute(
            "SELECT pid, query FROM pg_stat_activity WHERE application_name = %s", (name,)
        )
        return await rows.fetchall()


async def last_statement_is(name: str, statement: str) -> int | None:
    sessions = await listener_sessions(name)
    if len(sessions) == 1 and sessions[0][1] == statement:
        return sessions[0][0]
    return None


async def notify_from_elsewhere(task_id: str, sequence: int) -> None:
    async with await psycopg.AsyncConnection.connect(POSTGRES_ADMIN_URL, autocommit=True) as other:
        payload = f"{task_id} {sequence} working another-process"
        await other.execute("SELECT pg_notify(%s, %s)", (streams.NOTIFY_CHANNEL, payload))


async def event_another_process_records(name: str) -> int:
    """Opens a stream, has another process announce an event, and returns the listener's
    backend once the stream has read the event that woke it."""
    task_id = str(uuid.uuid4())

    async def stored(after: int):
        return [(1, {"statusUpdate": {"taskId": task_id}}, True)] if after < 1 else []

    async with streams.subscription(task_id, read=stored) as subscription:
        backend = await eventually(
            lambda: last_statement_is(name, LISTENING), "the listener listening", timeout=10
        )
        await notify_from_elsewhere(task_id, 1)
        events = subscription.events(after=0, keepalive=5.0)
        event, final = await asyncio.wait_for(anext(events), 5.0)
        await events.aclose()
    assert event == {"statusUpdate": {"taskId": task_id}} and final
    return backend


async def test_the_next_stream_is_woken_over_the_same_connection(listener_name):
    first = await event_another_process_records(listener_name)
    # With no stream open, the connection stops listening but stays.
    assert (
        await eventually(
            lambda: last_statement_is(listener_name, NOT_LISTENING), "the listener idle", timeout=5
        )
        == first
    )
    second = await event_another_process_records(listener_name)
    assert second == first


async def test_the_connection_closes_once_no_stream_came_for_the_keep_time(listener_name):
    await event_another_process_records(listener_name)

    async def closed():
        return not await listener_sessions(listener_name)

    started = asyncio.get_running_loop().time()
    await eventually(closed, "the listener's connection closed", timeout=10)
    # Not before the keep time: it waited for a next stream that did not come.
    assert asyncio.get_running_loop().time() - started >= streams.LISTEN_KEEP_SECONDS - 0.2
