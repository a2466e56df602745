"""Streams to an agent end with their connection back in the pool: the relay stops reading at
the last event, then reads the little that is left, so the next call (the next team hop, say)
does not pay for a new connection."""

from __future__ import annotations

import asyncio
import contextlib
import json

import pytest

from relay_project import outbound
from tasks_app import upstream
from tasks_app.protocol.versions import Operation
from tests.servers import running

pytestmark = pytest.mark.usefixtures("allow_private_urls")

MESSAGE = {"message": {"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "hi"}]}}


def sse_agent(events: list[dict], *, linger: float = 0.0):
    """A JSON-RPC agent that streams ``events`` to every request, waits ``linger`` seconds,
    then ends the response. Records the client port of every request."""
    ports: list[int] = []

    async def app(scope, receive, send):
        if scope["type"] != "http":
            return
        while (await receive()).get("more_body"):
            pass
        ports.append(scope["client"][1])
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", b"text/event-stream")],
            }
        )
        for event in events:
            data = json.dumps({"jsonrpc": "2.0", "id": 1, "result": event})
            await send(
                {
                    "type": "http.response.body",
                    "body": f"data: {data}\n\n".encode(),
                    "more_body": True,
                }
            )
        await asyncio.sleep(linger)
        await send({"type": "http.response.body", "body": b""})

    return app, ports


def task_event(state: str) -> dict:
    return {"task": {"id": "t1", "contextId": "c1", "status": {"state": state}}}


REPLY = {"message": {"messageId": "r1", "role": "ROLE_AGENT", "parts": [{"text": "done"}]}}


async def stream_until_last(endpoint: upstream.Endpoint, session) -> list[dict]:
    """Reads a stream the way the gateway does: stops at the event that ends it."""
    seen = []
    async with contextlib.aclosing(
        upstream.stream(endpoint, Operation.STREAM, MESSAGE, session=session)
    ) as events:
        async for event in events:
            seen.append(event)
            if upstream.ends_stream(event):
                break
    return seen


def endpoint_at(url: str) -> upstream.Endpoint:
    return upstream.Endpoint(agent_id="streamer", url=url + "/", binding="JSONRPC", version="1.0")


async def test_a_stream_that_ended_leaves_its_connection_for_the_next_call():
    app, ports = sse_agent([task_event("TASK_STATE_WORKING"), REPLY])
    with running(app) as url:
        async with outbound.agent_session() as session:
            first = await stream_until_last(endpoint_at(url), session)
            second = await stream_until_last(endpoint_at(url), session)
    assert [list(event) for event in first] == [["task"], ["message"]]
    assert second == first
    assert len(ports) == 2
    assert ports[0] == ports[1], "the second call opened a new connection"


async def test_a_stream_left_open_after_its_last_event_is_closed_not_waited_for():
    app, ports = sse_agent([REPLY], linger=5.0)
    with running(app) as url:
        async with outbound.agent_session() as session:
            loop = asyncio.get_running_loop()
            started = loop.time()
            await stream_until_last(endpoint_at(url), session)
            waited = loop.time() - started
            await stream_until_last(endpoint_at(url), session)
    assert waited < upstream.DRAIN_SECONDS + 2.0
    assert ports[0] != ports[1], "a connection still streaming cannot be used again"


@pytest.mark.parametrize(
    ("event", "last"),
    [
        (REPLY, True),
        (task_event("TASK_STATE_COMPLETED"), True),
        (task_event("TASK_STATE_INPUT_REQUIRED"), True),
        (task_event("TASK_STATE_WORKING"), False),
        ({"statusUpdate": {"taskId": "t1", "status": {"state": "TASK_STATE_FAILED"}}}, True),
        ({"statusUpdate": {"taskId": "t1", "status": {"state": "TASK_STATE_SUBMITTED"}}}, False),
        ({"artifactUpdate": {"taskId": "t1", "artifact": {"parts": []}}}, False),
        ({"statusUpdate": {"taskId": "t1", "status": {"state": "not-a-state"}}}, False),
        ({"task": {"id": "t1"}}, False),
    ],
)
def test_which_events_end_a_stream(event, last):
    assert upstream.ends_stream(event) is last
