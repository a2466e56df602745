"""A live relay for end-to-end tests: real processes (``manage.py migrate``, ``daphne``) on
127.0.0.1, upstream agents served in-process, and the official a2a-sdk client in front.

    with live_relay(tmp_dir) as relay:                    # migrate, API keys, daphne
        relay.serve_agent("echo-v1", v1_only_agent)       # runs the agent, registers it
        async with relay.client("echo-v1", "JSONRPC", "1.0") as client:
            ...
        with relay.second() as other:                     # another daphne, same database
            ...                                           # (and the same Redis with REDIS_URL)

Every wait is bounded, and every process started here is stopped when the block ends, even
when a test fails. A relay's log (both daphnes) is kept in ``<var dir>/daphne-<port>.log`` and
its tail is shown when the relay fails to start.
"""

from __future__ import annotations

import asyncio
import fcntl
import json
import os
import queue
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import ExitStack, asynccontextmanager, contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from bench.common import relay_command
from tests import commands
from tests.servers import running

ROOT = Path(__file__).resolve().parent.parent
START_SECONDS = 60.0
STOP_SECONDS = 10.0
COMMAND_SECONDS = 120.0
CALL_SECONDS = 20.0

PROTOCOLS = [("JSONRPC", "1.0"), ("HTTP+JSON", "1.0"), ("JSONRPC", "0.3"), ("HTTP+JSON", "0.3")]
"""Every binding and version the relay serves over HTTP, as (binding, version) pairs (gRPC,
1.0 only, runs as a process of its own: ``LiveRelay.grpc_server``)."""

PROTOCOL_IDS = [f"{binding}-{version}" for binding, version in PROTOCOLS]

GRPC_PROTOCOL = ("GRPC", "1.0")
"""The gRPC binding: a relay serves it with RELAY_GRPC_PORT set and ``LiveRelay.grpc_server``
running."""
ALL_PROTOCOLS = [*PROTOCOLS, GRPC_PROTOCOL]
ALL_PROTOCOL_IDS = [f"{binding}-{version}" for binding, version in ALL_PROTOCOLS]


class RelayFailedError(RuntimeError):
    """A relay process would not start, or a management command failed."""


def relay_env(var_dir: Path, **extra: str) -> dict[str, str]:
    """The environment of a relay process: this one without any relay or database setting
    (so a developer's DATABASE_URL or REDIS_URL never leaks in), its own var dir, private
    URLs allowed (the agents are on 127.0.0.1), and ``extra``."""
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("DATABASE_URL", "REDIS_URL", "DJANGO_", "RELAY_"))
    }
    env.update(
        {
            "RELAY_VAR_DIR": str(var_dir),
            "RELAY_ALLOW_PRIVATE_URLS": "true",
            "PYTHONUNBUFFERED": "1",
            "RELAY_LOG_LEVEL": "WARNING",
            **extra,
        }
    )
    return env


def manage(env: dict[str, str], *args: str) -> str:
    """Runs ``manage.py`` in a process of its own (forked from ``tests.commands``' server, which
    has the relay's packages imported already) and returns its stdout; raises RelayFailedError
    when it fails."""
    code, stdout, stderr = commands.run(env, args, timeout=COMMAND_SECONDS)
    if code != 0:
        raise RelayFailedError(f"manage.py {' '.join(args)} failed:\n{stderr[-3000:]}")
    return stdout


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


FREE_PORT = "a free port"
"""A value in a module's ``RELAY_ENV`` that becomes a port free when the relay starts: a port
chosen at import time may be taken by the time the module runs, minutes later."""


def wait_for(
    condition: Callable[[], Any],
    what: str,
    *,
    timeout: float = START_SECONDS,
    interval: float = 0.1,
) -> Any:
    """Polls ``condition`` until it returns something truthy (returned); raises TimeoutError
    naming ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} did not happen within {timeout} s")
        time.sleep(interval)


async def eventually(
    condition: Callable[[], Any], what: str, *, timeout: float = 10.0, interval: float = 0.05
) -> Any:
    """``wait_for`` for async tests: ``condition`` may be a coroutine function."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if asyncio.iscoroutine(value):
            value = await value
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} did not happen within {timeout} s")
        await asyncio.sleep(interval)


