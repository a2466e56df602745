"""Gateway benchmark: what a call through the relay costs next to a bare Python proxy.

Starts, each in a process of its own: the echo agent and a 50-chunk streaming agent (a2a-sdk
apps on uvicorn), a bare Starlette + httpx pass-through proxy in front of the echo
agent (uvicorn), and the relay (daphne, embedded profile: SQLite in a temporary RELAY_VAR_DIR,
every task persisted) with both agents registered. The load comes from this process: httpx
with keep-alive and a connection pool as large as the concurrency. Every unary call is the same
`SendMessage` JSON-RPC 1.0 request (body built once) sent to three targets:

- direct: the echo agent itself;
- proxy:  the echo agent through the pass-through proxy (the floor for one Python hop);
- relay:  the echo agent through the relay, `POST /a2a/agents/echo/`.

At concurrency 1, 8 and 32 it prints requests/s, p50 and p99 latency, errors, and the CPU time
per request of the server-side process (the agent for direct, the proxy, daphne alone for the
relay) read from /proc before and after each run; the echo agent's own CPU per request is
printed beside it (the same work behind the proxy and behind the relay). Then the time to the
last event of a one-event stream (`SendStreamingMessage` to the echo agent) and of a 50-chunk
stream, direct and through the relay. Targets, relay against proxy, measured in the same run:
CPU per request at most 3x, added p50 at c=1 at most 3x, c=8 throughput at least 50 %, no
errors at c=32.

    python bench/gateway_bench.py [--requests 400 1500 1500] [--streams 100 30]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import AsyncExitStack, ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

CONCURRENCY = (1, 8, 32)
STREAM_CHUNKS = 50
LEVEL_SECONDS = 60.0
"""A target stops early at a level (and says so) when its requests take longer than this."""
ROUNDS = 5
REQUEST_TIMEOUT = 30.0
STARTUP_SECONDS = 40.0
MESSAGE_TEXT = "hello through the gateway bench"
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


# --- the servers, each run as `gateway_bench.py --serve ROLE ...` in a process of its own ------


def serve_agent(slug: str, port: int) -> None:
    """The echo agent, or ("chunks") one that streams `STREAM_CHUNKS` artifact chunks with no
    delays: a2a-sdk apps built like the demo agents.

    uvicorn binds the port itself rather than through `routing.demo.serve.serve`: asyncio
    turns Nagle off only on sockets whose `proto` is TCP, and the socket `serve` binds has
    proto 0, so its keep-alive answers stall on the client's delayed ACK (about 40 ms each).
    """
    import uvicorn
    from a2a.types import Part

    from routing.demo.agents import ECHO, AgentSpec, Skill, TaskExecutor, build_agent_app

    class ChunkStreamer(TaskExecutor):
        async def work(self, context, updater) -> None:
            for index in range(STREAM_CHUNKS):
                await updater.add_artifact(
                    [Part(text=f"chunk {index} ")],
                    artifact_id="story",
                    name="story",
                    append=index > 0,
                    last_chunk=index == STREAM_CHUNKS - 1,
                )
            await updater.complete()

    specs = {
        "echo": ECHO,
        "chunks": AgentSpec(
            slug="chunks",
            name="Chunk Streamer",
            description="Streams 50 artifact chunks.",
            skills=(
                Skill(id="chunks", name="Chunks", description="Streams chunks.", tags=("bench",)),
            ),
            make_executor=ChunkStreamer,
        ),
    }
    app = build_agent_app(specs[slug], base_url=f"http://127.0.0.1:{port}")
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", access_log=False)


def serve_proxy(port: int, upstream: str) -> None:
    """POST / goes to `upstream` with one shared httpx.AsyncClient; the answer comes back."""
    import contextlib

    import uvicorn
    from starlette.applications import Starlette
    from starlette.responses import Response
    from starlette.routing import Route

    forwarded = ("content-type", "a2a-version", "a2a-extensions", "authorization")
    clients: list[httpx.AsyncClient] = []

    @contextlib.asynccontextmanager
    async def lifespan(app):
        limits = httpx.Limits(max_connections=64, max_keepalive_connections=64)
        async with httpx.AsyncClient(limits=limits, timeout=REQUEST_TIMEOUT) as client:
            clients.append(client)
            yield

    async def forward(request):
        headers = {name: request.headers[name] for name in forwarded if name in request.headers}
        answer = await clients[0].post(upstream, content=await request.body(), headers=headers)
        return Response(
            answer.content,
            status_code=answer.status_code,
            media_type=answer.headers.get("content-type"),
        )

    app = Starlette(routes=[Route("/", forward, methods=["POST"])], lifespan=lifespan)
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", access_log=False)


# --- processes --------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class Process:
    name: str
    child: subprocess.Popen
    log: Path

    @property
    def pid(self) -> int:
        return self.child.pid

    def cpu_seconds(self) -> float:
        """User + system CPU of the process (all its threads) so far, from /proc."""
        stat = Path(f"/proc/{self.pid}/stat").read_text()
        fields = stat.rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS

    def log_tail(self) -> str:
        return self.log.read_text(errors="replace")[-3000:]


@contextmanager
def process(name: str, command: list[str], env: dict[str, str], logs: Path) -> Iterator[Process]:
    log = logs / f"{name}.log"
    with log.open("w") as sink:
        child = subprocess.Popen(
            [sys.executable, *command], cwd=ROOT, env=env, stdout=sink, stderr=subprocess.STDOUT
        )
    try:
        yield Process(name, child, log)
    finally:
        child.terminate()
        try:
            child.wait(15)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait(5)


def wait_until_answers(running: Process, url: str) -> None:
    deadline = time.monotonic() + STARTUP_SECONDS
    while time.monotonic() < deadline:
        if running.child.poll() is not None:
            sys.exit(f"{running.name} exited while starting:\n{running.log_tail()}")
        try:
            httpx.get(url, timeout=1)
            return
        except httpx.HTTPError:
            time.sleep(0.2)
    sys.exit(
        f"{running.name} did not answer at {url} within {STARTUP_SECONDS:.0f} s:\n"
        f"{running.log_tail()}"
    )


def relay_env(var_dir: str) -> dict[str, str]:
    """The embedded profile, whatever this shell points at."""
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("DATABASE_URL", "REDIS_URL", "DJANGO_", "RELAY_"))
    }
    env.update(
        {"RELAY_VAR_DIR": var_dir, "RELAY_ALLOW_PRIVATE_URLS": "true", "PYTHONUNBUFFERED": "1"}
    )
    # Thousands of calls a minute from one key: a limit high enough never to refuse, so every
    # call still pays for being counted.
    env["RELAY_RATE_LIMIT_PER_KEY"] = str(10**9)
    return env


def manage(env: dict[str, str], *args: str) -> str:
    result = subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    if result.returncode != 0:
        sys.exit(f"manage.py {' '.join(args)} failed:\n{result.stderr[-2000:]}")
    return result.stdout


def register(relay_url: str, key: str, agent_id: str, agent_url: str) -> None:
    answer = httpx.post(
        f"{relay_url}/a2a/registry",
        json={"url": f"{agent_url}/.well-known/agent-card.json", "id": agent_id},
        headers={"Authorization": f"Bearer {key}"},
        timeout=30,
    )
    if answer.status_code != 201:
        sys.exit(
            f"registering {agent_id} at the relay failed: {answer.status_code} {answer.text[:500]}"
        )


# --- load ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Target:
    name: str
    url: str
    server: Process
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class Run:
    latencies_ms: list[float]
    errors: int
    seconds: float
    server_cpu: float
    agent_cpu: float
    first_error: str = ""
    cut_short: bool = False

    @property
    def requests(self) -> int:
        return len(self.latencies_ms) + self.errors

    @property
    def per_second(self) -> float:
        return self.requests / self.seconds

    def cpu_ms(self, seconds: float) -> float:
        return seconds / self.requests * 1000

    @property
    def p50(self) -> float:
        return statistics.median(self.latencies_ms) if self.latencies_ms else float("nan")

    @property
    def p99(self) -> float:
        return percentile(self.latencies_ms, 0.99)


def percentile(samples: list[float], q: float) -> float:
    if not samples:
        return float("nan")
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


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
    return ""


async def send_many(
    client: httpx.AsyncClient,
    target: Target,
    body: bytes,
    *,
    count: int,
    concurrency: int,
    deadline: float,
) -> tuple[list, int, str, bool]:
    latencies: list[float] = []
    errors = 0
    first_error = ""
    issued = 0

    async def worker() -> None:
        nonlocal errors, first_error, issued
        while issued < count and time.monotonic() < deadline:
            issued += 1
            started = time.perf_counter()
            try:
                response = await client.post(target.url, content=body, headers=target.headers)
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


async def measure_level(
    targets: dict[str, Target], agent: Process, body: bytes, *, count: int, concurrency: int
) -> dict[str, Run]:
    """`count` requests per target at `concurrency`, in `ROUNDS` rounds that take the targets
    in turn, so a change in the machine's background load touches all three alike."""
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    runs = {name: Run([], 0, 0.0, 0.0, 0.0) for name in targets}
    async with AsyncExitStack() as stack:
        clients = {
            name: await stack.enter_async_context(
                httpx.AsyncClient(limits=limits, timeout=REQUEST_TIMEOUT)
            )
            for name in targets
        }
        for name, target in targets.items():
            # Warm-up: open the pool's connections and let the servers settle; not counted.
            await send_many(
                clients[name],
                target,
                body,
                count=max(20, concurrency * 3),
                concurrency=concurrency,
                deadline=time.monotonic() + LEVEL_SECONDS / ROUNDS,
            )
        for round_number in range(ROUNDS):
            share = count // ROUNDS + (round_number < count % ROUNDS)
            for name, target in targets.items():
                run = runs[name]
                server_before, agent_before = target.server.cpu_seconds(), agent.cpu_seconds()
                started = time.perf_counter()
                latencies, errors, first_error, cut_short = await send_many(
                    clients[name],
                    target,
                    body,
                    count=share,
                    concurrency=concurrency,
                    deadline=time.monotonic() + LEVEL_SECONDS / ROUNDS,
                )
                run.seconds += time.perf_counter() - started
                run.server_cpu += target.server.cpu_seconds() - server_before
                run.agent_cpu += agent.cpu_seconds() - agent_before
                run.latencies_ms += latencies
                run.errors += errors
                run.first_error = run.first_error or first_error
                run.cut_short = run.cut_short or cut_short
    return runs


