"""Both profiles for real: separate processes (migrate, daphne, a Celery worker, and beat:
inside the worker in the embedded profile, a process of its own in the production profile)
sharing only the database and the broker, exactly as they run in deployment. Beat runs the
health sweep on its schedule (created at migrate) and the worker stores what it finds.

The embedded profile needs nothing installed. The production profile runs against the
PostgreSQL and Redis on 127.0.0.1 and is skipped, saying why, where they are absent.
"""

from __future__ import annotations

import shutil
import sqlite3
import time
from contextlib import ExitStack, contextmanager

import httpx
import pytest
from starlette.applications import Starlette
from starlette.responses import JSONResponse
from starlette.routing import Route

from tests.live import (
    celery,
    free_port,
    manage,
    python_process,
    relay_env,
)
from tests.registry.test_cards import card_v1
from tests.servers import running

WAIT_SECONDS = 40


def worker(env, *, with_beat: bool = True):
    """A Celery worker; with ``with_beat`` it also runs beat (the embedded way)."""
    return celery(
        env,
        "worker",
        *(["--beat"] if with_beat else []),
        "--loglevel=WARNING",
        "--concurrency=1",
        "--pool=solo",
    )


def beat(env, schedule_dir):
    """Celery beat on its own, as the production profile runs it (django-celery-beat's database
    scheduler; its state file goes under ``schedule_dir``)."""
    return celery(
        env,
        "beat",
        "--loglevel=WARNING",
        f"--schedule={schedule_dir / 'celerybeat-schedule'}",
    )


def wait_until(condition, what: str, child=None) -> None:
    deadline = time.monotonic() + WAIT_SECONDS
    while time.monotonic() < deadline:
        if condition():
            return
        if child is not None and child.poll() is not None:
            pytest.fail(f"{what}: the process exited: {child.stderr.read()[-2000:]}")
        time.sleep(0.3)
    pytest.fail(f"{what} did not happen within {WAIT_SECONDS} s")


async def task_not_found(request) -> JSONResponse:
    """A JSON-RPC endpoint that knows no task: what the health sweep's transport probe wants."""
    call = await request.json()
    return JSONResponse(
        {
            "jsonrpc": "2.0",
            "id": call.get("id"),
            "error": {"code": -32001, "message": "Task not found"},
        }
    )


@contextmanager
def agent_site(document: dict):
    """Serves the card (read at each request, so a test may change it) and a JSON-RPC
    endpoint at ``/rpc`` that the card names; yields (None, base URL)."""

    async def card(request) -> JSONResponse:
        return JSONResponse(document)

    app = Starlette(
        routes=[
            Route("/.well-known/agent-card.json", card, methods=["GET"]),
            Route("/rpc", task_not_found, methods=["POST"]),
        ]
    )
    with running(app) as url:
        document["supportedInterfaces"] = [
            {"url": f"{url}/rpc", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}
        ]
        yield None, url


HEALTH_ENV = {"RELAY_HEALTH_SWEEP_SECONDS": "1", "RELAY_HEALTH_INTERVAL_SECONDS": "1"}


def enqueue_refresh(env, agent_id: str) -> None:
    manage(
        env,
        "shell",
        "-c",
        f"from registry.tasks import refresh_card; refresh_card.delay({agent_id!r})",
    )


def test_embedded_profile_runs_a_real_worker_with_nothing_installed(tmp_path, relay_template):
    env = relay_env(tmp_path, **HEALTH_ENV)
    document = card_v1()
    database = tmp_path / "relay.sqlite3"
    # The run's migrated database (tests.live.shared_template), not a migration of its own.
    shutil.copyfile(relay_template.database, database)

    def query(sql: str):
        with sqlite3.connect(database) as connection:
            return connection.execute(sql).fetchone()

    def snapshots() -> int:
        return query("select count(*) from registry_cardsnapshot")[0]

    with agent_site(document) as (site, url), worker(env) as celery:
        assert "Registered weather" in manage(env, "register_agent", url)
        document["version"] = "9.9.9"
        enqueue_refresh(env, "weather")
        wait_until(lambda: snapshots() == 2, "the worker refreshing the card", celery)
        # Beat starts the health sweep on its own; the worker probes and stores.
        wait_until(
            lambda: query("select health from registry_agent")[0] == "healthy",
            "beat's health sweep finding the agent healthy",
            celery,
        )
        assert (
            query("select count(*) from routing_proberesult where ok and level = 'transport'")[0]
            >= 1
        )
        # Beat may queue the next sweep at any moment; the worker takes each in turn.
        wait_until(
            lambda: not list((tmp_path / "celery" / "queue").iterdir()),
            "the worker emptying its queue",
            celery,
        )


