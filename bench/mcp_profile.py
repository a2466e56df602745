"""What an MCP tool call costs the relay against the same A2A call, in one process: the relay's
ASGI app (embedded profile, a throwaway SQLite database) called over httpx's ASGI transport,
the echo agent in a process of its own. The two calls are sent in alternating rounds, one at a
time; each gets its CPU per call (this process's, every thread: the relay, its database
thread and the in-process client, which sends the same bytes either way), its trips to the
database thread and, with ``--profile``, the functions that took the most time.

    python bench/mcp_profile.py --calls 300
    python bench/mcp_profile.py --calls 100 --profile mcp
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import pstats
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import os  # noqa: E402

from bench.common import echo_registered, free_port, served, setup_django  # noqa: E402  (the path above makes `bench` importable)
from bench.gateway_load import answer_error, mcp_request, request_body  # noqa: E402

os.environ.setdefault("RELAY_ALLOW_PRIVATE_URLS", "true")  # the echo agent is on 127.0.0.1
# A limit never reached, so every call still pays for being counted (as gateway_bench.py).
os.environ.setdefault("RELAY_RATE_LIMIT_PER_KEY", str(10**9))
setup_django("relay-mcp-profile-")

ROUNDS = 10
WARMUP = 20


class Hops:
    """Counts the trips to the database thread (``database_sync_to_async``) while on."""

    def __init__(self) -> None:
        from relay_project.database import DatabaseSyncToAsync

        self.count = 0
        handler = DatabaseSyncToAsync.thread_handler

        def counted(this, *args, **kwargs):
            self.count += 1
            return handler(this, *args, **kwargs)

        DatabaseSyncToAsync.thread_handler = counted


def prepared() -> str:
    """Migrates the throwaway database; the secret of a fresh API key."""
    from django.core.management import call_command

    from registry.services import api_key_create

    call_command("migrate", verbosity=0)
    return api_key_create(name="mcp-profile")[1]


async def main(args: argparse.Namespace, key: str) -> None:
    import httpx

    from relay_project.asgi import application
    from relay_project.heap import freeze_startup_heap

    freeze_startup_heap()  # as a server process does when it starts serving

    port = free_port()
    agent = served("agent", port)
    try:
        transport = httpx.ASGITransport(app=application)
        async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as client:
            auth = await echo_registered(client, key, port)
            mcp_body, mcp_headers = mcp_request()
            calls = {
                "a2a": (
                    "/a2a/agents/echo/",
                    request_body("1.0", streaming=False),
                    {"Content-Type": "application/json", "A2A-Version": "1.0", **auth},
                ),
                "mcp": ("/mcp", mcp_body, {**mcp_headers, **auth}),
            }

            async def send(name: str) -> None:
                path, body, headers = calls[name]
                response = await client.post(path, content=body, headers=headers)
                problem = answer_error(response)
                if problem or '"isError":true' in response.text.replace(" ", ""):
                    raise SystemExit(f"{name}: {problem or response.text[:300]}")

            for name in calls:
                for _ in range(WARMUP):
                    await send(name)
            hops = Hops()
            cpu = dict.fromkeys(calls, 0.0)
            trips = dict.fromkeys(calls, 0)
            per_round = max(1, args.calls // ROUNDS)
            for round_number in range(ROUNDS):
                order = list(calls) if round_number % 2 == 0 else list(reversed(calls))
                for name in order:
                    hops.count = 0
                    started = time.process_time()
                    for _ in range(per_round):
                        await send(name)
                    cpu[name] += time.process_time() - started
                    trips[name] += hops.count
            total = per_round * ROUNDS
            for name in calls:
                print(
                    f"{name}: {cpu[name] / total * 1000:.2f} ms CPU per call, "
                    f"{trips[name] / total:.2f} database-thread trips per call ({total} calls)"
                )
            print(f"mcp / a2a CPU: {cpu['mcp'] / cpu['a2a']:.2f}x")
            if args.profile:
                profile = cProfile.Profile()
                profile.enable()
                for _ in range(total):
                    await send(args.profile)
                profile.disable()
                stats = pstats.Stats(profile).strip_dirs().sort_stats(args.sort)
                print(f"\n{args.profile}, {total} calls, by {args.sort}:")
                stats.print_stats(args.top)
    finally:
        agent.terminate()
        agent.wait()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=300, help="timed calls of each kind")
    parser.add_argument("--profile", choices=("a2a", "mcp"), help="cProfile that call after")
    parser.add_argument("--sort", default="tottime", help="pstats sort key (tottime, cumulative)")
    parser.add_argument("--top", type=int, default=40)
    asyncio.run(main(parser.parse_args(), prepared()))
