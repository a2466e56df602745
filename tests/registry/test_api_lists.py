"""The registry and team lists' query parameters and page shape, pinned exactly: the lists are
built on django-filter and DRF's cursor pagination, and must answer as they always did."""

from __future__ import annotations

import base64

import pytest

from registry import teams
from tests.factories import make_agent, skill

pytestmark = pytest.mark.django_db


@pytest.fixture
def three_agents():
    make_agent(
        agent_id="alpha",
        name="Alpha",
        skills=[skill("translate")],
        capabilities={"streaming": True},
    )
    make_agent(agent_id="beta", name="Beta", skills=[skill("chart")])
    make_agent(
        agent_id="gamma",
        name="Gamma",
        skills=[skill("search")],
        capabilities={"pushNotifications": True},
        status="deprecated",
    )


def listed(client, path="/a2a/registry", key="agents", **query):
    response = client.get(path, query)
    assert response.status_code == 200, response.json()
    return [item["id"] for item in response.json()[key]]


def refusal(client, path="/a2a/registry", **query):
    response = client.get(path, query)
    assert response.status_code == 400, response.json()
    assert set(response.json()) == {"error"}
    return response.json()["error"]


def test_a_page_has_exactly_the_items_and_the_next_cursor(anonymous, three_agents):
    body = anonymous.get("/a2a/registry", {"limit": 2}).json()

    assert set(body) == {"agents", "nextCursor"}
    assert [agent["id"] for agent in body["agents"]] == ["alpha", "beta"]
    # The cursor is the bare token (not a URL): the last id of the page, base64url unpadded.
    assert body["nextCursor"] == base64.urlsafe_b64encode(b"beta").decode().rstrip("=")


def test_the_last_page_has_a_null_cursor(anonymous, three_agents):
    assert anonymous.get("/a2a/registry", {"limit": 3}).json()["nextCursor"] is None
    cursor = anonymous.get("/a2a/registry", {"limit": 2}).json()["nextCursor"]
    last = anonymous.get("/a2a/registry", {"limit": 2, "cursor": cursor}).json()
    assert ([a["id"] for a in last["agents"]], last["nextCursor"]) == (["gamma"], None)


def test_a_cursor_made_before_the_change_still_pages(anonymous, three_agents):
    cursor = base64.urlsafe_b64encode(b"alpha").decode().rstrip("=")
    assert listed(anonymous, cursor=cursor) == ["beta", "gamma"]


def test_the_default_page_is_thirty_agents(anonymous):
    for number in range(31):
        make_agent(agent_id=f"agent-{number:02d}")
    body = anonymous.get("/a2a/registry").json()
    assert len(body["agents"]) == 30
    assert body["nextCursor"] is not None


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("true", ["alpha"]),
        ("1", ["alpha"]),
        ("yes", ["alpha"]),
        ("TRUE", ["alpha"]),
        ("false", ["beta", "gamma"]),
        ("0", ["beta", "gamma"]),
        ("no", ["beta", "gamma"]),
        ("", ["alpha", "beta", "gamma"]),
    ],
)
def test_booleans_take_every_spelling_they_always_took(anonymous, three_agents, value, expected):
    assert listed(anonymous, streaming=value) == expected


def test_empty_and_unknown_parameters_are_ignored(anonymous, three_agents):
    assert listed(
        anonymous,
        q="",
        tag="",
        status="",
        health="",
        updatedSince="",
        limit="",
        cursor="",
        colour="blue",
    ) == ["alpha", "beta", "gamma"]


def test_filters_combine(anonymous, three_agents):
    assert listed(anonymous, status="deprecated", pushNotifications="true") == ["gamma"]
    assert listed(anonymous, status="active", pushNotifications="true") == []


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ({"streaming": "maybe"}, "streaming must be true or false, not 'maybe'"),
        ({"pushNotifications": "2"}, "pushNotifications must be true or false, not '2'"),
        ({"status": "gone"}, "status must be one of active, deprecated, disabled, not 'gone'"),
        (
            {"health": "sick"},
            "health must be one of unknown, healthy, degraded, unhealthy, not 'sick'",
        ),
        (
            {"updatedSince": "yesterday"},
            "updatedSince must be an ISO 8601 time with a zone, e.g. 2026-01-01T00:00:00Z",
        ),
        (
            {"updatedSince": "2026-01-01T00:00:00"},
            "updatedSince must be an ISO 8601 time with a zone, e.g. 2026-01-01T00:00:00Z",
        ),
        ({"limit": "0"}, "limit must be between 1 and 100"),
        ({"limit": "101"}, "limit must be between 1 and 100"),
        ({"limit": "-3"}, "limit must be between 1 and 100"),
        ({"limit": "many"}, "limit must be a whole number"),
        ({"cursor": "!!!"}, "cursor is not one this registry gave out"),
        ({"cursor": "_w"}, "cursor is not one this registry gave out"),
    ],
)
def test_bad_list_parameters_are_a_400_with_the_message_they_always_had(anonymous, query, message):
    assert refusal(anonymous, **query) == {"code": "invalid_query", "message": message}


def test_the_team_list_pages_like_the_agent_list(anonymous):
    make_agent(agent_id="writer")
    for team_id in ("a", "b", "c"):
        teams.team_create(team_id=team_id, name=team_id, members=["writer"], default_agent="writer")

    first = anonymous.get("/a2a/teams", {"limit": 2}).json()

    assert set(first) == {"teams", "nextCursor"}
    assert first["nextCursor"] == base64.urlsafe_b64encode(b"b").decode().rstrip("=")
    assert listed(anonymous, "/a2a/teams", "teams", cursor=first["nextCursor"]) == ["c"]
    assert listed(anonymous, "/a2a/teams", "teams", limit="", cursor="") == ["a", "b", "c"]


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ({"limit": "0"}, "limit must be between 1 and 100"),
        ({"limit": "x"}, "limit must be a whole number"),
        ({"cursor": "%%"}, "cursor is not one this registry gave out"),
    ],
)
def test_bad_team_list_parameters_are_a_400(anonymous, query, message):
    assert refusal(anonymous, "/a2a/teams", **query) == {
        "code": "invalid_query",
        "message": message,
    }


def test_a_question_no_agent_answers_lists_nothing_rather_than_failing(api):
    """Regression (fuzzing): ``ask=`` matching no agent left the list without its rank, and
    ordering by the rank failed with a 500."""
    response = api.get("/a2a/registry", {"ask": "organization"})
    assert response.status_code == 200, response.content
    assert response.json()["agents"] == []
