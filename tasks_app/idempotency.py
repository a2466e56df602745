"""Idempotent sends: the key a send that opens a task is known by, and the fingerprint of its
body. Pure: plain values in, plain values out.

A send carries its key in the ``Idempotency-Key`` header (gRPC: the ``idempotency-key``
metadata); without one, and when RELAY_MESSAGE_ID_WINDOW_SECONDS is set, its ``messageId``
serves. The relay stores the key and the fingerprint with the task the send opened, unique
per API key (``Task.send_key``), so that a repeat, in any relay process, finds that task
instead of opening another (``tasks_app.gateway.opening``).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from typing import Any

from tasks_app.protocol.errors import FieldViolation, InvalidParams

HEADER = "idempotency-key"
HEADER_BYTES = HEADER.encode()
MAX_LENGTH = 200
KEY_PREFIX = "key:"
MESSAGE_PREFIX = "message:"


def key_of(headers: Iterable[tuple[Any, Any]]) -> str | None:
    """The ``Idempotency-Key`` of a call's headers (raw byte pairs or text pairs), None when
    there is none. The value is the IETF draft's quoted string, or the bare string most
    clients send. Raises InvalidParams for an empty, over-long or repeated key, or one with
    characters outside printable ASCII."""
    found = [value for name, value in headers if _is_key_header(name)]
    if not found:
        return None
    if len(found) > 1:
        raise _invalid("send one Idempotency-Key, not several")
    key = _text(found[0]).strip()
    if len(key) >= 2 and key[0] == key[-1] == '"':
        key = key[1:-1]
    if not key:
        raise _invalid("must not be empty")
    if len(key) > MAX_LENGTH:
        raise _invalid(f"is longer than {MAX_LENGTH} characters")
    if not (key.isascii() and key.isprintable()):  # " " to "~"
        raise _invalid("must be printable ASCII")
    return key


def send_key(
    *, idempotency_key: str | None, message: dict[str, Any], message_ids_count: bool
) -> str:
    """The key a send is stored under: its idempotency key, else (``message_ids_count``) its
    message id, else "" (no key: the send is not deduplicated)."""
    if idempotency_key:
        return KEY_PREFIX + idempotency_key
    message_id = message.get("messageId")
    if message_ids_count and isinstance(message_id, str) and message_id:
        return MESSAGE_PREFIX + message_id[:MAX_LENGTH]
    return ""


def fingerprint(request: dict[str, Any]) -> str:
    """SHA-256 of a canonical (1.0) send request, the same whichever binding carried it."""
    body = json.dumps(request, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(body.encode("utf-8", "surrogatepass")).hexdigest()


def batch_key(key: str | None, index: int) -> str | None:
    """The key of one send of a task API batch: the call's key and the send's place in it."""
    return None if key is None else f"{key}/{index}"


def _is_key_header(name: Any) -> bool:
    # ASGI gives header names as bytes: compared as bytes, without decoding every header of
    # every call.
    if isinstance(name, bytes):
        return name.lower() == HEADER_BYTES
    return str(name).lower() == HEADER


def _text(value: Any) -> str:
    return value.decode("latin-1") if isinstance(value, bytes) else str(value)


def _invalid(description: str) -> InvalidParams:
    return InvalidParams(field_violations=[FieldViolation("Idempotency-Key", description)])
