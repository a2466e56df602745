"""A2A calls over HTTP, as a Channels consumer served by uvicorn or daphne: JSON-RPC at a
target's base URL, HTTP+JSON under it, unary and streaming alike (``relay_project.routing``
sends every A2A protocol call here; the registry, team and task APIs stay with Django and
DRF).

It reads the request, hands it to ``calls.answer``, and writes what comes back: a response, or
an SSE stream (``data:`` frame per event, keep-alive comments while idle). The call runs in a
task of its own so a client disconnect (the next message Channels dispatches) is noticed at
once: the consumer stops, and a stream's upstream work goes on.

Database work runs through Channels' ``database_sync_to_async`` in asgiref's database thread,
which closes broken and expired connections around each piece of work, as Django does around
each request.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from functools import partial
from typing import Any, Protocol
from urllib.parse import parse_qs

from channels.consumer import get_handler_name
from channels.exceptions import StopConsumer
from channels.generic.http import AsyncHttpConsumer
from django.conf import settings

from relay_project.database import database_sync_to_async
from relay_project.routing import security_headers
from tasks_app import streams
from tasks_app.api import calls, parsing, replies
from tasks_app.protocol.errors import A2AError, InternalError

logger = logging.getLogger(__name__)

SSE_HEADERS = [
    (b"content-type", b"text/event-stream"),
    (b"cache-control", b"no-cache"),
    (b"x-accel-buffering", b"no"),
]


def _refuse(error: A2AError, request: parsing.HttpCall):
    """The parse of a call whose body was refused before it could be read."""
    raise error


class A2AConsumer(AsyncHttpConsumer):
    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._size = 0
        self._oversized = False
        self._running: asyncio.Task | None = None

    async def dispatch(self, message):
        # The one change to Channels' loop: Channels closes old database connections before
        # every message, a hop to the database thread each (two a call). The relay's database
        # work closes them itself, around each piece of work (relay_project.database).
        # Measured with the gateway bench: see docs/benchmarks.md.
        handler = getattr(self, get_handler_name(message), None)
        if handler is None:
            raise ValueError(f"No handler for message type {message['type']}")
        await handler(message)

    async def http_request(self, message):
        chunk = message.get("body", b"")
        self._size += len(chunk)
        limit = settings.RELAY_MAX_BODY_BYTES
        if limit and self._size > limit:
            # Kept no further: the call is refused as too large, before anything parses it.
            self._oversized, self.body = True, []
        elif not self._oversized:
            self.body.append(chunk)
        if not message.get("more_body"):
            self._running = asyncio.get_running_loop().create_task(self.handle(b"".join(self.body)))

    async def http_disconnect(self, message):
        if self._running is not None and not self._running.done():
            self._running.cancel()
        raise StopConsumer()

    async def handle(self, body: bytes) -> None:
        route = self.scope["url_route"]["kwargs"]
        query = parse_qs(
            self.scope.get("query_string", b"").decode("latin-1"), keep_blank_values=True
        )
        kind, refused = route["kind"], None
        make = parsing.TASK_API_BODIES.get(kind)
        if make is not None:
            # Another task API stream (a task template's): its body becomes a sendSubscribe
            # body, and the call is streamed as one. A bad body is refused after the key is
            # checked, as any call's is.
            kind = parsing.TASK_API
            if not self._oversized:
                try:
                    body = await database_sync_to_async(make)(body)
                except A2AError as error:
                    refused = error
        # calls.answer's own parse unless the body was refused above: every other call goes
        # through calls.answer(request) exactly as before.
        answer = (
            calls.answer
            if refused is None
            else partial(calls.answer, parse=partial(_refuse, refused))
        )
        outcome = await answer(
            parsing.HttpCall(
                kind=kind,
                target_id=route["target_id"],
                rest=route["rest"],
                http_method=self.scope["method"],
                query=query,
                headers=self.scope["headers"],
                body=body,
                oversized=self._oversized,
                scope=self.scope,
            )
        )
        if isinstance(outcome, replies.Reply):
            await self._reply(outcome)
            return
        await self.send_headers(
            status=200,
            headers=[
                *SSE_HEADERS,
                *security_headers(),
                *[(name.encode(), value.encode()) for name, value in outcome.headers],
            ],
        )
        await self._pump(outcome.events, A2AFrames(outcome.call))

    async def _reply(self, reply: replies.Reply) -> None:
        body = reply.encoded()
        await self.send_response(
            reply.status,
            body,
            headers=[
                (b"content-type", reply.content_type.encode()),
                (b"content-length", str(len(body)).encode()),
                *security_headers(),
                *[(name.encode(), value.encode()) for name, value in reply.headers],
            ],
        )

    async def _pump(self, events, frames: Frames) -> None:
        """Sends ``events`` as SSE, as ``frames`` writes them (keep-alive comments while idle),
        then the stream's last frame: its end, or the error that stopped it."""
        try:
            async for item in events:
                if item is streams.KEEPALIVE:
                    await self.send_body(b": keep-alive\n\n", more_body=True)
                else:
                    await self.send_body(frames.event(item), more_body=True)
            closing = frames.end()
        except A2AError as error:
            closing = frames.error(error)
        except asyncio.CancelledError:
            raise
        except calls.UNAVAILABLE as error:
            closing = frames.error(calls.unavailable(error, "a stream, after it opened"))
        except Exception:
            logger.exception("stream failed")
            closing = frames.error(InternalError("stream failed"))
        finally:
            await events.aclose()
        await self.send_body(closing, more_body=False)


class Frames(Protocol):
    """How a stream's events are written as SSE: each event, the end, an error that ends it."""

    def event(self, item: Any) -> bytes: ...

    def end(self) -> bytes: ...

    def error(self, error: A2AError) -> bytes: ...


@dataclass(frozen=True)
class A2AFrames:
    """The frames of an A2A stream, in the call's binding and version."""

    call: parsing.Call

    def event(self, item: Any) -> bytes:
        return replies.stream_frame(self.call, item)

    def end(self) -> bytes:
        return b""

    def error(self, error: A2AError) -> bytes:
        return replies.stream_error_frame(self.call, error)
