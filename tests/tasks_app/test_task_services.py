"""task_record writes what an event changed, and no more: two statements per event (the
task's compare-and-set and the event), a third only for a task with push configs; and
task_record_many writes a burst of events as one compare-and-set and one insert."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from tasks_app import push, services
from tasks_app.models import PushDelivery, Task
from tasks_app.push_delivery import deliver_push
from tests.tasks_app.stored_tasks import open_task

pytestmark = pytest.mark.django_db


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
    the_update(statements(queries), ends=True)


USAGE_COLUMN = '"usage_latency_ms"'


def test_an_end_writes_the_usage_values_that_differ_from_the_defaults_and_no_others():
    task = open_task()
    with CaptureQueriesContext(connection) as queries:
        services.task_record(task=task, event=services.status_event(task, "failed", "it broke"))
    written = the_update(statements(queries), ends=True).split(" WHERE ", 1)[0]
    for column in ("usage_latency_ms", "usage_bytes_in", "usage_error"):
        assert f'"{column}"' in written, written
    for column in ("usage_team_id", "usage_workflow_id", "usage_input_tokens", "usage_model"):
        assert f'"{column}"' not in written, written
    stored = Task.objects.get(pk=task.pk)
    assert stored.usage_latency_ms is not None and stored.usage_bytes_in > 0
    assert stored.usage_error == "it broke"
    assert (stored.usage_team_id, stored.usage_input_tokens, stored.usage_model) == ("", None, "")
    assert task.usage_error == "it broke" and task.usage_input_tokens is None


def the_update(sql: list[str], *, ends: bool = False) -> str:
    """The compare-and-set UPDATE of a recorded event: with the event's INSERT after it, or on
    PostgreSQL, with the INSERT and the NOTIFY in the same statement (one round trip). An
    event that ends the task also writes the call's usage record, in that UPDATE."""
    if connection.vendor == "postgresql":
        [combined] = sql
        assert combined.startswith("WITH moved AS (UPDATE"), sql
        assert "INSERT INTO" in combined and "pg_notify" in combined, sql
        assert (USAGE_COLUMN in combined) == ends, sql
        return combined[len("WITH moved AS (") :]
    kinds = [statement.split()[0] for statement in sql]
    assert kinds == ["UPDATE", "INSERT"], sql
    assert (USAGE_COLUMN in sql[0]) == ends, sql
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


# --- several events written together ----------------------------------------------------------


def burst(task: Task) -> list[tuple[dict, str, str]]:
    chunks = [artifact_event(task, f"chunk {i} ", append=i > 0) for i in range(5)]
    working = services.status_event(task, "working")
    done = services.status_event(task, "completed", "all done")
    return [(working, "up-task", "up-context"), *((c, "", "") for c in chunks), (done, "", "")]


def stored_events(task: Task) -> list[tuple[int, dict]]:
    return list(task.events.order_by("sequence").values_list("sequence", "payload"))


def test_a_burst_is_one_write_of_the_task_and_ends_as_the_events_one_by_one_leave_it():
    together, one_by_one = open_task(), open_task()
    events = burst(together)
    with CaptureQueriesContext(connection) as queries:
        recorded = services.task_record_many(task=together, events=events)
    sql = statements(queries)
    if connection.vendor == "postgresql":  # the update, the inserts and the NOTIFY in one
        assert len(sql) == 1 and sql[0].startswith("WITH") and "pg_notify" in sql[0]
    else:
        updates = [q for q in sql if q.startswith("UPDATE")]
        inserts = [q for q in sql if q.startswith("INSERT")]
        # Every event in one insert; the usage record of the call the burst ends in the update.
        assert len(updates) == 1 and USAGE_COLUMN in updates[0], sql
        assert len(inserts) == 1, sql
    for event, upstream_task, upstream_context in burst(one_by_one):
        services.task_record(
            task=one_by_one,
            event=event,
            upstream_task_id=upstream_task,
            upstream_context_id=upstream_context,
        )
    assert [r.sequence for r in recorded] == [1, 2, 3, 4, 5, 6, 7]
    assert [r.state for r in recorded] == ["working"] * 6 + ["completed"]
    stored, twin = Task.objects.get(pk=together.pk), Task.objects.get(pk=one_by_one.pk)
    for field in ("state", "artifacts", "upstream_task_id", "owner"):
        assert getattr(stored, field) == getattr(twin, field), field
    assert stored.status_message["parts"] == twin.status_message["parts"] == [{"text": "all done"}]
    assert stored.artifacts[0]["parts"] == [{"text": f"chunk {i} "} for i in range(5)]
    assert (stored.upstream_task_id, stored.upstream_context_id) == ("up-task", "up-context")
    assert stored.last_sequence == 7 and stored.completed_at is not None
    assert [s for s, _ in stored_events(together)] == [1, 2, 3, 4, 5, 6, 7]
    assert [p for _, p in stored_events(together)] == [event for event, _, _ in events]


def test_events_after_the_end_are_ignored_and_an_ended_task_records_nothing():
    task = open_task()
    done = services.status_event(task, "completed")
    late = artifact_event(task, "late", append=False)
    recorded = services.task_record_many(task=task, events=[(done, "", ""), (late, "", "")])
    assert [r.event for r in recorded] == [done]
    assert services.task_record_many(task=task, events=[(late, "", ""), (late, "", "")]) == []
    assert Task.objects.get(pk=task.pk).last_sequence == 1


def test_a_forbidden_move_raises_after_the_events_before_it_are_recorded():
    task = open_task()
    working = services.status_event(task, "working")
    back = services.status_event(task, "submitted")
    with pytest.raises(services.InvalidTransition):
        services.task_record_many(
            task=task, events=[(working, "", ""), (working, "", ""), (back, "", "")]
        )
    stored = Task.objects.get(pk=task.pk)
    assert (stored.state, stored.last_sequence) == ("working", 2)


def test_a_burst_that_lost_the_race_is_decided_again_on_the_task_as_it_now_stands():
    task = open_task()
    services.task_record(
        task=Task.objects.get(pk=task.pk), event=services.status_event(task, "canceled")
    )
    chunk = artifact_event(task, "late", append=False)
    assert services.task_record_many(task=task, events=[(chunk, "", ""), (chunk, "", "")]) == []
    stored = Task.objects.get(pk=task.pk)
    assert (stored.state, stored.last_sequence, stored.artifacts) == ("canceled", 1, [])


# --- which commits wait for the disk (PostgreSQL) ---------------------------------------------


def test_timestamps_are_written_in_utc_with_milliseconds_and_a_z():
    from datetime import datetime, timedelta, timezone

    moment = datetime(2025, 3, 4, 5, 6, 7, 891999, tzinfo=timezone(timedelta(hours=3)))
    assert services.iso(moment) == "2025-03-04T02:06:07.891Z"
    assert services.iso(moment.replace(microsecond=0)) == "2025-03-04T02:06:07.000Z"
