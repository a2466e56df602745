"""Writes to tasks. Every state change is a compare-and-set on (state, last_sequence), so two
writers (a completion and a cancel, two relay processes) cannot both win; the loser re-reads
and re-decides. Services return what they wrote; the async gateway publishes it to streams.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.db.models import F, Value
from django.db.models.functions import Greatest
from django.utils import timezone

from relay_project import tracing
from tasks_app import postgres_events, snapshots, streams
from tasks_app.lifecycle import (
    INTERRUPTED,
    TERMINAL,
    InvalidTransition,
    TaskState,
    check_transition,
)
from tasks_app.models import PushDelivery, PushNotificationConfig, Task, TaskEvent
from tasks_app.protocol import events as a2a_events
from tasks_app.push_delivery import deliver_push
from tasks_app.snapshots import iso, snapshot_of
from tasks_app.usage import records as usage_records

CAS_ATTEMPTS = 5
_UNOWNED_STATES = frozenset(state.value for state in TERMINAL | INTERRUPTED)
"""States in which nobody drives the task: it ended, or it waits on the client."""
_TERMINAL_VALUES = frozenset(state.value for state in TERMINAL)


class StaleTaskError(Exception):
    """The task changed under us more often than we retry."""


@dataclass(frozen=True)
class Recorded:
    """The task after a write, and the event to publish (None when nothing changed)."""

    task: Task
    event: dict[str, Any] | None
    sequence: int
    state: str = ""
    """The task's state right after this event ("" where nothing was recorded)."""


def task_open(
    *,
    caller,
    target_kind: str,
    target_id: str,
    agent_id: str | None,
    message: dict[str, Any],
    client_version: str,
    metadata: dict[str, Any] | None = None,
    context_id: str = "",
    upstream_context_id: str = "",
    selection: dict[str, Any] | None = None,
    parent_id: str | None = None,
    delegation_chain: list[str] | None = None,
    expires_at: datetime | None = None,
    owner: str = "",
    send_key: str = "",
    send_hash: str = "",
) -> Task:
    """Creates and stores a task in ``submitted`` with the caller's message as its history,
    owned by the relay process ``owner`` (the one that will drive it). ``send_key`` and
    ``send_hash``: the send that opens it, for safe retries; raises IntegrityError when the
    caller already has a task under that key (inside a caller's transaction, which stays
    usable)."""
    task = Task(
        caller=caller,
        target_kind=target_kind,
        target_id=target_id,
        agent_id=agent_id,
        client_version=client_version,
        metadata=metadata or {},
        upstream_context_id=upstream_context_id,
        selection=selection,
        parent_id=parent_id,
        delegation_chain=delegation_chain or [],
        expires_at=expires_at,
        owner=owner,
        send_key=send_key,
        send_hash=send_hash,
    )
    task.context_id = context_id or task.id
    task.history = [dict(message, taskId=task.id, contextId=task.context_id)]
    # A repeated key fails the insert: a savepoint keeps a caller's transaction usable then.
    with transaction.atomic() if send_key and connection.in_atomic_block else _alone():
        task.save(force_insert=True)
    return task


def task_serving_set(*, task: Task, agent_id: str, selection: dict[str, Any]) -> None:
    """Records that ``agent_id`` (an alternate of the agent the send named) serves the task,
    and why: its follow-ups go there, and the caller sees it as metadata.relaySelection."""
    Task.objects.filter(pk=task.pk).update(agent_id=agent_id, selection=selection)
    task.agent_id, task.selection = agent_id, selection


def task_attempts_record(*, task: Task, attempts: list[dict[str, Any]]) -> None:
    """Stores the tries of the send that opened the task (more than one, or one that
    failed); the task's own writes leave the field alone."""
    Task.objects.filter(pk=task.pk).update(attempts=attempts)
    task.attempts = attempts


def task_send_key_release(*, task: Task) -> bool:
    """Frees the key a task was opened under, once its window has passed, so that a send with
    it opens a new task; False when another call freed it first."""
    freed = Task.objects.filter(pk=task.pk, send_key=task.send_key).update(send_key="")
    task.send_key = ""
    return freed == 1


