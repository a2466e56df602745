"""MCP servers as agents, against a relay of real processes: a small MCP server written with
the official SDK (``MCPServer`` over streamable HTTP on 127.0.0.1) is registered by URL, its
tools become the skills of the card the relay writes, an a2a-sdk client calls its tools
through the relay on every binding (by a data part naming the tool, or by text the relay
matches to a tool), a tool error fails the task, it is probed, found by meaning and answers
as a team's member; a URL that is not an MCP server is a clear 422. Its sends go through the
A2A agents' policy: a call that did not reach it is tried again, its breaker opens on failures,
its progress notifications stream as ``working`` updates, and CancelTask cancels its call."""

from __future__ import annotations

import asyncio
import time
import uuid

import httpx
import pytest
from a2a.types import Message, Part, Role, SendMessageRequest
from google.protobuf.json_format import MessageToDict
from google.protobuf.struct_pb2 import Value
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import BaseModel

from routing.demo.agents import ECHO, build_agent_app
from tests.live import CALL_SECONDS, eventually, free_port, live_relay, manage
from tests.mcp_servers import CANCELLED, WAITING, slow_tools_app
from tests.servers import closed_port_url, running

SERVER = "unit-tools"
SLOW_SERVER = "slow-tools"
FLAKY_SERVER = "flaky-tools"
DOWN_SERVER = "down-tools"
TEAM = "mcp-crew"
STEPS = 3
SILENT_SECONDS = 8.0


class Reading(BaseModel):
    celsius: float
    fahrenheit: float


def unit_tools_app():
    server = MCPServer("Unit Tools")

    @server.tool(description="Converts a temperature in degrees Celsius to Fahrenheit.")
    def celsius_to_fahrenheit(celsius: float) -> Reading:
        return Reading(celsius=celsius, fahrenheit=celsius * 9 / 5 + 32)

    @server.tool(description="Shouts the sentence back in capital letters, loudly.")
    def shout(sentence: str) -> str:
        return sentence.upper() + "!"

    @server.tool(description="Always refuses the request, saying why.")
    def refuse(reason: str) -> str:
        raise ToolError(f"refused: {reason}")

    return server.streamable_http_app(streamable_http_path="/mcp")


def repeat_app():
    server = MCPServer("Repeater")

    @server.tool(description="Repeats the sentence it is given, word for word.")
    def repeat(sentence: str) -> str:
        return f"{sentence} {sentence}"

    return server.streamable_http_app(streamable_http_path="/mcp")


class Outage:
    """An MCP server behind a proxy that answers 503 to the next ``down`` requests; counts
    the requests that reached the server (``passed``) and those refused (``refused``)."""

    def __init__(self, app) -> None:
        self.app, self.down, self.passed, self.refused = app, 0, 0, 0

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http" and self.down > 0:
            self.down -= 1
            self.refused += 1
            await send({"type": "http.response.start", "status": 503, "headers": []})
            await send({"type": "http.response.body", "body": b"down for maintenance"})
            return
        if scope["type"] == "http":
            self.passed += 1
        await self.app(scope, receive, send)


@pytest.fixture(scope="module")
def relay(tmp_path_factory, relay_template):
    with live_relay(
        tmp_path_factory.mktemp("mcp-agents"),
        template=relay_template,
        RELAY_GRPC_PORT=str(free_port()),
        RELAY_BREAKER_FAILURES="2",
    ) as live:
        url = live._stack.enter_context(running(unit_tools_app()))
        live.mcp_url = f"{url}/mcp"
        live.registered = live.register(live.mcp_url, SERVER, mcpServer=True)
        slow = live._stack.enter_context(running(slow_tools_app()))
        live.register(f"{slow}/mcp", SLOW_SERVER, mcpServer=True)
        live.outages = {}
        for agent_id in (FLAKY_SERVER, DOWN_SERVER):
            outage = Outage(repeat_app())
            served = live._stack.enter_context(running(outage))
            live.register(f"{served}/mcp", agent_id, mcpServer=True)
            live.outages[agent_id] = outage
        live.serve_agent("echo", lambda base: build_agent_app(ECHO, base_url=base))
        manage(
            live.env,
            "shell",
            "-c",
            "from registry.teams import team_create; "
            f"team_create(team_id='{TEAM}', name='MCP crew', members=['{SERVER}'], "
            f"default_agent='{SERVER}')",
        )
        with live.grpc_server():
            yield live


