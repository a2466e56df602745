"""Pure: the MCP tools of the relay's targets, and an A2A answer as MCP content.

A tool is named for its target (``agent_<id>``, ``team_<id>``, ``workflow_<id>``, and
``skill_<agent id>_<skill>`` where the admin opted in), so its name stays the same as long as
the target does. Its input schema has ``text``, plus ``data`` (an object, sent as a data part)
and ``files`` where the target's input modes allow, and ``taskId`` to continue an A2A task
that waits for input. Imports no Django.
"""

from __future__ import annotations

import hashlib
import json
import re
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from tasks_app.protocol import events

KINDS = ("agent", "team", "workflow", "skill")
NAME_LIMIT = 64
"""Tool names stay within 64 characters: what the strictest MCP hosts accept."""

TEXT_MODES = frozenset({"text/plain", "text", "text/markdown"})
DATA_MODES = frozenset({"application/json", "data"})

V1_STATES = {
    "TASK_STATE_SUBMITTED": "submitted",
    "TASK_STATE_WORKING": "working",
    "TASK_STATE_INPUT_REQUIRED": "input-required",
    "TASK_STATE_AUTH_REQUIRED": "auth-required",
    "TASK_STATE_COMPLETED": "completed",
    "TASK_STATE_CANCELED": "canceled",
    "TASK_STATE_FAILED": "failed",
    "TASK_STATE_REJECTED": "rejected",
}
MCP_TASK_STATUS = {
    "submitted": "working",
    "working": "working",
    "input-required": "input_required",
    "auth-required": "input_required",
    "completed": "completed",
    "canceled": "cancelled",
    "failed": "failed",
    "rejected": "failed",
}
"""A2A task states as the MCP tasks extension names its statuses."""


@dataclass(frozen=True)
class ToolSpec:
    """One tool: its name, the target it calls (``kind``, ``target_id``; for a skill tool,
    the agent and the ``skill``), a title, a description and its input schema (a tool looked
    up to be called needs none of those three: ``catalog.tool_to_call``)."""

    name: str
    kind: str
    target_id: str
    title: str = ""
    description: str = ""
    input_schema: dict[str, Any] = field(default_factory=dict)
    skill: str = ""

    @property
    def target_kind(self) -> str:
        """The gateway's kind of the target called (a skill tool calls its agent)."""
        return "agent" if self.kind == "skill" else self.kind


def _slug(value: str) -> str:
    return re.sub(r"[^A-Za-z0-9_-]+", "-", value).strip("-") or "x"


def tool_name(kind: str, target_id: str, skill: str = "") -> str:
    """The stable, valid name (``[A-Za-z0-9_-]``, at most NAME_LIMIT characters) of a tool.
    A name that had to be changed or shortened ends in a hash of what it names, so two
    targets never share one."""
    raw = f"{kind}_{target_id}" + (f"_{skill}" if skill else "")
    name = _slug(raw)
    if name == raw and len(name) <= NAME_LIMIT:
        return name
    digest = hashlib.sha256(raw.encode()).hexdigest()[:8]
    return f"{name[: NAME_LIMIT - 9]}_{digest}"


def input_schema(input_modes: Sequence[str]) -> dict[str, Any]:
    """The JSON Schema of a tool's arguments for a target that takes ``input_modes`` (its
    card's media types; none declared means text)."""
    modes = {mode.strip().lower() for mode in input_modes} or {"text/plain"}
    wildcard = "*/*" in modes
    properties: dict[str, Any] = {
        "text": {"type": "string", "description": "The message to send, as text."},
    }
    if wildcard or modes & DATA_MODES:
        properties["data"] = {
            "type": "object",
            "description": "Structured input, sent as a data part of the message.",
        }
    file_modes = sorted(modes - TEXT_MODES - DATA_MODES)
    if file_modes:
        properties["files"] = {
            "type": "array",
            "description": "Files to send, each by base64 bytes or by URL. Media types the "
            f"target takes: {', '.join(file_modes)}.",
            "items": {
                "type": "object",
                "properties": {
                    "name": {"type": "string"},
                    "mediaType": {"type": "string"},
                    "bytes": {"type": "string", "description": "The content, base64."},
                    "url": {"type": "string", "format": "uri"},
                },
            },
        }
    properties["taskId"] = {
        "type": "string",
        "description": "Continue this A2A task (one that waits for input) instead of "
        "starting a new one.",
    }
    return {"type": "object", "properties": properties}


class BadArguments(ValueError):
    """A tool call's arguments make no A2A message."""


