"""The relay's MCP server: the official SDK's low-level ``Server`` over streamable HTTP,
stateless (2026-07-28 has no sessions; earlier revisions are served without one too), at
``/mcp`` and ``/mcp/{agents,teams,workflows}/{id}`` (``catalog.subset_of``).

Every HTTP request is authenticated with the same code as an A2A call (``registry.auth``:
API keys and bearer tokens, counted against the key's rate limit): a request without a valid
key gets 401 and nothing else. Most are authenticated before the SDK sees them, and the
caller travels to the handlers in the ASGI scope. A ``tools/call`` answered as plain JSON
(``wants_stream``) is authenticated in its admission instead, in the one hop to the database
thread that also finds the tool and opens the task, as an A2A call is (``calls.tool_admitted``):
its ``Gate`` in the scope carries the key there and a refusal back, and the SDK's answer is
held until the key is known good.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

import anyio
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from mcp.shared.exceptions import MCPError

from registry.auth import api_key_lookup
from relay_project.database import database_sync_to_async
from relay_project.per_loop import PerLoop
from relay_project.routing import host_allowed
from routing.mcp import calls, catalog, tasks
from tasks_app.api.admission import admit_caller
from tasks_app.api.parsing import InvalidApiKey
from tasks_app.protocol.errors import RateLimited, Unauthenticated

logger = logging.getLogger(__name__)

CALLER = "relay.caller"
"""The ASGI scope key of the authenticated caller."""
GATE = "relay.gate"
"""The ASGI scope key of a plain JSON request's ``Gate`` (its key not yet checked)."""
SERVER_NAME = "brass-relay"


class Gate:
    """A request whose key is checked by its tool call's admission: the Authorization header
    going in; ``checked`` once the handler ran that admission, ``refusal`` the A2A error
    that refused the key."""

    def __init__(self, authorization: str | None) -> None:
        self.authorization = authorization
        self.checked = False
        self.refusal: Exception | None = None


async def _caller_and_subset(ctx) -> tuple[Any, catalog.Subset | None]:
    """The request's caller and the tools its endpoint serves. A plain JSON tool call comes
    with its key unchecked (``Gate``); a task-augmented one (``routing.mcp.tasks``) checks it
    here, before it starts anything."""
    scope = ctx.request.scope
    subset = catalog.subset_of(scope["path"])
    if CALLER in scope:
        return scope[CALLER], subset
    gate: Gate = scope[GATE]
    try:
        caller = await database_sync_to_async(_authenticate)(gate.authorization)
    except (Unauthenticated, InvalidApiKey, RateLimited) as error:
        gate.checked, gate.refusal = True, error
        raise MCPError(types.INVALID_REQUEST, str(error)) from None
    gate.checked = True
    return caller, subset


async def list_tools(ctx, params) -> types.ListToolsResult:
    caller, subset = await _caller_and_subset(ctx)
    specs = await database_sync_to_async(catalog.tools_for)(caller, subset)
    # At 2025-11-25 a client calls a tool as a task only where the tool says it may.
    execution = (
        types.ToolExecution(task_support="optional")
        if ctx.protocol_version in tasks.LEGACY_VERSIONS
        else None
    )
    return types.ListToolsResult(
        tools=[
            types.Tool(
                name=spec.name,
                title=spec.title,
                description=spec.description,
                input_schema=spec.input_schema,
                execution=execution,
                _meta={
                    calls.META_KEY: {
                        "kind": spec.kind,
                        "id": spec.target_id,
                        **({"skill": spec.skill} if spec.skill else {}),
                    }
                },
            )
            for spec in specs
        ]
    )


