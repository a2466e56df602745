"""A tool call as an A2A call: the message goes through the relay's own gateway in this process
(admission, the key's scope, the call rules, the rate limits, the audit log and the metrics of
an A2A call), streamed, so the MCP client gets a progress notification per status update.

The A2A task's end becomes the tool's result; a task that waits for input becomes an MCP
input request (an elicitation, 2026-07-28 multi round-trip), whose answer is sent to the same
A2A task when the client calls again; a tool call the client cancels cancels the A2A task.
"""

from __future__ import annotations

import base64
import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import mcp_types as types

from registry.auth import api_key_lookup
from relay_project import ratelimit
from relay_project.database import database_sync_to_async
from routing.mcp import catalog
from routing.mcp.catalog import Subset
from routing.mcp.tools import (
    Answer,
    BadArguments,
    ToolSpec,
    answer_of,
    message_of,
    question_of,
    state_of,
)
from tasks_app import gateway, snapshots
from tasks_app.api.admission import (
    Admitted,
    HoldingSlot,
    admit_caller,
    admit_for,
    callable_target,
    context_for,
)
from tasks_app.api.parsing import (
    JSONRPC,
    Call,
    InvalidApiKey,
    TargetNotFound,
    check_params,
    current_limits,
)
from tasks_app.protocol.errors import A2AError, RateLimited, Unauthenticated
from tasks_app.protocol.versions import Operation, ProtocolVersion
from tasks_app.streams import KEEPALIVE

logger = logging.getLogger(__name__)

META_KEY = "relay/a2a"
"""The ``_meta`` key of a tool result naming its A2A task (id, context id, state)."""
ANSWER = "answer"
"""The key of the input request asking for the answer to an A2A task's question."""
FINAL = frozenset({"completed", "canceled", "failed", "rejected"})
WAITING = frozenset({"input-required", "auth-required"})

Progress = Callable[[float, str | None], Awaitable[None]]


class ToolRefused(Exception):
    """The call was refused before anything was sent (bad arguments, an A2A error at
    admission): answered as a tool error the model can read."""


def request_state_of(task_id: str, tool: str) -> str:
    return json.dumps({"taskId": task_id, "tool": tool})


def continued_task(request_state: str | None, tool: str) -> str | None:
    """The A2A task an input round continues, from the state the client echoed (None when
    the state is not ours or names another tool). The gateway checks the caller owns it."""
    if not request_state:
        return None
    try:
        state = json.loads(request_state)
    except ValueError:
        return None
    if not isinstance(state, dict) or state.get("tool") != tool:
        return None
    task_id = state.get("taskId")
    return task_id if isinstance(task_id, str) and task_id else None


def _answer_text(responses: types.InputResponses | None) -> tuple[str, str | None]:
    """The user's action and answer text from an input round's responses."""
    response = (responses or {}).get(ANSWER)
    if not isinstance(response, types.ElicitResult):
        return "cancel", None
    if response.action != "accept":
        return response.action, None
    value = (response.content or {}).get(ANSWER)
    return "accept", "" if value is None else str(value)


class KeyRefused(Exception):
    """The request's key was refused (no key, a bad one, over its rate limit) at the tool
    call's admission: ``error`` is the A2A error, which the server answers with HTTP 401 or
    429 as it answers a request refused before the SDK."""

    def __init__(self, error: Exception) -> None:
        super().__init__(error)
        self.error = error


class UnknownTool(Exception):
    """The caller has no tool of that name here (or may not call its target: a key learns
    nothing of targets outside its scope)."""


def _caller_and_tool(caller, authorization: str | None, subset: Subset | None, name: str):
    """The caller (``caller``, or the key of ``authorization`` looked up and counted, as an
    A2A call's: ``admit_caller``) and the tool the call names. Raises KeyRefused or
    UnknownTool."""
    if caller is None:
        try:
            caller = admit_caller(api_key_lookup(authorization))
        except (Unauthenticated, InvalidApiKey, RateLimited) as error:
            raise KeyRefused(error) from None
    tool = catalog.tool_to_call(caller, subset, name)
    if tool is None:
        raise UnknownTool(name)
    return caller, tool


def tool_admitted(
    caller: Any,
    authorization: str | None,
    subset: Subset | None,
    name: str,
    arguments: dict[str, Any],
    progress: bool,
) -> tuple[Any, ToolSpec, Admitted]:
    """A tool call's admission, in one hop to the database thread, as an A2A call's
    (``admit_parsed``): the caller's key looked up and counted (``admit_caller``; skipped for
    a ``caller`` authenticated already), the tool (``catalog.tool_to_call``), its message,
    and ``admit_for``: the target in the key's scope, the call rules checked (once), the
    limits, the task opened (and for a stream, the key's stream slot taken). The call is a
    stream when the client asked for ``progress``, or calls a team or a workflow (its answer
    is its task, which its stream begins with; a blocking SendMessage answers with the last
    member's message alone), else a blocking SendMessage. Raises KeyRefused, UnknownTool,
    BadArguments or the A2A error that refuses the call."""
    caller, tool = _caller_and_tool(caller, authorization, subset, name)
    operation = Operation.STREAM if progress or tool.target_kind != "agent" else Operation.SEND
    call = Call(
        JSONRPC,
        ProtocolVersion.V1_0,
        operation,
        {"message": message_of(arguments, skill=tool.skill)},
    )
    check_params(call.params, current_limits())
    try:
        return caller, tool, admit_for(caller, tool.target_kind, tool.target_id, call)
    except TargetNotFound:
        raise UnknownTool(name) from None


