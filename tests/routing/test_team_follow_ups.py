"""A caller's follow-up on a team task, as on the agent's own task (issue 34, items 5, 6 and 8):
it goes to the member task it continues, an agent's answer to it is the caller's answer, and
its stream opens with the task as it now stands. The relay in-process over ASGI (JSON-RPC 1.0),
its members real a2a-sdk agents on 127.0.0.1."""

from __future__ import annotations

import json
from typing import Any

import pytest
from a2a.server.agent_execution import RequestContext
from a2a.server.tasks import TaskUpdater
from a2a.types import Part
from asgiref.sync import sync_to_async

from registry.models import Agent
from registry.services import agent_register
from registry.teams import team_create
from routing.demo.agents import TaskExecutor, app_factory, text_message
from routing.demo.serve import serve
from routing.models import RoutingHop
from tasks_app.gateway import driving
from tasks_app.models import Task
from tests.agents import input_required_agent, task_spec
from tests.live import Recording, eventually
from tests.routing.calls import relay_client, user_message

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("allow_private_urls"),
]

WAIT_SECONDS = 15.0


class Collects(TaskExecutor):
    """The first message of a task leaves it working ("Collecting."); a later message on the
    same task completes it with artifact "collected": the texts of every user message the
    task holds, joined with " + "."""

    async def work(self, context: RequestContext, updater: TaskUpdater) -> None:
        task = context.current_task
        if task is None or not [m for m in task.history if m.role == 1]:
            await updater.start_work(text_message(updater, "Collecting."))
            return
        texts = [
            part.text
            for message in [*task.history, context.message]
            if message is not None and message.role == 1
            for part in message.parts
            if part.text
        ]
        collected = " + ".join(dict.fromkeys(texts))
        await updater.add_artifact(
            [Part(text=collected)], artifact_id="collected", name="collected", last_chunk=True
        )
        await updater.complete(text_message(updater, collected))


COLLECTOR = Recording(app_factory(task_spec("collector", "Collector", "Collects.", Collects)))


@pytest.fixture
async def relay(api_key):
    async with relay_client(api_key, timeout=WAIT_SECONDS) as client:
        yield client


async def call(relay, path: str, method: str, message: dict[str, Any]) -> dict[str, Any]:
    response = await relay.post(
        path,
        json={"jsonrpc": "2.0", "id": 1, "method": method, "params": {"message": message}},
    )
    assert response.status_code == 200, response.text
    return response.json()


def sse_results(text: str) -> list[dict[str, Any]]:
    return [
        json.loads(line[len("data: ") :])["result"]
        for line in text.splitlines()
        if line.startswith("data: ")
    ]


def make_team(team_id: str, member: str) -> None:
    team_create(team_id=team_id, name=team_id, members=[member], default_agent=member)


def sent_messages(recording: Recording) -> list[dict[str, Any]]:
    return [
        request.json()["params"]["message"]
        for request in recording.posts()
        if request.json().get("method") in ("SendMessage", "SendStreamingMessage")
    ]


# --- item 5: a follow-up while the member works ---------------------------------------------


async def test_a_follow_up_while_the_member_works_continues_its_member_task(relay, caplog):
    """Regression: the follow-up opened a second member task in a new context, and when both
    ended the driver crashed on the hop order (IntegrityError hop_order_per_task)."""
    COLLECTOR.requests.clear()
    with serve(COLLECTOR) as server:
        await sync_to_async(agent_register)(url=server.url, agent_id="collector")
        await sync_to_async(make_team)("collectors", "collector")

        first = await call(relay, "/a2a/teams/collectors/", "SendMessage", user_message("one"))
        team_task = first["result"]["task"]
        assert team_task["status"]["state"] == "TASK_STATE_WORKING"
        answer = await call(
            relay,
            "/a2a/teams/collectors/",
            "SendMessage",
            user_message("two", taskId=team_task["id"]),
        )

        assert "result" in answer, answer
        done = answer["result"]["task"]
        assert done["id"] == team_task["id"]
        assert done["status"]["state"] == "TASK_STATE_COMPLETED"
        assert [a["parts"] for a in done["artifacts"]] == [[{"text": "one + two"}]]

        await eventually(
            lambda: not driving.running(team_task["id"]), "both calls over", timeout=WAIT_SECONDS
        )
        first_sent, second_sent = sent_messages(COLLECTOR)
        # The agent's own path, for comparison: one task with both messages.
        alone = await call(relay, "/a2a/agents/collector/", "SendMessage", user_message("one"))
        alone = await call(
            relay,
            "/a2a/agents/collector/",
            "SendMessage",
            user_message("two", taskId=alone["result"]["task"]["id"]),
        )
        assert [a["parts"] for a in alone["result"]["task"]["artifacts"]] == [
            [{"text": "one + two"}]
        ]

    # One member task, continued: the agent got the follow-up on its task, in its context.
    children = [t async for t in Task.objects.filter(parent_id=team_task["id"])]
    assert len(children) == 1
    assert "taskId" not in first_sent
    assert second_sent["taskId"] == children[0].upstream_task_id
    assert second_sent["contextId"] == children[0].upstream_context_id
    # Each hop recorded once, in order (the call the follow-up overtook ends with it), on that
    # member task; the driver did not crash on the hop order.
    hops = [hop async for hop in RoutingHop.objects.filter(task_id=team_task["id"])]
    assert sorted(hop.order for hop in hops) == list(range(1, len(hops) + 1))
    assert {(hop.to_id, hop.upstream_task_id) for hop in hops} == {
        ("collector", children[0].upstream_task_id)
    }
    assert "driving task" not in caplog.text
    stored = await Task.objects.aget(pk=team_task["id"])
    assert stored.state == "completed"


