"""The analytics dashboard and one drill-down in a real headless Chromium at 1280 px, served
by pytest-django's live server, with a day of usage in the roll-ups. Each test keeps a
full-page screenshot under var/screenshots/ and checks the page is no wider than the window."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone

from tasks_app.models import UsageHour
from tasks_app.usage import rollups
from tests.browser import chromium_page, needs_chromium, overflow, screenshot
from tests.routing.test_analytics_pages import load

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True), needs_chromium]

PASSWORD = "browser-test-password-1"


@pytest.fixture
def page(monkeypatch):
    with chromium_page(monkeypatch) as opened:
        yield opened


@pytest.fixture
def usage():
    """The page tests' load, and a day of earlier hours with a varying volume, a failing
    stretch and a slow one, so every chart has a shape."""
    agents, key_a, key_b = load(agent_count=4)
    now = timezone.now()
    for hours_ago in range(6, 24):
        calls = 20 + (hours_ago * 7) % 30
        failed = 6 if 10 <= hours_ago <= 12 else 1
        slow = 14 <= hours_ago <= 16
        for index, agent in enumerate(agents):
            UsageHour.objects.create(
                hour=rollups.hour_start(now - timedelta(hours=hours_ago)),
                caller=key_a if index % 2 else key_b,
                target_kind="agent",
                target_id=agent.pk,
                agent_id=agent.pk,
                calls=calls - index * 3,
                completed=calls - index * 3 - failed,
                failed=failed,
                latency_sum_ms=(calls - index * 3) * 180,
                latency_p50_ms=150 + index * 20 + (400 if slow else 0),
                latency_p95_ms=420 + index * 40 + (900 if slow else 0),
                cost=Decimal("0.015") * (calls - index * 3),
            )
    return agents, key_a, key_b


def log_in(page, live_server) -> None:
    get_user_model().objects.create_superuser("admin", "admin@example.com", PASSWORD)
    page.goto(live_server.url + "/admin/login/")
    page.fill("#id_username", "admin")
    page.fill("#id_password", PASSWORD)
    page.click("input[type=submit]")
    page.wait_for_url("**/admin/")


def test_dashboard_and_a_drill_down(page, live_server, usage):
    (first, *_), _, key_b = usage
    log_in(page, live_server)
    page.goto(live_server.url + "/")
    page.click("nav.site-nav >> text=Analytics")
    page.wait_for_load_state()
    assert page.url == live_server.url + "/analytics/"
    assert page.locator("svg.hour-chart").count() == 4
    # Calls in 22 of the 24 hours: none this hour nor four hours ago.
    assert page.locator("svg.hour-chart rect.chart-ok").count() == 22
    assert page.locator("polyline.chart-line-p95").count() == 1
    calls = page.inner_text('[data-total="calls"]')
    assert int(calls) > 1000
    assert overflow(page) == 0
    screenshot(page, "relay-analytics")

    page.click("nav.range-picker >> text=7 days")
    page.wait_for_load_state()
    assert page.url.endswith("?range=7d")
    assert page.inner_text('[data-total="calls"]') == calls  # the same day, wider range
    page.goto(live_server.url + "/analytics/?range=24h")
    page.click(f'#by-agent tr[data-key="{first.pk}"] td.row-name a')
    page.wait_for_load_state()
    assert page.url.endswith(f"?range=24h&agent={first.pk}")
    assert int(page.inner_text('[data-total="calls"]')) < int(calls)
    assert overflow(page) == 0
    screenshot(page, "relay-analytics-agent")
    page.click("text=← The whole relay")
    page.wait_for_load_state()

    page.click(f'#by-key tr[data-key="{key_b.pk}"] td.row-calls a')
    page.wait_for_load_state()
    assert "/analytics/tasks/" in page.url
    rows = page.locator("tr[data-task]")
    assert rows.count() == 3  # key beta's raw calls: its rolled-up history has no tasks
    assert page.locator("tr[data-task] >> text=failed").count() == 1
    assert overflow(page) == 0
    screenshot(page, "relay-analytics-calls")
    page.click("nav.range-picker >> text=30 days")
    page.wait_for_load_state()
    assert page.url.endswith(f"?key={key_b.pk}&range=30d")
    assert page.locator("tr[data-task]").count() == 3

    rows.first.locator("td.row-name a").first.click()
    assert "/tasks/" in page.url and "/analytics/" not in page.url
