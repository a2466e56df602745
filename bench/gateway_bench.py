"""Gateway benchmark: what a call through the relay costs next to a bare Python proxy, per
concurrency level, in the embedded and the production profile, all measured in one run.

Starts, each in a process of its own: the echo agent and a 50-chunk streaming agent (a2a-sdk
apps on uvicorn); a bare Starlette + httpx pass-through proxy in front of both (uvicorn; it
streams an event-stream answer as it comes); the relay in the embedded profile (SQLite in a
temporary RELAY_VAR_DIR); and the relay in the production profile
(DATABASE_URL: a fresh PostgreSQL database this script creates, migrates and drops; REDIS_URL:
a redis-server of its own). Each relay is one uvicorn process, as the README's production
section runs it (or daphne with `--server daphne`), with both agents registered. Every uvicorn
here (relays, proxy, agents) runs with what is installed: uvloop and httptools. The load comes
from this process: httpx with keep-alive and a pool as large as the concurrency.

Unary: the same A2A call (1.0 `SendMessage`, or 0.3 `message/send` with `--protocol 0.3`; the
body built once) to four targets: direct (the echo agent), proxy, embedded, production. At each
concurrency level (1, 8, 32, 64 by default) every target gets the same number of requests, in
rounds that take the targets in turn (in pairs of mirrored order, rotating each pair), so the
machine's slow spells weigh on all alike: 20 short rounds at one call at a time, where the
latency verdict divides by the little the proxy adds and the machine's speed drifts from one
second to the next, 15 at c=8 (the twins' level), 5 at the other levels. Each turn starts
with as many untimed calls as the concurrency, so that a process's return from idle is not
counted to whichever of its rows comes first (production, before `keyed`, `bearer` and `mcp`
on the same process; `measure_level` in gateway_load.py says what it cost). Per target and level: requests/s, p50, p99, latency
added over the direct agent (p50, p99), errors, CPU per request of the server's own
process(es) (for a relay: its processes only), and for information the echo agent's CPU per
request and, for production, that of its PostgreSQL backends and Redis. Redis: connections
the production relay opened during the timed rounds (`INFO stats` total_connections_received
before and after each of its turns) and, from `CLIENT LIST`, the connections each process
holds after the level.
For information, the time production's calls spend on its services alone, which a bare proxy
does not: after each level, the median round trip from this process to that Redis (`PING`) and
a committed write to PostgreSQL (an `INSERT` in autocommit: a commit waits for the WAL to reach
the disk, as each of the call's statements does), times the round trips a SendMessage makes (one to Redis: its key's
lookup and count, one script; two to PostgreSQL: its task's INSERT before the agent is called,
and its end recorded before the answer), plus the services' CPU per call. At c=1 a call waits
for all of it.

gRPC: the production relay's gRPC server (`manage.py run_grpc` on the same database and Redis)
gets the same SendMessage as A2A 1.0 over gRPC (a2a-sdk's generated stub on one HTTP/2 channel),
in two rows per level: `grpc` (the tenant naming the echo agent, which the relay calls over
JSON-RPC) and `grpc-relay` (the tenant naming the echo agent served over gRPC by a2a-sdk, which
the relay calls over gRPC). Their baseline is `grpc-agent`: that same gRPC echo agent (its own
`grpc.aio` server, a process of its own) called directly with the same workload. Per level the
relay's gRPC rows are printed as ratios to it (throughput, p50, p99, latency added), for
information: no verdict judges them.

`keyed`: the production relay again, each call with an Idempotency-Key of its own (a fresh
UUID): the cost of a key per call, judged at c=8 against the production row (CPU per request
at most 5% more).

`storm` (with `--storm N`, N calls per level): the 503 storm of gateway_storm.py, after each of
levels 1, 8 and 32: an agent answering 503 to everything, with the echo agent as its alternate,
through the production relay; judged at c=8 and c=32: 100% of the calls succeed on the
alternate, and the breaker opens within one breaker window.

`twin` (with `--tracing` or `--usage`): a second production relay on the same database and
Redis with production's settings, serving this row only: the baseline of `traced` and
`usage-off`, which are started and called as it is, so that one setting is all they differ in.
The production relay is no such baseline: it registered the agents (loading the embedding
model) and serves `keyed`, `bearer` and `mcp` too.

`twin-again` (with `--tracing` or `--usage`): a second twin, started and called as the twin
is: the A/A pair, whose ratio to the twin (the noise floor) is printed next to the twin
verdicts and judged itself (within 5% either way). c=8 takes 15 rounds, the twin verdicts
judge CPU per request over all of them; see `ROUNDS_TWINS` in gateway_load.py for why.

`traced` (with `--tracing`): a second production relay on the same database and Redis with
OpenTelemetry on (OTEL_EXPORTER_OTLP_TRACES_ENDPOINT naming a local OTLP/HTTP sink that takes
every export; a batch exported when full, never on the timer, which would fire between its
turns), judged at c=8 against the twin row: CPU per request at most 5% more.

`bearer`: the production relay again, each call with a signed RS256 JWT instead of an API key;
the relay trusts its issuer (`RELAY_JWT_ISSUERS`), the tests' authorization server run in this
process on 127.0.0.1, whose JWKS the relay fetches once and keeps. Printed against the
production row at every level, judged at c=8: CPU per request at most 5% more.

`mcp`: the production relay's MCP server at /mcp, each call a `tools/call` of the echo agent's
tool (revision 2026-07-28, as the official client sends it, without a progress token: the
relay answers it as plain JSON): the same echo as the production row, over MCP instead of A2A.
Printed against the production row at every level, judged at c=8 and at c=32, each level on
its own: CPU per request at most 1.5x production's.

`usage-off` (with `--usage`): a second production relay on the same database and Redis with
RELAY_USAGE_RECORDS off; the twin row (a usage record per call, as shipped) is judged at c=8
against it: CPU per request at most 5% more.

`emb-twin` and `emb-usage-off` (with `--usage`): the same pair on the embedded profile, two more
relays on the embedded relay's SQLite database, one with RELAY_USAGE_RECORDS off; `emb-twin` is
judged at c=8 against `emb-usage-off` (at most 5% more). There the record's values ride in the
ORM's compare-and-set UPDATE of the task, where production's ride in the event's one statement.

`aio-proxy`: the same bare proxy with aiohttp as its client instead of httpx, in front of the
echo agent. The relay calls agents through aiohttp too, so per level both profiles are also
printed as ratios to it (CPU per request, latency added, throughput), for information: the
verdicts judge against the httpx proxy, the bare Python proxy the targets were set against.

Streams, one at a time: 50 chunks as fast as the agent makes them (time to last event; the
per-event overhead is (relay - proxy) / 50), and 50 chunks paced at 2 ms each (time to last
event), for direct, proxy, embedded and production.

Every figure is printed per level, never pooled, as an absolute value and as a ratio against the
proxy of the same run, with a verdict per level and target (see `judge_level` and
`judge_streams` in gateway_verdicts.py for the targets). The exit status is 1 when any verdict
misses.

    python bench/gateway_bench.py [--levels 1,8,32,64] [--requests 400] [--streams 30]
        [--protocol 1.0|0.3] [--server daphne|uvicorn] [--tracing] [--storm N] [--usage] [--json FILE]

This module is the command line and the order of a run; the rest is in modules of one job each:
gateway_profiles.py starts the servers of both profiles and names the targets,
gateway_servers.py is the agents and proxies it starts (`--serve`), gateway_load.py sends the
load and reads the CPU and Redis figures, gateway_verdicts.py holds the targets and judges the
figures, gateway_report.py prints them and writes the JSON.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.common import load_average  # noqa: E402  (the path above makes `bench` importable)
from bench.gateway_load import (  # noqa: E402
    MESSAGE_TEXT,
    PROTOCOLS,
    load_figures,
    measure_level,
    measure_streams,
    request_body,
    stream_figures,
)
from bench.gateway_profiles import Running, running  # noqa: E402
from bench.gateway_report import (  # noqa: E402
    print_level,
    print_streams,
    print_verdicts,
    write_json,
)
from bench.gateway_servers import serve  # noqa: E402
from bench.gateway_storm import (  # noqa: E402
    STORM_JUDGED_LEVELS,
    STORM_LEVELS,
    StormFigures,
    judge_storms,
    measure_storm,
    print_storm,
    with_proxy,
)
from bench.gateway_verdicts import (  # noqa: E402
    FAST,
    LEVELS,
    PACE_MS,
    PACED,
    PRODUCTION,
    LoadFigures,
    StreamFigures,
    exit_status,
    judge,
    not_judged,
)

# --- main ------------------------------------------------------------------------------------


async def bench(
    run: Running, args: argparse.Namespace, storms: dict[int, StormFigures]
) -> tuple[dict[int, dict[str, LoadFigures]], dict[str, dict[str, StreamFigures]]]:
    """Every level's figures (and, with ``--storm``, each storm level's into ``storms``), then
    the streams'."""
    body = request_body(args.protocol, streaming=False)
    levels: dict[int, dict[str, LoadFigures]] = {}
    for level in args.levels:
        runs = await measure_level(
            run.targets, run.agent, body, run.redis, count=args.requests, concurrency=level
        )
        figures = load_figures(runs)
        redis_round_trip, postgres_round_trip = run.redis.round_trips_ms()
        figures[PRODUCTION] = replace(
            figures[PRODUCTION],
            redis_clients=run.redis.clients_by_process(run.watched),
            redis_round_trip_ms=redis_round_trip,
            postgres_round_trip_ms=postgres_round_trip,
        )
        levels[level] = figures
        print_level(level, figures)
        if args.storm > 0 and level in STORM_LEVELS:
            production = run.targets[PRODUCTION]
            storm = await measure_storm(
                production.server,
                run.production_url,
                production.headers,
                run.redis.postgres,
                level=level,
                calls=args.storm,
            )
            storms[level] = with_proxy(storm, figures)
            print_storm(level, storms[level])
            print_verdicts(judge_storms({level: storms[level]}))

    texts = {FAST: MESSAGE_TEXT, PACED: f"{MESSAGE_TEXT} pace-ms={PACE_MS}"}
    streams = {}
    if args.streams <= 0:  # none asked for: no figures, and no verdict (named as not judged)
        return levels, streams
    for kind, text in texts.items():
        stream_body = request_body(args.protocol, streaming=True, text=text)
        streams[kind] = stream_figures(
            await measure_streams(run.streaming, stream_body, count=args.streams)
        )
    print_streams(streams)
    return levels, streams


