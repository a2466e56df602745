"""Failover to any healthy agent with the same skill, an agent's opt-in
(docs/concepts/retries.md): once the agent and its ordered alternates cannot take a task's
first send, it goes to an agent declaring a skill with the same id (the skill the send named,
or else one of the agent's own); the task records who served it and why, and its follow-ups
go there. In-process over ASGI, against real a2a-sdk agents on 127.0.0.1."""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async

from registry.models import Agent
from routing.demo.agents import ECHO
from routing.demo.serve import serve
from tests.agents import ASKS_FOR_INPUT, input_required_agent
from tests.live import Recording
from tests.servers import closed_port_url, running
from tests.tasks_app.a2a_http import REST_1, call
from tests.tasks_app.test_failover import register, send
from tests.tasks_app.test_send_retries import Front, writer_app

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("allow_private_urls"),
]


def echo_app(url: str):
    from routing.demo.agents import build_agent_app

    return build_agent_app(ECHO, base_url=url)


async def test_a_primary_down_with_no_alternate_is_served_by_an_agent_with_its_skill(
    asgi_relay,
):
    same, other = Recording(writer_app), Recording(echo_app)
    with running(same) as same_url, running(other) as other_url:
        await sync_to_async(register)(other_url, ECHO, health=Agent.Health.HEALTHY)
        same_id = await sync_to_async(register)(same_url)
        primary_id = await sync_to_async(register)(
            closed_port_url(), retry_attempts=1, failover_same_skill=True
        )
        response = await call(asgi_relay, primary_id, send(), REST_1.headers())
    task = response.json()["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED", response.text
    selection = task["metadata"]["relaySelection"]
    assert selection["agentId"] == same_id
    assert selection["failoverFrom"] == primary_id
    assert selection["sameSkill"] == "draft"
    assert f"{same_id!r} declares the same skill 'draft'" in selection["why"]
    assert selection["passed"][0]["agentId"] == primary_id
    assert len(same.posts()) == 1
    assert other.posts() == []  # a healthy agent, but not one with the skill
    scraped = (await asgi_relay.get("/metrics")).text
    counted = (
        f'relay_agent_failovers_total{{agent="{primary_id}",kind="same_skill",to="{same_id}"}} 1.0'
    )
    assert counted in scraped


async def test_without_the_opt_in_a_primary_down_with_no_alternate_fails(asgi_relay):
    same = Recording(writer_app)
    with running(same) as same_url:
        await sync_to_async(register)(same_url)
        primary_id = await sync_to_async(register)(closed_port_url(), retry_attempts=1)
        response = await call(asgi_relay, primary_id, send(), REST_1.headers())
    task = response.json()["task"]
    assert task["status"]["state"] == "TASK_STATE_FAILED"
    assert same.posts() == []


async def test_ordered_alternates_come_first_and_unfit_agents_with_the_skill_are_left_out(
    asgi_relay,
):
    """The ordered alternate (down too) is tried first; of the agents sharing the skill, an
    unhealthy one and one behind an open breaker are never called, and a healthy one is
    preferred to one never probed."""
    from django.utils import timezone

    unhealthy, opened = Recording(writer_app), Recording(writer_app)
    unknown, healthy = Recording(writer_app), Recording(writer_app)
    with (
        running(unhealthy) as unhealthy_url,
        running(opened) as opened_url,
        running(unknown) as unknown_url,
        running(healthy) as healthy_url,
    ):
        await sync_to_async(register)(unhealthy_url, health=Agent.Health.UNHEALTHY)
        await sync_to_async(register)(
            opened_url,
            breaker_state=Agent.Breaker.OPEN,
            breaker_failures=5,
            breaker_opened_at=timezone.now(),
        )
        await sync_to_async(register)(unknown_url)
        healthy_id = await sync_to_async(register)(healthy_url, health=Agent.Health.HEALTHY)
        alternate_id = await sync_to_async(register)(closed_port_url(), ECHO, retry_attempts=1)
        primary_id = await sync_to_async(register)(
            closed_port_url(),
            alternates=[alternate_id],
            retry_attempts=1,
            failover_same_skill=True,
        )
        response = await call(asgi_relay, primary_id, send(), REST_1.headers())
    task = response.json()["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED", response.text
    selection = task["metadata"]["relaySelection"]
    assert selection["agentId"] == healthy_id
    assert [passed["agentId"] for passed in selection["passed"]] == [primary_id, alternate_id]
    assert len(healthy.posts()) == 1
    assert unhealthy.posts() == opened.posts() == unknown.posts() == []
    # Counted once, for the agent that took the send: not for the alternate that was down.
    scraped = (await asgi_relay.get("/metrics")).text
    failovers = [
        line
        for line in scraped.splitlines()
        if line.startswith(f'relay_agent_failovers_total{{agent="{primary_id}"')
    ]
    assert failovers == [
        f'relay_agent_failovers_total{{agent="{primary_id}",kind="same_skill",to="{healthy_id}"}} 1.0'
    ]


async def test_the_follow_up_goes_to_the_agent_with_the_skill_that_served(asgi_relay):
    primary_url = closed_port_url()
    primary, same = Recording(input_required_agent), Recording(input_required_agent)
    with running(same) as same_url:
        same_id = await sync_to_async(register)(same_url, ASKS_FOR_INPUT)
        primary_id = await sync_to_async(register)(
            primary_url, ASKS_FOR_INPUT, retry_attempts=1, failover_same_skill=True
        )
        first = (await call(asgi_relay, primary_id, send("hi"), REST_1.headers())).json()["task"]
        assert first["status"]["state"] == "TASK_STATE_INPUT_REQUIRED", first
        assert first["metadata"]["relaySelection"]["agentId"] == same_id
        # The primary is back; the task still lives on the agent that served it.
        with serve(primary, port=int(primary_url.rsplit(":", 1)[1])):
            answer = await call(
                asgi_relay, primary_id, send("Ada", taskId=first["id"]), REST_1.headers()
            )
    task = answer.json()["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED", answer.text
    assert task["artifacts"][0]["parts"][0]["text"] == "Hello, Ada!"
    assert len(same.posts()) == 2
    assert primary.posts() == []


async def test_a_send_naming_a_skill_fails_over_to_another_agent_with_that_skill(asgi_relay):
    """Skill routing picks the fastest writer; it answers 503 (nothing started), so the send
    goes to the other agent declaring the skill the send named."""
    front, second = Front(10**6, 503), Recording(writer_app)
    with running(front) as front_url, running(second) as second_url:
        first_id = await sync_to_async(register)(
            front_url, retry_attempts=1, failover_same_skill=True, health="healthy"
        )
        second_id = await sync_to_async(register)(second_url)
        await Agent.objects.filter(pk=first_id).aupdate(health_latency_ms=1.0)
        await Agent.objects.filter(pk=second_id).aupdate(health_latency_ms=900.0)
        response = await asgi_relay.post(
            "/a2a/tasks/send",
            json={
                "skill": "draft",
                "message": {"messageId": "m-1", "role": "ROLE_USER", "parts": [{"text": "x"}]},
            },
        )
    assert response.status_code == 200, response.text
    task = response.json()["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED", response.text
    selection = task["metadata"]["relaySelection"]
    assert (selection["failoverFrom"], selection["agentId"]) == (first_id, second_id)
    assert selection["sameSkill"] == "draft"
    assert len(second.posts()) == 1
