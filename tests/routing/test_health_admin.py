"""Health in the admin: the agent's latest probe results and health events on its change page,
and read-only, filterable lists of every probe result and event."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from routing.models import HealthEvent, ProbeResult
from tests.factories import make_agent

pytestmark = pytest.mark.django_db


def test_the_agent_page_shows_the_latest_50_probes_and_events(admin_client):
    agent = make_agent(agent_id="weather")
    now = timezone.now()
    for minute in range(60):
        ProbeResult.objects.create(
            agent=agent,
            level="transport",
            ok=minute != 0,
            category="" if minute else "timeout",
            latency_ms=minute,
            detail=f"probe-{minute:02d}",
            checked_at=now - timedelta(minutes=minute),
        )
    HealthEvent.objects.create(
        agent=agent, from_state="healthy", to_state="unhealthy", reason="<b>3 failures</b>"
    )

    html = admin_client.get(
        reverse("admin:registry_agent_change", args=["weather"])
    ).content.decode()

    assert "Health history" in html
    assert "probe-00" in html and "probe-49" in html
    assert "probe-50" not in html  # older than the latest 50
    assert html.index("probe-00") < html.index("probe-01")  # newest first
    assert "healthy → unhealthy" in html
    assert "&lt;b&gt;3 failures&lt;/b&gt;" in html
    assert reverse("admin:routing_proberesult_changelist") + "?agent__id__exact=weather" in html


def test_probe_results_are_listed_read_only_with_filters(admin_client):
    weather, other = make_agent(agent_id="weather"), make_agent(agent_id="other")
    ProbeResult.objects.create(
        agent=weather, level="card", ok=False, category="refused", detail="weather-refused"
    )
    ProbeResult.objects.create(agent=weather, level="transport", ok=True, detail="weather-ok")
    ProbeResult.objects.create(agent=other, level="card", ok=True, detail="other-ok")
    changelist = reverse("admin:routing_proberesult_changelist")

    everything = admin_client.get(changelist).content.decode()
    assert all(text in everything for text in ("weather-refused", "weather-ok", "other-ok"))
    failed = admin_client.get(changelist, {"agent__id__exact": "weather", "ok__exact": "0"})
    assert "weather-refused" in failed.content.decode()
    assert "weather-ok" not in failed.content.decode()
    by_level = admin_client.get(changelist, {"level__exact": "card", "category__exact": ""})
    assert "other-ok" in by_level.content.decode()
    assert "weather-refused" not in by_level.content.decode()

    result = ProbeResult.objects.first()
    assert admin_client.get(reverse("admin:routing_proberesult_add")).status_code == 403
    change = admin_client.post(
        reverse("admin:routing_proberesult_change", args=[result.pk]), {"detail": "rewritten"}
    )
    assert change.status_code == 403
    assert (
        admin_client.post(
            reverse("admin:routing_proberesult_delete", args=[result.pk]), {"post": "yes"}
        ).status_code
        == 403
    )
    assert ProbeResult.objects.filter(detail="rewritten").count() == 0
    assert ProbeResult.objects.count() == 3


def test_health_events_are_listed_read_only_with_filters(admin_client):
    agent = make_agent(agent_id="weather")
    HealthEvent.objects.create(
        agent=agent, kind="breaker", from_state="closed", to_state="open", reason="breaker-opened"
    )
    HealthEvent.objects.create(
        agent=agent, kind="health", from_state="unknown", to_state="healthy", reason="first-probe"
    )
    changelist = reverse("admin:routing_healthevent_changelist")

    breakers = admin_client.get(changelist, {"kind": "breaker"}).content.decode()
    assert "breaker-opened" in breakers and "first-probe" not in breakers
    healthy = admin_client.get(changelist, {"to_state": "healthy"}).content.decode()
    assert "first-probe" in healthy and "breaker-opened" not in healthy
    event = HealthEvent.objects.first()
    assert admin_client.get(reverse("admin:routing_healthevent_add")).status_code == 403
    assert (
        admin_client.post(
            reverse("admin:routing_healthevent_delete", args=[event.pk]), {"post": "yes"}
        ).status_code
        == 403
    )
    assert HealthEvent.objects.count() == 2