def task_add_message(*, task: Task, message: dict[str, Any], owner: str = "") -> Task:
    """Appends a caller's follow-up message to a task's history (the task must be open); the
    relay process ``owner`` drives the task from now on."""
    for _ in range(CAS_ATTEMPTS):
        entry = dict(message, taskId=task.id, contextId=task.context_id)
        moved = (
            Task.objects.filter(pk=task.pk, state=task.state, last_sequence=task.last_sequence)
            .exclude(state__in=[s.value for s in TERMINAL])
            .update(history=[*task.history, entry], updated_at=timezone.now(), owner=owner)
        )
        if moved == 1:
            task.history = [*task.history, entry]
            task.owner = owner
            return task
        task.refresh_from_db()
        if task.is_terminal:
            raise TerminalTaskError(task)
    raise StaleTaskError(task.pk)


class TerminalTaskError(Exception):
    def __init__(self, task: Task) -> None:
        super().__init__(f"task {task.pk} is {task.state}")
        self.task = task


def task_record(
    *, task: Task, event: dict[str, Any], upstream_task_id: str = "", upstream_context_id: str = ""
) -> Recorded:
    """Applies one canonical StreamResponse (relay ids) to the task and stores it as the next
    event (``task_record_many`` of one event). A task already terminal ignores it (returns
    ``event=None``): a late completion after a cancel changes nothing."""
    recorded = task_record_many(task=task, events=[(event, upstream_task_id, upstream_context_id)])
    return recorded[0] if recorded else Recorded(task, None, task.last_sequence)


def task_record_many(
    *, task: Task, events: list[tuple[dict[str, Any], str, str]]
) -> list[Recorded]:
    """Records events in order ((event, upstream task id, upstream context id) each), and
    brings ``task`` up to date. The one way a task's events are written: a transaction
    holding a compare-and-set of the task on (state, last sequence, push configs) to where
    the last event leaves it, the events' rows, their push deliveries, and on PostgreSQL a
    NOTIFY for the task's streams in other processes (``streams``). When another writer
    moved the task meanwhile, the task is read again and the events decided again.

    Returns what was recorded: the events after one that ended the task are ignored, and a
    task already ended records nothing (a late completion after a cancel changes nothing).
    An event that moves the task in a way A2A forbids raises InvalidTransition once the
    events before it are recorded. Inside a caller's transaction the write is part of it (a
    team records a hop so)."""
    for _ in range(CAS_ATTEMPTS):
        write = _planned(task, events)
        if write is None:
            return []
        if _written(task, write):
            return _applied(task, write)
        task.refresh_from_db()
    raise StaleTaskError(task.pk)


def _written(task: Task, write: _Write) -> bool:
    """Makes ``write``, decided on ``task`` as the caller holds it; False (nothing written)
    when another writer moved the task meanwhile. One function per database: the ORM's
    transaction on SQLite, one statement on PostgreSQL (``postgres_events``). Inside a
    caller's transaction the write is part of it: the caller's writes and these stand or
    fall together."""
    if connection.vendor == "postgresql":
        return _written_on_postgresql(task, write)
    with transaction.atomic(savepoint=False):
        moved = Task.objects.filter(**_compared(task)).update(
            last_sequence=write.last_sequence, **write.changes
        )
        if moved:
            TaskEvent.objects.bulk_create(write.stored)
            _queue_pushes(task, write.stored)
    return bool(moved)


def _written_on_postgresql(task: Task, write: _Write) -> bool:
    """The compare-and-set, the events and the NOTIFY in one statement, and the push
    deliveries of a task that has push configs in the same transaction. The NOTIFY tells the
    task's streams in other processes that it moved (delivered at commit): for an end or a
    wait on the client always (a cancel or an expiry elsewhere stops the process driving the
    task so), for other events only while streams follow the task from outside the exchange
    (``Task.remote_streams``). The events between a task's start and its end (artifact
    chunks, progress) commit without waiting for the disk, unless
    RELAY_EVENT_SYNCHRONOUS_COMMIT: a crash of the database server can lose the last
    fraction of a second of those, for a task still running."""
    ends = write.state in _UNOWNED_STATES
    with transaction.atomic(savepoint=False) if task.has_push_configs else _alone():
        moved = postgres_events.record(
            where=_compared(task),
            values={"last_sequence": write.last_sequence, **write.changes},
            events=write.stored,
            notify=(
                streams.NOTIFY_CHANNEL,
                streams.notify_payload(task.pk, write.last_sequence, write.state),
            ),
            notify_always=ends,
            commit_without_disk_wait=not ends
            and not settings.RELAY_EVENT_SYNCHRONOUS_COMMIT
            and not connection.in_atomic_block,
        )
        if moved:
            _queue_pushes(task, write.stored)
    return moved


