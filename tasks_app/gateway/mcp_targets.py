"""An MCP server registered as an agent (``Agent.mcp_server``), as a target of the gateway:
a message names a tool and its arguments (a data part ``{"tool": name, "arguments": {...}}``)
or says in text what it wants (the relay's skill search picks the tool, and the text is the
tool's one string argument). The relay calls the tool with the official ``mcp`` client; the
result is the task's artifact (text content as text parts, structured content as a data
part), and a tool error fails the task with the tool's message. With tracing on, the call's
HTTP requests carry the ``traceparent`` of its trace (``ctx.trace``), as an A2A agent's calls
do. The call is one exchange, so a task is not resumed by another process; the gateway
persists it like any other.
"""

from __future__ import annotations

import uuid
from typing import Any

import anyio
from mcp.shared.exceptions import MCPError

from registry.mcp_servers import mcp_session, tool_schemas
from relay_project import tracing
from relay_project.database import database_sync_to_async
from tasks_app.gateway.agent_targets import AgentTarget
from tasks_app.gateway.targets import Step, Target
from tasks_app.lifecycle import TaskState
from tasks_app.protocol import events as a2a_events
from tasks_app.protocol.errors import InvalidParams
from tasks_app.upstream import UpstreamError


class McpTarget(Target):
    """A registered MCP server: each call is one ``tools/call``."""

    def __init__(self, agent, headers: dict[str, str]) -> None:
        super().__init__(
            kind="agent", id=agent.pk, name=agent.name, streaming=True, agent_id=agent.pk
        )
        self.url = agent.card_url
        self.headers = headers
        self.schemas = tool_schemas(agent.extensions.all())
        self.health = agent.health
        self.breaker_row = (agent.breaker_state, agent.breaker_failures, agent.breaker_opened_at)

    async def run(self, task, request, ctx, *, stream):
        message = request.get("message") or {}
        tool, arguments = await self.tool_call(message)
        try:
            result = await self._call(tool, arguments, _traced(self.headers, ctx.trace))
        except MCPError as error:  # the server refused the call: the task fails, saying why
            yield Step(_failed_event(task, f"the tool {tool!r} was refused: {error.message}"))
            return
        except UpstreamError:
            raise
        except Exception as error:  # the SDK's transport errors, in task groups too
            raise UpstreamError(
                "unreachable", f"the MCP server at {self.url} failed: {_said(error)}"
            ) from error
        yield Step(_task_event(task, tool, result))

    async def _call(self, tool: str, arguments: dict[str, Any], headers: dict[str, str]):
        from django.conf import settings

        with anyio.fail_after(settings.RELAY_UPSTREAM_TIMEOUT):
            async with mcp_session(
                self.url, headers, timeout=settings.RELAY_UPSTREAM_TIMEOUT
            ) as session:
                return await session.call_tool(tool, arguments)

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


def target_for_agent(agent) -> Target:
    """The target of a registered agent: an MCP server's (``McpTarget``), else an A2A one."""
    if agent.mcp_server:
        from registry.services import upstream_auth_headers

        return McpTarget(agent, upstream_auth_headers(agent))
    return AgentTarget(agent)


def _traced(headers: dict[str, str], trace) -> dict[str, str]:
    """``headers`` with the ``traceparent`` of ``trace`` when tracing is on."""
    return tracing.outgoing(headers, trace) if tracing.enabled() else headers


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


def _said(error: BaseException) -> str:
    if isinstance(error, BaseExceptionGroup):
        return "; ".join(_said(inner) for inner in error.exceptions)
    return str(error) or type(error).__name__
