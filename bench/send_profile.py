"""What one A2A SendMessage costs the relay, in one process: the relay's ASGI app called over
httpx's ASGI transport, one call at a time, the echo agent in a process of its own. The
embedded profile (a throwaway SQLite database), or with ``--production`` a throwaway
PostgreSQL database and a Redis server of its own. Prints the CPU per call (this process's,
every thread: the relay, its database thread and the in-process client) and the Python
function calls per call, counted with cProfile on the event loop's thread and on the
database thread; ``--top N`` prints the functions that took the most time.

    python bench/send_profile.py --calls 300
    python bench/send_profile.py --calls 300 --production --top 40 --sort cumulative
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import os
import pstats
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import (  # noqa: E402  (the path above makes `bench` importable)
    echo_registered,
    free_port,
    postgres_database,
    redis_server,
    served,
    setup_django,
)
from bench.gateway_load import echo_send  # noqa: E402

WARMUP = 30


def prepared() -> str:
    """Migrates the throwaway database; the secret of a fresh API key."""
    from django.core.management import call_command

    from registry.services import api_key_create

    call_command("migrate", verbosity=0)
    return api_key_create(name="send-profile")[1]


class Profiles:
    """cProfile on the event loop's thread and, around each trip there, the database thread."""

    def __init__(self) -> None:
        from relay_project.database import DatabaseSyncToAsync

        self.loop = cProfile.Profile(time.thread_time)
        self.database = cProfile.Profile(time.thread_time)
        self.on = False
        self.database_cpu = 0.0
        handler = DatabaseSyncToAsync.thread_handler
        profiles = self

        def profiled(this, *args, **kwargs):
            if not profiles.on:
                started = time.thread_time()
                try:
                    return handler(this, *args, **kwargs)
                finally:
                    profiles.database_cpu += time.thread_time() - started
            profiles.database.enable()
            try:
                return handler(this, *args, **kwargs)
            finally:
                profiles.database.disable()

        DatabaseSyncToAsync.thread_handler = profiled

    def calls(self) -> tuple[int, int]:
        counts = []
        for profile in (self.loop, self.database):
            profile.create_stats()
            counts.append(sum(entry[1] for entry in profile.stats.values()))
        return counts[0], counts[1]


async def settled() -> None:
    """Waits until no task is still being driven (the job may write after the answer)."""
    from relay_project.database import database_sync_to_async
    from tasks_app.models import Task

    open_tasks = Task.objects.exclude(state__in=["completed", "failed", "canceled"]).exists
    for _ in range(200):
        if not await database_sync_to_async(open_tasks)():
            return
        await asyncio.sleep(0.01)
    raise SystemExit("a task is still open")


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
            send = echo_send(client, await echo_registered(client, key, port))

            for _ in range(WARMUP):
                await send()
            await settled()
            profiles = Profiles()
            started = time.process_time()
            for _ in range(args.calls):
                await send()
            await settled()
            cpu = (time.process_time() - started) / args.calls
            database_cpu = profiles.database_cpu / args.calls
            if args.cpu_only:
                print(
                    f"{cpu * 1000:.3f} ms CPU per call, {database_cpu * 1000:.3f} in the database thread"
                )
                return
            profiles.on = True
            profiles.loop.enable()
            for _ in range(args.calls):
                await send()
            profiles.loop.disable()
            profiles.on = False
            await settled()
            loop_calls, database_calls = profiles.calls()
            profile = "production" if args.production else "embedded"
            print(
                f"{profile}: {cpu * 1000:.3f} ms CPU per call ({args.calls} calls), "
                f"{database_cpu * 1000:.3f} ms of it in the database thread; "
                f"Python calls per call: {loop_calls / args.calls:.0f} on the loop, "
                f"{database_calls / args.calls:.0f} in the database thread"
            )
            for name, one in (("loop", profiles.loop), ("database thread", profiles.database)):
                if args.dump:
                    one.dump_stats(f"{args.dump}-{name.split()[0]}.prof")
                if args.top:
                    print(f"\n{name}, {args.calls} calls, by {args.sort}:")
                    pstats.Stats(one).strip_dirs().sort_stats(args.sort).print_stats(args.top)
    finally:
        agent.terminate()
        agent.wait()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=300, help="timed calls, then profiled")
    parser.add_argument("--production", action="store_true", help="PostgreSQL and Redis")
    parser.add_argument("--sort", default="tottime", help="pstats sort key (tottime, cumulative)")
    parser.add_argument("--top", type=int, default=0, help="functions to print per thread")
    parser.add_argument("--cpu-only", action="store_true", help="no cProfile pass")
    parser.add_argument("--dump", help="write each thread's profile to DUMP-loop.prof, ...")
    arguments = parser.parse_args()
    os.environ.setdefault("RELAY_ALLOW_PRIVATE_URLS", "true")  # the echo agent is on 127.0.0.1
    # A limit never reached, so every call still pays for being counted (as gateway_bench.py).
    os.environ.setdefault("RELAY_RATE_LIMIT_PER_KEY", str(10**9))
    with ExitStack() as stack:
        if arguments.production:
            logs = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="send-profile-")))
            os.environ["DATABASE_URL"] = stack.enter_context(postgres_database("send_profile"))
            os.environ["REDIS_URL"] = stack.enter_context(redis_server(logs))[1]
        setup_django("relay-send-profile-")
        secret = prepared()
        asyncio.run(main(arguments, secret))
        if arguments.production:
            from django.db import connections

            connections.close_all()
