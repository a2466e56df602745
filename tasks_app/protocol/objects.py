"""A2A objects mapped between 1.0 ProtoJSON and the two 0.3 dialects, dict to dict.

Parts, messages, artifacts, statuses, tasks, the stream events, push configs and send
requests each have a ``*_to_v1`` and a ``*_from_v1`` function; ``rest=True`` selects the
0.3 proto JSON flavour (``content``, ``ROLE_USER``, ``fileWithUri``...), otherwise the 0.3
JSON schema (with ``kind``). :func:`payload_to_v1` / :func:`payload_from_v1` dispatch on the
payload of a SendMessageResponse or StreamResponse. A peer's object that cannot be mapped
raises :class:`Malformed`; :func:`converting` turns that into the caller's A2A error.

Why the message-plane objects are mapped dict to dict instead of through the SDK's
``conversions`` (pydantic -> proto -> ``MessageToDict``): a protobuf ``Struct`` turns every
int in ``metadata`` and data parts into a float (``5`` -> ``5.0``, big ints lose digits)
and reorders keys, and each request would pay three conversions. The mapping is small and
mirrors ``a2a.compat.v0_3.conversions`` (including its ``data_part_compat`` convention for
non-object data parts); tests compare both on the same inputs.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

from tasks_app import lifecycle
from tasks_app.protocol.errors import A2AError, InvalidParams
from tasks_app.protocol.protojson import JsonDict, v03_descriptor, walk
from tasks_app.protocol.versions import Dialect


class Malformed(Exception):
    """A peer's object cannot be converted; mapped to the right A2AError by the caller."""


@contextmanager
def converting(error: type[A2AError], what: str) -> Iterator[None]:
    try:
        yield
    except Malformed as problem:
        raise error(f"malformed {what}: {problem}") from None
    except InvalidParams as problem:
        # A nested validation (a 0.3 card inside a result) is the peer's fault here.
        if error is InvalidParams:
            raise
        raise error(f"malformed {what}: {problem.message}") from None
    except (TypeError, AttributeError, KeyError, ValueError, IndexError) as problem:
        raise error(f"malformed {what}: {type(problem).__name__}: {problem}") from None


def copy_fields(source: Mapping[str, Any], target: JsonDict, *keys: str) -> None:
    for key in keys:
        value = source.get(key)
        if value is not None:
            target[key] = value


def normalize_v03_rest(data: object, message_type: str) -> JsonDict:
    """Read 0.3 proto JSON (camelCase or snake_case) into camelCase, keeping extra keys.

    Raises InvalidParams with the field violations; ``converting`` makes that the peer's
    fault (InvalidAgentResponse) when a result or event is being read."""
    normalized, violations = walk(data, v03_descriptor(message_type), keep_unknown=True)
    if violations:
        raise InvalidParams(field_violations=violations)
    return normalized


def state_to_v1(state: str | None) -> str:
    known = lifecycle.from_wire(state) if state else None
    return lifecycle.to_wire_v1(known) if known else "TASK_STATE_UNSPECIFIED"


def state_from_v1(state: str | None, rest: bool) -> str:
    known = lifecycle.from_wire(state) if state else None
    if known is None:
        return "TASK_STATE_UNSPECIFIED" if rest else "unknown"
    return lifecycle.to_wire_v03_rest(known) if rest else lifecycle.to_wire_v03(known)


def _ends_stream(state: str | None) -> bool:
    known = lifecycle.from_wire(state) if state else None
    return known in lifecycle.TERMINAL or known in lifecycle.INTERRUPTED


_ROLES_V03_TO_V1 = {"user": "ROLE_USER", "agent": "ROLE_AGENT"}
_ROLES_V1_TO_V03 = {v: k for k, v in _ROLES_V03_TO_V1.items()}


def _timestamp_to_v1(value: str) -> str:
    """0.3 timestamps are loose ISO 8601; 1.0 wants RFC 3339 in UTC with ``Z``."""
    if value.endswith("Z"):
        return value
    moment = datetime.fromisoformat(value)
    if moment.tzinfo is None:  # 0.3 peers that omit the offset mean UTC
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


# ---------------------------------------------------------------------------------------
# Parts, messages, artifacts, statuses, tasks, events (rest=True: 0.3 proto JSON flavour)


