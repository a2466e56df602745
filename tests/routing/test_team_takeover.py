"""A team task whose relay process died is taken over like an agent's (issue 12): another
process claims it and the member task in flight, resumes the member task with its agent, and
the team task follows it (forwarding its events), records the hop and routes on to the next
member until the conversation ends, as the dead process would have: the later members get the
caller's request metadata and extensions and its call's mode (blocking or streaming), the
handoffs the member was given hold, and what was forwarded before is not sent again.

The relay runs in this process (the gateway called directly); the members are real a2a-sdk
agents on 127.0.0.1. The death is simulated as the gateway's own takeover tests do: the job
driving the team task stops, and both tasks name a process whose lease ran out.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from typing import Any

import pytest
from a2a.types import Part
from asgiref.sync import sync_to_async

from registry.extensions import CLIENT_ROUTING_URI as URI
from registry.services import agent_register
from registry.teams import team_create
from routing import services
from routing.demo.agents import TaskExecutor, build_agent_app, text_message
from routing.models import RoutingHop
from routing.team_loading import team_target
from tasks_app import gateway
from tasks_app.gateway import driving, supervisor
from tasks_app.models import Task, TaskEvent
from tests.agents import Script, scripted_agent, task_spec
from tests.live import GATES, Recording, gated_agent, new_gate
from tests.routing.calls import dead_process, until
from tests.servers import running_many

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("allow_private_urls"),
]

LEAD = Script("lead")
HELPER = Script("helper")
LEAD_CALLS = Recording(scripted_agent(LEAD))
TRACING = "https://example.com/extensions/tracing/v1"
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


class GateThenHelper(TaskExecutor):
    """Streams one chunk of artifact "notes" per item put in the gate its message names
    ("lead: <gate>"); on None completes, naming "helper" as the recipient of its answer."""

    async def work(self, context, updater) -> None:
        await updater.start_work()
        gate, index = GATES[context.get_user_input().strip()], 0
        while (chunk := await asyncio.to_thread(gate.get, True, WAIT_SECONDS)) is not None:
            await updater.add_artifact(
                [Part(text=chunk)], artifact_id="notes", name="notes", append=index > 0
            )
            index += 1
        answer = updater.new_agent_message(
            [Part(text="Over to the helper.")], metadata={URI: {"recipient": "helper"}}
        )
        await updater.complete(answer)


ROUTER = dataclasses.replace(
    task_spec(
        "router", "Router", "Works until its gate closes, then names the helper.", GateThenHelper
    ),
    client_routing=True,
)


@pytest.fixture(scope="module")
def agent_urls():
    with running_many(
        {
            "lead": LEAD_CALLS,
            "gated": gated_agent,
            "asker": lambda url: build_agent_app(ASKER, base_url=url),
            "router": lambda url: build_agent_app(ROUTER, base_url=url),
            "helper": scripted_agent(HELPER),
        }
    ) as urls:
        yield urls


@pytest.fixture
def crew(agent_urls):
    for agent_id, url in agent_urls.items():
        agent_register(url=url, agent_id=agent_id)
    team_create(team_id="crew", name="Crew", members=["lead", "gated"], default_agent="lead")
    team_create(team_id="askers", name="Askers", members=["asker"], default_agent="asker")
    team_create(
        team_id="handing",
        name="Handing",
        members=["lead", "router", "helper"],
        default_agent="lead",
    )


def request(text: str) -> dict[str, Any]:
    return {"message": {"messageId": f"m-{text}", "role": "ROLE_USER", "parts": [{"text": text}]}}


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


def lead_calls() -> list:
    """The message calls the lead received (JSON-RPC 1.0: SendMessage, SendStreamingMessage)."""
    return [
        call
        for call in LEAD_CALLS.posts()
        if call.json().get("method") in ("SendMessage", "SendStreamingMessage")
    ]


def chunks_of(task_id: str) -> list[tuple[str, list]]:
    """The team task's artifact events, in order: (artifact id, parts)."""
    return [
        (
            event["artifactUpdate"]["artifact"]["artifactId"],
            event["artifactUpdate"]["artifact"]["parts"],
        )
        for event in TaskEvent.objects.filter(task_id=task_id)
        .order_by("sequence")
        .values_list("payload", flat=True)
        if "artifactUpdate" in event
    ]


