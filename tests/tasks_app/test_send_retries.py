"""Retries of a send that failed before its agent answered (docs/concepts/retries.md), against
real HTTP servers on 127.0.0.1: a port nothing listens on until the relay has tried twice, an
agent behind a front that answers 503 (or 429) before reading the request, and one that
answers 500 after reading it. In-process over ASGI, so the test reads the relay's Prometheus
counters as the retries happen."""

from __future__ import annotations

import asyncio
import json

import pytest
from asgiref.sync import sync_to_async

from registry.models import Agent
from routing.demo.agents import WRITER, build_agent_app
from routing.demo.serve import serve
from tasks_app.gateway.retries import RETRIES
from tasks_app.models import Task
from tests.live import Recording
from tests.servers import closed_port_url, running
from tests.tasks_app.a2a_http import REST_1, call, card_document

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("allow_private_urls"),
]

BASE_DELAY_MS = 400


def writer_app(url: str):
    return build_agent_app(WRITER, base_url=url)


class Front:
    """An ASGI front of the writer agent that answers its first ``failures`` A2A calls
    itself: ``status`` before reading the request (a proxy or the agent saying it is not
    taking calls), or, with ``read_first``, after reading it (the agent may have started).
    ``seen`` counts the calls that reached the agent behind it."""

    def __init__(self, failures: int, status: int, *, read_first: bool = False, headers=()) -> None:
        self.failures, self.status, self.read_first = failures, status, read_first
        self.headers = [(name.encode(), value.encode()) for name, value in headers]
        self.recording = Recording(writer_app)

    def __call__(self, url: str):
        inner = self.recording(url)

        async def front(scope, receive, send):
            if scope["type"] != "http" or scope["method"] == "GET" or self.failures <= 0:
                await inner(scope, receive, send)
                return
            self.failures -= 1
            if self.read_first:
                while (await receive()).get("more_body"):
                    pass
            await send(
                {
                    "type": "http.response.start",
                    "status": self.status,
                    "headers": [(b"content-type", b"text/plain"), *self.headers],
                }
            )
            await send({"type": "http.response.body", "body": b"not now"})

        return front

    @property
    def seen(self) -> int:
        return len(self.recording.posts())


def register(url: str, **policy) -> str:
    from tests.factories import make_agent

    agent = make_agent(document=card_document(url, WRITER))
    Agent.objects.filter(pk=agent.pk).update(retry_base_delay_ms=BASE_DELAY_MS, **policy)
    return agent.pk


def send_body(text: str = "a poem", *, stream: bool = False):
    message = {"messageId": f"m-{text}", "role": "ROLE_USER", "parts": [{"text": text}]}
    return REST_1.send(message, stream=stream)


def retries_of(agent_id: str, reason: str) -> float:
    return RETRIES.labels(agent_id, reason)._value.get()


async def stored(task_id: str) -> Task:
    return await Task.objects.aget(pk=task_id)


