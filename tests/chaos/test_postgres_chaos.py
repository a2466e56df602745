"""PostgreSQL faults under load: the chaos cluster (tests.chaos.harness: two relay processes,
a worker, beat, its own Redis, a2a-sdk agents) on a PostgreSQL cluster of the test's own
(tests.chaos.postgres), which each test hurts while a small load runs: 20 blocking sends, 6
streams to an agent that answers after a few seconds, one call to a two-member team.

Faults: ``pg_ctl restart -m fast``; ``pg_terminate_backend`` of every relay session;
stopped for 15 s with streams open to an agent that answers after 5 s; ``kill -9`` of the
postmaster, started again 15 s later. What must hold, each time:
- no 5xx but the retryable 503 of a call the relay could not admit (counted, printed);
- every accepted call's task exists (0 lost task ids);
- 30 s after the database is back no accepted task is still open (the agents all finish);
- no task ends failed (the agents complete every task);
- every stream that stayed open ends with the agent's events and its final state;
- the relays log the outage in plain lines, without a traceback.
Skipped, saying why, without the PostgreSQL server binaries (``scripts/ensure-postgres``),
redis-server or the a2a-sdk.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest

from tests.chaos.agents import paced_text
from tests.chaos.harness import (
    ChaosCluster,
    StreamRefused,
    event_sequence,
    frames,
    headers,
    rpc_body,
    snapshot_sequences,
    state_of,
    user_message,
)
from tests.live import ServiceMissingError, manage

pytestmark = [pytest.mark.chaos, pytest.mark.production]

DATABASE = "chaos"
TEAM = "chaos-team"
SENDS = 20
STREAMS = 6
OUTAGE_SECONDS = 15.0
SETTLE_SECONDS = 30.0
"""How long after the database is back every accepted task has to be final."""
CALL_BOUND = 120.0
RETRYABLE_CODE = -31503


@pytest.fixture(scope="module")
def pg_cluster(tmp_path_factory):
    pytest.importorskip("a2a", reason="the a2a-sdk is not installed")
    pytest.importorskip("psycopg", reason="psycopg is not installed")
    pytest.importorskip("redis", reason="the redis client is not installed")
    from tests.chaos.harness import chaos_cluster
    from tests.chaos.postgres import private_postgres

    var_dir = tmp_path_factory.mktemp("postgres-chaos")
    try:
        with (
            private_postgres(var_dir) as server,
            chaos_cluster(var_dir, database=server.database(DATABASE)) as cluster,
        ):
            manage(
                cluster.env,
                "shell",
                "-c",
                "from registry.teams import team_create; team_create(team_id='chaos-team', "
                "name='Chaos team', members=['paced', 'pausing'], default_agent='paced')",
            )
            cluster.postgres = server
            yield cluster
    except ServiceMissingError as error:
        pytest.skip(str(error))


@pytest.fixture
def cluster(pg_cluster, request):
    if not pg_cluster.postgres.answers():
        pg_cluster.postgres.start()
    pg_cluster.ensure_running()
    request.node.chaos_cluster = pg_cluster
    return pg_cluster


@dataclass
class Outcome:
    """One call of the load, judged: accepted (with its task id), refused retryably (503 or
    the -31503 JSON-RPC error), or a problem (anything else, described)."""

    kind: str
    task_id: str | None = None
    retryable: bool = False
    problem: str = ""
    final: str | None = None
    frames: list[Any] = field(default_factory=list)


def is_retryable(status: int, body: Any) -> bool:
    error = body.get("error") if isinstance(body, dict) else None
    return status == 503 or (isinstance(error, dict) and error.get("code") == RETRYABLE_CODE)


async def send(http: httpx.AsyncClient, url: str, key: str, text: str, kind: str) -> Outcome:
    outcome = Outcome(kind)
    body = rpc_body("SendMessage", {"message": user_message(text)})
    try:
        async with asyncio.timeout(CALL_BOUND):
            response = await http.post(url, content=body, headers=headers(key))
    except (TimeoutError, httpx.HTTPError) as error:
        outcome.problem = f"{type(error).__name__}: {error}"
        return outcome
    try:
        answer = response.json()
    except ValueError:
        answer = None
    if is_retryable(response.status_code, answer):
        outcome.retryable = True
    elif response.status_code == 200 and isinstance(answer, dict) and "result" in answer:
        task = answer["result"].get("task", {})
        outcome.task_id = task.get("id")
        outcome.final = task.get("status", {}).get("state")
        if outcome.final != "TASK_STATE_COMPLETED":
            outcome.problem = f"answered {outcome.final}: {str(task.get('status'))[:300]}"
    else:
        outcome.problem = f"HTTP {response.status_code}: {response.text[:300]}"
    return outcome


async def stream(http: httpx.AsyncClient, cluster: ChaosCluster, relay, count, pause) -> Outcome:
    outcome = Outcome("stream")
    params = {"message": user_message(paced_text(count, pause))}
    seen = outcome.frames
    try:
        async with asyncio.timeout(CALL_BOUND):
            async for frame in frames(
                http, relay, "paced", "SendStreamingMessage", params, cluster.key
            ):
                seen.append(frame)
    except StreamRefused as refused:
        if is_retryable(refused.status, _json(refused.text)):
            outcome.retryable = True
        else:
            outcome.problem = str(refused)[:300]
        return outcome
    except (TimeoutError, httpx.HTTPError) as error:
        outcome.problem = f"{type(error).__name__} after {len(seen)} frames: {error}"
    first = seen[0].event if seen else {}
    if "task" in first:
        outcome.task_id = first["task"].get("id")
    elif "statusUpdate" in first:
        outcome.task_id = first["statusUpdate"].get("taskId")
    errors = [f.data["error"] for f in seen if isinstance(f.data, dict) and "error" in f.data]
    sequences = snapshot_sequences(first.get("task", {})) + [
        s for f in seen if (s := event_sequence(f.event)) is not None
    ]
    outcome.final = state_of(seen[-1].event) if seen else None
    if errors:
        outcome.problem = f"error frame: {str(errors[0])[:300]}"
    elif not outcome.problem and (
        sequences != list(range(count)) or outcome.final != "TASK_STATE_COMPLETED"
    ):
        outcome.problem = f"events {sequences}, final state {outcome.final}"
    return outcome


def _json(text: str) -> Any:
    import json

    try:
        return json.loads(text)
    except ValueError:
        return None


async def load(cluster: ChaosCluster, *, stream_count: int, stream_pause: float) -> list[Outcome]:
    """The load, started over the first 3 s, alternating between the two relays."""
    relays = [cluster.a, cluster.b]
    limits = httpx.Limits(max_connections=64)
    async with httpx.AsyncClient(timeout=CALL_BOUND, limits=limits) as http:

        async def later(delay: float, work):
            await asyncio.sleep(delay)
            return await work

        jobs = []
        for index in range(SENDS):
            relay = relays[index % 2]
            url = relay.agent_url("paced")
            work = send(http, url, cluster.key, paced_text(2, 1.0), "send")
            jobs.append(later(index * 3.0 / SENDS, work))
        for index in range(STREAMS):
            work = stream(http, cluster, relays[index % 2], stream_count, stream_pause)
            jobs.append(later(index * 0.1, work))
        team_url = f"{cluster.b.url}/a2a/teams/{TEAM}/"
        jobs.append(later(0.5, send(http, team_url, cluster.key, paced_text(2, 1.0), "team")))
        return list(await asyncio.gather(*jobs))


async def judge(cluster: ChaosCluster, outcomes: list[Outcome], back_at: float) -> dict:
    """Waits until every accepted task is final (SETTLE_SECONDS after ``back_at`` at most),
    then asserts the module docstring's rules; returns the figures for the report."""
    accepted = [o.task_id for o in outcomes if o.task_id]
    deadline = back_at + SETTLE_SECONDS
    while time.monotonic() < deadline and await asyncio.to_thread(cluster.open_tasks, accepted):
        await asyncio.sleep(0.5)
    states = await asyncio.to_thread(cluster.task_states, accepted)
    figures = {
        "calls": len(outcomes),
        "accepted": len(accepted),
        "retryable 503": sum(o.retryable for o in outcomes),
        "states": dict(Counter(states.values())),
        "problems": [f"{o.kind} {o.task_id}: {o.problem}" for o in outcomes if o.problem],
    }
    print(f"\nfigures: {figures}")
    lost = [task_id for task_id in accepted if task_id not in states]
    still_open = {t: s for t, s in states.items() if s in ("submitted", "working")}
    failed = {t: s for t, s in states.items() if s == "failed"}
    accepted_streams = [o for o in outcomes if o.kind == "stream" and not o.retryable]
    assert not figures["problems"], figures
    assert not lost, f"lost task ids: {lost}"
    assert not still_open, f"open {SETTLE_SECONDS:.0f} s after the database was back: {still_open}"
    assert not failed, f"failed while the agent completed them: {failed}"
    assert all(o.final == "TASK_STATE_COMPLETED" for o in accepted_streams), figures
    assert len(accepted) >= SENDS // 2, f"too few calls were admitted to test anything: {figures}"
    assert len(accepted_streams) >= STREAMS // 2, f"too few streams stayed open: {figures}"
    return figures