@contextlib.contextmanager
def _alone():
    """No transaction of its own: the one statement is atomic."""
    yield


def _queue_pushes(task: Task, events: list[TaskEvent]) -> None:
    if task.has_push_configs:
        for event in events:
            _queue_push(task, event)


@dataclass(frozen=True)
class _Write:
    """What recording some events writes: the task's changed fields (``changes``, and
    ``last_sequence``), its state after them, the event rows (``stored``), and which events
    they are, each with the state it leaves the task in. ``forbidden``: the move that
    stopped the events short, raised once the ones before it are recorded."""

    changes: dict[str, Any]
    state: str
    last_sequence: int
    stored: list[TaskEvent]
    taken: list[tuple[dict[str, Any], str]]
    forbidden: InvalidTransition | None


def _planned(task: Task, events: list[tuple[dict[str, Any], str, str]]) -> _Write | None:
    """The write that records ``events`` on ``task`` as it stands (None: the task already
    ended, nothing to write). The events after one that ends the task are left out. Raises
    InvalidTransition when the first event already moves the task in a way A2A forbids."""
    if task.is_terminal:
        return None
    snapshot, state, status_changed = snapshot_of(task), task.state, False
    taken: list[tuple[dict[str, Any], str]] = []
    forbidden: InvalidTransition | None = None
    for event, _, _ in events:
        if state in _TERMINAL_VALUES:
            break
        after = snapshots.apply_event(snapshot, event)
        new_state = snapshots.state_of(after) or state
        if new_state != state or new_state not in _TERMINAL_VALUES:
            try:
                check_transition(state, new_state)
            except InvalidTransition as error:
                forbidden = error
                break
        snapshot, state = after, new_state
        status_changed = status_changed or "artifactUpdate" not in event
        taken.append((event, new_state))
    if not taken:
        raise forbidden
    now = timezone.now()
    changes = _changes(
        task,
        _fields_from_snapshot(snapshot, state, now, status_changed=status_changed),
        state,
        upstream_task_id=next((u for _, u, _ in events[: len(taken)] if u), ""),
        upstream_context_id=next((c for _, _, c in events[: len(taken)] if c), ""),
    )
    first = task.last_sequence + 1
    stored = [_event_row(task, event, first + i) for i, (event, _) in enumerate(taken)]
    if state in _TERMINAL_VALUES and settings.RELAY_USAGE_RECORDS:  # the call's usage record
        changes.update(
            usage_records.usage_row(
                task, state=state, snapshot=snapshot, events=[e for e, _ in taken], now=now
            )
        )
    return _Write(changes, state, first + len(taken) - 1, stored, taken, forbidden)


def _applied(task: Task, write: _Write) -> list[Recorded]:
    """Brings ``task`` up to date with ``write``, once written; raises its ``forbidden``."""
    for name, value in write.changes.items():
        setattr(task, name, value)
    first = task.last_sequence + 1
    task.last_sequence = write.last_sequence
    if write.forbidden is not None:
        raise write.forbidden
    return [
        Recorded(task, event, first + i, state_after)
        for i, (event, state_after) in enumerate(write.taken)
    ]


def _event_row(task: Task, event: dict[str, Any], sequence: int) -> TaskEvent:
    kind = next(k for k in ("task", "statusUpdate", "artifactUpdate", "message") if k in event)
    return TaskEvent(
        task_id=task.pk,
        sequence=sequence,
        payload=event,
        kind={"statusUpdate": TaskEvent.Kind.STATUS, "artifactUpdate": TaskEvent.Kind.ARTIFACT}.get(
            kind, TaskEvent.Kind.TASK
        ),
    )


def _compared(task: Task) -> dict[str, Any]:
    # has_push_configs is compared too: a push config created (or the last one deleted) while
    # a producer runs fails the update, and the retry rereads it.
    return {
        "pk": task.pk,
        "state": task.state,
        "last_sequence": task.last_sequence,
        "has_push_configs": task.has_push_configs,
    }


def task_follow(*, task_id: str, by: int) -> None:
    """Counts a stream that follows the task from outside the exchange that drives it (``by``
    1 when it opens, -1 when it closes): while any does, every event the task records on
    PostgreSQL sends a NOTIFY."""
    Task.objects.filter(pk=task_id).update(
        remote_streams=Greatest(F("remote_streams") + by, Value(0))
    )


