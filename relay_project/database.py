"""What the relay does when its database is away: which errors say so, and waiting it out.

Async code runs its database work through ``database_sync_to_async``, in asgiref's one
database thread: Channels' wrapper of that name, except that a connection inside a caller's
transaction is left alone (Channels closes it: a synchronous caller that runs async code
through ``async_to_sync``, a Celery job or a test, would lose its transaction), and that it
checks the connection before each piece of work only (Channels checks after it too, which
the check before the next piece repeats): a connection that failed or expired is closed, so
the work after an outage opens a fresh one. ``retried`` runs work again with backoff while
the database is unavailable, for work that is safe to repeat (reads, and compare-and-set
writes, which decide again on the row as it then stands).
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Callable
from typing import Any, TypeVar

from asgiref.sync import SyncToAsync
from django.db import DEFAULT_DB_ALIAS, InterfaceError, OperationalError, connections

logger = logging.getLogger(__name__)

T = TypeVar("T")

UNAVAILABLE: tuple[type[Exception], ...] = (OperationalError, InterfaceError)
"""The database refused, dropped or lost the connection: an outage, not a bad statement."""
UNAVAILABLE_MESSAGE = "the relay's database is unavailable; try again shortly"
RETRY_AFTER_SECONDS = 2
BACKOFF_FIRST_SECONDS = 0.1
BACKOFF_CAP_SECONDS = 2.0


HEALTH_CHECK_IDLE_SECONDS = 1.0
"""A connection used less than this long ago is not pinged before the next piece of work
(CONN_HEALTH_CHECKS pings before every one): on PostgreSQL the ping was one round trip in
three of every SendMessage."""


def close_old_connections() -> None:
    """Django's ``close_old_connections``, for the connections outside a transaction, with
    the health check (CONN_HEALTH_CHECKS) only for a connection idle HEALTH_CHECK_IDLE_SECONDS
    or more. A connection that breaks within that second fails one piece of work, and is
    closed before the next, as after any database error."""
    now = time.monotonic()
    for connection in connections.all(initialized_only=True):
        if connection.in_atomic_block:
            continue
        connection.close_if_unusable_or_obsolete()
        if connection.connection is None:
            continue
        used = getattr(connection, "relay_used_at", None)
        if used is not None and now - used < HEALTH_CHECK_IDLE_SECONDS:
            connection.health_check_done = True
        connection.relay_used_at = now


class DatabaseSyncToAsync(SyncToAsync):
    """``sync_to_async`` for database work (thread-sensitive: asgiref's database thread)."""

    def thread_handler(self, loop, *args, **kwargs):
        close_old_connections()
        return super().thread_handler(loop, *args, **kwargs)


database_sync_to_async = DatabaseSyncToAsync


def backoff(attempt: int) -> float:
    """Seconds to wait before attempt ``attempt`` (1 for the first retry): exponential, capped,
    with full jitter, so processes that lost the database together do not return together."""
    return random.uniform(0, min(BACKOFF_CAP_SECONDS, BACKOFF_FIRST_SECONDS * 2**attempt))


async def retried(
    function: Callable[..., T], *args: Any, deadline: float | None = None, **kwargs: Any
) -> T:
    """``function(*args, **kwargs)`` in the database thread, run again with backoff while the
    database is unavailable, until it succeeds or ``deadline`` (``time.monotonic()``) passes;
    then the last error is raised. Without a deadline it retries until cancelled."""
    attempt = 0
    while True:
        try:
            return await database_sync_to_async(function)(*args, **kwargs)
        except UNAVAILABLE as error:
            attempt += 1
            delay = backoff(attempt)
            if deadline is not None and time.monotonic() + delay > deadline:
                raise
            if attempt == 1:
                logger.warning("database unavailable (%s); retrying", error)
            await asyncio.sleep(delay)


def postgresql_conninfo(application_name: str) -> str:
    """How to reach the default database (PostgreSQL) from a connection of one's own (the
    stream listener), as ``application_name``: the settings' server, credentials and TLS."""
    from psycopg.conninfo import make_conninfo

    database = connections[DEFAULT_DB_ALIAS].settings_dict
    reach = {"sslmode", "sslrootcert", "sslcert", "sslkey", "service"}
    options = {
        key: value
        for key, value in (database.get("OPTIONS") or {}).items()
        if key in reach and isinstance(value, str | int)
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


def server_error(request, *args, **kwargs):
    """Django's ``handler500``: a request that failed because the database was unavailable
    (restarting, or refusing connections: "too many clients") is answered 503 with
    Retry-After and a message saying so, whether a view or a middleware met it; any other
    failure gets Django's own 500 page."""
    import sys

    from django.http import HttpResponse
    from django.views import defaults

    error = sys.exc_info()[1]
    if isinstance(error, UNAVAILABLE):
        logger.warning(
            "refused %s %s: %s (%s)", request.method, request.path, UNAVAILABLE_MESSAGE, error
        )
        response = HttpResponse(
            f"503 Service Unavailable: {UNAVAILABLE_MESSAGE}.\n",
            status=503,
            content_type="text/plain; charset=utf-8",
        )
        response["Retry-After"] = str(RETRY_AFTER_SECONDS)
        return response
    return defaults.server_error(request, *args, **kwargs)
