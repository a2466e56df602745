"""A workflow as a team member, end to end: the relay in-process over ASGI, called with the
a2a-sdk client at /a2a/teams/{id}/; the team's default agent (a real a2a-sdk agent that
speaks client routing) hands the caller's message to a workflow member of two agent steps
(real a2a-sdk agents on 127.0.0.1), whose output comes back to it and goes on to the caller."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest
from a2a.client import ClientConfig, create_client
from a2a.client.card_resolver import parse_agent_card
from a2a.types import Message, Part, Role, SendMessageRequest, TaskState
from asgiref.sync import sync_to_async

from registry.services import agent_register
from registry.teams import team_create
from routing import services
from routing.demo.agents import AgentSpec, Answer, AnsweringExecutor, Skill, build_agent_app
from routing.models import TeamWorkflowMember
from routing.workflows.services import workflow_import
from tasks_app.models import Task
from tests.routing.workflows import workflow_agents as wa
from tests.servers import running_many

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("allow_private_urls"),
]

WAIT_SECONDS = 20.0
PAIR = """
name: Draft and check
slug: draft-and-check
description: Drafts an answer, then checks it.
steps:
  - agent: drafter
  - agent: checker
    input: "{{.drafter}}"
"""
FRONT_RECEIVED: list[tuple[str, dict[str, Any] | None]] = []
FRONT_TO = ["draft-and-check"]
"""The workflow member the front desk hands the caller's messages to."""


def front_answer(text: str, routing: dict[str, Any] | None) -> Answer:
    """The first message goes to the workflow member; what comes back goes to the caller as
    it is."""
    FRONT_RECEIVED.append((text, routing))
    if len(FRONT_RECEIVED) % 2:
        return Answer(f"front: {text}", {"recipient": FRONT_TO[0], "reason": "a draft"})
    return Answer(text, {"recipient": "user"})


def front(base_url: str):
    spec = AgentSpec(
        slug="front",
        name="Front desk",
        description="Hands every question to the draft-and-check workflow.",
        skills=(Skill(id="front", name="front", description="Routes.", tags=("front",)),),
        make_executor=lambda: AnsweringExecutor(front_answer),
        client_routing=True,
    )
    return build_agent_app(spec, base_url=base_url)


AGENTS = {
    "front": front,
    "drafter": wa.answering("drafter"),
    "checker": wa.answering("checker"),
    "asks": wa.asks("asks"),
}


@pytest.fixture(scope="module")
def agent_urls():
    with running_many(AGENTS) as urls:
        yield urls


@pytest.fixture(autouse=True)
def registered(agent_urls, allow_private_urls):
    wa.CALLS.clear()
    FRONT_RECEIVED.clear()
    FRONT_TO[:] = ["draft-and-check"]
    for agent_id, url in agent_urls.items():
        agent_register(url=url, agent_id=agent_id)


def desk_with_workflow() -> None:
    workflow_import(text=PAIR)
    team_create(team_id="desk", name="Desk", members=["front"], default_agent="front")
    services.team_workflows_set(team_id="desk", workflows=[("draft-and-check", 1, True)])


async def test_a_workflow_member_answers_with_its_output_and_shows_in_the_trace(api_key):
    from relay_project.asgi import application

    await sync_to_async(desk_with_workflow)()
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=application),
        base_url="http://testserver",
        headers={"Authorization": f"Bearer {api_key[1]}"},
        timeout=WAIT_SECONDS,
    ) as http:
        card = (await http.get("/a2a/teams/desk/.well-known/agent-card.json")).json()
        parsed = parse_agent_card(card)
        client = await create_client(
            parsed,
            ClientConfig(
                httpx_client=http, supported_protocol_bindings=["JSONRPC"], streaming=False
            ),
        )
        message = Message(message_id="m-desk-1", role=Role.ROLE_USER, parts=[Part(text="Tides?")])
        async with asyncio.timeout(WAIT_SECONDS):
            events = [e async for e in client.send_message(SendMessageRequest(message=message))]
        trace = (await http.get(f"/a2a/tasks/{events[-1].task.id}/trace")).json()

    task = events[-1].task
    assert task.status.state == TaskState.TASK_STATE_COMPLETED, task
    answer = "".join(part.text for part in task.status.message.parts)
    assert answer == "checker: drafter: front: Tides?"
    # Each step's agent was called once, the second with the first's output.
    assert wa.CALLS.received == {
        "drafter": ["front: Tides?"],
        "checker": ["drafter: front: Tides?"],
    }
    # The default agent got the workflow's output once (its artifacts are not repeated).
    assert FRONT_RECEIVED[1][0] == "checker: drafter: front: Tides?"
    hops = [(hop["from"], hop["to"], hop["outcome"], hop["next"]) for hop in trace["hops"]]
    assert hops == [
        ("user", "front", "routed", "draft-and-check"),
        ("front", "draft-and-check", "routed", "front"),
        ("draft-and-check", "front", "replied", "user"),
    ]
    children = await sync_to_async(
        lambda: sorted(
            Task.objects.filter(parent_id=task.id).values_list("target_kind", "target_id")
        )
    )()
    assert ("workflow", "draft-and-check") in children


