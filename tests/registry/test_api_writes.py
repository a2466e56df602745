"""Writes to the registry API: unknown fields, URLs without a scheme, the relay registering
itself, and an agent's own 401 (never presented as the caller's)."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from registry import teams
from registry.models import Agent, AuditEntry, Team
from registry.services import api_key_create
from tests.cardservers import card_json, card_site, status
from tests.factories import card, make_agent

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("allow_private_urls")]


def refused(response, code="invalid_request", http_status=400):
    assert response.status_code == http_status, response.json()
    error = response.json()["error"]
    assert error["code"] == code, error
    assert "WWW-Authenticate" not in response
    return error


@pytest.fixture
def writer(api):
    """An agent registered by ``api``'s key."""
    with card_site({"/.well-known/agent-card.json": card_json(card(name="Writer"))}) as (_, url):
        assert (
            api.post("/a2a/registry", {"url": url, "id": "writer"}, format="json").status_code
            == 201
        )
    return Agent.objects.get(pk="writer")


# --- unknown fields -------------------------------------------------------------------------


def test_a_registration_with_an_unknown_field_is_a_400_naming_it(api):
    error = refused(
        api.post(
            "/a2a/registry",
            {"url": "http://agent.test/", "invocationURL": "http://agent.test/a2a"},
            format="json",
        )
    )

    assert error["message"] == "invocationURL: is not a field here; did you mean invocationUrl?"
    assert set(error["fields"]) == {"invocationURL"}
    assert Agent.objects.count() == 0


def test_a_patch_with_an_unknown_field_changes_nothing(api, writer):
    """Regression: PATCH {"invocationURL": ...} answered 200 and changed nothing."""
    before = Agent.objects.values().get(pk="writer")

    error = refused(
        api.patch(
            "/a2a/registry/writer",
            {"invocationURL": "http://x.test/a2a", "name": "New"},
            format="json",
        )
    )

    assert "invocationURL" in error["message"]
    assert Agent.objects.values().get(pk="writer") == before
    assert not AuditEntry.objects.filter(action="update").exists()


def test_every_unknown_field_is_named(api, writer):
    error = refused(api.patch("/a2a/registry/writer", {"colour": "red", "size": 3}, format="json"))

    assert set(error["fields"]) == {"colour", "size"}
    assert (
        "the fields are name, description, invocationUrl, status, credentials"
        in (error["fields"]["colour"][0])
    )


def test_an_unknown_field_inside_credentials_is_named(api):
    error = refused(
        api.post(
            "/a2a/registry",
            {
                "url": "http://agent.test/",
                "credentials": {"kind": "bearer", "value": "v", "token": "t"},
            },
            format="json",
        )
    )

    assert error["fields"] == {
        "credentials": {
            "token": ["is not a field here; the fields are kind, headerName, value, headerValue"]
        }
    }


def test_team_writes_refuse_unknown_fields():
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION="Bearer " + api_key_create(name="admin", is_admin=True)[1])
    make_agent(agent_id="helper")
    created = api.post(
        "/a2a/teams",
        {
            "id": "crew",
            "name": "Crew",
            "members": ["helper"],
            "defaultAgent": "helper",
            "default_agent": "helper",
        },
        format="json",
    )
    assert "did you mean defaultAgent?" in refused(created)["message"]
    assert not Team.objects.exists()

    teams.team_create(team_id="crew", name="Crew", members=["helper"], default_agent="helper")
    patched = api.patch("/a2a/teams/crew", {"maxHops": 3}, format="json")
    assert "did you mean maxRoutingHops?" in refused(patched)["message"]
    assert Team.objects.get(pk="crew").max_routing_hops == 10


# --- URLs -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "message"),
    [
        (
            "agent.example.com",
            "url: 'agent.example.com' has no scheme: write the full URL, e.g. "
            "'https://agent.example.com' (or http:// for a plain HTTP agent)",
        ),
        ("127.0.0.1:8000/admin/", "url: '127.0.0.1:8000/admin/' has no scheme"),
        ("localhost:9999", "url: 'localhost:9999' has no scheme"),
        ("ftp://agent.example.com/", "url: must be an http:// or https:// URL, not ftp://"),
    ],
)
def test_a_url_without_a_usable_scheme_is_explained(api, url, message):
    error = refused(api.post("/a2a/registry", {"url": url}, format="json"))
    assert error["message"].startswith(message)


