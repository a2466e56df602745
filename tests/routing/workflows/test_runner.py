"""Workflows called as A2A agents, end to end: the relay in-process over ASGI (JSON-RPC 1.0 at
/a2a/workflows/{id}/), every step a real a2a-sdk agent on 127.0.0.1 that counts its calls."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from asgiref.sync import sync_to_async

from routing.models import WorkflowStepRun
from routing.workflows import run_steps
from routing.workflows.run_steps import STEP_KEY
from routing.workflows.services import workflow_import
from tasks_app.models import Task, TaskEvent
from tests.routing.calls import register_all, relay_client, user_message
from tests.routing.workflows import workflow_agents as wa
from tests.servers import running_many

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("allow_private_urls"),
]

SEED = Path(__file__).with_name("customer-support.yml").read_text()
WAIT_SECONDS = 20.0
AGENTS = {
    "intent-classifier": wa.answering("intent-classifier", wa.classify),
    "billing-agent": wa.answering("billing-agent"),
    "troubleshooting-agent": wa.answering("troubleshooting-agent"),
    "resolution-validator": wa.answering("resolution-validator"),
    "summary-agent": wa.answering("summary-agent"),
    "fast": wa.slow("fast", 0.05),
    "medium": wa.slow("medium", 0.6),
    "slow": wa.slow("slow", 3.0),
    "asks": wa.asks("asks"),
    "counter": wa.counter("counter", 3),
    "refuses": wa.refuses("refuses"),
}


@pytest.fixture(scope="module")
def agent_urls():
    with running_many(AGENTS) as urls:
        yield urls


@pytest.fixture(autouse=True)
def registered(agent_urls, allow_private_urls):
    wa.CALLS.clear()
    register_all(agent_urls)


@pytest.fixture
async def relay(api_key):
    async with relay_client(api_key, timeout=WAIT_SECONDS) as client:
        yield client


async def send(relay, workflow_id: str, message: dict[str, Any]) -> dict[str, Any]:
    response = await relay.post(
        f"/a2a/workflows/{workflow_id}/",
        json={"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": message}},
    )
    assert response.status_code == 200, response.text
    body = response.json()
    assert "result" in body, body
    return body["result"]["task"]


def status_text(task: dict[str, Any]) -> str:
    parts = task["status"].get("message", {}).get("parts", [])
    return "\n".join(p["text"] for p in parts if "text" in p)


def imported(text: str, workflow_id: str | None = None):
    return workflow_import(text=text, workflow_id=workflow_id)


async def test_the_seed_runs_the_billing_branch_and_the_summary_is_the_answer(relay):
    workflow = await sync_to_async(imported)(SEED)
    task = await send(relay, workflow.pk, user_message("My invoice is wrong"))
    assert task["status"]["state"] == "TASK_STATE_COMPLETED", task
    assert status_text(task) == "summary-agent: billing-agent: My invoice is wrong"
    assert wa.CALLS.received == {
        "intent-classifier": ["My invoice is wrong"],
        "billing-agent": ["My invoice is wrong"],
        "summary-agent": ["billing-agent: My invoice is wrong"],
    }
    output = [a for a in task["artifacts"] if a["name"] == "final_response"]
    assert output[0]["parts"][0]["text"] == status_text(task)


async def test_the_seed_runs_the_technical_branch_in_order(relay):
    workflow = await sync_to_async(imported)(SEED)
    task = await send(relay, workflow.pk, user_message("The app crashes"))
    assert task["status"]["state"] == "TASK_STATE_COMPLETED", task
    assert wa.CALLS.received == {
        "intent-classifier": ["The app crashes"],
        "troubleshooting-agent": ["The app crashes"],
        "resolution-validator": ["troubleshooting-agent: The app crashes"],
        "summary-agent": ["resolution-validator: troubleshooting-agent: The app crashes"],
    }
    run = await sync_to_async(Task.objects.get)(pk=task["id"])
    rows = await sync_to_async(run_steps.step_rows)(run=run)
    keys = [(key, row.seq) for key, row in rows.items()]
    assert keys == [
        ("classify", 1),
        ("troubleshooting", 2),
        ("resolution-validator", 3),
        ("summarize", 4),
    ]
    children = await sync_to_async(
        lambda: sorted(
            Task.objects.filter(parent_id=task["id"]).values_list("target_id", flat=True)
        )
    )()
    assert children == sorted(
        ["intent-classifier", "troubleshooting-agent", "resolution-validator", "summary-agent"]
    )


PARALLEL = """
name: Fan out
slug: fan-{join}
steps:
  - id: all3
    parallel:
      - agent: fast
      - agent: medium
      - agent: slow
    join: {join}
{quorum}
"""


def fan_out(join: str, quorum: str = "") -> str:
    return PARALLEL.format(join=join, quorum=f"    quorum: {quorum}" if quorum else "")


async def test_a_parallel_join_all_waits_for_every_step_and_joins_their_texts(relay):
    await sync_to_async(imported)(fan_out("all"))
    task = await send(relay, "fan-all", user_message("go"))
    assert task["status"]["state"] == "TASK_STATE_COMPLETED", task
    assert status_text(task) == "fast: go\n\nmedium: go\n\nslow: go"
    assert [wa.CALLS.count(s) for s in ("fast", "medium", "slow")] == [1, 1, 1]


async def test_a_parallel_join_first_answers_with_the_first_and_cancels_the_others(relay):
    await sync_to_async(imported)(fan_out("first"))
    task = await send(relay, "fan-first", user_message("go"))
    assert task["status"]["state"] == "TASK_STATE_COMPLETED", task
    assert status_text(task) == "fast: go"
    states = await sync_to_async(
        lambda: dict(Task.objects.filter(parent_id=task["id"]).values_list("target_id", "state"))
    )()
    assert states["fast"] == "completed"
    assert states["slow"] == "canceled"


async def test_a_parallel_join_quorum_answers_with_the_first_n(relay):
    await sync_to_async(imported)(fan_out("quorum", "2"))
    task = await send(relay, "fan-quorum", user_message("go"))
    assert task["status"]["state"] == "TASK_STATE_COMPLETED", task
    assert status_text(task) == "fast: go\n\nmedium: go"
    states = await sync_to_async(
        lambda: dict(Task.objects.filter(parent_id=task["id"]).values_list("target_id", "state"))
    )()
    assert states["slow"] == "canceled"


LOOP = """
name: Until done
slug: until-{limit}
steps:
  - id: refine
    loop:
      - id: try
        agent: counter
        input: "{{{{.originalMessage}}}}"
    max_iterations: {limit}
    until: "try.text == 'done'"
