"""The relay's MCP server against a relay of real processes, with the official MCP Python
client (streamable HTTP, 2026-07-28) in front and a2a-sdk agents behind: tools listed per
key, the demo team's routed answer, progress of a slow agent, an input-required turn answered
by elicitation, a cancelled call whose A2A task ends canceled, and a key without access; and
the same as MCP tasks (the tasks extension): a task at once, polled to its result, a minute-long
agent's progress, an input turn answered with ``tasks/update``, ``tasks/cancel``."""

from __future__ import annotations

import asyncio
import html
import os
import re
import subprocess
import sys
import time

import anyio
import httpx
import httpx2
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from routing.demo.agents import (
    DEMO_AGENTS,
    AgentSpec,
    Skill,
    TaskExecutor,
    build_agent_app,
    text_message,
)
from routing.demo.setup import DEMO_QUESTION
from tests.agents import (
    LONG_STEP_SECONDS,
    LONG_STEPS,
    input_required_agent,
    long_working_agent,
    never_finishing_agent,
)
from tests.live import CALL_SECONDS, eventually, live_relay, manage
from tests.mcp_tasks import TasksClient, call_as_task, poll, tasks_request

SLOW_STEPS = 4
SLOW_STEP_SECONDS = 0.8


class SlowWorker(TaskExecutor):
    """Reports SLOW_STEPS working updates, SLOW_STEP_SECONDS apart, then completes."""

    async def work(self, context, updater) -> None:
        for step in range(1, SLOW_STEPS + 1):
            await updater.start_work(text_message(updater, f"step {step} of {SLOW_STEPS}"))
            await asyncio.sleep(SLOW_STEP_SECONDS)
        await updater.complete(text_message(updater, "slow work done"))


SLOW = AgentSpec(
    slug="slow",
    name="Slow Worker",
    description="Works a few seconds, reporting each step.",
    skills=(Skill(id="slow", name="Slow work", description="Takes its time.", tags=("test",)),),
    make_executor=SlowWorker,
)


@pytest.fixture(scope="module")
def relay(tmp_path_factory):
    with live_relay(tmp_path_factory.mktemp("mcp-relay")) as live:
        for spec in DEMO_AGENTS:
            live.serve_agent(spec.slug, lambda url, spec=spec: build_agent_app(spec, base_url=url))
        live.serve_agent("slow", lambda url: build_agent_app(SLOW, base_url=url))
        live.serve_agent("asks", input_required_agent)
        live.serve_agent("forever", never_finishing_agent)
        live.serve_agent("long", long_working_agent)
        manage(
            live.env,
            "shell",
            "-c",
            "from routing.demo.setup import demo_team_ensure; demo_team_ensure(); "
            "from registry.models import Agent; "
            "Agent.objects.filter(pk='echo').update(mcp_skill_tools=True)",
        )
        live.echo_only_key = (
            manage(live.env, "create_api_key", "echo only", "--agent", "echo")
            .strip()
            .splitlines()[-1]
        )
        yield live


def client(relay, *, key: str | None = None, path: str = "/mcp", **options) -> Client:
    http = httpx2.AsyncClient(
        headers={"Authorization": f"Bearer {key or relay.key}"}, timeout=CALL_SECONDS * 3
    )
    return Client(streamable_http_client(f"{relay.url}{path}", http_client=http), **options)


def task_state(relay, agent_id: str, task_id: str) -> str:
    response = relay.call(agent_id, "GetTask", {"id": task_id})
    return response.json()["result"]["status"]["state"]


async def test_every_agent_and_team_is_a_tool_with_the_cards_description(relay):
    async with client(relay) as mcp:
        tools = {tool.name: tool for tool in (await mcp.list_tools()).tools}

    assert {"team_demo", "agent_triage", "agent_echo", "agent_slow", "agent_asks"} <= set(tools)
    assert tools["agent_echo"].description == "Answers with exactly the text it received."
    assert tools["skill_echo_echo"].title == "Echo Agent: Echo"
    assert "text" in tools["team_demo"].input_schema["properties"]
    assert tools["team_demo"].meta["relay/a2a"] == {"kind": "team", "id": "demo"}
    assert "skill_triage_triage" not in tools  # triage's admin did not opt in


