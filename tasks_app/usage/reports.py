"""Reads of usage: an agent's or a team's scores over the last 24 hours (the metrics
endpoint, selection), and usage totals by caller, agent, team or hour (``GET /a2a/usage``,
the dashboard). Hours before ``rollups.rolled_until`` come from the roll-ups, later ones from
the raw records."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from django.db.models import Count, Q, Sum
from django.utils import timezone

from tasks_app.models import UsageHour, UsageRecord
from tasks_app.usage.records import money_text
from tasks_app.usage.rollups import BAD_ENDS, hour_start, percentile, rolled_until

DAY = timedelta(hours=24)
LATENCY_SAMPLE = 5000
"""The latest calls of the window whose latencies give the percentiles."""


@dataclass(frozen=True)
class Scores:
    """An agent's, a team's or a workflow's last 24 hours: counts, tokens, cost, latency
    (ms)."""

    tasks: int
    completed: int
    failed: int
    input_tokens: int
    output_tokens: int
    cost: Decimal
    latency_avg_ms: float | None
    latency_p95_ms: float | None

    @property
    def success_rate(self) -> float | None:
        outcomes = self.completed + self.failed
        return self.completed / outcomes if outcomes else None

    @property
    def cost_per_task(self) -> Decimal | None:
        return (self.cost / self.tasks).quantize(Decimal("0.000001")) if self.tasks else None


def scores(*, kind: str, subject_id: str, now: datetime | None = None) -> Scores:
    """The last 24 hours of an agent (every call to it: direct, by skill, as a team member)
    or of a team or a workflow (``kind``; its calls; tokens and cost those of its hops or
    steps). Three queries."""
    now = now or timezone.now()
    recent = UsageRecord.objects.filter(at__gt=now - DAY, at__lte=now)
    if kind == "agent":
        calls = spent = recent.filter(agent_id=subject_id)
    else:
        calls = recent.filter(target_kind=kind, target_id=subject_id)
        spent = recent.filter(**{f"{kind}_id": subject_id}).exclude(parent_task_id="")
    counted = calls.aggregate(
        tasks=Count("pk"),
        completed=Count("pk", filter=Q(state="completed")),
        failed=Count("pk", filter=Q(state__in=BAD_ENDS)),
        latency=Sum("latency_ms"),
    )
    money = spent.aggregate(
        input_tokens=Sum("input_tokens"), output_tokens=Sum("output_tokens"), cost=Sum("cost")
    )
    latencies = list(calls.order_by("-at").values_list("latency_ms", flat=True)[:LATENCY_SAMPLE])
    tasks = counted["tasks"]
    return Scores(
        tasks=tasks,
        completed=counted["completed"],
        failed=counted["failed"],
        input_tokens=money["input_tokens"] or 0,
        output_tokens=money["output_tokens"] or 0,
        cost=money["cost"] or Decimal(0),
        latency_avg_ms=(counted["latency"] or 0) / tasks if tasks else None,
        latency_p95_ms=percentile(latencies, 0.95),
    )


def success_rates(agent_ids: Iterable[str], *, now: datetime | None = None) -> dict[str, float]:
    """The success rate of each agent over the last 24 hours (agents without outcomes are
    left out); one query."""
    now = now or timezone.now()
    rows = (
        UsageRecord.objects.filter(agent_id__in=list(agent_ids), at__gt=now - DAY)
        .values("agent_id")
        .annotate(
            completed=Count("pk", filter=Q(state="completed")),
            failed=Count("pk", filter=Q(state__in=BAD_ENDS)),
        )
    )
    return {
        row["agent_id"]: row["completed"] / (row["completed"] + row["failed"])
        for row in rows
        if row["completed"] + row["failed"]
    }


GROUPS = {
    "agent": "agent_id",
    "team": "team_id",
    "workflow": "workflow_id",
    "key": "caller_id",
    "target": "target_id",
    "hour": "hour",
}


@dataclass
class Totals:
    calls: int = 0
    completed: int = 0
    failed: int = 0
    latency_sum_ms: int = 0
    latencies: list[int] = field(default_factory=list)
    """Each raw call's latency; each rolled hour's p95 (an hour is its p95 here)."""
    input_tokens: int = 0
    output_tokens: int = 0
    bytes_in: int = 0
    bytes_out: int = 0
    cost: Decimal = field(default_factory=lambda: Decimal(0))

    def add(self, row: dict[str, Any]) -> None:
        self.calls += row["calls"]
        self.completed += row["completed"]
        self.failed += row["failed"]
        self.latency_sum_ms += row["latency_sum_ms"]
        self.latencies.append(row["latency_p95_ms"])
        for name in ("input_tokens", "output_tokens", "bytes_in", "bytes_out"):
            setattr(self, name, getattr(self, name) + row[name])
        self.cost += row["cost"]

    def as_json(self) -> dict[str, Any]:
        outcomes = self.completed + self.failed
        return {
            "calls": self.calls,
            "completed": self.completed,
            "failed": self.failed,
            "successRate": round(self.completed / outcomes, 4) if outcomes else None,
            "avgLatency": round(self.latency_sum_ms / self.calls, 1) if self.calls else None,
            "p50Latency": percentile(self.latencies, 0.5),
            "p95Latency": percentile(self.latencies, 0.95),
            "inputTokens": self.input_tokens,
            "outputTokens": self.output_tokens,
            "bytesIn": self.bytes_in,
            "bytesOut": self.bytes_out,
            "cost": money_text(self.cost),
        }


def usage_totals(
    *,
    since: datetime,
    until: datetime,
    group: str,
    caller_id: int | None = None,
    filters: dict[str, str] | None = None,
    now: datetime | None = None,
) -> dict[Any, Totals]:
    """Usage between ``since`` and ``until`` grouped by ``group`` (a key of GROUPS), only a
    caller's when ``caller_id`` is given, narrowed by ``filters`` (agent, team, workflow, key,
    target: ids). Calls count every record, a team's hops included (``hop`` rows); over roll-up
    hours the p95 is taken over the hours' own p95s (an estimate)."""
    boundary = max(since, min(until, rolled_until(now)))
    where = _where(caller_id, filters or {})
    totals: dict[Any, Totals] = defaultdict(Totals)
    rolled = UsageHour.objects.filter(hour__gte=hour_start(since), hour__lt=boundary, **where)
    for row in rolled.values():
        totals[_group_of(row, group)].add(row)
    raw = UsageRecord.objects.filter(at__gte=boundary, at__lt=until, **where)
    for record in raw.values():
        totals[_group_of(record, group)].add(_as_hour_row(record))
    return dict(totals)


def _where(caller_id: int | None, filters: dict[str, str]) -> dict[str, Any]:
    where: dict[str, Any] = {}
    if caller_id is not None:
        where["caller_id"] = caller_id
    for name, value in filters.items():
        if value:
            where[GROUPS[name]] = value
    return where


def _group_of(row: dict[str, Any], group: str) -> Any:
    if group == "hour":
        return hour_start(row.get("hour") or row["at"])
    return row[GROUPS[group]] or ""


def _as_hour_row(record: dict[str, Any]) -> dict[str, Any]:
    return {
        "calls": 1,
        "completed": int(record["state"] == "completed"),
        "failed": int(record["state"] in BAD_ENDS),
        "latency_sum_ms": record["latency_ms"],
        "latency_p95_ms": record["latency_ms"],
        "input_tokens": record["input_tokens"] or 0,
        "output_tokens": record["output_tokens"] or 0,
        "bytes_in": record["bytes_in"],
        "bytes_out": record["bytes_out"],
        "cost": record["cost"] or Decimal(0),
    }
