"""The upstream agents of the chaos suite, served by a process of their own so that killing a
relay process never kills an agent:

    python -m tests.chaos.agents [URLS_FILE]   # prints one JSON line {slug: base URL} (and
                                               # writes it to URLS_FILE), serves until SIGTERM

- ``paced``: an a2a-sdk agent (DefaultRequestHandler, InMemoryTaskStore: a client may
  resubscribe to a running task). The message text ``count=N pause=S`` makes it go working,
  then send N artifact updates ``chunk-0`` ... ``chunk-<N-1>`` (text ``chunk <i>``, metadata
  ``seq`` and ``sentAt``, the agent's clock) with S seconds before each, then completed.
- ``pausing``: the same executor, two events 8 s apart by default (``PAUSING_SECONDS``).
- ``cancels``: an a2a-sdk agent that goes working (one artifact ``started``) and stays there;
  its ``AgentExecutor.cancel`` records the task id, which ``GET /cancels`` lists.
- ``silent``: a raw ASGI app. SendStreamingMessage answers ``200 text/event-stream`` and then
  nothing, ever; its card, GetTask (TaskNotFound: it never made a task) and SendMessage are
  answered properly.
- ``unfinished``: a raw ASGI app. SendStreamingMessage sends the task (submitted), a working
  status and one artifact, then closes the stream without a final state; the task then
  stands completed in its store, which GetTask answers (the final event got lost, the work
  did not).

No Django here.
"""

from __future__ import annotations

import asyncio
import json
import re
import signal
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from a2a.server.agent_execution import RequestContext
from a2a.server.events import EventQueue
from a2a.server.tasks import TaskUpdater
from a2a.types import Part
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from routing.demo.agents import (
    CARD_PATH,
    TaskExecutor,
    build_agent_app,
    text_message,
)
from routing.demo.serve import serve_many
from tests.agents import task_spec

PAUSING_SECONDS = 8.0
MESSAGE_PATTERN = re.compile(r"count=(?P<count>\d+)\s+pause=(?P<pause>[0-9.]+)")
MAX_EVENTS = 1000


def paced_text(count: int, pause: float) -> str:
    """The message text that asks the paced agent for ``count`` events ``pause`` s apart."""
    return f"count={count} pause={pause}"


def chunk_text(sequence: int) -> str:
    return f"chunk {sequence}"


class PacedStreamer(TaskExecutor):
    """Working, then artifact updates at the pace the message asks (see the module docstring),
    then completed. The pace defaults to ``default_count`` events ``default_pause`` s apart."""

    def __init__(self, default_count: int = 5, default_pause: float = 0.2) -> None:
        self.default_count = default_count
        self.default_pause = default_pause

    async def work(self, context: RequestContext, updater: TaskUpdater) -> None:
        asked = MESSAGE_PATTERN.search(context.get_user_input())
        count = min(int(asked["count"]), MAX_EVENTS) if asked else self.default_count
        pause = float(asked["pause"]) if asked else self.default_pause
        await updater.start_work()
        for sequence in range(count):
            await asyncio.sleep(pause)
            await updater.add_artifact(
                [Part(text=chunk_text(sequence))],
                artifact_id=f"chunk-{sequence}",
                name=f"chunk-{sequence}",
                metadata={"seq": sequence, "sentAt": time.time()},
                last_chunk=True,
            )
        await updater.complete(text_message(updater, f"Sent {count} events."))


class RecordsCancels(TaskExecutor):
    """Working (with one artifact, so a client sees it started) until canceled; every cancel
    it receives is recorded (the agent's task id) before the task is canceled."""

    def __init__(self, received: list[str]) -> None:
        self.received = received

    async def work(self, context: RequestContext, updater: TaskUpdater) -> None:
        await updater.start_work()
        await updater.add_artifact([Part(text="started")], artifact_id="started", name="started")
        await asyncio.Event().wait()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        self.received.append(context.task_id or "")
        await super().cancel(context, event_queue)


def paced_agent(base_url: str) -> Starlette:
    spec = task_spec(
        "paced", "Paced Streamer", "Streams numbered events at a set pace.", PacedStreamer
    )
    return build_agent_app(spec, base_url=base_url)


def pausing_agent(base_url: str) -> Starlette:
    spec = task_spec(
        "pausing",
        "Pausing Streamer",
        "Two events, 8 s apart.",
        lambda: PacedStreamer(default_count=2, default_pause=PAUSING_SECONDS),
    )
    return build_agent_app(spec, base_url=base_url)


def cancel_recording_agent(base_url: str) -> Starlette:
    received: list[str] = []

    async def cancels(request: Request) -> JSONResponse:
        return JSONResponse({"cancels": received})

    spec = task_spec(
        "cancels",
        "Cancel Recorder",
        "Works until canceled; keeps the cancels.",
        lambda: RecordsCancels(received),
    )
    return build_agent_app(
        spec, base_url=base_url, extra_routes=[Route("/cancels", cancels, methods=["GET"])]
    )


# --- raw agents: what an SDK agent would never do ----------------------------------------


def raw_card(base_url: str, slug: str, description: str) -> dict[str, Any]:
    """A 1.0 card: JSON-RPC 1.0 at ``base_url``, streaming."""
    return {
        "name": slug,
        "description": description,
        "version": "1.0.0",
        "supportedInterfaces": [
            {"url": base_url, "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}
        ],
        "capabilities": {"streaming": True},
        "defaultInputModes": ["text/plain"],
        "defaultOutputModes": ["text/plain"],
        "skills": [{"id": slug, "name": slug, "description": description, "tags": ["chaos"]}],
    }


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime()) + ".000Z"


