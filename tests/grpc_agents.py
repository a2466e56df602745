"""a2a-sdk agents served over gRPC only, for the relay's upstream gRPC tests: the SDK's
``GrpcHandler`` over its ``DefaultRequestHandler`` on a ``grpc.aio`` server (its own event loop,
in a thread) on a free 127.0.0.1 port, and the card, whose one interface is that ``GRPC``
1.0 address, served over HTTP (where the relay's registry fetches cards)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from routing.demo.agents import CARD_PATH, AgentSpec, build_agent_card
from tests.servers import running

STOP_SECONDS = 5.0


@dataclass(frozen=True)
class GrpcAgent:
    base_url: str
    """Where its card is (``{base_url}/.well-known/agent-card.json``): what to register."""
    address: str
    """``host:port`` of its gRPC server."""


@contextmanager
def grpc_agent(
    spec: AgentSpec, *, tenant: str = "", extended_skill: str = "", task_store=None
) -> Iterator[GrpcAgent]:
    """Serves ``spec`` over gRPC (and its card over HTTP) for the duration of the block. With
    ``extended_skill`` the card declares an extended card, which has one more skill of that
    id; ``task_store`` is the agent's (a new InMemoryTaskStore when not given)."""
    import grpc
    from a2a.server.request_handlers import DefaultRequestHandler, GrpcHandler
    from a2a.server.routes import create_agent_card_routes
    from a2a.server.tasks import InMemoryTaskStore
    from a2a.types import AgentCard, AgentInterface, AgentSkill, a2a_pb2_grpc
    from starlette.applications import Starlette

    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="grpc-agent", daemon=True)
    thread.start()

    async def start():
        server = grpc.aio.server()
        port = server.add_insecure_port("127.0.0.1:0")
        card = build_agent_card(spec, base_url="http://127.0.0.1/")
        del card.supported_interfaces[:]
        card.supported_interfaces.append(
            AgentInterface(
                url=f"127.0.0.1:{port}",
                protocol_binding="GRPC",
                protocol_version="1.0",
                tenant=tenant,
            )
        )
        extended = None
        if extended_skill:
            card.capabilities.extended_agent_card = True
            extended = AgentCard()
            extended.CopyFrom(card)
            extended.skills.append(
                AgentSkill(id=extended_skill, name=extended_skill, description="for callers")
            )
        handler = DefaultRequestHandler(
            agent_executor=spec.make_executor(),
            task_store=task_store or InMemoryTaskStore(),
            agent_card=card,
            extended_agent_card=extended,
        )
        a2a_pb2_grpc.add_A2AServiceServicer_to_server(GrpcHandler(handler), server)
        await server.start()
        return server, port, card

    server, port, card = asyncio.run_coroutine_threadsafe(start(), loop).result(STOP_SECONDS)
    try:
        card_app = Starlette(routes=create_agent_card_routes(card, card_url=CARD_PATH))
        with running(card_app) as base_url:
            yield GrpcAgent(base_url=base_url, address=f"127.0.0.1:{port}")
    finally:
        asyncio.run_coroutine_threadsafe(server.stop(1), loop).result(STOP_SECONDS)
        # Work still running (a task never finished, a stream left open) ends here, on its
        # own loop: left pending, its coroutines would be closed by the garbage collector
        # later, on no loop, where a2a-sdk's queues wait for ever.
        asyncio.run_coroutine_threadsafe(_cancel_pending(), loop).result(STOP_SECONDS)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(STOP_SECONDS)
        loop.close()


async def _cancel_pending() -> None:
    current = asyncio.current_task()
    pending = [task for task in asyncio.all_tasks() if task is not current]
    for task in pending:
        task.cancel()
    if pending:
        await asyncio.wait(pending, timeout=STOP_SECONDS)
