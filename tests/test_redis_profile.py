"""The production profile's use of Redis, against real processes: one daphne on PostgreSQL and
a redis-server of this module's own (on a free port, without persistence), which the tests
stop and start again.

- Steady load opens no Redis connections: the cache shares one pool per process.
- Redis stopped: a call is refused at once with the relay's 503 protocol error, nothing is
  stored, and the relay's log says why in one WARNING line.
- Redis started again on the same port: every call succeeds, whether it comes at once (the
  stale pooled connections fail once and are retried on fresh ones) or after a pause longer
  than RELAY_REDIS_HEALTH_CHECK_SECONDS (the health check finds them stale first).

The tests run in file order and share the relay. Skipped, saying why, without PostgreSQL or
redis-server.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
import uuid
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from routing.demo.agents import ECHO, build_agent_app
from tests.live import (
    CALL_SECONDS,
    LiveRelay,
    ServiceMissingError,
    free_port,
    live_relay,
    production_services,
    stop_process,
    wait_for,
)

pytestmark = pytest.mark.production

CALLS = 200
WARM_UP_CALLS = 20
HEALTH_CHECK_SECONDS = 1
REFUSED_WITHIN_SECONDS = 1.5
REDIS_SERVER = shutil.which("redis-server") or "/usr/bin/redis-server"


@dataclass
class RedisServer:
    """A redis-server of the test's own, which it may stop and start again on the same port."""

    port: int
    directory: Path
    process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def client(self):
        import redis

        return redis.Redis(port=self.port, socket_connect_timeout=1, socket_timeout=5)

    def start(self) -> None:
        log = (self.directory / "redis.log").open("ab")
        self.process = subprocess.Popen(
            [
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
                str(self.directory),
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        log.close()

        def answering() -> bool:
            import redis

            if self.process.poll() is not None:
                raise RuntimeError(f"redis-server exited with {self.process.returncode}")
            try:
                return bool(self.client().ping())
            except redis.RedisError:
                return False

        wait_for(answering, f"redis-server answering on port {self.port}", timeout=10)

    def stop(self) -> None:
        stop_process(self.process)

    def connections_received(self, client) -> int:
        return int(client.info("stats")["total_connections_received"])


@contextmanager
def redis_server(directory: Path):
    if not Path(REDIS_SERVER).exists():
        pytest.skip(f"no redis-server at {REDIS_SERVER}")
    server = RedisServer(free_port(), directory)
    try:
        server.start()
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def redis(tmp_path_factory):
    with redis_server(tmp_path_factory.mktemp("redis")) as server:
        yield server


@pytest.fixture(scope="module")
def relay(redis, tmp_path_factory):
    """One daphne of the production profile on this module's Redis, with the echo agent."""
    with ExitStack() as stack:
        try:
            services = stack.enter_context(production_services(redis.url))
        except ServiceMissingError as error:
            pytest.skip(str(error))
        live = stack.enter_context(
            live_relay(
                tmp_path_factory.mktemp("relay-redis"),
                **services,
                RELAY_REDIS_HEALTH_CHECK_SECONDS=str(HEALTH_CHECK_SECONDS),
                # Counted (admission writes the count to Redis on every call), never reached.
                RELAY_RATE_LIMIT_PER_KEY="1000000",
            )
        )
        live.serve_agent("echo", lambda url: build_agent_app(ECHO, base_url=url))
        yield live


@pytest.fixture(scope="module")
def http():
    with httpx.Client(timeout=CALL_SECONDS) as client:
        yield client


def send(http: httpx.Client, relay: LiveRelay, text: str = "hello") -> httpx.Response:
    """A JSON-RPC 1.0 SendMessage to the echo agent through the relay."""
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "SendMessage",
        "params": {
            "message": {
                "messageId": f"m-{uuid.uuid4().hex[:12]}",
                "role": "ROLE_USER",
                "parts": [{"text": text}],
            }
        },
    }
    return http.post(
        relay.agent_url("echo"),
        content=json.dumps(body),
        headers={"Content-Type": "application/json", "A2A-Version": "1.0", **relay.auth()},
    )


def failed_calls(http: httpx.Client, relay: LiveRelay, count: int) -> list[str]:
    """Sends ``count`` calls one after the other; returns how each one that failed failed."""
    failures = []
    for index in range(count):
        response = send(http, relay, f"call {index}")
        if response.status_code != 200 or "result" not in response.json():
            failures.append(f"call {index}: {response.status_code} {response.text[:300]}")
    return failures


def task_states(relay: LiveRelay) -> dict[str, int]:
    import psycopg

    with psycopg.connect(relay.env["DATABASE_URL"], connect_timeout=3) as connection:
        rows = connection.execute(
            "SELECT state, count(*) FROM tasks_app_task GROUP BY state"
        ).fetchall()
    return dict(rows)


def test_steady_calls_open_no_new_redis_connections(relay, redis, http):
    assert failed_calls(http, relay, WARM_UP_CALLS) == []
    watcher = redis.client()
    before = redis.connections_received(watcher)
    assert failed_calls(http, relay, CALLS) == []
    assert redis.connections_received(watcher) == before
    # The relay's connections: the cache's one pool, and the channel layer's.
    relay_clients = [c for c in watcher.client_list() if c["id"] != str(watcher.client_id())]
    assert 1 <= len(relay_clients) <= 3, relay_clients


def test_with_redis_stopped_a_call_is_refused_at_once_and_stores_nothing(relay, redis, http):
    states_before = task_states(relay)
    redis.stop()
    started = time.monotonic()
    response = send(http, relay)
    assert time.monotonic() - started < REFUSED_WITHIN_SECONDS
    assert response.status_code == 503, response.text
    error = response.json()["error"]
    assert error["code"] == -31503
    assert "the relay's Redis is unreachable" in error["message"]
    assert error["data"][0]["reason"] == "UNAVAILABLE"

    registering = http.post(
        f"{relay.url}/a2a/registry", json={"url": "http://127.0.0.1:9/"}, headers=relay.auth()
    )
    assert registering.status_code == 503
    assert registering.json()["error"]["code"] == "unavailable"

    assert task_states(relay) == states_before
    assert "submitted" not in task_states(relay)
    log = relay.daphne.log_tail(20_000)
    assert (
        "WARNING tasks_app.api.calls: refused an A2A call to agent 'echo': the relay's "
        "Redis is unreachable" in log
    )
    assert "Traceback" not in log


def test_after_redis_restarts_every_call_succeeds(relay, redis, http):
    redis.stop()
    redis.start()  # the same port, and empty: every pooled connection of the relay is stale
    assert failed_calls(http, relay, CALLS) == []


def test_after_a_restart_and_a_pause_past_the_health_check_every_call_succeeds(relay, redis, http):
    assert failed_calls(http, relay, 5) == []
    redis.stop()
    redis.start()
    time.sleep(HEALTH_CHECK_SECONDS + 1)
    assert failed_calls(http, relay, CALLS) == []
    assert "submitted" not in task_states(relay)
