"""Every Redis client the relay makes (the cache, the Celery broker) is
configured here, in one way: a short connect timeout, so an outage fails a call at once
instead of hanging it; a socket timeout that suits what the client does; a health check of
connections left idle; and one retry of a command on a fresh connection, so a pooled
connection that went stale (Redis restarted) is replaced without failing the call.

The cache shares one connection pool per process (``redis_cache.SharedPoolRedisCache``).

``UNREACHABLE`` names the errors that mean Redis cannot be reached; the A2A endpoints and the
APIs answer them with 503 (``tasks_app.api.calls``, ``registry.api.errors``).
"""

from __future__ import annotations

import threading
from typing import Any

from redis.backoff import ExponentialBackoff, NoBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError
from redis.retry import Retry

UNREACHABLE: tuple[type[Exception], ...] = (RedisConnectionError, RedisTimeoutError)
"""Redis refused, dropped or timed out the connection (after the retry): an outage."""
UNREACHABLE_MESSAGE = "the relay's Redis is unreachable; try again shortly"

RETRIES = 1
"""A failed command is sent once more, on a fresh connection: enough to replace a stale one,
and an outage still fails fast."""
BACKOFF_BASE_SECONDS = 0.01
BACKOFF_CAP_SECONDS = 0.1
BLOCKING_READ_SECONDS = 5
"""How much longer than a command a blocking read may wait (Celery's broker blocks in BRPOP
for kombu's 1 s)."""


def command_retry() -> Retry:
    """One retry on ConnectionError and TimeoutError (redis-py's defaults for a Retry) after
    a short backoff; redis-py closes the failed connection first, so the retry reconnects.
    """
    return Retry(ExponentialBackoff(cap=BACKOFF_CAP_SECONDS, base=BACKOFF_BASE_SECONDS), RETRIES)


def connection_options(
    *, connect_timeout: float, socket_timeout: float, health_check_seconds: int
) -> dict[str, Any]:
    """Keyword arguments of a redis-py connection pool, without the retry (a Retry object is
    not a setting: ``command_retry`` makes one for each kind of client)."""
    return {
        "socket_connect_timeout": connect_timeout,
        "socket_timeout": socket_timeout,
        "health_check_interval": health_check_seconds,
    }


_pools: dict[tuple, Any] = {}
_pools_lock = threading.Lock()


def shared_pool(url: str, pool_class, options: dict[str, Any], *, retries: int = RETRIES):
    """The process's one pool for this server URL, these options and this many retries of a
    failed command (``command_retry``; 0 for commands that must not run twice), made at
    first use. A forked child (a Celery worker) gets fresh connections from the same pool:
    redis-py resets a pool whose process id changed."""
    key = (url, pool_class, tuple(sorted(options.items())), retries)
    pool = _pools.get(key)
    if pool is None:
        with _pools_lock:
            pool = _pools.get(key)
            if pool is None:
                retry = command_retry() if retries else Retry(NoBackoff(), 0)
                pool = pool_class.from_url(url, retry=retry, **options)
                _pools[key] = pool
    return pool


def forget_pools() -> None:
    """Disconnects and drops every shared pool (tests; the next use makes new ones)."""
    with _pools_lock:
        for pool in _pools.values():
            pool.disconnect()
        _pools.clear()
