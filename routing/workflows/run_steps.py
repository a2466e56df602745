"""A workflow run's steps as stored: each call step is a child task of the run's task, named by
its key in a ``WorkflowStepRun`` row (unique per run and key, so a step starts once). Reads
and writes of those rows, what a finished child gave (``output_of``), and a child's events
as the run task's own (``forwarded``), each naming its step in ``metadata[STEP_KEY]``. The
order steps ended in is read from those events (``ended_order``), not written apart."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db import IntegrityError, transaction

from routing.models import WorkflowStepRun
from routing.workflows.expressions import Message, StepOutput
from routing.workflows.planner import Failed
from tasks_app import gateway, snapshots
from tasks_app.lifecycle import INTERRUPTED, TERMINAL, TaskState
from tasks_app.models import Task, TaskEvent
from tasks_app.protocol import events as a2a_events

STEP_KEY = a2a_events.WORKFLOW_STEP_KEY
"""The metadata key of every event a workflow task forwards from a step:
``{"step": id, "key": key, "state": the step task's state, "kind": its target's kind,
"target": its target's id}``."""

_INTERRUPTED = frozenset(state.value for state in INTERRUPTED)
_TERMINAL = [state.value for state in TERMINAL]


@dataclass(frozen=True)
class StepRow:
    key: str
    child: Task
    seq: int

    @property
    def ended(self) -> bool:
        return self.child.is_terminal

    @property
    def waiting(self) -> bool:
        """The step's task asks its caller for input (or auth)."""
        return self.child.state in _INTERRUPTED


def step_rows(*, run: Task) -> dict[str, StepRow]:
    """The run's steps started so far, by key, with their child tasks, each ended one
    numbered in the order steps ended (``ended_order``); one query, and one more for the
    order when a step has ended."""
    rows = list(WorkflowStepRun.objects.filter(run=run).select_related("child").order_by("id"))
    ended = [row for row in rows if row.child.is_terminal]
    order = ended_order(run) if ended else {}
    last = len(order)
    ranked = sorted(ended, key=lambda row: (order.get(row.key, last), row.child.updated_at))
    seqs = {row.key: number for number, row in enumerate(ranked, 1)}
    return {row.key: StepRow(row.key, row.child, seqs.get(row.key, 0)) for row in rows}


def ended_order(run: Task) -> dict[str, int]:
    """The order in which the run recorded its steps' ends, by key: the run records a step's
    last event, tagged with the step and its end state, once that step's task ended
    (``forwarded``), so the run's own events number the steps with no write of their own.
    A step that ended while nobody followed it (a takeover) is not among them."""
    order: dict[str, int] = {}
    events = TaskEvent.objects.filter(task=run).order_by("sequence").values_list("payload")
    for (payload,) in events:
        tag = _tag_of(payload)
        if tag and tag.get("state") in _TERMINAL and tag.get("key") not in order:
            order[tag["key"]] = len(order)
    return order


def _tag_of(event: dict[str, Any]) -> dict[str, Any] | None:
    if "statusUpdate" in event:
        metadata = event["statusUpdate"].get("metadata") or {}
    else:
        metadata = ((event.get("artifactUpdate") or {}).get("artifact") or {}).get("metadata")
    tag = (metadata or {}).get(STEP_KEY)
    return tag if isinstance(tag, dict) else None


def step_open(
    *, run: Task, key: str, target: gateway.Target, ctx: gateway.CallContext, request: dict
) -> Task | None:
    """Opens the step's child task and its row together; None when the run has a row for this
    key already (another process started the step: it is followed, never started twice)."""
    try:
        with transaction.atomic():
            opened = gateway.open_task(target, ctx, request)
            WorkflowStepRun.objects.create(run=run, key=key, child=opened.task)
    except IntegrityError:
        return None
    return opened.task


def result_of(row: StepRow) -> StepOutput | Failed:
    """What a finished step gave the planner: its output, or why it failed."""
    child = row.child
    if child.state == TaskState.COMPLETED.value:
        return output_of(child, seq=row.seq)
    reason = text_of((child.status_message or {}).get("parts")) or child.error
    return Failed(f"its task ended {child.state}" + (f": {reason}" if reason else ""), row.seq)


def output_of(child: Task, *, seq: int = 0) -> StepOutput:
    """A finished task's output: the text of its final message then of its artifacts, and the
    fields of their data parts (later ones win). A workflow's task answers with its final
    message alone (its artifacts repeat its steps' and its output)."""
    parts = list((child.status_message or {}).get("parts") or [])
    if child.target_kind != "workflow":
        for artifact in child.artifacts or []:
            parts += artifact.get("parts") or []
    data: dict[str, Any] = {}
    for part in parts:
        if isinstance(part.get("data"), dict):
            data.update(part["data"])
    return StepOutput(text=text_of(parts), data=data, seq=seq)


def text_of(parts: list[dict[str, Any]] | None) -> str:
    return "\n".join(part["text"] for part in parts or [] if isinstance(part.get("text"), str))


def caller_message(run: Task) -> Message:
    """The caller's first message to the run, as templates read it."""
    first = next(
        (item for item in run.history or [] if item.get("role") in ("ROLE_USER", "user")),
        {},
    )
    parts = first.get("parts") or []
    data: dict[str, Any] = {}
    for part in parts:
        if isinstance(part.get("data"), dict):
            data.update(part["data"])
    return Message(text=text_of(parts), data=data, metadata=first.get("metadata") or {})


def step_message(*, run: Task, key: str, text: str) -> dict[str, Any]:
    """The message a step's agent gets: its rendered input, from the user's side."""
    return a2a_events.message(
        message_id=f"{run.id}-{key}",
        role=a2a_events.ROLE_USER,
        parts=a2a_events.text_parts(text),
    )


def step_tag(*, step: str, key: str, state: str, child: Task) -> dict[str, Any]:
    """The metadata naming a step (``STEP_KEY``): its id, key, task state and target."""
    return {
        STEP_KEY: {
            "step": step,
            "key": key,
            "state": state,
            "kind": child.target_kind,
            "target": child.target_id,
        }
    }


def forwarded(
    event: dict[str, Any], run: Task, *, step: str, key: str, state: str, child: Task
) -> list[dict[str, Any]]:
    """A step task's event as the run task's events, in its ids: its artifacts (their ids
    prefixed by the step's key) and a ``working`` update with its message; each names the
    step and what it calls (``step_tag``). The step's own interruptions are not forwarded:
    the run decides what to ask."""
    ids = snapshots.IdMap(run.id, run.context_id)
    mapped = ids.to_relay(event)
    tag = step_tag(step=step, key=key, state=state, child=child)
    last_chunk = True
    out: list[dict[str, Any]] = []
    message = None
    artifacts: list[dict[str, Any]] = []
    if "message" in mapped:
        message = mapped["message"]
    elif "statusUpdate" in mapped:
        message = (mapped["statusUpdate"].get("status") or {}).get("message")
    elif "artifactUpdate" in mapped:
        update = mapped["artifactUpdate"]
        artifacts.append(update.get("artifact") or {})
        last_chunk = bool(update.get("lastChunk"))
    elif isinstance(mapped.get("task"), dict):
        message = (mapped["task"].get("status") or {}).get("message")
        artifacts += mapped["task"].get("artifacts") or []
    for artifact in artifacts:
        named = {
            **artifact,
            "artifactId": f"{key}/{artifact.get('artifactId', 'artifact')}",
            "metadata": {**(artifact.get("metadata") or {}), **tag},
        }
        out.append(
            a2a_events.artifact_event(
                task_id=run.id,
                context_id=run.context_id,
                artifact=named,
                last_chunk=last_chunk,
                metadata=tag,
            )
        )
    if state in _INTERRUPTED:
        return out
    if message is not None:
        message = {
            **{k: v for k, v in message.items() if v or k not in ("metadata", "extensions")},
            "taskId": run.id,
            "contextId": run.context_id,
        }
    if message is not None or not out:
        status = a2a_events.task_status(TaskState.WORKING, message=message)
        out.append(
            a2a_events.status_event(
                task_id=run.id, context_id=run.context_id, status=status, metadata=tag
            )
        )
    return out


def state_of(event: dict[str, Any]) -> str:
    """The state (storage spelling) a step task's event leaves it in ("" when it does not
    say): a message answer completes it."""
    if "message" in event:
        return TaskState.COMPLETED.value
    body = event.get("task") or event.get("statusUpdate") or {}
    return snapshots.state_of(body) or ""


def run_event(
    run: Task,
    state: TaskState,
    *,
    text: str = "",
    message: dict[str, Any] | None = None,
    metadata: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The run task's own status update in ``state``, saying ``text`` or ``message``."""
    if text:
        message = a2a_events.message(
            message_id=f"{run.id}-{state.value}-{run.last_sequence + 1}",
            role=a2a_events.ROLE_AGENT,
            parts=a2a_events.text_parts(text),
        )
    if message is not None:
        message = {
            **{k: v for k, v in message.items() if v or k not in ("metadata", "extensions")},
            "taskId": run.id,
            "contextId": run.context_id,
        }
    status = a2a_events.task_status(state, message=message)
    return a2a_events.status_event(
        task_id=run.id, context_id=run.context_id, status=status, metadata=metadata
    )


def output_events(run: Task, output: StepOutput, *, name: str) -> list[dict[str, Any]]:
    """The run's answer: an artifact with the output step's text (and data), then the task
    completed with the same as its message."""
    parts: list[dict[str, Any]] = a2a_events.text_parts(output.text) if output.text else []
    if output.data:
        parts.append({"data": dict(output.data)})
    if not parts:
        parts = a2a_events.text_parts("")
    artifact = {"artifactId": f"{run.id}-output", "name": name, "parts": parts}
    message = a2a_events.message(
        message_id=f"{run.id}-output", role=a2a_events.ROLE_AGENT, parts=parts
    )
    return [
        a2a_events.artifact_event(
            task_id=run.id, context_id=run.context_id, artifact=artifact, last_chunk=True
        ),
        run_event(run, TaskState.COMPLETED, message=message),
    ]
