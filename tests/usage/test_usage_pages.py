"""The staff usage dashboard: rendered for staff only, its rows and hourly chart from the
usage records, a drill-down to the calls and their task pages; and the same page in a real
headless Chromium, with a screenshot under var/screenshots/."""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.contrib.auth import get_user_model

from registry.services import api_key_create
from registry.usage_models import AgentPrice
from tests.browser import chromium_page, needs_chromium, overflow, screenshot
from tests.factories import make_agent
from tests.usage.test_usage_api import ended_call

PASSWORD = "browser-test-password-1"


def usage_seen():
    weather = make_agent(agent_id="weather")
    writer = make_agent(agent_id="writer")
    AgentPrice.objects.create(agent=weather, per_call=Decimal("0.02"))
    alice, _ = api_key_create(name="alice")
    calls = [ended_call(weather, alice) for _ in range(3)]
    calls.append(ended_call(writer, alice, state="failed"))
    return calls


@pytest.mark.django_db
def test_the_dashboard_is_for_staff_and_drills_down_to_the_tasks(client, admin_client):
    calls = usage_seen()

    assert client.get("/usage/").status_code == 302  # to the admin's login
    page = admin_client.get("/usage/", {"period": "week"}).content.decode()
    drilled = admin_client.get("/usage/", {"group": "agent", "id": "weather"}).content.decode()

    assert "4 calls" in page and "<svg" in page and 'class="chart-ok"' in page
    assert 'href="?period=week&amp;group=agent&amp;id=weather"' in page
    assert "0.06" in page  # weather's three calls at 0.02
    assert drilled.count('href="/tasks/') == 3
    assert drilled.count("<td>0.02</td>") == 3
    assert f'href="/tasks/{calls[0].task_id}/"' in drilled


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
@needs_chromium
def test_the_dashboard_in_a_browser(monkeypatch, live_server):
    usage_seen()
    get_user_model().objects.create_superuser("admin", "admin@example.org", PASSWORD)
    with chromium_page(monkeypatch) as page:
        page.goto(live_server.url + "/admin/login/")
        page.fill("#id_username", "admin")
        page.fill("#id_password", PASSWORD)
        page.click("input[type=submit]")
        page.wait_for_url("**/admin/")
        page.goto(live_server.url + "/usage/")
        assert page.title() == "Usage · Brass Relay"
        assert page.locator("#totals tbody tr").count() == 2
        assert page.locator("svg.hour-chart rect.chart-ok").count() >= 1
        assert overflow(page) == 0
        screenshot(page, "relay-usage")

        page.click("#totals a:text('weather')")
        page.wait_for_url("**id=weather")
        assert page.locator("#calls tbody tr").count() == 3
        screenshot(page, "relay-usage-agent")
