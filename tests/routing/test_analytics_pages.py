"""The analytics dashboard: its numbers are the hourly roll-ups' (calls, success rate, latency
percentiles, cost, per table line and in total), the drill-down lists the calls behind a line,
both pages are for staff only, and their query count does not grow with the number of agents."""

from __future__ import annotations

import re
from datetime import timedelta
from decimal import Decimal

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.db.models import Sum
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from registry.services import api_key_create
from registry.usage_models import AgentPrice
from routing import analytics
from routing.analytics_charts import Series, Stack, bar_chart, line_chart
from tasks_app import services
from tasks_app.models import Task, UsageHour, UsageRecord
from tasks_app.usage import rollups
from tests.factories import make_agent

pytestmark = pytest.mark.django_db


def ended_call(agent, caller, *, state="completed", latency_ms=100, hours_ago=0) -> UsageRecord:
    """A call ended through the task services (its usage record is the gateway's), then moved
    ``hours_ago`` back with the latency given."""
    task = services.task_open(
        caller=caller,
        target_kind="agent",
        target_id=agent.pk,
        agent_id=agent.pk,
        message={"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "hi"}]},
        client_version="1.0",
    )
    services.task_record(task=task, event=services.status_event(task, state, "done"))
    Task.objects.filter(pk=task.pk).update(
        completed_at=timezone.now() - timedelta(hours=hours_ago), usage_latency_ms=latency_ms
    )
    return UsageRecord.objects.get(task=task)


def load(agent_count: int = 2):
    """Calls of two keys to ``agent_count`` priced agents over the last day, rolled up; and a
    team call with two member hops, as the roll-up job writes it."""
    key_a, _ = api_key_create(name="alpha")
    key_b, _ = api_key_create(name="beta")
    agents = [make_agent(agent_id=f"agent-{n:02d}", name=f"Agent {n}") for n in range(agent_count)]
    for agent in agents:
        AgentPrice.objects.create(agent=agent, per_call=Decimal("0.015"))
    first, second = agents[0], agents[1]
    for latency in (100, 200, 300):
        ended_call(first, key_a, latency_ms=latency, hours_ago=5)
    ended_call(first, key_b, state="failed", latency_ms=900, hours_ago=5)
    ended_call(second, key_b, latency_ms=50, hours_ago=2)
    ended_call(second, key_b, state="canceled", latency_ms=70, hours_ago=2)
    for agent in agents[2:]:
        ended_call(agent, key_a, latency_ms=40, hours_ago=1)
    rollups.usage_roll_up(hours=24)
    hour = rollups.hour_start(timezone.now() - timedelta(hours=3))
    common = dict(hour=hour, caller=key_a, team_id="desk", bytes_in=0, bytes_out=0)
    UsageHour.objects.create(
        **common,
        target_kind="team",
        target_id="desk",
        agent_id="",
        hop=False,
        calls=1,
        completed=1,
        latency_sum_ms=800,
        latency_p50_ms=800,
        latency_p95_ms=800,
    )
    for agent, cost in ((first, "0.20"), (second, "0.30")):
        UsageHour.objects.create(
            **common,
            target_kind="agent",
            target_id=agent.pk,
            agent_id=agent.pk,
            hop=True,
            calls=1,
            completed=1,
            latency_sum_ms=300,
            latency_p50_ms=300,
            latency_p95_ms=300,
            cost=Decimal(cost),
        )
    return agents, key_a, key_b


def table_line(html: str, table: str, key: str) -> dict[str, str]:
    section = re.search(
        rf'<section class="analytics-table" id="by-{table}">(.*?)</section>', html, re.S
    )
    assert section, table
    line = re.search(rf'<tr data-key="{re.escape(key)}">(.*?)</tr>', section[1], re.S)
    assert line, (table, key)
    return dict(re.findall(r'data-col="(\w+)">([^<]*)<', line[1]))


def total(html: str, name: str) -> str:
    return re.search(rf'data-total="{name}">([^<]*)<', html)[1]


def test_the_page_shows_the_roll_ups_numbers(admin_client):
    (first, second), key_a, key_b = load()
    response = admin_client.get(reverse("analytics-page"), {"range": "24h"})
    assert response.status_code == 200
    html = response.content.decode()

    rolled = UsageHour.objects.filter(agent_id=first.pk)
    assert table_line(html, "agent", first.pk) == {
        "calls": str(rolled.aggregate(n=Sum("calls"))["n"]),  # 4 direct calls + 1 hop
        "success": "80%",  # 4 completed of 5 outcomes
        "p50": "200 ms",  # the hours' p50s: 200 (4 calls) and 300 (1 call)
        "p95": "900 ms",
        "cost": f"${rolled.aggregate(c=Sum('cost'))['c']:.4f}",
    }
    assert table_line(html, "agent", first.pk)["calls"] == "5"
    assert table_line(html, "agent", first.pk)["cost"] == "$0.2600"  # 4 x 0.015 + 0.20
    assert table_line(html, "agent", second.pk) == {
        "calls": "3",
        "success": "100%",
        "p50": "50 ms",
        "p95": "300 ms",
        "cost": "$0.3300",
    }
    assert table_line(html, "team", "desk") == {
        "calls": "1",
        "success": "100%",
        "p50": "800 ms",
        "p95": "800 ms",
        "cost": "$0.5000",
    }
    assert table_line(html, "hop", f"desk/{second.pk}")["cost"] == "$0.3000"
    assert table_line(html, "key", str(key_a.pk))["calls"] == "4"  # 3 calls + the team call
    assert table_line(html, "key", str(key_b.pk)) == {
        "calls": "3",
        "success": "50%",
        "p50": "50 ms",
        "p95": "900 ms",
        "cost": "$0.0450",
    }
    everything = UsageHour.objects.aggregate(calls=Sum("calls"), cost=Sum("cost"))
    hops = UsageHour.objects.filter(hop=True).aggregate(calls=Sum("calls"))["calls"]
    assert total(html, "calls") == str(everything["calls"] - hops) == "7"
    assert total(html, "cost") == f"${everything['cost']:.2f}" == "$0.59"
    assert total(html, "success") == "83%"  # 5 of 6 outcomes; the canceled call is none
    board = response.context["board"]
    assert sum(bucket.stats.calls for bucket in board.series) == 7
    assert len(board.series) == 24


def test_a_workflow_call_is_a_line_of_its_own(admin_client):
    UsageHour.objects.create(
        hour=rollups.hour_start(timezone.now()),
        target_kind="workflow",
        target_id="digest",
        calls=2,
        completed=1,
        failed=1,
        latency_sum_ms=500,
        latency_p50_ms=200,
        latency_p95_ms=300,
    )
    html = admin_client.get(reverse("analytics-page")).content.decode()
    assert table_line(html, "workflow", "digest") == {
        "calls": "2",
        "success": "50%",
        "p50": "200 ms",
        "p95": "300 ms",
        "cost": "$0.0000",
    }
    assert total(html, "calls") == "2"
    assert 'id="by-team"' in html and "None in this range." in html


def test_a_name_narrows_the_page_to_its_own_numbers(admin_client):
    (first, second), key_a, _ = load()
    agent = admin_client.get(reverse("analytics-page"), {"agent": first.pk})
    html = agent.content.decode()
    assert agent.context["board"].focus == ("agent", first.pk, f"Agent 0 ({first.pk})")
    assert total(html, "calls") == "5"  # 4 direct calls and a hop, as in its line
    assert total(html, "cost") == "$0.26"
    assert total(html, "success") == "80%"
    assert table_line(html, "key", str(key_a.pk))["calls"] == "3"  # the hop is no key call
    assert f'href="?{"range=24h"}"' in html  # back to the whole relay
    assert f"?agent={first.pk}&amp;range=7d" in html  # the range picker keeps the focus

    team = admin_client.get(reverse("analytics-page"), {"team": "desk"}).content.decode()
    assert total(team, "calls") == "1"
    assert total(team, "cost") == "$0.50"  # its hops' cost
    assert table_line(team, "hop", f"desk/{second.pk}")["cost"] == "$0.3000"
    assert table_line(team, "agent", first.pk)["calls"] == "1"  # only its hop to the agent


def test_ranges_group_buckets_and_an_unknown_range_is_refused(admin_client):
    load()
    week = admin_client.get(reverse("analytics-page"), {"range": "7d"})
    assert len(week.context["board"].series) == 28  # six hours each
    assert total(week.content.decode(), "calls") == "7"
    month = admin_client.get(reverse("analytics-page"), {"range": "30d"})
    assert len(month.context["board"].series) == 30
    wrong = admin_client.get(reverse("analytics-page"), {"range": "1y"})
    assert wrong.status_code == 400
    assert "range: &#x27;1y&#x27; is not one of 24h, 7d, 30d" in wrong.content.decode()


def test_the_drill_down_lists_the_calls_behind_a_line_with_links_to_their_tasks(admin_client):
    (first, second), key_a, key_b = load()
    response = admin_client.get(reverse("analytics-tasks-page"), {"range": "24h", "key": key_b.pk})
    assert response.status_code == 200
    html = response.content.decode()
    expected = UsageRecord.objects.filter(caller=key_b).order_by("-at")
    shown = re.findall(r'<tr data-task="([^"]+)">', html)
    assert shown == [record.task_id for record in expected]
    assert len(shown) == 3
    for task_id in shown:
        assert f'href="{reverse("task-page", args=[task_id])}"' in html
    failed = admin_client.get(
        reverse("analytics-tasks-page"), {"agent": first.pk, "state": "failed"}
    )
    assert len(re.findall(r"<tr data-task=", failed.content.decode())) == 1
    bad = admin_client.get(reverse("analytics-tasks-page"), {"hop": "no-slash"})
    assert bad.status_code == 400
    assert "<tr data-task=" not in bad.content.decode()
    unknown = admin_client.get(reverse("analytics-tasks-page"), {"colour": "red"})
    assert unknown.status_code == 400


def test_each_table_line_links_to_its_drill_down(admin_client):
    (first, _), key_a, _ = load()
    html = admin_client.get(reverse("analytics-page"), {"range": "7d"}).content.decode()
    assert f'href="{reverse("analytics-tasks-page")}?range=7d&amp;agent={first.pk}"' in html
    assert f'href="{reverse("analytics-page")}?range=7d&amp;agent={first.pk}"' in html
    assert f'?range=7d&amp;hop=desk%2F{first.pk}"' in html
    assert f'?range=7d&amp;key={key_a.pk}"' in html


@pytest.mark.parametrize("name", ["analytics-page", "analytics-tasks-page"])
def test_only_staff_see_the_pages(client, name):
    login = reverse("admin:login")
    anonymous = client.get(reverse(name))
    assert anonymous.status_code == 302
    assert anonymous["Location"].startswith(login)
    get_user_model().objects.create_user(username="member", password="pw-member-1")
    client.login(username="member", password="pw-member-1")
    member = client.get(reverse(name))
    assert member.status_code == 302
    assert member["Location"].startswith(login)
    assert reverse("analytics-page") not in client.get(reverse("registry-page")).content.decode()
    get_user_model().objects.create_user(username="staff", password="pw-staff-1", is_staff=True)
    client.login(username="staff", password="pw-staff-1")
    assert client.get(reverse(name)).status_code == 200
    nav = client.get(reverse("registry-page")).content.decode()
    assert f'<a href="{reverse("analytics-page")}"' in nav


def count_queries(client, agent_count: int) -> int:
    load(agent_count)
    with CaptureQueriesContext(connection) as captured:
        response = client.get(reverse("analytics-page"), {"range": "30d"})
    assert response.status_code == 200
    assert len(response.context["board"].tables["agent"]) == agent_count
    return len(captured)


def test_the_query_count_does_not_grow_with_the_agents(admin_client):
    few = count_queries(admin_client, 2)
    UsageHour.objects.all().delete()
    Task.objects.all().delete()  # their usage records with them
    from registry.models import Agent, ApiKey

    AgentPrice.objects.all().delete()
    Agent.objects.all().delete()
    ApiKey.objects.all().delete()
    many = count_queries(admin_client, 20)
    assert few == many


def test_bars_and_lines_scale_to_the_largest_value():
    chart = bar_chart(
        title="Calls",
        labels=["a", "b"],
        stacks=[Stack("ok", "completed", [2, 4]), Stack("bad", "failed", [2, 0])],
    )
    heights = [rect.height for rect in chart.rects]
    assert heights[0] == heights[1] == heights[2] / 2  # 2, 2 and 4 of 4
    assert chart.top_label == "4"
    assert chart.rects[0].title == "a: 2 completed"
    lines = line_chart(
        title="Rate",
        labels=["a", "b", "c"],
        series=[Series("r", "ok", [1.0, None, 0.5])],
        unit="%",
        ceiling=1.0,
    )
    (line,) = lines.lines
    assert len(line.dots) == 2  # the empty bucket has no point
    assert line.dots[0][1] == lines.plot_top and line.dots[1][2] == "c: 50% ok"
    assert bar_chart(title="x", labels=["a"], stacks=[Stack("c", "cost", [0])]).empty


def test_weighted_percentile_counts_each_value_by_its_calls():
    assert analytics.weighted_percentile([(100, 9), (900, 1)], 0.5) == 100
    assert analytics.weighted_percentile([(100, 9), (900, 1)], 0.95) == 900
    assert analytics.weighted_percentile([(5, 0)], 0.5) is None


def test_the_chart_layout_imports_no_django_in_a_fresh_interpreter():
    import json
    import subprocess
    import sys
    from pathlib import Path

    probe = (
        "import json, sys\n"
        "import routing.analytics_charts\n"
        "print(json.dumps({'django': 'django' in sys.modules}))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert json.loads(result.stdout) == {"django": False}
