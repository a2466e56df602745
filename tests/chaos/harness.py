"""The production shape of the relay, for real, with its failures at the test's command.

    with chaos_cluster(var_dir) as cluster:
        cluster.a, cluster.b            # two daphne relays (tests.live.LiveRelay), one database
        cluster.agents["paced"]         # the agents' own URLs (tests.chaos.agents)
        cluster.kill(cluster.a)         # kill -9 of one relay process; returns its pid
        cluster.redis.stop(); cluster.redis.start()   # the same port, an empty Redis
        cluster.ensure_running()        # restarts whatever a test killed or stopped

What runs, each a process of its own, every one stopped when the block ends (even when a test
fails), each with its log under ``var_dir``:

- a private ``redis-server`` on a free port (no persistence: a restart comes back empty);
- a fresh PostgreSQL database ``chaos_<random>``, migrated, dropped at the end;
- two daphne relay processes (``tests.live.start_daphne``) on that database and that Redis;
- a Celery worker and Celery beat (the health sweep and the task expiry run on their schedules);
- the agents of ``tests.chaos.agents`` (``python -m tests.chaos.agents``), registered with the
  relay through ``POST /a2a/registry``; killing a relay never touches them.

The relay processes get ``CHAOS_ENV`` (see there: short limits where the defaults would make a
test slow, and no per-key limits, as the suite's load comes from one key).

Below the cluster, a raw A2A client (JSON-RPC 1.0 over httpx, SSE read frame by frame with the
time each frame was read) for the tests that need exact frames.
"""

from __future__ import annotations

import fcntl
import json
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import AbstractContextManager, ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from tests import commands, live
from tests.live import (
    ROOT,
    LiveRelay,
    RelayFailedError,
    ServiceMissingError,
    free_port,
    migrate_with_keys,
    postgres_database,
    relay_env,
    start_daphne,
    stop_process,
    wait_for,
)

REDIS_SERVER = shutil.which("redis-server") or "/usr/bin/redis-server"

CHAOS_ENV = {
    # A silent agent's stream ends 6 s after its headers, instead of the default 60 s: short
    # for the silence tests, long enough that 64 clients on a busy machine never reach it.
    "RELAY_STREAM_FIRST_EVENT_SECONDS": "6",
    # The longest silence between two stream events: 20 s instead of 600 s (the pausing
    # agent's 8 s stays well inside it).
    "RELAY_STREAM_IDLE_SECONDS": "20",
    # The default, said out loud: a dead process's exchanges are taken over after 10 s.
    "RELAY_EXCHANGE_LEASE_SECONDS": "10",
    # How often a relay process checks its Redis connections: 1 s, so the suite's pause after
    # a Redis restart (REDIS_RECOVERY_SECONDS in the tests) stays short.
    "RELAY_REDIS_HEALTH_CHECK_SECONDS": "1",
    # The suite's load comes from one key: no per-key call or stream limit may refuse it.
    "RELAY_RATE_LIMIT_PER_KEY": str(10**9),
    "RELAY_MAX_STREAMS_PER_KEY": "0",
}
"""What the relay processes run with, on top of ``tests.live.relay_env``."""

AGENT_IDS = ("paced", "pausing", "cancels", "silent", "unfinished")
LOG_TAIL_BYTES = 4000


def log_tail(path: Path, size: int = LOG_TAIL_BYTES) -> str:
    try:
        return path.read_text(errors="replace")[-size:]
    except OSError:
        return ""


@dataclass
class Service:
    """A background process with its log file; stopped with SIGTERM, then SIGKILL."""

    name: str
    command: list[str]
    env: dict[str, str]
    log: Path
    process: subprocess.Popen | commands.Child | None = None

    def start(self) -> None:
        if self.command[0] == sys.executable:
            # A Python process (Celery, the agents) forks from the server the relays fork from.
            arguments = tuple(self.command[1:])
            self.process = commands.start(self.env, arguments, stdout=self.log, stderr=self.log)
            return
        with self.log.open("ab") as sink:
            self.process = subprocess.Popen(
                self.command, cwd=ROOT, env=self.env, stdout=sink, stderr=subprocess.STDOUT
            )

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def stop(self) -> None:
        stop_process(self.process)

    def check_alive(self) -> None:
        if not self.running:
            code = None if self.process is None else self.process.returncode
            raise RelayFailedError(f"{self.name} exited ({code}):\n{log_tail(self.log)}")


