"""Discovery measured on a held-out set (``discovery_heldout.json``), written apart from the
tuning set of ``discovery_eval`` and never used to tune: word search without the model, and
sparse cards whose meaning is only in the agent's own name and description."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from registry import embeddings, semantic, tasks
from registry.models import Skill
from tests.registry import discovery_eval as evaluation

pytestmark = pytest.mark.django_db

HELDOUT = json.loads((Path(__file__).parent / "discovery_heldout.json").read_text())


def questions(*, sparse: bool | None = None) -> list[dict]:
    return [q for q in HELDOUT["questions"] if sparse is None or q["sparse"] == sparse]


def hit_at_5(search, asked: list[dict]) -> float:
    """The share of ``asked`` with at least one right agent among the first five found."""
    hits = [bool(set(search(q["text"])[:5]) & set(q["expected"])) for q in asked]
    return sum(hits) / len(hits)


def skill_search(client):
    def search(text: str) -> list[str]:
        body = client.get("/a2a/skills", {"q": text, "limit": 20}).json()
        return evaluation.ranked_agents(body["matches"])

    return search


@pytest.fixture
def heldout_agents(remembered_vectors):
    evaluation.register_all(
        {
            agent_id: evaluation._card(agent["name"], agent["description"], agent["skills"])
            for agent_id, agent in HELDOUT["agents"].items()
        }
    )


@pytest.fixture
def model_off(settings):
    settings.RELAY_EMBEDDINGS = False
    embeddings.reset()
    yield
    embeddings.reset()


def test_the_heldout_set_has_30_agents_30_questions_and_sparse_cards():
    assert len(HELDOUT["agents"]) >= 30
    assert len(questions()) >= 30
    assert len(questions(sparse=True)) >= 10
    for question in questions():
        assert set(question["expected"]) <= set(HELDOUT["agents"]), question


def test_without_the_model_word_search_finds_a_right_agent_at_5_for_half_the_questions(
    anonymous, heldout_agents, model_off
):
    found = hit_at_5(skill_search(anonymous), questions())
    assert found >= 0.5, found


def test_without_the_model_select_ranks_by_words_instead_of_answering_nothing(
    api, heldout_agents, model_off
):
    message = {"messageId": "m-1", "role": "ROLE_USER", "parts": [{"text": "when to sow carrots"}]}
    answer = api.post("/a2a/select", {"message": message, "limit": 3}, format="json").json()
    assert answer["search"]["mode"] == "lexical"
    assert answer["candidates"][0]["agentId"] == "plants-2"


def hit_at_5_by_meaning(anonymous) -> tuple[float, float]:
    """hit@5 of search by meaning on the sparse-card questions and on the others."""
    search = skill_search(anonymous)
    return hit_at_5(search, questions(sparse=True)), hit_at_5(search, questions(sparse=False))


def test_the_agents_own_text_finds_sparse_cards_and_loses_nothing_elsewhere(
    anonymous, heldout_agents, monkeypatch
):
    with_agent = hit_at_5_by_meaning(anonymous)
    # The same index with each skill's own text only, as it was embedded before.
    monkeypatch.setattr(semantic, "_agent_text_of", semantic._text_of)
    tasks.reindex_skill_embeddings(everything=True)
    skill_alone = hit_at_5_by_meaning(anonymous)
    assert with_agent[0] - skill_alone[0] >= 0.10, (with_agent, skill_alone)
    assert with_agent[1] >= skill_alone[1], (with_agent, skill_alone)


def test_the_readme_umbrella_question_finds_the_sparse_weather_agent_in_the_top_five(
    anonymous, heldout_agents
):
    found = skill_search(anonymous)("will I need an umbrella in Lyon tomorrow?")
    assert "weather-agent" in found[:5], found


def test_agents_registered_while_the_model_was_down_are_found_by_meaning_once_it_is_back(
    anonymous, settings
):
    settings.RELAY_EMBEDDINGS = False
    embeddings.reset()
    test_agents = HELDOUT["agents"]
    evaluation.register_all(
        {
            agent_id: evaluation._card(agent["name"], agent["description"], agent["skills"])
            for agent_id, agent in test_agents.items()
        }
    )
    assert not Skill.objects.exclude(embedding=None).exists()
    down = anonymous.get("/a2a/skills", {"q": "is my plane to Oslo delayed"}).json()
    assert down["search"]["mode"] == "lexical" and down["search"]["reason"]
    settings.RELAY_EMBEDDINGS = True
    embeddings.reset()
    back = anonymous.get("/a2a/skills", {"q": "is my plane to Oslo delayed"}).json()
    assert back["search"] == {"mode": "semantic"}
    assert "flight-status-agent" in evaluation.ranked_agents(back["matches"])[:5]
    assert not Skill.objects.filter(embedding=None).exists()


def test_a_search_says_when_some_skills_are_not_indexed_by_meaning_yet(
    anonymous, heldout_agents, monkeypatch
):
    Skill.objects.filter(agent_id="plants-2").update(
        embedding=None, embedding_model="", embedded_at=None
    )
    monkeypatch.setattr(semantic, "MISSING_PER_SEARCH", 0)
    body = anonymous.get("/a2a/skills", {"q": "when should I sow carrots"}).json()
    assert body["search"]["mode"] == "semantic"
    assert "1 skill(s) not indexed by meaning yet" in body["search"]["reason"]
    assert evaluation.ranked_agents(body["matches"])[0] == "plants-2"


def test_the_reindex_command_fills_in_embeddings_stored_without_the_model(heldout_agents):
    from django.core.management import call_command

    Skill.objects.update(embedding=None, embedding_model="", embedded_at=None)
    output = io.StringIO()
    call_command("reindex_embeddings", stdout=output)
    assert output.getvalue().strip() == f"{Skill.objects.count()} skill embedding(s) written"
    assert not Skill.objects.filter(embedding=None).exists()
