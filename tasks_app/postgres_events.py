"""The one raw statement of the relay's hot path: a task's events written on PostgreSQL in one
round trip.

The ORM writes the same thing as a transaction of five round trips (BEGIN, the compare-and-set
UPDATE, the events' INSERT, the NOTIFY, COMMIT). Every event write of every call and stream
pays them; this statement makes one. Measured with the gateway bench (docs/benchmarks.md):
the production profile's CPU per call at c=8 and c=32, with and without it.

The statement: the compare-and-set UPDATE of the task (``RETURNING`` how many streams follow
it from elsewhere), an INSERT of each event that runs only when the UPDATE moved the row, the
NOTIFY for the task's streams in other processes, and optionally a commit that does not wait
for the disk. Atomic on its own; inside a caller's transaction it is part of that.
Values are prepared by their model fields, as the ORM prepares them.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

from django.db import DEFAULT_DB_ALIAS, connections
from django.db.models import Field
from psycopg.types.json import Jsonb

from tasks_app.models import Task, TaskEvent


def record(
    *,
    where: dict[str, Any],
    values: dict[str, Any],
    events: Sequence[TaskEvent],
    notify: tuple[str, str],
    notify_always: bool,
    commit_without_disk_wait: bool,
) -> bool:
    """Updates the task matching ``where`` (field: expected value, a compare-and-set) with
    ``values`` and inserts ``events`` (one task's, all made now) only if it moved; sends
    NOTIFY ``notify`` (channel, payload) when it moved and ``notify_always`` or a stream
    follows the task from elsewhere. Returns whether the task moved; the events then have
    their primary keys. ``commit_without_disk_wait`` only outside a transaction: in one it
    would hold for the whole of it."""
    db = connections[DEFAULT_DB_ALIAS]
    sql, params = _statement(
        db, where, values, events, notify, notify_always, commit_without_disk_wait
    )
    with db.cursor() as cursor:
        cursor.execute(sql, params)
        row = cursor.fetchone()
    if row is None:
        return False
    for event, pk in zip(events, row[-1], strict=True):
        event.pk = pk
        event._state.adding = False
        event._state.db = db.alias
    return True


def _statement(db, where, values, events, notify, notify_always, lazy) -> tuple[str, list[Any]]:
    """The statement and its parameters. Its text depends only on which fields are written and
    compared (the events travel as one JSON parameter): it is built once per such shape
    (``_shape``), and psycopg prepares it after a few uses."""
    sql, written, compared = _shape(tuple(values), tuple(where), lazy)
    params: list[Any] = [
        field.get_db_prep_save(value, db)
        for field, value in zip(written, values.values(), strict=True)
    ]
    params += [
        field.get_db_prep_value(value, db, prepared=False)
        for field, value in zip(compared, where.values(), strict=True)
    ]
    rows = [
        {"sequence": event.sequence, "kind": event.kind, "payload": event.payload}
        for event in events
    ]
    first = events[0]
    params += [first.task_id, first.created_at, Jsonb(rows), notify_always, *notify]
    return sql, params


@functools.lru_cache(maxsize=256)
def _shape(
    written: tuple[str, ...], compared: tuple[str, ...], lazy: bool
) -> tuple[str, tuple[Field, ...], tuple[Field, ...]]:
    """The statement's text for a write of the ``written`` fields of a task whose ``compared``
    fields hold what the caller expects, and those fields. The relay's writes come in a few
    dozen such shapes."""
    quote = connections[DEFAULT_DB_ALIAS].ops.quote_name
    task_fields = tuple(Task._meta.get_field(name) for name in written)
    compared_fields = tuple(
        Task._meta.pk if name == "pk" else Task._meta.get_field(name) for name in compared
    )
    update = (
        f"UPDATE {quote(Task._meta.db_table)} SET "
        + ", ".join(f"{quote(field.column)} = %s" for field in task_fields)
        + " WHERE "
        + " AND ".join(f"{quote(field.column)} = %s" for field in compared_fields)
        + f" RETURNING {quote('remote_streams')}"
    )
    table = quote(TaskEvent._meta.db_table)
    stored = (
        f"INSERT INTO {table} (task_id, sequence, kind, payload, created_at) "
        "SELECT %s, e.sequence, e.kind, e.payload, %s FROM moved, "
        "jsonb_to_recordset(%s) AS e(sequence integer, kind text, payload jsonb) "
        "ORDER BY e.sequence RETURNING id, sequence"
    )
    selected = ["CASE WHEN %s OR moved.remote_streams > 0 THEN pg_notify(%s, %s) END"]
    if lazy:
        selected.append("set_config('synchronous_commit', 'off', true)")
    selected.append("(SELECT array_agg(id ORDER BY sequence) FROM stored)")
    sql = f"WITH moved AS ({update}), stored AS ({stored}) SELECT {', '.join(selected)} FROM moved"
    return sql, task_fields, compared_fields
