"""The event loop's own PostgreSQL connection, and the event writes it carries: on PostgreSQL an
A2A event is recorded from the loop in one statement, with no database thread; a write that
lost the compare-and-set is decided again in a database thread. Against the machine's
PostgreSQL; skipped, saying why, where it is absent."""

from __future__ import annotations

import asyncio
import hashlib
import json
import time

import psycopg
import pytest
from django.db import utils

from relay_project import loop_database
from tests.live import POSTGRES_ADMIN_URL, free_port, manage, named_postgres, relay_env

pytestmark = pytest.mark.production


@pytest.fixture
def connection_name(monkeypatch) -> str:
    """The loop connections of this test, by their application name."""
    name, conninfo = named_postgres("loop-test")
    monkeypatch.setattr(loop_database, "conninfo", lambda application_name: conninfo)
    return name


async def backend() -> int:
    (pid,) = await loop_database.fetchone("SELECT pg_backend_pid()", [])
    return pid


async def test_statements_share_the_loops_connection_and_return_their_first_row(
    connection_name,
):
    first = await backend()
    assert await backend() == first
    assert await loop_database.fetchone("SELECT %s::int + 1", [41]) == (42,)
    assert await loop_database.fetchone("SELECT 1 WHERE false", []) is None


async def test_a_failed_statement_raises_djangos_error_and_the_next_gets_a_new_connection(
    connection_name,
):
    first = await backend()
    with pytest.raises(utils.ProgrammingError):
        await loop_database.fetchone("SELECT * FROM no_such_table", [])
    assert await backend() != first


async def terminate(pid: int) -> None:
    async with await psycopg.AsyncConnection.connect(POSTGRES_ADMIN_URL, autocommit=True) as admin:
        await admin.execute("SELECT pg_terminate_backend(%s)", [pid])


async def test_a_connection_the_server_ended_while_idle_is_replaced_before_the_next_statement(
    connection_name,
):
    ended = await backend()
    await terminate(ended)
    await asyncio.sleep(0.2)  # the server's farewell reaches the socket
    assert await loop_database.fetchone("SELECT 1", []) == (1,)
    assert await backend() != ended


async def test_a_connection_ended_while_the_loop_was_busy_is_replaced_before_the_next_statement(
    connection_name,
):
    """The server's farewell is on the socket, and the loop has not run since to read it."""
    ended = await backend()
    with psycopg.connect(POSTGRES_ADMIN_URL, autocommit=True) as admin:  # blocks the loop
        admin.execute("SELECT pg_terminate_backend(%s)", [ended])
    time.sleep(0.2)
    assert await loop_database.fetchone("SELECT 1", []) == (1,)
    assert await backend() != ended


async def statement_under_way(sql: str) -> asyncio.Future:
    """``sql`` sent on the loop's connection, and running there."""
    running = asyncio.ensure_future(loop_database.fetchone(sql, []))
    await asyncio.sleep(0.3)
    assert not running.done()
    return running


async def test_a_connection_lost_mid_statement_fails_it_and_the_next_gets_a_new_one(
    connection_name,
):
    lost = await backend()
    sleeping = await statement_under_way("SELECT pg_sleep(10)")
    await terminate(lost)
    with pytest.raises(utils.OperationalError):
        await asyncio.wait_for(sleeping, 5)
    assert await backend() != lost


async def test_a_caller_cancelled_mid_statement_leaves_no_connection_waiting_on_it(
    connection_name,
):
    first = await backend()
    sleeping = await statement_under_way("SELECT pg_sleep(10)")
    sleeping.cancel()
    with pytest.raises(asyncio.CancelledError):
        await sleeping
    assert await asyncio.wait_for(backend(), 5) != first


async def test_statements_from_several_callers_take_turns_on_the_connection(connection_name):
    pids = await asyncio.gather(*(backend() for _ in range(8)))
    assert len(set(pids)) == 1


