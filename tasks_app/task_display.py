"""A task as people read it in the admin: a timeline of its events, and message or artifact
parts shown as text, JSON or file links. Pure: takes stored JSON (1.0 shapes, with the 0.3
``kind``/``file`` parts tolerated) and returns plain values; the admin renders them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from tasks_app.snapshots import STATE_FROM_V1

SUMMARY_CHARS = 160


@dataclass(frozen=True)
class ShownPart:
    """One part: ``kind`` is text, json, link or bytes; ``text`` what to show (for a link, its
    label); ``url`` the link (only http or https), else ""."""

    kind: str
    text: str
    url: str = ""


@dataclass(frozen=True)
class TimelineEntry:
    """One event of a task: what happened, in a few words."""

    sequence: int
    at: Any
    kind: str
    state: str
    summary: str


def state_of(wire_state: str) -> str:
    """``TASK_STATE_WORKING`` -> ``working``; a 0.3 state or an unknown value as given."""
    return STATE_FROM_V1.get(wire_state, wire_state or "")


def shown_parts(parts: Any) -> list[ShownPart]:
    """The parts of a message or artifact, each as text, JSON, a link or a byte count."""
    shown = []
    for part in parts if isinstance(parts, list) else []:
        if not isinstance(part, dict):
            continue
        if isinstance(part.get("text"), str):
            shown.append(ShownPart("text", part["text"]))
        elif "data" in part:
            shown.append(ShownPart("json", json.dumps(part["data"], indent=2, ensure_ascii=False)))
        elif isinstance(part.get("file"), dict):  # 0.3: {"kind": "file", "file": {...}}
            file = part["file"]
            shown.append(
                _file_part(
                    file.get("uri") or "",
                    file.get("bytes"),
                    file.get("name") or "",
                    file.get("mimeType") or "",
                )
            )
        elif "url" in part or "raw" in part:
            shown.append(
                _file_part(
                    part.get("url") or "",
                    part.get("raw"),
                    part.get("filename") or "",
                    part.get("mediaType") or "",
                )
            )
    return shown


def artifact_parts(parts: Any) -> list[ShownPart]:
    """:func:`shown_parts` of an artifact, with runs of text parts joined into one: a streamed
    artifact arrives as one text part per chunk, and reads as the one text they make."""
    joined: list[ShownPart] = []
    for part in shown_parts(parts):
        if part.kind == "text" and joined and joined[-1].kind == "text":
            joined[-1] = ShownPart("text", joined[-1].text + part.text)
        else:
            joined.append(part)
    return joined


def _file_part(url: str, raw: Any, filename: str, media_type: str) -> ShownPart:
    label = " · ".join(value for value in (filename, media_type) if value)
    if url:
        return ShownPart("link", label or url, _web_url(url))
    size = len(raw) * 3 // 4 if isinstance(raw, str) else 0  # base64: 4 characters, 3 bytes
    return ShownPart("bytes", f"{label or 'file'}: about {size} bytes, inline")


def _web_url(url: str) -> str:
    try:
        return url if urlsplit(url).scheme in ("http", "https") else ""
    except ValueError:
        return ""


def parts_text(parts: Any) -> str:
    """The text of the parts, joined; other parts named in brackets."""
    words = []
    for part in shown_parts(parts):
        words.append(part.text if part.kind == "text" else f"[{part.kind}: {part.text[:60]}]")
    return " ".join(words)


def timeline_entry(*, sequence: int, at: Any, kind: str, payload: Any) -> TimelineEntry:
    """What one stored event (a 1.0 StreamResponse) says: the state it moves the task to, and
    its message or artifact in short."""
    payload = payload if isinstance(payload, dict) else {}
    state, summary = "", ""
    if "task" in payload:
        task = payload["task"] or {}
        status = task.get("status") or {}
        state = state_of(status.get("state", ""))
        history = task.get("history") or []
        last = history[-1] if history and isinstance(history[-1], dict) else {}
        summary = parts_text(last.get("parts"))
    elif "statusUpdate" in payload:
        status = (payload["statusUpdate"] or {}).get("status") or {}
        state = state_of(status.get("state", ""))
        summary = parts_text((status.get("message") or {}).get("parts"))
    elif "artifactUpdate" in payload:
        update = payload["artifactUpdate"] or {}
        artifact = update.get("artifact") or {}
        name = artifact.get("name") or artifact.get("artifactId") or "artifact"
        flags = [
            flag
            for flag, on in (
                ("appended", update.get("append")),
                ("last chunk", update.get("lastChunk")),
            )
            if on
        ]
        summary = f"{name}{' (' + ', '.join(flags) + ')' if flags else ''}: " + parts_text(
            artifact.get("parts")
        )
    elif "message" in payload:
        summary = parts_text((payload["message"] or {}).get("parts"))
    if len(summary) > SUMMARY_CHARS:
        summary = summary[: SUMMARY_CHARS - 1] + "…"
    return TimelineEntry(sequence=sequence, at=at, kind=kind, state=state, summary=summary)