def _part_to_v1(part: Mapping[str, Any], rest: bool) -> JsonDict:
    metadata = part.get("metadata")
    kind = part.get("kind") if not rest else None
    if kind is None:
        kind = next((key for key in ("text", "file", "data") if key in part), None)
    if kind == "text":
        out: JsonDict = {"text": part["text"]}
    elif kind == "file":
        file = part["file"]
        uri_key, bytes_key = ("fileWithUri", "fileWithBytes") if rest else ("uri", "bytes")
        if file.get(bytes_key) is not None:
            out = {"raw": _rest_bytes_to_raw(file[bytes_key]) if rest else file[bytes_key]}
        elif file.get(uri_key) is not None:
            out = {"url": file[uri_key]}
        else:
            raise Malformed("a file part needs bytes or a uri")
        if file.get("mimeType"):
            out["mediaType"] = file["mimeType"]
        if file.get("name"):
            out["filename"] = file["name"]
    elif kind == "data":
        data = part["data"].get("data", {}) if rest else part["data"]
        if isinstance(metadata, dict) and metadata.get("data_part_compat") is True:
            # The SDK's way to carry a non-object 1.0 data value through 0.3.
            data = data.get("value")
            metadata = {k: v for k, v in metadata.items() if k != "data_part_compat"} or None
        out = {"data": data}
    else:
        raise Malformed(f"unknown part kind {kind!r}")
    if metadata is not None:
        out["metadata"] = metadata
    return out


def _part_from_v1(part: Mapping[str, Any], rest: bool) -> JsonDict:
    metadata = part.get("metadata")
    if "text" in part:
        out: JsonDict = {"text": part["text"]} if rest else {"kind": "text", "text": part["text"]}
    elif "raw" in part or "url" in part:
        if "raw" in part:
            if rest:
                file: JsonDict = {"fileWithBytes": _raw_to_rest_bytes(part["raw"])}
            else:
                file = {"bytes": part["raw"]}
        else:
            file = {("fileWithUri" if rest else "uri"): part["url"]}
        if part.get("mediaType"):
            file["mimeType"] = part["mediaType"]
        if part.get("filename"):
            file["name"] = part["filename"]
        out = {"file": file} if rest else {"kind": "file", "file": file}
    elif "data" in part:
        data = part["data"]
        if not isinstance(data, dict):
            data = {"value": data}
            metadata = {**(metadata or {}), "data_part_compat": True}
        out = {"data": {"data": data}} if rest else {"kind": "data", "data": data}
    else:
        raise Malformed("a part needs text, raw, url or data")
    if metadata is not None:
        out["metadata"] = metadata
    return out


_STANDARD_BASE64 = re.compile(r"(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?")


def _rest_bytes_to_raw(value: str) -> str:
    """The 1.0 ``raw`` (base64 of the file) for a 0.3 REST ``fileWithBytes``.

    a2a-sdk 0.3.x (client and server) and 1.x's 0.3 compat layer put the base64 *text* of the
    file into the proto ``bytes`` field, whose JSON is base64 again: the wire holds the file
    base64-encoded twice, so one decoding gives ``raw``. A value whose decoding is not base64
    text is taken as encoded once, as the proto alone would have it (the 0.3 SDK cannot read
    those at all); only a file whose bytes are themselves padded base64 text could be read
    the wrong way, and no SDK sends one encoded once."""
    try:
        inner = base64.b64decode(value, validate=True).decode("ascii")
    except (binascii.Error, ValueError):
        return value
    return inner if _STANDARD_BASE64.fullmatch(inner) else value


def _raw_to_rest_bytes(raw: str) -> str:
    """The 0.3 REST ``fileWithBytes`` for a 1.0 ``raw``: base64 of its base64 text, as
    a2a-sdk 0.3.x writes and reads it (see :func:`_rest_bytes_to_raw`)."""
    return base64.b64encode(raw.encode("ascii")).decode("ascii")


def _message_to_v1(message: Mapping[str, Any], rest: bool) -> JsonDict:
    out: JsonDict = {}
    copy_fields(message, out, "messageId", "contextId", "taskId")
    role = message.get("role")
    if role is not None:
        # 0.3 proto JSON spells roles like 1.0 does.
        role_v1 = role if rest else _ROLES_V03_TO_V1.get(role)
        if role_v1 not in _ROLES_V1_TO_V03 and role_v1 != "ROLE_UNSPECIFIED":
            raise Malformed(f"unknown role {role!r}")
        out["role"] = role_v1
    parts = message.get("content" if rest else "parts") or []
    out["parts"] = [_part_to_v1(part, rest) for part in parts]
    copy_fields(message, out, "metadata", "extensions", "referenceTaskIds")
    return out


