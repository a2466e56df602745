"""An AG-UI run's input (``RunAgentInput``, validated by the ``ag-ui-protocol`` package's own
pydantic model) as the A2A 1.0 ``SendMessageRequest`` the relay sends its target. Pure: no
Django.

- The message is the input's last user message (its text, and its media parts as file parts).
- The AG-UI thread is the A2A context: ``threadId`` becomes the message's ``contextId``, so
  every run of a thread continues the same conversation upstream.
- A run that answers an interrupt (``resume``, as ``HttpAgent.runAgent({resume})`` sends it)
  continues the A2A task the interrupt names (its id is the task id): a string payload is the
  answer's text, any other JSON payload a data part; without a payload the last user message
  is the answer. The state the relay last sent (``state.a2a``, a task waiting on the caller)
  does the same for a client that sends its state back but no resume entries.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from typing import Any

from ag_ui.core import RunAgentInput, UserMessage
from pydantic import ValidationError

from tasks_app.protocol import events
from tasks_app.protocol.errors import FieldViolation, InvalidParams

STATE_KEY = "a2a"
"""The key of the relay's part of an AG-UI run's state: ``{taskId, contextId, state}``."""
WAITING_STATES = ("TASK_STATE_INPUT_REQUIRED", "TASK_STATE_AUTH_REQUIRED")
CONTEXT_ID_MAX_LENGTH = 200
"""As long as a task's context id may be (``Task.context_id``)."""


@dataclass(frozen=True)
class Run:
    """A validated run: its ids as the events must echo them, and the A2A request."""

    thread_id: str
    run_id: str
    request: dict[str, Any]


def parse_run(body: bytes) -> Run:
    """The run of an AG-UI request body. Raises InvalidParams naming each field that is wrong
    (camelCase paths, as the client sent them)."""
    try:
        run = RunAgentInput.model_validate_json(body)
    except ValidationError as error:
        raise InvalidParams(
            "the body is not an AG-UI RunAgentInput",
            field_violations=[_violation(item) for item in error.errors()[:20]],
        ) from None
    if len(run.thread_id) > CONTEXT_ID_MAX_LENGTH:
        raise InvalidParams(
            field_violations=[
                FieldViolation("threadId", f"is longer than {CONTEXT_ID_MAX_LENGTH} characters")
            ]
        )
    message = _message(run)
    return Run(thread_id=run.thread_id, run_id=run.run_id, request={"message": message})


def _violation(item: dict[str, Any]) -> FieldViolation:
    path = ".".join(_camel(str(part)) for part in item.get("loc", ())) or "body"
    return FieldViolation(path, item.get("msg", "is not valid"))


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(word.capitalize() for word in rest)


def _message(run: RunAgentInput) -> dict[str, Any]:
    user = next((m for m in reversed(run.messages) if isinstance(m, UserMessage)), None)
    task_id, answer = _continued(run)
    if answer is not None:
        parts = answer
    elif user is not None:
        parts = _parts(user)
    else:
        raise InvalidParams(
            field_violations=[
                FieldViolation("messages", "holds no user message: nothing to send the agent")
            ]
        )
    if not parts:
        raise InvalidParams(
            field_violations=[FieldViolation("messages", "the last user message is empty")]
        )
    return events.message(
        message_id=user.id if user is not None and answer is None else _new_id(),
        role=events.ROLE_USER,
        parts=parts,
        task_id=task_id or None,
        context_id=run.thread_id,
    )


def _continued(run: RunAgentInput) -> tuple[str, list[dict[str, Any]] | None]:
    """The A2A task this run continues ("" for none) and the answer's parts when the resume
    entry carries one (None: the last user message is the answer)."""
    for entry in run.resume or ():
        if entry.status == "resolved":
            payload = entry.payload
            if payload is None:
                return entry.interrupt_id, None
            if isinstance(payload, str):
                return entry.interrupt_id, [{"text": payload}]
            return entry.interrupt_id, [{"data": payload}]
    if run.resume:  # every interrupt abandoned: the message opens a new task in the thread
        return "", None
    state = run.state.get(STATE_KEY) if isinstance(run.state, dict) else None
    if isinstance(state, dict) and state.get("state") in WAITING_STATES:
        task_id = state.get("taskId")
        if isinstance(task_id, str) and task_id:
            return task_id, None
    return "", None


def _parts(message: UserMessage) -> list[dict[str, Any]]:
    if isinstance(message.content, str):
        return [{"text": message.content}] if message.content else []
    parts = []
    for part in message.content:
        if part.type == "text":
            parts.append({"text": part.text})
            continue
        source = part.source
        if source.type == "data":
            parts.append({"raw": source.value, "mediaType": source.mime_type})
        elif source.type == "url":
            parts.append(
                {
                    "url": source.value,
                    **({"mediaType": source.mime_type} if source.mime_type else {}),
                }
            )
        else:
            raise InvalidParams(
                field_violations=[
                    FieldViolation(
                        "messages.content.source",
                        f"a {source.type!r} source names bytes held elsewhere: send them as "
                        "data or a URL",
                    )
                ]
            )
    return parts


def _new_id() -> str:
    return f"agui-{uuid.uuid4().hex}"


def dumps(request: dict[str, Any]) -> bytes:
    """The request as the A2A HTTP+JSON body it is sent as."""
    return json.dumps(request, separators=(",", ":"), ensure_ascii=False).encode()
