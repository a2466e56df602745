"""A registered agent as a target of the gateway (``AgentTarget``): it runs a message on the
agent over the agent's own binding and version, resumes, cancels and refreshes its tasks, and
gives its extended card. ``agent_cache`` loads it per process, as it loads an MCP server's.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import replace
from typing import Any

from django.conf import settings

from registry import principals
from relay_project.database import database_sync_to_async
from tasks_app import delegation, hop_tokens, snapshots, upstream
from tasks_app.cards import agent_card_for_relay, card_for_reader
from tasks_app.gateway import failover, guarding
from tasks_app.gateway.targets import (
    CallContext,
    Step,
    Target,
)
from tasks_app.lifecycle import INTERRUPTED
from tasks_app.models import Task
from tasks_app.protocol.card_conversion import agent_card_to_v1
from tasks_app.protocol.errors import (
    A2AError,
    InvalidAgentResponse,
    InvalidParams,
    UnsupportedOperation,
)
from tasks_app.protocol.versions import ProtocolVersion

_INTERRUPTED = frozenset(state.value for state in INTERRUPTED)


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
            # An agent given the caller's token (or one exchanged for it) gets no other.
            headers=(
                None
                if agent.delegation_mode in (hop_tokens.PASS, hop_tokens.EXCHANGE)
                else upstream_auth_headers(agent) or None
            ),
            name=agent.name,
        )
        self.delegation = hop_tokens.Delegation.of(agent, self.endpoint.url)
        self.extra["stream_idle_seconds"] = agent.stream_idle_seconds
        guarding.take_policy(self, agent)

    async def run(self, task, request, ctx, *, stream):
        """The send, as ``guarding.served`` chooses its agent (failover)."""
        async with contextlib.aclosing(
            guarding.served(self, task, request, ctx, stream=stream)
        ) as steps:
            async for step in steps:
                yield step

    async def run_here(self, task, request, ctx, *, stream):
        """The send on this agent, through the call guard, retried as its policy allows. A
        delegated token that cannot be had refuses the send before the agent is called."""
        headers = await self._headers(ctx)
        await guarding.admit(self)
        async with contextlib.aclosing(
            guarding.guarded(self, self._run(task, request, ctx, stream=stream, headers=headers))
        ) as steps:
            async for step in steps:
                yield step

    async def resume(self, task, ctx):
        """Follows the agent's task from where another relay process left it: over
        SubscribeToTask when the agent streams (GetTask polls when it refuses or goes
        silent), over GetTask polls otherwise."""
        held = await failover.serving(self, task)
        if held is not self:
            async with contextlib.aclosing(held.resume(task, ctx)) as steps:
                async for step in steps:
                    yield step
            return
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
        headers = await self._headers(ctx)
        async with contextlib.aclosing(
            guarding.guarded(self, self._follow(task, ids, ctx, subscribe=True, headers=headers))
        ) as steps:
            async for step in steps:
                yield step

    async def _headers(self, ctx) -> dict[str, str]:
        """The relay's headers of a call to this agent for ``ctx``: who it is for, and the
        delegated token when the agent takes one (``hop_tokens``; raises as it does)."""
        headers = _delegation_headers(ctx)
        if self.delegation.delegates:
            headers.update(await hop_tokens.authorization(self.delegation, ctx))
        return headers

    async def _run(self, task, request, ctx, *, stream, headers):
        ids = _ids(task)
        outgoing = _upstream_request(request, ids)
        timeout = settings.RELAY_UPSTREAM_TIMEOUT
        if not stream:
            result = await self._tried(
                task,
                lambda: upstream.call(
                    self.endpoint,
                    _op("SEND"),
                    outgoing,
                    extensions=ctx.extensions,
                    timeout=timeout,
                    extra_headers=headers,
                    trace_parent=ctx.trace,
                ),
            )
            step = _step(result, ids)
            if upstream.ends_stream(step.event):
                yield step
                return
            # A task the agent goes on working on: the caller has its answer, the relay
            # follows the task until it ends.
            yield replace(step, answered=True)
            async for followed in self._follow(
                task, _ids(task, step), ctx, subscribe=False, headers=headers
            ):
                yield followed
            return

        def opened():
            return upstream.stream(
                self.endpoint,
                _op("STREAM"),
                outgoing,
                extensions=ctx.extensions,
                timeout=timeout,
                extra_headers=headers,
                trace_parent=ctx.trace,
            )

        events = await self._tried(task, lambda: self._first_event(opened()))
        # A follow-up turn of a task waiting on its client: some agents (@a2a-js/sdk) open the
        # stream by re-sending the task as it still stands. That is not the turn's answer.
        resent_first = task.state if task.state in _INTERRUPTED else None
        try:
            async for step in self._steps(events, ids, first_event=False):
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
        async for step in self._follow(
            task, ids, ctx, subscribe=False, answered=True, headers=headers
        ):
            yield step

    async def _tried(self, task, call):
        return await guarding.tried(self, task, call)

    async def _first_event(self, events):
        """The agent's stream, its first event read (within RELAY_STREAM_FIRST_EVENT_SECONDS):
        a stream refused before it is closed and its error raised, so it can be tried
        again."""
        limit = settings.RELAY_STREAM_FIRST_EVENT_SECONDS
        try:
            async with asyncio.timeout(limit or None):
                first = await anext(events)
        except StopAsyncIteration:
            return _prepended(None, events)
        except TimeoutError:
            await events.aclose()
            raise upstream.StreamSilent(self.id, limit, first=True) from None
        except BaseException:
            await events.aclose()
            raise
        return _prepended(first, events)

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
        self,
        task: Task,
        ids: snapshots.IdMap,
        ctx,
        *,
        subscribe: bool,
        headers: dict[str, str],
        answered: bool = False,
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
                extra_headers=headers,
                trace_parent=ctx.trace,
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
                if self.delegation.mode == hop_tokens.EXCHANGE:
                    # A long follow outlives an exchanged token: a fresh one when it expires.
                    headers = await self._headers(ctx)
            result = await upstream.call(
                self.endpoint,
                _op("GET_TASK"),
                {"id": ids.upstream_task_id},
                extensions=ctx.extensions,
                extra_headers=headers,
                trace_parent=ctx.trace,
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
        held = await failover.serving(self, task)
        if held is not self:
            await held.cancel_upstream(task, ctx)
            return
        if not task.upstream_task_id:
            return
        await upstream.call(
            self.endpoint,
            _op("CANCEL"),
            {"id": task.upstream_task_id},
            extensions=ctx.extensions,
            extra_headers=await self._headers(ctx),
            trace_parent=ctx.trace,
        )

    async def refresh(self, task, ctx):
        held = await failover.serving(self, task)
        if held is not self:
            return await held.refresh(task, ctx)
        if not task.upstream_task_id:
            return None
        ids = _ids(task)
        result = await upstream.call(
            self.endpoint,
            _op("GET_TASK"),
            {"id": task.upstream_task_id},
            extensions=ctx.extensions,
            extra_headers=await self._headers(ctx),
            trace_parent=ctx.trace,
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
            extra_headers=await self._headers(ctx),
            trace_parent=ctx.trace,
        )
        security = await database_sync_to_async(principals.card_security_schemes)()
        try:
            relayed = agent_card_for_relay(
                agent_card_to_v1(card), base_url=ctx.base_url, security=security
            )
            # Canonical 1.0, as the card route gives a 1.0 reader; the call's version shapes it.
            return card_for_reader(relayed, version=ProtocolVersion.V1_0)
        except InvalidParams as error:
            raise InvalidAgentResponse(
                f"agent {self.id!r} answered an extended card that is not one: {error}"
            ) from error


async def _prepended(first, events):
    """``first`` (when not None), then the rest of ``events``."""
    async with contextlib.aclosing(events):
        if first is not None:
            yield first
        async for event in events:
            yield event


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