def _message_from_v1(message: Mapping[str, Any], rest: bool) -> JsonDict:
    out: JsonDict = {} if rest else {"kind": "message"}
    copy_fields(message, out, "messageId")
    role = message.get("role")
    if role is not None:
        if role not in _ROLES_V1_TO_V03 and not (rest and role == "ROLE_UNSPECIFIED"):
            raise Malformed(f"unknown role {role!r}")
        out["role"] = role if rest else _ROLES_V1_TO_V03[role]
    out["content" if rest else "parts"] = [
        _part_from_v1(part, rest) for part in message.get("parts") or []
    ]
    copy_fields(message, out, "contextId", "taskId", "referenceTaskIds", "extensions", "metadata")
    return out


def _artifact_to_v1(artifact: Mapping[str, Any], rest: bool) -> JsonDict:
    out: JsonDict = {}
    copy_fields(artifact, out, "artifactId", "name", "description")
    out["parts"] = [_part_to_v1(part, rest) for part in artifact.get("parts") or []]
    copy_fields(artifact, out, "metadata", "extensions")
    return out


def _artifact_from_v1(artifact: Mapping[str, Any], rest: bool) -> JsonDict:
    out: JsonDict = {}
    copy_fields(artifact, out, "artifactId", "name", "description")
    out["parts"] = [_part_from_v1(part, rest) for part in artifact.get("parts") or []]
    copy_fields(artifact, out, "metadata", "extensions")
    return out


def _status_to_v1(status: Mapping[str, Any], rest: bool) -> JsonDict:
    out: JsonDict = {"state": state_to_v1(status.get("state"))}
    if status.get("message") is not None:
        out["message"] = _message_to_v1(status["message"], rest)
    if status.get("timestamp"):
        out["timestamp"] = _timestamp_to_v1(status["timestamp"])
    return out


def _status_from_v1(status: Mapping[str, Any], rest: bool) -> JsonDict:
    out: JsonDict = {"state": state_from_v1(status.get("state"), rest)}
    if status.get("message") is not None:
        out["message"] = _message_from_v1(status["message"], rest)
    copy_fields(status, out, "timestamp")
    return out


def task_to_v1(task: Mapping[str, Any], rest: bool) -> JsonDict:
    out: JsonDict = {}
    copy_fields(task, out, "id")
    if task.get("contextId"):  # 0.3 requires contextId, so we may have sent "" for "none"
        out["contextId"] = task["contextId"]
    out["status"] = _status_to_v1(task.get("status") or {}, rest)
    if task.get("artifacts"):
        out["artifacts"] = [_artifact_to_v1(a, rest) for a in task["artifacts"]]
    if task.get("history"):
        out["history"] = [_message_to_v1(m, rest) for m in task["history"]]
    copy_fields(task, out, "metadata")
    return out


def task_from_v1(task: Mapping[str, Any], rest: bool) -> JsonDict:
    out: JsonDict = {} if rest else {"kind": "task"}
    copy_fields(task, out, "id")
    if rest:
        copy_fields(task, out, "contextId")
    else:
        out["contextId"] = task.get("contextId", "")
    out["status"] = _status_from_v1(task.get("status") or {}, rest)
    if "artifacts" in task:
        out["artifacts"] = [_artifact_from_v1(a, rest) for a in task["artifacts"]]
    if "history" in task:
        out["history"] = [_message_from_v1(m, rest) for m in task["history"]]
    copy_fields(task, out, "metadata")
    return out


def _status_update_to_v1(event: Mapping[str, Any], rest: bool) -> JsonDict:
    out: JsonDict = {}
    copy_fields(event, out, "taskId", "contextId")
    out["status"] = _status_to_v1(event.get("status") or {}, rest)
    copy_fields(event, out, "metadata")
    return out


def _status_update_from_v1(event: Mapping[str, Any], rest: bool) -> JsonDict:
    out: JsonDict = {} if rest else {"kind": "status-update"}
    copy_fields(event, out, "taskId", "contextId")
    status = event.get("status") or {}
    out["status"] = _status_from_v1(status, rest)
    final = _ends_stream(status.get("state"))
    if final or not rest:  # proto JSON omits false; the 0.3 JSON schema requires it
        out["final"] = final
    copy_fields(event, out, "metadata")
    return out


