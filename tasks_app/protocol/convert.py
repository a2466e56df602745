"""Canonical A2A data: validation of 1.0 ProtoJSON, and 0.3 <-> 1.0 conversion of wire dicts.

The canonical form inside the gateway is the 1.0 ProtoJSON dict (camelCase, enums by name,
defaults omitted), as ``MessageToDict`` of the ``a2a.types`` protos would give, except that
JSON-valued fields (``metadata``, data parts, extension ``params``) are exactly what the
peer sent: ints stay ints and key order is kept. There are three wire dialects
(:class:`Dialect`): 1.0 ProtoJSON, 0.3 JSON-RPC (the JSON schema, with ``kind``) and 0.3
REST (the 0.3 *proto* JSON: ``content``, ``ROLE_USER``, ``TASK_STATE_CANCELLED``,
``fileWithUri``...).

Validation and conversion are separate steps, so a gateway whose client and upstream speak
the same version can pass dicts through untouched:

- :func:`parse_v1` / :func:`parse_request_v1` validate a 1.0 dict against the a2a-sdk proto
  descriptors and return it normalised (camelCase keys, unknown fields dropped, defaults
  omitted); errors are :class:`InvalidParams` naming each field. :func:`parse_request_v03`
  validates 0.3 JSON-RPC params with the SDK's 0.3 pydantic models.
- ``request_*`` / ``result_*`` / ``stream_response_*`` convert per operation, in both
  directions, for every dialect (``*_v1`` with :attr:`Dialect.V1` is the identity). A
  malformed request raises :class:`InvalidParams`; a malformed result or event raises
  :class:`InvalidAgentResponse`. Outputs share JSON-valued subtrees with their inputs:
  treat both as read-only.
- ``agent_card_*`` convert cards (0.3, 1.0 and the hybrid 1.0+0.3 card).

Why the message-plane objects are mapped dict to dict instead of through the SDK's
``conversions`` (pydantic -> proto -> ``MessageToDict``): a protobuf ``Struct`` turns every
int in ``metadata`` and data parts into a float (``5`` -> ``5.0``, big ints lose digits)
and reorders keys, and each request would pay three conversions. The mapping is small and
mirrors ``a2a.compat.v0_3.conversions`` (including its ``data_part_compat`` convention for
non-object data parts); tests compare both on the same inputs. Cards, which are rare and
full of nested security schemes, do go through the SDK, and their ``Struct`` fields
(extension ``params``, signature ``header``) are copied back from the source.

Deliberate behaviour where 0.3 and 1.0 do not map one to one:

- 0.3 ``blocking`` vs 1.0 ``returnImmediately`` (default: blocking): 1.0 -> 0.3 always
  states ``blocking`` explicitly, since 0.3 left its default open (and in 0.3 proto JSON an
  absent ``blocking`` is ``false``, i.e. non-blocking).
- ``historyLength: 0`` means "no history" in 1.0 but "unlimited" in 0.3, so 0.3's 0 becomes
  absent in 1.0, and 1.0's 0 cannot be said in 0.3 (the gateway trims history itself).
- 0.3 ``status-update.final`` is dropped in 1.0 and recomputed: true when the state is
  terminal or interrupted (the stream closes there).
- 0.3 ``authentication.schemes`` is a list, 1.0 ``scheme`` is one: the first is kept.
- 0.3 ``metadata`` on tasks/get, tasks/resubscribe and push-config requests has no 1.0
  field and is dropped; 1.0 ``tenant`` has no 0.3 field and is dropped.
- A 0.3 ``unknown`` state reads as ``TASK_STATE_UNSPECIFIED`` and back.
- 0.3 proto JSON has no ``referenceTaskIds``; we still emit it on REST 0.3 messages (proto
  parsers ignore unknown fields) so ids survive a round trip through a REST 0.3 peer.
- A 0.3 REST ``fileWithBytes`` holds the file base64-encoded twice, as a2a-sdk 0.3.x (the
  0.3 REST implementation in use) and a2a-sdk 1.x's compat layer write and read it: they put
  the base64 text into the proto ``bytes`` field. The relay does the same both ways, so
  0.3 REST clients and agents get the bytes they would get SDK to SDK; a value encoded only
  once, as the proto alone suggests, is still read (see ``_rest_bytes_to_raw``).
"""

from __future__ import annotations

import base64
import binascii
import copy
import functools
import re
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

import pydantic
from a2a.compat.v0_3 import a2a_v0_3_pb2 as pb2_v03
from a2a.compat.v0_3 import conversions as sdk_conversions
from a2a.compat.v0_3 import types as types_v03
from a2a.types import a2a_pb2 as pb2_v10
from a2a.utils import errors as sdk_errors
from google.api.field_behavior_pb2 import FieldBehavior, field_behavior
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.json_format import MessageToDict, ParseDict

from registry.cards import restore_json_fields
from tasks_app import lifecycle
from tasks_app.protocol.errors import (
    A2AError,
    FieldViolation,
    InvalidAgentResponse,
    InvalidParams,
    UnsupportedOperation,
    VersionNotSupported,
)
from tasks_app.protocol.versions import Operation

JsonDict = dict[str, Any]

DEFAULT_PAGE_SIZE = 50
MAX_PAGE_SIZE = 100


class Dialect(StrEnum):
    """How A2A objects are spelled on a wire."""

    V1 = "1.0"  # ProtoJSON of lf.a2a.v1: JSON-RPC 1.0 and REST 1.0
    V03_JSONRPC = "0.3"  # the 0.3 JSON schema, with `kind` discriminators
    V03_REST = "0.3-rest"  # the 0.3 proto JSON of package a2a.v1: /v1 REST


# =======================================================================================
# ProtoJSON walking: validation and normalisation against the SDK's proto descriptors.
#
# json_format.ParseDict is not enough to validate client input: with
# ignore_unknown_fields=True it accepts {"message": "hi"} as an empty message (it iterates
# the string's characters as unknown field names) and "!!" as empty bytes, and its errors
# name no field path. So we walk the dict along the descriptor ourselves.

_INVALID = object()
_STRUCT = "google.protobuf.Struct"
_VALUE = "google.protobuf.Value"
_LIST_VALUE = "google.protobuf.ListValue"
_TIMESTAMP = "google.protobuf.Timestamp"
_INTEGER_TEXT = re.compile(r"-?\d+")
_INT32 = (-(2**31), 2**31 - 1)
_INT64 = (-(2**63), 2**63 - 1)
_INT_RANGES = {
    FieldDescriptor.TYPE_INT32: _INT32,
    FieldDescriptor.TYPE_SINT32: _INT32,
    FieldDescriptor.TYPE_SFIXED32: _INT32,
    FieldDescriptor.TYPE_INT64: _INT64,
    FieldDescriptor.TYPE_SINT64: _INT64,
    FieldDescriptor.TYPE_SFIXED64: _INT64,
    FieldDescriptor.TYPE_UINT32: (0, 2**32 - 1),
    FieldDescriptor.TYPE_FIXED32: (0, 2**32 - 1),
    FieldDescriptor.TYPE_UINT64: (0, 2**64 - 1),
    FieldDescriptor.TYPE_FIXED64: (0, 2**64 - 1),
}
# Oneofs the proto cannot mark REQUIRED but that must be set for the object to mean anything.
_REQUIRED_ONEOFS = {
    "lf.a2a.v1.Part": "content",
    "lf.a2a.v1.SecurityScheme": "scheme",
    "lf.a2a.v1.OAuthFlows": "flow",
    "lf.a2a.v1.SendMessageResponse": "payload",
    "lf.a2a.v1.StreamResponse": "payload",
    "a2a.v1.Part": "part",
    "a2a.v1.FilePart": "file",
}


