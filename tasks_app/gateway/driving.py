"""Driving a task: running a message (or a resumed exchange) on its target, recording and
publishing every event, until the task ends or waits on the client.

Every exchange runs in a job of its own (``start``), apart from the request that started
it: a client that leaves, or a blocking call that already has its answer, does not stop the
work. The job holds the task for this relay process (its ``owner``; ``supervisor`` renews the
process's lease and takes over the tasks of dead processes), and stops at once when another
process ends the task (a cancel or an expiry anywhere: ``streams.watch``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, replace
from typing import Any

from django.conf import settings
from django.utils import timezone

from relay_project import database, tracing
from relay_project.database import database_sync_to_async
from tasks_app import services, snapshots, streams, upstream
from tasks_app.gateway import ownership
from tasks_app.gateway.targets import Published, Step, Target
from tasks_app.lifecycle import (
    INTERRUPTED,
    TERMINAL,
    InvalidTransition,
    TaskState,
    check_transition,
)
from tasks_app.models import Task
from tasks_app.protocol import events as a2a_events
from tasks_app.protocol.errors import (
    A2AError,
    InternalError,
    InvalidAgentResponse,
    Unavailable,
)

logger = logging.getLogger(__name__)

FINAL_STATES = {s.value for s in TERMINAL | INTERRUPTED}
FINAL_V1_STATES = frozenset(snapshots.V1_STATE[state] for state in FINAL_STATES)

_running: dict[str, asyncio.Task] = {}
"""The jobs driving tasks in this process, by task id."""

_before_a_job: list[Callable[[], None]] = []


def before_each_job(hook: Callable[[], None]) -> None:
    """Has ``hook`` called in the event loop before each job starts (the supervisor plugs in
    here, so that a process driving tasks renews its lease)."""
    _before_a_job.append(hook)


def _spawn(task_id: str, coroutine) -> asyncio.Task:
    """Runs a task's job apart from the request that started it. It runs in a fresh context:
    the request's names executors that die with the request (asgiref's
    CurrentThreadExecutor), and every later sync_to_async would fail on them. Only the trace
    context is carried over (``tracing.fresh_context``)."""
    for hook in _before_a_job:
        hook()
    runner = asyncio.get_running_loop().create_task(coroutine, context=tracing.fresh_context())
    _running[task_id] = runner
    runner.add_done_callback(
        lambda _: _running.pop(task_id, None) if _running.get(task_id) is runner else None
    )
    return runner


def running(task_id: str) -> bool:
    """Whether a job of this process drives the task."""
    return task_id in _running


def stop(task_id: str) -> None:
    """Stops this process's job on the task, if any (the task ended otherwise)."""
    runner = _running.get(task_id)
    if runner is not None:
        runner.cancel()


@dataclass
class Outcome:
    """Where a drive got to: the task as it stands, and the agent's message when it answered
    with one (no task)."""

    task: Task
    message: dict[str, Any] | None = None
    snapshot: dict[str, Any] | None = None
    """The task as it stood when the call's answer was known (the job may have moved on)."""
    sequence: int | None = None
    """The task's last event when the call's answer was known."""

    def answer_snapshot(self) -> dict[str, Any]:
        return self.snapshot if self.snapshot is not None else services.snapshot_of(self.task)


def start(
    target: Target,
    task: Task,
    steps: AsyncIterator[Step],
    *,
    fresh: bool,
    raise_errors: bool,
) -> asyncio.Future[Outcome]:
    """Drives ``steps`` (``target.run`` or ``target.resume``) in a job of its own. The
    returned future gets the call's answer as soon as it is known: when the task ends or
    waits on the client, when the agent answered with a message, or at a step marked
    ``answered`` (the job goes on following the task). With ``raise_errors``, an A2A error
    the agent answered a fresh task with removes the task and is the future's exception (a
    blocking call raises it); otherwise it ends the task failed with the reason."""
    answered: asyncio.Future[Outcome] = asyncio.get_running_loop().create_future()
    _spawn(task.id, _job(target, task, steps, answered, fresh=fresh, raise_errors=raise_errors))
    return answered


