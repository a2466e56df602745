"""The cache-backed rate limiter and stream slots, on the local-memory cache and on Redis."""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from dataclasses import dataclass

import pytest
from django.core.cache.backends.locmem import LocMemCache

from relay_project import ratelimit
from tests.live import free_port
from tests.redis_cache import redis_cache

WINDOW_START = 1_800_000_000.0  # a multiple of 60


@dataclass
class Key:
    prefix: str
    rate_limit_per_minute: int | None = None


def fresh_key(**fields) -> Key:
    return Key(prefix=uuid.uuid4().hex[:12], **fields)


@pytest.fixture(params=["locmem", "redis"])
def cache(request, monkeypatch):
    """The limiter on a cache of its own: local memory, or the production profile's Redis (run
    with the other production tests, -m production, when Redis is on 127.0.0.1:6379)."""
    if request.param == "locmem":
        backend = LocMemCache(f"ratelimit-{uuid.uuid4().hex}", {})
    else:
        backend = redis_cache("ratelimit-test")
    monkeypatch.setattr(ratelimit, "cache", backend)
    processes.current, processes.alive = "this", ["this"]
    monkeypatch.setattr(ratelimit, "_current_holder", lambda: processes.current)
    monkeypatch.setattr(ratelimit, "_live_holders", lambda: processes.alive)
    return backend


class processes:  # noqa: N801 - a namespace the tests change
    """The relay processes the limiter sees: the current one and those alive."""

    current = "this"
    alive = ["this"]


def test_calls_within_the_limit_pass_and_the_next_is_refused_until_the_window_ends(cache):
    identity = uuid.uuid4().hex
    for second in range(5):
        assert ratelimit.hit("key", identity, 5, now=WINDOW_START + second) is None
    refusal = ratelimit.hit("key", identity, 5, now=WINDOW_START + 20.5)
    assert refusal is not None and refusal.retry_after == 40
    assert "5 calls per minute for this key" in refusal.message
    assert ratelimit.hit("key", identity, 5, now=WINDOW_START + 60) is None


def test_the_last_second_of_a_window_asks_to_retry_in_one(cache):
    identity = uuid.uuid4().hex
    ratelimit.hit("agent", identity, 1, now=WINDOW_START)
    assert ratelimit.hit("agent", identity, 1, now=WINDOW_START + 59.9).retry_after == 1


def test_a_limit_of_zero_counts_nothing(cache):
    identity = uuid.uuid4().hex
    assert all(ratelimit.hit("key", identity, 0) is None for _ in range(100))


def test_a_keys_own_limit_wins_over_the_default(cache, settings):
    settings.RELAY_RATE_LIMIT_PER_KEY = 1
    own = fresh_key(rate_limit_per_minute=3)
    assert [ratelimit.hit_key(own) is None for _ in range(4)] == [True, True, True, False]
    unlimited = fresh_key(rate_limit_per_minute=0)
    assert all(ratelimit.hit_key(unlimited) is None for _ in range(10))
    default = fresh_key()
    assert [ratelimit.hit_key(default) is None for _ in range(2)] == [True, False]


