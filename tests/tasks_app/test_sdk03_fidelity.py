"""The real a2a-sdk 0.3.26 client and agent through a live relay, against the same pair
directly (issue 13): binary files over 0.3 HTTP+JSON, and discovery from the relay's cards.

The 0.3.26 pieces run in their own virtualenv (``tests/sdk03.py``); the relay is real
processes (``tests/live.py``).
"""

from __future__ import annotations

import base64
import hashlib

import pytest
from a2a.types import Message, Part, Role, SendMessageRequest
from google.protobuf.json_format import MessageToDict

from routing.demo.agents import AgentSpec, Skill, TaskExecutor, build_agent_app
from tests.jsinterop import run_js_client, send
from tests.live import Recording, manage

BINARY = bytes(range(256)) + b"\xff\xfe\x00 not UTF-8 \x80"
BINARY_B64 = base64.b64encode(BINARY).decode()
BINARY_SHA = hashlib.sha256(BINARY).hexdigest()


class EchoesPartsAsArtifact(TaskExecutor):
    """Answers with a completed task whose artifact "echo" holds the parts it received."""

    async def work(self, context, updater) -> None:
        await updater.add_artifact(list(context.message.parts), name="echo", last_chunk=True)
        await updater.complete()


FILE_ECHO = AgentSpec(
    slug="file-echo",
    name="File Echo",
    description="Echoes parts as an artifact.",
    skills=(Skill(id="echo", name="Echo", description="Echoes parts.", tags=("echo",)),),
    make_executor=EchoesPartsAsArtifact,
)


@pytest.fixture(scope="module")
def file_echo(relay):
    """A 1.0-only a2a-sdk 1.3 agent at the relay as "file-echo", alone in the team "files";
    its recorded requests."""
    recording = Recording(lambda url: build_agent_app(FILE_ECHO, base_url=url, versions=("1.0",)))
    relay.serve_agent("file-echo", recording)
    manage(
        relay.env,
        "shell",
        "-c",
        "from registry.teams import team_create; "
        "team_create(team_id='files', name='Files', members=['file-echo'], "
        "default_agent='file-echo')",
    )
    return recording


def file_message_03(message_id: str) -> dict:
    """A 0.3 message with a text part and the binary file, as a 0.3.26 client builds it."""
    return {
        "kind": "message",
        "messageId": message_id,
        "role": "user",
        "parts": [
            {"kind": "text", "text": "a file"},
            {
                "kind": "file",
                "file": {
                    "bytes": BINARY_B64,
                    "name": "blob.bin",
                    "mimeType": "application/octet-stream",
                },
            },
        ],
    }


def files_in(task: dict) -> list[str]:
    """The ``bytes`` of every file part of a 0.3 task's artifacts and history."""
    parts = [part for artifact in task.get("artifacts", []) for part in artifact["parts"]]
    parts += [part for message in task.get("history", []) for part in message["parts"]]
    return [part["file"]["bytes"] for part in parts if part.get("kind") == "file"]


def test_item1_the_03_client_and_agent_round_trip_bytes_directly(a2a_sdk_03):
    """The baseline the relay must match: a2a-sdk 0.3.26 to itself over HTTP+JSON."""
    with a2a_sdk_03.agent(transports="HTTP+JSON") as url:
        answer = a2a_sdk_03.client(
            {
                "url": url,
                "transport": "HTTP+JSON",
                "message": file_message_03("direct-1"),
                "get_task": True,
            }
        )
    assert "error" not in answer, answer
    assert files_in(answer["task"]) == [BINARY_B64, BINARY_B64]
    texts = [part.get("text") for part in answer["task"]["artifacts"][0]["parts"]]
    assert f"blob.bin {BINARY_SHA}" in texts


@pytest.mark.parametrize("streaming", [False, True], ids=["send", "stream"])
def test_item1_a_binary_file_from_a_03_rest_client_reaches_a_10_agent_as_its_bytes_and_reads_back(
    a2a_sdk_03, relay, file_echo, streaming
):
    """Issue 13, item 1: through the relay, a 0.3.26 client over HTTP+JSON crashed on a task
    holding a binary file (UnicodeDecodeError), and the file it uploaded reached a 1.0 agent
    as the base64 text instead of the bytes."""
    message_id = f"upload-{streaming}"
    answer = a2a_sdk_03.client(
        {
            "url": relay.agent_url("file-echo"),
            "transport": "HTTP+JSON",
            "token": relay.key,
            "streaming": streaming,
            "message": file_message_03(message_id),
            "get_task": True,
        }
    )
    assert "error" not in answer, answer
    sent = [
        request.json()
        for request in file_echo.posts()
        if message_id in request.body.decode("latin-1")
    ]
    assert len(sent) == 1
    parts = sent[0]["params"]["message"]["parts"]
    assert [base64.b64decode(part["raw"]) for part in parts if "raw" in part] == [BINARY]
    assert files_in(answer["task"]) == [BINARY_B64, BINARY_B64]
    last = answer["events"][-1]
    task = last[0] if isinstance(last, list) else last
    assert BINARY_B64 in files_in(task)