def _result(call_id: Any, result: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": call_id, "result": result}


def _error(call_id: Any, code: int, message: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": call_id, "error": {"code": code, "message": message}}


def _sse(payload: dict[str, Any]) -> bytes:
    return f"data: {json.dumps(payload)}\n\n".encode()


class RawAgent:
    """A JSON-RPC 1.0 agent written by hand: a card, SendMessage (completed at once),
    GetTask from its store (TaskNotFound otherwise), CancelTask (canceled), and a streaming
    call each subclass answers its own way."""

    slug = "raw"
    description = "A hand-written agent."

    def __init__(self, base_url: str) -> None:
        self.card = raw_card(base_url, self.slug, self.description)
        self.tasks: dict[str, dict[str, Any]] = {}
        self.app = Starlette(
            routes=[
                Route(CARD_PATH, self.card_endpoint, methods=["GET"]),
                Route("/", self.rpc, methods=["POST"]),
            ]
        )

    async def __call__(self, scope, receive, send) -> None:
        await self.app(scope, receive, send)

    async def card_endpoint(self, request: Request) -> JSONResponse:
        return JSONResponse(self.card)

    def new_task(self, message: dict[str, Any], state: str) -> dict[str, Any]:
        task = {
            "id": f"{self.slug}-{uuid.uuid4().hex[:12]}",
            "contextId": message.get("contextId") or f"ctx-{uuid.uuid4().hex[:12]}",
            "status": {"state": state, "timestamp": _now()},
            "history": [message],
        }
        self.tasks[task["id"]] = task
        return task

    async def rpc(self, request: Request) -> Response:
        call = await request.json()
        call_id, method, params = call.get("id"), call.get("method"), call.get("params") or {}
        if method == "SendStreamingMessage":
            return StreamingResponse(self.stream(call_id, params), media_type="text/event-stream")
        if method == "SendMessage":
            task = self.new_task(params.get("message") or {}, "TASK_STATE_COMPLETED")
            return JSONResponse(_result(call_id, {"task": task}))
        if method in ("GetTask", "CancelTask", "SubscribeToTask"):
            task = self.tasks.get(params.get("id", ""))
            if task is None:
                return JSONResponse(_error(call_id, -32001, "Task not found"))
            if method == "CancelTask":
                task["status"] = {"state": "TASK_STATE_CANCELED", "timestamp": _now()}
            if method == "SubscribeToTask":
                return JSONResponse(_error(call_id, -32004, "this agent does not resubscribe"))
            return JSONResponse(_result(call_id, task))
        return JSONResponse(_error(call_id, -32601, f"Method not found: {method}"))

    async def stream(self, call_id: Any, params: dict[str, Any]):
        raise NotImplementedError
        yield b""  # pragma: no cover


class SilentAgent(RawAgent):
    slug = "silent"
    description = "Answers a stream with its headers, then says nothing."

    async def stream(self, call_id, params):
        # Headers go out when the first chunk is asked for; an empty chunk sends them alone.
        yield b""
        await asyncio.Event().wait()


class UnfinishedAgent(RawAgent):
    slug = "unfinished"
    description = "Streams working and one artifact, then closes without a final state."

    async def stream(self, call_id, params):
        task = self.new_task(params.get("message") or {}, "TASK_STATE_SUBMITTED")
        ids = {"taskId": task["id"], "contextId": task["contextId"]}
        yield _sse(_result(call_id, {"task": dict(task)}))
        working = {"state": "TASK_STATE_WORKING", "timestamp": _now()}
        task["status"] = working
        yield _sse(_result(call_id, {"statusUpdate": {**ids, "status": working}}))
        artifact = {"artifactId": "only", "name": "only", "parts": [{"text": "the only chunk"}]}
        task["artifacts"] = [artifact]
        yield _sse(
            _result(call_id, {"artifactUpdate": {**ids, "artifact": artifact, "lastChunk": True}})
        )
        # The work ends, but the final event never reaches the stream.
        task["status"] = {
            "state": "TASK_STATE_COMPLETED",
            "timestamp": _now(),
            "message": {
                "messageId": f"m-{uuid.uuid4().hex[:8]}",
                "role": "ROLE_AGENT",
                "parts": [{"text": "Finished off the stream."}],
            },
        }


AGENTS = {
    "paced": paced_agent,
    "pausing": pausing_agent,
    "cancels": cancel_recording_agent,
    "silent": SilentAgent,
    "unfinished": UnfinishedAgent,
}


def main(argv: list[str] | None = None) -> None:
    """Serves every agent of AGENTS on a free port until SIGTERM or SIGINT; their URLs go to
    stdout as one JSON line, and to the file named by the first argument when there is one
    (written whole, once every agent listens)."""
    argv = sys.argv[1:] if argv is None else argv
    stop = threading.Event()
    for signal_number in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signal_number, lambda *_: stop.set())
    with serve_many(AGENTS) as group:
        print(json.dumps(group.urls), flush=True)
        if argv:
            partial = Path(argv[0] + ".partial")
            partial.write_text(json.dumps(group.urls))
            partial.rename(argv[0])
        while not stop.wait(0.5):
            pass
    sys.exit(0)


if __name__ == "__main__":
    main()
