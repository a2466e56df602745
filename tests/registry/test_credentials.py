"""Upstream credentials: bearer, API key header and basic, given through the registry API or
the admin, stored encrypted, never returned or logged, and sent to the agent on card fetches
and on calls through the gateway, to real agent servers on 127.0.0.1 that refuse anyone
without them."""

from __future__ import annotations

import base64
import json
import logging

import pytest
from asgiref.sync import sync_to_async
from django.urls import reverse
from rest_framework.test import APIClient
from starlette.responses import Response

from registry import secrets
from registry.models import Agent, AuditEntry
from registry.services import (
    Credentials,
    agent_update,
    api_key_create,
    credential_headers,
    upstream_auth_headers,
)
from tests.agents import v1_only_agent
from tests.factories import make_agent
from tests.live import Recording
from tests.registry.test_admin import form_data
from tests.servers import running
from tests.tasks_app.a2a_http import JSONRPC_1, relay_client

pytestmark = pytest.mark.usefixtures("allow_private_urls")

SECRET = "s3cret-Value-9f8e7d"
KINDS = {
    "bearer": ({"kind": "bearer", "value": SECRET}, "authorization", f"Bearer {SECRET}"),
    "header": (
        {"kind": "header", "headerName": "X-Agent-Key", "value": SECRET},
        "x-agent-key",
        SECRET,
    ),
    "basic": (
        {"kind": "basic", "value": f"relay:{SECRET}"},
        "authorization",
        "Basic " + base64.b64encode(f"relay:{SECRET}".encode()).decode(),
    ),
    "legacy": ({"headerName": "X-Agent-Key", "headerValue": SECRET}, "x-agent-key", SECRET),
}


def guarded(header: str, value: str, recording: Recording):
    """An agent (the 1.0 echo agent) that answers 401 to any request without ``header:
    value``, card fetches included, behind a Recording of what reached it."""

    def factory(base_url: str):
        inner = recording(base_url)

        async def app(scope, receive, send):
            if scope["type"] == "http":
                sent = dict(scope["headers"]).get(header.encode())
                if sent != value.encode():
                    return await Response("who are you?", status_code=401)(scope, receive, send)
            return await inner(scope, receive, send)

        return app

    return factory


def client_with_key() -> tuple[APIClient, str]:
    _, key = api_key_create(name="owner")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
    return client, key


# --- the header each kind sends --------------------------------------------------------------


def test_each_kind_builds_its_header():
    assert credential_headers("bearer", "", "tok") == {"Authorization": "Bearer tok"}
    assert credential_headers("header", "X-Key", "v") == {"X-Key": "v"}
    assert credential_headers("basic", "", "user:pw") == {"Authorization": "Basic dXNlcjpwdw=="}
    assert credential_headers("", "X-Key", "v") == {"X-Key": "v"}, "the kind before kinds"
    assert credential_headers("bearer", "", "") == {}
    assert credential_headers("", "", "v") == {}


def test_credentials_never_show_their_value_in_a_repr():
    assert SECRET not in repr(Credentials("X-Key", SECRET, "header"))


@pytest.mark.django_db
def test_a_credential_stored_before_kinds_is_sent_as_a_header():
    agent = make_agent(agent_id="old")
    Agent.objects.filter(pk="old").update(
        auth_kind="", auth_header_name="X-Old", auth_header_value=secrets.encrypt("v1")
    )
    agent.refresh_from_db()

    assert upstream_auth_headers(agent) == {"X-Old": "v1"}
    assert agent.credential_kind == "header"


