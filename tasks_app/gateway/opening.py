"""Opening the task a message belongs to: the one it names (checked, the message appended) or a
new one, in the caller's conversation, with its inline push config. Synchronous, so admission
runs it with authentication and target resolution in one hop to the database thread."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from relay_project.database import database_sync_to_async
from tasks_app import selectors, services
from tasks_app.gateway import ownership
from tasks_app.gateway.targets import CallContext, Target
from tasks_app.models import Task
from tasks_app.protocol.errors import (
    ExtensionSupportRequired,
    FieldViolation,
    InvalidParams,
    TaskNotFound,
    UnsupportedOperation,
)

CONTEXT_ID_MAX_LENGTH = Task._meta.get_field("context_id").max_length


@dataclass(frozen=True)
class Opened:
    """The task a message belongs to, and whether this message created it."""

    task: Task
    fresh: bool


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
        opened = Opened(_open_new(target, ctx, request), fresh=True)
    if inline:
        from tasks_app import push

        push.config_create(task=opened.task, config=inline)
    return opened


def _open_new(target: Target, ctx: CallContext, request: dict[str, Any]) -> Task:
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
    )


def _owned_task(target: Target | None, ctx: CallContext, task_id: str) -> Task:
    task = selectors.task_for_caller(caller=ctx.caller, task_id=task_id)
    if task is None or (target is not None and not target.owns(task)):
        raise TaskNotFound(f"no task {task_id!r}", metadata={"taskId": str(task_id)})
    return task


async def _load(target: Target | None, ctx: CallContext, task_id: str) -> Task:
    return await database_sync_to_async(_owned_task)(target, ctx, task_id)
