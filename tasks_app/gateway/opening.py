"""Opening the task a message belongs to: the one it names (checked, the message appended) or a
new one, in the caller's conversation, with its inline push config. Synchronous, so admission
runs it with authentication and target resolution in one hop to the database thread."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import IntegrityError
from django.utils import timezone

from relay_project.database import database_sync_to_async
from tasks_app import idempotency, selectors, services
from tasks_app.gateway import ownership
from tasks_app.gateway.targets import CallContext, Target
from tasks_app.models import Task
from tasks_app.protocol.errors import (
    ExtensionSupportRequired,
    FieldViolation,
    IdempotencyKeyReused,
    InvalidParams,
    TaskNotFound,
    UnsupportedOperation,
)

CONTEXT_ID_MAX_LENGTH = Task._meta.get_field("context_id").max_length


@dataclass(frozen=True)
class Opened:
    """The task a message belongs to, and whether this message created it (``fresh``) or
    repeats the send that did (``repeat``: the agent is not called again)."""

    task: Task
    fresh: bool
    repeat: bool = False


def open_task(
    target: Target,
    ctx: CallContext,
    request: dict[str, Any],
    *,
    stream: bool = False,
) -> Opened:
    """The task a message belongs to: the one it names (checked, the message appended), or a
    new one, with its inline push config stored. Synchronous, so a caller can run it with
    authentication and target resolution (``tasks_app.api.admission.admit``); raises the A2A
    error that refuses the message before anything is stored."""
    if stream and not target.streaming:
        raise UnsupportedOperation(f"{target.kind} {target.id!r} does not stream")
    missing = [uri for uri in target.required_extensions if uri not in ctx.extensions]
    if missing:
        raise ExtensionSupportRequired(
            f"{target.kind} {target.id!r} requires the extension {missing[0]}; activate it "
            f"with the A2A-Extensions header",
            metadata={"extension": missing[0]},
        )
    inline = (request.get("configuration") or {}).get("taskPushNotificationConfig")
    if inline:
        from tasks_app import push

        # Refused before the task exists: a bad webhook must not leave a task behind.
        push.config_check(inline, field="configuration.taskPushNotificationConfig")
    message = request["message"]
    if len(message.get("contextId") or "") > CONTEXT_ID_MAX_LENGTH:
        raise InvalidParams(
            field_violations=[
                FieldViolation("message.contextId", f"is longer than {CONTEXT_ID_MAX_LENGTH}")
            ]
        )
    if message.get("taskId"):
        task = _owned_task(target, ctx, message["taskId"])
        if task.is_terminal:
            raise UnsupportedOperation(
                f"task {task.id} is {task.state}; a terminal task takes no more messages"
            )
        if message.get("contextId") and message["contextId"] != task.context_id:
            raise InvalidParams(
                f"message.contextId {message['contextId']!r} does not match the task's "
                f"context {task.context_id!r}"
            )
        try:
            task = services.task_add_message(
                task=task, message=message, owner=ownership.process_id()
            )
        except services.TerminalTaskError as error:
            raise UnsupportedOperation(f"task {task.id} ended meanwhile") from error
        opened = Opened(task, fresh=False)
    else:
        opened = _open_keyed(target, ctx, request)
        if opened.repeat:
            return opened  # its push config, if any, was stored by the send it repeats
    if inline:
        from tasks_app import push

        push.config_create(task=opened.task, config=inline)
    return opened


KEY_ATTEMPTS = 3


def _open_keyed(target: Target, ctx: CallContext, request: dict[str, Any]) -> Opened:
    """A new task, stored under the send's key when it has one (``idempotency``); for a key
    the caller already opened a task with, that task as a repeat. A key past its window is
    freed and opens a new task. Raises IdempotencyKeyReused for a key used with another body
    or on another target. Concurrent sends with one key race on the unique constraint: one
    inserts, the others find its task."""
    window = settings.RELAY_IDEMPOTENCY_KEY_SECONDS
    if not ctx.idempotency_key:
        window = settings.RELAY_MESSAGE_ID_WINDOW_SECONDS
    key = ""
    if ctx.caller is not None and window > 0:
        key = idempotency.send_key(
            idempotency_key=ctx.idempotency_key,
            message=request["message"],
            message_ids_count=True,
        )
    if not key:
        return Opened(_open_new(target, ctx, request), fresh=True)
    digest = idempotency.fingerprint(request)
    for _ in range(KEY_ATTEMPTS):
        try:
            return Opened(_open_new(target, ctx, request, key=key, digest=digest), fresh=True)
        except IntegrityError:
            earlier = selectors.task_by_send_key(caller=ctx.caller, send_key=key)
        if earlier is None:
            continue  # removed meanwhile (its agent refused the send): open it again
        if earlier.created_at < timezone.now() - timedelta(seconds=window):
            services.task_send_key_release(task=earlier)
            continue
        _check_repeat(target, earlier, key, digest)
        return Opened(earlier, fresh=False, repeat=True)
    raise IntegrityError(f"could not open a task under the send key {key!r}")


def _check_repeat(target: Target, earlier: Task, key: str, digest: str) -> None:
    named = "Idempotency-Key" if key.startswith(idempotency.KEY_PREFIX) else "message.messageId"
    if earlier.send_hash != digest:
        raise IdempotencyKeyReused(
            field_violations=[
                FieldViolation(
                    named,
                    f"was used for another send (task {earlier.id}); a repeat must send the "
                    "same body: use a new key for a new send",
                )
            ],
            metadata={"taskId": earlier.id},
        )
    if not target.owns(earlier):
        raise IdempotencyKeyReused(
            field_violations=[
                FieldViolation(
                    named,
                    "was used for a send to another agent or team; use a new key for a new send",
                )
            ]
        )


def _open_new(
    target: Target, ctx: CallContext, request: dict[str, Any], *, key: str = "", digest: str = ""
) -> Task:
    message = request["message"]
    context_id = message.get("contextId") or ""
    previous = ctx.upstream_context_id
    if context_id and not previous:
        # A new task in a known conversation reuses the upstream's context for it.
        previous = selectors.upstream_context(
            caller=ctx.caller,
            context_id=context_id,
            target_kind=target.kind,
            target_id=target.id,
        )
    return services.task_open(
        caller=ctx.caller,
        target_kind=target.kind,
        target_id=target.id,
        agent_id=target.agent_id,
        message=message,
        client_version=ctx.version,
        context_id=context_id,
        upstream_context_id=previous,
        selection=target.extra.get("selection") or None,
        delegation_chain=list(ctx.delegation),
        parent_id=ctx.parent_task_id,
        expires_at=services.task_expiry(),
        owner=ownership.process_id(),
        send_key=key,
        send_hash=digest,
    )


def _owned_task(target: Target | None, ctx: CallContext, task_id: str) -> Task:
    task = selectors.task_for_caller(caller=ctx.caller, task_id=task_id)
    if task is None or (target is not None and not target.owns(task)):
        raise TaskNotFound(f"no task {task_id!r}", metadata={"taskId": str(task_id)})
    return task


async def _load(target: Target | None, ctx: CallContext, task_id: str) -> Task:
    return await database_sync_to_async(_owned_task)(target, ctx, task_id)
