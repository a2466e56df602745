"""Targets: what the gateway sends A2A messages to. A registered agent is built in
(``AgentTarget``); higher apps plug their own kinds in (teams, the relay's own endpoint) with
``register_target_kind``. A target knows how to *run* a message (yield events with relay ids),
*resume* a task whose exchange another relay process started, cancel, refresh and give an
extended card; persistence and streaming are the gateway's.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from django.conf import settings
from django.db import transaction

from tasks_app import streams
from tasks_app.lifecycle import INTERRUPTED
from tasks_app.models import Task
from tasks_app.protocol.errors import (
    UnsupportedOperation,
)

_INTERRUPTED = frozenset(state.value for state in INTERRUPTED)


@dataclass(frozen=True)
class CallContext:
    """Who calls and how: the caller's key, the A2A version it speaks, the extensions it
    activated, and the delegation chain the call belongs to.

    A call the relay makes on behalf of one of its own tasks (a team calling a member) names
    that task as ``parent_task_id``, and may give the ``upstream_context_id`` (the agent's own
    context id) a new task continues."""

    caller: Any
    version: str = "1.0"
    extensions: tuple[str, ...] = ()
    delegation: tuple[str, ...] = ()
    parent_task_id: str | None = None
    upstream_context_id: str = ""
    base_url: str = ""
    """The target's public URL at the relay, for a card the call answers (empty: none)."""
    idempotency_key: str | None = None
    """A send's Idempotency-Key: the task it opens is stored under it (``opening``)."""
    actors: tuple[str, ...] = ()
    """The team members that handed on before this call (``agent:<id>``, oldest first): with
    the relay and the team, the act chain of a token exchanged for it (``hop_tokens``)."""
    caller_token: str = field(default="", repr=False, compare=False)
    """The caller's own bearer JWT, in memory only: taken from the caller (``bearer_token``,
    set for this call by the authentication) when not given. A caller loaded from a stored
    task (a takeover, an expiry) has none."""
    trace: Any = field(default=None, compare=False)
    """The OpenTelemetry context the call's spans go under (None: tracing off, or none)."""

    def __post_init__(self) -> None:
        if not self.caller_token:
            object.__setattr__(self, "caller_token", getattr(self.caller, "bearer_token", ""))


@dataclass(frozen=True)
class Step:
    """One event from a target, in relay ids, and the upstream ids it revealed."""

    event: dict[str, Any]
    upstream_task_id: str = ""
    upstream_context_id: str = ""
    answered: bool = False
    """The call's answer ends here although the task goes on: a direct client would have its
    answer now (a blocking call returned a working task; a stream ended without a final
    state). The steps after it come from following the task."""
    recorded: bool = False
    """The target stored (and published) the event itself, with writes of its own in the same
    transaction (a team: its hop, with the end of the member's task): the driver only takes
    note of where the task now stands."""


@dataclass(frozen=True)
class Published:
    """An event recorded for a task, for the task's streams once its transaction committed."""

    task_id: str
    sequence: int
    event: dict[str, Any]
    final: bool

    async def send(self) -> None:
        await streams.publish(self.task_id, self.sequence, self.event, final=self.final)


@dataclass
class Target:
    """Something that answers A2A messages. Subclasses implement ``run`` and may override
    ``cancel_upstream``, ``refresh`` and ``extended_card``."""

    kind: str
    id: str
    name: str = ""
    streaming: bool = True
    extended_card_declared: bool = False
    required_extensions: tuple[str, ...] = ()
    declared_extensions: tuple[str, ...] = ()
    agent_id: str | None = None
    announces_task: bool = False
    """A stream gives the task at once, before the target's first event (a team: its first
    member may take long to answer). An agent's stream begins with the agent's own first
    event, as called directly."""
    extra: dict[str, Any] = field(default_factory=dict)

    def run(
        self, task: Task, request: dict[str, Any], ctx: CallContext, *, stream: bool
    ) -> AsyncIterator[Step]:
        raise NotImplementedError

    async def resume(self, task: Task, ctx: CallContext) -> AsyncIterator[Step]:
        """Follows a task whose exchange another relay process started (and died with) until
        it ends. Targets that cannot raise UnsupportedOperation saying why; the task then
        ends failed with that reason."""
        raise UnsupportedOperation(
            f"the relay process that ran this {self.kind}'s task stopped, and a {self.kind} "
            "cannot be resumed by another process"
        )
        yield  # an async generator, like the targets that can

    async def cancel_upstream(self, task: Task, ctx: CallContext) -> None:
        """Asks whoever works on the task to stop. Raises A2AError when they refuse."""

    async def refresh(self, task: Task, ctx: CallContext) -> Step | None:
        """The task's current state from upstream, or None when there is nothing fresher."""
        return None

    async def extended_card(self, ctx: CallContext) -> dict[str, Any]:
        raise UnsupportedOperation("this agent declares no extended card")

    def owns(self, task: Task) -> bool:
        return task.target_kind == self.kind and task.target_id == self.id


# --- Targets ------------------------------------------------------------------------------


TargetResolver = Callable[[str], Target | None]
_resolvers: dict[str, TargetResolver] = {}


def register_target_kind(kind: str, resolver: TargetResolver) -> None:
    """Higher apps (teams, the relay's own endpoint) plug their targets in here."""
    _resolvers[kind] = resolver


def target_kind_registered(kind: str) -> bool:
    """Whether some app plugged targets of this kind in (``register_target_kind``)."""
    return kind in _resolvers


def resolve_target(kind: str, target_id: str) -> Target | None:
    """The target, or None when it does not exist or may not be called (disabled)."""
    resolver = _resolvers.get(kind)
    return resolver(target_id) if resolver else None


T = TypeVar("T")


class TargetCache(Generic[T]):
    """What a loader read about targets, per process and per id, for ``lifetime()`` seconds:
    resolving a target costs queries, and most calls go to the same few targets. Whatever
    changes a target in this process calls ``forget`` (through signals the apps connect), so
    its next call reads it afresh; other processes see the change within the lifetime. Missing
    targets (the loader's None) are not kept, so a new one is callable at once everywhere.
    """

    def __init__(self, load: Callable[[str], T | None], lifetime: Callable[[], float]) -> None:
        self._load = load
        self._lifetime = lifetime
        self._entries: dict[str, tuple[float, T]] = {}
        self._generation = 0

    def get(self, target_id: str) -> T | None:
        cached = self._entries.get(target_id)
        if cached is not None and cached[0] > time.monotonic():
            return cached[1]
        generation = self._generation
        loaded = self._load(target_id)
        lifetime = self._lifetime()
        # Not kept when a target changed meanwhile: this read may predate the change.
        if loaded is not None and lifetime > 0 and generation == self._generation:
            self._entries[target_id] = (time.monotonic() + lifetime, loaded)
        return loaded

    def forget(self, target_id: str | None = None) -> None:
        """Drops one entry (all without ``target_id``), now and again when the current
        transaction commits: a read in between may see the rows as they were before."""
        self._drop(target_id)
        if transaction.get_connection().in_atomic_block:
            transaction.on_commit(lambda: self._drop(target_id))

    def _drop(self, target_id: str | None) -> None:
        self._generation += 1
        if target_id is None:
            self._entries.clear()
        else:
            self._entries.pop(target_id, None)


def target_cache_seconds() -> float:
    """How long a process keeps a target it loaded (RELAY_TARGET_CACHE_SECONDS)."""
    return settings.RELAY_TARGET_CACHE_SECONDS
