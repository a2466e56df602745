"""relay_project.database_threads: the threads a relay process does its database work in,
shared by its direct hops and asgiref's sync_to_async."""

from __future__ import annotations

import asyncio
import concurrent.futures
import gc
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

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


def test_the_threads_are_idle_only_while_no_work_waits_or_runs():
    threads = DatabaseThreads(2)
    release = threading.Event()
    started = threading.Barrier(3, timeout=5)

    def held() -> None:
        started.wait()
        release.wait(5)

    def settled() -> bool:
        deadline = time.monotonic() + 5
        while not threads.idle() and time.monotonic() < deadline:
            time.sleep(0.001)
        return threads.idle()

    try:
        assert threads.idle()
        running = [threads.submit(held) for _ in range(2)]
        started.wait()
        assert not threads.idle()  # both threads run work, none waits
        waiting = threads.submit(where)
        assert not threads.idle()
        release.set()
        concurrent.futures.wait([*running, waiting], timeout=5)
        assert settled()
        for _ in range(200):  # short work, one piece after the other
            threads.submit(where).result(timeout=5)
            assert settled()
    finally:
        release.set()
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


async def test_hops_from_many_callers_at_once_each_get_their_own_result():
    threads = DatabaseThreads(1)
    try:
        results = await asyncio.gather(*(threads.run(pow, n, 2) for n in range(500)))
        assert results == [n * n for n in range(500)]
    finally:
        threads.shutdown()


def test_work_runs_in_the_order_it_was_handed_over():
    threads = DatabaseThreads(1)
    done: list[int] = []
    try:
        futures = [threads.submit(done.append, n) for n in range(200)]
        concurrent.futures.wait(futures, timeout=5)
        assert done == list(range(200))
    finally:
        threads.shutdown()


def test_work_handed_over_while_the_doorbell_pipe_is_full_still_runs():
    """Each hand-over rings with a byte in a pipe; while the thread is busy they pile up
    past what the pipe holds, and the rings that find it full are dropped: the work behind
    them runs all the same, and handing over never blocks."""
    threads = DatabaseThreads(1)
    release = threading.Event()
    count = 100_000  # more than a pipe's 64 KiB of rings
    try:
        threads.submit(release.wait, 5)
        started = time.monotonic()
        futures = [threads.submit(int, n) for n in range(count)]
        assert time.monotonic() - started < 10
        release.set()
        concurrent.futures.wait(futures, timeout=30)
        assert [future.result() for future in futures[-3:]] == [count - 3, count - 2, count - 1]
        assert all(future.done() for future in futures)
    finally:
        release.set()
        threads.shutdown()


def test_each_event_loop_gets_the_results_of_its_own_hops():
    threads = DatabaseThreads(2)

    def in_a_loop_of_its_own(base: int) -> list[int]:
        async def hops() -> list[int]:
            return [await threads.run(lambda n=n: base + n) for n in range(50)]

        return asyncio.run(hops())

    try:
        with concurrent.futures.ThreadPoolExecutor(3) as pool:
            answers = list(pool.map(in_a_loop_of_its_own, (0, 1000, 2000)))
        assert answers == [[base + n for n in range(50)] for base in (0, 1000, 2000)]
    finally:
        threads.shutdown()


def test_the_pipes_of_event_loops_that_are_gone_are_closed():
    threads = DatabaseThreads(1)

    async def one_hop() -> None:
        await threads.run(where)

    def open_descriptors() -> int:
        return len(os.listdir("/proc/self/fd"))

    try:
        asyncio.run(one_hop())
        gc.collect()
        before = open_descriptors()
        for _ in range(40):
            asyncio.run(one_hop())
        gc.collect()
        assert open_descriptors() <= before + 2
    finally:
        threads.shutdown()


EXIT_WHILE_AT_WORK = """
import atexit, threading, time
released = threading.Event()

def last_at_exit():
    released.set()  # the work ends once the interpreter's other exit handlers ran
    time.sleep(0.2)

atexit.register(last_at_exit)  # before any finalizer: runs after the finalizers' own
from relay_project.database_threads import DatabaseThreads
DatabaseThreads(1).submit(released.wait)
"""


def test_a_thread_still_at_work_when_the_process_exits_ends_quietly():
    """The pipes are left open at the interpreter's exit: a thread whose work ends then
    waits on its doorbell again, as at any other time."""
    ended = subprocess.run(
        [sys.executable, "-c", EXIT_WHILE_AT_WORK],
        capture_output=True,
        text=True,
        timeout=30,
        cwd=Path(__file__).resolve().parents[1],
    )
    assert ended.returncode == 0
    assert ended.stderr == ""


def test_silencing_the_doorbell_takes_every_byte_waiting_and_the_next_ring_is_heard():
    """More rings than one read takes (a read of less than it asked for emptied the pipe)."""
    doorbell = database_threads._Doorbell(nonblocking_reads=True)
    for _ in range(10_000):
        doorbell.ring()
    doorbell.silence()
    with pytest.raises(BlockingIOError):
        os.read(doorbell.reading, 1)
    doorbell.ring()
    assert os.read(doorbell.reading, 4096) == b"\0"
