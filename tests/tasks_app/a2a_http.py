"""In-process A2A calls to the relay for the gateway tests, in every binding and version.

Requests go through ``httpx.ASGITransport`` into ``relay_project.asgi.application`` (the same
router daphne serves), so a call costs milliseconds. ASGITransport buffers whole responses:
streams must end (a task that ends, or an error before the first event).

- ``BINDINGS``: JSON-RPC and HTTP+JSON, 1.0 and 0.3, each knowing its method names, paths,
  message shape and headers; ``binding.request(op, ...)`` builds the HTTP request.
- ``expect_error(binding, response, expected)`` checks a response is the binding's error
  envelope for ``expected`` and returns the ErrorInfo.
- ``register(url, **card_changes)``: a registered agent whose card (the demo echo card unless
  ``spec`` says otherwise) sends calls to ``url``.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import httpx
from a2a.server.request_handlers.response_helpers import agent_card_to_dict

from routing.demo.agents import ECHO, AgentSpec, build_agent_card
from tests.factories import make_agent

A2A_DOMAIN = "a2a-protocol.org"
ERROR_INFO = "type.googleapis.com/google.rpc.ErrorInfo"
BAD_REQUEST = "type.googleapis.com/google.rpc.BadRequest"
_ids = itertools.count(1)


@dataclass(frozen=True)
class Expected:
    """An error as each binding spells it (PROTOCOL.md section 3, the 1.0.1 mapping)."""

    code: int
    reason: str
    http_status: int
    domain: str = A2A_DOMAIN


PARSE_ERROR = Expected(-32700, "INVALID_REQUEST", 400)
INVALID_REQUEST = Expected(-32600, "INVALID_REQUEST", 400)
METHOD_NOT_FOUND = Expected(-32601, "METHOD_NOT_FOUND", 404)
INVALID_PARAMS = Expected(-32602, "INVALID_PARAMS", 400)
TASK_NOT_FOUND = Expected(-32001, "TASK_NOT_FOUND", 404)
TASK_NOT_CANCELABLE = Expected(-32002, "TASK_NOT_CANCELABLE", 400)
UNSUPPORTED_OPERATION = Expected(-32004, "UNSUPPORTED_OPERATION", 400)
EXTENSION_REQUIRED = Expected(-32008, "EXTENSION_SUPPORT_REQUIRED", 400)
VERSION_NOT_SUPPORTED = Expected(-32009, "VERSION_NOT_SUPPORTED", 400)
UNAUTHENTICATED = Expected(-31401, "UNAUTHENTICATED", 401, domain="brass-relay")

_V03_METHODS = {
    "SendMessage": "message/send",
    "SendStreamingMessage": "message/stream",
    "GetTask": "tasks/get",
    "CancelTask": "tasks/cancel",
    "SubscribeToTask": "tasks/resubscribe",
    "CreateTaskPushNotificationConfig": "tasks/pushNotificationConfig/set",
    "GetTaskPushNotificationConfig": "tasks/pushNotificationConfig/get",
    "ListTaskPushNotificationConfigs": "tasks/pushNotificationConfig/list",
    "DeleteTaskPushNotificationConfig": "tasks/pushNotificationConfig/delete",
    "GetExtendedAgentCard": "agent/getAuthenticatedExtendedCard",
}


@dataclass(frozen=True)
class Request:
    method: str
    path: str  # relative to the agent's base URL
    body: Any = None  # JSON, or bytes sent as they are; None sends no body
    query: dict[str, Any] | None = None
    request_id: Any = None


@dataclass(frozen=True)
class Binding:
    protocol: str  # "JSONRPC" or "HTTP+JSON"
    version: str  # "1.0" or "0.3"

    def __str__(self) -> str:
        return f"{'jsonrpc' if self.jsonrpc else 'rest'}-{self.version}"

    @property
    def jsonrpc(self) -> bool:
        return self.protocol == "JSONRPC"

    @property
    def prefix(self) -> str:
        return "v1/" if self.version == "0.3" and not self.jsonrpc else ""

    def headers(self, secret: str | None = None, **extra: str) -> dict[str, str]:
        headers = {}
        if secret:
            headers["Authorization"] = f"Bearer {secret}"
        if self.version == "1.0":
            headers["A2A-Version"] = "1.0"
        headers.update(extra)
        return headers

    def message(self, text: str = "hello", **fields: Any) -> dict[str, Any]:
        """A user message in this binding's shape (0.3 REST is 0.3 proto JSON)."""
        message_id = f"m-{next(_ids)}"
        if self.version == "1.0":
            message = {"messageId": message_id, "role": "ROLE_USER", "parts": [{"text": text}]}
        elif self.jsonrpc:
            message = {
                "kind": "message",
                "messageId": message_id,
                "role": "user",
                "parts": [{"kind": "text", "text": text}],
            }
        else:
            message = {"messageId": message_id, "role": "ROLE_USER", "content": [{"text": text}]}
        return message | fields

    def method(self, operation: str) -> str:
        return operation if self.version == "1.0" else _V03_METHODS[operation]

    def rpc(self, method: str, params: Any = None) -> Request:
        request_id = next(_ids)
        body = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            body["params"] = params
        return Request("POST", "", body, request_id=request_id)

    def send(
        self, message: dict[str, Any] | None = None, *, stream: bool = False, **params: Any
    ) -> Request:
        params = {"message": message or self.message(), **params}
        if self.jsonrpc:
            return self.rpc(
                self.method("SendStreamingMessage" if stream else "SendMessage"), params
            )
        return Request("POST", f"{self.prefix}message:{'stream' if stream else 'send'}", params)

    def get_task(self, task_id: str) -> Request:
        if self.jsonrpc:
            return self.rpc(self.method("GetTask"), {"id": task_id})
        return Request("GET", f"{self.prefix}tasks/{task_id}")

    def cancel(self, task_id: str) -> Request:
        if self.jsonrpc:
            return self.rpc(self.method("CancelTask"), {"id": task_id})
        return Request("POST", f"{self.prefix}tasks/{task_id}:cancel", {})

    def subscribe(self, task_id: str) -> Request:
        if self.jsonrpc:
            return self.rpc(self.method("SubscribeToTask"), {"id": task_id})
        return Request("POST", f"{self.prefix}tasks/{task_id}:subscribe")

    def list_tasks(self, **query: Any) -> Request:
        if self.jsonrpc:
            return self.rpc("ListTasks", query)  # 1.0 only: 0.3 JSON-RPC had no ListTasks
        return Request("GET", f"{self.prefix}tasks", query=query)

    def extended_card(self) -> Request:
        if self.jsonrpc:
            return self.rpc(self.method("GetExtendedAgentCard"))
        return Request("GET", "v1/card" if self.version == "0.3" else "extendedAgentCard")


