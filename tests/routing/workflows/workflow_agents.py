"""Real a2a-sdk agents for the workflow tests, each recording what it received: the seed's
customer-support agents (the classifier says ``billing`` for a message about an invoice,
``technical`` otherwise; the others answer ``<slug>: <text>``), a slow one, one that asks for
input, and one that says ``done`` on its third call (for loops). No Django."""

from __future__ import annotations

import asyncio
from typing import Any

from a2a.server.agent_execution import RequestContext
from a2a.server.tasks import TaskUpdater
from a2a.types import Part

from routing.demo.agents import (
    AgentSpec,
    Answer,
    AnsweringExecutor,
    Skill,
    TaskExecutor,
    build_agent_app,
    text_message,
)

SUPPORT = (
    "intent-classifier",
    "billing-agent",
    "troubleshooting-agent",
    "resolution-validator",
    "summary-agent",
)


class Calls:
    """What each agent received, in order, by slug."""

    def __init__(self) -> None:
        self.received: dict[str, list[str]] = {}

    def clear(self) -> None:
        self.received.clear()

    def add(self, slug: str, text: str) -> None:
        self.received.setdefault(slug, []).append(text)

    def count(self, slug: str) -> int:
        return len(self.received.get(slug, []))


CALLS = Calls()


def _spec(slug: str, executor) -> AgentSpec:
    return AgentSpec(
        slug=slug,
        name=slug,
        description=f"The {slug} of the workflow tests.",
        skills=(
            Skill(id=slug, name=slug, description=f"{slug} answers.", tags=("workflow-test",)),
        ),
        make_executor=executor,
        client_routing=False,
    )


def answering(slug: str, answer=None):
    def reply(text: str, routing: dict[str, Any] | None) -> Answer:
        CALLS.add(slug, text)
        return Answer(answer(text) if answer else f"{slug}: {text}")

    return lambda base_url: build_agent_app(
        _spec(slug, lambda: AnsweringExecutor(reply)), base_url=base_url
    )


def classify(text: str) -> str:
    return "billing" if "invoice" in text.lower() else "technical"


class Slow(TaskExecutor):
    """Works for ``delay`` seconds (a task, streamed), then completes with an artifact."""

    def __init__(self, slug: str, delay: float) -> None:
        self.slug, self.delay = slug, delay

    async def work(self, context: RequestContext, updater: TaskUpdater) -> None:
        text = context.get_user_input()
        CALLS.add(self.slug, text)
        await updater.start_work(text_message(updater, f"{self.slug} is on it"))
        await asyncio.sleep(self.delay)
        await updater.add_artifact(
            [Part(text=f"{self.slug}: {text}")], name="answer", last_chunk=True
        )
        await updater.complete()


def slow(slug: str, delay: float):
    return lambda base_url: build_agent_app(
        _spec(slug, lambda: Slow(slug, delay)), base_url=base_url
    )


class Asks(TaskExecutor):
    """Asks "Which account?" first; completes with "<slug>: account <answer>" next."""

    def __init__(self, slug: str) -> None:
        self.slug = slug

    async def work(self, context: RequestContext, updater: TaskUpdater) -> None:
        text = context.get_user_input()
        CALLS.add(self.slug, text)
        if context.current_task is None:
            await updater.requires_input(text_message(updater, "Which account?"))
            return
        await updater.complete(text_message(updater, f"{self.slug}: account {text.strip()}"))


def asks(slug: str):
    return lambda base_url: build_agent_app(_spec(slug, lambda: Asks(slug)), base_url=base_url)


def counter(slug: str, done_at: int):
    """Answers ``done`` on its ``done_at``-th call, ``again`` before."""

    def answer(text: str) -> str:
        return "done" if CALLS.count(slug) >= done_at else "again"

    return answering(slug, answer)


GATES: dict[str, Any] = {}
"""Gates of the ``gated`` step agent: name -> a queue.Queue the test puts chunks, then None, in."""


class Gated(TaskExecutor):
    """Works at once, then one artifact chunk per item the test puts in the gate its message
    names; completes with "<slug>: released" on None."""

    def __init__(self, slug: str) -> None:
        self.slug = slug

    async def work(self, context: RequestContext, updater: TaskUpdater) -> None:
        text = context.get_user_input().strip()
        CALLS.add(self.slug, text)
        await updater.start_work()
        gate, index = GATES[text], 0
        while (chunk := await asyncio.to_thread(gate.get, True, 30)) is not None:
            await updater.add_artifact(
                [Part(text=chunk)], artifact_id="story", name="story", append=index > 0
            )
            index += 1
        await updater.complete(text_message(updater, f"{self.slug}: released"))


def gated(slug: str):
    return lambda base_url: build_agent_app(_spec(slug, lambda: Gated(slug)), base_url=base_url)


class Refuses(AnsweringExecutor):
    """Refuses every message with an A2A error (InvalidParams), before any event."""

    def __init__(self, slug: str) -> None:
        self.slug = slug

    async def execute(self, context, event_queue) -> None:
        from a2a.utils.errors import InvalidParamsError

        CALLS.add(self.slug, context.get_user_input())
        raise InvalidParamsError(message="no, thank you")


def refuses(slug: str):
    return lambda base_url: build_agent_app(_spec(slug, lambda: Refuses(slug)), base_url=base_url)
