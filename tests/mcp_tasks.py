"""A client side of the MCP tasks extension (``io.modelcontextprotocol/tasks``) for the tests,
on the official MCP Python client: it declares the extension, claims the ``task`` result of a
tool call, and sends ``tasks/get``, ``tasks/update`` and ``tasks/cancel`` through the
session's generic request API (the SDK has no helpers for them)."""

from __future__ import annotations

import time
from typing import Any, ClassVar, Literal

import anyio
import mcp_types as types
from mcp import Client
from mcp.client.extension import ClientExtension, ResultClaim
from pydantic import TypeAdapter

IDENTIFIER = "io.modelcontextprotocol/tasks"
TERMINAL = frozenset({"completed", "failed", "cancelled"})


class CreatedTask(types.Result):
    """A tool call's ``CreateTaskResult`` (``resultType: "task"``)."""

    result_type: Literal["task"] = "task"
    task_id: str
    status: str
    status_message: str | None = None
    created_at: str
    last_updated_at: str
    ttl_ms: int | None = None
    poll_interval_ms: int | None = None


class TaskRequest(types.Request[dict[str, Any], str]):
    """A ``tasks/*`` request; its ``Mcp-Name`` header is the task id, as the spec asks."""

    name_param: ClassVar[str | None] = "taskId"


async def _not_resolved(created: CreatedTask, context) -> types.CallToolResult:
    raise AssertionError("the tests follow their tasks themselves")


class TasksClient(ClientExtension):
    identifier = IDENTIFIER

    def claims(self):
        return [ResultClaim(result_type="task", model=CreatedTask, resolve=_not_resolved)]


async def call_as_task(client: Client, tool: str, arguments: dict[str, Any]) -> CreatedTask:
    result = await client.session.call_tool(tool, arguments, allow_claimed=True)
    assert isinstance(result, CreatedTask), result
    return result


async def tasks_request(client: Client, method: str, **params: Any) -> dict[str, Any]:
    request = TaskRequest(method=method, params=params)
    return await client.session.send_request(request, TypeAdapter(dict[str, Any]))


async def poll(
    client: Client, task_id: str, *, until: frozenset[str] = TERMINAL, timeout: float = 30.0
) -> tuple[dict[str, Any], list[str]]:
    """Polls ``tasks/get`` until the task's status is in ``until``: the last answer, and
    every status message seen on the way (each once, in order)."""
    messages: list[str] = []
    deadline = time.monotonic() + timeout
    while True:
        task = await tasks_request(client, "tasks/get", taskId=task_id)
        message = task.get("statusMessage")
        if message and (not messages or messages[-1] != message):
            messages.append(message)
        if task["status"] in until:
            return task, messages
        assert time.monotonic() < deadline, f"task {task_id} still {task['status']}"
        await anyio.sleep(0.3)
