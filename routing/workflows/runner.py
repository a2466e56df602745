"""A workflow as an A2A agent: ``WorkflowTarget`` runs the caller's message through the
workflow's steps, one child task per call step, the planner (``planner.plan``) deciding from
the recorded children what starts next.

Each call step is a child task of the workflow task (same caller, ``parent`` = the workflow
task), opened with its ``WorkflowStepRun`` row in one transaction (unique per run and step
key: a step starts once) and driven by the gateway's own job, as a call to that agent, team
or workflow would be: it is owned by this process, recorded, cancelable, and taken over by
another process when this one dies. The workflow task follows its children's events through
the task streams, forwarding each as its own, tagged with the step (``run_steps.forwarded``).

- When a step ends, the planner runs again on what is stored: the next steps start (a
  parallel's all at once), the losers of a decided ``join: first`` or ``quorum`` are
  canceled, or the run ends: completed with the output step's output (an artifact and the
  final message), or failed naming the step and why.
- A step that asks its caller for input (or auth): once no other step is at work, the
  workflow task waits in that state with the step's question; the caller's next message on
  the workflow task goes to that step's task, and the run goes on.
- Before each step starts, the quotas that apply to it are checked (``quotas.step_refusal``:
  the workflow's budget, the step target's quota, the caller's): a refused step is stored
  failed with the quota's message, so a looping workflow stops at its budget.
- Cancel cancels the steps at work (and waiting), then the workflow task.
- Takeover (``resume``): the process that takes over a workflow task whose process died
  plans from the stored children: finished steps are never run again, steps at work (taken
  over themselves, like any agent call) are followed, and the run goes on.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from dataclasses import dataclass
from typing import Any

from asgiref.sync import sync_to_async
from django.db import transaction

from relay_project import tracing
from routing import selectors, services
from routing.workflows import planner, run_steps
from routing.workflows.definition import Workflow as Definition
from tasks_app import gateway, streams
from tasks_app import services as task_services
from tasks_app.gateway import driving, ownership
from tasks_app.lifecycle import INTERRUPTED, InvalidTransition, TaskState
from tasks_app.models import Task
from tasks_app.protocol.errors import (
    A2AError,
    InvalidAgentResponse,
    TaskNotCancelable,
    UnsupportedOperation,
)
from tasks_app.usage import quotas

FOLLOW_CHECK_SECONDS = 5.0
"""How long a followed step task may stay quiet before its row is read again."""


@dataclass(frozen=True)
class LoadedWorkflow:
    """What a call to a workflow needs, kept per process (``loading.workflow_target``)."""

    id: str
    name: str
    description: str
    definition: Definition
    targets: dict[str, dict[str, str]]


class WorkflowTarget(gateway.Target):
    """A workflow, answering as one A2A agent (kind "workflow")."""

    def __init__(self, loaded: LoadedWorkflow) -> None:
        super().__init__(
            kind="workflow",
            id=loaded.id,
            name=loaded.name,
            streaming=True,
            announces_task=True,
        )
        self.loaded = loaded

    stream = True
    """Whether step tasks are called streaming (when their targets can): as the caller called
    the workflow, as a team calls its members; a run taken over streams."""

    async def run(self, task, request, ctx, *, stream):
        self.stream = stream
        if TaskState(task.state) in INTERRUPTED:
            # The caller answered the question of a waiting step: it goes to that step.
            yield await _recorded(task, run_steps.run_event(task, TaskState.WORKING))
            drives = await self._answer_step(task, request, ctx)
        else:
            drives = {}
        span = None
        if tracing.enabled():  # the steps' calls are children of the workflow's span
            span = tracing.workflow_span(
                name=self.name, target_id=self.id, task=task, parent=ctx.trace
            )
            ctx = dataclasses.replace(ctx, trace=tracing.within(span))
        # A message that names no task opened this one: it has no steps stored yet.
        fresh = not request["message"].get("taskId")
        steps = self._steps(task, ctx, drives, fresh=fresh)
        if span is not None:
            steps = tracing.in_workflow(steps, span)
        async with contextlib.aclosing(steps):
            async for step in steps:
                yield step

    async def resume(self, task, ctx):
        """Goes on from what is stored (see the module's docstring)."""
        steps = self._steps(task, ctx)
        async with contextlib.aclosing(steps):
            async for step in steps:
                yield step

    async def cancel_upstream(self, task, ctx):
        """Cancels the step tasks at work or waiting, at the relay and beyond."""
        as_caller = gateway.CallContext(caller=ctx.caller)
        for child in await sync_to_async(selectors.open_children)(parent_id=task.id):
            with contextlib.suppress(TaskNotCancelable, A2AError):
                await gateway.cancel_task(gateway.target_of(child), as_caller, child.id)

    def owns(self, task) -> bool:
        return task.target_kind == "workflow" and task.target_id == self.id

    # --- the run ------------------------------------------------------------------------

    async def _steps(
        self,
        task: Task,
        ctx: gateway.CallContext,
        drives: dict | None = None,
        *,
        fresh: bool = False,
    ):
        """Plans, starts and follows steps until the run ends or waits on its caller.
        ``drives``: the step tasks to drive here, by id (a target and its steps), started
        once their events are followed. A ``fresh`` run (its task just opened) reads no
        steps: none are stored yet."""
        drives = {} if drives is None else drives
        message = run_steps.caller_message(task)  # the task in hand: nothing to read
        queue: asyncio.Queue[tuple[str, str, Any]] = asyncio.Queue()
        followers: dict[str, asyncio.Task] = {}
        settled: set[str] = set()  # the steps whose end is recorded
        driven: dict[str, Any] = {}  # step tasks driven here, their events copied (``_copied``)
        try:
            rows = {} if fresh else await sync_to_async(run_steps.step_rows)(run=task)
            while True:
                # A followed step counts as ended once its end is taken here (numbered in the
                # order steps ended), not as soon as its driver records it.
                results = {
                    key: run_steps.result_of(row)
                    for key, row in rows.items()
                    if row.ended and (row.seq or key not in followers)
                }
                running = [key for key in rows if key not in results]
                plan = planner.plan(
                    self.loaded.definition, message=message, results=results, running=running
                )
                for key in plan.cancel:
                    await self._cancel_step(rows.get(key), followers.pop(key, None), ctx)
                if plan.cancel:  # the canceled steps' tasks as they now stand
                    rows = await sync_to_async(run_steps.step_rows)(run=task)
                if plan.finished:
                    for step in await self._finish(task, plan):
                        yield step
                    return
                for start in plan.start:
                    child = await self._start(task, ctx, start, drives)
                    if child is None:  # started elsewhere meanwhile: plan again
                        rows = await sync_to_async(run_steps.step_rows)(run=task)
                        break
                    rows[start.key] = run_steps.StepRow(start.key, child, 0)
                    drive = drives.pop(child.id, None)
                    follow = self._follow(task, start.key, child, queue, driven, drive)
                    followers[start.key] = _spawn(follow)
                else:
                    for key in running:
                        child = rows[key].child
                        if key in followers or key in plan.cancel:
                            continue
                        if rows[key].waiting and child.id not in drives:
                            continue
                        drive = drives.pop(child.id, None)
                        follow = self._follow(task, key, child, queue, driven, drive)
                        followers[key] = _spawn(follow)
                    if not followers:
                        waiting = [rows[key] for key in running if rows[key].waiting]
                        yield await self._ask(task, waiting)
                        return
                    ended = self._until_one_ends(task, queue, followers, rows, settled, driven)
                    async for step in ended:
                        yield step
        finally:
            for follower in followers.values():
                follower.cancel()

    async def _until_one_ends(self, task, queue, followers, rows, settled, driven):
        """Forwards the steps' events until one step's task ends (or waits on its caller),
        keeping ``rows`` as stored. The events of a step task started here are copied on the
        run by its driver, with each of the step task's own (``_copied``; ``driven`` has the
        last copies, by the step task's id); the others' (a step followed from elsewhere, or
        answering its question, and an end the driver did not see: a failure, a cancel) are
        recorded here as they come."""
        while True:
            kind, key, payload = await queue.get()
            if kind == "done":
                followers.pop(key, None)
                if payload is not None:
                    raise payload
                if key not in settled:  # it went quiet, or was followed from elsewhere
                    rows.update(await sync_to_async(run_steps.step_rows)(run=task))
                return
            event, state, final = payload
            child_id = rows[key].child.id
            if not final and child_id in driven:
                continue  # copied by its driver
            events = run_steps.forwarded(
                event, task, step=_step_id(key), key=key, state=state, child=rows[key].child
            )
            if not final:
                if events:
                    await gateway.record(task, *(gateway.Step(each) for each in events))
                for each in events:
                    yield gateway.Step(each, recorded=True)
                continue
            if rows[key].child.state != state:  # not driven here: read as it stands
                await sync_to_async(rows[key].child.refresh_from_db)()
            rows[key] = _settled(rows, key)
            if rows[key].ended:
                settled.add(key)
            recorded = driven.pop(child_id, None)
            if recorded is not None:
                for each in recorded:
                    yield gateway.Step(each, recorded=True)
            else:
                async for step in _flushed(task, events):
                    yield step

    async def _start(
        self,
        task: Task,
        ctx: gateway.CallContext,
        start: planner.Start,
        drives: dict,
    ) -> Task | None:
        """Opens the step's child task and starts driving it; None when already started."""
        kind = start.step.kind
        target_id = self.loaded.targets.get(kind, {}).get(start.step.target, start.step.target)
        child_ctx = gateway.CallContext(
            caller=ctx.caller,
            version=ctx.version,
            extensions=ctx.extensions,
            delegation=(*ctx.delegation, f"workflow:{self.id}"),
            parent_task_id=task.id,
            trace=ctx.trace,
        )
        request = {"message": run_steps.step_message(run=task, key=start.key, text=start.input)}
        target, child, refused = await sync_to_async(_opened)(
            task, start.key, kind, target_id, child_ctx, request, self.id
        )
        if child is None or refused:  # started elsewhere, or stored failed
            return child
        if isinstance(target, _Missing):
            await driving._fail(child, f"{kind} {target_id!r} cannot be called")
            return child
        stream = self.stream and target.streaming
        steps = _refusal_failed(child, target.run(child, request, child_ctx, stream=stream))
        drives[child.id] = (target, steps, 0, True)
        return child

    async def _follow(self, task, key, child, queue, driven, drive=None) -> None:
        """Puts the step task's events on ``queue`` until it ends or waits, then ("done"),
        driving it first when ``drive`` (its target, steps and last sequence) is given: its
        events are then published in this process, and a plain subscription hears them; a
        fresh one's events are copied on the run as they are recorded (``_copied``). A
        step task driven elsewhere (a takeover) is followed counted on the task, so that its
        driver's process announces every event."""
        error: BaseException | None = None
        try:
            if drive is not None:
                target, steps, after, fresh = drive
                if fresh:
                    driven[child.id] = None
                    steps = _copied(task, key, child, steps, driven)
                async with streams.subscription(child.id) as followed:
                    driving.start(target, child, steps, fresh=fresh, raise_errors=False)
                    await _forwarded(key, child, followed, after, queue)
            else:
                async with gateway.following(child.id) as followed:
                    await sync_to_async(child.refresh_from_db)()
                    if ownership.being_driven(child):
                        await _forwarded(key, child, followed, child.last_sequence, queue)
        except asyncio.CancelledError:
            raise
        except Exception as failure:  # noqa: BLE001 - handed to the run, which ends failed
            error = failure
        await queue.put(("done", key, error))

    async def _cancel_step(self, row, follower, ctx) -> None:
        if follower is not None:
            follower.cancel()
        if row is None or row.ended:
            return
        with contextlib.suppress(TaskNotCancelable, A2AError):
            await gateway.cancel_task(
                gateway.target_of(row.child), gateway.CallContext(caller=ctx.caller), row.child.id
            )

    async def _finish(self, task: Task, plan: planner.Plan) -> list[gateway.Step]:
        """The run's end (its output and its final update), in one write."""
        if plan.error:
            event = run_steps.run_event(task, TaskState.FAILED, text=plan.error)
            published = await sync_to_async(_record_many)(task, [event], error=plan.error)
        else:
            output_step = self.loaded.definition.output_step
            events = run_steps.output_events(
                task, plan.output, name=output_step.output or output_step.id
            )
            published = await sync_to_async(_record_many)(task, events)
        for each in published:
            await each.send()
        if not published:
            return [gateway.Step({}, recorded=True)]
        return [gateway.Step(each.event, recorded=True) for each in published]

    async def _ask(self, task: Task, waiting: list[run_steps.StepRow]) -> gateway.Step:
        """The run waits on its caller with the first waiting step's question."""
        if not waiting:
            event = run_steps.run_event(
                task, TaskState.FAILED, text="the workflow has no step at work and none to start"
            )
            return await _recorded(task, event)
        row = waiting[0]
        child = row.child
        metadata = run_steps.step_tag(
            step=_step_id(row.key), key=row.key, state=child.state, child=child
        )
        # Tagged on the update and on its message: a blocking caller sees only the task.
        question = dict(child.status_message or {})
        question["metadata"] = {**(question.get("metadata") or {}), **metadata}
        event = run_steps.run_event(
            task, TaskState(child.state), message=question, metadata=metadata
        )
        return await _recorded(task, event)

    async def _answer_step(self, task: Task, request: dict, ctx: gateway.CallContext) -> dict:
        """Sends the caller's answer on to the step that asked (its own task): the drive of
        that task, by its id (none when no step waits)."""
        rows = await sync_to_async(run_steps.step_rows)(run=task)
        waiting = [row for row in rows.values() if row.waiting]
        if not waiting:
            return {}
        child = waiting[0].child
        target = await sync_to_async(gateway.target_of)(child)
        if target is None:
            return {}
        message = {
            key: value
            for key, value in request["message"].items()
            if key not in ("contextId", "referenceTaskIds")
        }
        message["taskId"] = child.id
        child_ctx = gateway.CallContext(
            caller=ctx.caller,
            version=ctx.version,
            extensions=ctx.extensions,
            delegation=(*ctx.delegation, f"workflow:{self.id}"),
            parent_task_id=task.id,
            trace=ctx.trace,
        )
        answer = {"message": message}
        opened = await sync_to_async(gateway.open_task)(target, child_ctx, answer)
        steps = target.run(opened.task, answer, child_ctx, stream=self.stream and target.streaming)
        return {opened.task.id: (target, steps, opened.task.last_sequence, False)}


class _Missing(gateway.Target):
    """A step's target that cannot be called (deleted or disabled since the workflow was
    saved): its task is opened and ends failed saying so."""

    def __init__(self, kind: str, target_id: str) -> None:
        super().__init__(kind=kind, id=target_id)

    stream = True
    """Whether step tasks are called streaming (when their targets can): as the caller called
    the workflow, as a team calls its members; a run taken over streams."""

    async def run(self, task, request, ctx, *, stream):
        self.stream = stream
        raise UnsupportedOperation(f"{self.kind} {self.id!r} cannot be called")
        yield  # an async generator


def _opened(run, key, kind, target_id, ctx, request, workflow_id):
    """The step's target and its child task, opened (``run_steps.step_open``) in the same trip
    to the database as the target is resolved; a missing target's task, and one its target
    or a quota refused (the workflow's budget, the target's, the caller's: ``quotas``), are
    opened failed (the latter two, stored failed, are said by the third value)."""
    target = gateway.resolve_target(kind, target_id) or _Missing(kind, target_id)
    exceeded = quotas.step_refusal(
        caller=ctx.caller, workflow_id=workflow_id, target_kind=kind, target_id=target_id
    )
    if exceeded is not None:
        return target, _failed_step(run, key, target, ctx, request, exceeded.message), True
    try:
        child = run_steps.step_open(run=run, key=key, target=target, ctx=ctx, request=request)
    except A2AError as error:
        failed = _failed_step(run, key, target, ctx, request, error.message)
        return target, failed, True
    return target, child, False


def _failed_step(run, key, target, ctx, request, reason):
    """A step whose target refused the message before any task: stored failed, so the run
    fails naming it (and never sends it again)."""
    child = run_steps.step_open(
        run=run, key=key, target=_Missing(target.kind, target.id), ctx=ctx, request=request
    )
    if child is not None:
        from tasks_app import services

        services.task_fail(task=child, reason=reason)
    return child


async def _forwarded(key: str, child: Task, followed, after: int, queue: asyncio.Queue) -> None:
    """The step task's events after ``after``, onto ``queue``, until it ends or waits (or,
    quiet for a while, is found driven by nobody)."""
    async for item in followed.events(after=after, keepalive=FOLLOW_CHECK_SECONDS):
        if item is streams.KEEPALIVE:
            await sync_to_async(child.refresh_from_db)()
            if ownership.being_driven(child):
                continue
            return
        event, final = item
        await queue.put(("event", key, (event, run_steps.state_of(event), final)))
        if final:
            return


async def _refusal_failed(child: Task, steps):
    """The step task's steps, an A2A error of its target (a refusal of the step's message)
    ending it failed with the reason: the step task stays, for the run to see, and its step
    is never sent again (the driver would remove a fresh task its agent refused)."""
    try:
        async with contextlib.aclosing(steps):
            async for step in steps:
                yield step
    except A2AError as error:
        yield gateway.Step(task_services.status_event(child, TaskState.FAILED, error.message))


async def _copied(run: Task, key: str, child: Task, steps, driven: dict):
    """The steps of a step task driven here, each recorded by itself with its copies on the
    run (``_recorded_with_copies``) and handed to the driver as recorded: the run holds a
    step's events, its last ones included, as soon as the step task does."""
    async with contextlib.aclosing(steps):
        async for step in steps:
            if not step.recorded:
                published = await sync_to_async(_recorded_with_copies)(
                    run, key, child, step, driven
                )
                for each in published:
                    await each.send()
                step = gateway.Step(published[0].event if published else step.event, recorded=True)
            yield step


def _recorded_with_copies(run: Task, key: str, child: Task, step: gateway.Step, driven: dict):
    """A step task's event and its copies on the run (``run_steps.forwarded``), in one
    transaction; returns what to publish (the step task's event first). A message answer
    ends the step task completed with it, as the driver would record it. Once the step task
    ends or waits, ``driven`` holds the run's copies of that last event, by its id."""
    end = gateway.recorded_end(child, step) if gateway.ending(child, step) else step
    with transaction.atomic():
        try:
            done = task_services.task_record_many(
                task=child, events=[(end.event, end.upstream_task_id, end.upstream_context_id)]
            )
        except InvalidTransition as error:
            raise InvalidAgentResponse(
                f"the agent moved the task in a way A2A forbids: {error}"
            ) from error
        if not done:  # the step task ended meanwhile (a cancel)
            return []
        # Stream subscribers of a task answered by a message get the message alone.
        event = step.event if "message" in step.event else done[0].event
        state = run_steps.state_of(event)
        events = run_steps.forwarded(
            event, run, step=_step_id(key), key=key, state=state, child=child
        )
        published = _record_many(run, events) if events else []
    final = done[0].state in gateway.FINAL_STATES
    if final:
        driven[child.id] = [each.event for each in published]
    return [gateway.Published(child.id, done[0].sequence, event, final), *published]


def _step_id(key: str) -> str:
    return key.rsplit("/", 1)[-1]


def _spawn(coroutine) -> asyncio.Task:
    return asyncio.get_running_loop().create_task(coroutine)


def _settled(rows, key):
    """A step whose task ended or waits, its row as it now stands: an ended one numbered
    next in the order steps ended (as ``run_steps.ended_order`` reads it back)."""
    row = rows[key]
    if not row.child.is_terminal or row.seq:
        return row
    seq = 1 + max((each.seq for each in rows.values()), default=0)
    return run_steps.StepRow(key, row.child, seq)


async def _flushed(task: Task, events: list[dict[str, Any]]):
    """``events`` recorded on the run now (and emptied), as steps recorded."""
    if not events:
        return
    together, events[:] = list(events), []
    for each in await sync_to_async(_record_many)(task, together):
        await each.send()
    for each in together:
        yield gateway.Step(each, recorded=True)


def _record_many(task: Task, events: list[dict[str, Any]], *, error: str = ""):
    """The run's events recorded together: one write for all of them (a step's artifacts and
    its update, the run's output and its end), with ``error`` as the reason it fails."""
    if error:
        return services.task_events_record(task=task, events=events, error=error)
    recorded = task_services.task_record_many(task=task, events=[(e, "", "") for e in events])
    return [
        gateway.Published(task.id, done.sequence, done.event, done.state in gateway.FINAL_STATES)
        for done in recorded
    ]


async def _recorded(task: Task, event: dict[str, Any]) -> gateway.Step:
    await gateway.record(task, gateway.Step(event))
    return gateway.Step(event, recorded=True)
