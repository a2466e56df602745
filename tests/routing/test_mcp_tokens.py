"""Bearer tokens on the relay's MCP server, as on the A2A endpoints: a trusted issuer's JWT and
an opaque token its introspection endpoint vouches for both call a tool; an expired JWT and a
revoked opaque token are refused with a 401 before the MCP SDK sees the request. A relay of
real processes, the official MCP Python client, the issuer a real authorization server on
127.0.0.1."""

from __future__ import annotations

import json
import time

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from routing.demo.agents import ECHO, build_agent_app
from tests.authorization_server import AUDIENCE, INTROSPECTION_CLIENT, authorization_server
from tests.live import CALL_SECONDS, live_relay


@pytest.fixture(scope="module")
def issuer():
    with authorization_server() as server:
        yield server


@pytest.fixture(scope="module")
def relay(tmp_path_factory, issuer):
    client_id, secret = INTROSPECTION_CLIENT
    trusted = {
        "issuer": issuer.issuer,
        "jwksUrl": issuer.jwks_url,
        "audience": AUDIENCE,
        "callScope": "a2a:call",
        "introspectionUrl": issuer.introspection_url,
        "clientId": client_id,
        "clientSecret": secret,
    }
    with live_relay(
        tmp_path_factory.mktemp("mcp-tokens"), RELAY_JWT_ISSUERS=json.dumps([trusted])
    ) as live:
        live.serve_agent("echo", lambda url: build_agent_app(ECHO, base_url=url))
        yield live


def client(relay, token: str) -> Client:
    http = httpx2.AsyncClient(
        headers={"Authorization": f"Bearer {token}"}, timeout=CALL_SECONDS * 3
    )
    return Client(streamable_http_client(f"{relay.url}/mcp/agents/echo", http_client=http))


async def echoed(relay, token: str) -> str:
    async with client(relay, token) as mcp:
        result = await mcp.call_tool("agent_echo", {"text": "token says hi"})
    assert not result.is_error, result
    return result.content[0].text


async def test_a_trusted_issuers_jwt_calls_a_tool(relay, issuer):
    assert "token says hi" in await echoed(relay, issuer.token(sub="mcp-caller"))


async def test_an_introspected_opaque_token_calls_a_tool(relay, issuer):
    assert "token says hi" in await echoed(relay, issuer.opaque_token(sub="mcp-opaque"))


@pytest.mark.parametrize("kind", ["expired jwt", "revoked opaque"])
def test_a_bad_token_is_refused_before_the_sdk(relay, issuer, kind):
    if kind == "expired jwt":
        token = issuer.token(exp=int(time.time()) - 600)
    else:
        token = issuer.opaque_token(sub="mcp-revoked")
        issuer.revoke(token)
    listing = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/list",
        "params": {},
    }
    response = httpx2.post(
        f"{relay.url}/mcp/agents/echo",
        json=listing,
        headers={
            "Authorization": f"Bearer {token}",
            "Accept": "application/json, text/event-stream",
        },
        timeout=CALL_SECONDS,
    )

    assert response.status_code == 401, response.text
    assert response.headers["www-authenticate"].startswith("Bearer")