async def _job(target, task, steps, answered, *, fresh, raise_errors) -> None:
    try:
        outcome = await _drive(target, task, steps, fresh=fresh, answered=answered)
        if not fresh:  # a task taken over, or a follow-up: left waiting, it has no owner
            await database_sync_to_async(ownership.release_if_not_driven)(task.pk)
        _answer(answered, outcome)
    except A2AError as error:
        if raise_errors and not answered.done():
            answered.set_exception(error)
            return
        logger.info("task %s ended with %s", task.pk, error)
        _answer(answered, Outcome(await _fail(task, error.message)))
    except asyncio.CancelledError:
        _answer(answered, Outcome(task))
        raise
    except database.UNAVAILABLE as error:
        logger.warning(
            "task %s: its exchange could not be recorded (%s); giving it up", task.pk, error
        )
        if not answered.done():
            answered.set_exception(Unavailable(database.UNAVAILABLE_MESSAGE))
        # Waits for the database: a task is never left owned by a process that stopped driving it.
        await database.retried(ownership.give_up, task.pk)
    except Exception:
        logger.exception("driving task %s failed", task.pk)
        if not answered.done():
            answered.set_exception(InternalError("the relay failed while running the task"))


def _answer(answered: asyncio.Future[Outcome] | None, outcome: Outcome) -> None:
    if answered is not None and not answered.done():
        answered.set_result(outcome)


async def _answer_now(answered: asyncio.Future[Outcome] | None, outcome: Outcome) -> Outcome:
    """Gives the call its answer once the task's end is recorded, and lets the caller send it
    before this job winds down (its agent's steps closed, its watch on the task ended): at
    one call at a time that is 30 µs less before the answer leaves."""
    _answer(answered, outcome)
    await asyncio.sleep(0)
    return outcome


async def _record(task: Task, *steps: Step) -> Task:
    """Records the steps in order, together (a task already ended ignores the rest), bringing
    ``task`` up to date, and publishes what was recorded."""
    try:
        recorded = await _written(
            services.task_record_many,
            task=task,
            events=[(s.event, s.upstream_task_id, s.upstream_context_id) for s in steps],
        )
    except InvalidTransition as error:
        raise InvalidAgentResponse(
            f"the agent moved the task in a way A2A forbids: {error}"
        ) from error
    for done in recorded:
        await Published(task.id, done.sequence, done.event, done.state in FINAL_STATES).send()
    return task


async def _written(write, *, task: Task, **arguments):
    """``write(task=task, **arguments)`` in the database thread, retried with backoff while the
    database is unavailable, for RELAY_DATABASE_OUTAGE_SECONDS at most and never past the
    task's expiry; then the database's error is raised. Safe to repeat: a write is a
    compare-and-set that decides again on the task as it then stands."""
    seconds = settings.RELAY_DATABASE_OUTAGE_SECONDS
    if task.expires_at is not None:
        seconds = min(seconds, (task.expires_at - timezone.now()).total_seconds())
    return await database.retried(
        write, task=task, deadline=time.monotonic() + seconds, **arguments
    )


async def _fail(task: Task, reason: str) -> Task:
    recorded = await _written(services.task_fail, task=task, reason=reason)
    if recorded.event is not None:
        await streams.publish(task.id, recorded.sequence, recorded.event, final=True)
    return recorded.task


async def _reply_as_message(task: Task, step: Step) -> Outcome:
    """The agent answered with a Message, not a task: the relay's task ends completed with
    that message, and stream subscribers get the message alone."""
    end = _as_recorded_end(task, step).event
    for recorded in await _written(services.task_record_many, task=task, events=[(end, "", "")]):
        await streams.publish(task.id, recorded.sequence, step.event, final=True)
    return Outcome(task, step.event["message"])


async def _drive(
    target: Target,
    task: Task,
    steps: AsyncIterator[Step],
    *,
    fresh: bool,
    answered: asyncio.Future[Outcome] | None = None,
) -> Outcome:
    """Records and publishes every step until the task ends or waits on the client, telling
    ``answered`` when a step marks the call's answer. Upstream failures end the task ``failed`` with the reason; an
    A2A error from the agent on a fresh task removes the task and is raised. Stops, with the
    task as it stands, when another writer (a cancel or an expiry, in any process) ends the
    task."""
    ended_elsewhere = False
    try:
        async with asyncio.timeout(None) as scope:

            def end(state: str) -> None:
                nonlocal ended_elsewhere
                if not task.is_terminal:  # not our own final event coming back
                    ended_elsewhere = True
                    scope.reschedule(asyncio.get_running_loop().time())

            return await _steps_recorded(target, task, steps, end, fresh=fresh, answered=answered)
    except TimeoutError:
        if not ended_elsewhere:
            raise
    # The task was ended by another writer: stop here, with the task as it stands.
    await database_sync_to_async(task.refresh_from_db)()
    return Outcome(task)