async def call_tool(ctx, params: types.CallToolRequestParams):
    scope = ctx.request.scope
    subset = catalog.subset_of(scope["path"])
    gate: Gate | None = scope.get(GATE)
    session = ctx.session

    async def progress(step: float, message: str | None) -> None:
        await session.report_progress(step, None, message)

    can_elicit = ctx.protocol_version in ("2026-07-28",) and session.check_client_capability(
        types.ClientCapabilities(elicitation=types.ElicitationCapability())
    )
    try:
        result = await calls.call_tool(
            caller=scope.get(CALLER),
            authorization=gate.authorization if gate is not None else None,
            subset=subset,
            params=params,
            progress=progress if wants_progress(params) else None,
            can_elicit=can_elicit,
        )
    except calls.KeyRefused as refused:
        gate.checked, gate.refusal = True, refused.error
        raise MCPError(types.INVALID_REQUEST, str(refused.error)) from None
    except calls.UnknownTool:
        if gate is not None:
            gate.checked = True
        raise MCPError(types.INVALID_PARAMS, f"no tool {params.name[:100]!r} here") from None
    if gate is not None:
        gate.checked = True
    return result


def wants_progress(params: types.CallToolRequestParams) -> bool:
    """Whether the call asked for progress notifications (a progress token)."""
    return (params.meta or {}).get("progress_token") is not None


def no_header_arguments(name: str) -> None:
    """The input schema the SDK checks a call's ``Mcp-Param-*`` headers against: none, as no
    tool's schema marks an argument as a header (``tools.input_schema``). Without it, the
    SDK would list every tool of the caller (the whole catalog, read from the database) on
    each call to find one schema."""


def build_server() -> Server:
    server = Server(
        SERVER_NAME,
        version="1",
        instructions="The agents, teams and workflows of this Brass Relay, one tool each: a "
        "call sends an A2A message and answers with the A2A task's result.",
        get_tool_input_schema=no_header_arguments,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )
    tasks.install(server, tasks.TasksExtension(_caller_and_subset))
    return server


NO_SDK_HOST_CHECK = TransportSecuritySettings(enable_dns_rebinding_protection=False)
"""The Host is checked before the SDK, as Django checks it (``host_allowed``: ALLOWED_HOSTS,
with its ``.example.com`` patterns), so the SDK's own check is off."""


async def _reply(send, status: int, message: str, headers: list[tuple[bytes, bytes]] = ()):
    body = json.dumps(
        {"jsonrpc": "2.0", "id": None, "error": {"code": -32001, "message": message}}
    ).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"application/json"), *headers],
        }
    )
    await send({"type": "http.response.body", "body": body})


def _authenticate(authorization: str | None):
    """The caller of a request (as an A2A call's: ``admit_caller``), counted once."""
    return admit_caller(api_key_lookup(authorization))


async def _refuse_key(send, error: Exception) -> None:
    """The answer to a request whose key was refused: 401, or 429 over its rate limit."""
    if isinstance(error, RateLimited):
        retry = [(b"retry-after", str(error.retry_after).encode())] if error.retry_after else []
        await _reply(send, 429, str(error), retry)
    else:
        await _reply(send, 401, str(error), [(b"www-authenticate", b'Bearer realm="relay"')])


async def _answer_plain(manager, scope, body: bytes, authorization, receive, send) -> None:
    """A plain JSON tool call, its key checked in its admission (``Gate``): the SDK's answer
    is held until the key is known good, and a refused key is answered as before the SDK.
    When the SDK answered without calling the tool (a request it refused), the key is
    checked then, so a bad key still gets 401 whatever else is wrong."""
    gate = Gate(authorization)
    held: list[dict] = []

    async def hold(message) -> None:
        held.append(message)

    await _until_disconnect(manager, {**scope, GATE: gate}, body, receive, hold)
    if not gate.checked:
        try:
            await database_sync_to_async(_authenticate)(authorization)
        except (Unauthenticated, InvalidApiKey, RateLimited) as error:
            gate.refusal = error
    if gate.refusal is not None:
        await _refuse_key(send, gate.refusal)
        return
    for message in held:
        await send(message)


