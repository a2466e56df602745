"""The task API (target in the body), the relay's own endpoint and cards, in-process over ASGI
against real agents on 127.0.0.1."""

from __future__ import annotations

import json

import httpx
import pytest

from registry.services import agent_register
from routing.demo.agents import ECHO, WRITER, app_factory
from tasks_app.models import Task
from tasks_app.relay_endpoint import default_target_set
from tests.servers import running

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("allow_private_urls"),
]


@pytest.fixture
def agents():
    with running(app_factory(ECHO)) as echo_url, running(app_factory(WRITER)) as writer_url:
        agent_register(url=echo_url, agent_id="echo")
        agent_register(url=writer_url, agent_id="writer")
        yield


@pytest.fixture
def relay(asgi_relay):
    """The relay in this process, through its ASGI application."""
    return asgi_relay


def message(text: str, **extra) -> dict:
    return {"messageId": f"m-{text}", "role": "ROLE_USER", "parts": [{"text": text}], **extra}


async def test_send_to_an_agent_named_in_the_body(agents, relay):
    response = await relay.post(
        "/a2a/tasks/send", json={"agentId": "writer", "message": message("a poem")}
    )
    assert response.status_code == 200, response.text
    task = response.json()["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    assert "a poem" in task["artifacts"][0]["parts"][0]["text"]
    fetched = await relay.get(f"/a2a/tasks/{task['id']}", params={"historyLength": 1})
    assert fetched.json()["id"] == task["id"]
    assert len(fetched.json()["history"]) == 1


async def test_send_returns_a_direct_message_reply(agents, relay):
    response = await relay.post(
        "/a2a/tasks/send", json={"agentId": "echo", "message": message("hi there")}
    )
    assert response.json()["message"]["parts"] == [{"text": "hi there"}]


@pytest.mark.parametrize(
    ("body", "status", "reason"),
    [
        ({"message": message("x")}, 400, "INVALID_PARAMS"),
        ({"agentId": "echo", "teamId": "t", "message": message("x")}, 400, "INVALID_PARAMS"),
        ({"agentId": "nobody", "message": message("x")}, 404, "METHOD_NOT_FOUND"),
        ({"agentId": "echo"}, 400, "INVALID_PARAMS"),
        ({"agentId": "echo", "message": {"role": "ROLE_USER"}}, 400, "INVALID_PARAMS"),
    ],
    ids=["no-target", "two-targets", "unknown-agent", "no-message", "message-without-parts"],
)
async def test_bad_sends_get_the_rest_error_envelope_and_store_nothing(
    agents, relay, body, status, reason
):
    response = await relay.post("/a2a/tasks/send", json=body)
    assert response.status_code == status
    error = response.json()["error"]
    assert error["details"][0]["reason"] == reason
    assert error["message"]
    assert await Task.objects.acount() == 0


async def test_a_body_that_is_not_json_is_a_400(agents, relay):
    response = await relay.post("/a2a/tasks/send", content=b"{nope")
    assert response.status_code == 400
    assert response.json()["error"]["status"] == "INVALID_ARGUMENT"


async def test_send_needs_an_api_key(agents):
    from relay_project.asgi import application

    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=application), base_url="http://testserver"
    ) as anonymous:
        response = await anonymous.post(
            "/a2a/tasks/send", json={"agentId": "echo", "message": message("x")}
        )
    assert response.status_code == 401
    assert response.headers["WWW-Authenticate"].startswith("Bearer")


async def test_cancel_of_a_completed_task_is_not_cancelable(agents, relay):
    task = (
        await relay.post("/a2a/tasks/send", json={"agentId": "writer", "message": message("x")})
    ).json()["task"]
    response = await relay.post(f"/a2a/tasks/{task['id']}/cancel")
    assert response.status_code == 400
    assert response.json()["error"]["details"][0]["reason"] == "TASK_NOT_CANCELABLE"


async def test_an_unknown_task_is_not_found(agents, relay):
    response = await relay.get("/a2a/tasks/no-such-task")
    assert response.status_code == 404
    assert response.json()["error"]["details"][0]["reason"] == "TASK_NOT_FOUND"


async def test_send_subscribe_streams_the_task_then_its_updates(agents, relay):
    response = await relay.post(
        "/a2a/tasks/sendSubscribe", json={"agentId": "writer", "message": message("an essay")}
    )
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    events = [
        json.loads(line[len("data: ") :])
        for line in response.text.splitlines()
        if line.startswith("data: ")
    ]
    assert list(events[0]) == ["task"]
    assert any("artifactUpdate" in event for event in events)
    assert events[-1]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"


