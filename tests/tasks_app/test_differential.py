"""Issue 13's differential suite: every client x binding x agent, once directly and once
through the relay, must observe the same thing.

The clients are the official SDKs: a2a-sdk 1.3 (in this process), a2a-sdk 0.3.26 (its own
virtualenv, ``tests/sdk03.py``) and @a2a-js/sdk (``tests/jsinterop.py``). The agents are an
a2a-sdk 1.3 agent (1.0 and 0.3), the a2a-sdk 0.3.26 agent on JSON-RPC and HTTP+JSON, the same
agent on HTTP+JSON only, and the @a2a-js/sdk agent. One live relay (``tests/live.py``) and one
set of agents serve the whole module; each client process runs the whole list of operations
(OPERATIONS) of a cell, and a cell's two runs are made once, when its first test asks.

Each test compares one operation of one cell: what the client saw directly against what it saw
through the relay, as an *observation*: values with ids numbered by first appearance and
timestamps dropped (``tests.jsinterop.observable``), stream events in order, errors reduced to
their type and codes. The message sent holds text, a file as bytes, a file by URL and a data
part, nested metadata with integers beyond 2**53, and an extension.

Where a pair of third-party pieces fails directly, PEER_FAULTS names it and what fails; the
test checks the direct run still fails that way (so the table cannot rot) and that the relay
is no worse: it observes the same, or the operation succeeds. Where an agent drops something
the relay keeps (NAMES_DROPPED), the test checks the relay keeps it and otherwise observes the
same. A difference of the relay's own would be marked xfail(strict) in RELAY_DIFFERENCES; issue
13 left none.
"""

from __future__ import annotations

import asyncio
import base64
import json
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from routing.demo.agents import AgentSpec, Skill, TaskExecutor, build_agent_app
from tests.jsinterop import JsClientFailedError, js_agent, js_missing, observable, run_js_client
from tests.live import CALL_SECONDS, sdk_client

BINARY = bytes(range(256)) + b"\xff\xfe\x00 not UTF-8"
BINARY_B64 = base64.b64encode(BINARY).decode()
BIG = 2**53 + 1
EXTENSION = "https://example.com/ext/differential/v1"
FILE_URL = "https://example.com/files/report.pdf"
PUSH_URL = "http://127.0.0.1:9/push"
TEXT = "echo differential"
METADATA = {"trace": {"id": "t-1", "big": BIG, "list": [1, {"deeper": 2**60}]}, "flag": True}
DATA = {"count": BIG + 2, "nested": {"items": [1, 2, {"x": "y"}]}}

CLIENTS = ("py13", "sdk03", "js")
BINDINGS = ("JSONRPC", "HTTP+JSON")
AGENTS = ("py13", "sdk03", "sdk03-rest", "js")
OPERATIONS = (
    "send",
    "stream",
    "get",
    "list",
    "cancel",
    "subscribe",
    "push_set",
    "push_get",
    "push_list",
    "push_delete",
    "card",
    "get_missing",
)
NOT_IN_CLIENT = {"sdk03": {"list", "push_list", "push_delete"}}
"""Operations a client's SDK has no call for (a2a-sdk 0.3.26's Client lacks these)."""

NAMES_DROPPED: dict[tuple[str, str, str, str], set[str]] = {
    ("sdk03", "HTTP+JSON", "js", "send"): {"blob.bin", "report.pdf"},
    ("sdk03", "HTTP+JSON", "js", "stream"): {"blob.bin", "report.pdf"},
    ("sdk03", "HTTP+JSON", "js", "get"): {"blob.bin", "report.pdf"},
}
"""(client, binding, agent, operation): the file names the agent drops, the peer's fault
(@a2a-js/sdk's 0.3 HTTP+JSON surface leaves a FilePart's ``name`` out). The relay keeps them;
the test checks that it does, and that without them it observes what the direct run does."""

