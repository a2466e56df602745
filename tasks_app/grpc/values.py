"""Protobuf messages as the canonical JSON dicts, numbers kept as JSON carries them.

A ``google.protobuf.Struct`` (metadata, data parts, a card's extension params) stores every
number as a double, so ``MessageToDict`` turns a JSON ``2`` into ``2.0``. The relay answers and
forwards JSON, where ``2`` and ``2.0`` are not the same to every reader: here every integral
double within ±2**53 (where a double holds each integer exactly) becomes an int again, so
``{"level": 2}`` sent by a gRPC client reaches a JSON-RPC agent as ``2``, and an int from a
gRPC agent reaches a JSON-RPC or HTTP+JSON client as an int.

What gRPC cannot carry stays lost: an integer beyond ±2**53 arrives rounded to the nearest
double (the wire format holds no more), and a ``2.0`` that was meant as a float comes out as
``2``. The A2A messages have no double field of their own, so every float of such a dict comes
from a Struct or Value.
"""

from __future__ import annotations

from typing import Any

from google.protobuf.json_format import MessageToDict
from google.protobuf.message import Message

EXACT_INTEGERS = 2**53
"""Every integer of at most this magnitude is exactly one double."""


def integral_numbers(value: Any) -> Any:
    """``value`` (a JSON-like tree) with every integral float within ±2**53 an int."""
    if isinstance(value, float):
        if value.is_integer() and abs(value) <= EXACT_INTEGERS:
            return int(value)
        return value
    if isinstance(value, dict):
        return {key: integral_numbers(item) for key, item in value.items()}
    if isinstance(value, list):
        return [integral_numbers(item) for item in value]
    return value


def message_to_json(message: Message) -> dict[str, Any]:
    """``MessageToDict``, Struct numbers back to ints where they are integral."""
    return integral_numbers(MessageToDict(message))
