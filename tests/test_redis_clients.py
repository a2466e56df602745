"""How the relay's Redis clients are set up, with no Redis server needed: the cache's one pool
per process, and the timeouts, health checks and retry every client gets."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from redis.retry import Retry

from relay_project import redis_cache, redis_clients
from relay_project.redis_cache import SharedPoolRedisCache

ROOT = Path(__file__).resolve().parent.parent
URL = "redis://127.0.0.1:1/0"  # never connected to: making a pool opens no connection
OPTIONS = {"socket_connect_timeout": 0.5, "socket_timeout": 2.0, "health_check_interval": 30}


@pytest.fixture(autouse=True)
def no_shared_pools():
    redis_clients.forget_pools()
    redis_cache.forget_clients()
    yield
    redis_clients.forget_pools()
    redis_cache.forget_clients()


def cache_object(url: str = URL, **options) -> SharedPoolRedisCache:
    return SharedPoolRedisCache(url, {"OPTIONS": {**OPTIONS, **options}})


def pool_of(cache: SharedPoolRedisCache, *, write: bool = True):
    return cache._cache._get_connection_pool(write)


def test_two_cache_objects_share_one_connection_pool():
    first, second = cache_object(), cache_object()
    assert pool_of(first) is pool_of(second)
    assert pool_of(first, write=False) is pool_of(first, write=True)


def test_cache_objects_share_one_redis_client_and_make_none_per_command():
    first, second = cache_object(), cache_object()
    assert first._cache is second._cache
    client = first._cache.get_client("a", write=True)
    assert first._cache.get_client("b") is client
    assert client.connection_pool is pool_of(first)


def test_other_options_get_a_cache_client_of_their_own():
    assert cache_object()._cache is not cache_object(socket_timeout=9.0)._cache


def test_cache_objects_made_in_different_threads_share_one_pool():
    pools = []
    threads = [
        threading.Thread(target=lambda: pools.append(pool_of(cache_object()))) for _ in range(8)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(5)
    assert len(pools) == 8
    assert len({id(pool) for pool in pools}) == 1


def test_another_server_or_other_options_get_a_pool_of_their_own():
    pool = pool_of(cache_object())
    assert pool_of(cache_object("redis://127.0.0.1:1/1")) is not pool
    assert pool_of(cache_object(socket_timeout=9.0)) is not pool


def test_the_shared_pool_connects_with_the_timeouts_health_check_and_one_retry():
    connection = pool_of(cache_object()).make_connection()
    assert connection.socket_connect_timeout == 0.5
    assert connection.socket_timeout == 2.0
    assert connection.health_check_interval == 30
    assert isinstance(connection.retry, Retry)
    assert connection.retry.get_retries() == 1


def test_the_command_retry_retries_once_on_connection_errors_and_timeouts():
    from redis.exceptions import ConnectionError, TimeoutError

    retry = redis_clients.command_retry()
    assert retry.get_retries() == 1
    assert {ConnectionError, TimeoutError} <= set(retry._supported_errors)


def production_settings(**env: str) -> dict:
    """The Redis settings of the production profile, read in a fresh interpreter."""
    script = """
import json, django
django.setup()
from django.conf import settings
print(json.dumps({
    "layers": getattr(settings, "CHANNEL_LAYERS", None),
    "cache": settings.CACHES["default"],
    "broker": settings.CELERY_BROKER_TRANSPORT_OPTIONS,
}))
"""
    from tests.live import relay_env

    result = subprocess.run(
        [sys.executable, "-c", script],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        env={
            **relay_env(ROOT / "var"),
            "DJANGO_SETTINGS_MODULE": "relay_project.settings",
            "REDIS_URL": "redis://127.0.0.1:6379/0",
            **env,
        },
    )
    assert result.returncode == 0, result.stderr[-2000:]
    return json.loads(result.stdout)


@pytest.fixture(scope="module")
def production():
    """The production profile's Redis settings with the connection variables set, read once
    for the module: a fresh interpreter's Django start costs seconds of CPU."""
    return production_settings(
        RELAY_REDIS_CONNECT_TIMEOUT="0.25",
        RELAY_REDIS_SOCKET_TIMEOUT="1.5",
        RELAY_REDIS_HEALTH_CHECK_SECONDS="7",
    )


def test_every_redis_client_of_the_production_profile_gets_the_connection_settings(production):
    found = production
    assert found["cache"]["BACKEND"] == "relay_project.redis_cache.SharedPoolRedisCache"
    assert found["cache"]["OPTIONS"] == {
        "socket_connect_timeout": 0.25,
        "socket_timeout": 1.5,
        "health_check_interval": 7,
        # One connection per process for the database thread; it waits for it no longer
        # than a command may take.
        "pool_class": "redis.BlockingConnectionPool",
        "max_connections": 1,
        "timeout": 1.75,
    }
    # The broker's blocking reads (BRPOP for 1 s) end before their socket gives up.
    blocking = {"socket_connect_timeout": 0.25, "socket_timeout": 6.5, "health_check_interval": 7}
    assert found["broker"] == {**blocking, "retry_on_timeout": True}


def test_the_relay_configures_no_channel_layer_it_would_not_use(production):
    """Streams follow their tasks through the database (tasks_app.streams), not a channel
    layer: none is configured, in either profile."""
    assert production["layers"] is None