class RedisServer(Service):
    """A private redis-server on one port for its whole life: ``stop`` and ``start`` again
    bring it back on the same port, empty (no snapshot, no append-only file)."""

    def __init__(self, directory: Path) -> None:
        self.port = free_port()
        super().__init__(
            name=f"redis-server :{self.port}",
            command=[
                REDIS_SERVER,
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                str(directory),
                "--protected-mode",
                "no",
            ],
            env={},
            log=directory / f"redis-{self.port}.log",
        )

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        super().start()
        wait_for(self.answers, f"redis-server answering on port {self.port}", timeout=10)

    def answers(self) -> bool:
        import redis

        self.check_alive()
        try:
            return redis.Redis.from_url(self.url, socket_connect_timeout=0.5).ping()
        except redis.RedisError:
            return False


@dataclass
class ChaosCluster:
    env: dict[str, str]
    var_dir: Path
    key: str
    database_url: str
    redis: RedisServer
    relays: list[LiveRelay]
    services: list[Service]
    agents: dict[str, str] = field(default_factory=dict)

    @property
    def a(self) -> LiveRelay:
        return self.relays[0]

    @property
    def b(self) -> LiveRelay:
        return self.relays[1]

    def kill(self, relay: LiveRelay) -> int:
        """``kill -9`` of one relay process; returns its pid. ``ensure_running`` starts
        another in its place (on another port)."""
        pid = relay.daphne.pid
        relay.daphne.kill()
        return pid

    def ensure_running(self) -> None:
        """Brings the cluster back to full strength: Redis up, both relays answering (a dead
        one replaced by a new process), the worker, beat and the agents alive."""
        if not self.redis.running:
            self.redis.start()
        for index, relay in enumerate(self.relays):
            if relay.daphne.process.poll() is not None:
                self.relays[index] = LiveRelay(
                    env=self.env,
                    var_dir=self.var_dir,
                    keys=(self.key,),
                    daphne=start_daphne(self.env, self.var_dir),
                )
        for service in self.services:
            service.check_alive()

    def log_tails(self) -> str:
        """The end of every log: relays (dead ones too), worker, beat, agents, Redis."""
        parts = []
        for log in sorted(self.var_dir.glob("daphne-*.log")):
            parts.append(f"--- {log.name}\n{log_tail(log)}")
        for service in [*self.services, self.redis]:
            parts.append(f"--- {service.name} ({service.log.name})\n{log_tail(service.log)}")
        return "\n".join(parts)

    def query(self, sql: str, params: Any = None) -> list[tuple]:
        """Rows of one SQL statement on the relay's database (a connection of its own)."""
        import psycopg

        with psycopg.connect(self.database_url, autocommit=True, connect_timeout=5) as db:
            return db.execute(sql, params).fetchall()

    def open_tasks(self, task_ids: list[str]) -> list[tuple[str, str]]:
        """(id, state) of those tasks still ``submitted`` or ``working`` in the database."""
        if not task_ids:
            return []
        return self.query(
            "select id, state from tasks_app_task where id = any(%s) "
            "and state in ('submitted', 'working') order by id",
            [task_ids],
        )

    def task_states(self, task_ids: list[str]) -> dict[str, str]:
        if not task_ids:
            return {}
        return dict(
            self.query("select id, state from tasks_app_task where id = any(%s)", [task_ids])
        )

    def cancels_received(self) -> list[str]:
        """The agent task ids the cancel-recording agent got a cancel for."""
        return httpx.get(f"{self.agents['cancels']}/cancels", timeout=5).json()["cancels"]


def start_agents(var_dir: Path, env: dict[str, str]) -> tuple[Service, dict[str, str]]:
    urls_file = var_dir / "agents.json"
    urls_file.unlink(missing_ok=True)
    service = Service(
        "agents",
        [sys.executable, "-m", "tests.chaos.agents", str(urls_file)],
        env,
        var_dir / "agents.log",
    )
    service.start()

    def listening() -> bool:
        service.check_alive()
        return urls_file.exists()

    wait_for(listening, "the chaos agents listening", timeout=30)
    return service, json.loads(urls_file.read_text())


