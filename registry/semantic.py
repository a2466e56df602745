"""Search by meaning: skills ranked by what they mean, the words they share with the question,
the health of their agent and its measured latency.

Each skill's embedding is computed when its card is stored (:func:`embed_skills`, called by
``registry.services``) and kept in the ``Skill`` row. Each process keeps every embedding in one
numpy matrix (:class:`SkillIndex`), rebuilt when the stored embeddings change: before each
search one small aggregate query (highest skill id, skill count, latest embedding time) says
whether they did. A question is then one model run (a few milliseconds) and one matrix-vector
product, whatever the number of agents; only the best few candidates are read from the
database. PostgreSQL's pgvector is not used: it is not among the machine's packages.

When the model cannot load, :func:`skill_find` ranks by words alone (BM25 over agent and skill
text, ``registry.lexical``) and says so in its :class:`SearchMode`.
"""

from __future__ import annotations

import contextlib
import logging
import re
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np
from django.db.models import Max
from django.utils import timezone

from registry import embeddings, lexical, skill_search
from registry.models import Agent, Skill
from registry.search_text import facet

logger = logging.getLogger(__name__)

# How a skill's score is made: meaning and shared words decide relevance; among relevant
# skills, a healthy and fast agent goes first.
WEIGHT_MEANING = 0.70
WEIGHT_WORDS = 0.18
WEIGHT_HEALTH = 0.08
WEIGHT_LATENCY = 0.04
# An agent's own text says less about one skill than the skill's text: its closeness counts
# for this share.
AGENT_MEANING_SHARE = 0.8
# Below this relevance (meaning and words) a skill is not a match at all.
MIN_RELEVANCE = 0.10
HEALTH_FACTOR = {
    Agent.Health.HEALTHY: 1.0,
    Agent.Health.UNKNOWN: 0.7,
    Agent.Health.DEGRADED: 0.35,
    Agent.Health.UNHEALTHY: 0.0,
}
_STOP_WORDS = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "at",
        "be",
        "by",
        "can",
        "do",
        "does",
        "for",
        "from",
        "get",
        "give",
        "has",
        "have",
        "how",
        "i",
        "in",
        "is",
        "it",
        "me",
        "my",
        "need",
        "of",
        "on",
        "or",
        "our",
        "please",
        "some",
        "something",
        "that",
        "the",
        "this",
        "to",
        "what",
        "where",
        "which",
        "who",
        "will",
        "with",
        "would",
        "you",
        "your",
    ]
)
_WORD = re.compile(r"[\w./+-]+")


@dataclass(frozen=True)
class SearchMode:
    """How a search was answered: ``semantic`` (meaning and words) or ``lexical`` (words only,
    with the reason), or ``filters`` (no question, only filters)."""

    mode: str
    reason: str = ""

    def as_dict(self) -> dict:
        return {"mode": self.mode, **({"reason": self.reason} if self.reason else {})}


@dataclass(frozen=True)
class SkillMatch:
    skill: Skill
    score: float
    meaning: float = 0.0
    words: float = 0.0
    health: float = 0.0
    latency: float = 0.0


@dataclass(frozen=True)
class SkillQuery:
    """A search: the question and the filters a skill must pass."""

    text: str = ""
    tags: tuple[str, ...] = ()  # the skill carries every one
    input_modes: tuple[str, ...] = ()  # the skill accepts every one
    output_modes: tuple[str, ...] = ()  # the skill produces every one
    extension: str = ""
    agent_ids: frozenset[str] | None = None  # only these agents (a team's members)
    healthy_only: bool = False

    @property
    def has_filters(self) -> bool:
        return bool(
            self.tags
            or self.input_modes
            or self.output_modes
            or self.extension
            or self.agent_ids is not None
        )

    def admits(self, skill: Skill) -> bool:
        """Whether ``skill`` passes the tag and mode filters (checked in Python)."""
        return (
            all(facet(tag) in skill.tag_facets for tag in self.tags)
            and all(facet(mode) in skill.input_mode_facets for mode in self.input_modes)
            and all(facet(mode) in skill.output_mode_facets for mode in self.output_modes)
        )


