"""The health probes: what one agent is asked, at three levels, and what its answers mean.

- ``card``: its card URL answers a card that parses. A card whose content changed comes back
  with the round (``AgentRound.changed_card``) so the caller stores it as a new snapshot.
- ``transport``: the interface the gateway would use (its version and binding, through
  ``tasks_app.upstream``) answers GetTask for an id nobody has with TaskNotFound. Any other
  answer is a protocol error.
- For an MCP server registered as an agent, every level is an MCP ``initialize`` and
  ``tools/list`` (``registry.mcp_servers``): the server answers as an MCP server, and the card
  written from its tools comes back with the round when the tools changed.
- ``readiness``: a real message (SendMessage) is answered with a message, or a task that did
  not fail. Opt-in per agent.

Every request goes through the relay's outbound client (SSRF guard) with the agent's
credentials, under the agent's probe timeout. Failures carry the stable categories of
``tasks_app.upstream`` (dns, refused, tls, timeout, http_status, protocol) plus
``invalid_card`` and ``unsafe_url``. Nothing here touches the database.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit

import httpx

from registry.cards import InvalidCardError, content_hash, parse_card
from registry.fetching import LEGACY_PATH, FetchedCard
from relay_project import outbound
from tasks_app import upstream
from tasks_app.protocol import events as a2a_events
from tasks_app.protocol.errors import A2AError, InvalidAgentResponse, TaskNotFound
from tasks_app.protocol.versions import Operation

CARD = "card"
TRANSPORT = "transport"
READINESS = "readiness"
PROBE_TASK_PREFIX = "relay-health-probe-"
FAILED_TASK_STATES = {"TASK_STATE_FAILED", "TASK_STATE_REJECTED"}
DETAIL_LENGTH = 500


@dataclass(frozen=True)
class ProbeTarget:
    """What the probes need to know about one agent (read from its row beforehand)."""

    agent_id: str
    card_url: str
    card_hash: str = ""
    interfaces: tuple[dict[str, str], ...] = ()
    invocation_url: str = ""
    headers: tuple[tuple[str, str], ...] = field(default=(), repr=False)
    levels: tuple[str, ...] = (CARD, TRANSPORT)
    timeout: float = 5.0
    readiness_text: str = "ping"
    max_card_bytes: int = 1024 * 1024
    mcp_server: bool = False

    @property
    def deepest(self) -> str:
        """The level that says whether the agent can take work."""
        return TRANSPORT if TRANSPORT in self.levels else CARD


@dataclass(frozen=True)
class LevelResult:
    level: str
    ok: bool
    latency_ms: float
    category: str = ""
    detail: str = ""


@dataclass
class AgentRound:
    """One agent's probe round: a result per level, and its card when that changed."""

    target: ProbeTarget
    results: list[LevelResult]
    checked_at: datetime
    changed_card: FetchedCard | None = None


class ProbeFailedError(Exception):
    def __init__(self, category: str, detail: str) -> None:
        super().__init__(detail)
        self.category = category
        self.detail = detail


async def probe_agent(target: ProbeTarget, *, client: httpx.AsyncClient) -> AgentRound:
    """Runs the target's levels concurrently, each bounded by its timeout. Never raises for
    anything the agent does."""
    checked_at = datetime.now(UTC)
    changed: list[FetchedCard] = []
    runners = {
        CARD: lambda: _card(target, client, changed),
        TRANSPORT: lambda: _transport(target, client),
        READINESS: lambda: _readiness(target, client),
    }
    if target.mcp_server:
        runners = {
            CARD: lambda: _mcp_tools(target, changed),
            TRANSPORT: lambda: _mcp_tools(target, []),
            READINESS: lambda: _mcp_tools(target, []),
        }
    results = await asyncio.gather(
        *(_timed(level, target, runners[level]) for level in target.levels)
    )
    return AgentRound(target, list(results), checked_at, changed[0] if changed else None)


async def _timed(level: str, target: ProbeTarget, run) -> LevelResult:
    started = time.perf_counter()
    try:
        async with asyncio.timeout(target.timeout):
            await run()
    except ProbeFailedError as failure:
        return _result(level, started, failure.category, failure.detail)
    except TimeoutError:
        return _result(
            level,
            started,
            "timeout",
            f"agent {target.agent_id!r} did not answer within {target.timeout:g} s",
        )
    except outbound.UnsafeURLError as error:
        return _result(level, started, "unsafe_url", str(error))
    except upstream.UpstreamError as error:
        return _result(level, started, error.category, error.message)
    except httpx.HTTPError as error:
        failure = upstream.classify(error, target.agent_id)
        return _result(level, started, failure.category, failure.message)
    except Exception as error:  # noqa: BLE001 - one agent's oddity must not stop the sweep
        return _result(level, started, "protocol", f"{type(error).__name__}: {error}")
    return LevelResult(level, True, _elapsed(started))


def _result(level: str, started: float, category: str, detail: str) -> LevelResult:
    return LevelResult(level, False, _elapsed(started), category, detail[:DETAIL_LENGTH])


