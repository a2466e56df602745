"""Key scopes and upstream credentials through a relay of real processes (daphne), over real
HTTP: a key made by ``manage.py create_api_key --agent`` calls its agent with the official
a2a-sdk client and finds no other; the agent, which refuses anyone without its bearer token,
gets the token the relay holds for it; the relay's log never shows that token."""

from __future__ import annotations

import asyncio

import httpx
import pytest
from a2a.types import Message, Part, Role, SendMessageRequest

from tests.agents import v1_only_agent
from tests.live import Recording, manage
from tests.registry.test_credentials import guarded

SECRET = "live-upstream-token-5d1c"
GUARDED = Recording(v1_only_agent)


@pytest.fixture(scope="module", autouse=True)
def agents(relay):
    relay.serve_agent("plain", v1_only_agent)
    relay.serve_agent(
        "guarded",
        guarded("authorization", f"Bearer {SECRET}", GUARDED),
        credentials={"kind": "bearer", "value": SECRET},
    )


@pytest.fixture(scope="module")
def partner_key(relay):
    """A key that may call the guarded agent and nothing else."""
    return (
        manage(relay.env, "create_api_key", "partner", "--agent", "guarded", "--no-register")
        .strip()
        .splitlines()[-1]
    )


def request(text: str) -> SendMessageRequest:
    return SendMessageRequest(
        message=Message(message_id=f"m-{text}", role=Role.ROLE_USER, parts=[Part(text=text)])
    )


async def test_a_scoped_key_calls_its_agent_which_gets_the_relays_credential(relay, partner_key):
    async with relay.client(
        "guarded", "JSONRPC", "1.0", key=partner_key, streaming=False
    ) as client:
        events = [event async for event in client.send_message(request("hello guarded"))]

    assert events[0].message.parts[0].text == "hello guarded"
    calls = [r for r in GUARDED.requests if r.method == "POST"]
    assert calls and all(r.headers["authorization"] == f"Bearer {SECRET}" for r in calls)


async def test_a_scoped_key_finds_no_other_agent(relay, partner_key):
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "SendMessage",
        "params": {"message": {"messageId": "m-1", "role": "ROLE_USER", "parts": [{"text": "hi"}]}},
    }
    async with httpx.AsyncClient(timeout=10) as http:
        refused = await http.post(
            relay.agent_url("plain"),
            json=body,
            headers={**relay.auth(partner_key), "A2A-Version": "1.0"},
        )
        unknown = await http.post(
            relay.agent_url("nobody"),
            json=body,
            headers={**relay.auth(partner_key), "A2A-Version": "1.0"},
        )
        allowed = await http.post(
            relay.agent_url("plain"), json=body, headers={**relay.auth(), "A2A-Version": "1.0"}
        )

    assert refused.status_code == unknown.status_code == 404
    assert refused.json()["error"]["message"] == "no agent 'plain' at this relay"
    assert refused.json()["error"]["code"] == unknown.json()["error"]["code"] == -32601
    assert allowed.status_code == 200 and "result" in allowed.json()


async def test_a_bad_key_is_told_its_token_is_invalid(relay):
    async with httpx.AsyncClient(timeout=10) as http:
        bare = await http.post(relay.agent_url("plain"), json={})
        bad = await http.post(
            relay.agent_url("plain"), json={}, headers={"Authorization": "Bearer br_forged"}
        )
        registry = await http.post(
            f"{relay.url}/a2a/registry",
            json={"url": "http://x"},
            headers={"Authorization": "Bearer br_forged"},
        )

    assert (bare.status_code, bare.headers["www-authenticate"]) == (
        401,
        'Bearer realm="brass-relay"',
    )
    assert (bad.status_code, bad.headers["www-authenticate"]) == (
        401,
        'Bearer realm="brass-relay", error="invalid_token"',
    )
    assert (registry.status_code, registry.headers["www-authenticate"]) == (
        401,
        'Bearer realm="brass-relay", error="invalid_token"',
    )


async def test_the_relays_log_never_shows_the_upstream_token(relay, partner_key):
    async with relay.client(
        "guarded", "HTTP+JSON", "1.0", key=partner_key, streaming=True
    ) as client:
        events = [event async for event in client.send_message(request("stream it"))]
    assert events
    await asyncio.sleep(0.2)  # let daphne flush its log

    log = relay.daphne.log.read_text()
    assert "guarded" in log or "POST" in log, "the log is the relay's and has lines"
    assert SECRET not in log