@pytest.mark.production
def test_production_profile_on_postgresql_and_redis(tmp_path, services):
    import psycopg

    database_url = services["DATABASE_URL"]
    env = relay_env(tmp_path, **services, **HEALTH_ENV)
    port = free_port()
    document = card_v1()

    def snapshots() -> int:
        with psycopg.connect(database_url) as connection:
            return connection.execute("select count(*) from registry_cardsnapshot").fetchone()[0]

    # The database is a copy of the run's migrated template (tests.live.production_services).
    key = manage(env, "create_api_key", "profile-test").strip().splitlines()[-1]
    with ExitStack() as stack:
        site, url = stack.enter_context(agent_site(document))
        relay = stack.enter_context(
            python_process(
                env,
                "-m",
                "daphne",
                "-b",
                "127.0.0.1",
                "-p",
                str(port),
                "relay_project.asgi:application",
            )
        )
        celery = stack.enter_context(worker(env, with_beat=False))
        scheduler = stack.enter_context(beat(env, tmp_path))
        base = f"http://127.0.0.1:{port}"

        def listening() -> bool:
            try:
                return httpx.get(f"{base}/a2a/registry", timeout=1).status_code == 200
            except httpx.HTTPError:
                return False

        wait_until(listening, "daphne listening", relay)
        created = httpx.post(
            f"{base}/a2a/registry",
            json={"url": url},
            headers={"Authorization": f"Bearer {key}"},
            timeout=10,
        )
        assert created.status_code == 201, created.text
        listed = httpx.get(f"{base}/a2a/registry", params={"tag": "forecast"}).json()
        assert [agent["id"] for agent in listed["agents"]] == ["weather"]
        with psycopg.connect(database_url) as connection:
            stored = connection.execute("select id from registry_agent").fetchall()
        assert stored == [("weather",)]
        with psycopg.connect(database_url) as connection:
            leases = connection.execute(
                "select count(*) from tasks_app_relayprocess where lease_expires_at > now()"
            ).fetchone()[0]
        # The daphne process holds its lease from its start (the takeover scan runs).
        assert leases == 1

        document["version"] = "9.9.9"
        enqueue_refresh(env, "weather")
        wait_until(lambda: snapshots() == 2, "the worker refreshing the card over Redis", celery)

        def health() -> tuple:
            with psycopg.connect(database_url) as connection:
                return connection.execute(
                    "select a.health, count(p.id) from registry_agent a join "
                    "routing_proberesult p on p.agent_id = a.id and p.ok "
                    "group by a.health"
                ).fetchone() or ("", 0)

        wait_until(
            lambda: health()[0] == "healthy",
            "beat's health sweep finding the agent healthy over Redis",
            celery,
        )
        assert scheduler.poll() is None, "beat, a process of its own, is still running"
        assert health()[1] >= 2
        agent = httpx.get(f"{base}/a2a/registry/weather").json()
        assert agent["health"]["state"] == "healthy"
        assert agent["health"]["breaker"]["state"] == "closed"


PREPARED = """
from django.db import connection
from registry.models import Agent
for _ in range(6):
    list(Agent.objects.filter(pk="nobody"))
with connection.cursor() as cursor:
    cursor.execute("select count(*) from pg_prepared_statements")
    print(cursor.fetchone()[0])
"""


@pytest.mark.production
@pytest.mark.parametrize(("setting", "prepared"), [(None, 1), ("false", 0)])
def test_postgresql_prepares_a_statement_a_connection_runs_again(
    tmp_path, services, setting, prepared
):
    """The server stops parsing and planning the statements every call runs (from the fifth
    run on a connection); RELAY_DATABASE_PREPARED_STATEMENTS=false goes back to Django's
    default for poolers that cannot keep prepared statements."""
    extra = {} if setting is None else {"RELAY_DATABASE_PREPARED_STATEMENTS": setting}
    env = relay_env(tmp_path, **services, **extra)  # a copy of the run's migrated template
    assert int(manage(env, "shell", "-c", PREPARED).strip().splitlines()[-1]) == prepared


TASK_INDEXES = """
from django.db import connection
with connection.cursor() as cursor:
    cursor.execute(
        "select tablename, indexname, indexdef from pg_indexes"
        " where tablename in ('tasks_app_task', 'tasks_app_taskevent')"
    )
    for row in cursor.fetchall():
        print("|".join(row))
"""


@pytest.mark.production
def test_postgresql_writes_only_the_task_indexes_its_queries_use(tmp_path, services):
    """Every index of a task is written when it is created and again when it ends: none is
    a LIKE companion (no query matches a pattern on a task's ids), and no foreign key has
    one of its own where an index leads with it."""
    env = relay_env(tmp_path, **services)  # a copy of the run's migrated template
    found = [
        line.split("|", 2)
        for line in manage(env, "shell", "-c", TASK_INDEXES).splitlines()
        if line.count("|") >= 2
    ]
    names = {(table, name) for table, name, _ in found}
    assert not [name for _, name, definition in found if "pattern_ops" in definition]
    task = {name for table, name in names if table == "tasks_app_task"}
    assert {"task_context", "task_parent", "task_caller_time", "task_agent_created"} <= task
    # The idempotency key's unique index is partial: a send without a key writes nothing to it.
    assert "task_send_key_per_caller" in task
    # The usage records' indexes are partial: a task is in them only once it kept a record.
    usage = {"usage_at", "usage_caller_at", "usage_agent_at", "usage_target_at"}
    assert usage | {"usage_team_at", "usage_workflow_at"} <= task
    assert len(task) == 15, sorted(task)
    events = {name for table, name in names if table == "tasks_app_taskevent"}
    assert events == {"tasks_app_taskevent_pkey", "event_sequence_per_task"}
