"""OpenTelemetry traces of A2A calls, off unless the standard ``OTEL_*`` variables ask for OTLP.

``configure`` (at start-up) sets up a tracer provider exporting over OTLP/HTTP when
``OTEL_TRACES_EXPORTER`` names ``otlp`` or an OTLP endpoint is set
(``OTEL_EXPORTER_OTLP_ENDPOINT``, ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``); otherwise nothing is
set up and ``enabled()`` is False: the call sites check it and make no span at all.

Spans follow the OpenTelemetry GenAI semantic conventions (``gen_ai.*``) with A2A attributes of
our own (``a2a.*``); docs/production/observability.md lists them. Trace context travels as W3C
``traceparent`` (the global propagator, ``OTEL_PROPAGATORS``).
"""

from __future__ import annotations

import contextlib
import contextvars
import os
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import propagate, trace
from opentelemetry.context import Context
from opentelemetry.trace import Span, SpanKind, Status, StatusCode

OPERATION = "gen_ai.operation.name"
PROVIDER = "gen_ai.provider.name"
AGENT_ID = "gen_ai.agent.id"
AGENT_NAME = "gen_ai.agent.name"
CONVERSATION = "gen_ai.conversation.id"
ERROR_TYPE = "error.type"
A2A_METHOD = "a2a.method"
A2A_BINDING = "a2a.binding"
A2A_TASK_ID = "a2a.task.id"
A2A_TASK_STATE = "a2a.task.state"
A2A_TARGET = "a2a.target"
WORKFLOW_NAME = "gen_ai.workflow.name"

_tracer: trace.Tracer | None = None
_provider: Any = None


def wanted(environ: Mapping[str, str] = os.environ) -> bool:
    """Whether the ``OTEL_*`` variables ask for traces over OTLP."""
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    exporters = environ.get("OTEL_TRACES_EXPORTER", "").strip().lower()
    if exporters:
        return "otlp" in {name.strip() for name in exporters.split(",")}
    return bool(
        environ.get("OTEL_EXPORTER_OTLP_ENDPOINT")
        or environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
    )


def configure(environ: Mapping[str, str] = os.environ) -> bool:
    """Sets up the tracer provider and its OTLP exporter when ``wanted``; returns whether
    tracing is on. Once per process: a second call changes nothing."""
    global _tracer, _provider
    if _tracer is not None or not wanted(environ):
        return _tracer is not None
    # Imported here: a relay without tracing never loads the SDK or the exporter.
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import SERVICE_NAME, Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    service = environ.get("OTEL_SERVICE_NAME") or "brass-relay"
    provider = TracerProvider(resource=Resource.create({SERVICE_NAME: service}))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    trace.set_tracer_provider(provider)
    _provider = provider
    _tracer = provider.get_tracer("brass_relay")
    return True


def shutdown() -> None:
    """Exports the spans still buffered, stops the exporter and turns tracing off in this
    process."""
    global _tracer, _provider
    if _provider is not None:
        _provider.shutdown()
    _tracer = _provider = None


def flush() -> None:
    """Exports the spans still buffered (tests, the end of a Celery job)."""
    if _provider is not None:
        _provider.force_flush()


def enabled() -> bool:
    """The one check on the hot path: is tracing on in this process."""
    return _tracer is not None


def _carried_fields() -> dict[Any, str]:
    """The header names the global propagator reads (``traceparent``, ``tracestate``,
    ``baggage`` by default), in bytes and in text, each to its text."""
    fields = propagate.get_global_textmap().fields
    return {**{name: name for name in fields}, **{name.encode(): name for name in fields}}


_CARRIED = _carried_fields()


def incoming(pairs: Iterable[tuple[Any, Any]]) -> Context:
    """The trace context a caller sent (``traceparent``) in header or metadata pairs, bytes or
    text; an empty context when it sent none. Names are lowercase, as ASGI and gRPC give them;
    only the propagator's own headers are decoded."""
    carrier = {}
    for name, value in pairs:
        field = _CARRIED.get(name)
        if field is not None:
            carrier[field] = value.decode("latin-1") if isinstance(value, bytes) else value
    return propagate.extract(carrier) if carrier else otel_context.Context()


def outgoing(headers: Mapping[str, str] | None, context: Context | None) -> dict[str, str]:
    """``headers`` with the trace context of ``context`` (``traceparent``) added."""
    carrier = dict(headers or {})
    propagate.inject(carrier, context=context)
    return carrier


