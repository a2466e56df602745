"""The threads that do a relay process's database work.

Django's ORM is synchronous and its connections belong to threads, so async code hops to a
thread for each piece of database work and back. asgiref's ``sync_to_async`` hops through
``loop.run_in_executor``, carrying context variables both ways: about 110 µs of CPU a hop
on the machine the benchmarks run on, where the hop itself needs about 55. An A2A call makes
two or three hops, and a stream one for every few events.

A relay process runs its database work in the RELAY_DATABASE_THREADS threads of one
``DatabaseThreads``, created at first use: asgiref's thread-sensitive ``sync_to_async`` uses
them as its single-thread executor, and ``run`` hops to them directly, for the hops every
A2A call makes. Both share the threads, and so the threads' database connections.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import queue
import threading
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


class DatabaseThreads(concurrent.futures.Executor):
    """``count`` threads taking work from one queue, in order."""

    def __init__(self, count: int, *, name: str = "relay-database") -> None:
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._closed = False
        self._threads = [
            threading.Thread(target=self._work, name=f"{name}-{index}", daemon=True)
            for index in range(max(1, count))
        ]
        for thread in self._threads:
            thread.start()

    def run(self, function: Callable[..., T], /, *args: Any) -> asyncio.Future[T]:
        """Awaitable ``function(*args)`` in one of the threads: as ``sync_to_async(function)``
        with thread_sensitive, but the function runs without the caller's context variables
        (and sets none of the caller's). A caller cancelled meanwhile stops waiting; the
        function runs to its end."""
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        self._put(_settle_on_loop, loop, future, function, args)
        return future

    def submit(self, fn, /, *args, **kwargs) -> concurrent.futures.Future:
        """The executor's own interface, which asgiref uses."""
        future: concurrent.futures.Future = concurrent.futures.Future()
        self._put(_settle_future, future, fn, args, kwargs)
        return future

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        self._closed = True
        for _ in self._threads:
            self._queue.put(None)
        if wait:
            for thread in self._threads:
                if thread is not threading.current_thread():
                    thread.join()

    def _put(self, *work: Any) -> None:
        if self._closed:
            raise RuntimeError("the database threads were shut down")
        self._queue.put(work)

    def _work(self) -> None:
        while (work := self._queue.get()) is not None:
            work[0](*work[1:])
            del work


def _settle_on_loop(loop: asyncio.AbstractEventLoop, future: asyncio.Future, function, args):
    try:
        outcome = (function(*args), None)
    except BaseException as error:  # noqa: BLE001  (handed to the caller, as sync_to_async does)
        outcome = (None, error)
    with contextlib.suppress(RuntimeError):  # the loop closed meanwhile: nobody waits
        loop.call_soon_threadsafe(_settle, future, *outcome)


def _settle(future: asyncio.Future, result: Any, error: BaseException | None) -> None:
    if future.cancelled():
        return
    if error is None:
        future.set_result(result)
    else:
        future.set_exception(error)


def _settle_future(future: concurrent.futures.Future, fn, args, kwargs) -> None:
    if not future.set_running_or_notify_cancel():
        return
    try:
        result = fn(*args, **kwargs)
    except BaseException as error:  # noqa: BLE001
        future.set_exception(error)
    else:
        future.set_result(result)


_threads: DatabaseThreads | None = None
_creating = threading.Lock()


def threads() -> DatabaseThreads:
    """This process's database threads, made at first use and given to asgiref as the
    executor of its thread-sensitive ``sync_to_async``."""
    global _threads
    if _threads is None:
        with _creating:
            if _threads is None:
                from asgiref.sync import SyncToAsync
                from django.conf import settings

                _threads = DatabaseThreads(settings.RELAY_DATABASE_THREADS)
                SyncToAsync.single_thread_executor = _threads
    return _threads


def run(function: Callable[..., T], /, *args: Any) -> asyncio.Future[T]:
    """``function(*args)`` in a database thread of this process (``DatabaseThreads.run``)."""
    return threads().run(function, *args)