PEER_FAULTS: dict[tuple[str, str, str, str], tuple[str, str]] = {
    ("py13", "JSONRPC", "sdk03", "subscribe"): (
        "error InvalidParamsError",
        "error UnsupportedOperationError",
    ),
    ("py13", "JSONRPC", "sdk03", "push_set"): ("error InternalError", "result"),
    ("py13", "JSONRPC", "sdk03", "push_get"): ("error UnsupportedOperationError", "result"),
    ("py13", "JSONRPC", "sdk03", "push_list"): ("error UnsupportedOperationError", "result"),
    ("py13", "JSONRPC", "sdk03", "push_delete"): ("error UnsupportedOperationError", "result"),
    ("py13", "HTTP+JSON", "sdk03", "push_set"): ("error A2AClientError", "result"),
    ("py13", "HTTP+JSON", "sdk03", "push_get"): ("error A2AClientError", "result"),
    ("py13", "HTTP+JSON", "sdk03-rest", "push_set"): ("error A2AClientError", "result"),
    ("py13", "HTTP+JSON", "sdk03-rest", "push_get"): ("error A2AClientError", "result"),
    ("py13", "HTTP+JSON", "js", "push_delete"): ("error A2AClientError", "result"),
    ("sdk03", "JSONRPC", "sdk03", "subscribe"): (
        "error A2AClientJSONRPCError -32602",
        "error A2AClientJSONRPCError -32004",
    ),
    ("sdk03", "JSONRPC", "sdk03", "push_set"): ("error A2AClientJSONRPCError -32603", "result"),
    ("sdk03", "JSONRPC", "sdk03", "push_get"): ("error A2AClientJSONRPCError -32004", "result"),
    ("sdk03", "HTTP+JSON", "py13", "cancel"): (
        "error A2AClientHTTPError/400",
        "error A2AClientHTTPError/409",
    ),
    ("sdk03", "HTTP+JSON", "py13", "subscribe"): (
        "error A2AClientHTTPError/503",
        "error A2AClientHTTPError/400",
    ),
    ("sdk03", "HTTP+JSON", "sdk03", "subscribe"): (
        "error A2AClientHTTPError/503",
        "error A2AClientHTTPError/400",
    ),
    ("sdk03", "HTTP+JSON", "sdk03", "push_set"): ("error A2AClientHTTPError/501", "result"),
    ("sdk03", "HTTP+JSON", "sdk03", "push_get"): ("error A2AClientHTTPError/501", "result"),
    ("sdk03", "HTTP+JSON", "sdk03-rest", "subscribe"): (
        "error A2AClientHTTPError/503",
        "error A2AClientHTTPError/400",
    ),
    ("sdk03", "HTTP+JSON", "sdk03-rest", "push_set"): ("error A2AClientHTTPError/501", "result"),
    ("sdk03", "HTTP+JSON", "sdk03-rest", "push_get"): ("error A2AClientHTTPError/501", "result"),
    ("sdk03", "HTTP+JSON", "js", "cancel"): (
        "error A2AClientHTTPError/400",
        "error A2AClientHTTPError/409",
    ),
    ("sdk03", "HTTP+JSON", "js", "push_set"): ("error A2AClientHTTPError/400", "result"),
    ("sdk03", "HTTP+JSON", "js", "push_get"): ("error A2AClientHTTPError/404", "result"),
    ("js", "JSONRPC", "sdk03", "push_set"): ("error PushNotificationNotSupportedError", "result"),
    ("js", "JSONRPC", "sdk03", "push_get"): ("error PushNotificationNotSupportedError", "result"),
    ("js", "JSONRPC", "sdk03", "push_list"): ("error PushNotificationNotSupportedError", "result"),
    ("js", "JSONRPC", "sdk03", "push_delete"): ("error UnsupportedOperationError", "result"),
    ("js", "HTTP+JSON", "sdk03", "send"): ("error Error", "result"),
    ("js", "HTTP+JSON", "sdk03", "stream"): ("error TypeError", "result"),
    ("js", "HTTP+JSON", "sdk03", "get"): ("error Error", "result"),
    ("js", "HTTP+JSON", "sdk03", "list"): ("error Error", "error UnsupportedOperationError"),
    ("js", "HTTP+JSON", "sdk03", "push_set"): ("error Error", "result"),
    ("js", "HTTP+JSON", "sdk03", "push_get"): ("error Error", "result"),
    ("js", "HTTP+JSON", "sdk03", "push_list"): ("error Error", "result"),
    ("js", "HTTP+JSON", "sdk03", "push_delete"): ("error Error", "result"),
    ("js", "HTTP+JSON", "sdk03-rest", "send"): ("error Error", "result"),
    ("js", "HTTP+JSON", "sdk03-rest", "stream"): ("error TypeError", "result"),
    ("js", "HTTP+JSON", "sdk03-rest", "get"): ("error Error", "result"),
    ("js", "HTTP+JSON", "sdk03-rest", "list"): ("error Error", "error UnsupportedOperationError"),
    ("js", "HTTP+JSON", "sdk03-rest", "push_set"): ("error Error", "result"),
    ("js", "HTTP+JSON", "sdk03-rest", "push_get"): ("error Error", "result"),
    ("js", "HTTP+JSON", "sdk03-rest", "push_list"): ("error Error", "result"),
    ("js", "HTTP+JSON", "sdk03-rest", "push_delete"): ("error Error", "result"),
}
"""(client, binding, agent, operation): what the direct run answers, the peer's fault (an agent
without push configs, a client that cannot read the agent's answer, an error status off the
spec), and what the relay answers instead, judged no worse. Each is a label of ``label``."""

