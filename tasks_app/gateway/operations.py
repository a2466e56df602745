"""The A2A operations on a target, with canonical (1.0) params and results: views and
consumers call these, and ``tasks_app.protocol`` handles versions and bindings at the edges.
Persistence, the state machine, blocking, ``returnImmediately``, streaming and fan-out are done
here once for all targets; the exchange with the agent runs in ``driving``'s jobs.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from django.conf import settings

from relay_project import database
from relay_project.database import database_sync_to_async
from tasks_app import selectors, services, snapshots, streams, upstream
from tasks_app.gateway import driving
from tasks_app.gateway.driving import FINAL_V1_STATES, _record
from tasks_app.gateway.opening import Opened, _load, open_task
from tasks_app.gateway.targets import CallContext, Target, resolve_target
from tasks_app.lifecycle import INTERRUPTED, TERMINAL, TaskState
from tasks_app.models import Task
from tasks_app.protocol.errors import (
    A2AError,
    TaskNotCancelable,
    TaskNotFound,
    UnsupportedOperation,
)
from tasks_app.protocol.limits import Limits, capped_history_length

logger = logging.getLogger(__name__)

KEEPALIVE_SECONDS = 15.0
TERMINAL_STATES = frozenset(state.value for state in TERMINAL)


async def send_message(
    target: Target, ctx: CallContext, request: dict[str, Any], *, opened: Opened | None = None
) -> dict[str, Any]:
    """SendMessage: blocking by default (returns once the task ends, waits on the client, or
    the agent answered with a task it goes on working on: the relay follows that task on its
    own); with ``returnImmediately`` it returns the submitted task and works on in the
    background. ``opened`` is the message's task when the caller already ran ``open_task``
    (at its admission).
    """
    if opened is None:
        opened = await database_sync_to_async(open_task)(target, ctx, request)
    if opened.repeat:
        return await _repeated_send(opened.task, request)
    task, fresh = opened.task, opened.fresh
    configuration = request.get("configuration") or {}
    history_length = _capped(configuration.get("historyLength"))
    if configuration.get("returnImmediately"):
        driving.start(
            target,
            task,
            target.run(task, request, ctx, stream=target.streaming),
            fresh=False,
            raise_errors=False,
        )
        return {"task": snapshots.trim(services.snapshot_of(task), history_length=history_length)}
    answered = driving.start(
        target,
        task,
        target.run(task, request, ctx, stream=False),
        fresh=fresh,
        raise_errors=True,
    )
    outcome = await answered
    if outcome.message is not None:
        if task.selection:  # a send that named a skill says which agent answered, and why
            metadata = {**(outcome.message.get("metadata") or {}), "relaySelection": task.selection}
            return {"message": {**outcome.message, "metadata": metadata}}
        return {"message": outcome.message}
    return {"task": snapshots.trim(outcome.answer_snapshot(), history_length=history_length)}


async def stream_message(
    target: Target, ctx: CallContext, request: dict[str, Any], *, opened: Opened | None = None
) -> AsyncIterator[Any]:
    """SendStreamingMessage: validates and opens the task before the first event (so errors
    are ordinary responses), then yields the task, its updates, and KEEPALIVE markers while
    idle: every event the agent sent, in its order, the first one a task (the task as it
    stood before, when the agent began with an update; for the caller's answer to a task
    waiting on it, the task as that update leaves it, never the question it answers).
    Closes on a terminal or interrupted state, or where the agent's own stream ended (with
    the task as the agent then gave it). The work goes on if the client leaves. ``opened``
    as for ``send_message`` (``open_task`` with ``stream=True``).
    """
    if opened is None:
        opened = await database_sync_to_async(open_task)(target, ctx, request, stream=True)
    if opened.repeat:
        return _repeated_stream(opened.task)
    return _stream_from_start(target, opened.task, request, ctx)


# --- Repeated sends (an Idempotency-Key the caller used before) ----------------------------

REPEAT_POLL_SECONDS = 1.0
"""How often a repeat waiting on the send it repeats checks that the task still exists (the
agent's refusal of a fresh task removes it, and removing announces nothing)."""


async def _repeated_send(task: Task, request: dict[str, Any]) -> dict[str, Any]:
    """A SendMessage repeating an earlier send: the agent is not called again. The earlier
    send's task once it ends or waits on the client, or at once with ``returnImmediately``
    (as it stands)."""
    configuration = request.get("configuration") or {}
    if not configuration.get("returnImmediately") and task.state not in driving.FINAL_STATES:
        async with following(task.id) as subscription:
            task = await database_sync_to_async(_reread)(task.pk)
            after = task.last_sequence
            while task.state not in driving.FINAL_STATES:
                async for item in subscription.events(after=after, keepalive=REPEAT_POLL_SECONDS):
                    if item is streams.KEEPALIVE or item[1]:
                        break
                task = await database_sync_to_async(_reread)(task.pk)
                after = max(after, subscription.cursor)
    history_length = _capped(configuration.get("historyLength"))
    return {"task": snapshots.trim(services.snapshot_of(task), history_length=history_length)}


async def _repeated_stream(task: Task):
    """A SendStreamingMessage repeating an earlier send: the task's stream from its start (the
    task as it was opened, then every event recorded since), live until it ends or waits on
    the client, as the earlier stream was. The agent is not called again."""
    async with following(task.id) as subscription:
        current = await database_sync_to_async(_reread)(task.pk)
        subscription.wake(current.last_sequence)  # what is stored is read first
        first = True
        async for item in subscription.events(after=0, keepalive=KEEPALIVE_SECONDS):
            if item is streams.KEEPALIVE:
                await database_sync_to_async(_reread)(task.pk)
                yield item
                continue
            event, final = item
            if first and "task" not in event:
                yield {"task": _as_opened(current)}
            first = False
            yield event
            if final:
                return


def _reread(task_id: str) -> Task:
    task = Task.objects.filter(pk=task_id).first()
    if task is None:
        raise TaskNotFound(
            f"task {task_id} is gone: its agent refused the send this one repeats; send "
            "again to try once more",
            metadata={"taskId": task_id},
        )
    return task


def _as_opened(task: Task) -> dict[str, Any]:
    """The task as its send opened it: submitted, with the caller's message."""
    snapshot = services.snapshot_of(task)
    snapshot.pop("artifacts", None)
    status = {"state": snapshots.V1_STATE[TaskState.SUBMITTED.value]}
    return {**snapshot, "status": status, "history": task.history[:1]}


async def _stream_from_start(target, task, request, ctx):
    async with streams.subscription(task.id, read=_stored_events(task.id)) as subscription:
        answered = driving.start(
            target,
            task,
            target.run(task, request, ctx, stream=True),
            fresh=False,
            raise_errors=False,
        )
        answered.add_done_callback(lambda done: _end_stream_at_answer(subscription, done))
        # The task as it stands before the target's first event, taken before this stream
        # first yields: while its client reads, the job runs and moves the task on.
        opened_as, after = services.snapshot_of(task), task.last_sequence
        # The caller's answer to a question: the question is no longer the task's state, and a
        # client that stops at an interrupted state would stop at it. The stream opens with
        # the task as its first event leaves it (working again, or ended).
        answering = TaskState(task.state) in INTERRUPTED
        first = True
        if target.announces_task and not answering:
            yield {"task": opened_as}
            first = False
        async for item in subscription.events(after=after, keepalive=KEEPALIVE_SECONDS):
            if item is streams.KEEPALIVE:
                yield item
                continue
            event, final = item
            if first:
                first = False
                if "message" in event:
                    yield event
                    return
                if "task" not in event and answering:
                    yield {"task": snapshots.apply_event(opened_as, event)}
                    if final:
                        return
                    if "statusUpdate" in event:  # the opening task carries it
                        continue
                elif "task" not in event:
                    # A stream starts with the task: the agent began with an update, so the
                    # task as it stood before it comes first, then the update itself.
                    yield {"task": opened_as}
            yield event
            if final:
                return


def _end_stream_at_answer(subscription: streams.Subscription, answered) -> None:
    """The caller's stream ends where the call's answer is: a final event ends it anyway;
    an agent stream that ended without one ends it at the task as the agent gave it."""
    if answered.cancelled() or answered.exception() is not None:
        return
    outcome = answered.result()
    sequence = outcome.sequence if outcome.sequence is not None else outcome.task.last_sequence
    subscription.end_after(sequence)


def _stored_events(task_id: str) -> streams.StoredEvents:
    """Reads the task's events stored after a sequence (recorded by another process, or
    missed in this one). While the database is unavailable the read waits for it: the stream
    keeps its client and catches up once the database is back."""

    async def read(sequence: int):
        return await database.retried(
            selectors.events_after,
            task_id=task_id,
            sequence=sequence,
            final_states=FINAL_V1_STATES,
        )

    return read


async def _until_terminal(subscription, sequence: int):
    """The events after ``sequence`` until one ends the task. A task waiting on its client
    (input or auth required) is not finished: the next turn's events belong to the same
    subscription, as they do to the agent's own."""
    async for item in subscription.events(
        after=sequence, keepalive=KEEPALIVE_SECONDS, stop_at_final=False
    ):
        if item is streams.KEEPALIVE:
            yield item
            continue
        event, _ = item
        yield event
        if snapshots.state_of(event.get("task") or event.get("statusUpdate") or {}) in (
            TERMINAL_STATES
        ):
            return


async def subscribe(target: Target | None, ctx: CallContext, task_id: str) -> AsyncIterator[Any]:
    """SubscribeToTask: the current task first, then live events until it ends (a task
    waiting on its client stays followed). A task that already ended is an
    UnsupportedOperation."""
    if target is not None and not target.streaming:
        raise UnsupportedOperation(f"{target.kind} {target.id!r} does not stream")
    task = await _load(target, ctx, task_id)
    if task.is_terminal:
        raise UnsupportedOperation(f"task {task.id} is {task.state}; there is nothing to follow")
    return _stream_existing(task)


@asynccontextmanager
async def following(task_id: str) -> AsyncIterator[streams.Subscription]:
    """A subscription to the events of a task whose exchange runs elsewhere (in another job
    of this process or in another process, now or after a takeover): counted on the task
    while it is open, so that every event recorded on PostgreSQL wakes it with a NOTIFY
    (``services.task_follow``). Counted before the caller reads the task: an event recorded
    after that read is announced."""
    async with streams.subscription(task_id, read=_stored_events(task_id)) as subscription:
        await database_sync_to_async(services.task_follow)(task_id=task_id, by=1)
        try:
            yield subscription
        finally:
            try:
                # Shielded: a stream closed by its client is cancelled, and must still count
                # itself out (a count left behind only costs NOTIFYs nobody waits for).
                await asyncio.shield(
                    database_sync_to_async(services.task_follow)(task_id=task_id, by=-1)
                )
            except Exception:
                logger.warning("could not count out a stream of task %s", task_id, exc_info=True)


async def _stream_existing(task: Task):
    async with following(task.id) as subscription:
        current = await database_sync_to_async(Task.objects.get)(pk=task.pk)
        yield {"task": services.snapshot_of(current)}
        if current.is_terminal:
            return
        async for item in _until_terminal(subscription, current.last_sequence):
            yield item


async def get_task(
    target: Target | None, ctx: CallContext, task_id: str, *, history_length: int | None = None
) -> dict[str, Any]:
    """GetTask: the stored task, refreshed from upstream first when it is still open and no
    relay process drives it (a task waiting on the client; the driving process keeps a task
    it owns up to date itself)."""
    task = await _load(target, ctx, task_id)
    if not task.is_terminal and not task.owner and not driving.running(task.id):
        owner = target or await database_sync_to_async(target_of)(task)
        if owner is not None:
            try:
                step = await owner.refresh(task, ctx)
                if step is not None:
                    task = await _record(task, step)
            except (A2AError, upstream.UpstreamError) as error:
                logger.info("could not refresh task %s: %s", task.id, error)
    return snapshots.trim(services.snapshot_of(task), history_length=_capped(history_length))


def _capped(history_length: int | None) -> int | None:
    """RELAY_MAX_HISTORY_LENGTH bounds the history a caller gets, whatever it asks for."""
    return capped_history_length(
        history_length, Limits(max_history_length=settings.RELAY_MAX_HISTORY_LENGTH)
    )


async def cancel_task(target: Target | None, ctx: CallContext, task_id: str) -> dict[str, Any]:
    """CancelTask, through any relay process: asks the agent to stop, then cancels the relay's
    task. The process driving the task (this one or another) hears of it at once and stops
    its exchange with the agent. A task that already ended (or ends while we ask) is
    TaskNotCancelable."""
    task = await _load(target, ctx, task_id)
    if task.is_terminal:
        raise TaskNotCancelable(f"task {task.id} is {task.state}", metadata={"taskId": task.id})
    owner = target or await database_sync_to_async(target_of)(task)
    note = ""
    if owner is not None:
        try:
            await owner.cancel_upstream(task, ctx)
        except TaskNotCancelable:
            raise
        except (A2AError, upstream.UpstreamError) as error:
            note = f"canceled at the relay; the agent could not be told: {error}"
    try:
        recorded = await database_sync_to_async(services.task_cancel)(task=task, reason=note)
    except services.TerminalTaskError as error:
        if error.task.state == "canceled":
            # The agent's own "canceled" was recorded first: the cancel is what was asked for.
            return services.snapshot_of(error.task)
        raise TaskNotCancelable(
            f"task {task.id} ended before it could be canceled", metadata={"taskId": task.id}
        ) from error
    await streams.publish(task.id, recorded.sequence, recorded.event, final=True)
    driving.stop(task.id)
    return services.snapshot_of(recorded.task)


async def list_tasks(
    target: Target | None, ctx: CallContext, params: dict[str, Any]
) -> dict[str, Any]:
    return await database_sync_to_async(selectors.task_list)(
        caller=ctx.caller,
        target_kind=target.kind if target else None,
        target_id=target.id if target else None,
        params=params,
    )


async def extended_card(target: Target, ctx: CallContext) -> dict[str, Any]:
    return await target.extended_card(ctx)


def target_of(task: Task) -> Target | None:
    """The target a stored task belongs to (for the target-agnostic task API)."""
    return resolve_target(task.target_kind, task.target_id)


# --- Push-notification configs ------------------------------------------------------------


async def push_config_create(
    target: Target | None, ctx: CallContext, params: dict[str, Any]
) -> dict[str, Any]:
    from tasks_app import push

    task = await _load(target, ctx, params["taskId"])
    stored = await database_sync_to_async(push.config_create)(task=task, config=params)
    return push.config_view(stored)


async def push_config_get(
    target: Target | None, ctx: CallContext, params: dict[str, Any]
) -> dict[str, Any]:
    from tasks_app import push

    task = await _load(target, ctx, params["taskId"])
    stored = await database_sync_to_async(push.config_get)(task=task, config_id=params["id"])
    if stored is None:
        raise TaskNotFound(
            f"task {task.id} has no push notification config {params['id']!r}",
            metadata={"taskId": task.id},
        )
    return push.config_view(stored)


async def push_config_list(
    target: Target | None, ctx: CallContext, params: dict[str, Any]
) -> dict[str, Any]:
    from tasks_app import push

    task = await _load(target, ctx, params["taskId"])
    configs = await database_sync_to_async(push.config_list)(task=task)
    return {"configs": [push.config_view(c) for c in configs], "nextPageToken": ""}


async def push_config_delete(
    target: Target | None, ctx: CallContext, params: dict[str, Any]
) -> None:
    from tasks_app import push

    task = await _load(target, ctx, params["taskId"])
    await database_sync_to_async(push.config_delete)(task=task, config_id=params["id"])
