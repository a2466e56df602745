"""Task events for the streams that follow them, in any relay process.

The stored, numbered events of a task (``TaskEvent`` rows) are the truth. A stream keeps a
cursor, the last sequence it sent, and sends what is stored after it, in order, once each.
Wake-ups only say when to look:

- an event recorded in this process is handed to this process's streams at once, with the
  event itself, so the common case costs no read;
- an event recorded in another process arrives as a wake-up from PostgreSQL: the recording
  transaction sends ``NOTIFY`` (``services.task_record``), which PostgreSQL delivers at
  commit, never before the event can be read; the stream then reads what is stored after
  its cursor. A task's end is always announced; its other events only while a stream
  follows it from outside its exchange (``gateway.following``, counted on the task);
- every ``RELAY_STREAM_POLL_SECONDS`` one query compares the cursor of every stream open in
  the process with its task's last sequence, so a lost wake-up (SQLite has no NOTIFY; a
  listener that is reconnecting) costs at most that long, never a keep-alive period.

The same wake-ups tell a process when a task it is driving was ended by someone else (a
cancel or an expiry through another process): its watcher (``watch``) hears it and the
process stops the exchange with the agent (at the next poll, or at once while the process
listens for a stream of its own).

One ``Hub`` per event loop holds the process's streams and watchers and runs the poller while
anything is open, and the PostgreSQL listener while a stream is open: a process answering
only unary calls receives no notification (receiving its own cost more than half a
millisecond of CPU a call). The listening connection outlives its last stream by
``LISTEN_KEEP_SECONDS``, not listening meanwhile, so the next stream costs one ``LISTEN``,
not a new connection (a connection costs milliseconds of the event loop's time, in the
middle of that stream's start).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import secrets
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

from django.conf import settings
from django.db import connections

from relay_project import database
from relay_project.database import database_sync_to_async
from relay_project.per_loop import PerLoop

logger = logging.getLogger(__name__)

KEEPALIVE = object()
NOTIFY_CHANNEL = "relay_task_events"
LISTEN_RETRY_SECONDS = (0.5, 1.0, 2.0, 5.0)
LISTEN_KEEP_SECONDS = 60.0
POLL_BATCH = 500

StoredEvents = Callable[[int], Awaitable[list[tuple[int, dict[str, Any], bool]]]]
"""Given the last sequence a stream sent, the (sequence, event, final) stored after it."""


def notify_payload(task_id: str, sequence: int, state: str) -> str:
    """What ``services.task_record`` sends with NOTIFY: the task, its new last sequence, its
    state (0.3 spelling) and the recording process, space-separated."""
    return f"{task_id} {sequence} {state} {origin()}"


_origin: tuple[int, str] = (0, "")


def origin() -> str:
    """A name for this process in notifications (a forked child gets its own): the listener
    skips its own process's, which that process hands to its streams itself."""
    global _origin
    if _origin[0] != os.getpid():
        _origin = (os.getpid(), secrets.token_hex(6))
    return _origin[1]


async def publish(task_id: str, sequence: int, event: dict[str, Any], *, final: bool) -> None:
    """Hands an event this process recorded (and committed) to the process's streams of the
    task. Other processes hear of it from the database."""
    hub = _hubs.peek()
    if hub is not None:
        hub.deliver(task_id, sequence, event, final)


