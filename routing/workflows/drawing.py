"""A workflow's steps as a flow chart: pure layout (boxes, lines and frames with coordinates)
that a template draws as SVG. Plain Python over :mod:`routing.workflows.definition`.

Steps run top to bottom. A call is a box (its id, and what it calls); a ``parallel`` step or a
condition is a header box with its branches side by side below it, each line labelled (the
branch's value for a condition), joined again under them; a ``loop`` is a dashed frame round
its body, labelled with its limit and exit condition, with an arrow back to its top.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from routing.workflows.definition import BRANCH, LOOP, PARALLEL, SEQUENCE, Step

BOX_W = 200
BOX_H = 46
GAP_Y = 34
GAP_X = 28
PAD = 18
LOOP_PAD = 22
LABEL_CHARS = 28


@dataclass(frozen=True)
class Box:
    x: int
    y: int
    w: int
    h: int
    title: str
    subtitle: str
    kind: str  # a step kind: agent, team, workflow, branch, parallel, join, start, end

    @property
    def cx(self) -> int:
        return self.x + self.w // 2

    @property
    def title_y(self) -> int:
        return self.y + (19 if self.subtitle else 28)


@dataclass(frozen=True)
class Line:
    x1: int
    y1: int
    x2: int
    y2: int
    label: str = ""
    kind: str = "flow"  # "flow" or "back" (a loop's return)

    @property
    def label_x(self) -> int:
        return self.x2 + 6

    @property
    def label_y(self) -> int:
        return self.y2 - 10


@dataclass(frozen=True)
class Frame:
    x: int
    y: int
    w: int
    h: int
    label: str


@dataclass
class _Block:
    w: int
    h: int
    boxes: list[Box] = field(default_factory=list)
    lines: list[Line] = field(default_factory=list)
    frames: list[Frame] = field(default_factory=list)

    def place(self, into: _Block, dx: int, dy: int) -> None:
        into.boxes += [
            Box(b.x + dx, b.y + dy, b.w, b.h, b.title, b.subtitle, b.kind) for b in self.boxes
        ]
        into.lines += [
            Line(n.x1 + dx, n.y1 + dy, n.x2 + dx, n.y2 + dy, n.label, n.kind) for n in self.lines
        ]
        into.frames += [Frame(f.x + dx, f.y + dy, f.w, f.h, f.label) for f in self.frames]


@dataclass(frozen=True)
class Drawing:
    width: int
    height: int
    boxes: tuple[Box, ...]
    lines: tuple[Line, ...]
    frames: tuple[Frame, ...]


def _short(text: str, limit: int = LABEL_CHARS) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _box(title: str, subtitle: str, kind: str) -> _Block:
    block = _Block(BOX_W, BOX_H)
    block.boxes.append(Box(0, 0, BOX_W, BOX_H, _short(title), _short(subtitle), kind))
    return block


def _sequence(blocks: list[_Block]) -> _Block:
    """Blocks one under another, centred, each joined to the next."""
    width = max((block.w for block in blocks), default=BOX_W)
    out = _Block(width, 0)
    y = 0
    for index, block in enumerate(blocks):
        if index:
            out.lines.append(Line(width // 2, y - GAP_Y, width // 2, y))
        block.place(out, (width - block.w) // 2, y)
        y += block.h + GAP_Y
    out.h = max(y - GAP_Y, 0)
    return out


def _fan(header: _Block, arms: list[tuple[str, _Block]], join_label: str) -> _Block:
    """A header, its arms side by side under it (lines labelled), and a join box under them."""
    arms_w = sum(block.w for _, block in arms) + GAP_X * (len(arms) - 1)
    width = max(arms_w, BOX_W)
    out = _Block(width, 0)
    header.place(out, (width - BOX_W) // 2, 0)
    top = BOX_H + GAP_Y + 8
    tallest = max(block.h for _, block in arms)
    join_y = top + tallest + GAP_Y
    x = (width - arms_w) // 2
    for label, block in arms:
        block.place(out, x, top)
        arm_cx = x + block.w // 2
        out.lines.append(Line(width // 2, BOX_H, arm_cx, top, _short(label, 18)))
        out.lines.append(Line(arm_cx, top + block.h, width // 2, join_y))
        x += block.w + GAP_X
    join = _Block(BOX_W, 30)
    join.boxes.append(Box(0, 0, BOX_W, 30, join_label, "", "join"))
    join.place(out, (width - BOX_W) // 2, join_y)
    out.h = join_y + 30
    return out


def _steps(steps: tuple[Step, ...]) -> _Block:
    return _sequence([_layout(step) for step in steps])


def _layout(step: Step) -> _Block:
    if step.is_call:
        return _box(step.id, f"{step.kind}: {step.target}", step.kind)
    if step.kind == SEQUENCE:
        return _steps(step.children)
    if step.kind == BRANCH:
        header = _box(step.id, f"if {step.condition.source if step.condition else ''}", BRANCH)
        arms = [(name, _steps(steps)) for name, steps in step.branches]
        return _fan(header, arms, "one branch ran")
    if step.kind == PARALLEL:
        join = f"join {step.join}" + (f" ({step.quorum})" if step.join == "quorum" else "")
        header = _box(step.id, f"parallel · {join}", PARALLEL)
        arms = [("", _layout(child)) for child in step.children]
        return _fan(header, arms, join)
    if step.kind == LOOP:
        body = _steps(step.children)
        label = f"{step.id}: loop, at most {step.max_iterations}×"
        if step.until is not None:
            label += f", until {step.until.source}"
        label = _short(label, 60)
        # Wide enough for its label (about 7 px a character at 12 px) and its back arrow.
        width = max(body.w + 2 * LOOP_PAD + 30, len(label) * 7 + 2 * LOOP_PAD)
        out = _Block(width, body.h + 2 * LOOP_PAD + 22)
        out.frames.append(Frame(0, 0, out.w, out.h, label))
        left = (width - body.w - 30) // 2
        body.place(out, left, LOOP_PAD + 22)
        right = left + body.w + 14
        bottom, top = LOOP_PAD + 22 + body.h, LOOP_PAD + 22
        out.lines.append(Line(right, bottom, right, top, kind="back"))
        return out
    raise ValueError(f"unknown step kind {step.kind!r}")  # definition.parse admits no other


def workflow_drawing(steps: tuple[Step, ...]) -> Drawing:
    """The chart of a workflow's top-level ``steps``, between a start and an end mark."""
    start, end = _Block(BOX_W, 30), _Block(BOX_W, 30)
    start.boxes.append(Box(0, 0, BOX_W, 30, "message in", "", "start"))
    end.boxes.append(Box(0, 0, BOX_W, 30, "answer out", "", "end"))
    chart = _sequence([start, *[_layout(step) for step in steps], end])
    out = _Block(chart.w + 2 * PAD, chart.h + 2 * PAD)
    chart.place(out, PAD, PAD)
    return Drawing(out.w, out.h, tuple(out.boxes), tuple(out.lines), tuple(out.frames))
