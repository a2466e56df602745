"""Builders of the canonical (1.0 ProtoJSON) A2A objects the relay writes itself.

One function per shape, so every status update, artifact update, task snapshot and message
the relay produces is spelled the same way: ids first, then the payload, optional fields
only when given (ProtoJSON leaves out what is unset, and false flags). States are taken in
the storage spelling (:class:`~tasks_app.lifecycle.TaskState`) and written as 1.0 names.
Objects that arrive from agents or clients are converted, not built: see
:mod:`tasks_app.protocol.objects`.
"""

from __future__ import annotations

from typing import Any

from tasks_app.lifecycle import TaskState, to_wire_v1

JsonDict = dict[str, Any]

ROLE_USER = "ROLE_USER"
ROLE_AGENT = "ROLE_AGENT"
WORKFLOW_STEP_KEY = "workflowStep"
"""The metadata key naming the workflow step an event of a workflow task comes from:
``{"step": id, "key": key, "state": its task's state, "kind": "agent" | "team" | "workflow",
"target": the id called}`` (``routing.workflows.run_steps``; read by the AG-UI events)."""

# Storage spelling -> 1.0 name; a TaskState member finds its value's entry (it is a str).
_V1_STATE = {state.value: to_wire_v1(state) for state in TaskState}


def message(
    *,
    message_id: str,
    role: str,
    parts: list[JsonDict],
    task_id: str | None = None,
    context_id: str | None = None,
    metadata: JsonDict | None = None,
    extensions: list[str] | None = None,
) -> JsonDict:
    """A Message: ``role`` is :data:`ROLE_USER` or :data:`ROLE_AGENT`."""
    out: JsonDict = {"messageId": message_id, "role": role}
    if task_id is not None:
        out["taskId"] = task_id
    if context_id is not None:
        out["contextId"] = context_id
    out["parts"] = parts
    if metadata is not None:
        out["metadata"] = metadata
    if extensions is not None:
        out["extensions"] = extensions
    return out


def text_parts(text: str) -> list[JsonDict]:
    """The parts of a message that says ``text``."""
    return [{"text": text}]


def task_status(
    state: TaskState | str, *, message: JsonDict | None = None, timestamp: str | None = None
) -> JsonDict:
    """A TaskStatus in ``state`` (storage spelling), with its message and timestamp if any."""
    out: JsonDict = {"state": _V1_STATE[state]}
    if timestamp is not None:
        out["timestamp"] = timestamp
    if message is not None:
        out["message"] = message
    return out


def task_snapshot(
    *,
    task_id: str,
    context_id: str,
    status: JsonDict,
    artifacts: list[JsonDict] | None = None,
    history: list[JsonDict] | None = None,
    metadata: JsonDict | None = None,
) -> JsonDict:
    """A Task; empty artifacts, history and metadata are left out."""
    out: JsonDict = {"id": task_id, "contextId": context_id, "status": status}
    if artifacts:
        out["artifacts"] = artifacts
    if history:
        out["history"] = history
    if metadata:
        out["metadata"] = metadata
    return out


def status_event(
    *, task_id: str, context_id: str, status: JsonDict, metadata: JsonDict | None = None
) -> JsonDict:
    """A StreamResponse holding a TaskStatusUpdateEvent."""
    update: JsonDict = {"taskId": task_id, "contextId": context_id, "status": status}
    if metadata is not None:
        update["metadata"] = metadata
    return {"statusUpdate": update}


def artifact_event(
    *,
    task_id: str,
    context_id: str,
    artifact: JsonDict,
    append: bool = False,
    last_chunk: bool = False,
    metadata: JsonDict | None = None,
) -> JsonDict:
    """A StreamResponse holding a TaskArtifactUpdateEvent; false flags are left out."""
    update: JsonDict = {"taskId": task_id, "contextId": context_id, "artifact": artifact}
    if append:
        update["append"] = True
    if last_chunk:
        update["lastChunk"] = True
    if metadata is not None:
        update["metadata"] = metadata
    return {"artifactUpdate": update}
