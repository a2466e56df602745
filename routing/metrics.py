"""Agent metrics as plain values: percentiles, the hourly series, and the layout of the charts
the pages draw as SVG (a latency sparkline per agent in the list, an hourly chart on the
agent's page). Standard library only, like the router and the sequence diagram; the queries
are in ``routing.selectors``.

What the numbers mean:

- latency: the round trip of a probe (``ProbeResult.latency_ms``, every level, calls recorded
  by the passive health check included): how fast the agent answers the relay;
- task duration: from a task's creation to its final state (``completed_at - created_at``),
  for tasks that ended ``completed``: how long real work took, waits for the caller included;
- success rate: successful outcomes over all outcomes, where an outcome is a probe (ok or not)
  or a task that ended ``completed`` (success), ``failed`` or ``rejected`` (failure). Canceled
  tasks are counted but are no outcome: the caller stopped them.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

HOUR = timedelta(hours=1)


def percentile(values: Sequence[float], fraction: float) -> float | None:
    """The nearest-rank percentile (``fraction`` 0.95 for p95) of ``values``; None when there
    are none."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, math.ceil(fraction * len(ordered)))
    return ordered[rank - 1]


def average(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def rate(successes: int, total: int) -> float | None:
    return successes / total if total else None


@dataclass(frozen=True)
class HourCounts:
    """What one clock hour holds, as the selectors count it in SQL."""

    start: datetime
    probes: int = 0
    probes_failed: int = 0
    latency_avg_ms: float | None = None
    tasks_completed: int = 0
    tasks_failed: int = 0


def _hour(moment: datetime) -> datetime:
    return moment.replace(minute=0, second=0, microsecond=0)


def hour_counts(
    probes: Iterable[tuple[datetime, bool, float | None]],
    tasks: Iterable[tuple[datetime, bool, bool]],
) -> list[HourCounts]:
    """Counts per clock hour of ``probes`` ((checked at, ok, latency ms or None)) and of ended
    ``tasks`` ((ended at, completed, failed or rejected)); only hours with something."""
    probe_counts: dict[datetime, list] = {}
    for checked_at, ok, latency in probes:
        entry = probe_counts.setdefault(_hour(checked_at), [0, 0, 0.0, 0])
        entry[0] += 1
        entry[1] += not ok
        if latency is not None:
            entry[2] += latency
            entry[3] += 1
    task_counts: dict[datetime, list[int]] = {}
    for ended_at, completed, failed in tasks:
        entry = task_counts.setdefault(_hour(ended_at), [0, 0])
        entry[0] += completed
        entry[1] += failed
    return [
        HourCounts(
            start=hour,
            probes=probe_counts.get(hour, [0])[0],
            probes_failed=probe_counts.get(hour, [0, 0])[1],
            latency_avg_ms=(
                probe_counts[hour][2] / probe_counts[hour][3]
                if hour in probe_counts and probe_counts[hour][3]
                else None
            ),
            tasks_completed=task_counts.get(hour, [0, 0])[0],
            tasks_failed=task_counts.get(hour, [0, 0])[1],
        )
        for hour in sorted(set(probe_counts) | set(task_counts))
    ]


def hourly_series(
    since: datetime, until: datetime, counts: Iterable[HourCounts]
) -> list[HourCounts]:
    """One entry per clock hour from the hour of ``since`` to the hour of ``until``, oldest
    first; hours with nothing are zeros."""
    by_hour = {entry.start: entry for entry in counts}
    start = _hour(since)
    series = []
    while start <= until:
        series.append(by_hour.get(start, HourCounts(start)))
        start += HOUR
    return series


# --- charts -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Sparkline:
    """A polyline of latencies, oldest left, higher up when slower; ``failures`` are the x of
    failed probes (drawn as marks on the baseline)."""

    width: int
    height: int
    points: str
    failures: tuple[float, ...]
    last_ms: float | None
    max_ms: float


def sparkline(
    samples: Sequence[tuple[float | None, bool]], *, width: int = 120, height: int = 28
) -> Sparkline | None:
    """The sparkline of ``samples`` ((latency in ms or None, ok), oldest first); None when
    there is nothing to draw."""
    if not samples:
        return None
    latencies = [latency for latency, _ in samples if latency is not None]
    top = max(latencies, default=0.0) or 1.0
    step = width / max(len(samples) - 1, 1)
    pad = 2
    points, failures = [], []
    for index, (latency, ok) in enumerate(samples):
        x = round(index * step, 1)
        if latency is not None:
            y = round(height - pad - (latency / top) * (height - 2 * pad), 1)
            points.append(f"{x},{y}")
        if not ok:
            failures.append(x)
    return Sparkline(
        width, height, " ".join(points), tuple(failures), latencies[-1] if latencies else None, top
    )


@dataclass(frozen=True)
class Bar:
    x: float
    y: float
    height: float


@dataclass(frozen=True)
class HourChart:
    """The agent page's chart: per hour, bars of successes (probes ok and tasks completed)
    stacked under failures, and a latency line on its own scale."""

    width: int
    height: int
    plot_top: int
    plot_bottom: int
    bar_width: float
    successes: tuple[Bar, ...]
    failures: tuple[Bar, ...]
    latency_points: str
    max_outcomes: int
    max_latency_ms: float
    labels: tuple[tuple[float, str], ...]


def hour_chart(series: Sequence[HourCounts], *, width: int = 640, height: int = 180) -> HourChart:
    """Lays out ``series`` (from ``hourly_series``) in a ``width`` x ``height`` box."""
    left, right, plot_top, plot_bottom = 40, 40, 12, height - 24
    plot_height = plot_bottom - plot_top
    slot = (width - left - right) / max(len(series), 1)
    bar_width = max(slot * 0.7, 1.0)
    outcomes = [
        (
            hour.probes - hour.probes_failed + hour.tasks_completed,
            hour.probes_failed + hour.tasks_failed,
        )
        for hour in series
    ]
    max_outcomes = max((good + bad for good, bad in outcomes), default=0) or 1
    latencies = [hour.latency_avg_ms for hour in series if hour.latency_avg_ms is not None]
    max_latency = max(latencies, default=0.0) or 1.0
    successes, failures, points, labels = [], [], [], []
    every = max(1, math.ceil(len(series) / 8))
    for index, (hour, (good, bad)) in enumerate(zip(series, outcomes, strict=True)):
        x = round(left + index * slot + (slot - bar_width) / 2, 1)
        good_height = round(good / max_outcomes * plot_height, 1)
        bad_height = round(bad / max_outcomes * plot_height, 1)
        if good:
            successes.append(Bar(x, round(plot_bottom - good_height, 1), good_height))
        if bad:
            failures.append(Bar(x, round(plot_bottom - good_height - bad_height, 1), bad_height))
        center = round(left + index * slot + slot / 2, 1)
        if hour.latency_avg_ms is not None:
            y = round(plot_bottom - hour.latency_avg_ms / max_latency * plot_height, 1)
            points.append(f"{center},{y}")
        if index % every == 0:
            labels.append((center, f"{hour.start:%H}h"))
    return HourChart(
        width,
        height,
        plot_top,
        plot_bottom,
        round(bar_width, 1),
        tuple(successes),
        tuple(failures),
        " ".join(points),
        max_outcomes,
        max_latency,
        tuple(labels),
    )
