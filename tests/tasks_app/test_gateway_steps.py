"""How the gateway records what a target yields: each step is an event of the task, in order,
published one by one, only the last one as final. A step the target recorded itself
(``recorded``, a team) is only taken note of. An ``Exchange`` (a team driving its member's
task) records every event but the one that ends the task, which the caller records with its
own writes."""

from __future__ import annotations

import asyncio

import pytest
from asgiref.sync import sync_to_async

from tasks_app import gateway, services, streams
from tasks_app.lifecycle import TaskState
from tasks_app.models import Task, TaskEvent

pytestmark = pytest.mark.django_db(transaction=True)

REQUEST = {"message": {"messageId": "m-1", "role": "ROLE_USER", "parts": [{"text": "go"}]}}


class Scripted(gateway.Target):
    """A target that yields the steps ``script(task)`` gives, and nothing else."""

    def __init__(self, script) -> None:
        super().__init__(kind="scripted", id="scripted")
        self.script = script

    async def run(self, task, request, ctx, *, stream):
        for step in await self.script(task):
            yield step


def status(task: Task, state: str, text: str = "") -> dict:
    return services.status_event(task, state, text or None)


def artifact(task: Task, name: str) -> dict:
    return {
        "artifactUpdate": {
            "taskId": task.id,
            "contextId": task.context_id,
            "lastChunk": True,
            "artifact": {"artifactId": name, "parts": [{"text": name}]},
        }
    }


async def run(target: Scripted) -> tuple[dict, list[tuple[dict, bool]]]:
    """Sends REQUEST to ``target``; returns the answer and what a subscriber of the task got
    until a final event."""
    ctx = gateway.CallContext(caller=None)
    opened = await sync_to_async(gateway.open_task)(target, ctx, REQUEST)
    received = []

    async def follow():
        async with streams.subscription(opened.task.id) as subscription:
            ready.set()
            async for item in subscription.events(after=0, keepalive=5):
                received.append(item)

    ready = asyncio.Event()
    follower = asyncio.create_task(follow())
    await ready.wait()
    answer = await gateway.send_message(target, ctx, REQUEST, opened=opened)
    await asyncio.wait_for(follower, 5)
    return answer, received


