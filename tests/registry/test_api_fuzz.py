"""Schemathesis against the registry and team API, from the relay's own OpenAPI schema
(``/api/schema``, drf-spectacular), through the WSGI app: whatever it sends, the answer is never
a server error, and a refused write leaves no row behind.

Bounded: a few examples per operation (the Hypothesis profile's, tests/conftest.py) and no
deadline. The relay fetches no card from the internet meanwhile: private URLs stay refused and
every host name but the local ones fails to resolve, so a registration with a generated URL ends
in a 4xx at once.
"""

from __future__ import annotations

import socket

import pytest
import schemathesis
from django.core.wsgi import get_wsgi_application
from schemathesis.checks import not_a_server_error, response_schema_conformance

from registry.models import Agent, CardSnapshot, DeclaredExtension, Skill, Team, TeamMembership
from tests.factories import make_agent

pytestmark = [pytest.mark.django_db(transaction=True)]

schema = schemathesis.openapi.from_wsgi("/api/schema?format=json", get_wsgi_application())
API = schema.include(path_regex=r"^/a2a/(registry|skills|teams)")
ROWS = (Agent, CardSnapshot, Skill, DeclaredExtension, Team, TeamMembership)


@pytest.fixture
def fuzzing(settings, monkeypatch, transactional_db):
    """An admin key, two agents and a team to find; no rate limit, no network."""
    from registry.services import api_key_create

    settings.RELAY_ALLOW_PRIVATE_URLS = False
    settings.RELAY_RATE_LIMIT_PER_KEY = 0
    real = socket.getaddrinfo

    def local_only(host, port, *args, **kwargs):
        if host in ("127.0.0.1", "::1", "localhost"):
            return real(host, port, *args, **kwargs)
        raise socket.gaierror(socket.EAI_NONAME, "no network while fuzzing")

    monkeypatch.setattr(socket, "getaddrinfo", local_only)
    first = make_agent(agent_id="weather")
    make_agent(agent_id="news", name="News Agent")
    team = Team.objects.create(id="duo", name="Duo", default_agent=first)
    TeamMembership.objects.create(team=team, agent=first)
    _, secret = api_key_create(name="fuzzer", is_admin=True)
    return {"Authorization": f"Bearer {secret}"}


def counts() -> tuple[int, ...]:
    return tuple(model.objects.count() for model in ROWS)


@API.parametrize()
def test_the_registry_api_never_fails_and_stores_nothing_it_refuses(case, fuzzing):
    before = counts()
    response = case.call(headers=fuzzing)
    case.validate_response(response, checks=[not_a_server_error, response_schema_conformance])
    if response.status_code >= 400:
        assert counts() == before, f"{case.method} {case.path} refused, yet rows changed"
        content_type = (response.headers.get("content-type") or [""])[0]
        if not content_type.startswith("application/json"):
            # An id that is not a slug matches no URL: Django's own 404 page, not the API's.
            assert response.status_code == 404, response.text
            return
        body = response.json()
        assert set(body) == {"error"} and body["error"]["code"] and body["error"]["message"], body


def test_an_unknown_format_gets_a_404_that_says_what_went_wrong(client):
    """Found by this module's fuzzing: ``?format=null`` (a renderer the API does not have)
    answered 404 with an empty message."""
    make_agent(agent_id="weather")
    response = client.get("/a2a/registry?format=null")
    assert response.status_code == 404
    assert response.json()["error"]["message"] == "not found"
    assert client.get("/a2a/registry?format=json").status_code == 200
