"""The real all-MiniLM-L6-v2, loaded once per test session (import + load take 6-20 s here).

The fixture is the fp32 reference, not ``auto``: on a CPU with AMX-bf16 ``auto`` picks bf16
autocast, whose vectors differ from sentence-transformers' fp32 ones (up to ~1e-3 per component,
and by batch composition), and the tests here compare against those exactly."""

from __future__ import annotations

import pytest

from fourfold.fingerprint.embedder import MiniLMEmbedder


@pytest.fixture(scope="session")
def minilm() -> MiniLMEmbedder:
    embedder = MiniLMEmbedder(backend="torch-fp32")
    embedder.load()
    return embedder
