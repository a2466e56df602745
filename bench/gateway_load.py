"""The gateway benchmark's load driver: the A2A request on the wire, the targets it is sent
to, and the rounds that send it (unary at a concurrency level, streams one at a time), with
the CPU and Redis figures read around each target's turn.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import re
import statistics
import time
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass, field

import httpx

from bench.common import CpuSnapshot, Process, cpu_snapshot, cpu_spent, percentile, socket_owners
from bench.gateway_verdicts import DIRECT, LoadFigures, StreamFigures

ROUNDS = 5
ROUNDS_TWINS = 15
"""At c=8, where rows on relays of their own are judged against a twin (``traced``,
``usage-off``, and the A/A pair ``twin-again``). Two identical twins, called in turn at c=8 on
a busy machine (load 11-13 on 2 cores), 200 calls a turn: their CPU per request over 5 rounds
differed by up to 10% (0.90x-1.11x in six pairings of four twins), over 15 rounds by at most
2% (0.98x-1.02x); one round alone by up to 30%. What two twins differ by is the machine's
noise reaching their turns unevenly, not the processes: the same twins were 1.00x apart over
the 15 rounds, and two with ``PYTHONHASHSEED=0`` no closer than two with their own seeds."""
TWIN_LEVEL = 8
ROUNDS_ONE_AT_A_TIME = 20
"""At one call at a time a round of 200 calls per target takes seconds, over which a shared
machine's speed drifts: the agent's own median moved between 3.3 and 6.0 ms from one such
round to the next, and five-round runs of the same code put production's added latency at
2.1 to 3.2 times the proxy's. Twenty shorter rounds (50 calls each at --requests 1000)
interleave the targets finely enough that the drift reaches them alike (four runs:
2.15-2.50x). At higher levels a round must hold more calls than the concurrency, so they keep
five."""
ROUND_TRIPS = 200
"""Round trips timed to the production Redis and to PostgreSQL after each level."""
COMMIT_PROBE = "bench_commit_probe"
"""The table in the bench database the PostgreSQL round trip writes to, to time a commit."""
LEVEL_SECONDS = 60.0
"""A target stops early at a level (and says so) when its requests take longer than this."""
STREAM_WARMUP = 3
REQUEST_TIMEOUT = 30.0
IDLE_SECONDS = 2.0
"""How long every client of the bench keeps an idle connection: as the relay's own client
(``relay_project.outbound``), well under the 5 s after which uvicorn closes one. A client that
keeps it as long as the server may send a request just as the server closes it, and fail with
a reset connection (seen once, the proxy's client at 5 s, httpx's default)."""
MESSAGE_TEXT = "hello through the gateway bench"


# --- the wire --------------------------------------------------------------------------------


PROTOCOLS = {
    "1.0": {"send": "SendMessage", "stream": "SendStreamingMessage", "role": "ROLE_USER"},
    "0.3": {"send": "message/send", "stream": "message/stream", "role": "user"},
}


def request_body(protocol: str, *, streaming: bool, text: str = MESSAGE_TEXT) -> bytes:
    """One JSON-RPC request of `protocol`, encoded once and sent as is every time."""
    names = PROTOCOLS[protocol]
    message = {"messageId": "bench-message-1", "role": names["role"]}
    if protocol == "1.0":
        message["parts"] = [{"text": text}]
    else:
        message.update({"kind": "message", "parts": [{"kind": "text", "text": text}]})
    method = names["stream" if streaming else "send"]
    return json.dumps(
        {"jsonrpc": "2.0", "id": 1, "method": method, "params": {"message": message}}
    ).encode()


MCP_VERSION = "2026-07-28"
ECHO_TOOL = "agent_echo"
"""The echo agent's MCP tool at the relay (``routing.mcp.tools.tool_name``)."""


def mcp_request(tool: str = ECHO_TOOL, text: str = MESSAGE_TEXT) -> tuple[bytes, dict[str, str]]:
    """One MCP ``tools/call`` (revision 2026-07-28) as the official client sends it, the
    envelope's ``_meta`` and the routing headers included, without a progress token: its
    body and headers. The relay answers it with the echo as plain JSON."""
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {
            "name": tool,
            "arguments": {"text": text},
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": MCP_VERSION,
                "io.modelcontextprotocol/clientCapabilities": {},
            },
        },
    }
    headers = {
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": MCP_VERSION,
        "Mcp-Method": "tools/call",
        "Mcp-Name": tool,
    }
    return json.dumps(body).encode(), headers