class Subscription:
    """One stream's view of a task: events handed over in the process, and wake-ups saying
    that more is stored."""

    def __init__(self, task_id: str, read: StoredEvents | None) -> None:
        self.task_id = task_id
        self.cursor = 0
        self._read = read
        self._inbox: deque[tuple[int, dict[str, Any], bool]] = deque()
        self._known = 0
        self._end_at: int | None = None
        self._signal = asyncio.Event()

    def end_after(self, sequence: int) -> None:
        """Ends the events once the cursor reaches ``sequence`` (the call's answer is there,
        although the task goes on)."""
        self._end_at = sequence
        self._known = max(self._known, sequence)
        self._signal.set()

    def _ended(self) -> bool:
        return self._end_at is not None and self.cursor >= self._end_at

    def deliver(self, sequence: int, event: dict[str, Any], final: bool) -> None:
        self._inbox.append((sequence, event, final))
        self._signal.set()

    def wake(self, sequence: int) -> None:
        if sequence > self._known:
            self._known = sequence
            self._signal.set()

    async def events(
        self, *, after: int, keepalive: float, stop_at_final: bool = True
    ) -> AsyncIterator[Any]:
        """Yields (event, final) in order for the sequences after ``after``, and KEEPALIVE
        when nothing came for ``keepalive`` seconds. Ends after a final event (unless not
        ``stop_at_final``: the caller decides when to stop)."""
        self.cursor = after
        while True:
            while self._inbox:
                sequence, event, final = self._inbox.popleft()
                if sequence <= self.cursor:
                    continue
                if sequence != self.cursor + 1:
                    # Something before it was recorded elsewhere: read the gap (and this).
                    self._known = max(self._known, sequence)
                    break
                self.cursor = sequence
                yield event, final
                if (final and stop_at_final) or self._ended():
                    return
            if self._known > self.cursor and self._read is not None:
                stored = await self._read(self.cursor)
                for sequence, event, final in stored:
                    if sequence <= self.cursor:
                        continue
                    self.cursor = sequence
                    yield event, final
                    if (final and stop_at_final) or self._ended():
                        return
                # Whatever the wake-up announced is read now (or was never stored).
                self._known = self.cursor
                continue
            if self._ended():
                return
            self._signal.clear()
            if self._inbox:
                continue
            try:
                await asyncio.wait_for(self._signal.wait(), keepalive)
            except TimeoutError:
                yield KEEPALIVE


