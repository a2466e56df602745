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

Each direction of a direct hop wakes the other side by writing a byte to a pipe. Python
releases the GIL while it writes, so the side woken finds the GIL free. Handing over through
a queue and uvloop's ``call_soon_threadsafe`` wakes the other thread while the GIL is still
held: on another core that thread wakes only to wait for the GIL, and is woken a second time
when it gets it. In the gateway bench at one call at a time that made each hop cost about
35 µs in the embedded profile; through pipes, about 15.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import contextlib
import os
import threading
import weakref
from collections.abc import Callable
from typing import Any, TypeVar

from relay_project.per_loop import PerLoop

T = TypeVar("T")


class DatabaseThreads(concurrent.futures.Executor):
    """``count`` threads taking work from one queue, in order."""

    def __init__(self, count: int, *, name: str = "relay-database") -> None:
        self._work_queue: collections.deque = collections.deque()
        self._doorbell = _Doorbell(nonblocking_reads=False)
        self._closed = False
        self._working = [False] * max(1, count)
        """Per thread, whether it is taking or running work (each thread writes its own)."""
        self._threads = [
            threading.Thread(target=self._work, args=(index,), name=f"{name}-{index}", daemon=True)
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
        self._put(_settle_on_loop, _inboxes.get(), future, function, args)
        return future

    def submit(self, fn, /, *args, **kwargs) -> concurrent.futures.Future:
        """The executor's own interface, which asgiref uses."""
        future: concurrent.futures.Future = concurrent.futures.Future()
        self._put(_settle_future, future, fn, args, kwargs)
        return future

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        self._closed = True
        for _ in self._threads:
            self._work_queue.append(None)
            self._doorbell.ring()
        if wait:
            for thread in self._threads:
                if thread is not threading.current_thread():
                    thread.join()

    def idle(self) -> bool:
        """Whether no work waits for the threads and none runs in them: until the caller's
        thread puts some, nothing of theirs touches the database."""
        return not self._work_queue and not any(self._working)

    def _put(self, *work: Any) -> None:
        if self._closed:
            raise RuntimeError("the database threads were shut down")
        self._work_queue.append(work)
        self._doorbell.ring()

    def _work(self, index: int) -> None:
        # A ring wakes one thread, which runs work until none is left: a ring that was
        # lost to a full pipe (thousands of hops waiting) never strands any work. The thread
        # says it works before it takes any, so that work it took is never unaccounted for.
        while True:
            self._doorbell.wait()
            self._working[index] = True
            while True:
                try:
                    work = self._work_queue.popleft()
                except IndexError:
                    break
                if work is None:
                    return
                work[0](*work[1:])
                del work
            self._working[index] = False


class _Doorbell:
    """A pipe: ``ring`` writes a byte without waiting (a full pipe already wakes its
    reader), ``wait`` blocks until a byte comes and takes one. Both release the GIL while
    in the system call. The pipe is closed when the doorbell is garbage, or by the system when
    the process ends."""

    def __init__(self, *, nonblocking_reads: bool) -> None:
        self.reading, self._writing = os.pipe()
        os.set_blocking(self._writing, False)
        os.set_blocking(self.reading, not nonblocking_reads)
        # Not at the interpreter's exit, which closes them anyway: a database thread still at
        # work then would read or ring a closed descriptor, and die saying so.
        weakref.finalize(self, _close, self.reading, self._writing).atexit = False

    def ring(self) -> None:
        with contextlib.suppress(BlockingIOError):
            os.write(self._writing, b"\0")

    def wait(self) -> None:
        os.read(self.reading, 1)

    def silence(self) -> None:
        """Takes every byte waiting (reads that never block). A read that returns less than
        it asked for emptied the pipe: no second read, to be refused."""
        with contextlib.suppress(BlockingIOError):
            while len(os.read(self.reading, 4096)) == 4096:
                pass


def _close(*descriptors: int) -> None:
    for descriptor in descriptors:
        with contextlib.suppress(OSError):
            os.close(descriptor)


class _LoopInbox:
    """The results of an event loop's hops, handed to it by the database threads: the loop
    reads its doorbell's pipe and settles every future waiting in the inbox."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._settled: collections.deque = collections.deque()
        self._doorbell = _Doorbell(nonblocking_reads=True)
        # The loop's reader holds the inbox (and its pipe) while the loop lives; a thread
        # still settling a hop of a loop already gone holds it until it is done.
        loop.add_reader(self._doorbell.reading, self._deliver)

    def put(self, future: asyncio.Future, result: Any, error: BaseException | None) -> None:
        """From a database thread: hands the outcome to the loop and wakes it."""
        self._settled.append((future, result, error))
        self._doorbell.ring()

    def _deliver(self) -> None:
        self._doorbell.silence()
        while self._settled:
            _settle(*self._settled.popleft())


_inboxes: PerLoop[_LoopInbox] = PerLoop(lambda: _LoopInbox(asyncio.get_running_loop()))


def _settle_on_loop(inbox: _LoopInbox, future: asyncio.Future, function, args) -> None:
    try:
        outcome = (function(*args), None)
    except BaseException as error:  # noqa: BLE001  (handed to the caller, as sync_to_async does)
        outcome = (None, error)
    inbox.put(future, *outcome)  # a loop closed meanwhile never reads it: nobody waits


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
