"""The relay's MCP server (the mcp Python SDK, streamable HTTP at /mcp) with the official MCP
TypeScript client, ``@modelcontextprotocol/sdk``'s Client, in front and the demo team's a2a-sdk
agents behind: the client negotiates its own revision (2025-11-25, which the relay's stateless
server serves without a session), lists the tools, gets the team's routed answer, and a key
without access is refused. One relay serves the whole module."""

from __future__ import annotations

import pytest

from routing.demo.agents import DEMO_AGENTS, build_agent_app
from routing.demo.setup import DEMO_QUESTION
from tests.jsinterop import MCP_SDK_PACKAGE, call_tool, list_tools, run_mcp_client
from tests.live import manage

NPM_SDK_REVISION = "2025-11-25"
"""LATEST_PROTOCOL_VERSION of @modelcontextprotocol/sdk 1.32 (tests/js/package.json)."""

pytestmark = pytest.mark.skipif(
    not MCP_SDK_PACKAGE.is_file(),
    reason="@modelcontextprotocol/sdk is not installed in tests/js "
    "(run: bash scripts/ensure-js; needs npm)",
)


@pytest.fixture(scope="module")
def demo(relay):
    for spec in DEMO_AGENTS:
        relay.serve_agent(spec.slug, lambda url, spec=spec: build_agent_app(spec, base_url=url))
    manage(
        relay.env,
        "shell",
        "-c",
        "from routing.demo.setup import demo_team_ensure; demo_team_ensure()",
    )
    relay.echo_only_key = (
        manage(relay.env, "create_api_key", "echo only", "--agent", "echo").strip().splitlines()[-1]
    )
    return relay


def test_the_npm_client_lists_the_tools_and_gets_the_demo_teams_routed_answer(demo):
    run = run_mcp_client(
        f"{demo.url}/mcp",
        [list_tools(), call_tool("team_demo", {"text": DEMO_QUESTION})],
        headers=demo.auth(),
    )

    assert run["kind"] == "done", run
    assert run["protocolVersion"] == NPM_SDK_REVISION
    assert run["server"]["name"] == "brass-relay"
    listed, called = (op.get("result") for op in run["ops"])
    tools = {tool["name"]: tool for tool in listed["tools"]}
    assert {"team_demo", "agent_triage", "agent_echo"} <= set(tools)
    assert tools["team_demo"]["inputSchema"]["properties"]["text"]["type"] == "string"
    assert tools["team_demo"]["_meta"]["relay/a2a"] == {"kind": "team", "id": "demo"}
    assert called is not None and not called.get("isError"), run["ops"][1]
    text = called["content"][0]["text"]
    assert text.startswith("DRAFT: ")
    a2a = called["_meta"]["relay/a2a"]
    assert a2a["state"] == "completed"
    assert called["structuredContent"]["taskId"] == a2a["taskId"]
    assert f"[A2A task {a2a['taskId']}: completed]" in text


def test_a_key_without_access_to_the_team_is_refused_its_tool(demo):
    run = run_mcp_client(
        f"{demo.url}/mcp",
        [
            list_tools(),
            call_tool("team_demo", {"text": DEMO_QUESTION}),
            call_tool("agent_echo", {"text": "only me"}),
        ],
        headers=demo.auth(demo.echo_only_key),
    )

    assert run["kind"] == "done", run
    listed, refused, echoed = run["ops"]
    assert {tool["name"] for tool in listed["result"]["tools"]} == {"agent_echo"}
    assert "result" not in refused
    assert refused["error"]["code"] == -32602 and "team_demo" in refused["error"]["message"]
    assert echoed["result"]["content"][0]["text"].startswith("only me")


def test_a_client_without_a_valid_key_cannot_connect(demo):
    run = run_mcp_client(
        f"{demo.url}/mcp", [list_tools()], headers={"Authorization": "Bearer not-a-key"}
    )

    assert run["kind"] == "error"
    assert run["code"] == 401 and "API key" in run["message"]
