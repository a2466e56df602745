"""A workflow task whose relay process died is taken over in this process (the death
simulated as the team takeover tests do: the jobs driving the workflow task and its step
stop, and both tasks name a process whose lease ran out). A finished branch of a parallel
step is not run again; the branch at work is followed to its end; the step after runs once."""

from __future__ import annotations

import asyncio
import queue
import uuid

import pytest
from asgiref.sync import sync_to_async

from registry.services import agent_register
from routing.workflows.loading import workflow_target
from routing.workflows.services import workflow_import
from tasks_app import gateway
from tasks_app.gateway import driving, supervisor
from tasks_app.models import Task
from tests.routing.calls import dead_process, until
from tests.routing.workflows import workflow_agents as wa
from tests.servers import running_many

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("allow_private_urls"),
]
WAIT_SECONDS = 20.0

FORKED = """
name: Forked
slug: forked
steps:
  - id: both
    parallel:
      - agent: first
      - agent: gated
    join: all
  - id: last
    agent: third
    input: "{{.both}}"
"""


@pytest.fixture(scope="module")
def agent_urls():
    agents = {
        "first": wa.answering("first"),
        "gated": wa.gated("gated"),
        "third": wa.answering("third"),
    }
    with running_many(agents) as urls:
        yield urls


@pytest.fixture
def forked(agent_urls):
    wa.CALLS.clear()
    for agent_id, url in agent_urls.items():
        agent_register(url=url, agent_id=agent_id)
    workflow_import(text=FORKED)


async def test_a_taken_over_run_keeps_its_finished_branch_and_follows_the_other(forked):
    gate_name = f"gate-{uuid.uuid4().hex[:8]}"
    wa.GATES[gate_name] = gate = queue.Queue()
    target = await sync_to_async(workflow_target)("forked")
    request = {
        "message": {
            "messageId": f"m-{gate_name}",
            "role": "ROLE_USER",
            "parts": [{"text": gate_name}],
        }
    }
    events = await gateway.stream_message(target, gateway.CallContext(caller=None), request)
    run_id = (await anext(events))["task"]["id"]
    gate.put("one ")

    def gated_at_work():
        child = Task.objects.filter(parent_id=run_id, target_id="gated").first()
        first = Task.objects.filter(parent_id=run_id, target_id="first", state="completed")
        ready = child is not None and child.upstream_task_id and child.artifacts
        return child if ready and first.exists() else None

    child = await until(gated_at_work, "the first branch done and the gated one at work")
    await events.aclose()
    driving.stop(run_id)
    driving.stop(child.pk)
    await asyncio.sleep(0.1)
    dead = await sync_to_async(dead_process)()
    await sync_to_async(Task.objects.filter(pk__in=[run_id, child.pk]).update)(owner=dead)

    assert await supervisor.take_over_orphans() == 2
    await asyncio.sleep(0.5)  # the step task resubscribed to its agent
    gate.put("two ")
    gate.put(None)
    run = await until(
        lambda: Task.objects.filter(pk=run_id, state__in=["completed", "failed"]).first(),
        "the run's end",
    )
    assert run.state == "completed", run.status_message
    assert wa.CALLS.count("first") == 1
    assert wa.CALLS.count("gated") == 1
    assert wa.CALLS.count("third") == 1
    assert wa.CALLS.received["third"][0].startswith("first: " + gate_name)
