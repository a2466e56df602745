"""The usage record of a call, made with the write that ends its task (``services``): one
INSERT, in that write's transaction (on PostgreSQL in its one statement). Nothing is read
from the database for it but the agents' prices, kept per process for
RELAY_TARGET_CACHE_SECONDS (and dropped at once when a price changes in this process)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Mapping
from datetime import datetime
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

from django.conf import settings

from registry.usage_models import AgentPrice
from tasks_app.models import Task, UsageRecord
from tasks_app.usage.extension import Tokens, tokens_of

_ROLE_USER = ("ROLE_USER", "user")
_MILLION = Decimal(1_000_000)
_CENT_MILLIONTHS = Decimal("0.000001")

_prices: tuple[float, dict[str, AgentPrice]] | None = None


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


def usage_record(
    task: Task, *, state: str, snapshot: Mapping[str, Any], events: Iterable[Mapping], now: datetime
) -> UsageRecord:
    """The record of ``task`` ending in ``state`` now, as ``snapshot`` (its canonical dict
    after ``events``, the events that end it) leaves it. Not saved."""
    tokens = tokens_of(events)
    agent_call = task.target_kind != "team" and task.agent_id is not None
    status = snapshot.get("status") or {}
    return UsageRecord(
        task_id=task.pk,
        at=now,
        caller_id=task.caller_id,
        target_kind=task.target_kind,
        target_id=task.target_id,
        agent_id=task.agent_id,
        team_id=_team_of(task),
        parent_task_id=task.parent_id or "",
        skill=str((task.selection or {}).get("skillId") or "")[:200],
        state=state,
        error="" if state == "completed" else _text(status.get("message"))[:500],
        latency_ms=max(0, int((now - task.created_at).total_seconds() * 1000)),
        **_bytes(snapshot),
        input_tokens=tokens.input if tokens else None,
        output_tokens=tokens.output if tokens else None,
        model=tokens.model if tokens else "",
        cost=cost_of(prices().get(task.agent_id), tokens) if agent_call else None,
    )


def _team_of(task: Task) -> str:
    """The team of a team call, or of a hop (the last team its call went through)."""
    if task.target_kind == "team":
        return task.target_id
    if task.parent_id:
        for hop in reversed(task.delegation_chain or ()):
            if isinstance(hop, str) and hop.startswith("team:"):
                return hop[5:]
    return ""


def _bytes(snapshot: Mapping[str, Any]) -> dict[str, int]:
    """The JSON size of what the caller sent (its messages) and of what it got (the agent's
    messages, the artifacts, a status message not in the history)."""
    sent = got = 0
    seen = set()
    for message in snapshot.get("history") or ():
        size = _size(message)
        seen.add(message.get("messageId"))
        if message.get("role") in _ROLE_USER:
            sent += size
        else:
            got += size
    status_message = (snapshot.get("status") or {}).get("message")
    if status_message and status_message.get("messageId") not in seen:
        got += _size(status_message)
    got += sum(_size(artifact) for artifact in snapshot.get("artifacts") or ())
    return {"bytes_in": sent, "bytes_out": got}


def _size(value: Any) -> int:
    return len(json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode())


def _text(message: Mapping[str, Any] | None) -> str:
    if not message:
        return ""
    return " ".join(str(part["text"]) for part in message.get("parts") or () if "text" in part)