@dataclass
class StreamRun:
    last_event_ms: list[float]
    events: int
    errors: int
    server_cpu: float = 0.0
    first_error: str = ""

    @property
    def p50(self) -> float:
        return statistics.median(self.last_event_ms) if self.last_event_ms else float("nan")

    @property
    def cpu_ms(self) -> float:
        """The server process's CPU per timed stream (warm-up streams left out)."""
        return self.server_cpu / max(1, len(self.last_event_ms)) * 1000


async def stream_once(
    client: httpx.AsyncClient, url: str, headers: dict[str, str], body: bytes
) -> tuple[float, int]:
    """Milliseconds to the last `data:` event of one stream, and how many events came."""
    started = time.perf_counter()
    last, events = started, 0
    async with client.stream("POST", url, content=body, headers=headers) as response:
        if response.status_code != 200:
            raise ValueError(f"HTTP {response.status_code}")
        async for line in response.aiter_lines():
            if line.startswith("data:"):
                last, events = time.perf_counter(), events + 1
                if '"error"' in line:
                    raise ValueError(f"error event: {line[:200]}")
    return (last - started) * 1000, events


async def measure_streams(
    endpoints: dict[str, Target], body: bytes, *, count: int
) -> dict[str, StreamRun]:
    """`count` streams, one after the other, to each target, taking them in turn."""
    runs = {name: StreamRun([], 0, 0) for name in endpoints}
    async with httpx.AsyncClient(timeout=REQUEST_TIMEOUT) as client:
        deadline = time.monotonic() + LEVEL_SECONDS
        for index in range(count + 3):  # three warm-up streams, not counted
            if time.monotonic() > deadline:
                break
            for name, target in endpoints.items():
                run = runs[name]
                cpu_before = target.server.cpu_seconds()
                try:
                    milliseconds, events = await stream_once(
                        client, target.url, target.headers, body
                    )
                except (httpx.HTTPError, ValueError) as error:
                    run.errors += 1
                    run.first_error = run.first_error or f"{type(error).__name__}: {error}"
                    continue
                if index >= 3:
                    run.last_event_ms.append(milliseconds)
                    run.events = events
                    run.server_cpu += target.server.cpu_seconds() - cpu_before
    return runs