def query_words(text: str) -> list[str]:
    """The words of a question that count for word matching (lower case, no stop words)."""
    return [w for w in dict.fromkeys(_WORD.findall(text.lower())) if w not in _STOP_WORDS]


# --- Writes ---------------------------------------------------------------------------------


def model_warm() -> None:
    """Loads the model now if it is not loaded yet (about 0.3 s, once per process), so a write
    does not load it while it holds a transaction open. Never raises."""
    with contextlib.suppress(embeddings.EmbeddingsUnavailable):
        embeddings.embedder()


# What a stored embedding holds: two vectors of the model, for the skill's own text and for
# its agent's name and description (see :func:`embed_skills`).
EMBEDDING_KIND = f"{embeddings.MODEL_NAME}/skill+agent"


def embed_skills(skills: Iterable[Skill]) -> bool:
    """Sets ``embedding``, ``embedding_model`` and ``embedded_at`` on unsaved or saved skills
    (the caller saves them). Returns False, leaving them empty, when the model is unavailable:
    storing a card never fails for want of it.

    Two vectors are stored: the skill's own text, and its agent's name and description; a
    question's meaning is its closer one. The agent's text finds sparse cards (a generic skill
    of an agent that says what it does), and the skill's own text keeps a full card as close
    as it was."""
    skills = list(skills)
    if not skills:
        return True
    try:
        model = embeddings.embedder()
    except embeddings.EmbeddingsUnavailable:
        return False
    texts = [text for skill in skills for text in (_text_of(skill), _agent_text_of(skill))]
    vectors = model.encode(texts)
    now = timezone.now()
    for number, skill in enumerate(skills):
        skill.embedding = embeddings.to_bytes(vectors[2 * number : 2 * number + 2].reshape(-1))
        skill.embedding_model = EMBEDDING_KIND
        skill.embedded_at = now
    return True


def skill_embeddings_refresh(
    *, everything: bool = False, batch_size: int = 256, at_most: int | None = None
) -> int:
    """Computes the embeddings that are missing or were made by another model (every one with
    ``everything``; the first ``at_most`` when given). Returns how many were written. Raises
    EmbeddingsUnavailable without the model."""
    embeddings.embedder()
    queryset = Skill.objects.all()
    if not everything:
        # A skill without an embedding has an empty model name.
        queryset = queryset.exclude(embedding_model=EMBEDDING_KIND)
    pks = list(queryset.order_by("pk").values_list("pk", flat=True)[:at_most])
    written = 0
    for start in range(0, len(pks), batch_size):
        skills = list(
            Skill.objects.select_related("agent").filter(pk__in=pks[start : start + batch_size])
        )
        embed_skills(skills)
        Skill.objects.bulk_update(skills, ["embedding", "embedding_model", "embedded_at"])
        written += len(skills)
    return written


def _text_of(skill: Skill) -> str:
    return embeddings.skill_text(
        name=skill.name, description=skill.description, tags=skill.tags, examples=skill.examples
    )


def _agent_text_of(skill: Skill) -> str:
    # An agent that describes itself with this skill's own words says nothing more about it.
    if skill.agent.description.strip().lower() == skill.description.strip().lower():
        return _text_of(skill)
    # The description only: a name is often a brand ("Umbrella Corp"), not what it does.
    return skill.agent.description or skill.agent.name


# --- The in-process index -------------------------------------------------------------------


