"""The gateway protocol suite (``test_gateway_protocol``) once more, with the relay served by
uvicorn as the README's production section runs it (lifespan on, uvloop and httptools), so the
server the README recommends passes every case daphne passes: every binding and version with
the official a2a-sdk clients, streams, resubscription, cancel, lists and the card.

Plus what only the server's start-up decides: the relay's background work (the lease and the
takeover of tasks whose process died) runs under uvicorn, started at its lifespan event.
"""

from __future__ import annotations

import sqlite3
import textwrap

from tests.live import manage, wait_for
from tests.tasks_app.test_gateway_protocol import *  # noqa: F403 - the same cases, served by uvicorn
from tests.tasks_app.test_gateway_protocol import RELAY_ENV  # noqa: F401 - read by the relay fixture

RELAY_SERVER = "uvicorn"


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
