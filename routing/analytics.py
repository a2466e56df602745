"""The reads behind the analytics dashboard (``routing.analytics_pages``): the relay's usage over
the last 24 hours, 7 days or 30 days, as a series over time and as tables by agent, team,
workflow, key and team member hop. Read from the hourly roll-ups (``UsageHour``) only, in one
query whatever the number of agents, so the page stays fast on a large task table; it shows the
hours the roll-up job has summed (it runs hourly and recomputes the last hours).

What the numbers mean:

- calls: the calls callers made (an agent, team or workflow call); a team's member hops are not
  calls of their own here, they are counted in the agent, hop tables;
- success rate: completed calls over completed plus failed or rejected ones (canceled calls
  are no outcome);
- latency p50 / p95: over several hours, the call-weighted percentile of the hours' own p50 and
  p95 (an estimate: the raw latencies are not kept in the roll-ups);
- cost: what the agents' prices make of the calls, hops included (cost is on agent calls only,
  so nothing is counted twice).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from django.utils import timezone

from registry.models import Agent, ApiKey, Team
from routing.models import Workflow
from tasks_app.models import UsageHour, UsageRecord
from tasks_app.usage.rollups import BAD_ENDS, hour_start

HOUR = timedelta(hours=1)


@dataclass(frozen=True)
class Range:
    key: str
    label: str
    span: timedelta
    bucket: timedelta


RANGES = {
    "24h": Range("24h", "24 hours", timedelta(hours=24), HOUR),
    "7d": Range("7d", "7 days", timedelta(days=7), timedelta(hours=6)),
    "30d": Range("30d", "30 days", timedelta(days=30), timedelta(days=1)),
}
DEFAULT_RANGE = "24h"

DIMENSIONS = {
    "agent": "Agents",
    "team": "Teams",
    "workflow": "Workflows",
    "key": "Keys",
    "hop": "Team member hops",
}

_FIELDS = (
    "hour",
    "caller_id",
    "target_kind",
    "target_id",
    "agent_id",
    "team_id",
    "hop",
    "calls",
    "completed",
    "failed",
    "latency_p50_ms",
    "latency_p95_ms",
    "cost",
)


def weighted_percentile(pairs: Iterable[tuple[float, int]], fraction: float) -> float | None:
    """The nearest-rank percentile of values each counted ``weight`` times; None for none."""
    ordered = sorted((value, weight) for value, weight in pairs if weight > 0)
    total = sum(weight for _, weight in ordered)
    if not total:
        return None
    rank = max(1, math.ceil(fraction * total))
    seen = 0
    for value, weight in ordered:
        seen += weight
        if seen >= rank:
            return value
    return ordered[-1][0]  # pragma: no cover - the loop always reaches the rank


@dataclass
class Stats:
    """Sums over some roll-up rows."""

    calls: int = 0
    completed: int = 0
    failed: int = 0
    cost: Decimal = field(default_factory=lambda: Decimal(0))
    p50s: list[tuple[int, int]] = field(default_factory=list)
    p95s: list[tuple[int, int]] = field(default_factory=list)

    def add_calls(self, row: dict[str, Any]) -> None:
        self.calls += row["calls"]
        self.completed += row["completed"]
        self.failed += row["failed"]
        self.p50s.append((row["latency_p50_ms"], row["calls"]))
        self.p95s.append((row["latency_p95_ms"], row["calls"]))

    def add_cost(self, row: dict[str, Any]) -> None:
        self.cost += row["cost"]

    @property
    def success_rate(self) -> float | None:
        outcomes = self.completed + self.failed
        return self.completed / outcomes if outcomes else None

    @property
    def p50_ms(self) -> float | None:
        return weighted_percentile(self.p50s, 0.5)

    @property
    def p95_ms(self) -> float | None:
        return weighted_percentile(self.p95s, 0.95)


@dataclass(frozen=True)
class Row:
    """One line of a table: what it is, its name, the drill-down filter and its sums."""

    key: str
    name: str
    filters: dict[str, str]
    stats: Stats


@dataclass(frozen=True)
class Bucket:
    start: datetime
    stats: Stats


@dataclass(frozen=True)
class Dashboard:
    range: Range
    since: datetime
    until: datetime
    overall: Stats
    series: list[Bucket]
    tables: dict[str, list[Row]]
    focus: tuple[str, str, str] | None = None
    """The dimension, key and name of the line the page is narrowed to, if any."""


# What a roll-up row adds to a table: (key, counts as calls, counts its cost) per dimension.
Match = list[tuple[str, bool, bool]]


def _agent(row: dict[str, Any]) -> Match:
    return [(row["agent_id"], True, True)] if row["agent_id"] else []


def _team(row: dict[str, Any]) -> Match:
    if row["target_kind"] == "team" and not row["hop"]:
        return [(row["target_id"], True, True)]
    if row["hop"] and row["team_id"]:
        return [(row["team_id"], False, True)]  # the hops' cost is the team call's cost
    return []


def _workflow(row: dict[str, Any]) -> Match:
    if row["target_kind"] == "workflow" and not row["hop"]:
        return [(row["target_id"], True, True)]
    return []


def _key(row: dict[str, Any]) -> Match:
    if row["caller_id"] is None:
        return []
    return [(str(row["caller_id"]), not row["hop"], True)]


def _hop(row: dict[str, Any]) -> Match:
    if row["hop"] and row["team_id"] and row["agent_id"]:
        return [(f"{row['team_id']}/{row['agent_id']}", True, True)]
    return []


_MATCHERS: dict[str, Callable[[dict[str, Any]], Match]] = {
    "agent": _agent,
    "team": _team,
    "workflow": _workflow,
    "key": _key,
    "hop": _hop,
}


def dashboard(
    *,
    range_key: str = DEFAULT_RANGE,
    focus: tuple[str, str] | None = None,
    now: datetime | None = None,
) -> Dashboard:
    """The relay's usage over a range, from the roll-ups: one query for the rows and one for
    the names of each kind of thing shown, whatever their number (at most five in all).
    ``focus`` (a dimension and a key: ``("agent", "triage")``) keeps only the rows of that
    line of its table: the totals and charts become its, the tables show who it is made of."""
    if focus is not None and (focus[0] not in _MATCHERS or not focus[1]):
        raise BadFilter(f"{focus[0]}: not a dimension of the dashboard")
    chosen = RANGES[range_key]
    until = hour_start(now or timezone.now()) + HOUR
    since = until - chosen.span
    buckets = _bucket_starts(since, until, chosen.bucket)
    series = {start: Stats() for start in buckets}
    overall = Stats()
    grouped: dict[str, dict[str, Stats]] = {name: defaultdict(Stats) for name in _MATCHERS}
    rows = UsageHour.objects.filter(hour__gte=since, hour__lt=until).values_list(*_FIELDS)
    for values in rows.iterator(chunk_size=5000):
        row = dict(zip(_FIELDS, values, strict=True))
        counts = _counts(row, focus)
        if counts is None:
            continue
        bucket = series[_bucket_of(row["hour"], since, chosen.bucket)]
        if counts[0]:
            bucket.add_calls(row)
            overall.add_calls(row)
        if counts[1]:
            bucket.add_cost(row)
            overall.add_cost(row)
        for name, matcher in _MATCHERS.items():
            for key, calls, cost in matcher(row):
                stats = grouped[name][key]
                if calls:
                    stats.add_calls(row)
                if cost:
                    stats.add_cost(row)
    names = _names(grouped)
    tables = {
        name: sorted(
            (
                Row(key=key, name=names[name].get(key, key), filters={name: key}, stats=stats)
                for key, stats in grouped[name].items()
            ),
            key=lambda line: (-line.stats.calls, -line.stats.cost, line.name),
        )
        for name in _MATCHERS
    }
    return Dashboard(
        range=chosen,
        since=since,
        until=until,
        focus=(focus[0], focus[1], names[focus[0]].get(focus[1], focus[1])) if focus else None,
        overall=overall,
        series=[Bucket(start=start, stats=series[start]) for start in buckets],
        tables=tables,
    )


def _counts(row: dict[str, Any], focus: tuple[str, str] | None) -> tuple[bool, bool] | None:
    """Whether a row adds to the totals its calls and its cost; None when it is left out.
    Without a focus, the calls of what callers called (not hops) and every cost."""
    if focus is None:
        return (not row["hop"], True)
    for key, calls, cost in _MATCHERS[focus[0]](row):
        if key == focus[1]:
            return (calls, cost)
    return None


def _bucket_starts(since: datetime, until: datetime, size: timedelta) -> list[datetime]:
    starts = []
    moment = since
    while moment < until:
        starts.append(moment)
        moment += size
    return starts


def _bucket_of(hour: datetime, since: datetime, size: timedelta) -> datetime:
    return since + ((hour - since) // size) * size


def _names(grouped: dict[str, dict[str, Stats]]) -> dict[str, dict[str, str]]:
    """Display names of the agents, teams, workflows and keys in the tables: four queries."""
    agents = set(grouped["agent"]) | {key.split("/", 1)[1] for key in grouped["hop"]}
    teams = set(grouped["team"]) | {key.split("/", 1)[0] for key in grouped["hop"]}
    agent_names = dict(Agent.objects.filter(pk__in=agents).values_list("pk", "name"))
    team_names = dict(Team.objects.filter(pk__in=teams).values_list("pk", "name"))
    workflow_names = dict(
        Workflow.objects.filter(pk__in=list(grouped["workflow"])).values_list("pk", "name")
    )
    key_ids = [int(key) for key in grouped["key"]]
    key_names = {
        str(pk): f"{name} ({prefix}…)"
        for pk, name, prefix in ApiKey.objects.filter(pk__in=key_ids).values_list(
            "pk", "name", "prefix"
        )
    }
    hops = {}
    for key in grouped["hop"]:
        team_id, agent_id = key.split("/", 1)
        hops[key] = f"{team_names.get(team_id, team_id)} → {agent_names.get(agent_id, agent_id)}"
    return {
        "agent": {key: f"{name} ({key})" for key, name in agent_names.items()},
        "team": team_names,
        "workflow": workflow_names,
        "key": key_names,
        "hop": hops,
    }


DRILL_LIMIT = 100


@dataclass(frozen=True)
class DrillDown:
    range: Range
    since: datetime | None
    filters: dict[str, str]
    records: list[UsageRecord]
    more: bool


class BadFilter(ValueError):
    """A drill-down filter that names no dimension or a malformed value."""


def drill_down(
    *, range_key: str, filters: dict[str, str], now: datetime | None = None
) -> DrillDown:
    """The latest calls of a range behind one line of a dashboard table (the raw records, as
    long as their tasks are kept): at most DRILL_LIMIT, newest first, in one query."""
    chosen = RANGES[range_key]
    until = hour_start(now or timezone.now()) + HOUR
    since = until - chosen.span
    records = UsageRecord.objects.filter(at__gte=since).select_related("task", "caller", "agent")
    for name, value in filters.items():
        records = _narrowed(records, name, value)
    found = list(records.order_by("-at")[: DRILL_LIMIT + 1])
    return DrillDown(
        range=chosen,
        since=since,
        filters=filters,
        records=found[:DRILL_LIMIT],
        more=len(found) > DRILL_LIMIT,
    )


def _narrowed(records, name: str, value: str):
    if name == "agent":
        return records.filter(agent_id=value)
    if name == "team":
        return records.filter(target_kind="team", target_id=value, parent_task_id="")
    if name == "workflow":
        return records.filter(target_kind="workflow", target_id=value, parent_task_id="")
    if name == "key":
        if not value.isdigit():
            raise BadFilter(f"key: {value!r} is not a key id")
        return records.filter(caller_id=int(value)).filter(parent_task_id="")
    if name == "hop":
        team_id, _, agent_id = value.partition("/")
        if not team_id or not agent_id:
            raise BadFilter(f"hop: {value!r} is not team/agent")
        return records.filter(team_id=team_id, agent_id=agent_id).exclude(parent_task_id="")
    if name == "state":
        if value == "failed":
            return records.filter(state__in=BAD_ENDS)
        return records.filter(state=value)
    raise BadFilter(f"{name}: not a filter")