def parse_levels(text: str) -> list[int]:
    levels = [int(part) for part in text.split(",") if part.strip()]
    if not levels or min(levels) < 1:
        raise argparse.ArgumentTypeError("levels are positive integers, comma-separated")
    return levels


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--levels",
        type=parse_levels,
        default=list(LEVELS),
        help="Concurrency levels, comma-separated (default 1,8,32,64).",
    )
    parser.add_argument(
        "--requests", type=int, default=400, help="Timed requests per target per level."
    )
    parser.add_argument(
        "--streams", type=int, default=30, help="Timed streams per target of each kind."
    )
    parser.add_argument(
        "--protocol",
        choices=sorted(PROTOCOLS),
        default="1.0",
        help="1.0 (SendMessage) or 0.3 (message/send) for every call.",
    )
    parser.add_argument(
        "--server",
        choices=("daphne", "uvicorn"),
        default="uvicorn",
        help="The ASGI server both relays run under.",
    )
    parser.add_argument(
        "--tracing",
        action="store_true",
        help="Add the traced row (OpenTelemetry on, a local OTLP sink), judged against the "
        "twin row (production's settings, on a relay of its own) at c=8.",
    )
    parser.add_argument(
        "--storm",
        type=int,
        default=0,
        help="Calls per level of the 503 storm (levels 1, 8, 32); 0 (the default) runs none.",
    )
    parser.add_argument(
        "--usage",
        action="store_true",
        help="Add the usage-off row (no usage records); the twin row (production's settings, "
        "on a relay of its own) is judged against it at c=8.",
    )
    parser.add_argument("--json", type=Path, help="Write every figure and verdict to this file.")
    parser.add_argument("--serve", nargs="+", help=argparse.SUPPRESS)
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    if args.serve:
        serve(args.serve)
        return

    started = time.monotonic()
    storms: dict[int, StormFigures] = {}
    with running(args, str(Path(__file__).resolve())) as run:
        levels, streams = asyncio.run(bench(run, args, storms))

    verdicts = judge(levels, streams) + judge_storms(storms)
    missed = [verdict for verdict in verdicts if not verdict.passed]
    print(f"\n{len(verdicts) - len(missed)} of {len(verdicts)} verdicts pass", end="")
    print(f"; missed: {len(missed)}" if missed else "")
    unmeasured = not_judged(args.levels, streams=args.streams)
    if args.storm > 0:
        unmeasured += [f"503 storm at c={n}" for n in STORM_JUDGED_LEVELS if n not in storms]
    for what in unmeasured:
        print(f"  not judged (not measured in this run): {what}")
    if args.json:
        write_json(args.json, args, levels, streams, verdicts)
        print(f"every figure written to {args.json}")
    print(f"finished in {time.monotonic() - started:.0f} s; {load_average()}")
    sys.exit(exit_status(verdicts))


if __name__ == "__main__":
    main()