async def test_pg_ctl_restart_fast_under_load_loses_and_strands_nothing(cluster):
    async def fault():
        await asyncio.sleep(1.5)
        await asyncio.to_thread(cluster.postgres.restart)
        return time.monotonic()

    await _with_fault(cluster, fault, stream_count=4, stream_pause=1.0)


async def test_every_relay_session_terminated_under_load_loses_and_strands_nothing(cluster):
    async def fault():
        cut = 0
        for _ in range(3):
            await asyncio.sleep(1.0)
            cut += await asyncio.to_thread(cluster.postgres.terminate_backends, DATABASE)
        print(f"\nsessions terminated: {cut}")
        return time.monotonic()

    await _with_fault(cluster, fault, stream_count=4, stream_pause=1.0)


async def test_database_stopped_15_s_under_open_streams_to_a_slow_agent(cluster):
    async def fault():
        await asyncio.sleep(1.5)
        await asyncio.to_thread(cluster.postgres.stop)
        await asyncio.sleep(OUTAGE_SECONDS)
        await asyncio.to_thread(cluster.postgres.start)
        return time.monotonic()

    await _with_fault(cluster, fault, stream_count=2, stream_pause=5.0)


async def test_kill_9_of_the_postmaster_started_again_15_s_later(cluster):
    async def fault():
        await asyncio.sleep(1.5)
        await asyncio.to_thread(cluster.postgres.kill)
        await asyncio.sleep(OUTAGE_SECONDS)
        await asyncio.to_thread(cluster.postgres.start)
        return time.monotonic()

    await _with_fault(cluster, fault, stream_count=3, stream_pause=1.5)


