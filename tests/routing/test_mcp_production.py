"""The MCP server on a two-process production relay (PostgreSQL, Redis): it keeps no session,
so each process lists a key's tools and refuses what the key may not call, an input turn asked
by one process is answered through the other, and the demo team's tool answers on both; an MCP
task started on one process is followed, answered, cancelled or, for a minute-long agent,
followed step by step to its result through the other, and the npm client (2025-11-25) does the
same through the second process: lists, gets the team's answer, follows a minute-long task,
cancels one, is refused with a key without access, and has its question answered. An MCP server registered as an agent, called through one process, has its tool call
cancelled when the A2A task is cancelled through the other."""

from __future__ import annotations

import asyncio
import uuid
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack

import httpx2
import mcp_types as types
import pytest
from a2a.types import Message, Part, Role, SendMessageRequest
from google.protobuf.json_format import MessageToDict
from google.protobuf.struct_pb2 import Value
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from routing.demo.agents import DEMO_AGENTS, build_agent_app
from routing.demo.setup import DEMO_QUESTION
from tests import jsinterop
from tests.agents import (
    LONG_STEP_SECONDS,
    LONG_STEPS,
    input_required_agent,
    long_working_agent,
    never_finishing_agent,
)
from tests.live import (
    CALL_SECONDS,
    ServiceMissingError,
    eventually,
    live_relay,
    manage,
    production_services,
)
from tests.mcp_servers import CANCELLED, WAITING, slow_tools_app
from tests.mcp_tasks import TasksClient, call_as_task, poll, tasks_request
from tests.servers import running

SLOW_SERVER = "slow-tools"

pytestmark = pytest.mark.production


@pytest.fixture(scope="module")
def relay(tmp_path_factory):
    with ExitStack() as stack:
        try:
            services = stack.enter_context(production_services())
        except ServiceMissingError as error:
            pytest.skip(str(error))
        relay = stack.enter_context(live_relay(tmp_path_factory.mktemp("mcp-prod"), **services))
        for spec in DEMO_AGENTS:
            relay.serve_agent(spec.slug, lambda url, spec=spec: build_agent_app(spec, base_url=url))
        relay.serve_agent("asks", input_required_agent)
        relay.serve_agent("long", long_working_agent)
        relay.serve_agent("forever", never_finishing_agent)
        slow = stack.enter_context(running(slow_tools_app()))
        relay.register(f"{slow}/mcp", SLOW_SERVER, mcpServer=True)
        manage(
            relay.env,
            "shell",
            "-c",
            "from routing.demo.setup import demo_team_ensure; demo_team_ensure()",
        )
        relay.echo_only_key = (
            manage(relay.env, "create_api_key", "echo only", "--agent", "echo")
            .strip()
            .splitlines()[-1]
        )
        relay.second_url = stack.enter_context(relay.second())
        yield relay


def client(relay, base: str, *, key: str | None = None, **options) -> Client:
    http = httpx2.AsyncClient(
        headers={"Authorization": f"Bearer {key or relay.key}"}, timeout=CALL_SECONDS * 3
    )

    async def never_asked(context, params):  # declares elicitation; the test answers itself
        raise AssertionError("the test drives the input turn itself")

    return Client(
        streamable_http_client(f"{base}/mcp", http_client=http),
        elicitation_callback=never_asked,
        **options,
    )


async def test_the_demo_team_tool_answers_on_both_processes(relay):
    for base in (relay.url, relay.second_url):
        async with client(relay, base) as mcp:
            result = await mcp.call_tool("team_demo", {"text": DEMO_QUESTION})
        assert result.content[0].text.startswith("DRAFT: ")
        assert result.meta["relay/a2a"]["state"] == "completed"


async def test_each_process_lists_a_keys_tools_and_refuses_what_it_may_not_call(relay):
    for base in (relay.url, relay.second_url):
        async with client(relay, base) as mcp:
            every = {tool.name for tool in (await mcp.list_tools()).tools}
        async with client(relay, base, key=relay.echo_only_key) as mcp:
            names = {tool.name for tool in (await mcp.list_tools()).tools}
            with pytest.raises(Exception, match="team_demo"):  # the server's JSON-RPC error
                await mcp.call_tool("team_demo", {"text": DEMO_QUESTION})
            echoed = await mcp.call_tool("agent_echo", {"text": "only me"})

        assert {"team_demo", "agent_echo", "agent_asks", "agent_long"} <= every
        assert names == {"agent_echo"}
        assert echoed.content[0].text.startswith("only me")


