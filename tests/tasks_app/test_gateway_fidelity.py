"""What survives the hop through the relay, byte for byte: ids, metadata, extensions and the
extension activation header, both ways and across protocol versions.

The upstream is a small JSON-RPC agent written here (1.0 or 0.3) that keeps every raw request
and echoes what it received, and the client side is raw JSON-RPC, so nothing on either side
(such as protobuf's Struct, which makes every number a float) hides what the relay did.
"""

from __future__ import annotations

import itertools
import json
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from tests.live import CALL_SECONDS, SeenRequest, read_stream

EXTENSION = "https://brass-relay.test/extensions/fidelity/v1"
UNDECLARED = "https://brass-relay.test/extensions/unknown/v1"
OWN_CONTEXT = "the-agents-own-context"

PARAMS_METADATA = {"trace": {"id": "t-1", "depth": 2, "sampled": True}, "attempt": 3, "ratio": 0.5}
MESSAGE_METADATA = {
    EXTENSION: {"nested": {"list": [1, 2, {"deep": None}], "count": 7}},
    "plain": "text",
    "zero": 0,
}

VERSIONS = ["1.0", "0.3"]


# --- the recording agent ------------------------------------------------------------------


class FidelityAgent:
    """A JSON-RPC agent of one A2A version that declares EXTENSION and keeps every request.

    SendMessage / message/send (and the streaming methods, as a one-event stream) answer with
    a task that carries back what came in: the message's metadata and extensions on the
    status message and the artifact, ``params.metadata`` as the artifact's data and in the
    task's metadata. A first message "ask" leaves the task input-required; a message naming
    the task completes it. A message "own-context" gets a context id of the agent's own.
    """

    def __init__(self, version: str) -> None:
        self.version = version
        self.requests: list[SeenRequest] = []
        self.tasks: dict[str, dict[str, Any]] = {}
        self._ids = itertools.count(1)

    def __call__(self, base_url: str) -> Starlette:
        return Starlette(
            routes=[
                Route(
                    "/.well-known/agent-card.json",
                    lambda request: JSONResponse(self.card(base_url)),
                    methods=["GET"],
                ),
                Route("/", self.endpoint, methods=["POST"]),
            ]
        )

    def card(self, url: str) -> dict[str, Any]:
        card = {
            "name": f"Fidelity {self.version}",
            "description": "Echoes what it receives.",
            "version": "1.0.0",
            "capabilities": {
                "streaming": True,
                "extensions": [
                    {"uri": EXTENSION, "description": "Fidelity checks", "required": False}
                ],
            },
            "defaultInputModes": ["text/plain"],
            "defaultOutputModes": ["text/plain"],
            "skills": [{"id": "echo", "name": "Echo", "description": "Echoes.", "tags": ["test"]}],
        }
        if self.version == "1.0":
            return card | {
                "supportedInterfaces": [
                    {"url": url, "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}
                ]
            }
        return card | {"protocolVersion": "0.3.0", "url": url, "preferredTransport": "JSONRPC"}

    def sends(self) -> list[SeenRequest]:
        return [r for r in self.requests if "essage" in r.json().get("method", "")]

    async def endpoint(self, request: Request) -> Response:
        body = await request.body()
        self.requests.append(
            SeenRequest(
                request.method,
                request.url.path,
                {k.lower(): v for k, v in request.headers.items()},
                body,
            )
        )
        call = json.loads(body)
        method, params = call.get("method"), call.get("params") or {}
        if method in ("SendMessage", "message/send", "SendStreamingMessage", "message/stream"):
            result = self.answer(params)
        elif method in ("GetTask", "tasks/get") and params.get("id") in self.tasks:
            result = self.tasks[params["id"]]
        else:
            return JSONResponse(
                {
                    "jsonrpc": "2.0",
                    "id": call.get("id"),
                    "error": {"code": -32601, "message": f"not here: {method}"},
                }
            )
        if self.version == "1.0" and method in ("SendMessage", "SendStreamingMessage"):
            result = {"task": result}
        envelope = {"jsonrpc": "2.0", "id": call.get("id"), "result": result}
        if "Streaming" in method or method.endswith("/stream"):
            frame = f"data: {json.dumps(envelope)}\n\n"
            return StreamingResponse(iter([frame]), media_type="text/event-stream")
        return JSONResponse(envelope)

    def answer(self, params: dict[str, Any]) -> dict[str, Any]:
        message = params["message"]
        number = next(self._ids)
        text = "".join(part.get("text", "") for part in message.get("parts", []))
        task_id = message.get("taskId") or f"upstream-task-{number}"
        context_id = (
            OWN_CONTEXT
            if text == "own-context"
            else message.get("contextId") or f"upstream-context-{number}"
        )
        if task_id in self.tasks:
            context_id = self.tasks[task_id]["contextId"]
        waiting = text == "ask" and not message.get("taskId")
        states = {
            "1.0": ("TASK_STATE_INPUT_REQUIRED", "TASK_STATE_COMPLETED"),
            "0.3": ("input-required", "completed"),
        }[self.version]
        reply = {
            "messageId": f"upstream-message-{number}",
            "taskId": task_id,
            "contextId": context_id,
            "role": "ROLE_AGENT" if self.version == "1.0" else "agent",
            "parts": [{"text": f"echo {text}"}],
            "metadata": message.get("metadata", {}),
            "extensions": message.get("extensions", []),
        }
        data_part = {"data": params.get("metadata", {})}
        task = {
            "id": task_id,
            "contextId": context_id,
            "status": {"state": states[0] if waiting else states[1], "message": reply},
            "artifacts": [
                {
                    "artifactId": f"echo-{number}",
                    "parts": [data_part],
                    "metadata": message.get("metadata", {}),
                    "extensions": message.get("extensions", []),
                }
            ],
            "metadata": {"paramsMetadata": params.get("metadata", {})},
        }
        if self.version == "0.3":
            reply["kind"] = "message"
            reply["parts"][0]["kind"] = "text"
            data_part["kind"] = "data"
            task["kind"] = "task"
        self.tasks[task_id] = task
        return task


AGENTS = {version: FidelityAgent(version) for version in VERSIONS}


@pytest.fixture(scope="module", autouse=True)
def agents(relay):
    for version, agent in AGENTS.items():
        relay.serve_agent(agent_id(version), agent)


def agent_id(version: str) -> str:
    return f"fidelity-{version.replace('.', '')}"


# --- a raw JSON-RPC client -----------------------------------------------------------------


def client_message(version: str, text: str, **fields: Any) -> dict[str, Any]:
    message = {
        "messageId": f"client-{text}-{next(_message_ids)}",
        "parts": [{"text": text}],
        "role": "ROLE_USER" if version == "1.0" else "user",
        **fields,
    }
    if version == "0.3":
        message["kind"] = "message"
        message["parts"][0]["kind"] = "text"
    return message


_message_ids = itertools.count(1)


def method_name(version: str, *, stream: bool) -> str:
    if version == "1.0":
        return "SendStreamingMessage" if stream else "SendMessage"
    return "message/stream" if stream else "message/send"


def extension_headers(version: str, uris: list[str]) -> dict[str, str]:
    name = "A2A-Extensions" if version == "1.0" else "X-A2A-Extensions"
    return {name: ", ".join(uris)} if uris else {}


def send(
    relay,
    agent_version: str,
    client_version: str,
    message: dict[str, Any],
    *,
    metadata: dict[str, Any] | None = None,
    stream: bool = False,
    extensions: list[str] = (),
) -> tuple[dict[str, Any], httpx.Headers]:
    """Sends through the relay; returns (the task as the client's version spells it, the
    response headers). A stream must carry exactly one task event and close."""
    params: dict[str, Any] = {"message": message}
    if metadata is not None:
        params["metadata"] = metadata
    body = {
        "jsonrpc": "2.0",
        "id": "call-1",
        "method": method_name(client_version, stream=stream),
        "params": params,
    }
    headers = {
        **relay.auth(),
        "Content-Type": "application/json",
        **extension_headers(client_version, list(extensions)),
    }
    if client_version == "1.0":
        headers["A2A-Version"] = "1.0"
    url = relay.agent_url(agent_id(agent_version))
    if not stream:
        response = httpx.post(url, content=json.dumps(body), headers=headers, timeout=CALL_SECONDS)
        assert response.status_code == 200, response.text
        return unwrap(response.json(), client_version), response.headers
    status, response_headers, frames = read_stream(url, body, headers)
    assert status == 200
    assert response_headers["content-type"].startswith("text/event-stream")
    tasks = [unwrap(frame, client_version) for frame in frames]
    assert len(tasks) >= 1, frames
    return tasks[-1], response_headers


def unwrap(envelope: dict[str, Any], version: str) -> dict[str, Any]:
    assert "error" not in envelope, envelope
    result = envelope["result"]
    if version == "1.0":
        if "statusUpdate" in result:
            return {
                "status": result["statusUpdate"]["status"],
                "id": result["statusUpdate"]["taskId"],
                "contextId": result["statusUpdate"]["contextId"],
            }
        return result["task"]
    return result


def exactly(value: Any) -> str:
    """JSON that tells 3 from 3.0 and True from 1, for comparisons that must be exact."""
    return json.dumps(value, sort_keys=True)


def state_name(task: dict[str, Any]) -> str:
    return task["status"]["state"].lower().removeprefix("task_state_").replace("_", "-")


pairs = pytest.mark.parametrize(
    ("agent_version", "client_version"),
    [(a, c) for a in VERSIONS for c in VERSIONS],
    ids=[f"agent{a}-client{c}" for a in VERSIONS for c in VERSIONS],
)


# --- ids ---------------------------------------------------------------------------------


@pairs
def test_ids_cross_the_hop_in_both_directions(relay, agent_version, client_version):
    agent = AGENTS[agent_version]
    context = f"client-context-{agent_version}-{client_version}"
    first, _ = send(
        relay,
        agent_version,
        client_version,
        client_message(client_version, "ask", contextId=context),
    )
    outgoing = agent.sends()[-1].json()["params"]["message"]
    # The client's context reaches the agent; a new task names no task upstream.
    assert outgoing["contextId"] == context
    assert "taskId" not in outgoing
    assert state_name(first) == "input-required"
    # The client sees the relay's task id and its own context, nowhere the agent's ids.
    relay_task = first["id"]
    assert not relay_task.startswith("upstream-")
    assert first["contextId"] == context
    assert first["status"]["message"]["taskId"] == relay_task
    assert first["status"]["message"]["contextId"] == context
    assert "upstream-task" not in json.dumps(first)

    second, _ = send(
        relay,
        agent_version,
        client_version,
        client_message(client_version, "Ada", taskId=relay_task, contextId=context),
    )
    follow_up = agent.sends()[-1].json()["params"]["message"]
    upstream_id = next(t for t in agent.tasks if agent.tasks[t]["contextId"] == context)
    assert follow_up["taskId"] == upstream_id
    assert follow_up["contextId"] == context
    assert second["id"] == relay_task
    assert state_name(second) == "completed"
    assert "upstream-task" not in json.dumps(second)


@pairs
def test_the_agents_own_context_stays_behind_the_relay(relay, agent_version, client_version):
    agent = AGENTS[agent_version]
    first, _ = send(
        relay, agent_version, client_version, client_message(client_version, "own-context")
    )
    assert OWN_CONTEXT not in json.dumps(first)
    assert first["contextId"] == first["status"]["message"]["contextId"]

    # A new task in the same conversation continues the agent's context upstream.
    send(
        relay,
        agent_version,
        client_version,
        client_message(client_version, "again", contextId=first["contextId"]),
    )
    assert agent.sends()[-1].json()["params"]["message"]["contextId"] == OWN_CONTEXT


# --- metadata and extensions -------------------------------------------------------------


@pairs
@pytest.mark.parametrize("stream", [False, True], ids=["send", "stream"])
def test_metadata_and_message_extensions_survive_both_ways(
    relay, agent_version, client_version, stream
):
    agent = AGENTS[agent_version]
    task, _ = send(
        relay,
        agent_version,
        client_version,
        client_message(client_version, "meta", metadata=MESSAGE_METADATA, extensions=[EXTENSION]),
        metadata=PARAMS_METADATA,
        stream=stream,
    )
    received = agent.sends()[-1].json()["params"]
    assert exactly(received["metadata"]) == exactly(PARAMS_METADATA)
    assert exactly(received["message"]["metadata"]) == exactly(MESSAGE_METADATA)
    assert received["message"]["extensions"] == [EXTENSION]

    assert state_name(task) == "completed"
    echoed = task["status"]["message"]
    assert exactly(echoed["metadata"]) == exactly(MESSAGE_METADATA)
    assert echoed["extensions"] == [EXTENSION]
    if "artifacts" in task:  # a stream's last event may be a status update alone
        artifact = task["artifacts"][0]
        assert exactly(artifact["parts"][0]["data"]) == exactly(PARAMS_METADATA)
        assert exactly(artifact["metadata"]) == exactly(MESSAGE_METADATA)
        assert artifact["extensions"] == [EXTENSION]
        assert exactly(task["metadata"]["paramsMetadata"]) == exactly(PARAMS_METADATA)


@pairs
@pytest.mark.parametrize("stream", [False, True], ids=["send", "stream"])
def test_the_activation_header_reaches_the_agent_in_its_spelling_and_is_echoed(
    relay, agent_version, client_version, stream
):
    agent = AGENTS[agent_version]
    _, headers = send(
        relay,
        agent_version,
        client_version,
        client_message(client_version, "headers"),
        extensions=[EXTENSION, UNDECLARED],
        stream=stream,
    )
    seen = agent.sends()[-1].headers
    upstream_name = "a2a-extensions" if agent_version == "1.0" else "x-a2a-extensions"
    other_name = "x-a2a-extensions" if agent_version == "1.0" else "a2a-extensions"
    assert EXTENSION in [uri.strip() for uri in seen[upstream_name].split(",")]
    assert other_name not in seen
    # Echoed in the client's spelling, naming only the extension the agent declares.
    echo_name = "A2A-Extensions" if client_version == "1.0" else "X-A2A-Extensions"
    assert [uri.strip() for uri in headers[echo_name].split(",")] == [EXTENSION]


@pairs
def test_no_echo_when_no_declared_extension_was_asked_for(relay, agent_version, client_version):
    _, headers = send(
        relay,
        agent_version,
        client_version,
        client_message(client_version, "plain"),
        extensions=[UNDECLARED],
    )
    assert "a2a-extensions" not in headers
    assert "x-a2a-extensions" not in headers
