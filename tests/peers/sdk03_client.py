"""The a2a-sdk 0.3.26 client, run by the 0.3 virtualenv (see tests/sdk03.py).

Reads one JSON request on stdin and prints one JSON answer on stdout:

- ``{"parse_card": {...}}``: validates a card with the SDK's 0.3 ``AgentCard`` model, as its
  card resolver does; answers ``{"card": <the card as the model dumps it>}``.
- ``{"url": ..., "transport": "JSONRPC" | "HTTP+JSON", "token": ..., "streaming": bool,
  "message": <0.3 JSON Message>, "get_task": bool}``: discovers the agent from its card at
  ``url`` (``ClientFactory.connect``, the SDK's usual way in), sends the message and answers
  ``{"card": ..., "events": [...], "task": <tasks/get of the task, when asked>}``, each object
  dumped in 0.3 JSON. ``token`` is sent as ``Authorization: Bearer``.

- ``{"url", "transport", "token", "operations": [...]}``: discovers the agent the same way and
  runs each operation in order, answering ``{"card": ..., "ops": [{"result": ...} |
  {"events": [...]} | {"error": {"type", "code", "status", "message"}}]}``. An operation is
  ``{"op": "send" | "stream", "message"}``, ``{"op": "get", "id", "historyLength"}``,
  ``{"op": "cancel" | "subscribe", "id"}``, ``{"op": "push_set", "config"}`` (a 0.3
  TaskPushNotificationConfig), ``{"op": "push_get", "taskId", "id"}`` or ``{"op": "card"}``
  (the extended card when the card offers one); a value ``{"$ref": "N.path.to.value"}`` is
  what operation N produced there (``"0.result.id"``, ``"1.events.0.0.id"``). One failing
  operation does not stop the others.

An exception becomes ``{"error": "<type>: <message>"}`` with exit status 1. With ``--serve`` it
answers one request per line of stdin, each answer on one line of stdout, until stdin ends (one
start of Python and the SDK for many calls). Imports nothing of the relay.
"""

from __future__ import annotations

import asyncio
import json
import sys

import httpx
from a2a.client import ClientConfig, ClientFactory
from a2a.types import (
    AgentCard,
    GetTaskPushNotificationConfigParams,
    Message,
    Task,
    TaskIdParams,
    TaskPushNotificationConfig,
    TaskQueryParams,
)


def dump(value):
    if isinstance(value, tuple):
        return [dump(item) for item in value if item is not None]
    return value.model_dump(mode="json", by_alias=True, exclude_none=True)


async def call(request: dict) -> dict:
    headers = {"Authorization": f"Bearer {request['token']}"} if request.get("token") else {}
    async with httpx.AsyncClient(headers=headers, timeout=30) as http:
        config = ClientConfig(
            httpx_client=http,
            streaming=request.get("streaming", False),
            supported_transports=[request["transport"]],
        )
        client = await ClientFactory.connect(request["url"], client_config=config)
        events = []
        task_id = None
        async for event in client.send_message(Message.model_validate(request["message"])):
            events.append(dump(event))
            task = event[0] if isinstance(event, tuple) else None
            if isinstance(task, Task):
                task_id = task.id
        answer = {"card": dump(client._card), "events": events}
        if request.get("get_task") and task_id:
            answer["task"] = dump(await client.get_task(TaskQueryParams(id=task_id)))
        return answer


def describe(error: Exception) -> dict:
    """An exception as plain JSON: its type, JSON-RPC code and HTTP status."""
    inner = getattr(error, "error", None)
    return {
        "type": type(error).__name__,
        "code": getattr(inner, "code", None),
        "status": getattr(error, "status_code", None),
        "message": str(error)[:500],
    }


def resolve(value, records):
    """``value`` with every ``{"$ref": "N.path"}`` replaced by what operation N produced."""
    if isinstance(value, list):
        return [resolve(item, records) for item in value]
    if not isinstance(value, dict):
        return value
    if set(value) == {"$ref"}:
        index, *path = value["$ref"].split(".")
        found = records[int(index)]
        for key in path:
            found = found[int(key)] if isinstance(found, list) else found[key]
        return found
    return {key: resolve(item, records) for key, item in value.items()}


async def run_operation(clients: dict, operation: dict) -> dict:
    op = operation["op"]
    client = clients["stream" if op in ("stream", "subscribe") else "send"]
    if op in ("send", "stream"):
        message = Message.model_validate(operation["message"])
        return {"events": [dump(event) async for event in client.send_message(message)]}
    if op == "subscribe":
        events = client.resubscribe(TaskIdParams(id=operation["id"]))
        return {"events": [dump(event) async for event in events]}
    if op == "get":
        query = TaskQueryParams(id=operation["id"], history_length=operation.get("historyLength"))
        return {"result": dump(await client.get_task(query))}
    if op == "cancel":
        return {"result": dump(await client.cancel_task(TaskIdParams(id=operation["id"])))}
    if op == "push_set":
        config = TaskPushNotificationConfig.model_validate(operation["config"])
        return {"result": dump(await client.set_task_callback(config))}
    if op == "push_get":
        params = GetTaskPushNotificationConfigParams(
            id=operation["taskId"], push_notification_config_id=operation.get("id")
        )
        return {"result": dump(await client.get_task_callback(params))}
    if op == "card":
        return {"result": dump(await client.get_card())}
    raise ValueError(f"unknown operation {op!r}")


async def run_operations(request: dict) -> dict:
    headers = {"Authorization": f"Bearer {request['token']}"} if request.get("token") else {}
    async with httpx.AsyncClient(headers=headers, timeout=30) as http:
        clients = {}
        for name, streaming in (("send", False), ("stream", True)):
            config = ClientConfig(
                httpx_client=http, streaming=streaming, supported_transports=[request["transport"]]
            )
            clients[name] = await ClientFactory.connect(request["url"], client_config=config)
        records = []
        for raw in request["operations"]:
            try:
                records.append(await run_operation(clients, resolve(raw, records)))
            except Exception as error:  # noqa: BLE001 - the test compares what failed
                records.append({"error": describe(error)})
        return {"card": dump(clients["send"]._card), "ops": records}


def answer(request: dict) -> dict:
    """The answer to one request (``{"error": ...}`` when the SDK raised)."""
    try:
        if "parse_card" in request:
            return {"card": dump(AgentCard.model_validate(request["parse_card"]))}
        if "operations" in request:
            return asyncio.run(run_operations(request))
        return asyncio.run(call(request))
    except Exception as error:  # noqa: BLE001 - the test reads what failed
        return {"error": f"{type(error).__name__}: {error}"}


def main() -> int:
    if sys.argv[1:] == ["--serve"]:
        for line in sys.stdin:
            print(json.dumps(answer(json.loads(line))), flush=True)
        return 0
    result = answer(json.load(sys.stdin))
    json.dump(result, sys.stdout)
    return 1 if "error" in result and len(result) == 1 else 0


if __name__ == "__main__":
    sys.exit(main())
