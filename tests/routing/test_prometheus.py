"""``GET /metrics``: parseable Prometheus text with the relay's tasks, agents, probes and its own
HTTP traffic (counted by the ASGI middleware), behind RELAY_METRICS_PUBLIC."""

from __future__ import annotations

from datetime import timedelta

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth import get_user_model
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from registry.models import Agent
from registry.services import api_key_create
from relay_project.request_metrics import REQUESTS, route_kind
from routing.models import ProbeResult
from tasks_app.lifecycle import TaskState
from tests.factories import make_agent, make_task
from tests.tasks_app.a2a_http import relay_client


@pytest.fixture(autouse=True)
def public_metrics(settings):
    """The embedded profile's default, whatever profile the suite runs in (DATABASE_URL set
    turns it off); tests of the closed endpoint turn it off themselves."""
    settings.RELAY_METRICS_PUBLIC = True


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of an exposition as {(name, sorted labels): value}."""
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def value(found, name: str, **labels: str) -> float | None:
    return found.get((name, tuple(sorted(labels.items()))))


@pytest.mark.django_db
def test_metrics_show_tasks_agents_breakers_and_last_hour_probes(anonymous):
    weather = make_agent(agent_id="weather", health="healthy")
    slow = make_agent(agent_id="slow", health="degraded")
    Agent.objects.filter(pk=slow.pk).update(
        breaker_state=Agent.Breaker.OPEN, health_latency_ms=1500.0
    )
    make_task(weather, state=TaskState.WORKING)
    make_task(weather, state=TaskState.COMPLETED)
    make_task(slow, state=TaskState.COMPLETED)
    now = timezone.now()
    for ok, category in [(True, ""), (True, ""), (False, "timeout")]:
        ProbeResult.objects.create(
            agent=weather,
            level="transport",
            ok=ok,
            category=category,
            latency_ms=20.0,
            checked_at=now - timedelta(minutes=5),
        )
    ProbeResult.objects.create(
        agent=weather, level="card", ok=True, latency_ms=5.0, checked_at=now - timedelta(hours=2)
    )  # older than an hour

    response = anonymous.get("/metrics")

    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/plain; version=0.0.4")
    found = samples(response.content.decode())
    assert value(found, "relay_database_up") == 1
    assert value(found, "relay_tasks", state="completed") == 2
    assert value(found, "relay_tasks", state="working") == 1
    assert value(found, "relay_tasks", state="failed") == 0
    assert value(found, "relay_agents", health="healthy") == 1
    assert value(found, "relay_agents", health="degraded") == 1
    assert value(found, "relay_agents", health="unhealthy") == 0
    assert value(found, "relay_agent_breakers", state="open") == 1
    assert value(found, "relay_agent_breakers", state="closed") == 1
    assert value(found, "relay_agent_health", agent="slow", state="degraded") == 1
    assert value(found, "relay_agent_health", agent="slow", state="healthy") == 0
    assert value(found, "relay_agent_latency_seconds", agent="slow") == 1.5
    assert value(found, "relay_probe_results_last_hour", level="transport", outcome="ok") == 2
    assert value(found, "relay_probe_results_last_hour", level="transport", outcome="timeout") == 1
    assert value(found, "relay_probe_results_last_hour", level="card", outcome="ok") is None


@pytest.mark.django_db
def test_a_scrape_reads_the_database_in_three_queries(anonymous, django_assert_num_queries):
    for index in range(3):
        make_agent(agent_id=f"agent-{index}")
    with django_assert_num_queries(3):
        assert anonymous.get("/metrics").status_code == 200


@pytest.mark.django_db
def test_private_metrics_need_an_admin_key_or_staff(anonymous, api, settings, client):
    settings.RELAY_METRICS_PUBLIC = False
    assert anonymous.get("/metrics").status_code == 401
    refused = api.get("/metrics")  # an ordinary key
    assert refused.status_code == 403
    assert "RELAY_METRICS_PUBLIC" in refused.json()["error"]["message"]
    _, admin_secret = api_key_create(name="scraper", is_admin=True)
    assert anonymous.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {admin_secret}").status_code == 200
    staff = get_user_model().objects.create_user("ops", password="pw-12345678", is_staff=True)
    client.force_login(staff)
    assert client.get("/metrics").status_code == 200


@pytest.mark.parametrize(
    ("path", "kind"),
    [
        ("/a2a/agents/weather/", "a2a"),
        ("/a2a/agents/weather/tasks/abc", "a2a"),
        ("/a2a/agents/weather/.well-known/agent-card.json", "a2a"),
        ("/a2a/relay/", "a2a"),
        ("/a2a/registry", "api"),
        ("/a2a/agents/weather/metrics", "api"),
        ("/a2a/tasks/abc/trace", "api"),
        ("/api/schema", "api"),
        ("/metrics", "metrics"),
        ("/", "pages"),
        ("/agents/weather/", "pages"),
        ("/admin/", "pages"),
    ],
)
def test_requests_are_counted_by_route_kind(path, kind):
    assert route_kind({"path": path, "method": "GET"}) == kind


def counted(kind: str, status: str) -> float:
    return REQUESTS.labels(kind, status)._value.get()


@pytest.mark.django_db(transaction=True)
async def test_requests_through_the_asgi_application_are_counted_with_their_status():
    agent = await sync_to_async(make_agent)(agent_id="counted")
    before = {
        key: counted(*key)
        for key in [("api", "200"), ("api", "404"), ("pages", "200"), ("a2a", "401")]
    }
    async with relay_client() as client:
        assert (await client.get(f"/a2a/registry/{agent.pk}")).status_code == 200
        assert (await client.get("/a2a/registry/nobody")).status_code == 404
        assert (await client.get("/")).status_code == 200
        unauthenticated = await client.post(
            f"/a2a/agents/{agent.pk}/",
            json={"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "x"}},
        )
        assert unauthenticated.status_code == 401
        scrape = await client.get("/metrics")
    found = samples(scrape.text)
    for (kind, status), was in before.items():
        assert counted(kind, status) == was + 1, (kind, status)
        assert value(found, "relay_http_requests_total", kind=kind, status=status) == was + 1
    histogram_count = value(found, "relay_http_request_duration_seconds_count", kind="api")
    assert histogram_count is not None and histogram_count >= 2


@pytest.mark.parametrize(
    ("environment", "public"),
    [
        ({}, "True"),
        ({"DATABASE_URL": "postgres://relay@127.0.0.1:5432/relay"}, "False"),
        ({"REDIS_URL": "redis://127.0.0.1:6379/0"}, "False"),
        ({"REDIS_URL": "redis://127.0.0.1:6379/0", "RELAY_METRICS_PUBLIC": "true"}, "True"),
    ],
)
def test_metrics_are_public_by_default_only_in_the_embedded_profile(environment, public, tmp_path):
    import os
    import subprocess
    import sys

    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("DATABASE_URL", "REDIS_URL", "RELAY_"))
    }
    env.update(
        environment, RELAY_VAR_DIR=str(tmp_path), DJANGO_SETTINGS_MODULE="relay_project.settings"
    )
    shown = subprocess.run(
        [
            sys.executable,
            "-c",
            "from django.conf import settings; print(settings.RELAY_METRICS_PUBLIC)",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert shown.stdout.strip() == public
