"""Agent metrics: the pure numbers and chart layouts, the selector over real probe and task
rows, and ``GET /a2a/agents/{id}/metrics`` (through the ASGI router too, which must leave it
to Django rather than the A2A consumer)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.utils import timezone

from relay_project.routing import a2a_route
from routing import metrics, selectors
from routing.models import ProbeResult
from tasks_app.lifecycle import TaskState
from tasks_app.models import Task
from tests.factories import make_agent, make_task

NOW = datetime(2026, 11, 20, 12, 30, tzinfo=UTC)


def probe(
    agent,
    *,
    minutes_ago: float,
    ok: bool = True,
    latency: float | None = 100.0,
    level: str = ProbeResult.Level.TRANSPORT,
    now: datetime = NOW,
) -> ProbeResult:
    return ProbeResult.objects.create(
        agent=agent,
        level=level,
        ok=ok,
        latency_ms=latency,
        category="" if ok else ProbeResult.Category.TIMEOUT,
        checked_at=now - timedelta(minutes=minutes_ago),
    )


def ended_task(
    agent,
    *,
    state: str,
    minutes_ago: float,
    took_seconds: float = 2.0,
    now: datetime = NOW,
    target_kind: str = "agent",
) -> Task:
    """A task to ``agent`` that ended in ``state`` ``minutes_ago`` after ``took_seconds``."""
    task = make_task(agent, state=state, target_kind=target_kind)
    completed = now - timedelta(minutes=minutes_ago)
    Task.objects.filter(pk=task.pk).update(
        created_at=completed - timedelta(seconds=took_seconds), completed_at=completed
    )
    return task


# --- pure -----------------------------------------------------------------------------------


def test_percentile_is_the_nearest_rank():
    values = list(range(1, 101))
    assert metrics.percentile(values, 0.95) == 95
    assert metrics.percentile([7.0], 0.95) == 7.0
    assert metrics.percentile([1, 2, 3, 4, 100], 0.95) == 100
    assert metrics.percentile([], 0.95) is None


def test_the_hourly_series_has_every_hour_with_zeros_where_nothing_happened():
    since, until = NOW - timedelta(hours=3), NOW
    busy = metrics.HourCounts(start=datetime(2026, 11, 20, 10, tzinfo=UTC), probes=4)
    series = metrics.hourly_series(since, until, [busy])
    assert [hour.start.hour for hour in series] == [9, 10, 11, 12]
    assert [hour.probes for hour in series] == [0, 4, 0, 0]


def test_hour_counts_bucket_probes_and_tasks_by_clock_hour():
    ten, eleven = datetime(2026, 11, 20, 10, tzinfo=UTC), datetime(2026, 11, 20, 11, tzinfo=UTC)
    probes = [
        (ten + timedelta(minutes=5), True, 10.0),
        (ten + timedelta(minutes=59), False, None),
        (eleven, True, 30.0),
        (eleven + timedelta(minutes=1), True, 50.0),
    ]
    tasks = [
        (ten + timedelta(minutes=30), True, False),
        (eleven, False, True),
        (eleven, False, False),
    ]  # canceled: neither
    first, second = metrics.hour_counts(probes, tasks)
    assert (first.start, first.probes, first.probes_failed, first.latency_avg_ms) == (
        ten,
        2,
        1,
        10.0,
    )
    assert (first.tasks_completed, first.tasks_failed) == (1, 0)
    assert (second.start, second.probes, second.latency_avg_ms) == (eleven, 2, 40.0)
    assert (second.tasks_completed, second.tasks_failed) == (0, 1)
    assert metrics.hour_counts([(ten, False, None)], [])[0].latency_avg_ms is None


def test_the_sparkline_puts_slower_probes_higher_and_marks_failures():
    line = metrics.sparkline([(10.0, True), (40.0, True), (None, False)], width=100, height=20)
    first, second = (tuple(map(float, point.split(","))) for point in line.points.split())
    assert first[0] == 0 and second[0] == 50
    assert second[1] < first[1]  # 40 ms is drawn above 10 ms
    assert line.failures == (100.0,)
    assert line.last_ms == 40.0
    assert metrics.sparkline([]) is None


def test_the_hour_chart_stacks_failures_over_successes_and_scales_to_the_busiest_hour():
    series = [
        metrics.HourCounts(
            start=NOW,
            probes=4,
            probes_failed=1,
            latency_avg_ms=50.0,
            tasks_completed=2,
            tasks_failed=1,
        ),
        metrics.HourCounts(start=NOW + metrics.HOUR, probes=2, latency_avg_ms=100.0),
    ]
    chart = metrics.hour_chart(series, width=400, height=180)
    assert chart.max_outcomes == 7
    tallest_success, smaller = chart.successes
    assert tallest_success.height > smaller.height
    (failure,) = chart.failures
    assert failure.y + failure.height == pytest.approx(tallest_success.y)
    assert chart.max_latency_ms == 100.0
    assert len(chart.latency_points.split()) == 2


# --- the selector ---------------------------------------------------------------------------


@pytest.mark.django_db
def test_metrics_count_probes_and_tasks_in_the_window_only():
    agent, other = make_agent(), make_agent()
    for minutes, latency in [(10, 100.0), (20, 200.0), (70, 300.0), (80, 400.0)]:
        probe(agent, minutes_ago=minutes, latency=latency)
    probe(agent, minutes_ago=30, ok=False, latency=None)
    probe(agent, minutes_ago=25 * 60)  # before the window
    probe(other, minutes_ago=5, latency=9999.0)
    ended_task(agent, state=TaskState.COMPLETED, minutes_ago=15, took_seconds=2)
    ended_task(agent, state=TaskState.COMPLETED, minutes_ago=75, took_seconds=4)
    ended_task(agent, state=TaskState.FAILED, minutes_ago=16)
    ended_task(agent, state=TaskState.CANCELED, minutes_ago=17)
    ended_task(agent, state=TaskState.COMPLETED, minutes_ago=26 * 60)  # before the window
    ended_task(agent, state=TaskState.COMPLETED, minutes_ago=5, target_kind="team")

    found = selectors.agent_metrics(agent_id=agent.pk, hours=24, now=NOW)

    assert (found.probes, found.probes_ok) == (5, 4)
    assert found.latency_avg_ms == pytest.approx(250.0)
    assert found.latency_p95_ms == 400.0
    assert (found.tasks_completed, found.tasks_failed) == (2, 1)
    assert found.tasks_by_state[TaskState.CANCELED] == 1
    # 4 probes ok + 2 completed over 5 probes + 2 completed + 1 failed (canceled is no outcome)
    assert found.success_rate == pytest.approx(6 / 8)
    assert found.duration_avg_ms == pytest.approx(3000.0)
    assert found.duration_p95_ms == pytest.approx(4000.0)
    assert len(found.series) == 25
    last, before = found.series[-1], found.series[-2]
    assert (last.start.hour, last.probes, last.probes_failed) == (12, 3, 1)
    assert (last.tasks_completed, last.tasks_failed) == (1, 1)
    assert last.latency_avg_ms == pytest.approx(150.0)
    assert (before.start.hour, before.probes, before.tasks_completed) == (11, 2, 1)


@pytest.mark.django_db
def test_metrics_of_an_agent_with_nothing_recorded_are_empty_not_zero():
    found = selectors.agent_metrics(agent_id=make_agent().pk, hours=2, now=NOW)
    assert found.success_rate is None
    assert found.latency_avg_ms is None and found.latency_p95_ms is None
    assert [hour.probes for hour in found.series] == [0, 0, 0]


@pytest.mark.django_db
def test_sparkline_samples_for_a_whole_page_take_one_query(django_assert_num_queries):
    agents = [make_agent() for _ in range(3)]
    now = timezone.now()
    for index in range(40):
        probe(agents[0], minutes_ago=40 - index, latency=float(index), now=now)
    probe(agents[1], minutes_ago=1, ok=False, latency=None, now=now)
    with django_assert_num_queries(1):
        samples = selectors.recent_probe_samples(agent_ids=[agent.pk for agent in agents], now=now)
    assert len(samples[agents[0].pk]) == selectors.SPARKLINE_POINTS
    assert samples[agents[0].pk][-1] == (39.0, True)  # newest last
    assert samples[agents[0].pk][0] == (10.0, True)
    assert samples[agents[1].pk] == [(None, False)]
    assert agents[2].pk not in samples


# --- the endpoint ---------------------------------------------------------------------------


@pytest.mark.django_db
def test_the_metrics_endpoint_answers_camel_case_json(anonymous):
    agent = make_agent()
    probe(agent, minutes_ago=1, latency=120.0, now=timezone.now())
    ended_task(agent, state=TaskState.COMPLETED, minutes_ago=2, now=timezone.now())

    response = anonymous.get(f"/a2a/agents/{agent.pk}/metrics?hours=6")

    assert response.status_code == 200
    body = response.json()
    assert body["agentId"] == agent.pk
    assert body["hours"] == 6
    assert body["successRate"] == 1.0
    assert body["latencyAvgMs"] == 120.0 and body["latencyP95Ms"] == 120.0
    assert (body["tasksCompleted"], body["tasksFailed"]) == (1, 0)
    assert body["tasks"]["durationAvgMs"] == 2000.0
    assert body["probes"] == {"total": 1, "ok": 1, "failed": 0, "successRate": 1.0}
    assert len(body["series"]) in (6, 7)
    assert set(body["series"][-1]) == {
        "hour",
        "probes",
        "probesFailed",
        "latencyAvgMs",
        "tasksCompleted",
        "tasksFailed",
    }


@pytest.mark.django_db
@pytest.mark.parametrize("hours", ["0", "169", "-3", "abc", "2.5"])
def test_a_bad_window_is_a_400_json_error(anonymous, hours):
    agent = make_agent()
    response = anonymous.get(f"/a2a/agents/{agent.pk}/metrics", {"hours": hours})
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "invalid_query"
    assert "hours must be a whole number from 1 to 168" in error["message"]


@pytest.mark.django_db
def test_metrics_of_an_unknown_agent_are_a_404_json_error(anonymous):
    response = anonymous.get("/a2a/agents/nobody/metrics")
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"


@pytest.mark.django_db
def test_metrics_follow_the_registry_read_permission(anonymous, api, settings):
    agent = make_agent()
    settings.RELAY_REGISTRY_PUBLIC = False
    assert anonymous.get(f"/a2a/agents/{agent.pk}/metrics").status_code == 401
    assert api.get(f"/a2a/agents/{agent.pk}/metrics").status_code == 200


def test_the_asgi_router_leaves_agent_metrics_to_django():
    def route(path):
        return a2a_route({"path": path, "method": "GET"})

    assert route("/a2a/agents/weather/metrics") is None
    assert route("/a2a/agents/weather/tasks/abc")["rest"] == "tasks/abc"
    assert route("/a2a/agents/weather/")["rest"] == ""
    # Teams have one too (usage, tests/usage); anything else under a team is A2A.
    assert route("/a2a/teams/crew/metrics") is None
    assert route("/a2a/teams/crew/tasks/abc")["kind"] == "team"


@pytest.mark.django_db(transaction=True)
async def test_metrics_reach_the_drf_view_through_the_asgi_application():
    from asgiref.sync import sync_to_async

    from tests.tasks_app.a2a_http import relay_client

    agent = await sync_to_async(make_agent)()
    async with relay_client() as client:
        response = await client.get(f"/a2a/agents/{agent.pk}/metrics")
        bad = await client.get(f"/a2a/agents/{agent.pk}/metrics?hours=x")
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    assert response.json()["agentId"] == agent.pk
    assert bad.status_code == 400
    assert bad.json()["error"]["code"] == "invalid_query"


def test_the_metrics_core_imports_no_django_in_a_fresh_interpreter():
    import json
    import subprocess
    import sys
    from pathlib import Path

    probe = (
        "import json, sys\n"
        "before = set(sys.modules)\n"
        "import routing.metrics\n"
        "loaded = {name.partition('.')[0] for name in set(sys.modules) - before}\n"
        "print(json.dumps({'django': 'django' in sys.modules, 'outside_stdlib': sorted("
        "loaded - set(sys.stdlib_module_names) - {'routing'})}))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert json.loads(result.stdout) == {"django": False, "outside_stdlib": []}