async def test_events_are_recorded_in_order_and_only_the_last_is_final():
    async def script(task):
        return [
            gateway.Step(status(task, TaskState.WORKING, "hop 1")),
            gateway.Step(artifact(task, "draft")),
            gateway.Step(status(task, TaskState.COMPLETED, "done")),
        ]

    answer, received = await run(Scripted(script))

    task = answer["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    assert [a["artifactId"] for a in task["artifacts"]] == ["draft"]
    stored = await sync_to_async(list)(
        TaskEvent.objects.filter(task_id=task["id"])
        .order_by("sequence")
        .values_list("sequence", "payload")
    )
    assert [(sequence, next(iter(payload))) for sequence, payload in stored] == [
        (1, "statusUpdate"),
        (2, "artifactUpdate"),
        (3, "statusUpdate"),
    ]
    assert [(next(iter(event)), final) for event, final in received] == [
        ("statusUpdate", False),
        ("artifactUpdate", False),
        ("statusUpdate", True),
    ]


async def test_a_final_event_in_the_middle_ends_the_task_and_the_rest_is_ignored():
    async def script(task):
        return [
            gateway.Step(status(task, TaskState.FAILED, "gave up")),
            gateway.Step(status(task, TaskState.COMPLETED, "late")),
        ]

    answer, received = await run(Scripted(script))

    assert answer["task"]["status"]["state"] == "TASK_STATE_FAILED"
    assert [final for _, final in received] == [True]
    row = await Task.objects.aget(pk=answer["task"]["id"])
    assert row.last_sequence == 1


async def test_steps_a_target_recorded_itself_are_not_recorded_again():
    async def script(task):
        await gateway.record(task, gateway.Step(status(task, TaskState.COMPLETED, "done")))
        return [
            gateway.Step(status(task, TaskState.COMPLETED, "done"), recorded=True),
            gateway.Step(status(task, TaskState.WORKING, "never seen")),
        ]

    ctx = gateway.CallContext(caller=None)
    answer = await gateway.send_message(Scripted(script), ctx, REQUEST)

    assert answer["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
    row = await Task.objects.aget(pk=answer["task"]["id"])
    assert row.last_sequence == 1


async def exchange_of(script) -> gateway.Exchange:
    """An exchange with a scripted target, run until the step that ends its task."""
    target, ctx = Scripted(script), gateway.CallContext(caller=None)
    opened = await sync_to_async(gateway.open_task)(target, ctx, REQUEST)
    exchange = gateway.Exchange(
        target, opened.task, target.run(opened.task, REQUEST, ctx, stream=True), fresh=opened.fresh
    )
    async for _ in exchange.events():
        pass
    return exchange


async def test_an_exchange_holds_the_last_event_until_the_caller_records_it():
    async def script(task):
        return [
            gateway.Step(status(task, TaskState.WORKING, "on it")),
            gateway.Step(artifact(task, "draft")),
            gateway.Step(
                status(task, TaskState.INPUT_REQUIRED, "which one?"),
                upstream_task_id="up-1",
                upstream_context_id="ctx-1",
            ),
        ]

    exchange = await exchange_of(script)

    assert exchange.answer["task"]["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    assert [a["artifactId"] for a in exchange.answer["task"]["artifacts"]] == ["draft"]
    assert (exchange.upstream_task_id, exchange.upstream_context_id) == ("up-1", "ctx-1")
    row = await Task.objects.aget(pk=exchange.task.id)
    assert (row.state, row.last_sequence) == (TaskState.WORKING, 2)  # not recorded yet

    published = await sync_to_async(exchange.store_end)()

    row = await Task.objects.aget(pk=exchange.task.id)
    assert (row.state, row.last_sequence) == (TaskState.INPUT_REQUIRED, 3)
    assert (row.upstream_task_id, row.upstream_context_id) == ("up-1", "ctx-1")
    assert [(p.task_id, p.sequence, p.final) for p in published] == [(row.id, 3, True)]


async def test_an_exchange_holds_a_message_answer_and_publishes_the_message_alone():
    async def script(task):
        return [
            gateway.Step(
                {
                    "message": {
                        "messageId": "a-1",
                        "role": "ROLE_AGENT",
                        "parts": [{"text": "hello"}],
                    }
                }
            )
        ]

    exchange = await exchange_of(script)

    assert exchange.answer == {
        "message": {"messageId": "a-1", "role": "ROLE_AGENT", "parts": [{"text": "hello"}]}
    }
    published = await sync_to_async(exchange.store_end)()
    row = await Task.objects.aget(pk=exchange.task.id)
    assert row.state == TaskState.COMPLETED
    assert [p.event for p in published] == [exchange.answer]


async def test_the_held_end_of_a_task_canceled_meanwhile_records_nothing():
    async def script(task):
        return [gateway.Step(status(task, TaskState.COMPLETED, "done"))]

    exchange = await exchange_of(script)
    await sync_to_async(services.task_cancel)(task=await Task.objects.aget(pk=exchange.task.id))

    assert await sync_to_async(exchange.store_end)() == []
    row = await Task.objects.aget(pk=exchange.task.id)
    assert row.state == TaskState.CANCELED


class Lingering(gateway.Target):
    """A target whose steps take a while to close once the task has ended (an agent's stream
    being shut down)."""

    def __init__(self, final: str) -> None:
        super().__init__(kind="lingering", id="lingering")
        self.final = final
        self.closed = asyncio.Event()

    async def run(self, task, request, ctx, *, stream):
        try:
            if self.final == "message":
                yield gateway.Step(
                    {"message": {"messageId": "r", "role": "ROLE_AGENT", "parts": []}}
                )
            else:
                yield gateway.Step(status(task, TaskState.COMPLETED, "done"))
        finally:
            await asyncio.sleep(0.5)
            self.closed.set()


@pytest.mark.parametrize("final", ["message", "completed"])
async def test_the_caller_has_its_answer_once_the_end_is_stored_before_the_job_winds_down(final):
    target = Lingering(final)
    ctx = gateway.CallContext(caller=None)
    opened = await sync_to_async(gateway.open_task)(target, ctx, REQUEST)
    answer = await asyncio.wait_for(
        gateway.send_message(target, ctx, REQUEST, opened=opened), timeout=0.4
    )
    assert not target.closed.is_set()  # answered while the target's steps were still closing
    stored = await sync_to_async(Task.objects.get)(pk=opened.task.pk)
    assert stored.state == "completed"
    assert ("message" in answer) == (final == "message")
    await asyncio.wait_for(target.closed.wait(), 2)  # the job still closes them