def protocol_headers(protocol: str) -> dict[str, str]:
    """A 0.3 client sends no A2A-Version (a missing header means 0.3)."""
    headers = {"Content-Type": "application/json"}
    if protocol == "1.0":
        headers["A2A-Version"] = "1.0"
    return headers


def answer_error(response: httpx.Response) -> str:
    """Why a unary answer is not a good echo; "" when it is."""
    if response.status_code != 200:
        return f"HTTP {response.status_code}: {response.text[:200]}"
    try:
        payload = response.json()
    except ValueError:
        return f"not JSON: {response.text[:200]}"
    result = payload.get("result") if isinstance(payload, dict) else None
    if not isinstance(result, dict) or MESSAGE_TEXT not in response.text:
        return f"no echo in the answer: {response.text[:200]}"
    if result.get("isError"):  # an MCP tool's error result
        return f"a tool error: {response.text[:200]}"
    return ""


def echo_send(client: httpx.AsyncClient, auth: dict[str, str]) -> Callable[[], Awaitable[None]]:
    """One A2A 1.0 SendMessage to the relay's ``echo`` agent through ``client`` (the in-process
    profiles' call, on ``client``'s base URL); a bad answer ends the run with its problem."""
    body = request_body("1.0", streaming=False)
    headers = {"Content-Type": "application/json", "A2A-Version": "1.0", **auth}

    async def send() -> None:
        response = await client.post("/a2a/agents/echo/", content=body, headers=headers)
        if problem := answer_error(response):
            raise SystemExit(problem)

    return send


# --- what is watched besides the latencies -----------------------------------------------------


@dataclass(frozen=True)
class Target:
    name: str
    url: str
    server: Process
    headers: dict[str, str] = field(default_factory=dict)
    backing: Callable[[], CpuSnapshot] | None = None
    """CPU of the services the server leans on (production: PostgreSQL backends and Redis)."""
    grpc_address: str = ""
    """Set for the gRPC targets: its ``host:port``; calls go through a2a-sdk's generated stub."""
    grpc_tenant: str = ""
    """The ``tenant`` of a gRPC target's requests (the relay's target; none for an agent)."""
    agent: Process | None = None
    """The agent process the target ends at, when not the echo agent served over HTTP."""
    keyed: bool = False
    """Each call sends an Idempotency-Key of its own."""
    body: bytes = b""
    """The target's own request (the MCP row's ``tools/call``); empty: the run's A2A call."""


class RedisWatch:
    """Reads the production Redis's counters over one connection held for the whole run, so
    reading them opens no connection of its own."""

    def __init__(self, url: str, redis: Process, database: str) -> None:
        import psycopg
        import redis as redis_client

        self.port = int(url.rsplit(":", 1)[1].split("/")[0])
        self.redis = redis
        self.client = redis_client.Redis.from_url(url, single_connection_client=True)
        self.client.ping()
        self.postgres = psycopg.connect(
            f"postgresql://postgres@127.0.0.1:5432/{database}", autocommit=True
        )
        self.postgres.execute(
            f"CREATE TABLE IF NOT EXISTS {COMMIT_PROBE} (id bigserial PRIMARY KEY)"
        )
        self.database = database

    def connections_received(self) -> int:
        return int(self.client.info("stats")["total_connections_received"])

    def round_trips_ms(self, count: int = ROUND_TRIPS) -> tuple[float, float]:
        """Median milliseconds of a round trip to Redis (PING) and of a committed write to
        PostgreSQL (one INSERT in autocommit, as each of a call's two statements is), one at
        a time from this process. A commit waits for its WAL to reach the disk, which a
        ``SELECT 1`` does not: on a busy disk that wait is most of a call's time there."""

        def median_ms(call: Callable[[], object]) -> float:
            spent = []
            for _ in range(count):
                started = time.perf_counter()
                call()
                spent.append(time.perf_counter() - started)
            return statistics.median(spent) * 1000

        return (
            median_ms(self.client.ping),
            median_ms(lambda: self.postgres.execute(f"INSERT INTO {COMMIT_PROBE} DEFAULT VALUES")),
        )

    def clients_by_process(self, processes: dict[str, Process]) -> dict[str, int]:
        """Connections open now, by the name of the process that holds them."""
        owners: dict[int, str] = {os.getpid(): "bench"}
        for name, running in processes.items():
            for pid in running.pids():
                owners[pid] = name
        local_ports = socket_owners(list(owners), self.port)
        counts: Counter[str] = Counter()
        for entry in self.client.client_list():
            port = int(entry["addr"].rsplit(":", 1)[1])
            counts[owners.get(local_ports.get(port, -1), "other")] += 1
        return dict(counts)

    def backing_cpu(self) -> CpuSnapshot:
        """The Redis server and the PostgreSQL backends serving the bench database (this
        watcher's own backend left out)."""
        rows = self.postgres.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()",
            [self.database],
        ).fetchall()
        return cpu_snapshot([self.redis.pid, *(row[0] for row in rows)])

    def close(self) -> None:
        self.client.close()
        self.postgres.close()


