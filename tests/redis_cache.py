"""The production profile's cache on the local Redis, for tests of what runs on it."""

from __future__ import annotations

import uuid

import pytest

REDIS_URL = "redis://127.0.0.1:6379/0"


def redis_cache(prefix: str):
    """The production profile's cache backend, with its shared pool, on the Redis at
    127.0.0.1:6379, its keys under a fresh ``prefix``. Skips the test when no Redis answers
    there (the production tests, -m production, run where one does)."""
    redis = pytest.importorskip("redis")
    from relay_project.redis_cache import SharedPoolRedisCache

    try:
        redis.Redis.from_url(REDIS_URL, socket_timeout=1).ping()
    except redis.exceptions.ConnectionError:
        pytest.skip("no Redis on 127.0.0.1:6379")
    return SharedPoolRedisCache(REDIS_URL, {"KEY_PREFIX": f"{prefix}-{uuid.uuid4().hex}"})
