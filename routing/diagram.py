"""A team conversation as a sequence diagram: pure layout (coordinates and labels) that a
template draws as SVG. Standard library only.

One lifeline per participant (the caller, "user", first, then members in the order they
appear), one arrow per hop from its sender to the member called, and a dashed return arrow for
how the conversation ended (the reply, a question for the caller, a failure). Arrows that
carried a routing error are marked ``error``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

USER = "user"
COLUMN = 190
MARGIN_X = 100
TOP = 70
ROW = 62
LABEL_CHARS = 34

ENDINGS = {
    "replied": "reply",
    "parked": "asks the caller for input",
    "capped": "stopped: hop limit reached",
    "failed": "the call failed",
    "canceled": "canceled",
}


@dataclass(frozen=True)
class HopView:
    """What the diagram needs of one hop."""

    order: int
    from_id: str
    to_id: str
    reason: str = ""
    routing_error: str = ""
    outcome: str = ""
    next_id: str = ""
    latency_ms: float | None = None


@dataclass(frozen=True)
class Lifeline:
    name: str
    x: int


@dataclass(frozen=True)
class Arrow:
    x1: int
    x2: int
    y: int
    label: str
    detail: str
    title: str
    kind: str  # "call", "error" or "return"

    @property
    def label_x(self) -> int:
        return (self.x1 + self.x2) // 2


@dataclass(frozen=True)
class Diagram:
    width: int
    height: int
    lifelines: tuple[Lifeline, ...]
    arrows: tuple[Arrow, ...]
    bottom: int


def _short(text: str, limit: int = LABEL_CHARS) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def participants(hops: Iterable[HopView]) -> list[str]:
    """The caller ("user") first, then every agent in the order it first appears."""
    names = [USER]
    for hop in hops:
        for name in (hop.from_id, hop.to_id):
            if name and name not in names:
                names.append(name)
    return names


def sequence_diagram(
    hops: list[HopView], *, ending: str | None = None, answered_by: str | None = None
) -> Diagram:
    """The diagram of a trace. ``ending`` (a hop outcome) overrides the last hop's outcome for
    the return arrow, and ``answered_by`` the participant it leaves from (a workflow answers
    for its steps); without hops the diagram has the user's lifeline alone."""
    names = participants(hops)
    x_of = {name: MARGIN_X + index * COLUMN for index, name in enumerate(names)}
    arrows = []
    for index, hop in enumerate(hops):
        detail = hop.outcome
        if hop.latency_ms is not None:
            detail += f" · {hop.latency_ms:.0f} ms"
        label = f"{hop.order}. {hop.reason or 'message'}"
        title = f"{hop.from_id} -> {hop.to_id}: {hop.reason or 'message'}"
        if hop.routing_error:
            label = f"{hop.order}. ⚠ {hop.routing_error}"
            title += f" (routing error: {hop.routing_error})"
        arrows.append(
            Arrow(
                x_of[hop.from_id],
                x_of[hop.to_id],
                TOP + (index + 1) * ROW,
                _short(label),
                detail,
                title,
                "error" if hop.routing_error or hop.outcome == "failed" else "call",
            )
        )
    if hops:
        last = hops[-1]
        outcome = ending or last.outcome
        # A failed call got no answer: the failure goes back from the agent that made the call,
        # never from the agent that was down.
        answerer = answered_by or (last.from_id if outcome == "failed" else last.to_id)
        if outcome in ENDINGS and answerer != USER:
            text = ENDINGS[outcome]
            arrows.append(
                Arrow(
                    x_of[answerer],
                    x_of[USER],
                    TOP + (len(hops) + 1) * ROW,
                    _short(text),
                    "",
                    f"{answerer} -> user: {text}",
                    "return",
                )
            )
    bottom = TOP + (len(arrows) + 1) * ROW
    return Diagram(
        width=MARGIN_X * 2 + (len(names) - 1) * COLUMN,
        height=bottom + 20,
        lifelines=tuple(Lifeline(name, x_of[name]) for name in names),
        arrows=tuple(arrows),
        bottom=bottom,
    )
