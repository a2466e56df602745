"""task_record writes what an event changed, and no more: two statements per event (the
task's compare-and-set and the event), a third only for a task with push configs."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from registry.services import api_key_create
from tasks_app import push, services
from tasks_app.models import PushDelivery, Task
from tasks_app.tasks import deliver_push

pytestmark = pytest.mark.django_db


def open_task() -> Task:
    caller, _ = api_key_create(name="recorder")
    return services.task_open(
        caller=caller,
        target_kind="agent",
        target_id="x",
        agent_id=None,
        message={"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "hi"}]},
        client_version="1.0",
    )


def artifact_event(task: Task, text: str, *, append: bool) -> dict:
    return {
        "artifactUpdate": {
            "taskId": task.pk,
            "contextId": task.context_id,
            "append": append,
            "artifact": {"artifactId": "story", "parts": [{"text": text}]},
        }
    }


def statements(queries: CaptureQueriesContext) -> list[str]:
    return [
        query["sql"]
        for query in queries.captured_queries
        if not query["sql"].startswith(("SAVEPOINT", "RELEASE SAVEPOINT", "BEGIN"))
    ]


def test_an_artifact_chunk_leaves_history_and_status_unwritten():
    task = open_task()
    services.task_record(task=task, event=services.status_event(task, "working"))
    services.task_record(task=task, event=artifact_event(task, "one ", append=False))
    with CaptureQueriesContext(connection) as queries:
        services.task_record(task=task, event=artifact_event(task, "two", append=True))
    update = the_update(statements(queries))
    written = update.split(" SET ", 1)[1].split(" WHERE ", 1)[0]
    assert '"artifacts"' in written and '"last_sequence"' in written
    for column in ('"history"', '"state"', '"status_message"', '"status_timestamp"', '"metadata"'):
        assert column not in written, written
    stored = Task.objects.get(pk=task.pk)
    assert stored.artifacts == [
        {"artifactId": "story", "parts": [{"text": "one "}, {"text": "two"}]}
    ]
    assert stored.state == "working" and stored.last_sequence == 3


def test_a_task_without_push_configs_reads_none_when_it_records():
    task = open_task()
    with CaptureQueriesContext(connection) as queries:
        services.task_record(task=task, event=services.status_event(task, "completed", "done"))
    the_update(statements(queries))


def the_update(sql: list[str]) -> str:
    """The compare-and-set UPDATE of a recorded event: with the event's INSERT after it, or on
    PostgreSQL, with the INSERT and the NOTIFY in the same statement (one round trip)."""
    if connection.vendor == "postgresql":
        [combined] = sql
        assert combined.startswith("WITH moved AS (UPDATE"), sql
        assert "INSERT INTO" in combined and "pg_notify" in combined, sql
        return combined[len("WITH moved AS (") :]
    assert [statement.split()[0] for statement in sql] == ["UPDATE", "INSERT"], sql
    return sql[0]


def test_a_config_another_writer_added_gets_the_next_event(monkeypatch):
    task = open_task()
    push.config_create(
        task=Task.objects.get(pk=task.pk),  # not the producer's copy
        config={"url": "https://hooks.example/a2a", "taskId": task.pk},
    )
    assert task.has_push_configs is False
    monkeypatch.setattr(deliver_push, "delay", lambda delivery_id: None)
    recorded = services.task_record(
        task=task, event=services.status_event(task, "completed", "done")
    )
    assert recorded.event is not None and task.has_push_configs is True
    assert PushDelivery.objects.filter(event__task_id=task.pk).count() == 1
