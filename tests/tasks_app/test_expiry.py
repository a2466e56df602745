"""Task expiry: an open task past its expiry ends ``failed`` with a timeout error, its streams
get the final event and close, and the agent is told to stop; terminal tasks and tasks not yet
due are left alone, and a completion racing the expiry leaves exactly one end."""

from __future__ import annotations

import asyncio
import json
from contextlib import asynccontextmanager
from datetime import timedelta

import pytest
from asgiref.sync import sync_to_async
from django.db import connection
from django.utils import timezone
from django_celery_beat.models import PeriodicTask

from registry.services import api_key_create
from tasks_app import gateway, services
from tasks_app.lifecycle import TaskState
from tasks_app.models import Task, TaskEvent
from tasks_app.tasks import expire_tasks
from tests.agents import NEVER_FINISHES, never_finishing_agent
from tests.factories import make_agent, make_task
from tests.live import Recording, eventually
from tests.servers import running
from tests.tasks_app.a2a_http import JSONRPC_1, call, register, relay_client

STREAM_SECONDS = 20.0


def open_task(agent, *, state: str = TaskState.WORKING, expires_in: float = -1.0) -> Task:
    """A task to ``agent`` in ``state``, expiring ``expires_in`` seconds from now (in the
    past by default)."""
    return make_task(agent, state=state, expires_at=timezone.now() + timedelta(seconds=expires_in))


def status_text(task: Task) -> str:
    return " ".join(part.get("text", "") for part in (task.status_message or {}).get("parts", []))


# --- the job on stored tasks ----------------------------------------------------------------


@pytest.mark.django_db
@pytest.mark.parametrize(
    "state",
    [TaskState.SUBMITTED, TaskState.WORKING, TaskState.INPUT_REQUIRED, TaskState.AUTH_REQUIRED],
)
def test_an_expired_open_task_ends_failed_with_a_timeout_error(state):
    task = open_task(make_agent(), state=state)
    events_before = task.last_sequence

    assert expire_tasks() == 1

    task.refresh_from_db()
    assert task.state == TaskState.FAILED
    assert task.error.startswith("timeout: the task did not reach a final state")
    assert "timeout" in status_text(task)
    assert task.completed_at is not None
    final = TaskEvent.objects.get(task=task, sequence=events_before + 1)
    assert final.payload["statusUpdate"]["status"]["state"] == "TASK_STATE_FAILED"


@pytest.mark.django_db
@pytest.mark.parametrize(
    "state", [TaskState.COMPLETED, TaskState.CANCELED, TaskState.FAILED, TaskState.REJECTED]
)
def test_a_terminal_task_past_its_expiry_is_untouched(state):
    task = open_task(make_agent(), state=state)
    before = Task.objects.get(pk=task.pk)

    assert expire_tasks() == 0

    after = Task.objects.get(pk=task.pk)
    assert (after.state, after.last_sequence, after.error, after.updated_at) == (
        before.state,
        before.last_sequence,
        before.error,
        before.updated_at,
    )


@pytest.mark.django_db
def test_a_task_not_yet_due_or_without_expiry_is_untouched():
    agent = make_agent()
    later = open_task(agent, expires_in=3600)
    never = open_task(agent)
    Task.objects.filter(pk=never.pk).update(expires_at=None)

    assert expire_tasks() == 0
    assert set(Task.objects.values_list("state", flat=True)) == {TaskState.WORKING}
    assert Task.objects.get(pk=later.pk).last_sequence == later.last_sequence


@pytest.mark.django_db
def test_the_job_works_through_more_tasks_than_one_batch():
    agent = make_agent()
    for _ in range(5):
        open_task(agent)

    ended = gateway_expire(batch=2)

    assert ended == 5
    assert set(Task.objects.values_list("state", flat=True)) == {TaskState.FAILED}


def gateway_expire(**kwargs) -> int:
    from asgiref.sync import async_to_sync

    return async_to_sync(gateway.expire_overdue)(**kwargs)


# --- the race with a completion -------------------------------------------------------------


def complete(task: Task) -> services.Recorded:
    return services.task_record(
        task=task, event=services.status_event(task, TaskState.COMPLETED, "done")
    )


@pytest.mark.django_db
def test_a_completion_that_lands_first_wins_over_the_expiry():
    task = open_task(make_agent())
    seen_by_expiry = Task.objects.get(pk=task.pk)  # read before the completion lands

    assert complete(task).event is not None
    lost = services.task_expire(task=seen_by_expiry)

    assert lost.event is None
    stored = Task.objects.get(pk=task.pk)
    assert stored.state == TaskState.COMPLETED
    assert stored.error == ""
    assert TaskEvent.objects.filter(task=task).count() == stored.last_sequence


@pytest.mark.django_db
def test_an_expiry_that_lands_first_wins_over_a_late_completion():
    task = open_task(make_agent())
    seen_by_producer = Task.objects.get(pk=task.pk)

    assert services.task_expire(task=task).event is not None
    late = complete(seen_by_producer)

    assert late.event is None
    stored = Task.objects.get(pk=task.pk)
    assert stored.state == TaskState.FAILED
    terminal_events = [
        event
        for event in TaskEvent.objects.filter(task=task)
        if event.payload.get("statusUpdate", {}).get("status", {}).get("state")
        in ("TASK_STATE_FAILED", "TASK_STATE_COMPLETED")
    ]
    assert len(terminal_events) == 1


# --- when a task expires ----------------------------------------------------------------------


@pytest.mark.django_db
def test_a_task_opened_through_the_gateway_expires_after_the_configured_time(settings):
    settings.RELAY_TASK_TTL_SECONDS = 90
    before = timezone.now()
    assert services.task_expiry() - before >= timedelta(seconds=90)
    assert services.task_expiry() - before < timedelta(seconds=95)
    settings.RELAY_TASK_TTL_SECONDS = 0
    assert services.task_expiry() is None