async def test_an_agent_that_refuses_the_first_two_tries_gets_one_call(asgi_relay):
    """Nothing listens on the agent's port until the relay has tried twice (its retry counter
    says so); then the agent starts, and the third try reaches it."""
    url = closed_port_url()
    port = int(url.rsplit(":", 1)[1])
    agent_id = await sync_to_async(register)(url)
    recording = Recording(writer_app)
    before = retries_of(agent_id, "refused")
    sending = asyncio.ensure_future(call(asgi_relay, agent_id, send_body(), REST_1.headers()))
    for _ in range(200):
        if retries_of(agent_id, "refused") - before >= 2:
            break
        assert not sending.done(), sending.result().text
        await asyncio.sleep(0.01)
    else:
        raise AssertionError("the relay did not try twice")
    with serve(recording, port=port):
        response = await sending
        assert response.status_code == 200, response.text
    task = response.json()["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    attempts = task["metadata"]["relayAttempts"]
    assert [(a["attempt"], a["outcome"]) for a in attempts] == [
        (1, "failed"),
        (2, "failed"),
        (3, "answered"),
    ]
    assert [a.get("reason") for a in attempts[:2]] == ["refused", "refused"]
    assert all(a["retryInSeconds"] >= BASE_DELAY_MS / 1000 for a in attempts[:2])
    assert len(recording.posts()) == 1
    assert await Task.objects.acount() == 1
    assert (await stored(task["id"])).attempts == attempts


@pytest.mark.parametrize("status", [502, 503, 504])
async def test_an_agent_not_taking_calls_is_tried_again(status, asgi_relay):
    front = Front(2, status)
    with running(front) as url:
        agent_id = await sync_to_async(register)(url)
        response = await call(asgi_relay, agent_id, send_body(), REST_1.headers())
    task = response.json()["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED", response.text
    reasons = [a.get("reason") for a in task["metadata"]["relayAttempts"]]
    assert reasons == [f"http_{status}", f"http_{status}", None]
    assert front.seen == 1
    scraped = (await asgi_relay.get("/metrics")).text
    assert f'relay_agent_send_retries_total{{agent="{agent_id}",reason="http_{status}"}} 2.0' in (
        scraped
    )


async def test_a_stream_refused_before_its_first_event_is_tried_again(asgi_relay):
    front = Front(1, 503)
    with running(front) as url:
        agent_id = await sync_to_async(register)(url)
        response = await call(asgi_relay, agent_id, send_body(stream=True), REST_1.headers())
    events = [
        json.loads(line[len("data:") :])
        for line in response.text.splitlines()
        if line.startswith("data:")
    ]
    assert events[-1]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"
    task = await stored(events[0]["task"]["id"])
    assert [a["outcome"] for a in task.attempts] == ["failed", "answered"]
    assert front.seen == 1


async def test_a_429_is_tried_again_after_its_retry_after(asgi_relay):
    front = Front(1, 429, headers=[("Retry-After", "1")])
    with running(front) as url:
        agent_id = await sync_to_async(register)(url)
        response = await call(asgi_relay, agent_id, send_body(), REST_1.headers())
    task = response.json()["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED", response.text
    first = task["metadata"]["relayAttempts"][0]
    assert first["reason"] == "http_429"
    assert first["retryInSeconds"] >= 1.0
    assert front.seen == 1


async def test_a_429_without_retry_after_is_not_tried_again(asgi_relay):
    front = Front(1, 429)
    with running(front) as url:
        agent_id = await sync_to_async(register)(url)
        response = await call(asgi_relay, agent_id, send_body(), REST_1.headers())
    task = response.json()["task"]
    assert task["status"]["state"] == "TASK_STATE_FAILED", response.text
    assert front.seen == 0 and front.failures == 0


async def test_a_500_after_reading_is_not_tried_again(asgi_relay):
    """The agent read the request and failed: it may have started the work, and retrying an
    agent that does not deduplicate could run it twice."""
    front = Front(1, 500, read_first=True)
    with running(front) as url:
        agent_id = await sync_to_async(register)(url)
        response = await call(asgi_relay, agent_id, send_body(), REST_1.headers())
    task = response.json()["task"]
    assert task["status"]["state"] == "TASK_STATE_FAILED", response.text
    assert "HTTP 500" in json.dumps(task["status"])
    assert (await stored(task["id"])).attempts == [
        {
            "attempt": 1,
            "at": (await stored(task["id"])).attempts[0]["at"],
            "outcome": "failed",
            "reason": "http_500",
            "detail": f"agent {agent_id!r} answered HTTP 500",
        }
    ]
    assert front.seen == 0


async def test_a_500_after_reading_is_tried_again_for_an_idempotent_agent(asgi_relay):
    front = Front(1, 500, read_first=True)
    with running(front) as url:
        agent_id = await sync_to_async(register)(url, idempotent=True)
        response = await call(asgi_relay, agent_id, send_body(), REST_1.headers())
    task = response.json()["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED", response.text
    assert [a.get("reason") for a in task["metadata"]["relayAttempts"]] == ["http_500", None]
    assert front.seen == 1


async def test_one_attempt_in_the_policy_never_retries(asgi_relay):
    front = Front(1, 503)
    with running(front) as url:
        agent_id = await sync_to_async(register)(url, retry_attempts=1)
        response = await call(asgi_relay, agent_id, send_body(), REST_1.headers())
    assert response.json()["task"]["status"]["state"] == "TASK_STATE_FAILED"
    assert front.seen == 0


async def test_no_try_starts_past_the_deadline(asgi_relay):
    """A Retry-After longer than what is left of the deadline ends the retries at once."""
    front = Front(1, 429, headers=[("Retry-After", "30")])
    with running(front) as url:
        agent_id = await sync_to_async(register)(url, retry_deadline_seconds=5)
        response = await call(asgi_relay, agent_id, send_body(), REST_1.headers())
    assert response.json()["task"]["status"]["state"] == "TASK_STATE_FAILED"
    assert front.seen == 0


async def test_a_send_answered_at_once_records_no_attempts(asgi_relay):
    front = Front(0, 503)
    with running(front) as url:
        agent_id = await sync_to_async(register)(url)
        response = await call(asgi_relay, agent_id, send_body(), REST_1.headers())
    task = response.json()["task"]
    assert "relayAttempts" not in (task.get("metadata") or {})
    assert (await stored(task["id"])).attempts is None