def _artifact_update_to_v1(event: Mapping[str, Any], rest: bool) -> JsonDict:
    out: JsonDict = {}
    copy_fields(event, out, "taskId", "contextId")
    out["artifact"] = _artifact_to_v1(event.get("artifact") or {}, rest)
    copy_fields(event, out, "append", "lastChunk", "metadata")
    return out


def _artifact_update_from_v1(event: Mapping[str, Any], rest: bool) -> JsonDict:
    out: JsonDict = {} if rest else {"kind": "artifact-update"}
    copy_fields(event, out, "taskId", "contextId")
    out["artifact"] = _artifact_from_v1(event.get("artifact") or {}, rest)
    # A flag the event has not got stays out (0.3 has it optional, and a 0.3 agent's
    # omission reaches its 0.3 callers as it is); see with_artifact_flags for 1.0 agents'.
    copy_fields(event, out, "append", "lastChunk", "metadata")
    return out


def with_artifact_flags(event: Mapping[str, Any]) -> JsonDict:
    """A 1.0 agent's stream event with an artifact update's ``append`` and ``lastChunk``
    written out, false ones too. Proto JSON leaves false out, but the SDKs that speak 1.0
    (a2a-sdk's 0.3 compat layer, @a2a-js/sdk) send both flags to 0.3 callers; keeping them in
    the stored event lets the relay do the same while a 0.3 agent's omission stays one."""
    update = event.get("artifactUpdate")
    if not isinstance(update, Mapping):
        return dict(event)
    flags = {"append": bool(update.get("append")), "lastChunk": bool(update.get("lastChunk"))}
    return {**event, "artifactUpdate": {**update, **flags}}


# The four payloads of a StreamResponse (and the first two of a SendMessageResponse):
# 1.0 member name, 0.3 `kind`, and the converters each way.
_PAYLOADS: tuple[tuple[str, str, Callable[..., JsonDict], Callable[..., JsonDict]], ...] = (
    ("task", "task", task_to_v1, task_from_v1),
    ("message", "message", _message_to_v1, _message_from_v1),
    ("statusUpdate", "status-update", _status_update_to_v1, _status_update_from_v1),
    ("artifactUpdate", "artifact-update", _artifact_update_to_v1, _artifact_update_from_v1),
)
_BY_KIND = {kind: (member, to_v1) for member, kind, to_v1, _ in _PAYLOADS}
_BY_MEMBER = {member: (kind, from_v1) for member, kind, _, from_v1 in _PAYLOADS}


def _guess_kind(obj: Mapping[str, Any]) -> str | None:
    """0.3 objects should carry `kind`; a few peers omit it."""
    if "messageId" in obj:
        return "message"
    if "artifact" in obj:
        return "artifact-update"
    if "taskId" in obj and "status" in obj:
        return "status-update"
    if "id" in obj and "status" in obj:
        return "task"
    return None


def payload_to_v1(obj: Mapping[str, Any], dialect: Dialect, message_type: str) -> JsonDict:
    if dialect is Dialect.V03_REST:
        normalized = normalize_v03_rest(obj, message_type)
        member = next((m for m in _BY_MEMBER if m in normalized), None)
        if member is None:
            raise Malformed("no task, message, statusUpdate or artifactUpdate")
        kind = _BY_MEMBER[member][0]
        return {member: _BY_KIND[kind][1](normalized[member], True)}
    kind = obj.get("kind") or _guess_kind(obj)
    if kind not in _BY_KIND:
        raise Malformed(f"unknown kind {kind!r}")
    member, to_v1 = _BY_KIND[kind]
    return {member: to_v1(obj, False)}


def payload_from_v1(obj: Mapping[str, Any], dialect: Dialect) -> JsonDict:
    member = next((m for m in _BY_MEMBER if m in obj), None)
    if member is None:
        raise Malformed("no task, message, statusUpdate or artifactUpdate")
    from_v1 = _BY_MEMBER[member][1]
    if dialect is Dialect.V03_REST:
        return {member: from_v1(obj[member], True)}
    return from_v1(obj[member], False)


# ---------------------------------------------------------------------------------------
# Push configs, send requests


