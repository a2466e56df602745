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
rounds that take the targets in turn (the order rotating each round), so the machine's slow
spells weigh on all alike: 20 short rounds at one call at a time, where the latency verdict
divides by the little the proxy adds and the machine's speed drifts from one second to the
next, 5 at the other levels. Per target and level: requests/s, p50, p99, latency added over the
direct agent (p50, p99), errors, CPU per request of the server's own process(es) (for a relay:
its processes only), and for information the echo agent's CPU per request and, for production,
that of its PostgreSQL backends and Redis. Redis: connections the production relay opened
during the timed rounds (`INFO stats` total_connections_received before and after each of its
turns) and, from `CLIENT LIST`, the connections each process holds after the level.
For information, the time production's calls spend on its services alone, which a bare proxy
does not: after each level, the median round trip from this process to that Redis (`PING`) and
to PostgreSQL (`SELECT 1`), times the round trips a SendMessage makes (one to Redis: its key's
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

`aio-proxy`: the same bare proxy with aiohttp as its client instead of httpx, in front of the
echo agent. The relay calls agents through aiohttp too, so per level both profiles are also
printed as ratios to it (CPU per request, latency added, throughput), for information: the
verdicts judge against the httpx proxy, the bare Python proxy the targets were set against.

Streams, one at a time: 50 chunks as fast as the agent makes them (time to last event; the
per-event overhead is (relay - proxy) / 50), and 50 chunks paced at 2 ms each (time to last
event), for direct, proxy, embedded and production.

Every figure is printed per level, never pooled, as an absolute value and as a ratio against the
proxy of the same run, with a verdict per level and target (see `judge_level` and
`judge_streams` for the targets). The exit status is 1 when any verdict misses.

    python bench/gateway_bench.py [--levels 1,8,32,64] [--requests 400] [--streams 30]
        [--protocol 1.0|0.3] [--server daphne|uvicorn] [--json FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from contextlib import ExitStack
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.common import (  # noqa: E402  (the path above makes `bench` importable as a script)
    Process,
    free_port,
    load_average,
    manage,
    postgres_database,
    process,
    redis_server,
    register,
    relay_command,
    relay_env,
    wait_until_answers,
)
from bench.gateway_load import (  # noqa: E402
    MESSAGE_TEXT,
    PROTOCOLS,
    ROUNDS,
    ROUNDS_ONE_AT_A_TIME,
    RedisWatch,
    Target,
    load_figures,
    measure_level,
    measure_streams,
    protocol_headers,
    request_body,
    stream_figures,
)
from bench.gateway_report import print_level, print_streams, write_json  # noqa: E402
from bench.gateway_servers import serve_agent, serve_grpc_agent, serve_proxy  # noqa: E402
from bench.gateway_verdicts import (  # noqa: E402
    AIOHTTP_PROXY,
    DIRECT,
    EMBEDDED,
    FAST,
    GRPC,
    GRPC_AGENT,
    GRPC_RELAY,
    LEVELS,
    PACE_MS,
    PACED,
    PRODUCTION,
    PROFILES,
    PROXY,
    LoadFigures,
    StreamFigures,
    exit_status,
    judge,
    not_judged,
)

# --- main ------------------------------------------------------------------------------------


async def bench(
    targets: dict[str, Target],
    stream_targets: dict[str, Target],
    agent: Process,
    redis: RedisWatch,
    watched: dict[str, Process],
    args: argparse.Namespace,
) -> tuple[dict[int, dict[str, LoadFigures]], dict[str, dict[str, StreamFigures]]]:
    body = request_body(args.protocol, streaming=False)
    levels: dict[int, dict[str, LoadFigures]] = {}
    for level in args.levels:
        runs = await measure_level(
            targets, agent, body, redis, count=args.requests, concurrency=level
        )
        figures = load_figures(runs)
        redis_round_trip, postgres_round_trip = redis.round_trips_ms()
        figures[PRODUCTION] = replace(
            figures[PRODUCTION],
            redis_clients=redis.clients_by_process(watched),
            redis_round_trip_ms=redis_round_trip,
            postgres_round_trip_ms=postgres_round_trip,
        )
        levels[level] = figures
        print_level(level, figures)

    texts = {FAST: MESSAGE_TEXT, PACED: f"{MESSAGE_TEXT} pace-ms={PACE_MS}"}
    streams = {}
    if args.streams <= 0:  # none asked for: no figures, and no verdict (named as not judged)
        return levels, streams
    for kind, text in texts.items():
        stream_body = request_body(args.protocol, streaming=True, text=text)
        runs = await measure_streams(stream_targets, stream_body, count=args.streams)
        streams[kind] = stream_figures(runs)
    print_streams(streams)
    return levels, streams


def wait_until_grpc_answers(server: Process, address: str, timeout: float = 60.0) -> None:
    """Returns once a gRPC channel to ``address`` is ready; raises when it is not in time."""
    import grpc

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with grpc.insecure_channel(address) as channel:
            try:
                grpc.channel_ready_future(channel).result(timeout=1)
                return
            except grpc.FutureTimeoutError:
                pass
    raise RuntimeError(f"the gRPC server (pid {server.pid}) did not answer on {address}")


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
    parser.add_argument("--json", type=Path, help="Write every figure and verdict to this file.")
    parser.add_argument("--serve", nargs="+", help=argparse.SUPPRESS)
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    if args.serve:
        role, *rest = args.serve
        if role == "agent":
            serve_agent(rest[0], int(rest[1]))
        elif role == "grpc-agent":
            serve_grpc_agent(int(rest[0]), int(rest[1]))
        else:
            upstreams = dict(item.split("=", 1) for item in rest[1:])
            serve_proxy(
                int(rest[0]), upstreams, client="aiohttp" if role == AIOHTTP_PROXY else "httpx"
            )
        return

    started = time.monotonic()
    var_dir = Path(tempfile.mkdtemp(prefix="relay-gateway-bench-"))
    embedded_dir, production_dir = var_dir / "embedded", var_dir / "production"
    script = str(Path(__file__).resolve())
    python = sys.executable
    ports = {
        name: free_port()
        for name in (
            "echo",
            "chunks",
            "proxy",
            AIOHTTP_PROXY,
            EMBEDDED,
            PRODUCTION,
            GRPC,
            GRPC_AGENT,
            "grpc-card",
        )
    }
    urls = {name: f"http://127.0.0.1:{port}" for name, port in ports.items()}

    with ExitStack() as stack:
        redis_process, redis_url = stack.enter_context(redis_server(var_dir))
        database_url = stack.enter_context(postgres_database("bench_gateway"))
        database = database_url.rsplit("/", 1)[1]
        envs = {
            EMBEDDED: relay_env(str(embedded_dir)),
            PRODUCTION: relay_env(
                str(production_dir),
                DATABASE_URL=database_url,
                REDIS_URL=redis_url,
                RELAY_GRPC_PORT=str(ports[GRPC]),
            ),
        }
        keys = {}
        for name, env in envs.items():
            manage(env, "migrate", "--verbosity=0")
            keys[name] = manage(env, "create_api_key", "gateway-bench").strip().splitlines()[-1]

        def start(name: str, command: list[str], env: dict[str, str]) -> Process:
            return stack.enter_context(process(name, command, env, var_dir))

        agent = start(
            "echo", [python, script, "--serve", "agent", "echo", str(ports["echo"])], envs[EMBEDDED]
        )
        streamer = start(
            "chunks",
            [python, script, "--serve", "agent", "chunks", str(ports["chunks"])],
            envs[EMBEDDED],
        )
        grpc_agent = start(
            GRPC_AGENT,
            [
                python,
                script,
                "--serve",
                "grpc-agent",
                str(ports[GRPC_AGENT]),
                str(ports["grpc-card"]),
            ],
            envs[EMBEDDED],
        )
        proxy = start(
            "proxy",
            [
                python,
                script,
                "--serve",
                "proxy",
                str(ports["proxy"]),
                f"echo={urls['echo']}/",
                f"chunks={urls['chunks']}/",
            ],
            envs[EMBEDDED],
        )
        aiohttp_proxy = start(
            AIOHTTP_PROXY,
            [
                python,
                script,
                "--serve",
                AIOHTTP_PROXY,
                str(ports[AIOHTTP_PROXY]),
                f"echo={urls['echo']}/",
            ],
            envs[EMBEDDED],
        )
        relays = {
            name: start(f"{name}-{args.server}", relay_command(args.server, ports[name]), env)
            for name, env in envs.items()
        }
        grpc_server = start("grpc", [python, "manage.py", "run_grpc"], envs[PRODUCTION])
        wait_until_grpc_answers(grpc_server, f"127.0.0.1:{ports[GRPC]}")
        wait_until_answers(agent, f"{urls['echo']}/.well-known/agent-card.json")
        wait_until_answers(streamer, f"{urls['chunks']}/.well-known/agent-card.json")
        wait_until_answers(proxy, f"{urls['proxy']}/")
        wait_until_answers(aiohttp_proxy, f"{urls[AIOHTTP_PROXY]}/")
        wait_until_answers(grpc_agent, f"{urls['grpc-card']}/.well-known/agent-card.json")
        wait_until_grpc_answers(grpc_agent, f"127.0.0.1:{ports[GRPC_AGENT]}")
        for name, relay in relays.items():
            wait_until_answers(relay, f"{urls[name]}/a2a/registry")
            register(urls[name], keys[name], "echo", urls["echo"])
            register(urls[name], keys[name], "chunks", urls["chunks"])
        register(urls[PRODUCTION], keys[PRODUCTION], "echo-grpc", urls["grpc-card"])
        redis = RedisWatch(redis_url, redis_process, database)
        stack.callback(redis.close)
        print(
            f"protocol {args.protocol}, relays under {args.server}, levels "
            f"{','.join(map(str, args.levels))}, {args.requests} requests per target per level "
            f"(in {ROUNDS_ONE_AT_A_TIME} rounds at one call at a time, {ROUNDS} above), "
            f"{args.streams} streams per target per kind\n"
            f"pids: echo {agent.pid}, chunks {streamer.pid}, proxy {proxy.pid}, "
            f"embedded {relays[EMBEDDED].pid}, production {relays[PRODUCTION].pid}, "
            f"grpc {grpc_server.pid}, grpc agent {grpc_agent.pid}, "
            f"redis {redis_process.pid}; database {database}; logs in {var_dir}; "
            f"{load_average()}",
            flush=True,
        )

        plain = protocol_headers(args.protocol)
        sse = {"Accept": "text/event-stream"}

        def relay_headers(name: str) -> dict[str, str]:
            return {**plain, "Authorization": f"Bearer {keys[name]}"}

        targets = {
            DIRECT: Target(DIRECT, f"{urls['echo']}/", agent, plain),
            PROXY: Target(PROXY, f"{urls['proxy']}/echo/", proxy, plain),
            AIOHTTP_PROXY: Target(
                AIOHTTP_PROXY, f"{urls[AIOHTTP_PROXY]}/echo/", aiohttp_proxy, plain
            ),
            EMBEDDED: Target(
                EMBEDDED,
                f"{urls[EMBEDDED]}/a2a/agents/echo/",
                relays[EMBEDDED],
                relay_headers(EMBEDDED),
            ),
            PRODUCTION: Target(
                PRODUCTION,
                f"{urls[PRODUCTION]}/a2a/agents/echo/",
                relays[PRODUCTION],
                relay_headers(PRODUCTION),
                backing=redis.backing_cpu,
            ),
            GRPC: Target(
                GRPC,
                f"127.0.0.1:{ports[GRPC]}",
                grpc_server,
                {"Authorization": f"Bearer {keys[PRODUCTION]}"},
                grpc_address=f"127.0.0.1:{ports[GRPC]}",
                grpc_tenant="agents/echo",
            ),
            GRPC_RELAY: Target(
                GRPC_RELAY,
                f"127.0.0.1:{ports[GRPC]}",
                grpc_server,
                {"Authorization": f"Bearer {keys[PRODUCTION]}"},
                grpc_address=f"127.0.0.1:{ports[GRPC]}",
                grpc_tenant="agents/echo-grpc",
                agent=grpc_agent,
            ),
            GRPC_AGENT: Target(
                GRPC_AGENT,
                f"127.0.0.1:{ports[GRPC_AGENT]}",
                grpc_agent,
                grpc_address=f"127.0.0.1:{ports[GRPC_AGENT]}",
                agent=grpc_agent,
            ),
        }
        streaming = {
            DIRECT: Target(DIRECT, f"{urls['chunks']}/", streamer, {**plain, **sse}),
            PROXY: Target(PROXY, f"{urls['proxy']}/chunks/", proxy, {**plain, **sse}),
            **{
                name: Target(
                    name,
                    f"{urls[name]}/a2a/agents/chunks/",
                    relays[name],
                    {**relay_headers(name), **sse},
                )
                for name in PROFILES
            },
        }
        watched = {"production relay": relays[PRODUCTION]}
        levels, streams = asyncio.run(bench(targets, streaming, agent, redis, watched, args))

    verdicts = judge(levels, streams)
    missed = [verdict for verdict in verdicts if not verdict.passed]
    print(f"\n{len(verdicts) - len(missed)} of {len(verdicts)} verdicts pass", end="")
    print(f"; missed: {len(missed)}" if missed else "")
    for what in not_judged(args.levels, streams=args.streams):
        print(f"  not judged (not measured in this run): {what}")
    if args.json:
        write_json(args.json, args, levels, streams, verdicts)
        print(f"every figure written to {args.json}")
    print(f"finished in {time.monotonic() - started:.0f} s; {load_average()}")
    sys.exit(exit_status(verdicts))


if __name__ == "__main__":
    main()
