"""What a gateway benchmark run starts and measures: the echo and chunk-streaming agents, the
gRPC echo agent, the bare proxies (httpx and aiohttp), and the relay in both profiles
(embedded: SQLite in a temporary RELAY_VAR_DIR; production: a throwaway PostgreSQL database
and a Redis server of its own, with its gRPC server), each a process of its own with the
agents registered; then the targets the load driver sends its calls to.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

from bench.common import (
    STARTUP_SECONDS,
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
from bench.gateway_load import (
    ROUNDS,
    ROUNDS_ONE_AT_A_TIME,
    ROUNDS_TWINS,
    TWIN_LEVEL,
    RedisWatch,
    Target,
    mcp_request,
    protocol_headers,
)
from bench.gateway_storm import (
    ALTERNATE,
    ALTERNATES_SCRIPT,
    STORM,
    STORM_LEVELS,
    STORM_WINDOW_SECONDS,
    storm_agent_id,
)
from bench.gateway_verdicts import (
    AIOHTTP_PROXY,
    BEARER,
    DIRECT,
    EMBEDDED,
    EMBEDDED_TWIN,
    EMBEDDED_USAGE_OFF,
    GRPC,
    GRPC_AGENT,
    GRPC_RELAY,
    KEYED,
    MCP,
    PRODUCTION,
    PROFILES,
    PROXY,
    TRACED,
    TWIN,
    TWIN_AGAIN,
    USAGE_OFF,
)
from tests.authorization_server import AUDIENCE, authorization_server

BEARER_LIFETIME_SECONDS = 6 * 3600
"""The bench's bearer token outlives any run."""
BSP_SCHEDULE_DELAY_MS = 3_600_000
"""The traced relay's batch span processor waits this long before exporting a batch that is
not full: longer than any run."""


@dataclass(frozen=True)
class Running:
    """The targets of a run, and what the load driver watches besides them."""

    targets: dict[str, Target]
    """Unary calls: the baselines, both profiles, the gRPC rows."""
    streaming: dict[str, Target]
    """Streams: the chunk-streaming agent, the proxy in front of it, both profiles."""
    agent: Process
    """The echo agent every HTTP target ends at."""
    redis: RedisWatch
    watched: dict[str, Process]
    """The processes whose Redis connections are counted after each level."""
    production_url: str = ""
    """The production relay's base URL (the 503 storm's calls go there)."""


def wait_until_grpc_answers(
    server: Process, address: str, timeout: float = STARTUP_SECONDS
) -> None:
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