RELAY_DIFFERENCES: dict[tuple[str, str, str, str], str] = {}
"""(client, binding, agent, operation): how the relay's observation differs, marking the
cell xfail(strict). Empty: issue 13 resolved every difference."""


def cells() -> list[Any]:
    params = []
    for client in CLIENTS:
        for binding in BINDINGS:
            for agent in AGENTS:
                if agent == "sdk03-rest" and binding == "JSONRPC":
                    continue  # the agent has no JSON-RPC interface to call directly
                for operation in OPERATIONS:
                    if operation in NOT_IN_CLIENT.get(client, ()):
                        continue
                    key = (client, binding, agent, operation)
                    marks = (
                        [pytest.mark.xfail(strict=True, reason=RELAY_DIFFERENCES[key])]
                        if key in RELAY_DIFFERENCES
                        else []
                    )
                    params.append(pytest.param(*key, id="-".join(key), marks=marks))
    return params


# --- the agents ---------------------------------------------------------------------------


class EchoesParts(TaskExecutor):
    """A completed task whose artifact "echo" holds the parts received, with the message's
    metadata."""

    async def work(self, context, updater) -> None:
        metadata = dict(context.message.metadata) if context.message.metadata else None
        await updater.add_artifact(
            list(context.message.parts), name="echo", metadata=metadata, last_chunk=True
        )
        await updater.complete()


PARTS_ECHO = AgentSpec(
    slug="parts-echo",
    name="Parts Echo",
    description="Echoes parts as an artifact.",
    skills=(Skill(id="echo", name="Echo", description="Echoes parts.", tags=("echo",)),),
    make_executor=EchoesParts,
)


EXTENDED_SKILL = Skill(
    id="echo-signed", name="Signed echo", description="For known callers.", tags=("echo",)
)
"""The skill the a2a-sdk 1.3 agent's extended card adds to its public card."""


@dataclass(frozen=True)
class Agents:
    """{agent name: its own base URL}; each is registered at the relay under its name."""

    urls: dict[str, str]


@pytest.fixture(scope="module")
def agents(relay, a2a_sdk_03):
    """The four agents, served for the whole module and registered at the relay. The a2a-sdk
    1.3 agent keeps push configs and has an extended card."""
    from contextlib import ExitStack

    with ExitStack() as stack:
        urls = {
            "py13": relay.serve_agent(
                "py13",
                lambda url: build_agent_app(
                    PARTS_ECHO, base_url=url, push_configs=True, extended_skills=(EXTENDED_SKILL,)
                ),
            )
        }
        for name, transports in (("sdk03", "JSONRPC,HTTP+JSON"), ("sdk03-rest", "HTTP+JSON")):
            urls[name] = stack.enter_context(a2a_sdk_03.agent(transports=transports))
            relay.register(urls[name], name)
        if js_missing() is None:
            urls["js"] = stack.enter_context(js_agent()).url
            relay.register(urls["js"], "js")
        yield Agents(urls)


