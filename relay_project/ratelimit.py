"""Rate limits and stream slots, counted in Django's cache: the local-memory cache in the
embedded profile (one count per process), Redis in the production profile (one count shared by
every process).

Rate limits use fixed one-minute windows: a counter per (scope, identity, window) that
``cache.add`` creates and ``cache.incr`` counts, both atomic in either cache. A call over the
limit is still counted, so a client that keeps hammering stays refused until the window ends;
the answer says how long that is.

On Redis an A2A call's API-key lookup and its count are one round trip
(``cached_and_counted``), and so is taking a stream slot: Lua scripts of the cache client
(``relay_project.redis_cache``), atomic as the commands they replace.

Stream slots are counted per API key and per relay process: a process takes a slot when a
stream opens and gives it back when it ends, and a key's open streams are the sum over the
processes that are alive (the tasks app plugs in who this process is and which processes
hold a lease: ``register_stream_holders``). The slots of a process that died stop counting as
soon as its lease runs out; each counter also expires ``RELAY_STREAM_SLOT_SECONDS`` after the
last stream of its key opened in its process.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.core.cache import cache

from relay_project.redis_clients import UNREACHABLE

logger = logging.getLogger(__name__)

WINDOW_SECONDS = 60
_PREFIX = "relay:limit"


@dataclass(frozen=True)
class Refusal:
    """Why a call is refused: a message for the caller and the seconds until it may retry."""

    message: str
    retry_after: int | None = None


def hit(scope: str, identity: str, limit: int, *, now: float | None = None) -> Refusal | None:
    """Counts one call of ``identity`` in ``scope`` ("key", "agent"); returns a Refusal when
    that makes more than ``limit`` calls in the current minute, else None. ``limit`` 0 or less
    counts nothing and refuses nothing."""
    if limit <= 0:
        return None
    counter = _Counter.current(scope, identity, now)
    return counter.counted(_count(counter.name, COUNTER_SECONDS)).refusal(limit)


def cached_and_counted(
    cache_key: str, scope: str, identity: str, *, now: float | None = None
) -> tuple[Any, Counted | None]:
    """The value cached under ``cache_key`` (None when there is none) and, only when there
    is one, one call of ``identity`` counted in ``scope`` as ``hit`` counts it, whatever the
    limit (the caller judges the count with ``Counted.refusal``). On Redis both are one round
    trip (``redis_cache``)."""
    counter = _Counter.current(scope, identity, now)
    both = getattr(cache, "get_and_count", None)
    if both is None:
        value, count = _get_and_count(cache_key, counter.name)
    else:
        value, count = both(cache_key, counter.name, COUNTER_SECONDS)
    return value, None if count is None else counter.counted(count)


def _get_and_count(cache_key: str, counter: str) -> tuple[Any, int | None]:
    """``get_and_count`` of a cache without it: two calls, each atomic."""
    value = cache.get(cache_key)
    return value, None if value is None else _count(counter, COUNTER_SECONDS)


COUNTER_SECONDS = WINDOW_SECONDS + 5
"""How long a window's counter lives: a little longer than the window, so the counter outlives
every call counted in it."""


@dataclass(frozen=True)
class _Counter:
    scope: str
    window: int
    name: str
    now: float

    @classmethod
    def current(cls, scope: str, identity: str, now: float | None) -> _Counter:
        now = time.time() if now is None else now
        window = int(now // WINDOW_SECONDS)
        return cls(scope, window, f"{_PREFIX}:{scope}:{identity}:{window}", now)

    def counted(self, count: int) -> Counted:
        return Counted(self, count)


@dataclass(frozen=True)
class Counted:
    """A call counted in its window: ``count`` calls so far, this one included."""

    counter: _Counter
    count: int

    def refusal(self, limit: int) -> Refusal | None:
        """A Refusal when the count is over ``limit`` (0 or less: no limit), else None."""
        if limit <= 0 or self.count <= limit:
            return None
        counter = self.counter
        retry_after = max(1, math.ceil((counter.window + 1) * WINDOW_SECONDS - counter.now))
        return Refusal(
            f"rate limit exceeded: {limit} calls per minute for this {counter.scope}; "
            f"retry in {retry_after} s",
            retry_after,
        )


def counter_add(name: str, lifetime: float) -> int:
    """Adds one to the counter ``name`` (made, living ``lifetime`` seconds, when missing) and
    returns it: the quotas' calls per day count so."""
    return _count(f"{_PREFIX}:{name}", lifetime)