@dataclass(frozen=True, slots=True)
class _Field:
    name: str  # the ProtoJSON (camelCase) name, used as the output key
    kind: str  # string, bool, int, float, enum, bytes, message, struct, value, list, timestamp
    repeated: bool
    required: bool
    presence: bool
    oneof: str | None
    int_range: tuple[int, int] | None
    message: Descriptor | None
    enum_names: frozenset[str]
    enum_by_number: Mapping[int, str]
    enum_default: str | None
    map_value: _Field | None


@dataclass(frozen=True, slots=True)
class _MessageSpec:
    by_key: Mapping[str, _Field]  # ProtoJSON name and proto name -> field
    required: tuple[_Field, ...]
    required_oneof: tuple[str, tuple[str, ...]] | None
    # google.api REQUIRED on a response field means "always emitted", so "" or 0 are fine.
    keep_required_defaults: bool


def _field_spec(field: FieldDescriptor) -> _Field:
    message_type = field.message_type
    if message_type is not None and message_type.GetOptions().map_entry:
        return _Field(
            name=field.json_name,
            kind="map",
            repeated=False,
            required=False,
            presence=True,
            oneof=None,
            int_range=None,
            message=None,
            enum_names=frozenset(),
            enum_by_number={},
            enum_default=None,
            map_value=_field_spec(message_type.fields_by_name["value"]),
        )
    kind = _kind_of(field)
    oneof = field.containing_oneof
    real_oneof = oneof is not None and not (len(oneof.fields) == 1 and oneof.name.startswith("_"))
    behaviors = field.GetOptions().Extensions[field_behavior]
    enum_type = field.enum_type
    return _Field(
        name=field.json_name,
        kind=kind,
        repeated=field.is_repeated,
        required=FieldBehavior.REQUIRED in behaviors,
        presence=field.has_presence and not field.is_repeated,
        oneof=oneof.name if real_oneof else None,
        int_range=_INT_RANGES.get(field.type),
        message=message_type if kind == "message" else None,
        enum_names=frozenset(v.name for v in enum_type.values) if enum_type else frozenset(),
        enum_by_number={v.number: v.name for v in enum_type.values} if enum_type else {},
        enum_default=enum_type.values[0].name if enum_type else None,
        map_value=None,
    )


def _kind_of(field: FieldDescriptor) -> str:
    if field.type == FieldDescriptor.TYPE_MESSAGE:
        return {
            _STRUCT: "struct",
            _VALUE: "value",
            _LIST_VALUE: "list",
            _TIMESTAMP: "timestamp",
        }.get(field.message_type.full_name, "message")
    if field.type == FieldDescriptor.TYPE_ENUM:
        return "enum"
    if field.type == FieldDescriptor.TYPE_STRING:
        return "string"
    if field.type == FieldDescriptor.TYPE_BOOL:
        return "bool"
    if field.type == FieldDescriptor.TYPE_BYTES:
        return "bytes"
    if field.type in _INT_RANGES:
        return "int"
    return "float"


@functools.cache
def _spec(descriptor: Descriptor) -> _MessageSpec:
    by_key: dict[str, _Field] = {}
    required: list[_Field] = []
    for field in descriptor.fields:
        spec = _field_spec(field)
        by_key[field.json_name] = by_key[field.name] = spec
        if spec.required:
            required.append(spec)
    oneof_name = _REQUIRED_ONEOFS.get(descriptor.full_name)
    required_oneof = None
    if oneof_name is not None:
        members = descriptor.oneofs_by_name[oneof_name].fields
        required_oneof = (oneof_name, tuple(f.json_name for f in members))
    return _MessageSpec(
        by_key, tuple(required), required_oneof, descriptor.name.endswith("Response")
    )


class _Walk:
    """One validation pass; collects violations instead of stopping at the first."""

    def __init__(self, *, keep_unknown: bool) -> None:
        self.keep_unknown = keep_unknown
        self.violations: list[FieldViolation] = []

    def bad(self, path: str, description: str) -> object:
        self.violations.append(FieldViolation(path or "(body)", description))
        return _INVALID

    def message(self, value: object, descriptor: Descriptor, path: str) -> object:
        if not isinstance(value, dict):
            return self.bad(path, "must be a JSON object")
        spec = _spec(descriptor)
        out: JsonDict = {}
        oneofs: dict[str, str] = {}
        invalid: set[str] = set()  # already reported; "is required" would only repeat it
        for key, raw in value.items():
            field = spec.by_key.get(key)
            if field is None:
                if self.keep_unknown:
                    out.setdefault(key, raw)
                continue
            if raw is None:  # ProtoJSON null: the field's default
                continue
            field_path = f"{path}.{field.name}" if path else field.name
            if field.oneof is not None:
                other = oneofs.setdefault(field.oneof, field.name)
                if other != field.name:
                    self.bad(field_path, f"cannot be set together with {other}")
                    continue
            result = self.field(raw, field, field_path)
            if result is _INVALID:
                invalid.add(field.name)
                continue
            keep_default = field.presence or (field.required and spec.keep_required_defaults)
            if not keep_default and _is_default(result, field):
                continue
            out[field.name] = result
        for field in spec.required:
            if field.name not in out and field.name not in invalid:
                what = "must not be empty" if field.repeated else "is required"
                self.bad(f"{path}.{field.name}" if path else field.name, what)
        if spec.required_oneof is not None and spec.required_oneof[0] not in oneofs:
            self.bad(path, "must set one of: " + ", ".join(spec.required_oneof[1]))
        return out

    def field(self, raw: object, field: _Field, path: str) -> object:
        if field.map_value is not None:
            if not isinstance(raw, dict):
                return self.bad(path, "must be a JSON object")
            out_map: JsonDict = {}
            for key, item in raw.items():
                if item is None:
                    continue
                result = self.field(item, field.map_value, f"{path}[{key}]")
                if result is not _INVALID:
                    out_map[key] = result
            return out_map
        if field.repeated:
            if not isinstance(raw, list):
                return self.bad(path, "must be a JSON array")
            items = (self.single(item, field, f"{path}[{i}]") for i, item in enumerate(raw))
            return [item for item in items if item is not _INVALID]
        return self.single(raw, field, path)

    def single(self, raw: object, field: _Field, path: str) -> object:
        kind = field.kind
        if kind == "message":
            return self.message(raw, field.message, path)  # type: ignore[arg-type]
        if kind == "string":
            return raw if isinstance(raw, str) else self.bad(path, "must be a string")
        if kind == "bool":
            return raw if isinstance(raw, bool) else self.bad(path, "must be true or false")
        if kind == "int":
            return self.integer(raw, field, path)
        if kind == "enum":
            if isinstance(raw, str) and raw in field.enum_names:
                return raw
            if isinstance(raw, int) and not isinstance(raw, bool) and raw in field.enum_by_number:
                return field.enum_by_number[raw]
            return self.bad(path, f"unknown value {raw!r:.60}")
        if kind == "struct":
            return raw if isinstance(raw, dict) else self.bad(path, "must be a JSON object")
        if kind == "list":
            return raw if isinstance(raw, list) else self.bad(path, "must be a JSON array")
        if kind == "value":
            return raw
        if kind == "timestamp":
            return raw if _is_timestamp(raw) else self.bad(path, "must be an RFC 3339 timestamp")
        if kind == "bytes":
            normalized = _base64_or_none(raw)
            return self.bad(path, "must be base64") if normalized is None else normalized
        if isinstance(raw, int | float) and not isinstance(raw, bool):
            return raw
        return self.bad(path, "must be a number")

    def integer(self, raw: object, field: _Field, path: str) -> object:
        # ProtoJSON accepts a number or a decimal string (64-bit ints are sent as strings).
        integral = (isinstance(raw, int) and not isinstance(raw, bool)) or (
            isinstance(raw, float) and raw.is_integer()
        )
        if not integral and not (isinstance(raw, str) and _INTEGER_TEXT.fullmatch(raw)):
            return self.bad(path, "must be an integer")
        value = int(raw)  # type: ignore[arg-type]
        low, high = field.int_range or (-(2**63), 2**64 - 1)
        if not low <= value <= high:
            return self.bad(path, "is out of range")
        return value


