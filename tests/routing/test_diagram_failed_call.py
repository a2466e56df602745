"""The sequence diagram of a trace whose last call failed (pure: no database)."""

from routing.diagram import HopView, sequence_diagram


def test_a_failed_call_draws_no_answer_from_the_agent_that_was_down():
    hops = [
        HopView(1, "user", "lead", outcome="routed", next_id="writer"),
        HopView(2, "lead", "writer", outcome="failed"),
    ]

    diagram = sequence_diagram(hops)

    x_of = {line.name: line.x for line in diagram.lifelines}
    call, ret = diagram.arrows[1], diagram.arrows[2]
    assert call.kind == "error"
    assert ret.kind == "return" and ret.x1 == x_of["lead"] and ret.x2 == x_of["user"]
    assert not ret.title.startswith("writer")
