"""What people see of health: the registry API's ``health`` (with the breaker), the health
filter after a real sweep, and the per-agent probe settings in the admin."""

from __future__ import annotations

import pytest
from django.urls import reverse

from registry.models import Agent
from routing import health_services
from tests.factories import make_agent
from tests.registry.test_admin import form_data
from tests.servers import closed_port_url

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_registry_api_shows_health_with_the_breaker_after_a_sweep(
    anonymous, allow_private_urls
):
    url = closed_port_url()
    make_agent(
        url=url,
        agent_id="down",
        supportedInterfaces=[
            {"url": url + "/rpc", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}
        ],
    )
    make_agent(agent_id="unprobed")
    health_services.sweep_now(agent_ids=["down"])

    body = anonymous.get("/a2a/registry/down").json()

    health = body["health"]
    assert health["state"] == "degraded"
    assert health["checkedAt"] and health["nextCheckAt"] > health["checkedAt"]
    assert health["consecutiveFailures"] == 1
    assert "refused the connection" in health["detail"]
    assert health["breaker"] == {"state": "closed", "failures": 0, "openedAt": None}
    listed = anonymous.get("/a2a/registry", {"health": "degraded"}).json()["agents"]
    assert [agent["id"] for agent in listed] == ["down"]
    assert anonymous.get("/a2a/registry/unprobed").json()["health"]["state"] == "unknown"


def test_the_health_filter_refuses_an_unknown_state_with_a_400(anonymous):
    response = anonymous.get("/a2a/registry", {"health": "sleepy"})
    assert response.status_code == 400
    assert "health must be one of" in response.json()["error"]["message"]


@pytest.fixture
def staff(admin_client):
    make_agent(agent_id="probed")
    return admin_client


def test_the_admin_edits_an_agents_probe_settings(staff):
    Agent.objects.filter(pk="probed").update(next_probe_at="2030-01-01T00:00:00Z")
    url = reverse("admin:registry_agent_change", args=["probed"])
    page = staff.get(url)
    assert "Probes" in page.content.decode()
    data = form_data(page, "agent_form") | {
        "probe_interval_seconds": "60",
        "probe_timeout_seconds": "2.5",
        "readiness_probe": "on",
        "readiness_message": "status?",
        "scale_to_zero": "on",
        "scale_to_zero_probes": "none",
    }

    response = staff.post(url, data)

    assert response.status_code == 302
    agent = Agent.objects.get(pk="probed")
    assert (agent.probe_interval_seconds, agent.probe_timeout_seconds) == (60, 2.5)
    assert agent.readiness_probe and agent.readiness_message == "status?"
    assert agent.scale_to_zero and agent.scale_to_zero_probes == "none"
    assert agent.next_probe_at is None, "new probe settings apply at the next sweep"


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("probe_interval_seconds", "0", "at most once a second"),
        ("probe_timeout_seconds", "0", "above 0"),
        ("probe_timeout_seconds", "301", "at most 300"),
    ],
)
def test_the_admin_refuses_probe_settings_that_make_no_sense(staff, field, value, message):
    url = reverse("admin:registry_agent_change", args=["probed"])
    data = form_data(staff.get(url), "agent_form") | {field: value}

    response = staff.post(url, data)

    assert response.status_code == 200
    assert message in response.content.decode()
    assert getattr(Agent.objects.get(pk="probed"), field) is None