async def test_a_team_endpoint_lists_the_team_and_its_members_only(relay):
    async with client(relay, path="/mcp/teams/demo") as mcp:
        names = {tool.name for tool in (await mcp.list_tools()).tools}

    assert names == {
        "team_demo",
        "agent_triage",
        "agent_researcher",
        "agent_writer",
        "agent_echo",
        "skill_echo_echo",
    }


async def test_the_demo_team_tool_answers_with_the_routed_draft(relay):
    async with client(relay) as mcp:
        result = await mcp.call_tool("team_demo", {"text": DEMO_QUESTION})

    assert not result.is_error
    text = result.content[0].text
    assert text.startswith("DRAFT: ")
    a2a = result.meta["relay/a2a"]
    assert a2a["state"] == "completed"
    assert f"[A2A task {a2a['taskId']}: completed]" in text
    assert result.structured_content["taskId"] == a2a["taskId"]


async def test_a_slow_agent_reports_progress_then_its_result(relay):
    seen: list[tuple[float, str | None, float]] = []
    started = time.monotonic()

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, message, time.monotonic() - started))

    async with client(relay) as mcp:
        result = await mcp.call_tool("agent_slow", {"text": "go"}, progress_callback=on_progress)
    elapsed = time.monotonic() - started

    assert result.content[0].text.startswith("slow work done")
    assert result.meta["relay/a2a"]["state"] == "completed"
    messages = [message for _, message, _ in seen]
    for step in range(1, SLOW_STEPS + 1):
        assert f"working: step {step} of {SLOW_STEPS}" in messages
    assert [progress for progress, _, _ in seen] == sorted(progress for progress, _, _ in seen)
    # The first step arrived while the agent was still working, long before its result.
    first = next(at for _, message, at in seen if message == f"working: step 1 of {SLOW_STEPS}")
    assert first < elapsed - SLOW_STEP_SECONDS * (SLOW_STEPS - 2)


async def test_an_input_required_turn_is_asked_and_its_answer_resumes_the_a2a_task(relay):
    asked: list[str] = []

    async def on_elicit(context, params: types.ElicitRequestParams):
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"answer": "Ada"})

    async with client(relay, elicitation_callback=on_elicit) as mcp:
        result = await mcp.call_tool("agent_asks", {"text": "greet someone"})

    assert asked == ["What name should I greet?"]
    assert result.content[0].text.startswith("Hello, Ada!")
    a2a = result.meta["relay/a2a"]
    assert a2a["state"] == "completed"
    assert task_state(relay, "asks", a2a["taskId"]) == "TASK_STATE_COMPLETED"


async def test_a_declined_question_cancels_the_a2a_task(relay):
    async def on_elicit(context, params):
        return types.ElicitResult(action="decline")

    async with client(relay, elicitation_callback=on_elicit) as mcp:
        result = await mcp.call_tool("agent_asks", {"text": "greet someone"})

    assert result.is_error
    assert result.meta["relay/a2a"]["state"] == "canceled"


async def test_a_cancelled_call_cancels_its_a2a_task(relay):
    async with client(relay) as mcp:
        with anyio.move_on_after(2.0):
            await mcp.call_tool("agent_forever", {"text": "work forever"})

    def the_forever_task() -> dict:
        response = relay.call("forever", "ListTasks", {})
        tasks = response.json()["result"]["tasks"]
        return tasks[0] if tasks else {}

    async def canceled() -> bool:
        task = await asyncio.to_thread(the_forever_task)
        return task.get("status", {}).get("state") == "TASK_STATE_CANCELED"

    await eventually(canceled, what="the A2A task of the cancelled call ends canceled")