def data_message(data: dict) -> Message:
    value = Value()
    value.struct_value.update(data)
    return Message(message_id=str(uuid.uuid4()), role=Role.ROLE_USER, parts=[Part(data=value)])


def text_message(text: str) -> Message:
    return Message(message_id=str(uuid.uuid4()), role=Role.ROLE_USER, parts=[Part(text=text)])


async def final_task(client, message: Message) -> dict:
    last = None
    async for event in client.send_message(SendMessageRequest(message=message)):
        last = event
    return MessageToDict(last)["task"] if "task" in MessageToDict(last) else MessageToDict(last)


def test_its_tools_are_the_skills_of_its_card(relay):
    entry = relay.registered
    assert entry["mcpServer"] is True
    skills = {skill["id"]: skill for skill in entry["skills"]}
    assert set(skills) == {"celsius_to_fahrenheit", "shout", "refuse"}
    assert skills["shout"]["description"].startswith("Shouts the sentence")
    card = relay.card(SERVER)
    assert relay.agent_url(SERVER) in {i["url"] for i in card["supportedInterfaces"]}
    assert "application/json" in card["defaultInputModes"]
    assert relay.mcp_url not in str(card)  # the server is reached through the relay only
    schemas = next(
        ext["params"]["tools"]
        for ext in card["capabilities"]["extensions"]
        if ext["uri"].endswith("/mcp-server/v1")
    )
    assert schemas["celsius_to_fahrenheit"]["properties"]["celsius"]["type"] == "number"


@pytest.mark.parametrize("binding", ["JSONRPC", "HTTP+JSON", "GRPC"])
async def test_a_data_part_calls_the_named_tool_and_its_result_is_the_artifact(relay, binding):
    async with relay.client(SERVER, binding, "1.0", streaming=False) as client:
        message = data_message({"tool": "celsius_to_fahrenheit", "arguments": {"celsius": 100}})
        task = await final_task(client, message)

    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    parts = task["artifacts"][0]["parts"]
    assert {"data": {"celsius": 100.0, "fahrenheit": 212.0}} in parts
    stored = relay.call(SERVER, "GetTask", {"id": task["id"]}).json()["result"]
    assert stored["status"]["state"] == "TASK_STATE_COMPLETED"


async def test_text_is_matched_to_a_tool_and_given_as_its_string_argument(relay):
    async with relay.client(SERVER, "JSONRPC", "1.0", streaming=True) as client:
        task = await final_task(client, text_message("shout this sentence loudly please"))

    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    assert task["artifacts"][0]["parts"][0]["text"] == "SHOUT THIS SENTENCE LOUDLY PLEASE!"


async def test_a_tool_error_fails_the_task_with_the_tools_message(relay):
    async with relay.client(SERVER, "JSONRPC", "1.0", streaming=False) as client:
        task = await final_task(
            client, data_message({"tool": "refuse", "arguments": {"reason": "no reason"}})
        )

    assert task["status"]["state"] == "TASK_STATE_FAILED"
    assert "refused: no reason" in task["status"]["message"]["parts"][0]["text"]


def test_an_unknown_tool_is_the_protocols_invalid_params(relay):
    answer = relay.call(
        SERVER,
        "SendMessage",
        {
            "message": {
                "messageId": "m-unknown",
                "role": "ROLE_USER",
                "parts": [{"data": {"tool": "nope", "arguments": {}}}],
            }
        },
    )
    assert answer.status_code == 200
    assert answer.json()["error"]["code"] == -32602
    assert "no tool 'nope'" in answer.json()["error"]["message"]


def test_it_is_found_by_meaning(relay):
    answer = httpx.get(
        f"{relay.url}/a2a/registry",
        params={"ask": "turn a Celsius temperature into Fahrenheit"},
        headers=relay.auth(),
        timeout=CALL_SECONDS,
    )
    assert answer.status_code == 200
    assert answer.json()["agents"][0]["id"] == SERVER


