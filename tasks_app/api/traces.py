"""The SERVER spans of an A2A call at the relay (HTTP or gRPC), made only when tracing is on
(``relay_project.tracing``): ``a2a.call`` from the request to the answer (admission and, for a
unary call, its execution), continuing the caller's ``traceparent``, and ``a2a.stream`` for a
streaming answer, from its first event to its last."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from opentelemetry.trace import Span, SpanKind

from relay_project import tracing


def call_span(headers, target: str) -> Span:
    """The span of one incoming call to ``target``, under the trace its ``traceparent`` header
    (or gRPC metadata entry) names."""
    return tracing.start(
        "a2a.call",
        kind=SpanKind.SERVER,
        parent=tracing.incoming(headers),
        attributes={tracing.A2A_TARGET: target},
    )


def admitted(span: Span, call: Any, opened: Any) -> None:
    """Names the admitted call's method, and the task it opened or continues. The task's
    context id (``gen_ai.conversation.id``) is left to the GenAI spans under this one
    (``invoke_workflow``, ``invoke_agent``), which carry it: every attribute costs each call
    its setting and its encoding for export."""
    method = call.operation.value
    span.update_name(f"a2a.call {method}")
    attributes = {tracing.A2A_METHOD: method}
    task = getattr(opened, "task", None)
    if task is not None:
        attributes[tracing.A2A_TASK_ID] = str(task.id)
    span.set_attributes(attributes)


async def streamed(events: AsyncIterator[Any], span: Span) -> AsyncIterator[Any]:
    """``events`` in an ``a2a.stream`` span, a child of the call's span ``span``."""
    stream = tracing.start(
        "a2a.stream",
        kind=SpanKind.SERVER,
        parent=tracing.within(span),
        attributes={tracing.A2A_METHOD: span.attributes.get(tracing.A2A_METHOD, "")},
    )
    try:
        async for event in events:
            tracing.agent_answered(stream, event)
            yield event
    except GeneratorExit:
        raise
    except BaseException as error:
        tracing.failed(stream, error)
        raise
    finally:
        aclose = getattr(events, "aclose", None)
        if aclose is not None:
            await aclose()
        stream.end()
