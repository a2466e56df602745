"""The a2a-sdk 0.3.26 client, run by the 0.3 virtualenv (see tests/sdk03.py).

Reads one JSON request on stdin and prints one JSON answer on stdout:

- ``{"parse_card": {...}}``: validates a card with the SDK's 0.3 ``AgentCard`` model, as its
  card resolver does; answers ``{"card": <the card as the model dumps it>}``.
- ``{"url": ..., "transport": "JSONRPC" | "HTTP+JSON", "token": ..., "streaming": bool,
  "message": <0.3 JSON Message>, "get_task": bool}``: discovers the agent from its card at
  ``url`` (``ClientFactory.connect``, the SDK's usual way in), sends the message and answers
  ``{"card": ..., "events": [...], "task": <tasks/get of the task, when asked>}``, each object
  dumped in 0.3 JSON. ``token`` is sent as ``Authorization: Bearer``.

An exception becomes ``{"error": "<type>: <message>"}`` with exit status 1. Imports nothing of
the relay.
"""

from __future__ import annotations

import asyncio
import json
import sys

import httpx
from a2a.client import ClientConfig, ClientFactory
from a2a.types import AgentCard, Message, Task, TaskQueryParams


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


def main() -> int:
    request = json.load(sys.stdin)
    try:
        if "parse_card" in request:
            answer = {"card": dump(AgentCard.model_validate(request["parse_card"]))}
        else:
            answer = asyncio.run(call(request))
    except Exception as error:  # noqa: BLE001 - the test reads what failed
        json.dump({"error": f"{type(error).__name__}: {error}"}, sys.stdout)
        return 1
    json.dump(answer, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
