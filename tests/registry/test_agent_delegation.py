"""An agent's delegation mode (docs/guides/identity.md, Delegated tokens): set through the
registry API and the admin; never a token, only where the agent's token comes from."""

from __future__ import annotations

import pytest
from django.urls import reverse

from registry.models import Agent
from registry.services import DELEGATION_FIELDS
from tests.factories import make_agent

pytestmark = pytest.mark.django_db


def owned(api_key) -> Agent:
    agent = make_agent(agent_id="weather")
    Agent.objects.filter(pk=agent.pk).update(created_by=api_key[0])
    return agent


def test_the_mode_is_none_by_default_and_changed_through_the_api(api, api_key):
    owned(api_key)
    assert api.get("/a2a/registry/weather").json()["delegation"] == {
        "mode": "none",
        "audience": "",
        "tokenUrl": "",
        "scopes": "",
        "narrow": True,
    }
    response = api.patch(
        "/a2a/registry/weather",
        {
            "delegation": {
                "mode": "exchange",
                "audience": "weather-api",
                "tokenUrl": "https://idp.example.com/token",
                "scopes": "weather:read",
                "narrow": False,
            }
        },
        format="json",
    )
    assert response.status_code == 200, response.content
    assert response.json()["delegation"]["mode"] == "exchange"
    agent = Agent.objects.get(pk="weather")
    assert (agent.delegation_mode, agent.delegation_audience, agent.delegation_narrow) == (
        "exchange",
        "weather-api",
        False,
    )
    assert agent.delegation_token_url == "https://idp.example.com/token"


@pytest.mark.parametrize(
    "delegation", [{"mode": "forward"}, {"tokenUrl": "ftp://idp.example.com/token"}]
)
def test_a_bad_delegation_is_a_400_and_changes_nothing(api, api_key, delegation):
    owned(api_key)
    response = api.patch("/a2a/registry/weather", {"delegation": delegation}, format="json")
    assert response.status_code == 400, response.content
    agent = Agent.objects.get(pk="weather")
    assert (agent.delegation_mode, agent.delegation_token_url) == ("none", "")


def test_the_admin_change_page_has_the_delegation_fieldset(admin_client):
    make_agent(agent_id="weather")
    page = admin_client.get(reverse("admin:registry_agent_change", args=["weather"]))
    html = page.content.decode()
    assert "Delegation" in html
    for name in DELEGATION_FIELDS:
        assert f'name="{name}"' in html
