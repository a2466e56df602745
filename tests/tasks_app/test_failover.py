"""Failover to an agent's alternates (docs/concepts/retries.md): the first send of a task goes
to the next alternate when the agent it names is down (refusing connections after its
retries, unhealthy, or behind an open circuit breaker); the task records who served it, and
its follow-ups go there. In-process over ASGI, against real agents on 127.0.0.1."""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async

from registry.models import Agent, AgentAlternate
from routing.demo.agents import WRITER
from routing.demo.serve import serve
from tasks_app.gateway import forget_agent_targets
from tasks_app.models import Task
from tests.agents import ASKS_FOR_INPUT, input_required_agent
from tests.live import Recording
from tests.servers import closed_port_url, running
from tests.tasks_app.a2a_http import REST_1, call, card_document
from tests.tasks_app.test_send_retries import Front, writer_app

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("allow_private_urls"),
]


def register(url: str, spec=WRITER, *, alternates=(), **fields) -> str:
    from tests.factories import make_agent

    agent = make_agent(document=card_document(url, spec))
    Agent.objects.filter(pk=agent.pk).update(retry_base_delay_ms=10, **fields)
    for order, alternate in enumerate(alternates):
        AgentAlternate.objects.create(agent_id=agent.pk, alternate_id=alternate, order=order)
    return agent.pk


def send(text: str = "a poem", **message_fields):
    message = {"messageId": f"m-{text}", "role": "ROLE_USER", "parts": [{"text": text}]}
    return REST_1.send({**message, **message_fields})


