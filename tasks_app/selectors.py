"""Reads of tasks, always scoped to the caller that created them."""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any

from django.db.models import Q
from django.utils.dateparse import parse_datetime

from tasks_app import snapshots
from tasks_app.models import Task, TaskEvent
from tasks_app.protocol.errors import InvalidParams
from tasks_app.snapshots import snapshot_of


def task_for_caller(*, caller, task_id: str) -> Task | None:
    """The task when this caller created it; None for a missing task and for another caller's
    (the two must look the same)."""
    if not isinstance(task_id, str) or not task_id or len(task_id) > 64:
        return None
    return Task.objects.visible_to(caller).filter(pk=task_id).first()


def task_by_send_key(*, caller, send_key: str) -> Task | None:
    """The caller's task opened by the send known by ``send_key`` (``tasks_app.idempotency``),
    None when there is none."""
    if caller is None or not send_key:
        return None
    return Task.objects.filter(caller=caller, send_key=send_key).first()


def upstream_context(*, caller, context_id: str, target_kind: str, target_id: str) -> str:
    """The upstream context id an earlier task of this conversation got from the same target,
    so a new task continues the same upstream conversation."""
    return (
        Task.objects.visible_to(caller)
        .filter(context_id=context_id, target_kind=target_kind, target_id=target_id)
        .exclude(upstream_context_id="")
        .order_by("-created_at")
        .values_list("upstream_context_id", flat=True)
        .first()
    ) or ""


def _encode_token(task: Task) -> str:
    raw = json.dumps([task.status_timestamp.isoformat(), task.pk]).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _decode_token(token: str) -> tuple[Any, str]:
    try:
        raw = base64.b64decode(token + "=" * (-len(token) % 4), altchars=b"-_", validate=True)
        moment, task_id = json.loads(raw)
        when = parse_datetime(moment)
        if when is None or not isinstance(task_id, str):
            raise ValueError
    except (ValueError, TypeError, binascii.Error, UnicodeDecodeError) as error:
        raise InvalidParams("pageToken is not one this relay gave out") from error
    return when, task_id


def task_list(
    *, caller, target_kind: str | None, target_id: str | None, params: dict[str, Any]
) -> dict[str, Any]:
    """ListTasks: the caller's tasks, newest status first, keyset-paged, filtered by context,
    state and status time; ``totalSize`` counts every match."""
    page_size = params.get("pageSize") or 50
    if not 1 <= int(page_size) <= 100:
        raise InvalidParams("pageSize must be between 1 and 100")
    tasks = Task.objects.visible_to(caller)
    if target_kind:
        tasks = tasks.filter(target_kind=target_kind, target_id=target_id)
    if params.get("contextId"):
        tasks = tasks.filter(context_id=params["contextId"])
    if params.get("status"):
        state = snapshots.STATE_FROM_V1.get(params["status"])
        if state is None:
            raise InvalidParams(f"status {params['status']!r} is not a task state")
        tasks = tasks.filter(state=state)
    if params.get("statusTimestampAfter"):
        after = parse_datetime(params["statusTimestampAfter"])
        if after is None:
            raise InvalidParams("statusTimestampAfter must be an RFC 3339 time")
        tasks = tasks.filter(status_timestamp__gt=after)
    total = tasks.count()
    if params.get("pageToken"):
        moment, task_id = _decode_token(params["pageToken"])
        tasks = tasks.filter(
            Q(status_timestamp__lt=moment) | Q(status_timestamp=moment, pk__lt=task_id)
        )
    page = list(tasks.order_by("-status_timestamp", "-id")[: int(page_size) + 1])
    more = len(page) > int(page_size)
    page = page[: int(page_size)]
    history_length = params.get("historyLength")
    include_artifacts = bool(params.get("includeArtifacts"))
    return {
        "tasks": [
            snapshots.trim(
                snapshot_of(task),
                history_length=history_length,
                include_artifacts=include_artifacts,
            )
            for task in page
        ],
        "nextPageToken": _encode_token(page[-1]) if more else "",
        "pageSize": int(page_size),
        "totalSize": total,
    }


def tasks_overdue(*, now, limit: int) -> list[Task]:
    """Open tasks whose expiry has passed, the oldest expiry first, at most ``limit``, each
    with its caller loaded (the gateway cancels upstream work on the caller's behalf)."""
    return list(
        Task.objects.open()
        .filter(expires_at__lte=now)
        .select_related("caller")
        .order_by("expires_at", "id")[:limit]
    )


def events_after(
    *, task_id: str, sequence: int, final_states: frozenset[str]
) -> list[tuple[int, dict[str, Any], bool]]:
    """The task's stored events after ``sequence``, in order, as (sequence, event, final):
    final when the event leaves the task in one of ``final_states`` (1.0 state names)."""
    stored = (
        TaskEvent.objects.filter(task_id=task_id, sequence__gt=sequence)
        .order_by("sequence")
        .values_list("sequence", "payload")
    )
    return [(number, event, _state_of(event) in final_states) for number, event in stored]


def task_positions(*, task_ids: list[str]) -> dict[str, tuple[int, str]]:
    """(last sequence, state) of each of the tasks that exists, by id: one query."""
    rows = Task.objects.filter(pk__in=task_ids).values_list("pk", "last_sequence", "state")
    return {pk: (sequence, state) for pk, sequence, state in rows}


def _state_of(event: dict[str, Any]) -> str | None:
    body = event.get("statusUpdate") or event.get("task") or {}
    return (body.get("status") or {}).get("state")