def read_stream(
    url: str, body: Any, headers: dict[str, str], *, timeout: float = CALL_SECONDS
) -> tuple[int, httpx.Headers, list[Any]]:
    """POSTs ``body`` as JSON and reads the SSE answer to its end; returns the status, the
    headers and every ``data:`` frame, parsed. The whole exchange must end within
    ``timeout`` (keep-alive comments do not extend it): TimeoutError otherwise."""

    async def read():
        headers_sent = {"Content-Type": "application/json", **headers}
        async with (
            asyncio.timeout(timeout),
            httpx.AsyncClient(timeout=timeout) as client,
            client.stream("POST", url, content=json.dumps(body), headers=headers_sent) as response,
        ):
            frames = [
                json.loads(line[len("data: ") :])
                async for line in response.aiter_lines()
                if line.startswith("data: ")
            ]
            return response.status_code, response.headers, frames

    return asyncio.run(read())


@asynccontextmanager
async def sdk_client(
    card: dict[str, Any],
    binding: str,
    version: str,
    *,
    headers: dict[str, str] | None = None,
    streaming: bool = True,
    timeout: float = CALL_SECONDS,
) -> AsyncIterator[Any]:
    """An a2a-sdk client for the agent of ``card`` (its JSON, the relay's or an agent's own),
    forced onto one binding and version: the card's other interfaces are dropped before the
    client picks one."""
    from a2a.client import ClientConfig, create_client
    from a2a.client.card_resolver import parse_agent_card

    parsed = parse_agent_card(card)
    keep = [
        interface
        for interface in parsed.supported_interfaces
        if interface.protocol_binding == binding and interface.protocol_version.startswith(version)
    ]
    if not keep:
        raise AssertionError(f"the card of {parsed.name} has no {binding} {version} interface")
    del parsed.supported_interfaces[:]
    parsed.supported_interfaces.extend(keep)
    if binding == "GRPC":
        # gRPC takes no HTTP client: ``headers`` go with every call as metadata.
        config = ClientConfig(
            grpc_channel_factory=grpc_channel_factory(headers),
            supported_protocol_bindings=[binding],
            streaming=streaming,
        )
        client = await create_client(parsed, config)
        try:
            yield client
        finally:
            await client.close()
        return
    async with httpx.AsyncClient(headers=headers or {}, timeout=timeout) as http:
        yield await create_client(
            parsed,
            ClientConfig(
                httpx_client=http, supported_protocol_bindings=[binding], streaming=streaming
            ),
        )


def grpc_channel_factory(headers: dict[str, str] | None = None) -> Callable[[str], Any]:
    """A2A's ``grpc_channel_factory``: an insecure ``grpc.aio`` channel to the host and port
    of the card's URL (``http://host:port``, or a bare ``host:port``) that sends ``headers``
    (``Authorization`` and the like) as metadata with every call."""
    from urllib.parse import urlsplit

    import grpc

    metadata = tuple((name.lower(), value) for name, value in (headers or {}).items())

    def with_metadata(details):
        return grpc.aio.ClientCallDetails(
            details.method,
            details.timeout,
            (*(details.metadata or ()), *metadata),
            details.credentials,
            details.wait_for_ready,
        )

    # A channel files each interceptor under one kind of call: one of each.
    class Unary(grpc.aio.UnaryUnaryClientInterceptor):
        async def intercept_unary_unary(self, continuation, details, request):
            return await continuation(with_metadata(details), request)

    class Streaming(grpc.aio.UnaryStreamClientInterceptor):
        async def intercept_unary_stream(self, continuation, details, request):
            return await continuation(with_metadata(details), request)

    def factory(url: str):
        interceptors = [Unary(), Streaming()] if metadata else None
        target = urlsplit(url).netloc if "://" in url else url
        return grpc.aio.insecure_channel(target, interceptors=interceptors)

    return factory


