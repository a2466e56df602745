"""API key scopes on the registry, the create_api_key flags, the key admin, the audit log, and
the security schemes the relay's cards declare."""

from __future__ import annotations

import copy
from datetime import timedelta

import pytest
from a2a.client.card_resolver import parse_agent_card
from a2a.compat.v0_3 import types as types_v03
from django.core.management import CommandError, call_command
from django.urls import reverse
from django.utils import timezone
from rest_framework.test import APIClient

from registry import services, teams
from registry.auth import key_may_call
from registry.models import Agent, ApiKey, AuditEntry, Team
from tests.cardservers import card_json, card_site
from tests.factories import make_agent
from tests.registry.test_cards import card_v1

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("allow_private_urls")]

NO_KEY_CHALLENGE = 'Bearer realm="brass-relay"'
BAD_KEY_CHALLENGE = 'Bearer realm="brass-relay", error="invalid_token"'


def client_for(**scope) -> tuple[APIClient, ApiKey]:
    api_key, secret = services.api_key_create(name="caller", **scope)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {secret}")
    return client, api_key


@pytest.fixture(scope="module")
def card_url():
    with card_site({"/.well-known/agent-card.json": card_json(card_v1())}) as (_, url):
        yield url


@pytest.fixture
def weather():
    return make_agent(agent_id="weather", name="Weather")


# --- registry reads ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "path",
    [
        "/a2a/registry",
        "/a2a/registry/weather",
        "/a2a/skills",
        "/a2a/teams",
        "/a2a/registry/weather/history",
    ],
)
def test_a_private_registry_answers_each_caller_as_documented(weather, settings, path):
    settings.RELAY_REGISTRY_PUBLIC = False
    reader, _ = client_for()
    blind, _ = client_for(can_read_registry=False)
    admin, _ = client_for(can_read_registry=False, is_admin=True)
    revoked, revoked_key = client_for()
    services.api_key_revoke(api_key=revoked_key)

    anonymous = APIClient().get(path)
    refused = blind.get(path)
    gone = revoked.get(path)

    assert (anonymous.status_code, anonymous["WWW-Authenticate"]) == (401, NO_KEY_CHALLENGE)
    assert anonymous.json()["error"]["code"] == "not_authenticated"
    assert (gone.status_code, gone["WWW-Authenticate"]) == (401, BAD_KEY_CHALLENGE)
    assert gone.json()["error"] == {
        "code": "authentication_failed",
        "message": "invalid, revoked or expired API key",
    }
    assert refused.status_code == 403
    assert refused.json()["error"]["message"] == "this API key may not read the registry"
    assert reader.get(path).status_code == 200
    assert admin.get(path).status_code == 200


def test_a_public_registry_lets_anyone_read_even_a_key_without_the_read_scope(weather, settings):
    settings.RELAY_REGISTRY_PUBLIC = True
    blind, _ = client_for(can_read_registry=False)

    assert APIClient().get("/a2a/registry").status_code == 200
    assert blind.get("/a2a/registry/weather").status_code == 200


def test_the_registry_lists_agents_a_key_may_not_call(weather, settings):
    """A discovery directory: the agent scope limits calls, not what a key may find."""
    settings.RELAY_REGISTRY_PUBLIC = False
    other = make_agent(agent_id="other", name="Other")
    scoped, _ = client_for(agents=[other.pk])

    listed = [agent["id"] for agent in scoped.get("/a2a/registry").json()["agents"]]

    assert listed == ["other", "weather"]


# --- registry writes --------------------------------------------------------------------------


def test_a_key_that_may_not_register_is_refused_and_nothing_is_stored(card_url):
    client, _ = client_for(can_register=False)

    response = client.post("/a2a/registry", {"url": card_url}, format="json")

    assert response.status_code == 403
    assert response.json()["error"] == {
        "code": "permission_denied",
        "message": "this API key may not register agents",
    }
    assert Agent.objects.count() == 0
    assert AuditEntry.objects.count() == 1, "only the key's own creation"