# --- load ------------------------------------------------------------------------------------


@dataclass
class Run:
    """What one target did at one level, summed over its rounds."""

    latencies_ms: list[float] = field(default_factory=list)
    errors: int = 0
    seconds: float = 0.0
    server_cpu: float = 0.0
    agent_cpu: float = 0.0
    backing_cpu: float | None = None
    redis_opened: int | None = None
    first_error: str = ""
    cut_short: bool = False
    round_cpu_ms: list[float] = field(default_factory=list)
    """CPU per request of each round's turn, in round order (the rounds pair the targets)."""

    @property
    def requests(self) -> int:
        return len(self.latencies_ms) + self.errors


def grpc_request(tenant: str):
    """A gRPC target's SendMessage (the same message as the HTTP body's, A2A 1.0)."""
    from a2a.types import Message, Part, Role, SendMessageRequest

    return SendMessageRequest(
        tenant=tenant,
        message=Message(
            message_id="gateway-bench", role=Role.ROLE_USER, parts=[Part(text=MESSAGE_TEXT)]
        ),
    )


async def grpc_send(stub, target: Target, request) -> str:
    """One SendMessage over gRPC; the problem, or "" when it answered a message or task."""
    import grpc

    metadata = [(name.lower(), value) for name, value in target.headers.items()]
    try:
        answer = await stub.SendMessage(request, metadata=metadata, timeout=REQUEST_TIMEOUT)
    except grpc.aio.AioRpcError as error:
        return f"gRPC {error.code().name}: {error.details()}"
    return "" if answer.WhichOneof("payload") else "an empty SendMessageResponse"


async def send_many(
    client: httpx.AsyncClient,
    target: Target,
    body: bytes,
    *,
    count: int,
    concurrency: int,
    deadline: float,
) -> tuple[list[float], int, str, bool]:
    latencies: list[float] = []
    errors = 0
    first_error = ""
    issued = 0
    grpc_body = grpc_request(target.grpc_tenant) if target.grpc_address else None

    async def worker() -> None:
        nonlocal errors, first_error, issued
        while issued < count and time.monotonic() < deadline:
            issued += 1
            started = time.perf_counter()
            if target.grpc_address:
                problem = await grpc_send(client, target, grpc_body)
            else:
                headers = target.headers
                if target.keyed:
                    headers = {**headers, "Idempotency-Key": uuid.uuid4().hex}
                try:
                    response = await client.post(
                        target.url, content=target.body or body, headers=headers
                    )
                    problem = answer_error(response)
                except httpx.HTTPError as error:
                    problem = f"{type(error).__name__}: {error}"
            elapsed = (time.perf_counter() - started) * 1000
            if problem:
                errors += 1
                first_error = first_error or problem
            else:
                latencies.append(elapsed)

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return latencies, errors, first_error, issued < count


def rounds_at(concurrency: int) -> int:
    """How many rounds a level takes its targets in (``ROUNDS_ONE_AT_A_TIME``,
    ``ROUNDS_TWINS``)."""
    return {1: ROUNDS_ONE_AT_A_TIME, TWIN_LEVEL: ROUNDS_TWINS}.get(concurrency, ROUNDS)


