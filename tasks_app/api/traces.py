"""The SERVER spans of an A2A call at the relay (HTTP or gRPC), made only when tracing is on
(``relay_project.tracing``).

A message send (``SendMessage``, ``SendStreamingMessage``) is traced by the spans of its work
(``invoke_workflow``, ``invoke_agent``, and ``a2a.stream`` for a streamed answer), children of
the caller's span (its ``traceparent``): it has no ``a2a.call`` span of its own, as each span
costs the relay CPU on every call (docs/production/observability.md). Every other call has an
``a2a.call <method>`` span from its arrival to its answer, continuing the caller's trace. A
call refused before it was admitted, or a send that failed, gets its ``a2a.call`` span after
the fact: from the call's arrival, failed, ended at once.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry.trace import Span, SpanKind

from relay_project import tracing
from tasks_app.protocol.versions import Operation

TRACED_BY_WORK = frozenset({Operation.SEND, Operation.STREAM})


def traced_by_its_work(operation: Operation | None) -> bool:
    """Whether an admitted call of ``operation`` goes without an ``a2a.call`` span: a message
    send, which the spans of its work trace."""
    return operation in TRACED_BY_WORK


class CallTrace:
    """The trace of one incoming call while it is answered (a context manager). The caller's
    trace context is the current one throughout, so what the call starts (the database
    thread, the job driving its task, the push deliveries of its events) continues the
    caller's trace; once the call is admitted, its ``a2a.call`` span, when it has one."""

    def __init__(self, headers, target: str, operation: Operation | None = None) -> None:
        self.arrived = time.time_ns()
        self.caller = tracing.incoming(headers)
        """The trace context the caller sent (empty when it sent none)."""
        self.target = target
        self.operation = operation
        """The call's operation, once known."""
        self.span: Span | None = None
        self._tokens: list[Any] = []

    def __enter__(self) -> CallTrace:
        self._tokens.append(otel_context.attach(self.caller))
        return self

    def __exit__(self, *exc_info) -> None:
        while self._tokens:
            otel_context.detach(self._tokens.pop())
        if self.span is not None:
            self.span.end()

    def admitted(self, call: Any) -> Any:
        """The admitted ``call`` with the trace context its spans go under (``call.trace``):
        the caller's for a send; for any other call, that of its ``a2a.call`` span, made now
        from the call's arrival and current until the call is answered."""
        self.operation = call.operation
        if traced_by_its_work(call.operation):
            return replace(call, trace=self.caller)
        self.span = self._call_span()
        within = tracing.within(self.span)
        self._tokens.append(otel_context.attach(within))
        return replace(call, trace=within)

    def failed(self, error: BaseException) -> None:
        """Marks the call failed with ``error``, the error it is answered with: its
        ``a2a.call`` span, or when it has none (a send), an ``a2a.call`` span made now from the
        call's arrival and ended at once. Failures are few: each gets a span of its own, even
        when an ``invoke_agent`` span under it recorded the agent's side."""
        if self.span is not None:
            tracing.failed(self.span, error)
        else:
            span = self._call_span()
            tracing.failed(span, error)
            span.end()

    def _call_span(self) -> Span:
        attributes = {tracing.A2A_TARGET: self.target}
        name = "a2a.call"
        if self.operation is not None:
            attributes[tracing.A2A_METHOD] = self.operation.value
            name = f"a2a.call {self.operation.value}"
        return tracing.start(
            name,
            kind=SpanKind.SERVER,
            parent=self.caller,
            attributes=attributes,
            start_time=self.arrived,
        )


async def streamed(events: AsyncIterator[Any], call: Any) -> AsyncIterator[Any]:
    """``events`` in an ``a2a.stream`` span under the admitted call's trace context
    (``call.trace``: the caller's span for a send, the call's ``a2a.call`` span otherwise)."""
    stream = tracing.start(
        "a2a.stream",
        kind=SpanKind.SERVER,
        parent=call.trace,
        attributes={tracing.A2A_METHOD: call.operation.value},
    )
    with tracing.ending(stream):
        try:
            async for event in events:
                tracing.agent_answered(stream, event)
                yield event
        finally:
            aclose = getattr(events, "aclose", None)
            if aclose is not None:
                await aclose()