# --- an agent whose pace the test sets ----------------------------------------------------

GATE_SECONDS = 20.0
GATES: dict[str, queue.Queue] = {}


def _gated_executor():
    from a2a.types import Part

    from routing.demo.agents import TaskExecutor, text_message

    class GatedStreamer(TaskExecutor):
        """Working at once, then one artifact chunk ("story") per item the test puts in the
        gate named by the message text; completed when it puts None (failed after
        GATE_SECONDS without one)."""

        async def work(self, context, updater) -> None:
            await updater.start_work()
            gate = GATES[context.get_user_input().strip()]
            index = 0
            while (chunk := await asyncio.to_thread(gate.get, True, GATE_SECONDS)) is not None:
                await updater.add_artifact(
                    [Part(text=chunk)], artifact_id="story", name="story", append=index > 0
                )
                index += 1
            await updater.complete(text_message(updater, "Released."))

    return GatedStreamer()


def gated_spec():
    """The spec of ``gated_agent`` (to serve it otherwise, e.g. over gRPC)."""
    from tests.agents import task_spec

    return task_spec("gated", "Gated Streamer", "Streams when the test says so.", _gated_executor)


def gated_agent(base_url: str):
    """An a2a-sdk agent (both versions, streaming) that moves only when the test says so:
    send it the name of a gate from ``new_gate`` as the message text."""
    from routing.demo.agents import build_agent_app

    return build_agent_app(gated_spec(), base_url=base_url)


def gated_request(gate_name: str, *, return_immediately: bool = False):
    """An a2a-sdk SendMessageRequest for ``gated_agent``, naming a gate from ``new_gate``."""
    from a2a.types import Message, Part, Role, SendMessageConfiguration, SendMessageRequest

    return SendMessageRequest(
        message=Message(
            message_id=f"m-{uuid.uuid4().hex[:8]}",
            role=Role.ROLE_USER,
            parts=[Part(text=gate_name)],
        ),
        configuration=SendMessageConfiguration(return_immediately=return_immediately),
    )


def new_gate() -> tuple[str, queue.Queue]:
    """A gate for ``gated_agent``: (its name, the queue to put chunks and then None in)."""
    name = f"gate-{uuid.uuid4().hex[:8]}"
    GATES[name] = queue.Queue()
    return name, GATES[name]


@dataclass(frozen=True)
class SeenRequest:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


class Recording:
    """Wraps an agent (an ASGI app or a ``base_url -> app`` factory; serve it with
    ``running`` or ``LiveRelay.serve_agent``) and keeps every HTTP request it receives, raw:
    method, path, headers (lower-case names) and body."""

    def __init__(self, app) -> None:
        self.app = app
        self.requests: list[SeenRequest] = []

    def __call__(self, base_url: str):
        from routing.demo.serve import is_app_factory

        inner = self.app(base_url) if is_app_factory(self.app) else self.app

        async def recording(scope, receive, send):
            if scope["type"] != "http":
                return await inner(scope, receive, send)
            chunks = []
            while True:
                message = await receive()
                chunks.append(message.get("body", b""))
                if message["type"] != "http.request" or not message.get("more_body"):
                    break
            body = b"".join(chunks)
            headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
            self.requests.append(SeenRequest(scope["method"], scope["path"], headers, body))
            replayed = False

            async def replay():
                nonlocal replayed
                if not replayed:
                    replayed = True
                    return {"type": "http.request", "body": body, "more_body": False}
                return await receive()

            return await inner(scope, replay, send)

        return recording

    def posts(self) -> list[SeenRequest]:
        """The A2A calls (everything but card fetches)."""
        return [r for r in self.requests if r.method != "GET"]