@contextmanager
def chaos_cluster(
    var_dir: Path, database: AbstractContextManager | None = None, **extra_env: str
) -> Iterator[ChaosCluster]:
    """Everything in the module docstring, started in ``var_dir``; ``extra_env`` goes to the
    relay processes on top of CHAOS_ENV. ``database`` yields (name, URL) of the database to
    use instead of a new one on the shared server (tests.chaos.postgres: a cluster the test
    may restart). Raises ServiceMissingError when PostgreSQL or redis-server is absent (the
    caller skips)."""
    if not Path(REDIS_SERVER).exists():
        raise ServiceMissingError(f"redis-server is not installed (looked for {REDIS_SERVER})")
    var_dir.mkdir(parents=True, exist_ok=True)
    with ExitStack() as stack:
        starting = stack.enter_context(_one_start_at_a_time())
        name, database_url = stack.enter_context(database or postgres_database("chaos"))
        redis = RedisServer(var_dir)
        stack.callback(redis.stop)
        redis.start()
        env = relay_env(
            var_dir,
            DATABASE_URL=database_url,
            REDIS_URL=redis.url,
            RELAY_CHANNEL_PREFIX=name,
            **{**CHAOS_ENV, **extra_env},
        )
        (key,) = migrate_with_keys(env, ("chaos",))

        services: list[Service] = []
        agents, urls = start_agents(var_dir, relay_env(var_dir))
        services.append(agents)
        stack.callback(agents.stop)
        celery = [sys.executable, "-m", "celery", "-A", "relay_project"]
        for service in (
            Service(
                "celery worker",
                [*celery, "worker", "--loglevel=WARNING", "--pool=solo", "--concurrency=1"],
                env,
                var_dir / "celery-worker.log",
            ),
            Service(
                "celery beat",
                [
                    *celery,
                    "beat",
                    "--loglevel=WARNING",
                    f"--schedule={var_dir / 'celerybeat-schedule'}",
                ],
                env,
                var_dir / "celery-beat.log",
            ),
        ):
            stack.callback(service.stop)
            service.start()
            services.append(service)

        relays: list[LiveRelay] = []
        cluster = ChaosCluster(
            env=env,
            var_dir=var_dir,
            key=key,
            database_url=database_url,
            redis=redis,
            relays=relays,
            services=services,
            agents=urls,
        )
        stack.callback(lambda: [relay.stop() for relay in cluster.relays])
        for _ in range(2):
            relays.append(
                LiveRelay(env=env, var_dir=var_dir, keys=(key,), daphne=start_daphne(env, var_dir))
            )
        for agent_id in AGENT_IDS:
            cluster.a.register(urls[agent_id], agent_id)
        starting.close()
        yield cluster


def _one_start_at_a_time():
    """An open file holding the run's lock on starting a cluster (``make test`` runs the two
    chaos modules side by side): ten processes starting Django at once on two cores would
    leave a relay unanswered past its start timeout. Closing the file releases the lock;
    outside a test run (no ``TEMPLATE_HOME``) it locks a file of its own."""
    home = live.TEMPLATE_HOME or Path(tempfile.mkdtemp())
    home.mkdir(parents=True, exist_ok=True)
    lock = (home / "chaos-cluster-start.lock").open("w")
    fcntl.flock(lock, fcntl.LOCK_EX)
    return lock


# --- a raw A2A client ---------------------------------------------------------------------


def a2a_url(relay: LiveRelay, agent_id: str) -> str:
    return relay.agent_url(agent_id)


def rpc_body(method: str, params: dict[str, Any], call_id: int | str = 1) -> str:
    return json.dumps({"jsonrpc": "2.0", "id": call_id, "method": method, "params": params})


def headers(key: str) -> dict[str, str]:
    return {
        "Content-Type": "application/json",
        "A2A-Version": "1.0",
        "Authorization": f"Bearer {key}",
    }


def user_message(text: str, **fields: Any) -> dict[str, Any]:
    import uuid

    return {
        "messageId": f"m-{uuid.uuid4().hex[:12]}",
        "role": "ROLE_USER",
        "parts": [{"text": text}],
        **fields,
    }


