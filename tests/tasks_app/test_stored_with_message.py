"""A blocking SendMessage's new task is stored as its message goes to the agent (on
PostgreSQL its INSERT is sent just before the agent's request, ``services.atask_store_sent``):
the job that drives the task writes nothing before the task is stored, and when it is not
stored the caller gets an InternalError and nothing of the task is written. These tests hold
the INSERT's answer themselves (``storing``), so they run on either database."""

from __future__ import annotations

import asyncio
import logging

import pytest
from asgiref.sync import sync_to_async

from tasks_app import gateway, rows, services, upstream
from tasks_app.gateway import driving
from tasks_app.lifecycle import TaskState
from tasks_app.models import Task, TaskEvent
from tasks_app.protocol.errors import InternalError

pytestmark = pytest.mark.django_db(transaction=True)

REQUEST = {"message": {"messageId": "m-1", "role": "ROLE_USER", "parts": [{"text": "go"}]}}


class Answering(gateway.Target):
    """A target that answers at once: ``completed``, or ``failure`` raised."""

    def __init__(self, failure: Exception | None = None) -> None:
        super().__init__(kind="agent", id="answering")
        self.failure = failure
        self.called = asyncio.Event()

    async def run(self, task, request, ctx, *, stream):
        self.called.set()
        if self.failure is not None:
            raise self.failure
        yield gateway.Step(services.status_event(task, TaskState.COMPLETED, "done"))


async def unstored(target) -> Task:
    ctx = gateway.CallContext(caller=None)
    opened = await sync_to_async(gateway.open_task)(target, ctx, REQUEST, store=False)
    assert not opened.stored
    assert not await Task.objects.filter(pk=opened.task.pk).aexists()
    return opened.task


def drive(target, task, storing) -> asyncio.Future:
    steps = target.run(task, REQUEST, gateway.CallContext(caller=None), stream=False)
    return driving.start(target, task, steps, fresh=True, raise_errors=True, storing=storing)


async def events_of(task: Task) -> list[int]:
    return [
        e
        async for e in TaskEvent.objects.filter(task_id=task.pk).values_list("sequence", flat=True)
    ]


async def test_the_agent_is_called_while_the_task_is_stored_and_nothing_is_written_before():
    target = Answering()
    task = await unstored(target)
    storing = asyncio.get_running_loop().create_future()
    answered = drive(target, task, storing)
    await asyncio.wait_for(target.called.wait(), 5)
    await asyncio.sleep(0.2)
    assert not answered.done()  # the agent answered; its end waits for the task
    assert await events_of(task) == []

    await sync_to_async(rows.insert)(task)
    storing.set_result(None)
    outcome = await asyncio.wait_for(answered, 5)
    assert outcome.task.state == TaskState.COMPLETED
    stored = await Task.objects.aget(pk=task.pk)
    assert (stored.state, stored.last_sequence) == (TaskState.COMPLETED, 1)
    assert await events_of(task) == [1]


async def test_a_task_that_was_not_stored_answers_an_internal_error_and_writes_nothing(caplog):
    target = Answering()
    task = await unstored(target)
    storing = asyncio.get_running_loop().create_future()
    answered = drive(target, task, storing)
    await asyncio.wait_for(target.called.wait(), 5)
    with caplog.at_level(logging.WARNING, logger="tasks_app.gateway.driving"):
        storing.set_exception(RuntimeError("the database went away"))
        with pytest.raises(InternalError, match="could not store the task"):
            await asyncio.wait_for(answered, 5)
        await asyncio.sleep(0.1)  # the job has ended
    assert not driving.running(task.pk)
    assert not await Task.objects.filter(pk=task.pk).aexists()
    assert await events_of(task) == []
    assert f"task {task.pk} was not stored" in caplog.text
    assert "the database went away" in caplog.text


async def test_an_agent_failure_ends_the_task_failed_once_it_is_stored():
    target = Answering(upstream.UpstreamError("unreachable", "agent 'answering' is unreachable"))
    task = await unstored(target)
    storing = asyncio.get_running_loop().create_future()
    answered = drive(target, task, storing)
    await asyncio.wait_for(target.called.wait(), 5)
    await asyncio.sleep(0.2)
    assert not answered.done()

    await sync_to_async(rows.insert)(task)
    storing.set_result(None)
    outcome = await asyncio.wait_for(answered, 5)
    assert outcome.task.state == TaskState.FAILED
    stored = await Task.objects.aget(pk=task.pk)
    assert stored.state == TaskState.FAILED
    assert "unreachable" in stored.status_message["parts"][0]["text"]