def rotated(names: list[str], round_number: int) -> list[str]:
    """The targets in turn, each pair of rounds in mirrored order (A B C, then C B A: a drift
    of the machine's speed across the pair reaches every target alike), each pair starting one
    further: none always follows the same, and none always goes first."""
    shift = (round_number // 2) % len(names)
    order = names[shift:] + names[:shift]
    return order[::-1] if round_number % 2 else order


async def measure_level(
    targets: dict[str, Target],
    agent: Process,
    body: bytes,
    redis: RedisWatch,
    *,
    count: int,
    concurrency: int,
) -> dict[str, Run]:
    """`count` requests per target at `concurrency`, in rounds of a share each
    (``rounds_at``).

    Each turn starts with `concurrency` calls that are not counted, so its CPU is that of
    calls to a process already serving them, whatever ran before. Without them the first turn
    of a process in a round also paid for its return from idle (the connections closed after
    IDLE_SECONDS on both sides, the caches expired after RELAY_TARGET_CACHE_SECONDS): on the
    production relay always the production row's turn, never that of `keyed`, `bearer` or
    `mcp` after it."""
    limits = httpx.Limits(
        max_connections=concurrency,
        max_keepalive_connections=concurrency,
        keepalive_expiry=IDLE_SECONDS,
    )
    rounds = rounds_at(concurrency)
    runs = {name: Run() for name in targets}
    for name, target in targets.items():
        if target.backing is not None:
            runs[name].backing_cpu = 0.0
            runs[name].redis_opened = 0
    async with AsyncExitStack() as stack:
        clients = {
            name: await stack.enter_async_context(
                httpx.AsyncClient(limits=limits, timeout=REQUEST_TIMEOUT)
            )
            for name, target in targets.items()
            if not target.grpc_address
        }
        for name, target in targets.items():
            if target.grpc_address:
                import grpc
                from a2a.types import a2a_pb2_grpc

                # One HTTP/2 connection carries every concurrent call, as gRPC clients do.
                channel = await stack.enter_async_context(
                    grpc.aio.insecure_channel(target.grpc_address)
                )
                clients[name] = a2a_pb2_grpc.A2AServiceStub(channel)
        for name, target in targets.items():
            # Warm-up: open the pools' connections and let the servers settle; not counted.
            await send_many(
                clients[name],
                target,
                body,
                count=max(20, concurrency * 3),
                concurrency=concurrency,
                deadline=time.monotonic() + LEVEL_SECONDS / rounds,
            )
        for round_number in range(rounds):
            share = count // rounds + (round_number < count % rounds)
            for name in rotated(list(targets), round_number):
                target, run = targets[name], runs[name]
                called = target.agent or agent
                # The turn's primer, not counted: see the docstring.
                await send_many(
                    clients[name],
                    target,
                    body,
                    count=concurrency,
                    concurrency=concurrency,
                    deadline=time.monotonic() + LEVEL_SECONDS / rounds,
                )
                server_before, agent_before = target.server.cpu_snapshot(), called.cpu_snapshot()
                if target.backing is not None:
                    backing_before = target.backing()
                    connections_before = redis.connections_received()
                started = time.perf_counter()
                latencies, errors, first_error, cut_short = await send_many(
                    clients[name],
                    target,
                    body,
                    count=share,
                    concurrency=concurrency,
                    deadline=time.monotonic() + LEVEL_SECONDS / rounds,
                )
                run.seconds += time.perf_counter() - started
                if target.backing is not None:
                    run.redis_opened += redis.connections_received() - connections_before
                    run.backing_cpu += cpu_spent(backing_before, target.backing())
                turn_cpu = cpu_spent(server_before, target.server.cpu_snapshot())
                run.server_cpu += turn_cpu
                turn_calls = len(latencies) + errors
                run.round_cpu_ms.append(turn_cpu / turn_calls * 1000 if turn_calls else math.nan)
                run.agent_cpu += cpu_spent(agent_before, called.cpu_snapshot())
                run.latencies_ms += latencies
                run.errors += errors
                run.first_error = run.first_error or first_error
                run.cut_short = run.cut_short or cut_short
    return runs


@dataclass
class StreamRun:
    last_event_ms: list[float] = field(default_factory=list)
    events: list[int] = field(default_factory=list)
    errors: int = 0
    server_cpu: float = 0.0
    first_error: str = ""


async def stream_once(
    client: httpx.AsyncClient, url: str, headers: dict[str, str], body: bytes
) -> tuple[float, int]:
    """Milliseconds to the last `data:` event of one stream, and how many events came.

    The stream must end with the task completed. Its events are counted, not checked against
    the chunks: a relay may fold chunks that came before its first event into the task
    snapshot it opens with."""
    started = time.perf_counter()
    last, events, last_line = started, 0, ""
    async with client.stream("POST", url, content=body, headers=headers) as response:
        if response.status_code != 200:
            raise ValueError(f"HTTP {response.status_code}")
        async for line in response.aiter_lines():
            if line.startswith("data:"):
                last, events, last_line = time.perf_counter(), events + 1, line
                if '"error"' in line:
                    raise ValueError(f"error event: {line[:200]}")
    if not re.search(r'"(TASK_STATE_COMPLETED|completed)"', last_line):
        raise ValueError(f"the stream did not end completed: {last_line[:200]}")
    return (last - started) * 1000, events


async def measure_streams(
    targets: dict[str, Target], body: bytes, *, count: int
) -> dict[str, StreamRun]:
    """`count` streams, one after the other, to each target, taking them in turn."""
    runs = {name: StreamRun() for name in targets}
    limits = httpx.Limits(keepalive_expiry=IDLE_SECONDS)
    async with httpx.AsyncClient(limits=limits, timeout=REQUEST_TIMEOUT) as client:
        deadline = time.monotonic() + LEVEL_SECONDS
        for index in range(count + STREAM_WARMUP):
            if time.monotonic() > deadline:
                break
            for name in rotated(list(targets), index):
                target, run = targets[name], runs[name]
                cpu_before = target.server.cpu_snapshot()
                try:
                    milliseconds, events = await stream_once(
                        client, target.url, target.headers, body
                    )
                except (httpx.HTTPError, ValueError) as error:
                    run.errors += 1
                    run.first_error = run.first_error or f"{type(error).__name__}: {error}"
                    continue
                if index >= STREAM_WARMUP:
                    run.last_event_ms.append(milliseconds)
                    run.events.append(events)
                    run.server_cpu += cpu_spent(cpu_before, target.server.cpu_snapshot())
    return runs


def load_figures(runs: dict[str, Run]) -> dict[str, LoadFigures]:
    """Every target's figures at one level; added latency is over the direct agent's."""

    def per_request(seconds: float, run: Run) -> float:
        return seconds / run.requests * 1000 if run.requests else math.nan

    def p50(run: Run) -> float:
        return statistics.median(run.latencies_ms) if run.latencies_ms else math.nan

    direct = runs[DIRECT]
    figures = {}
    for name, run in runs.items():
        figures[name] = LoadFigures(
            requests=run.requests,
            errors=run.errors,
            per_second=run.requests / run.seconds if run.seconds else math.nan,
            p50_ms=p50(run),
            p99_ms=percentile(run.latencies_ms, 0.99),
            added_p50_ms=p50(run) - p50(direct),
            added_p99_ms=percentile(run.latencies_ms, 0.99) - percentile(direct.latencies_ms, 0.99),
            cpu_ms=per_request(run.server_cpu, run),
            agent_cpu_ms=per_request(run.agent_cpu, run),
            backing_cpu_ms=None if run.backing_cpu is None else per_request(run.backing_cpu, run),
            redis_opened=run.redis_opened,
            cut_short=run.cut_short,
            first_error=run.first_error,
            round_cpu_ms=tuple(run.round_cpu_ms),
        )
    return figures


def stream_figures(runs: dict[str, StreamRun]) -> dict[str, StreamFigures]:
    return {
        name: StreamFigures(
            streams=len(run.last_event_ms),
            errors=run.errors,
            fewest_events=min(run.events, default=0),
            most_events=max(run.events, default=0),
            last_event_ms=statistics.median(run.last_event_ms) if run.last_event_ms else math.nan,
            cpu_ms=run.server_cpu / len(run.last_event_ms) * 1000
            if run.last_event_ms
            else math.nan,
            first_error=run.first_error,
        )
        for name, run in runs.items()
    }
