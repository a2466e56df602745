"""Deterministic A2A agents served with the official a2a-sdk: the demo team and test doubles.

No Django and no model calls: the same message always gets the same answer, so the relay's
end-to-end tests and the demo can assert on it.

One builder, `build_agent_app(spec, base_url=...)`, turns an `AgentSpec` into a Starlette app
that serves, all at `base_url` (which may carry a path prefix):

- the agent card at `{base_url}/.well-known/agent-card.json`;
- JSON-RPC at `{base_url}` (POST), with the 1.0 method names (`SendMessage`, ...) and, when 0.3
  is enabled, the 0.3 names (`message/send`, ...) on the same URL;
- HTTP+JSON at `{base_url}/message:send`, ... and, with 0.3, `{base_url}/v1/message:send`, ...

`versions` picks the protocol surface and the card shape:

- `("1.0", "0.3")` (default): both, and a hybrid card (1.0 `supportedInterfaces` plus the 0.3
  `url`, `preferredTransport`, `protocolVersion`, `additionalInterfaces`);
- `("1.0",)`: 1.0 only, a pure 1.0 card;
- `("0.3",)`: 0.3 only (1.0 JSON-RPC names answer -32601, 1.0 REST paths 404) and a pure
  0.3 card (`protocolVersion` "0.3.0", no `supportedInterfaces`).

The four demo agents (`DEMO_AGENTS`) are `triage`, `researcher`, `writer` and `echo`; their
rules are in the docstrings of `triage_answer`, `researcher_answer`, `draft_for` and
`echo_answer`. Run them with `serve_demo_agents()` or `python -m routing.demo`.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import uuid
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from a2a.compat.v0_3.conversions import to_compat_agent_card
from a2a.helpers import new_task
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes, create_rest_routes
from a2a.server.tasks import InMemoryPushNotificationConfigStore, InMemoryTaskStore, TaskUpdater
from a2a.types import (
    AgentCapabilities,
    AgentCard,
    AgentExtension,
    AgentInterface,
    AgentSkill,
    Message,
    Part,
    Role,
    TaskState,
)
from a2a.utils.errors import UnsupportedOperationError
from google.protobuf.json_format import MessageToDict
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from registry.extensions import CLIENT_ROUTING_URI
from routing.demo.serve import AppFactory, ServerGroup, serve_many

CARD_PATH = "/.well-known/agent-card.json"
BOTH_VERSIONS = ("1.0", "0.3")
SHUTDOWN_DRAIN_TIMEOUT = 2.0
"""Seconds an app gives its running tasks to wind down when the server stops."""


# --- specs ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Skill:
    id: str
    name: str
    description: str
    tags: tuple[str, ...]
    examples: tuple[str, ...] = ()


@dataclass(frozen=True)
class AgentSpec:
    """What an agent is (its card) and how it answers (`make_executor`, called once per app)."""

    slug: str
    name: str
    description: str
    skills: tuple[Skill, ...]
    make_executor: Callable[[], AgentExecutor]
    version: str = "1.0.0"
    client_routing: bool = False
    streaming: bool = True


# --- what the agents say: pure functions of (text, routing metadata) ---------------------


@dataclass(frozen=True)
class Answer:
    """An agent's reply text and, when it speaks client-routing, its `metadata[URI]` entry."""

    text: str
    routing: dict[str, Any] | None = None


STOPWORDS = frozenset(
    # a word list reads better than fifty quoted strings
    "a an and are as at be but by can could do for from i in into is it "  # noqa: SIM905
    "me my of on or our please so than that the their this to us we what when which "
    "who why will with would you your agent agents".split()
)


