"""Agents the relay calls over gRPC: a2a-sdk agents served over gRPC only (their cards offer one
``GRPC`` 1.0 interface), registered at a relay of real processes and called through it by the
official a2a-sdk client over JSON-RPC, HTTP+JSON and gRPC; their health probed over gRPC."""

from __future__ import annotations

from contextlib import ExitStack

import pytest
from a2a.types import CancelTaskRequest, GetExtendedAgentCardRequest, GetTaskRequest, TaskState

from routing.demo.agents import WRITER
from tests.agents import CHUNKED_STREAMER, CHUNKS, MIRROR, NEVER_FINISHES
from tests.grpc_agents import grpc_agent
from tests.live import FREE_PORT, manage
from tests.tasks_app.test_gateway_protocol import (
    collect,
    fold,
    kind,
    next_event,
    only,
    send_request,
    task_id_of,
    text_of,
    wait_for_state,
)
from tests.tasks_app.test_grpc_binding import NUMBERS, ints_kept

RELAY_ENV = {"RELAY_GRPC_PORT": FREE_PORT}
BINDINGS = ["JSONRPC", "HTTP+JSON", "GRPC"]


@pytest.fixture(scope="module", autouse=True)
def grpc_agents(relay):
    """Three gRPC-only agents, registered (one with a tenant of its own), and the relay's gRPC
    server; their gRPC servers."""
    with ExitStack() as stack:
        served = {
            "g-writer": stack.enter_context(grpc_agent(WRITER, tenant="writers/main")),
            "g-chunked": stack.enter_context(grpc_agent(CHUNKED_STREAMER)),
            "g-never": stack.enter_context(grpc_agent(NEVER_FINISHES)),
            "g-extended": stack.enter_context(grpc_agent(WRITER, extended_skill="secret")),
            "g-mirror": stack.enter_context(grpc_agent(MIRROR)),
        }
        for agent_id, agent in served.items():
            relay.register(agent.base_url, agent_id)
        stack.enter_context(relay.grpc_server())
        yield served


def test_the_registry_keeps_the_grpc_interface_and_its_tenant(relay, grpc_agents):
    import httpx

    entry = httpx.get(f"{relay.url}/a2a/registry/g-writer", timeout=10).json()
    assert entry["bindings"] == ["GRPC"]
    assert entry["interfaces"] == [
        {
            "url": grpc_agents["g-writer"].address,
            "protocolBinding": "GRPC",
            "protocolVersion": "1.0",
            "tenant": "writers/main",
        }
    ]


@pytest.mark.parametrize("binding", BINDINGS)
async def test_a_message_to_a_grpc_agent_completes(relay, binding):
    async with relay.client("g-writer", binding, "1.0", streaming=False) as client:
        task = (await only(client.send_message(send_request(f"notes over {binding}")))).task
        again = await client.get_task(GetTaskRequest(id=task.id))
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    assert [a.name for a in task.artifacts] == ["draft"]
    assert f"notes over {binding}" in text_of(task.artifacts[0].parts)
    assert again.status.state == TaskState.TASK_STATE_COMPLETED


@pytest.mark.parametrize("binding", BINDINGS)
async def test_a_grpc_agents_stream_reaches_the_caller_in_order(relay, binding):
    async with relay.client("g-chunked", binding, "1.0") as client:
        events = await collect(client.send_message(send_request("a story")))
    assert kind(events[0]) == "task"
    assert {task_id_of(e) for e in events} == {events[0].task.id}
    folded = fold(events)
    assert folded.state == TaskState.TASK_STATE_COMPLETED
    assert folded.artifacts == {"story": "".join(CHUNKS)}


async def test_cancel_reaches_the_grpc_agent(relay):
    async with relay.client("g-never", "JSONRPC", "1.0") as client:
        stream = client.send_message(send_request("work forever"))
        task_id = task_id_of(await next_event(stream))
        await wait_for_state(client, task_id, TaskState.TASK_STATE_WORKING)
        canceled = await client.cancel_task(CancelTaskRequest(id=task_id))
        rest = await collect(stream)
        stored = await client.get_task(GetTaskRequest(id=task_id))
    assert canceled.status.state == TaskState.TASK_STATE_CANCELED
    assert rest[-1].status_update.status.state == TaskState.TASK_STATE_CANCELED
    # Told to the agent over gRPC: the relay would say it could not in the status otherwise.
    assert "could not be told" not in text_of(stored.status.message.parts)


@pytest.mark.parametrize("binding", BINDINGS)
async def test_a_grpc_agents_extended_card_reaches_the_caller(relay, binding):
    async with relay.client("g-extended", binding, "1.0") as client:
        card = await client.get_extended_agent_card(GetExtendedAgentCardRequest())
    assert "secret" in [skill.id for skill in card.skills]
    async with relay.client("g-writer", binding, "1.0") as client:
        plain = await client.get_extended_agent_card(GetExtendedAgentCardRequest())
    assert "secret" not in [skill.id for skill in plain.skills]


def test_integers_from_a_grpc_agent_reach_a_json_rpc_caller_as_integers(relay):
    """The agent's Struct holds every number as a double (its metadata and data part carry
    the ones the relay sent it); the JSON-RPC caller gets its ints back."""
    message = {
        "messageId": "m-numbers",
        "role": "ROLE_USER",
        "parts": [{"text": "numbers"}, {"data": NUMBERS}],
        "metadata": NUMBERS,
    }
    response = relay.call("g-mirror", "SendMessage", {"message": message})
    assert response.status_code == 200, response.text
    task = response.json()["result"]["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED", task
    (artifact,) = task["artifacts"]
    assert ints_kept(artifact["metadata"]), artifact
    assert ints_kept(artifact["parts"][1]["data"]), artifact
    stored = relay.call("g-mirror", "GetTask", {"id": task["id"]}).json()["result"]
    assert ints_kept(stored["artifacts"][0]["parts"][1]["data"])
    assert ints_kept(stored["artifacts"][0]["metadata"])


def test_health_probes_reach_grpc_agents(relay):
    printed = manage(relay.env, "check_agents", "--agent", "g-writer")
    rows = [line.split() for line in printed.splitlines() if "transport" in line]
    assert rows, printed
    assert rows[0][rows[0].index("transport") + 1] == "ok", printed


def test_a_stopped_grpc_agent_fails_its_probe_as_refused(relay):
    from tests.grpc_agents import grpc_agent as serve

    with serve(WRITER) as agent:
        relay.register(agent.base_url, "g-gone")
    printed = manage(relay.env, "check_agents", "--agent", "g-gone")
    rows = [line.split() for line in printed.splitlines() if "transport" in line]
    assert rows, printed
    assert "failed" in rows[0] and "refused" in rows[0], printed