@pytest.mark.parametrize("secret", ["", "br_unknown", "revoked", "expired"])
def test_registering_without_a_usable_key_is_401_and_stores_nothing(card_url, secret):
    client = APIClient()
    if secret in ("revoked", "expired"):
        api_key, secret_value = services.api_key_create(name=secret)
        if secret == "revoked":
            services.api_key_revoke(api_key=api_key)
        else:
            ApiKey.objects.filter(pk=api_key.pk).update(
                expires_at=timezone.now() - timedelta(seconds=1)
            )
        secret = secret_value
    if secret:
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {secret}")
    entries = AuditEntry.objects.count()

    response = client.post("/a2a/registry", {"url": card_url}, format="json")

    assert response.status_code == 401
    assert response["WWW-Authenticate"] == (BAD_KEY_CHALLENGE if secret else NO_KEY_CHALLENGE)
    assert Agent.objects.count() == 0
    assert AuditEntry.objects.count() == entries


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("patch", "/a2a/registry/weather"),
        ("delete", "/a2a/registry/weather"),
        ("post", "/a2a/registry/weather/refresh"),
    ],
)
def test_only_the_registering_key_or_an_admin_key_may_change_an_agent(card_url, method, path):
    owner, _ = client_for()
    stranger, _ = client_for()
    assert (
        owner.post("/a2a/registry", {"url": card_url, "id": "weather"}, format="json").status_code
        == 201
    )
    body = {"name": "Hijacked"} if method == "patch" else None

    refused = getattr(stranger, method)(path, body, format="json")

    assert refused.status_code == 403
    assert Agent.objects.get(pk="weather").name == "Weather"
    assert not AuditEntry.objects.filter(object_type="agent").exclude(action="create").exists()
    admin, _ = client_for(is_admin=True)
    assert getattr(admin, method)(path, body, format="json").status_code in (200, 204)


# --- key scopes -------------------------------------------------------------------------------


def test_key_scopes_decide_what_a_key_may_call(weather):
    other = make_agent(agent_id="other")
    crew = teams.team_create(
        team_id="crew", name="Crew", members=["weather"], default_agent="weather"
    )
    everything = services.api_key_create(name="all")[0]
    agent_only = services.api_key_create(name="agent", agents=["weather"])[0]
    team_only = services.api_key_create(name="team", teams=["crew"])[0]
    no_calls = services.api_key_create(name="none", can_call=False)[0]

    assert key_may_call(everything, "agent", other.pk)
    assert key_may_call(everything, "team", crew.pk)
    assert key_may_call(agent_only, "agent", "weather")
    assert not key_may_call(agent_only, "agent", "other")
    assert not key_may_call(agent_only, "team", "crew")
    assert key_may_call(team_only, "team", "crew")
    assert not key_may_call(team_only, "agent", "weather")
    assert not key_may_call(no_calls, "agent", "weather")
    assert not key_may_call(None, "agent", "weather")


def test_only_a_key_scoped_to_nothing_may_call_a_workflow(weather):
    teams.team_create(team_id="crew", name="Crew", members=["weather"], default_agent="weather")
    everything = services.api_key_create(name="all")[0]
    agent_only = services.api_key_create(name="agent", agents=["weather"])[0]
    team_only = services.api_key_create(name="team", teams=["crew"])[0]
    no_calls = services.api_key_create(name="none", can_call=False)[0]

    assert key_may_call(everything, "workflow", "pipeline")
    assert not key_may_call(agent_only, "workflow", "pipeline")
    assert not key_may_call(team_only, "workflow", "pipeline")
    assert not key_may_call(no_calls, "workflow", "pipeline")


def test_a_key_cannot_be_scoped_to_an_agent_that_does_not_exist():
    with pytest.raises(services.RegistryError) as refused:
        services.api_key_create(name="typo", agents=["nobody"])

    assert refused.value.code == "unknown_agent"
    assert ApiKey.objects.count() == 0
    assert AuditEntry.objects.count() == 0


# --- create_api_key ---------------------------------------------------------------------------


