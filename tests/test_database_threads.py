"""relay_project.database_threads: the threads a relay process does its database work in,
shared by its direct hops and asgiref's sync_to_async."""

from __future__ import annotations

import asyncio
import threading

import pytest
from asgiref.sync import sync_to_async
from django.db import connection

from relay_project import database_threads
from relay_project.database_threads import DatabaseThreads


def where() -> str:
    return threading.current_thread().name


async def test_a_hop_runs_in_a_database_thread_and_returns_what_the_function_returns():
    threads = DatabaseThreads(1, name="hop-test")
    try:
        assert await threads.run(where) == "hop-test-0"
        assert await threads.run(divmod, 7, 2) == (3, 1)
    finally:
        threads.shutdown()


async def test_a_hop_raises_what_the_function_raised():
    threads = DatabaseThreads(1)
    try:
        with pytest.raises(ZeroDivisionError):
            await threads.run(divmod, 1, 0)
        assert await threads.run(divmod, 4, 2) == (2, 0)  # the thread goes on
    finally:
        threads.shutdown()


async def test_a_cancelled_caller_stops_waiting_and_the_function_still_runs_to_its_end():
    threads = DatabaseThreads(1)
    release, finished = threading.Event(), threading.Event()

    def slow():
        release.wait(5)
        finished.set()

    try:
        waiting = asyncio.ensure_future(threads.run(slow))
        await asyncio.sleep(0.05)
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        release.set()
        assert await asyncio.to_thread(finished.wait, 5)
    finally:
        threads.shutdown()


async def test_several_threads_work_at_once():
    threads = DatabaseThreads(2)
    both = threading.Barrier(2, timeout=5)
    try:
        names = await asyncio.gather(
            threads.run(lambda: (both.wait(), where())[1]),
            threads.run(lambda: (both.wait(), where())[1]),
        )
        assert sorted(names) == ["relay-database-0", "relay-database-1"]
    finally:
        threads.shutdown()


def test_work_submitted_after_shutdown_is_refused():
    threads = DatabaseThreads(1)
    threads.shutdown()
    with pytest.raises(RuntimeError):
        threads.submit(where)


@pytest.mark.django_db(transaction=True)
async def test_sync_to_async_and_direct_hops_share_the_threads_and_their_connection():
    threads = database_threads.threads()

    def thread_and_connection():
        return where(), id(connection.connection) if connection.connection else None

    await threads.run(lambda: connection.ensure_connection())
    direct = await database_threads.run(thread_and_connection)
    through_asgiref = await sync_to_async(thread_and_connection)()
    assert direct == through_asgiref
    assert direct[0].startswith("relay-database-") and direct[1] is not None