class _Running:
    """The SDK's session managers of one event loop, running in a task of that loop from the
    loop's first MCP request on (daphne sends no lifespan events to start them at): one that
    answers with an event stream, one with a plain JSON response (``json_response``), for
    requests that can get nothing but their result (``wants_stream``). Both serve the one
    ``Server``, built once."""

    def __init__(self) -> None:
        server = build_server()
        self.streaming = StreamableHTTPSessionManager(
            app=server, stateless=True, security_settings=NO_SDK_HOST_CHECK
        )
        self.plain = StreamableHTTPSessionManager(
            app=server, stateless=True, json_response=True, security_settings=NO_SDK_HOST_CHECK
        )
        self.ready = asyncio.Event()
        self.task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        async with self.streaming.run(), self.plain.run():
            self.ready.set()
            await asyncio.Event().wait()


def wants_stream(body: bytes) -> bool:
    """Whether a POST body may get messages before its result: anything but one
    ``tools/call`` without a progress token (a call with one gets progress notifications,
    which only an event stream carries)."""
    try:
        message = json.loads(body)
    except ValueError:
        return True
    if not isinstance(message, dict) or message.get("method") != "tools/call":
        return True
    params = message.get("params")
    meta = params.get("_meta") if isinstance(params, dict) else None
    return isinstance(meta, dict) and meta.get("progressToken") is not None


async def _read_body(receive) -> tuple[bytes, Any]:
    """The request's body, and a ``receive`` that replays it before passing on."""
    chunks: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return b"", receive
        chunks.append(message.get("body", b""))
        if not message.get("more_body"):
            break
    body = b"".join(chunks)
    replayed = False

    async def replay():
        nonlocal replayed
        if not replayed:
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return body, replay


_running: PerLoop[_Running] = PerLoop(_Running)


async def _until_disconnect(manager, scope, body: bytes, receive, send) -> None:
    """Hands a request (its body read already) to the JSON-response manager, and cancels
    the call when the client disconnects first, as the event-stream manager does: the A2A
    task of a call the client gave up on is then canceled."""
    given = False

    async def body_once():
        nonlocal given
        if not given:
            given = True
            return {"type": "http.request", "body": body, "more_body": False}
        await anyio.sleep_forever()
        return {"type": "http.disconnect"}

    async with anyio.create_task_group() as group:

        async def handle() -> None:
            await manager.handle_request(scope, body_once, send)
            group.cancel_scope.cancel()

        group.start_soon(handle)
        while (await receive())["type"] != "http.disconnect":
            pass
        group.cancel_scope.cancel()


class MCPApp:
    """The ASGI app under /mcp: authenticates, then hands the request to the SDK."""

    async def __call__(self, scope, receive, send) -> None:
        if not host_allowed(scope):
            await _reply(send, 400, "the Host header names no host of this relay")
            return
        try:
            catalog.subset_of(scope["path"])
        except catalog.UnknownPath:
            await _reply(send, 404, "no MCP endpoint here: /mcp, /mcp/agents/{id}, ...")
            return
        authorization = next(
            (v.decode("latin-1") for k, v in scope["headers"] if k == b"authorization"), None
        )
        running = _running.get()
        await running.ready.wait()
        if scope["method"] == "POST":
            body, receive = await _read_body(receive)
            if not wants_stream(body):
                await _answer_plain(running.plain, scope, body, authorization, receive, send)
                return
        try:
            caller = await database_sync_to_async(_authenticate)(authorization)
        except (Unauthenticated, InvalidApiKey, RateLimited) as error:
            await _refuse_key(send, error)
            return
        await running.streaming.handle_request({**scope, CALLER: caller}, receive, send)


application = MCPApp()
"""The ASGI app ``relay_project.asgi`` mounts at /mcp."""


def mounted(other):
    """An ASGI app sending ``/mcp`` and the paths under it to the MCP server, the rest to
    ``other``."""

    async def app(scope, receive, send):
        path = scope.get("path", "")
        if scope["type"] == "http" and (path == "/mcp" or path.startswith("/mcp/")):
            await application(scope, receive, send)
        else:
            await other(scope, receive, send)

    return app
