"""The usage record of a call, made with the write that ends its task (``services``): the
task's ``usage_*`` fields, in that write's UPDATE. Nothing is read from the database for it
but the agents' prices, kept per process for RELAY_TARGET_CACHE_SECONDS (and dropped at once
when a price changes in this process)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Mapping
from datetime import datetime
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

from django.conf import settings

from registry.usage_models import AgentPrice
from tasks_app.models import Task
from tasks_app.usage.extension import Tokens, tokens_of

_ROLE_USER = ("ROLE_USER", "user")
_MILLION = Decimal(1_000_000)
_CENT_MILLIONTHS = Decimal("0.000001")
_COMPACT = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False)

_prices: tuple[float, dict[str, AgentPrice]] | None = None

_DEFAULTS = {
    field.name: field.get_default()
    for field in Task._meta.concrete_fields
    if field.name.startswith("usage_")
}
"""What a task's ``usage_*`` fields hold until its record is written."""


def prices() -> dict[str, AgentPrice]:
    """Every agent's price, by agent id (one query per RELAY_TARGET_CACHE_SECONDS)."""
    global _prices
    now = time.monotonic()
    if _prices is None or now - _prices[0] >= settings.RELAY_TARGET_CACHE_SECONDS:
        _prices = (now, {price.agent_id: price for price in AgentPrice.objects.all()})
    return _prices[1]


def forget_prices(*args, **kwargs) -> None:
    """Drops the cached prices (a signal receiver: a price was saved or deleted)."""
    global _prices
    _prices = None


def cost_of(price: AgentPrice | None, tokens: Tokens | None) -> Decimal:
    """What a call costs at ``price`` (0 without one), to a millionth (rounded half up)."""
    if price is None:
        return Decimal(0)
    cost = price.per_call
    if tokens is not None:
        cost += (
            tokens.input * price.per_million_input_tokens
            + tokens.output * price.per_million_output_tokens
        ) / _MILLION
    return cost.quantize(_CENT_MILLIONTHS, rounding=ROUND_HALF_UP)


def money_text(value: Decimal) -> str:
    """An amount as people read it: to the millionth, without trailing zeros past the cents
    (1.2 -> "1.20", 0.0125 -> "0.0125")."""
    text = f"{Decimal(value).quantize(_CENT_MILLIONTHS):f}".rstrip("0")
    whole, _, cents = text.partition(".")
    return f"{whole}.{cents.ljust(2, '0')}"


def usage_row(
    task: Task, *, state: str, snapshot: Mapping[str, Any], events: Iterable[Mapping], now: datetime
) -> dict[str, Any]:
    """The usage record of ``task`` ending in ``state`` now, as ``snapshot`` (its canonical
    dict after ``events``, the events that end it) leaves it: the task's ``usage_*`` fields
    and their values, written with the task's end (the rest of the record, who and what and
    when, the task holds already). Only the fields whose values differ from their defaults:
    the record is written once, with the end, so the row holds the defaults until then, and
    each field left out is one parameter less in that write."""
    tokens = tokens_of(events)
    agent_call = task.target_kind != "team" and task.agent_id is not None
    status = snapshot.get("status") or {}
    sent, got = _bytes(snapshot)
    row = {
        "usage_team_id": _last_of(task, "team"),
        "usage_workflow_id": _last_of(task, "workflow"),
        "usage_skill": str((task.selection or {}).get("skillId") or "")[:200],
        "usage_error": "" if state == "completed" else _text(status.get("message"))[:500],
        "usage_latency_ms": max(0, int((now - task.created_at).total_seconds() * 1000)),
        "usage_bytes_in": sent,
        "usage_bytes_out": got,
        "usage_input_tokens": tokens.input if tokens else None,
        "usage_output_tokens": tokens.output if tokens else None,
        "usage_model": tokens.model if tokens else "",
        "usage_cost": cost_of(prices().get(task.agent_id), tokens) if agent_call else None,
    }
    return {name: value for name, value in row.items() if value != _DEFAULTS[name]}


def _last_of(task: Task, kind: str) -> str:
    """The team (``kind`` "team") or workflow of a call to one, or of a hop or a step: the
    last of that kind its call went through."""
    if task.target_kind == kind:
        return task.target_id
    if task.parent_id:
        prefix = f"{kind}:"
        for hop in reversed(task.delegation_chain or ()):
            if isinstance(hop, str) and hop.startswith(prefix):
                return hop[len(prefix) :]
    return ""


def _bytes(snapshot: Mapping[str, Any]) -> tuple[int, int]:
    """The JSON size of what the caller sent (its messages) and of what it got (the agent's
    messages, the artifacts, a status message not in the history): each value's compact
    JSON, summed. Each side is encoded once, as a list: its size less the brackets and
    commas is the sum of its items' sizes."""
    sent: list[Any] = []
    got: list[Any] = []
    seen = set()
    for message in snapshot.get("history") or ():
        seen.add(message.get("messageId"))
        (sent if message.get("role") in _ROLE_USER else got).append(message)
    status_message = (snapshot.get("status") or {}).get("message")
    if status_message and status_message.get("messageId") not in seen:
        got.append(status_message)
    got.extend(snapshot.get("artifacts") or ())
    return _size(sent), _size(got)


def _size(values: list[Any]) -> int:
    """The sum of the compact JSON sizes (UTF-8 bytes) of ``values``."""
    if not values:
        return 0
    text = _COMPACT.encode(values)
    size = len(text) if text.isascii() else len(text.encode())
    return size - len(values) - 1  # "[", "]" and the commas between the items


def _text(message: Mapping[str, Any] | None) -> str:
    if not message:
        return ""
    return " ".join(str(part["text"]) for part in message.get("parts") or () if "text" in part)
