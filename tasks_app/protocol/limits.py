"""Limits on what one A2A request may carry: its body size, the parts of its message, the size
and depth of every ``metadata`` object in it, and the ``historyLength`` it may get. Pure: it
takes a request's canonical (1.0) params and a :class:`Limits`, and raises the protocol's own
errors with a message that names the limit.

- A body over ``max_body_bytes``: :class:`RequestTooLarge`, an InvalidRequest (-32600) that
  the HTTP+JSON binding answers with 413.
- A body nested deeper than ``max_json_depth`` (or too deep for the JSON parser at all):
  :class:`InvalidRequest`.
- Too many parts, metadata too large or too deep: :class:`InvalidParams` with the offending
  field as a ``google.rpc.BadRequest`` violation.
- A ``historyLength`` over ``max_history_length`` is a maximum asked above the relay's:
  :func:`capped_history_length` gives the relay's instead.

A limit of 0 turns that check off.
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from tasks_app.protocol.errors import FieldViolation, InvalidParams, InvalidRequest


class RequestTooLarge(InvalidRequest):
    """A request body over the size limit: -32600 in JSON-RPC, HTTP 413 in HTTP+JSON."""

    http_status = 413
    default_message = "The request body is too large"


@dataclass(frozen=True)
class Limits:
    max_body_bytes: int = 1024 * 1024
    max_json_depth: int = 64
    max_parts: int = 100
    max_metadata_bytes: int = 16 * 1024
    max_metadata_depth: int = 8
    max_history_length: int = 1000


def body_too_large(limits: Limits) -> RequestTooLarge:
    """The error for a body over ``max_body_bytes`` (the consumer stops reading at the limit,
    so the size itself is not known)."""
    return RequestTooLarge(
        f"the request body is larger than the limit of {limits.max_body_bytes} bytes"
    )


def check_body(body: bytes, limits: Limits) -> None:
    """Raises RequestTooLarge for a body over the size limit and InvalidRequest for one nested
    deeper than ``max_json_depth`` (counted on the raw bytes, before anything parses them, so a
    deeply nested body never reaches a recursive parser)."""
    if limits.max_body_bytes and len(body) > limits.max_body_bytes:
        raise body_too_large(limits)
    if limits.max_json_depth and raw_depth(body) > limits.max_json_depth:
        raise InvalidRequest(
            f"the request body is nested deeper than the limit of {limits.max_json_depth} levels"
        )


def raw_depth(body: bytes) -> int:
    """The deepest nesting of ``[`` and ``{`` in a JSON text, brackets inside strings not
    counted. Works on any bytes (for bytes that are not JSON the number means little, and the
    parser refuses them anyway)."""
    # Only brackets and quotes matter: strip everything else away first, in C, so a large
    # body of text costs a translate, not a Python loop over every byte.
    if b"[" not in body and b"{" not in body:
        return 0
    skeleton = body.translate(None, _NOT_STRUCTURE)
    # Strings (with their escapes) go too, so a bracket inside one is not counted.
    return _bracket_depth(_STRING.sub(b"", skeleton))


_STRUCTURE = b'[]{}"\\'
_NOT_STRUCTURE = bytes(b for b in range(256) if b not in _STRUCTURE)
_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.DOTALL)
# Opening brackets become 1, closing ones -1 (0xFF as a signed byte), anything else 0.
_SIGN = bytes(1 if b in b"[{" else 0xFF if b in b"]}" else 0 for b in range(256))


def _bracket_depth(skeleton: bytes) -> int:
    steps = memoryview(skeleton.translate(_SIGN)).cast("b")
    return max(0, max(itertools.accumulate(steps), default=0))


def nul_violations(params: Any, path: str = "") -> list[FieldViolation]:
    """The fields of a request whose strings (or keys) hold U+0000, which no database stores
    as text: refused as invalid params rather than failing where they are written.
    Iterative, so no value is too deep to walk; call it only for a request whose raw body or
    URL holds a NUL (``\\u0000`` in JSON), which is rare."""
    found: list[FieldViolation] = []
    stack = [(path, params)]
    while stack:
        where, value = stack.pop()
        if isinstance(value, str):
            if "\x00" in value:
                found.append(
                    FieldViolation(
                        where or "(the request)", "holds U+0000 (NUL), which A2A text may not carry"
                    )
                )
        elif isinstance(value, dict):
            for key, member in value.items():
                child = f"{where}.{key}" if where else str(key)
                if "\x00" in str(key):
                    found.append(FieldViolation(child, "a key holds U+0000 (NUL)"))
                stack.append((child, member))
        elif isinstance(value, list):
            stack.extend((f"{where}[{index}]", member) for index, member in enumerate(value))
    return sorted(found, key=lambda violation: violation.field)


def check_params(params: dict[str, Any], limits: Limits) -> None:
    """Raises InvalidParams naming every field of a request's canonical params that is over a
    limit: the message's parts and each ``metadata`` object (of the request, the message, a
    part). ``historyLength`` is a maximum, never refused: ``capped_history_length`` bounds it.

    Only the places A2A requests put these are looked at, never the content of data parts, so
    the cost does not grow with what a message carries."""
    violations: list[FieldViolation] = []
    for path, value in _metadata_fields(params):
        violations.extend(_metadata_violations(path, value, limits))
    message = params.get("message")
    parts = message.get("parts") if isinstance(message, dict) else None
    if limits.max_parts and isinstance(parts, list) and len(parts) > limits.max_parts:
        violations.insert(
            0,
            FieldViolation(
                "message.parts", f"has {len(parts)} parts; the limit is {limits.max_parts}"
            ),
        )
    if violations:
        raise InvalidParams(field_violations=violations)


def _metadata_fields(params: dict[str, Any]) -> Iterator[tuple[str, Any]]:
    if "metadata" in params:
        yield "metadata", params["metadata"]
    message = params.get("message")
    if not isinstance(message, dict):
        return
    if "metadata" in message:
        yield "message.metadata", message["metadata"]
    parts = message.get("parts")
    if isinstance(parts, list):
        for index, part in enumerate(parts):
            if isinstance(part, dict) and "metadata" in part:
                yield f"message.parts[{index}].metadata", part["metadata"]


def _metadata_violations(path: str, value: Any, limits: Limits) -> list[FieldViolation]:
    found = []
    if limits.max_metadata_depth:
        depth = value_depth(value)
        if depth > limits.max_metadata_depth:
            found.append(
                FieldViolation(
                    path, f"is nested {depth} levels deep; the limit is {limits.max_metadata_depth}"
                )
            )
    if limits.max_metadata_bytes:
        size = len(json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode())
        if size > limits.max_metadata_bytes:
            found.append(
                FieldViolation(
                    path, f"is {size} bytes of JSON; the limit is {limits.max_metadata_bytes}"
                )
            )
    return found


def capped_history_length(value: int | None, limits: Limits) -> int | None:
    """The history length to give: the one asked for, at most ``max_history_length`` (a
    maximum the caller may ask above: the answer then carries as many messages as the relay
    gives, as A2A's "at most" reads). None (no length asked) stays None."""
    if value is None or not limits.max_history_length:
        return value
    return min(value, limits.max_history_length)


def value_depth(value: Any) -> int:
    """How deep objects and arrays nest in a parsed JSON value: 0 for a scalar, 1 for a flat
    object or array. Iterative, so no value is too deep to measure."""
    deepest = 0
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            deepest = max(deepest, depth)
            stack.extend((member, depth + 1) for member in item.values())
        elif isinstance(item, list):
            deepest = max(deepest, depth)
            stack.extend((member, depth + 1) for member in item)
    return deepest