def caller_and_tool(
    caller: Any, authorization: str | None, subset: Subset | None, name: str
) -> tuple[Any, ToolSpec, gateway.Target]:
    """The caller and the tool of a call that sends no message (a question declined), with
    its target resolved in the key's scope and the call rules checked: one hop."""
    caller, tool = _caller_and_tool(caller, authorization, subset, name)
    try:
        return caller, tool, callable_target(caller, tool.target_kind, tool.target_id)
    except TargetNotFound:
        raise UnknownTool(name) from None


async def call_tool(
    *,
    caller: Any,
    authorization: str | None,
    subset: Subset | None,
    params: types.CallToolRequestParams,
    progress: Progress | None,
    can_elicit: bool,
) -> types.CallToolResult | types.InputRequiredResult:
    """Runs the tool call; see the module. ``caller``: the caller authenticated before the
    SDK, or None to authenticate ``authorization`` with the call's admission (raises
    KeyRefused). ``progress``: None when the client asked for none: a call to an agent is
    then a blocking SendMessage (``tool_admitted``), else a streamed one, with a
    notification per update when asked. ``can_elicit``: the client takes input requests (2026-07-28
    with the elicitation capability); without, a task waiting for input is answered with its
    question and the client continues it with ``taskId``. Raises UnknownTool."""
    arguments = dict(params.arguments or {})
    task_id = continued_task(params.request_state, params.name)
    if task_id is not None:
        action, text = _answer_text(params.input_responses)
        if text is None:
            return await _cancel_waiting(
                caller, authorization, subset, params.name, task_id, action
            )
        arguments = {"text": text, "taskId": task_id}
    try:
        caller, tool, admitted = await database_sync_to_async(tool_admitted)(
            caller, authorization, subset, params.name, arguments, progress is not None
        )
    except (BadArguments, A2AError) as error:
        return _error_result(str(error))
    ctx = context_for(admitted.call, caller)
    task_id = admitted.opened.task.id if admitted.opened is not None else ""
    if admitted.call.operation is Operation.SEND:
        try:
            result = await gateway.send_message(
                admitted.target, ctx, admitted.call.params, opened=admitted.opened
            )
            result = await followed(admitted.target, ctx, result, task_id, None)
        except A2AError as error:
            return _error_result(str(error))
        except BaseException:
            if task_id:
                await _cancel_quietly(admitted.target, ctx, task_id)
            raise
    else:
        result = await _streamed(caller, admitted, ctx, task_id, progress or _no_progress)
        if isinstance(result, types.CallToolResult):
            return result
    task = result.get("task") or {}
    if state_of(task) in WAITING:
        return _waiting(tool, task, can_elicit)
    return tool_result(answer_of(result))


async def _no_progress(step: float, message: str | None) -> None:
    """What a call that asked for no progress does with it."""


async def _streamed(caller, admitted: Admitted, ctx: gateway.CallContext, task_id: str, progress):
    """A streamed call read to its end (``_follow``), holding the key's stream slot until
    then; a tool error result when the stream could not start."""
    try:
        events = await gateway.stream_message(
            admitted.target, ctx, admitted.call.params, opened=admitted.opened
        )
    except BaseException as error:
        ratelimit.stream_slot_give_back(caller)
        if isinstance(error, A2AError):
            return _error_result(str(error))
        raise
    held = HoldingSlot(events, caller)
    try:
        result = await _follow(admitted.target, ctx, held, task_id, progress)
    except BaseException:
        await held.aclose()
        if task_id:
            await _cancel_quietly(admitted.target, ctx, task_id)
        raise
    await held.aclose()
    return result


async def _follow(
    target: gateway.Target,
    ctx: gateway.CallContext,
    events,
    task_id: str,
    progress: Progress,
) -> dict[str, Any]:
    """Reads the call's stream to its end (and the task's own stream after, when the agent
    ended its stream before the task ended): a progress notification per status update or
    artifact. Returns the canonical result: ``{"task": ...}`` or ``{"message": ...}``."""
    snapshot: dict[str, Any] = {}
    step = 0
    async for event in events:
        if event is KEEPALIVE:
            continue
        if "message" in event and not snapshot:
            return {"message": event["message"]}
        snapshot = event["task"] if "task" in event else snapshots.apply_event(snapshot, event)
        task_id = snapshot.get("id", task_id)
        step += 1
        await progress(step, _progress_message(event, snapshot))
    return await followed(target, ctx, {"task": snapshot}, task_id, progress, step)


