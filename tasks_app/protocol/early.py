"""The early A2A task shape, as the task API's design notes send it, converted to and from the
relay's canonical A2A 1.0 ProtoJSON. Pure: imports no Django.

The early shape is the first published A2A task spec's ``tasks/send``: the client chooses the
task's ``id``, a message is ``{"role": "user", "parts": [...]}`` with ``type``-tagged parts
(``text``; ``file`` with ``file: {bytes | uri, mimeType, name}``; ``data`` with ``data``), and
``sessionId`` groups tasks (1.0's ``contextId``). A request in that shape:

    {"id": "<client task id>", "sessionId"?, "message": {...}, "metadata"?,
     "historyLength"?, "acceptedOutputModes"?, "pushNotification"?}

Answers follow the design notes where they and the early spec differ (the notes are what
integrators parse): ``status`` is the state as a string (the spec nests it in an object), and
``artifacts`` is the list of the artifacts' parts, each tagged with the ``index`` of the
artifact it belongs to (and its ``name``/``description`` when it has one). The spec's status
message and timestamp travel beside it as ``statusMessage`` and ``timestamp``:

    {"id", "sessionId", "status": "completed", "statusMessage"?, "timestamp"?,
     "artifacts": [{"type": "text", "text": "...", "index": 0}], "history"?, "metadata": {}}

An agent that answers with a message rather than a task gives a completed task whose
``artifacts`` are that message's parts (index 0) and whose ``statusMessage`` is the message:
the design notes read results from ``artifacts``. Stream frames follow the spec's
TaskStatusUpdateEvent and TaskArtifactUpdateEvent (``EarlyStream``).
"""

from __future__ import annotations

import base64
import binascii
import json
import re
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from tasks_app.lifecycle import TaskState
from tasks_app.protocol import events as a2a_events
from tasks_app.protocol.errors import FieldViolation, InvalidParams

JsonDict = dict[str, Any]

CLIENT_TASK_ID = re.compile(r"[A-Za-z0-9._~:@+=-]{1,128}")
"""A client task id: 1 to 128 characters that need no escaping in a URL path segment."""

EARLY_STATE = {
    "TASK_STATE_SUBMITTED": "submitted",
    "TASK_STATE_WORKING": "working",
    "TASK_STATE_INPUT_REQUIRED": "input-required",
    "TASK_STATE_AUTH_REQUIRED": "auth-required",
    "TASK_STATE_COMPLETED": "completed",
    "TASK_STATE_CANCELED": "canceled",
    "TASK_STATE_FAILED": "failed",
    "TASK_STATE_REJECTED": "rejected",
}
"""1.0 state names -> the early spelling; anything else is "unknown", as the early spec has."""

ENDS_STREAM = frozenset(
    {"completed", "canceled", "failed", "rejected", "input-required", "auth-required"}
)
"""The states at which a stream closes: its status frame is the ``final`` one."""

STATE_RANK = [
    "failed",
    "rejected",
    "canceled",
    "unknown",
    "auth-required",
    "input-required",
    "working",
    "submitted",
    "completed",
]
"""Least advanced first: a merged batch has the first of these any of its tasks has."""

SEND_FIELDS = {
    "id",
    "sessionId",
    "message",
    "metadata",
    "historyLength",
    "acceptedOutputModes",
    "pushNotification",
}
PART_TYPES = ("text", "file", "data")


def is_early(payload: Mapping[str, Any]) -> bool:
    """Whether a send body is in the early shape: it has a top-level ``id`` (the client's
    task id, which every early send carries), or its message spells the role ``user`` or
    ``agent``, or a part carries ``type``. A 1.0 body has none of these."""
    if "id" in payload:
        return True
    message = payload.get("message")
    if not isinstance(message, dict):
        return False
    if message.get("role") in ("user", "agent"):
        return True
    parts = message.get("parts")
    return isinstance(parts, list) and any(isinstance(p, dict) and "type" in p for p in parts)


