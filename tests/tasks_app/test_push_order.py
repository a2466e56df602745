"""Push notifications reach each webhook in the order of the task's events (issue 34, item 3),
with a real Celery worker at its default concurrency (prefork, one process per core, at least
two) taking the jobs from Redis, and a real webhook receiver on 127.0.0.1.

Before the fix every event was a job of its own and the worker's processes sent them side by
side: a receiver got a chunk before the first, or an artifact after ``completed``.
"""

from __future__ import annotations

import asyncio
import os
import random
import re
import shutil
import time
from contextlib import ExitStack

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from tests.live import celery, manage, production_services, relay_env
from tests.servers import running

pytestmark = pytest.mark.production

TASKS = 4
EVENTS = 16  # per task: 15 artifact chunks, then ``completed``
WAIT_SECONDS = 90
# A Redis database of this test's own per profile, so no other worker takes its jobs.
BROKERS = {"sqlite": "redis://127.0.0.1:6379/13", "postgresql": "redis://127.0.0.1:6379/14"}

# Runs in ``manage.py shell``: TASKS tasks, each with a push config at the receiver, and
# EVENTS events recorded on each, task after task, each its own transaction.
PRODUCER = """
from registry.services import api_key_create
from tasks_app import push, services

caller, _ = api_key_create(name="order")
tasks = []
for number in range({tasks}):
    task = services.task_open(
        caller=caller, target_kind="agent", target_id="x", agent_id=None,
        message={{"messageId": f"m{{number}}", "role": "ROLE_USER", "parts": [{{"text": "hi"}}]}},
        client_version="1.0",
    )
    push.config_create(task=task, config={{"url": "{url}/hook/" + str(number)}})
    tasks.append(task)
for task in tasks:
    for index in range({events}):
        if index == {events} - 1:
            event = services.status_event(task, "completed", f"#{{index}}#")
        else:
            event = {{"artifactUpdate": {{
                "taskId": task.pk, "contextId": task.context_id, "append": index > 0,
                "artifact": {{"artifactId": "story", "parts": [{{"text": f"#{{index}}#"}}]}},
            }}}}
        services.task_record(task=task, event=event)
"""


def receiver(arrivals: dict[str, list[int]]) -> Starlette:
    """Records, per hook, the event numbers in the order their POSTs arrive; answers after a
    short random pause, as a real receiver takes its time."""

    async def hook(request: Request) -> Response:
        body = (await request.body()).decode()
        arrivals.setdefault(request.path_params["name"], []).append(
            int(re.search(r"#(\d+)#", body).group(1))
        )
        await asyncio.sleep(random.uniform(0, 0.03))
        return Response(status_code=204)

    return Starlette(routes=[Route("/hook/{name}", hook, methods=["POST"])])


def celery_worker(env: dict[str, str]):
    """A worker as deployed: the prefork pool with one process per core, at least two."""
    return celery(
        env,
        "worker",
        "--loglevel=WARNING",
        "--pool=prefork",
        f"--concurrency={max(2, os.cpu_count() or 1)}",
    )


def out_of_order(numbers: list[int]) -> int:
    """How many arrivals came after a later event of the same hook."""
    latest, late = -1, 0
    for number in numbers:
        if number < latest:
            late += 1
        latest = max(latest, number)
    return late


def purge(broker: str) -> None:
    import redis

    client = redis.Redis.from_url(broker, socket_connect_timeout=3)
    try:
        client.flushdb()
    except redis.RedisError as error:
        pytest.skip(f"Redis is not reachable at {broker}: {error}")


@pytest.mark.parametrize("database", ["sqlite", "postgresql"])
def test_each_webhook_gets_its_task_events_in_order_from_a_parallel_worker(
    tmp_path, relay_template, database
):
    broker = BROKERS[database]
    purge(broker)
    arrivals: dict[str, list[int]] = {}
    with ExitStack() as stack:
        if database == "postgresql":
            services = stack.enter_context(production_services(broker))
        else:
            services = {"REDIS_URL": broker, "RELAY_CHANNEL_PREFIX": f"order-{os.getpid()}"}
            # The run's migrated database (tests.live.shared_template), not a migration.
            shutil.copyfile(relay_template.database, tmp_path / "relay.sqlite3")
        env = relay_env(tmp_path, **services)
        url = stack.enter_context(running(receiver(arrivals)))
        # Every job is queued before the worker starts, as after a burst.
        manage(env, "shell", "-c", PRODUCER.format(tasks=TASKS, events=EVENTS, url=url))
        worker = stack.enter_context(celery_worker(env))
        deadline = time.monotonic() + WAIT_SECONDS
        while sum(map(len, arrivals.values())) < TASKS * EVENTS:
            if worker.poll() is not None:
                pytest.fail(f"the worker exited: {worker.stderr.read()[-2000:]}")
            if time.monotonic() > deadline:
                break
            time.sleep(0.2)
    late = {name: out_of_order(numbers) for name, numbers in arrivals.items()}
    print(f"out of order: {sum(late.values())} of {TASKS * EVENTS}: {arrivals}")
    assert sum(late.values()) == 0, arrivals
    assert arrivals == {str(number): list(range(EVENTS)) for number in range(TASKS)}
