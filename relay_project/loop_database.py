"""The PostgreSQL connection of a relay process's event loop, for the write every A2A event
makes (``tasks_app.services.atask_record_many``).

Django's connections belong to threads, so async code hops to a database thread for each
statement and back (``database_threads``). On a machine whose other cores were idle, each
direction of that hop waits for a sleeping core to wake: in the gateway bench at one call at a
time, 55 µs there and 70 µs back for the statement that ends a call, as long together as the
Python that prepares the statement. This connection is on the loop itself: the loop sends the
statement and is woken by its answer, as by any socket.

One connection per loop, one statement at a time on it (the writes of a process were one at a
time on its database thread already). A connection the server ended while it was idle (the
database restarted) is replaced before the next statement, which so does not fail for it. A
statement that fails, or whose caller is cancelled while it runs, closes the connection: the
next one opens a fresh connection. Errors are Django's (``django.db.utils``), as from the
ORM.
"""

from __future__ import annotations

import asyncio
import re
import select
from collections.abc import Sequence
from dataclasses import dataclass
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
    """The loop's connection, replaced when it fails or the server ended it."""

    def __init__(self) -> None:
        self._session: _Session | None = None
        self._turn = asyncio.Lock()

    async def fetchone(
        self, sql: str, params: Sequence[Any], written: asyncio.Future | None = None
    ) -> tuple[Any, ...] | None:
        async with self._turn:
            with _as_djangos_errors():
                session = self._session
                if session is None or not session.usable():
                    if session is not None:
                        await session.close()
                    session = self._session = _Session(await _connect())
                try:
                    return await session.fetchone(sql, params, written)
                except BaseException:
                    self._session = None
                    await asyncio.shield(session.close())
                    raise

    async def sent(self, sql: str, params: Sequence[Any]) -> asyncio.Future:
        written = asyncio.get_running_loop().create_future()
        answer = asyncio.ensure_future(self.fetchone(sql, params, written))
        # A statement that failed before it was written (no connection) is done too.
        answer.add_done_callback(lambda _: written.done() or written.set_result(None))
        await written
        return answer


@dataclass(frozen=True, slots=True)
class _Statement:
    """One SQL text as this connection sends it: numbered placeholders, and the adapter that
    dumps its parameters and loads its rows (it keeps the adapters of each type it met)."""

    query: bytes
    adapter: Any
    formats: list[Any]


