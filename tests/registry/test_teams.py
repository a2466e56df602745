"""Teams: the services in registry.teams and the /a2a/teams API."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from registry import services, teams
from registry.cards import CLIENT_ROUTING_URI
from registry.models import Agent, Team, TeamMembership
from registry.services import RegistryError, api_key_create
from tests.factories import extension, make_agent, skill

pytestmark = pytest.mark.django_db


@pytest.fixture
def agents():
    """researcher (client routing, healthy), writer and critic."""
    researcher = make_agent(
        agent_id="researcher",
        name="Research Agent",
        capabilities={"extensions": [extension(CLIENT_ROUTING_URI)]},
        skills=[skill("search", tags=["web"])],
        health="healthy",
    )
    writer = make_agent(
        agent_id="writer", name="Writer", skills=[skill("draft")], health="degraded"
    )
    critic = make_agent(agent_id="critic", name="Critic", skills=[skill("review")])
    return researcher, writer, critic


def team_body(**overrides):
    return {
        "id": "crew",
        "name": "Crew",
        "description": "Researches and writes.",
        "members": ["researcher", "writer"],
        "defaultAgent": "researcher",
        "maxRoutingHops": 5,
        "enabled": True,
        **overrides,
    }


def make_team(**overrides) -> Team:
    values = {
        "team_id": "crew",
        "name": "Crew",
        "members": ["researcher", "writer"],
        "default_agent": "researcher",
        **overrides,
    }
    return teams.team_create(**values)


def stored_members(team_id: str = "crew") -> list[tuple[str, int, bool]]:
    return list(
        TeamMembership.objects.filter(team_id=team_id)
        .order_by("order")
        .values_list("agent_id", "order", "enabled")
    )


def nothing_stored() -> bool:
    return Team.objects.count() == 0 and TeamMembership.objects.count() == 0


@pytest.fixture
def admin_api():
    """A client with an admin key (may delete any agent)."""
    _, key = api_key_create(name="admin caller", is_admin=True)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
    return client


@pytest.fixture
def api(admin_api):
    """Team writes need an admin key (or staff): the tests here write with one."""
    return admin_api


@pytest.fixture
def plain_api():
    """A client with an ordinary key: it may read teams, not change them."""
    _, key = api_key_create(name="plain caller")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
    return client


# --- Services -------------------------------------------------------------------------------


def test_team_create_stores_the_members_in_list_order_all_enabled(agents):
    team = make_team(members=["writer", "critic", "researcher"], max_routing_hops=3)

    team.refresh_from_db()
    assert (team.default_agent_id, team.max_routing_hops, team.enabled) == ("researcher", 3, True)
    assert stored_members() == [("writer", 0, True), ("critic", 1, True), ("researcher", 2, True)]


def test_team_update_replaces_members_in_list_order_and_keeps_a_staying_members_flag(agents):
    team = make_team(members=["researcher", "writer"])
    teams.team_member_set_enabled(team=team, agent_id="writer", enabled=False)

    teams.team_update(team=team, fields={"members": ["critic", "writer", "researcher"]})

    assert stored_members() == [("critic", 0, True), ("writer", 1, False), ("researcher", 2, True)]


def test_team_update_with_member_specs_sets_the_enabled_flags(agents):
    team = make_team(members=["researcher", "writer"])

    teams.team_update(
        team=team,
        fields={
            "members": [
                teams.MemberSpec("researcher"),
                teams.MemberSpec("critic", enabled=False),
            ]
        },
    )

    assert stored_members() == [("researcher", 0, True), ("critic", 1, False)]


def test_a_refused_update_changes_nothing_stored_nor_the_team_object(agents):
    team = make_team(name="Crew")
    before = Team.objects.get(pk="crew").updated_at

    with pytest.raises(RegistryError) as refused:
        teams.team_update(team=team, fields={"name": "Renamed", "members": ["writer"]})

    assert refused.value.code == "invalid_team"
    assert "'researcher' is not a member" in refused.value.message
    assert team.name == "Crew"
    stored = Team.objects.get(pk="crew")
    assert (stored.name, stored.updated_at) == ("Crew", before)
    assert stored_members() == [("researcher", 0, True), ("writer", 1, True)]


def test_team_update_refuses_fields_it_cannot_change(agents):
    team = make_team()

    with pytest.raises(RegistryError) as refused:
        teams.team_update(team=team, fields={"id": "other"})

    assert (refused.value.code, refused.value.message) == ("not_editable", "cannot change id")


def test_disabling_an_ordinary_member_is_stored(agents):
    team = make_team()

    teams.team_member_set_enabled(team=team, agent_id="writer", enabled=False)

    assert stored_members() == [("researcher", 0, True), ("writer", 1, False)]


def test_disabling_the_default_agents_membership_is_refused(agents):
    team = make_team()

    with pytest.raises(RegistryError) as refused:
        teams.team_member_set_enabled(team=team, agent_id="researcher", enabled=False)

    assert refused.value.code == "invalid_team"
    assert "'researcher' is a disabled member" in refused.value.message
    assert stored_members() == [("researcher", 0, True), ("writer", 1, True)]


def test_switching_an_agent_that_is_not_a_member_is_a_404(agents):
    team = make_team()

    with pytest.raises(RegistryError) as refused:
        teams.team_member_set_enabled(team=team, agent_id="critic", enabled=False)

    assert (refused.value.code, refused.value.status) == ("not_member", 404)


def test_team_delete_removes_the_team_and_its_memberships_but_not_the_agents(agents):
    team = make_team()

    teams.team_delete(team=team)

    assert nothing_stored()
    assert Agent.objects.count() == 3


def test_agent_delete_is_refused_while_the_agent_is_a_default_agent(agents):
    make_team()
    make_team(team_id="alpha", members=["researcher"])

    with pytest.raises(RegistryError) as refused:
        services.agent_delete(agent=Agent.objects.get(pk="researcher"))

    assert (refused.value.code, refused.value.status) == ("in_use", 409)
    assert "default agent of team 'alpha', 'crew'" in refused.value.message
    assert Agent.objects.filter(pk="researcher").exists()
    assert TeamMembership.objects.filter(agent_id="researcher").count() == 2


def test_deleting_an_ordinary_member_removes_only_its_membership(agents):
    make_team()

    services.agent_delete(agent=Agent.objects.get(pk="writer"))

    assert stored_members() == [("researcher", 0, True)]


# --- Validation: the same reasons from the service and the API ------------------------------

REFUSALS = [
    pytest.param(
        {"defaultAgent": "critic"},
        "invalid_team",
        "the default agent 'critic' is not a member of the team",
        id="default-not-member",
    ),
    pytest.param(
        {"defaultAgent": None}, "invalid_team", "a team needs a default agent", id="no-default"
    ),
    pytest.param(
        {"maxRoutingHops": 0},
        "invalid_team",
        "max routing hops must be a whole number from 1 to 10, not 0",
        id="hops-0",
    ),
    pytest.param(
        {"maxRoutingHops": 11},
        "invalid_team",
        "max routing hops must be a whole number from 1 to 10, not 11",
        id="hops-11",
    ),
    pytest.param(
        {"members": ["researcher", "ghost"]},
        "unknown_agent",
        "no agent with id 'ghost' is registered",
        id="unknown-member",
    ),
    pytest.param(
        {"members": ["researcher"], "defaultAgent": "ghost"},
        "unknown_agent",
        "no agent with id 'ghost' is registered",
        id="unknown-default",
    ),
    pytest.param(
        {"members": ["researcher", "writer", "researcher"]},
        "invalid_team",
        "agent 'researcher' is listed twice among the members",
        id="repeated-member",
    ),
    pytest.param(
        {"members": []}, "invalid_team", "a team needs at least one member", id="no-members"
    ),
    pytest.param(
        {"id": "Not a slug!"}, "invalid_team", "the team id must be a slug", id="id-not-slug"
    ),
    pytest.param({"id": "x" * 65}, "invalid_team", "at most 64 characters", id="id-too-long"),
    pytest.param({"name": "  "}, "invalid_team", "a team needs a name", id="no-name"),
    pytest.param(
        {"defaultAgent": "banned", "members": ["researcher", "banned"]},
        "invalid_team",
        "the default agent 'banned' is disabled in the registry",
        id="default-agent-disabled-in-registry",
    ),
]


@pytest.fixture
def banned_agent(agents):
    return make_agent(agent_id="banned", name="Banned", status="disabled")


@pytest.mark.parametrize(("change", "code", "reason"), REFUSALS)
def test_the_api_refuses_an_invalid_team_saying_why_and_stores_nothing(
    api, banned_agent, change, code, reason
):
    response = api.post("/a2a/teams", team_body(**change), format="json")

    assert response.status_code == 400
    assert response.json()["error"]["code"] == code
    assert reason in response.json()["error"]["message"]
    assert nothing_stored()


@pytest.mark.parametrize(("change", "code", "reason"), REFUSALS)
def test_the_service_refuses_the_same_teams_with_the_same_reasons(
    banned_agent, change, code, reason
):
    body = team_body(**change)

    with pytest.raises(RegistryError) as refused:
        teams.team_create(
            team_id=body["id"],
            name=body["name"],
            members=body["members"],
            default_agent=body["defaultAgent"],
            max_routing_hops=body["maxRoutingHops"],
        )

    assert (refused.value.code, refused.value.status) == (code, 400)
    assert reason in refused.value.message
    assert nothing_stored()


def test_a_default_agent_that_is_a_disabled_member_is_refused_by_patch(api, agents):
    team = make_team(members=["researcher", "writer"])
    teams.team_member_set_enabled(team=team, agent_id="writer", enabled=False)

    response = api.patch("/a2a/teams/crew", {"defaultAgent": "writer"}, format="json")

    assert response.status_code == 400
    assert response.json()["error"] == {
        "code": "invalid_team",
        "message": "the default agent 'writer' is a disabled member; enable its membership or "
        "choose another default agent",
    }
    assert Team.objects.get(pk="crew").default_agent_id == "researcher"


def test_a_taken_team_id_is_a_409_and_the_stored_team_is_untouched(api, agents):
    make_team(name="Original")

    response = api.post(
        "/a2a/teams",
        team_body(name="Impostor", members=["critic"], defaultAgent="critic"),
        format="json",
    )

    assert response.status_code == 409
    assert response.json()["error"] == {
        "code": "duplicate",
        "message": "a team with id 'crew' already exists",
    }
    assert Team.objects.get(pk="crew").name == "Original"
    assert stored_members() == [("researcher", 0, True), ("writer", 1, True)]


def test_a_body_of_the_wrong_type_is_refused_by_the_serializer(api, agents):
    response = api.post("/a2a/teams", team_body(members="researcher"), format="json")

    assert response.status_code == 400
    assert response.json()["error"]["code"] == "invalid_request"
    assert response.json()["error"]["message"].startswith("members:")
    assert nothing_stored()


# --- API ------------------------------------------------------------------------------------


def test_creating_a_team_returns_201_with_its_members_and_urls(api, agents):
    response = api.post("/a2a/teams", team_body(), format="json")

    assert response.status_code == 201
    body = response.json()
    assert {
        k: body[k]
        for k in ("id", "name", "description", "defaultAgent", "maxRoutingHops", "enabled")
    } == {
        "id": "crew",
        "name": "Crew",
        "description": "Researches and writes.",
        "defaultAgent": "researcher",
        "maxRoutingHops": 5,
        "enabled": True,
    }
    assert body["members"] == [
        {
            "id": "researcher",
            "name": "Research Agent",
            "order": 0,
            "enabled": True,
            "health": "healthy",
            "supportsClientRouting": True,
        },
        {
            "id": "writer",
            "name": "Writer",
            "order": 1,
            "enabled": True,
            "health": "degraded",
            "supportsClientRouting": False,
        },
    ]
    assert body["a2aUrl"] == "http://testserver/a2a/teams/crew/"
    assert body["cardUrl"] == "http://testserver/a2a/teams/crew/.well-known/agent-card.json"
    assert body["createdAt"] and body["updatedAt"]
    assert stored_members() == [("researcher", 0, True), ("writer", 1, True)]


def test_team_urls_use_the_relays_public_url_when_set(api, agents, settings):
    settings.RELAY_PUBLIC_URL = "https://relay.example/"
    make_team()

    body = api.get("/a2a/teams/crew").json()

    assert body["a2aUrl"] == "https://relay.example/a2a/teams/crew/"
    assert body["cardUrl"] == "https://relay.example/a2a/teams/crew/.well-known/agent-card.json"


def test_creating_with_defaults_makes_an_enabled_team_with_ten_hops(api, agents):
    body = team_body()
    del body["maxRoutingHops"], body["enabled"], body["description"]

    response = api.post("/a2a/teams", body, format="json")

    assert response.status_code == 201
    assert (response.json()["maxRoutingHops"], response.json()["enabled"]) == (10, True)
    assert response.json()["description"] == ""


def test_getting_an_unknown_team_is_a_404_in_the_registry_error_shape(api, db):
    response = api.get("/a2a/teams/nobody")

    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"
    assert "'nobody'" in response.json()["error"]["message"]


def test_listing_teams_returns_each_with_its_members_in_order(anonymous, agents):
    make_team(team_id="beta", members=["writer", "researcher"])
    make_team(team_id="alpha", members=["researcher"])

    response = anonymous.get("/a2a/teams")

    assert response.status_code == 200
    body = response.json()
    assert [team["id"] for team in body["teams"]] == ["alpha", "beta"]
    assert [m["id"] for m in body["teams"][1]["members"]] == ["writer", "researcher"]
    assert body["nextCursor"] is None


def test_listing_teams_pages_with_a_cursor(anonymous, agents):
    for team_id in ("a", "b", "c"):
        make_team(team_id=team_id)

    first = anonymous.get("/a2a/teams", {"limit": 2}).json()
    second = anonymous.get("/a2a/teams", {"limit": 2, "cursor": first["nextCursor"]}).json()

    assert [t["id"] for t in first["teams"]] == ["a", "b"]
    assert [t["id"] for t in second["teams"]] == ["c"]
    assert second["nextCursor"] is None


def test_the_team_list_costs_two_queries_whatever_the_number_of_teams(anonymous, agents):
    make_team(team_id="t0")

    with CaptureQueriesContext(connection) as one:
        assert len(anonymous.get("/a2a/teams").json()["teams"]) == 1
    for number in range(1, 6):
        make_team(team_id=f"t{number}", members=["researcher", "writer", "critic"])
    with CaptureQueriesContext(connection) as six:
        assert len(anonymous.get("/a2a/teams").json()["teams"]) == 6

    assert len(one.captured_queries) == len(six.captured_queries) == 2


def test_patch_changes_fields_and_replaces_the_members(api, agents):
    make_team()

    response = api.patch(
        "/a2a/teams/crew",
        {
            "name": "New Crew",
            "members": ["critic", "writer"],
            "defaultAgent": "critic",
            "maxRoutingHops": 2,
            "enabled": False,
        },
        format="json",
    )

    assert response.status_code == 200
    body = response.json()
    assert (body["name"], body["defaultAgent"], body["maxRoutingHops"], body["enabled"]) == (
        "New Crew",
        "critic",
        2,
        False,
    )
    assert [(m["id"], m["order"]) for m in body["members"]] == [("critic", 0), ("writer", 1)]
    assert stored_members() == [("critic", 0, True), ("writer", 1, True)]


def test_patch_refused_stores_nothing(api, agents):
    make_team()

    response = api.patch(
        "/a2a/teams/crew", {"name": "Changed", "maxRoutingHops": 11}, format="json"
    )

    assert response.status_code == 400
    assert "not 11" in response.json()["error"]["message"]
    assert Team.objects.get(pk="crew").name == "Crew"


def test_delete_removes_the_team(api, agents):
    make_team()

    assert api.delete("/a2a/teams/crew").status_code == 204
    assert api.get("/a2a/teams/crew").status_code == 404
    assert nothing_stored()


def test_deleting_a_default_agent_through_the_registry_api_is_a_409(admin_api, agents):
    make_team()

    response = admin_api.delete("/a2a/registry/researcher")

    assert response.status_code == 409
    assert response.json()["error"]["code"] == "in_use"
    assert "default agent of team 'crew'" in response.json()["error"]["message"]
    assert Agent.objects.filter(pk="researcher").exists()


def test_deleting_an_ordinary_member_through_the_registry_api_keeps_the_team(admin_api, agents):
    make_team()

    assert admin_api.delete("/a2a/registry/writer").status_code == 204
    members = admin_api.get("/a2a/teams/crew").json()["members"]
    assert [m["id"] for m in members] == ["researcher"]


# --- Permissions ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("post", "/a2a/teams", team_body()),
        ("patch", "/a2a/teams/crew", {"name": "Hijacked"}),
        ("delete", "/a2a/teams/crew", None),
    ],
)
def test_anonymous_writes_are_401_and_change_nothing(anonymous, agents, method, path, body):
    make_team(team_id="crew", name="Crew")
    Team.objects.filter(pk="crew").update(description="kept")

    response = getattr(anonymous, method)(path, body, format="json")

    assert response.status_code == 401
    assert response.json()["error"]["code"] == "not_authenticated"
    assert Team.objects.get(pk="crew").name == "Crew"
    assert Team.objects.count() == 1


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("post", "/a2a/teams", team_body(id="other")),
        ("patch", "/a2a/teams/crew", {"name": "Renamed"}),
        ("delete", "/a2a/teams/crew", None),
    ],
)
def test_an_ordinary_key_may_not_change_teams_and_changes_nothing(
    plain_api, agents, method, path, body
):
    make_team()

    response = getattr(plain_api, method)(path, body, format="json")

    assert response.status_code == 403
    assert response.json()["error"] == {
        "code": "permission_denied",
        "message": "only an admin key may change teams",
    }
    assert list(Team.objects.values_list("pk", "name")) == [("crew", "Crew")]
    assert plain_api.get("/a2a/teams/crew").status_code == 200


def test_a_staff_user_may_write_without_a_key(admin_user, agents):
    client = APIClient()
    client.force_login(admin_user)

    assert client.post("/a2a/teams", team_body(), format="json").status_code == 201


def test_reads_are_public_while_the_registry_is_public(anonymous, agents, settings):
    settings.RELAY_REGISTRY_PUBLIC = True
    make_team()

    assert anonymous.get("/a2a/teams").status_code == 200
    assert anonymous.get("/a2a/teams/crew").status_code == 200


def test_reads_need_a_key_or_staff_when_the_registry_is_private(anonymous, api, agents, settings):
    settings.RELAY_REGISTRY_PUBLIC = False
    make_team()

    assert anonymous.get("/a2a/teams").status_code == 401
    assert anonymous.get("/a2a/teams/crew").status_code == 401
    assert api.get("/a2a/teams").status_code == 200
    assert api.get("/a2a/teams/crew").json()["id"] == "crew"


def test_the_team_endpoints_are_in_the_openapi_schema(anonymous, db):
    paths = anonymous.get("/api/schema", {"format": "json"}).json()["paths"]

    assert {"get", "post"} <= set(paths["/a2a/teams"])
    assert {"get", "patch", "delete"} <= set(paths["/a2a/teams/{team_id}"])
    request = paths["/a2a/teams"]["post"]["requestBody"]["content"]["application/json"]
    assert request["schema"]["$ref"].rsplit("/", 1)[1].startswith("TeamCreate")