"""


async def test_a_loop_stops_at_its_exit_condition(relay):
    await sync_to_async(imported)(LOOP.format(limit=5))
    task = await send(relay, "until-5", user_message("again?"))
    assert task["status"]["state"] == "TASK_STATE_COMPLETED", task
    assert status_text(task) == "done"
    assert wa.CALLS.count("counter") == 3
    keys = await sync_to_async(
        lambda: list(
            WorkflowStepRun.objects.filter(run_id=task["id"]).values_list("key", flat=True)
        )
    )()
    assert keys == ["refine[0]/try", "refine[1]/try", "refine[2]/try"]


async def test_a_loop_stops_at_its_limit(relay):
    await sync_to_async(imported)(LOOP.format(limit=2))
    task = await send(relay, "until-2", user_message("again?"))
    assert task["status"]["state"] == "TASK_STATE_COMPLETED", task
    assert status_text(task) == "again"
    assert wa.CALLS.count("counter") == 2


ASKING = """
name: Asking
slug: asking
steps:
  - agent: asks
  - id: summarize
    agent: summary-agent
    input: "{{.asks}}"
"""


async def test_a_step_that_asks_for_input_is_resumed_by_the_callers_answer(relay):
    await sync_to_async(imported)(ASKING)
    task = await send(relay, "asking", user_message("close my account"))
    assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED", task
    assert status_text(task) == "Which account?"
    assert task["status"]["message"]["metadata"][STEP_KEY]["step"] == "asks"
    task = await send(relay, "asking", user_message("42", taskId=task["id"]))
    assert task["status"]["state"] == "TASK_STATE_COMPLETED", task
    assert status_text(task) == "summary-agent: asks: account 42"
    assert wa.CALLS.received["asks"] == ["close my account", "42"]


async def test_streaming_shows_each_steps_events_tagged_with_the_step(relay):
    workflow = await sync_to_async(imported)(SEED)
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "SendStreamingMessage",
        "params": {"message": user_message("The app crashes")},
    }
    events = []
    async with relay.stream("POST", f"/a2a/workflows/{workflow.pk}/", json=body) as response:
        assert response.status_code == 200
        async for line in response.aiter_lines():
            if line.startswith("data:"):
                events.append(json.loads(line[5:])["result"])
    steps = [
        e["statusUpdate"]["metadata"][STEP_KEY]["step"]
        for e in events
        if "statusUpdate" in e and STEP_KEY in (e["statusUpdate"].get("metadata") or {})
    ]
    assert list(dict.fromkeys(steps)) == [
        "classify",
        "troubleshooting",
        "resolution-validator",
        "summarize",
    ]
    assert events[-1]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"


async def fan_out_started(relay) -> str:
    """The id of a ``join: all`` fan-out's task, called without waiting for its answer."""
    await sync_to_async(imported)(fan_out("all"))
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "SendMessage",
        "params": {"message": user_message("go"), "configuration": {"returnImmediately": True}},
    }
    response = await relay.post("/a2a/workflows/fan-all/", json=body)
    return response.json()["result"]["task"]["id"]


