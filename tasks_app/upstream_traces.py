"""The ``invoke_agent`` CLIENT span of one call to an agent (``tasks_app.upstream``), made only
when tracing is on (``relay_project.tracing``): it names the agent, the A2A method and binding,
and what the agent's answer reveals (task id, context id as the conversation, final state), or
the error type; the call carries the span's ``traceparent`` in its HTTP headers or gRPC
metadata."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any

from opentelemetry.context import Context
from opentelemetry.trace import Span, SpanKind

from relay_project import tracing


def agent_span(endpoint: Any, operation: Any, params: Mapping[str, Any], parent) -> Span:
    """The span of a call to ``endpoint``'s agent, under ``parent``."""
    name = endpoint.name or endpoint.agent_id
    attributes = {
        tracing.OPERATION: "invoke_agent",
        tracing.PROVIDER: "a2a",
        tracing.AGENT_ID: str(endpoint.agent_id),
        tracing.AGENT_NAME: name,
        tracing.A2A_METHOD: getattr(operation, "value", str(operation)),
        tracing.A2A_BINDING: endpoint.binding,
    }
    message = params.get("message") if isinstance(params, Mapping) else None
    if isinstance(message, Mapping):
        if message.get("contextId"):
            attributes[tracing.CONVERSATION] = str(message["contextId"])
        if message.get("taskId"):
            attributes[tracing.A2A_TASK_ID] = str(message["taskId"])
    elif isinstance(params, Mapping) and params.get("id"):
        attributes[tracing.A2A_TASK_ID] = str(params["id"])
    return tracing.start(
        f"invoke_agent {name}", kind=SpanKind.CLIENT, parent=parent, attributes=attributes
    )


def _options_with_traceparent(options: dict[str, Any], span: Span) -> dict[str, Any]:
    headers = tracing.outgoing(options.get("extra_headers"), tracing.within(span))
    return dict(options, extra_headers=headers)


async def traced_call(
    call: Callable[..., Awaitable[Any]],
    endpoint: Any,
    operation: Any,
    params: Mapping[str, Any],
    parent: Context | None,
    options: dict[str, Any],
) -> Any:
    with tracing.ending(agent_span(endpoint, operation, params, parent)) as span:
        result = await call(endpoint, operation, params, **_options_with_traceparent(options, span))
        tracing.agent_answered(span, result)
        return result


async def traced_stream(
    stream: Callable[..., AsyncIterator[dict[str, Any]]],
    endpoint: Any,
    operation: Any,
    params: Mapping[str, Any],
    parent: Context | None,
    options: dict[str, Any],
) -> AsyncIterator[dict[str, Any]]:
    with tracing.ending(agent_span(endpoint, operation, params, parent)) as span:
        events = stream(endpoint, operation, params, **_options_with_traceparent(options, span))
        try:
            async for event in events:
                tracing.agent_answered(span, event)
                yield event
        finally:
            await events.aclose()