def _is_default(value: object, field: _Field) -> bool:
    if field.repeated or field.kind == "map":
        return not value
    if field.kind == "enum":
        return value == field.enum_default
    if field.kind in ("string", "bytes", "bool", "int", "float"):
        return not value
    return False


def _is_timestamp(raw: object) -> bool:
    if not isinstance(raw, str) or "T" not in raw:
        return False
    try:
        return datetime.fromisoformat(raw).tzinfo is not None
    except ValueError:
        return False


def _base64_or_none(raw: object) -> str | None:
    """ProtoJSON bytes accept standard or URL-safe base64, padded or not; emit standard."""
    if not isinstance(raw, str):
        return None
    text = raw.strip().replace("-", "+").replace("_", "/")
    text += "=" * (-len(text) % 4)
    try:
        base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        return None
    return text


def _walk(
    data: object, descriptor: Descriptor, *, keep_unknown: bool
) -> tuple[JsonDict, list[FieldViolation]]:
    walk = _Walk(keep_unknown=keep_unknown)
    result = walk.message(data, descriptor, "")
    return (result if isinstance(result, dict) else {}), walk.violations


def _v1_descriptor(message_type: str) -> Descriptor:
    try:
        return pb2_v10.DESCRIPTOR.message_types_by_name[message_type]
    except KeyError:
        raise ValueError(f"no A2A 1.0 message type {message_type!r}") from None


def _v03_descriptor(message_type: str) -> Descriptor:
    return pb2_v03.DESCRIPTOR.message_types_by_name[message_type]


# =======================================================================================
# Validation of requests


def parse_v1(message_type: str, data: object) -> JsonDict:
    """Validate a 1.0 ProtoJSON dict of ``message_type`` (e.g. ``"Task"``), normalised.

    Keys become camelCase, unknown fields and ``null`` are dropped, default-valued fields
    are omitted, enums become names; JSON-valued fields are kept verbatim. Raises
    :class:`InvalidParams` listing every problem with its field path.
    """
    normalized, violations = _walk(data, _v1_descriptor(message_type), keep_unknown=False)
    if violations:
        raise InvalidParams(field_violations=violations)
    return normalized


_REQUEST_TYPES_V1: Mapping[Operation, str] = {
    Operation.SEND: "SendMessageRequest",
    Operation.STREAM: "SendMessageRequest",
    Operation.GET_TASK: "GetTaskRequest",
    Operation.LIST_TASKS: "ListTasksRequest",
    Operation.CANCEL: "CancelTaskRequest",
    Operation.SUBSCRIBE: "SubscribeToTaskRequest",
    Operation.PUSH_CREATE: "TaskPushNotificationConfig",
    Operation.PUSH_GET: "GetTaskPushNotificationConfigRequest",
    Operation.PUSH_LIST: "ListTaskPushNotificationConfigsRequest",
    Operation.PUSH_DELETE: "DeleteTaskPushNotificationConfigRequest",
    Operation.EXTENDED_CARD: "GetExtendedAgentCardRequest",
}


def parse_request_v1(operation: Operation, params: object) -> JsonDict:
    """Validate 1.0 params of ``operation`` and return them canonical.

    On top of :func:`parse_v1`: ``pageSize`` must be 1..100 (ListTasks defaults it to 50),
    ``historyLength`` must not be negative, and a push config to create needs a ``taskId``.
    """
    normalized, violations = _walk(
        {} if params is None else params,
        _v1_descriptor(_REQUEST_TYPES_V1[operation]),
        keep_unknown=False,
    )
    violations.extend(_semantic_violations(operation, normalized))
    if violations:
        raise InvalidParams(field_violations=violations)
    if operation is Operation.LIST_TASKS:
        normalized.setdefault("pageSize", DEFAULT_PAGE_SIZE)
    return normalized


def _semantic_violations(operation: Operation, params: JsonDict) -> list[FieldViolation]:
    found: list[FieldViolation] = []
    page_size = params.get("pageSize")
    if page_size is not None and not 1 <= page_size <= MAX_PAGE_SIZE:
        found.append(FieldViolation("pageSize", f"must be between 1 and {MAX_PAGE_SIZE}"))
    history = params.get("historyLength", params.get("configuration", {}).get("historyLength"))
    if history is not None and history < 0:
        field = "historyLength" if "historyLength" in params else "configuration.historyLength"
        found.append(FieldViolation(field, "must not be negative"))
    if operation is Operation.PUSH_CREATE and not params.get("taskId"):
        found.append(FieldViolation("taskId", "is required"))
    return found