async def test_the_default_agent_is_offered_the_workflow_member_as_a_peer(api_key):
    from relay_project.asgi import application

    await sync_to_async(desk_with_workflow)()
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=application),
        base_url="http://testserver",
        headers={"Authorization": f"Bearer {api_key[1]}", "A2A-Version": "1.0"},
        timeout=WAIT_SECONDS,
    ) as http:
        body = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "SendMessage",
            "params": {
                "message": {"messageId": "m-2", "role": "ROLE_USER", "parts": [{"text": "Hi"}]}
            },
        }
        response = await http.post("/a2a/teams/desk/", json=body)
    assert response.json()["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
    routing = FRONT_RECEIVED[0][1] or {}
    (peer,) = routing.get("agentCards", [])
    assert peer["id"] == "draft-and-check", routing
    assert peer["name"] == "Draft and check"
    assert peer["description"] == "Drafts an answer, then checks it."


def test_a_workflow_with_the_id_of_an_agent_member_is_refused(agent_urls):
    workflow_import(text=PAIR.replace("slug: draft-and-check", "slug: front"))
    team_create(team_id="desk", name="Desk", members=["front"], default_agent="front")

    with pytest.raises(services.WorkflowMemberClash, match="'front'"):
        services.team_workflows_set(team_id="desk", workflows=[("front", 1, True)])
    assert not TeamWorkflowMember.objects.exists()


ASKING = """
name: Ask then check
slug: ask-then-check
steps:
  - agent: asks
  - agent: checker
    input: "{{.asks}}"
"""


async def test_a_workflow_member_that_asks_parks_the_team_and_the_answer_resumes_it(api_key):
    from relay_project.asgi import application

    def desk() -> None:
        workflow_import(text=ASKING)
        team_create(team_id="desk", name="Desk", members=["front"], default_agent="front")
        services.team_workflows_set(team_id="desk", workflows=[("ask-then-check", 1, True)])

    await sync_to_async(desk)()
    FRONT_TO[:] = ["ask-then-check"]
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=application),
        base_url="http://testserver",
        headers={"Authorization": f"Bearer {api_key[1]}", "A2A-Version": "1.0"},
        timeout=WAIT_SECONDS,
    ) as http:

        async def send(message: dict[str, Any]) -> dict[str, Any]:
            body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage"}
            response = await http.post(
                "/a2a/teams/desk/", json={**body, "params": {"message": message}}
            )
            return response.json()["result"]["task"]

        first = await send({"messageId": "m-a", "role": "ROLE_USER", "parts": [{"text": "close"}]})
        assert first["status"]["state"] == "TASK_STATE_INPUT_REQUIRED", first
        assert first["status"]["message"]["parts"][0]["text"] == "Which account?"
        answer = {
            "messageId": "m-b",
            "role": "ROLE_USER",
            "parts": [{"text": "42"}],
            "taskId": first["id"],
        }
        second = await send(answer)

    assert second["status"]["state"] == "TASK_STATE_COMPLETED", second
    assert second["status"]["message"]["parts"][0]["text"] == "checker: asks: account 42"
    assert wa.CALLS.received == {
        "asks": ["front: close", "42"],
        "checker": ["asks: account 42"],
    }