def stop_process(process: subprocess.Popen | commands.Child | None) -> None:
    """Stops a process the tests started: SIGTERM, then SIGKILL after STOP_SECONDS."""
    if process is None or process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(STOP_SECONDS)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(STOP_SECONDS)


@contextmanager
def python_process(
    env: dict[str, str], *arguments: str, stop_seconds: float = 20.0
) -> Iterator[commands.Child]:
    """``python <arguments>`` in the repository, a process of its own with ``env`` (forked
    from ``tests.commands``' server): its output dropped, its stderr kept (``child.stderr``,
    a file to read for a failure's message). Stopped on exit: SIGTERM, then SIGKILL after
    ``stop_seconds``."""
    with tempfile.TemporaryDirectory(prefix="python-") as directory:
        stderr = Path(directory, "stderr")
        stderr.touch()
        child = commands.start(env, arguments, stdout=Path(os.devnull), stderr=stderr)
        child.stderr = stderr.open(errors="replace")
        try:
            yield child
        finally:
            child.terminate()
            try:
                child.wait(stop_seconds)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait(5)
            child.stderr.close()


def celery(env: dict[str, str], *arguments: str):
    """``celery -A relay_project <arguments>`` (a worker, beat) as ``python_process`` runs it:
    ``with celery(env, "worker", "--pool=solo") as worker: ...``."""
    return python_process(env, "-m", "celery", "-A", "relay_project", *arguments)


@dataclass
class Daphne:
    """One daphne process of a relay."""

    url: str
    process: commands.Child
    log: Path

    def log_tail(self, size: int = 3000) -> str:
        try:
            return self.log.read_text(errors="replace")[-size:]
        except OSError:
            return ""

    @property
    def pid(self) -> int:
        return self.process.pid

    def stop(self) -> None:
        stop_process(self.process)

    def kill(self) -> None:
        """``kill -9``: the process dies at once, with no chance to close anything."""
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(STOP_SECONDS)


def start_daphne(
    env: dict[str, str], var_dir: Path, *, server: str = "daphne", port: int | None = None
) -> Daphne:
    """Starts ``daphne relay_project.asgi:application`` (or, with ``server="uvicorn"``, uvicorn
    as the README's production section runs it) on ``port`` (else a free one) and returns once
    it answers HTTP. Raises RelayFailedError (with the log's tail) when it does not."""
    port = port or free_port()
    log = var_dir / f"{server}-{port}.log"
    log.write_bytes(b"")
    process = commands.start(env, tuple(relay_command(server, port)[1:]), stdout=log, stderr=log)
    daphne = Daphne(f"http://127.0.0.1:{port}", process, log)

    def answering() -> bool:
        if process.poll() is not None:
            raise RelayFailedError(
                f"{server} exited with {process.returncode}:\n{daphne.log_tail()}"
            )
        try:
            return httpx.get(f"{daphne.url}/a2a/registry", timeout=1).status_code == 200
        except httpx.HTTPError:
            return False

    try:
        wait_for(answering, f"{server} answering on port {port}")
    except (TimeoutError, RelayFailedError) as error:
        daphne.stop()
        raise RelayFailedError(f"{error}\n{daphne.log_tail()}") from error
    return daphne


