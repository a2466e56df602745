"""What the request limits and the rate limiter cost per A2A call.

Request limits: ``check_body`` (size and raw nesting depth) and ``check_params`` (parts,
metadata, historyLength) on a typical SendMessage body, on one of 1 MiB of text and on one of
1 MiB of small JSON values, against ``json.loads`` of the same body: the parse every call pays
anyway, measured in the same run.

Rate limiter: ``ratelimit.hit_key`` (an add and an incr) against one ``cache.get`` of the same
cache, with the local-memory cache and, when REDIS_URL is set, with Redis.

    python bench/limits_bench.py [--rounds 2000]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "relay_project.settings")


def per_call(function, rounds: int) -> float:
    """Microseconds per call, the best of three runs of ``rounds`` calls."""
    best = float("inf")
    for _ in range(3):
        started = time.perf_counter()
        for _ in range(rounds):
            function()
        best = min(best, (time.perf_counter() - started) / rounds)
    return best * 1e6


def bodies() -> dict[str, bytes]:
    message = {
        "messageId": "m-1",
        "role": "ROLE_USER",
        "parts": [{"text": "hello there"}],
        "metadata": {"trace": {"id": "t-1", "sampled": True}},
    }
    typical = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "SendMessage",
        "params": {"message": message, "configuration": {"historyLength": 5}},
    }
    text = dict(typical, params={"message": dict(message, parts=[{"text": "x" * 1_000_000}])})
    many = dict(
        typical,
        params={"message": dict(message, parts=[{"data": {"values": list(range(100_000))}}])},
    )
    return {
        name: json.dumps(body).encode()
        for name, body in (("typical", typical), ("1 MiB text", text), ("1 MiB small values", many))
    }


def bench_limits(rounds: int) -> None:
    from tasks_app.protocol.limits import Limits, check_body, check_params

    limits = Limits(max_body_bytes=2 * 1024 * 1024)
    print("request limits (microseconds per call; ratio to json.loads of the same body)")
    print(
        f"  {'body':<20} {'bytes':>9} {'json.loads':>11} {'check_body':>11} "
        f"{'check_params':>13} {'ratio':>7}"
    )
    for name, body in bodies().items():
        count = rounds if len(body) < 10_000 else max(5, rounds // 200)
        params = json.loads(body)["params"]
        parse = per_call(lambda body=body: json.loads(body), count)
        raw = per_call(lambda body=body: check_body(body, limits), count)
        checked = per_call(lambda params=params: check_params(params, limits), count)
        print(
            f"  {name:<20} {len(body):>9} {parse:>11.1f} {raw:>11.1f} {checked:>13.1f} "
            f"{(raw + checked) / parse:>6.2f}x"
        )


def bench_rate_limiter(rounds: int) -> None:
    import django

    django.setup()
    from django.core.cache.backends.locmem import LocMemCache
    from django.core.cache.backends.redis import RedisCache

    from relay_project import ratelimit

    class Key:
        prefix = "benchkey"
        rate_limit_per_minute = 10**9

    backends = {"local memory": lambda: LocMemCache("limits-bench", {})}
    redis_url = os.environ.get("REDIS_URL")
    if redis_url:
        backends["redis"] = lambda: RedisCache(redis_url, {"KEY_PREFIX": "limits-bench"})
    print("\nrate limiter (microseconds per call; ratio to one cache.get)")
    for name, build in backends.items():
        cache = build()
        ratelimit.cache = cache
        cache.set("bench-probe", 1)
        get = per_call(lambda cache=cache: cache.get("bench-probe"), rounds)
        hit = per_call(lambda: ratelimit.hit_key(Key), rounds)
        print(f"  {name:<14} cache.get {get:7.1f}   hit_key {hit:7.1f}   ratio {hit / get:5.2f}x")
        cache.delete("bench-probe")
    if not redis_url:
        print("  (set REDIS_URL to measure Redis too)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2000)
    rounds = parser.parse_args().rounds
    bench_limits(rounds)
    bench_rate_limiter(rounds)


if __name__ == "__main__":
    main()
