"""Registering an MCP server from the admin: the same form as agents, with the MCP server box
ticked; a URL that is no MCP server is a form error, not a 500."""

from __future__ import annotations

import pytest
from django.urls import reverse

from registry.models import Agent
from tests.registry.test_mcp_servers_as_agents import unit_tools_app
from tests.servers import running


@pytest.fixture(scope="module")
def mcp_url():
    with running(unit_tools_app()) as url:
        yield f"{url}/mcp"


def test_the_admin_registers_an_mcp_server_with_its_tools_as_skills(
    admin_client, allow_private_urls, mcp_url
):
    response = admin_client.post(
        reverse("admin:registry_agent_add"),
        {"url": mcp_url, "agent_id": "tools", "invocation_url": "", "mcp_server": "on"},
    )

    assert response.status_code == 302, response.content.decode()[:2000]
    agent = Agent.objects.get(pk="tools")
    assert agent.mcp_server
    assert agent.card_url == mcp_url
    assert set(agent.skills.values_list("skill_id", flat=True)) == {
        "celsius_to_fahrenheit",
        "shout",
        "refuse",
    }
    page = admin_client.get(reverse("admin:registry_agent_change", args=["tools"]))
    assert page.status_code == 200


def test_a_url_that_is_no_mcp_server_is_a_form_error(admin_client, allow_private_urls):
    with running(unit_tools_app()) as url:
        response = admin_client.post(
            reverse("admin:registry_agent_add"),
            {"url": f"{url}/not-mcp", "agent_id": "nope", "mcp_server": "on"},
        )

    assert response.status_code == 200
    assert "did not answer as an MCP server" in response.content.decode()
    assert not Agent.objects.filter(pk="nope").exists()


@pytest.mark.django_db
def test_an_mcp_server_on_a_private_address_is_refused_as_unsafe(settings, mcp_url):
    from registry import services

    settings.RELAY_ALLOW_PRIVATE_URLS = False
    with pytest.raises(services.RegistryError) as refused:
        services.agent_register(url=mcp_url, agent_id="private", mcp_server=True)

    assert refused.value.code == "unsafe_url"
    assert "127.0.0.1" in refused.value.message
    assert not Agent.objects.filter(pk="private").exists()