class _Session:
    """One open connection, driven through libpq's own calls (``psycopg.pq``) rather than a
    psycopg cursor. A cursor statement costs 60-90 µs of Python more per pair of a call's
    statements (measured: its execute machinery, a wait that registers and drops a reader
    and a timer each time, a new adapter whenever the statement text changes), and the
    statements here are the two every A2A call makes. Values are still dumped and rows loaded
    by psycopg's adapters, as a cursor does.

    The socket is watched for as long as the connection is open: it answers a statement, or,
    while no statement waits, says the server is going away (a restart, an administrator
    ending the session), and the connection is then replaced before the next one. Each
    statement is prepared on the server the first time it is sent with its parameters'
    types, unless the database's ``prepare_threshold`` option is None (a pooler that cannot
    keep prepared statements)."""

    _MOST_STATEMENTS = 256
    """More statements than that on one connection are sent unprepared, their adapters not
    kept."""

    def __init__(self, connection) -> None:
        self.connection = connection
        self._gone = False
        self._pgconn = connection.pgconn
        self._socket = self._pgconn.socket
        self._encoding = connection.info.encoding
        self._prepares = connection.prepare_threshold is not None
        self._statements: dict[str, _Statement] = {}
        self._prepared: dict[tuple[str, tuple[int, ...]], bytes] = {}
        self._answer: asyncio.Future[list[Any]] | None = None
        self._results: list[Any] = []
        self._loop = asyncio.get_running_loop()
        self._loop.add_reader(self._socket, self._readable)
        # select.select stops at descriptor 1024; a busy process goes past it.
        self._silence = select.poll()
        self._silence.register(self._socket, select.POLLIN)

    def usable(self) -> bool:
        """Whether the connection may take the next statement: open, and silent. Between two
        statements the server sends nothing unless it is going away (its farewell, or the
        socket's end, waits to be read); the reader sees it once the loop runs it, the poll
        at once, without a round trip."""
        return not self._gone and not self._silence.poll(0)

    async def fetchone(
        self, sql: str, params: Sequence[Any], written: asyncio.Future | None
    ) -> tuple[Any, ...] | None:
        import psycopg

        statement = self._statements.get(sql) or self._statement(sql)
        adapter = statement.adapter
        values = adapter.dump_sequence(params, statement.formats)
        name = await self._prepared_name(sql, statement, adapter.types)
        if name is None:
            self._pgconn.send_query_params(
                statement.query, values, param_types=adapter.types, param_formats=adapter.formats
            )
        else:
            self._pgconn.send_query_prepared(name, values, param_formats=adapter.formats)
        result = await self._answered(written)
        if result.status != psycopg.pq.ExecStatus.TUPLES_OK or not result.ntuples:
            return None
        adapter.set_pgresult(result)
        return adapter.load_row(0, tuple)

    def _statement(self, sql: str) -> _Statement:
        from psycopg import adapt

        query, count = _numbered(sql)
        statement = _Statement(
            query.encode(self._encoding),
            adapt.Transformer(self.connection),
            [adapt.PyFormat.AUTO] * count,
        )
        if len(self._statements) < self._MOST_STATEMENTS:
            self._statements[sql] = statement
        return statement

    async def _prepared_name(
        self, sql: str, statement: _Statement, types: tuple[int, ...]
    ) -> bytes | None:
        """The name the statement is prepared under for parameters of ``types``; prepared
        now when it is not yet; None when it is sent unprepared."""
        name = self._prepared.get((sql, types))
        if name is not None or not self._prepares or len(self._prepared) >= self._MOST_STATEMENTS:
            return name
        name = f"relay_{len(self._prepared)}".encode()
        self._pgconn.send_prepare(name, statement.query, param_types=types)
        await self._answered()
        self._prepared[sql, types] = name
        return name

    async def _answered(self, written: asyncio.Future | None = None):
        """The result of the one statement just sent, once it is all written (``written``
        is then done) and answered; the server's error raised as psycopg's."""
        import psycopg

        self._answer = self._loop.create_future()
        while self._pgconn.flush():  # more than the socket took at once
            writable = self._loop.create_future()
            self._loop.add_writer(self._socket, _wake, writable)
            try:
                await writable
            finally:
                self._loop.remove_writer(self._socket)
        if written is not None and not written.done():  # its waiter may have been cancelled
            written.set_result(None)
        results = await self._answer
        for result in results:
            if result.status == psycopg.pq.ExecStatus.FATAL_ERROR:
                raise psycopg.errors.error_from_result(result, encoding=self._encoding)
        return results[0]

    def _readable(self) -> None:
        answer = self._answer
        if answer is None:
            # Nothing was asked: the server is saying goodbye, or has gone.
            self._forget()
            return
        try:
            self._pgconn.consume_input()
            while not self._pgconn.is_busy():
                result = self._pgconn.get_result()
                if result is None:
                    results, self._results, self._answer = self._results, [], None
                    if not answer.done():
                        answer.set_result(results)
                    return
                self._results.append(result)
        except Exception as error:  # libpq lost the connection
            self._forget()
            if not answer.done():
                answer.set_exception(error)

    def _forget(self) -> None:
        if not self._gone:
            self._gone = True
            self._loop.remove_reader(self._socket)

    async def close(self) -> None:
        self._forget()
        await self.connection.close()


def _wake(waiter: asyncio.Future) -> None:
    """Wakes ``waiter``, unless it was cancelled meanwhile."""
    if not waiter.done():
        waiter.set_result(None)


def _numbered(sql: str) -> tuple[str, int]:
    """``sql`` with its ``%s`` placeholders numbered as PostgreSQL takes them ($1, $2, ...)
    and ``%%`` as ``%``, and how many placeholders it has. Django writes its SQL so; psycopg's
    own converter is not public."""
    count = 0

    def number(match: re.Match) -> str:
        nonlocal count
        if match.group(1) == "%":
            return "%"
        if match.group(1) != "s":
            raise ValueError(f"only %s placeholders are supported: {match.group(0)!r}")
        count += 1
        return f"${count}"

    return _PLACEHOLDER.sub(number, sql), count


_PLACEHOLDER = re.compile(r"%(.)", re.DOTALL)


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
