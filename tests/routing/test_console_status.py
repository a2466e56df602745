"""The live status line of ``make up`` (plain Python, no Django)."""

from __future__ import annotations

import io

from routing.console.status import Status, StatusBoard, requests_served, status_line

METRICS = """# HELP relay_http_requests_total HTTP requests the relay answered.
# TYPE relay_http_requests_total counter
relay_http_requests_total{kind="a2a",status="200"} 5.0
relay_http_requests_total{kind="pages",status="200"} 2.0
relay_http_requests_total{kind="metrics",status="200"} 40.0
# HELP relay_agents Agents by health state.
# TYPE relay_agents gauge
relay_agents{health="healthy"} 3.0
"""


def up(**changes) -> Status:
    values = {"relay_up": True, "worker_up": True, "agents": 4, "healthy": 4, "requests": 0}
    return Status(**{**values, **changes})


def board(interactive: bool, clock):
    out = io.StringIO()
    return out, StatusBoard(
        write=out.write, flush=out.flush, interactive=interactive, quiet_seconds=10, clock=clock
    )


def test_the_requests_served_leave_out_the_status_own_scrapes():
    assert requests_served(METRICS) == 7


def test_the_line_says_what_is_up_and_down():
    assert status_line(up(requests=1)) == (
        "relay up | worker up | agents healthy 4/4 | 1 request served"
    )
    assert status_line(up(relay_up=False, worker_up=None, healthy=1, requests=None)) == (
        "relay NOT ANSWERING | agents healthy 1/4"
    )


def test_a_pipe_gets_a_line_per_change_and_request_counts_at_most_every_quiet_period():
    now = [0.0]
    out, status_board = board(False, lambda: now[0])
    status_board.show(up())
    status_board.show(up())  # nothing changed
    status_board.show(up(requests=3))  # only the count, too soon
    status_board.show(up(healthy=3, requests=3))  # health changed: at once
    now[0] = 11
    status_board.show(up(healthy=3, requests=9))
    lines = out.getvalue().splitlines()
    assert [line.split("  ", 1)[1] for line in lines] == [
        "relay up | worker up | agents healthy 4/4 | 0 requests served",
        "relay up | worker up | agents healthy 3/4 | 3 requests served",
        "relay up | worker up | agents healthy 3/4 | 9 requests served",
    ]


def test_a_terminal_gets_one_line_rewritten_and_messages_above_it():
    out, status_board = board(True, lambda: 0.0)
    status_board.show(up())
    status_board.say("Stopped echo")
    status_board.show(up(healthy=3))
    text = out.getvalue()
    assert text.count("\n") == 1 and text.count("\r\x1b[K") == 3
    assert "Stopped echo\n" in text and text.endswith("agents healthy 3/4 | 0 requests served")
