"""The MCP tasks extension (``io.modelcontextprotocol/tasks``, revision 2026-07-28) on the
SDK's extension interface (SEP-2133): a tool call from a client that declares the extension
in its request's capabilities is answered at once with a task, and ``tasks/get``,
``tasks/update`` and ``tasks/cancel`` follow it.

The MCP task is the A2A task: its id is the A2A task's id, and its state is the stored A2A
task's, so any relay process answers for it (the server keeps no session) and the work goes
on when the client leaves (the gateway drives it, as for an A2A ``returnImmediately`` send).
A task is the caller's: another key's ``tasks/*`` request finds no such task.

Statuses: ``routing.mcp.tools.MCP_TASK_STATUS``. A task waiting for input lists one
elicitation in ``inputRequests``, keyed by the question (a new key for each question); the
answer, sent with ``tasks/update``, is the A2A task's next message. Progress is the task's
``statusMessage`` (the extension has no progress notifications).

The 2025-11-25 revision's tasks (core there, experimental; ``@modelcontextprotocol/sdk``'s
``client.experimental.tasks``) follow the same A2A task in that revision's shapes
(``LegacyTasks``): a ``tools/call`` with a ``task`` param is answered with a
``CreateTaskResult``, ``tasks/get`` and ``tasks/cancel`` answer a flat ``Task``, and
``tasks/result`` waits for the task to end or ask, then answers its tool result; a question
is that result (with the task id), and the client answers it by calling the tool again with
``taskId``, as a task or not.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Awaitable, Callable
from typing import Any

import mcp_types as types
from mcp.server.extension import Extension, MethodBinding, compose_tool_call_handler
from mcp.server.mcpserver.server import require_client_extension
from mcp.shared.exceptions import MCPError

from relay_project.database import database_sync_to_async
from routing.mcp import calls, catalog
from routing.mcp.calls import ANSWER, FINAL, WAITING, tool_result
from routing.mcp.tools import (
    MCP_TASK_STATUS,
    BadArguments,
    answer_of,
    message_of,
    question_of,
    state_of,
)
from tasks_app import gateway, selectors, snapshots
from tasks_app.api.admission import admit_for, context_for
from tasks_app.api.parsing import JSONRPC, Call, check_params, current_limits
from tasks_app.protocol.errors import (
    A2AError,
    TaskNotCancelable,
    TaskNotFound,
    UnsupportedOperation,
)
from tasks_app.protocol.versions import Operation, ProtocolVersion
from tasks_app.streams import KEEPALIVE

IDENTIFIER = "io.modelcontextprotocol/tasks"
VERSIONS = frozenset({"2026-07-28"})
"""The revisions the extension is served at (2025-11-25's tasks: ``LegacyTasks``)."""
LEGACY_VERSIONS = frozenset({"2025-11-25"})
LEGACY_CAPABILITY = {"requests": {"tools": {"call": {}}}, "cancel": {}}
"""The ``tasks`` server capability of 2025-11-25: tool calls as tasks, and their cancel."""
POLL_INTERVAL_MS = 1000
TASK = "task"
"""The ``resultType`` of a tool call answered with a task."""
TASK_FIELDS = (
    "taskId",
    "status",
    "statusMessage",
    "createdAt",
    "lastUpdatedAt",
    "ttlMs",
    "pollIntervalMs",
)
"""A ``Task``'s fields: a ``CreateTaskResult`` carries these (``tasks/get`` inlines more)."""

CallerAndSubset = Callable[[Any], Awaitable[tuple[Any, "catalog.Subset | None"]]]


class TaskParams(types.RequestParams):
    """The params of ``tasks/get`` and ``tasks/cancel``."""

    task_id: str


class UpdateTaskParams(TaskParams):
    """The params of ``tasks/update``: answers to the task's ``inputRequests`` by key."""

    input_responses: dict[str, Any]


def question_key(snapshot: dict[str, Any]) -> str:
    """The ``inputRequests`` key of a waiting task's question: named for the status message
    that asks it, so each question of the task has a key of its own."""
    status = snapshot.get("status") or {}
    message = status.get("message") or {}
    return f"{ANSWER}-{message.get('messageId') or status.get('timestamp') or snapshot['id']}"


def detailed_task(snapshot: dict[str, Any], created_at: str) -> dict[str, Any]:
    """The extension's ``DetailedTask`` of a canonical A2A task snapshot."""
    state = state_of(snapshot) or "submitted"
    status = MCP_TASK_STATUS[state]
    timestamp = (snapshot.get("status") or {}).get("timestamp") or created_at
    task: dict[str, Any] = {
        "taskId": snapshot["id"],
        "status": status,
        "createdAt": created_at,
        "lastUpdatedAt": timestamp,
        "ttlMs": None,
        "pollIntervalMs": POLL_INTERVAL_MS,
    }
    texts = answer_of({"task": {**snapshot, "artifacts": []}}).texts
    if texts:
        task["statusMessage"] = texts[0]
    if status == "input_required":
        task["statusMessage"] = question_of(snapshot)
        task["inputRequests"] = {
            question_key(snapshot): {
                "method": "elicitation/create",
                "params": {
                    "mode": "form",
                    "message": task["statusMessage"],
                    "requestedSchema": {
                        "type": "object",
                        "properties": {ANSWER: {"type": "string", "title": "Answer"}},
                        "required": [ANSWER],
                    },
                },
            }
        }
    elif status == "completed":
        result = tool_result(answer_of({"task": snapshot}))
        task["result"] = result.model_dump(by_alias=True, mode="json", exclude_none=True)
    elif status == "failed":
        message = task.get("statusMessage") or f"the A2A task ended {state}"
        task["error"] = {"code": types.INTERNAL_ERROR, "message": message}
    return task


def _created_at(caller, task_id: str) -> str:
    task = selectors.task_for_caller(caller=caller, task_id=task_id)
    if task is None:
        raise _not_found()
    return task.created_at.isoformat()


def _stored(caller, task_id: str) -> tuple[Any, dict[str, Any]]:
    """The caller's stored task and its snapshot, for an answer to its question."""
    task = selectors.task_for_caller(caller=caller, task_id=task_id)
    if task is None:
        raise _not_found()
    return task, snapshots.snapshot_of(task)


def _not_found() -> MCPError:
    return MCPError(types.INVALID_PARAMS, "Failed to retrieve task: Task not found")


def _declared(ctx) -> bool:
    capabilities = ctx.session.client_capabilities
    return (
        ctx.protocol_version in VERSIONS
        and capabilities is not None
        and IDENTIFIER in (capabilities.extensions or {})
    )


async def _send(caller, kind: str, target_id: str, message: dict[str, Any]) -> dict[str, Any]:
    """Sends ``message`` as an A2A call (the same admission as a tool call's) that returns
    the submitted task at once; the gateway drives the exchange with the agent."""
    call = Call(
        JSONRPC,
        ProtocolVersion.V1_0,
        Operation.SEND,
        {"message": message, "configuration": {"returnImmediately": True}},
    )
    check_params(call.params, current_limits())
    admitted = await database_sync_to_async(admit_for)(caller, kind, target_id, call)
    ctx = context_for(admitted.call, caller)
    result = await gateway.send_message(
        admitted.target, ctx, admitted.call.params, opened=admitted.opened
    )
    return result["task"]


class TasksExtension(Extension):
    """The tasks extension. ``caller_and_subset`` gives a request's caller and the tools its
    endpoint serves (``routing.mcp.server``)."""

    identifier = IDENTIFIER

    def __init__(self, caller_and_subset: CallerAndSubset) -> None:
        self._caller_and_subset = caller_and_subset

    def methods(self) -> list[MethodBinding]:
        return [
            MethodBinding("tasks/get", TaskParams, self.get, VERSIONS),
            MethodBinding("tasks/update", UpdateTaskParams, self.update, VERSIONS),
            MethodBinding("tasks/cancel", TaskParams, self.cancel, VERSIONS),
        ]

    async def intercept_tool_call(self, params: types.CallToolRequestParams, ctx, call_next):
        """A call from a client that declared the extension starts its A2A task and answers
        with it; any other call (or an input round of an elicitation) is an ordinary one."""
        if not _declared(ctx) or params.request_state:
            return await call_next(ctx)
        caller, subset = await self._caller_and_subset(ctx)
        tool = await database_sync_to_async(catalog.tool_named)(caller, subset, params.name)
        if tool is None:
            raise MCPError(types.INVALID_PARAMS, f"no tool {params.name[:100]!r} here")
        try:
            message = message_of(params.arguments, skill=tool.skill)
            snapshot = await _send(caller, tool.target_kind, tool.target_id, message)
        except (BadArguments, A2AError) as error:
            return types.CallToolResult(content=[types.TextContent(text=str(error))], is_error=True)
        created = detailed_task(snapshot, (snapshot.get("status") or {}).get("timestamp", ""))
        return {"resultType": TASK, **{key: created[key] for key in TASK_FIELDS if key in created}}

    async def get(self, ctx, params: TaskParams) -> dict[str, Any]:
        require_client_extension(ctx, IDENTIFIER)
        caller, _ = await self._caller_and_subset(ctx)
        try:
            snapshot = await gateway.get_task(
                None, gateway.CallContext(caller=caller), params.task_id
            )
        except TaskNotFound:
            raise _not_found() from None
        created_at = await database_sync_to_async(_created_at)(caller, params.task_id)
        return detailed_task(snapshot, created_at)

    async def update(self, ctx, params: UpdateTaskParams) -> dict[str, Any]:
        """Answers the task's question: the answer is the A2A task's next message; a declined
        question cancels the task. Responses to any other key are ignored."""
        require_client_extension(ctx, IDENTIFIER)
        caller, _ = await self._caller_and_subset(ctx)
        task, snapshot = await database_sync_to_async(_stored)(caller, params.task_id)
        response = params.input_responses.get(question_key(snapshot))
        if MCP_TASK_STATUS[task.state] != "input_required" or response is None:
            return {}
        try:
            answer = types.ElicitResult.model_validate(response)
        except ValueError:
            raise MCPError(
                types.INVALID_PARAMS, "an input response is an elicitation result"
            ) from None
        ctx_a2a = gateway.CallContext(caller=caller)
        try:
            if answer.action != "accept":
                await gateway.cancel_task(None, ctx_a2a, task.id)
                return {}
            text = str((answer.content or {}).get(ANSWER, ""))
            message = message_of({"text": text, "taskId": task.id})
            await _send(caller, task.target_kind, task.target_id, message)
        except (BadArguments, A2AError) as error:
            raise MCPError(types.INVALID_PARAMS, str(error)) from None
        return {}

    async def cancel(self, ctx, params: TaskParams) -> dict[str, Any]:
        """Cancels the A2A task; a task that already ended is acknowledged as it is."""
        require_client_extension(ctx, IDENTIFIER)
        caller, _ = await self._caller_and_subset(ctx)
        try:
            await gateway.cancel_task(None, gateway.CallContext(caller=caller), params.task_id)
        except TaskNotFound:
            raise _not_found() from None
        except TaskNotCancelable:
            pass
        return {}


def legacy_task(snapshot: dict[str, Any], created_at: str) -> dict[str, Any]:
    """The 2025-11-25 ``Task`` of a canonical A2A task snapshot."""
    task = detailed_task(snapshot, created_at)
    legacy = {key: task[key] for key in TASK_FIELDS if key in task and not key.endswith("Ms")}
    return {**legacy, "ttl": None, "pollInterval": POLL_INTERVAL_MS}


class LegacyTasks:
    """The tasks of the 2025-11-25 revision: a server middleware that answers a tool call
    with a ``task`` param with its task and adds the ``tasks`` capability to the handshake,
    and the ``tasks/get``, ``tasks/result`` and ``tasks/cancel`` methods."""

    def __init__(self, caller_and_subset: CallerAndSubset) -> None:
        self._caller_and_subset = caller_and_subset

    async def __call__(self, ctx, call_next):
        if ctx.method == "initialize":
            result = await call_next(ctx)
            if isinstance(result, dict) and result.get("protocolVersion") in LEGACY_VERSIONS:
                result.setdefault("capabilities", {})["tasks"] = LEGACY_CAPABILITY
            return result
        params = ctx.params if isinstance(ctx.params, dict) else {}
        if (
            ctx.method != "tools/call"
            or ctx.protocol_version not in LEGACY_VERSIONS
            or params.get("task") is None
        ):
            return await call_next(ctx)
        return await self.create(ctx, params)

    async def create(self, ctx, params: dict[str, Any]) -> dict[str, Any]:
        caller, subset = await self._caller_and_subset(ctx)
        name = str(params.get("name") or "")
        tool = await database_sync_to_async(catalog.tool_named)(caller, subset, name)
        if tool is None:
            raise MCPError(types.INVALID_PARAMS, f"no tool {name[:100]!r} here")
        try:
            message = message_of(params.get("arguments") or {}, skill=tool.skill)
            snapshot = await _send(caller, tool.target_kind, tool.target_id, message)
            if state_of(snapshot) in WAITING:  # an answer: the question is not its state
                snapshot = await _moved_on(caller, snapshot)
        except (BadArguments, A2AError) as error:
            raise MCPError(types.INVALID_PARAMS, str(error)) from None
        created_at = await database_sync_to_async(_created_at)(caller, snapshot["id"])
        return {"task": legacy_task(snapshot, created_at)}

    def methods(self) -> list[MethodBinding]:
        return [
            MethodBinding("tasks/get", TaskParams, self.get, LEGACY_VERSIONS),
            MethodBinding("tasks/result", TaskParams, self.result, LEGACY_VERSIONS),
            MethodBinding("tasks/cancel", TaskParams, self.cancel, LEGACY_VERSIONS),
        ]

    async def _snapshot(self, ctx, task_id: str) -> tuple[Any, dict[str, Any], str]:
        caller, _ = await self._caller_and_subset(ctx)
        try:
            snapshot = await gateway.get_task(None, gateway.CallContext(caller=caller), task_id)
        except TaskNotFound:
            raise _not_found() from None
        return caller, snapshot, await database_sync_to_async(_created_at)(caller, task_id)

    async def get(self, ctx, params: TaskParams) -> dict[str, Any]:
        _, snapshot, created_at = await self._snapshot(ctx, params.task_id)
        return legacy_task(snapshot, created_at)

    async def result(self, ctx, params: TaskParams) -> dict[str, Any]:
        """The task's tool result once it ended or asks (followed until then); a question
        is answered by calling the tool again with ``taskId``."""
        caller, _ = await self._caller_and_subset(ctx)
        task, snapshot = await database_sync_to_async(_stored)(caller, params.task_id)
        if state_of(snapshot) not in FINAL | WAITING:
            target = await database_sync_to_async(gateway.target_of)(task)
            followed = await calls.followed(
                target, gateway.CallContext(caller=caller), {"task": snapshot}, params.task_id, None
            )
            snapshot = followed["task"]
        answer = answer_of({"task": snapshot})
        if state_of(snapshot) in WAITING:
            text = f"{question_of(snapshot)}\n\nAnswer by calling the tool again with taskId "
            answer = dataclasses.replace(answer, texts=(text + snapshot["id"] + ".",))
        return tool_result(answer).model_dump(by_alias=True, mode="json", exclude_none=True)

    async def cancel(self, ctx, params: TaskParams) -> dict[str, Any]:
        caller, _ = await self._caller_and_subset(ctx)
        a2a = gateway.CallContext(caller=caller)
        try:
            snapshot = await gateway.cancel_task(None, a2a, params.task_id)
        except TaskNotFound:
            raise _not_found() from None
        except TaskNotCancelable as error:
            raise MCPError(types.INVALID_PARAMS, str(error)) from None
        created_at = await database_sync_to_async(_created_at)(caller, params.task_id)
        return legacy_task(snapshot, created_at)


async def _moved_on(caller, snapshot: dict[str, Any]) -> dict[str, Any]:
    """A task given an answer, once its agent took it: the state after the question (else a
    client polling it at once would see the question it answered)."""
    asked, ctx = question_key(snapshot), gateway.CallContext(caller=caller)
    try:
        followed = await gateway.subscribe(None, ctx, snapshot["id"])
    except UnsupportedOperation:  # it ended already
        return await gateway.get_task(None, ctx, snapshot["id"])
    async with contextlib.aclosing(followed) as events:
        async for event in events:
            if event is KEEPALIVE:
                continue
            snapshot = event["task"] if "task" in event else snapshots.apply_event(snapshot, event)
            if state_of(snapshot) not in WAITING or question_key(snapshot) != asked:
                break
    return snapshot


def install(server, extension: TasksExtension) -> None:
    """Serves ``extension`` on a low-level ``Server``: its methods, its capability, and its
    interceptor around the server's ``tools/call`` handler (what ``MCPServer`` does with
    its ``extensions``); and the 2025-11-25 tasks (``LegacyTasks``). A method both revisions
    name is one handler that answers as the request's revision does."""
    legacy = LegacyTasks(extension._caller_and_subset)
    bindings = [*extension.methods(), *legacy.methods()]
    for name in dict.fromkeys(binding.method for binding in bindings):
        served = [binding for binding in bindings if binding.method == name]
        server.add_request_handler(name, served[0].params_type, _by_revision(name, served))
    server.extensions[extension.identifier] = extension.settings()
    server.middleware.append(legacy)
    call_tool = server.get_request_handler("tools/call")
    server.add_request_handler(
        "tools/call",
        types.CallToolRequestParams,
        compose_tool_call_handler([extension], call_tool.handler),
    )


def _by_revision(name: str, bindings: list[MethodBinding]):
    async def handler(ctx, params):
        for binding in bindings:
            if ctx.protocol_version in binding.protocol_versions:
                return await binding.handler(ctx, params)
        raise MCPError(types.METHOD_NOT_FOUND, "Method not found", name)

    return handler
