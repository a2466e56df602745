"""The layout of the analytics dashboard's charts, drawn as inline SVG by
``templates/relay/_analytics_chart.html``: a value per time bucket, as bars (stacked: calls
that completed, failed and the rest; or cost) or as lines (success rate, latency p50 and p95).
Plain values in, coordinates out; standard library only, like ``routing.metrics``' charts.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

WIDTH = 640
HEIGHT = 170
LEFT = 52
RIGHT = 12
TOP = 10
BOTTOM = 24


@dataclass(frozen=True)
class Rect:
    x: float
    y: float
    width: float
    height: float
    css: str
    title: str


@dataclass(frozen=True)
class Line:
    css: str
    points: str
    """SVG polyline points: "x,y x,y ..."; a gap (no value) breaks nothing, it is skipped."""
    dots: tuple[tuple[float, float, str], ...]


@dataclass(frozen=True)
class Tick:
    x: float
    text: str


@dataclass(frozen=True)
class Chart:
    title: str
    width: int
    height: int
    plot_top: int
    plot_bottom: int
    plot_left: int
    plot_right: int
    top_label: str
    rects: tuple[Rect, ...]
    lines: tuple[Line, ...]
    ticks: tuple[Tick, ...]
    empty: bool

    @property
    def center_x(self) -> float:
        return (self.plot_left + self.plot_right) / 2


@dataclass(frozen=True)
class Stack:
    """One part of a stacked bar, per bucket."""

    css: str
    name: str
    values: Sequence[float]


@dataclass(frozen=True)
class Series:
    """One line, per bucket (None where the bucket has no value)."""

    css: str
    name: str
    values: Sequence[float | None]


def _ticks(labels: Sequence[str], slot: float) -> tuple[Tick, ...]:
    """A few labels under the axis: the first, the last and some between (at most six)."""
    if not labels:
        return ()
    step = max(1, (len(labels) + 5) // 6)
    chosen = list(range(0, len(labels), step))
    return tuple(Tick(x=round(LEFT + slot * (i + 0.5), 1), text=labels[i]) for i in chosen)


def bar_chart(
    *, title: str, labels: Sequence[str], stacks: Sequence[Stack], unit: str = ""
) -> Chart:
    """Stacked bars, one per label; ``unit`` formats the scale ("$" for money)."""
    count = len(labels)
    totals = [sum(stack.values[i] for stack in stacks) for i in range(count)]
    top = max(totals, default=0)
    plot_height = HEIGHT - TOP - BOTTOM
    slot = (WIDTH - LEFT - RIGHT) / count if count else 0
    bar = max(1.0, slot * 0.7)
    rects = []
    for i in range(count):
        base = HEIGHT - BOTTOM
        for stack in stacks:
            value = stack.values[i]
            if not value or not top:
                continue
            height = value / top * plot_height
            base -= height
            rects.append(
                Rect(
                    x=round(LEFT + slot * i + (slot - bar) / 2, 1),
                    y=round(base, 1),
                    width=round(bar, 1),
                    height=round(height, 1),
                    css=stack.css,
                    title=f"{labels[i]}: {_number(value, unit)} {stack.name}",
                )
            )
    return Chart(
        title=title,
        width=WIDTH,
        height=HEIGHT,
        plot_top=TOP,
        plot_bottom=HEIGHT - BOTTOM,
        plot_left=LEFT,
        plot_right=WIDTH - RIGHT,
        top_label=_number(top, unit),
        rects=tuple(rects),
        lines=(),
        ticks=_ticks(labels, slot),
        empty=not top,
    )


def line_chart(
    *,
    title: str,
    labels: Sequence[str],
    series: Sequence[Series],
    unit: str = "",
    ceiling: float | None = None,
) -> Chart:
    """Lines through each bucket's value; ``ceiling`` fixes the top of the scale (1 for a
    rate), otherwise it is the largest value."""
    count = len(labels)
    values = [value for line in series for value in line.values if value is not None]
    top = ceiling if ceiling is not None else max(values, default=0)
    plot_height = HEIGHT - TOP - BOTTOM
    slot = (WIDTH - LEFT - RIGHT) / count if count else 0
    lines = []
    for line in series:
        points = []
        for i, value in enumerate(line.values):
            if value is None or not top:
                continue
            x = round(LEFT + slot * (i + 0.5), 1)
            y = round(HEIGHT - BOTTOM - value / top * plot_height, 1)
            points.append((x, y, f"{labels[i]}: {_number(value, unit)} {line.name}"))
        lines.append(
            Line(
                css=line.css,
                points=" ".join(f"{x},{y}" for x, y, _ in points),
                dots=tuple(points),
            )
        )
    return Chart(
        title=title,
        width=WIDTH,
        height=HEIGHT,
        plot_top=TOP,
        plot_bottom=HEIGHT - BOTTOM,
        plot_left=LEFT,
        plot_right=WIDTH - RIGHT,
        top_label=_number(top, unit),
        rects=(),
        lines=tuple(lines),
        ticks=_ticks(labels, slot),
        empty=not values,
    )


def _number(value: float, unit: str) -> str:
    if unit == "$":
        return f"${value:,.2f}" if value >= 1 or value == 0 else f"${value:.4f}"
    if unit == "%":
        return f"{value * 100:.0f}%"
    if unit == "ms":
        return f"{value:,.0f} ms"
    return f"{value:,.0f}"