def test_create_api_key_takes_every_scope_flag(weather, capsys):
    teams.team_create(team_id="crew", name="Crew", members=["weather"], default_agent="weather")

    call_command(
        "create_api_key",
        "partner",
        "--agent",
        "weather",
        "--team",
        "crew",
        "--no-registry-read",
        "--no-register",
        "--expires-in",
        "7",
    )

    key = capsys.readouterr().out.strip().splitlines()[-1]
    stored = ApiKey.objects.get(name="partner")
    assert key.startswith(stored.prefix)
    assert (stored.can_read_registry, stored.can_register, stored.can_call, stored.is_admin) == (
        False,
        False,
        True,
        False,
    )
    assert list(stored.agents.values_list("pk", flat=True)) == ["weather"]
    assert list(stored.teams.values_list("pk", flat=True)) == ["crew"]
    assert timedelta(days=6, hours=23) < stored.expires_at - timezone.now() <= timedelta(days=7)
    entry = AuditEntry.objects.get(object_type="apikey")
    assert (entry.actor, entry.action, entry.object_id) == ("system", "create", stored.prefix)
    assert key not in str(entry.changes)


def test_create_api_key_makes_admin_and_call_less_keys(capsys):
    call_command("create_api_key", "ops", "--admin", "--no-call")

    stored = ApiKey.objects.get(name="ops")
    assert (stored.is_admin, stored.can_call, stored.expires_at) == (True, False, None)


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--agent", "nobody"], "no agent 'nobody' is registered"),
        (["--team", "nobody"], "no team 'nobody' exists"),
        (["--expires-in", "0"], "--expires-in must be at least 1 day"),
    ],
)
def test_create_api_key_refuses_bad_flags_and_stores_nothing(flags, message):
    with pytest.raises(CommandError, match=message):
        call_command("create_api_key", "bad", *flags)

    assert ApiKey.objects.count() == 0


# --- the key admin ----------------------------------------------------------------------------


def test_the_admin_creates_a_scoped_key_and_shows_it_once(admin_client, weather):
    other = make_agent(agent_id="other")

    response = admin_client.post(
        reverse("admin:registry_apikey_add"),
        {
            "name": "partner",
            "can_call": "on",
            "agents": ["weather", other.pk],
            "expires_at_0": "",
            "expires_at_1": "",
        },
        follow=True,
    )

    assert response.status_code == 200
    stored = ApiKey.objects.get(name="partner")
    assert sorted(stored.agents.values_list("pk", flat=True)) == ["other", "weather"]
    assert (stored.can_read_registry, stored.can_register, stored.can_call) == (False, False, True)
    page = response.content.decode()
    assert "Copy it now" in page
    entry = AuditEntry.objects.get(object_type="apikey", action="create")
    assert entry.actor == "user:admin"
    assert entry.changes["agents"] == ["other", "weather"]
    shown_again = admin_client.get(reverse("admin:registry_apikey_change", args=[stored.pk]))
    assert stored.key_hash not in shown_again.content.decode()


def test_revoking_in_the_admin_is_audited(admin_client):
    api_key, _ = services.api_key_create(name="old")

    admin_client.post(
        reverse("admin:registry_apikey_changelist"),
        {"action": "revoke", "_selected_action": [api_key.pk]},
    )

    entry = AuditEntry.objects.get(action="revoke")
    assert (entry.actor, entry.object_type, entry.object_id) == (
        "user:admin",
        "apikey",
        api_key.prefix,
    )


# --- the audit log ----------------------------------------------------------------------------


def test_each_agent_write_through_the_api_writes_one_entry_naming_the_key(card_url):
    client, api_key = client_for()
    actor = f"key:{api_key.prefix}"

    client.post("/a2a/registry", {"url": card_url, "id": "weather"}, format="json")
    client.patch(
        "/a2a/registry/weather", {"name": "Weather 2", "status": "deprecated"}, format="json"
    )
    client.patch("/a2a/registry/weather", {"name": "Weather 2"}, format="json")
    client.delete("/a2a/registry/weather")

    entries = list(
        AuditEntry.objects.filter(object_type="agent")
        .order_by("at", "id")
        .values_list("actor", "action", "object_id", "changes")
    )
    assert [entry[:3] for entry in entries] == [
        (actor, "create", "weather"),
        (actor, "update", "weather"),
        (actor, "delete", "weather"),
    ], "an update that changes nothing is not recorded"
    assert entries[0][3]["cardUrl"].endswith("/.well-known/agent-card.json")
    assert entries[1][3] == {"name": "Weather 2", "status": "deprecated"}


