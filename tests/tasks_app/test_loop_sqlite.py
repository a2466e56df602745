"""The event loop's own SQLite connection (the embedded profile), and the event writes it
carries: an A2A event is recorded by the loop itself, with no database thread, unless another
connection is writing, when a database thread waits its turn while the loop goes on; a write
that lost the compare-and-set is decided again in a database thread. The loop never
checkpoints the log itself, and never writes to a database whose commits wait for the disk.

Against the test database file, outside any test transaction (which would hold the write lock
the whole test)."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import time

import pytest
from django.db import DEFAULT_DB_ALIAS, connections, utils

from relay_project import database_threads, loop_sqlite
from tasks_app import rows, services
from tasks_app.models import Task, TaskEvent
from tests.tasks_app import stored_tasks

pytestmark = pytest.mark.django_db(transaction=True)


def open_task(name: str = "loop") -> Task:
    return stored_tasks.open_task(name, owner="process-a")


def stored(task: Task) -> list:
    row = Task.objects.get(pk=task.pk)
    sequences = TaskEvent.objects.filter(task_id=task.pk).values_list("sequence", flat=True)
    return [row.state, row.last_sequence, row.owner, sorted(sequences)]


@pytest.fixture
def hops(monkeypatch) -> list[str]:
    """The names of the functions the code under test ran in a database thread."""
    names: list[str] = []
    run = database_threads.run

    def counted(function, *args):
        names.append(getattr(function, "__name__", None) or function.func.__name__)
        return run(function, *args)

    monkeypatch.setattr(database_threads, "run", counted)
    return names


async def record(task: Task, *states: str) -> list[list]:
    events = [(services.status_event(task, state), "", "") for state in states]
    recorded = await services.atask_record_many(task=task, events=events)
    return [[done.sequence, done.state] for done in recorded]


def database_file() -> str:
    return str(connections.settings[DEFAULT_DB_ALIAS]["NAME"])


def test_events_are_recorded_by_the_loop_itself(hops):
    """A burst recorded from async code moves the task and stores its events from the loop,
    ends the task's ownership; a task ended meanwhile records nothing more; a forbidden
    move is raised once the events before it are stored; none of it in a database thread."""
    task, forbidden = open_task("one"), open_task("two")

    async def scenario():
        recorded = await record(task, "working", "completed")
        after_end = await record(task, "working")
        with pytest.raises(services.InvalidTransition):
            await record(forbidden, "working", "submitted")
        return recorded, after_end

    recorded, after_end = asyncio.run(scenario())
    assert recorded == [[1, "working"], [2, "completed"]]
    assert [task.state, task.last_sequence, task.owner] == ["completed", 2, ""]
    assert stored(task) == ["completed", 2, "", [1, 2]]
    assert after_end == []
    assert stored(forbidden) == ["working", 1, "process-a", [1]]
    assert (forbidden.state, forbidden.last_sequence) == ("working", 1)
    assert hops == []


def test_a_write_that_lost_the_race_is_decided_again_in_a_database_thread(hops):
    stale = open_task()
    fresh = Task.objects.get(pk=stale.pk)
    services.task_record(task=fresh, event=services.status_event(fresh, "working"))
    assert asyncio.run(record(stale, "completed")) == [[2, "completed"]]
    assert stored(stale) == ["completed", 2, "", [1, 2]]
    assert hops == ["_record_again"]


def test_while_another_connection_writes_a_database_thread_waits_and_the_loop_goes_on(hops):
    """The loop does not wait for the write lock: the write goes to a database thread, which
    makes it once the other writer is done, and the loop runs other work meanwhile."""
    task = open_task()
    other = sqlite3.connect(database_file(), isolation_level=None, check_same_thread=False)
    other.execute("BEGIN IMMEDIATE")

    async def scenario():
        writing = asyncio.ensure_future(record(task, "working", "completed"))
        ticks = 0
        started = time.monotonic()
        while time.monotonic() - started < 0.3:
            await asyncio.sleep(0.01)
            ticks += 1
        assert not writing.done()
        other.execute("ROLLBACK")
        return await asyncio.wait_for(writing, 10), ticks

    try:
        recorded, ticks = asyncio.run(scenario())
    finally:
        other.close()
    assert ticks >= 10  # about 30 without a wait on the loop
    assert recorded == [[1, "working"], [2, "completed"]]
    assert stored(task) == ["completed", 2, "", [1, 2]]
    assert hops == ["_record_decided"]


@pytest.mark.parametrize(
    "failing",
    ["the same sequence twice", "an event of no task"],  # fails at its INSERT, at the COMMIT
)
def test_a_failed_write_is_rolled_back_and_raised_as_djangos_error_and_the_next_one_is_made(
    failing,
):
    task = open_task()
    first = services.status_event(task, "working")

    def write(events: list[TaskEvent]) -> bool:
        update = rows.update_query(
            Task,
            values={"last_sequence": len(events), "state": "working"},
            where={"pk": task.pk, "last_sequence": task.last_sequence},
        )
        return loop_sqlite.update_then_insert(update, rows.insert_many_queries(events))

    if failing == "the same sequence twice":
        bad = [TaskEvent(task_id=task.pk, sequence=1, payload=first) for _ in range(2)]
    else:
        bad = [TaskEvent(task_id="no-such-task", sequence=1, payload=first)]

    async def scenario():
        with pytest.raises(utils.IntegrityError):
            write(bad)
        unchanged = await asyncio.to_thread(stored, task)
        return unchanged, write([TaskEvent(task_id=task.pk, sequence=1, payload=first)])

    unchanged, moved = asyncio.run(scenario())
    assert unchanged == ["submitted", 0, "process-a", []]
    assert moved is True
    assert stored(task) == ["working", 1, "process-a", [1]]


def test_a_task_written_by_the_loop_reads_back_as_one_written_by_a_database_thread(hops):
    together, apart = open_task("loop"), open_task("thread")

    def burst(task: Task) -> list[tuple[dict, str, str]]:
        chunks = [
            {
                "artifactUpdate": {
                    "taskId": task.pk,
                    "contextId": task.context_id,
                    "append": index > 0,
                    "artifact": {"artifactId": "story", "parts": [{"text": f"chunk {index} "}]},
                }
            }
            for index in range(3)
        ]
        working = services.status_event(task, "working")
        done = services.status_event(task, "completed")
        done["statusUpdate"]["status"]["message"] = {
            "messageId": "end",
            "role": "ROLE_AGENT",
            "parts": [{"text": "all done"}],
        }
        return [(working, "up-task", "up-context"), *((c, "", "") for c in chunks), (done, "", "")]

    asyncio.run(services.atask_record_many(task=together, events=burst(together)))
    services.task_record_many(task=apart, events=burst(apart))
    assert hops == []
    loop_row, thread_row = Task.objects.get(pk=together.pk), Task.objects.get(pk=apart.pk)
    for field in (
        "state",
        "last_sequence",
        "artifacts",
        "status_message",
        "upstream_task_id",
        "upstream_context_id",
        "owner",
        "history",
    ):
        mine, theirs = getattr(loop_row, field), getattr(thread_row, field)
        assert str(mine).replace(together.pk, "ID") == str(theirs).replace(apart.pk, "ID"), field
    for field in ("status_timestamp", "updated_at", "completed_at"):
        assert getattr(loop_row, field) is not None
        assert abs(getattr(loop_row, field) - getattr(thread_row, field)).total_seconds() < 5
    loop_events, thread_events = (
        list(TaskEvent.objects.filter(task_id=t.pk).order_by("sequence").values("kind", "payload"))
        for t in (together, apart)
    )
    assert str(loop_events).replace(together.pk, "ID") == str(thread_events).replace(apart.pk, "ID")
    assert [e["kind"] for e in loop_events] == [
        "status",
        "artifact",
        "artifact",
        "artifact",
        "status",
    ]


def test_while_the_database_threads_have_work_the_loop_leaves_the_write_to_them(hops):
    task = open_task()
    release = threading.Event()

    def waiting() -> None:
        release.wait(10)

    async def scenario():
        threads = database_threads.threads()
        assert threads.idle()
        held = database_threads.run(waiting)
        writing = asyncio.ensure_future(record(task, "working"))
        await asyncio.sleep(0.1)
        assert not threads.idle() and not writing.done()
        assert not loop_sqlite.may_write()
        release.set()
        await held
        recorded = await asyncio.wait_for(writing, 10)
        await asyncio.sleep(0.05)  # the thread says it is done once the queue is empty
        assert loop_sqlite.may_write()
        return recorded, threads.idle(), await record(task, "completed")

    recorded, idle_after, then = asyncio.run(scenario())
    assert recorded == [[1, "working"]]
    assert idle_after
    assert then == [[2, "completed"]]
    assert stored(task) == ["completed", 2, "", [1, 2]]
    assert hops == ["waiting", "_record_decided"]  # the second event by the loop again


def test_a_write_that_moved_nothing_writes_nothing():
    task = open_task()
    update = rows.update_query(Task, values={"last_sequence": 5}, where={"pk": "no-such-task"})
    event = TaskEvent(task_id=task.pk, sequence=1, payload={})

    async def scenario():
        return loop_sqlite.update_then_insert(update, rows.insert_many_queries([event]))

    assert asyncio.run(scenario()) is False
    assert stored(task) == ["submitted", 0, "process-a", []]


def test_the_loop_never_checkpoints_and_asks_a_database_thread_every_so_many_commits(
    monkeypatch, hops, caplog
):
    monkeypatch.setattr(loop_sqlite, "CHECKPOINT_EVERY", 3)
    task = open_task()

    async def scenario():
        for index in range(7):
            await record(task, "working" if index < 6 else "completed")
            await asyncio.sleep(0.05)  # the checkpoint asked for is made meanwhile
        loop_db = loop_sqlite._connections.get()._db
        return loop_db.execute("PRAGMA wal_autocheckpoint").fetchone()[0]

    assert asyncio.run(scenario()) == 0
    assert hops == ["_checkpoint", "_checkpoint"]
    assert "checkpoint" not in caplog.text  # made, not failed
    assert stored(task)[1] == 7


@pytest.mark.parametrize(
    ("name", "init_command", "writes"),
    [
        ("file", "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL", True),
        ("file", "PRAGMA journal_mode=WAL; PRAGMA synchronous=OFF", True),
        ("file", "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL", False),
        ("file", "PRAGMA journal_mode=DELETE; PRAGMA synchronous=NORMAL", False),
        (":memory:", "PRAGMA journal_mode=WAL", False),
        ("file:relay?mode=memory&cache=shared", "PRAGMA journal_mode=WAL", False),
    ],
)
def test_the_loop_writes_only_to_a_file_in_wal_mode_whose_commits_do_not_wait_for_the_disk(
    tmp_path, name, init_command, writes
):
    settings = {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": str(tmp_path / "relay.sqlite3") if name == "file" else name,
        "OPTIONS": {"init_command": init_command},
    }
    db = loop_sqlite._connect(settings)
    assert (db is not None) is writes
    if db is not None:
        assert db.execute("PRAGMA foreign_keys").fetchone() == (1,)
        db.close()


def test_where_the_loop_may_not_write_a_database_thread_records_the_events(monkeypatch, hops):
    connect = loop_sqlite._connect

    def waiting_for_the_disk(settings):
        options = {**settings["OPTIONS"], "init_command": "PRAGMA synchronous=FULL"}
        return connect({**settings, "OPTIONS": options})

    monkeypatch.setattr(loop_sqlite, "_connect", waiting_for_the_disk)
    task = open_task()

    async def scenario():
        assert loop_sqlite.may_write()  # not known yet
        first = await record(task, "working")
        assert not loop_sqlite.may_write()  # known since the first write
        return [first, await record(task, "completed")]

    assert asyncio.run(scenario()) == [[[1, "working"]], [[2, "completed"]]]
    assert stored(task) == ["completed", 2, "", [1, 2]]
    assert hops == ["_record_decided", "_record_decided"]
