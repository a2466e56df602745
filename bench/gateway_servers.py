"""The servers the gateway benchmark starts besides the relays, each run as
`gateway_bench.py --serve ROLE ...` in a process of its own: the echo and the chunk-streaming
agents, the echo agent over gRPC, and the bare pass-through proxy (httpx or aiohttp).
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass

import httpx

from bench.gateway_load import IDLE_SECONDS, REQUEST_TIMEOUT
from bench.gateway_storm import STORM, serve_storm_agent
from bench.gateway_verdicts import AIOHTTP_PROXY, STREAM_CHUNKS

# --- the servers, each run as `gateway_bench.py --serve ROLE ...` in a process of its own ------


def serve_agent(slug: str, port: int) -> None:
    """The echo agent, or ("chunks") one that streams `STREAM_CHUNKS` artifact chunks, with a
    pause of N ms before each when the message says `pace-ms=N` and none otherwise: a2a-sdk
    apps built like the demo agents.

    uvicorn binds the port itself rather than through `routing.demo.serve.serve`: asyncio
    turns Nagle off only on sockets whose `proto` is TCP, and the socket `serve` binds has
    proto 0, so its keep-alive answers stall on the client's delayed ACK (about 40 ms each).
    """
    import uvicorn
    from a2a.types import Part

    from routing.demo.agents import ECHO, AgentSpec, Skill, TaskExecutor, build_agent_app

    class ChunkStreamer(TaskExecutor):
        async def work(self, context, updater) -> None:
            pace = re.search(r"pace-ms=(\d+)", context.get_user_input())
            pause = int(pace.group(1)) / 1000 if pace else 0.0
            for index in range(STREAM_CHUNKS):
                if pause:
                    await asyncio.sleep(pause)
                await updater.add_artifact(
                    [Part(text=f"chunk {index} ")],
                    artifact_id="story",
                    name="story",
                    append=index > 0,
                    last_chunk=index == STREAM_CHUNKS - 1,
                )
            await updater.complete()

    specs = {
        "echo": ECHO,
        "chunks": AgentSpec(
            slug="chunks",
            name="Chunk Streamer",
            description="Streams 50 artifact chunks.",
            skills=(
                Skill(id="chunks", name="Chunks", description="Streams chunks.", tags=("bench",)),
            ),
            make_executor=ChunkStreamer,
        ),
    }
    app = build_agent_app(specs[slug], base_url=f"http://127.0.0.1:{port}")
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", access_log=False)


def serve_grpc_agent(port: int, card_port: int) -> None:
    """The echo agent served over gRPC by a2a-sdk (``GrpcHandler`` over its
    ``DefaultRequestHandler`` on a ``grpc.aio`` server on `port`), and its card, whose one
    interface is that gRPC address, over HTTP on `card_port` (where the relay fetches it)."""
    import grpc
    import uvicorn
    from a2a.server.request_handlers import DefaultRequestHandler, GrpcHandler
    from a2a.server.routes import create_agent_card_routes
    from a2a.server.tasks import InMemoryTaskStore
    from a2a.types import AgentInterface, a2a_pb2_grpc
    from starlette.applications import Starlette

    from routing.demo.agents import CARD_PATH, ECHO, build_agent_card

    card = build_agent_card(ECHO, base_url=f"http://127.0.0.1:{card_port}/")
    del card.supported_interfaces[:]
    card.supported_interfaces.append(
        AgentInterface(url=f"127.0.0.1:{port}", protocol_binding="GRPC", protocol_version="1.0")
    )

    async def serve() -> None:
        server = grpc.aio.server()
        handler = DefaultRequestHandler(
            agent_executor=ECHO.make_executor(), task_store=InMemoryTaskStore(), agent_card=card
        )
        a2a_pb2_grpc.add_A2AServiceServicer_to_server(GrpcHandler(handler), server)
        server.add_insecure_port(f"127.0.0.1:{port}")
        await server.start()
        app = Starlette(routes=create_agent_card_routes(card, card_url=CARD_PATH))
        config = uvicorn.Config(
            app, host="127.0.0.1", port=card_port, log_level="warning", access_log=False
        )
        await uvicorn.Server(config).serve()
        await server.stop(1)

    asyncio.run(serve())


@dataclass(frozen=True)
class Answer:
    """An upstream's answer as the bare proxy passes it on, whichever client fetched it."""

    status: int
    media_type: str | None
    chunks: Callable[[], AsyncIterator[bytes]]
    read: Callable[[], Awaitable[bytes]]
    close: Callable[[], Awaitable[None]]


