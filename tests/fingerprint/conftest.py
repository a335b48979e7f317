"""The real all-MiniLM-L6-v2, loaded once per test session (import + load take 6-20 s here)."""

from __future__ import annotations

import pytest

from fourfold.fingerprint.embedder import MiniLMEmbedder


@pytest.fixture(scope="session")
def minilm() -> MiniLMEmbedder:
    embedder = MiniLMEmbedder()
    embedder.load()
    return embedder
