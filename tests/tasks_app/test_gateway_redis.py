"""The production profile across processes: two daphnes on one PostgreSQL database and one
Redis. A stream opened on one relay process follows a task another process drives, through
the Redis channel layer. Skipped, saying why, where PostgreSQL or Redis is absent."""

from __future__ import annotations

import asyncio
from contextlib import ExitStack

import pytest
from a2a.types import (
    GetTaskRequest,
    SubscribeToTaskRequest,
    TaskState,
)

from tests.live import (
    ServiceMissingError,
    eventually,
    gated_production_relay,
    gated_request,
    new_gate,
)

pytestmark = pytest.mark.production
STREAM_SECONDS = 15.0


@pytest.fixture(scope="module")
def relays(tmp_path_factory):
    """(relay A, the base URL of relay B): two daphnes sharing PostgreSQL and Redis."""
    with ExitStack() as stack:
        try:
            relay = stack.enter_context(
                gated_production_relay(tmp_path_factory.mktemp("relay-production"))
            )
        except ServiceMissingError as error:
            pytest.skip(str(error))
        yield relay, stack.enter_context(relay.second())


async def test_a_stream_on_one_relay_follows_a_task_driven_by_another(relays):
    relay, other = relays
    gate_name, gate = new_gate()
    async with relay.client("gated", "JSONRPC", "1.0", base=other, streaming=False) as driver:
        started = [
            event
            async for event in driver.send_message(
                gated_request(gate_name, return_immediately=True)
            )
        ]
        task_id = started[0].task.id

        async def working():
            task = await driver.get_task(GetTaskRequest(id=task_id))
            return task.status.state == TaskState.TASK_STATE_WORKING

        await eventually(working, "the task working on relay B")

        async with relay.client("gated", "HTTP+JSON", "1.0") as follower:
            subscription = follower.subscribe(SubscribeToTaskRequest(id=task_id))
            async with asyncio.timeout(STREAM_SECONDS):
                current = await anext(subscription)
                assert current.task.id == task_id
                assert current.task.status.state == TaskState.TASK_STATE_WORKING
                for chunk in ("across ", "processes"):
                    gate.put(chunk)
                gate.put(None)
                live = [event async for event in subscription]
            # Only relay B talks to the agent: every live event came over Redis.
            chunks = [e.artifact_update for e in live if e.HasField("artifact_update")]
            assert "".join(c.artifact.parts[0].text for c in chunks) == "across processes"
            assert [c.append for c in chunks] == [False, True]
            assert live[-1].status_update.status.state == TaskState.TASK_STATE_COMPLETED

            stored = await follower.get_task(GetTaskRequest(id=task_id))
    assert stored.status.state == TaskState.TASK_STATE_COMPLETED
    assert stored.artifacts[0].parts[0].text + stored.artifacts[0].parts[1].text == (
        "across processes"
    )
