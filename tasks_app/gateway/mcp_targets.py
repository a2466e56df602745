"""An MCP server registered as an agent (``Agent.mcp_server``), as a target of the gateway:
a message names a tool and its arguments (a data part ``{"tool": name, "arguments": {...}}``)
or says in text what it wants (the relay's skill search picks the tool, and the text is the
tool's one string argument). The relay calls the tool with the official ``mcp`` client; the
result is the task's artifact (text content as text parts, structured content as a data
part), and a tool error fails the task with the tool's message.

A send goes through the same policy as an A2A agent's (``guarding``): the circuit breaker
admits it and hears how it went, a call that provably did not reach the server (refused,
unresolved, TLS, HTTP 502/503/504, 429 with Retry-After) is tried again under the agent's
retry policy, and a task's first send fails over to the agent's alternates. On a stream, the
server's progress notifications arrive as ``working`` status updates. Cancelling the task
stops the exchange, and the MCP client tells the server (``notifications/cancelled``, or on
2026-07-28 by closing the call's response stream). With tracing on, each try of the call is
an ``invoke_agent`` CLIENT span under the call's trace (``ctx.trace``), as an A2A agent's
calls are, and its HTTP requests carry that span's ``traceparent``. The call is one exchange,
so a task is not resumed by another process; the gateway persists it like any other.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from typing import Any

import anyio
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from registry.mcp_servers import tool_schemas
from relay_project import outbound, tracing
from relay_project.database import database_sync_to_async
from relay_project.outbound_mcp import mcp_client
from tasks_app import upstream_traces
from tasks_app.gateway import guarding, retries
from tasks_app.gateway.targets import Step, Target
from tasks_app.lifecycle import TaskState
from tasks_app.protocol import events as a2a_events
from tasks_app.protocol.errors import InvalidParams
from tasks_app.protocol.versions import Operation
from tasks_app.upstream import UpstreamError

PROGRESS_METADATA = "mcpProgress"
"""The metadata key of a ``working`` update that relays an MCP progress notification."""


class McpTarget(Target):
    """A registered MCP server: each call is one ``tools/call``."""

    binding = "MCP"
    """How the relay speaks to it (its ``invoke_agent`` spans say)."""

    def __init__(self, agent, headers: dict[str, str]) -> None:
        super().__init__(
            kind="agent",
            id=agent.pk,
            name=agent.name,
            streaming=True,
            agent_id=agent.pk,
            # The server knows no tasks: the relay's task is the only one, so a stream gives
            # it at once (a silent tool would hold a stream without its first event).
            announces_task=True,
        )
        self.url = agent.card_url
        self.headers = headers
        self.schemas = tool_schemas(agent.extensions.all())
        guarding.take_policy(self, agent)

    async def run(self, task, request, ctx, *, stream):
        """The send, as ``guarding.served`` chooses its agent (failover)."""
        async with contextlib.aclosing(
            guarding.served(self, task, request, ctx, stream=stream)
        ) as steps:
            async for step in steps:
                yield step

    async def run_here(self, task, request, ctx, *, stream):
        """The tool call on this server, through the call guard, retried as its policy
        allows. A message that names no tool of this server is refused before the call."""
        tool, arguments = await self.tool_call(request.get("message") or {})
        await guarding.admit(self)
        async with contextlib.aclosing(
            guarding.guarded(
                self,
                self._exchange(task, tool, arguments, stream=stream, trace=ctx.trace),
            )
        ) as steps:
            async for step in steps:
                yield step

    async def _exchange(self, task, tool: str, arguments: dict[str, Any], *, stream: bool, trace):
        """The call's steps: a ``working`` update per progress notification (on a stream),
        then the task as the result leaves it. Stopped early (a cancel), the call is
        cancelled, which the MCP client tells the server."""
        progressed: asyncio.Queue[Step | None] = asyncio.Queue()

        async def progress(done: float, total: float | None, said: str | None) -> None:
            progressed.put_nowait(Step(_working_event(task, done, total, said)))

        call = asyncio.ensure_future(
            guarding.tried(
                self,
                task,
                lambda: self._traced_call(
                    task, tool, arguments, progress if stream else None, trace
                ),
            )
        )
        call.add_done_callback(lambda _: progressed.put_nowait(None))
        try:
            while (step := await progressed.get()) is not None:
                yield step
            result = call.result()
        except MCPError as error:  # the server refused the call: the task fails, saying why
            yield Step(_failed_event(task, f"the tool {tool!r} was refused: {error.message}"))
            return
        finally:
            if not call.done():
                call.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await call
        yield Step(_task_event(task, tool, result))

    async def _traced_call(self, task, tool: str, arguments: dict[str, Any], progress, trace):
        """``_call`` in an ``invoke_agent`` span under ``trace`` when tracing is on: its
        requests carry the span's ``traceparent``. The server knows no tasks: the span names
        the relay's task and context."""
        if not tracing.enabled():
            return await self._call(tool, arguments, progress, self.headers)
        operation = Operation.SEND if progress is None else Operation.STREAM
        message = {"taskId": task.id, "contextId": task.context_id}
        span = upstream_traces.agent_span(self, operation, {"message": message}, trace)
        with tracing.ending(span):
            headers = tracing.outgoing(self.headers, tracing.within(span))
            return await self._call(tool, arguments, progress, headers)

    async def _call(self, tool: str, arguments: dict[str, Any], progress, headers: dict[str, str]):
        """One try of the call. Raises MCPError when the server answered with an error, and
        UpstreamError (``retries`` categories) when it could not be reached or answer."""
        from django.conf import settings

        timeout = settings.RELAY_UPSTREAM_TIMEOUT
        http = mcp_client(headers, timeout=timeout)
        http.event_hooks = {**http.event_hooks, "response": [self._not_available]}
        try:
            with anyio.fail_after(timeout):
                async with Client(streamable_http_client(self.url, http_client=http)) as session:
                    return await session.call_tool(tool, arguments, progress_callback=progress)
        except Exception as error:  # the SDK raises from task groups (ExceptionGroup)
            raise self._classified(error) from error

    async def _not_available(self, response: httpx2.Response) -> None:
        """Raises for an answer that says the server takes no calls now (the SDK would make
        it a JSON-RPC error and lose the status, which decides a retry)."""
        status = response.status_code
        if status in retries.NOT_AVAILABLE or status == 429:
            raise UpstreamError(
                "http_status",
                f"the MCP server {self.id!r} answered HTTP {status}",
                status=status,
                retry_after=_seconds(response.headers.get("retry-after")),
            )

    def _classified(self, error: BaseException) -> Exception:
        """The error of a failed try: the server's MCPError, or an UpstreamError."""
        leaves = _leaves(error)
        for leaf in leaves:
            if isinstance(leaf, MCPError | UpstreamError):
                return leaf
        name = f"the MCP server {self.id!r}"
        for leaf in leaves:
            if isinstance(leaf, outbound.UnsafeURLError):
                return UpstreamError(
                    "unsafe_url", f"{name} is at an address the relay may not call"
                )
            if isinstance(leaf, TimeoutError | httpx2.TimeoutException):
                return UpstreamError("timeout", f"{name} did not answer in time")
            if isinstance(leaf, httpx2.ConnectError):
                text = str(leaf)
                if "resolve" in text or "Name or service not known" in text:
                    return UpstreamError("dns", f"{name}: cannot resolve its host ({text})")
                if "SSL" in text or "certificate" in text:
                    return UpstreamError("tls", f"{name}: TLS handshake failed ({text})")
                return UpstreamError("refused", f"{name} refused the connection")
        said = "; ".join(str(leaf) or type(leaf).__name__ for leaf in leaves)[:300]
        return UpstreamError("protocol", f"{name} failed: {said}")

    async def tool_call(self, message: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        """The tool a message names, and its arguments. Raises InvalidParams saying why none."""
        parts = message.get("parts") or []
        for part in parts:
            data = part.get("data")
            if isinstance(data, dict) and "tool" in data:
                tool, arguments = data["tool"], data.get("arguments") or {}
                if tool not in self.schemas:
                    raise InvalidParams(
                        f"the MCP server {self.id!r} has no tool {tool!r}; its tools: "
                        + ", ".join(sorted(self.schemas))
                    )
                if not isinstance(arguments, dict):
                    raise InvalidParams("a tool's arguments must be an object")
                return tool, arguments
        text = "\n".join(p["text"] for p in parts if isinstance(p.get("text"), str)).strip()
        if not text:
            raise InvalidParams(
                'name a tool in a data part ({"tool": name, "arguments": {...}}) or say '
                "in text what you want"
            )
        tool = await database_sync_to_async(self._chosen)(text)
        argument = _string_argument(self.schemas.get(tool) or {})
        if argument is None:
            raise InvalidParams(
                f"the tool {tool!r} chosen for the text takes no single string argument: "
                'name it in a data part ({"tool": name, "arguments": {...}})'
            )
        return tool, {argument: text}

    def _chosen(self, text: str) -> str:
        from registry import semantic

        matches, _ = semantic.skill_find(
            semantic.SkillQuery(text=text, agent_ids=frozenset({self.id})), limit=1
        )
        if matches:
            return matches[0].skill.skill_id
        if len(self.schemas) == 1:
            return next(iter(self.schemas))
        raise InvalidParams(
            f"no tool of the MCP server {self.id!r} matches the text: name one in a data part "
            '({"tool": name, "arguments": {...}})'
        )


def _string_argument(schema: dict[str, Any]) -> str | None:
    """The one required (else the one) string property of an input schema, if there is one."""
    properties = schema.get("properties") or {}
    strings = [name for name, spec in properties.items() if (spec or {}).get("type") == "string"]
    required = [name for name in schema.get("required") or [] if name in properties]
    if len(required) == 1 and required[0] in strings:
        return required[0]
    if not required and len(strings) == 1:
        return strings[0]
    return None


def _task_event(task, tool: str, result) -> dict[str, Any]:
    texts = [block.text for block in result.content if getattr(block, "type", "") == "text"]
    if result.is_error:
        return _failed_event(task, "\n".join(texts) or f"the tool {tool!r} failed")
    parts: list[dict[str, Any]] = [{"text": text} for text in texts]
    if result.structured_content is not None:
        parts.append({"data": result.structured_content})
    artifact = {
        "artifactId": f"{task.id}-{tool}",
        "name": tool,
        "parts": parts or [{"text": ""}],
    }
    status = a2a_events.task_status(TaskState.COMPLETED)
    snapshot = a2a_events.task_snapshot(
        task_id=task.id, context_id=task.context_id, status=status, artifacts=[artifact]
    )
    return {"task": snapshot}


def _failed_event(task, said: str) -> dict[str, Any]:
    status = a2a_events.task_status(TaskState.FAILED, message=_agent_message(task, said))
    snapshot = a2a_events.task_snapshot(task_id=task.id, context_id=task.context_id, status=status)
    return {"task": snapshot}


def _agent_message(task, text: str) -> dict[str, Any]:
    return a2a_events.message(
        message_id=str(uuid.uuid4()),
        role=a2a_events.ROLE_AGENT,
        parts=a2a_events.text_parts(text),
        task_id=task.id,
        context_id=task.context_id,
    )


def _working_event(task, done: float, total: float | None, said: str | None) -> dict[str, Any]:
    """A ``working`` update relaying one MCP progress notification: its message, or how far."""
    text = said or (f"{done:g} of {total:g}" if total else f"{done:g} done")
    status = a2a_events.task_status(TaskState.WORKING, message=_agent_message(task, text))
    progress = {"progress": done, **({"total": total} if total is not None else {})}
    return a2a_events.status_event(
        task_id=task.id,
        context_id=task.context_id,
        status=status,
        metadata={PROGRESS_METADATA: progress},
    )


def _leaves(error: BaseException) -> list[BaseException]:
    if isinstance(error, BaseExceptionGroup):
        return [leaf for inner in error.exceptions for leaf in _leaves(inner)]
    return [error]


def _seconds(value: str | None) -> float | None:
    """A Retry-After header's seconds (None when absent or a date)."""
    try:
        return max(0.0, float(value)) if value else None
    except ValueError:
        return None
