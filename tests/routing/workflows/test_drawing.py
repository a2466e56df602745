"""The flow chart of a workflow's steps (pure layout): every box inside the drawing, no two
boxes overlapping, branches side by side, a loop framed with room for its label."""

from __future__ import annotations

from pathlib import Path

import yaml

from routing.workflows.definition import parse
from routing.workflows.drawing import workflow_drawing

SEED = Path(__file__).with_name("customer-support.yml").read_text()
SHAPES = """
name: Shapes
steps:
  - id: fan
    parallel:
      - agent: a
      - agent: b
      - id: cd
        sequence:
          - agent: c
          - agent: d
    join: first
  - id: again
    loop:
      - agent: counter
    max_iterations: 4
    until: "{{.counter}} == 'a rather long exit value'"
"""


def drawing_of(text: str):
    return workflow_drawing(parse(yaml.safe_load(text)).steps)


def overlaps(one, other) -> bool:
    return not (
        one.x + one.w <= other.x
        or other.x + other.w <= one.x
        or one.y + one.h <= other.y
        or other.y + other.h <= one.y
    )


def check_fits(drawing) -> None:
    for box in drawing.boxes:
        assert box.x >= 0 and box.x + box.w <= drawing.width, box
        assert box.y >= 0 and box.y + box.h <= drawing.height, box
    for index, box in enumerate(drawing.boxes):
        for other in drawing.boxes[index + 1 :]:
            assert not overlaps(box, other), (box, other)


def test_the_seed_draws_its_branches_side_by_side_labelled_with_their_values():
    drawing = drawing_of(SEED)

    check_fits(drawing)
    by_title = {box.title: box for box in drawing.boxes}
    assert by_title["billing"].y == by_title["troubleshooting"].y
    assert by_title["billing"].x < by_title["troubleshooting"].x
    assert by_title["resolution-validator"].y > by_title["troubleshooting"].y
    assert by_title["route"].subtitle == "if {{.classify.intent}}"
    assert {line.label for line in drawing.lines if line.label} == {"billing", "technical"}
    assert [box.kind for box in drawing.boxes][0] == "start"
    assert by_title["answer out"].y == max(box.y for box in drawing.boxes)


def test_a_parallel_step_and_a_loop():
    drawing = drawing_of(SHAPES)

    check_fits(drawing)
    by_title = {box.title: box for box in drawing.boxes}
    assert by_title["a"].y == by_title["b"].y == by_title["c"].y < by_title["d"].y
    assert by_title["join first"].kind == "join"
    (frame,) = drawing.frames
    assert frame.label.startswith("again: loop, at most 4×, until {{.counter}}")
    assert len(frame.label) * 7 <= frame.w
    assert frame.x <= by_title["counter"].x and by_title["counter"].x + 200 <= frame.x + frame.w
    assert [line.kind for line in drawing.lines].count("back") == 1