# --- the operations, as each client takes them ------------------------------------------


def message_10(n: int) -> dict[str, Any]:
    """The message sent, as A2A 1.0 JSON (the JS and a2a-sdk 1.3 clients)."""
    return {
        "messageId": f"diff-{n}",
        "role": "ROLE_USER",
        "metadata": METADATA,
        "extensions": [EXTENSION],
        "parts": [
            {"text": TEXT},
            {"raw": BINARY_B64, "filename": "blob.bin", "mediaType": "application/octet-stream"},
            {"url": FILE_URL, "filename": "report.pdf", "mediaType": "application/pdf"},
            {"data": DATA},
        ],
    }


def message_03(n: int) -> dict[str, Any]:
    """The same message as A2A 0.3 JSON (the a2a-sdk 0.3.26 client)."""
    return {
        "kind": "message",
        "messageId": f"diff-{n}",
        "role": "user",
        "metadata": METADATA,
        "extensions": [EXTENSION],
        "parts": [
            {"kind": "text", "text": TEXT},
            {
                "kind": "file",
                "file": {
                    "bytes": BINARY_B64,
                    "name": "blob.bin",
                    "mimeType": "application/octet-stream",
                },
            },
            {
                "kind": "file",
                "file": {"uri": FILE_URL, "name": "report.pdf", "mimeType": "application/pdf"},
            },
            {"kind": "data", "data": DATA},
        ],
    }


def operations_10(run: str) -> list[dict[str, Any]]:
    """OPERATIONS for the 1.0 clients; ``{"$ref": ...}`` names an earlier outcome."""
    task = {"$ref": "0.result.task.id"}
    context = {"$ref": "0.result.task.contextId"}
    return [
        {"op": "send", "message": message_10(1) | {"messageId": f"{run}-1"}},
        {"op": "stream", "message": message_10(2) | {"messageId": f"{run}-2"}},
        {"op": "get", "id": task, "historyLength": 1},
        {"op": "list", "params": {"contextId": context}},
        {"op": "cancel", "id": task},
        {"op": "subscribe", "id": task},
        {
            "op": "push_set",
            "config": {"taskId": task, "id": "cfg-1", "url": PUSH_URL, "token": "secret"},
        },
        {"op": "push_get", "taskId": task, "id": "cfg-1"},
        {"op": "push_list", "taskId": task},
        {"op": "push_delete", "taskId": task, "id": "cfg-1"},
        {"op": "card"},
        {"op": "get", "id": "no-such-task"},
    ]


def operations_03(run: str) -> list[dict[str, Any]]:
    """OPERATIONS but NOT_IN_CLIENT["sdk03"], for the a2a-sdk 0.3.26 client."""
    task = {"$ref": "0.events.0.0.id"}
    return [
        {"op": "send", "message": message_03(1) | {"messageId": f"{run}-1"}},
        {"op": "stream", "message": message_03(2) | {"messageId": f"{run}-2"}},
        {"op": "get", "id": task, "historyLength": 1},
        {"op": "cancel", "id": task},
        {"op": "subscribe", "id": task},
        {
            "op": "push_set",
            "config": {
                "taskId": task,
                "pushNotificationConfig": {"id": "cfg-1", "url": PUSH_URL, "token": "secret"},
            },
        },
        {"op": "push_get", "taskId": task, "id": "cfg-1"},
        {"op": "card"},
        {"op": "get", "id": "no-such-task"},
    ]


def lookup(records: list[dict[str, Any]], reference: str) -> Any:
    index, *path = reference.split(".")
    value: Any = records[int(index)]
    for key in path:
        value = value[int(key)] if isinstance(value, list) else value[key]
    return value