def request_body(method: str) -> bytes:
    """One JSON-RPC 1.0 request, encoded once and sent as is every time."""
    message = {
        "messageId": "bench-message-1",
        "role": "ROLE_USER",
        "parts": [{"text": MESSAGE_TEXT}],
    }
    return json.dumps(
        {"jsonrpc": "2.0", "id": 1, "method": method, "params": {"message": message}}
    ).encode()


# --- report -----------------------------------------------------------------------------


def print_level(concurrency: int, runs: dict[str, Run]) -> None:
    print(f"\nconcurrency {concurrency}")
    print(
        f"  {'target':<7} {'requests':>8} {'req/s':>8} {'p50':>9} {'p99':>9} {'errors':>6} "
        f"{'server CPU/req':>15} {'echo agent CPU/req':>19}"
    )
    for name, run in runs.items():
        note = "  (cut short at the time limit)" if run.cut_short else ""
        print(
            f"  {name:<7} {run.requests:>8} {run.per_second:>8.0f} {run.p50:>7.2f}ms "
            f"{run.p99:>7.2f}ms {run.errors:>6} {run.cpu_ms(run.server_cpu):>13.2f}ms "
            f"{run.cpu_ms(run.agent_cpu):>17.2f}ms{note}"
        )
        if run.first_error:
            print(f"          first error: {run.first_error}")
    relay, proxy = runs["relay"], runs["proxy"]
    cpu_ratio = relay.cpu_ms(relay.server_cpu) / proxy.cpu_ms(proxy.server_cpu)
    print(
        f"  relay/proxy: CPU per request {cpu_ratio:.2f}x, "
        f"throughput {relay.per_second / proxy.per_second:.0%}, "
        f"p50 {relay.p50 / proxy.p50:.2f}x",
        flush=True,
    )