def serve_proxy(port: int, upstreams: dict[str, str], *, client: str = "httpx") -> None:
    """POST /{name}/ goes to `upstreams[name]` with one shared httpx.AsyncClient (or
    aiohttp.ClientSession); the answer comes back, an event stream event by event as it
    arrives, anything else in one piece."""
    import contextlib

    import aiohttp
    import uvicorn
    from starlette.applications import Starlette
    from starlette.background import BackgroundTask
    from starlette.responses import Response, StreamingResponse
    from starlette.routing import Route

    forwarded = ("content-type", "accept", "a2a-version", "a2a-extensions", "authorization")
    clients: list = []

    def new_client():
        if client == "aiohttp":
            connector = aiohttp.TCPConnector(limit=128, keepalive_timeout=IDLE_SECONDS)
            return aiohttp.ClientSession(connector=connector)
        limits = httpx.Limits(
            max_connections=128, max_keepalive_connections=128, keepalive_expiry=IDLE_SECONDS
        )
        return httpx.AsyncClient(limits=limits, timeout=REQUEST_TIMEOUT)

    @contextlib.asynccontextmanager
    async def lifespan(app):
        async with new_client() as shared:
            clients.append(shared)
            yield

    async def send_httpx(upstream: str, body: bytes, headers: dict[str, str]) -> Answer:
        shared = clients[0]
        answer = await shared.send(
            shared.build_request("POST", upstream, content=body, headers=headers), stream=True
        )
        return Answer(
            answer.status_code,
            answer.headers.get("content-type"),
            answer.aiter_raw,
            answer.aread,
            answer.aclose,
        )

    async def send_aiohttp(upstream: str, body: bytes, headers: dict[str, str]) -> Answer:
        answer = await clients[0].post(upstream, data=body, headers=headers)

        async def close() -> None:
            answer.release()

        return Answer(
            answer.status,
            answer.headers.get("content-type"),
            answer.content.iter_any,
            answer.read,
            close,
        )

    send = send_aiohttp if client == "aiohttp" else send_httpx

    async def forward(request):
        upstream = upstreams.get(request.path_params["name"])
        if upstream is None:
            return Response(status_code=404)
        headers = {name: request.headers[name] for name in forwarded if name in request.headers}
        answer = await send(upstream, await request.body(), headers)
        if answer.media_type and answer.media_type.startswith("text/event-stream"):
            return StreamingResponse(
                answer.chunks(),
                status_code=answer.status,
                media_type=answer.media_type,
                background=BackgroundTask(answer.close),
            )
        content = await answer.read()
        await answer.close()
        return Response(content, status_code=answer.status, media_type=answer.media_type)

    app = Starlette(routes=[Route("/{name}/", forward, methods=["POST"])], lifespan=lifespan)
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", access_log=False)


def serve_otlp_sink(port: int) -> None:
    """An OTLP/HTTP trace receiver that takes every export (``POST /v1/traces``) and keeps
    nothing: where the traced relay sends its spans."""
    import uvicorn
    from starlette.applications import Starlette
    from starlette.responses import Response
    from starlette.routing import Route

    async def traces(request):
        await request.body()
        return Response(b"", media_type="application/x-protobuf")

    app = Starlette(routes=[Route("/v1/traces", traces, methods=["POST"])])
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", access_log=False)


def serve(argv: list[str]) -> None:
    """Runs the server `argv` names (the arguments of ``--serve``): ``agent SLUG PORT``,
    ``grpc-agent PORT CARD_PORT``, ``otlp-sink PORT``, ``storm PORT``, or ``proxy|aio-proxy PORT NAME=URL ...``."""
    role, *rest = argv
    if role == STORM:
        serve_storm_agent(int(rest[0]))
    elif role == "otlp-sink":
        serve_otlp_sink(int(rest[0]))
    elif role == "agent":
        serve_agent(rest[0], int(rest[1]))
    elif role == "grpc-agent":
        serve_grpc_agent(int(rest[0]), int(rest[1]))
    else:
        upstreams = dict(item.split("=", 1) for item in rest[1:])
        serve_proxy(int(rest[0]), upstreams, client="aiohttp" if role == AIOHTTP_PROXY else "httpx")