# --- end to end: card fetch and call ---------------------------------------------------------


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("kind", list(KINDS))
async def test_each_kind_reaches_the_agent_on_card_fetch_and_on_calls(kind, caplog):
    body, header, value = KINDS[kind]
    recording = Recording(v1_only_agent)
    caplog.set_level(logging.DEBUG)
    for name in ("httpx", "httpcore", "registry", "tasks_app", "relay_project", "django"):
        caplog.set_level(logging.DEBUG, logger=name)  # httpx and httpcore are quiet otherwise
    with running(guarded(header, value, recording)) as url:
        client, key = await sync_to_async(client_with_key)()

        registered = await sync_to_async(client.post)(
            "/a2a/registry", {"url": url, "id": "guarded", "credentials": body}, format="json"
        )
        assert registered.status_code == 201, registered.content
        async with relay_client() as relay:
            answered = await relay.post(
                "/a2a/agents/guarded/", json=JSONRPC_1.send().body, headers=JSONRPC_1.headers(key)
            )
        refreshed = await sync_to_async(client.post)("/a2a/registry/guarded/refresh")

    assert answered.status_code == 200 and "result" in answered.json(), answered.text
    assert refreshed.status_code == 200, refreshed.content
    assert {r.method for r in recording.requests} == {"GET", "POST"}
    assert all(r.headers[header] == value for r in recording.requests)
    entry = registered.json()
    assert entry["hasCredentials"] is True
    assert entry["credentialKind"] == ("header" if kind == "legacy" else kind)
    # Everything logged in this process but by the agent itself (the a2a-sdk server, which logs
    # the headers it receives at DEBUG, runs here only because the test serves it): the relay,
    # Django, httpx and httpcore.
    relay_log = "\n".join(
        record.getMessage()
        for record in caplog.records
        if not record.name.startswith(("a2a.", "uvicorn"))
    )
    assert "HTTP Request" in relay_log, "httpx's request log is in what is checked"
    for text in (registered.content.decode(), refreshed.content.decode(), answered.text, relay_log):
        assert SECRET not in text
    stored = await sync_to_async(Agent.objects.get)(pk="guarded")
    assert SECRET not in stored.auth_header_value
    audit = await sync_to_async(
        lambda: list(
            AuditEntry.objects.filter(object_id="guarded").values_list("changes", flat=True)
        )
    )()
    assert SECRET not in json.dumps(audit)


@pytest.mark.django_db(transaction=True)
async def test_without_its_credential_the_agent_refuses_and_nothing_is_stored():
    recording = Recording(v1_only_agent)
    with running(guarded("authorization", f"Bearer {SECRET}", recording)) as url:
        client, _ = await sync_to_async(client_with_key)()
        wrong = await sync_to_async(client.post)(
            "/a2a/registry",
            {"url": url, "credentials": {"kind": "bearer", "value": "nope"}},
            format="json",
        )

    assert wrong.status_code == 422
    assert wrong.json()["error"]["code"] == "upstream_error"
    assert await sync_to_async(Agent.objects.count)() == 0
    assert await sync_to_async(AuditEntry.objects.filter(object_type="agent").count)() == 0


# --- the API ----------------------------------------------------------------------------------


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("credentials", "field"),
    [
        ({"kind": "header", "value": "v"}, "headerName"),
        ({"kind": "bearer", "headerName": "X-Key", "value": "v"}, "headerName"),
        ({"kind": "basic", "value": "no-colon"}, "value"),
        ({"kind": "bearer", "value": "line\r\nX-Injected: 1"}, "value"),
        ({"kind": "bearer"}, "value"),
        ({"kind": "bearer", "value": "a", "headerValue": "b"}, "value"),
        ({"kind": "oauth", "value": "v"}, "kind"),
        ({"headerName": "bad header", "headerValue": "v"}, "headerName"),
    ],
    ids=[
        "header-without-name",
        "bearer-with-name",
        "basic-without-colon",
        "line-break",
        "no-value",
        "two-values",
        "unknown-kind",
        "bad-header-name",
    ],
)
def test_the_api_refuses_bad_credentials_and_changes_nothing(credentials, field):
    agent = make_agent(agent_id="weather")
    client, _ = client_with_key()
    Agent.objects.filter(pk="weather").update(created_by=None)
    admin_key = api_key_create(name="admin", is_admin=True)[1]
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {admin_key}")

    response = client.patch("/a2a/registry/weather", {"credentials": credentials}, format="json")

    assert response.status_code == 400, response.content
    error = response.json()["error"]
    assert error["code"] == "invalid_request"
    assert field in json.dumps(error["fields"])
    agent.refresh_from_db()
    assert (agent.auth_kind, agent.auth_header_value) == ("", "")
    assert not AuditEntry.objects.filter(action="update").exists()


