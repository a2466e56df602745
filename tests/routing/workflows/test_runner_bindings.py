"""The seed's customer-support workflow, imported unchanged, called with the official a2a-sdk
clients over JSON-RPC, HTTP+JSON and gRPC at a live relay (real processes), its steps real
a2a-sdk agents on 127.0.0.1: the classifier's answer picks the branch, the summary is the
answer. The workflow's card is what the clients read."""

from __future__ import annotations

import uuid
from pathlib import Path

import httpx
import pytest
from a2a.types import Message, Part, Role, SendMessageRequest, TaskState

from tests.live import free_port, live_relay, manage, sdk_client
from tests.routing.workflows import workflow_agents as wa

SEED = Path(__file__).with_name("customer-support.yml")
BINDINGS = ["JSONRPC", "HTTP+JSON", "GRPC"]


@pytest.fixture(scope="module")
def relay(tmp_path_factory, relay_template):
    with live_relay(
        tmp_path_factory.mktemp("relay"),
        template=relay_template,
        RELAY_GRPC_PORT=str(free_port()),
    ) as live:
        for slug in wa.SUPPORT:
            answer = wa.classify if slug == "intent-classifier" else None
            live.serve_agent(slug, wa.answering(slug, answer))
        manage(live.env, "import_workflow", str(SEED))
        with live.grpc_server():
            yield live


def card(relay) -> dict:
    response = httpx.get(
        f"{relay.url}/a2a/workflows/customer-support-pipeline/.well-known/agent-card.json"
    )
    assert response.status_code == 200, response.text
    return response.json()


def test_the_card_has_the_workflows_skill_then_its_first_steps(relay):
    found = card(relay)
    assert found["name"] == "Customer Support Pipeline"
    skills = [skill["id"] for skill in found["skills"]]
    assert skills == ["customer-support-pipeline", "classify/intent-classifier"]
    bindings = {i["protocolBinding"] for i in found["supportedInterfaces"]}
    assert {"JSONRPC", "HTTP+JSON", "GRPC"} <= bindings


@pytest.mark.parametrize("binding", BINDINGS)
@pytest.mark.parametrize(
    ("text", "branch"),
    [("My invoice is wrong", "billing"), ("The app crashes", "technical")],
)
async def test_the_seed_answers_over_every_binding(relay, binding, text, branch):
    wa.CALLS.clear()
    request = SendMessageRequest(
        message=Message(
            message_id=f"m-{uuid.uuid4().hex[:8]}", role=Role.ROLE_USER, parts=[Part(text=text)]
        )
    )
    async with sdk_client(
        card(relay), binding, "1.0", headers=relay.auth(), streaming=False
    ) as client:
        events = [event async for event in client.send_message(request)]
    task = events[-1].task
    assert task.status.state == TaskState.TASK_STATE_COMPLETED, task
    said = task.status.message.parts[0].text
    if branch == "billing":
        assert said == f"summary-agent: billing-agent: {text}"
        assert set(wa.CALLS.received) == {"intent-classifier", "billing-agent", "summary-agent"}
    else:
        assert said == f"summary-agent: resolution-validator: troubleshooting-agent: {text}"
        assert set(wa.CALLS.received) == {
            "intent-classifier",
            "troubleshooting-agent",
            "resolution-validator",
            "summary-agent",
        }
    assert all(len(calls) == 1 for calls in wa.CALLS.received.values())
    assert [a.name for a in task.artifacts] == ["final_response"]