async def followed(
    target: gateway.Target,
    ctx: gateway.CallContext,
    result: dict[str, Any],
    task_id: str,
    progress: Progress | None,
    step: int = 0,
) -> dict[str, Any]:
    """The result once its task ended or waits for input: a task still working is followed
    on its own stream (a progress notification per event, when asked for)."""
    if "message" in result:
        return result
    snapshot = result.get("task") or {}
    task_id = snapshot.get("id", task_id)
    while task_id and state_of(snapshot) not in FINAL | WAITING:
        followed = await gateway.subscribe(target, ctx, task_id)
        async for event in followed:
            if event is KEEPALIVE:
                continue
            snapshot = event["task"] if "task" in event else snapshots.apply_event(snapshot, event)
            step += 1
            if progress is not None:
                await progress(step, _progress_message(event, snapshot))
    return {"task": snapshot}


def _progress_message(event: dict[str, Any], snapshot: dict[str, Any]) -> str:
    state = state_of(snapshot) or "submitted"
    if "artifactUpdate" in event:
        artifact = event["artifactUpdate"].get("artifact") or {}
        return f"{state}: artifact {artifact.get('name') or artifact.get('artifactId', '')}"
    texts = answer_of({"task": {**snapshot, "artifacts": []}}).texts
    return f"{state}: {texts[0]}" if texts else state


async def _cancel_quietly(target: gateway.Target, ctx: gateway.CallContext, task_id: str) -> None:
    """Cancels the A2A task of a tool call the client gave up on, shielded from the
    cancellation that ends the call; a task that already ended stays as it is."""
    with anyio.CancelScope(shield=True):
        try:
            await gateway.cancel_task(target, ctx, task_id)
        except A2AError:
            pass
        except Exception:
            logger.exception("could not cancel task %s of a cancelled MCP call", task_id)


async def _cancel_waiting(
    caller, authorization: str | None, subset: Subset | None, name: str, task_id: str, action: str
):
    """The user declined (or dismissed) the question: the A2A task is canceled."""
    try:
        caller, _, target = await database_sync_to_async(caller_and_tool)(
            caller, authorization, subset, name
        )
    except A2AError as error:
        return _error_result(str(error))
    ctx = gateway.CallContext(caller=caller)
    try:
        snapshot = await gateway.cancel_task(target, ctx, task_id)
    except A2AError as error:
        return _error_result(str(error))
    answer = answer_of({"task": snapshot})
    return tool_result(
        Answer(
            (f"The question was {action}ed: the A2A task is canceled.",),
            (),
            (),
            task_id=answer.task_id,
            context_id=answer.context_id,
            state=answer.state,
        )
    )


def _waiting(tool: ToolSpec, task: dict[str, Any], can_elicit: bool):
    question = question_of(task)
    if can_elicit:
        schema = {
            "type": "object",
            "properties": {ANSWER: {"type": "string", "title": "Answer"}},
            "required": [ANSWER],
        }
        request = types.ElicitRequest(
            params=types.ElicitRequestFormParams(message=question, requested_schema=schema)
        )
        return types.InputRequiredResult(
            input_requests={ANSWER: request},
            request_state=request_state_of(task["id"], tool.name),
        )
    answer = answer_of({"task": task})
    text = f"{question}\n\nAnswer by calling {tool.name} again with taskId {task['id']}."
    return tool_result(
        Answer((text,), answer.data, answer.files, task["id"], answer.context_id, answer.state)
    )


def tool_result(answer: Answer) -> types.CallToolResult:
    """The MCP result of an A2A answer: its text (naming the task), its files as embedded
    resources or resource links, the answer as structured content, the task in ``_meta``."""
    content: list[types.ContentBlock] = [types.TextContent(text=answer.summary())]
    for index, file in enumerate(answer.files):
        name = file.get("name") or f"file-{index + 1}"
        if "bytes" in file:
            uri = f"a2a://tasks/{answer.task_id or 'message'}/files/{name}"
            content.append(
                types.EmbeddedResource(
                    resource=types.BlobResourceContents(
                        uri=uri, mime_type=file["mediaType"], blob=_base64(file["bytes"])
                    )
                )
            )
        else:
            content.append(
                types.ResourceLink(name=name, uri=file["url"], mime_type=file["mediaType"])
            )
    for item in answer.data:
        content.append(types.TextContent(text=json.dumps(item)))
    meta = (
        {
            META_KEY: {
                "taskId": answer.task_id,
                "contextId": answer.context_id,
                "state": answer.state,
            }
        }
        if answer.task_id
        else None
    )
    return types.CallToolResult(
        content=content,
        structured_content=answer.structured(),
        is_error=answer.is_error,
        _meta=meta,
    )


def _base64(value: str) -> str:
    """A2A's base64 (standard or URL-safe) as MCP's standard base64."""
    padded = value + "=" * (-len(value) % 4)
    return base64.b64encode(base64.b64decode(padded, altchars=b"-_")).decode()


def _error_result(message: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(text=message)], is_error=True)
