"""The A2A consumer (a Channels ``AsyncHttpConsumer`` run by Channels' own loop) as the ASGI
server drives it: it reads the client's messages in turn,
answers once the body is whole, stops the call's handling when the client leaves, and ends
when the server reports the connection gone.

The server side is played by two queues, so each test decides when the client's messages
come; ``calls.answer`` is replaced where a test needs a call that answers at once or never.
"""

from __future__ import annotations

import asyncio
import json

import pytest

from tasks_app import consumers
from tasks_app.api import calls, parsing, replies

# Channels closes old database connections before each message it dispatches.
pytestmark = pytest.mark.django_db

SCOPE = {
    "type": "http",
    "method": "POST",
    "path": "/a2a/agents/echo/",
    "query_string": b"",
    "headers": [(b"content-type", b"application/json")],
    "url_route": {"args": (), "kwargs": {"kind": "agent", "target_id": "echo", "rest": ""}},
}


class Server:
    """The ASGI server's side: messages for the consumer, and what it sent back."""

    def __init__(self) -> None:
        self.incoming: asyncio.Queue = asyncio.Queue()
        self.sent: list[dict] = []
        self.response_done = asyncio.Event()

    async def receive(self) -> dict:
        return await self.incoming.get()

    async def send(self, message: dict) -> None:
        self.sent.append(message)
        if message["type"] == "http.response.body" and not message.get("more_body"):
            self.response_done.set()

    def run(self) -> asyncio.Task:
        return asyncio.ensure_future(
            consumers.A2AConsumer.as_asgi()(dict(SCOPE), self.receive, self.send)
        )


@pytest.fixture
def answered_at_once(monkeypatch):
    """``calls.answer`` answering every call with one JSON reply, the bodies it got kept."""
    bodies: list[bytes] = []

    async def answer(request: parsing.HttpCall) -> replies.Reply:
        bodies.append(request.body)
        return replies.Reply(200, {"ok": True}, "application/json")

    monkeypatch.setattr(calls, "answer", answer)
    return bodies


async def test_a_body_in_parts_is_answered_once_whole_and_the_consumer_ends_when_the_client_goes(
    answered_at_once,
):
    server = Server()
    consumer = server.run()
    await server.incoming.put({"type": "http.request", "body": b'{"a":', "more_body": True})
    await server.incoming.put({"type": "http.request", "body": b"1}", "more_body": False})
    await asyncio.wait_for(server.response_done.wait(), 5)

    assert answered_at_once == [b'{"a":1}']
    start, body = server.sent
    assert start["status"] == 200
    assert json.loads(body["body"]) == {"ok": True}
    assert not consumer.done()  # still reading: the server has not said the client is gone

    await server.incoming.put({"type": "http.disconnect"})
    await asyncio.wait_for(consumer, 5)


async def test_a_client_that_leaves_mid_call_stops_its_handling(monkeypatch):
    started, cancelled = asyncio.Event(), asyncio.Event()

    async def answer(request: parsing.HttpCall) -> replies.Reply:
        started.set()
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            cancelled.set()
            raise
        raise AssertionError("never answered")

    monkeypatch.setattr(calls, "answer", answer)
    server = Server()
    consumer = server.run()
    await server.incoming.put({"type": "http.request", "body": b"{}", "more_body": False})
    await asyncio.wait_for(started.wait(), 5)
    await server.incoming.put({"type": "http.disconnect"})

    await asyncio.wait_for(consumer, 5)
    await asyncio.wait_for(cancelled.wait(), 5)
    assert server.sent == []
