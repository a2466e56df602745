"""A workflow survives ``kill -9`` of the relay process that runs it (production profile: two
daphnes on one PostgreSQL database and one Redis). Killed while step 2 of 3 works, the other
process takes the workflow task and the step's task over, follows step 2 to its end and runs
step 3: each step's agent received exactly one call, counted on the agents' side. Skipped,
saying why, where PostgreSQL or Redis is absent."""

from __future__ import annotations

import asyncio
import json
import queue
import time
import uuid
from contextlib import ExitStack

import httpx
import psycopg
import pytest

from tests.live import ServiceMissingError, live_relay, manage, production_services
from tests.routing.workflows import workflow_agents as wa

pytestmark = pytest.mark.production
WAIT_SECONDS = 60.0

THREE_STEPS = """
name: Three steps
slug: three-steps
steps:
  - id: one
    agent: first
  - id: two
    agent: gated
    input: "{{.originalMessage}}"
  - id: three
    agent: third
    input: "{{.two}}"
"""


@pytest.fixture
def relays(tmp_path):
    """(relay A, the base URL of relay B), sharing PostgreSQL and Redis, with short leases."""
    with ExitStack() as stack:
        try:
            services = stack.enter_context(production_services())
        except ServiceMissingError as error:
            pytest.skip(str(error))
        relay = stack.enter_context(
            live_relay(tmp_path / "relay", RELAY_EXCHANGE_LEASE_SECONDS="2", **services)
        )
        for slug, app in (
            ("first", wa.answering("first")),
            ("gated", wa.gated("gated")),
            ("third", wa.answering("third")),
        ):
            relay.serve_agent(slug, app)
        document = tmp_path / "three.yml"
        document.write_text(THREE_STEPS)
        manage(relay.env, "import_workflow", str(document))
        yield relay, stack.enter_context(relay.second())


def rows(relay, sql: str, *params):
    with psycopg.connect(relay.env["DATABASE_URL"], autocommit=True) as db:
        return db.execute(sql, params).fetchall()


async def until(check, what: str):
    deadline = time.monotonic() + WAIT_SECONDS
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        await asyncio.sleep(0.1)
    raise AssertionError(f"waited {WAIT_SECONDS}s for {what}")


def call(relay, base: str, method: str, params: dict):
    response = httpx.post(
        f"{base}/a2a/workflows/three-steps/",
        content=json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}),
        headers={"Content-Type": "application/json", "A2A-Version": "1.0", **relay.auth()},
        timeout=WAIT_SECONDS,
    )
    assert response.status_code == 200, response.text
    return response.json()


async def test_a_workflow_killed_during_step_two_completes_on_the_other_process(relays):
    relay, other = relays
    wa.CALLS.clear()
    gate_name = f"gate-{uuid.uuid4().hex[:8]}"
    wa.GATES[gate_name] = gate = queue.Queue()
    message = {"messageId": f"m-{gate_name}", "role": "ROLE_USER", "parts": [{"text": gate_name}]}
    answer = call(
        relay,
        relay.url,
        "SendMessage",
        {"message": message, "configuration": {"returnImmediately": True}},
    )
    task_id = answer["result"]["task"]["id"]
    gate.put("one ")
    await until(
        lambda: rows(
            relay,
            "select 1 from tasks_app_task where parent_id = %s and target_id = 'gated' "
            "and state = 'working' and upstream_task_id <> '' and artifacts <> '[]'::jsonb",
            task_id,
        ),
        "step two at work",
    )
    relay.daphne.kill()  # kill -9 of the process that runs the workflow
    time.sleep(0.5)
    gate.put("two ")
    gate.put(None)

    def completed():
        got = call(relay, other, "GetTask", {"id": task_id})["result"]
        return (
            got if got["status"]["state"] in ("TASK_STATE_COMPLETED", "TASK_STATE_FAILED") else None
        )

    task = await until(completed, "the workflow task's end on the other process")
    assert task["status"]["state"] == "TASK_STATE_COMPLETED", task
    # Step two's output is its final message, then its artifact's text (both chunks).
    two = "gated: released\none \ntwo "
    assert task["status"]["message"]["parts"][0]["text"] == f"third: {two}"
    assert wa.CALLS.received == {"first": [gate_name], "gated": [gate_name], "third": [two]}
    keys = rows(
        relay, "select key from routing_workflowsteprun where run_id = %s order by id", task_id
    )
    assert [key for (key,) in keys] == ["one", "two", "three"]
