"""What tracing costs one A2A SendMessage at the relay, in one process: the relay's ASGI app
(embedded profile, a throwaway SQLite database) called over httpx's ASGI transport, the echo
agent and an OTLP/HTTP sink each in a process of their own. Tracing is set up as the relay
sets it up when ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` is set (``tracing.configure``), then
turned off and on between alternating rounds, so both halves share the machine's slow spells.
Prints CPU per call (this process's, every thread: the relay, its database thread, the span
exporter's thread and the in-process client), function calls per call (cProfile), and the
spans one call makes.

    python bench/trace_profile.py --calls 300
    python bench/trace_profile.py --calls 100 --profile on
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

from bench.common import echo_registered, free_port, served, setup_django, waited  # noqa: E402  (the path above makes `bench` importable)
from bench.gateway_load import echo_send  # noqa: E402

os.environ.setdefault("RELAY_ALLOW_PRIVATE_URLS", "true")  # the echo agent is on 127.0.0.1
os.environ.setdefault("RELAY_RATE_LIMIT_PER_KEY", str(10**9))  # counted, never refused
setup_django("relay-trace-profile-")

ROUNDS = 10
WARMUP = 20
FLUSH_EVERY = 400
"""Calls between the exports ``spans_alone`` waits for: 800 spans, well under the batch span
processor's queue (2048). A loop that makes spans faster than the exporter's thread takes them
fills the queue, and the spans dropped then were never encoded: a figure too low (seen on a
busy machine, "Queue full, dropping Span")."""


def prepared() -> str:
    """Migrates the throwaway database; the secret of a fresh API key."""
    from django.core.management import call_command

    from registry.services import api_key_create

    call_command("migrate", verbosity=0)
    return api_key_create(name="trace-profile")[1]


def switched(on: bool, tracer) -> None:
    """Tracing on (the configured tracer) or off (no tracer: no span at all), as a relay
    started with or without the ``OTEL_*`` variables."""
    from relay_project import tracing

    tracing._tracer = tracer if on else None


def added_calls(off: pstats.Stats, on: pstats.Stats) -> list[tuple[str, int]]:
    """The functions called more often with tracing on, and how many more calls, most first."""

    def calls(stats: pstats.Stats) -> dict[str, int]:
        return {
            f"{Path(file).name}:{line}({name})": counts[1]
            for (file, line, name), counts in stats.stats.items()
        }

    before, after = calls(off), calls(on)
    more = {where: count - before.get(where, 0) for where, count in after.items()}
    return sorted(((w, n) for w, n in more.items() if n > 0), key=lambda item: -item[1])


TRACING_FILES = ("opentelemetry", "tracing.py", "traces.py", "upstream_traces.py")


def in_tracing(stats: pstats.Stats) -> int:
    """Calls of the functions of OpenTelemetry and of our tracing modules."""
    return sum(
        ncalls
        for (file, _line, _name), (_, ncalls, _, _, _) in stats.stats.items()
        if any(part in file for part in TRACING_FILES)
    )


def spans_alone(count: int) -> float:
    """CPU per call of what tracing does for one unary SendMessage, without the call: the same
    functions the relay calls, in the same order, with the spans exported to the sink
    (``force_flush`` at the end, so the exporter's encoding is counted). A send has no
    ``a2a.call`` span: its one span is the agent call's ``invoke_agent``. Seconds."""
    from dataclasses import dataclass
    from typing import Any

    from relay_project import tracing
    from tasks_app import upstream_traces
    from tasks_app.api import traces
    from tasks_app.protocol.versions import Operation

    @dataclass
    class Endpoint:
        agent_id: str = "echo"
        name: str = "Echo Agent"
        binding: str = "JSONRPC"

    @dataclass
    class Task:
        id: str = "5f0c1f43-4d0f-4f5e-9b47-6d8f1d4c1a11"
        context_id: str = "5f0c1f43-4d0f-4f5e-9b47-6d8f1d4c1a11"

    @dataclass
    class Call:
        operation: Operation = Operation.SEND
        trace: Any = None

    headers = [
        (b"host", b"testserver"),
        (b"accept", b"*/*"),
        (b"accept-encoding", b"gzip, deflate"),
        (b"connection", b"keep-alive"),
        (b"user-agent", b"python-httpx/0.28.1"),
        (b"content-type", b"application/json"),
        (b"a2a-version", b"1.0"),
        (b"authorization", b"Bearer brk_0123456789abcdef"),
        (b"content-length", b"200"),
    ]
    params = {"message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "hi"}]}}
    answer = {
        "task": {
            "id": Task.id,
            "contextId": Task.context_id,
            "status": {"state": "TASK_STATE_COMPLETED"},
        }
    }
    call, endpoint = Call(), Endpoint()
    tracing.flush()
    started = time.process_time()
    for index in range(count):
        if index % FLUSH_EVERY == FLUSH_EVERY - 1:
            tracing.flush()
        with traces.CallTrace(headers, "agent:echo") as trace:
            traced = trace.admitted(call)
            upstream = upstream_traces.agent_span(endpoint, call.operation, params, traced.trace)
            tracing.outgoing({"Content-Type": "application/json"}, tracing.within(upstream))
            tracing.agent_answered(upstream, answer)
            upstream.end()
    tracing.flush()
    return (time.process_time() - started) / count


async def main(args: argparse.Namespace, key: str) -> None:
    import httpx
    from opentelemetry import trace
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from relay_project import tracing
    from relay_project.asgi import application
    from relay_project.heap import freeze_startup_heap

    freeze_startup_heap()  # as a server process does when it starts serving

    agent_port, sink_port = free_port(), free_port()
    agent, sink = served("agent", agent_port), served("otlp-sink", sink_port)
    try:
        waited(f"http://127.0.0.1:{sink_port}/")
        endpoint = f"http://127.0.0.1:{sink_port}/v1/traces"
        os.environ["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"] = endpoint
        assert tracing.configure()
        tracer = tracing._tracer
        transport = httpx.ASGITransport(app=application)
        async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as client:
            send = echo_send(client, await echo_registered(client, key, agent_port))

            modes = {"off": False, "on": True}
            for on in modes.values():
                switched(on, tracer)
                for _ in range(WARMUP):
                    await send()
            cpu = dict.fromkeys(modes, 0.0)
            per_round = max(1, args.calls // ROUNDS)
            for round_number in range(ROUNDS):
                order = list(modes) if round_number % 2 == 0 else list(reversed(modes))
                for name in order:
                    switched(modes[name], tracer)
                    started = time.process_time()
                    for _ in range(per_round):
                        await send()
                    cpu[name] += time.process_time() - started
            total = per_round * ROUNDS
            for name in modes:
                print(f"tracing {name}: {cpu[name] / total * 1e6:.0f} µs CPU per call ({total})")
            print(f"on - off: {(cpu['on'] - cpu['off']) / total * 1e6:.0f} µs per call")
            print(f"on / off CPU: {cpu['on'] / cpu['off']:.3f}x")

            switched(True, tracer)
            spans_alone(500)  # warm
            alone = min(spans_alone(2000) for _ in range(3))
            print(f"the tracing of one call alone: {alone * 1e6:.0f} µs CPU (exported)")

            counted = {}
            for name in modes:
                switched(modes[name], tracer)
                profile = cProfile.Profile()
                profile.enable()
                for _ in range(args.counted):
                    await send()
                profile.disable()
                stats = pstats.Stats(profile)
                counted[name] = stats
                print(
                    f"tracing {name}: {stats.total_calls / args.counted:.0f} function calls per call"
                )
            print(
                "on - off: "
                f"{(counted['on'].total_calls - counted['off'].total_calls) / args.counted:.0f}"
                " function calls per call"
            )
            for name in modes:
                calls = in_tracing(counted[name])
                print(
                    f"tracing {name}: {calls / args.counted:.0f} calls into OpenTelemetry and"
                    " the tracing modules per call"
                )
            print("\nthe functions tracing calls more often, calls per call:")
            for where, more in added_calls(counted["off"], counted["on"])[: args.top]:
                print(f"  {more / args.counted:6.1f}  {where}")
            if args.profile:
                stats = counted[args.profile].strip_dirs().sort_stats(args.sort)
                print(f"\ntracing {args.profile}, {args.counted} calls, by {args.sort}:")
                stats.print_stats(args.top)

            switched(True, tracer)
            kept = InMemorySpanExporter()
            trace.get_tracer_provider().add_span_processor(SimpleSpanProcessor(kept))
            await send()
            print("\nthe spans of one call:")
            for span in kept.get_finished_spans():
                print(f"  {span.name} ({span.kind.name}): {dict(span.attributes)}")
            tracing.shutdown()
    finally:
        for server in (agent, sink):
            server.terminate()
            server.wait()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=300, help="timed calls of each half")
    parser.add_argument("--counted", type=int, default=50, help="calls under cProfile")
    parser.add_argument("--profile", choices=("on", "off"), help="print that half's cProfile")
    parser.add_argument("--sort", default="tottime", help="pstats sort key (tottime, cumulative)")
    parser.add_argument("--top", type=int, default=40)
    asyncio.run(main(parser.parse_args(), prepared()))
