"""An echo agent built with a2a-sdk 0.3.26, run by the 0.3 virtualenv (see tests/sdk03.py).

    python sdk03_agent.py PORT [--transports HTTP+JSON,JSONRPC]

It serves its 0.3 card at /.well-known/agent-card.json, its first transport at the card's
``url`` and any other as an additional interface. Every message gets a completed task whose
artifact "echo" holds the parts received, plus one text part per file part received with
bytes: ``"<name> <sha256 of the bytes>"`` (the bytes as the 0.3.26 SDK hands them to an
agent, base64-decoded), so a test can tell what arrived. Runs this SDK's own code only: it
imports nothing of the relay. Prints "ready" on stdout once it listens.
"""

from __future__ import annotations

import argparse
import base64
import hashlib

import uvicorn
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.apps import A2ARESTFastAPIApplication, A2AStarletteApplication
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    FileWithBytes,
    Part,
    TextPart,
)
from a2a.utils import new_task


class EchoFiles(AgentExecutor):
    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        task = context.current_task or new_task(context.message)
        await event_queue.enqueue_event(task)
        updater = TaskUpdater(event_queue, task.id, task.context_id)
        parts = list(context.message.parts)
        for part in context.message.parts:
            file = getattr(part.root, "file", None)
            if isinstance(file, FileWithBytes):
                digest = hashlib.sha256(base64.b64decode(file.bytes)).hexdigest()
                parts.append(Part(root=TextPart(text=f"{file.name} {digest}")))
        await updater.add_artifact(parts, name="echo", last_chunk=True)
        await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        raise NotImplementedError


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("port", type=int)
    parser.add_argument("--transports", default="HTTP+JSON")
    arguments = parser.parse_args()
    transports = arguments.transports.split(",")
    url = f"http://127.0.0.1:{arguments.port}"
    card = AgentCard(
        name="Echo 0.3.26",
        description="Echoes parts and names the files it received (a2a-sdk 0.3.26).",
        url=url,
        preferred_transport=transports[0],
        additional_interfaces=[AgentInterface(url=url, transport=t) for t in transports[1:]],
        version="1.0.0",
        capabilities=AgentCapabilities(streaming=True),
        default_input_modes=["text/plain", "application/octet-stream"],
        default_output_modes=["text/plain", "application/octet-stream"],
        skills=[AgentSkill(id="echo", name="Echo", description="Echoes.", tags=["echo"])],
    )
    handler = DefaultRequestHandler(agent_executor=EchoFiles(), task_store=InMemoryTaskStore())
    jsonrpc = A2AStarletteApplication(agent_card=card, http_handler=handler)
    if "HTTP+JSON" in transports:
        app = A2ARESTFastAPIApplication(agent_card=card, http_handler=handler).build()
        if "JSONRPC" in transports:
            jsonrpc.add_routes_to_app(
                app, agent_card_url="/.well-known/jsonrpc-card.json", rpc_url="/"
            )
    else:
        app = jsonrpc.build()
    config = uvicorn.Config(app, host="127.0.0.1", port=arguments.port, log_level="warning")
    server = uvicorn.Server(config)

    original_startup = server.startup

    async def startup(sockets=None):
        await original_startup(sockets)
        print("ready", flush=True)

    server.startup = startup
    server.run()


if __name__ == "__main__":
    main()
