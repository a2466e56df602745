"""Health sweep benchmark: the relay's sweep over 1,000 and 10,000 agents against a bare
concurrent httpx sweep of the same agents, in the same run.

One local server (a minimal asyncio HTTP/1.1 server in its own process) serves every fake
agent by path: ``/a/{n}/.well-known/agent-card.json`` answers the agent's card and
``/a/{n}/rpc`` answers a JSON-RPC GetTask with TaskNotFound, as a healthy A2A agent does. The
agents are written straight into a throwaway SQLite database (bulk_create, with their current
card snapshot, so no card counts as changed). Then, per size:

- bare: an ``httpx.AsyncClient`` makes the same two requests per agent (GET the card, POST
  GetTask) at the same concurrency, parses both answers, and stores nothing;
- relay: ``routing.health_services.sweep`` picks the due agents, probes them (card parsed and
  hashed, GetTask through the relay's upstream client) and stores every result, each agent's
  health (compare-and-set) and the events.

Each is run ``--repeat`` times and the best time kept. Prints both times, the ratio (target:
relay at most 1.5x bare, PASS/MISS), the sweep's peak Python heap (tracemalloc, one extra
untimed sweep) and the process's peak RSS.

    python bench/health_bench.py [--sizes 1000 10000] [--concurrency 50] [--repeat 2]
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import multiprocessing
import os
import resource
import sys
import time
import tracemalloc
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.common import free_port, relay_settings  # noqa: E402  (the path above: `bench`)

relay_settings("relay-health-bench-")
os.environ["RELAY_ALLOW_PRIVATE_URLS"] = "true"
os.environ.setdefault("RELAY_LOG_LEVEL", "WARNING")
# Throughput is measured, not timeouts: on a busy machine a probe may wait its turn for a while.
os.environ.setdefault("RELAY_HEALTH_TIMEOUT_SECONDS", "60")

TARGET_RATIO = 1.5


# --- the fake agents' server (no Django) -------------------------------------------------------


def card_document(base: str, number: int) -> dict:
    return {
        "name": f"Fake Agent {number}",
        "description": "A fake agent for the health benchmark.",
        "version": "1.0.0",
        "supportedInterfaces": [
            {
                "url": f"{base}/a/{number}/rpc",
                "protocolBinding": "JSONRPC",
                "protocolVersion": "1.0",
            }
        ],
        "capabilities": {"streaming": False},
        "defaultInputModes": ["text/plain"],
        "defaultOutputModes": ["text/plain"],
        "skills": [
            {"id": "noop", "name": "Noop", "description": "Does nothing.", "tags": ["bench"]}
        ],
    }


async def _handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, base: str) -> None:
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            request_line, *header_lines = head.decode("latin-1").split("\r\n")
            method, path, _ = request_line.split(" ", 2)
            length = 0
            for line in header_lines:
                if line.lower().startswith("content-length:"):
                    length = int(line.split(":", 1)[1])
            body = await reader.readexactly(length) if length else b""
            parts = path.split("/")  # "", "a", n, ...
            if method == "GET" and len(parts) > 3 and parts[3] == ".well-known":
                payload = json.dumps(card_document(base, int(parts[2]))).encode()
            elif method == "POST" and path.endswith("/rpc"):
                call = json.loads(body)
                payload = json.dumps(
                    {
                        "jsonrpc": "2.0",
                        "id": call.get("id"),
                        "error": {"code": -32001, "message": "Task not found"},
                    }
                ).encode()
            else:
                payload = b'{"error": "not found"}'
            writer.write(
                b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                b"Content-Length: " + str(len(payload)).encode() + b"\r\n\r\n" + payload
            )
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError):
        pass
    finally:
        writer.close()


def serve_agents(port: int, ready) -> None:
    async def main() -> None:
        base = f"http://127.0.0.1:{port}"
        server = await asyncio.start_server(
            lambda r, w: _handle(r, w, base), "127.0.0.1", port, backlog=1024
        )
        ready.set()
        async with server:
            await server.serve_forever()

    asyncio.run(main())


# --- set-up ----------------------------------------------------------------------------------


def populate(size: int, base: str) -> None:
    """Replaces the registry with ``size`` agents served by the fake server."""
    from registry.cards import parse_card
    from registry.models import Agent, CardSnapshot
    from routing.models import HealthEvent, ProbeResult

    ProbeResult.objects.all().delete()
    HealthEvent.objects.all().delete()
    Agent.objects.all().delete()
    agents, snapshots = [], []
    for number in range(size):
        document = card_document(base, number)
        card = parse_card(document)
        agent_id = f"a{number}"
        agents.append(
            Agent(
                id=agent_id,
                name=card.name,
                card_url=f"{base}/a/{number}/.well-known/agent-card.json",
                version=card.version,
                card_protocol_version=card.protocol_version,
                interfaces=[
                    {
                        "url": i.url,
                        "protocolBinding": i.binding,
                        "protocolVersion": i.protocol_version,
                    }
                    for i in card.interfaces
                ],
            )
        )
        snapshots.append(
            CardSnapshot(
                agent_id=agent_id,
                raw=document,
                normalized=card.normalized,
                content_hash=card.content_hash,
                protocol_version=card.protocol_version,
                source_url=f"{base}/a/{number}/.well-known/agent-card.json",
            )
        )
    Agent.objects.bulk_create(agents, batch_size=500)
    CardSnapshot.objects.bulk_create(snapshots, batch_size=500)
    current = {s.agent_id: s.id for s in CardSnapshot.objects.only("id", "agent_id")}
    for agent in agents:
        agent.current_snapshot_id = current[agent.id]
    Agent.objects.bulk_update(agents, ["current_snapshot"], batch_size=500)


def make_due() -> None:
    from registry.models import Agent

    Agent.objects.update(next_probe_at=None)


# --- the two sweeps ------------------------------------------------------------------------------


async def bare_sweep(targets: list[tuple[str, str]], concurrency: int, *, per_worker: bool) -> int:
    """The same two requests per agent with plain httpx clients, ``concurrency`` agents at a
    time; returns how many passed. ``per_worker``: as the relay's sweep does it (``concurrency``
    workers, each with its own client of three connections); otherwise one client with a
    semaphore (the obvious way)."""
    import httpx

    passed = 0
    pending = iter(targets)
    tls = httpx.create_ssl_context()

    def new_client(connections: int) -> httpx.AsyncClient:
        return httpx.AsyncClient(
            limits=httpx.Limits(max_connections=connections, max_keepalive_connections=connections),
            timeout=60.0,
            verify=tls,
        )

    async def probe(client: httpx.AsyncClient, card_url: str, rpc_url: str) -> None:
        nonlocal passed

        async def card() -> bool:
            response = await client.get(card_url, headers={"Accept": "application/json"})
            return response.status_code == 200 and "supportedInterfaces" in response.json()

        async def transport() -> bool:
            response = await client.post(
                rpc_url,
                json={"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "probe"}},
            )
            return response.json().get("error", {}).get("code") == -32001

        both = await asyncio.gather(card(), transport())
        passed += all(both)

    if per_worker:

        async def worker() -> None:
            async with new_client(3) as client:
                for target in pending:
                    await probe(client, *target)

        await asyncio.gather(*(worker() for _ in range(concurrency)))
        return passed

    limit = asyncio.Semaphore(concurrency)
    async with new_client(concurrency * 3) as client:

        async def one(target: tuple[str, str]) -> None:
            async with limit:
                await probe(client, *target)

        await asyncio.gather(*(one(target) for target in targets))
    return passed


def relay_sweep(concurrency: int) -> int:
    from routing import health_services

    checks = asyncio.run(health_services.sweep(concurrency=concurrency))
    failures = collections.Counter(
        (result.level, result.category, result.detail[:60])
        for check in checks
        for result in check.results
        if not result.ok
    )
    if failures:
        print("relay sweep failures:", failures.most_common(3), file=sys.stderr)
    return sum(all(result.ok for result in check.results) for check in checks)


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--concurrency", type=int, default=50)
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args()

    import django

    django.setup()
    from django.core.management import call_command

    from registry.models import Agent

    call_command("migrate", verbosity=0)
    port = free_port()
    ready = multiprocessing.Event()
    server = multiprocessing.Process(target=serve_agents, args=(port, ready), daemon=True)
    server.start()
    ready.wait(10)
    base = f"http://127.0.0.1:{port}"
    print(
        f"Health sweep benchmark: concurrency {args.concurrency}, best of {args.repeat}, "
        f"one local server, SQLite in {os.environ['RELAY_VAR_DIR']}"
    )
    print(
        f"{'agents':>7} {'bare s':>8} {'bare/w s':>9} {'relay s':>8} {'ratio':>6} "
        f"{'verdict':>7} {'ratio/w':>8} {'agents/s':>9} {'heap MiB':>9} {'RSS MiB':>8}"
    )
    try:
        for size in args.sizes:
            populate(size, base)
            targets = [
                (f"{base}/a/{n}/.well-known/agent-card.json", f"{base}/a/{n}/rpc")
                for n in range(size)
            ]
            times: dict[str, list[float]] = {"bare": [], "bare/w": [], "relay": []}
            for _ in range(args.repeat):
                for name, per_worker in (("bare", False), ("bare/w", True)):
                    started = time.perf_counter()
                    passed = asyncio.run(
                        bare_sweep(targets, args.concurrency, per_worker=per_worker)
                    )
                    times[name].append(time.perf_counter() - started)
                    assert passed == size, f"{name} sweep: {passed} of {size} passed"
                make_due()
                started = time.perf_counter()
                passed = relay_sweep(args.concurrency)
                times["relay"].append(time.perf_counter() - started)
                assert passed == size, f"relay sweep: {passed} of {size} passed"
            assert Agent.objects.filter(health="healthy").count() == size
            make_due()
            tracemalloc.start()
            relay_sweep(args.concurrency)
            heap = tracemalloc.get_traced_memory()[1] / 2**20
            tracemalloc.stop()
            bare, bare_workers, relay = (min(times[name]) for name in ("bare", "bare/w", "relay"))
            ratio = relay / bare
            verdict = "PASS" if ratio <= TARGET_RATIO else "MISS"
            print(
                f"{size:>7} {bare:>8.2f} {bare_workers:>9.2f} {relay:>8.2f} {ratio:>5.2f}x "
                f"{verdict:>7} {relay / bare_workers:>7.2f}x {size / relay:>9.0f} "
                f"{heap:>9.1f} {peak_rss_mib():>8.0f}",
                flush=True,
            )
    finally:
        server.terminate()
    print(
        f"Target: the relay's sweep (probing and storing) at most {TARGET_RATIO}x the bare "
        "sweep (one httpx client, a semaphore). 'bare/w' is the same requests laid out as the "
        "relay's sweep lays them out (a small client per worker), and 'ratio/w' the relay "
        "against it: what probing and storing cost beyond the HTTP. 'heap' is the peak "
        "Python heap during one relay sweep (tracemalloc); 'RSS' the process's peak resident "
        "memory so far."
    )


if __name__ == "__main__":
    main()
