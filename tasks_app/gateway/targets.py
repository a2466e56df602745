"""Targets: what the gateway sends A2A messages to. A registered agent is built in
(``AgentTarget``); higher apps plug their own kinds in (teams, the relay's own endpoint) with
``register_target_kind``. A target knows how to *run* a message (yield events with relay ids),
*resume* a task whose exchange another relay process started, cancel, refresh and give an
extended card; persistence and streaming are the gateway's.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field, replace
from typing import Any, Generic, Protocol, TypeVar

from django.conf import settings
from django.db import transaction

from tasks_app import delegation, snapshots, streams, upstream
from tasks_app.cards import agent_card_for_relay, card_for_reader
from tasks_app.lifecycle import INTERRUPTED
from tasks_app.models import Task
from tasks_app.protocol.convert import agent_card_to_v1
from tasks_app.protocol.errors import (
    A2AError,
    InvalidAgentResponse,
    InvalidParams,
    UnsupportedOperation,
)
from tasks_app.protocol.versions import ProtocolVersion

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


def resolve_target(kind: str, target_id: str) -> Target | None:
    """The target, or None when it does not exist or may not be called (disabled)."""
    resolver = _resolvers.get(kind)
    return resolver(target_id) if resolver else None


class CallGuard(Protocol):
    """Passive health for messages sent to agents (the routing app's circuit breaker)."""

    async def admit(self, target: AgentTarget) -> None:
        """Lets the call go, or raises upstream.UpstreamError saying why it may not."""

    async def report(
        self,
        target: AgentTarget,
        *,
        ok: bool,
        category: str = "",
        detail: str = "",
        latency_ms: float | None = None,
    ) -> None:
        """Hears how the call went: ``ok`` once the agent answered, or why it failed."""


class _NoGuard:
    """Lets every call go and hears nothing: the guard while none is plugged in."""

    async def admit(self, target: AgentTarget) -> None:
        return None

    async def report(self, target: AgentTarget, **outcome: Any) -> None:
        return None


_call_guard: CallGuard = _NoGuard()


def register_call_guard(guard: CallGuard | None) -> None:
    """The routing app plugs its circuit breaker in here (None unplugs it)."""
    global _call_guard
    _call_guard = guard if guard is not None else _NoGuard()


class AgentTarget(Target):
    """A registered agent, called over its best interface through ``tasks_app.upstream``."""

    def __init__(self, agent) -> None:
        from registry.services import upstream_auth_headers

        extensions = list(agent.extensions.all())
        super().__init__(
            kind="agent",
            id=agent.pk,
            name=agent.name,
            streaming=agent.streaming,
            extended_card_declared=agent.extended_card,
            required_extensions=tuple(e.uri for e in extensions if e.required),
            declared_extensions=tuple(e.uri for e in extensions),
            agent_id=agent.pk,
        )
        self.endpoint = upstream.choose_endpoint(
            agent_id=agent.pk,
            interfaces=agent.interfaces,
            invocation_url=agent.invocation_url,
            headers=upstream_auth_headers(agent) or None,
        )
        self.extra["stream_idle_seconds"] = agent.stream_idle_seconds
        # The circuit breaker as the row had it; the call guard keeps it up to date.
        self.breaker_row = (agent.breaker_state, agent.breaker_failures, agent.breaker_opened_at)

    async def run(self, task, request, ctx, *, stream):
        await _call_guard.admit(self)
        async with contextlib.aclosing(
            self._guarded(self._run(task, request, ctx, stream=stream))
        ) as steps:
            async for step in steps:
                yield step

    async def resume(self, task, ctx):
        """Follows the agent's task from where another relay process left it: over
        SubscribeToTask when the agent streams (GetTask polls when it refuses or goes
        silent), over GetTask polls otherwise."""
        if not task.upstream_task_id:
            raise upstream.UpstreamError(
                "protocol",
                "the relay process that carried this exchange stopped before the "
                f"agent {self.id!r} named its task, so the task cannot be followed",
            )
        if task.state in _INTERRUPTED:
            # The client's answer was on its way: if the agent never got it, its task still
            # waits as recorded, and so does the relay's (the client may send it again).
            current = await self.refresh(task, ctx)
            if current is not None and _waits_as_recorded(task, current.event["task"]):
                return
        ids = _ids(task)
        async with contextlib.aclosing(
            self._guarded(self._follow(task, ids, ctx, subscribe=True))
        ) as steps:
            async for step in steps:
                yield step

    async def _guarded(self, steps):
        """The steps, with their outcome reported to the call guard (the circuit breaker):
        a success once the agent's answer is whole (an event that ends the stream, or the
        call's answer), a failure for a transport failure, an answer that is not A2A, or a
        stream that breaks or falls silent before its end, so streams that keep breaking
        mid-way open the breaker as calls that fail at once do."""
        started = time.perf_counter()
        reported = False
        try:
            # Closed here when the caller stops early, as the driver closes these steps: left
            # to the garbage collector, an upstream stream would close in another task.
            async with contextlib.aclosing(steps):
                async for step in steps:
                    if not reported and (step.answered or upstream.ends_stream(step.event)):
                        reported = True
                        await _call_guard.report(self, ok=True)
                    yield step
            if not reported:
                reported = True
                await _call_guard.report(self, ok=True)
        except (upstream.UpstreamError, InvalidAgentResponse) as error:
            await _call_guard.report(
                self,
                ok=False,
                category=getattr(error, "category", "protocol"),
                detail=error.message,
                latency_ms=(time.perf_counter() - started) * 1000,
            )
            raise
        except A2AError:
            if not reported:  # the agent answered, with a protocol error: it is up
                await _call_guard.report(self, ok=True)
            raise

    async def _run(self, task, request, ctx, *, stream):
        ids = _ids(task)
        outgoing = _upstream_request(request, ids)
        timeout = settings.RELAY_UPSTREAM_TIMEOUT
        if not stream:
            result = await upstream.call(
                self.endpoint,
                _op("SEND"),
                outgoing,
                extensions=ctx.extensions,
                timeout=timeout,
                extra_headers=_delegation_headers(ctx),
            )
            step = _step(result, ids)
            if upstream.ends_stream(step.event):
                yield step
                return
            # A task the agent goes on working on: the caller has its answer, the relay
            # follows the task until it ends.
            yield replace(step, answered=True)
            async for followed in self._follow(task, _ids(task, step), ctx, subscribe=False):
                yield followed
            return
        events = upstream.stream(
            self.endpoint,
            _op("STREAM"),
            outgoing,
            extensions=ctx.extensions,
            timeout=timeout,
            extra_headers=_delegation_headers(ctx),
        )
        # A follow-up turn of a task waiting on its client: some agents (@a2a-js/sdk) open the
        # stream by re-sending the task as it still stands. That is not the turn's answer.
        resent_first = task.state if task.state in _INTERRUPTED else None
        try:
            async for step in self._steps(events, ids, first_event=True):
                ids = _ids(task, step, ids)
                if resent_first is not None:
                    resent = snapshots.state_of(step.event.get("task") or {}) == resent_first
                    resent_first = None
                    if resent:
                        continue
                yield step
                if upstream.ends_stream(step.event):
                    return
        except upstream.StreamSilent:
            if not ids.upstream_task_id:
                raise
        # The stream ended, or fell silent, without a final state: ask the agent for the
        # task and end the caller's stream with it, as the agent itself would; then follow.
        async for step in self._follow(task, ids, ctx, subscribe=False, answered=True):
            yield step

    async def _steps(self, events, ids: snapshots.IdMap, *, first_event: bool):
        """The upstream events as steps, each within the agent's silence limits: the first
        within RELAY_STREAM_FIRST_EVENT_SECONDS (when ``first_event``), every later one
        within the idle limit. Raises upstream.StreamSilent past a limit."""
        limit = settings.RELAY_STREAM_FIRST_EVENT_SECONDS if first_event else self.idle_seconds
        async with contextlib.aclosing(events):
            while True:
                try:
                    async with asyncio.timeout(limit or None):
                        event = await anext(events)
                except StopAsyncIteration:
                    return
                except TimeoutError:
                    raise upstream.StreamSilent(self.id, limit, first=first_event) from None
                step = _step(event, ids)
                ids = _ids(None, step, ids)
                yield step
                first_event, limit = False, self.idle_seconds

    async def _follow(
        self, task: Task, ids: snapshots.IdMap, ctx, *, subscribe: bool, answered: bool = False
    ):
        """Follows the agent's task until it ends or waits on the client: first over
        SubscribeToTask (with ``subscribe``, for an agent that streams), then with GetTask,
        at once and again after pauses that double from a second up to
        RELAY_FOLLOW_POLL_MAX_SECONDS. A snapshot of the agent's (the subscription's first
        event, each poll) comes as the changes since the relay's ``task`` (kept up to date by
        the driver), so streams get each change as an event; the first GetTask snapshot
        comes whole, marked ``answered``, when asked."""
        if subscribe and self.streaming:
            events = upstream.stream(
                self.endpoint,
                _op("SUBSCRIBE"),
                {"id": ids.upstream_task_id},
                extensions=ctx.extensions,
                timeout=settings.RELAY_UPSTREAM_TIMEOUT,
                extra_headers=_delegation_headers(ctx),
            )
            try:
                async for step in self._steps(events, ids, first_event=False):
                    for change in _as_changes(step, task):
                        yield change
                    if upstream.ends_stream(step.event):
                        return
            except (A2AError, upstream.StreamSilent):
                pass  # the agent will not (or no longer) stream this task: ask it instead
        pause = 0.0
        while True:
            if pause:
                await asyncio.sleep(pause)
            result = await upstream.call(
                self.endpoint,
                _op("GET_TASK"),
                {"id": ids.upstream_task_id},
                extensions=ctx.extensions,
                extra_headers=_delegation_headers(ctx),
            )
            step = _step({"task": result}, ids)
            if answered:
                # The caller's answer is the task as the agent gives it, whole.
                yield replace(step, answered=True)
                answered = False
            else:
                for change in _as_changes(step, task):
                    yield change
            if upstream.ends_stream(step.event):
                return
            pause = min(max(pause * 2, 1.0), settings.RELAY_FOLLOW_POLL_MAX_SECONDS)

    @property
    def idle_seconds(self) -> float:
        """The longest silence between two events of this agent's streams."""
        own = self.extra.get("stream_idle_seconds")
        return float(own) if own else settings.RELAY_STREAM_IDLE_SECONDS

    async def cancel_upstream(self, task, ctx):
        if not task.upstream_task_id:
            return
        await upstream.call(
            self.endpoint,
            _op("CANCEL"),
            {"id": task.upstream_task_id},
            extensions=ctx.extensions,
            extra_headers=_delegation_headers(ctx),
        )

    async def refresh(self, task, ctx):
        if not task.upstream_task_id:
            return None
        ids = _ids(task)
        result = await upstream.call(
            self.endpoint,
            _op("GET_TASK"),
            {"id": task.upstream_task_id},
            extensions=ctx.extensions,
            extra_headers=_delegation_headers(ctx),
        )
        return Step(
            {"task": ids.to_relay(result)}, task.upstream_task_id, result.get("contextId", "")
        )

    async def extended_card(self, ctx):
        """The agent's extended card as the relay serves it at ``ctx.base_url``, like its
        public card: the relay's interfaces and security (no URL of the agent's survives);
        the caller's version decides the shape it is sent in."""
        if not self.extended_card_declared:
            raise UnsupportedOperation(f"agent {self.id!r} declares no extended card")
        card = await upstream.call(
            self.endpoint,
            _op("EXTENDED_CARD"),
            {},
            extensions=ctx.extensions,
            extra_headers=_delegation_headers(ctx),
        )
        try:
            relayed = agent_card_for_relay(agent_card_to_v1(card), base_url=ctx.base_url)
            # Canonical 1.0, as the card route gives a 1.0 reader; the call's version shapes it.
            return card_for_reader(relayed, version=ProtocolVersion.V1_0)
        except InvalidParams as error:
            raise InvalidAgentResponse(
                f"agent {self.id!r} answered an extended card that is not one: {error}"
            ) from error


def _waits_as_recorded(task: Task, agent_task: dict[str, Any]) -> bool:
    """Whether the agent's task waits on the client in the very turn the relay recorded: the
    same interrupted state, with the same status message (the time is the relay's own)."""
    from tasks_app.services import snapshot_of

    def turn(status: dict[str, Any]) -> tuple:
        message = status.get("message") or {}
        return status.get("state"), message.get("messageId")

    return turn(agent_task.get("status") or {}) == turn(snapshot_of(task).get("status") or {})


def _as_changes(step: Step, task: Task) -> list[Step]:
    """A step whose event is a whole task, as the changes since the relay's task; any other
    step as it is."""
    if "task" not in step.event:
        return [step]
    from tasks_app.services import snapshot_of

    changes = snapshots.changes_between(snapshot_of(task), step.event["task"])
    return [Step(change, step.upstream_task_id, step.upstream_context_id) for change in changes]


def _ids(
    task: Task | None, step: Step | None = None, ids: snapshots.IdMap | None = None
) -> snapshots.IdMap:
    """The relay's and the agent's ids of a task: from the stored task, or those known so
    far (``ids``), completed by what a step revealed."""
    if ids is None:
        ids = snapshots.IdMap(
            task.id, task.context_id, task.upstream_task_id, task.upstream_context_id
        )
    if step is None or not (step.upstream_task_id or step.upstream_context_id):
        return ids
    return snapshots.IdMap(
        ids.task_id,
        ids.context_id,
        ids.upstream_task_id or step.upstream_task_id,
        ids.upstream_context_id or step.upstream_context_id,
    )


def _delegation_headers(ctx: CallContext) -> dict[str, str]:
    """Who the call is for (X-Relay-Caller, X-Relay-Chain, X-Relay-Signature): set by the
    relay on every call to an agent, never taken from the client."""
    return delegation.outbound_headers(ctx.caller, ctx.delegation)


def _op(name: str):
    from tasks_app.protocol.versions import Operation

    return Operation[name]


def _upstream_request(request: dict[str, Any], ids: snapshots.IdMap) -> dict[str, Any]:
    outgoing = dict(request)
    outgoing["message"] = ids.message_to_upstream(request["message"])
    configuration = dict(request.get("configuration") or {})
    # The relay keeps push configs and returnImmediately to itself: it delivers push
    # notifications and answers early on its own.
    configuration.pop("taskPushNotificationConfig", None)
    configuration.pop("returnImmediately", None)
    if configuration:
        outgoing["configuration"] = configuration
    else:
        outgoing.pop("configuration", None)
    return outgoing


def _step(event: dict[str, Any], ids: snapshots.IdMap) -> Step:
    """Maps an upstream SendMessageResponse or StreamResponse to relay ids."""
    if not isinstance(event, dict) or not event:
        raise InvalidAgentResponse("the agent's answer is empty")
    kind = next(iter(event))
    body = event[kind]
    if not isinstance(body, dict):
        raise InvalidAgentResponse("the agent's answer is not an object")
    if kind == "task":
        upstream_task, upstream_context = body.get("id", ""), body.get("contextId", "")
    elif kind in ("statusUpdate", "artifactUpdate") or kind == "message":
        upstream_task, upstream_context = body.get("taskId", ""), body.get("contextId", "")
    else:
        raise InvalidAgentResponse(f"the agent answered an unknown event {kind!r}")
    return Step(ids.to_relay(event), upstream_task or "", upstream_context or "")


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


def _load_agent_target(agent_id: str) -> AgentTarget | None:
    from registry.models import Agent

    try:
        agent = Agent.objects.callable().get(pk=agent_id)
    except Agent.DoesNotExist:
        return None
    return AgentTarget(agent)


_agent_targets = TargetCache(_load_agent_target, target_cache_seconds)
"""Agent targets (two queries each to load). Saving or deleting the Agent row (card refresh,
update, disable, delete) drops its entry, through the signals TasksAppConfig.ready connects."""


def agent_target(agent_id: str) -> Target | None:
    """The agent as a target, or None when it is unknown or disabled."""
    return _agent_targets.get(agent_id)


def agent_changed(sender, instance, **kwargs) -> None:
    """post_save and post_delete receiver for registry.Agent."""
    forget_agent_targets(instance.pk)


def forget_agent_targets(agent_id: str | None = None) -> None:
    """Drops the cached target of one agent (of all without ``agent_id``)."""
    _agent_targets.forget(agent_id)


register_target_kind("agent", agent_target)