# --- item 6: a follow-up the restarted member no longer knows --------------------------------


async def test_a_follow_up_the_restarted_member_forgot_is_its_answer_not_a_health_failure(
    relay, settings
):
    """Regression: after its agent restarted and forgot its tasks, a one-member team failed
    every follow-up with a task of its own, and such answers counted as failed calls, while
    the agent's path answered the agent's TaskNotFound. The team answers as the agent does,
    and its member stays callable."""
    follow_ups = settings.RELAY_BREAKER_FAILURES + 1
    server = serve(input_required_agent)
    try:
        await sync_to_async(agent_register)(url=server.url, agent_id="asks")
        await sync_to_async(make_team)("askers", "asks")
        parked = []
        for path in ["/a2a/agents/asks/"] + ["/a2a/teams/askers/"] * follow_ups:
            answer = await call(relay, path, "SendMessage", user_message("greet someone"))
            assert answer["result"]["task"]["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
            parked.append((path, answer["result"]["task"]["id"]))
        port = server.port
        server.stop()
        server = serve(input_required_agent, port=port)  # the same agent, its tasks forgotten

        errors = []
        for path, task_id in parked:
            answer = await call(relay, path, "SendMessage", user_message("Ada", taskId=task_id))
            assert "error" in answer, answer
            errors.append((answer["error"]["code"], answer["error"]["data"][0]["reason"]))
        agent = await Agent.objects.aget(pk="asks")
        fresh = await call(relay, "/a2a/teams/askers/", "SendMessage", user_message("greet me"))
    finally:
        server.stop()

    # The agent's answer, through the team as through the agent: the task is unknown to it.
    assert errors == [(-32001, "TASK_NOT_FOUND")] * (follow_ups + 1)
    # The tasks wait as they did, on both paths; the member is not counted as failing.
    states = {t.state async for t in Task.objects.filter(pk__in=[t for _, t in parked])}
    assert states == {"input-required"}
    assert (agent.breaker_state, agent.breaker_failures) == (Agent.Breaker.CLOSED, 0)
    assert fresh["result"]["task"]["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"


# --- item 8: a follow-up stream opens with the task as it now stands --------------------------


def state_of(event: dict[str, Any]) -> str:
    return (next(iter(event.values())).get("status") or {}).get("state", "")


@pytest.mark.parametrize("path", ["/a2a/teams/askers/", "/a2a/agents/asks/"], ids=["team", "agent"])
async def test_a_follow_up_stream_opens_with_the_task_working_not_its_old_question(relay, path):
    """Regression: the stream of the caller's answer to a question opened with the task still
    input-required, a snapshot of before the answer: a client that stops at an interrupted
    state stopped there, before the member's new state."""
    with serve(input_required_agent) as server:
        await sync_to_async(agent_register)(url=server.url, agent_id="asks")
        await sync_to_async(make_team)("askers", "asks")
        asked = await call(relay, path, "SendMessage", user_message("greet someone"))
        task_id = asked["result"]["task"]["id"]
        response = await relay.post(
            path,
            json={
                "jsonrpc": "2.0",
                "id": 1,
                "method": "SendStreamingMessage",
                "params": {"message": user_message("Ada", taskId=task_id)},
            },
        )
    events = sse_results(response.text)

    assert list(events[0]) == ["task"]
    assert events[0]["task"]["id"] == task_id
    assert [state_of(event) for event in events if state_of(event)] == [
        "TASK_STATE_WORKING",
        "TASK_STATE_COMPLETED",
    ]
    assert [next(iter(event)) for event in events] == ["task", "artifactUpdate", "statusUpdate"]
    assert events[1]["artifactUpdate"]["artifact"]["parts"] == [{"text": "Hello, Ada!"}]
