"""The registry REST API, against real card servers on 127.0.0.1."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from registry import secrets
from registry.cards import CLIENT_ROUTING_URI
from registry.models import Agent, CardSnapshot, DeclaredExtension, Skill
from tests.cardservers import card_json, card_site, status
from tests.registry.test_cards import card_v03, card_v1

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("allow_private_urls")]


def skill(id, *tags, name=None, description="does things", **extra):
    return {
        "id": id,
        "name": name or id.title(),
        "description": description,
        "tags": list(tags),
        **extra,
    }


def register(api, url, **body):
    return api.post("/a2a/registry", {"url": url, **body}, format="json")


def nothing_stored():
    return (
        Agent.objects.count(),
        CardSnapshot.objects.count(),
        Skill.objects.count(),
        DeclaredExtension.objects.count(),
    ) == (0, 0, 0, 0)


@pytest.fixture(scope="module")
def card_host():
    """One card server for the module; each test publishes its cards under fresh paths."""
    with card_site({}) as (site, url):
        yield site, url


@pytest.fixture
def served(card_host):
    """served(card, path=...) publishes a card and returns the base URL to register."""
    site, url = card_host
    published = []

    def serve_card(card, path="/.well-known/agent-card.json"):
        prefix = f"/site{len(site.routes) + len(published)}-{id(card)}"
        site.routes[prefix + path] = card_json(card)
        published.append(prefix + path)
        return url + prefix

    yield serve_card
    for path in published:
        site.routes.pop(path, None)


# --- Registration ---------------------------------------------------------------------------


def test_registering_a_1_0_agent_returns_201_with_its_id_and_card(api, served):
    response = register(api, served(card_v1()))
    assert response.status_code == 201, response.json()
    body = response.json()
    assert body["id"] == "weather"
    assert body["protocolVersions"] == ["1.0", "0.3"]
    assert body["capabilities"]["streaming"] is True
    assert body["capabilities"]["extensions"][0]["uri"] == CLIENT_ROUTING_URI
    assert body["supportsClientRouting"] is True
    assert body["skills"][0] == {
        "id": "forecast",
        "name": "Forecast",
        "description": "Tomorrow's weather",
        "tags": ["weather", "forecast"],
        "examples": ["rain in Oslo?"],
        "inputModes": ["text/plain"],
        "outputModes": [],
    }
    assert body["health"]["state"] == "unknown"
    agent = Agent.objects.get(pk="weather")
    assert agent.current_snapshot.content_hash == agent.snapshots.get().content_hash


@pytest.mark.parametrize(
    ("card", "path", "suffix", "versions"),
    [
        (card_v03(), "/.well-known/agent-card.json", "", ["0.3"]),
        (card_v03(protocolVersion="0.2.5"), "/.well-known/agent.json", "", ["0.2"]),
        (card_v1(), "/team/a/.well-known/agent-card.json", "/team/a", ["1.0", "0.3"]),
    ],
    ids=["0.3", "0.2-legacy-path", "under-a-path-prefix"],
)
def test_agents_of_every_card_generation_register(api, served, card, path, suffix, versions):
    url = served(card, path=path)
    response = register(api, url + suffix)
    assert response.status_code == 201, response.json()
    assert response.json()["protocolVersions"] == versions
    assert response.json()["cardUrl"] == url + path


def test_an_invocation_url_overrides_a_wrong_url_in_the_card(api, served):
    wrong = card_v03(url="http://127.0.0.1:9/wrong")
    url = served(wrong)
    response = register(api, url, id="fixed", invocationUrl=f"{url}/rpc")
    assert response.status_code == 201
    body = response.json()
    assert body["id"] == "fixed"
    assert body["invocationUrl"] == f"{url}/rpc"
    assert body["interfaces"][0]["url"] == "http://127.0.0.1:9/wrong"


def test_registration_needs_an_api_key(anonymous, served):
    response = register(anonymous, served(card_v1()))
    assert response.status_code == 401
    assert response["WWW-Authenticate"].startswith("Bearer")
    assert response.json()["error"]["code"] == "not_authenticated"
    assert nothing_stored()


def test_a_revoked_key_is_refused(api, api_key, served):
    from registry.services import api_key_revoke

    api_key_revoke(api_key=api_key[0])
    response = register(api, served(card_v1()))
    assert response.status_code == 401
    assert nothing_stored()


def test_credentials_are_stored_encrypted_and_never_returned(api, served):
    url = served(card_v1())
    response = register(
        api, url, credentials={"headerName": "X-Api-Key", "headerValue": "top-secret-value"}
    )
    assert response.status_code == 201
    assert response.json()["hasCredentials"] is True
    assert "top-secret-value" not in response.content.decode()
    agent = Agent.objects.get(pk="weather")
    assert "top-secret-value" not in agent.auth_header_value
    assert secrets.decrypt(agent.auth_header_value) == "top-secret-value"
    detail = api.get("/a2a/registry/weather")
    assert "top-secret-value" not in detail.content.decode()


@pytest.mark.parametrize(
    ("routes", "code", "http_status"),
    [
        ({}, "card_not_found", 422),
        ({"/.well-known/agent-card.json": status(200, "not json")}, "not_json", 422),
        (
            {"/.well-known/agent-card.json": card_json({"name": "x", "url": "http://x"})},
            "invalid_card",
            422,
        ),
        ({"/.well-known/agent-card.json": status(503)}, "upstream_error", 422),
    ],
    ids=["no-card", "non-json", "missing-fields", "upstream-503"],
)
def test_bad_cards_get_a_4xx_naming_the_problem_and_store_nothing(api, routes, code, http_status):
    with card_site(routes) as (site, url):
        response = register(api, url)
    assert response.status_code == http_status
    assert response.json()["error"]["code"] == code
    assert response.json()["error"]["message"]
    assert nothing_stored()


def test_a_card_missing_fields_lists_them(api, served):
    document = card_v1()
    del document["skills"], document["description"]
    response = register(api, served(document))
    assert response.json()["error"]["missing"] == ["description", "skills"]
    assert "description, skills" in response.json()["error"]["message"]


def test_an_oversized_card_is_refused(api, settings, served):
    settings.RELAY_CARD_MAX_BYTES = 2000
    response = register(api, served(card_v1(description="y" * 5000)))
    assert response.status_code == 422
    assert response.json()["error"]["code"] == "too_large"
    assert nothing_stored()


def test_an_unreachable_host_is_a_422(api):
    response = register(api, "http://127.0.0.1:9")
    assert response.status_code == 422
    assert response.json()["error"]["code"] == "unreachable"
    assert nothing_stored()


def test_a_private_address_is_refused_when_private_urls_are_off(api, settings, served):
    url = served(card_v1())
    settings.RELAY_ALLOW_PRIVATE_URLS = False
    response = register(api, url)
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "unsafe_url"
    assert nothing_stored()


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost"])
def test_refusing_a_local_agent_names_the_setting_that_allows_it(api, settings, served, host):
    """Regression: the refusal said the address was private but not how to allow it, so the
    production steps, followed literally, ended here for an agent on the same machine."""
    url = served(card_v1()).replace("127.0.0.1", host)
    settings.RELAY_ALLOW_PRIVATE_URLS = False
    response = register(api, url)
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "unsafe_url"
    assert "RELAY_ALLOW_PRIVATE_URLS=true" in response.json()["error"]["message"]
    assert nothing_stored()


def test_registering_the_same_card_twice_is_a_409(api, served):
    url = served(card_v1())
    assert register(api, url).status_code == 201
    again = register(api, url)
    assert again.status_code == 409
    assert again.json()["error"]["code"] == "duplicate"
    assert Agent.objects.count() == 1


def test_a_taken_id_is_a_409(api, served):
    assert register(api, served(card_v1()), id="same").status_code == 201
    response = register(api, served(card_v03()), id="same")
    assert response.status_code == 409
    assert Agent.objects.count() == 1


def test_two_agents_with_the_same_name_get_distinct_ids(api, served):
    first = register(api, served(card_v1())).json()["id"]
    second = register(api, served(card_v1())).json()["id"]
    assert (first, second) == ("weather", "weather-2")


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"url": "not a url"},
        {"url": "http://a.example", "id": "Not A Slug!"},
        {"url": "http://a.example", "credentials": {"headerName": "bad header"}},
    ],
    ids=["no-url", "bad-url", "bad-id", "bad-credentials"],
)
def test_invalid_bodies_are_a_400_with_the_field_named(api, body):
    response = api.post("/a2a/registry", body, format="json")
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "invalid_request"
    assert set(error["fields"]) <= {"url", "id", "credentials"}
    assert nothing_stored()


def test_a_body_that_is_not_json_is_a_400(api):
    response = api.generic("POST", "/a2a/registry", "{nope", content_type="application/json")
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "invalid_json"


# --- Reading, changing, deleting ------------------------------------------------------------


def test_get_patch_and_delete_an_agent(api, served):
    register(api, served(card_v1()))
    assert api.get("/a2a/registry/weather").json()["name"] == "Weather"
    changed = api.patch(
        "/a2a/registry/weather",
        {"status": "deprecated", "description": "Old forecasts"},
        format="json",
    )
    assert changed.status_code == 200
    assert changed.json()["status"] == "deprecated"
    assert api.get("/a2a/registry", {"q": "old forecasts"}).json()["agents"][0]["id"] == "weather"
    assert api.delete("/a2a/registry/weather").status_code == 204
    assert api.get("/a2a/registry/weather").status_code == 404
    assert nothing_stored()


def test_patch_rejects_an_unknown_status(api, served):
    register(api, served(card_v1()))
    response = api.patch("/a2a/registry/weather", {"status": "gone"}, format="json")
    assert response.status_code == 400
    assert Agent.objects.get(pk="weather").status == "active"


def test_only_the_registering_key_or_an_admin_key_may_change_an_agent(api, served):
    from rest_framework.test import APIClient

    from registry.services import api_key_create

    register(api, served(card_v1()))
    other = APIClient()
    other.credentials(HTTP_AUTHORIZATION=f"Bearer {api_key_create(name='other')[1]}")
    assert other.delete("/a2a/registry/weather").status_code == 403
    admin = APIClient()
    admin.credentials(HTTP_AUTHORIZATION=f"Bearer {api_key_create(name='ops', is_admin=True)[1]}")
    assert admin.patch("/a2a/registry/weather", {"name": "W"}, format="json").status_code == 200
    assert Agent.objects.get(pk="weather").name == "W"


def test_an_unknown_agent_is_a_404_with_a_json_body(anonymous):
    response = anonymous.get("/a2a/registry/nobody")
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"


def test_the_card_endpoint_returns_the_card_as_published(api, served):
    register(api, served(card_v03()))
    card = api.get("/a2a/registry/echo/card").json()
    assert card["protocolVersion"] == "0.3.0"
    assert card["url"] == "https://e.example/rpc"


def test_refresh_adds_a_snapshot_only_when_the_card_changed(api):
    document = card_v1()
    with card_site(
        {"/.well-known/agent-card.json": lambda request: card_json(document)(request)}
    ) as (site, url):
        register(api, url)
        unchanged = api.post("/a2a/registry/weather/refresh")
        assert unchanged.status_code == 200
        assert unchanged.json()["cardChanged"] is False
        assert CardSnapshot.objects.count() == 1
        document["version"] = "3.0.0"
        document["skills"].append(skill("alerts", "storm"))
        changed = api.post("/a2a/registry/weather/refresh")
    assert changed.json()["cardChanged"] is True
    assert changed.json()["version"] == "3.0.0"
    assert [s["id"] for s in changed.json()["skills"]] == ["forecast", "alerts"]
    history = api.get("/a2a/registry/weather/history").json()["snapshots"]
    assert len(history) == 2
    assert '+  "version": "3.0.0"' in history[0]["diff"]
    assert history[1]["diff"] == []


def test_a_failed_refresh_keeps_the_stored_card(api):
    routes = {"/.well-known/agent-card.json": card_json(card_v1())}
    with card_site(routes) as (site, url):
        register(api, url)
        site.routes["/.well-known/agent-card.json"] = status(500)
        response = api.post("/a2a/registry/weather/refresh")
    assert response.status_code == 422
    assert response.json()["error"]["code"] == "upstream_error"
    assert Agent.objects.get(pk="weather").skills.count() == 1


# --- Discovery ------------------------------------------------------------------------------


@pytest.fixture
def catalogue(api, served):
    """Four agents with distinct skills, tags, modes, capabilities and extensions."""
    cards = {
        "alpha": card_v1(
            name="Alpha",
            description="Translates documents",
            capabilities={"streaming": True},
            skills=[skill("translate", "language", "text"), skill("summarize", "text")],
        ),
        "beta": card_v1(
            name="Beta",
            description="Draws charts",
            capabilities={},
            defaultOutputModes=["image/png"],
            skills=[skill("chart", "plot", inputModes=["application/json"])],
        ),
        "gamma": card_v03(
            name="Gamma",
            description="Searches the web",
            capabilities={},
            skills=[skill("search", "web", "research")],
        ),
        "delta": card_v03(
            name="Delta",
            description="Routes work",
            capabilities={
                "streaming": True,
                "pushNotifications": True,
                "extensions": [{"uri": CLIENT_ROUTING_URI}],
            },
            skills=[skill("triage", "routing")],
        ),
    }
    for agent_id, card in cards.items():
        assert register(api, served(card), id=agent_id).status_code == 201
    Agent.objects.filter(pk="gamma").update(health="healthy")
    Agent.objects.filter(pk="beta").update(status="deprecated")
    return cards


def ids(response):
    assert response.status_code == 200, response.json()
    return [agent["id"] for agent in response.json()["agents"]]


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ({}, ["alpha", "beta", "delta", "gamma"]),
        ({"q": "translates"}, ["alpha"]),
        ({"q": "summarize"}, ["alpha"]),
        ({"q": "WEB research"}, ["gamma"]),
        ({"skill": "chart"}, ["beta"]),
        ({"tag": "text"}, ["alpha"]),
        ({"tag": "Routing"}, ["delta"]),
        ({"extension": CLIENT_ROUTING_URI}, ["delta"]),
        ({"streaming": "true"}, ["alpha", "delta"]),
        ({"streaming": "false"}, ["beta", "gamma"]),
        ({"pushNotifications": "true"}, ["delta"]),
        ({"inputMode": "application/json"}, ["beta"]),
        ({"outputMode": "image/png"}, ["beta"]),
        ({"status": "deprecated"}, ["beta"]),
        ({"health": "healthy"}, ["gamma"]),
        ({"health": "unknown", "tag": "text"}, ["alpha"]),
        ({"updatedSince": "2000-01-01T00:00:00Z"}, ["alpha", "beta", "delta", "gamma"]),
        ({"updatedSince": "2999-01-01T00:00:00Z"}, []),
    ],
    ids=lambda value: (
        "-".join(f"{k}={v}" for k, v in value.items()) if isinstance(value, dict) else None
    ),
)
def test_every_filter_narrows_the_list(anonymous, catalogue, query, expected):
    assert ids(anonymous.get("/a2a/registry", query)) == expected


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ({"streaming": "maybe"}, "streaming must be true or false"),
        ({"status": "gone"}, "status must be one of"),
        ({"health": "sick"}, "health must be one of"),
        ({"updatedSince": "yesterday"}, "updatedSince must be"),
        ({"limit": "0"}, "limit must be between"),
        ({"limit": "many"}, "limit must be a whole number"),
        ({"cursor": "!!!"}, "cursor"),
    ],
)
def test_bad_filter_values_are_a_400_saying_why(anonymous, query, message):
    response = anonymous.get("/a2a/registry", query)
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "invalid_query"
    assert message in response.json()["error"]["message"]


def test_cursor_paging_walks_every_agent_once(anonymous, catalogue):
    seen, cursor = [], None
    for _ in range(5):
        query = {"limit": 3, **({"cursor": cursor} if cursor else {})}
        body = anonymous.get("/a2a/registry", query).json()
        seen += [agent["id"] for agent in body["agents"]]
        cursor = body["nextCursor"]
        if cursor is None:
            break
    assert seen == ["alpha", "beta", "delta", "gamma"]


def test_paging_keeps_the_filters(anonymous, catalogue):
    first = anonymous.get("/a2a/registry", {"limit": 1, "streaming": "true"}).json()
    second = anonymous.get(
        "/a2a/registry", {"limit": 1, "streaming": "true", "cursor": first["nextCursor"]}
    ).json()
    assert [a["id"] for a in first["agents"] + second["agents"]] == ["alpha", "delta"]
    assert second["nextCursor"] is None


def test_registry_reads_can_be_made_private(anonymous, api, catalogue, settings):
    settings.RELAY_REGISTRY_PUBLIC = False
    assert anonymous.get("/a2a/registry").status_code == 401
    assert anonymous.get("/a2a/skills").status_code == 401
    assert ids(api.get("/a2a/registry"))[:1] == ["alpha"]


def test_skill_search_ranks_matches_by_meaning_and_reports_health(anonymous, catalogue):
    body = anonymous.get("/a2a/skills", {"q": "text"}).json()
    assert body["search"] == {"mode": "semantic"}
    found = [(m["agentId"], m["skillId"]) for m in body["matches"]]
    assert set(found[:2]) == {("alpha", "summarize"), ("alpha", "translate")}
    assert all(m["words"] == 1.0 for m in body["matches"][:2])
    assert all(m["score"] < body["matches"][1]["score"] for m in body["matches"][2:])
    web = anonymous.get("/a2a/skills", {"q": "web"}).json()["matches"][0]
    assert (web["agentId"], web["skillId"], web["health"]) == ("gamma", "search", "healthy")
    asked = anonymous.get("/a2a/skills", {"q": "look things up on the internet"}).json()
    assert (asked["matches"][0]["agentId"], asked["matches"][0]["skillId"]) == ("gamma", "search")


def test_skill_search_by_words_when_the_model_is_off(anonymous, catalogue, settings):
    from registry import embeddings

    settings.RELAY_EMBEDDINGS = False
    embeddings.reset()
    try:
        body = anonymous.get("/a2a/skills", {"q": "text"}).json()
    finally:
        embeddings.reset()
    assert body["search"]["mode"] == "lexical"
    assert "RELAY_EMBEDDINGS" in body["search"]["reason"]
    matches = body["matches"]
    assert [(m["agentId"], m["skillId"]) for m in matches] == [
        ("alpha", "summarize"),
        ("alpha", "translate"),
    ] or [(m["agentId"], m["skillId"]) for m in matches] == [
        ("alpha", "translate"),
        ("alpha", "summarize"),
    ]
    scores = [m["score"] for m in matches]
    assert scores == sorted(scores, reverse=True) and scores[-1] > 0


def test_skill_search_scores_a_name_match_above_a_description_match(anonymous, api, served):
    register(
        api,
        served(
            card_v1(
                name="One", skills=[skill("a", name="Plain", description="can summarize long text")]
            )
        ),
        id="one",
    )
    register(
        api,
        served(card_v1(name="Two", skills=[skill("b", name="Summarize", description="short")])),
        id="two",
    )
    matches = anonymous.get("/a2a/skills", {"q": "summarize"}).json()["matches"]
    assert [m["agentId"] for m in matches] == ["two", "one"]
    assert matches[0]["score"] > matches[1]["score"]


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ({"tag": "plot"}, [("beta", "chart")]),
        ({"inputMode": "application/json"}, [("beta", "chart")]),
        ({"outputMode": "image/png"}, [("beta", "chart")]),
        ({"extension": CLIENT_ROUTING_URI}, [("delta", "triage")]),
    ],
)
def test_skill_search_filters(anonymous, catalogue, query, expected):
    matches = anonymous.get("/a2a/skills", query).json()["matches"]
    assert [(m["agentId"], m["skillId"]) for m in matches] == expected


def test_disabled_agents_offer_no_skills(anonymous, api, catalogue):
    api.patch("/a2a/registry/gamma", {"status": "disabled"}, format="json")
    matches = anonymous.get("/a2a/skills", {"q": "web"}).json()["matches"]
    assert "gamma" not in {m["agentId"] for m in matches}


def _list_queries(client, **query) -> int:
    with CaptureQueriesContext(connection) as queries:
        assert client.get("/a2a/registry", query).status_code == 200
    return len(queries)


def test_list_and_search_run_a_constant_number_of_queries(anonymous, api, served):
    base = card_v1()
    for index in range(3):
        register(api, served(dict(base, name=f"Agent {index}")))
    small = (
        _list_queries(anonymous, limit=100),
        _list_queries(anonymous, q="agent"),
        _list_queries(anonymous, tag="weather", limit=2),
    )
    for index in range(3, 25):
        register(api, served(dict(base, name=f"Agent {index}")))
    large = (
        _list_queries(anonymous, limit=100),
        _list_queries(anonymous, q="agent"),
        _list_queries(anonymous, tag="weather", limit=20),
    )
    assert small == large == (3, 3, 3)


def test_the_openapi_schema_describes_the_registry(anonymous):
    schema = anonymous.get("/api/schema", HTTP_ACCEPT="application/json")
    assert schema.status_code == 200
    paths = schema.json()["paths"]
    assert {"/a2a/registry", "/a2a/registry/{agent_id}", "/a2a/skills"} <= set(paths)
    docs = anonymous.get("/api/docs")
    assert docs.status_code == 200
    assert b"swagger-ui" in docs.content


def test_the_schema_of_the_card_history_is_the_object_it_answers(anonymous):
    """Regression: the schema said GET /a2a/registry/{id}/history answers an array."""
    schema = anonymous.get("/api/schema", HTTP_ACCEPT="application/json").json()
    answer = schema["paths"]["/a2a/registry/{agent_id}/history"]["get"]["responses"]["200"]
    reference = answer["content"]["application/json"]["schema"]["$ref"]
    shape = schema["components"]["schemas"][reference.rsplit("/", 1)[1]]
    assert shape["type"] == "object"
    assert shape["properties"]["snapshots"]["type"] == "array"


def test_a_refresh_brings_the_cards_new_name_and_description_but_keeps_an_operators(api):
    document = card_v1()
    with card_site(
        {"/.well-known/agent-card.json": lambda request: card_json(document)(request)}
    ) as (_site, url):
        register(api, url)
        document["name"], document["description"] = "Weather Pro", "Forecasts and alerts"
        api.post("/a2a/registry/weather/refresh")
        renamed = api.get("/a2a/registry/weather").json()
        assert (renamed["name"], renamed["description"]) == ("Weather Pro", "Forecasts and alerts")
        api.patch("/a2a/registry/weather", {"name": "Our weather"}, format="json")
        document["name"], document["description"] = "Weather Max", "Forecasts only"
        api.post("/a2a/registry/weather/refresh")
    kept = api.get("/a2a/registry/weather").json()
    assert (kept["name"], kept["description"]) == ("Our weather", "Forecasts only")
    found = api.get("/a2a/registry", {"q": "forecasts only"}).json()["agents"]
    assert [agent["id"] for agent in found] == ["weather"]