def client_task_id(value: Any, *, field: str = "id") -> str:
    """The client task id, checked; raises InvalidParams naming ``field`` otherwise."""
    if value is None or value == "":
        problem = "is required: the client's task id"
    elif not isinstance(value, str):
        problem = "must be a string"
    elif not CLIENT_TASK_ID.fullmatch(value):
        problem = (
            "must be 1 to 128 characters of letters, digits and . _ ~ : @ + = -, "
            f"not {value[:40]!r}"
        )
    else:
        return value
    raise InvalidParams(field_violations=[FieldViolation(field, problem)])


@dataclass(frozen=True)
class EarlySend:
    client_task_id: str
    request: JsonDict
    """The same send as a 1.0 SendMessageRequest (still to be validated as one)."""


def send_request(payload: Mapping[str, Any]) -> EarlySend:
    """Converts an early send (without its target keys) into a 1.0 SendMessageRequest.
    Raises InvalidParams naming every field that is wrong, and nothing else."""
    violations: list[FieldViolation] = []
    for key in payload:
        if key not in SEND_FIELDS:
            violations.append(FieldViolation(key, "is not a field of the early task shape"))
    try:
        task_id = client_task_id(payload.get("id"))
    except InvalidParams as error:
        violations.extend(error.field_violations)
        task_id = ""
    message = _message_to_v1(payload.get("message"), violations)
    request: JsonDict = {"message": message}
    session = payload.get("sessionId")
    if session is not None:
        if isinstance(session, str) and session:
            message["contextId"] = session
        else:
            violations.append(FieldViolation("sessionId", "must be a non-empty string"))
    if payload.get("metadata") is not None:
        if isinstance(payload["metadata"], dict):
            request["metadata"] = payload["metadata"]
        else:
            violations.append(FieldViolation("metadata", "must be a JSON object"))
    configuration = _configuration(payload, violations)
    if configuration:
        request["configuration"] = configuration
    if violations:
        raise InvalidParams(field_violations=violations)
    return EarlySend(task_id, request)


def _message_to_v1(message: Any, violations: list[FieldViolation]) -> JsonDict:
    if message is None:
        violations.append(FieldViolation("message", "is required"))
        return {}
    if not isinstance(message, dict):
        violations.append(FieldViolation("message", "must be a JSON object"))
        return {}
    for key in message:
        if key not in ("role", "parts", "metadata"):
            violations.append(
                FieldViolation(f"message.{key}", "is not a field of an early message")
            )
    if message.get("role") != "user":
        violations.append(
            FieldViolation("message.role", f'must be "user", not {message.get("role")!r:.40}')
        )
    out = a2a_events.message(message_id=str(uuid.uuid4()), role=a2a_events.ROLE_USER, parts=[])
    parts = message.get("parts")
    if not isinstance(parts, list) or not parts:
        violations.append(FieldViolation("message.parts", "must be a non-empty array of parts"))
    else:
        out["parts"] = [
            _part_to_v1(part, f"message.parts[{i}]", violations) for i, part in enumerate(parts)
        ]
    if message.get("metadata") is not None:
        if isinstance(message["metadata"], dict):
            out["metadata"] = message["metadata"]
        else:
            violations.append(FieldViolation("message.metadata", "must be a JSON object"))
    return out


def _part_to_v1(part: Any, path: str, violations: list[FieldViolation]) -> JsonDict:
    def bad(field: str, problem: str) -> JsonDict:
        violations.append(FieldViolation(f"{path}{field}", problem))
        return {}

    if not isinstance(part, dict):
        return bad("", "must be a JSON object")
    kind = part.get("type")
    if kind not in PART_TYPES:
        return bad(".type", f"must be text, file or data, not {kind!r:.40}")
    allowed = {"type", "metadata", kind}
    for key in part:
        if key not in allowed:
            bad(f".{key}", f"is not a field of a {kind} part")
    out: JsonDict
    if kind == "text":
        if not isinstance(part.get("text"), str):
            return bad(".text", "must be a string")
        out = {"text": part["text"]}
    elif kind == "data":
        if not isinstance(part.get("data"), dict):
            return bad(".data", "must be a JSON object")
        out = {"data": part["data"]}
    else:
        out = _file_to_v1(part.get("file"), f"{path}.file", violations)
    if part.get("metadata") is not None:
        if isinstance(part["metadata"], dict):
            out["metadata"] = part["metadata"]
        else:
            bad(".metadata", "must be a JSON object")
    return out