async def test_cancel_cancels_the_running_steps(relay):
    task_id = await fan_out_started(relay)

    async def slow_running():
        return await sync_to_async(
            Task.objects.filter(parent_id=task_id, target_id="slow", state="working").exists
        )()

    for _ in range(100):
        if await slow_running():
            break
        await asyncio.sleep(0.05)
    response = await relay.post(
        "/a2a/workflows/fan-all/",
        json={"jsonrpc": "2.0", "id": 2, "method": "CancelTask", "params": {"id": task_id}},
    )
    assert response.json()["result"]["status"]["state"] == "TASK_STATE_CANCELED", response.text
    states = await sync_to_async(
        lambda: dict(Task.objects.filter(parent_id=task_id).values_list("target_id", "state"))
    )()
    assert states["slow"] == "canceled"


async def test_a_steps_last_events_are_stored_on_the_run_as_the_step_ends(relay):
    # Regression: a step's last forwarded events waited for the run's next write (here the
    # end of the slowest branch), and a process dying meanwhile lost them.
    task_id = await fan_out_started(relay)

    def stored():
        states = dict(Task.objects.filter(parent_id=task_id).values_list("target_id", "state"))
        tags = [
            run_steps._tag_of(payload)
            for payload in TaskEvent.objects.filter(task_id=task_id).values_list(
                "payload", flat=True
            )
        ]
        return states, [(tag["key"], tag["state"]) for tag in tags if tag]

    for _ in range(100):
        states, tags = await sync_to_async(stored)()
        if states.get("fast") == "completed":
            break
        await asyncio.sleep(0.02)
    assert states["fast"] == "completed" and states["slow"] == "working", states
    assert ("fast", "completed") in tags, tags
    await relay.post(
        "/a2a/workflows/fan-all/",
        json={"jsonrpc": "2.0", "id": 2, "method": "CancelTask", "params": {"id": task_id}},
    )


NESTED = """
name: Outer
slug: outer
steps:
  - id: inner
    workflow: fan-first
  - id: desk
    team: desk
    input: "{{.inner}}"
"""


async def test_a_workflow_calls_a_workflow_and_a_team_as_steps(relay):
    from registry.teams import team_create

    await sync_to_async(imported)(fan_out("first"))
    await sync_to_async(team_create)(
        team_id="desk", name="Desk", members=["billing-agent"], default_agent="billing-agent"
    )
    await sync_to_async(imported)(NESTED)
    task = await send(relay, "outer", user_message("go"))
    assert task["status"]["state"] == "TASK_STATE_COMPLETED", task
    assert status_text(task) == "billing-agent: fast: go"
    kinds = await sync_to_async(
        lambda: sorted(
            Task.objects.filter(parent_id=task["id"]).values_list("target_kind", "target_id")
        )
    )()
    assert kinds == [("team", "desk"), ("workflow", "fan-first")]


REFUSED = """
name: Refused
slug: refused
steps:
  - agent: refuses
  - agent: summary-agent
"""


async def test_a_step_its_agent_refuses_fails_the_run_naming_it_and_is_not_sent_again(relay):
    await sync_to_async(imported)(REFUSED)
    task = await send(relay, "refused", user_message("please"))
    assert task["status"]["state"] == "TASK_STATE_FAILED", task
    assert status_text(task).startswith("step 'refuses' failed: its task ended failed")
    assert "no, thank you" in status_text(task)
    assert wa.CALLS.received == {"refuses": ["please"]}


@pytest.fixture
def tracing_on(monkeypatch):
    from tests.otlp_receiver import tracing_to_receiver

    with tracing_to_receiver(monkeypatch) as receiver:
        yield receiver


async def test_a_workflow_call_is_one_trace_with_a_span_per_step(relay, tracing_on):
    from relay_project import tracing

    workflow = await sync_to_async(imported)(SEED)
    task = await send(relay, workflow.pk, user_message("My invoice is wrong"))
    assert task["status"]["state"] == "TASK_STATE_COMPLETED", task
    tracing.flush()
    spans = tracing_on.wait_for(
        lambda spans: (
            sum(s.name.startswith("invoke_agent") for s in spans) >= 3
            and any(s.name.startswith("invoke_workflow") for s in spans)
        )
    )
    (run,) = [s for s in spans if s.name.startswith("invoke_workflow")]
    assert run.attributes["gen_ai.workflow.name"] == "Customer Support Pipeline"
    agents = sorted((s for s in spans if s.name.startswith("invoke_agent")), key=lambda s: s.start)
    assert [s.attributes["gen_ai.agent.id"] for s in agents] == [
        "intent-classifier",
        "billing-agent",
        "summary-agent",
    ]
    assert {s.parent_span_id for s in agents} == {run.span_id}
    assert {s.trace_id for s in agents} == {run.trace_id}