@dataclass
class LiveRelay:
    """A relay running as real processes. ``url`` is its first daphne; ``keys`` are API keys
    of different callers (``key`` is the first)."""

    env: dict[str, str]
    var_dir: Path
    keys: tuple[str, ...]
    daphne: Daphne
    _stack: ExitStack = field(default_factory=ExitStack, repr=False)
    agents: dict[str, str] = field(default_factory=dict)

    @property
    def url(self) -> str:
        return self.daphne.url

    @property
    def key(self) -> str:
        return self.keys[0]

    def agent_url(self, agent_id: str, base: str | None = None) -> str:
        """The relay's A2A URL of an agent (JSON-RPC endpoint; REST lives under it)."""
        return f"{base or self.url}/a2a/agents/{agent_id}/"

    def create_key(self, name: str) -> str:
        """A new API key, through ``manage.py create_api_key``."""
        return manage(self.env, "create_api_key", name).strip().splitlines()[-1]

    def register(self, agent_url: str, agent_id: str, **fields: Any) -> dict[str, Any]:
        """Registers an agent through the relay's registry API and returns its entry."""
        response = httpx.post(
            f"{self.url}/a2a/registry",
            json={"url": agent_url, "id": agent_id, **fields},
            headers=self.auth(),
            timeout=CALL_SECONDS,
        )
        if response.status_code != 201:
            raise RelayFailedError(
                f"registering {agent_id} failed: {response.status_code} {response.text[:2000]}"
            )
        return response.json()

    def serve_agent(self, agent_id: str, app, **fields: Any) -> str:
        """Serves ``app`` (an ASGI app or a ``base_url -> app`` factory) on 127.0.0.1 until the
        relay stops, registers it as ``agent_id`` and returns the agent's own URL."""
        url = self._stack.enter_context(running(app))
        self.register(url, agent_id, **fields)
        self.agents[agent_id] = url
        return url

    def auth(self, key: str | None = None) -> dict[str, str]:
        return {"Authorization": f"Bearer {key or self.key}"}

    @contextmanager
    def second(self, *, port: int | None = None, **extra_env: str) -> Iterator[str]:
        """Another daphne of this relay (on ``port``, else a free one): the same database (and
        the same Redis when the relay runs with REDIS_URL). Yields its base URL; stopped when
        the block ends."""
        daphne = start_daphne({**self.env, **extra_env}, self.var_dir, port=port)
        try:
            yield daphne.url
        finally:
            daphne.stop()

    def card(self, agent_id: str, base: str | None = None) -> dict[str, Any]:
        response = httpx.get(
            f"{self.agent_url(agent_id, base)}.well-known/agent-card.json", timeout=CALL_SECONDS
        )
        response.raise_for_status()
        return response.json()

    @asynccontextmanager
    async def client(
        self,
        agent_id: str,
        binding: str,
        version: str,
        *,
        key: str | None = None,
        streaming: bool = True,
        base: str | None = None,
        headers: dict[str, str] | None = None,
        timeout: float = CALL_SECONDS,
    ) -> AsyncIterator[Any]:
        """An a2a-sdk client for an agent at the relay, forced onto one binding and version
        (``sdk_client`` on the relay's card, with this relay's key)."""
        async with sdk_client(
            self.card(agent_id, base),
            binding,
            version,
            headers={**self.auth(key), **(headers or {})},
            streaming=streaming,
            timeout=timeout,
        ) as client:
            yield client

    def call(
        self,
        agent_id: str,
        method: str,
        params: dict[str, Any],
        *,
        key: str | None = None,
        version: str = "1.0",
        base: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> httpx.Response:
        """A raw JSON-RPC call to an agent at the relay (for what the SDK client hides)."""
        version_header = {"A2A-Version": version} if version == "1.0" else {}
        return httpx.post(
            self.agent_url(agent_id, base),
            content=json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}),
            headers={
                "Content-Type": "application/json",
                **version_header,
                **self.auth(key),
                **(headers or {}),
            },
            timeout=CALL_SECONDS,
        )

    @contextmanager
    def grpc_server(self) -> Iterator[str]:
        """``manage.py run_grpc`` of this relay, on RELAY_GRPC_PORT of its environment (which
        its daphne lists on the cards). Yields its ``host:port`` once it accepts calls;
        stopped when the block ends."""
        # As run_relay does: the extended cards it answers name daphne's address.
        process = start_grpc({"RELAY_PUBLIC_URL": self.url, **self.env}, self.var_dir)
        try:
            yield f"127.0.0.1:{self.env['RELAY_GRPC_PORT']}"
        finally:
            stop_process(process)

    def stop(self) -> None:
        self.daphne.stop()
        self._stack.close()


