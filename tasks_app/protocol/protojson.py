"""ProtoJSON walking: validation and normalisation against the a2a-sdk's proto descriptors.

:func:`walk` checks a dict along a message descriptor and returns it normalised (camelCase
keys, enums by name, defaults omitted, JSON-valued fields verbatim) together with every
:class:`FieldViolation` it found, each with its field path. ``keep_unknown`` keeps keys the
descriptor does not know (for reading 0.3 proto JSON that carries extras).

json_format.ParseDict is not enough to validate client input: with
ignore_unknown_fields=True it accepts {"message": "hi"} as an empty message (it iterates
the string's characters as unknown field names) and "!!" as empty bytes, and its errors
name no field path. So we walk the dict along the descriptor ourselves.
"""

from __future__ import annotations

import base64
import binascii
import functools
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from a2a.compat.v0_3 import a2a_v0_3_pb2 as pb2_v03
from a2a.types import a2a_pb2 as pb2_v10
from google.api.field_behavior_pb2 import FieldBehavior, field_behavior
from google.protobuf.descriptor import Descriptor, FieldDescriptor

from tasks_app.protocol.errors import FieldViolation

JsonDict = dict[str, Any]

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


def walk(
    data: object, descriptor: Descriptor, *, keep_unknown: bool
) -> tuple[JsonDict, list[FieldViolation]]:
    walk = _Walk(keep_unknown=keep_unknown)
    result = walk.message(data, descriptor, "")
    return (result if isinstance(result, dict) else {}), walk.violations


def v1_descriptor(message_type: str) -> Descriptor:
    try:
        return pb2_v10.DESCRIPTOR.message_types_by_name[message_type]
    except KeyError:
        raise ValueError(f"no A2A 1.0 message type {message_type!r}") from None


def v03_descriptor(message_type: str) -> Descriptor:
    return pb2_v03.DESCRIPTOR.message_types_by_name[message_type]