def verdict(label: str, passed: bool, figure: str) -> None:
    print(f"  {'PASS' if passed else 'MISS'}  {label}: {figure}")


def cpu_per_request(runs: list[Run], *, agent: bool = False) -> float:
    """Milliseconds of CPU per request over `runs`: the server's, or the echo agent's."""
    seconds = sum(r.agent_cpu if agent else r.server_cpu for r in runs)
    return seconds / sum(r.requests for r in runs) * 1000


def print_summary(
    levels: dict[int, dict[str, Run]], streams: dict[str, dict[str, StreamRun]]
) -> None:
    print("\nstreaming, one at a time: time to last event, and server CPU per stream")
    print(
        f"  {'stream':<10} {'streams':>7} {'direct p50':>11} {'relay p50':>11} {'added':>9} "
        f"{'ratio':>6} {'agent CPU':>10} {'daphne CPU':>11} {'events d/r':>11} {'errors d/r':>11}"
    )
    for name, by_target in streams.items():
        direct, relay = by_target["direct"], by_target["relay"]
        print(
            f"  {name:<10} {len(relay.last_event_ms):>7} {direct.p50:>9.2f}ms {relay.p50:>9.2f}ms "
            f"{relay.p50 - direct.p50:>7.2f}ms {relay.p50 / direct.p50:>5.2f}x "
            f"{direct.cpu_ms:>8.2f}ms {relay.cpu_ms:>9.2f}ms "
            f"{direct.events:>5}/{relay.events:<5} {direct.errors:>5}/{relay.errors:<5}"
        )
        for target, run in by_target.items():
            if run.first_error:
                print(f"  {target} first error: {run.first_error}")

    every = {name: [levels[c][name] for c in levels] for name in ("direct", "proxy", "relay")}
    relay_cpu, proxy_cpu = cpu_per_request(every["relay"]), cpu_per_request(every["proxy"])
    one = levels[1]
    proxy_added = one["proxy"].p50 - one["direct"].p50
    relay_added = one["relay"].p50 - one["direct"].p50
    added_ratio = relay_added / proxy_added if proxy_added > 0 else float("inf")
    throughput = levels[8]["relay"].per_second / levels[8]["proxy"].per_second
    errors = {name: levels[32][name].errors for name in every}
    print("\nrelay against proxy (all levels for CPU)")
    print(
        f"  CPU per request: relay {relay_cpu:.2f} ms (daphne), proxy {proxy_cpu:.2f} ms, "
        f"ratio {relay_cpu / proxy_cpu:.2f}x; the echo agent behind them: "
        f"{cpu_per_request(every['relay'], agent=True):.2f} ms and "
        f"{cpu_per_request(every['proxy'], agent=True):.2f} ms"
    )
    print(
        f"  added p50 at c=1: relay {relay_added:.2f} ms, proxy {proxy_added:.2f} ms, "
        f"ratio {added_ratio:.2f}x"
    )
    print(
        f"  throughput at c=8: relay {levels[8]['relay'].per_second:.0f}/s, proxy "
        f"{levels[8]['proxy'].per_second:.0f}/s, ratio {throughput:.0%}"
    )
    print("  errors at c=32: " + ", ".join(f"{name} {count}" for name, count in errors.items()))
    print("\nverdict")
    verdict(
        "relay CPU per request <= 3x proxy's",
        relay_cpu <= 3 * proxy_cpu,
        f"{relay_cpu / proxy_cpu:.2f}x",
    )
    verdict("relay added p50 at c=1 <= 3x proxy's", added_ratio <= 3, f"{added_ratio:.2f}x")
    verdict("relay throughput at c=8 >= 50% of proxy's", throughput >= 0.5, f"{throughput:.0%}")
    verdict("zero relay errors at c=32", errors["relay"] == 0, f"{errors['relay']} errors")