@dataclass
class SkillIndex:
    """Every stored skill embedding of this process, in one matrix."""

    version: tuple
    pks: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    matrix: np.ndarray = field(
        default_factory=lambda: np.zeros((0, embeddings.DIMENSION), dtype=np.float32)
    )
    # The vectors of the same skills' agents' text (EMBEDDING_KIND).
    agent_matrix: np.ndarray = field(
        default_factory=lambda: np.zeros((0, embeddings.DIMENSION), dtype=np.float32)
    )
    # Word -> positions of the skills whose search text has it (word matching without a
    # scan of every text).
    postings: dict[str, np.ndarray] = field(default_factory=dict)
    # BM25 over each skill's and its agent's text: the ranking when the model is absent.
    word_index: lexical.WordIndex = field(default_factory=lambda: lexical.WordIndex([]))
    # Which skills have an embedding of the current model.
    has_embedding: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=bool))
    embedded: int = 0
    stale: bool = False

    @property
    def size(self) -> int:
        return len(self.pks)

    def word_scores(self, words: list[str]) -> np.ndarray:
        """The share of ``words`` each skill's text has (a word matches a text's word that
        starts with it, so "flight" finds "flights"; "flights" also finds "flight")."""
        found = np.zeros(self.size, dtype=np.float32)
        if not words or not self.size:
            return found
        for word in words:
            stem = word[:-1] if len(word) > 3 and word.endswith("s") else word
            hits = [
                positions for token, positions in self.postings.items() if token.startswith(stem)
            ]
            if hits:
                found[np.unique(np.concatenate(hits))] += 1
        return found / len(words)


_index_lock = threading.Lock()
_index: SkillIndex | None = None


def _stored_version() -> tuple:
    # Two index lookups, whatever the number of skills: a stored card adds skills (a higher
    # id) and an embedding job stamps embedded_at. A deleted skill changes neither; the search
    # skips it, and marks the index stale so the next search rebuilds it.
    aggregate = Skill.objects.aggregate(highest=Max("pk"), latest=Max("embedded_at"))
    return (aggregate["highest"], aggregate["latest"])


def skill_index() -> SkillIndex:
    """The index, rebuilt first when the stored embeddings changed (one small query when they
    did not)."""
    global _index
    version = _stored_version()
    index = _index
    if index is not None and index.version == version and not index.stale:
        return index
    with _index_lock:
        if _index is None or _index.version != version or _index.stale:
            _index = _build_index(version)
        return _index


def forget_index() -> None:
    """Drops this process's index; the next search rebuilds it."""
    global _index
    with _index_lock:
        _index = None


def _build_index(version: tuple) -> SkillIndex:
    rows = list(
        Skill.objects.order_by("pk").values(
            "pk",
            "search_text",
            "embedding",
            "embedding_model",
            "name",
            "description",
            "tags",
            "examples",
            "agent__name",
            "agent__description",
        )
    )
    dimension = embeddings.DIMENSION
    matrix = np.zeros((len(rows), dimension), dtype=np.float32)
    agent_matrix = np.zeros((len(rows), dimension), dtype=np.float32)
    has_embedding = np.zeros(len(rows), dtype=bool)
    postings: dict[str, list[int]] = {}
    for position, row in enumerate(rows):
        blob = row["embedding"]
        if blob is not None and row["embedding_model"] == EMBEDDING_KIND:
            vector = embeddings.from_bytes(blob)
            if vector.shape == (2 * dimension,):
                matrix[position], agent_matrix[position] = vector.reshape(2, dimension)
                has_embedding[position] = True
        for token in set(_WORD.findall(row["search_text"] or "")):
            postings.setdefault(token, []).append(position)
    word_index = lexical.WordIndex(
        lexical.document_text(
            agent_name=row["agent__name"],
            agent_description=row["agent__description"],
            name=row["name"],
            description=row["description"],
            tags=row["tags"] or [],
            examples=row["examples"] or [],
        )
        for row in rows
    )
    return SkillIndex(
        version=version,
        pks=np.array([row["pk"] for row in rows], dtype=np.int64),
        matrix=matrix,
        agent_matrix=agent_matrix,
        postings={token: np.array(p, dtype=np.int64) for token, p in postings.items()},
        word_index=word_index,
        has_embedding=has_embedding,
        embedded=int(has_embedding.sum()),
    )


