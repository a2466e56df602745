"""A team task whose relay process died is taken over like an agent's (issue 12): another
process claims it and the member task in flight, resumes the member task with its agent, and
the team task follows it (forwarding its events), records the hop and routes on to the next
member until the conversation ends.

The relay runs in this process (the gateway called directly); the members are real a2a-sdk
agents on 127.0.0.1. The death is simulated as the gateway's own takeover tests do: the job
driving the team task stops, and both tasks name a process whose lease ran out.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import pytest
from a2a.types import Part
from asgiref.sync import sync_to_async
from django.utils import timezone

from registry.extensions import CLIENT_ROUTING_URI as URI
from registry.services import agent_register
from registry.teams import team_create
from routing.demo.agents import TaskExecutor, build_agent_app, text_message
from routing.execution import team_target
from routing.models import RoutingHop
from tasks_app import gateway
from tasks_app.gateway import driving, supervisor
from tasks_app.models import RelayProcess, Task, TaskEvent
from tests.agents import Script, scripted_agent, task_spec
from tests.live import GATES, gated_agent, new_gate
from tests.servers import running_many

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("allow_private_urls"),
]

LEAD = Script("lead")
WAIT_SECONDS = 20.0


class AskThenGate(TaskExecutor):
    """Asks which gate (input-required); on the answer, works and streams one chunk of
    artifact "story" per item the test puts in that gate, completed on None."""

    async def work(self, context, updater) -> None:
        if context.current_task is None:
            await updater.requires_input(text_message(updater, "Which gate?"))
            return
        await updater.start_work()
        gate, index = GATES[context.get_user_input().strip()], 0
        while (chunk := await asyncio.to_thread(gate.get, True, WAIT_SECONDS)) is not None:
            await updater.add_artifact(
                [Part(text=chunk)], artifact_id="story", name="story", append=index > 0
            )
            index += 1
        await updater.complete(text_message(updater, "Released."))


ASKER = task_spec("asker", "Asker", "Asks which gate, then streams it.", AskThenGate)


@pytest.fixture(scope="module")
def agent_urls():
    with running_many(
        {
            "lead": scripted_agent(LEAD),
            "gated": gated_agent,
            "asker": lambda url: build_agent_app(ASKER, base_url=url),
        }
    ) as urls:
        yield urls


@pytest.fixture
def crew(agent_urls):
    for agent_id, url in agent_urls.items():
        agent_register(url=url, agent_id=agent_id)
    team_create(team_id="crew", name="Crew", members=["lead", "gated"], default_agent="lead")
    team_create(team_id="askers", name="Askers", members=["asker"], default_agent="asker")


def request(text: str) -> dict[str, Any]:
    return {"message": {"messageId": f"m-{text}", "role": "ROLE_USER", "parts": [{"text": text}]}}


async def until(check, what: str, seconds: float = WAIT_SECONDS):
    """Polls ``check`` (sync, run in the database thread) until it is truthy."""
    async with asyncio.timeout(seconds):
        while not (found := await sync_to_async(check)()):
            await asyncio.sleep(0.05)
    assert found, what
    return found


def dead_process() -> str:
    """A relay process whose lease ran out a minute ago."""
    return RelayProcess.objects.create(
        id="elsewhere:4242:dead",
        host="elsewhere",
        pid=4242,
        lease_expires_at=timezone.now() - timedelta(minutes=1),
    ).pk


def route(task_id: str) -> list[tuple[str, str, str, str]]:
    return [
        (hop.from_id, hop.to_id, hop.outcome, hop.next_id)
        for hop in RoutingHop.objects.filter(task_id=task_id).order_by("order")
    ]


async def die(team_id: str, child_id: str, events) -> None:
    """The process driving the team task "dies": its job stops where it is (the member's
    stream with it), and the lease both tasks name is gone."""
    await events.aclose()
    driving.stop(team_id)
    await asyncio.sleep(0.1)
    dead = await sync_to_async(dead_process)()
    await sync_to_async(Task.objects.filter(pk__in=[team_id, child_id]).update)(owner=dead)


async def test_a_team_task_whose_process_died_follows_its_member_and_routes_on(crew):
    LEAD.load("gated", "user")
    gate_name, gate = new_gate()
    # The lead passes the caller's text on as "lead: <text>": the gated member's gate.
    GATES[f"lead: {gate_name}"] = gate
    team = await sync_to_async(team_target)("crew")
    events = await gateway.stream_message(
        team, gateway.CallContext(caller=None), request(gate_name)
    )
    first = await anext(events)
    team_id = first["task"]["id"]
    gate.put("one ")

    def member_at_work():
        child = Task.objects.filter(parent_id=team_id, agent_id="gated").first()
        return child if child is not None and child.upstream_task_id and child.artifacts else None

    child = await until(member_at_work, "the gated member's first chunk")
    await until(lambda: Task.objects.get(pk=team_id).artifacts, "the chunk on the team task")
    await die(team_id, child.pk, events)
    assert await sync_to_async(route)(team_id) == [("user", "lead", "routed", "gated")]

    assert await supervisor.take_over_orphans() == 2
    await asyncio.sleep(0.5)  # the member task resubscribed to its agent
    gate.put("two ")
    gate.put(None)
    task = await until(
        lambda: Task.objects.filter(pk=team_id, state="completed").first(),
        "the team task completed",
    )

    assert await sync_to_async(route)(team_id) == [
        ("user", "lead", "routed", "gated"),
        ("lead", "gated", "routed", "lead"),
        ("gated", "lead", "replied", "user"),
    ]
    story = "".join(part["text"] for artifact in task.artifacts for part in artifact["parts"])
    assert story == "one two "
    assert task.owner == ""
    assert task.status_message["parts"][0]["text"].startswith("lead: ")
    # What came after the takeover names its member and hop, as before it.
    payloads = await sync_to_async(list)(
        TaskEvent.objects.filter(task_id=team_id)
        .order_by("sequence")
        .values_list("payload", flat=True)
    )
    chunks = [event["artifactUpdate"] for event in payloads if "artifactUpdate" in event]
    assert [chunk["artifact"]["parts"] for chunk in chunks] == [
        [{"text": "one "}],
        [{"text": "two "}],
    ]
    assert {
        (chunk["metadata"][URI]["member"], chunk["metadata"][URI]["hop"]) for chunk in chunks
    } == {("gated", 2)}
    final = payloads[-1]["statusUpdate"]
    assert final["metadata"][URI] == {"member": "lead", "hop": 3}


async def test_a_follow_up_turn_whose_process_died_is_followed_on_the_parked_members_task(
    crew, api_key
):
    gate_name, gate = new_gate()
    team = await sync_to_async(team_target)("askers")
    ctx = gateway.CallContext(caller=api_key[0])
    asked = [event async for event in await gateway.stream_message(team, ctx, request("hi"))]
    team_id = asked[0]["task"]["id"]
    assert asked[-1]["statusUpdate"]["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    follow_up = request(gate_name)
    follow_up["message"]["taskId"] = team_id
    events = await gateway.stream_message(team, ctx, follow_up)
    assert (await anext(events))["task"]["id"] == team_id  # the turn's job runs from here
    gate.put("one ")
    await until(lambda: Task.objects.get(pk=team_id).artifacts, "the chunk on the team task")
    child = await sync_to_async(Task.objects.get)(parent_id=team_id)
    await die(team_id, child.pk, events)

    assert await supervisor.take_over_orphans() == 2
    await asyncio.sleep(0.5)  # the member task resubscribed to its agent
    gate.put("two ")
    gate.put(None)
    task = await until(
        lambda: Task.objects.filter(pk=team_id, state="completed").first(),
        "the team task completed",
    )
    assert await sync_to_async(route)(team_id) == [
        ("user", "asker", "parked", "user"),
        ("user", "asker", "replied", "user"),
    ]
    story = "".join(part["text"] for artifact in task.artifacts for part in artifact["parts"])
    assert story == "one two "
    assert task.status_message["parts"] == [{"text": "Released."}]
    assert [message["parts"][0]["text"] for message in task.history] == [
        "hi",
        "Which gate?",
        gate_name,
        "Released.",
    ]


async def test_a_team_task_whose_process_died_between_hops_ends_failed_saying_why(crew):
    team = await sync_to_async(team_target)("crew")
    opened = await sync_to_async(gateway.open_task)(
        team, gateway.CallContext(caller=None), request("never sent")
    )
    dead = await sync_to_async(dead_process)()
    await sync_to_async(Task.objects.filter(pk=opened.task.pk).update)(owner=dead)

    assert await supervisor.take_over_orphans() == 1
    task = await until(
        lambda: Task.objects.filter(pk=opened.task.pk, state="failed").first(),
        "the team task failed",
    )
    assert "no member was at work" in task.error