def load_average() -> str:
    """The machine's 1-minute load against its cores: other work there skews the figures."""
    return f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores"


# --- main ------------------------------------------------------------------------------


async def bench(
    targets: dict[str, Target],
    agent: Process,
    streamers: dict[str, tuple[Target, Target]],
    counts: dict[int, int],
    stream_counts: list[int],
) -> None:
    body = request_body("SendMessage")
    levels: dict[int, dict[str, Run]] = {}
    for concurrency in CONCURRENCY:
        levels[concurrency] = await measure_level(
            targets, agent, body, count=counts[concurrency], concurrency=concurrency
        )
        print_level(concurrency, levels[concurrency])

    stream_body = request_body("SendStreamingMessage")
    streams: dict[str, dict[str, StreamRun]] = {}
    for (name, (direct, relay)), count in zip(streamers.items(), stream_counts, strict=True):
        endpoints = {"direct": direct, "relay": relay}
        streams[name] = await measure_streams(endpoints, stream_body, count=count)
    print_summary(levels, streams)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--requests",
        type=int,
        nargs=3,
        default=[400, 1500, 1500],
        metavar=("C1", "C8", "C32"),
        help="Timed requests per level.",
    )
    parser.add_argument(
        "--streams",
        type=int,
        nargs=2,
        default=[100, 30],
        metavar=("ONE", "FIFTY"),
        help="Timed streams of each kind.",
    )
    parser.add_argument("--serve", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        role, *rest = args.serve
        if role == "agent":
            serve_agent(rest[0], int(rest[1]))
        else:
            serve_proxy(int(rest[0]), rest[1])
        return

    started = time.monotonic()
    var_dir = tempfile.mkdtemp(prefix="relay-gateway-bench-")
    logs = Path(var_dir)
    env = relay_env(var_dir)
    echo_port, stream_port, proxy_port, relay_port = (free_port() for _ in range(4))
    echo_url, stream_url = f"http://127.0.0.1:{echo_port}", f"http://127.0.0.1:{stream_port}"
    proxy_url, relay_url = f"http://127.0.0.1:{proxy_port}", f"http://127.0.0.1:{relay_port}"
    script = str(Path(__file__).resolve())

    manage(env, "migrate", "--verbosity=0")
    key = manage(env, "create_api_key", "gateway-bench").strip().splitlines()[-1]
    with ExitStack() as stack:
        agent = stack.enter_context(
            process("echo", [script, "--serve", "agent", "echo", str(echo_port)], env, logs)
        )
        streamer = stack.enter_context(
            process("chunks", [script, "--serve", "agent", "chunks", str(stream_port)], env, logs)
        )
        proxy = stack.enter_context(
            process(
                "proxy", [script, "--serve", "proxy", str(proxy_port), f"{echo_url}/"], env, logs
            )
        )
        daphne = ["-m", "daphne", "-b", "127.0.0.1", "-p", str(relay_port)]
        relay = stack.enter_context(
            process("daphne", [*daphne, "relay_project.asgi:application"], env, logs)
        )
        wait_until_answers(agent, f"{echo_url}/.well-known/agent-card.json")
        wait_until_answers(streamer, f"{stream_url}/.well-known/agent-card.json")
        wait_until_answers(proxy, f"{proxy_url}/")
        wait_until_answers(relay, f"{relay_url}/a2a/registry")
        register(relay_url, key, "echo", echo_url)
        register(relay_url, key, "chunks", stream_url)
        print(
            f"pids: echo {agent.pid}, chunks {streamer.pid}, proxy {proxy.pid}, "
            f"daphne {relay.pid}; relay data in {var_dir}; {load_average()}",
            flush=True,
        )

        plain = {"Content-Type": "application/json", "A2A-Version": "1.0"}
        relay_headers = {**plain, "Authorization": f"Bearer {key}"}
        targets = {
            "direct": Target("direct", f"{echo_url}/", agent, plain),
            "proxy": Target("proxy", f"{proxy_url}/", proxy, plain),
            "relay": Target("relay", f"{relay_url}/a2a/agents/echo/", relay, relay_headers),
        }
        sse = {"Accept": "text/event-stream"}
        streamers = {
            "one event": (
                Target("direct", f"{echo_url}/", agent, {**plain, **sse}),
                Target("relay", f"{relay_url}/a2a/agents/echo/", relay, {**relay_headers, **sse}),
            ),
            f"{STREAM_CHUNKS} chunks": (
                Target("direct", f"{stream_url}/", streamer, {**plain, **sse}),
                Target("relay", f"{relay_url}/a2a/agents/chunks/", relay, {**relay_headers, **sse}),
            ),
        }
        counts = dict(zip(CONCURRENCY, args.requests, strict=True))
        asyncio.run(bench(targets, agent, streamers, counts, args.streams))
    print(f"\nfinished in {time.monotonic() - started:.0f} s; {load_average()}")


if __name__ == "__main__":
    main()
