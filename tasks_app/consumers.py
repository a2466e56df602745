"""SSE for A2A streaming calls, as a Channels consumer served by daphne.

The stream itself comes from the gateway (events through the channel layer); this consumer
authenticates, parses, sends errors that happen before the first event as ordinary responses,
then writes one ``data:`` frame per event and keep-alive comments while idle. The stream runs
in a task of its own so a client disconnect is noticed at once: the consumer stops writing, and
the upstream work goes on.
"""

from __future__ import annotations

import asyncio
import logging
from urllib.parse import parse_qs

from asgiref.sync import sync_to_async
from channels.generic.http import AsyncHttpConsumer
from rest_framework import exceptions

from registry.auth import api_key_from_header
from tasks_app import gateway, streams
from tasks_app.api import calls
from tasks_app.api.calls import TargetNotFound
from tasks_app.protocol.errors import A2AError, InternalError, Unauthenticated

logger = logging.getLogger(__name__)

SSE_HEADERS = [
    (b"content-type", b"text/event-stream"),
    (b"cache-control", b"no-cache"),
    (b"x-accel-buffering", b"no"),
]


class A2AStreamConsumer(AsyncHttpConsumer):
    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._stream: asyncio.Task | None = None
        self._call: calls.Call | None = None

    async def http_request(self, message):
        self.body.append(message.get("body", b""))
        if not message.get("more_body"):
            self._stream = asyncio.get_running_loop().create_task(
                self.handle(b"".join(self.body)))

    async def http_disconnect(self, message):
        if self._stream is not None and not self._stream.done():
            self._stream.cancel()
        await super().http_disconnect(message)

    def _headers(self) -> dict[str, str]:
        return {key.decode("latin-1"): value.decode("latin-1")
                for key, value in self.scope["headers"]}

    async def handle(self, body: bytes) -> None:
        route = self.scope["url_route"]["kwargs"]
        binding = route["binding"]
        self._call = None
        try:
            call, target, events = await self._open(route, body)
        except A2AError as error:
            # Errors after parsing answer with the call's id and in its version.
            await self._reply(calls.failure_reply(binding, error, self._call))
            return
        except Exception:
            logger.exception("opening a stream failed")
            await self._reply(calls.failure_reply(binding, InternalError("the relay failed"),
                                                  self._call))
            return
        echo = calls.extension_headers(call, calls.echoed(call, target))
        await self.send_headers(status=200, headers=SSE_HEADERS + [
            (name.encode(), value.encode()) for name, value in echo])
        await self._pump(call, events)

    async def _open(self, route, body):
        headers = self._headers()
        caller = await sync_to_async(_authenticate)(headers.get("authorization"))
        if route["kind"] == "task-api":
            return await self._open_task_api(headers, body, caller)
        if route["binding"] == calls.JSONRPC:
            call = calls.parse_jsonrpc_call(headers, body)
        else:
            query = parse_qs(self.scope.get("query_string", b"").decode("latin-1"))
            call = calls.parse_rest_call(self.scope["method"], route["rest"], query, headers, body)
        self._call = call
        target = await sync_to_async(gateway.resolve_target)(route["kind"], route["target_id"])
        if target is None:
            raise TargetNotFound(f"no {route['kind']} {route['target_id']!r} at this relay")
        return call, target, await calls.open_stream(target, call, caller)

    async def _open_task_api(self, headers, body, caller):
        """``POST /a2a/tasks/sendSubscribe``: the target is named in the body."""
        from tasks_app.api import task_api
        from tasks_app.protocol.versions import Operation

        kind, target_id, params = task_api.target_and_request(task_api.parse_body(body),
                                                              Operation.STREAM)
        call = task_api.rest_call(Operation.STREAM, params, headers)
        target = await sync_to_async(gateway.resolve_target)(kind, target_id)
        if target is None:
            raise TargetNotFound(f"no {kind} {target_id!r} at this relay")
        return call, target, await calls.open_stream(target, call, caller)

    async def _reply(self, reply: calls.Reply) -> None:
        await self.send_response(reply.status, reply.encoded(), headers=[
            (b"content-type", reply.content_type.encode()),
            *[(name.encode(), value.encode()) for name, value in reply.headers]])

    async def _pump(self, call: calls.Call, events) -> None:
        try:
            async for item in events:
                if item is streams.KEEPALIVE:
                    await self.send_body(b": keep-alive\n\n", more_body=True)
                else:
                    await self.send_body(calls.stream_frame(call, item), more_body=True)
        except A2AError as error:
            await self.send_body(calls.stream_error_frame(call, error), more_body=True)
        except asyncio.CancelledError:
            raise
        except Exception:
            logger.exception("stream failed")
            await self.send_body(calls.stream_error_frame(call, InternalError("stream failed")),
                                 more_body=True)
        finally:
            await events.aclose()
        await self.send_body(b"", more_body=False)


def _authenticate(header: str | None):
    try:
        key = api_key_from_header(header)
    except exceptions.AuthenticationFailed as error:
        raise Unauthenticated(str(error.detail)) from error
    if key is None:
        raise Unauthenticated("an API key is required: send Authorization: Bearer <key>")
    return key
