"""Discovery benchmark: search by meaning against word search on the evaluation set, and what a
search costs with 100 and with 10,000 agents.

1. Registers the evaluation set of tests/registry/discovery_eval.py (159 agents, 49 questions)
   in a throwaway SQLite database through the registration service, then asks every question
   with ``GET /a2a/skills?q=`` by meaning and with the model off (words only) and with
   ``POST /a2a/select``: recall@5 and MRR of each. Target: meaning at least 25 points above
   words at recall@5.
2. Fills the registry up to 100 and then 10,000 agents (two skills each, written straight into
   the tables with their embeddings, so the filling takes seconds) and times
   ``GET /a2a/skills?q=`` through the whole Django + DRF stack: p50 and p99 at each size and
   the ratio of the p50s. Target: at most 3x.
3. With ``--compare``, also scores the other embedding models tried, when installed (the
   tokenlearn static model), outside Django: recall@5, MRR, load time, time per question.

    python bench/discovery_bench.py [--requests 200] [--compare]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.common import setup_django  # noqa: E402  (the path above makes `bench` importable)

setup_django()

import numpy as np  # noqa: E402
from django.conf import settings  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.test import Client  # noqa: E402
from django.utils import timezone  # noqa: E402

from registry import embeddings, semantic  # noqa: E402
from registry.models import Agent, ApiKey, Skill  # noqa: E402
from registry.services import api_key_create  # noqa: E402
from tests.registry import discovery_eval as evaluation  # noqa: E402

TOPICS = ["weather", "finance", "travel", "legal", "medical", "code", "music", "sports", "retail"]
VERBS = ["summarize", "translate", "search", "classify", "draft", "review", "plan", "extract"]


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def skills_search(client: Client):
    def search(text: str) -> list[str]:
        body = client.get("/a2a/skills", {"q": text, "limit": 20}).json()
        return evaluation.ranked_agents(body["matches"])

    return search


def select_search(client: Client, key: str):
    def search(text: str) -> list[str]:
        body = client.post(
            "/a2a/select",
            {"message": {"role": "ROLE_USER", "parts": [{"text": text}]}, "limit": 5},
            content_type="application/json",
            HTTP_AUTHORIZATION=f"Bearer {key}",
        ).json()
        return [candidate["agentId"] for candidate in body["candidates"]]

    return search


def quality(client: Client, key: str) -> bool:
    started = time.perf_counter()
    evaluation.register_all()
    print(
        f"registered {Agent.objects.count()} agents ({Skill.objects.count()} skills) in "
        f"{time.perf_counter() - started:.1f} s, embeddings included",
        flush=True,
    )
    meaning = evaluation.evaluate(skills_search(client))
    chosen = evaluation.evaluate(select_search(client, key))
    settings.RELAY_EMBEDDINGS = False
    embeddings.reset()
    words = evaluation.evaluate(skills_search(client))
    settings.RELAY_EMBEDDINGS = True
    embeddings.reset()
    print(f"\n{'questions: ' + str(len(evaluation.queries())):<34} {'recall@5':>9} {'MRR':>7}")
    print(f"{'GET /a2a/skills?q= by meaning':<34} {meaning[0]:>9.3f} {meaning[1]:>7.3f}")
    print(f"{'GET /a2a/skills?q= words only':<34} {words[0]:>9.3f} {words[1]:>7.3f}")
    print(f"{'POST /a2a/select':<34} {chosen[0]:>9.3f} {chosen[1]:>7.3f}")
    margin = (meaning[0] - words[0]) * 100
    ok = margin >= 25
    print(f"meaning beats words by {margin:.1f} points at recall@5: {'met' if ok else 'MISSED'}")
    return ok


def fill_to(size: int, vectors: dict[str, bytes]) -> None:
    """Adds agents with two generic skills each until the registry has ``size`` agents."""
    now = timezone.now()
    present = Agent.objects.count()
    agents, skills = [], []
    for number in range(present, size):
        agent_id = f"filler-{number:05d}"
        agents.append(
            Agent(
                id=agent_id,
                name=f"Filler {number}",
                card_url=f"https://filler{number}.example/.well-known/agent-card.json",
                search_text=f"{agent_id} filler {number}",
                health=Agent.Health.HEALTHY if number % 4 == 0 else Agent.Health.UNKNOWN,
                health_latency_ms=float(20 + number % 300),
            )
        )
        for position in range(2):
            verb = VERBS[(number + position) % len(VERBS)]
            topic = TOPICS[(number // len(VERBS) + position) % len(TOPICS)]
            name = f"{verb.title()} {topic}"
            skills.append(
                Skill(
                    agent_id=agent_id,
                    skill_id=f"{verb}-{topic}",
                    name=name,
                    description=f"Can {verb} {topic} material.",
                    tags=[verb, topic],
                    position=position,
                    search_text=f"{verb}-{topic} {name} can {verb} {topic} material. {verb} {topic}".lower(),
                    tag_facets=f"|{verb}|{topic}|",
                    input_mode_facets="|text/plain|",
                    output_mode_facets="|text/plain|",
                    embedding=vectors[name],
                    embedding_model=semantic.EMBEDDING_KIND,
                    embedded_at=now,
                )
            )
    Agent.objects.bulk_create(agents, batch_size=2000)
    Skill.objects.bulk_create(skills, batch_size=2000)


def filler_vectors() -> dict[str, bytes]:
    model = embeddings.embedder()
    names = [f"{verb.title()} {topic}" for verb in VERBS for topic in TOPICS]
    texts = [
        embeddings.skill_text(
            name=name,
            description=f"Can {name.lower()} material.",
            tags=name.lower().split(),
            examples=[],
        )
        for name in names
    ]
    return {
        # The skill's vector twice: the filler agents say nothing more than their skills.
        name: embeddings.to_bytes(np.concatenate([vector, vector]))
        for name, vector in zip(names, model.encode(texts), strict=True)
    }


def time_search(client: Client, count: int) -> tuple[list[float], float]:
    questions = [query.text for query in evaluation.queries()]
    started = time.perf_counter()
    client.get("/a2a/skills", {"q": questions[0]})  # builds this process's index
    first = (time.perf_counter() - started) * 1000
    for question in questions[:5]:
        client.get("/a2a/skills", {"q": question})
    samples = []
    for number in range(count):
        started = time.perf_counter()
        response = client.get("/a2a/skills", {"q": questions[number % len(questions)]})
        samples.append((time.perf_counter() - started) * 1000)
        assert response.status_code == 200, response.content[:300]
        assert response.json()["search"]["mode"] == "semantic"
    return samples, first


def scale(client: Client, count: int) -> bool:
    vectors = filler_vectors()
    results = {}
    for size in (100, 10_000):
        if size == 100:
            Agent.objects.exclude(pk__in=list(Agent.objects.order_by("pk")[:size])).delete()
        fill_to(size, vectors)
        semantic.forget_index()
        samples, first = time_search(client, count)
        results[size] = samples
        print(
            f"{Agent.objects.count():>6} agents, {Skill.objects.count():>6} skills: p50 "
            f"{statistics.median(samples):6.2f} ms, p99 {percentile(samples, 0.99):6.2f} ms "
            f"(first search, building the index: {first:.0f} ms)",
            flush=True,
        )
    ratio = statistics.median(results[10_000]) / statistics.median(results[100])
    ok = ratio <= 3
    print(f"p50 at 10,000 agents / p50 at 100: {ratio:.2f}x: {'within' if ok else 'OVER'} 3x")
    return ok


def compare() -> None:
    """The models tried, on the evaluation set's skills, outside Django."""
    documents = evaluation.cards()
    owners, texts = [], []
    for agent_id, document in documents.items():
        for skill in document["skills"]:
            owners.append(agent_id)
            texts.append(
                embeddings.skill_text(
                    name=skill["name"],
                    description=skill["description"],
                    tags=skill["tags"],
                    examples=skill.get("examples", []),
                )
            )

    def score(name: str, load, encode) -> None:
        started = time.perf_counter()
        load()
        loaded = time.perf_counter() - started
        matrix = encode(texts)
        matrix = matrix / np.linalg.norm(matrix, axis=1, keepdims=True)
        per_question = []

        def search(text: str) -> list[str]:
            started = time.perf_counter()
            vector = encode([text])[0]
            per_question.append(time.perf_counter() - started)
            order = np.argsort(-(matrix @ (vector / np.linalg.norm(vector))))
            return list(dict.fromkeys(owners[i] for i in order))

        recall, mrr = evaluation.evaluate(search)
        print(
            f"{name:<34} recall@5 {recall:.3f}  MRR {mrr:.3f}  load {loaded * 1000:5.0f} ms  "
            f"per question {statistics.median(per_question) * 1000:5.2f} ms"
        )

    embeddings.reset()
    score(
        "all-MiniLM-L6-v2 int8 (onnxruntime)",
        embeddings.embedder,
        lambda items: embeddings.embedder().encode(list(items)),
    )
    try:
        import static_model
    except ImportError:
        print("tokenlearn-static-model is not installed: pip install tokenlearn-static-model")
        return
    score(
        "tokenlearn static 10k/64d (model2vec)",
        lambda: static_model.get_embeddings(["warm up"]),
        lambda items: np.array(static_model.get_embeddings(list(items)), dtype=np.float32),
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=200, help="Timed searches per size.")
    parser.add_argument("--compare", action="store_true", help="Also score the other models.")
    args = parser.parse_args()
    call_command("migrate", verbosity=0)
    ApiKey.objects.all().delete()
    _key, secret = api_key_create(name="bench", is_admin=True)
    client = Client()
    started = time.perf_counter()
    embeddings.embedder()
    print(f"model loaded in {(time.perf_counter() - started) * 1000:.0f} ms", flush=True)
    good = quality(client, secret)
    print()
    fast = scale(client, args.requests)
    if args.compare:
        print()
        compare()
    return 0 if good and fast else 1


if __name__ == "__main__":
    sys.exit(main())