def resolve(value: Any, records: list[dict[str, Any]]) -> Any:
    if isinstance(value, list):
        return [resolve(item, records) for item in value]
    if not isinstance(value, dict):
        return value
    if set(value) == {"$ref"}:
        return lookup(records, value["$ref"])
    return {key: resolve(item, records) for key, item in value.items()}


# --- the clients ----------------------------------------------------------------------------


async def py13_operation(clients: dict[str, Any], op: dict[str, Any]) -> dict[str, Any]:
    """One operation with the a2a-sdk 1.3 client; its outcome as A2A 1.0 JSON."""
    from a2a import types
    from google.protobuf.json_format import MessageToDict, ParseDict

    unary, streamer = clients["send"], clients["stream"]
    kind = op["op"]
    if kind in ("send", "stream"):
        client = streamer if kind == "stream" else unary
        request = ParseDict({"message": op["message"]}, types.SendMessageRequest())
        events = [MessageToDict(event) async for event in client.send_message(request)]
        return {"events": events} if kind == "stream" else {"result": events[-1]}
    if kind == "subscribe":
        request = types.SubscribeToTaskRequest(id=op["id"])
        return {"events": [MessageToDict(e) async for e in streamer.subscribe(request)]}
    if kind == "get":
        request = ParseDict({k: v for k, v in op.items() if k != "op"}, types.GetTaskRequest())
        return {"result": MessageToDict(await unary.get_task(request))}
    if kind == "list":
        request = ParseDict(op["params"], types.ListTasksRequest())
        return {"result": MessageToDict(await unary.list_tasks(request))}
    if kind == "cancel":
        request = types.CancelTaskRequest(id=op["id"])
        return {"result": MessageToDict(await unary.cancel_task(request))}
    if kind == "push_set":
        request = ParseDict(op["config"], types.TaskPushNotificationConfig())
        answer = await unary.create_task_push_notification_config(request)
        return {"result": MessageToDict(answer)}
    if kind == "push_get":
        request = types.GetTaskPushNotificationConfigRequest(task_id=op["taskId"], id=op["id"])
        answer = await unary.get_task_push_notification_config(request)
        return {"result": MessageToDict(answer)}
    if kind == "push_list":
        request = types.ListTaskPushNotificationConfigsRequest(task_id=op["taskId"])
        answer = await unary.list_task_push_notification_configs(request)
        return {"result": MessageToDict(answer)}
    if kind == "push_delete":
        request = types.DeleteTaskPushNotificationConfigRequest(task_id=op["taskId"], id=op["id"])
        await unary.delete_task_push_notification_config(request)
        return {"result": None}
    if kind == "card":
        answer = await unary.get_extended_agent_card(types.GetExtendedAgentCardRequest())
        return {"result": MessageToDict(answer)}
    raise ValueError(f"unknown operation {kind!r}")


def run_py13(
    card: dict[str, Any],
    binding: str,
    version: str,
    headers: dict[str, str],
    operations: list[dict[str, Any]],
) -> list[dict[str, Any]]:
    """Runs ``operations`` with the a2a-sdk 1.3 client on ``card``; one outcome each."""

    async def run() -> list[dict[str, Any]]:
        records: list[dict[str, Any]] = []
        async with (
            sdk_client(card, binding, version, headers=headers, streaming=False) as unary,
            sdk_client(card, binding, version, headers=headers, streaming=True) as streamer,
        ):
            clients = {"send": unary, "stream": streamer}
            for op in operations:
                try:
                    async with asyncio.timeout(CALL_SECONDS):
                        records.append(await py13_operation(clients, resolve(op, records)))
                except Exception as error:  # noqa: BLE001 - the outcome is what failed
                    records.append(
                        {
                            "error": {
                                "type": type(error).__name__,
                                "code": getattr(error, "code", None),
                                "message": str(error)[:500],
                            }
                        }
                    )
        return records

    return asyncio.run(run())


