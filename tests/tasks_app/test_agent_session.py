"""The agent session (``relay_project.outbound.agent_session``, aiohttp) that carries every
non-streaming A2A call to an agent: the SSRF guard on every address it connects to, redirects
checked hop by hop, the failure categories the task record and the breaker read, pooled
connections, no cookies, and a session closed with its event loop. Real servers on 127.0.0.1
throughout."""

from __future__ import annotations

import asyncio
import json
import socket

import aiohttp
import pytest

from relay_project import outbound
from routing.demo.serve import serve
from tasks_app import upstream
from tasks_app.protocol.versions import Operation
from tests.servers import closed_port_url

SEND = {"message": {"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "hi"}]}}
REPLY = {"message": {"messageId": "r1", "role": "ROLE_AGENT", "parts": [{"text": "done"}]}}


class Agent:
    """A JSON-RPC agent that answers every request with REPLY, or ``redirect`` (a 307 to that
    URL), or nothing for ``hang`` seconds. Records each request's path, client port and
    headers."""

    def __init__(self, *, redirect: str = "", hang: float = 0.0, cookie: bool = False) -> None:
        self.redirect, self.hang, self.cookie = redirect, hang, cookie
        self.requests: list[dict] = []

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        headers = {name.decode().lower(): value.decode() for name, value in scope["headers"]}
        self.requests.append({"path": scope["path"], "port": scope["client"][1], **headers})
        if self.hang:
            await asyncio.sleep(self.hang)
        if self.redirect:
            await send(
                {
                    "type": "http.response.start",
                    "status": 307,
                    "headers": [(b"location", self.redirect.encode())],
                }
            )
            await send({"type": "http.response.body", "body": b""})
            return
        call_id = json.loads(body).get("id")
        answer = json.dumps({"jsonrpc": "2.0", "id": call_id, "result": REPLY}).encode()
        headers = [(b"content-type", b"application/json")]
        if self.cookie:
            headers.append((b"set-cookie", b"session=agent-cookie; Path=/"))
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": answer})


def endpoint_at(url: str) -> upstream.Endpoint:
    return upstream.Endpoint(agent_id="a", url=url + "/", binding="JSONRPC", version="1.0")


async def send(url: str, **kwargs):
    return await upstream.call(endpoint_at(url), Operation.SEND, SEND, **kwargs)


async def refused(url: str, **kwargs) -> upstream.UpstreamError:
    with pytest.raises(upstream.UpstreamError) as raised:
        await send(url, **kwargs)
    return raised.value


@pytest.fixture
def loopback_one_is_public(monkeypatch, settings):
    """127.0.0.1 counts as public and 127.0.0.2 as private, so the guard can be shown with
    two local servers."""
    settings.RELAY_ALLOW_PRIVATE_URLS = False
    real = outbound.is_public_address
    monkeypatch.setattr(
        outbound, "is_public_address", lambda address: address == "127.0.0.1" or real(address)
    )


async def test_an_agent_on_a_loopback_address_is_never_reached(settings):
    settings.RELAY_ALLOW_PRIVATE_URLS = False
    agent = Agent()
    with serve(agent) as server:
        for host in ("127.0.0.1", "localhost"):
            error = await refused(f"http://{host}:{server.port}")
            assert error.category == "unsafe_url", error.message
            assert "non-public address" in error.message
    assert agent.requests == []


async def test_a_redirect_to_a_private_address_is_refused(loopback_one_is_public):
    private = Agent()
    with serve(private, host="127.0.0.2") as inner:
        public = Agent(redirect=f"http://127.0.0.2:{inner.port}/")
        with serve(public) as outer:
            error = await refused(outer.url)
    assert error.category == "unsafe_url", error.message
    assert len(public.requests) == 1
    assert private.requests == []


async def test_a_redirect_to_a_url_with_credentials_is_refused(allow_private_urls):
    target = Agent()
    with serve(target) as inner:
        redirecting = Agent(redirect=f"http://user:secret@127.0.0.1:{inner.port}/")
        with serve(redirecting) as outer:
            error = await refused(outer.url)
    assert error.category == "unsafe_url", error.message
    assert "credentials" in error.message
    assert target.requests == []


async def test_a_redirect_within_the_rules_is_followed_with_the_call(allow_private_urls):
    target = Agent()
    with serve(target) as inner:
        redirecting = Agent(redirect=f"{inner.url}/moved")
        with serve(redirecting) as outer:
            assert await send(outer.url) == REPLY
    assert [r["path"] for r in target.requests] == ["/moved"]
    assert target.requests[0]["content-type"] == "application/json"


async def test_a_redirect_loop_stops_at_the_limit(allow_private_urls, settings):
    settings.RELAY_MAX_REDIRECTS = 2
    looping = Agent()
    with serve(looping) as server:
        looping.redirect = f"{server.url}/again"
        error = await refused(server.url)
    assert error.category == "protocol", error.message
    assert len(looping.requests) == 3  # the call and two redirects


@pytest.mark.parametrize(
    "case, category, words",
    [
        ("closed port", "refused", "refused the connection"),
        ("hangs", "timeout", "did not answer in time"),
        ("no such host", "dns", "cannot resolve"),
    ],
)
async def test_failures_keep_their_categories(
    allow_private_urls, monkeypatch, case, category, words
):
    if case == "closed port":
        error = await refused(closed_port_url())
    elif case == "hangs":
        with serve(Agent(hang=5.0)) as server:
            error = await refused(server.url, timeout=0.3)
    else:

        def unknown(host, *args, **kwargs):
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

        monkeypatch.setattr(socket, "getaddrinfo", unknown)
        error = await refused("http://agent.invalid")
    assert error.category == category
    assert words in error.message


async def test_calls_share_a_connection_and_keep_no_cookies(allow_private_urls):
    agent = Agent(cookie=True)
    with serve(agent) as server:
        for _ in range(3):
            assert await send(server.url) == REPLY
    assert len({r["port"] for r in agent.requests}) == 1, "each call opened a connection"
    assert all("cookie" not in r for r in agent.requests)
    assert all(r["user-agent"] == outbound.USER_AGENT for r in agent.requests)


def test_the_session_closes_with_its_event_loop(allow_private_urls):
    agent = Agent()

    async def one_call():
        assert await send(server.url) == REPLY
        return await upstream.shared_session()

    with serve(agent) as server:
        session = asyncio.run(one_call())
        assert session.closed
        assert all(held.session is not session for held in upstream._sessions.values())
        assert asyncio.run(one_call()) is not session


# --- event streams, read as they arrive ------------------------------------------------------


async def events_of(*chunks: bytes) -> list[tuple[str, str]]:
    """The events ``server_sent_events`` reads from a body arriving in these chunks."""
    from aiohttp.base_protocol import BaseProtocol

    loop = asyncio.get_running_loop()
    body = aiohttp.StreamReader(BaseProtocol(loop), 2**16, loop=loop)
    for chunk in chunks:
        body.feed_data(chunk)
    body.feed_eof()
    return [event async for event in upstream.server_sent_events(body)]


@pytest.mark.parametrize("end", [b"\n", b"\r\n", b"\r"])
async def test_events_end_at_a_blank_line_whatever_the_line_ends(end):
    stream = end.join([b": keep-alive", b'data: {"a": 1}', b"", b"event: error", b"data: x", b""])
    assert await events_of(stream + end) == [("message", '{"a": 1}'), ("error", "x")]


async def test_lines_split_anywhere_between_chunks_read_the_same():
    stream = b'data: {"text": "caf\xc3\xa9"}\r\ndata:second\r\n\r\ndata: third\r\n\r\n'
    whole = await events_of(stream)
    assert whole == [("message", '{"text": "café"}\nsecond'), ("message", "third")]
    for cut in range(1, len(stream)):
        assert await events_of(stream[:cut], stream[cut:]) == whole, cut


async def test_an_event_without_its_blank_line_is_not_dispatched():
    assert await events_of(b"data: one\n\ndata: cut off") == [("message", "one")]


async def test_a_line_separator_inside_the_data_does_not_split_it():
    """U+2028 is a line end to str.splitlines, never to an event stream."""
    data = '{"text": "a\u2028b\u0085c"}'
    assert await events_of(f"data: {data}\n\n".encode()) == [("message", data)]
