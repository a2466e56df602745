"""Sends that name a skill instead of an agent (task API), against real agents on 127.0.0.1:
the relay sends to the best healthy match and records its choice on the task."""

from __future__ import annotations

import json

import pytest

from registry.models import Agent
from registry.services import agent_register
from routing.demo.agents import ECHO, WRITER, app_factory
from tasks_app.models import Task
from tests.servers import running

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("allow_private_urls"),
]


@pytest.fixture
def agents():
    with (
        running(app_factory(ECHO)) as echo_url,
        running(app_factory(WRITER)) as writer_url,
        running(app_factory(WRITER)) as second_writer_url,
    ):
        agent_register(url=echo_url, agent_id="echo")
        agent_register(url=writer_url, agent_id="writer")
        agent_register(url=second_writer_url, agent_id="writer-b")
        Agent.objects.filter(pk="writer").update(health="healthy", health_latency_ms=5.0)
        Agent.objects.filter(pk="writer-b").update(health="healthy", health_latency_ms=900.0)
        yield


@pytest.fixture
def relay(asgi_relay):
    """The relay in this process, through its ASGI application."""
    return asgi_relay


def message(text: str) -> dict:
    return {"messageId": f"m-{text}", "role": "ROLE_USER", "parts": [{"text": text}]}


async def test_a_send_naming_a_skill_goes_to_the_best_match_and_says_why(agents, relay):
    response = await relay.post(
        "/a2a/tasks/send",
        json={"skill": "compose a short written document", "message": message("a memo")},
    )
    assert response.status_code == 200, response.text
    task = response.json()["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    chosen = task["metadata"]["relaySelection"]
    # Both writers match alike; the faster one wins.
    assert chosen["agentId"] == "writer"
    assert chosen["skillId"] == "draft"
    assert "Draft" in chosen["why"]
    assert "skipped" not in chosen
    stored = await Task.objects.aget(pk=task["id"])
    assert (stored.agent_id, stored.selection["agentId"]) == ("writer", "writer")


async def test_an_unhealthy_better_match_is_not_chosen(agents, relay):
    await Agent.objects.filter(pk="writer").aupdate(health="unhealthy")
    response = await relay.post(
        "/a2a/tasks/send",
        json={"skill": "compose a short written document", "message": message("a memo")},
    )
    chosen = response.json()["task"]["metadata"]["relaySelection"]
    assert chosen["agentId"] == "writer-b"


async def test_a_better_match_whose_breaker_is_open_is_skipped_and_named(agents, relay):
    # Still healthy by its probes, and the faster: it would rank first.
    await Agent.objects.filter(pk="writer").aupdate(breaker_state="open")
    response = await relay.post(
        "/a2a/tasks/send",
        json={"skill": "compose a short written document", "message": message("a memo")},
    )
    assert response.status_code == 200, response.text
    chosen = response.json()["task"]["metadata"]["relaySelection"]
    assert chosen["agentId"] == "writer-b"
    assert chosen["skipped"] == [{"agentId": "writer", "reason": "circuit breaker open"}]


async def test_a_skill_id_picks_among_the_agents_that_declare_it(agents, relay):
    response = await relay.post("/a2a/tasks/send", json={"skill": "echo", "message": message("hi")})
    assert response.status_code == 200, response.text
    assert response.json()["message"]["parts"] == [{"text": "hi"}]


async def test_a_skill_send_answered_with_a_message_says_which_agent_and_why(agents, relay):
    response = await relay.post("/a2a/tasks/send", json={"skill": "echo", "message": message("hi")})
    chosen = response.json()["message"]["metadata"]["relaySelection"]
    assert (chosen["agentId"], chosen["skillId"]) == ("echo", "echo")
    assert chosen["why"] and chosen["score"] > 0


async def test_no_healthy_match_is_a_not_found_that_stores_nothing(agents, relay):
    await Agent.objects.filter(pk="echo").aupdate(health="unhealthy")
    response = await relay.post("/a2a/tasks/send", json={"skill": "echo", "message": message("x")})
    assert response.status_code == 404
    assert "no healthy agent" in response.json()["error"]["message"]
    assert await Task.objects.acount() == 0


async def test_a_batch_may_name_skills(agents, relay):
    response = await relay.post(
        "/a2a/tasks/sendBatch",
        json={
            "requests": [
                {"skill": "echo", "message": message("one")},
                {"skill": "write a draft", "message": message("two")},
            ]
        },
    )
    assert response.status_code == 200, response.text
    first, second = response.json()["results"]
    assert first["message"]["parts"] == [{"text": "one"}]
    assert second["task"]["metadata"]["relaySelection"]["agentId"] in {"writer", "writer-b"}


async def test_a_skill_with_another_target_is_refused(agents, relay):
    response = await relay.post(
        "/a2a/tasks/send", json={"agentId": "echo", "skill": "echo", "message": message("x")}
    )
    assert response.status_code == 400
    assert "skill" in response.text


async def test_send_subscribe_may_name_a_skill(agents, relay):
    response = await relay.post(
        "/a2a/tasks/sendSubscribe",
        json={"skill": "compose a short written document", "message": message("an essay")},
    )
    assert response.status_code == 200, response.text
    events = [
        json.loads(line[len("data: ") :])
        for line in response.text.splitlines()
        if line.startswith("data: ")
    ]
    assert events[-1]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"
    task_id = (
        events[0]["task"]["id"] if "task" in events[0] else events[-1]["statusUpdate"]["taskId"]
    )
    fetched = (await relay.get(f"/a2a/tasks/{task_id}")).json()
    assert fetched["metadata"]["relaySelection"]["agentId"] == "writer"


async def test_without_the_model_a_send_naming_a_skill_still_finds_it_by_words(
    agents, relay, settings
):
    from registry import embeddings

    settings.RELAY_EMBEDDINGS = False
    embeddings.reset()
    try:
        response = await relay.post(
            "/a2a/tasks/send",
            json={"skill": "write me a short document", "message": message("a memo")},
        )
    finally:
        embeddings.reset()
    assert response.status_code == 200, response.text
    chosen = response.json()["task"]["metadata"]["relaySelection"]
    assert (chosen["agentId"], chosen["search"]) == ("writer", "lexical")
