"""Workflows behind the AG-UI endpoint, ``POST /agui/workflows/{id}``: the relay in-process over
ASGI, every step a real a2a-sdk agent on 127.0.0.1 (the runner tests' agents), each event read
back with the ``ag-ui-protocol`` package's own model."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest
from ag_ui.core import Event, EventType
from asgiref.sync import sync_to_async
from pydantic import TypeAdapter

from routing.workflows.services import workflow_import
from tests.routing.calls import register_all, relay_client
from tests.routing.workflows import workflow_agents as wa
from tests.servers import running_many

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("allow_private_urls"),
]

EVENTS = TypeAdapter(Event)
SEED = Path(__file__).with_name("customer-support.yml").read_text()
AGENTS = {
    "intent-classifier": wa.answering("intent-classifier", wa.classify),
    "billing-agent": wa.answering("billing-agent"),
    "troubleshooting-agent": wa.answering("troubleshooting-agent"),
    "resolution-validator": wa.answering("resolution-validator"),
    "summary-agent": wa.answering("summary-agent"),
    "fast": wa.slow("fast", 0.05),
    "medium": wa.slow("medium", 0.4),
    "asks": wa.asks("asks"),
}
ASKING = """
name: Asking
slug: agui-asking
steps:
  - agent: asks
  - id: summarize
    agent: summary-agent
    input: "{{.asks}}"
"""
FAN = """
name: Fan
slug: agui-fan
steps:
  - id: both
    parallel:
      - agent: fast
      - agent: medium
  - id: summarize
    agent: summary-agent
    input: "{{.both}}"
"""


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
    async with relay_client(api_key, timeout=20.0, version=None) as client:
        yield client


def run_input(text: str | None, *, thread_id: str | None = None, **fields: Any):
    messages = (
        []
        if text is None
        else [{"id": f"u-{uuid.uuid4().hex[:8]}", "role": "user", "content": text}]
    )
    return {
        "threadId": thread_id or f"thread-{uuid.uuid4().hex[:8]}",
        "runId": f"run-{uuid.uuid4().hex[:8]}",
        "messages": messages,
        **fields,
    }


async def run(relay, path: str, body: dict[str, Any]) -> list[Any]:
    async with relay.stream("POST", path, json=body) as response:
        assert response.status_code == 200, await response.aread()
        assert response.headers["content-type"] == "text/event-stream"
        frames = [line[6:] async for line in response.aiter_lines() if line.startswith("data: ")]
    return [EVENTS.validate_json(frame) for frame in frames]


def kinds(events) -> list[str]:
    return [event.type.value for event in events]


def steps(events) -> list[tuple[str, str]]:
    return [
        (event.type.value, event.step_name)
        for event in events
        if event.type in (EventType.STEP_STARTED, EventType.STEP_FINISHED)
    ]


def text_of(events, message_id: str) -> str:
    return "".join(
        e.delta
        for e in events
        if e.type == EventType.TEXT_MESSAGE_CONTENT and e.message_id == message_id
    )


async def test_a_workflow_run_has_a_step_pair_per_step_naming_it_and_its_agent(relay):
    workflow = await sync_to_async(workflow_import)(text=SEED)
    body = run_input("My invoice is wrong")

    events = await run(relay, f"/agui/workflows/{workflow.pk}", body)

    assert kinds(events)[0] == "RUN_STARTED"
    assert (events[0].thread_id, events[0].run_id) == (body["threadId"], body["runId"])
    assert steps(events) == [
        ("STEP_STARTED", "classify"),
        ("STEP_FINISHED", "classify"),
        ("STEP_STARTED", "billing"),
        ("STEP_FINISHED", "billing"),
        ("STEP_STARTED", "summarize"),
        ("STEP_FINISHED", "summarize"),
    ]
    started = [e for e in events if e.type == EventType.STEP_STARTED]
    assert [e.metadata["agent"] for e in started] == [
        "intent-classifier",
        "billing-agent",
        "summary-agent",
    ]
    # Each step's answer is a text message named after the step, inside its pair.
    named = [
        (e.name, text_of(events, e.message_id))
        for e in events
        if e.type == EventType.TEXT_MESSAGE_START and e.name
    ]
    assert named == [
        ("classify", "billing"),
        ("billing", "billing-agent: My invoice is wrong"),
        ("summarize", "summary-agent: billing-agent: My invoice is wrong"),
    ]
    answer = "summary-agent: billing-agent: My invoice is wrong"
    unnamed = [e for e in events if e.type == EventType.TEXT_MESSAGE_START and not e.name]
    assert [text_of(events, e.message_id) for e in unnamed][-1] == answer
    finished = events[-1]
    assert finished.type == EventType.RUN_FINISHED and finished.outcome is None
    assert finished.result["state"] == "TASK_STATE_COMPLETED"
    assert wa.CALLS.count("summary-agent") == 1


async def test_parallel_steps_are_open_together_each_closed_when_its_task_ends(relay):
    await sync_to_async(workflow_import)(text=FAN)

    events = await run(relay, "/agui/workflows/agui-fan", run_input("go"))

    pairs = steps(events)
    assert sorted(pairs[:4]) == sorted(
        [
            ("STEP_STARTED", "fast"),
            ("STEP_STARTED", "medium"),
            ("STEP_FINISHED", "fast"),
            ("STEP_FINISHED", "medium"),
        ]
    )
    # fast ends before medium, which was already at work (open) when fast ended.
    assert pairs.index(("STEP_FINISHED", "fast")) < pairs.index(("STEP_FINISHED", "medium"))
    assert pairs.index(("STEP_STARTED", "medium")) < pairs.index(("STEP_FINISHED", "fast"))
    assert pairs[4:] == [("STEP_STARTED", "summarize"), ("STEP_FINISHED", "summarize")]
    assert events[-1].type == EventType.RUN_FINISHED
    assert events[-1].result["state"] == "TASK_STATE_COMPLETED"


async def test_a_step_asking_for_input_is_an_interrupt_the_next_run_answers(relay):
    await sync_to_async(workflow_import)(text=ASKING)
    thread = f"thread-{uuid.uuid4().hex[:8]}"

    first = await run(relay, "/agui/workflows/agui-asking", run_input("close it", thread_id=thread))

    finished = first[-1]
    assert finished.type == EventType.RUN_FINISHED
    assert finished.outcome.type == "interrupt"
    (interrupt,) = finished.outcome.interrupts
    assert interrupt.reason == "input_required"
    assert interrupt.message == "Which account?"
    assert steps(first) == [("STEP_STARTED", "asks"), ("STEP_FINISHED", "asks")]

    resume = [{"interruptId": interrupt.id, "status": "resolved", "payload": "42"}]
    second = await run(
        relay, "/agui/workflows/agui-asking", run_input(None, thread_id=thread, resume=resume)
    )

    assert second[-1].type == EventType.RUN_FINISHED and second[-1].outcome is None
    assert second[-1].result == {
        "taskId": interrupt.id,
        "contextId": thread,
        "state": "TASK_STATE_COMPLETED",
    }
    assert steps(second) == [
        ("STEP_STARTED", "asks"),
        ("STEP_FINISHED", "asks"),
        ("STEP_STARTED", "summarize"),
        ("STEP_FINISHED", "summarize"),
    ]
    assert wa.CALLS.received["asks"] == ["close it", "42"]
    assert wa.CALLS.received["summary-agent"] == ["asks: account 42"]


async def test_an_unknown_workflow_is_a_404(relay):
    response = await relay.post("/agui/workflows/nobody", json=run_input("Hello"))

    assert response.status_code == 404
    assert "nobody" in response.json()["error"]["message"]
