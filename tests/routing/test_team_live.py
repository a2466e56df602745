"""Teams on a relay of real processes (daphne, its own SQLite file), for what needs two calls at
once: a caller streaming the conversation while it goes on, and a cancel mid-conversation.
The members are real a2a-sdk agents on 127.0.0.1."""

from __future__ import annotations

import asyncio
import json
import queue
import uuid
from typing import Any

import httpx
import pytest
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.utils.errors import UnsupportedOperationError
from httpx_sse import aconnect_sse

from registry.extensions import CLIENT_ROUTING_URI as URI
from routing.demo.agents import AgentSpec, Answer, Skill, agent_message, build_agent_app
from tests.agents import Script, never_finishing_agent, scripted_agent
from tests.live import CALL_SECONDS, Recording, eventually, live_relay, manage

STREAM_SECONDS = 20.0
GATE_SECONDS = 20.0
LEAD = Script("lead")
GATE: queue.Queue = queue.Queue()
NEVER = Recording(never_finishing_agent)


class GatedWorker(AgentExecutor):
    """Answers "gated: <text>" with no routing decision, once the test puts an item in GATE."""

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        await asyncio.to_thread(GATE.get, True, GATE_SECONDS)
        answer = Answer(f"gated: {context.get_user_input()}")
        await event_queue.enqueue_event(agent_message(context, answer))

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        raise UnsupportedOperationError(message="answers with messages")


GATED = AgentSpec(
    slug="gated",
    name="Gated",
    description="Answers when the test says so.",
    skills=(Skill(id="gated", name="Gated", description="Waits.", tags=("wait",)),),
    make_executor=GatedWorker,
    client_routing=True,
)


@pytest.fixture(scope="module")
def relay(tmp_path_factory):
    with live_relay(tmp_path_factory.mktemp("team-relay")) as live:
        live.serve_agent("lead", scripted_agent(LEAD))
        live.serve_agent("gated", lambda url: build_agent_app(GATED, base_url=url))
        live.serve_agent("never", NEVER)
        manage(
            live.env,
            "shell",
            "-c",
            "from registry.teams import team_create; team_create(team_id='crew', "
            "name='Crew', members=['lead', 'gated', 'never'], default_agent='lead'); "
            "team_create(team_id='slow', name='Slow', members=['gated', 'lead'], "
            "default_agent='gated')",
        )
        yield live


def rpc(method: str, params: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}


def user_message(text: str) -> dict[str, Any]:
    return {
        "messageId": f"m-{uuid.uuid4().hex[:10]}",
        "role": "ROLE_USER",
        "parts": [{"text": text}],
    }


def origin_of(update: dict[str, Any]) -> tuple[str, int]:
    """(member, hop) a team's forwarded event names in its ``metadata[URI]``."""
    origin = update["metadata"][URI]
    return origin["member"], origin["hop"]


async def test_a_streaming_caller_sees_each_hop_while_the_conversation_goes_on(relay):
    LEAD.load("gated", "user")
    headers = {**relay.auth(), "A2A-Version": "1.0", "Content-Type": "application/json"}
    body = json.dumps(rpc("SendStreamingMessage", {"message": user_message("slowly")}))
    async with (
        httpx.AsyncClient(base_url=relay.url, timeout=STREAM_SECONDS) as client,
        asyncio.timeout(STREAM_SECONDS),
        aconnect_sse(client, "POST", "/a2a/teams/crew/", headers=headers, content=body) as source,
    ):
        events = source.aiter_sse()
        first = json.loads((await anext(events)).data)["result"]
        # The team's task comes first, as an agent's would, then each member's events as they
        # happen, each naming the member and the hop.
        assert list(first) == ["task"]
        assert first["task"]["status"]["state"] == "TASK_STATE_SUBMITTED"
        lead = json.loads((await anext(events)).data)["result"]["statusUpdate"]
        # The lead answered; the gated member has not: the first hop's answer is already here.
        assert origin_of(lead) == ("lead", 1)
        assert lead["status"]["state"] == "TASK_STATE_WORKING"
        GATE.put("go")
        updates = []
        async for event in events:
            if event.data:
                updates.append(json.loads(event.data)["result"]["statusUpdate"])
    assert [origin_of(update) for update in updates] == [("gated", 2), ("lead", 3)]
    assert [update["status"]["state"] for update in updates] == [
        "TASK_STATE_WORKING",
        "TASK_STATE_COMPLETED",
    ]
    assert updates[-1]["status"]["message"]["parts"] == [{"text": "lead: gated: lead: slowly"}]
    async with httpx.AsyncClient(base_url=relay.url, timeout=CALL_SECONDS) as client:
        trace = await client.get(f"/a2a/tasks/{first['task']['id']}/trace", headers=relay.auth())
    trace = trace.json()["hops"]
    assert [(hop["order"], hop["from"], hop["to"]) for hop in trace] == [
        (1, "user", "lead"),
        (2, "lead", "gated"),
        (3, "gated", "lead"),
    ]


