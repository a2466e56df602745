"""Fixtures of the registry tests."""

from __future__ import annotations

import numpy as np
import pytest


@pytest.fixture(scope="session")
def remembered_vectors():
    """The embedding model encodes each text once per test session. The model is
    deterministic, and the discovery evaluation sets (registered anew for each test, the rows
    being rolled back) would otherwise be encoded again by every test: seconds each."""
    from registry.embeddings import Embedder

    vectors: dict[str, np.ndarray] = {}
    encode = Embedder.encode

    def remembering(self: Embedder, texts: list[str]) -> np.ndarray:
        missing = [text for text in dict.fromkeys(texts) if text not in vectors]
        if missing:
            vectors.update(zip(missing, encode(self, missing), strict=True))
        if not texts:
            return encode(self, texts)
        return np.vstack([vectors[text] for text in texts])

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(Embedder, "encode", remembering)
        yield