@dataclass
class Answer:
    """One JSON-RPC call's answer: HTTP status, the parsed body (None when it was not JSON),
    the raw text and how long it took."""

    status: int
    body: Any
    text: str
    seconds: float

    @property
    def result(self) -> Any:
        return self.body.get("result") if isinstance(self.body, dict) else None

    @property
    def error(self) -> Any:
        return self.body.get("error") if isinstance(self.body, dict) else None


async def call(
    http: httpx.AsyncClient,
    relay: LiveRelay,
    agent_id: str,
    method: str,
    params: dict[str, Any],
    key: str,
) -> Answer:
    started = time.monotonic()
    response = await http.post(
        a2a_url(relay, agent_id), content=rpc_body(method, params), headers=headers(key)
    )
    try:
        body = response.json()
    except ValueError:
        body = None
    return Answer(response.status_code, body, response.text[:2000], time.monotonic() - started)


@dataclass(frozen=True)
class Frame:
    """One SSE ``data:`` frame: when it was read (time.time()) and its JSON."""

    read_at: float
    data: Any

    @property
    def event(self) -> dict[str, Any]:
        """The StreamResponse (``result``), or {} for an error frame."""
        return (self.data.get("result") or {}) if isinstance(self.data, dict) else {}


class StreamRefused(Exception):
    """A streaming call answered something other than 200 text/event-stream."""

    def __init__(self, status: int, text: str) -> None:
        super().__init__(f"HTTP {status}: {text[:500]}")
        self.status = status
        self.text = text


async def frames(
    http: httpx.AsyncClient,
    relay: LiveRelay,
    agent_id: str,
    method: str,
    params: dict[str, Any],
    key: str,
) -> AsyncIterator[Frame]:
    """The frames of a streaming call as they are read. Raises StreamRefused when the answer
    is not an event stream (a JSON error before the stream started, say), and whatever httpx
    raises when the connection breaks."""
    async with http.stream(
        "POST", a2a_url(relay, agent_id), content=rpc_body(method, params), headers=headers(key)
    ) as response:
        if response.status_code != 200 or not response.headers.get("content-type", "").startswith(
            "text/event-stream"
        ):
            await response.aread()
            raise StreamRefused(response.status_code, response.text)
        async for line in response.aiter_lines():
            if line.startswith("data:"):
                yield Frame(time.time(), json.loads(line[len("data:") :].strip()))


# --- reading StreamResponses --------------------------------------------------------------

FINAL_STATES = {
    "TASK_STATE_COMPLETED",
    "TASK_STATE_FAILED",
    "TASK_STATE_CANCELED",
    "TASK_STATE_REJECTED",
    "TASK_STATE_INPUT_REQUIRED",
    "TASK_STATE_AUTH_REQUIRED",
}
OPEN_DB_STATES = ("submitted", "working")


def state_of(event: dict[str, Any]) -> str | None:
    """The task state a StreamResponse carries (a task snapshot or a status update)."""
    for kind in ("task", "statusUpdate"):
        if kind in event:
            return event[kind].get("status", {}).get("state")
    return None


def status_text(event: dict[str, Any]) -> str:
    for kind in ("task", "statusUpdate"):
        if kind in event:
            message = event[kind].get("status", {}).get("message") or {}
            return " ".join(part.get("text", "") for part in message.get("parts", []))
    return ""


def sequence_of(artifact: dict[str, Any]) -> int | None:
    """The paced agent's sequence number of an artifact (``chunk-<i>``), None for others."""
    artifact_id = artifact.get("artifactId", "")
    if artifact_id.startswith("chunk-"):
        return int(artifact_id[len("chunk-") :])
    return None


def event_sequence(event: dict[str, Any]) -> int | None:
    if "artifactUpdate" in event:
        return sequence_of(event["artifactUpdate"].get("artifact", {}))
    return None


def snapshot_sequences(task: dict[str, Any]) -> list[int]:
    """The paced agent's sequence numbers among a task snapshot's artifacts, in order."""
    found = [sequence_of(artifact) for artifact in task.get("artifacts", [])]
    return [sequence for sequence in found if sequence is not None]