def test_a_patched_invocation_url_without_a_scheme_is_explained(api, writer):
    error = refused(
        api.patch("/a2a/registry/writer", {"invocationUrl": "example.com/a2a"}, format="json")
    )
    assert error["message"].startswith("invocationUrl: 'example.com/a2a' has no scheme")


# --- the relay itself -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "url",
    [
        "http://localhost/admin/",  # a loopback name on the port the relay serves
        "http://localhost/",  # a loopback name on the port the relay serves
        "http://127.0.0.1:80/a2a/agents/writer/",
        "http://[::1]/",
    ],
)
def test_the_relay_cannot_register_itself(api, url):
    refused(api.post("/a2a/registry", {"url": url}, format="json"), code="relay_itself")
    assert Agent.objects.count() == 0


def test_a_self_registration_says_why(api):
    error = refused(
        api.post("/a2a/registry", {"url": "http://localhost/admin/"}, format="json"),
        code="relay_itself",
    )
    assert error["message"].startswith(
        "url http://localhost/admin/ is this relay itself (localhost:80), not an agent"
    )


def test_the_host_the_request_came_to_is_refused(api, settings):
    settings.ALLOWED_HOSTS = [*settings.ALLOWED_HOSTS, "relay.example.org"]
    response = api.post(
        "/a2a/registry",
        {"url": "http://relay.example.org:8000/admin/"},
        format="json",
        HTTP_HOST="relay.example.org:8000",
    )
    refused(response, code="relay_itself")


def test_the_public_url_of_the_relay_is_refused(api, settings):
    settings.RELAY_PUBLIC_URL = "https://relay.example.com"
    refused(
        api.post("/a2a/registry", {"url": "https://relay.example.com/agents/"}, format="json"),
        code="relay_itself",
    )
    refused(
        api.post("/a2a/registry", {"url": "https://RELAY.example.com:443/"}, format="json"),
        code="relay_itself",
    )


def test_an_invocation_url_at_the_relay_is_refused(api, writer):
    refused(
        api.post(
            "/a2a/registry",
            {"url": "http://agent.test/", "invocationUrl": "http://localhost/a2a/agents/x/"},
            format="json",
        ),
        code="relay_itself",
    )
    refused(
        api.patch(
            "/a2a/registry/writer",
            {"invocationUrl": "http://127.0.0.1/a2a/agents/writer/"},
            format="json",
        ),
        code="relay_itself",
    )
    assert Agent.objects.get(pk="writer").invocation_url == ""


def test_another_port_on_the_same_machine_is_an_agent(api):
    with card_site({"/.well-known/agent-card.json": card_json(card())}) as (_, url):
        assert url.startswith("http://127.0.0.1:")
        assert api.post("/a2a/registry", {"url": url}, format="json").status_code == 201


# --- an agent's 401 is the agent's ----------------------------------------------------------


@pytest.mark.parametrize("code", [401, 403])
def test_an_agent_refusing_the_card_fetch_is_not_the_callers_401(api, code):
    with card_site({"/.well-known/agent-card.json": status(code)}) as (_, url):
        response = api.post("/a2a/registry", {"url": url}, format="json")

    error = refused(response, code="upstream_error", http_status=422)
    assert f"answered HTTP {code}: it refused the relay" in error["message"]
    assert "credentials" in error["message"]


def test_an_agent_refusing_a_refresh_is_not_the_callers_401(api):
    site_routes = {"/.well-known/agent-card.json": card_json(card(name="Guarded"))}
    with card_site(site_routes) as (site, url):
        assert (
            api.post("/a2a/registry", {"url": url, "id": "guarded"}, format="json").status_code
            == 201
        )
        site.routes["/.well-known/agent-card.json"] = status(401)
        response = api.post("/a2a/registry/guarded/refresh")

    error = refused(response, code="upstream_error", http_status=422)
    assert "answered HTTP 401" in error["message"]
