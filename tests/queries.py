"""Counting the statements of the hot path where they run: asgiref's database thread."""

from __future__ import annotations

from django.db import connection
from django.test.utils import CaptureQueriesContext

from relay_project.database import database_sync_to_async


class ThreadQueries:
    """The statements the database thread runs while the block is open."""

    async def __aenter__(self) -> ThreadQueries:
        def enter() -> None:
            self._context = CaptureQueriesContext(connection)
            self._context.__enter__()

        await database_sync_to_async(enter)()
        return self

    async def __aexit__(self, *exc) -> None:
        def leave() -> None:
            self._context.__exit__(None, None, None)
            # Read here: ``captured_queries`` reads the connection of the thread that asks.
            self.statements = [query["sql"] for query in self._context.captured_queries]

        await database_sync_to_async(leave)()


EVENT_WRITE = "EVENT WRITE"
"""A task's events written (``services.task_record_many``): on PostgreSQL one statement, on
SQLite the compare-and-set UPDATE of the task and the events' INSERT."""

USAGE_WRITE = "USAGE WRITE"
"""The usage record a task's end keeps with its last events: its values in the event write's
UPDATE of the task (named after the EVENT_WRITE that carries them)."""
_USAGE_COLUMN = "usage_latency_ms"


SETTLED_POLL = 'SELECT 1 AS "a" FROM "tasks_app_task" WHERE NOT ("tasks_app_task"."state" IN'
"""The start of the test's own poll for unfinished tasks (``settled``), not the call's."""
BACKGROUND = '"tasks_app_relayprocess"'
"""The table of the process's lease heartbeat and takeover scan, which run on their own
clock whatever the calls do."""


def of_the_call(statements: list[str]) -> list[str]:
    """The statements of the calls: without the test's own polls for unfinished tasks and
    the process's background work on its lease."""
    return [sql for sql in statements if not sql.startswith(SETTLED_POLL) and BACKGROUND not in sql]


def kinds(statements: list[str]) -> list[str]:
    """Each statement's verb, and the table of a write (what a budget is about); an event
    write is EVENT_WRITE on either database."""
    named: list[str] = []
    task_update = ""
    for sql in statements:
        words = sql.replace('"', "").split()
        verb = words[0].upper()
        table = {"INSERT": 2, "UPDATE": 1}.get(verb)
        kind = f"{verb} {words[table]}" if table else verb
        if verb in {"BEGIN", "COMMIT", "SAVEPOINT", "RELEASE"}:
            continue
        if sql.startswith("WITH moved AS (UPDATE"):
            named.append(EVENT_WRITE)
            if _USAGE_COLUMN in sql:
                named.append(USAGE_WRITE)
            continue
        if kind == "INSERT tasks_app_taskevent" and named[-1:] == ["UPDATE tasks_app_task"]:
            named[-1] = EVENT_WRITE
            if _USAGE_COLUMN in task_update:
                named.append(USAGE_WRITE)
            continue
        if kind == "UPDATE tasks_app_task":
            task_update = sql
        named.append(kind)
    return named