def start_grpc(env: dict[str, str], var_dir: Path) -> commands.Child:
    """Starts ``manage.py run_grpc`` on RELAY_GRPC_PORT of ``env`` and returns once a gRPC
    channel to it is ready. Raises RelayFailedError (with the log's tail) when it does not."""
    import grpc

    port = env["RELAY_GRPC_PORT"]
    log = var_dir / f"grpc-{port}.log"
    log.write_bytes(b"")
    process = commands.start(env, ("manage.py", "run_grpc"), stdout=log, stderr=log)

    def tail() -> str:
        return log.read_text(errors="replace")[-3000:]

    def ready() -> bool:
        if process.poll() is not None:
            raise RelayFailedError(f"run_grpc exited with {process.returncode}:\n{tail()}")
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            try:
                grpc.channel_ready_future(channel).result(timeout=1)
            except grpc.FutureTimeoutError:
                return False
        return b"gRPC A2A server on" in log.read_bytes()

    try:
        wait_for(ready, f"the gRPC server answering on port {port}")
    except (TimeoutError, RelayFailedError) as error:
        stop_process(process)
        raise RelayFailedError(f"{error}\n{tail()}") from error
    return process


POSTGRES_ADMIN_URL = os.environ.get(
    "RELAY_TEST_POSTGRES", "postgres://postgres@127.0.0.1:5432/test"
)
REDIS_TEST_URL = os.environ.get("RELAY_TEST_REDIS", "redis://127.0.0.1:6379/9")


def named_postgres(prefix: str) -> tuple[str, str]:
    """A fresh application name starting with ``prefix``, and how to reach the machine's
    PostgreSQL under it; skips the test, saying why, when PostgreSQL is not reachable."""
    import psycopg
    import pytest

    try:
        psycopg.connect(POSTGRES_ADMIN_URL, connect_timeout=3).close()
    except psycopg.OperationalError as error:
        pytest.skip(f"PostgreSQL is not reachable at {POSTGRES_ADMIN_URL}: {error}")
    name = f"{prefix}-{uuid.uuid4().hex[:8]}"
    return name, psycopg.conninfo.make_conninfo(POSTGRES_ADMIN_URL, application_name=name)


class ServiceMissingError(RuntimeError):
    """PostgreSQL or Redis is not there; the message says which and why (for pytest.skip)."""


@contextmanager
def production_services(redis_url: str = REDIS_TEST_URL) -> Iterator[dict[str, str]]:
    """A throwaway PostgreSQL database (a copy of the run's migrated template, with its keys)
    and a private channel prefix on the test Redis (or the one at ``redis_url``), as the relay environment that uses them (DATABASE_URL, REDIS_URL,
    RELAY_CHANNEL_PREFIX). The database is dropped and the prefix's keys deleted afterwards
    (when Redis still answers); other users of the Redis db are left alone. Raises
    ServiceMissingError when either service is unreachable."""
    import redis

    client = redis.Redis.from_url(redis_url, socket_connect_timeout=3)
    try:
        client.ping()
    except redis.RedisError as error:
        raise ServiceMissingError(f"Redis is not reachable at {redis_url}: {error}") from error
    template = postgres_template()
    with postgres_database("relay_live", template=template.name) as (name, database_url):
        if template.name is not None:
            _cloned[database_url] = template.keys
        try:
            yield {
                "DATABASE_URL": database_url,
                "REDIS_URL": redis_url,
                "RELAY_CHANNEL_PREFIX": name,
            }
        finally:
            _cloned.pop(database_url, None)
            with suppress(redis.RedisError):
                for key in client.scan_iter(match=f"{name}*"):
                    client.delete(key)