class Hub:
    """The streams and watchers of one event loop, and the work that wakes them."""

    def __init__(self) -> None:
        self.subscriptions: dict[str, set[Subscription]] = {}
        self.watchers: dict[str, set[Callable[[str], None]]] = {}
        self._poller: asyncio.Task | None = None
        self._listener: asyncio.Task | None = None
        self._stream_opened = asyncio.Event()

    @property
    def idle(self) -> bool:
        return not self.subscriptions and not self.watchers

    def deliver(self, task_id: str, sequence: int, event: dict[str, Any], final: bool) -> None:
        for subscription in self.subscriptions.get(task_id, ()):
            subscription.deliver(sequence, event, final)

    def wake(self, task_id: str, sequence: int, state: str) -> None:
        for subscription in self.subscriptions.get(task_id, ()):
            subscription.wake(sequence)
        if state in _terminal_states():
            for watcher in list(self.watchers.get(task_id, ())):
                watcher(state)

    def add(self, table: dict[str, set], task_id: str, item) -> None:
        table.setdefault(task_id, set()).add(item)
        if table is self.subscriptions:
            self._stream_opened.set()
        self._start()

    def remove(self, table: dict[str, set], task_id: str, item) -> None:
        items = table.get(task_id)
        if items is not None:
            items.discard(item)
            if not items:
                del table[task_id]

    def _start(self) -> None:
        if self._poller is None or self._poller.done():
            self._poller = asyncio.get_running_loop().create_task(self._poll())
        if self.subscriptions and _listens() and (self._listener is None or self._listener.done()):
            self._listener = asyncio.get_running_loop().create_task(self._listen())

    async def _poll(self) -> None:
        """Every RELAY_STREAM_POLL_SECONDS, one read of the last sequence and state of every
        task with a stream or a watcher here; stops once nothing is open."""
        from tasks_app import selectors

        while not self.idle:
            await asyncio.sleep(settings.RELAY_STREAM_POLL_SECONDS)
            task_ids = list(self.subscriptions.keys() | self.watchers.keys())
            for start in range(0, len(task_ids), POLL_BATCH):
                try:
                    found = await database_sync_to_async(selectors.task_positions)(
                        task_ids=task_ids[start : start + POLL_BATCH]
                    )
                except database.UNAVAILABLE as error:
                    # Expected while the database restarts: one line, not a traceback
                    # every poll.
                    logger.warning("could not read the positions of open streams (%s)", error)
                    continue
                except Exception:
                    logger.warning("could not read the positions of open streams", exc_info=True)
                    continue
                for task_id, (sequence, state) in found.items():
                    self.wake(task_id, sequence, state)

    async def _listen(self) -> None:
        """Listens to the database's task-event notifications while a stream is open here
        (watchers of the tasks this process drives rely on the poll: a task ended elsewhere
        stops its exchange within RELAY_STREAM_POLL_SECONDS, and a process that only
        answers unary calls receives no notification at all). Between streams the connection
        stops listening and waits up to LISTEN_KEEP_SECONDS for the next one. Reconnects
        after a failure, then wakes every stream (a notification may have been missed
        meanwhile)."""
        import psycopg

        failures = 0
        while self.subscriptions:
            try:
                connection = await psycopg.AsyncConnection.connect(
                    database.postgresql_conninfo("brass-relay-listener"), autocommit=True
                )
            except Exception as error:
                delay = LISTEN_RETRY_SECONDS[min(failures, len(LISTEN_RETRY_SECONDS) - 1)]
                failures += 1
                logger.warning("cannot listen to task events (%s); retrying in %s s", error, delay)
                await asyncio.sleep(delay)
                continue
            try:
                async with connection:
                    mine = origin()
                    while self.subscriptions:
                        await connection.execute(f"LISTEN {NOTIFY_CHANNEL}")
                        if failures:
                            self._wake_all()
                        failures = 0
                        async for notice in _notifies_while_busy(connection, self):
                            task_id, sequence, state, sender = notice.payload.split(" ")
                            if sender != mine:
                                self.wake(task_id, int(sequence), state)
                        await connection.execute(f"UNLISTEN {NOTIFY_CHANNEL}")
                        await self._next_stream(LISTEN_KEEP_SECONDS)
            except Exception as error:
                failures += 1
                logger.warning("lost the task-event listener (%s); reconnecting", error)
                await asyncio.sleep(LISTEN_RETRY_SECONDS[0])

    async def _next_stream(self, timeout: float) -> None:
        """Returns when a stream is open here, or after ``timeout`` seconds without one."""
        self._stream_opened.clear()
        if self.subscriptions:
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._stream_opened.wait(), timeout)

    def _wake_all(self) -> None:
        for subscriptions in self.subscriptions.values():
            for subscription in subscriptions:
                subscription.wake(subscription.cursor + 1)


async def _notifies_while_busy(connection, hub: Hub):
    """The connection's notifications, until the hub has no stream open (checked every
    second, so a process without streams closes its listening connection)."""
    while hub.subscriptions:
        async for notice in connection.notifies(timeout=1.0):
            yield notice


_hubs: PerLoop[Hub] = PerLoop(Hub)


def hub() -> Hub:
    """The running loop's hub."""
    return _hubs.get()


@asynccontextmanager
async def subscription(task_id: str, *, read: StoredEvents | None = None):
    """A subscription to the task's events, open while the block runs. Open it *before*
    reading the task, then iterate ``events(after=<the task's last sequence>)``: nothing is
    missed and nothing is sent twice. ``read`` reads stored events (see ``StoredEvents``)."""
    current = hub()
    subscribed = Subscription(task_id, read)
    current.add(current.subscriptions, task_id, subscribed)
    try:
        yield subscribed
    finally:
        current.remove(current.subscriptions, task_id, subscribed)


@contextlib.contextmanager
def watch(task_id: str, on_end: Callable[[str], None]):
    """Calls ``on_end(state)`` when the task is seen ended (terminal) by a write of another
    process or of this one, while the block runs. Must run in the event loop."""
    current = hub()
    current.add(current.watchers, task_id, on_end)
    try:
        yield
    finally:
        current.remove(current.watchers, task_id, on_end)


def _terminal_states() -> frozenset[str]:
    from tasks_app.lifecycle import TERMINAL

    return frozenset(state.value for state in TERMINAL)


def _listens() -> bool:
    return connections["default"].vendor == "postgresql"
