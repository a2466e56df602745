"""MCP servers as agents, against a relay of real processes: a small MCP server written with
the official SDK (``MCPServer`` over streamable HTTP on 127.0.0.1) is registered by URL, its
tools become the skills of the card the relay writes, an a2a-sdk client calls its tools
through the relay on every binding (by a data part naming the tool, or by text the relay
matches to a tool), a tool error fails the task, it is probed, found by meaning and answers
as a team's member; a URL that is not an MCP server is a clear 422."""

from __future__ import annotations

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
from tests.live import CALL_SECONDS, free_port, live_relay, manage
from tests.servers import closed_port_url, running

SERVER = "unit-tools"
TEAM = "mcp-crew"


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


@pytest.fixture(scope="module")
def relay(tmp_path_factory, relay_template):
    with live_relay(
        tmp_path_factory.mktemp("mcp-agents"),
        template=relay_template,
        RELAY_GRPC_PORT=str(free_port()),
    ) as live:
        url = live._stack.enter_context(running(unit_tools_app()))
        live.mcp_url = f"{url}/mcp"
        live.registered = live.register(live.mcp_url, SERVER, mcpServer=True)
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
