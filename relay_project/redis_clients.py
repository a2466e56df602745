"""Every Redis client the relay makes (the cache, the channel layer, the Celery broker) is
configured here, in one way: a short connect timeout, so an outage fails a call at once
instead of hanging it; a socket timeout that suits what the client does; a health check of
connections left idle; and one retry of a command on a fresh connection, so a pooled
connection that went stale (Redis restarted) is replaced without failing the call.

The cache gets one connection pool per process (``SharedPoolRedisCache``). Django's cache
handler keeps one cache object per async context and thread, and Django's ``RedisCache``
builds a pool of its own for each object: every A2A call (a context of its own) opened a new
connection to Redis for its API-key lookup, and the production profile paid for it in CPU.
That pool serves the threads; the one command an A2A call waits for before anything else
(its key's lookup and count) goes from the event loop, on a connection of the loop's own
(``LoopRedis``).

``UNREACHABLE`` names the errors that mean Redis cannot be reached; the A2A endpoints and the
APIs answer them with 503 (``tasks_app.api.calls``, ``registry.api.errors``).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from functools import lru_cache
from typing import Any, Generic, TypeVar

from django.core.cache.backends.redis import RedisCache, RedisCacheClient
from django.utils.functional import cached_property
from redis.asyncio import ConnectionPool as AsyncConnectionPool
from redis.asyncio.retry import Retry as AsyncRetry
from redis.backoff import ExponentialBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError
from redis.retry import Retry

from relay_project.per_loop import PerLoop

T = TypeVar("T")

UNREACHABLE: tuple[type[Exception], ...] = (RedisConnectionError, RedisTimeoutError)
"""Redis refused, dropped or timed out the connection (after the retry): an outage."""
UNREACHABLE_MESSAGE = "the relay's Redis is unreachable; try again shortly"

RETRIES = 1
"""A failed command is sent once more, on a fresh connection: enough to replace a stale one,
and an outage still fails fast."""
BACKOFF_BASE_SECONDS = 0.01
BACKOFF_CAP_SECONDS = 0.1
CHANNELS_BLOCKING_READ_SECONDS = 5
"""How long channels-redis's receive blocks in BZPOPMIN (``RedisChannelLayer.brpop_timeout``);
a test checks it still is. Celery's broker blocks in BRPOP for less (kombu's 1 s)."""


def command_retry(*, asynchronous: bool = False) -> Retry | AsyncRetry:
    """One retry on ConnectionError and TimeoutError (redis-py's defaults for a Retry) after
    a short backoff; redis-py closes the failed connection first, so the retry reconnects.
    ``asynchronous`` for the clients of ``redis.asyncio`` (the channel layer)."""
    retry_class = AsyncRetry if asynchronous else Retry
    return retry_class(
        ExponentialBackoff(cap=BACKOFF_CAP_SECONDS, base=BACKOFF_BASE_SECONDS), RETRIES
    )


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


def shared_pool(url: str, pool_class, options: dict[str, Any]):
    """The process's one pool for this server URL and these options, made at first use (with
    ``command_retry``). A forked child (a Celery worker) gets fresh connections from the same
    pool: redis-py resets a pool whose process id changed."""
    key = (url, pool_class, tuple(sorted(options.items())))
    pool = _pools.get(key)
    if pool is None:
        with _pools_lock:
            pool = _pools.get(key)
            if pool is None:
                pool = pool_class.from_url(url, retry=command_retry(), **options)
                _pools[key] = pool
    return pool


def forget_pools() -> None:
    """Disconnects and drops every shared pool and cache client (tests; the next use makes
    new ones)."""
    with _pools_lock:
        for pool in _pools.values():
            pool.disconnect()
        _pools.clear()
        _cache_clients.clear()


class Pending(Generic[T]):
    """An answer on its way: ``await result()`` reads it, once. The caller works meanwhile
    (an A2A call is parsed while Redis looks up its key)."""

    def __init__(self, read: Callable[[], Awaitable[T]]) -> None:
        self._read: Callable[[], Awaitable[T]] | None = read

    @classmethod
    def later(cls, function: Callable[[], T]) -> contextlib.nullcontext[Pending[T]]:
        """An answer worked out when it is read (no Redis to ask), as the block that reads
        it (``LoopRedis.sent``) has it."""

        async def read() -> T:
            return function()

        return contextlib.nullcontext(cls(read))

    async def result(self) -> T:
        read, self._read = self._read, None
        if read is None:
            raise RuntimeError("a pending answer is read once")
        return await read()


class LoopRedis:
    """The cache's Redis for one event loop: one connection, one command at a time, sent
    from the loop itself, so a call's key lookup needs no database thread.

    A connection of redis-py's own (``redis.asyncio``: the protocol, hiredis's parser),
    without its pool and client, which cost as much again as the round trip they wrap
    (measured on the bench's machine: a script's send and answer 62 µs on a connection, 122
    µs through redis-py's client and pool). It times its steps itself, ``timeout`` each: the
    connection's own socket timeout would make a task of every send (``asyncio.wait_for``),
    another 20 µs.

    ``sent`` sends a command and holds the connection until its answer is read or given up.
    When the answer does not come (a connection gone stale, Redis restarted) or Redis forgot a
    script, ``again`` (the same command, spelled to work on a Redis that knows nothing) runs
    once, on a fresh connection unless the answer was an error; as with redis-py's retry, a
    command Redis ran before its connection broke so runs twice. No ping checks an idle
    connection first: a stale one fails its command's answer, and that command goes again.
    An answer never read drops its connection: the next command never reads another's."""

    def __init__(self, make_connection: Callable[[], Any], timeout: float | None) -> None:
        self._make_connection = make_connection
        self._timeout = timeout
        self._connection: Any = None
        self._turn = asyncio.Lock()

    @contextlib.asynccontextmanager
    async def sent(
        self, command: tuple, again: tuple, then: Callable[[Any], T]
    ) -> AsyncIterator[Pending[T]]:
        """``command`` on its way when the block starts; the block reads its answer, passed
        through ``then``, from the ``Pending`` it is given, or leaves it unread. Raises
        UNREACHABLE when Redis cannot be reached, also when it is read."""
        async with self._turn:
            if self._connection is None:
                self._connection = self._make_connection()
            connection = self._connection
            try:
                await self._send(connection, command)
                sent = True
            except (*UNREACHABLE, OSError):
                await connection.disconnect()
                sent = False
            unread = True

            async def read() -> T:
                nonlocal unread
                unread = False
                try:
                    if sent:
                        try:
                            return then(await self._answer(connection))
                        except ResponseError:
                            pass  # an answer, read whole (NOSCRIPT): the connection is sound
                        except (*UNREACHABLE, OSError):
                            await connection.disconnect()
                    await self._send(connection, again)
                    return then(await self._answer(connection))
                except BaseException:
                    await asyncio.shield(connection.disconnect())
                    raise

            try:
                yield Pending(read)
            finally:
                if unread:
                    await asyncio.shield(connection.disconnect())

    async def _send(self, connection, command: tuple) -> None:
        # check_health=False: no ping first; the connection connects if it must.
        await self._timed(connection, connection.send_command(*command, check_health=False))

    async def _answer(self, connection) -> Any:
        return await self._timed(connection, connection.read_response())

    async def _timed(self, connection, step: Awaitable[T]) -> T:
        """``step`` on ``connection``, given ``timeout``; one that takes longer drops the
        connection and raises RedisTimeoutError (one of UNREACHABLE)."""
        try:
            async with asyncio.timeout(self._timeout):
                return await step
        except TimeoutError as error:
            await connection.disconnect(nowait=True)
            raise RedisTimeoutError("Redis did not answer in time") from error


_GET_AND_COUNT = """
local value = redis.call('GET', KEYS[1])
if not value then
  return false
end
local count = redis.call('INCR', KEYS[2])
if count == 1 then
  redis.call('EXPIRE', KEYS[2], ARGV[1])
end
return {value, count}
"""

_GET_AND_COUNT_SHA = hashlib.sha1(_GET_AND_COUNT.encode()).hexdigest()

_TAKE_SLOT = """
redis.call('INCR', KEYS[1])
redis.call('EXPIRE', KEYS[1], ARGV[1])
local open = 0
for _, key in ipairs(KEYS) do
  local count = tonumber(redis.call('GET', key) or '0') or 0
  if count > 0 then
    open = open + count
  end
end
if open > tonumber(ARGV[2]) then
  redis.call('DECR', KEYS[1])
  return 0
end
return 1
"""

_INCR_EXISTING = """
if redis.call('EXISTS', KEYS[1]) == 1 then
  return redis.call('INCRBY', KEYS[1], ARGV[1])
end
return false
"""


class SharedPoolRedisCacheClient(RedisCacheClient):
    """Django's Redis cache client, taking its pools from ``shared_pool`` and keeping one
    redis-py client per pool: Django's makes a ``Redis`` object for every command, and
    redis-py's constructor (its table of response callbacks) cost about as much CPU as the
    command's round trip. A ``Redis`` object over a pool is safe to share between threads.
    ``incr`` is one round trip (Django's asks EXISTS, then INCRBY: two, on every
    rate-limited call)."""

    def __init__(self, servers, **options):
        super().__init__(servers, **options)
        self._redis_clients: dict[int, Any] = {}
        self._scripts: dict[str, Any] = {}
        # Every A2A call reads its key's entry: the same bytes, unpickled once while they
        # stay the same (a key revoked or its last use recorded is other bytes); the value is
        # shared read-only by the calls that read it, as a cached object is.
        self._unpickled = lru_cache(maxsize=1024)(lambda value: self._serializer.loads(value))

    def _run(self, script: str, *, keys: list, args: list):
        """Runs a Lua script (registered at first use, then sent by its SHA) on the write
        client: one round trip."""
        client = self.get_client(keys[0], write=True)
        return self._script(client, script)(keys=keys, args=args, client=client)

    def _script(self, client, script: str):
        registered = self._scripts.get(script)
        if registered is None:
            registered = self._scripts[script] = client.register_script(script)
        return registered

    def _get_connection_pool(self, write):
        index = self._get_connection_pool_index(write)
        return shared_pool(self._servers[index], self._pool_class, self._pool_options)

    def get_client(self, key=None, *, write=False):
        index = self._get_connection_pool_index(write)
        client = self._redis_clients.get(index)
        if client is None:
            pool = shared_pool(self._servers[index], self._pool_class, self._pool_options)
            client = self._redis_clients.setdefault(index, self._client(connection_pool=pool))
        return client

    def get_and_count(
        self, key, counter, lifetime, then: Callable[[tuple[Any, int | None]], T]
    ) -> contextlib.AbstractAsyncContextManager[Pending[T]]:
        """The value under ``key`` (None when missing) and, when it is there, ``counter``
        incremented (made to live ``lifetime`` seconds when new), in one round trip, sent from
        the running event loop (``LoopRedis``) as the block starts and read, passed through
        ``then``, from the ``Pending`` it gives. Sent by the script's SHA, and again with the
        script itself when that fails."""
        keys, args = [key, counter], [int(lifetime)]
        return self._loop_redis.get().sent(
            ("EVALSHA", _GET_AND_COUNT_SHA, len(keys), *keys, *args),
            again=("EVAL", _GET_AND_COUNT, len(keys), *keys, *args),
            then=lambda found: then(self._value_and_count(found)),
        )

    @cached_property
    def _loop_redis(self) -> PerLoop[LoopRedis]:
        """Each event loop's connection to the first server, made as redis-py's pool for this
        URL makes its connections (TLS, sockets, database number from the URL), with the
        cache's timeouts."""
        timeout = self._pool_options.get("socket_timeout")
        factory = AsyncConnectionPool.from_url(
            self._servers[0],
            retry=command_retry(asynchronous=True),
            socket_connect_timeout=self._pool_options.get("socket_connect_timeout"),
        )
        return PerLoop(lambda: LoopRedis(factory.make_connection, timeout))

    def _value_and_count(self, found) -> tuple[Any, int | None]:
        if found is None:
            return None, None
        value, count = found
        return self._unpickled(value), count

    def take_slot(self, counter, others, lifetime, limit):
        """Adds one to ``counter`` (living ``lifetime`` seconds from now) unless that makes
        it and ``others`` sum to more than ``limit``; returns whether it did. One round trip."""
        return self._run(_TAKE_SLOT, keys=[counter, *others], args=[int(lifetime), limit]) == 1

    def incr(self, key, delta):
        value = self._run(_INCR_EXISTING, keys=[key], args=[delta])
        if value is None:
            raise ValueError(f"Key '{key}' not found.")
        return value


_cache_clients: dict[tuple, SharedPoolRedisCacheClient] = {}


class SharedPoolRedisCache(RedisCache):
    """Django's ``RedisCache`` with one cache client, and so one connection pool, per process,
    shared by every cache object of the process.

    Django's ``caches`` handler makes a cache object per async context and per thread (every
    A2A call is a context of its own), and Django's own ``RedisCache`` gives each object a
    client and a pool of its own: each call opened a fresh connection to Redis, costing a
    TCP handshake and Redis's HELLO, and built a client. Here the client comes from a
    registry keyed by the servers and the options, so the process keeps its connections: one
    for the cache when, as in the relay, calls reach the cache from one thread at a time.
    """

    def __init__(self, server, params):
        super().__init__(server, params)
        self._class = SharedPoolRedisCacheClient

    @cached_property
    def _cache(self) -> SharedPoolRedisCacheClient:
        key = (tuple(self._servers), repr(sorted(self._options.items())))
        client = _cache_clients.get(key)
        if client is None:
            with _pools_lock:
                client = _cache_clients.get(key)
                if client is None:
                    client = self._class(self._servers, **self._options)
                    _cache_clients[key] = client
        return client

    def get_and_count(
        self, key, counter, lifetime, then: Callable[[tuple[Any, int | None]], T]
    ) -> contextlib.AbstractAsyncContextManager[Pending[T]]:
        """``get(key)`` and, when the key is there, ``counter`` incremented (as ``ratelimit``
        counts, living ``lifetime`` seconds from its first call), in one round trip from the
        running event loop: sent as the block starts, read (passed through ``then``) from
        the ``Pending`` it gives."""
        return self._cache.get_and_count(self.make_key(key), self.make_key(counter), lifetime, then)

    def take_slot(self, counter, others, lifetime, limit):
        """A stream slot in ``counter`` unless the open ones (``counter`` and ``others``)
        would exceed ``limit``: ``ratelimit.stream_slot_take`` in one round trip."""
        return self._cache.take_slot(
            self.make_and_validate_key(counter),
            [self.make_and_validate_key(other) for other in others],
            lifetime,
            limit,
        )