async def test_a_primary_that_refuses_is_served_by_its_alternate(asgi_relay):
    alternate = Recording(writer_app)
    with running(alternate) as alternate_url:
        alternate_id = await sync_to_async(register)(alternate_url)
        primary_id = await sync_to_async(register)(
            closed_port_url(), alternates=[alternate_id], retry_attempts=2
        )
        response = await call(asgi_relay, primary_id, send(), REST_1.headers())
    task = response.json()["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED", response.text
    selection = task["metadata"]["relaySelection"]
    assert (selection["agentId"], selection["failoverFrom"]) == (alternate_id, primary_id)
    assert selection["passed"][0]["agentId"] == primary_id
    assert "refused" in selection["passed"][0]["reason"]
    # The primary's two tries are on the task too.
    assert [a["reason"] for a in task["metadata"]["relayAttempts"]] == ["refused", "refused"]
    stored = await Task.objects.aget(pk=task["id"])
    assert (stored.target_id, stored.agent_id) == (primary_id, alternate_id)
    assert len(alternate.posts()) == 1
    scraped = (await asgi_relay.get("/metrics")).text
    counted = f'relay_agent_failovers_total{{agent="{primary_id}",kind="alternate",to="{alternate_id}"}} 1.0'
    assert counted in scraped


async def test_the_follow_up_goes_to_the_alternate_that_served(asgi_relay):
    primary_url = closed_port_url()
    primary = Recording(input_required_agent)
    alternate = Recording(input_required_agent)
    with running(alternate) as alternate_url:
        alternate_id = await sync_to_async(register)(alternate_url, ASKS_FOR_INPUT)
        primary_id = await sync_to_async(register)(
            primary_url, ASKS_FOR_INPUT, alternates=[alternate_id], retry_attempts=1
        )
        first = (await call(asgi_relay, primary_id, send("hi"), REST_1.headers())).json()["task"]
        assert first["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
        # The primary is back; the task still lives on the alternate.
        with serve(primary, port=int(primary_url.rsplit(":", 1)[1])):
            answer = await call(
                asgi_relay, primary_id, send("Ada", taskId=first["id"]), REST_1.headers()
            )
            fetched = await call(
                asgi_relay, primary_id, REST_1.get_task(first["id"]), {**REST_1.headers()}
            )
    task = answer.json()["task"]
    assert task["id"] == first["id"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED", answer.text
    assert task["artifacts"][0]["parts"][0]["text"] == "Hello, Ada!"
    assert fetched.json()["metadata"]["relaySelection"]["agentId"] == alternate_id
    assert len(alternate.posts()) == 2
    assert primary.posts() == []


async def test_an_unhealthy_primary_is_passed_over_without_a_call(asgi_relay):
    primary, alternate = Recording(writer_app), Recording(writer_app)
    with running(primary) as primary_url, running(alternate) as alternate_url:
        alternate_id = await sync_to_async(register)(alternate_url)
        primary_id = await sync_to_async(register)(
            primary_url, alternates=[alternate_id], health=Agent.Health.UNHEALTHY
        )
        response = await call(asgi_relay, primary_id, send(), REST_1.headers())
    task = response.json()["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED", response.text
    assert task["metadata"]["relaySelection"]["passed"] == [
        {"agentId": primary_id, "reason": f"agent {primary_id!r} is unhealthy"}
    ]
    assert primary.posts() == [] and len(alternate.posts()) == 1


async def test_a_primary_behind_an_open_breaker_is_passed_over(asgi_relay):
    from django.utils import timezone

    primary, alternate = Recording(writer_app), Recording(writer_app)
    with running(primary) as primary_url, running(alternate) as alternate_url:
        alternate_id = await sync_to_async(register)(alternate_url)
        primary_id = await sync_to_async(register)(
            primary_url,
            alternates=[alternate_id],
            breaker_state=Agent.Breaker.OPEN,
            breaker_failures=5,
            breaker_opened_at=timezone.now(),
        )
        response = await call(asgi_relay, primary_id, send(), REST_1.headers())
    task = response.json()["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED", response.text
    assert "circuit breaker is open" in task["metadata"]["relaySelection"]["passed"][0]["reason"]
    assert primary.posts() == [] and len(alternate.posts()) == 1


async def test_a_send_that_may_have_started_does_not_fail_over(asgi_relay):
    front, alternate = Front(1, 500, read_first=True), Recording(writer_app)
    with running(front) as primary_url, running(alternate) as alternate_url:
        alternate_id = await sync_to_async(register)(alternate_url)
        primary_id = await sync_to_async(register)(primary_url, alternates=[alternate_id])
        response = await call(asgi_relay, primary_id, send(), REST_1.headers())
    task = response.json()["task"]
    assert task["status"]["state"] == "TASK_STATE_FAILED", response.text
    assert "relaySelection" not in (task.get("metadata") or {})
    assert alternate.posts() == []


async def test_an_agent_without_alternates_fails_as_before(asgi_relay):
    primary_id = await sync_to_async(register)(closed_port_url(), retry_attempts=1)
    response = await call(asgi_relay, primary_id, send(), REST_1.headers())
    task = response.json()["task"]
    assert task["status"]["state"] == "TASK_STATE_FAILED"
    assert "refused" in str(task["status"])


async def test_a_team_whose_member_is_down_fails_over_to_its_alternate(asgi_relay):
    from registry.teams import team_create

    alternate = Recording(writer_app)
    with running(alternate) as alternate_url:
        alternate_id = await sync_to_async(register)(alternate_url)
        member_id = await sync_to_async(register)(
            closed_port_url(), alternates=[alternate_id], retry_attempts=1
        )
        await sync_to_async(team_create)(
            team_id="crew", name="Crew", members=[member_id], default_agent=member_id
        )
        response = await asgi_relay.post(
            "/a2a/teams/crew/",
            json={
                "jsonrpc": "2.0",
                "id": 1,
                "method": "SendMessage",
                "params": {
                    "message": {
                        "messageId": "m-1",
                        "role": "ROLE_USER",
                        "parts": [{"text": "a poem"}],
                    }
                },
            },
            headers={"A2A-Version": "1.0"},
        )
    assert response.status_code == 200, response.text
    result = response.json()["result"]
    assert result["task"]["status"]["state"] == "TASK_STATE_COMPLETED", result
    member_task = await Task.objects.aget(target_kind="agent", target_id=member_id)
    assert member_task.agent_id == alternate_id
    assert member_task.selection["failoverFrom"] == member_id
    assert len(alternate.posts()) == 1


WAVES, WAVE = 8, 2


async def test_in_a_503_storm_every_send_is_served_by_the_alternate(asgi_relay):
    """A primary that answers every call 503: each send is tried as its policy says, then
    served by the alternate, and the primary's circuit breaker opens, so that sends after it
    pass the primary over."""
    import asyncio

    storm, alternate = Front(10**6, 503), Recording(writer_app)
    with running(storm) as primary_url, running(alternate) as alternate_url:
        alternate_id = await sync_to_async(register)(alternate_url)
        primary_id = await sync_to_async(register)(primary_url, alternates=[alternate_id])
        responses = []
        for wave in range(WAVES):  # concurrent failures all count; the breaker opens early
            responses += await asyncio.gather(
                *(
                    call(asgi_relay, primary_id, send(f"poem {wave}.{i}"), REST_1.headers())
                    for i in range(WAVE)
                )
            )
        assert (await Agent.objects.aget(pk=primary_id)).breaker_state == Agent.Breaker.OPEN
        await sync_to_async(forget_agent_targets)()  # as any process that loads it now
        hits = 10**6 - storm.failures
        after = await call(asgi_relay, primary_id, send("after"), REST_1.headers())
    tasks = [response.json()["task"] for response in [*responses, after]]
    assert {task["status"]["state"] for task in tasks} == {"TASK_STATE_COMPLETED"}
    assert {task["metadata"]["relaySelection"]["agentId"] for task in tasks} == {alternate_id}
    assert len(alternate.posts()) == WAVES * WAVE + 1
    assert 10**6 - storm.failures == hits  # the send after the breaker opened: no call
    assert (
        "circuit breaker is open" in tasks[-1]["metadata"]["relaySelection"]["passed"][0]["reason"]
    )