def _elapsed(started: float) -> float:
    return round((time.perf_counter() - started) * 1000, 2)


async def _card(target: ProbeTarget, client: httpx.AsyncClient, changed: list[FetchedCard]) -> None:
    name = f"agent {target.agent_id!r}"
    headers = {"Accept": "application/json", **dict(target.headers)}
    async with client.stream(
        "GET", target.card_url, headers=headers, timeout=target.timeout
    ) as response:
        if response.status_code >= 400:
            raise ProbeFailedError(
                "http_status", f"{name}: its card URL answered HTTP {response.status_code}"
            )
        try:
            body = await outbound.aread_limited(response, target.max_card_bytes)
        except outbound.ResponseTooLargeError as error:
            raise ProbeFailedError(
                "invalid_card", f"{name}: its card is larger than {error.limit} bytes"
            ) from error
        final_url = str(response.url)
    try:
        document = json.loads(body)
    except (UnicodeDecodeError, ValueError) as error:
        raise ProbeFailedError(
            "invalid_card", f"{name}: its card URL did not return JSON"
        ) from error
    if isinstance(document, dict) and content_hash(document) == target.card_hash:
        return  # the card the registry holds, which parsed when it was stored
    try:
        card = parse_card(document, legacy_path=urlsplit(final_url).path.endswith(LEGACY_PATH))
    except InvalidCardError as error:
        raise ProbeFailedError("invalid_card", f"{name}: {error}") from error
    changed.append(FetchedCard(url=final_url, document=document, card=card))


async def _mcp_tools(target: ProbeTarget, changed: list[FetchedCard]) -> None:
    """An MCP server's probe: initialize and list its tools; the card written from them is
    kept in ``changed`` when it differs from the registry's."""
    from registry import mcp_servers
    from registry.fetching import CardFetchError

    try:
        server_info, tools = await mcp_servers.list_tools(target.card_url, dict(target.headers))
    except CardFetchError as error:
        category = {"not_mcp": "protocol", "unreachable": "refused"}.get(error.code, error.code)
        raise ProbeFailedError(category, f"agent {target.agent_id!r}: {error.message}") from error
    document = mcp_servers.card_document(target.card_url, server_info, tools)
    if content_hash(document) == target.card_hash:
        return
    try:
        card = parse_card(document)
    except InvalidCardError as error:
        raise ProbeFailedError("invalid_card", f"agent {target.agent_id!r}: {error}") from error
    changed.append(FetchedCard(url=target.card_url, document=document, card=card))


def _endpoint(target: ProbeTarget) -> upstream.Endpoint:
    return upstream.choose_endpoint(
        agent_id=target.agent_id,
        interfaces=target.interfaces,
        invocation_url=target.invocation_url,
        headers=dict(target.headers),
    )


async def _transport(target: ProbeTarget, client: httpx.AsyncClient) -> None:
    endpoint = _endpoint(target)
    probe_id = PROBE_TASK_PREFIX + uuid.uuid4().hex
    name = f"agent {target.agent_id!r}"
    try:
        answer = await upstream.call(
            endpoint, Operation.GET_TASK, {"id": probe_id}, timeout=target.timeout, client=client
        )
    except TaskNotFound:
        return
    except InvalidAgentResponse as error:
        raise ProbeFailedError("protocol", error.message) from error
    except A2AError as error:
        raise ProbeFailedError(
            "protocol",
            f"{name} answered GetTask for an unknown task with "
            f"{type(error).__name__} ({error.message}), not TaskNotFound",
        ) from error
    raise ProbeFailedError(
        "protocol",
        f"{name} answered GetTask for an unknown task with {_shape(answer)}, not TaskNotFound",
    )


async def _readiness(target: ProbeTarget, client: httpx.AsyncClient) -> None:
    endpoint = _endpoint(target)
    name = f"agent {target.agent_id!r}"
    request = {
        "message": a2a_events.message(
            message_id=PROBE_TASK_PREFIX + uuid.uuid4().hex,
            role=a2a_events.ROLE_USER,
            parts=a2a_events.text_parts(target.readiness_text),
        )
    }
    try:
        answer = await upstream.call(
            endpoint, Operation.SEND, request, timeout=target.timeout, client=client
        )
    except InvalidAgentResponse as error:
        raise ProbeFailedError("protocol", error.message) from error
    except A2AError as error:
        raise ProbeFailedError(
            "protocol",
            f"{name} refused the readiness message: {type(error).__name__} ({error.message})",
        ) from error
    if not isinstance(answer, dict) or not ({"message", "task"} & set(answer)):
        raise ProbeFailedError(
            "protocol", f"{name} answered the readiness message with {_shape(answer)}"
        )
    state = (answer.get("task") or {}).get("status", {}).get("state")
    if state in FAILED_TASK_STATES:
        raise ProbeFailedError(
            "protocol", f"{name} answered the readiness message with a task in {state}"
        )


def _shape(answer: Any) -> str:
    if isinstance(answer, dict):
        return "an object with " + (", ".join(sorted(answer)[:5]) or "no fields")
    return type(answer).__name__