def stem(word: str) -> str:
    """A crude, deterministic stem so "research", "researcher" and "researches" meet."""
    for suffix in ("ing", "ers", "er", "es", "ed", "s"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            word = word[: -len(suffix)]
            break
    return word[:-1] if word.endswith("e") and len(word) > 3 else word


def content_words(text: str) -> list[str]:
    """Lower-case words of `text` without stopwords, in order of first appearance."""
    seen: dict[str, None] = {}
    for word in re.findall(r"[a-z0-9]+", text.lower()):
        if word not in STOPWORDS:
            seen.setdefault(word, None)
    return list(seen)


def peer_vocabulary(peer: dict[str, Any]) -> set[str]:
    """Stems of a peer's id, name, description and capabilities (as the router sends them)."""
    capabilities = peer.get("capabilities") or []
    if isinstance(capabilities, str):
        capabilities = [capabilities]
    text = " ".join(
        [str(peer.get(key) or "") for key in ("id", "name", "description")]
        + [str(c) for c in capabilities]
    )
    return {stem(word) for word in content_words(text)}


def best_peer(text: str, peers: Sequence[dict[str, Any]]) -> tuple[dict[str, Any], list[str]]:
    """The peer sharing the most words with `text` (ties: the first) and the words it matched.

    Returns ({}, []) when no peer shares a word.
    """
    words = content_words(text)
    best: tuple[dict[str, Any], list[str]] = ({}, [])
    for peer in peers:
        if not isinstance(peer, dict):
            continue
        vocabulary = peer_vocabulary(peer)
        matched = [word for word in words if stem(word) in vocabulary]
        if len(matched) > len(best[1]):
            best = (peer, matched)
    return best


def triage_answer(text: str, routing: dict[str, Any] | None) -> Answer:
    """The triage agent, the team's default agent.

    - Without client-routing metadata: a polite acknowledgement of the text.
    - From the user (`sender` "user" or absent): the request goes to the peer in `agentCards`
      whose id/name/description/capabilities share the most words with it (ties: the first
      listed). The answer repeats the request text, so it is what that peer receives, with
      `{"recipient": <peer id>, "reason": "matched words: ..."}`. When no peer matches, triage
      answers the user itself (`recipient` "user").
    - From an agent (finished work coming back): the text is forwarded unchanged to the user.
    """
    if routing is None:
        return Answer(f'Hello from the triage agent. You said: "{text}".')
    sender = routing.get("sender") or "user"
    if sender != "user":
        return Answer(text, {"recipient": "user", "reason": f"finished work from {sender}"})
    peer, matched = best_peer(text, routing.get("agentCards") or [])
    if not peer:
        return Answer(
            f'No teammate matches "{text}", so the triage agent answers itself: request noted.',
            {"recipient": "user", "reason": "no peer matched"},
        )
    return Answer(
        text, {"recipient": str(peer.get("id")), "reason": "matched words: " + ", ".join(matched)}
    )


def research_notes(text: str) -> str:
    """Deterministic "research notes" on the key terms of `text`."""
    terms = content_words(text)[:5] or ["(none)"]
    return (
        f'Research notes on "{text.strip()}":\n'
        f"- key terms: {', '.join(terms)}\n"
        "- sources checked: 3 (offline demo corpus)\n"
        "- finding: the key terms above are well documented; no conflicting sources."
    )


def researcher_answer(text: str, routing: dict[str, Any] | None) -> Answer:
    """The researcher, checked in this order:

    1. The text asks to write or draft ("write", "writing", "draft", ...) and not to
       research: not its job, so the message goes back (`recipient` "sender").
    2. Otherwise it answers with `research_notes(text)`, and:
       - names the first peer with capability "writing" as `recipient` when the text asks
         for a report or for writing ("report", "write", "draft", ...) and such a peer is in
         `agentCards` ("research the weather and write a report" goes on to the writer);
       - else makes no routing decision (no metadata), so the router decides.
    Without client-routing metadata it answers the same texts with no metadata at all.
    """
    stems = {stem(word) for word in content_words(text)}
    asks_for_writing = bool(stems & {"writ", "draft"})
    if asks_for_writing and "research" not in stems:
        return Answer(
            "The researcher only does research, not writing or drafting; sending this back.",
            None if routing is None else {"recipient": "sender", "reason": "not research"},
        )
    notes = research_notes(text)
    if routing is None or not (asks_for_writing or "report" in stems):
        return Answer(notes)
    writers = [
        peer
        for peer in routing.get("agentCards") or []
        if isinstance(peer, dict) and "writing" in (peer.get("capabilities") or [])
    ]
    if not writers:
        return Answer(notes)
    return Answer(
        notes, {"recipient": str(writers[0].get("id")), "reason": "a report needs a writer"}
    )


def echo_answer(text: str, routing: dict[str, Any] | None) -> Answer:
    """The echo agent: the same text back."""
    return Answer(text)


def draft_for(text: str) -> str:
    """The writer's deterministic draft: a title from the first words, then the text."""
    words = text.split()
    title = " ".join(words[:6]).strip(" .,:;!?").capitalize() or "Untitled"
    return f"DRAFT: {title}\n\n{text.strip()}\n\n(Drafted by the writer agent.)"


# --- executors ---------------------------------------------------------------------------


def incoming_routing(message: Message | None) -> dict[str, Any] | None:
    """The client-routing entry of an incoming message's metadata, or None without one."""
    if message is None or not message.HasField("metadata"):
        return None
    entry = MessageToDict(message.metadata).get(CLIENT_ROUTING_URI)
    return entry if isinstance(entry, dict) else None


def agent_message(context: RequestContext, answer: Answer) -> Message:
    message = Message(
        message_id=str(uuid.uuid4()),
        role=Role.ROLE_AGENT,
        context_id=context.context_id or "",
        parts=[Part(text=answer.text)],
    )
    if answer.routing is not None:
        message.metadata.update({CLIENT_ROUTING_URI: answer.routing})
        message.extensions.append(CLIENT_ROUTING_URI)
    return message


class AnsweringExecutor(AgentExecutor):
    """Answers each message with one Message computed by `answer(text, routing)`."""

    def __init__(self, answer: Callable[[str, dict[str, Any] | None], Answer]) -> None:
        self.answer = answer

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        answer = self.answer(context.get_user_input(), incoming_routing(context.message))
        await event_queue.enqueue_event(agent_message(context, answer))

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        raise UnsupportedOperationError(message="this agent answers with messages, not tasks")


class TaskExecutor(AgentExecutor):
    """Base for agents that answer with a Task: opens (or resumes) it, then calls `work`.

    Cancelling publishes CANCELED; the SDK then cancels the running `execute`.
    """

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        task = context.current_task
        if task is None:
            task = new_task(
                context.task_id or "",
                context.context_id or "",
                TaskState.TASK_STATE_SUBMITTED,
                history=[context.message] if context.message else [],
            )
            await event_queue.enqueue_event(task)
        await self.work(context, TaskUpdater(event_queue, task.id, task.context_id))

    async def work(self, context: RequestContext, updater: TaskUpdater) -> None:
        raise NotImplementedError

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        await TaskUpdater(event_queue, context.task_id or "", context.context_id or "").cancel()


def text_message(updater: TaskUpdater, text: str) -> Message:
    return updater.new_agent_message([Part(text=text)])


class WriterExecutor(TaskExecutor):
    """Completes a task with one artifact, "draft", holding `draft_for(text)`."""

    async def work(self, context: RequestContext, updater: TaskUpdater) -> None:
        await updater.start_work()
        await updater.add_artifact(
            [Part(text=draft_for(context.get_user_input()))], name="draft", last_chunk=True
        )
        await updater.complete(text_message(updater, "Draft ready."))


# --- the demo agents ---------------------------------------------------------------------

TRIAGE = AgentSpec(
    slug="triage",
    name="Triage Agent",
    description="Reads each request and hands it to the teammate whose skills match it best.",
    skills=(
        Skill(
            id="triage",
            name="Triage",
            description="Chooses the teammate for a request by matching words with its skills.",
            tags=("triage", "routing", "dispatch"),
            examples=("please research the weather",),
        ),
    ),
    make_executor=lambda: AnsweringExecutor(triage_answer),
    client_routing=True,
)

RESEARCHER = AgentSpec(
    slug="researcher",
    name="Research Agent",
    description="Searches its offline notes and summarizes the facts on a topic.",
    skills=(
        Skill(
            id="research",
            name="Research",
            description="Short research notes: key terms, sources checked, finding.",
            tags=("research", "search", "facts", "summarize"),
            examples=("research the weather in Lisbon", "research solar power for a report"),
        ),
    ),
    make_executor=lambda: AnsweringExecutor(researcher_answer),
    client_routing=True,
)

WRITER = AgentSpec(
    slug="writer",
    name="Writer Agent",
    description="Turns notes into a short draft document.",
    skills=(
        Skill(
            id="draft",
            name="Draft",
            description="Completes a task with a draft artifact built from the input text.",
            tags=("writing", "drafting", "editing"),
            examples=("draft a note about the weather",),
        ),
    ),
    make_executor=WriterExecutor,
)

ECHO = AgentSpec(
    slug="echo",
    name="Echo Agent",
    description="Answers with exactly the text it received.",
    skills=(
        Skill(
            id="echo",
            name="Echo",
            description="Repeats the message text.",
            tags=("echo", "test"),
            examples=("hello",),
        ),
    ),
    make_executor=lambda: AnsweringExecutor(echo_answer),
)

DEMO_AGENTS: tuple[AgentSpec, ...] = (TRIAGE, RESEARCHER, WRITER, ECHO)


# --- cards -------------------------------------------------------------------------------


def interfaces(url: str, versions: Iterable[str]) -> list[AgentInterface]:
    """JSON-RPC then HTTP+JSON for each version, all on `url` (1.0 first: preferred)."""
    wire_version = {"1.0": "1.0", "0.3": "0.3"}
    return [
        AgentInterface(url=url, protocol_binding=binding, protocol_version=wire_version[version])
        for version in versions
        for binding in ("JSONRPC", "HTTP+JSON")
    ]


def build_agent_card(
    spec: AgentSpec, *, base_url: str, versions: Sequence[str] = BOTH_VERSIONS
) -> AgentCard:
    """The agent's card; every interface points at `base_url`."""
    extensions = []
    if spec.client_routing:
        extensions.append(
            AgentExtension(
                uri=CLIENT_ROUTING_URI,
                description="Receives peer agents and chooses the next recipient",
                required=False,
            )
        )
    return AgentCard(
        name=spec.name,
        description=spec.description,
        version=spec.version,
        supported_interfaces=interfaces(base_url.rstrip("/"), versions),
        capabilities=AgentCapabilities(streaming=spec.streaming, extensions=extensions),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[agent_skill(skill) for skill in spec.skills],
    )


def agent_skill(skill: Skill) -> AgentSkill:
    return AgentSkill(
        id=skill.id,
        name=skill.name,
        description=skill.description,
        tags=list(skill.tags),
        examples=list(skill.examples),
    )


def v0_3_card_json(card: AgentCard) -> dict[str, Any]:
    """A pure 0.3 card (protocolVersion "0.3.0", url, preferredTransport, additionalInterfaces).

    `card` must have 0.3 interfaces; 1.0 ones are left out.
    """
    legacy = AgentCard()
    legacy.CopyFrom(card)
    del legacy.supported_interfaces[:]
    for interface in card.supported_interfaces:
        if interface.protocol_version.startswith("0."):
            legacy.supported_interfaces.append(interface)
            legacy.supported_interfaces[-1].protocol_version = "0.3.0"
    return to_compat_agent_card(legacy).model_dump(mode="json", exclude_none=True)


def json_route(path: str, body: dict[str, Any]) -> Route:
    """GET `path` answers `body` as JSON."""

    async def endpoint(request: Request) -> Response:
        return JSONResponse(body)

    return Route(path, endpoint, methods=["GET"])


# --- routes and app ----------------------------------------------------------------------


def path_of(base_url: str) -> str:
    """The path prefix of `base_url` without a trailing slash ("" for an origin)."""
    return urlsplit(base_url).path.rstrip("/")


def refuse_v1_0_methods(endpoint: Callable[[Request], Any]) -> Callable[[Request], Any]:
    """Wraps a JSON-RPC endpoint so 1.0 method names (no "/") answer -32601, as a 0.3 agent."""

    async def only_v0_3(request: Request) -> Response:
        try:
            body = await request.json()  # cached by Starlette, so `endpoint` reads it again
        except ValueError:
            body = None
        method = body.get("method") if isinstance(body, dict) else None
        if isinstance(method, str) and "/" not in method:
            error = {"code": -32601, "message": f"Method not found: {method}"}
            return JSONResponse({"jsonrpc": "2.0", "id": body.get("id"), "error": error})
        return await endpoint(request)

    return only_v0_3


def agent_routes(
    handler: DefaultRequestHandler, *, prefix: str, versions: Sequence[str]
) -> list[BaseRoute]:
    """JSON-RPC at `prefix` (or "/") and HTTP+JSON under it, for the given versions."""
    compat = "0.3" in versions
    jsonrpc = create_jsonrpc_routes(handler, rpc_url=prefix or "/", enable_v0_3_compat=compat)
    rest = create_rest_routes(handler, enable_v0_3_compat=compat, path_prefix=prefix)
    if "1.0" in versions:
        return [*jsonrpc, *rest]
    only_v0_3 = [
        Route(route.path, refuse_v1_0_methods(route.endpoint), methods=["POST"])
        for route in jsonrpc
    ]
    v0_3_rest = [r for r in rest if isinstance(r, Route) and r.path.startswith(f"{prefix}/v1/")]
    return [*only_v0_3, *v0_3_rest]


def build_agent_app(
    spec: AgentSpec,
    *,
    base_url: str,
    versions: Sequence[str] = BOTH_VERSIONS,
    advertised_url: str | None = None,
    card_routes: bool = True,
    extra_routes: Sequence[BaseRoute] = (),
    push_configs: bool = False,
    extended_skills: Sequence[Skill] = (),
) -> Starlette:
    """A Starlette app serving `spec` at `base_url` (see the module docstring for the layout).

    - `advertised_url`: the URL put in the card instead of `base_url` (a test double for
      agents whose card lies about where they are); its path must equal `base_url`'s.
    - `card_routes=False` leaves out the card, so a caller can serve another shape of it
      through `extra_routes` (routes matched before the A2A ones).
    - `push_configs`: keeps push-notification configs (the SDK's in-memory store; nothing is
      sent) and declares the capability.
    - `extended_skills`: declares an extended card, the public one with these skills added.
    """
    prefix = path_of(base_url)
    card = build_agent_card(spec, base_url=advertised_url or base_url, versions=versions)
    if push_configs:  # an optional field: set only when true, so other cards stay as they were
        card.capabilities.push_notifications = True
    extended = None
    if extended_skills:
        card.capabilities.extended_agent_card = True
        extended = AgentCard()
        extended.CopyFrom(card)
        extended.skills.extend(agent_skill(skill) for skill in extended_skills)
    handler = DefaultRequestHandler(
        agent_executor=spec.make_executor(),
        task_store=InMemoryTaskStore(),
        agent_card=card,
        push_config_store=InMemoryPushNotificationConfigStore() if push_configs else None,
        extended_agent_card=extended,
    )
    routes: list[BaseRoute] = list(extra_routes)
    if card_routes and "1.0" in versions:
        routes += create_agent_card_routes(card, card_url=prefix + CARD_PATH)
    elif card_routes:
        routes.append(json_route(prefix + CARD_PATH, v0_3_card_json(card)))
    routes += agent_routes(handler, prefix=prefix, versions=versions)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        yield
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(handler.aclose(), SHUTDOWN_DRAIN_TIMEOUT)

    return Starlette(routes=routes, lifespan=lifespan)


def app_factory(spec: AgentSpec, **options: Any) -> AppFactory:
    """`base_url -> app` for `serve`: the card then carries the real, bound URL."""

    def make(base_url: str) -> Starlette:
        return build_agent_app(spec, base_url=base_url, **options)

    return make


def serve_demo_agents(host: str = "127.0.0.1", first_port: int = 0) -> ServerGroup:
    """Serves triage, researcher, writer and echo on consecutive ports from `first_port`
    (free ports for 0). Returns the running group; `group.urls` maps slug -> base URL.
    """
    return serve_many({spec.slug: app_factory(spec) for spec in DEMO_AGENTS}, host, first_port)