def push_to_v1(config: Mapping[str, Any]) -> JsonDict:
    """0.3 PushNotificationConfig (same keys in both 0.3 flavours) -> 1.0 fields."""
    out: JsonDict = {}
    copy_fields(config, out, "id", "url", "token")
    auth = config.get("authentication")
    if auth is not None:
        auth_v1: JsonDict = {}
        schemes = auth.get("schemes") or []
        if schemes:
            auth_v1["scheme"] = schemes[0]
        copy_fields(auth, auth_v1, "credentials")
        out["authentication"] = auth_v1
    return out


def _push_from_v1(config: Mapping[str, Any]) -> JsonDict:
    out: JsonDict = {}
    copy_fields(config, out, "id", "url", "token")
    auth = config.get("authentication")
    if auth is not None:
        scheme = auth.get("scheme")
        out["authentication"] = {"schemes": [scheme] if scheme else []}
        copy_fields(auth, out["authentication"], "credentials")
    return out


_PUSH_NAME = re.compile(r"tasks/([^/]+)(?:/pushNotificationConfigs/([^/]*))?")


def resource_ids(name: object) -> tuple[str, str | None]:
    """``tasks/{task}`` or ``tasks/{task}/pushNotificationConfigs/{config}`` -> ids."""
    match = _PUSH_NAME.fullmatch(name) if isinstance(name, str) else None
    if match is None:
        raise Malformed(f"not a task resource name: {name!r:.80}")
    return match[1], match[2] or None


def task_push_config_to_v1(config: Mapping[str, Any], dialect: Dialect) -> JsonDict:
    if dialect is Dialect.V03_REST:
        config = normalize_v03_rest(config, "TaskPushNotificationConfig")
        inner = config.get("pushNotificationConfig") or {}
        task_id, config_id = resource_ids(config["name"]) if "name" in config else ("", None)
        out = {"taskId": task_id, **push_to_v1(inner)} if task_id else push_to_v1(inner)
        if config_id and "id" not in out:
            out["id"] = config_id
        return out
    out = {}
    copy_fields(config, out, "taskId")
    out.update(push_to_v1(config.get("pushNotificationConfig") or {}))
    return out


def task_push_config_from_v1(config: Mapping[str, Any], dialect: Dialect) -> JsonDict:
    inner = _push_from_v1(config)
    if dialect is Dialect.V03_REST:
        name = f"tasks/{config.get('taskId', '')}/pushNotificationConfigs/{config.get('id', '')}"
        return {"name": name, "pushNotificationConfig": inner}
    return {"taskId": config.get("taskId", ""), "pushNotificationConfig": inner}


def send_request_to_v1(params: Mapping[str, Any], rest: bool) -> JsonDict:
    out: JsonDict = {}
    if params.get("message") is not None:
        out["message"] = _message_to_v1(params["message"], rest)
    config = params.get("configuration")
    if config is not None:
        config_v1: JsonDict = {}
        copy_fields(config, config_v1, "acceptedOutputModes")
        push = config.get("pushNotification" if rest else "pushNotificationConfig")
        if push is not None:
            config_v1["taskPushNotificationConfig"] = push_to_v1(push)
        if config.get("historyLength"):  # 0 is "unlimited" in 0.3: leave it to the server
            config_v1["historyLength"] = config["historyLength"]
        # In 0.3 proto JSON an absent `blocking` is false; in the JSON schema it is unset.
        non_blocking = not config.get("blocking") if rest else config.get("blocking") is False
        if non_blocking:
            config_v1["returnImmediately"] = True
        if config_v1:
            out["configuration"] = config_v1
    copy_fields(params, out, "metadata")
    return out


def send_request_from_v1(params: Mapping[str, Any], rest: bool) -> JsonDict:
    out: JsonDict = {}
    if params.get("message") is not None:
        out["message"] = _message_from_v1(params["message"], rest)
    config = params.get("configuration") or {}
    config_v03: JsonDict = {}
    copy_fields(config, config_v03, "acceptedOutputModes")
    if config.get("taskPushNotificationConfig") is not None:
        push_key = "pushNotification" if rest else "pushNotificationConfig"
        config_v03[push_key] = _push_from_v1(config["taskPushNotificationConfig"])
    if config.get("historyLength"):
        config_v03["historyLength"] = config["historyLength"]
    config_v03["blocking"] = not config.get("returnImmediately", False)
    out["configuration"] = config_v03
    copy_fields(params, out, "metadata")
    return out