def _file_to_v1(file: Any, path: str, violations: list[FieldViolation]) -> JsonDict:
    if not isinstance(file, dict):
        violations.append(FieldViolation(path, "must be a JSON object"))
        return {}
    for key in file:
        if key not in ("bytes", "uri", "mimeType", "name"):
            violations.append(FieldViolation(f"{path}.{key}", "is not a field of a file"))
    given = [key for key in ("bytes", "uri") if file.get(key) is not None]
    if len(given) != 1:
        violations.append(FieldViolation(path, "needs exactly one of bytes (base64) or uri"))
        return {}
    value = file[given[0]]
    if not isinstance(value, str) or not value:
        violations.append(FieldViolation(f"{path}.{given[0]}", "must be a non-empty string"))
        return {}
    if given[0] == "bytes" and not _is_base64(value):
        violations.append(FieldViolation(f"{path}.bytes", "must be base64"))
        return {}
    # 1.0 ProtoJSON carries bytes as base64 in "raw": the client's base64 passes unchanged.
    out: JsonDict = {"raw" if given[0] == "bytes" else "url": value}
    for early_key, v1_key in (("mimeType", "mediaType"), ("name", "filename")):
        if file.get(early_key) is not None:
            if isinstance(file[early_key], str):
                out[v1_key] = file[early_key]
            else:
                violations.append(FieldViolation(f"{path}.{early_key}", "must be a string"))
    return out


def _is_base64(text: str) -> bool:
    """Standard or URL-safe base64, padded or not (what the 1.0 parser accepts)."""
    cleaned = text.strip().replace("-", "+").replace("_", "/")
    try:
        base64.b64decode(cleaned + "=" * (-len(cleaned) % 4), validate=True)
    except (binascii.Error, ValueError):
        return False
    return True


def _configuration(payload: Mapping[str, Any], violations: list[FieldViolation]) -> JsonDict:
    out: JsonDict = {}
    if payload.get("historyLength") is not None:
        history = payload["historyLength"]
        if isinstance(history, int) and not isinstance(history, bool) and history >= 0:
            out["historyLength"] = history
        else:
            violations.append(FieldViolation("historyLength", "must be a whole number >= 0"))
    modes = payload.get("acceptedOutputModes")
    if modes is not None:
        if isinstance(modes, list) and all(isinstance(mode, str) for mode in modes):
            out["acceptedOutputModes"] = modes
        else:
            violations.append(
                FieldViolation("acceptedOutputModes", "must be an array of media types")
            )
    push = payload.get("pushNotification")
    if push is not None:
        config = _push_to_v1(push, violations)
        if config:
            out["taskPushNotificationConfig"] = config
    return out


def _push_to_v1(push: Any, violations: list[FieldViolation]) -> JsonDict:
    """The early PushNotificationConfig ``{url, token?, authentication?: {schemes,
    credentials?}}`` as 1.0's ``{url, token?, authentication?: {scheme, credentials?}}``
    (the first scheme)."""
    if not isinstance(push, dict) or not isinstance(push.get("url"), str):
        violations.append(FieldViolation("pushNotification.url", "must be a string"))
        return {}
    out: JsonDict = {"url": push["url"]}
    if push.get("token") is not None:
        out["token"] = push["token"]
    authentication = push.get("authentication")
    if authentication is not None:
        schemes = authentication.get("schemes") if isinstance(authentication, dict) else None
        if not isinstance(schemes, list) or not schemes or not isinstance(schemes[0], str):
            violations.append(
                FieldViolation(
                    "pushNotification.authentication.schemes",
                    "must be a non-empty array of scheme names",
                )
            )
            return {}
        out["authentication"] = {"scheme": schemes[0]}
        if authentication.get("credentials") is not None:
            out["authentication"]["credentials"] = authentication["credentials"]
    return out