# --- Search ---------------------------------------------------------------------------------


def _allowed_pks(query: SkillQuery) -> np.ndarray | None:
    if not query.has_filters:
        return None
    queryset = Skill.objects.all()
    for tag in query.tags:
        queryset = queryset.filter(tag_facets__contains=facet(tag))
    for mode in query.input_modes:
        queryset = queryset.filter(input_mode_facets__contains=facet(mode))
    for mode in query.output_modes:
        queryset = queryset.filter(output_mode_facets__contains=facet(mode))
    if query.extension:
        queryset = queryset.filter(agent__extension_facets__contains=f"|{query.extension}|")
    if query.agent_ids is not None:
        queryset = queryset.filter(agent_id__in=query.agent_ids)
    return np.array(list(queryset.values_list("pk", flat=True)), dtype=np.int64)


def latency_factor(latency_ms: float | None) -> float:
    """1 for an instant agent, 0.5 at one second; 0.5 when never measured."""
    if latency_ms is None:
        return 0.5
    return 1.0 / (1.0 + max(latency_ms, 0.0) / 1000.0)


# Columns a search never shows: not read for its candidates.
_NOT_SHOWN = (
    "embedding",
    "search_text",
    "agent__search_text",
    "agent__skill_facets",
    "agent__tag_facets",
    "agent__input_mode_facets",
    "agent__output_mode_facets",
    "agent__interfaces",
    "agent__auth_header_value",
    "agent__readiness_message",
)


def semantic_search(query: SkillQuery, *, limit: int) -> list[SkillMatch]:
    """Skills of agents that are not disabled, best first. A skill the model has not indexed
    yet is ranked by its words alone. Raises EmbeddingsUnavailable."""
    model = embeddings.embedder()
    index = skill_index()
    if index.embedded < index.size:
        # Cards stored while the model was down: indexed now that it is here, a batch per
        # search, rather than left out until the hourly job.
        skill_embeddings_refresh(at_most=MISSING_PER_SEARCH)
        index = skill_index()
    if index.embedded == 0 and index.size:
        raise embeddings.EmbeddingsUnavailable("no skill has an embedding yet")
    if not index.size:
        return []
    vector = model.encode([query.text])[0]
    # einsum rather than the BLAS product: one thread, so its time does not balloon when
    # the CPUs are busy with other requests (the threaded BLAS product did, 3 to 7 times).
    meaning = np.maximum(
        np.einsum("ij,j->i", index.matrix, vector),
        AGENT_MEANING_SHARE * np.einsum("ij,j->i", index.agent_matrix, vector),
    )
    meaning = np.clip(meaning, 0.0, 1.0)
    words = index.word_scores(query_words(query.text))
    relevance = (WEIGHT_MEANING * meaning + WEIGHT_WORDS * words) / (WEIGHT_MEANING + WEIGHT_WORDS)
    if index.embedded < index.size:
        relevance = np.where(
            index.has_embedding, relevance, index.word_index.scores(query.text) * WORDS_ONLY_SHARE
        )
    return _ranked(query, index, relevance, meaning=meaning, words=words, limit=limit)


# How many missing embeddings a search computes before answering (about a second's work).
MISSING_PER_SEARCH = 256

# A skill ranked by words alone (no embedding yet) next to skills ranked by meaning: its best
# word match counts as a fair, not a perfect, match in meaning.
WORDS_ONLY_SHARE = 0.6


def word_search(query: SkillQuery, *, limit: int) -> list[SkillMatch]:
    """Skills of agents that are not disabled, ranked by BM25 over their own and their agent's
    text (``registry.lexical``), best first; a question need not share every word."""
    index = skill_index()
    if not index.size:
        return []
    relevance = index.word_index.scores(query.text)
    return _ranked(query, index, relevance, meaning=None, words=relevance, limit=limit)


