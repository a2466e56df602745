"""Health on the registry's pages: a latency sparkline per agent in the list (one query for the
whole page), and on the agent's page the last 24 hours' numbers, their hourly chart and the
recent health changes."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from routing.models import HealthEvent, ProbeResult
from tasks_app.lifecycle import TaskState
from tests.factories import make_agent, make_task

pytestmark = pytest.mark.django_db


def probes(agent, latencies, *, failed: int = 0, now=None):
    now = now or timezone.now()
    for index, latency in enumerate(latencies):
        ProbeResult.objects.create(
            agent=agent,
            level="transport",
            ok=True,
            latency_ms=latency,
            checked_at=now - timedelta(minutes=len(latencies) - index),
        )
    for _ in range(failed):
        ProbeResult.objects.create(
            agent=agent,
            level="transport",
            ok=False,
            category="refused",
            checked_at=now - timedelta(seconds=30),
        )


def list_item(html: str, agent_id: str) -> str:
    match = re.search(
        rf'<li class="agent" id="agent-{agent_id}">(.*?)</li>\s*(?=<li class="agent"|</ul>)',
        html,
        re.S,
    )
    assert match, f"no list item for {agent_id}"
    return match.group(1)


def test_the_list_shows_a_latency_sparkline_for_probed_agents_only(client):
    probed = make_agent(agent_id="probed")
    make_agent(agent_id="quiet")
    probes(probed, [10.0, 30.0, 20.0], failed=1)

    html = client.get(reverse("registry-page")).content.decode()

    item = list_item(html, "probed")
    assert '<svg class="sparkline"' in item
    points = re.search(r'<polyline class="spark-line" points="([^"]+)"', item).group(1)
    assert len(points.split()) == 3
    assert item.count('class="spark-failure"') == 1
    assert "peak 30 ms, 1 failed" in item
    assert "sparkline" not in list_item(html, "quiet")


def test_sparklines_cost_one_query_for_the_page_whatever_the_agent_count(
    client, django_assert_max_num_queries
):
    for number in range(3):
        probes(make_agent(agent_id=f"few-{number}"), [5.0, 6.0])
    with django_assert_max_num_queries(4):
        first = client.get(reverse("registry-page"))
    assert first.content.decode().count('<svg class="sparkline"') == 3
    for number in range(27):
        probes(make_agent(agent_id=f"many-{number:02d}"), [5.0, 6.0, 7.0])
    with django_assert_max_num_queries(4):
        second = client.get(reverse("registry-page"))
    assert second.content.decode().count('<svg class="sparkline"') == 30


def half_past_within_the_last_hour():
    """The latest hh:30 before now: rows a few minutes before it share one clock hour, however
    close to the hour the test runs."""
    now = timezone.now()
    half_past = now.replace(minute=30, second=0, microsecond=0)
    return half_past if half_past <= now else half_past - timedelta(hours=1)


def test_the_agent_page_shows_the_last_day_in_numbers_and_as_a_chart(client):
    agent = make_agent(agent_id="weather")
    moment = half_past_within_the_last_hour()
    probes(agent, [100.0, 300.0], failed=1, now=moment)
    for state in (TaskState.COMPLETED, TaskState.FAILED):
        task = make_task(agent, state=state)
        type(task).objects.filter(pk=task.pk).update(
            created_at=moment - timedelta(minutes=5), completed_at=moment
        )

    html = client.get(reverse("agent-page", args=["weather"])).content.decode()

    numbers = re.search(r'<dl class="metrics-numbers">(.*?)</dl>', html, re.S).group(1)
    # 2 probes ok + 1 task completed out of 3 probes + 2 tasks
    assert re.search(r"Success rate</dt><dd>60 %", numbers)
    assert "Latency, average</dt><dd>200 ms" in numbers
    assert "Latency, p95</dt><dd>300 ms" in numbers
    assert "Tasks completed</dt><dd>1<" in numbers
    assert "Tasks failed</dt><dd>1<" in numbers
    chart = re.search(r'<svg class="hour-chart".*?</svg>', html, re.S).group(0)
    assert chart.count('class="chart-ok"') == 1  # all in this hour: one bar each
    assert chart.count('class="chart-failed"') == 1
    assert '<polyline class="chart-latency"' in chart
    assert reverse("agent-metrics", args=["weather"]) in html


def test_the_agent_page_lists_recent_health_changes_newest_first_and_escaped(client):
    agent = make_agent(agent_id="weather")
    now = timezone.now()
    HealthEvent.objects.create(
        agent=agent, from_state="unknown", to_state="healthy", at=now - timedelta(hours=2)
    )
    HealthEvent.objects.create(
        agent=agent,
        kind="breaker",
        from_state="closed",
        to_state="open",
        reason="<script>5 failures</script>",
        at=now - timedelta(minutes=5),
    )

    html = client.get(reverse("agent-page", args=["weather"])).content.decode()

    events = re.search(r'<ol class="health-events">(.*?)</ol>', html, re.S).group(1)
    assert events.index("<strong>open</strong>") < events.index("<strong>healthy</strong>")
    assert "&lt;script&gt;5 failures&lt;/script&gt;" in events
    assert "<script>5" not in html


def test_an_agent_never_probed_shows_dashes_and_an_empty_chart(client):
    make_agent(agent_id="fresh")
    html = client.get(reverse("agent-page", args=["fresh"])).content.decode()
    assert 'Success rate</dt><dd><span class="muted">—</span>' in html
    assert "No health changes recorded yet." in html
    chart = re.search(r'<svg class="hour-chart".*?</svg>', html, re.S).group(0)
    assert "chart-ok" not in chart and "chart-latency" not in chart


def test_the_agent_page_query_count_does_not_grow_with_probes_or_events(
    client, django_assert_max_num_queries
):
    agent = make_agent(agent_id="weather")
    probes(agent, [1.0])
    with django_assert_max_num_queries(20) as few:
        client.get(reverse("agent-page", args=["weather"]))
    probes(agent, [float(n) for n in range(50)], failed=5)
    for _ in range(10):
        HealthEvent.objects.create(agent=agent, from_state="healthy", to_state="degraded")
    with django_assert_max_num_queries(20) as many:
        client.get(reverse("agent-page", args=["weather"]))
    assert len(few.captured_queries) == len(many.captured_queries)


def test_an_open_or_half_open_breaker_shows_as_a_badge(client):
    from registry.models import Agent

    make_agent(agent_id="tripped", health="healthy")
    make_agent(agent_id="fine", health="healthy")
    Agent.objects.filter(pk="tripped").update(breaker_state=Agent.Breaker.OPEN)

    html = client.get(reverse("registry-page")).content.decode()

    assert 'class="health breaker breaker-open"' in list_item(html, "tripped")
    assert "breaker" not in list_item(html, "fine")
    Agent.objects.filter(pk="tripped").update(breaker_state=Agent.Breaker.HALF_OPEN)
    page = client.get(reverse("agent-page", args=["tripped"])).content.decode()
    assert "breaker half-open" in page