JSONRPC_1 = Binding("JSONRPC", "1.0")
JSONRPC_03 = Binding("JSONRPC", "0.3")
REST_1 = Binding("HTTP+JSON", "1.0")
REST_03 = Binding("HTTP+JSON", "0.3")
BINDINGS = (JSONRPC_1, JSONRPC_03, REST_1, REST_03)


@asynccontextmanager
async def relay_client() -> AsyncIterator[httpx.AsyncClient]:
    from relay_project.asgi import application

    transport = httpx.ASGITransport(app=application)
    async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as client:
        yield client


async def call(
    client: httpx.AsyncClient, agent_id: str, request: Request, headers: dict[str, str]
) -> httpx.Response:
    url = f"/a2a/agents/{agent_id}/{request.path}"
    content = request.body
    if content is not None and not isinstance(content, bytes):
        content = json.dumps(content).encode()
    if content is not None:
        headers = {"Content-Type": "application/json", **headers}
    return await client.request(
        request.method, url, content=content, params=request.query, headers=headers
    )


def expect_error(
    binding: Binding,
    response: httpx.Response,
    expected: Expected,
    *,
    request_id: Any = ...,
    http_status: int | None = None,
) -> dict[str, Any]:
    """Asserts ``response`` is ``binding``'s envelope for ``expected``; returns the 1.0
    ErrorInfo (or, for 0.3 JSON-RPC, whose ``data`` is free-form, the error object).

    JSON-RPC errors travel with HTTP 200 unless ``http_status`` says otherwise (401 and an
    unknown agent's 404 are HTTP-level)."""
    assert response.status_code != 500, response.text
    body = stream_refusal(response) if in_stream(binding, response) else response.json()
    if binding.jsonrpc:
        assert response.status_code == (http_status or 200), response.text
        if not in_stream(binding, response):
            assert response.headers["content-type"].startswith("application/json")
        assert body["jsonrpc"] == "2.0" and "result" not in body, body
        if request_id is not ...:
            assert body["id"] == request_id, body
        error = body["error"]
        assert error["code"] == expected.code, body
        assert isinstance(error["message"], str) and error["message"], body
        if binding.version == "0.3":
            return error
        details = error["data"]
    else:
        assert response.status_code == (http_status or expected.http_status), response.text
        # Regression: HTTP+JSON errors were sent as application/a2a+json.
        assert response.headers["content-type"].startswith("application/json")
        assert set(body) == {"error"}, body
        error = body["error"]
        assert set(error) == {"code", "status", "message", "details"}, body
        assert error["code"] == response.status_code
        assert isinstance(error["status"], str) and error["status"].isupper(), body
        assert isinstance(error["message"], str) and error["message"], body
        details = error["details"]
    assert isinstance(details, list) and details, body
    info = details[0]
    assert info["@type"] == ERROR_INFO, body
    assert info["domain"] == expected.domain, body
    assert info["reason"] == expected.reason, body
    return info