def message_of(arguments: dict[str, Any] | None, *, skill: str = "") -> dict[str, Any]:
    """The A2A 1.0 message (canonical JSON) a tool call sends. Raises BadArguments for
    arguments that carry nothing to send or have the wrong types."""
    arguments = arguments or {}
    parts: list[dict[str, Any]] = []
    text, data, files = arguments.get("text"), arguments.get("data"), arguments.get("files")
    if text is not None:
        if not isinstance(text, str):
            raise BadArguments("text must be a string")
        if text:
            parts.append({"text": text})
    if data is not None:
        if not isinstance(data, dict):
            raise BadArguments("data must be an object")
        parts.append({"data": data})
    for file in files or ():
        if not isinstance(file, dict) or not (file.get("bytes") or file.get("url")):
            raise BadArguments("each file needs bytes (base64) or a url")
        part: dict[str, Any] = (
            {"raw": file["bytes"]} if file.get("bytes") else {"url": str(file["url"])}
        )
        if file.get("mediaType"):
            part["mediaType"] = str(file["mediaType"])
        if file.get("name"):
            part["filename"] = str(file["name"])
        parts.append(part)
    if not parts:
        raise BadArguments("send some text, data or files")
    task_id = arguments.get("taskId")
    if task_id is not None and (not isinstance(task_id, str) or not task_id):
        raise BadArguments("taskId must be a task id")
    return events.message(
        message_id=str(uuid.uuid4()),
        role=events.ROLE_USER,
        parts=parts,
        task_id=task_id,
        metadata={"skillId": skill} if skill else None,
    )


@dataclass(frozen=True)
class Answer:
    """An A2A answer as MCP sees it: the texts, the data parts, the files (dicts with
    ``bytes`` or ``url``, ``mediaType``, ``name``), the task's id and state (empty for a
    direct message), and whether it is an error."""

    texts: tuple[str, ...]
    data: tuple[Any, ...]
    files: tuple[dict[str, Any], ...]
    task_id: str = ""
    context_id: str = ""
    state: str = ""

    @property
    def is_error(self) -> bool:
        return self.state in ("failed", "rejected", "canceled")

    def structured(self) -> dict[str, Any]:
        """The answer as MCP structured content."""
        out: dict[str, Any] = {"text": "\n\n".join(self.texts)}
        if self.task_id:
            out["taskId"] = self.task_id
            out["state"] = self.state
        if self.data:
            out["data"] = self.data[0] if len(self.data) == 1 else list(self.data)
        return out

    def summary(self) -> str:
        """The answer's text, with the A2A task named at its end."""
        text = "\n\n".join(self.texts)
        if not self.task_id:
            return text
        note = f"[A2A task {self.task_id}: {self.state}]"
        return f"{text}\n\n{note}" if text else note


def _collect(parts: Sequence[dict[str, Any]], texts: list, data: list, files: list) -> None:
    for part in parts or ():
        if "text" in part:
            texts.append(part["text"])
        elif "data" in part:
            data.append(part["data"])
        elif "raw" in part or "url" in part:
            file = {"bytes": part["raw"]} if "raw" in part else {"url": part["url"]}
            file["mediaType"] = part.get("mediaType") or "application/octet-stream"
            file["name"] = part.get("filename") or ""
            files.append(file)


def state_of(task: dict[str, Any]) -> str:
    """A canonical task's state in the relay's spelling (``input-required``...)."""
    return V1_STATES.get((task.get("status") or {}).get("state", ""), "")


def answer_of(result: dict[str, Any]) -> Answer:
    """The Answer of a canonical SendMessage result (``{"task": ...}`` or ``{"message":
    ...}``): a task's artifacts, else its status message (its last agent message for one
    that waits for input)."""
    texts: list[str] = []
    data: list[Any] = []
    files: list[dict[str, Any]] = []
    if "message" in result:
        _collect(result["message"].get("parts", ()), texts, data, files)
        return Answer(tuple(texts), tuple(data), tuple(files))
    task = result.get("task") or {}
    state = state_of(task)
    status_message = (task.get("status") or {}).get("message") or {}
    artifacts = task.get("artifacts") or []
    if state in ("completed",) and artifacts:
        for artifact in artifacts:
            _collect(artifact.get("parts", ()), texts, data, files)
    else:
        _collect(status_message.get("parts", ()), texts, data, files)
        if not (texts or data or files):
            for artifact in artifacts:
                _collect(artifact.get("parts", ()), texts, data, files)
    return Answer(
        tuple(texts),
        tuple(data),
        tuple(files),
        task_id=task.get("id", ""),
        context_id=task.get("contextId", ""),
        state=state,
    )


def question_of(task: dict[str, Any]) -> str:
    """What a task waiting for input asks, as text (its status message)."""
    answer = answer_of({"task": task})
    if answer.texts:
        return "\n\n".join(answer.texts)
    if answer.data:
        return json.dumps(answer.data[0])
    return "The agent needs more input to go on."