async def test_a_key_sees_and_calls_only_what_it_may_call(relay):
    async with client(relay, key=relay.echo_only_key) as mcp:
        names = {tool.name for tool in (await mcp.list_tools()).tools}
        refused = None
        try:
            await mcp.call_tool("team_demo", {"text": DEMO_QUESTION})
        except Exception as error:  # the SDK raises the server's JSON-RPC error
            refused = error
        echoed = await mcp.call_tool("agent_echo", {"text": "only me"})

    assert names == {"agent_echo", "skill_echo_echo"}
    assert refused is not None and "team_demo" in str(refused)
    assert echoed.content[0].text.startswith("only me")


def test_a_request_without_a_valid_key_gets_401(relay):
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    for headers in ({}, {"Authorization": "Bearer not-a-key"}):
        response = httpx.post(f"{relay.url}/mcp", json=body, headers=headers, timeout=CALL_SECONDS)
        assert response.status_code == 401
        assert response.headers["www-authenticate"].startswith("Bearer")


@pytest.mark.parametrize(
    ("page", "tool", "answer"),
    # The echo agent answers with a message, no task; the team's answer names its task.
    [("/agents/echo/", "agent_echo", "Hello\n"), ("/teams/demo/", "team_demo", "[A2A task ")],
)
def test_the_pages_mcp_snippet_gets_an_answer_as_printed(relay, page, tool, answer):
    response = httpx.get(f"{relay.url}{page}", timeout=CALL_SECONDS)
    snippet = html.unescape(
        re.search(r'<pre class="code" id="snippet-mcp">(.*?)</pre>', response.text, re.S)[1]
    )
    assert f'id="call-mcp-tool">{tool}<' in response.text
    assert f'TOOL = "{tool}"' in snippet

    result = subprocess.run(
        [sys.executable, "-c", snippet],
        env={**os.environ, "RELAY_API_KEY": relay.key},
        capture_output=True,
        text=True,
        timeout=CALL_SECONDS * 2,
    )

    assert result.returncode == 0, result.stderr
    assert answer in result.stdout


def test_a_request_for_another_host_is_refused_before_the_key_is_read(relay):
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    response = httpx.post(
        f"{relay.url}/mcp",
        json=body,
        headers={**relay.auth(), "Host": "rebound.example"},
        timeout=CALL_SECONDS,
    )
    assert response.status_code == 400


async def test_a_client_of_the_handshake_era_continues_a_task_with_its_id(relay):
    async with client(relay, mode="legacy") as mcp:
        names = {tool.name for tool in (await mcp.list_tools()).tools}
        asked = await mcp.call_tool("agent_asks", {"text": "greet someone"})
        task_id = asked.meta["relay/a2a"]["taskId"]
        answered = await mcp.call_tool("agent_asks", {"text": "Grace", "taskId": task_id})

    assert "agent_asks" in names
    assert asked.meta["relay/a2a"]["state"] == "input-required"
    assert asked.content[0].text.startswith("What name should I greet?")
    assert f"taskId {task_id}" in asked.content[0].text
    assert answered.content[0].text.startswith("Hello, Grace!")
    assert answered.meta["relay/a2a"] == {
        "taskId": task_id,
        "contextId": asked.meta["relay/a2a"]["contextId"],
        "state": "completed",
    }


# --- MCP tasks (io.modelcontextprotocol/tasks) -------------------------------------------


def tasks_client(relay, **options) -> Client:
    return client(relay, extensions=[TasksClient()], **options)


async def test_a_call_asking_for_a_task_gets_the_a2a_task_at_once_and_polls_its_result(relay):
    started = time.monotonic()
    async with tasks_client(relay) as mcp:
        created = await call_as_task(mcp, "agent_slow", {"text": "go"})
        answered_in = time.monotonic() - started
        task, messages = await poll(mcp, created.task_id)
        extensions = mcp.server_capabilities.extensions

    assert extensions == {"io.modelcontextprotocol/tasks": {}}
    assert created.status == "working"
    assert answered_in < SLOW_STEP_SECONDS * SLOW_STEPS / 2
    # The MCP task is the A2A task: same id, in the relay's task API.
    assert task_state(relay, "slow", created.task_id) == "TASK_STATE_COMPLETED"
    assert task["status"] == "completed"
    assert task["result"]["content"][0]["text"].startswith("slow work done")
    assert task["result"]["_meta"]["relay/a2a"]["taskId"] == created.task_id
    assert task["result"]["isError"] is False
    steps = [message for message in messages if message.startswith("step ")]
    assert steps and steps == sorted(steps)  # the agent's status messages, as they came


