"""A team behind the relay's AG-UI endpoint, run with the official AG-UI JavaScript client
(``@ag-ui/client``'s HttpAgent, which verifies the order of the events it applies): three
real a2a-sdk members on 127.0.0.1 hand the conversation on, planner -> researcher -> writer ->
the user; the planner takes about a second to answer."""

from __future__ import annotations

import asyncio
import time
import uuid

import pytest

from routing.demo.agents import AgentSpec, AnsweringExecutor, Skill, build_agent_app
from tests.agents import Script, scripted_agent
from tests.jsinterop import JS_DIR, run_agui_client
from tests.live import manage

PLANNER = Script("planner")
RESEARCHER = Script("researcher")
WRITER = Script("writer")
SLOW_SECONDS = 1.0
ANSWERED: list[float] = []
"""When the planner sent its answer (ms since the epoch, the clock the JS client reads)."""

pytestmark = pytest.mark.skipif(
    not (JS_DIR / "node_modules" / "@ag-ui" / "client" / "package.json").is_file(),
    reason="@ag-ui/client is not installed in tests/js (run: bash scripts/ensure-js; needs npm)",
)


class SlowAnswer(AnsweringExecutor):
    """Answers as its script says, after SLOW_SECONDS."""

    async def execute(self, context, event_queue) -> None:
        await asyncio.sleep(SLOW_SECONDS)
        ANSWERED.append(time.time() * 1000)
        await super().execute(context, event_queue)


def slow_planner(base_url: str):
    spec = AgentSpec(
        slug="planner",
        name="Slow planner",
        description="Plans slowly, then hands on as its script says.",
        skills=(Skill(id="plan", name="Plan", description="Plans.", tags=("plan",)),),
        make_executor=lambda: SlowAnswer(PLANNER.answer),
        client_routing=True,
    )
    return build_agent_app(spec, base_url=base_url)


@pytest.fixture(scope="module")
def crew(relay):
    relay.serve_agent("planner", slow_planner)
    relay.serve_agent("researcher", scripted_agent(RESEARCHER))
    relay.serve_agent("writer", scripted_agent(WRITER))
    manage(
        relay.env,
        "shell",
        "-c",
        "from registry.teams import team_create; team_create(team_id='agui-crew', "
        "name='AG-UI crew', members=['planner', 'researcher', 'writer'], "
        "default_agent='planner')",
    )
    return f"{relay.url}/agui/teams/agui-crew"


def test_a_three_hop_team_run_streams_each_hop_as_a_step_and_the_answer(relay, crew):
    PLANNER.load("researcher")
    RESEARCHER.load("writer")
    WRITER.load("user")
    ANSWERED.clear()

    run = run_agui_client(crew, "a note on tides", headers=relay.auth())

    assert run.end["kind"] == "done", run.end
    types = [event["type"] for event in run.events]
    assert types[0] == "RUN_STARTED" and types[-1] == "RUN_FINISHED"
    steps = [
        (event["type"], event["stepName"])
        for event in run.events
        if event["type"] in ("STEP_STARTED", "STEP_FINISHED")
    ]
    assert steps == [
        ("STEP_STARTED", "planner"),
        ("STEP_FINISHED", "planner"),
        ("STEP_STARTED", "researcher"),
        ("STEP_FINISHED", "researcher"),
        ("STEP_STARTED", "writer"),
        ("STEP_FINISHED", "writer"),
    ]
    # The answer is said within the writer's step, before the run finishes.
    last_step = next(
        index
        for index, event in enumerate(run.events)
        if event["type"] == "STEP_STARTED" and event["stepName"] == "writer"
    )
    answer_ids = {
        event["messageId"]
        for event in run.events[last_step:]
        if event["type"] == "TEXT_MESSAGE_CONTENT"
    }
    answer = "".join(
        event["delta"]
        for event in run.events
        if event["type"] == "TEXT_MESSAGE_CONTENT" and event["messageId"] in answer_ids
    )
    assert answer == "writer: researcher: planner: a note on tides"
    said = [m for m in run.end["messages"] if m["role"] == "assistant"]
    assert said[-1]["content"] == answer
    assert run.end["state"]["a2a"]["state"] == "TASK_STATE_COMPLETED"
    # The run started before the first member had answered.
    assert len(ANSWERED) == 1
    assert run.arrived[0] < ANSWERED[0] - SLOW_SECONDS * 1000 / 2


def test_the_thread_id_is_the_a2a_context_of_the_run(relay, crew):
    PLANNER.load("user")
    thread = f"thread-{uuid.uuid4().hex[:8]}"

    run = run_agui_client(crew, "hello", headers=relay.auth(), threadId=thread)

    assert run.end["kind"] == "done", run.end
    assert run.events[0]["threadId"] == thread
    assert run.end["state"]["a2a"]["contextId"] == thread


FAN = """
name: AG-UI fan
slug: agui-js-fan
steps:
  - id: both
    parallel:
      - agent: js-fast
      - agent: js-medium
  - id: summarize
    agent: js-summary
    input: "{{.both}}"
"""


@pytest.fixture(scope="module")
def fan(relay):
    from tests.routing.workflows import workflow_agents as wa

    relay.serve_agent("js-fast", wa.slow("js-fast", 0.05))
    relay.serve_agent("js-medium", wa.slow("js-medium", 0.5))
    relay.serve_agent("js-summary", wa.answering("js-summary"))
    manage(
        relay.env,
        "shell",
        "-c",
        f"from routing.workflows.services import workflow_import; workflow_import(text={FAN!r})",
    )
    return f"{relay.url}/agui/workflows/agui-js-fan"


def test_a_workflow_run_with_parallel_steps_passes_the_clients_checks(relay, fan):
    run = run_agui_client(fan, "go", headers=relay.auth())

    # HttpAgent verified the order (two steps open together, each closed once).
    assert run.end["kind"] == "done", run.end
    types = [event["type"] for event in run.events]
    assert types[0] == "RUN_STARTED" and types[-1] == "RUN_FINISHED"
    steps = [
        (event["type"], event["stepName"])
        for event in run.events
        if event["type"] in ("STEP_STARTED", "STEP_FINISHED")
    ]
    assert sorted(steps[:4]) == [
        ("STEP_FINISHED", "js-fast"),
        ("STEP_FINISHED", "js-medium"),
        ("STEP_STARTED", "js-fast"),
        ("STEP_STARTED", "js-medium"),
    ]
    assert steps[4:] == [("STEP_STARTED", "summarize"), ("STEP_FINISHED", "summarize")]
    said = [m for m in run.end["messages"] if m["role"] == "assistant"]
    assert said[-1]["content"] == "js-summary: js-fast: go\n\njs-medium: go"
    assert run.end["state"]["a2a"]["state"] == "TASK_STATE_COMPLETED"