_REQUEST_MODELS_V03: Mapping[Operation, type[pydantic.BaseModel]] = {
    Operation.SEND: types_v03.MessageSendParams,
    Operation.STREAM: types_v03.MessageSendParams,
    Operation.GET_TASK: types_v03.TaskQueryParams,
    Operation.CANCEL: types_v03.TaskIdParams,
    Operation.SUBSCRIBE: types_v03.TaskIdParams,
    Operation.PUSH_CREATE: types_v03.TaskPushNotificationConfig,
    Operation.PUSH_GET: types_v03.GetTaskPushNotificationConfigParams,
    Operation.PUSH_LIST: types_v03.ListTaskPushNotificationConfigParams,
    Operation.PUSH_DELETE: types_v03.DeleteTaskPushNotificationConfigParams,
}


def parse_request_v03(operation: Operation, params: object) -> JsonDict:
    """Validate 0.3 JSON-RPC params with the SDK's 0.3 models; return them camelCase.

    The result only holds fields the client sent (``null`` ones dropped); feed it to
    :func:`request_to_v1`. Raises :class:`InvalidParams` with the 0.3 field paths.
    """
    if operation is Operation.EXTENDED_CARD:
        return {}
    model = _REQUEST_MODELS_V03.get(operation)
    if model is None:
        raise UnsupportedOperation(f"{operation.value} does not exist in A2A 0.3 JSON-RPC")
    try:
        parsed = model.model_validate({} if params is None else params)
    except pydantic.ValidationError as error:
        raise InvalidParams(field_violations=_pydantic_violations(error)) from None
    return parsed.model_dump(mode="json", by_alias=True, exclude_unset=True, exclude_none=True)


def _pydantic_violations(error: pydantic.ValidationError) -> list[FieldViolation]:
    """Field violations from pydantic errors, collapsing union alternatives.

    For a union (a part is a text, file or data part) pydantic reports every alternative.
    We keep the alternative that fits best: the one whose ``kind`` matched, then the one
    with the fewest errors.
    """
    groups: dict[tuple[Any, ...], dict[str, list[tuple[tuple[Any, ...], str, str]]]] = {}
    plain: list[tuple[tuple[Any, ...], str]] = []
    for item in error.errors():
        loc = tuple(item["loc"])
        split = next((i for i, part in enumerate(loc) if part in _V03_MODEL_NAMES), None)
        if split is None:
            plain.append((loc, item["msg"]))
        else:
            member = groups.setdefault(loc[:split], {}).setdefault(loc[split], [])
            member.append((loc[:split] + loc[split + 1 :], item["msg"], item["type"]))
    for members in groups.values():
        best = min(members.values(), key=_union_member_fit)
        plain.extend((loc, msg) for loc, msg, _ in best)
    violations: dict[FieldViolation, None] = {}
    for loc, msg in plain:
        # A nested union leaves one more member name in the path; drop it too.
        parts = [p for p in loc if p not in _V03_MODEL_NAMES]
        path = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in parts).lstrip(".")
        violations[FieldViolation(path or "(params)", msg)] = None
    return list(violations)


_V03_MODEL_NAMES = frozenset(
    name
    for name, value in vars(types_v03).items()
    if isinstance(value, type) and issubclass(value, pydantic.BaseModel)
)


def _union_member_fit(errors: list[tuple[tuple[Any, ...], str, str]]) -> tuple[bool, int]:
    # Best first: the member whose `kind` literal matched, then the one with fewest errors.
    return any(kind == "literal_error" for _, _, kind in errors), len(errors)


# =======================================================================================
# Conversion: shared helpers


class _Malformed(Exception):
    """A peer's object cannot be converted; mapped to the right A2AError by the caller."""


@contextmanager
def _converting(error: type[A2AError], what: str) -> Iterator[None]:
    try:
        yield
    except _Malformed as problem:
        raise error(f"malformed {what}: {problem}") from None
    except InvalidParams as problem:
        # A nested validation (a 0.3 card inside a result) is the peer's fault here.
        if error is InvalidParams:
            raise
        raise error(f"malformed {what}: {problem.message}") from None
    except (TypeError, AttributeError, KeyError, ValueError, IndexError) as problem:
        raise error(f"malformed {what}: {type(problem).__name__}: {problem}") from None


def _copy(source: Mapping[str, Any], target: JsonDict, *keys: str) -> None:
    for key in keys:
        value = source.get(key)
        if value is not None:
            target[key] = value


def _normalize_v03_rest(data: object, message_type: str) -> JsonDict:
    """Read 0.3 proto JSON (camelCase or snake_case) into camelCase, keeping extra keys.

    Raises InvalidParams with the field violations; ``_converting`` makes that the peer's
    fault (InvalidAgentResponse) when a result or event is being read."""
    normalized, violations = _walk(data, _v03_descriptor(message_type), keep_unknown=True)
    if violations:
        raise InvalidParams(field_violations=violations)
    return normalized


def _state_to_v1(state: str | None) -> str:
    known = lifecycle.from_wire(state) if state else None
    return lifecycle.to_wire_v1(known) if known else "TASK_STATE_UNSPECIFIED"


def _state_from_v1(state: str | None, rest: bool) -> str:
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
            raise _Malformed("a file part needs bytes or a uri")
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
        raise _Malformed(f"unknown part kind {kind!r}")
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
        raise _Malformed("a part needs text, raw, url or data")
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
    _copy(message, out, "messageId", "contextId", "taskId")
    role = message.get("role")
    if role is not None:
        # 0.3 proto JSON spells roles like 1.0 does.
        role_v1 = role if rest else _ROLES_V03_TO_V1.get(role)
        if role_v1 not in _ROLES_V1_TO_V03 and role_v1 != "ROLE_UNSPECIFIED":
            raise _Malformed(f"unknown role {role!r}")
        out["role"] = role_v1
    parts = message.get("content" if rest else "parts") or []
    out["parts"] = [_part_to_v1(part, rest) for part in parts]
    _copy(message, out, "metadata", "extensions", "referenceTaskIds")
    return out


def _message_from_v1(message: Mapping[str, Any], rest: bool) -> JsonDict:
    out: JsonDict = {} if rest else {"kind": "message"}
    _copy(message, out, "messageId")
    role = message.get("role")
    if role is not None:
        if role not in _ROLES_V1_TO_V03 and not (rest and role == "ROLE_UNSPECIFIED"):
            raise _Malformed(f"unknown role {role!r}")
        out["role"] = role if rest else _ROLES_V1_TO_V03[role]
    out["content" if rest else "parts"] = [
        _part_from_v1(part, rest) for part in message.get("parts") or []
    ]
    _copy(message, out, "contextId", "taskId", "referenceTaskIds", "extensions", "metadata")
    return out


def _artifact_to_v1(artifact: Mapping[str, Any], rest: bool) -> JsonDict:
    out: JsonDict = {}
    _copy(artifact, out, "artifactId", "name", "description")
    out["parts"] = [_part_to_v1(part, rest) for part in artifact.get("parts") or []]
    _copy(artifact, out, "metadata", "extensions")
    return out