def _changes(
    task: Task,
    fields: dict[str, Any],
    new_state: str,
    *,
    upstream_task_id: str,
    upstream_context_id: str,
) -> dict[str, Any]:
    """The task's fields to write: those of its new snapshot that changed (an artifact chunk
    leaves the history, which grows with every turn, and the status as they are), the
    agent's ids when first known, and no owner once nobody drives the task."""
    if upstream_task_id and not task.upstream_task_id:
        fields["upstream_task_id"] = upstream_task_id
    if upstream_context_id and not task.upstream_context_id:
        fields["upstream_context_id"] = upstream_context_id
    if new_state in _UNOWNED_STATES:
        fields["owner"] = ""
    return {
        name: value
        for name, value in fields.items()
        if name == "updated_at" or getattr(task, name) != value
    }


def _fields_from_snapshot(
    after: dict[str, Any], state: str, now: datetime, *, status_changed: bool
) -> dict[str, Any]:
    status = after.get("status") or {}
    fields: dict[str, Any] = {
        "state": state,
        "status_message": status.get("message"),
        "history": after.get("history", []),
        "artifacts": after.get("artifacts", []),
        "metadata": after.get("metadata", {}),
        "updated_at": now,
    }
    if status_changed:
        fields["status_timestamp"] = now
    if TaskState(state) in TERMINAL:
        fields["completed_at"] = now
    return fields


def status_event(task: Task, state: str, text: str | None = None) -> dict[str, Any]:
    """A statusUpdate event for the task, with an agent message carrying ``text``."""
    said = None
    if text:
        said = a2a_events.message(
            message_id=f"relay-{task.pk}-{task.last_sequence + 1}",
            role=a2a_events.ROLE_AGENT,
            task_id=task.pk,
            context_id=task.context_id,
            parts=a2a_events.text_parts(text),
        )
    return a2a_events.status_event(
        task_id=task.pk,
        context_id=task.context_id,
        status=a2a_events.task_status(state, message=said),
    )


def task_fail(*, task: Task, reason: str) -> Recorded:
    """Ends an open task ``failed`` with a message saying why (and keeps the reason in
    ``error``). A task already terminal is left as it is."""
    recorded = task_record(task=task, event=status_event(task, TaskState.FAILED, reason))
    if recorded.event is not None:
        Task.objects.filter(pk=task.pk).update(error=reason[:2000])
        task.error = reason[:2000]
    return recorded


def task_cancel(*, task: Task, reason: str = "") -> Recorded:
    """Moves an open task to ``canceled``; raises TerminalTaskError when it already ended
    (including when a completion won the race)."""
    recorded = task_record(task=task, event=status_event(task, TaskState.CANCELED, reason or None))
    if recorded.event is None:
        raise TerminalTaskError(task)
    return recorded


def task_expiry(now: datetime | None = None) -> datetime | None:
    """When a task opened now expires: RELAY_TASK_TTL_SECONDS from now, or None (never) when
    the setting is 0."""
    ttl = settings.RELAY_TASK_TTL_SECONDS
    if ttl <= 0:
        return None
    return (now or timezone.now()) + timedelta(seconds=ttl)


def expiry_reason(task: Task) -> str:
    """The timeout error an expired task ends with."""
    when = iso(task.expires_at) if task.expires_at else "its expiry"
    return (
        f"timeout: the task did not reach a final state before it expired at {when} "
        f"(RELAY_TASK_TTL_SECONDS)"
    )


def task_expire(*, task: Task) -> Recorded:
    """Ends an open task past its expiry ``failed`` with a timeout error. The write is the
    compare-and-set of ``task_record``: when a completion (or a cancel) wins the race, the
    task keeps that end and ``event`` is None."""
    return task_fail(task=task, reason=expiry_reason(task))


def _queue_push(task: Task, event: TaskEvent) -> None:
    configs = list(PushNotificationConfig.objects.filter(task_id=task.pk))
    if not configs:
        return
    # The job continues the trace of the call the event came from (tracing on only).
    traceparent = tracing.traceparent(None)
    for config in configs:
        delivery = PushDelivery.objects.create(config=config, event=event, payload=event.payload)
        args = (delivery.pk, traceparent) if traceparent else (delivery.pk,)
        transaction.on_commit(lambda args=args: deliver_push.delay(*args))