async def test_a_team_stream_gives_its_task_before_the_first_member_answers(relay):
    """Regression: nothing streamed until a member finished, so the caller had no task id to
    cancel or resubscribe with."""
    headers = {**relay.auth(), "A2A-Version": "1.0", "Content-Type": "application/json"}
    body = json.dumps(rpc("SendStreamingMessage", {"message": user_message("patiently")}))
    async with (
        httpx.AsyncClient(base_url=relay.url, timeout=STREAM_SECONDS) as client,
        aconnect_sse(client, "POST", "/a2a/teams/slow/", headers=headers, content=body) as source,
    ):
        events = source.aiter_sse()
        async with asyncio.timeout(1.0):  # the gated member has not answered: its gate is shut
            first = json.loads((await anext(events)).data)["result"]
        assert first["task"]["status"]["state"] == "TASK_STATE_SUBMITTED"
        team_task = first["task"]["id"]
        GATE.put("go")
        last = None
        async with asyncio.timeout(STREAM_SECONDS):
            async for event in events:
                if event.data:
                    last = json.loads(event.data)["result"]
    assert last["statusUpdate"]["taskId"] == team_task
    assert last["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"


async def test_cancel_mid_conversation_cancels_the_team_task_and_the_member_task_upstream(relay):
    LEAD.load("never")
    headers = {**relay.auth(), "A2A-Version": "1.0"}
    async with httpx.AsyncClient(
        base_url=relay.url, headers=headers, timeout=CALL_SECONDS
    ) as client:
        started = (
            await client.post(
                "/a2a/teams/crew/",
                json=rpc(
                    "SendMessage",
                    {
                        "message": user_message("work forever"),
                        "configuration": {"returnImmediately": True},
                    },
                ),
            )
        ).json()["result"]["task"]

        async def working_member_task():
            listed = (
                await client.post(
                    "/a2a/agents/never/", json=rpc("ListTasks", {"status": "TASK_STATE_WORKING"})
                )
            ).json()["result"]["tasks"]
            return listed[0] if listed else None

        child = await eventually(working_member_task, "the member working", timeout=STREAM_SECONDS)
        canceled = await client.post(f"/a2a/tasks/{started['id']}/cancel")
        assert canceled.status_code == 200, canceled.text
        assert canceled.json()["status"]["state"] == "TASK_STATE_CANCELED"

        async def member_task_state():
            task = (await client.get(f"/a2a/tasks/{child['id']}")).json()
            return (
                task["status"]["state"] if task["status"]["state"] != "TASK_STATE_WORKING" else None
            )

        assert (
            await eventually(member_task_state, "the member task ending", timeout=STREAM_SECONDS)
            == "TASK_STATE_CANCELED"
        )
        team_task = (await client.get(f"/a2a/tasks/{started['id']}")).json()
        trace = (await client.get(f"/a2a/tasks/{started['id']}/trace")).json()["hops"]
    assert team_task["status"]["state"] == "TASK_STATE_CANCELED"
    assert (trace[0]["from"], trace[0]["to"], trace[0]["next"]) == ("user", "lead", "never")
    assert any(request.json().get("method") == "CancelTask" for request in NEVER.posts())
