"""The PostgreSQL connection of a relay process's event loop, for the write every A2A event
makes (``tasks_app.services.atask_record_many``).

Django's connections belong to threads, so async code hops to a database thread for each
statement and back (``database_threads``). On a machine whose other cores were idle, each
direction of that hop waits for a sleeping core to wake: in the gateway bench at one call at a
time, 55 µs there and 70 µs back for the statement that ends a call, as long together as the
Python that prepares the statement. This connection is psycopg's asynchronous one on the loop
itself: the loop sends the statement and is woken by its answer, as by any socket.

One connection per loop, one statement at a time on it (the writes of a process were one at a
time on its database thread already). A connection the server ended while it was idle (the
database restarted) is replaced before the next statement, which so does not fail for it. A
statement that fails, or whose caller is cancelled while it runs, closes the connection: the
next one opens a fresh connection. Errors are Django's (``django.db.utils``), as from the
ORM.
"""

from __future__ import annotations

import asyncio
import select
from collections.abc import Sequence
from functools import cache
from types import SimpleNamespace
from typing import Any

from django.db import DEFAULT_DB_ALIAS, connections
from django.db.utils import DatabaseErrorWrapper

from relay_project.per_loop import PerLoop

_CONNECTION_OPTIONS = {"sslmode", "sslrootcert", "sslcert", "sslkey", "service"}
"""The OPTIONS of the database setting that say how to reach the server (the others tune
Django's own connections)."""


def conninfo(application_name: str) -> str:
    """How to connect to the default database (PostgreSQL), as ``application_name``."""
    from psycopg.conninfo import make_conninfo

    database = connections[DEFAULT_DB_ALIAS].settings_dict
    options = {
        key: value
        for key, value in (database.get("OPTIONS") or {}).items()
        if isinstance(value, str | int) and key in _CONNECTION_OPTIONS
    }
    parts = {
        "dbname": database.get("NAME"),
        "user": database.get("USER"),
        "password": database.get("PASSWORD"),
        "host": database.get("HOST"),
        "port": database.get("PORT"),
        "application_name": application_name,
    }
    return make_conninfo(**{k: v for k, v in parts.items() if v}, **options)


class _LoopConnection:
    def __init__(self) -> None:
        self._connection = None
        self._cursor = None
        self._silence = None
        self._turn = asyncio.Lock()

    async def fetchone(
        self, sql: str, params: Sequence[Any], written: asyncio.Future | None = None
    ) -> tuple[Any, ...] | None:
        async with self._turn:
            with _as_djangos_errors():
                connection = self._connection
                if connection is None or not _usable(connection, self._silence):
                    if connection is not None:
                        await connection.close()
                    connection = self._connection = await _connect()
                    # One cursor for the connection's statements: psycopg's cursor keeps how
                    # it adapts each type of value, which a new cursor looks up again for
                    # every parameter (measured: 30 µs less per statement of a task's).
                    self._cursor = connection.cursor()
                    # select.select stops at descriptor 1024; a busy process goes past it.
                    self._silence = select.poll()
                    self._silence.register(connection.pgconn.socket, select.POLLIN)
                cursor = self._cursor
                try:
                    if written is not None:
                        # Its waiter runs once this task waits: psycopg writes the
                        # statement to the socket before it first waits for the answer.
                        written.set_result(None)
                    await cursor.execute(sql, params)
                    return await cursor.fetchone()
                except BaseException:
                    self._connection = None
                    await asyncio.shield(connection.close())
                    raise

    async def sent(self, sql: str, params: Sequence[Any]) -> asyncio.Future:
        written = asyncio.get_running_loop().create_future()
        answer = asyncio.ensure_future(self.fetchone(sql, params, written))
        # A statement that failed before it was written (no connection) is done too.
        answer.add_done_callback(lambda _: written.done() or written.set_result(None))
        await written
        return answer


def _usable(connection, silence: select.poll) -> bool:
    """Whether an idle connection may take the next statement: open, and silent (nothing to
    read on its socket, which ``silence`` polls). Between two statements the server sends
    nothing on it unless it is going away (a restart, an administrator ending the session):
    then its farewell or the socket's end is waiting to be read, and the statement would
    fail. Looking costs no round trip."""
    return not connection.closed and not silence.poll(0)


@cache
def _as_djangos_errors() -> DatabaseErrorWrapper:
    """A block whose psycopg errors are raised as Django's, as the ORM's are: one for the
    process, which every block uses (it keeps nothing a block reads)."""
    import psycopg

    return DatabaseErrorWrapper(SimpleNamespace(Database=psycopg))


async def _connect():
    import psycopg

    options = connections[DEFAULT_DB_ALIAS].settings_dict.get("OPTIONS") or {}
    return await psycopg.AsyncConnection.connect(
        conninfo("brass-relay"),
        autocommit=True,
        prepare_threshold=options.get("prepare_threshold"),
    )


_connections: PerLoop[_LoopConnection] = PerLoop(_LoopConnection)


async def fetchone(sql: str, params: Sequence[Any]) -> tuple[Any, ...] | None:
    """The first row ``sql`` returns (``params`` as Django prepares them), on the running
    loop's connection to the default database (PostgreSQL), in its own transaction."""
    return await _connections.get().fetchone(sql, params)


async def sent(sql: str, params: Sequence[Any]) -> asyncio.Future[tuple[Any, ...] | None]:
    """``fetchone`` without waiting for the answer: when this returns, the statement is
    written to the server (a connection that had to be opened first is open), and the
    returned future gets its first row or its error. Every later statement of the loop runs
    after it, so it is as if awaited before them; a process that dies after this returns
    leaves the statement to the server, which runs it as it runs any other it has received.
    The future must be awaited: its error is not raised anywhere else."""
    return await _connections.get().sent(sql, params)
