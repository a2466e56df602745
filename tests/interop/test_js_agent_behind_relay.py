"""An agent built with the official @a2a-js/sdk behind the relay, called with the official
Python a2a-sdk client, against the same client calling the agent directly: over JSON-RPC and
HTTP+JSON, in A2A 1.0 and 0.3, the caller must see the same thing (ids and timestamps aside)."""

from __future__ import annotations

import uuid

import pytest
from a2a.types import GetTaskRequest, Message, Part, Role, SendMessageRequest, TaskState

from tests.jsinterop import JS_CHUNKS, event_kinds, observable, sdk_events, states
from tests.live import PROTOCOL_IDS, PROTOCOLS, eventually, sdk_client

protocols = pytest.mark.parametrize(("binding", "version"), PROTOCOLS, ids=PROTOCOL_IDS)
WORKING_MS = 1500


@pytest.fixture(scope="module", autouse=True)
def registered(relay, js):
    relay.register(js.url, "js")


def user_message(text: str, *, task_id: str = "") -> SendMessageRequest:
    message = Message(message_id=uuid.uuid4().hex, role=Role.ROLE_USER, parts=[Part(text=text)])
    if task_id:
        message.task_id = task_id
    return SendMessageRequest(message=message)


async def exchange(card, binding, version, text, *, streaming, headers=None):
    """The events the Python SDK client yields for one message, as A2A 1.0 JSON."""
    async with sdk_client(card, binding, version, headers=headers, streaming=streaming) as client:
        return sdk_events([event async for event in client.send_message(user_message(text))])


async def both(relay, js, binding, version, text, *, streaming):
    """(direct, through the relay): what the same client saw for the same message."""
    direct = await exchange(js.card(), binding, version, text, streaming=streaming)
    relayed = await exchange(
        relay.card("js"), binding, version, text, streaming=streaming, headers=relay.auth()
    )
    return direct, relayed


@protocols
async def test_a_blocking_echo_answers_the_same_completed_task(relay, js, binding, version):
    direct, relayed = await both(relay, js, binding, version, "echo hello", streaming=False)
    assert event_kinds(direct) == ["task"]
    assert direct[0]["task"]["artifacts"] == [
        {"artifactId": "echo", "name": "echo", "parts": [{"text": "hello"}]}
    ]
    assert observable(relayed) == observable(direct)


@protocols
async def test_a_stream_of_chunks_arrives_event_for_event(relay, js, binding, version):
    direct, relayed = await both(relay, js, binding, version, "stream please", streaming=True)
    chunks = [e["artifactUpdate"] for e in direct if "artifactUpdate" in e]
    assert "".join(c["artifact"]["parts"][0]["text"] for c in chunks) == "".join(JS_CHUNKS)
    assert [c.get("lastChunk", False) for c in chunks] == [False, False, False, True]
    assert observable(relayed) == observable(direct)


@protocols
async def test_a_message_answer_stays_a_message(relay, js, binding, version):
    direct, relayed = await both(relay, js, binding, version, "message hi there", streaming=False)
    assert event_kinds(direct) == ["message"]
    assert direct[0]["message"]["parts"] == [{"text": "hi there"}]
    assert observable(relayed) == observable(direct)


@protocols
async def test_a_task_left_working_is_answered_at_once_and_completes_later(
    relay, js, binding, version
):
    text = f"working {WORKING_MS}"
    direct, relayed = await both(relay, js, binding, version, text, streaming=False)
    assert states(direct) == ["TASK_STATE_WORKING"]
    assert observable(relayed) == observable(direct)
    async with sdk_client(relay.card("js"), binding, version, headers=relay.auth()) as client:
        task_id = relayed[0]["task"]["id"]

        async def completed():
            task = await client.get_task(GetTaskRequest(id=task_id))
            return task if task.status.state == TaskState.TASK_STATE_COMPLETED else None

        task = await eventually(completed, "the working task completing", timeout=15)
    assert [part.text for part in task.artifacts[0].parts] == ["done"]


@protocols
async def test_the_first_turn_of_an_input_required_task_is_the_same(relay, js, binding, version):
    direct, relayed = await both(relay, js, binding, version, "ask", streaming=True)
    assert states(direct)[-1] == "TASK_STATE_INPUT_REQUIRED"
    assert observable(relayed) == observable(direct)
