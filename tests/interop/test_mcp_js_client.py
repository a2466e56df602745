"""The relay's MCP server (the mcp Python SDK, streamable HTTP at /mcp) with the official MCP
TypeScript client, ``@modelcontextprotocol/sdk``'s Client, in front and the demo team's a2a-sdk
agents behind: the client negotiates its own revision (2025-11-25, which the relay's stateless
server serves without a session), lists the tools, gets the team's routed answer, follows a
minute-long agent's plain call by its progress notifications to its result, cancels a call
(``notifications/cancelled``) whose A2A task then ends canceled, and a key without access is
refused. As 2025-11-25 tasks (``client.experimental.tasks``): a minute-long agent's task is
polled through each step to its result, a question is answered by calling again with the task
id, and ``tasks/cancel`` ends the A2A task canceled. One relay serves the whole module."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor

import pytest

from routing.demo.agents import DEMO_AGENTS, build_agent_app
from routing.demo.setup import DEMO_QUESTION
from tests.agents import (
    LONG_STEP_SECONDS,
    LONG_STEPS,
    input_required_agent,
    long_working_agent,
    never_finishing_agent,
)
from tests.jsinterop import MCP_SDK_PACKAGE, call_as_task, call_tool, list_tools, run_mcp_client
from tests.live import eventually, manage

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
    relay.serve_agent("long", long_working_agent)
    relay.serve_agent("forever", never_finishing_agent)
    relay.serve_agent("asks", input_required_agent)
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


def test_the_npm_client_follows_a_minute_long_agent_as_a_plain_call_and_as_a_task(demo):
    """Both at once, each a client of its own: a plain call reporting each step as progress
    (which keeps the SDK's 60 s request timeout from ending it), and a task polled through
    each step to its result."""
    seconds = LONG_STEPS * LONG_STEP_SECONDS + 60
    with ThreadPoolExecutor(max_workers=2) as pool:
        plain = pool.submit(
            run_mcp_client,
            f"{demo.url}/mcp",
            [call_tool("agent_long", {"text": "take your time"}, progress=True)],
            headers=demo.auth(),
            seconds=seconds,
        )
        as_task = pool.submit(
            run_mcp_client,
            f"{demo.url}/mcp",
            [list_tools(), call_as_task("agent_long", {"text": "take your time"})],
            headers=demo.auth(),
            seconds=seconds,
        )
    check_plain_call_of_the_long_agent(plain.result())
    check_task_of_the_long_agent(demo, as_task.result())


def check_plain_call_of_the_long_agent(run: dict) -> None:
    assert run["kind"] == "done", run
    (called,) = run["ops"]
    assert "result" in called, called
    assert called["result"]["content"][0]["text"].startswith("long work done")
    assert called["result"]["_meta"]["relay/a2a"]["state"] == "completed"
    messages = [seen.get("message") for seen in called["progress"]]
    for step in range(1, LONG_STEPS + 1):
        assert f"working: step {step} of {LONG_STEPS}" in messages
    first = next(
        seen["atMs"]
        for seen in called["progress"]
        if seen.get("message", "").endswith("step 1 of 12")
    )
    assert first / 1000 < LONG_STEP_SECONDS * 2  # while the agent works, not at its end


def test_the_npm_clients_cancelled_call_cancels_its_a2a_task(demo):
    run = run_mcp_client(
        f"{demo.url}/mcp",
        [call_tool("agent_forever", {"text": "work forever"}, cancelAfterProgress=1)],
        headers=demo.auth(),
    )

    assert run["kind"] == "done", run
    (called,) = run["ops"]
    assert "error" in called, called
    assert called["progress"], called

    def the_forever_task() -> dict:
        tasks = demo.call("forever", "ListTasks", {}).json()["result"]["tasks"]
        return tasks[0] if tasks else {}

    async def canceled() -> bool:
        return the_forever_task().get("status", {}).get("state") == "TASK_STATE_CANCELED"

    asyncio.run(eventually(canceled, what="the A2A task of the cancelled call ends canceled"))


def a2a_state(relay, agent_id: str, task_id: str) -> str:
    return relay.call(agent_id, "GetTask", {"id": task_id}).json()["result"]["status"]["state"]


def check_task_of_the_long_agent(demo, run: dict) -> None:
    assert run["kind"] == "done", run
    listed, called = run["ops"]
    tools = {tool["name"]: tool for tool in listed["result"]["tools"]}
    assert tools["agent_long"]["execution"] == {"taskSupport": "optional"}
    ((round_,),) = [called["rounds"]]
    messages = round_["messages"]
    assert messages[0]["type"] == "taskCreated", messages[0]
    said = [m["task"].get("statusMessage") for m in messages if m["type"] == "taskStatus"]
    for step in range(1, LONG_STEPS + 1):
        assert f"step {step} of {LONG_STEPS}" in said
    assert messages[-1]["type"] == "result", messages[-1]
    result = messages[-1]["result"]
    assert result["content"][0]["text"].startswith("long work done")
    assert result["structuredContent"]["taskId"] == round_["taskId"]
    assert a2a_state(demo, "long", round_["taskId"]) == "TASK_STATE_COMPLETED"


def test_the_npm_clients_task_asks_and_its_answer_resumes_the_same_a2a_task(demo):
    run = run_mcp_client(
        f"{demo.url}/mcp",
        [call_as_task("agent_asks", {"text": "greet someone"}, answer="Lin")],
        headers=demo.auth(),
    )

    assert run["kind"] == "done", run
    asked, answered = run["ops"][0]["rounds"]
    question = asked["messages"][-1]["result"]
    assert "What name should I greet?" in question["content"][0]["text"]
    assert question["structuredContent"]["state"] == "input-required"
    assert answered["taskId"] == asked["taskId"]
    result = answered["messages"][-1]["result"]
    assert result["content"][0]["text"].startswith("Hello, Lin!")
    assert a2a_state(demo, "asks", asked["taskId"]) == "TASK_STATE_COMPLETED"


def test_the_npm_client_cancels_a_task_and_its_a2a_task_ends_canceled(demo):
    run = run_mcp_client(
        f"{demo.url}/mcp",
        [call_as_task("agent_forever", {"text": "work forever"}, cancelAfterStatus=1)],
        headers=demo.auth(),
    )

    assert run["kind"] == "done", run
    ((round_,),) = [run["ops"][0]["rounds"]]
    canceled = next(m for m in round_["messages"] if m["type"] == "canceled")
    assert canceled["task"]["status"] == "cancelled"
    assert round_["messages"][-1]["type"] == "error"
    assert "cancelled" in round_["messages"][-1]["error"]["message"]
    assert a2a_state(demo, "forever", round_["taskId"]) == "TASK_STATE_CANCELED"
