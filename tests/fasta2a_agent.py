"""A fasta2a agent (pydantic's A2A server, from PyPI) for interop tests: its in-memory storage
and broker, and a worker that answers every message with its text reversed.

fasta2a's storage stamps each status with ``datetime.now().isoformat()``: a timestamp without
a zone (``2026-11-28T16:58:00.944946``), which is what the tests need it for.

    with running(fasta2a_agent) as url:
        ...
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import anyio
from fasta2a import FastA2A, Worker
from fasta2a.broker import InMemoryBroker
from fasta2a.schema import Artifact, Message, Part, TaskIdParams, TaskSendParams
from fasta2a.storage import InMemoryStorage

SLOW_SECONDS = 2.0


@dataclass
class ReversingWorker(Worker[list[Message]]):
    """Answers a task's last text with it reversed, as an artifact, after a ``working``; a
    text that starts with ``slow`` waits ``SLOW_SECONDS`` before the artifact."""

    async def run_task(self, params: TaskSendParams) -> None:
        task = await self.storage.load_task(params["id"])
        assert task is not None
        await self.storage.update_task(task["id"], state="working")
        await self.publish_status(task["id"], task["context_id"], "working")
        text = "".join(
            part.get("text", "") for part in params["message"]["parts"] if "text" in part
        )
        if text.startswith("slow"):
            await anyio.sleep(SLOW_SECONDS)
        artifact = Artifact(
            artifact_id=str(uuid.uuid4()), name="reversed", parts=[Part(text=text[::-1])]
        )
        await self.publish_artifact(task["id"], task["context_id"], artifact)
        await self.storage.update_task(task["id"], state="completed", new_artifacts=[artifact])

    async def cancel_task(self, params: TaskIdParams) -> None:
        await self.storage.update_task(params["id"], state="canceled")

    def build_message_history(self, history: list[Message]) -> list[Any]:
        return history

    def build_artifacts(self, result: Any) -> list[Artifact]:
        return []


def fasta2a_agent(base_url: str) -> FastA2A:
    """A fasta2a server whose card names ``base_url``, with its worker running beside it."""
    storage: InMemoryStorage[list[Message]] = InMemoryStorage()
    broker = InMemoryBroker()
    worker = ReversingWorker(broker=broker, storage=storage)

    @asynccontextmanager
    async def lifespan(app: FastA2A) -> AsyncIterator[None]:
        async with app.task_manager, worker.run():
            yield

    return FastA2A(
        storage=storage,
        broker=broker,
        name="Reverser",
        url=f"{base_url}/",
        description="Reverses text (fasta2a)",
        lifespan=lifespan,
    )
