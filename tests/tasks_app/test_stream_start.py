"""A stream that begins with its task (a team's) carries every event the target records after it,
however long its client takes to read that first event."""

from __future__ import annotations

import asyncio

import pytest

from tasks_app import gateway, services, streams
from tasks_app.gateway.targets import Step, Target
from tasks_app.lifecycle import TaskState

pytestmark = pytest.mark.django_db(transaction=True)


class Announcing(Target):
    """A target whose stream gives the task first, then works and completes at once."""

    def __init__(self) -> None:
        super().__init__(kind="agent", id="announcing", announces_task=True)

    async def run(self, task, request, ctx, *, stream):
        yield Step(services.status_event(task, TaskState.WORKING, "on it"))
        yield Step(services.status_event(task, TaskState.COMPLETED, "done"))


def request() -> dict:
    return {"message": {"messageId": "m-1", "role": "ROLE_USER", "parts": [{"text": "go"}]}}


async def test_events_recorded_while_the_client_reads_the_task_still_reach_its_stream():
    events = await gateway.stream_message(Announcing(), gateway.CallContext(caller=None), request())
    first = await anext(events)
    # The client is slow to take the task: the target meanwhile records its events.
    await asyncio.sleep(0.3)
    rest = []
    async with asyncio.timeout(10):
        async for item in events:
            if item is not streams.KEEPALIVE:
                rest.append(item)
    assert first["task"]["status"]["state"] == "TASK_STATE_SUBMITTED"
    assert [event["statusUpdate"]["status"]["state"] for event in rest] == [
        "TASK_STATE_WORKING",
        "TASK_STATE_COMPLETED",
    ]
