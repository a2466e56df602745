"""Passive health: real calls through the gateway drive each agent's circuit breaker. Calls go
in-process through the relay's ASGI app to a real agent on 127.0.0.1 that can be switched to
fail."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest
from asgiref.sync import sync_to_async
from django.utils import timezone
from starlette.responses import Response

from registry.models import Agent
from routing.demo.agents import ECHO, build_agent_app
from routing.models import HealthEvent, ProbeResult
from tasks_app.models import Task
from tests.servers import running
from tests.tasks_app.a2a_http import JSONRPC_1, call, register, relay_client

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("allow_private_urls"),
]


class Switchable:
    """The echo agent, or HTTP 500 for every message while ``broken``; counts messages."""

    def __init__(self) -> None:
        self.broken = False
        self.messages = 0
        self.app = None

    def app_for(self, base_url: str):
        echo = build_agent_app(ECHO, base_url=base_url)
        switch = self

        class App:
            async def __call__(self, scope, receive, send):
                if scope["type"] == "http" and scope["method"] == "POST":
                    switch.messages += 1
                    if switch.broken:
                        await Response("down for maintenance", status_code=500)(
                            scope, receive, send
                        )
                        return
                await echo(scope, receive, send)

        return App()


@pytest.fixture
def upstream():
    agent = Switchable()
    with running(agent.app_for) as url:
        agent.url = url
        yield agent


@pytest.fixture
def breaker_settings(settings):
    settings.RELAY_BREAKER_FAILURES = 3
    settings.RELAY_BREAKER_COOLDOWN_SECONDS = 0.5
    return settings


async def send(agent_id: str, secret: str) -> dict:
    async with relay_client() as client:
        response = await call(client, agent_id, JSONRPC_1.send(), JSONRPC_1.headers(secret))
    assert response.status_code == 200, response.text
    result = response.json()["result"]
    # The echo agent answers with a message; the relay's task then ended completed.
    return result.get("task") or {
        "status": {"state": "TASK_STATE_COMPLETED", "message": result["message"]}
    }


def status_text(task: dict) -> str:
    return " ".join(part.get("text", "") for part in task["status"]["message"]["parts"])


async def breaker(agent_id: str) -> tuple[str, int]:
    agent = await Agent.objects.aget(pk=agent_id)
    return agent.breaker_state, agent.breaker_failures


async def test_the_breaker_opens_after_consecutive_failures_and_then_fails_fast(
    upstream, api_key, breaker_settings
):
    agent = await sync_to_async(register)(upstream.url)
    upstream.broken = True
    for number in range(1, 4):
        task = await send(agent.pk, api_key[1])
        assert task["status"]["state"] == "TASK_STATE_FAILED"
        assert "HTTP 500" in status_text(task)
        assert await breaker(agent.pk) == ("open" if number == 3 else "closed", number)
    assert upstream.messages == 3

    task = await send(agent.pk, api_key[1])

    assert task["status"]["state"] == "TASK_STATE_FAILED"
    assert "circuit breaker is open after 3 failed calls" in status_text(task)
    assert upstream.messages == 3  # failed fast: the agent was not called
    calls = ProbeResult.objects.filter(agent_id=agent.pk, level="call")
    assert await calls.acount() == 3
    assert {result.category async for result in calls} == {"http_status"}
    events = [
        (e.kind, e.from_state, e.to_state)
        async for e in HealthEvent.objects.filter(agent_id=agent.pk)
    ]
    assert events == [("breaker", "closed", "open")]


async def test_after_the_cooldown_one_trial_call_closes_the_breaker_when_it_succeeds(
    upstream, api_key, breaker_settings
):
    agent = await sync_to_async(register)(upstream.url)
    upstream.broken = True
    for _ in range(3):
        await send(agent.pk, api_key[1])
    upstream.broken = False
    await asyncio.sleep(0.6)

    task = await send(agent.pk, api_key[1])

    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    assert upstream.messages == 4
    assert await breaker(agent.pk) == ("closed", 0)
    events = [
        (e.from_state, e.to_state)
        async for e in HealthEvent.objects.filter(agent_id=agent.pk).order_by("at", "id")
    ]
    assert events == [("closed", "open"), ("open", "half_open"), ("half_open", "closed")]


async def test_a_failed_trial_call_opens_the_breaker_again(upstream, api_key, breaker_settings):
    agent = await sync_to_async(register)(upstream.url)
    upstream.broken = True
    for _ in range(3):
        await send(agent.pk, api_key[1])
    await asyncio.sleep(0.6)

    await send(agent.pk, api_key[1])  # the trial, failing
    assert await breaker(agent.pk) == ("open", 4)
    task = await send(agent.pk, api_key[1])
    assert "circuit breaker is open" in status_text(task)
    assert upstream.messages == 4


async def test_a_success_between_failures_resets_the_count(upstream, api_key, breaker_settings):
    agent = await sync_to_async(register)(upstream.url)
    upstream.broken = True
    await send(agent.pk, api_key[1])
    await send(agent.pk, api_key[1])
    upstream.broken = False
    await send(agent.pk, api_key[1])
    assert await breaker(agent.pk) == ("closed", 0)
    upstream.broken = True
    await send(agent.pk, api_key[1])
    assert await breaker(agent.pk) == ("closed", 1)


async def test_an_agent_error_answer_is_not_a_failure_of_the_agent(
    upstream, api_key, breaker_settings
):
    """A TaskNotFound for a task the agent does not know is the agent answering."""
    agent = await sync_to_async(register)(upstream.url)
    await Agent.objects.filter(pk=agent.pk).aupdate(breaker_failures=2)
    async with relay_client() as client:
        first = await call(client, agent.pk, JSONRPC_1.send(), JSONRPC_1.headers(api_key[1]))
    assert first.status_code == 200
    assert await breaker(agent.pk) == ("closed", 0)


async def test_a_breaker_opened_by_another_process_refuses_calls_here(
    upstream, api_key, breaker_settings
):
    agent = await sync_to_async(register)(upstream.url)
    await Agent.objects.filter(pk=agent.pk).aupdate(
        breaker_state="open", breaker_failures=7, breaker_opened_at=timezone.now()
    )
    task = await send(agent.pk, api_key[1])
    assert "circuit breaker is open after 7 failed calls" in status_text(task)
    assert upstream.messages == 0
    assert await Task.objects.filter(agent_id=agent.pk, state="failed").acount() == 1


async def test_only_one_trial_call_goes_through_while_the_breaker_is_half_open(
    upstream, api_key, breaker_settings
):
    agent = await sync_to_async(register)(upstream.url)
    await Agent.objects.filter(pk=agent.pk).aupdate(
        breaker_state="open",
        breaker_failures=3,
        breaker_opened_at=timezone.now() - timedelta(seconds=5),
    )
    upstream.broken = True
    tasks = await asyncio.gather(*(send(agent.pk, api_key[1]) for _ in range(4)))
    refused = [t for t in tasks if "circuit breaker is open" in status_text(t)]
    assert upstream.messages == 1
    assert len(refused) == 3