def traceparent(context: Context | None) -> str:
    """The ``traceparent`` of ``context`` ("" when tracing is off or there is no span)."""
    if _tracer is None:
        return ""
    return outgoing(None, context).get("traceparent", "")


def start(
    name: str,
    *,
    kind: SpanKind,
    parent: Context | None,
    attributes: Mapping[str, Any],
    start_time: int | None = None,
) -> Span:
    """A span under ``parent`` (the current context when None); not made current, so it may
    live across the yields of an async generator. ``start_time``: when it began, in
    nanoseconds since the epoch (``time.time_ns()``; now when None). Only call it when
    ``enabled()``."""
    assert _tracer is not None
    return _tracer.start_span(
        name, context=parent, kind=kind, attributes=attributes, start_time=start_time
    )


def within(span: Span) -> Context:
    """The context whose current span is ``span``: the parent of its children."""
    return trace.set_span_in_context(span)


def agent_answered(span: Span, answer: Any) -> None:
    """Sets the task id, context (conversation) id and state an agent's answer reveals."""
    if not isinstance(answer, Mapping):
        return
    found = _answered_task(answer)
    revealed = {}
    if found.get("taskId") or found.get("id"):
        revealed[A2A_TASK_ID] = str(found.get("taskId") or found.get("id"))
    if found.get("contextId"):
        revealed[CONVERSATION] = str(found["contextId"])
    status = found.get("status")
    if isinstance(status, Mapping) and status.get("state"):
        revealed[A2A_TASK_STATE] = str(status["state"])
    if revealed:
        span.set_attributes(revealed)


def _answered_task(answer: Mapping[str, Any]) -> Mapping[str, Any]:
    for key in ("task", "statusUpdate", "artifactUpdate", "message"):
        value = answer.get(key)
        if isinstance(value, Mapping):
            return value
    return answer


def failed(span: Span, error: BaseException) -> None:
    """Marks ``span`` failed with ``error``. ``error.type``: an A2A error's reason
    (``TASK_NOT_FOUND``), an unreachable agent's category (``timeout``), else the class name."""
    kind = getattr(error, "reason", None) or getattr(error, "category", None)
    span.set_attribute(ERROR_TYPE, kind if isinstance(kind, str) else type(error).__name__)
    span.set_status(Status(StatusCode.ERROR, str(error)[:200]))


@contextlib.contextmanager
def ending(span: Span) -> Iterator[Span]:
    """``span`` ended when the block ends, and marked failed (``failed``) when the block raises:
    the one way a span of the relay's ends. A stream whose reader stopped reading
    (GeneratorExit) is no failure."""
    try:
        yield span
    except GeneratorExit:
        raise
    except BaseException as error:
        failed(span, error)
        raise
    finally:
        span.end()


def workflow_span(*, name: str, target_id: str, task: Any, parent: Context | None) -> Span:
    """The ``invoke_workflow`` INTERNAL span of a team's (or workflow's) task: the calls to its
    members are its children."""
    assert _tracer is not None
    return _tracer.start_span(
        f"invoke_workflow {name}",
        context=parent,
        kind=SpanKind.INTERNAL,
        attributes={
            OPERATION: "invoke_workflow",
            WORKFLOW_NAME: name,
            AGENT_ID: str(target_id),
            A2A_TASK_ID: str(task.id),
            CONVERSATION: str(task.context_id),
        },
    )


async def in_workflow(steps, span: Span):
    """The team's ``steps`` with ``span`` ended (and its last state set) when they end."""
    state = ""
    with ending(span):
        try:
            async for step in steps:
                status = (step.event.get("statusUpdate") or step.event.get("task") or {}).get(
                    "status"
                )
                if isinstance(status, Mapping) and status.get("state"):
                    state = str(status["state"])
                yield step
        finally:
            await steps.aclose()
            if state:
                span.set_attribute(A2A_TASK_STATE, state)


def fresh_context() -> contextvars.Context:
    """An empty ``contextvars`` context for a job apart from its request, carrying only the
    request's trace context (when tracing is on), so what the job records stays in its trace."""
    fresh = contextvars.Context()
    if _tracer is not None:
        fresh.run(otel_context.attach, otel_context.get_current())
    return fresh