@contextmanager
def running(args: argparse.Namespace, script: str) -> Iterator[Running]:
    """Starts every server of a run (the agents and proxies as ``script --serve ROLE ...``),
    registers the agents at both relays and prints what runs where; stops them all, drops the
    database and stops Redis on exit."""
    var_dir = Path(tempfile.mkdtemp(prefix="relay-gateway-bench-"))
    embedded_dir, production_dir = var_dir / "embedded", var_dir / "production"
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
            TRACED,
            TWIN,
            TWIN_AGAIN,
            USAGE_OFF,
            EMBEDDED_TWIN,
            EMBEDDED_USAGE_OFF,
            "otlp-sink",
            STORM,
        )
    }
    urls = {name: f"http://127.0.0.1:{port}" for name, port in ports.items()}

    def served(role: str, *arguments: object) -> list[str]:
        return [sys.executable, script, "--serve", role, *map(str, arguments)]

    with ExitStack() as stack:
        redis_process, redis_url = stack.enter_context(redis_server(var_dir))
        database_url = stack.enter_context(postgres_database("bench_gateway"))
        database = database_url.rsplit("/", 1)[1]
        # The issuer of the bearer row: a real HTTP server on 127.0.0.1 (in this process)
        # serving its JWKS, which the production relay fetches once and then keeps.
        issuer = stack.enter_context(authorization_server())
        trusted = [{"issuer": issuer.issuer, "jwksUrl": issuer.jwks_url, "audience": AUDIENCE}]
        envs = {
            EMBEDDED: relay_env(str(embedded_dir)),
            PRODUCTION: relay_env(
                str(production_dir),
                DATABASE_URL=database_url,
                REDIS_URL=redis_url,
                RELAY_GRPC_PORT=str(ports[GRPC]),
                RELAY_BREAKER_COOLDOWN_SECONDS=str(STORM_WINDOW_SECONDS),
                RELAY_JWT_ISSUERS=json.dumps(trusted),
            ),
        }
        keys = {}
        for name, env in envs.items():
            manage(env, "migrate", "--verbosity=0")
            keys[name] = manage(env, "create_api_key", "gateway-bench").strip().splitlines()[-1]

        def start(name: str, command: list[str], env: dict[str, str]) -> Process:
            return stack.enter_context(process(name, command, env, var_dir))

        agent = start("echo", served("agent", "echo", ports["echo"]), envs[EMBEDDED])
        streamer = start("chunks", served("agent", "chunks", ports["chunks"]), envs[EMBEDDED])
        grpc_agent = start(
            GRPC_AGENT,
            served("grpc-agent", ports[GRPC_AGENT], ports["grpc-card"]),
            envs[EMBEDDED],
        )
        proxy = start(
            "proxy",
            served("proxy", ports["proxy"], f"echo={urls['echo']}/", f"chunks={urls['chunks']}/"),
            envs[EMBEDDED],
        )
        aiohttp_proxy = start(
            AIOHTTP_PROXY,
            served(AIOHTTP_PROXY, ports[AIOHTTP_PROXY], f"echo={urls['echo']}/"),
            envs[EMBEDDED],
        )
        relays = {
            name: start(f"{name}-{args.server}", relay_command(args.server, ports[name]), env)
            for name, env in envs.items()
        }
        twin = twin_again = None
        if args.tracing or args.usage:  # their baseline: production's settings, this row only
            twin, twin_again = (
                start(
                    f"{name}-{args.server}",
                    relay_command(args.server, ports[name]),
                    envs[PRODUCTION],
                )
                for name in (TWIN, TWIN_AGAIN)
            )
        traced = None
        if args.tracing:  # production's twin with traces on, exporting to a local sink
            sink = start("otlp-sink", served("otlp-sink", ports["otlp-sink"]), envs[EMBEDDED])
            wait_until_answers(sink, f"{urls['otlp-sink']}/")
            traced_env = {
                **envs[PRODUCTION],
                "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": f"{urls['otlp-sink']}/v1/traces",
                "OTEL_SERVICE_NAME": "relay-bench",
                # A batch goes when it is full (512 spans), as under steady load, never on the
                # timer: the timer would fire in the gaps between this row's turns, and the CPU
                # of the spans it exported there would count for no turn.
                "OTEL_BSP_SCHEDULE_DELAY": str(BSP_SCHEDULE_DELAY_MS),
            }
            traced = start(
                f"{TRACED}-{args.server}", relay_command(args.server, ports[TRACED]), traced_env
            )
        usage_off = None
        if args.usage:  # production's twin keeping no usage records
            usage_off = start(
                f"{USAGE_OFF}-{args.server}",
                relay_command(args.server, ports[USAGE_OFF]),
                {**envs[PRODUCTION], "RELAY_USAGE_RECORDS": "false"},
            )
        embedded_twins = {}
        if args.usage:  # the same pair on the embedded profile: a twin, and one keeping none
            embedded_twins = {
                name: start(f"{name}-{args.server}", relay_command(args.server, ports[name]), env)
                for name, env in (
                    (EMBEDDED_TWIN, envs[EMBEDDED]),
                    (EMBEDDED_USAGE_OFF, {**envs[EMBEDDED], "RELAY_USAGE_RECORDS": "false"}),
                )
            }
        grpc_server = start("grpc", [sys.executable, "manage.py", "run_grpc"], envs[PRODUCTION])
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
        if args.storm > 0:  # the 503 storm's agents, one per level, each with the echo behind
            storm = start(STORM, served(STORM, ports[STORM]), envs[EMBEDDED])
            storm_ids = [storm_agent_id(level) for level in STORM_LEVELS]
            for agent_id in storm_ids:
                wait_until_answers(storm, f"{urls[STORM]}/{agent_id}/.well-known/agent-card.json")
                register(urls[PRODUCTION], keys[PRODUCTION], agent_id, f"{urls[STORM]}/{agent_id}")
            script = ALTERNATES_SCRIPT.format(ids=storm_ids, alternate=ALTERNATE)
            manage(envs[PRODUCTION], "shell", "-c", script)
        seconds = ((twin, TWIN), (twin_again, TWIN_AGAIN), (traced, TRACED), (usage_off, USAGE_OFF))
        for second, name in seconds:
            if second is not None:  # the same database: production's agents and key
                wait_until_answers(second, f"{urls[name]}/a2a/registry")
        for name, second in embedded_twins.items():  # the same SQLite file: embedded's
            wait_until_answers(second, f"{urls[name]}/a2a/registry")
        redis = RedisWatch(redis_url, redis_process, database)
        stack.callback(redis.close)
        print(
            f"protocol {args.protocol}, relays under {args.server}, levels "
            f"{','.join(map(str, args.levels))}, {args.requests} requests per target per level "
            f"(in {ROUNDS_ONE_AT_A_TIME} rounds at one call at a time, {ROUNDS_TWINS} at "
            f"c={TWIN_LEVEL}, {ROUNDS} above), "
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

        mcp_body, mcp_headers = mcp_request()
        now = int(time.time())
        bearer = issuer.token(sub="gateway-bench", iat=now, exp=now + BEARER_LIFETIME_SECONDS)

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
            KEYED: Target(
                KEYED,
                f"{urls[PRODUCTION]}/a2a/agents/echo/",
                relays[PRODUCTION],
                relay_headers(PRODUCTION),
                backing=redis.backing_cpu,
                keyed=True,
            ),
            BEARER: Target(
                BEARER,
                f"{urls[PRODUCTION]}/a2a/agents/echo/",
                relays[PRODUCTION],
                {**plain, "Authorization": f"Bearer {bearer}"},
                backing=redis.backing_cpu,
            ),
            MCP: Target(
                MCP,
                f"{urls[PRODUCTION]}/mcp",
                relays[PRODUCTION],
                {**mcp_headers, "Authorization": f"Bearer {keys[PRODUCTION]}"},
                backing=redis.backing_cpu,
                body=mcp_body,
            ),
            # Production's twins (each a relay of its own, started only when asked for).
            **{
                name: Target(
                    name,
                    f"{urls[name]}/a2a/agents/echo/",
                    relay,
                    relay_headers(PRODUCTION),
                    backing=redis.backing_cpu,
                )
                for relay, name in seconds
                if relay is not None
            },
            # Embedded's twins (started only with --usage).
            **{
                name: Target(name, f"{urls[name]}/a2a/agents/echo/", relay, relay_headers(EMBEDDED))
                for name, relay in embedded_twins.items()
            },
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
        yield Running(targets, streaming, agent, redis, watched, urls[PRODUCTION])
