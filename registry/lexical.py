"""Search by words: BM25 over what an agent and each of its skills say about themselves.

Used by ``registry.semantic`` when the model cannot run, and for skills the model has not
indexed yet. The ranking is ``bm25s`` (numpy only); words are lower-cased, stop words dropped
and stemmed by PyStemmer's English Snowball stemmer, so "forecasts" finds "forecast" and
"booking" finds "book". A question need not share every word with a skill: skills are ranked
by how much of it, and how rare a word, they share.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

import bm25s
import numpy as np
import Stemmer

_WORD = re.compile(r"[^\W_]+")
_STEMMER = Stemmer.Stemmer("english")
# Words that say nothing about a skill: English function words and the words of a request.
_STOP_WORDS = frozenset(
    [
        "a",
        "about",
        "an",
        "and",
        "any",
        "are",
        "as",
        "at",
        "be",
        "by",
        "can",
        "could",
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
        "if",
        "in",
        "into",
        "is",
        "it",
        "its",
        "just",
        "let",
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
        "their",
        "them",
        "then",
        "there",
        "these",
        "this",
        "those",
        "to",
        "us",
        "want",
        "was",
        "we",
        "what",
        "when",
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


def tokens(text: str) -> list[str]:
    """The stemmed words of ``text`` that count for search (lower case, no stop words)."""
    words = [w for w in _WORD.findall(text.lower()) if w not in _STOP_WORDS]
    return _STEMMER.stemWords(words)


def document_text(
    *, agent_name: str, agent_description: str, name: str, description: str, tags, examples
) -> str:
    """What a skill is found by: its agent's name and description, then its own name,
    description, tags and examples (a sparse card says what it does in the agent's text)."""
    return " ".join(
        [agent_name, agent_description, name, description, *tags, *(str(e) for e in examples)]
    )


class WordIndex:
    """BM25 over a fixed list of documents; :meth:`scores` ranks them for a question."""

    def __init__(self, documents: Iterable[str]) -> None:
        corpus = [tokens(text) for text in documents]
        self.size = len(corpus)
        self._bm25 = bm25s.BM25()
        self._vocabulary: set[str] = set()
        if any(corpus):
            self._bm25.index(corpus, show_progress=False)
            self._vocabulary = set(self._bm25.vocab_dict) - {""}

    def scores(self, question: str) -> np.ndarray:
        """Each document's relevance to ``question`` in [0, 1]: its BM25 score divided by the
        best one (all zeros when no word of the question occurs anywhere)."""
        asked = [w for w in dict.fromkeys(tokens(question)) if w in self._vocabulary]
        if not asked or not self.size:
            return np.zeros(self.size, dtype=np.float32)
        raw = np.asarray(self._bm25.get_scores(asked), dtype=np.float32)
        best = float(raw.max())
        return raw / best if best > 0 else np.zeros(self.size, dtype=np.float32)
