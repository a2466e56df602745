"""The AG-UI endpoints against a relay of real processes (daphne, its own SQLite file) and real
a2a-sdk agents on 127.0.0.1: a run in, AG-UI events out, each read back with the
``ag-ui-protocol`` package's own event model."""

from __future__ import annotations

import json
import uuid
from typing import Any

import httpx
import pytest
from ag_ui.core import Event, EventType
from pydantic import TypeAdapter

from routing.demo.agents import ECHO, build_agent_app
from tests.agents import CHUNKS, chunked_streaming_agent, input_required_agent
from tests.live import CALL_SECONDS, live_relay, manage

EVENTS = TypeAdapter(Event)


@pytest.fixture(scope="module")
def relay(tmp_path_factory):
    with live_relay(tmp_path_factory.mktemp("agui-relay")) as live:
        live.serve_agent("echo", lambda url: build_agent_app(ECHO, base_url=url))
        live.serve_agent("chunks", chunked_streaming_agent)
        live.serve_agent("asks", input_required_agent)
        yield live


def run_input(text: str | None = "Hello", *, thread_id: str | None = None, **fields: Any):
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


def run(relay, path: str, body: Any, *, key: str | None = None) -> list[Any]:
    """The AG-UI events of one run, validated by the package's own model."""
    with httpx.stream(
        "POST",
        f"{relay.url}{path}",
        json=body,
        headers={**relay.auth(key), "Accept": "text/event-stream"},
        timeout=CALL_SECONDS,
    ) as response:
        assert response.status_code == 200, response.read()
        assert response.headers["content-type"] == "text/event-stream"
        frames = [line[6:] for line in response.iter_lines() if line.startswith("data: ")]
    return [EVENTS.validate_json(frame) for frame in frames]


def kinds(events) -> list[str]:
    return [event.type.value for event in events]


def text(events) -> str:
    return "".join(e.delta for e in events if e.type == EventType.TEXT_MESSAGE_CONTENT)


def test_an_agent_run_streams_the_answer_between_run_started_and_run_finished(relay):
    body = run_input("Hello")
    events = run(relay, "/agui/agents/echo", body)

    assert kinds(events)[0] == "RUN_STARTED"
    assert (events[0].thread_id, events[0].run_id) == (body["threadId"], body["runId"])
    assert kinds(events)[-1] == "RUN_FINISHED"
    assert events[-1].outcome is None
    assert "TEXT_MESSAGE_START" in kinds(events)
    assert text(events) == "Hello"


def test_an_artifact_streamed_in_chunks_is_one_text_message_of_as_many_deltas(relay):
    events = run(relay, "/agui/agents/chunks/", run_input("a story"))

    deltas = [e for e in events if e.type == EventType.TEXT_MESSAGE_CONTENT]
    story = [e.delta for e in deltas if e.message_id == deltas[0].message_id]
    assert story == list(CHUNKS)
    starts = [e for e in events if e.type == EventType.TEXT_MESSAGE_START]
    ends = [e for e in events if e.type == EventType.TEXT_MESSAGE_END]
    assert sorted(e.message_id for e in starts) == sorted(e.message_id for e in ends)
    snapshot = [e for e in events if e.type == EventType.STATE_SNAPSHOT][-1].snapshot["a2a"]
    assert snapshot["state"] == "TASK_STATE_COMPLETED"
    assert events[-1].type == EventType.RUN_FINISHED
    assert events[-1].result == snapshot


def test_input_required_ends_the_run_with_an_interrupt_that_the_next_run_answers(relay):
    thread = f"thread-{uuid.uuid4().hex[:8]}"
    first = run(relay, "/agui/agents/asks", run_input("greet someone", thread_id=thread))

    finished = first[-1]
    assert finished.type == EventType.RUN_FINISHED
    assert finished.outcome.type == "interrupt"
    (interrupt,) = finished.outcome.interrupts
    assert interrupt.reason == "input_required"
    assert interrupt.message == "What name should I greet?"
    task_id = interrupt.id
    state = [e for e in first if e.type == EventType.STATE_SNAPSHOT][-1].snapshot["a2a"]
    assert state == {
        "taskId": task_id,
        "contextId": thread,
        "state": "TASK_STATE_INPUT_REQUIRED",
    }

    resume = [{"interruptId": task_id, "status": "resolved", "payload": "Ada"}]
    second = run(relay, "/agui/agents/asks", run_input(None, thread_id=thread, resume=resume))

    assert second[-1].type == EventType.RUN_FINISHED and second[-1].outcome is None
    assert second[-1].result == {
        "taskId": task_id,
        "contextId": thread,
        "state": "TASK_STATE_COMPLETED",
    }
    assert "Hello, Ada!" in text(second)


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"runId": "r", "messages": []}, "threadId"),
        ({"threadId": "t", "runId": "r", "messages": [{"role": "user"}]}, "messages.0.user"),
        ({"threadId": "t", "runId": "r", "messages": []}, "messages"),
    ],
)
def test_a_body_that_is_no_run_is_a_400_naming_the_field(relay, body, field):
    response = httpx.post(
        f"{relay.url}/agui/agents/echo", json=body, headers=relay.auth(), timeout=CALL_SECONDS
    )

    assert response.status_code == 400
    violations = response.json()["error"]["details"][-1]["fieldViolations"]
    assert any(v["field"].startswith(field) for v in violations), violations


def test_a_body_that_is_not_json_is_a_400(relay):
    response = httpx.post(
        f"{relay.url}/agui/teams/nobody",
        content=b"{not json",
        headers=relay.auth(),
        timeout=CALL_SECONDS,
    )

    assert response.status_code == 400
    assert "RunAgentInput" in response.json()["error"]["message"]


def test_a_caller_without_a_key_is_refused_whatever_it_sends(relay):
    response = httpx.post(f"{relay.url}/agui/agents/echo", content=b"{", timeout=CALL_SECONDS)

    assert response.status_code == 401
    assert "Bearer" in response.headers["www-authenticate"]


def test_a_key_that_may_not_call_is_refused(relay):
    key = manage(relay.env, "create_api_key", "agui-no-call", "--no-call").strip().splitlines()[-1]

    response = httpx.post(
        f"{relay.url}/agui/agents/echo",
        json=run_input("Hello"),
        headers=relay.auth(key),
        timeout=CALL_SECONDS,
    )

    assert response.status_code == 404
    assert "no agent 'echo'" in response.json()["error"]["message"]


def test_an_unknown_agent_is_a_404(relay):
    response = httpx.post(
        f"{relay.url}/agui/agents/nobody",
        json=run_input("Hello"),
        headers=relay.auth(),
        timeout=CALL_SECONDS,
    )

    assert response.status_code == 404


def test_a_get_is_not_a_run(relay):
    response = httpx.get(f"{relay.url}/agui/agents/echo", headers=relay.auth())

    assert response.status_code in (404, 405)
    assert "POST" in json.dumps(response.json())


def test_an_unknown_workflow_is_a_404_naming_it(relay):
    response = httpx.post(
        f"{relay.url}/agui/workflows/nightly",
        json=run_input("Hello"),
        headers=relay.auth(),
        timeout=CALL_SECONDS,
    )

    assert response.status_code == 404
    assert "nightly" in response.json()["error"]["message"]