@pytest.mark.django_db
def test_patching_credentials_changes_the_kind_and_never_returns_the_value():
    make_agent(agent_id="weather")
    client = APIClient()
    client.credentials(
        HTTP_AUTHORIZATION=f"Bearer {api_key_create(name='admin', is_admin=True)[1]}"
    )

    set_bearer = client.patch(
        "/a2a/registry/weather", {"credentials": {"kind": "bearer", "value": SECRET}}, format="json"
    )
    removed = client.patch("/a2a/registry/weather", {"credentials": None}, format="json")

    assert set_bearer.status_code == 200
    assert (set_bearer.json()["hasCredentials"], set_bearer.json()["credentialKind"]) == (
        True,
        "bearer",
    )
    assert SECRET not in set_bearer.content.decode()
    assert (removed.json()["hasCredentials"], removed.json()["credentialKind"]) == (False, None)
    agent = Agent.objects.get(pk="weather")
    assert (agent.auth_kind, agent.auth_header_name, agent.auth_header_value) == ("", "", "")


# --- the admin --------------------------------------------------------------------------------


@pytest.mark.django_db
def test_the_admin_sets_a_basic_credential_and_shows_it_masked(admin_client):
    make_agent(agent_id="ledger", name="Ledger")
    url = reverse("admin:registry_agent_change", args=["ledger"])
    data = form_data(admin_client.get(url), "agent_form") | {
        "credential_kind": "basic",
        "credential_header_name": "",
        "credential_header_value": f"relay:{SECRET}",
    }

    response = admin_client.post(url, data)

    assert response.status_code == 302, response.context["errors"] if response.context else ""
    agent = Agent.objects.get(pk="ledger")
    assert upstream_auth_headers(agent) == {
        "Authorization": "Basic " + base64.b64encode(f"relay:{SECRET}".encode()).decode()
    }
    shown = admin_client.get(url).content.decode()
    assert SECRET not in shown
    assert "basic (user:password) is set (rela…)" in shown
    entry = AuditEntry.objects.get(object_id="ledger", action="update")
    assert entry.actor == "user:admin"
    assert entry.changes == {"credentials": "set (basic)"}


@pytest.mark.django_db
def test_the_admin_refuses_a_header_credential_without_a_header_name(admin_client):
    agent = make_agent(agent_id="ledger", name="Ledger")
    url = reverse("admin:registry_agent_change", args=["ledger"])
    data = form_data(admin_client.get(url), "agent_form") | {
        "credential_kind": "header",
        "credential_header_name": "",
        "credential_header_value": SECRET,
    }

    response = admin_client.post(url, data)

    assert response.status_code == 200
    assert "Name the header the value is sent in." in response.content.decode()
    agent.refresh_from_db()
    assert agent.auth_header_value == ""


@pytest.mark.django_db
def test_agent_update_keeps_credentials_out_of_the_audit_log():
    agent = make_agent(agent_id="weather")

    agent_update(
        agent=agent,
        fields={"credentials": Credentials("X-Key", SECRET, "header"), "name": "Weather 2"},
        actor="key:br_test",
    )

    entry = AuditEntry.objects.get(object_id="weather", action="update")
    assert entry.changes == {"name": "Weather 2", "credentials": "set (header)"}
    assert entry.actor == "key:br_test"


# --- probes -----------------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("kind", ["bearer", "header", "basic"])
def test_each_kind_reaches_the_agent_on_health_probes(kind):
    """The card and transport probes carry the credential: the guarded agent answers them."""
    from routing import health_services
    from routing.models import ProbeResult

    body, header, value = KINDS[kind]
    recording = Recording(v1_only_agent)
    with running(guarded(header, value, recording)) as url:
        client, _ = client_with_key()
        response = client.post(
            "/a2a/registry", {"url": url, "id": "guarded", "credentials": body}, format="json"
        )
        assert response.status_code == 201, response.content
        recording.requests.clear()
        health_services.sweep_now(agent_ids=["guarded"])
    results = {result.level: result for result in ProbeResult.objects.filter(agent_id="guarded")}
    assert {level: result.ok for level, result in results.items()} == {
        "card": True,
        "transport": True,
    }, {r.level: r.detail for r in results.values()}
    assert len(recording.requests) == 2
    assert all(request.headers.get(header) == value for request in recording.requests)