@pytest.mark.parametrize("mode", ["parallel", "sequential"])
async def test_send_batch_answers_each_send_in_order(agents, relay, mode):
    body = {
        "executionMode": mode,
        "requests": [
            {"agentId": "writer", "message": message("first")},
            {"agentId": "echo", "message": message("second")},
        ],
    }
    results = (await relay.post("/a2a/tasks/sendBatch", json=body)).json()["results"]
    assert results[0]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
    assert results[1]["message"]["parts"] == [{"text": "second"}]


async def test_send_batch_merge_gathers_artifacts_and_the_least_advanced_state(agents, relay):
    body = {
        "aggregationStrategy": "merge",
        "requests": [
            {"agentId": "writer", "message": message("one")},
            {"agentId": "writer", "message": message("two")},
        ],
    }
    merged = (await relay.post("/a2a/tasks/sendBatch", json=body)).json()["merged"]
    assert merged["state"] == "TASK_STATE_COMPLETED"
    assert len(merged["artifacts"]) == 2
    assert {a["metadata"]["taskId"] for a in merged["artifacts"]} == set(merged["taskIds"])


async def test_a_batch_with_one_bad_entry_runs_nothing(agents, relay):
    body = {
        "requests": [
            {"agentId": "writer", "message": message("ok")},
            {"agentId": "nobody", "message": message("x")},
        ]
    }
    response = await relay.post("/a2a/tasks/sendBatch", json=body)
    assert response.status_code == 404
    assert await Task.objects.acount() == 0


@pytest.mark.parametrize(
    "body",
    [
        {"requests": []},
        {"requests": "x"},
        {"executionMode": "later", "requests": [{}]},
        {"aggregationStrategy": "sum", "requests": [{}]},
    ],
)
async def test_bad_batches_are_invalid_params(agents, relay, body):
    response = await relay.post("/a2a/tasks/sendBatch", json=body)
    assert response.status_code == 400
    assert response.json()["error"]["details"][0]["reason"] == "INVALID_PARAMS"


async def test_the_relay_endpoint_forwards_to_the_default_target(agents, relay):
    await default_target_set_async("agent", "echo")
    response = await relay.post(
        "/a2a/relay/",
        headers={"A2A-Version": "1.0"},
        json={
            "jsonrpc": "2.0",
            "id": 7,
            "method": "SendMessage",
            "params": {"message": message("through the relay")},
        },
    )
    assert response.json()["result"]["message"]["parts"] == [{"text": "through the relay"}]


async def test_the_relay_endpoint_without_a_default_target_is_not_found(agents, relay):
    response = await relay.post(
        "/a2a/relay/",
        headers={"A2A-Version": "1.0"},
        json={
            "jsonrpc": "2.0",
            "id": 7,
            "method": "SendMessage",
            "params": {"message": message("x")},
        },
    )
    assert response.status_code == 404
    assert response.json()["error"]["code"] == -32601


async def test_the_relay_card_declares_the_routing_extension_and_its_endpoint(agents, relay):
    await default_target_set_async("agent", "writer")
    card = (await relay.get("/.well-known/agent-card.json")).json()
    assert card["supportedInterfaces"][0]["url"] == "http://testserver/a2a/relay/"
    uris = [e["uri"] for e in card["capabilities"]["extensions"]]
    assert uris == ["https://ranch.woi.dev/extensions/client-routing/v1"]
    assert [s["id"] for s in card["skills"]] == ["draft"]
    legacy = (await relay.get("/.well-known/agent.json")).json()
    assert legacy["url"] == "http://testserver/a2a/relay/"
    assert legacy["protocolVersion"].startswith("0.2")


async def test_the_registry_gives_the_card_rewritten_to_the_relay(agents, relay):
    card = (await relay.get("/a2a/registry/echo/card", params={"view": "relay"})).json()
    assert {i["url"] for i in card["supportedInterfaces"]} == {"http://testserver/a2a/agents/echo/"}
    assert "relayApiKey" in card["securitySchemes"]
    published = (await relay.get("/a2a/registry/echo/card")).json()
    assert published["supportedInterfaces"][0]["url"].startswith("http://127.0.0.1:")


async def default_target_set_async(kind: str, target_id: str) -> None:
    from asgiref.sync import sync_to_async

    await sync_to_async(default_target_set)(kind=kind, target_id=target_id)


async def test_the_invocation_url_is_called_instead_of_the_cards_wrong_url(relay):
    """The card advertises a closed port; the operator registered the right URL."""
    from asgiref.sync import sync_to_async

    from tests.agents import misadvertised_agent

    with running(misadvertised_agent) as url:
        await sync_to_async(agent_register)(url=url, agent_id="fixed", invocation_url=url)
        response = await relay.post(
            "/a2a/tasks/send", json={"agentId": "fixed", "message": message("still here")}
        )
    assert response.json()["message"]["parts"] == [{"text": "still here"}]
