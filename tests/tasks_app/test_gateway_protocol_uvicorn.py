"""The gateway protocol suite (``test_gateway_protocol``) once more, with the relay served by
uvicorn as the production docs run it (lifespan on, uvloop and httptools), for what the server
decides: HTTP requests and answers, SSE streams held open, closed by the relay or left by the
client, and work that goes on after the answer was sent.

Only those cases run again, each over the two HTTP bindings in 1.0 in front of the JSON-RPC
agent: the rest of the suite (versions, conversions, gRPC, lists, errors) is the relay's own
code, the same under either server, and the gRPC server is a process of its own. Running all of
it twice cost a live module of 160 cases for no difference the servers can make.

Plus what only the server's start-up decides: the relay's background work (the lease and the
takeover of tasks whose process died) runs under uvicorn, started at its lifespan event.
"""

from __future__ import annotations

import functools
import inspect
import sqlite3
import textwrap

import pytest

from tests.live import manage, wait_for
from tests.tasks_app import test_gateway_protocol as suite
from tests.tasks_app.test_gateway_protocol import RELAY_ENV, agents  # noqa: F401 - read by pytest

RELAY_SERVER = "uvicorn"
SERVER_CASES = {("JSONRPC", "1.0", suite.JSONRPC_AGENT), ("HTTP+JSON", "1.0", suite.JSONRPC_AGENT)}


def on_uvicorn(test):
    """``test`` of the suite, with its protocol cases cut down to SERVER_CASES."""
    marks = []
    for mark in getattr(test, "pytestmark", []):
        if mark.name == "parametrize" and "binding" in mark.args[0]:
            kept = [case for case in mark.args[1] if tuple(case.values[:3]) in SERVER_CASES]
            mark = pytest.mark.parametrize(mark.args[0], kept).mark
        marks.append(mark)
    if inspect.iscoroutinefunction(test):

        @functools.wraps(test)
        async def case(*args, **kwargs):
            return await test(*args, **kwargs)
    else:

        @functools.wraps(test)
        def case(*args, **kwargs):
            return test(*args, **kwargs)

    case.pytestmark = marks
    return case


test_blocking_send_returns_the_finished_task = on_uvicorn(
    suite.test_blocking_send_returns_the_finished_task
)
test_return_immediately_answers_before_the_work_is_done = on_uvicorn(
    suite.test_return_immediately_answers_before_the_work_is_done
)
test_a_stream_starts_with_the_task_and_carries_the_chunks_in_order = on_uvicorn(
    suite.test_a_stream_starts_with_the_task_and_carries_the_chunks_in_order
)
test_cancel_mid_flight_cancels_upstream_and_ends_the_open_stream = on_uvicorn(
    suite.test_cancel_mid_flight_cancels_upstream_and_ends_the_open_stream
)
test_a_late_subscriber_gets_the_current_task_then_live_events = on_uvicorn(
    suite.test_a_late_subscriber_gets_the_current_task_then_live_events
)
test_a_client_leaving_mid_stream_does_not_stop_the_task = on_uvicorn(
    suite.test_a_client_leaving_mid_stream_does_not_stop_the_task
)
test_the_agent_card_points_at_the_relay_and_can_be_cached = on_uvicorn(
    suite.test_the_agent_card_points_at_the_relay_and_can_be_cached
)


def test_uvicorn_runs_the_server_with_uvloop_and_httptools(relay):
    import uvicorn.config

    config = uvicorn.config.Config("relay_project.asgi:application")
    assert (config.loop, config.http) == ("auto", "auto")
    # "auto" picks these when they are installed, as uvicorn[standard] installs them.
    import httptools  # noqa: F401
    import uvloop  # noqa: F401


def test_a_task_whose_process_died_is_taken_over_by_a_uvicorn_process(relay):
    """An open task owned by a process that holds no lease (it died) and sent to an agent
    that is gone: the uvicorn process's takeover scan claims it and ends it failed, saying
    why. Without the lifespan start-up nothing would ever claim it."""
    created = manage(
        relay.env,
        "shell",
        "-c",
        textwrap.dedent(
            """
            from registry.models import ApiKey
            from tasks_app import services
            from tasks_app.models import Task
            caller = ApiKey.objects.order_by("created_at").first()
            task = services.task_open(
                caller=caller, target_kind="agent", target_id="gone-agent", agent_id=None,
                message={"messageId": "m-orphan", "role": "ROLE_USER", "parts": [{"text": "hi"}]},
                client_version="1.0", owner="a-dead-host:1:000000",
            )
            Task.objects.filter(pk=task.pk).update(state="working")
            print(task.pk)
            """
        ),
    )
    task_id = created.strip().splitlines()[-1]

    def state() -> tuple[str, str]:
        with sqlite3.connect(relay.var_dir / "relay.sqlite3", timeout=10) as database:
            return database.execute(
                "SELECT state, owner FROM tasks_app_task WHERE id = ?", (task_id,)
            ).fetchone()

    wait_for(lambda: state()[0] == "failed", "the orphan taken over and failed", timeout=30)
    with sqlite3.connect(relay.var_dir / "relay.sqlite3", timeout=10) as database:
        (payload,) = database.execute(
            "SELECT payload FROM tasks_app_taskevent WHERE task_id = ? ORDER BY sequence DESC",
            (task_id,),
        ).fetchone()
    assert "gone-agent" in payload and "stopped" in payload
    with sqlite3.connect(relay.var_dir / "relay.sqlite3", timeout=10) as database:
        pids = {pid for (pid,) in database.execute("SELECT pid FROM tasks_app_relayprocess")}
    assert relay.daphne.pid in pids  # the uvicorn process took a lease
