"""A2A agents and card servers for the relay's tests, on top of `routing.demo.agents`.

Every agent here is a factory `base_url -> Starlette app`; serve it with `tests.servers.running`
so its card carries its real URL. The plain-card cases (a card that changes, is incomplete,
is not JSON, is too big, fails or redirects) are `CardServer` instances. No Django.

Agents (all answer like the echo agent unless said otherwise):

- `v1_only_agent`: 1.0 JSON-RPC and REST only, a pure 1.0 card.
- `v0_3_only_agent`: 0.3 JSON-RPC names and /v1 REST only, a pure 0.3 card.
- `v0_2_agent`: the same server, its card (protocolVersion "0.2.5", `url`) only at
  `/.well-known/agent.json`.
- `prefixed_agent`: everything under `/prefix/agent/`; origin well-known paths 404.
- `misadvertised_agent`: served where it is, but its card names a closed port.
- `chunked_streaming_agent`: streams one artifact in `CHUNKS`, with small delays.
- `input_required_agent`: asks for a name (input-required), then greets it and completes.
- `long_working_agent`: works about a minute (LONG_STEPS working updates, LONG_STEP_SECONDS
  apart, each naming its step), then completes with artifact "report".
- `never_finishing_agent`: stays working until cancelled (a blocking SendMessage to it never
  returns: stream, or set `returnImmediately`).
- `scripted_agent(Script(slug))`: a client-routing agent whose answers name the recipients its
  test script lists, one per call; it keeps the routing metadata it received.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import json
from collections.abc import Callable
from typing import Any

from a2a.server.agent_execution import RequestContext
from a2a.server.request_handlers.response_helpers import agent_card_to_dict
from a2a.server.tasks import TaskUpdater
from a2a.types import Part
from google.protobuf.json_format import MessageToDict
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from routing.demo.agents import (
    BOTH_VERSIONS,
    CARD_PATH,
    ECHO,
    AgentSpec,
    Answer,
    AnsweringExecutor,
    Skill,
    TaskExecutor,
    build_agent_app,
    build_agent_card,
    json_route,
    text_message,
    v0_3_card_json,
)
from tests.servers import closed_port_url

PREFIX = "/prefix/agent"
LEGACY_CARD_PATH = "/.well-known/agent.json"
CHUNKS = ("Once ", "upon ", "a ", "time.")
CHUNK_DELAY = 0.05
ONE_MIB = 1024 * 1024


def echo_variant(slug: str, name: str) -> AgentSpec:
    return dataclasses.replace(ECHO, slug=slug, name=name)


# --- protocol and URL variants of the echo agent -----------------------------------------


def v1_only_agent(base_url: str) -> Starlette:
    return build_agent_app(
        echo_variant("echo-v1", "Echo 1.0 Agent"), base_url=base_url, versions=("1.0",)
    )


def v0_3_only_agent(base_url: str) -> Starlette:
    return build_agent_app(
        echo_variant("echo-v03", "Echo 0.3 Agent"), base_url=base_url, versions=("0.3",)
    )


def v0_2_card(base_url: str) -> dict[str, Any]:
    """A 0.2.5 card: protocolVersion, url and preferredTransport, no other interfaces."""
    spec = echo_variant("echo-v02", "Echo 0.2 Agent")
    card = v0_3_card_json(build_agent_card(spec, base_url=base_url, versions=("0.3",)))
    card.pop("additionalInterfaces", None)
    return card | {"protocolVersion": "0.2.5"}


def v0_2_agent(base_url: str) -> Starlette:
    """Speaks 0.3 JSON-RPC (the 0.2 method names are the same); card only at agent.json."""
    return build_agent_app(
        echo_variant("echo-v02", "Echo 0.2 Agent"),
        base_url=base_url,
        versions=("0.3",),
        card_routes=False,
        extra_routes=[json_route(LEGACY_CARD_PATH, v0_2_card(base_url))],
    )


def prefixed_agent(base_url: str) -> Starlette:
    """The agent lives at `{base_url}/prefix/agent` (card, JSON-RPC and REST)."""
    return build_agent_app(
        echo_variant("echo-prefixed", "Prefixed Echo Agent"), base_url=base_url + PREFIX
    )


def misadvertised_agent(base_url: str) -> Starlette:
    """Served at `base_url`, but every URL in its card points at a closed port."""
    return build_agent_app(
        echo_variant("echo-misadvertised", "Misadvertised Echo Agent"),
        base_url=base_url,
        advertised_url=closed_port_url(),
    )


# --- behaviour variants ------------------------------------------------------------------


class ChunkedStreamer(TaskExecutor):
    """Streams artifact "story" in `CHUNKS` (append after the first, lastChunk on the last)."""

    async def work(self, context: RequestContext, updater: TaskUpdater) -> None:
        await updater.start_work()
        for index, chunk in enumerate(CHUNKS):
            await asyncio.sleep(CHUNK_DELAY)
            await updater.add_artifact(
                [Part(text=chunk)],
                artifact_id="story",
                name="story",
                append=index > 0,
                last_chunk=index == len(CHUNKS) - 1,
            )
        await updater.complete(text_message(updater, "Story streamed."))


class AsksForName(TaskExecutor):
    """First message: input-required ("What name should I greet?"). Next one on the same
    task: completes with artifact "greeting" = "Hello, <text>!".
    """

    async def work(self, context: RequestContext, updater: TaskUpdater) -> None:
        if context.current_task is None:
            await updater.requires_input(text_message(updater, "What name should I greet?"))
            return
        greeting = f"Hello, {context.get_user_input().strip()}!"
        await updater.add_artifact([Part(text=greeting)], name="greeting", last_chunk=True)
        await updater.complete(text_message(updater, greeting))


class NeverFinishes(TaskExecutor):
    """Goes to working and stays there; only a cancel ends the task (CANCELED)."""

    async def work(self, context: RequestContext, updater: TaskUpdater) -> None:
        await updater.start_work(text_message(updater, "Working, and never done."))
        await asyncio.Event().wait()


LONG_STEPS = 12
LONG_STEP_SECONDS = 5.0


class WorksLong(TaskExecutor):
    """Working updates "step <n> of LONG_STEPS", LONG_STEP_SECONDS apart (about a minute in
    all), then completes with artifact "report" = "long work done"."""

    async def work(self, context: RequestContext, updater: TaskUpdater) -> None:
        for step in range(1, LONG_STEPS + 1):
            await updater.start_work(text_message(updater, f"step {step} of {LONG_STEPS}"))
            await asyncio.sleep(LONG_STEP_SECONDS)
        await updater.add_artifact([Part(text="long work done")], name="report", last_chunk=True)
        await updater.complete()


class Mirrors(TaskExecutor):
    """Completes a task with artifact "mirror": the parts of the message it received, with the
    message's metadata as the artifact's (numbers and all, as the agent's SDK read them)."""

    async def work(self, context: RequestContext, updater: TaskUpdater) -> None:
        message = context.message
        metadata = MessageToDict(message).get("metadata") if message is not None else None
        await updater.add_artifact(
            list(message.parts) if message is not None else [],
            artifact_id="mirror",
            name="mirror",
            metadata=metadata,
            last_chunk=True,
        )
        await updater.complete()


def task_spec(
    slug: str, name: str, description: str, make_executor: Callable[[], Any]
) -> AgentSpec:
    return AgentSpec(
        slug=slug,
        name=name,
        description=description,
        skills=(Skill(id=slug, name=name, description=description, tags=("test",)),),
        make_executor=make_executor,
    )


CHUNKED_STREAMER = task_spec(
    "chunked-streamer", "Chunked Streamer", "Streams one artifact in chunks.", ChunkedStreamer
)
ASKS_FOR_INPUT = task_spec(
    "asks-for-input", "Asks For Input", "Asks for a name, then greets it.", AsksForName
)
NEVER_FINISHES = task_spec(
    "never-finishes", "Never Finishes", "Works until cancelled.", NeverFinishes
)
WORKS_LONG = task_spec("works-long", "Works Long", "Works about a minute, step by step.", WorksLong)
MIRROR = task_spec("mirror", "Mirror", "Answers with the parts and metadata it received.", Mirrors)


def chunked_streaming_agent(base_url: str) -> Starlette:
    return build_agent_app(CHUNKED_STREAMER, base_url=base_url)


def input_required_agent(base_url: str) -> Starlette:
    return build_agent_app(ASKS_FOR_INPUT, base_url=base_url)


def long_working_agent(base_url: str) -> Starlette:
    return build_agent_app(WORKS_LONG, base_url=base_url)


def never_finishing_agent(base_url: str) -> Starlette:
    return build_agent_app(NEVER_FINISHES, base_url=base_url)


# --- plain card servers ------------------------------------------------------------------

Card = dict[str, Any] | Callable[[str], dict[str, Any]]


def sample_card(base_url: str, **overrides: Any) -> dict[str, Any]:
    """A valid hybrid card of an echo agent at `base_url`, with top-level `overrides`."""
    return agent_card_to_dict(build_agent_card(ECHO, base_url=base_url)) | overrides


class CardServer:
    """An ASGI app that serves one card at `path` and nothing else; change it at runtime.

    - `card`: a dict, or a function of the request's base URL returning one.
    - `body` (bytes) replaces the card verbatim, with `content_type`.
    - `status` >= 400 answers that status; `redirect_to` answers a redirect (302 unless
      `status` is another 3xx) to that URL.
    JSON answers carry a weak ETag and honour If-None-Match with 304. `hits` counts requests.
    """

    def __init__(
        self,
        card: Card | None = None,
        *,
        path: str = CARD_PATH,
        body: bytes | None = None,
        content_type: str = "application/json",
        status: int = 200,
        redirect_to: str | None = None,
    ) -> None:
        self.card = card if card is not None else sample_card
        self.body = body
        self.content_type = content_type
        self.status = status
        self.redirect_to = redirect_to
        self.hits = 0
        self._app = Starlette(routes=[Route(path, self._endpoint, methods=["GET"])])

    def set_card(self, card: Card) -> None:
        """Serves `card` from the next request on (for refresh and snapshot tests)."""
        self.card = card

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        await self._app(scope, receive, send)

    async def _endpoint(self, request: Request) -> Response:
        self.hits += 1
        if self.redirect_to is not None:
            code = self.status if 300 <= self.status < 400 else 302
            return RedirectResponse(self.redirect_to, status_code=code)
        if self.status >= 400:
            return Response("card server error", status_code=self.status, media_type="text/plain")
        body = self.body
        if body is None:
            card = (
                self.card(str(request.base_url).rstrip("/")) if callable(self.card) else self.card
            )
            body = json.dumps(card).encode()
        etag = f'W/"{hashlib.sha256(body).hexdigest()}"'
        if request.headers.get("if-none-match") == etag:
            return Response(status_code=304, headers={"ETag": etag})
        return Response(
            body, status_code=self.status, media_type=self.content_type, headers={"ETag": etag}
        )


def card_missing_fields_server() -> CardServer:
    """A card with a name only: no description, version, interfaces, capabilities or skills."""
    return CardServer({"name": "Incomplete Agent"})


def non_json_card_server() -> CardServer:
    return CardServer(body=b"<html><body>not a card</body></html>", content_type="text/html")


def oversized_card_server() -> CardServer:
    """A valid card whose JSON is larger than 1 MiB (a padded description)."""
    return CardServer(lambda base_url: sample_card(base_url, description="x" * (ONE_MIB + 1)))


def failing_card_server() -> CardServer:
    return CardServer(status=500)


def redirecting_card_server(target_url: str) -> CardServer:
    """Answers its card path with 302 to `target_url` (a full URL, e.g. another card)."""
    return CardServer(redirect_to=target_url)


# --- routing agents for the team tests -----------------------------------------------------


class Script:
    """What a scripted routing agent answers, call after call.

    Each entry of `steps` decides one answer: a string is the recipient (an agent id, "user",
    "sender"), a dict is the whole `metadata[URI]` of the answer (tagged recipients, reasons,
    handoffs), None is no decision (no metadata at all). When the steps run out, it makes no
    decision. The answer's text is "<slug>: <text received>". `received` keeps, per call, the
    text and the routing metadata the agent got (None without any).
    """

    def __init__(self, slug: str) -> None:
        self.slug = slug
        self.steps: list[Any] = []
        self.received: list[tuple[str, dict[str, Any] | None]] = []

    def load(self, *steps: Any) -> Script:
        """Replaces the steps and forgets what was received (one test's script)."""
        self.steps = list(steps)
        self.received.clear()
        return self

    def answer(self, text: str, routing: dict[str, Any] | None) -> Answer:
        self.received.append((text, routing))
        step = self.steps.pop(0) if self.steps else None
        if isinstance(step, str):
            step = {"recipient": step, "reason": f"{self.slug} step {len(self.received)}"}
        return Answer(f"{self.slug}: {text}", step)


def scripted_agent(
    script: Script, *, versions: tuple[str, ...] = BOTH_VERSIONS, client_routing: bool = True
) -> Callable[[str], Starlette]:
    """A `base_url -> app` factory of an agent that answers with Messages as `script` says and
    declares the client-routing extension (unless `client_routing` is false)."""
    spec = AgentSpec(
        slug=script.slug,
        name=f"Scripted {script.slug}",
        description=f"Routes as its test script says ({script.slug}).",
        skills=(
            Skill(
                id=script.slug,
                name=script.slug,
                description="Scripted answers.",
                tags=(script.slug, "scripted"),
            ),
        ),
        make_executor=lambda: AnsweringExecutor(script.answer),
        client_routing=client_routing,
    )
    return lambda base_url: build_agent_app(spec, base_url=base_url, versions=versions)