def _artifact_from_v1(artifact: Mapping[str, Any], rest: bool) -> JsonDict:
    out: JsonDict = {}
    _copy(artifact, out, "artifactId", "name", "description")
    out["parts"] = [_part_from_v1(part, rest) for part in artifact.get("parts") or []]
    _copy(artifact, out, "metadata", "extensions")
    return out


def _status_to_v1(status: Mapping[str, Any], rest: bool) -> JsonDict:
    out: JsonDict = {"state": _state_to_v1(status.get("state"))}
    if status.get("message") is not None:
        out["message"] = _message_to_v1(status["message"], rest)
    if status.get("timestamp"):
        out["timestamp"] = _timestamp_to_v1(status["timestamp"])
    return out


def _status_from_v1(status: Mapping[str, Any], rest: bool) -> JsonDict:
    out: JsonDict = {"state": _state_from_v1(status.get("state"), rest)}
    if status.get("message") is not None:
        out["message"] = _message_from_v1(status["message"], rest)
    _copy(status, out, "timestamp")
    return out


def _task_to_v1(task: Mapping[str, Any], rest: bool) -> JsonDict:
    out: JsonDict = {}
    _copy(task, out, "id")
    if task.get("contextId"):  # 0.3 requires contextId, so we may have sent "" for "none"
        out["contextId"] = task["contextId"]
    out["status"] = _status_to_v1(task.get("status") or {}, rest)
    if task.get("artifacts"):
        out["artifacts"] = [_artifact_to_v1(a, rest) for a in task["artifacts"]]
    if task.get("history"):
        out["history"] = [_message_to_v1(m, rest) for m in task["history"]]
    _copy(task, out, "metadata")
    return out


def _task_from_v1(task: Mapping[str, Any], rest: bool) -> JsonDict:
    out: JsonDict = {} if rest else {"kind": "task"}
    _copy(task, out, "id")
    if rest:
        _copy(task, out, "contextId")
    else:
        out["contextId"] = task.get("contextId", "")
    out["status"] = _status_from_v1(task.get("status") or {}, rest)
    if "artifacts" in task:
        out["artifacts"] = [_artifact_from_v1(a, rest) for a in task["artifacts"]]
    if "history" in task:
        out["history"] = [_message_from_v1(m, rest) for m in task["history"]]
    _copy(task, out, "metadata")
    return out


def _status_update_to_v1(event: Mapping[str, Any], rest: bool) -> JsonDict:
    out: JsonDict = {}
    _copy(event, out, "taskId", "contextId")
    out["status"] = _status_to_v1(event.get("status") or {}, rest)
    _copy(event, out, "metadata")
    return out


def _status_update_from_v1(event: Mapping[str, Any], rest: bool) -> JsonDict:
    out: JsonDict = {} if rest else {"kind": "status-update"}
    _copy(event, out, "taskId", "contextId")
    status = event.get("status") or {}
    out["status"] = _status_from_v1(status, rest)
    final = _ends_stream(status.get("state"))
    if final or not rest:  # proto JSON omits false; the 0.3 JSON schema requires it
        out["final"] = final
    _copy(event, out, "metadata")
    return out


def _artifact_update_to_v1(event: Mapping[str, Any], rest: bool) -> JsonDict:
    out: JsonDict = {}
    _copy(event, out, "taskId", "contextId")
    out["artifact"] = _artifact_to_v1(event.get("artifact") or {}, rest)
    _copy(event, out, "append", "lastChunk", "metadata")
    return out


def _artifact_update_from_v1(event: Mapping[str, Any], rest: bool) -> JsonDict:
    out: JsonDict = {} if rest else {"kind": "artifact-update"}
    _copy(event, out, "taskId", "contextId")
    out["artifact"] = _artifact_from_v1(event.get("artifact") or {}, rest)
    # A flag the event has not got stays out (0.3 has it optional, and a 0.3 agent's
    # omission reaches its 0.3 callers as it is); see with_artifact_flags for 1.0 agents'.
    _copy(event, out, "append", "lastChunk", "metadata")
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
    ("task", "task", _task_to_v1, _task_from_v1),
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


def _payload_to_v1(obj: Mapping[str, Any], dialect: Dialect, message_type: str) -> JsonDict:
    if dialect is Dialect.V03_REST:
        normalized = _normalize_v03_rest(obj, message_type)
        member = next((m for m in _BY_MEMBER if m in normalized), None)
        if member is None:
            raise _Malformed("no task, message, statusUpdate or artifactUpdate")
        kind = _BY_MEMBER[member][0]
        return {member: _BY_KIND[kind][1](normalized[member], True)}
    kind = obj.get("kind") or _guess_kind(obj)
    if kind not in _BY_KIND:
        raise _Malformed(f"unknown kind {kind!r}")
    member, to_v1 = _BY_KIND[kind]
    return {member: to_v1(obj, False)}


def _payload_from_v1(obj: Mapping[str, Any], dialect: Dialect) -> JsonDict:
    member = next((m for m in _BY_MEMBER if m in obj), None)
    if member is None:
        raise _Malformed("no task, message, statusUpdate or artifactUpdate")
    from_v1 = _BY_MEMBER[member][1]
    if dialect is Dialect.V03_REST:
        return {member: from_v1(obj[member], True)}
    return from_v1(obj[member], False)


# ---------------------------------------------------------------------------------------
# Push configs, send requests


def _push_to_v1(config: Mapping[str, Any]) -> JsonDict:
    """0.3 PushNotificationConfig (same keys in both 0.3 flavours) -> 1.0 fields."""
    out: JsonDict = {}
    _copy(config, out, "id", "url", "token")
    auth = config.get("authentication")
    if auth is not None:
        auth_v1: JsonDict = {}
        schemes = auth.get("schemes") or []
        if schemes:
            auth_v1["scheme"] = schemes[0]
        _copy(auth, auth_v1, "credentials")
        out["authentication"] = auth_v1
    return out


def _push_from_v1(config: Mapping[str, Any]) -> JsonDict:
    out: JsonDict = {}
    _copy(config, out, "id", "url", "token")
    auth = config.get("authentication")
    if auth is not None:
        scheme = auth.get("scheme")
        out["authentication"] = {"schemes": [scheme] if scheme else []}
        _copy(auth, out["authentication"], "credentials")
    return out


_PUSH_NAME = re.compile(r"tasks/([^/]+)(?:/pushNotificationConfigs/([^/]*))?")


def _resource_ids(name: object) -> tuple[str, str | None]:
    """``tasks/{task}`` or ``tasks/{task}/pushNotificationConfigs/{config}`` -> ids."""
    match = _PUSH_NAME.fullmatch(name) if isinstance(name, str) else None
    if match is None:
        raise _Malformed(f"not a task resource name: {name!r:.80}")
    return match[1], match[2] or None