def _ranked(
    query: SkillQuery,
    index: SkillIndex,
    relevance: np.ndarray,
    *,
    meaning: np.ndarray | None,
    words: np.ndarray,
    limit: int,
) -> list[SkillMatch]:
    """The best ``limit`` skills by ``relevance`` (0 to 1), the agent's health and latency,
    among those passing the query's filters."""
    allowed = _allowed_pks(query)
    if allowed is not None:
        relevance = np.where(np.isin(index.pks, allowed), relevance, -1.0)
    relevance = np.where(relevance >= MIN_RELEVANCE, relevance, -1.0)
    # Candidates: more than asked for, since disabled or unhealthy agents may drop out and
    # health reorders them.
    wanted = min(index.size, limit + 20)
    top = np.argpartition(-relevance, wanted - 1)[:wanted]
    top = top[relevance[top] >= 0]
    candidates = [int(pk) for pk in index.pks[top]]
    found = list(Skill.objects.select_related("agent").defer(*_NOT_SHOWN).filter(pk__in=candidates))
    if len(found) < len(candidates):
        index.stale = True  # skills deleted since the index was built: rebuild next time
    by_pk = {skill.pk: skill for skill in found if skill.agent.status != Agent.Status.DISABLED}
    matches = []
    for position in top:
        skill = by_pk.get(int(index.pks[position]))
        if skill is None:
            continue
        if query.healthy_only and skill.agent.health == Agent.Health.UNHEALTHY:
            continue
        health = HEALTH_FACTOR.get(skill.agent.health, 0.5)
        latency = latency_factor(skill.agent.health_latency_ms)
        score = (
            (WEIGHT_MEANING + WEIGHT_WORDS) * float(relevance[position])
            + WEIGHT_HEALTH * health
            + WEIGHT_LATENCY * latency
        )
        matches.append(
            SkillMatch(
                skill=skill,
                score=round(score, 3),
                meaning=0.0 if meaning is None else round(float(meaning[position]), 3),
                words=round(float(words[position]), 3),
                health=health,
                latency=round(latency, 3),
            )
        )
    matches.sort(key=lambda m: (-m.score, m.skill.agent_id, m.skill.position))
    return matches[:limit]


def skill_find(query: SkillQuery, *, limit: int = 20) -> tuple[list[SkillMatch], SearchMode]:
    """Skills that match ``query``, best first, and how they were found: by meaning when the
    model is there, otherwise by words (:func:`word_search`); with no question, every skill
    passing the filters as ``registry.skill_search.skill_search`` lists them."""
    if query.text.strip():
        try:
            matches = semantic_search(query, limit=limit)
        except embeddings.EmbeddingsUnavailable as error:
            return word_search(query, limit=limit), SearchMode("lexical", str(error))
        index = skill_index()
        if index.embedded < index.size:
            missing = index.size - index.embedded
            return matches, SearchMode(
                "semantic", f"{missing} skill(s) not indexed by meaning yet were ranked by words"
            )
        return matches, SearchMode("semantic")
    found = skill_search.skill_search(
        filters=skill_search.SkillFilters(
            q=query.text,
            tag=query.tags[0] if query.tags else "",
            input_mode=query.input_modes[0] if query.input_modes else "",
            output_mode=query.output_modes[0] if query.output_modes else "",
            extension=query.extension,
        ),
        limit=limit,
        agent_ids=query.agent_ids,
    )
    matches = [
        SkillMatch(
            skill=skill,
            score=score,
            words=score,
            health=HEALTH_FACTOR.get(skill.agent.health, 0.5),
            latency=latency_factor(skill.agent.health_latency_ms),
        )
        for skill, score in found
        if query.admits(skill)
        and not (query.healthy_only and skill.agent.health == Agent.Health.UNHEALTHY)
    ]
    return matches, SearchMode("filters")


def agents_of(matches: list[SkillMatch]) -> list[str]:
    """The agents of ``matches`` in order of their best skill."""
    return list(dict.fromkeys(m.skill.agent_id for m in matches))
