"""The gateway benchmark's report: a table and the verdicts per level, the stream table, and
every figure and verdict as JSON.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from dataclasses import asdict
from pathlib import Path

from bench.common import load_average
from bench.gateway_verdicts import (
    AIOHTTP_PROXY,
    BEARER,
    DIRECT,
    FAST,
    GRPC_AGENT,
    MCP,
    PACE_MS,
    POSTGRES_ROUND_TRIPS_PER_CALL,
    PRODUCTION,
    PROFILES,
    PROXY,
    REDIS_ROUND_TRIPS_PER_CALL,
    STREAM_CHUNKS,
    LoadFigures,
    StreamFigures,
    Verdict,
    exit_status,
    grpc_versus_agent,
    judge_level,
    judge_streams,
    not_judged,
    per_event_overhead_ms,
    ratio,
    services_ms,
)

# --- report ----------------------------------------------------------------------------------


def times(value: float) -> str:
    return f"{value:.2f}x" if math.isfinite(value) else "n/a"


def print_verdicts(verdicts: list[Verdict]) -> None:
    for verdict in verdicts:
        mark = "PASS" if verdict.passed else "MISS"
        print(f"  {mark}  {verdict.target:<13} {verdict.label}: {verdict.figure}")


def print_level(level: int, figures: dict[str, LoadFigures]) -> None:
    proxy = figures[PROXY]
    print(f"\nconcurrency {level}  ({load_average()})")
    print(
        f"  {'target':<13} {'requests':>8} {'req/s':>14} {'p50 ms':>7} {'p99 ms':>7} "
        f"{'added p50 ms':>15} {'added p99 ms':>15} {'CPU/req ms':>15} {'errors':>6} "
        f"{'agent CPU':>9} {'pg+redis CPU':>12} {'redis opened':>12}"
    )
    for name, mine in figures.items():
        backing = "" if mine.backing_cpu_ms is None else f"{mine.backing_cpu_ms:.2f}"
        opened = "" if mine.redis_opened is None else str(mine.redis_opened)
        if name == DIRECT:  # the floor the others' added latency is measured from
            added = f"{'':>15} {'':>15}"
        else:
            added = (
                f"{mine.added_p50_ms:>7.2f} {times(ratio(mine.added_p50_ms, proxy.added_p50_ms)):>7} "
                f"{mine.added_p99_ms:>7.2f} {times(ratio(mine.added_p99_ms, proxy.added_p99_ms)):>7}"
            )
        print(
            f"  {name:<13} {mine.requests:>8} "
            f"{mine.per_second:>6.0f} {times(ratio(mine.per_second, proxy.per_second)):>7} "
            f"{mine.p50_ms:>7.2f} {mine.p99_ms:>7.2f} "
            f"{added} {mine.cpu_ms:>7.2f} {times(ratio(mine.cpu_ms, proxy.cpu_ms)):>7} "
            f"{mine.errors:>6} {mine.agent_cpu_ms:>9.2f} {backing:>12} {opened:>12}"
            + ("  (cut short at the time limit)" if mine.cut_short else "")
        )
        if mine.first_error:
            print(f"             first error: {mine.first_error}")
    clients = figures[PRODUCTION].redis_clients if PRODUCTION in figures else None
    if clients is not None:
        held = ", ".join(f"{name} {count}" for name, count in sorted(clients.items()))
        print(f"  Redis connections held after the level, by process: {held}")
    print("  (ratios against the proxy at this level; added = over the direct agent)")
    waiting = services_ms(figures)
    if waiting is not None:
        production = figures[PRODUCTION]
        print(
            f"  production's time on its services, for information, no verdict: round trips "
            f"from the bench after the level, Redis {production.redis_round_trip_ms:.2f} ms and "
            f"a PostgreSQL commit {production.postgres_round_trip_ms:.2f} ms (a call makes "
            f"{REDIS_ROUND_TRIPS_PER_CALL} and {POSTGRES_ROUND_TRIPS_PER_CALL}), with their CPU "
            f"per call: {waiting:.2f} ms a call, {times(ratio(waiting, proxy.added_p50_ms))} the "
            f"proxy's added p50"
        )
    bearer = figures.get(BEARER)
    if bearer is not None and PRODUCTION in figures:
        production = figures[PRODUCTION]
        print(
            f"  {BEARER} against production (the same relay, an API key per call): CPU/req "
            f"{ratio(bearer.cpu_ms, production.cpu_ms):.3f}x ({bearer.cpu_ms:.2f} vs "
            f"{production.cpu_ms:.2f} ms), added p50 {bearer.added_p50_ms:.2f} vs "
            f"{production.added_p50_ms:.2f} ms"
        )
    mcp = figures.get(MCP)
    if mcp is not None and PRODUCTION in figures:
        production = figures[PRODUCTION]
        print(
            f"  {MCP} against production (the same echo through the same relay, over A2A): "
            f"CPU/req {ratio(mcp.cpu_ms, production.cpu_ms):.3f}x ({mcp.cpu_ms:.2f} vs "
            f"{production.cpu_ms:.2f} ms), added p50 {mcp.added_p50_ms:.2f} vs "
            f"{production.added_p50_ms:.2f} ms"
        )
    against = figures.get(AIOHTTP_PROXY)
    if against is not None:
        print(
            f"  against {AIOHTTP_PROXY} (the bare proxy on aiohttp, the relay's client for "
            "agents), for information, no verdict:"
        )
        for name in PROFILES:
            mine = figures[name]
            print(
                f"    {name:<13} CPU/req {times(ratio(mine.cpu_ms, against.cpu_ms)):>7}  "
                f"added p50 {times(ratio(mine.added_p50_ms, against.added_p50_ms)):>7}  "
                f"req/s {times(ratio(mine.per_second, against.per_second)):>7}"
            )
    versus = grpc_versus_agent(figures)
    if versus:
        base = figures[GRPC_AGENT]
        print(
            f"  gRPC against the agent's own gRPC server ({GRPC_AGENT}: {base.per_second:.0f} "
            f"req/s, p50 {base.p50_ms:.2f} ms, p99 {base.p99_ms:.2f} ms, CPU/req "
            f"{base.cpu_ms:.2f} ms), for information, no verdict:"
        )
        for name, row in versus.items():
            print(
                f"    {name:<13} req/s {times(row['throughput_ratio']):>7}  "
                f"p50 {times(row['p50_ratio']):>7} (+{row['added_p50_ms']:.2f} ms)  "
                f"p99 {times(row['p99_ratio']):>7} (+{row['added_p99_ms']:.2f} ms)  "
                f"CPU/req {times(row['cpu_ratio']):>7}"
            )
    print_verdicts(judge_level(level, figures))
    sys.stdout.flush()


def print_streams(streams: dict[str, dict[str, StreamFigures]]) -> None:
    print(
        f"\nstreams, one at a time: time to last event (p50) and server CPU per stream "
        f"({load_average()})"
    )
    print(
        f"  {'stream':<18} {'target':<13} {'streams':>7} {'events':>7} {'errors':>6} "
        f"{'last event ms':>14} {'vs proxy':>8} {'per-event overhead ms':>21} {'CPU ms':>7}"
    )
    for kind, by_target in streams.items():
        label = f"fast {STREAM_CHUNKS} chunks" if kind == FAST else f"{PACE_MS} ms-paced"
        proxy = by_target[PROXY]
        for name, mine in by_target.items():
            events = (
                str(mine.fewest_events)
                if mine.fewest_events == mine.most_events
                else f"{mine.fewest_events}-{mine.most_events}"
            )
            overhead = f"{per_event_overhead_ms(by_target, name):.3f}" if name in PROFILES else ""
            print(
                f"  {label:<18} {name:<13} {mine.streams:>7} {events:>7} {mine.errors:>6} "
                f"{mine.last_event_ms:>14.2f} "
                f"{times(ratio(mine.last_event_ms, proxy.last_event_ms)):>8} "
                f"{overhead:>21} {mine.cpu_ms:>7.2f}"
            )
            if mine.first_error:
                print(f"             first error: {mine.first_error}")
    print_verdicts(judge_streams(streams))


def write_json(
    path: Path,
    args: argparse.Namespace,
    levels: dict[int, dict[str, LoadFigures]],
    streams: dict[str, dict[str, StreamFigures]],
    verdicts: list[Verdict],
) -> None:
    def camel(name: str) -> str:
        head, *rest = name.split("_")
        return head + "".join(word.capitalize() for word in rest)

    def clean(value):
        # JSON has no NaN: a figure that could not be measured is null.
        if isinstance(value, float) and not math.isfinite(value):
            return None
        if isinstance(value, dict):
            return {camel(key): clean(item) for key, item in value.items()}
        if isinstance(value, list | tuple):
            return [clean(item) for item in value]
        return value

    document = {
        "protocol": args.protocol,
        "server": args.server,
        "requestsPerLevel": args.requests,
        "streamsPerKind": args.streams,
        "streamChunks": STREAM_CHUNKS,
        "paceMs": PACE_MS,
        "levels": {
            str(level): {name: asdict(mine) for name, mine in figures.items()}
            for level, figures in levels.items()
        },
        "grpc_versus_agent": {
            str(level): grpc_versus_agent(figures) for level, figures in levels.items()
        },
        "streams": {
            kind: {
                name: {
                    **asdict(mine),
                    "perEventOverheadMs": (
                        per_event_overhead_ms(by_target, name) if name in PROFILES else None
                    ),
                }
                for name, mine in by_target.items()
            }
            for kind, by_target in streams.items()
        },
        "verdicts": [asdict(verdict) for verdict in verdicts],
        "notJudged": not_judged(list(levels)),
        "passed": exit_status(verdicts) == 0,
    }
    path.write_text(json.dumps(clean(document), indent=2) + "\n")
