"""A fasta2a agent (pydantic's A2A server, from PyPI) behind the relay: its statuses carry
timestamps without a zone (``2026-11-28T16:58:00.944946``), which the official a2a-sdk clients
cannot parse. The relay reads them as UTC and must hand every event on every path (JSON-RPC,
HTTP+JSON, gRPC; 1.0 and 0.3; the stream and a resubscription) with an RFC 3339 timestamp."""

from __future__ import annotations

import uuid

import pytest
from a2a.types import Message, Part, Role, SendMessageRequest, SubscribeToTaskRequest

from tests.fasta2a_agent import fasta2a_agent
from tests.jsinterop import sdk_events
from tests.live import ALL_PROTOCOL_IDS, ALL_PROTOCOLS, FREE_PORT

RELAY_ENV = {"RELAY_GRPC_PORT": FREE_PORT, "RELAY_GRPC_METRICS_PORT": FREE_PORT}
protocols = pytest.mark.parametrize(("binding", "version"), ALL_PROTOCOLS, ids=ALL_PROTOCOL_IDS)


@pytest.fixture(scope="module", autouse=True)
def fasta2a(relay):
    relay.serve_agent("reverser", fasta2a_agent)
    with relay.grpc_server():
        yield


def user_message(text: str) -> SendMessageRequest:
    return SendMessageRequest(
        message=Message(message_id=uuid.uuid4().hex, role=Role.ROLE_USER, parts=[Part(text=text)])
    )


def timestamps(events: list[dict]) -> list[str]:
    found = []
    for event in events:
        body = event.get("task") or event.get("statusUpdate") or {}
        if body.get("status", {}).get("timestamp"):
            found.append(body["status"]["timestamp"])
    return found


@protocols
async def test_a_stream_from_an_agent_with_zoneless_timestamps_parses_event_for_event(
    relay, binding, version
):
    async with relay.client("reverser", binding, version) as client:
        events = sdk_events([event async for event in client.send_message(user_message("abc"))])
    assert events, "no event arrived"
    assert "task" in events[0]
    assert events[-1]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"
    artifacts = [e["artifactUpdate"]["artifact"] for e in events if "artifactUpdate" in e]
    assert [a["parts"] for a in artifacts] == [[{"text": "cba"}]]
    # The agent's first task event had ``2026-...T...944946``; it arrives in UTC.
    assert timestamps(events[:1]) and all(t.endswith("Z") for t in timestamps(events))


@protocols
async def test_a_resubscription_to_a_working_task_of_that_agent_parses(relay, binding, version):
    async with relay.client("reverser", binding, version) as client:
        events = client.send_message(user_message("slow one"))
        first = sdk_events([await anext(events)])
        task_id = first[0]["task"]["id"]
        again = sdk_events(
            [event async for event in client.subscribe(SubscribeToTaskRequest(id=task_id))]
        )
        rest = sdk_events([event async for event in events])
    assert again, "no event arrived"
    assert again[-1]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"
    assert rest[-1]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"
    assert [e["artifactUpdate"]["artifact"]["parts"] for e in again if "artifactUpdate" in e] == [
        [{"text": "eno wols"}]
    ]
    assert all(t.endswith("Z") for t in timestamps(first + again + rest))


@pytest.mark.parametrize("transport", ["JSONRPC", "HTTP+JSON"])
def test_the_03_sdk_client_streams_from_that_agent_through_the_relay(relay, a2a_sdk_03, transport):
    """a2a-sdk 0.3.26 itself (its own venv), which parses timestamps as ISO 8601 strings on
    JSON-RPC and as protobuf Timestamps on its REST binding."""
    answer = a2a_sdk_03.client(
        {
            "url": relay.agent_url("reverser"),
            "transport": transport,
            "token": relay.key,
            "streaming": True,
            "message": {
                "kind": "message",
                "messageId": uuid.uuid4().hex,
                "role": "user",
                "parts": [{"kind": "text", "text": "abc"}],
            },
        }
    )
    assert "error" not in answer, answer
    last = answer["events"][-1]
    task = last[0] if isinstance(last, list) else last
    assert task["status"]["state"] == "completed"
    assert task["artifacts"][0]["parts"][0]["text"] == "cba"
