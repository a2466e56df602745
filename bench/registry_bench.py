"""Registry benchmark: list, search and filter latency with 100 and 10,000 agents.

Builds two registries (5 skills per agent) in a throwaway SQLite database through the same
service that registers agents over HTTP (cards served by an httpx MockTransport), then times
requests through the whole Django + DRF stack with Django's test client and prints p50 and p99
per request kind, and the ratio of the 10,000-agent p50 to the 100-agent p50 measured in the
same run. Target: that ratio stays at or under 3x.

    python bench/registry_bench.py [--sizes 100 10000] [--requests 200]
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.common import setup_django  # noqa: E402  (the path above makes `bench` importable)

setup_django()

import httpx  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.test import Client  # noqa: E402

from registry.models import Agent, ApiKey, CardSnapshot  # noqa: E402
from registry.services import agent_register  # noqa: E402

TOPICS = [
    "weather",
    "finance",
    "travel",
    "legal",
    "medical",
    "code",
    "music",
    "sports",
    "retail",
    "energy",
]
VERBS = [
    "summarize",
    "translate",
    "search",
    "classify",
    "draft",
    "review",
    "plan",
    "answer",
    "extract",
    "compare",
]
MODES = ["text/plain", "application/json", "image/png", "audio/wav"]


def card_for(index: int, rng: random.Random) -> dict:
    topic = TOPICS[index % len(TOPICS)]
    skills = []
    for position in range(5):
        verb = VERBS[(index + position) % len(VERBS)]
        skills.append(
            {
                "id": f"{verb}-{position}",
                "name": f"{verb.title()} {topic}",
                "description": f"Can {verb} {topic} material, quickly and with sources.",
                "tags": [verb, topic, f"tier{rng.randint(1, 5)}"],
                "inputModes": [MODES[(index + position) % len(MODES)]],
            }
        )
    return {
        "name": f"Agent {index:05d}",
        "description": f"A {topic} agent number {index}",
        "version": "1.0.0",
        "supportedInterfaces": [
            {
                "url": f"https://agent{index}.example/a2a",
                "protocolBinding": "JSONRPC",
                "protocolVersion": "1.0",
            }
        ],
        "capabilities": {"streaming": index % 2 == 0, "pushNotifications": index % 3 == 0},
        "defaultInputModes": ["text/plain"],
        "defaultOutputModes": ["text/plain"],
        "skills": skills,
    }


def build_registry(size: int) -> float:
    """Empties the registry and registers ``size`` agents; returns seconds taken."""
    Agent.objects.all().delete()
    rng = random.Random(size)
    cards = {
        f"https://agent{i}.example/.well-known/agent-card.json": card_for(i, rng)
        for i in range(size)
    }
    client = httpx.Client(
        transport=httpx.MockTransport(
            lambda request: httpx.Response(200, json=cards[str(request.url)])
        )
    )
    started = time.perf_counter()
    for url in cards:
        agent_register(url=url, client=client)
    healthy = Agent.objects.order_by("id").values_list("id", flat=True)[::4]
    Agent.objects.filter(id__in=list(healthy)).update(health=Agent.Health.HEALTHY)
    return time.perf_counter() - started


REQUESTS = {
    "list": {"limit": "30"},
    "list deep page": {"limit": "30", "cursor": None},  # cursor filled at run time
    "search q": {"q": "finance translate"},
    "filter tag": {"tag": "weather"},
    "filter combined": {"tag": "translate", "streaming": "true", "health": "healthy"},
    "filter inputMode": {"inputMode": "audio/wav", "limit": "50"},
}


def time_requests(client: Client, count: int) -> dict[str, list[float]]:
    from registry.selectors import encode_cursor

    middle = Agent.objects.order_by("id").values_list("id", flat=True)
    deep_cursor = encode_cursor(middle[len(middle) // 2])
    timings: dict[str, list[float]] = {}
    for name, params in REQUESTS.items():
        params = {k: (deep_cursor if v is None else v) for k, v in params.items()}
        for _ in range(5):  # warm caches and the connection
            client.get("/a2a/registry", params)
        samples = []
        for _ in range(count):
            started = time.perf_counter()
            response = client.get("/a2a/registry", params)
            samples.append((time.perf_counter() - started) * 1000)
            assert response.status_code == 200, response.content[:300]
        assert response.json()["agents"], f"{name} matched nothing"
        timings[name] = samples
    return timings


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs=2, default=[100, 10_000])
    parser.add_argument("--requests", type=int, default=200, help="Timed requests per kind.")
    args = parser.parse_args()
    call_command("migrate", verbosity=0)
    ApiKey.objects.all().delete()
    client = Client()
    results = {}
    for size in args.sizes:
        seconds = build_registry(size)
        print(
            f"built {size} agents ({CardSnapshot.objects.count()} snapshots) in "
            f"{seconds:.1f} s ({seconds / size * 1000:.2f} ms per registration)",
            flush=True,
        )
        results[size] = time_requests(client, args.requests)
    small, large = args.sizes
    print()
    print(
        f"{'request':<18} {'p50 ' + str(small):>10} {'p99 ' + str(small):>10} "
        f"{'p50 ' + str(large):>11} {'p99 ' + str(large):>11} {'p50 ratio':>10}"
    )
    worst = 0.0
    for name in REQUESTS:
        p50_small = statistics.median(results[small][name])
        p50_large = statistics.median(results[large][name])
        ratio = p50_large / p50_small
        worst = max(worst, ratio)
        print(
            f"{name:<18} {p50_small:>8.2f}ms {percentile(results[small][name], 0.99):>8.2f}ms "
            f"{p50_large:>9.2f}ms {percentile(results[large][name], 0.99):>9.2f}ms "
            f"{ratio:>9.2f}x"
        )
    verdict = "within" if worst <= 3 else "OVER"
    print(f"\nworst p50 ratio {worst:.2f}x: {verdict} the 3x target")


if __name__ == "__main__":
    main()