# --- answers --------------------------------------------------------------------------------


def early_state(status: Mapping[str, Any] | None) -> str:
    return EARLY_STATE.get((status or {}).get("state", ""), "unknown")


def early_part(part: Mapping[str, Any]) -> JsonDict:
    """A 1.0 part as an early ``type``-tagged part."""
    if "text" in part:
        out: JsonDict = {"type": "text", "text": part["text"]}
    elif "raw" in part or "url" in part:
        file: JsonDict = {"bytes": part["raw"]} if "raw" in part else {"uri": part["url"]}
        if part.get("mediaType"):
            file["mimeType"] = part["mediaType"]
        if part.get("filename"):
            file["name"] = part["filename"]
        out = {"type": "file", "file": file}
    else:
        data = part.get("data")
        # Early data parts are objects; a 1.0 data value that is not one is wrapped.
        out = {"type": "data", "data": data if isinstance(data, dict) else {"value": data}}
    if part.get("metadata"):
        out["metadata"] = part["metadata"]
    return out


def early_message(message: Mapping[str, Any]) -> JsonDict:
    out: JsonDict = {
        "role": "agent" if message.get("role") == "ROLE_AGENT" else "user",
        "parts": [early_part(part) for part in message.get("parts", [])],
    }
    if message.get("metadata"):
        out["metadata"] = message["metadata"]
    return out


def _artifact_parts(artifact: Mapping[str, Any], index: int) -> list[JsonDict]:
    tags: JsonDict = {"index": index}
    for key in ("name", "description"):
        if artifact.get(key):
            tags[key] = artifact[key]
    return [{**early_part(part), **tags} for part in artifact.get("parts", [])]


def early_task(
    task: Mapping[str, Any], *, client_task_id: str | None, with_history: bool = False
) -> JsonDict:
    """A 1.0 task as an early task. ``id`` is the client's task id when it has one (else the
    relay's); the history only ``with_history`` (the caller asked for ``historyLength``)."""
    status = task.get("status") or {}
    state = early_state(status)
    out: JsonDict = {
        "id": client_task_id or task["id"],
        "sessionId": task.get("contextId", ""),
        "status": state,
    }
    if status.get("message"):
        out["statusMessage"] = early_message(status["message"])
    if status.get("timestamp"):
        out["timestamp"] = status["timestamp"]
    artifacts = [
        part
        for index, artifact in enumerate(task.get("artifacts", []))
        for part in _artifact_parts(artifact, index)
    ]
    if not artifacts and state == "completed" and status.get("message"):
        # The agent answered with a message: its parts are the result.
        artifacts = _artifact_parts(status["message"], 0)
    out["artifacts"] = artifacts
    if with_history:
        out["history"] = [early_message(message) for message in task.get("history", [])]
    out["metadata"] = task.get("metadata") or {}
    return out


def early_result(
    result: Mapping[str, Any], *, client_task_id: str, with_history: bool = False
) -> JsonDict:
    """A SendMessage result (``{"task"}`` or ``{"message"}``) as an early task."""
    if "task" in result:
        return early_task(result["task"], client_task_id=client_task_id, with_history=with_history)
    message = result["message"]
    task = a2a_events.task_snapshot(
        task_id=client_task_id,
        context_id=message.get("contextId", ""),
        status=a2a_events.task_status(TaskState.COMPLETED, message=message),
    )
    return early_task(task, client_task_id=client_task_id, with_history=with_history)