async def test_a_minute_long_agent_runs_as_a_task_reporting_each_step(relay):
    async with tasks_client(relay) as mcp:
        created = await call_as_task(mcp, "agent_long", {"text": "take your time"})
        task, messages = await poll(
            mcp, created.task_id, timeout=LONG_STEPS * LONG_STEP_SECONDS + CALL_SECONDS
        )

    assert messages[:LONG_STEPS] == [f"step {n} of {LONG_STEPS}" for n in range(1, LONG_STEPS + 1)]
    assert task["status"] == "completed"
    assert task["result"]["content"][0]["text"].startswith("long work done")
    assert task_state(relay, "long", created.task_id) == "TASK_STATE_COMPLETED"


async def test_a_tasks_input_turn_is_answered_with_tasks_update_on_the_same_a2a_task(relay):
    async with tasks_client(relay) as mcp:
        created = await call_as_task(mcp, "agent_asks", {"text": "greet someone"})
        waiting, _ = await poll(mcp, created.task_id, until=frozenset({"input_required"}))
        ((key, request),) = waiting["inputRequests"].items()
        answer = {"action": "accept", "content": {"answer": "Ada"}}
        acknowledged = await tasks_request(
            mcp, "tasks/update", taskId=created.task_id, inputResponses={key: answer}
        )
        task, _ = await poll(mcp, created.task_id)

    assert waiting["statusMessage"] == "What name should I greet?"
    assert request["method"] == "elicitation/create"
    assert request["params"]["message"] == "What name should I greet?"
    assert acknowledged["resultType"] == "complete"
    assert task["status"] == "completed"
    assert task["result"]["content"][0]["text"].startswith("Hello, Ada!")
    assert task_state(relay, "asks", created.task_id) == "TASK_STATE_COMPLETED"


async def test_tasks_cancel_cancels_the_a2a_task(relay):
    async with tasks_client(relay) as mcp:
        created = await call_as_task(mcp, "agent_forever", {"text": "work forever"})
        await poll(mcp, created.task_id, until=frozenset({"working"}))
        await tasks_request(mcp, "tasks/cancel", taskId=created.task_id)
        task, _ = await poll(mcp, created.task_id)

    assert task["status"] == "cancelled"
    assert task_state(relay, "forever", created.task_id) == "TASK_STATE_CANCELED"


async def test_another_key_can_neither_get_nor_cancel_a_task(relay):
    async with tasks_client(relay) as mcp:
        created = await call_as_task(mcp, "agent_forever", {"text": "work forever"})
    refused = []
    async with tasks_client(relay, key=relay.echo_only_key) as other:
        for method in ("tasks/get", "tasks/cancel"):
            try:
                await tasks_request(other, method, taskId=created.task_id)
            except MCPError as error:
                refused.append(error.error.code)

    assert refused == [types.INVALID_PARAMS, types.INVALID_PARAMS]
    assert task_state(relay, "forever", created.task_id) == "TASK_STATE_WORKING"
    relay.call("forever", "CancelTask", {"id": created.task_id})


async def test_a_client_without_the_extension_gets_no_task(relay):
    async with client(relay) as mcp:
        result = await mcp.call_tool("agent_slow", {"text": "go"})
        try:
            await tasks_request(mcp, "tasks/get", taskId=result.meta["relay/a2a"]["taskId"])
        except MCPError as error:
            refused = error.error.code

    assert result.content[0].text.startswith("slow work done")
    assert refused == types.MISSING_REQUIRED_CLIENT_CAPABILITY