@contextmanager
def gated_production_relay(var_dir: Path, **extra_env: str) -> Iterator[LiveRelay]:
    """A relay in the production profile (``production_services``) serving ``gated_agent`` as
    "gated". Raises ServiceMissingError where PostgreSQL or Redis is absent."""
    with production_services() as services, live_relay(var_dir, **extra_env, **services) as relay:
        relay.serve_agent("gated", gated_agent)
        yield relay


@contextmanager
def postgres_database(prefix: str, *, template: str | None = None) -> Iterator[tuple[str, str]]:
    """A new PostgreSQL database named ``<prefix>_<random>``, empty or a copy of the database
    ``template``: yields (its name, its URL) and drops it afterwards, closing whatever
    sessions still use it. Raises ServiceMissingError when PostgreSQL is unreachable."""
    import psycopg

    name = f"{prefix}_{uuid.uuid4().hex[:10]}"
    try:
        with psycopg.connect(POSTGRES_ADMIN_URL, autocommit=True, connect_timeout=3) as admin:
            copy = f' TEMPLATE "{template}"' if template else ""
            admin.execute(f'CREATE DATABASE "{name}"{copy}')
    except psycopg.OperationalError as error:
        raise ServiceMissingError(
            f"PostgreSQL is not reachable at {POSTGRES_ADMIN_URL}: {error}"
        ) from error
    try:
        yield name, postgres_url(name)
    finally:
        drop_postgres_database(name)


def drop_postgres_database(name: str) -> None:
    """Drops the database ``name`` on the test PostgreSQL server if it exists, closing whatever
    sessions still use it."""
    import psycopg

    with psycopg.connect(POSTGRES_ADMIN_URL, autocommit=True, connect_timeout=3) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


KEY_NAMES = ("live test", "second caller", "third caller")
"""The API keys every live relay starts with: ``relay.keys``, the first is ``relay.key``."""


@dataclass(frozen=True)
class Template:
    """An embedded database migrated once, with the keys of KEY_NAMES in it."""

    database: Path
    keys: tuple[str, ...]


TEMPLATE_SCRIPT = (
    "import json; from django.core.management import call_command; "
    "from registry.services import api_key_create; call_command('migrate', verbosity=0); "
    "print(json.dumps([api_key_create(name=name)[1] for name in {names!r}]))"
)


def migrate_with_keys(env: dict[str, str], names: tuple[str, ...] = KEY_NAMES) -> tuple[str, ...]:
    """Migrates the database of ``env`` and creates one key per name of ``names``, in one Django
    process (each start of one costs seconds); returns the keys."""
    printed = manage(env, "shell", "-c", TEMPLATE_SCRIPT.format(names=names))
    return tuple(json.loads(printed.splitlines()[-1]))


def migrated_template(directory: Path) -> Template:
    """An embedded database in ``directory``, migrated with its keys, so each relay can start
    from a copy of it instead of migrating its own."""
    directory.mkdir(parents=True, exist_ok=True)
    return Template(directory / "relay.sqlite3", migrate_with_keys(relay_env(directory)))


def postgres_url(name: str) -> str:
    """The URL of the database ``name`` on the test PostgreSQL server."""
    return POSTGRES_ADMIN_URL.rsplit("/", 1)[0] + f"/{name}"


TEMPLATE_HOME: Path | None = None
"""Where ``shared_template`` keeps the one template of a test run: a directory every
pytest-xdist worker of the run shares (``tests/conftest.py`` sets it). None: every relay
migrates a database of its own."""

_shared: Template | None = None


@dataclass(frozen=True)
class PostgresTemplate:
    """A PostgreSQL database migrated once, with the keys of KEY_NAMES in it (``name`` None:
    none, each database is migrated)."""

    name: str | None
    keys: tuple[str, ...] = ()


POSTGRES_TEMPLATE = "relay-postgres-template.json"
_postgres: PostgresTemplate | None = None
_cloned: dict[str, tuple[str, ...]] = {}
"""The keys of the databases ``production_services`` copied from the template, by URL: a
relay on one of them is not migrated again."""