def test_each_team_write_writes_one_entry_and_a_refused_one_none(weather):
    other = make_agent(agent_id="other")
    admin, api_key = client_for(is_admin=True)
    actor = f"key:{api_key.prefix}"
    body = {"id": "crew", "name": "Crew", "members": ["weather"], "defaultAgent": "weather"}

    assert admin.post("/a2a/teams", body, format="json").status_code == 201
    assert (
        admin.post(
            "/a2a/teams", {**body, "id": "bad", "defaultAgent": "nobody"}, format="json"
        ).status_code
        == 400
    )
    assert (
        admin.patch(
            "/a2a/teams/crew",
            {"members": ["weather", other.pk], "maxRoutingHops": 3},
            format="json",
        ).status_code
        == 200
    )
    assert admin.patch("/a2a/teams/crew", {"maxRoutingHops": 0}, format="json").status_code == 400
    assert admin.delete("/a2a/teams/crew").status_code == 204

    entries = list(
        AuditEntry.objects.filter(object_type="team")
        .order_by("at", "id")
        .values_list("actor", "action", "object_id", "changes")
    )
    assert [entry[:3] for entry in entries] == [
        (actor, "create", "crew"),
        (actor, "update", "crew"),
        (actor, "delete", "crew"),
    ]
    assert entries[1][3] == {"maxRoutingHops": 3, "members": ["weather", "other"]}
    assert not Team.objects.exists()


def test_a_refused_agent_delete_writes_no_entry(weather):
    teams.team_create(team_id="crew", name="Crew", members=["weather"], default_agent="weather")

    with pytest.raises(services.RegistryError):
        services.agent_delete(agent=weather, actor="user:ops")

    assert not AuditEntry.objects.filter(object_type="agent", action="delete").exists()


def test_the_audit_admin_lists_filters_and_searches_and_is_read_only(admin_client, weather):
    services.agent_update(agent=weather, fields={"name": "Weather 2"}, actor="key:br_abc")
    services.api_key_create(name="k")
    changelist = reverse("admin:registry_auditentry_changelist")

    def listed(**query):
        response = admin_client.get(changelist, query)
        return [(e.actor, e.object_type) for e in response.context["cl"].result_list]

    everything = listed()
    agents_only = listed(object_type="agent")
    searched = listed(q="br_abc")
    entry = AuditEntry.objects.get(actor="key:br_abc")
    detail = admin_client.get(reverse("admin:registry_auditentry_change", args=[entry.pk]))

    assert sorted(everything) == [
        ("key:br_abc", "agent"),
        ("system", "agent"),
        ("system", "apikey"),
    ]
    assert sorted(agents_only) == [("key:br_abc", "agent"), ("system", "agent")]
    assert searched == [("key:br_abc", "agent")]
    assert detail.status_code == 200 and "Weather 2" in detail.content.decode()
    assert admin_client.get(reverse("admin:registry_auditentry_add")).status_code == 403
    assert (
        admin_client.post(
            reverse("admin:registry_auditentry_delete", args=[entry.pk]), {"post": "yes"}
        ).status_code
        == 403
    )
    assert AuditEntry.objects.filter(pk=entry.pk).exists()


# --- the relay's cards declare the bearer scheme ----------------------------------------------


def test_every_card_the_relay_serves_declares_its_bearer_scheme(client, weather):
    teams.team_create(team_id="crew", name="Crew", members=["weather"], default_agent="weather")
    paths = [
        "/.well-known/agent-card.json",
        "/a2a/agents/weather/.well-known/agent-card.json",
        "/a2a/teams/crew/.well-known/agent-card.json",
    ]

    for path in paths:
        document = client.get(path).json()
        parsed = parse_agent_card(copy.deepcopy(document))
        scheme = parsed.security_schemes["relayApiKey"].http_auth_security_scheme
        assert scheme.scheme == "Bearer", path
        assert [list(r.schemes) for r in parsed.security_requirements] == [["relayApiKey"]]
        legacy = types_v03.AgentCard.model_validate(document)
        assert legacy.security == [{"relayApiKey": []}], path
        assert legacy.security_schemes["relayApiKey"].root.scheme.lower() == "bearer", path