def counter_take_back(name: str) -> None:
    """Takes back one ``counter_add`` added (a call refused after all)."""
    _decrement(f"{_PREFIX}:{name}")


def key_identity(api_key) -> str:
    # The prefix is unique, public and never reused, unlike a row id after a database reset.
    return api_key.prefix


def key_limit(api_key) -> int:
    """Calls per minute for one API key: its own limit when set, else the default."""
    own = getattr(api_key, "rate_limit_per_minute", None)
    return settings.RELAY_RATE_LIMIT_PER_KEY if own is None else own


def hit_key(api_key) -> Refusal | None:
    """Counts one call of an API key against its limit."""
    return hit("key", key_identity(api_key), key_limit(api_key))


def hit_agent(agent_id: str) -> Refusal | None:
    """Counts one call to an agent, whoever makes it, against RELAY_RATE_LIMIT_PER_AGENT."""
    return hit("agent", agent_id, settings.RELAY_RATE_LIMIT_PER_AGENT)


def _current_holder() -> str:
    return ""


def _live_holders() -> Iterable[str]:
    return ()


def register_stream_holders(
    *, current: Callable[[], str], live: Callable[[], Iterable[str]]
) -> None:
    """Plugs in this process's name (``current``, never a database query) and the names of
    the processes alive now (``live``; called where a query is allowed) for stream slots."""
    global _current_holder, _live_holders
    _current_holder, _live_holders = current, live


def _streams_counter(api_key, holder: str) -> str:
    counter = f"{_PREFIX}:streams:{key_identity(api_key)}"
    return f"{counter}:{holder}" if holder else counter


def stream_slot_take(api_key) -> Refusal | None:
    """Takes a stream slot of the key; returns a Refusal (and takes nothing) when the key
    already has RELAY_MAX_STREAMS_PER_KEY streams open. A limit of 0 takes and refuses
    nothing; ``stream_slot_give_back`` is then a no-op too."""
    limit = settings.RELAY_MAX_STREAMS_PER_KEY
    if limit <= 0:
        return None
    counter = _streams_counter(api_key, _current_holder())
    lifetime = settings.RELAY_STREAM_SLOT_SECONDS
    take = getattr(cache, "take_slot", None)
    if take is not None:
        others = [
            _streams_counter(api_key, holder)
            for holder in set(_live_holders()) - {_current_holder()}
        ]
        taken = take(counter, others, lifetime, limit)
    else:
        _count(counter, lifetime)
        cache.touch(counter, lifetime)
        taken = streams_open(api_key) <= limit
        if not taken:
            _decrement(counter)
    if not taken:
        return Refusal(
            f"this key already has {limit} streams open, the most it may; close one first"
        )
    return None


def stream_slot_give_back(api_key) -> None:
    """Gives back a slot ``stream_slot_take`` took. Never raises: it runs as a stream ends,
    after its final event, where nothing may follow (an error frame would). With Redis
    unreachable the slot stays taken until its counter expires (RELAY_STREAM_SLOT_SECONDS)."""
    if settings.RELAY_MAX_STREAMS_PER_KEY <= 0:
        return
    try:
        _decrement(_streams_counter(api_key, _current_holder()))
    except UNREACHABLE as error:
        logger.warning("could not give a stream slot back, Redis is unreachable: %s", error)


def streams_open(api_key) -> int:
    """How many stream slots the key holds now, in the processes alive (one read)."""
    holders = {_current_holder(), *_live_holders()}
    counts = cache.get_many([_streams_counter(api_key, holder) for holder in holders])
    return sum(max(0, count) for count in counts.values())


def _count(counter: str, lifetime: float) -> int:
    """Adds one to a counter and returns it; a counter that does not exist starts at 1 and
    lives ``lifetime`` seconds. Atomic in both caches: of two processes that find it missing,
    one creates it and the other counts on it."""
    try:
        return cache.incr(counter)  # the common case: one call (two round trips to Redis)
    except ValueError:
        if cache.add(counter, 1, timeout=lifetime):
            return 1
        return cache.incr(counter)


def _decrement(counter: str) -> None:
    try:
        if cache.decr(counter) < 0:
            # The counter expired and came back from Redis's DECR at -1: start afresh.
            cache.delete(counter)
    except ValueError:
        pass  # expired: nothing left to give back