async def test_after_a_takeover_later_members_get_the_callers_context_called_blocking(crew):
    """The caller called the team blocking, with request metadata and an extension: the
    member called after the takeover gets them, and a blocking call, as it would have. (The
    gated member, called blocking, had not named its task when the process died: its task
    ends failed on the takeover, and that failure goes on to the default agent, the lead.)"""
    LEAD.load("gated", None)
    LEAD_CALLS.requests.clear()
    gate_name, gate = new_gate()
    GATES[f"lead: {gate_name}"] = gate
    metadata = {"trace": {"id": "t-42", "sampled": True}}
    team = await sync_to_async(team_target)("crew")
    ctx = gateway.CallContext(caller=None, extensions=(TRACING,))
    call = asyncio.create_task(
        gateway.send_message(team, ctx, {**request(gate_name), "metadata": metadata})
    )
    try:
        child = await until(
            lambda: Task.objects.filter(target_id="gated", parent__isnull=False).first(),
            "the gated member's task",
        )
        team_id = child.parent_id
        await until(lambda: len(lead_calls()) == 1, "the lead's first call")
        await asyncio.sleep(0.3)  # the gated member has its blocking call
        call.cancel()
        with contextlib.suppress(BaseException):
            await call
        driving.stop(team_id)
        await asyncio.sleep(0.1)
        dead = await sync_to_async(dead_process)()
        await sync_to_async(Task.objects.filter(pk__in=[team_id, child.pk]).update)(owner=dead)

        assert await supervisor.take_over_orphans() == 2
        task = await until(
            lambda: Task.objects.filter(pk=team_id, state="completed").first(),
            "the team task completed",
        )
    finally:
        gate.put(None)
    assert await sync_to_async(route)(team_id) == [
        ("user", "lead", "routed", "gated"),
        ("lead", "gated", "failed", "lead"),
        ("gated", "lead", "replied", "user"),
    ]
    assert task.status_message["parts"][0]["text"].startswith("lead: ")
    first, after = lead_calls()
    for each in (first, after):
        assert each.json()["method"] == "SendMessage"
        assert each.json()["params"]["metadata"] == metadata
        assert each.headers["a2a-extensions"].split(", ") == [TRACING, URI]


async def test_after_a_takeover_the_handoffs_the_member_was_given_still_hold(crew):
    """The lead hands the router over with no handoffs (it may route to no other member);
    the router's answer naming the helper, taken over, is refused as before: it goes to the
    default agent with a routing error, never to the helper."""
    LEAD.load({"recipient": "router", "handoffs": []}, None)
    HELPER.load()
    gate_name, gate = new_gate()
    GATES[f"lead: {gate_name}"] = gate
    team = await sync_to_async(team_target)("handing")
    events = await gateway.stream_message(
        team, gateway.CallContext(caller=None), request(gate_name)
    )
    team_id = (await anext(events))["task"]["id"]
    gate.put("first notes")

    def member_at_work():
        child = Task.objects.filter(parent_id=team_id, agent_id="router").first()
        return child if child is not None and child.upstream_task_id and child.artifacts else None

    child = await until(member_at_work, "the router's first chunk")
    await until(lambda: Task.objects.get(pk=team_id).artifacts, "the chunk on the team task")
    await die(team_id, child.pk, events)
    assert await supervisor.take_over_orphans() == 2
    await asyncio.sleep(0.5)  # the member task resubscribed to its agent
    gate.put(None)
    await until(
        lambda: Task.objects.filter(pk=team_id, state="completed").first(),
        "the team task completed",
    )

    assert await sync_to_async(route)(team_id) == [
        ("user", "lead", "routed", "router"),
        ("lead", "router", "routed", "lead"),
        ("router", "lead", "replied", "user"),
    ]
    assert HELPER.received == []
    # The lead's hop keeps the handoffs its answer gave (the trace shows them).
    hops = await sync_to_async(list)(RoutingHop.objects.filter(task_id=team_id).order_by("order"))
    assert [services.hop_as_json(hop)["handoffs"] for hop in hops] == [[], None, None]
    refused = LEAD.received[1][1]["routingError"]
    assert "not among the handoffs 'router' was given" in refused
    # The chunk forwarded before the takeover is not sent again when the member's task ends.
    assert await sync_to_async(chunks_of)(team_id) == [("notes", [{"text": "first notes"}])]