def _task_push_config_to_v1(config: Mapping[str, Any], dialect: Dialect) -> JsonDict:
    if dialect is Dialect.V03_REST:
        config = _normalize_v03_rest(config, "TaskPushNotificationConfig")
        inner = config.get("pushNotificationConfig") or {}
        task_id, config_id = _resource_ids(config["name"]) if "name" in config else ("", None)
        out = {"taskId": task_id, **_push_to_v1(inner)} if task_id else _push_to_v1(inner)
        if config_id and "id" not in out:
            out["id"] = config_id
        return out
    out = {}
    _copy(config, out, "taskId")
    out.update(_push_to_v1(config.get("pushNotificationConfig") or {}))
    return out


def _task_push_config_from_v1(config: Mapping[str, Any], dialect: Dialect) -> JsonDict:
    inner = _push_from_v1(config)
    if dialect is Dialect.V03_REST:
        name = f"tasks/{config.get('taskId', '')}/pushNotificationConfigs/{config.get('id', '')}"
        return {"name": name, "pushNotificationConfig": inner}
    return {"taskId": config.get("taskId", ""), "pushNotificationConfig": inner}


def _send_request_to_v1(params: Mapping[str, Any], rest: bool) -> JsonDict:
    out: JsonDict = {}
    if params.get("message") is not None:
        out["message"] = _message_to_v1(params["message"], rest)
    config = params.get("configuration")
    if config is not None:
        config_v1: JsonDict = {}
        _copy(config, config_v1, "acceptedOutputModes")
        push = config.get("pushNotification" if rest else "pushNotificationConfig")
        if push is not None:
            config_v1["taskPushNotificationConfig"] = _push_to_v1(push)
        if config.get("historyLength"):  # 0 is "unlimited" in 0.3: leave it to the server
            config_v1["historyLength"] = config["historyLength"]
        # In 0.3 proto JSON an absent `blocking` is false; in the JSON schema it is unset.
        non_blocking = not config.get("blocking") if rest else config.get("blocking") is False
        if non_blocking:
            config_v1["returnImmediately"] = True
        if config_v1:
            out["configuration"] = config_v1
    _copy(params, out, "metadata")
    return out


def _send_request_from_v1(params: Mapping[str, Any], rest: bool) -> JsonDict:
    out: JsonDict = {}
    if params.get("message") is not None:
        out["message"] = _message_from_v1(params["message"], rest)
    config = params.get("configuration") or {}
    config_v03: JsonDict = {}
    _copy(config, config_v03, "acceptedOutputModes")
    if config.get("taskPushNotificationConfig") is not None:
        push_key = "pushNotification" if rest else "pushNotificationConfig"
        config_v03[push_key] = _push_from_v1(config["taskPushNotificationConfig"])
    if config.get("historyLength"):
        config_v03["historyLength"] = config["historyLength"]
    config_v03["blocking"] = not config.get("returnImmediately", False)
    out["configuration"] = config_v03
    _copy(params, out, "metadata")
    return out


# =======================================================================================
# Public conversion API, per operation


def request_to_v1(operation: Operation, params: Mapping[str, Any], dialect: Dialect) -> JsonDict:
    """Convert the params of ``operation`` from ``dialect`` to 1.0 (not validated).

    0.3 JSON-RPC params are the method's params object. 0.3 REST params are the 0.3 proto
    request message in proto JSON (``{"name": "tasks/abc", "historyLength": 5}``...), which
    :mod:`tasks_app.protocol.rest` assembles from path, query and body. Raises
    :class:`InvalidParams` when they cannot be converted.
    """
    if dialect is Dialect.V1:
        return dict(params)
    with _converting(InvalidParams, f"{operation.value} params"):
        if dialect is Dialect.V03_REST:
            return _rest_request_to_v1(operation, params)
        return _jsonrpc_request_to_v1(operation, params)


def _jsonrpc_request_to_v1(operation: Operation, params: Mapping[str, Any]) -> JsonDict:
    if operation in (Operation.SEND, Operation.STREAM):
        return _send_request_to_v1(params, rest=False)
    if operation is Operation.GET_TASK:
        out: JsonDict = {"id": params["id"]}
        if params.get("historyLength"):
            out["historyLength"] = params["historyLength"]
        return out
    if operation is Operation.CANCEL:
        out = {"id": params["id"]}
        _copy(params, out, "metadata")
        return out
    if operation is Operation.SUBSCRIBE:
        return {"id": params["id"]}
    if operation is Operation.PUSH_CREATE:
        return _task_push_config_to_v1(params, Dialect.V03_JSONRPC)
    if operation is Operation.PUSH_GET:
        # Without a config id, 0.3 meant the task's one config, stored under the task id.
        return {
            "taskId": params["id"],
            "id": params.get("pushNotificationConfigId") or params["id"],
        }
    if operation is Operation.PUSH_LIST:
        return {"taskId": params["id"]}
    if operation is Operation.PUSH_DELETE:
        return {"taskId": params["id"], "id": params["pushNotificationConfigId"]}
    if operation is Operation.EXTENDED_CARD:
        return {}
    raise UnsupportedOperation(f"{operation.value} does not exist in A2A 0.3 JSON-RPC")


_REST_REQUEST_TYPES_V03: Mapping[Operation, str] = {
    Operation.SEND: "SendMessageRequest",
    Operation.STREAM: "SendMessageRequest",
    Operation.GET_TASK: "GetTaskRequest",
    Operation.CANCEL: "CancelTaskRequest",
    Operation.SUBSCRIBE: "TaskSubscriptionRequest",
    Operation.PUSH_GET: "GetTaskPushNotificationConfigRequest",
    Operation.PUSH_LIST: "ListTaskPushNotificationConfigRequest",
    Operation.PUSH_DELETE: "DeleteTaskPushNotificationConfigRequest",
    Operation.EXTENDED_CARD: "GetAgentCardRequest",
}


def _rest_request_to_v1(operation: Operation, params: Mapping[str, Any]) -> JsonDict:
    if operation is Operation.PUSH_CREATE:
        return _rest_push_create_to_v1(params)
    if operation is Operation.LIST_TASKS:
        # 0.3 proto has no ListTasks; the /v1/tasks query uses the 1.0 fields.
        out = dict(params)
        if out.get("status"):
            out["status"] = _state_to_v1(out["status"])
        return out
    message = _normalize_v03_rest(params, _REST_REQUEST_TYPES_V03[operation])
    if operation in (Operation.SEND, Operation.STREAM):
        return _send_request_to_v1(message, rest=True)
    if operation is Operation.EXTENDED_CARD:
        return {}
    task_id, config_id = _resource_ids(message.get("name") or message.get("parent"))
    if operation in (Operation.GET_TASK, Operation.CANCEL, Operation.SUBSCRIBE):
        out = {"id": task_id}
        if operation is Operation.GET_TASK and message.get("historyLength"):
            out["historyLength"] = message["historyLength"]
        return out
    if operation is Operation.PUSH_LIST:
        out = {"taskId": task_id}
        _copy(message, out, "pageSize", "pageToken")
        return out
    if config_id is None:
        raise _Malformed("the resource name has no push config id")
    return {"taskId": task_id, "id": config_id}


