"""Hourly roll-ups of the usage records (``UsageHour``): the Celery job
``tasks_app.roll_up_usage`` (beat runs it hourly: ``routing.schedules``) recomputes the last
ROLL_UP_HOURS clock hours from the raw records, so a report over days reads a few rows per
hour instead of every call. Recomputing (delete and insert, in one transaction) makes a run
safe to repeat, and counts the calls that ended late in an hour already rolled."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from datetime import datetime, timedelta
from decimal import Decimal

from django.db import transaction
from django.utils import timezone

from tasks_app.models import UsageHour, UsageRecord

HOUR = timedelta(hours=1)
ROLL_UP_HOURS = 3
BAD_ENDS = ("failed", "rejected")


def hour_start(moment: datetime) -> datetime:
    return moment.replace(minute=0, second=0, microsecond=0)


def rolled_until(now: datetime | None = None) -> datetime:
    """The hour before which reports read the roll-ups (and from which the raw records):
    hours the hourly job has recomputed after they ended."""
    return hour_start(now or timezone.now()) - (ROLL_UP_HOURS - 1) * HOUR


def percentile(values: Sequence[float], fraction: float) -> float | None:
    """The nearest-rank percentile of ``values`` (``fraction`` 0.95 for p95); None for none."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(1, math.ceil(fraction * len(ordered))) - 1]


_FIELDS = (
    "at",
    "caller_id",
    "target_kind",
    "target_id",
    "agent_id",
    "team_id",
    "workflow_id",
    "parent_task_id",
    "state",
    "latency_ms",
    "bytes_in",
    "bytes_out",
    "input_tokens",
    "output_tokens",
    "cost",
)


def usage_roll_up(*, now: datetime | None = None, hours: int = ROLL_UP_HOURS) -> int:
    """Recomputes the roll-ups of the last ``hours`` clock hours (the current one included)
    from the raw records; returns how many roll-up rows it wrote."""
    end = hour_start(now or timezone.now()) + HOUR
    start = end - hours * HOUR
    groups: dict[tuple, list] = defaultdict(list)
    for row in UsageRecord.objects.filter(at__gte=start, at__lt=end).values_list(*_FIELDS):
        record = dict(zip(_FIELDS, row, strict=True))
        key = (
            hour_start(record["at"]),
            record["caller_id"],
            record["target_kind"],
            record["target_id"],
            record["agent_id"] or "",
            record["team_id"],
            record["workflow_id"],
            bool(record["parent_task_id"]),
        )
        groups[key].append(record)
    rows = [_summed(key, records) for key, records in groups.items()]
    with transaction.atomic():
        UsageHour.objects.filter(hour__gte=start, hour__lt=end).delete()
        UsageHour.objects.bulk_create(rows)
    return len(rows)


def _summed(key: tuple, records: list[dict]) -> UsageHour:
    hour, caller_id, target_kind, target_id, agent_id, team_id, workflow_id, hop = key
    latencies = [record["latency_ms"] for record in records]
    return UsageHour(
        hour=hour,
        caller_id=caller_id,
        target_kind=target_kind,
        target_id=target_id,
        agent_id=agent_id,
        team_id=team_id,
        workflow_id=workflow_id,
        hop=hop,
        calls=len(records),
        completed=sum(record["state"] == "completed" for record in records),
        failed=sum(record["state"] in BAD_ENDS for record in records),
        latency_sum_ms=sum(latencies),
        latency_p50_ms=percentile(latencies, 0.5) or 0,
        latency_p95_ms=percentile(latencies, 0.95) or 0,
        bytes_in=sum(record["bytes_in"] for record in records),
        bytes_out=sum(record["bytes_out"] for record in records),
        input_tokens=sum(record["input_tokens"] or 0 for record in records),
        output_tokens=sum(record["output_tokens"] or 0 for record in records),
        cost=sum((record["cost"] or Decimal(0) for record in records), Decimal(0)),
    )
