"""The ASGI router in front of Django: it sends A2A *streaming* calls to the Channels SSE
consumer and everything else to Django.

REST streaming calls are known by their path (``message:stream``, ``tasks/{id}:subscribe``).
JSON-RPC calls all POST to the target's base URL, so the method decides: the router reads the
(small, size-capped) body once, looks at ``method``, and replays the body to whichever app
serves the call.
"""

from __future__ import annotations

import json
import re

A2A_BASE = re.compile(
    r"^/a2a/(?:(?P<kind>agents|teams)/(?P<target_id>[-\w]+)|(?P<relay>relay))/(?P<rest>.*)$")
TASK_API_STREAM = "/a2a/tasks/sendSubscribe"
# An optional first segment: the 0.3 "v1/" or a 1.0 tenant.
REST_STREAM = re.compile(r"^([^/]+/)?(message:stream|tasks/[^/]+:subscribe)$")
STREAM_METHODS = {"SendStreamingMessage", "SubscribeToTask", "message/stream",
                  "tasks/resubscribe"}
KINDS = {"agents": "agent", "teams": "team", None: "relay"}
MAX_PEEK_BYTES = 8 * 1024 * 1024


def _replay(body: bytes, receive):
    """A receive callable that hands over the body already read, then waits on the real one
    (which reports the client's disconnect)."""
    sent = False

    async def replayed():
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replayed


async def _read_body(receive) -> bytes | None:
    chunks, size = [], 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return None
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > MAX_PEEK_BYTES:
            # Too large to be a streaming call worth reading twice: Django refuses it.
            chunks.append(chunk)
            return b"".join(chunks)
        chunks.append(chunk)
        if not message.get("more_body"):
            return b"".join(chunks)


def _method_of(body: bytes) -> str | None:
    try:
        payload = json.loads(body)
    except (ValueError, RecursionError):
        return None
    # Anything but a string method is Django's to refuse (-32600), not a crash here.
    method = payload.get("method") if isinstance(payload, dict) else None
    return method if isinstance(method, str) else None


class A2ARouter:
    def __init__(self, django_app, stream_app) -> None:
        self.django_app = django_app
        self.stream_app = stream_app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.django_app(scope, receive, send)
        if scope["path"] == TASK_API_STREAM and scope["method"] == "POST":
            return await self._stream(scope, receive, send,
                                      {"kind": "task-api", "target_id": "", "rest": ""},
                                      "HTTP+JSON")
        match = A2A_BASE.match(scope["path"])
        if match is None:
            return await self.django_app(scope, receive, send)
        kwargs = {"kind": KINDS[match["kind"]], "target_id": match["target_id"] or "default",
                  "rest": match["rest"]}
        if scope["method"] in ("GET", "POST") and REST_STREAM.match(match["rest"]):
            return await self._stream(scope, receive, send, kwargs, "HTTP+JSON")
        if scope["method"] == "POST" and match["rest"] == "":
            body = await _read_body(receive)
            if body is None:
                return None
            if _method_of(body) in STREAM_METHODS:
                return await self._stream(scope, _replay(body, receive), send, kwargs, "JSONRPC")
            return await self.django_app(scope, _replay(body, receive), send)
        return await self.django_app(scope, receive, send)

    async def _stream(self, scope, receive, send, kwargs, binding):
        scope = dict(scope, url_route={"args": (), "kwargs": dict(kwargs, binding=binding)})
        return await self.stream_app(scope, receive, send)
