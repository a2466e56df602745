"""The relay's Django cache on Redis: Django's ``RedisCache`` sharing one connection pool per
process (``redis_clients.shared_pool``), and the Lua scripts that count calls and stream
slots in one round trip each.

Django's cache handler makes a cache object per async context and per thread (every A2A call
is a context of its own), and Django's own ``RedisCache`` gives each object a client and a
pool of its own: each call opened a fresh connection to Redis. Here the client comes from a
registry keyed by the servers and the options, so the process keeps its connections.

The scripts count (a call against a rate limit, a stream slot): they run on a pool that never
sends a command twice (``retries=0``), so a script whose answer was lost with its connection
is not counted again; the caller gets Redis's error (``redis_clients.UNREACHABLE``).
"""

from __future__ import annotations

import threading
from typing import Any

from django.core.cache.backends.redis import RedisCache, RedisCacheClient
from django.utils.functional import cached_property

from relay_project.redis_clients import shared_pool

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
    redis-py client per pool (a ``Redis`` object over a pool is safe to share between
    threads). ``incr`` is one round trip (Django's asks EXISTS, then INCRBY)."""

    def __init__(self, servers, **options):
        super().__init__(servers, **options)
        self._redis_clients: dict[int, Any] = {}
        self._scripts: dict[str, Any] = {}

    def _run(self, script: str, *, keys: list, args: list):
        """Runs a Lua script (registered at first use, then sent by its SHA) on the write
        server, on the pool that never retries: one round trip, counted once."""
        client = self._counting_client
        return self._script(client, script)(keys=keys, args=args, client=client)

    @cached_property
    def _counting_client(self):
        index = self._get_connection_pool_index(True)
        pool = shared_pool(self._servers[index], self._pool_class, self._pool_options, retries=0)
        return self._client(connection_pool=pool)

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

    def get_and_count(self, key, counter, lifetime) -> tuple[Any, int | None]:
        """The value under ``key`` (None when missing) and, when it is there, ``counter``
        incremented (made to live ``lifetime`` seconds when new): one round trip."""
        found = self._run(_GET_AND_COUNT, keys=[key, counter], args=[int(lifetime)])
        return self._value_and_count(found)

    def _value_and_count(self, found) -> tuple[Any, int | None]:
        if found is None:
            return None, None
        value, count = found
        return self._serializer.loads(value), count

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
_clients_lock = threading.Lock()


class SharedPoolRedisCache(RedisCache):
    """Django's ``RedisCache`` with one cache client, and so one connection pool, per process,
    shared by every cache object of the process."""

    def __init__(self, server, params):
        super().__init__(server, params)
        self._class = SharedPoolRedisCacheClient

    @cached_property
    def _cache(self) -> SharedPoolRedisCacheClient:
        key = (tuple(self._servers), repr(sorted(self._options.items())))
        client = _cache_clients.get(key)
        if client is None:
            with _clients_lock:
                client = _cache_clients.get(key)
                if client is None:
                    client = self._class(self._servers, **self._options)
                    _cache_clients[key] = client
        return client

    def get_and_count(self, key, counter, lifetime) -> tuple[Any, int | None]:
        """``get(key)`` and, when the key is there, ``counter`` incremented (as ``ratelimit``
        counts, living ``lifetime`` seconds from its first call), in one round trip."""
        return self._cache.get_and_count(self.make_key(key), self.make_key(counter), lifetime)

    def take_slot(self, counter, others, lifetime, limit):
        """A stream slot in ``counter`` unless the open ones (``counter`` and ``others``)
        would exceed ``limit``: ``ratelimit.stream_slot_take`` in one round trip."""
        return self._cache.take_slot(
            self.make_and_validate_key(counter),
            [self.make_and_validate_key(other) for other in others],
            lifetime,
            limit,
        )


def forget_clients() -> None:
    """Drops every cache client (tests; the next use makes new ones)."""
    with _clients_lock:
        _cache_clients.clear()
