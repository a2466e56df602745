"""Client task ids: the ``id`` a caller chooses in the task API's early task shape, kept beside
the relay's own task id (``ClientTaskId``), one namespace per API key.

A send with a new id opens a task and records the id in one transaction; a send with a known
id continues that task, as in the early protocol. Lookups go through the caller's key, so
one caller's id never reaches another's task, and the gateway's own access checks still apply
to the relay task the id names.
"""

from __future__ import annotations

from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import Q

from tasks_app import gateway
from tasks_app.gateway import ownership
from tasks_app.models import ClientTaskId
from tasks_app.protocol.errors import TaskNotFound, UnsupportedOperation

ATTEMPTS = 3


def client_task_open(
    *,
    target: gateway.Target,
    ctx: gateway.CallContext,
    request: dict[str, Any],
    client_id: str,
    stream: bool = False,
) -> gateway.Opened:
    """The task a send with the client's task id belongs to: the caller's task with that id
    (the message appended), or a new one recorded under the id. Raises the A2A error that
    refuses the message with nothing stored: TaskNotFound when the id names a task of another
    target, UnsupportedOperation when that task has ended. Two first sends with one id race
    on the unique constraint; the loser continues the winner's task."""
    ownership.process_id()  # the lease is renewed outside the transaction below
    for _ in range(ATTEMPTS):
        link = (
            ClientTaskId.objects.select_related("task")
            .filter(caller=ctx.caller, client_id=client_id)
            .first()
        )
        if link is not None:
            return _continue(target, ctx, request, link, stream=stream)
        try:
            with transaction.atomic():
                opened = gateway.open_task(target, ctx, request, stream=stream)
                ClientTaskId.objects.create(
                    task=opened.task, caller=ctx.caller, client_id=client_id
                )
            return opened
        except IntegrityError:
            continue
    raise UnsupportedOperation(f"task {client_id!r} is being opened by another call; retry")


def _continue(target, ctx, request, link: ClientTaskId, *, stream: bool) -> gateway.Opened:
    task = link.task
    if task.is_terminal:
        raise UnsupportedOperation(
            f"task {link.client_id!r} is {task.state}; a finished task "
            "takes no more messages: send with a new id"
        )
    message = dict(request["message"], taskId=task.id)
    try:
        return gateway.open_task(target, ctx, dict(request, message=message), stream=stream)
    except TaskNotFound as error:
        raise TaskNotFound(
            f"task {link.client_id!r} was opened with another agent or team; "
            "a task id continues its task on the same target",
            metadata={"taskId": link.client_id},
        ) from error


def task_id_for(*, caller, task_id: str) -> tuple[str, str | None]:
    """(relay task id, client task id or None) of the id a caller named in a URL: its own
    client task id first, else a relay task id (with the client id it was opened under, if
    any). Ids of other callers are never looked at."""
    links = list(
        ClientTaskId.objects.filter(caller=caller)
        .filter(Q(client_id=task_id) | Q(task_id=task_id))
        .values_list("task_id", "client_id")[:2]
    )
    for relay_id, client_id in links:
        if client_id == task_id:
            return relay_id, client_id
    for relay_id, client_id in links:
        return relay_id, client_id
    return task_id, None