def test_concurrent_calls_are_counted_exactly(cache):
    identity = uuid.uuid4().hex
    refused: list[bool] = []
    lock = threading.Lock()

    def caller():
        for _ in range(10):
            outcome = ratelimit.hit("key", identity, 25, now=WINDOW_START)
            with lock:
                refused.append(outcome is not None)

    threads = [threading.Thread(target=caller) for _ in range(5)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert refused.count(False) == 25 and refused.count(True) == 25


def test_a_cached_value_and_the_count_come_together_and_share_the_limit_with_hit(cache):
    identity, cache_key = uuid.uuid4().hex, f"cached-{uuid.uuid4().hex}"
    assert cached_and_counted(cache_key, "key", identity) == (None, None)
    assert ratelimit.hit("key", identity, 2, now=WINDOW_START) is None  # nothing counted above
    cache.set(cache_key, {"a": "value"})
    value, counted = cached_and_counted(cache_key, "key", identity, now=WINDOW_START)
    assert value == {"a": "value"} and counted.count == 2 and counted.refusal(2) is None
    _, counted = cached_and_counted(cache_key, "key", identity, now=WINDOW_START + 30)
    refusal = counted.refusal(2)
    assert refusal.retry_after == 30 and "2 calls per minute for this key" in refusal.message
    assert counted.refusal(0) is None
    assert ratelimit.hit("key", identity, 3, now=WINDOW_START + 59) is not None
    _, counted = cached_and_counted(cache_key, "key", identity, now=WINDOW_START + 60)
    assert counted.count == 1


cached_and_counted = ratelimit.cached_and_counted


@pytest.mark.parametrize("cache", ["redis"], indirect=True)
def test_on_redis_the_lookup_and_the_count_are_one_round_trip(cache, monkeypatch):
    cache_key, identity = f"cached-{uuid.uuid4().hex}", uuid.uuid4().hex
    cache.set(cache_key, "value")
    cached_and_counted(cache_key, "key", identity)  # connects, loads the script
    sent = commands_sent(monkeypatch)
    value, counted = cached_and_counted(cache_key, "key", identity)
    assert (value, counted.count) == ("value", 2)
    assert sent == ["EVALSHA"]


def commands_sent(monkeypatch) -> list[str]:
    """The name of every command the cache's Redis connections send from now on."""
    from redis.connection import AbstractConnection

    sent = []
    send = AbstractConnection.send_command
    monkeypatch.setattr(
        AbstractConnection,
        "send_command",
        lambda self, *args, **kw: sent.append(args[0]) or send(self, *args, **kw),
    )
    return sent


@pytest.mark.parametrize("cache", ["redis"], indirect=True)
def test_on_redis_a_lookup_after_redis_forgot_its_script_counts_once(cache, monkeypatch):
    cache_key, identity = f"cached-{uuid.uuid4().hex}", uuid.uuid4().hex
    cache.set(cache_key, "value")
    assert cached_and_counted(cache_key, "key", identity)[1].count == 1
    cache._cache.get_client(write=True).script_flush()  # as a restarted Redis has forgotten it
    sent = commands_sent(monkeypatch)
    value, counted = cached_and_counted(cache_key, "key", identity)
    assert (value, counted.count) == ("value", 2)
    # Refused by its SHA (so not run), then loaded and run once.
    assert sent[0] == "EVALSHA" and sent.count("EVALSHA") + sent.count("EVAL") == 2
    assert cached_and_counted(cache_key, "key", identity)[1].count == 3


@pytest.mark.parametrize("cache", ["redis"], indirect=True)
def test_on_redis_a_lookup_on_a_connection_redis_closed_is_answered(cache):
    """A pooled connection that Redis closed (a restart) is replaced as it is taken from the
    pool, before the script is sent: the call is answered and counted once."""
    cache_key, identity = f"cached-{uuid.uuid4().hex}", uuid.uuid4().hex
    cache.set(cache_key, "value")
    assert cached_and_counted(cache_key, "key", identity)[1].count == 1
    client = cache._cache.get_client(write=True)
    mine = client.client_id()
    for entry in client.client_list():  # the counting connection goes stale
        if entry["id"] != str(mine):
            client.client_kill_filter(_id=entry["id"])
    value, counted = cached_and_counted(cache_key, "key", identity)
    assert (value, counted.count) == ("value", 2)


@pytest.mark.parametrize("cache", ["redis"], indirect=True)
def test_on_redis_a_counting_script_is_never_sent_twice(cache):
    """The scripts count: their pool has no retry, so a script whose answer was lost is not
    run again (and counted twice) on a fresh connection."""
    client = cache._cache._counting_client
    assert client.connection_pool.connection_kwargs["retry"].get_retries() == 0


def test_with_redis_unreachable_a_lookup_fails_at_once_as_unreachable(monkeypatch):
    from relay_project.redis_cache import SharedPoolRedisCache
    from relay_project.redis_clients import UNREACHABLE

    port = free_port()  # nothing listens on it
    backend = SharedPoolRedisCache(
        f"redis://127.0.0.1:{port}/0",
        {"OPTIONS": {"socket_connect_timeout": 0.5, "socket_timeout": 0.5}},
    )
    monkeypatch.setattr(ratelimit, "cache", backend)
    started = time.monotonic()
    with pytest.raises(UNREACHABLE):
        cached_and_counted("anything", "key", "someone")
    assert time.monotonic() - started < 2


async def test_with_redis_silent_a_lookup_fails_within_its_timeout_as_unreachable(monkeypatch):
    """A Redis that takes the connection and never answers (hung, or a port that swallows
    what it gets): the lookup gives up after its timeout."""
    from relay_project.redis_cache import SharedPoolRedisCache
    from relay_project.redis_clients import UNREACHABLE

    async def swallow(reader, writer):
        await reader.read(-1)

    server = await asyncio.start_server(swallow, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    backend = SharedPoolRedisCache(
        f"redis://127.0.0.1:{port}/0",
        {"OPTIONS": {"socket_connect_timeout": 0.3, "socket_timeout": 0.3}},
    )
    monkeypatch.setattr(ratelimit, "cache", backend)
    started = time.monotonic()
    async with server:
        with pytest.raises(UNREACHABLE):
            await asyncio.to_thread(cached_and_counted, "anything", "key", "someone")
    assert 0.2 <= time.monotonic() - started < 2


@pytest.mark.parametrize("cache", ["redis"], indirect=True)
def test_on_redis_a_stream_slot_is_taken_or_refused_in_one_round_trip(cache, settings, monkeypatch):
    settings.RELAY_MAX_STREAMS_PER_KEY = 2
    processes.alive = ["this", "other"]
    key = fresh_key()
    processes.current = "other"
    assert ratelimit.stream_slot_take(key) is None
    processes.current = "this"
    client = cache._cache._counting_client
    sent = []
    execute = client.execute_command
    monkeypatch.setattr(
        client, "execute_command", lambda *args, **kw: sent.append(args[0]) or execute(*args, **kw)
    )
    assert ratelimit.stream_slot_take(key) is None
    assert ratelimit.stream_slot_take(key) is not None  # one here and one in "other"
    assert sent == ["EVALSHA", "EVALSHA"]
    assert ratelimit.streams_open(key) == 2


def test_stream_slots_are_taken_refused_and_given_back(cache, settings):
    settings.RELAY_MAX_STREAMS_PER_KEY = 2
    key = fresh_key()
    assert ratelimit.stream_slot_take(key) is None
    assert ratelimit.stream_slot_take(key) is None
    refusal = ratelimit.stream_slot_take(key)
    assert refusal is not None and "already has 2 streams open" in refusal.message
    assert ratelimit.streams_open(key) == 2  # a refused take holds nothing
    ratelimit.stream_slot_give_back(key)
    assert ratelimit.stream_slot_take(key) is None


def test_slots_of_an_expired_count_are_not_given_back_below_zero(cache, settings):
    settings.RELAY_MAX_STREAMS_PER_KEY = 1
    key = fresh_key()
    ratelimit.stream_slot_give_back(key)  # nothing held: the counter does not exist
    ratelimit.stream_slot_give_back(key)
    assert ratelimit.streams_open(key) == 0
    assert ratelimit.stream_slot_take(key) is None
    assert ratelimit.stream_slot_take(key) is not None


def test_the_slots_of_a_process_whose_lease_ran_out_stop_counting_at_once(cache, settings):
    settings.RELAY_MAX_STREAMS_PER_KEY = 2
    key = fresh_key()
    processes.alive = ["this", "other"]
    processes.current = "other"
    assert ratelimit.stream_slot_take(key) is None
    assert ratelimit.stream_slot_take(key) is None  # "other" holds both slots
    processes.current = "this"
    assert ratelimit.stream_slot_take(key) is not None
    assert ratelimit.streams_open(key) == 2
    processes.alive = ["this"]  # "other" died: its lease ran out
    assert ratelimit.streams_open(key) == 0
    assert ratelimit.stream_slot_take(key) is None
    assert ratelimit.stream_slot_take(key) is None
    assert ratelimit.stream_slot_take(key) is not None


def test_the_stream_count_expires_so_a_crashed_process_cannot_hold_slots(cache, settings):
    settings.RELAY_MAX_STREAMS_PER_KEY = 1
    settings.RELAY_STREAM_SLOT_SECONDS = 1
    key = fresh_key()
    assert ratelimit.stream_slot_take(key) is None  # never given back, as by a crashed process
    assert ratelimit.stream_slot_take(key) is not None
    time.sleep(1.2)
    assert ratelimit.stream_slot_take(key) is None
