"""The SQLite connection of a relay process's event loop (the embedded profile), for the write
every A2A event makes (``tasks_app.services.atask_record_many``).

Written from a database thread, a burst of a stream's events costs the stream more than the
write: the hop to the thread and back, and the thread's wait for the interpreter while the
loop holds it. On the gateway bench's fast 50-chunk stream that was 0.8-1.4 ms a burst of two
or three events, against 0.4-0.8 ms for the same write made by the loop. SQLite has no server
to wait on: a write in write-ahead-log mode, whose commits do not wait for the disk
(``synchronous`` NORMAL or OFF), is a few hundred microseconds of library code in this
process. So the loop makes it itself, as a function call.

The loop takes the write only when it would not contend for it, and never uses a busy
timeout. While the process's database threads have work (under load, most of the time), the
write is theirs: the loop would otherwise take the lock again and again while a thread's busy
handler sleeps, and every call's hop to the thread would queue behind those sleeps. And a
write that finds another connection writing (another process, a test's transaction) raises
``Busy`` at once, having written nothing. Either way the caller makes it in a database
thread, which waits its turn. Each write is a whole transaction within one call, so the loop
never holds the lock across an await.

Nor does the loop copy the log into the database file (a checkpoint, which waits for the
disk): its connection never checkpoints, and after every ``CHECKPOINT_EVERY`` commits it asks
a database thread for a passive one. Database threads' own commits checkpoint as SQLite does
by default. The first write after a checkpoint that copied the whole log starts the log anew
and waits once for the disk to have the log's new header: 0.3 ms (2.5 ms at most) on the
bench's machine, paid by whichever connection writes next, the loop's too.

Where the database is not SQLite, is in memory (a second connection would see another
database), is not in write-ahead-log mode, or waits for the disk at each commit, every write
raises ``Busy``.
Errors other than a busy database are Django's (``django.db.utils``), as from the ORM; a
write that failed closes the connection, and the next write opens a fresh one.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from collections.abc import Sequence
from functools import cache, lru_cache
from types import SimpleNamespace
from typing import Any

from django.db import DEFAULT_DB_ALIAS, connections
from django.db.utils import DatabaseErrorWrapper

from relay_project import database_threads
from relay_project.per_loop import PerLoop

logger = logging.getLogger(__name__)

CHECKPOINT_EVERY = 200
"""Commits of the loop's connection between two checkpoints asked of a database thread."""


class Busy(Exception):
    """Not written here: another connection holds the write lock, or the database is not one
    the loop writes to. Write from a database thread."""


Statement = tuple[str, Sequence[Any]]


def may_write() -> bool:
    """Whether the loop may make a write now, as far as this process knows: its database
    threads are idle, and the database is not one the loop never writes to. A caller asks
    before it prepares a write, which is otherwise prepared again in a thread."""
    current = _connections.peek()
    return database_threads.threads().idle() and (current is None or current.usable)


def update_then_insert(update: Statement, inserts: Sequence[Statement]) -> bool:
    """Runs ``update`` (a compare-and-set) and, only when it changed a row, ``inserts``, in
    one transaction on the running loop's connection; whether it changed a row. Statements
    as Django writes them (``%s`` placeholders, parameters as its fields prepare them). Raises
    ``Busy`` without writing anything when the loop does not write now."""
    if not database_threads.threads().idle():
        raise Busy("the database threads are at work")
    return _connections.get().update_then_insert(update, inserts)