def in_stream(binding: Binding, response: httpx.Response) -> bool:
    """A 0.3 JSON-RPC stream refused before its first event: the 0.3 SDK servers, and the
    relay (issue 13), answer such an error as the stream's one frame."""
    content_type = response.headers.get("content-type", "")
    return binding.jsonrpc and binding.version == "0.3" and "text/event-stream" in content_type


def stream_refusal(response: httpx.Response) -> dict[str, Any]:
    """The JSON-RPC error response a refused stream holds: its only frame, a plain ``data:``
    line (no ``event:`` line, as the 0.3 SDK server sends it)."""
    frames = [frame for frame in response.text.split("\n\n") if frame.strip()]
    assert len(frames) == 1 and frames[0].startswith("data: "), response.text
    return json.loads(frames[0].removeprefix("data: "))


def field_violations(binding: Binding, response: httpx.Response) -> list[dict[str, str]]:
    """The BadRequest field violations of an invalid-params error, in any binding."""
    body = response.json()
    if binding.jsonrpc and binding.version == "0.3":
        return body["error"]["data"]["fieldViolations"]
    details = body["error"]["data"] if binding.jsonrpc else body["error"]["details"]
    bad_requests = [d for d in details if d.get("@type") == BAD_REQUEST]
    assert len(bad_requests) == 1, details
    return bad_requests[0]["fieldViolations"]


def card_document(url: str, spec: AgentSpec = ECHO, **capabilities: Any) -> dict[str, Any]:
    """The demo card of ``spec`` served at ``url``, with ``capabilities`` changed."""
    document = agent_card_to_dict(build_agent_card(spec, base_url=url))
    document["capabilities"] = {**document.get("capabilities", {}), **capabilities}
    return document


def register(url: str, spec: AgentSpec = ECHO, **capabilities: Any):
    """Registers an agent whose interfaces point at ``url`` (sync: call it in a thread from
    async code). The card is handed over through a mock transport: no card fetch."""
    return make_agent(document=card_document(url, spec, **capabilities))


def key_lookup(secret: str | None):
    """The cache's answer for the API key ``secret`` as admission reads it, the call counted
    (``registry.auth.api_key_lookup``)."""
    from registry import auth

    return auth.api_key_lookup(None if secret is None else f"Bearer {secret}")