def postgres_template() -> PostgresTemplate:
    """The run's migrated PostgreSQL database, built by the first process that asks and named
    in TEMPLATE_HOME (``drop_postgres_template`` drops it at the end of the run). Raises
    ServiceMissingError when PostgreSQL is unreachable."""
    global _postgres
    if TEMPLATE_HOME is None:
        return PostgresTemplate(None)
    if _postgres is None:
        import psycopg

        record = TEMPLATE_HOME / POSTGRES_TEMPLATE
        TEMPLATE_HOME.mkdir(parents=True, exist_ok=True)
        with (TEMPLATE_HOME / "relay-postgres-template.lock").open("w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not record.exists():
                name = f"relay_template_{uuid.uuid4().hex[:10]}"
                try:
                    with psycopg.connect(
                        POSTGRES_ADMIN_URL, autocommit=True, connect_timeout=3
                    ) as admin:
                        admin.execute(f'CREATE DATABASE "{name}"')
                except psycopg.OperationalError as error:
                    raise ServiceMissingError(
                        f"PostgreSQL is not reachable at {POSTGRES_ADMIN_URL}: {error}"
                    ) from error
                record.write_text(json.dumps({"name": name, "keys": None}))
                keys = migrate_with_keys(relay_env(TEMPLATE_HOME, DATABASE_URL=postgres_url(name)))
                record.write_text(json.dumps({"name": name, "keys": list(keys)}))
            built = json.loads(record.read_text())
            if built["keys"] is None:
                raise RelayFailedError(f"the PostgreSQL template {built['name']} was not migrated")
            _postgres = PostgresTemplate(built["name"], tuple(built["keys"]))
    return _postgres


def drop_postgres_template(home: Path) -> None:
    """Drops the PostgreSQL template of the run whose TEMPLATE_HOME is ``home``, if it made
    one."""
    record = home / POSTGRES_TEMPLATE
    if record.exists():
        drop_postgres_database(json.loads(record.read_text())["name"])
        record.unlink()


def shared_template() -> Template | None:
    """The template of this test run, built by the first process that asks (the others wait on
    a lock, then read its keys), or None outside a test run (no TEMPLATE_HOME)."""
    global _shared
    if _shared is None and TEMPLATE_HOME is not None:
        directory = TEMPLATE_HOME / "relay-template"
        keys = directory / "keys.json"
        TEMPLATE_HOME.mkdir(parents=True, exist_ok=True)
        with (TEMPLATE_HOME / "relay-template.lock").open("w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not keys.exists():
                built = migrated_template(directory)
                keys.write_text(json.dumps(built.keys))
            _shared = Template(directory / "relay.sqlite3", tuple(json.loads(keys.read_text())))
    return _shared


@contextmanager
def live_relay(
    var_dir: Path, *, template: Template | None = None, server: str = "daphne", **extra_env: str
) -> Iterator[LiveRelay]:
    """A relay in ``var_dir``: its database copied from ``template`` (by default the run's
    ``shared_template``), or migrated with API keys where there is none, and daphne (or ``server``) listening. ``extra_env`` goes to every process (e.g.
    RELAY_UPSTREAM_TIMEOUT, or DATABASE_URL and REDIS_URL for production, where the template
    is not used). Everything started is stopped when the block ends."""
    var_dir.mkdir(parents=True, exist_ok=True)
    env = relay_env(var_dir, **extra_env)
    database_url = extra_env.get("DATABASE_URL")
    if database_url is None:
        template = template or shared_template()
    if database_url in _cloned:
        keys = _cloned[database_url]
    elif template is not None and database_url is None:
        shutil.copyfile(template.database, var_dir / "relay.sqlite3")
        keys = template.keys
    else:
        keys = migrate_with_keys(env)
    relay = LiveRelay(
        env=env, var_dir=var_dir, keys=keys, daphne=start_daphne(env, var_dir, server=server)
    )
    try:
        yield relay
    finally:
        relay.stop()
