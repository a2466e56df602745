"""tasks_app.rows writes what save() and update() would: read back through the ORM, a row
it wrote equals one the ORM wrote from the same values."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import pytest
from django.db import connections
from django.db.utils import ConnectionHandler
from django.forms.models import model_to_dict

from registry.services import api_key_create
from tasks_app import rows
from tasks_app.models import Task, TaskEvent

pytestmark = pytest.mark.django_db

MOMENT = datetime(2025, 3, 4, 5, 6, 7, 891000, tzinfo=UTC)


def task(**fields) -> Task:
    caller, _ = api_key_create(name="rows")
    return Task(
        caller=caller,
        target_kind="agent",
        target_id="x",
        context_id="c",
        history=[{"messageId": "m", "parts": [{"text": "héllo \u2028"}]}],
        metadata={"k": [1, 2.5, None, True]},
        status_timestamp=MOMENT,
        expires_at=MOMENT,
        created_at=MOMENT,
        updated_at=MOMENT,
        delegation_chain=["a", "b"],
        **fields,
    )


def stored(pk: str) -> dict:
    return model_to_dict(Task.objects.get(pk=pk), exclude=["id"])


def test_an_inserted_task_reads_back_as_a_saved_one():
    written, saved = task(), task()
    rows.insert(written)
    saved.save(force_insert=True)
    assert not written._state.adding
    assert stored(written.pk) == {**stored(saved.pk), "caller": written.caller_id}


def test_an_inserted_event_gets_its_automatic_key():
    parent = task()
    rows.insert(parent)
    first, second = (
        TaskEvent(task_id=parent.pk, sequence=n, kind="status", payload={"n": n}) for n in (1, 2)
    )
    rows.insert(first)
    rows.insert(second)
    assert first.pk and second.pk == first.pk + 1
    assert TaskEvent.objects.get(pk=second.pk).payload == {"n": 2}


def test_events_inserted_together_read_back_as_bulk_created_ones():
    """Several hundred events: more than one statement of the database's parameters takes
    them, every one stored, in order, as bulk_create stores the same events."""
    parent = task()
    rows.insert(parent)
    count = 2 * connections["default"].ops.bulk_batch_size(rows._inserted_fields(TaskEvent), [])

    def events(first: int) -> list[TaskEvent]:
        return [
            TaskEvent(task_id=parent.pk, sequence=n, kind="artifact", payload={"n": n, "é": [n]})
            for n in range(first, first + count)
        ]

    written, created = events(1), events(count + 1)
    rows.insert_many(written)
    TaskEvent.objects.bulk_create(created)
    assert all(not event._state.adding and event.pk is None for event in written)

    def stored(events: list[TaskEvent]) -> list[tuple]:
        found = TaskEvent.objects.filter(sequence__in=[event.sequence for event in events])
        return list(found.order_by("sequence").values_list("kind", "payload", "created_at"))

    inserted = stored(written)
    assert len(inserted) == count
    assert [payload for _, payload, _ in inserted] == [
        {"n": n, "é": [n]} for n in range(1, count + 1)
    ]
    assert {(kind, bool(moment)) for kind, _, moment in inserted} == {
        (kind, bool(moment)) for kind, _, moment in stored(created)
    }


def test_an_update_changes_the_row_only_while_it_is_as_expected():
    row = task()
    rows.insert(row)
    changes = {"state": "working", "artifacts": [{"artifactId": "a"}], "updated_at": MOMENT}
    expected = {"pk": row.pk, "state": "submitted", "last_sequence": 0}
    assert rows.update(Task, values={**changes, "last_sequence": 1}, where=expected) == 1
    assert rows.update(Task, values={**changes, "last_sequence": 1}, where=expected) == 0
    again = Task.objects.get(pk=row.pk)
    assert (again.state, again.artifacts, again.updated_at, again.last_sequence) == (
        "working",
        [{"artifactId": "a"}],
        MOMENT,
        1,
    )


def test_values_by_pk_reads_what_values_list_reads():
    from registry.models import Agent
    from tests.factories import make_agent

    first, second = make_agent(), make_agent()
    Agent.objects.filter(pk=first.pk).update(
        breaker_state="open", breaker_failures=3, breaker_opened_at=MOMENT, health="unhealthy"
    )
    fields = (
        "status",
        "health",
        "breaker_state",
        "breaker_failures",
        "breaker_opened_at",
        "interfaces",
        "created_at",
    )
    pks = [first.pk, second.pk, "missing"]

    read = rows.values_by_pk(Agent, pks, fields)

    expected = Agent.objects.filter(pk__in=pks).values_list("pk", *fields)
    assert sorted(read) == sorted(expected)
    assert len(read) == 2
    assert next(row for row in read if row[0] == first.pk)[5] == MOMENT  # aware, as stored
    assert rows.values_by_pk(Agent, [], fields) == []


@pytest.mark.parametrize("wait_for_disk", [True, False])
def test_the_one_statement_write_turns_the_disk_wait_off_only_when_told(wait_for_disk):
    sql, *_ = rows._update_then_insert_statement(
        Task, ("last_sequence",), ("pk", "last_sequence"), TaskEvent, 2, True, None, wait_for_disk
    )
    turned_off = "set_config('synchronous_commit', 'off', true)" in sql
    assert turned_off is not wait_for_disk
    # Read at commit, so it must be in the statement's result, evaluated once the writes ran.
    assert sql.rsplit("SELECT", 1)[1].startswith(" pg_notify(%s, %s)")


def test_an_insert_turns_the_disk_wait_off_only_when_told_and_still_reads_its_key():
    lazy_sql, _ = rows._insert_statement(TaskEvent, True, True)
    plain_sql, _ = rows._insert_statement(TaskEvent, True, False)
    assert "set_config('synchronous_commit', 'off', true)" in lazy_sql
    assert "set_config" not in plain_sql
    if "RETURNING" in plain_sql:  # the key comes first, where insert reads it
        assert lazy_sql.startswith(plain_sql + ",")


def test_an_insert_told_not_to_wait_writes_the_same_row():
    parent = task()
    rows.insert(parent, wait_for_disk=False)
    event = TaskEvent(task_id=parent.pk, sequence=1, kind="status", payload={"n": 1})
    rows.insert(event, wait_for_disk=False)
    assert Task.objects.get(pk=parent.pk).context_id == "c"
    assert TaskEvent.objects.get(pk=event.pk).payload == {"n": 1}


def test_the_one_statement_write_notifies_only_while_the_named_column_counts_some():
    always, *_ = rows._update_then_insert_statement(
        Task, ("last_sequence",), ("pk",), TaskEvent, 1, True, None, True
    )
    counted, *_ = rows._update_then_insert_statement(
        Task, ("last_sequence",), ("pk",), TaskEvent, 1, True, "remote_streams", True
    )
    assert always.rsplit("SELECT", 1)[1].startswith(" pg_notify(%s, %s)")
    assert 'RETURNING "remote_streams"' in counted
    assert 'CASE WHEN moved."remote_streams" > 0 THEN pg_notify(%s, %s) END' in counted


def test_statements_for_the_event_loop_are_prepared_without_a_connection_per_task(monkeypatch):
    """In async code Django keeps a connection object per task; the loop's statements are
    prepared by one of the process's instead, with the values the thread's would give."""
    written, event = task(), TaskEvent(task_id="t", sequence=1, kind="status", payload={"n": 1})
    fields = rows._insert_statement(Task, False, True, returns_row=True)[1]
    expected = [
        repr(value) for value in rows._saved_values(connections["default"], fields, written)
    ]

    def prepared():
        _, params = rows.insert_query(written, wait_for_disk=False)
        rows.update_then_insert_query(
            Task, where={"pk": "t"}, values={"last_sequence": 1}, instances=[event]
        )
        return [repr(value) for value in params], rows.vendor()

    prepared()  # the statements' text and the preparing connection, each made once
    made = []
    create = ConnectionHandler.create_connection
    monkeypatch.setattr(
        ConnectionHandler,
        "create_connection",
        lambda self, alias: made.append(alias) or create(self, alias),
    )

    async def in_two_tasks():
        async def prepare():
            return prepared()

        return await asyncio.gather(prepare(), prepare())

    for params, vendor in asyncio.run(in_two_tasks()):
        assert params == expected and vendor == connections["default"].vendor
    assert made == []