async def test_a_minute_long_task_started_on_one_process_is_followed_through_the_other(relay):
    """The Python client's task, started on the first process and followed through the
    second; meanwhile (a minute each, so side by side) the npm client's task on the second."""
    npm = None
    with ThreadPoolExecutor(max_workers=1) as pool:
        if jsinterop.MCP_SDK_PACKAGE.is_file():
            npm = pool.submit(
                jsinterop.run_mcp_client,
                f"{relay.second_url}/mcp",
                [jsinterop.call_as_task("agent_long", {"text": "take your time"})],
                headers=relay.auth(),
                seconds=LONG_STEPS * LONG_STEP_SECONDS + 60,
            )
        async with client(relay, relay.url, extensions=[TasksClient()]) as first:
            created = await call_as_task(first, "agent_long", {"text": "take your time"})
        async with client(relay, relay.second_url, extensions=[TasksClient()]) as second:
            task, messages = await poll(
                second, created.task_id, timeout=LONG_STEPS * LONG_STEP_SECONDS + CALL_SECONDS
            )
        npm_run = None if npm is None else await asyncio.wrap_future(npm)

    assert messages[:LONG_STEPS] == [f"step {n} of {LONG_STEPS}" for n in range(1, LONG_STEPS + 1)]
    assert task["status"] == "completed"
    assert task["result"]["content"][0]["text"].startswith("long work done")
    if npm_run is not None:
        assert npm_run["kind"] == "done", npm_run
        ((round_,),) = [npm_run["ops"][0]["rounds"]]
        said = [
            m["task"].get("statusMessage") for m in round_["messages"] if m["type"] == "taskStatus"
        ]
        for step in range(1, LONG_STEPS + 1):
            assert f"step {step} of {LONG_STEPS}" in said
        assert round_["messages"][-1]["result"]["content"][0]["text"].startswith("long work done")


async def test_tasks_cancel_through_the_other_process_cancels_the_a2a_task(relay):
    async with client(relay, relay.url, extensions=[TasksClient()]) as first:
        created = await call_as_task(first, "agent_forever", {"text": "work forever"})
        await poll(first, created.task_id, until=frozenset({"working"}))
    async with client(relay, relay.second_url, extensions=[TasksClient()]) as second:
        await tasks_request(second, "tasks/cancel", taskId=created.task_id)
        task, _ = await poll(second, created.task_id)

    assert task["status"] == "cancelled"
    stored = relay.call("forever", "GetTask", {"id": created.task_id}, base=relay.url)
    assert stored.json()["result"]["status"]["state"] == "TASK_STATE_CANCELED"


async def test_an_input_turn_asked_by_one_process_is_answered_through_the_other(relay):
    async with client(relay, relay.url) as first:
        asked = await first.session.call_tool(
            "agent_asks", {"text": "greet someone"}, allow_input_required=True
        )
    assert isinstance(asked, types.InputRequiredResult)
    request = asked.input_requests["answer"]
    assert request.params.message == "What name should I greet?"

    answer = types.ElicitResult(action="accept", content={"answer": "Lin"})
    async with client(relay, relay.second_url) as second:
        result = await second.session.call_tool(
            "agent_asks",
            {"text": "greet someone"},
            input_responses={"answer": answer},
            request_state=asked.request_state,
            allow_input_required=True,
        )

    assert isinstance(result, types.CallToolResult)
    assert result.content[0].text.startswith("Hello, Lin!")
    assert result.meta["relay/a2a"]["state"] == "completed"


async def test_a_task_started_on_one_process_is_answered_and_finished_through_the_other(relay):
    async with client(relay, relay.url, extensions=[TasksClient()]) as first:
        created = await call_as_task(first, "agent_asks", {"text": "greet someone"})
    async with client(relay, relay.second_url, extensions=[TasksClient()]) as second:
        waiting, _ = await poll(second, created.task_id, until=frozenset({"input_required"}))
        ((key, _),) = waiting["inputRequests"].items()
        answer = {"action": "accept", "content": {"answer": "Lin"}}
        await tasks_request(
            second, "tasks/update", taskId=created.task_id, inputResponses={key: answer}
        )
        task, _ = await poll(second, created.task_id)

    assert task["status"] == "completed"
    assert task["result"]["content"][0]["text"].startswith("Hello, Lin!")
    assert task["result"]["_meta"]["relay/a2a"]["taskId"] == created.task_id


