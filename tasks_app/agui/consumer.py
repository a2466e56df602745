"""The AG-UI endpoints, ``POST /agui/{agents|teams|workflows}/{id}``: an AG-UI run
(``RunAgentInput``) in, an SSE stream of AG-UI events out.

The run is an A2A ``SendStreamingMessage`` to the target, answered through the same path as
every A2A call (``calls.answer``: the caller's key or bearer token, the key's scope, the access
rules, the rate limits, the stream slots, the audit, the metrics and the traces), and streamed
by the A2A consumer's own loop (``A2AConsumer._pump``) with AG-UI frames instead of A2A ones.
A call refused before its stream opens gets the A2A HTTP+JSON error (401, 403, 404, 400 naming
the fields of the input that are wrong), as the A2A endpoints answer it.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from ag_ui.core import BaseEvent
from ag_ui.encoder import EventEncoder

from relay_project.routing import security_headers
from tasks_app.agui import inputs
from tasks_app.agui.events import RunEvents
from tasks_app.api import calls, replies
from tasks_app.api.admission import Parsed
from tasks_app.api.parsing import HttpCall, current_limits, parse_http_call
from tasks_app.consumers import SSE_HEADERS, A2AConsumer
from tasks_app.protocol.errors import A2AError, MethodNotFound
from tasks_app.protocol.limits import body_too_large

A2A_STREAM = "message:stream"
"""The A2A HTTP+JSON path a run is sent as (SendStreamingMessage)."""


class RunReader:
    """Parses an AG-UI call for ``calls.answer``, keeping the run it read (its ids are
    echoed by the events)."""

    def __init__(self) -> None:
        self.run: inputs.Run | None = None

    def __call__(self, request: HttpCall) -> Parsed:
        if request.oversized:
            raise body_too_large(current_limits())
        if request.http_method != "POST":
            raise MethodNotFound(f"an AG-UI run is a POST, not a {request.http_method}")
        self.run = inputs.parse_run(request.body)
        headers = [
            (name, value)
            for name, value in request.headers
            if name.lower() not in (b"a2a-version", b"content-type", b"content-length")
        ]
        call = replace(
            request,
            rest=A2A_STREAM,
            body=inputs.dumps(self.run.request),
            headers=[*headers, (b"a2a-version", b"1.0"), (b"content-type", b"application/json")],
        )
        return parse_http_call(call)


class AgUiFrames:
    """The frames of an AG-UI run: each A2A event as the AG-UI events it makes."""

    def __init__(self, run: RunEvents) -> None:
        self.run = run
        self.encoder = EventEncoder()

    def encoded(self, events: list[BaseEvent]) -> bytes:
        return "".join(self.encoder.encode(event) for event in events).encode()

    def event(self, item: Any) -> bytes:
        return self.encoded(self.run.translate(item))

    def end(self) -> bytes:
        return self.encoded(self.run.finished())

    def error(self, error: A2AError) -> bytes:
        return self.encoded(self.run.failed(error.message, error.reason))


class AgUiConsumer(A2AConsumer):
    """One AG-UI run (``relay_project.routing`` sends ``/agui/...`` here)."""

    async def handle(self, body: bytes) -> None:
        route = self.scope["url_route"]["kwargs"]
        reader = RunReader()
        outcome = await calls.answer(
            HttpCall(
                kind=route["kind"],
                target_id=route["target_id"],
                rest=A2A_STREAM,
                http_method=self.scope["method"],
                query={},
                headers=self.scope["headers"],
                body=body,
                oversized=self._oversized,
                scope=self.scope,
            ),
            parse=reader,
        )
        if isinstance(outcome, replies.Reply):
            await self._reply(outcome)
            return
        frames = AgUiFrames(RunEvents(reader.run.thread_id, reader.run.run_id))
        await self.send_headers(status=200, headers=[*SSE_HEADERS, *security_headers()])
        await self.send_body(frames.encoded(frames.run.started()), more_body=True)
        await self._pump(outcome.events, frames)
