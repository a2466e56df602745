"""One A2A call at the HTTP edge, whatever the binding: parsed (``parsing``), admitted in one
hop to the database thread (``admission``), executed on its target, and its outcome rendered
in the caller's binding and version (``replies``).

``answer`` serves every A2A protocol call for the Channels consumer (``tasks_app.consumers``);
the task API's DRF views render through the same functions.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from functools import partial
from typing import Any

from relay_project import database, ratelimit, tracing
from relay_project.redis_clients import UNREACHABLE, UNREACHABLE_MESSAGE
from tasks_app import gateway
from tasks_app.api import traces
from tasks_app.api.admission import (
    HoldingSlot,
    Parsed,
    Refused,
    admission,
    context_for,
    echoed,
)
from tasks_app.api.parsing import STREAMING, Call, HttpCall, parse_http_call
from tasks_app.api.replies import (
    Reply,
    Stream,
    answered_in_stream,
    extension_headers,
    failure_reply,
    result_reply,
)
from tasks_app.protocol.errors import (
    A2AError,
    InternalError,
    Unavailable,
)
from tasks_app.protocol.versions import (
    Operation,
)

logger = logging.getLogger(__name__)

Parse = Callable[[HttpCall], Parsed]


async def _refused(error: A2AError):
    """A stream that ends at once with ``error``."""
    raise error
    yield  # an async generator, so the error comes when the stream is read


async def answer(request: HttpCall, *, parse: Parse = parse_http_call) -> Reply | Stream:
    """Answers one A2A call: a Reply, or a Stream to send as SSE (a streaming call refused
    before its first event gets a Reply). Never raises: every failure is rendered in the
    call's binding, with its id and in its version as far as they are known. A caller without
    a valid key gets 401 whatever else is wrong with its call. ``parse`` reads the call (the
    AG-UI endpoints read a run and make it an A2A stream call)."""
    if not tracing.enabled():
        return await _answer(request, None, parse)
    with traces.CallTrace(request.headers, f"{request.kind}:{request.target_id}") as trace:
        return await _answer(request, trace, parse)


async def _answer(
    request: HttpCall, trace: traces.CallTrace | None, parse: Parse
) -> Reply | Stream:
    call: Call | None = None
    try:
        try:
            admitted = await admission(request.authorization, partial(parse, request))
        except Refused as refused:
            call = refused.call
            if trace is not None:
                trace.operation = refused.operation
            raise refused.error from None
        call = admitted.call
        if trace is not None:
            call = trace.admitted(call)
        echo = echoed(call, admitted.target)
        if call.operation in STREAMING:
            try:
                events = await open_stream(
                    admitted.target, call, admitted.caller, opened=admitted.opened
                )
            except BaseException as error:
                ratelimit.stream_slot_give_back(admitted.caller)
                if isinstance(error, A2AError) and answered_in_stream(call, error):
                    if trace is not None:
                        trace.failed(error)
                    return Stream(call, extension_headers(call, echo), _refused(error))
                raise
            if trace is not None:
                events = traces.streamed(events, call)
            return Stream(call, extension_headers(call, echo), HoldingSlot(events, admitted.caller))
        base_url = request.base_url() if call.operation is Operation.EXTENDED_CARD else ""
        result = await execute(
            admitted.target, call, admitted.caller, opened=admitted.opened, base_url=base_url
        )
        return result_reply(call, result, echo_extensions=echo)
    except A2AError as error:
        return _failed(request, trace, error, call)
    except UNAVAILABLE as error:
        refused = unavailable(error, f"an A2A call to {request.kind} {request.target_id!r}")
        return _failed(request, trace, refused, call)
    except Exception:
        logger.exception("A2A call failed")
        error = InternalError("the relay failed to handle this call")
        return _failed(request, trace, error, call)


def _failed(
    request: HttpCall, trace: traces.CallTrace | None, error: A2AError, call: Call | None
) -> Reply:
    """The reply to a call that failed with ``error``, marked in its trace."""
    if trace is not None:
        trace.failed(error)
    return failure_reply(request.binding, error, call)


UNAVAILABLE = (*UNREACHABLE, *database.UNAVAILABLE)
"""Errors that mean a service of the relay (Redis, the database) cannot be reached now."""


def unavailable(error: Exception, what: str) -> Unavailable:
    """The retryable error answering a call that an unreachable Redis or database stopped
    (``what`` names the call), logged as one WARNING line. Admission writes nothing before
    its reads succeed, so a call refused so stored nothing."""
    message = (
        UNREACHABLE_MESSAGE if isinstance(error, UNREACHABLE) else database.UNAVAILABLE_MESSAGE
    )
    logger.warning("refused %s: %s (%s)", what, message, error)
    return Unavailable(message)


async def execute(
    target: gateway.Target,
    call: Call,
    caller,
    *,
    opened: gateway.Opened | None = None,
    base_url: str = "",
) -> Any:
    """Runs a non-streaming call and returns its canonical result. ``opened``: the task a
    SendMessage opened in ``admit``; ``base_url``: the target's public URL, for a card."""
    ctx = context_for(call, caller, base_url=base_url)
    params = call.params
    match call.operation:
        case Operation.SEND:
            return await gateway.send_message(target, ctx, params, opened=opened)
        case Operation.GET_TASK:
            return await gateway.get_task(
                target, ctx, params["id"], history_length=params.get("historyLength")
            )
        case Operation.LIST_TASKS:
            return await gateway.list_tasks(target, ctx, params)
        case Operation.CANCEL:
            return await gateway.cancel_task(target, ctx, params["id"])
        case Operation.PUSH_CREATE:
            return await gateway.push_config_create(target, ctx, params)
        case Operation.PUSH_GET:
            return await gateway.push_config_get(target, ctx, params)
        case Operation.PUSH_LIST:
            return await gateway.push_config_list(target, ctx, params)
        case Operation.PUSH_DELETE:
            return await gateway.push_config_delete(target, ctx, params)
        case Operation.EXTENDED_CARD:
            return await gateway.extended_card(target, ctx)
    raise InternalError(f"{call.operation} is not a unary operation")


async def open_stream(
    target: gateway.Target, call: Call, caller, *, opened: gateway.Opened | None = None
):
    """Starts a streaming call; errors before the first event are raised here."""
    ctx = context_for(call, caller)
    if call.operation is Operation.STREAM:
        return await gateway.stream_message(target, ctx, call.params, opened=opened)
    return await gateway.subscribe(target, ctx, call.params["id"])