async def test_a_cancel_through_the_other_process_cancels_the_mcp_servers_tool_call(relay):
    note = f"cancel-{uuid.uuid4().hex[:6]}"
    arguments = Value()
    arguments.struct_value.update({"tool": "wait_for_cancel", "arguments": {"note": note}})
    message = Message(
        message_id=str(uuid.uuid4()), role=Role.ROLE_USER, parts=[Part(data=arguments)]
    )
    async with relay.client(SLOW_SERVER, "JSONRPC", "1.0", base=relay.url) as calling:
        events = calling.send_message(SendMessageRequest(message=message))
        task_id = MessageToDict(await anext(events))["task"]["id"]
        await eventually(lambda: note in WAITING, "the tool call reached the server")

        canceled = await asyncio.to_thread(
            relay.call, SLOW_SERVER, "CancelTask", {"id": task_id}, base=relay.second_url
        )
        await eventually(lambda: note in CANCELLED, "the server saw the call cancelled")
        rest = [MessageToDict(event) async for event in events]

    assert canceled.json()["result"]["status"]["state"] == "TASK_STATE_CANCELED", canceled.text
    assert note not in WAITING
    last = rest[-1]["task"] if "task" in rest[-1] else rest[-1]["statusUpdate"]
    assert last["status"]["state"] == "TASK_STATE_CANCELED"
    for base in (relay.url, relay.second_url):
        stored = relay.call(SLOW_SERVER, "GetTask", {"id": task_id}, base=base).json()["result"]
        assert stored["status"]["state"] == "TASK_STATE_CANCELED"


@pytest.mark.skipif(
    not jsinterop.MCP_SDK_PACKAGE.is_file(),
    reason="@modelcontextprotocol/sdk is not installed in tests/js "
    "(run: bash scripts/ensure-js; needs npm)",
)
def test_the_npm_clients_task_is_asked_and_answered_through_the_second_process(relay):
    run = jsinterop.run_mcp_client(
        f"{relay.second_url}/mcp",
        [jsinterop.call_as_task("agent_asks", {"text": "greet someone"}, answer="Lin")],
        headers=relay.auth(),
    )

    assert run["kind"] == "done", run
    asked, answered = run["ops"][0]["rounds"]
    assert "What name should I greet?" in asked["messages"][-1]["result"]["content"][0]["text"]
    assert answered["taskId"] == asked["taskId"]
    assert answered["messages"][-1]["result"]["content"][0]["text"].startswith("Hello, Lin!")
    stored = relay.call("asks", "GetTask", {"id": asked["taskId"]}, base=relay.url)
    assert stored.json()["result"]["status"]["state"] == "TASK_STATE_COMPLETED"


@pytest.mark.skipif(
    not jsinterop.MCP_SDK_PACKAGE.is_file(),
    reason="@modelcontextprotocol/sdk is not installed in tests/js "
    "(run: bash scripts/ensure-js; needs npm)",
)
def test_the_npm_client_lists_calls_cancels_and_is_refused_on_the_second_process(relay):
    """Two clients at once on the second process: the team's call with a cancelled task,
    and a key without access to the team (its minute-long task: the test above)."""
    url = f"{relay.second_url}/mcp"
    with ThreadPoolExecutor(max_workers=2) as pool:
        team = pool.submit(
            jsinterop.run_mcp_client,
            url,
            [
                jsinterop.list_tools(),
                jsinterop.call_tool("team_demo", {"text": DEMO_QUESTION}),
                jsinterop.call_as_task(
                    "agent_forever", {"text": "work forever"}, cancelAfterStatus=1
                ),
            ],
            headers=relay.auth(),
        )
        limited = pool.submit(
            jsinterop.run_mcp_client,
            url,
            [jsinterop.list_tools(), jsinterop.call_tool("team_demo", {"text": DEMO_QUESTION})],
            headers=relay.auth(relay.echo_only_key),
        )
    team, limited = team.result(), limited.result()

    assert team["kind"] == "done", team
    listed, called, cancelled = team["ops"]
    assert {"team_demo", "agent_long", "agent_forever"} <= {
        tool["name"] for tool in listed["result"]["tools"]
    }
    assert called["result"]["content"][0]["text"].startswith("DRAFT: ")
    ((round_,),) = [cancelled["rounds"]]
    assert any(message["type"] == "canceled" for message in round_["messages"])
    stored = relay.call("forever", "GetTask", {"id": round_["taskId"]}, base=relay.url)
    assert stored.json()["result"]["status"]["state"] == "TASK_STATE_CANCELED"

    assert limited["kind"] == "done", limited
    listed, refused = limited["ops"]
    assert {tool["name"] for tool in listed["result"]["tools"]} == {"agent_echo"}
    assert refused["error"]["code"] == -32602 and "team_demo" in refused["error"]["message"]
