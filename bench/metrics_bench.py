"""Metrics benchmark: what counting requests costs each request, and what a scrape and an
agent's metrics cost with a busy database.

1. The request-counting ASGI middleware around a trivial ASGI app against the bare app, in the
   same run: microseconds per request and the added cost.
2. In a throwaway SQLite database: ``GET /metrics`` and ``GET /a2a/agents/{id}/metrics``
   through Django + DRF with a small database (1 agent, nothing recorded) as the baseline, then
   with AGENTS agents, TASKS finished tasks and one agent probed every 30 s for 24 hours
   (2,880 probes) plus 10 probes each for the others: p50, p99 and the ratio to the baseline.

    python bench/metrics_bench.py [--agents 200] [--tasks 20000] [--requests 100]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from datetime import timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.common import setup_django  # noqa: E402  (the path above makes `bench` importable)

setup_django()

from django.core.management import call_command  # noqa: E402
from django.test import Client  # noqa: E402
from django.utils import timezone  # noqa: E402

from registry.models import Agent  # noqa: E402
from relay_project.request_metrics import RequestMetricsMiddleware  # noqa: E402
from routing.models import ProbeResult  # noqa: E402
from tasks_app.models import Task  # noqa: E402


async def _trivial_app(scope, receive, send):
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b"ok"})


async def _per_request_us(app, count: int) -> float:
    async def receive():
        return {"type": "http.request", "body": b""}

    async def send(message):
        return None

    paths = ["/a2a/agents/weather/", "/a2a/registry", "/agents/weather/", "/metrics"]
    scopes = [{"type": "http", "path": path, "method": "POST", "headers": []} for path in paths]
    started = time.perf_counter()
    for index in range(count):
        await app(scopes[index % 4], receive, send)
    return (time.perf_counter() - started) / count * 1e6


def middleware_cost(count: int) -> None:
    bare = asyncio.run(_per_request_us(_trivial_app, count))
    counted = asyncio.run(_per_request_us(RequestMetricsMiddleware(_trivial_app), count))
    print(
        f"request counting ({count} requests): bare app {bare:.2f} us/request, "
        f"with the middleware {counted:.2f} us/request, added {counted - bare:.2f} us "
        f"({counted / bare:.1f}x a do-nothing app)"
    )


def timed(client: Client, path: str, requests: int) -> tuple[float, float]:
    times = []
    for _ in range(requests):
        started = time.perf_counter()
        response = client.get(path)
        times.append((time.perf_counter() - started) * 1000)
        assert response.status_code == 200, (path, response.status_code)
    times.sort()
    return statistics.median(times), times[min(len(times) - 1, int(len(times) * 0.99))]


def _agent(agent_id: str) -> Agent:
    return Agent(id=agent_id, name=agent_id, card_url=f"http://agent.test/{agent_id}")


def fill(agents: int, tasks: int) -> str:
    from tests.factories import make_agent

    now = timezone.now()
    # The busy agent is registered from a card (its page shows the card); the rest in bulk.
    busy = make_agent(agent_id="agent-00000").pk
    Agent.objects.bulk_create([_agent(f"agent-{n:05d}") for n in range(1, agents)])
    ProbeResult.objects.bulk_create(
        [
            ProbeResult(
                agent_id=busy,
                level="transport",
                ok=n % 50 != 0,
                latency_ms=20 + n % 90,
                checked_at=now - timedelta(seconds=30 * n),
            )
            for n in range(2880)
        ]
    )
    ProbeResult.objects.bulk_create(
        [
            ProbeResult(
                agent_id=f"agent-{a:05d}",
                level="card",
                ok=True,
                latency_ms=10.0,
                checked_at=now - timedelta(minutes=n),
            )
            for a in range(1, agents)
            for n in range(10)
        ]
    )
    states = ["completed"] * 8 + ["failed", "canceled"]
    Task.objects.bulk_create(
        [
            Task(
                context_id=f"c{n}",
                target_kind="agent",
                target_id=f"agent-{n % agents:05d}",
                agent_id=f"agent-{n % agents:05d}",
                state=states[n % 10],
                created_at=now - timedelta(minutes=n % 1440, seconds=5),
                completed_at=now - timedelta(minutes=n % 1440),
            )
            for n in range(tasks)
        ],
        batch_size=2000,
    )
    return busy


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--agents", type=int, default=200)
    parser.add_argument("--tasks", type=int, default=20000)
    parser.add_argument("--requests", type=int, default=100)
    parser.add_argument("--middleware-requests", type=int, default=200_000)
    args = parser.parse_args()

    middleware_cost(args.middleware_requests)

    call_command("migrate", verbosity=0)
    client = Client()
    Agent.objects.bulk_create([_agent("baseline")])
    base_scrape = timed(client, "/metrics", args.requests)
    base_agent = timed(client, "/a2a/agents/baseline/metrics", args.requests)
    Agent.objects.all().delete()

    busy = fill(args.agents, args.tasks)
    scrape = timed(client, "/metrics", args.requests)
    agent = timed(client, f"/a2a/agents/{busy}/metrics", args.requests)
    week = timed(client, f"/a2a/agents/{busy}/metrics?hours=168", args.requests)
    page = timed(client, f"/agents/{busy}/", args.requests)
    listing = timed(client, "/", args.requests)

    print(
        f"database: {args.agents} agents, {args.tasks} tasks, "
        f"{ProbeResult.objects.count()} probe results"
    )
    for name, (p50, p99), baseline in [
        ("GET /metrics", scrape, base_scrape),
        ("GET /a2a/agents/{id}/metrics (24 h)", agent, base_agent),
        ("GET /a2a/agents/{id}/metrics (168 h)", week, base_agent),
        ("agent page (metrics + chart)", page, None),
        ("registry page (30 sparklines)", listing, None),
    ]:
        ratio = f", {p50 / baseline[0]:.1f}x the empty-database p50" if baseline else ""
        print(f"{name:42s} p50 {p50:7.2f} ms  p99 {p99:7.2f} ms{ratio}")


if __name__ == "__main__":
    main()