class _LoopConnection:
    """The loop's connection, opened at first use, replaced after a failed write."""

    def __init__(self) -> None:
        self._db: sqlite3.Connection | None = None
        self._usable: bool | None = None
        self._commits = 0
        self._checkpointing = False

    @property
    def usable(self) -> bool:
        """False once the loop found it does not write to this database."""
        return self._usable is not False

    def update_then_insert(self, update: Statement, inserts: Sequence[Statement]) -> bool:
        with _as_djangos_errors():
            db = self._connection()
            try:
                db.execute("BEGIN IMMEDIATE")
            except sqlite3.OperationalError as error:
                if _is_busy(error):
                    raise Busy(str(error)) from None
                self._close()
                raise
            try:
                moved = db.execute(_qmarked(update[0]), update[1]).rowcount == 1
                if moved:
                    for sql, params in inserts:
                        db.execute(_qmarked(sql), params)
                db.execute("COMMIT")
            except BaseException:
                self._close()  # rolls back what the transaction wrote
                raise
        self._committed()
        return moved

    def _connection(self) -> sqlite3.Connection:
        if self._db is None:
            if self._usable is False:
                raise Busy("the loop does not write to this database")
            try:
                db = _connect(connections.settings[DEFAULT_DB_ALIAS])
            except sqlite3.OperationalError as error:
                if _is_busy(error):  # the log being recovered, or the file made WAL
                    raise Busy(str(error)) from None
                raise
            self._usable = db is not None
            if db is None:
                raise Busy("the loop does not write to this database")
            self._db = db
        return self._db

    def _close(self) -> None:
        db, self._db = self._db, None
        if db is not None:
            db.close()

    def _committed(self) -> None:
        """Counts a commit, and asks for a checkpoint when it is time. Never raises: the
        write is made."""
        self._commits += 1
        if self._commits < CHECKPOINT_EVERY or self._checkpointing:
            return
        self._commits = 0
        try:
            asked = database_threads.run(_checkpoint)
        except RuntimeError as error:  # the threads were shut down: the process is ending
            logger.warning("no checkpoint of the database log: %s", error)
            return
        self._checkpointing = True
        asked.add_done_callback(self._checkpointed)

    def _checkpointed(self, done: asyncio.Future) -> None:
        self._checkpointing = False
        if not done.cancelled() and done.exception() is not None:
            logger.warning("checkpoint of the database log failed: %s", done.exception())


def _connect(settings: dict[str, Any]) -> sqlite3.Connection | None:
    """A connection to the database of ``settings`` (as in DATABASES) set up as Django sets up
    its own, without a busy timeout and without checkpoints; None if the loop may not write
    to this database."""
    name = str(settings["NAME"])
    if settings["ENGINE"] != "django.db.backends.sqlite3":
        return None
    if name == ":memory:" or "mode=memory" in name:
        return None
    options = settings.get("OPTIONS") or {}
    db = sqlite3.connect(name, timeout=0, isolation_level=None, check_same_thread=False, uri=True)
    try:
        db.execute("PRAGMA foreign_keys = ON")
        for command in (options.get("init_command") or "").split(";"):
            if command := command.strip():
                db.execute(command)
        db.execute("PRAGMA wal_autocheckpoint = 0")
        (mode,) = db.execute("PRAGMA journal_mode").fetchone()
        (synchronous,) = db.execute("PRAGMA synchronous").fetchone()
    except BaseException:
        db.close()
        raise
    if mode.lower() != "wal" or synchronous > 1:  # FULL and EXTRA wait for the disk
        db.close()
        return None
    return db


def _checkpoint() -> None:
    """In a database thread: copies what the log holds into the database file, as far as no
    reader still needs it, without waiting for anyone."""
    with connections[DEFAULT_DB_ALIAS].cursor() as cursor:
        cursor.execute("PRAGMA wal_checkpoint(PASSIVE)")


def _is_busy(error: sqlite3.OperationalError) -> bool:
    code = getattr(error, "sqlite_errorcode", None)
    return code is not None and code & 0xFF in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)


@lru_cache(maxsize=64)
def _qmarked(sql: str) -> str:
    """Django's ``%s`` placeholders as sqlite3 takes them, as Django's SQLite cursor turns
    them."""
    from django.db.backends.sqlite3.base import FORMAT_QMARK_REGEX

    return FORMAT_QMARK_REGEX.sub("?", sql).replace("%%", "%")


@cache
def _as_djangos_errors() -> DatabaseErrorWrapper:
    """A block whose sqlite3 errors are raised as Django's, as the ORM's are."""
    return DatabaseErrorWrapper(SimpleNamespace(Database=sqlite3))


_connections: PerLoop[_LoopConnection] = PerLoop(_LoopConnection)