async def _with_fault(cluster, fault, *, stream_count: int, stream_pause: float):
    """Runs the load and the fault together, judges the outcome, then checks the logs."""
    sizes = {log: log.stat().st_size for log in cluster.var_dir.glob("*.log")}
    started = time.monotonic()
    outcomes, back_at = await asyncio.gather(
        load(cluster, stream_count=stream_count, stream_pause=stream_pause), fault()
    )
    print(f"\nload and fault took {time.monotonic() - started:.1f} s")
    print(f"by kind: {Counter((o.kind, _verdict(o)) for o in outcomes)}")
    await judge(cluster, outcomes, back_at)
    tracebacks = {}
    for log, size in sizes.items():
        with log.open(errors="replace") as text:
            text.seek(size)
            lines = text.read().splitlines()
        raised = Counter(line for line in lines if _is_exception_line(line))
        if raised:
            print(f"{log.name}: {sum(raised.values())} exception lines: {dict(raised)}")
        if log.name.startswith("daphne-"):
            tracebacks[log.name] = sum(line.startswith("Traceback") for line in lines)
    # An outage is expected: the relays say so in one line each, a traceback means a bug.
    assert not any(tracebacks.values()), f"tracebacks in the relays' logs: {tracebacks}"


def _verdict(outcome: Outcome) -> str:
    if outcome.problem:
        return "problem"
    return "retryable" if outcome.retryable else "accepted"


def _is_exception_line(line: str) -> bool:
    """The last line of a logged traceback (``SomeError: ...``), for the report."""
    head = line.split(":", 1)[0]
    return ":" in line and not line.startswith(" ") and head.endswith(("Error", "Exception"))