async def test_item1_a_03_rest_only_agent_gets_the_bytes_a_10_client_sends_through_the_relay(
    a2a_sdk_03, relay
):
    """Issue 13, item 1, outbound: the relay calling a 0.3.26 agent that speaks only HTTP+JSON
    hands it the file's bytes (it names their SHA-256) and reads its file back as bytes."""
    with a2a_sdk_03.agent(transports="HTTP+JSON") as url:
        relay.register(url, "sdk03-rest")
        async with relay.client("sdk03-rest", "JSONRPC", "1.0", streaming=False) as client:
            request = SendMessageRequest(
                message=Message(
                    message_id="to-sdk03",
                    role=Role.ROLE_USER,
                    parts=[
                        Part(raw=BINARY, filename="blob.bin", media_type="application/octet-stream")
                    ],
                )
            )
            events = [MessageToDict(event) async for event in client.send_message(request)]
    task = events[-1]["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED", task["status"]
    parts = task["artifacts"][0]["parts"]
    assert [base64.b64decode(part["raw"]) for part in parts if "raw" in part] == [BINARY]
    assert {"text": f"blob.bin {BINARY_SHA}"} in parts


@pytest.mark.parametrize("transport", ["JSONRPC", "HTTP+JSON"])
@pytest.mark.parametrize("where", ["agent", "team"])
def test_item2_a_03_client_discovers_and_calls_through_the_relays_card(
    a2a_sdk_03, relay, file_echo, transport, where
):
    """Issue 13, item 2: the relay's card (agent and team) parses strictly in a2a-sdk 1.3 and
    a2a-sdk 0.3.26 still discovers the agent from it and calls it on either binding."""
    url = relay.agent_url("file-echo") if where == "agent" else f"{relay.url}/a2a/teams/files/"
    message = {
        "kind": "message",
        "messageId": f"hello-{where}-{transport}",
        "role": "user",
        "parts": [{"kind": "text", "text": "hello"}],
    }
    answer = a2a_sdk_03.client(
        {"url": url, "transport": transport, "token": relay.key, "message": message}
    )
    assert "error" not in answer, answer
    assert answer["card"]["url"] == url
    assert answer["card"]["securitySchemes"]["relayApiKey"]["type"] == "http"
    task = answer["events"][-1][0]
    assert task["status"]["state"] == "completed"
    assert task["artifacts"][-1]["parts"][0]["text"] == "hello"


@pytest.mark.parametrize("transport", ["JSONRPC", "HTTP+JSON"])
@pytest.mark.parametrize("where", ["agent", "team"])
def test_item2_the_js_sdk_discovers_and_calls_through_the_relays_card(
    a2a_js_sdk, relay, file_echo, transport, where
):
    """Issue 13, item 2: @a2a-js/sdk (which asks for the card with ``A2A-Version: 1.0``)
    discovers the agent and the team from the relay's card and calls them."""
    url = relay.agent_url("file-echo") if where == "agent" else f"{relay.url}/a2a/teams/files/"
    run = run_js_client(url, transport, [send("hello")], headers=relay.auth(), discover=True)
    assert run.client["binding"] == transport
    assert "url" not in run.client["card"]
    assert "relayApiKey" in run.client["card"]["securitySchemes"]
    assert run.ops[0].error is None, run.ops[0].error
    task = run.ops[0].result["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED", task["status"]
    assert task["artifacts"][-1]["parts"][0]["text"] == "hello"


def test_regression_a_03_resubscribe_to_a_finished_task_is_a_jsonrpc_error_not_http_400(
    a2a_sdk_03, relay, file_echo
):
    """Issue 13: through the relay, a2a-sdk 0.3.26's ``resubscribe`` to a finished task got
    A2AClientHTTPError 400 (the relay's plain JSON reply read as a broken stream); an agent
    answers the JSON-RPC error inside the stream, and so does the relay now."""
    answer = a2a_sdk_03.client(
        {
            "url": relay.agent_url("file-echo"),
            "transport": "JSONRPC",
            "token": relay.key,
            "operations": [
                {"op": "send", "message": file_message_03("resubscribe-regression")},
                {"op": "subscribe", "id": {"$ref": "0.events.0.0.id"}},
            ],
        }
    )
    assert "error" not in answer, answer
    sent, subscribed = answer["ops"]
    assert sent["events"][-1][0]["status"]["state"] == "completed", sent
    assert subscribed["error"]["type"] == "A2AClientJSONRPCError", subscribed
    assert subscribed["error"]["code"] == -32004, subscribed  # UnsupportedOperationError
