"""Which recorded events wake other relay processes (PostgreSQL NOTIFY): a task's end always;
the events before it only while a stream follows the task from outside its exchange
(SubscribeToTask, possibly through another process). Two daphnes on one PostgreSQL database,
polling for lost wake-ups only once a minute, so a stream that gets an event at once got it
from a NOTIFY; the test listens on the channel itself. Skipped, saying why, where
PostgreSQL or Redis is absent."""

from __future__ import annotations

import asyncio
from contextlib import ExitStack

import psycopg
import pytest
from a2a.types import (
    GetTaskRequest,
    SubscribeToTaskRequest,
    TaskState,
)

from tasks_app.streams import NOTIFY_CHANNEL
from tests.live import (
    ServiceMissingError,
    eventually,
    gated_production_relay,
    gated_request,
    new_gate,
)

pytestmark = pytest.mark.production
EVENT_SECONDS = 5.0
"""At once, next to the poll (a minute): only a NOTIFY wakes a stream this soon."""


@pytest.fixture(scope="module")
def relays(tmp_path_factory):
    """(relay A, the base URL of relay B), polling once a minute."""
    with ExitStack() as stack:
        try:
            relay = stack.enter_context(
                gated_production_relay(
                    tmp_path_factory.mktemp("relay-notify"), RELAY_STREAM_POLL_SECONDS="60"
                )
            )
        except ServiceMissingError as error:
            pytest.skip(str(error))
        yield relay, stack.enter_context(relay.second())


class Notices:
    """The NOTIFY payloads of the relay's task events, heard on a connection of the test's."""

    def __init__(self, database_url: str) -> None:
        self.database_url = database_url
        self.payloads: list[str] = []

    async def __aenter__(self):
        self.connection = await psycopg.AsyncConnection.connect(self.database_url, autocommit=True)
        await self.connection.execute(f"LISTEN {NOTIFY_CHANNEL}")
        self.reader = asyncio.get_running_loop().create_task(self._read())
        return self

    async def _read(self) -> None:
        async for notice in self.connection.notifies():
            self.payloads.append(notice.payload)

    def states(self, task_id: str) -> list[str]:
        """The state each notification of the task announced, in order."""
        return [p.split(" ")[2] for p in self.payloads if p.split(" ")[0] == task_id]

    async def __aexit__(self, *exc) -> None:
        self.reader.cancel()
        await asyncio.gather(self.reader, return_exceptions=True)
        await self.connection.close()


async def remote_streams(database_url: str, task_id: str) -> int:
    async with await psycopg.AsyncConnection.connect(database_url) as connection:
        cursor = await connection.execute(
            "SELECT remote_streams FROM tasks_app_task WHERE id = %s", (task_id,)
        )
        return (await cursor.fetchone())[0]


async def test_a_task_nobody_follows_announces_only_its_end(relays):
    relay, _ = relays
    gate_name, gate = new_gate()
    async with Notices(relay.env["DATABASE_URL"]) as notices:
        async with relay.client("gated", "JSONRPC", "1.0") as client:
            events = client.send_message(gated_request(gate_name))
            first = await anext(events)
            for chunk in ("one ", "two ", "three"):
                gate.put(chunk)
            gate.put(None)
            rest = [event async for event in events]
        task_id = first.task.id
        # The caller's own stream got every event, handed over in the relay process.
        chunks = [
            e.artifact_update.artifact.parts[0].text for e in rest if e.HasField("artifact_update")
        ]
        assert "".join(chunks) == "one two three"
        assert rest[-1].status_update.status.state == TaskState.TASK_STATE_COMPLETED
        await eventually(lambda: notices.states(task_id), "the end announced")
        await asyncio.sleep(0.5)  # any later notification of the task would be here by now
        assert notices.states(task_id) == ["completed"]


async def test_a_stream_through_the_other_relay_is_woken_by_every_event(relays):
    relay, other = relays
    database_url = relay.env["DATABASE_URL"]
    gate_name, gate = new_gate()
    async with Notices(database_url) as notices:
        # Relay B drives the task; the follower subscribes through relay A.
        async with relay.client("gated", "JSONRPC", "1.0", base=other, streaming=False) as driver:
            started = await anext(
                driver.send_message(gated_request(gate_name, return_immediately=True))
            )
            task_id = started.task.id

            async def working():
                task = await driver.get_task(GetTaskRequest(id=task_id))
                return task.status.state == TaskState.TASK_STATE_WORKING

            await eventually(working, "the task working on relay B")

        async with relay.client("gated", "HTTP+JSON", "1.0") as follower:
            subscription = follower.subscribe(SubscribeToTaskRequest(id=task_id))
            current = await asyncio.wait_for(anext(subscription), EVENT_SECONDS)
            assert current.task.status.state == TaskState.TASK_STATE_WORKING
            assert await remote_streams(database_url, task_id) == 1
            for chunk in ("across ", "processes"):
                gate.put(chunk)
                event = await asyncio.wait_for(anext(subscription), EVENT_SECONDS)
                assert event.artifact_update.artifact.parts[0].text == chunk
            gate.put(None)
            last = await asyncio.wait_for(anext(subscription), EVENT_SECONDS)
            assert last.status_update.status.state == TaskState.TASK_STATE_COMPLETED
            with pytest.raises(StopAsyncIteration):
                await anext(subscription)
        assert notices.states(task_id)[-3:] == ["working", "working", "completed"]

    async def counted_out():
        return await remote_streams(database_url, task_id) == 0

    await eventually(counted_out, "the follower counted out")