def test_a_team_routes_to_it_as_to_any_member(relay):
    answer = httpx.post(
        f"{relay.url}/a2a/teams/{TEAM}/",
        json={
            "jsonrpc": "2.0",
            "id": 1,
            "method": "SendMessage",
            "params": {
                "message": {
                    "messageId": "m-team",
                    "role": "ROLE_USER",
                    "parts": [{"data": {"tool": "shout", "arguments": {"sentence": "hello team"}}}],
                }
            },
        },
        headers={**relay.auth(), "A2A-Version": "1.0"},
        timeout=CALL_SECONDS,
    )
    assert answer.status_code == 200, answer.text
    assert "result" in answer.json(), answer.text
    task = answer.json()["result"]["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    assert "HELLO TEAM!" in str(task["artifacts"])


@pytest.mark.parametrize(
    ("url", "code"),
    [
        (lambda relay: relay.agents["echo"], "not_mcp"),
        (lambda relay: closed_port_url(), "unreachable"),
    ],
)
def test_a_url_that_is_no_mcp_server_is_a_clear_422(relay, url, code):
    answer = httpx.post(
        f"{relay.url}/a2a/registry",
        json={"url": url(relay), "mcpServer": True},
        headers=relay.auth(),
        timeout=CALL_SECONDS,
    )
    assert answer.status_code == 422, answer.text
    assert answer.json()["error"]["code"] == code or code in answer.text


def test_its_health_probe_initializes_and_lists_its_tools(relay):
    said = manage(
        relay.env,
        "shell",
        "-c",
        "from routing.health_services import sweep_now; "
        f"check = sweep_now(agent_ids=['{SERVER}'])[0]; "
        "print('STATE', check.state_after, check.card_changed)",
    )
    assert "STATE healthy False" in said
    agent = httpx.get(
        f"{relay.url}/a2a/registry/{SERVER}", headers=relay.auth(), timeout=CALL_SECONDS
    ).json()
    assert agent["health"]["state"] == "healthy"


def test_its_page_lists_its_tools_as_skills(relay):
    page = httpx.get(f"{relay.url}/agents/{SERVER}/", timeout=CALL_SECONDS)

    assert page.status_code == 200
    assert "celsius_to_fahrenheit" in page.text
    assert "Shouts the sentence back" in page.text


def repeat_request(sentence: str) -> dict:
    return {
        "message": {
            "messageId": str(uuid.uuid4()),
            "role": "ROLE_USER",
            "parts": [{"data": {"tool": "repeat", "arguments": {"sentence": sentence}}}],
        }
    }


def test_a_call_that_did_not_reach_the_server_is_tried_again(relay):
    outage = relay.outages[FLAKY_SERVER]
    outage.down = 1

    answer = relay.call(FLAKY_SERVER, "SendMessage", repeat_request("second time lucky"))

    assert answer.status_code == 200, answer.text
    task = answer.json()["result"]["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED", task
    assert "second time lucky second time lucky" in str(task["artifacts"])
    assert outage.refused == 1
    tries = task["metadata"]["relayAttempts"]
    assert [attempt["outcome"] for attempt in tries] == ["failed", "answered"]
    assert tries[0]["reason"] == "http_503"


def test_its_breaker_opens_after_failed_calls_and_refuses_without_calling_it(relay):
    outage = relay.outages[DOWN_SERVER]
    outage.down = 10**6
    said = []
    for number in range(3):  # RELAY_BREAKER_FAILURES is 2 here
        before = outage.refused
        answer = relay.call(DOWN_SERVER, "SendMessage", repeat_request(f"call {number}"))
        said.append((outage.refused - before, answer.text))

    (first_tries, first), (second_tries, _), (third_tries, third) = said
    assert first_tries == 3 and second_tries == 3  # tried again, up to its policy's 3 tries
    assert "HTTP 503" in first
    assert third_tries == 0
    assert "circuit breaker is open" in third
    agent = httpx.get(
        f"{relay.url}/a2a/registry/{DOWN_SERVER}", headers=relay.auth(), timeout=CALL_SECONDS
    ).json()
    assert agent["health"]["breaker"]["state"] == "open", agent["health"]


async def test_its_progress_notifications_stream_as_working_updates(relay):
    message = data_message({"tool": "count_slowly", "arguments": {"steps": STEPS}})
    async with relay.client(SLOW_SERVER, "JSONRPC", "1.0", streaming=True) as client:
        seen = [
            MessageToDict(event)
            async for event in client.send_message(SendMessageRequest(message=message))
        ]

    assert "task" in seen[0]  # the task comes first, then the server's progress
    updates = [event["statusUpdate"] for event in seen if "statusUpdate" in event]
    working = [u for u in updates if u["status"]["state"] == "TASK_STATE_WORKING"]
    assert [u["status"]["message"]["parts"][0]["text"] for u in working] == [
        f"counted {step} of {STEPS}" for step in range(1, STEPS + 1)
    ]
    assert working[-1]["metadata"]["mcpProgress"] == {"progress": STEPS, "total": STEPS}
    final = seen[-1]["task"] if "task" in seen[-1] else seen[-1]["statusUpdate"]
    assert final["status"]["state"] == "TASK_STATE_COMPLETED"
    task_id = working[0]["taskId"]
    stored = relay.call(SLOW_SERVER, "GetTask", {"id": task_id}).json()["result"]
    assert stored["status"]["state"] == "TASK_STATE_COMPLETED"
    assert "counted to 3" in str(stored["artifacts"])


async def test_cancelling_the_task_cancels_the_servers_call(relay):
    note = f"cancel-{uuid.uuid4().hex[:6]}"
    message = data_message({"tool": "wait_for_cancel", "arguments": {"note": note}})
    async with relay.client(SLOW_SERVER, "JSONRPC", "1.0", streaming=True) as client:
        events = client.send_message(SendMessageRequest(message=message))
        first = MessageToDict(await anext(events))
        task_id = first["task"]["id"]
        await eventually(lambda: note in WAITING, "the tool call reached the server")

        canceled = await asyncio.to_thread(relay.call, SLOW_SERVER, "CancelTask", {"id": task_id})
        rest = [MessageToDict(event) async for event in events]

    assert canceled.json()["result"]["status"]["state"] == "TASK_STATE_CANCELED", canceled.text
    await eventually(lambda: note in CANCELLED, "the server saw the call cancelled")
    assert note not in WAITING
    last = rest[-1]["task"] if "task" in rest[-1] else rest[-1]["statusUpdate"]
    assert last["status"]["state"] == "TASK_STATE_CANCELED"
    stored = relay.call(SLOW_SERVER, "GetTask", {"id": task_id}).json()["result"]
    assert stored["status"]["state"] == "TASK_STATE_CANCELED"


async def test_a_silent_tools_stream_opens_with_the_task_and_ends_with_its_answer(relay):
    # Regression: the stream held its first event until the tool's first notification, so a
    # tool that says nothing before it answers kept its caller without a task (to cancel) for
    # as long as it ran, up to the relay's 60 s timeout.
    message = data_message({"tool": "answer_later", "arguments": {"seconds": SILENT_SECONDS}})
    started = time.monotonic()
    async with relay.client(SLOW_SERVER, "JSONRPC", "1.0", streaming=True) as client:
        events = client.send_message(SendMessageRequest(message=message))
        first = MessageToDict(await anext(events))
        opened_after = time.monotonic() - started
        rest = [MessageToDict(event) async for event in events]
    answered_after = time.monotonic() - started

    assert first["task"]["status"]["state"] == "TASK_STATE_SUBMITTED"
    assert opened_after < SILENT_SECONDS, opened_after
    last = rest[-1]["task"] if "task" in rest[-1] else rest[-1]["statusUpdate"]
    assert last["status"]["state"] == "TASK_STATE_COMPLETED", rest
    stored = relay.call(SLOW_SERVER, "GetTask", {"id": first["task"]["id"]}).json()["result"]
    assert f"answered after {SILENT_SECONDS:g} s" in str(stored["artifacts"])
    assert SILENT_SECONDS <= answered_after < SILENT_SECONDS + 10, answered_after


async def test_a_silent_tools_blocking_call_is_answered_when_the_tool_answers(relay):
    message = data_message({"tool": "answer_later", "arguments": {"seconds": SILENT_SECONDS}})
    started = time.monotonic()
    async with relay.client(SLOW_SERVER, "JSONRPC", "1.0", streaming=False) as client:
        task = await final_task(client, message)
    answered_after = time.monotonic() - started

    assert task["status"]["state"] == "TASK_STATE_COMPLETED", task
    assert f"answered after {SILENT_SECONDS:g} s" in str(task["artifacts"])
    assert SILENT_SECONDS <= answered_after < SILENT_SECONDS + 10, answered_after