RECORDING = """
import asyncio, json, psycopg
from relay_project import database_threads, loop_database
from registry.services import api_key_create
from tasks_app import services, streams
from tasks_app.models import Task, TaskEvent

def open_task(name):
    caller, _ = api_key_create(name=name)
    return services.task_open(
        caller=caller, target_kind="agent", target_id="x", agent_id=None,
        message={"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "hi"}]},
        client_version="1.0", owner="process-a",
    )

def stored(task):
    row = Task.objects.get(pk=task.pk)
    events = TaskEvent.objects.filter(task_id=task.pk).values_list("sequence", flat=True)
    return [row.state, row.last_sequence, row.owner, sorted(events)]

hops = []
threads_run = database_threads.run
def counted(function, *args):
    hops.append(function.__name__)
    return threads_run(function, *args)
database_threads.run = counted

def record(task, *states):
    events = [(services.status_event(task, state), "", "") for state in states]
    recorded = asyncio.run(services.atask_record_many(task=task, events=events))
    return [[done.sequence, done.state] for done in recorded]

listener = psycopg.connect(loop_database.conninfo("recording-test"), autocommit=True)
listener.execute(f"LISTEN {streams.NOTIFY_CHANNEL}")
out = {}

task = open_task("one")
out["recorded"] = record(task, "working", "completed")
out["in_memory"] = [task.state, task.last_sequence, task.owner]
out["stored"] = stored(task)
out["hops"] = list(hops)
out["notify"] = next(listener.notifies(timeout=5)).payload.split(" ")[:3]
out["after_end"] = record(task, "working")

hops.clear()
stale = open_task("two")
fresh = Task.objects.get(pk=stale.pk)
services.task_record(task=fresh, event=services.status_event(fresh, "working"))
out["raced"] = record(stale, "completed")
out["raced_stored"] = stored(stale)
out["raced_hops"] = list(hops)

hops.clear()
forbidden = open_task("three")
try:
    record(forbidden, "working", "submitted")
except services.InvalidTransition:
    out["forbidden"] = [stored(forbidden), forbidden.state, forbidden.last_sequence]
out["forbidden_hops"] = list(hops)
print(json.dumps(out))
"""


def test_on_postgresql_events_are_recorded_from_the_loop_in_one_statement(
    tmp_path,
    services,
):
    """In the production profile: a burst recorded from async code moves the task and stores
    its events from the loop (no database thread), ends the task's ownership, and announces
    the end; a task ended meanwhile records nothing more; a write that lost the race to
    another writer is decided again, in a database thread, on the task as it then stands;
    a forbidden move is raised once the events before it are stored."""
    env = relay_env(tmp_path, **services)
    manage(env, "migrate", "--verbosity=0")
    out = json.loads(manage(env, "shell", "-c", RECORDING).strip().splitlines()[-1])
    assert out["recorded"] == [[1, "working"], [2, "completed"]]
    assert out["in_memory"] == ["completed", 2, ""]
    assert out["stored"] == ["completed", 2, "", [1, 2]]
    assert out["hops"] == []
    assert out["notify"][1:] == ["2", "completed"]
    assert out["after_end"] == []
    assert out["raced"] == [[2, "completed"]]
    assert out["raced_stored"] == ["completed", 2, "", [1, 2]]
    assert out["raced_hops"] == ["_record_again"]
    assert out["forbidden"] == [["working", 1, "process-a", [1]], "working", 1]
    assert out["forbidden_hops"] == []


async def running_query(pid: int) -> str:
    """The statement the backend ``pid`` is running now ("" when it is idle)."""
    async with await psycopg.AsyncConnection.connect(POSTGRES_ADMIN_URL, autocommit=True) as admin:
        cursor = await admin.execute(
            "SELECT query FROM pg_stat_activity WHERE pid = %s AND state = 'active'", [pid]
        )
        found = await cursor.fetchone()
    return found[0] if found else ""


async def test_a_statement_sent_runs_on_the_server_before_its_answer_is_awaited(
    connection_name,
):
    pid = await backend()
    answer = await loop_database.sent("SELECT pg_sleep(0.5), 7", [])
    assert "pg_sleep(0.5)" in await running_query(pid)
    assert not answer.done()
    assert await loop_database.fetchone("SELECT 8", []) == (8,)
    assert answer.done()  # the later statement ran after it
    assert (await answer)[1] == 7


async def test_a_statement_sent_first_on_a_new_connection_is_on_the_server_when_sent_returns(
    connection_name,
):
    answer = await loop_database.sent("SELECT pg_sleep(0.5), pg_backend_pid()", [])
    async with await psycopg.AsyncConnection.connect(POSTGRES_ADMIN_URL, autocommit=True) as admin:
        cursor = await admin.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s "
            "AND state = 'active' AND query LIKE %s",
            [connection_name, "%pg_sleep(0.5)%"],
        )
        assert await cursor.fetchone() == (1,)
    await answer


async def test_the_error_of_a_statement_sent_comes_from_its_answer(connection_name):
    answer = await loop_database.sent("SELECT * FROM no_such_table", [])
    with pytest.raises(utils.ProgrammingError):
        await answer
    assert await loop_database.fetchone("SELECT 1", []) == (1,)


async def test_a_statement_sent_with_no_server_to_take_it_fails_from_its_answer(monkeypatch):
    port = free_port()  # nothing listens on it
    monkeypatch.setattr(
        loop_database,
        "conninfo",
        lambda application_name: f"host=127.0.0.1 port={port} dbname=none connect_timeout=2",
    )
    answer = await asyncio.wait_for(loop_database.sent("SELECT 1", []), timeout=5)
    with pytest.raises(utils.OperationalError):
        await answer