async def _steps_recorded(target, task, steps, end, *, fresh, answered) -> Outcome:
    """The body of ``_drive``, with ``end`` watching the task."""
    seen_event = False
    try:
        with streams.watch(task.id, end):
            # Closed here when we stop early (a final state): left to the garbage
            # collector, the upstream stream would be closed later from another task,
            # and fail there.
            async with contextlib.aclosing(_batches(steps)) as batches:
                async for batch in batches:
                    pending = list(batch)
                    while pending:
                        step = pending.pop(0)
                        if step.recorded:
                            seen_event = True
                            if "message" in step.event:
                                return Outcome(task, step.event["message"])
                            if step.answered:
                                _answer(
                                    answered,
                                    Outcome(
                                        task,
                                        snapshot=services.snapshot_of(task),
                                        sequence=task.last_sequence,
                                    ),
                                )
                            if _state_of(step.event) in FINAL_STATES:
                                return Outcome(task)
                            continue
                        if "message" in step.event and not seen_event:
                            return await _answer_now(answered, await _reply_as_message(task, step))
                        if not seen_event and TaskState(task.state) in INTERRUPTED:
                            # The agent took the client's answer: the task works again. Left
                            # interrupted, the first update of the resumed work (an
                            # artifact) would look final and end the drive and the stream
                            # before the new state came.
                            task = await _record(
                                task, Step(services.status_event(task, TaskState.WORKING))
                            )
                        seen_event = True
                        # Events that arrived while the last ones were being recorded are
                        # recorded together: one transaction for a burst, not one each.
                        together = []
                        while pending and _plain(step) and _plain(pending[0]):
                            together.append(pending.pop(0))
                        task = await _record(task, step, *together)
                        if step.answered:
                            _answer(
                                answered,
                                Outcome(
                                    task,
                                    snapshot=services.snapshot_of(task),
                                    sequence=task.last_sequence,
                                ),
                            )
                        if task.state in FINAL_STATES:
                            return await _answer_now(answered, Outcome(task))
        return Outcome(task)
    except upstream.UpstreamError as error:
        return Outcome(await _fail(task, error.message))
    except InvalidAgentResponse as error:
        await _fail(task, error.message)
        # The task is stored, failed with the reason: the caller can look it up.
        error.metadata.setdefault("taskId", task.id)
        raise
    except A2AError:
        if fresh and not seen_event:
            await database_sync_to_async(Task.objects.filter(pk=task.pk).delete)()
        raise
    except database.UNAVAILABLE:
        raise  # nothing can be written now: the job gives the task up (``_job``)
    except Exception:
        logger.exception("running task %s on %s %s failed", task.pk, target.kind, target.id)
        await _fail(task, f"the relay failed while running the task on {target.id!r}")
        raise


def _state_of(event: dict[str, Any]) -> str | None:
    """The state (storage spelling) an event leaves its task in, when it says."""
    return snapshots.state_of(event.get("task") or event.get("statusUpdate") or {})


def _plain(step: Step) -> bool:
    """An event with nothing of its own to do besides being recorded."""
    return not step.answered and not step.recorded and "message" not in step.event


BATCH_LIMIT = 64
_END = object()


async def _batches(steps: AsyncIterator[Step]) -> AsyncIterator[list[Step]]:
    """The steps in lists of those already there: after the first, a reader runs ahead of the
    recording and queues what the agent sends meanwhile (at most BATCH_LIMIT a list). The
    first step is read here, so an answer of one step (a unary call's) needs no reader. The
    other steps are read and closed in the reader's own task; an error of theirs is raised
    after the steps before it."""
    queue: asyncio.Queue = asyncio.Queue(maxsize=BATCH_LIMIT * 2)

    async def read() -> None:
        try:
            async with contextlib.aclosing(steps):
                async for step in steps:
                    await queue.put(step)
        except Exception as error:
            await queue.put(_Raised(error))
        else:
            await queue.put(_END)

    reader = None
    try:
        try:
            first = await anext(steps)
        except StopAsyncIteration:
            return
        yield [first]
        reader = asyncio.get_running_loop().create_task(read())
        while True:
            batch = [await queue.get()]
            while len(batch) < BATCH_LIMIT and not queue.empty():
                batch.append(queue.get_nowait())
            steps_now = [item for item in batch if isinstance(item, Step)]
            if steps_now:
                yield steps_now
            last = batch[-1]
            if last is _END:
                return
            if isinstance(last, _Raised):
                raise last.error
    finally:
        if reader is None:
            await steps.aclose()
        elif not reader.done():
            reader.cancel()
            await asyncio.wait([reader])  # closes the steps in their own task