def merge(results: Iterable[Mapping[str, Any]]) -> JsonDict:
    """One answer from an early batch's answers: the least advanced ``status`` of all (an
    entry that failed with an error counts as ``failed``), the ``taskIds`` of the tasks, and
    every artifact part of every task in batch order, each tagged with its ``taskId``."""
    states, task_ids, artifacts = [], [], []
    for result in results:
        if "error" in result:
            states.append("failed")
            continue
        states.append(result["status"])
        task_ids.append(result["id"])
        artifacts.extend({**part, "taskId": result["id"]} for part in result["artifacts"])
    status = min(states, key=STATE_RANK.index) if states else "completed"
    return {"status": status, "taskIds": task_ids, "artifacts": artifacts}


class EarlyStream:
    """Turns one stream's 1.0 events into early SSE frames: ``event: task_status`` with a
    TaskStatusUpdateEvent ``{id, status, statusMessage?, timestamp?, final, metadata}`` and
    ``event: task_artifact`` with a TaskArtifactUpdateEvent ``{id, artifact: {index, name?,
    description?, parts, append, lastChunk, metadata?}, metadata}``. It numbers artifacts in
    the order they first appear, so it keeps state: one per stream."""

    def __init__(self, client_task_id: str) -> None:
        self.client_task_id = client_task_id
        self._indexes: dict[str, int] = {}

    def frames(self, event: Mapping[str, Any]) -> list[tuple[str, JsonDict]]:
        if "task" in event:
            task = event["task"]
            frames = [self._artifact(artifact) for artifact in task.get("artifacts", [])]
            return [*frames, self._status(task.get("status") or {}, task.get("metadata"))]
        if "statusUpdate" in event:
            update = event["statusUpdate"]
            return [self._status(update.get("status") or {}, update.get("metadata"))]
        if "artifactUpdate" in event:
            update = event["artifactUpdate"]
            return [
                self._artifact(
                    update.get("artifact") or {},
                    append=update.get("append"),
                    last_chunk=update.get("lastChunk"),
                    metadata=update.get("metadata"),
                )
            ]
        if "message" in event:
            # The agent answered with a message: its parts are the result, then the end.
            message = event["message"]
            status = a2a_events.task_status(TaskState.COMPLETED, message=message)
            return [self._artifact(message, last_chunk=True), self._status(status, None)]
        return []

    def encode(self, event: Mapping[str, Any]) -> bytes:
        # ASCII-escaped JSON, for the reason replies.stream_frame gives.
        return b"".join(
            f"event: {name}\ndata: {json.dumps(data, separators=(',', ':'))}\n\n".encode()
            for name, data in self.frames(event)
        )

    def _status(self, status: Mapping[str, Any], metadata: Any) -> tuple[str, JsonDict]:
        state = early_state(status)
        out: JsonDict = {"id": self.client_task_id, "status": state}
        if status.get("message"):
            out["statusMessage"] = early_message(status["message"])
        if status.get("timestamp"):
            out["timestamp"] = status["timestamp"]
        out["final"] = state in ENDS_STREAM
        out["metadata"] = metadata or {}
        return "task_status", out

    def _artifact(
        self,
        artifact: Mapping[str, Any],
        *,
        append: Any = None,
        last_chunk: Any = None,
        metadata: Any = None,
    ) -> tuple[str, JsonDict]:
        key = artifact.get("artifactId") or f"message-{len(self._indexes)}"
        index = self._indexes.setdefault(key, len(self._indexes))
        out: JsonDict = {"index": index}
        for field in ("name", "description"):
            if artifact.get(field):
                out[field] = artifact[field]
        out["parts"] = [early_part(part) for part in artifact.get("parts", [])]
        out["append"] = bool(append)
        out["lastChunk"] = bool(last_chunk)
        if artifact.get("metadata"):
            out["metadata"] = artifact["metadata"]
        return "task_artifact", {
            "id": self.client_task_id,
            "artifact": out,
            "metadata": metadata or {},
        }