@pytest.mark.django_db
def test_the_expiry_job_runs_every_minute_under_beat():
    from importlib import import_module

    from django.apps import apps

    from relay_project.celery import app

    # The schedule is the row of a data migration, and a transactional test run earlier on the
    # same xdist worker flushes it: the migration's own step (idempotent) makes it again.
    import_module("tasks_app.migrations.0003_expire_tasks_schedule").create_schedule(apps, None)
    schedule = PeriodicTask.objects.get(name="Expire overdue tasks")
    assert schedule.task == "tasks_app.expire_tasks"
    app.loader.import_default_modules()
    assert app.tasks[schedule.task].name == expire_tasks.name == schedule.task
    assert schedule.enabled
    assert (schedule.interval.every, schedule.interval.period) == (60, "seconds")


# --- a live stream through the A2A consumer -----------------------------------------------


@pytest.fixture(scope="module")
def never_agent():
    recording = Recording(never_finishing_agent)
    with running(recording) as url:
        yield url, recording


def sse_events(body: bytes) -> list[dict]:
    return [
        json.loads(line[len(b"data: ") :])
        for line in body.splitlines()
        if line.startswith(b"data: ")
    ]


@asynccontextmanager
async def streaming_task(agent_url: str):
    """A SendStreamingMessage (JSON-RPC 1.0) to the never-finishing agent through the relay's
    ASGI application, seen working; yields (the working task, the call's response future)."""
    agent = await sync_to_async(register)(agent_url, NEVER_FINISHES, streaming=True)
    _, secret = await sync_to_async(api_key_create)(name="streamer")
    async with relay_client() as client:
        response = asyncio.create_task(
            call(client, agent.pk, JSONRPC_1.send(stream=True), JSONRPC_1.headers(secret))
        )

        async def working_task():
            return await sync_to_async(
                Task.objects.filter(agent_id=agent.pk, state=TaskState.WORKING).first
            )()

        yield await eventually(working_task, "the task to be working"), response


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("allow_private_urls")
async def test_an_open_stream_gets_the_timeout_and_closes_and_the_agent_is_told_to_stop(
    never_agent, settings
):
    settings.RELAY_TASK_TTL_SECONDS = 3600
    url, recording = never_agent
    async with streaming_task(url) as (task, streaming):
        lifetime = task.expires_at - task.created_at
        assert timedelta(seconds=3599) < lifetime < timedelta(seconds=3601)
        await sync_to_async(Task.objects.filter(pk=task.pk).update)(
            expires_at=timezone.now() - timedelta(seconds=1)
        )

        assert await gateway.expire_overdue() == 1
        response = await asyncio.wait_for(streaming, STREAM_SECONDS)

    events = sse_events(response.content)
    last = events[-1]["result"]["statusUpdate"]
    assert last["taskId"] == task.pk
    assert last["status"]["state"] == "TASK_STATE_FAILED"
    assert "timeout" in last["status"]["message"]["parts"][0]["text"]
    stored = await sync_to_async(Task.objects.get)(pk=task.pk)
    assert stored.state == TaskState.FAILED
    cancels = [r for r in recording.posts() if b"CancelTask" in r.body]
    assert cancels and cancels[-1].json()["params"]["id"] == stored.upstream_task_id


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("allow_private_urls")
async def test_a_stream_closes_on_an_expiry_recorded_by_another_process(never_agent, monkeypatch):
    """A Celery worker's event does not reach a relay's in-memory channel layer: the idle
    stream finds it in the database at its next keep-alive and closes."""
    monkeypatch.setattr(gateway.operations, "KEEPALIVE_SECONDS", 0.2)
    url, _ = never_agent
    async with streaming_task(url) as (task, streaming):
        # Recorded without publishing, as another process with another channel layer would.
        recorded = await sync_to_async(services.task_expire)(task=task)
        assert recorded.event is not None
        response = await asyncio.wait_for(streaming, STREAM_SECONDS)

    events = sse_events(response.content)
    assert events[-1]["result"]["statusUpdate"]["status"]["state"] == "TASK_STATE_FAILED"


@pytest.mark.django_db(transaction=True)
def test_a_completion_and_an_expiry_at_the_same_moment_leave_exactly_one_end():
    """Both writers in their own thread and database connection, released together."""
    agent = make_agent()
    for _ in range(10):
        task = open_task(agent)
        results = race(
            task.pk, completion=complete, expiry=lambda mine: services.task_expire(task=mine)
        )
        winners = [name for name, recorded in results.items() if recorded.event is not None]
        assert len(winners) == 1, results
        stored = Task.objects.get(pk=task.pk)
        assert (
            stored.state
            == {"completion": TaskState.COMPLETED, "expiry": TaskState.FAILED}[winners[0]]
        )
        finals = [
            event
            for event in TaskEvent.objects.filter(task=task)
            if event.payload["statusUpdate"]["status"]["state"]
            in ("TASK_STATE_FAILED", "TASK_STATE_COMPLETED")
        ]
        assert len(finals) == 1


def race(task_id: str, **writers) -> dict[str, services.Recorded]:
    """Runs each writer on its own copy of the task, in its own thread and connection, all
    released at once; returns what each wrote (raises the first error of any)."""
    import threading

    barrier = threading.Barrier(len(writers))
    results: dict[str, services.Recorded] = {}
    errors: list[BaseException] = []

    def run(name, write):
        try:
            mine = Task.objects.get(pk=task_id)
            barrier.wait(timeout=10)
            results[name] = write(mine)
        except BaseException as error:
            errors.append(error)
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=item) for item in writers.items()]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    if errors:
        raise errors[0]
    return results