def run_js(
    url: str, binding: str, version: str, headers: dict[str, str], operations: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """Runs ``operations`` with the @a2a-js/sdk client (tests/js/client.js)."""
    run = run_js_client(url, binding, operations, version=version, headers=headers)
    records = []
    for outcome, op in zip(run.ops, operations, strict=True):
        if outcome.error is not None:
            records.append({"error": outcome.error})
        elif op["op"] in ("stream", "subscribe"):
            records.append({"events": outcome.events})
        else:
            records.append({"result": outcome.result})
    return records


def run_sdk03(
    sdk03, url: str, binding: str, headers: dict[str, str], operations: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """Runs ``operations`` with the a2a-sdk 0.3.26 client (tests/peers/sdk03_client.py)."""
    token = headers.get("Authorization", "").removeprefix("Bearer ") or None
    answer = sdk03.client(
        {"url": url, "transport": binding, "token": token, "operations": operations}
    )
    if "error" in answer:
        raise RuntimeError(f"the 0.3.26 client failed: {answer['error']}")
    return answer["ops"]


# --- observations ---------------------------------------------------------------------------


def observe(records: list[dict[str, Any]]) -> list[Any]:
    """What a caller can compare across two runs: ids numbered, timestamps dropped, errors as
    their type and codes, cards as their name and skills."""
    ids: dict[tuple[str, str], str] = {}
    seen = []
    for record in records:
        if "error" in record:
            error = record["error"]
            seen.append(
                {
                    "error": {
                        key: error.get(key)
                        for key in ("type", "name", "code", "status")
                        if key in error
                    }
                }
            )
        else:
            seen.append(observable(record, ids))
    return seen


def card_summary(record: dict[str, Any]) -> Any:
    """A card answer as what the relay keeps of the agent's card: its name and skills (the
    URLs and security schemes are the relay's own)."""
    card = record.get("result")
    if not isinstance(card, dict):
        return observe([record])[0]
    return {
        "result": {
            "name": card.get("name"),
            "skills": [skill.get("id") for skill in card.get("skills", [])],
        }
    }


@dataclass
class Cell:
    direct: list[dict[str, Any]]
    relayed: list[dict[str, Any]]
    operations: tuple[str, ...]


CACHE: dict[tuple[str, str, str], Cell] = {}


def version_for(client: str, agent: str) -> str:
    return "0.3" if agent.startswith("sdk03") else "1.0"


def agent_card(url: str) -> dict[str, Any]:
    response = httpx.get(
        f"{url}/.well-known/agent-card.json", headers={"A2A-Version": "1.0"}, timeout=CALL_SECONDS
    )
    response.raise_for_status()
    return response.json()


def run_cell(client: str, binding: str, agent: str, relay, agents: Agents, sdk03) -> Cell:
    key = (client, binding, agent)
    if key in CACHE:
        return CACHE[key]
    names = tuple(op for op in OPERATIONS if op not in NOT_IN_CLIENT.get(client, ()))
    version = version_for(client, agent)
    runs = []
    for where in ("direct", "relay"):
        run_id = f"{client}-{binding}-{agent}-{where}"
        headers = relay.auth() if where == "relay" else {}
        url = relay.agent_url(agent) if where == "relay" else agents.urls[agent]
        if client == "py13":
            card = relay.card(agent) if where == "relay" else agent_card(url)
            records = run_py13(card, binding, version, headers, operations_10(run_id))
        elif client == "js":
            try:
                records = run_js(url, binding, version, headers, operations_10(run_id))
            except JsClientFailedError as error:
                records = [{"error": {"name": "JsClientFailedError", "message": str(error)}}]
                records *= len(names)
        else:
            records = run_sdk03(
                sdk03,
                url.rstrip("/") if where == "direct" else url,
                binding,
                headers,
                operations_03(run_id),
            )
        runs.append(records)
    CACHE[key] = Cell(direct=runs[0], relayed=runs[1], operations=names)
    return CACHE[key]


@pytest.mark.parametrize(("client", "binding", "agent", "operation"), cells())
def test_the_relay_changes_nothing_a_client_observes(
    relay, agents, a2a_sdk_03, client, binding, agent, operation
):
    if "js" in (client, agent) and (reason := js_missing()) is not None:
        pytest.skip(f"@a2a-js/sdk is not available: {reason}")
    cell = run_cell(client, binding, agent, relay, agents, a2a_sdk_03)
    direct, relayed = observe(cell.direct), observe(cell.relayed)
    index = cell.operations.index(operation)
    seen_direct, seen_relayed = direct[index], relayed[index]
    if operation == "card":
        seen_direct = card_summary(cell.direct[index])
        seen_relayed = card_summary(cell.relayed[index])
    fault = PEER_FAULTS.get((client, binding, agent, operation))
    if fault is not None:
        assert (label(seen_direct), label(seen_relayed)) == fault, (
            cell.direct[index],
            cell.relayed[index],
        )
        return
    dropped = NAMES_DROPPED.get((client, binding, agent, operation))
    if dropped is not None:
        assert file_names(seen_direct) == set(), seen_direct  # the agent still drops them
        assert file_names(seen_relayed) == dropped, seen_relayed
        seen_relayed = without_file_names(seen_relayed)
    if seen_relayed != seen_direct:
        pytest.fail(
            f"the relay changed what the client observes, first at "
            f"{first_difference(seen_direct, seen_relayed)}:\ndirect: {dumps(seen_direct)}"
            f"\nrelay:  {dumps(seen_relayed)}",
            pytrace=False,
        )


def label(seen: dict[str, Any]) -> str:
    """ "result", or "error <type>[/<HTTP status>][ <JSON-RPC code>]": how an operation
    ended. The code is named for a client whose error type does not tell (a2a-sdk 0.3.26's
    A2AClientJSONRPCError)."""
    if "error" not in seen:
        return "result"
    error = seen["error"]
    status, kind = error.get("status"), error.get("type") or error.get("name")
    code = error.get("code") if kind == "A2AClientJSONRPCError" else None
    return f"error {kind}" + (f"/{status}" if status else "") + (f" {code}" if code else "")


def file_names(seen: Any) -> set[str]:
    """The names of the files (0.3 FileParts' ``file.name``) anywhere in an observation."""
    if isinstance(seen, list):
        return set().union(*(file_names(item) for item in seen))
    if not isinstance(seen, dict):
        return set()
    found = set().union(*(file_names(item) for item in seen.values()))
    if seen.get("kind") == "file" and isinstance(seen.get("file"), dict):
        found |= {seen["file"]["name"]} if "name" in seen["file"] else set()
    return found


def without_file_names(seen: Any) -> Any:
    """The observation with the files' names left out."""
    if isinstance(seen, list):
        return [without_file_names(item) for item in seen]
    if not isinstance(seen, dict):
        return seen
    out = {key: without_file_names(item) for key, item in seen.items()}
    if out.get("kind") == "file" and isinstance(out.get("file"), dict):
        out["file"] = {key: item for key, item in out["file"].items() if key != "name"}
    return out


def dumps(value: Any) -> str:
    return json.dumps(value, sort_keys=True)[:3000]


def first_difference(direct: Any, relayed: Any, path: str = "") -> str:
    """Where two observations first differ, as ``path: direct != relayed``."""
    if isinstance(direct, dict) and isinstance(relayed, dict):
        for key in sorted(set(direct) | set(relayed)):
            if direct.get(key, "<absent>") != relayed.get(key, "<absent>"):
                return first_difference(
                    direct.get(key, "<absent>"), relayed.get(key, "<absent>"), f"{path}.{key}"
                )
    elif isinstance(direct, list) and isinstance(relayed, list):
        for index, (one, other) in enumerate(zip(direct, relayed, strict=False)):
            if one != other:
                return first_difference(one, other, f"{path}[{index}]")
        if len(direct) != len(relayed):
            return f"{path}: {len(direct)} items != {len(relayed)} items"
    return f"{path or '.'}: {dumps(direct)[:300]} != {dumps(relayed)[:300]}"