def _rest_push_create_to_v1(params: Mapping[str, Any]) -> JsonDict:
    """Accept the CreateTaskPushNotificationConfigRequest the SDK sends, its ``config``
    alone (what the proto's ``body: "config"`` says), or a bare PushNotificationConfig."""
    holder = params.get("config", params)
    if not isinstance(holder, Mapping):
        raise _Malformed("config must be an object")
    inner = holder.get("pushNotificationConfig", holder.get("push_notification_config"))
    inner = _normalize_v03_rest(holder if inner is None else inner, "PushNotificationConfig")
    out = _push_to_v1(inner)
    parent = params.get("parent") or holder.get("name")
    if parent:
        out["taskId"] = _resource_ids(parent)[0]
    config_id = params.get("configId", params.get("config_id"))
    if config_id and "id" not in out:
        out["id"] = config_id
    return out


def request_from_v1(operation: Operation, params: Mapping[str, Any], dialect: Dialect) -> JsonDict:
    """Convert canonical 1.0 params of ``operation`` to ``dialect`` (for calling a peer).

    For 0.3 REST the result is the 0.3 proto request message (``name``, ``parent``...);
    :mod:`tasks_app.protocol.rest` spreads it over path, query and body. Raises
    :class:`UnsupportedOperation` for ListTasks over 0.3 JSON-RPC.
    """
    if dialect is Dialect.V1:
        return dict(params)
    with _converting(InvalidParams, f"{operation.value} params"):
        rest = dialect is Dialect.V03_REST
        if operation in (Operation.SEND, Operation.STREAM):
            return _send_request_from_v1(params, rest)
        if operation is Operation.PUSH_CREATE:
            if not rest:
                return _task_push_config_from_v1(params, dialect)
            config = _task_push_config_from_v1(params, dialect)
            return {
                "parent": f"tasks/{params['taskId']}",
                "configId": params.get("id", ""),
                "config": config,
            }
        if operation is Operation.EXTENDED_CARD:
            return {}
        if rest:
            return _rest_request_from_v1(operation, params)
        return _jsonrpc_request_from_v1(operation, params)


def _jsonrpc_request_from_v1(operation: Operation, params: Mapping[str, Any]) -> JsonDict:
    if operation is Operation.GET_TASK:
        out: JsonDict = {"id": params["id"]}
        if params.get("historyLength"):
            out["historyLength"] = params["historyLength"]
        return out
    if operation is Operation.CANCEL:
        out = {"id": params["id"]}
        _copy(params, out, "metadata")
        return out
    if operation is Operation.SUBSCRIBE:
        return {"id": params["id"]}
    if operation in (Operation.PUSH_GET, Operation.PUSH_DELETE):
        return {"id": params["taskId"], "pushNotificationConfigId": params["id"]}
    if operation is Operation.PUSH_LIST:
        return {"id": params["taskId"]}
    raise UnsupportedOperation(f"{operation.value} does not exist in A2A 0.3 JSON-RPC")


def _rest_request_from_v1(operation: Operation, params: Mapping[str, Any]) -> JsonDict:
    if operation is Operation.LIST_TASKS:
        out = {k: v for k, v in params.items() if k != "tenant"}
        if out.get("status"):
            out["status"] = _state_from_v1(out["status"], rest=True)
        return out
    if operation in (Operation.GET_TASK, Operation.CANCEL, Operation.SUBSCRIBE):
        out = {"name": f"tasks/{params['id']}"}
        if operation is Operation.GET_TASK and params.get("historyLength"):
            out["historyLength"] = params["historyLength"]
        return out
    if operation is Operation.PUSH_LIST:
        out = {"parent": f"tasks/{params['taskId']}"}
        _copy(params, out, "pageSize", "pageToken")
        return out
    return {"name": f"tasks/{params['taskId']}/pushNotificationConfigs/{params['id']}"}


def result_to_v1(operation: Operation, result: Any, dialect: Dialect) -> Any:
    """Convert a peer's result of ``operation`` from ``dialect`` to canonical 1.0.

    Streaming operations take one stream event (as :func:`stream_response_to_v1`). Raises
    :class:`InvalidAgentResponse` when the result cannot be converted.
    """
    if dialect is Dialect.V1:
        return result
    if operation.streaming:
        return stream_response_to_v1(result, dialect)
    with _converting(InvalidAgentResponse, f"{operation.value} result"):
        rest = dialect is Dialect.V03_REST
        if operation is Operation.SEND:
            response = _payload_to_v1(result, dialect, "SendMessageResponse")
            if "task" not in response and "message" not in response:
                raise _Malformed("a send result must be a task or a message")
            return response
        if operation in (Operation.GET_TASK, Operation.CANCEL):
            task = _normalize_v03_rest(result, "Task") if rest else result
            return _task_to_v1(task, rest)
        if operation is Operation.LIST_TASKS:
            tasks = [
                _task_to_v1(_normalize_v03_rest(t, "Task") if rest else t, rest)
                for t in result.get("tasks") or []
            ]
            return {**result, "tasks": tasks}
        if operation in (Operation.PUSH_CREATE, Operation.PUSH_GET):
            return _task_push_config_to_v1(result, dialect)
        if operation is Operation.PUSH_LIST:
            configs = (result.get("configs") or []) if rest else result
            out: JsonDict = {"configs": [_task_push_config_to_v1(c, dialect) for c in configs]}
            if rest:
                _copy(result, out, "nextPageToken")
            return out
        if operation is Operation.PUSH_DELETE:
            return None
        return agent_card_to_v1(result)


def result_from_v1(operation: Operation, result: Any, dialect: Dialect) -> Any:
    """Convert a canonical 1.0 result of ``operation`` to ``dialect`` (for a client).

    The shapes are those of the binding's body: a 0.3 JSON-RPC SendMessage result is the
    bare Task or Message with ``kind``, a 0.3 JSON-RPC push-config list is a bare array,
    DeleteTaskPushNotificationConfig is ``None``. Streaming operations take one event.
    """
    if dialect is Dialect.V1:
        return result
    if operation.streaming:
        return stream_response_from_v1(result, dialect)
    with _converting(InvalidAgentResponse, f"{operation.value} result"):
        rest = dialect is Dialect.V03_REST
        if operation is Operation.SEND:
            return _payload_from_v1(result, dialect)
        if operation in (Operation.GET_TASK, Operation.CANCEL):
            return _task_from_v1(result, rest)
        if operation is Operation.LIST_TASKS:
            return {**result, "tasks": [_task_from_v1(t, rest) for t in result.get("tasks", [])]}
        if operation in (Operation.PUSH_CREATE, Operation.PUSH_GET):
            return _task_push_config_from_v1(result, dialect)
        if operation is Operation.PUSH_LIST:
            configs = [_task_push_config_from_v1(c, dialect) for c in result.get("configs", [])]
            if not rest:
                return configs
            out: JsonDict = {"configs": configs}
            _copy(result, out, "nextPageToken")
            return out
        if operation is Operation.PUSH_DELETE:
            return None
        return agent_card_to_v03(result)


