"""The card the relay serves for a team at /a2a/teams/{id}/.well-known/agent-card.json."""

from __future__ import annotations

import copy

import pytest
from a2a.client.card_resolver import parse_agent_card
from django.test import Client

from registry import teams
from registry.cards import CLIENT_ROUTING_URI
from registry.models import Team
from tasks_app.cards import CARD_CACHE_CONTROL
from tests.factories import extension, make_agent, skill

pytestmark = pytest.mark.django_db

CARD = "/a2a/teams/crew/.well-known/agent-card.json"
BASE = "http://testserver/a2a/teams/crew/"


@pytest.fixture
def crew():
    make_agent(
        agent_id="researcher",
        name="Research Agent",
        capabilities={"streaming": True, "extensions": [extension(CLIENT_ROUTING_URI)]},
        skills=[skill("search", tags=["web"]), skill("summarize", tags=[])],
    )
    make_agent(
        agent_id="writer",
        name="Writer",
        skills=[skill("draft", tags=["prose"])],
        defaultOutputModes=["text/markdown"],
    )
    make_agent(agent_id="critic", name="Critic", skills=[skill("review")])
    make_agent(agent_id="banned", name="Banned", skills=[skill("forbidden")], status="disabled")
    team = teams.team_create(
        team_id="crew",
        name="Crew",
        description="Researches, then writes.",
        members=["writer", "researcher", "critic", "banned"],
        default_agent="researcher",
    )
    teams.team_member_set_enabled(team=team, agent_id="critic", enabled=False)
    return team


def get_card(client: Client, path: str = CARD, **headers):
    return client.get(path, headers=headers)


def test_the_card_lists_the_skills_of_enabled_members_in_team_order_prefixed(client, crew):
    card = get_card(client).json()

    assert [s["id"] for s in card["skills"]] == [
        "writer/draft",
        "researcher/search",
        "researcher/summarize",
    ]
    assert [s["tags"] for s in card["skills"]] == [
        ["prose", "member:writer"],
        ["web", "member:researcher"],
        ["member:researcher"],
    ]
    assert card["skills"][1]["description"] == "Does search."


def test_disabled_members_and_agents_disabled_in_the_registry_are_left_out(client, crew):
    tags = [tag for s in get_card(client).json()["skills"] for tag in s["tags"]]

    assert "member:critic" not in tags
    assert "member:banned" not in tags


def test_the_card_names_the_team_streams_and_declares_client_routing_not_required(client, crew):
    card = get_card(client).json()

    assert (card["name"], card["description"]) == ("Crew", "Researches, then writes.")
    assert card["capabilities"]["streaming"] is True
    assert [e["uri"] for e in card["capabilities"]["extensions"]] == [CLIENT_ROUTING_URI]
    # The 1.0 part is normalized, so "required": false may be omitted; it must not be true.
    assert card["capabilities"]["extensions"][0].get("required", False) is False
    assert "text/markdown" in card["defaultOutputModes"]


def test_every_interface_is_the_teams_endpoint_and_the_03_fields_point_there(client, crew):
    card = get_card(client).json()

    assert {i["url"] for i in card["supportedInterfaces"]} == {BASE}
    assert {(i["protocolBinding"], i["protocolVersion"]) for i in card["supportedInterfaces"]} == {
        ("JSONRPC", "1.0"),
        ("HTTP+JSON", "1.0"),
        ("JSONRPC", "0.3"),
        ("HTTP+JSON", "0.3"),
    }
    assert (card["url"], card["preferredTransport"], card["protocolVersion"]) == (
        BASE,
        "JSONRPC",
        "0.3.0",
    )
    parsed = parse_agent_card(copy.deepcopy(card))
    assert [s.id for s in parsed.skills] == [s["id"] for s in card["skills"]]


def test_the_interfaces_follow_the_relays_public_url(client, crew, settings):
    settings.RELAY_PUBLIC_URL = "https://relay.example"

    card = get_card(client).json()

    assert {i["url"] for i in card["supportedInterfaces"]} == {
        "https://relay.example/a2a/teams/crew/"
    }


def test_the_card_has_an_etag_and_cache_control_and_a_matching_etag_is_a_304(client, crew):
    first = get_card(client)
    again = get_card(client, If_None_Match=first["ETag"])

    assert first.status_code == 200
    assert first["ETag"].startswith('W/"')
    assert first["Cache-Control"] == CARD_CACHE_CONTROL
    assert again.status_code == 304
    assert again["ETag"] == first["ETag"]
    assert again.content == b""


def test_the_etag_changes_when_the_team_changes(client, crew):
    before = get_card(client)["ETag"]
    teams.team_update(team=crew, fields={"name": "Renamed crew"})

    after = get_card(client, If_None_Match=before)

    assert after.status_code == 200
    assert after["ETag"] != before
    assert after.json()["name"] == "Renamed crew"


@pytest.mark.parametrize(
    "path",
    [
        "/a2a/teams/nobody/.well-known/agent-card.json",
        CARD,
    ],
)
def test_an_unknown_or_disabled_team_has_no_card(client, crew, path):
    Team.objects.filter(pk="crew").update(enabled=False)

    response = get_card(client, path)

    assert response.status_code == 404
    assert response.json()["error"]["status"] == "NOT_FOUND"


def test_the_card_is_public_even_when_the_registry_is_private(client, crew, settings):
    settings.RELAY_REGISTRY_PUBLIC = False

    assert get_card(client).status_code == 200


def test_only_safe_methods_are_allowed(client, crew):
    assert client.post(CARD).status_code == 405
