"""The gateway: A2A operations on a target (a registered agent; teams and the relay itself
plug in as targets too), with every task persisted and every event fanned out.

Views and consumers call these coroutines with canonical (1.0) params and get canonical
results; protocol versions and bindings are handled at the edges by ``tasks_app.protocol``.
A target only knows how to *run* a message (yield events with relay ids), cancel, refresh and
give an extended card; persistence, the state machine, blocking, ``returnImmediately``,
streaming and fan-out are done here once for all targets.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field, replace
from typing import Any, Generic, Protocol, TypeVar

from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from tasks_app import delegation, selectors, services, snapshots, streams, upstream
from tasks_app.lifecycle import (
    INTERRUPTED,
    TERMINAL,
    InvalidTransition,
    TaskState,
    check_transition,
)
from tasks_app.models import Task
from tasks_app.protocol.errors import (
    A2AError,
    ExtensionSupportRequired,
    FieldViolation,
    InvalidAgentResponse,
    InvalidParams,
    TaskNotCancelable,
    TaskNotFound,
    UnsupportedOperation,
)

logger = logging.getLogger(__name__)

FINAL_STATES = {s.value for s in TERMINAL | INTERRUPTED}
FINAL_V1_STATES = frozenset(snapshots.V1_STATE[state] for state in FINAL_STATES)
KEEPALIVE_SECONDS = 15.0
CONTEXT_ID_MAX_LENGTH = Task._meta.get_field("context_id").max_length


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


@dataclass(frozen=True)
class Step:
    """One event from a target, in relay ids, and the upstream ids it revealed. ``also`` is a
    write of the target's own that belongs with the event (a team's routing hop, with the end
    of the member task that made it): it runs in the transaction that records the event, or
    on its own when the task has already ended, and returns the events it recorded for other
    tasks, to publish. ``then`` are events known at the same moment (a team's hop, the
    artifacts it brought and the answer it ends with): recorded right after this one, in the
    same database round trip.
    """

    event: dict[str, Any]
    upstream_task_id: str = ""
    upstream_context_id: str = ""
    also: Callable[[], list[Published] | None] | None = field(
        default=None, compare=False, repr=False)
    then: tuple[Step, ...] = ()


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
    extra: dict[str, Any] = field(default_factory=dict)

    def run(self, task: Task, request: dict[str, Any], ctx: CallContext, *,
            stream: bool) -> AsyncIterator[Step]:
        raise NotImplementedError

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

    async def report(self, target: AgentTarget, *, ok: bool, category: str = "",
                     detail: str = "", latency_ms: float | None = None) -> None:
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
            kind="agent", id=agent.pk, name=agent.name, streaming=agent.streaming,
            extended_card_declared=agent.extended_card,
            required_extensions=tuple(e.uri for e in extensions if e.required),
            declared_extensions=tuple(e.uri for e in extensions),
            agent_id=agent.pk,
        )
        self.endpoint = upstream.choose_endpoint(
            agent_id=agent.pk, interfaces=agent.interfaces,
            invocation_url=agent.invocation_url,
            headers=upstream_auth_headers(agent) or None,
        )
        # The circuit breaker as the row had it; the call guard keeps it up to date.
        self.breaker_row = (agent.breaker_state, agent.breaker_failures,
                            agent.breaker_opened_at)

    async def run(self, task, request, ctx, *, stream):
        await _call_guard.admit(self)
        started = time.perf_counter()
        answered = False
        try:
            # Closed here when the caller stops early, as _drive closes these steps: left to
            # the garbage collector, an upstream stream would close in another task.
            async with contextlib.aclosing(self._run(task, request, ctx, stream=stream)) as steps:
                async for step in steps:
                    if not answered:
                        answered = True
                        await _call_guard.report(self, ok=True)
                    yield step
        except (upstream.UpstreamError, InvalidAgentResponse) as error:
            await _call_guard.report(
                self, ok=False, category=getattr(error, "category", "protocol"),
                detail=error.message, latency_ms=(time.perf_counter() - started) * 1000)
            raise
        except A2AError:
            if not answered:  # the agent answered, with a protocol error: it is up
                await _call_guard.report(self, ok=True)
            raise

    async def _run(self, task, request, ctx, *, stream):
        ids = snapshots.IdMap(task.id, task.context_id, task.upstream_task_id,
                              task.upstream_context_id)
        outgoing = _upstream_request(request, ids)
        timeout = settings.RELAY_UPSTREAM_TIMEOUT
        if not stream:
            result = await upstream.call(self.endpoint, _op("SEND"), outgoing,
                                         extensions=ctx.extensions, timeout=timeout,
                                         extra_headers=_delegation_headers(ctx))
            yield _step(result, ids)
            return
        async for event in upstream.stream(self.endpoint, _op("STREAM"), outgoing,
                                           extensions=ctx.extensions, timeout=timeout,
                                           extra_headers=_delegation_headers(ctx)):
            step = _step(event, ids)
            if step.upstream_task_id or step.upstream_context_id:
                ids = snapshots.IdMap(task.id, task.context_id,
                                      step.upstream_task_id or ids.upstream_task_id,
                                      step.upstream_context_id or ids.upstream_context_id)
            yield step

    async def cancel_upstream(self, task, ctx):
        if not task.upstream_task_id:
            return
        await upstream.call(self.endpoint, _op("CANCEL"), {"id": task.upstream_task_id},
                            extensions=ctx.extensions, extra_headers=_delegation_headers(ctx))

    async def refresh(self, task, ctx):
        if not task.upstream_task_id:
            return None
        ids = snapshots.IdMap(task.id, task.context_id, task.upstream_task_id,
                              task.upstream_context_id)
        result = await upstream.call(self.endpoint, _op("GET_TASK"),
                                     {"id": task.upstream_task_id}, extensions=ctx.extensions,
                                     extra_headers=_delegation_headers(ctx))
        return Step({"task": ids.to_relay(result)}, task.upstream_task_id,
                    result.get("contextId", ""))

    async def extended_card(self, ctx):
        if not self.extended_card_declared:
            raise UnsupportedOperation(f"agent {self.id!r} declares no extended card")
        return await upstream.call(self.endpoint, _op("EXTENDED_CARD"), {},
                                   extensions=ctx.extensions,
                                   extra_headers=_delegation_headers(ctx))


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


# --- Running a message --------------------------------------------------------------------


_running: dict[str, asyncio.Task] = {}


def _spawn(task_id: str, coroutine) -> asyncio.Task:
    """Runs a task's producer apart from the request that started it: a client that goes away
    does not stop the work. It runs in a fresh context: the request's names executors that die
    with the request (asgiref's CurrentThreadExecutor), and every later sync_to_async would
    fail on them."""
    runner = asyncio.get_running_loop().create_task(coroutine, context=contextvars.Context())
    _running[task_id] = runner
    runner.add_done_callback(lambda _: _running.pop(task_id, None))
    return runner


@dataclass
class Outcome:
    task: Task
    message: dict[str, Any] | None = None
    held: Held | None = None


@dataclass(frozen=True)
class Held:
    """A task's last event, known but not yet recorded (``send_for_task``): ``answer`` is
    what the call answers with it (the task as that event leaves it, or the agent's message);
    ``record`` records it (synchronous: in the caller's transaction when it has one) and
    returns what to publish."""

    task: Task
    step: Step
    answer: dict[str, Any]

    def record(self) -> list[Published]:
        recorded = services.task_record(
            task=self.task, event=self.step.event, upstream_task_id=self.step.upstream_task_id,
            upstream_context_id=self.step.upstream_context_id)
        if recorded.event is None:  # the task ended meanwhile (canceled, expired)
            return []
        # Stream subscribers of a task answered by a message get the message alone.
        event = self.answer if "message" in self.answer else recorded.event
        return [Published(self.task.id, recorded.sequence, event, True)]

    @property
    def upstream_task_id(self) -> str:
        return self.task.upstream_task_id or self.step.upstream_task_id

    @property
    def upstream_context_id(self) -> str:
        return self.task.upstream_context_id or self.step.upstream_context_id


def _held(task: Task, step: Step) -> Held | None:
    """The step held back, when it ends the task (final or waiting on the client) by a move
    A2A allows; None otherwise (it is then recorded as usual). A message (given only as the
    agent's first answer) ends the task completed with that message."""
    if "message" in step.event:
        completed = {"statusUpdate": {"taskId": task.id, "contextId": task.context_id,
                                      "status": {"state": "TASK_STATE_COMPLETED",
                                                 "message": step.event["message"]}}}
        return Held(task, replace(step, event=completed, upstream_task_id=""), step.event)
    if not upstream.ends_stream(step.event):  # most events: no snapshot to fold
        return None
    after = snapshots.apply_event(services.snapshot_of(task), step.event)
    state = snapshots.state_of(after)
    if state not in FINAL_STATES:
        return None
    try:
        check_transition(task.state, state)
    except InvalidTransition:
        return None
    return Held(task, step, {"task": after})


async def _record(task: Task, step: Step) -> Task:
    """Records the step and those it brings (``then``) in one thread hop, and publishes what
    was recorded."""
    try:
        recorded = await sync_to_async(_record_steps)(task, step)
    except InvalidTransition as error:
        raise InvalidAgentResponse(f"the agent moved the task in a way A2A forbids: {error}"
                                   ) from error
    for published in recorded:
        await published.send()
    return task


def _record_steps(task: Task, step: Step) -> list[Published]:
    """Records the step and its ``then`` (a task already ended ignores the rest), bringing
    ``task`` up to date; returns what to publish, in order."""
    recorded: list[Published] = []
    for each in (step, *step.then):
        also = None
        if each.also is not None:
            def also(write=each.also):
                recorded.extend(write() or ())
        done = services.task_record(
            task=task, event=each.event, upstream_task_id=each.upstream_task_id,
            upstream_context_id=each.upstream_context_id, also=also,
        )
        if done.event is not None:
            recorded.append(Published(task.id, done.sequence, done.event,
                                      task.state in FINAL_STATES))
    return recorded


async def _fail(task: Task, reason: str) -> Task:
    recorded = await sync_to_async(services.task_fail)(task=task, reason=reason)
    if recorded.event is not None:
        await streams.publish(task.id, recorded.sequence, recorded.event, final=True)
    return recorded.task


async def _reply_as_message(task: Task, step: Step) -> Outcome:
    """The agent answered with a Message, not a task: the relay's task ends completed with
    that message, and stream subscribers get the message alone."""
    for published in await sync_to_async(_held(task, step).record)():
        await published.send()
    return Outcome(task, step.event["message"])


async def _drive(target: Target, task: Task, request: dict[str, Any], ctx: CallContext, *,
                 stream: bool, fresh: bool, hold_end: bool = False) -> Outcome:
    """Runs the message on the target until the task ends or waits on the client, recording
    and publishing every event (but the last with ``hold_end``: it comes back as ``held``).
    Upstream failures end the task ``failed`` with the reason; an A2A error from the agent on
    a fresh task removes the task and is raised."""
    seen_event = False
    try:
        # Closed here when we stop early (a final state): left to the garbage collector, the
        # upstream stream would be closed later from another task, and fail there.
        async with contextlib.aclosing(target.run(task, request, ctx, stream=stream)) as steps:
            async for step in steps:
                if "message" in step.event and not seen_event:
                    if hold_end:
                        return Outcome(task, held=_held(task, step))
                    return await _reply_as_message(task, step)
                if not seen_event and TaskState(task.state) in INTERRUPTED:
                    # The agent took the client's answer: the task works again. Left
                    # interrupted, the first update of the resumed work (an artifact) would
                    # look final and end the drive and the stream before the new state came.
                    task = await _record(task, Step(services.status_event(task,
                                                                          TaskState.WORKING)))
                seen_event = True
                held = _held(task, step) if hold_end and "message" not in step.event else None
                if held is not None:
                    return Outcome(task, held=held)
                task = await _record(task, step)
                if task.state in FINAL_STATES:
                    break
        return Outcome(task)
    except upstream.UpstreamError as error:
        return Outcome(await _fail(task, error.message))
    except InvalidAgentResponse as error:
        await _fail(task, error.message)
        raise
    except A2AError:
        if fresh and not seen_event:
            await sync_to_async(Task.objects.filter(pk=task.pk).delete)()
        raise
    except Exception:
        logger.exception("running task %s on %s %s failed", task.pk, target.kind, target.id)
        await _fail(task, f"the relay failed while running the task on {target.id!r}")
        raise


async def _drive_in_background(target, task, request, ctx, *, stream) -> None:
    """Drives a task nobody waits on. An A2A error from the agent ends the task failed with
    the reason (a refused message must not leave it submitted, nor its streams waiting)."""
    try:
        await _drive(target, task, request, ctx, stream=stream, fresh=False)
    except A2AError as error:
        logger.info("task %s ended with %s", task.pk, error)
        await _fail(task, error.message)
    except Exception:
        logger.exception("background task %s failed", task.pk)


@dataclass(frozen=True)
class Opened:
    """The task a message belongs to, and whether this message created it."""

    task: Task
    fresh: bool


def open_task(target: Target, ctx: CallContext, request: dict[str, Any], *,
              stream: bool = False) -> Opened:
    """The task a message belongs to: the one it names (checked, the message appended), or a
    new one, with its inline push config stored. Synchronous, so a caller can run it in the
    same thread hop as authentication and target resolution; raises the A2A error that
    refuses the message before anything is stored."""
    if stream and not target.streaming:
        raise UnsupportedOperation(f"{target.kind} {target.id!r} does not stream")
    missing = [uri for uri in target.required_extensions if uri not in ctx.extensions]
    if missing:
        raise ExtensionSupportRequired(
            f"{target.kind} {target.id!r} requires the extension {missing[0]}; activate it "
            f"with the A2A-Extensions header", metadata={"extension": missing[0]})
    inline = (request.get("configuration") or {}).get("taskPushNotificationConfig")
    if inline:
        from tasks_app import push

        # Refused before the task exists: a bad webhook must not leave a task behind.
        push.config_check(inline, field="configuration.taskPushNotificationConfig")
    message = request["message"]
    if len(message.get("contextId") or "") > CONTEXT_ID_MAX_LENGTH:
        raise InvalidParams(field_violations=[FieldViolation(
            "message.contextId", f"is longer than {CONTEXT_ID_MAX_LENGTH}")])
    if message.get("taskId"):
        task = _owned_task(target, ctx, message["taskId"])
        if task.is_terminal:
            raise UnsupportedOperation(
                f"task {task.id} is {task.state}; a terminal task takes no more messages")
        if message.get("contextId") and message["contextId"] != task.context_id:
            raise InvalidParams(
                f"message.contextId {message['contextId']!r} does not match the task's "
                f"context {task.context_id!r}")
        try:
            task = services.task_add_message(task=task, message=message)
        except services.TerminalTaskError as error:
            raise UnsupportedOperation(f"task {task.id} ended meanwhile") from error
        opened = Opened(task, fresh=False)
    else:
        opened = Opened(_open_new(target, ctx, request), fresh=True)
    if inline:
        from tasks_app import push

        push.config_create(task=opened.task, config=inline)
    return opened


def _open_new(target: Target, ctx: CallContext, request: dict[str, Any]) -> Task:
    message = request["message"]
    context_id = message.get("contextId") or ""
    task = services.task_open(
        caller=ctx.caller, target_kind=target.kind, target_id=target.id,
        agent_id=target.agent_id, message=message,
        client_version=ctx.version, context_id=context_id,
        delegation_chain=list(ctx.delegation), parent_id=ctx.parent_task_id,
        expires_at=services.task_expiry(),
    )
    previous = ctx.upstream_context_id
    if context_id and not previous:
        # A new task in a known conversation reuses the upstream's context for it.
        previous = selectors.upstream_context(caller=ctx.caller, context_id=context_id,
                                              target_kind=target.kind, target_id=target.id,
                                              exclude=task.pk)
    if previous:
        Task.objects.filter(pk=task.pk).update(upstream_context_id=previous)
        task.upstream_context_id = previous
    return task


def _owned_task(target: Target | None, ctx: CallContext, task_id: str) -> Task:
    task = selectors.task_for_caller(caller=ctx.caller, task_id=task_id)
    if task is None or (target is not None and not target.owns(task)):
        raise TaskNotFound(f"no task {task_id!r}", metadata={"taskId": str(task_id)})
    return task


async def _load(target: Target | None, ctx: CallContext, task_id: str) -> Task:
    return await sync_to_async(_owned_task)(target, ctx, task_id)


# --- Operations ---------------------------------------------------------------------------


async def send_message(target: Target, ctx: CallContext, request: dict[str, Any], *,
                       opened: Opened | None = None) -> dict[str, Any]:
    """SendMessage: blocking by default (returns once the task ends or waits on the client);
    with ``returnImmediately`` it returns the submitted task and works on in the background.
    ``opened`` is the message's task when the caller already ran ``open_task`` (in its own
    thread hop).
    """
    if opened is None:
        opened = await sync_to_async(open_task)(target, ctx, request)
    task, fresh = opened.task, opened.fresh
    configuration = request.get("configuration") or {}
    history_length = configuration.get("historyLength")
    if configuration.get("returnImmediately"):
        _spawn(task.id, _drive_in_background(target, task, request, ctx,
                                             stream=target.streaming))
        return {"task": snapshots.trim(services.snapshot_of(task),
                                       history_length=history_length)}
    outcome = await _drive(target, task, request, ctx, stream=False, fresh=fresh)
    if outcome.message is not None:
        return {"message": outcome.message}
    return {"task": snapshots.trim(services.snapshot_of(outcome.task),
                                   history_length=history_length)}


@dataclass(frozen=True)
class Sent:
    """What ``send_for_task`` got: the answer, the relay's task, and the answer's last event
    when it was held back (None when it was recorded: the task is still working, or the call
    failed)."""

    answer: dict[str, Any]
    task: Task
    held: Held | None

    @property
    def upstream_task_id(self) -> str:
        return self.held.upstream_task_id if self.held else self.task.upstream_task_id

    @property
    def upstream_context_id(self) -> str:
        return self.held.upstream_context_id if self.held else self.task.upstream_context_id


async def send_for_task(target: Target, ctx: CallContext, request: dict[str, Any]) -> Sent:
    """SendMessage on behalf of one of the relay's own tasks (a team calling a member),
    blocking. A streaming target is followed over a stream, so the task's upstream ids are
    known, and a cancel reaches the agent, while it works. The event that ends the task is
    held back: the caller records it with its own write (``Held.record``, in its
    transaction) and publishes it, one database round trip for both."""
    opened = await sync_to_async(open_task)(target, ctx, request)
    outcome = await _drive(target, opened.task, request, ctx, stream=target.streaming,
                           fresh=opened.fresh, hold_end=True)
    if outcome.held is not None:
        return Sent(outcome.held.answer, outcome.task, outcome.held)
    if outcome.message is not None:
        return Sent({"message": outcome.message}, outcome.task, None)
    return Sent({"task": services.snapshot_of(outcome.task)}, outcome.task, None)


async def stream_message(target: Target, ctx: CallContext, request: dict[str, Any], *,
                         opened: Opened | None = None) -> AsyncIterator[Any]:
    """SendStreamingMessage: validates and opens the task before the first event (so errors
    are ordinary responses), then yields the task, its updates, and KEEPALIVE markers while
    idle. Closes on a terminal or interrupted state. The work goes on if the client leaves.
    ``opened`` as for ``send_message`` (``open_task`` with ``stream=True``).
    """
    if opened is None:
        opened = await sync_to_async(open_task)(target, ctx, request, stream=True)
    return _stream_from_start(target, opened.task, request, ctx)


async def _stream_from_start(target, task, request, ctx):
    async with streams.subscription(task.id, catch_up=_stored_events(task.id)) as subscription:
        _spawn(task.id, _drive_in_background(target, task, request, ctx, stream=True))
        first = True
        async for item in subscription.events(after=task.last_sequence,
                                               keepalive=KEEPALIVE_SECONDS):
            if item is streams.KEEPALIVE:
                yield item
                continue
            event, final = item
            if first and "message" in event:
                yield event
                return
            if first:
                first = False
                current = await sync_to_async(Task.objects.get)(pk=task.pk)
                yield {"task": services.snapshot_of(current)}
                if current.state in FINAL_STATES:
                    return
                async for rest in _after(subscription, current.last_sequence):
                    yield rest
                return
            yield event
            if final:
                return


def _stored_events(task_id: str) -> streams.CatchUp:
    """Reads the task's events stored after a sequence, for a stream that has been idle: one
    recorded by another process may not have come through the channel layer."""

    async def catch_up(sequence: int):
        return await sync_to_async(selectors.events_after)(
            task_id=task_id, sequence=sequence, final_states=FINAL_V1_STATES)

    return catch_up


async def _after(subscription, sequence: int):
    async for item in subscription.events(after=sequence, keepalive=KEEPALIVE_SECONDS):
        if item is streams.KEEPALIVE:
            yield item
            continue
        event, final = item
        yield event
        if final:
            return


async def subscribe(target: Target | None, ctx: CallContext, task_id: str
                    ) -> AsyncIterator[Any]:
    """SubscribeToTask: the current task first, then live events until it ends. A task that
    already ended is an UnsupportedOperation."""
    if target is not None and not target.streaming:
        raise UnsupportedOperation(f"{target.kind} {target.id!r} does not stream")
    task = await _load(target, ctx, task_id)
    if task.is_terminal:
        raise UnsupportedOperation(f"task {task.id} is {task.state}; there is nothing to follow")
    return _stream_existing(task)


async def _stream_existing(task: Task):
    async with streams.subscription(task.id, catch_up=_stored_events(task.id)) as subscription:
        current = await sync_to_async(Task.objects.get)(pk=task.pk)
        yield {"task": services.snapshot_of(current)}
        if current.state in FINAL_STATES:
            return
        async for item in _after(subscription, current.last_sequence):
            yield item


async def get_task(target: Target | None, ctx: CallContext, task_id: str, *,
                   history_length: int | None = None) -> dict[str, Any]:
    """GetTask: the stored task, refreshed from upstream first when it is still open and no
    producer in this process is already following it."""
    task = await _load(target, ctx, task_id)
    if not task.is_terminal and task.id not in _running:
        owner = target or await sync_to_async(target_of)(task)
        if owner is not None:
            try:
                step = await owner.refresh(task, ctx)
                if step is not None:
                    task = await _record(task, step)
            except (A2AError, upstream.UpstreamError) as error:
                logger.info("could not refresh task %s: %s", task.id, error)
    return snapshots.trim(services.snapshot_of(task), history_length=history_length)


async def cancel_task(target: Target | None, ctx: CallContext, task_id: str) -> dict[str, Any]:
    """CancelTask: asks the agent to stop, then cancels the relay's task. A task that already
    ended (or ends while we ask) is TaskNotCancelable."""
    task = await _load(target, ctx, task_id)
    if task.is_terminal:
        raise TaskNotCancelable(f"task {task.id} is {task.state}",
                                metadata={"taskId": task.id})
    owner = target or await sync_to_async(target_of)(task)
    note = ""
    if owner is not None:
        try:
            await owner.cancel_upstream(task, ctx)
        except TaskNotCancelable:
            raise
        except (A2AError, upstream.UpstreamError) as error:
            note = f"canceled at the relay; the agent could not be told: {error}"
    try:
        recorded = await sync_to_async(services.task_cancel)(task=task, reason=note)
    except services.TerminalTaskError as error:
        if error.task.state == TaskState.CANCELED:
            # The agent's own "canceled" was recorded first: the cancel is what was asked for.
            return services.snapshot_of(error.task)
        raise TaskNotCancelable(f"task {task.id} ended before it could be canceled",
                                metadata={"taskId": task.id}) from error
    await streams.publish(task.id, recorded.sequence, recorded.event, final=True)
    runner = _running.get(task.id)
    if runner is not None:
        runner.cancel()
    return services.snapshot_of(recorded.task)


async def list_tasks(target: Target | None, ctx: CallContext,
                     params: dict[str, Any]) -> dict[str, Any]:
    return await sync_to_async(selectors.task_list)(
        caller=ctx.caller, target_kind=target.kind if target else None,
        target_id=target.id if target else None, params=params)


async def extended_card(target: Target, ctx: CallContext) -> dict[str, Any]:
    return await target.extended_card(ctx)


def target_of(task: Task) -> Target | None:
    """The target a stored task belongs to (for the target-agnostic task API)."""
    return resolve_target(task.target_kind, task.target_id)


# --- Expiry -------------------------------------------------------------------------------

EXPIRY_BATCH = 200
UPSTREAM_CANCEL_SECONDS = 10.0


async def expire_overdue(*, now=None, batch: int = EXPIRY_BATCH) -> int:
    """Ends every open task past its expiry ``failed`` with a timeout error, ``batch`` tasks
    at a time; returns how many it ended. Each ended task's event is published as final, so
    its open streams get it and close; a producer following it in this process is stopped,
    and the agent (or a team's members) is asked to cancel its work. Whatever that work
    sends later is ignored: the task is terminal. A task that ends otherwise meanwhile keeps
    that end (compare-and-set) and is not counted."""
    now = now or timezone.now()
    ended = 0
    while True:
        overdue = await sync_to_async(selectors.tasks_overdue)(now=now, limit=batch)
        ended_now = 0
        for task in overdue:
            try:
                ended_now += await _expire(task)
            except services.StaleTaskError:
                logger.warning("task %s changed too often to expire; the next run retries",
                               task.pk)
        ended += ended_now
        # A full batch of which none ended would come back the same: the next run retries.
        if len(overdue) < batch or not ended_now:
            return ended


async def _expire(task: Task) -> bool:
    recorded = await sync_to_async(services.task_expire)(task=task)
    if recorded.event is None:
        return False
    await streams.publish(task.id, recorded.sequence, recorded.event, final=True)
    runner = _running.get(task.id)
    if runner is not None:
        runner.cancel()
    owner = await sync_to_async(target_of)(task)
    if owner is not None:
        try:
            async with asyncio.timeout(UPSTREAM_CANCEL_SECONDS):
                await owner.cancel_upstream(task, CallContext(caller=task.caller))
        except (A2AError, upstream.UpstreamError, TimeoutError) as error:
            logger.info("expired task %s: the agent could not be told to stop: %s", task.pk,
                        error)
    return True


# --- Push-notification configs ------------------------------------------------------------


async def push_config_create(target: Target | None, ctx: CallContext,
                             params: dict[str, Any]) -> dict[str, Any]:
    from tasks_app import push

    task = await _load(target, ctx, params["taskId"])
    stored = await sync_to_async(push.config_create)(task=task, config=params)
    return push.config_view(stored)


async def push_config_get(target: Target | None, ctx: CallContext,
                          params: dict[str, Any]) -> dict[str, Any]:
    from tasks_app import push

    task = await _load(target, ctx, params["taskId"])
    stored = await sync_to_async(push.config_get)(task=task, config_id=params["id"])
    if stored is None:
        raise TaskNotFound(f"task {task.id} has no push notification config {params['id']!r}",
                           metadata={"taskId": task.id})
    return push.config_view(stored)


async def push_config_list(target: Target | None, ctx: CallContext,
                           params: dict[str, Any]) -> dict[str, Any]:
    from tasks_app import push

    task = await _load(target, ctx, params["taskId"])
    configs = await sync_to_async(push.config_list)(task=task)
    return {"configs": [push.config_view(c) for c in configs], "nextPageToken": ""}


async def push_config_delete(target: Target | None, ctx: CallContext,
                             params: dict[str, Any]) -> None:
    from tasks_app import push

    task = await _load(target, ctx, params["taskId"])
    await sync_to_async(push.config_delete)(task=task, config_id=params["id"])