@dataclass(frozen=True)
class _Raised:
    error: Exception


def ending(task: Task, step: Step) -> dict[str, Any] | None:
    """What the call answers when ``step`` ends the task (a final state, or one that waits on
    the client, reached by a move A2A allows): the task as the step leaves it, or the agent's
    message (given as its first answer); None when the task goes on."""
    if "message" in step.event:
        return {"message": step.event["message"]}
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
    return {"task": after}


class Exchange:
    """A task its caller drives in its own coroutine (a team calling a member): ``events``
    records and publishes every step on the task and yields it, until the step that ends the
    task. That one is not recorded: it is ``end`` (what to record: a message answer becomes
    the task completed with it), with ``answer`` what the call answers. The caller records it
    with writes of its own, in one transaction (``store_end``, synchronous). A failure of the
    agent ends the task failed (``answer`` is that task, ``end`` None); an A2A error the agent
    answered a fresh task with removes the task and is raised. Stops when another writer (a
    cancel) ends the task, ``answer`` then the task as it stands."""

    def __init__(
        self, target: Target, task: Task, steps: AsyncIterator[Step], *, fresh: bool
    ) -> None:
        self.target, self.task, self._steps, self._fresh = target, task, steps, fresh
        self.end: Step | None = None
        self.answer: dict[str, Any] | None = None

    async def events(self) -> AsyncIterator[Step]:
        task, seen_event = self.task, False
        resumed = TaskState(task.state) in INTERRUPTED
        ended_elsewhere = asyncio.Event()
        try:
            with streams.watch(task.id, lambda state: task.is_terminal or ended_elsewhere.set()):
                async with contextlib.aclosing(self._steps) as steps:
                    async for step in steps:
                        if ended_elsewhere.is_set():
                            break
                        answer = ending(task, step)
                        if answer is not None:
                            self.answer, self.end = answer, _as_recorded_end(task, step)
                            return
                        if resumed and not seen_event:
                            # The agent took the client's answer: the task works again.
                            await _record(
                                task, Step(services.status_event(task, TaskState.WORKING))
                            )
                        seen_event = True
                        await _record(task, step)
                        yield step
                        if task.is_terminal:
                            break
        except upstream.UpstreamError as error:
            await _fail(task, error.message)
        except InvalidAgentResponse as error:
            await _fail(task, error.message)
            raise
        except A2AError:
            if self._fresh and not seen_event:
                await database_sync_to_async(Task.objects.filter(pk=task.pk).delete)()
            raise
        if ended_elsewhere.is_set():
            await database_sync_to_async(task.refresh_from_db)()
        self.answer = {"task": services.snapshot_of(task)}

    def store_end(self) -> list[Published]:
        """Records ``end`` (synchronous: in the caller's transaction); returns what to publish
        once it commits. A task that ended meanwhile (a cancel) keeps its end."""
        if self.end is None:
            return []
        recorded = services.task_record(
            task=self.task,
            event=self.end.event,
            upstream_task_id=self.end.upstream_task_id,
            upstream_context_id=self.end.upstream_context_id,
        )
        if recorded.event is None:
            return []
        # Stream subscribers of a task answered by a message get the message alone.
        event = self.answer if "message" in self.answer else recorded.event
        return [Published(self.task.id, recorded.sequence, event, True)]

    @property
    def upstream_task_id(self) -> str:
        return self.task.upstream_task_id or (self.end.upstream_task_id if self.end else "")

    @property
    def upstream_context_id(self) -> str:
        return self.task.upstream_context_id or (self.end.upstream_context_id if self.end else "")


def _as_recorded_end(task: Task, step: Step) -> Step:
    """The step that ends a task as it is recorded: a message answer ends it completed with
    that message."""
    if "message" not in step.event:
        return step
    completed = a2a_events.status_event(
        task_id=task.id,
        context_id=task.context_id,
        status=a2a_events.task_status(TaskState.COMPLETED, message=step.event["message"]),
    )
    return replace(step, event=completed, upstream_task_id="")