def stream_response_to_v1(event: Mapping[str, Any], dialect: Dialect) -> JsonDict:
    """One stream event (or push payload) from ``dialect`` to a 1.0 StreamResponse.

    0.3 JSON-RPC events are the bare objects with ``kind``; 0.3 REST events are the 0.3
    proto StreamResponse. Raises :class:`InvalidAgentResponse` when malformed.
    """
    if dialect is Dialect.V1:
        return dict(event)
    with _converting(InvalidAgentResponse, "stream event"):
        return _payload_to_v1(event, dialect, "StreamResponse")


def stream_response_from_v1(event: Mapping[str, Any], dialect: Dialect) -> JsonDict:
    """A 1.0 StreamResponse to ``dialect``; in 0.3 JSON-RPC, the bare object with ``kind``
    (which is also the 0.3 push-notification payload for a task)."""
    if dialect is Dialect.V1:
        return dict(event)
    with _converting(InvalidAgentResponse, "stream event"):
        return _payload_from_v1(event, dialect)


# =======================================================================================
# Agent cards

_HYBRID_DROPPED_FALSE = "supportsAuthenticatedExtendedCard"


def agent_card_to_v1(card: Mapping[str, Any]) -> JsonDict:
    """A 1.0 card from a 1.0, hybrid or 0.3 card (not validated: use ``parse_v1``).

    A card with ``supportedInterfaces`` is read as 1.0 and its 0.3 fields dropped; any other
    is read as 0.3 through the SDK's 0.3 model and ``to_core_agent_card``. Interface
    versions are cut to Major.Minor (0.3 cards say ``"0.3.0"``). Raises
    :class:`InvalidParams` when a 0.3 card does not validate.
    """
    if "supportedInterfaces" in card or "supported_interfaces" in card:
        return _card_v1(card)
    try:
        compat = types_v03.AgentCard.model_validate(card)
    except pydantic.ValidationError as error:
        raise InvalidParams(field_violations=_pydantic_violations(error)) from None
    out = MessageToDict(sdk_conversions.to_core_agent_card(compat))
    restore_json_fields(card, out)
    for interface in out.get("supportedInterfaces", []):
        version = interface.get("protocolVersion", "")
        match = re.fullmatch(r"(\d+\.\d+)\.\d+", version)
        if match:
            interface["protocolVersion"] = match[1]
    return out


def agent_card_to_v03(card: Mapping[str, Any]) -> JsonDict:
    """The 0.3 card for a 1.0 card, built from its first 0.3 interface (SDK
    ``to_compat_agent_card``), ``protocolVersion`` in full (``"0.3.0"``). Raises :class:`VersionNotSupported` without one."""
    normalized = _card_v1(card)
    proto = ParseDict(normalized, pb2_v10.AgentCard(), ignore_unknown_fields=True)
    try:
        compat = sdk_conversions.to_compat_agent_card(proto)
    except sdk_errors.VersionNotSupportedError:
        raise VersionNotSupported("the agent card has no 0.3 interface") from None
    out = compat.model_dump(mode="json", by_alias=True, exclude_none=True)
    restore_json_fields(normalized, out)
    if re.fullmatch(r"\d+\.\d+", out.get("protocolVersion", "")):
        # 1.0 interfaces say Major.Minor; a 0.3 card says the full version, as 0.3 agents do.
        out["protocolVersion"] += ".0"
    return out


def agent_card_hybrid(card: Mapping[str, Any]) -> JsonDict:
    """The 1.0 card plus the 0.3 fields (``url``, ``preferredTransport``, ``protocolVersion``,
    ``additionalInterfaces``, ``security``, ``supportsAuthenticatedExtendedCard``), so 0.3
    and 1.0 clients can both read it. Without a 0.3 interface, just the 1.0 card.

    Each security scheme 0.3 can express is given in its 0.3 shape only (``{"type": "http",
    "scheme": "Bearer", ...}``), never both shapes in one object as a2a-sdk's
    ``agent_card_to_dict`` merges them: a2a-sdk 0.3.x refuses a card whose scheme lacks
    ``type``, and a2a-sdk 1.x's ``parse_agent_card`` turns the 0.3 shape into the 1.0 one
    (``type`` decides the wrapper, ``in`` becomes ``location``), whereas the merged shape only
    reads because unknown fields are ignored. Every other 0.3 field is one that
    ``parse_agent_card`` consumes, so the card parses strictly in a2a-sdk 1.x."""
    normalized = _card_v1(card)
    try:
        legacy = agent_card_to_v03(normalized)
    except VersionNotSupported:
        return normalized
    if not legacy.get(_HYBRID_DROPPED_FALSE):
        legacy.pop(_HYBRID_DROPPED_FALSE, None)
    hybrid = copy.deepcopy(normalized)
    schemes = hybrid.get("securitySchemes") or {}
    for name, scheme in (legacy.pop("securitySchemes", None) or {}).items():
        schemes[name] = scheme
    return _merge_missing(hybrid, legacy)


def _card_v1(card: Mapping[str, Any]) -> JsonDict:
    """A 1.0 or hybrid card as normalized 1.0 ProtoJSON: security schemes in the 0.3 shape
    (a hybrid's) are read through the SDK's ``to_core_security_scheme``, then the card is
    walked along the 1.0 descriptor, dropping the 0.3 fields."""
    schemes = card.get("securitySchemes")
    if isinstance(schemes, Mapping) and any(
        isinstance(scheme, Mapping) and "type" in scheme for scheme in schemes.values()
    ):
        card = {
            **card,
            "securitySchemes": {
                name: _security_scheme_v1(scheme) for name, scheme in schemes.items()
            },
        }
    normalized, _ = _walk(card, _v1_descriptor("AgentCard"), keep_unknown=False)
    return normalized


def _security_scheme_v1(scheme: object) -> object:
    if not isinstance(scheme, Mapping) or "type" not in scheme:
        return scheme
    try:
        compat = types_v03.SecurityScheme.model_validate(scheme)
    except pydantic.ValidationError as error:
        raise InvalidParams(field_violations=_pydantic_violations(error)) from None
    return MessageToDict(sdk_conversions.to_core_security_scheme(compat))


def _merge_missing(target: JsonDict, extra: Mapping[str, Any]) -> JsonDict:
    """Add what ``target`` lacks from ``extra``, recursing into objects and lists of objects."""
    for key, value in extra.items():
        if key not in target:
            target[key] = value
        elif isinstance(value, dict) and isinstance(target[key], dict):
            _merge_missing(target[key], value)
        elif isinstance(value, list) and isinstance(target[key], list):
            for mine, theirs in zip(target[key], value, strict=False):
                if isinstance(mine, dict) and isinstance(theirs, dict):
                    _merge_missing(mine, theirs)
    return target