@pytest.fixture(params=[5, None], ids=["prepared", "unprepared"])
def preparing(request, monkeypatch, connection_name) -> bool:
    """The database's ``prepare_threshold`` option as production sets it (statements prepared
    on the server) and as a pooler that cannot keep them needs it (None)."""
    from django.db import DEFAULT_DB_ALIAS, connections

    database = connections[DEFAULT_DB_ALIAS].settings_dict
    options = {**(database.get("OPTIONS") or {}), "prepare_threshold": request.param}
    monkeypatch.setitem(database, "OPTIONS", options)
    return request.param is not None


async def prepared_here() -> int:
    (count,) = await loop_database.fetchone("SELECT count(*) FROM pg_prepared_statements", [])
    return count


async def test_statements_are_prepared_once_unless_the_database_options_say_not_to(preparing):
    for index in range(3):
        assert await loop_database.fetchone("SELECT %s::int * 2", [index]) == (index * 2,)
    # The count itself is prepared too when preparing: the doubling and the count.
    assert await prepared_here() == (2 if preparing else 0)
    assert await prepared_here() == (2 if preparing else 0)


async def test_a_statement_whose_parameter_types_change_is_answered_for_each(preparing):
    sql = "SELECT %s::int IS NULL, %s::text"
    assert await loop_database.fetchone(sql, [None, "a"]) == (True, "a")
    assert await loop_database.fetchone(sql, [7, None]) == (False, None)
    assert await loop_database.fetchone(sql, [None, "b"]) == (True, "b")


async def test_placeholders_are_numbered_and_a_doubled_percent_is_a_percent(preparing):
    assert await loop_database.fetchone("SELECT %s::text || '%%', %s::int", ["50", 1]) == (
        "50%",
        1,
    )


async def test_a_statement_larger_than_the_socket_takes_at_once_is_written_whole(preparing):
    """Several megabytes of parameters: written as the socket drains, then answered."""
    text = "x" * (8 * 1024 * 1024)
    length = loop_database.fetchone("SELECT length(%s::text)", [text])
    assert await asyncio.wait_for(length, 30) == (len(text),)
    answer = await asyncio.wait_for(loop_database.sent("SELECT md5(%s::text)", [text]), 30)
    (digest,) = await asyncio.wait_for(answer, 30)
    assert digest == hashlib.md5(text.encode()).hexdigest()


async def test_a_statement_sent_still_runs_when_its_sender_stops_waiting_for_it(preparing):
    """The sender is cancelled while the statement is being written: the statement is
    written whole and run, and the connection goes on to serve the next one."""
    first = await backend()
    text = "x" * (8 * 1024 * 1024)
    sending = asyncio.ensure_future(loop_database.sent("SELECT length(%s::text)", [text]))
    await asyncio.sleep(0)
    sending.cancel()
    with pytest.raises(asyncio.CancelledError):
        await sending
    assert await asyncio.wait_for(backend(), 30) == first


async def test_statements_on_the_reused_cursor_each_get_their_own_answer(preparing):
    """The connection serves statement after statement, parameters of every type adapted
    each time, and a failed statement leaves a fresh connection for the next."""
    for index in range(3):
        row = await loop_database.fetchone(
            "SELECT %s::int, %s::text, %s::jsonb", [index, f"text {index}", f'{{"n": {index}}}']
        )
        assert row == (index, f"text {index}", {"n": index})
    with pytest.raises(utils.DataError):
        await loop_database.fetchone("SELECT %s::int / 0", [1])
    assert await loop_database.fetchone("SELECT %s::text", ["after"]) == ("after",)


STORED_AS_SENT = """
import asyncio, json, os
from registry.services import api_key_create
from tasks_app import services
from tasks_app.models import Task

caller, _ = api_key_create(name="sender")
task = services.task_open(
    caller=caller, target_kind="agent", target_id="x", agent_id=None,
    message={"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "hi"}]},
    client_version="1.0", owner="process-a", store=False,
)
assert not Task.objects.filter(pk=task.pk).exists()

async def send_and_die():
    await services.atask_store_sent(task)
    print(json.dumps({"task": task.pk}), flush=True)
    os._exit(0)  # without reading the INSERT's answer

asyncio.run(send_and_die())
"""


def test_a_task_sent_with_its_message_is_stored_even_when_its_process_dies_at_once(
    tmp_path, services
):
    """The promise that lets the agent be called before the INSERT's answer: once
    ``atask_store_sent`` returned, the task is the server's to store, whatever becomes of
    the process that sent it."""
    env = relay_env(tmp_path, **services)
    manage(env, "migrate", "--verbosity=0")
    sent = json.loads(manage(env, "shell", "-c", STORED_AS_SENT).strip().splitlines()[-1])
    found = manage(
        env,
        "shell",
        "-c",
        "from tasks_app.models import Task; "
        f"print(list(Task.objects.filter(pk={sent['task']!r}).values_list('state', 'owner')))",
    )
    assert found.strip().splitlines()[-1] == "[('submitted', 'process-a')]"
