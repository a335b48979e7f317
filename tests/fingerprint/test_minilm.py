"""The real all-MiniLM-L6-v2 (slow: loaded once per session by the ``minilm`` fixture)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from fourfold.fingerprint.embedder import (
    CachedEmbedder,
    EmbeddingCache,
    MiniLMEmbedder,
    minilm_path,
    text_key,
)
from fourfold.fingerprint.score import cosine

pytestmark = pytest.mark.slow

SENTENCE = "Quantum annealing finds low-energy states of a problem encoded in qubits."
# Measured: paraphrase 0.967, unrelated -0.024 (all-MiniLM-L6-v2, CPU, float32).
PARAPHRASE = ("How do I reduce GPU memory usage during inference?",
              "What are ways to lower GPU memory consumption when running inference?")
UNRELATED = ("How do I reduce GPU memory usage during inference?",
             "The cat sat quietly on the windowsill watching the rain.")


def test_vector_matches_sentence_transformers(minilm: MiniLMEmbedder) -> None:
    from sentence_transformers import SentenceTransformer

    reference = SentenceTransformer(str(minilm_path()), device="cpu").encode([SENTENCE])[0]
    ours = minilm.encode([SENTENCE])[0]
    assert ours.shape == (384,) and ours.dtype == np.float32
    assert np.abs(ours - reference).max() < 1e-4
    assert np.linalg.norm(ours) == pytest.approx(1.0, abs=1e-5)


def test_paraphrase_scores_high_and_unrelated_low(minilm: MiniLMEmbedder) -> None:
    vectors = minilm.encode([*PARAPHRASE, *UNRELATED])
    paraphrase = cosine(vectors[0], vectors[1])
    unrelated = cosine(vectors[2], vectors[3])
    assert paraphrase > 0.7, paraphrase
    assert unrelated < 0.3, unrelated


def test_chinese_paraphrase_beats_unrelated(minilm: MiniLMEmbedder) -> None:
    """MiniLM is an English model; Chinese still ranks a near-copy above an unrelated answer
    (measured 0.9999 vs 0.51: unrelated Chinese texts score far higher than unrelated English ones)."""
    a, b, c = minilm.encode(["量子退火利用量子隧穿寻找问题的最低能量状态。",
                             "量子退火通过量子隧穿来寻找问题的最低能量态。",
                             "中国茶文化历史悠久，品类丰富。"])
    assert cosine(a, b) > cosine(a, c) + 0.2


def test_batched_order_matches_one_at_a_time(minilm: MiniLMEmbedder) -> None:
    texts = ["short", "a somewhat longer sentence about GPUs", "mid length text", SENTENCE]
    batched = minilm.encode(texts)
    single = np.stack([minilm.encode([t])[0] for t in texts])
    assert np.abs(batched - single).max() < 1e-4
    assert minilm.encode([]).shape == (0, 384)


def test_cache_returns_identical_vectors_without_re_encoding(minilm: MiniLMEmbedder, tmp_path: Path) -> None:
    texts = ["first answer text", "second answer text", "first answer text"]
    cache_file = tmp_path / "embeddings.sqlite3"
    calls, encoded = minilm.calls, minilm.texts_encoded
    with EmbeddingCache(cache_file) as cache:
        cached = CachedEmbedder(minilm, cache)
        first = cached.encode(texts)
        assert minilm.calls == calls + 1 and minilm.texts_encoded == encoded + 2   # the duplicate once
        assert np.array_equal(first[0], first[2])
        second = cached.encode(texts)
        assert minilm.calls == calls + 1                                            # all from the cache
        assert np.array_equal(first, second)
        assert (cached.hits, cached.misses) == (2, 2)
    # Another run (a fresh cache object on the same file) reuses the vectors too.
    with EmbeddingCache(cache_file) as cache:
        again = CachedEmbedder(minilm, cache).encode(texts[:2])
        assert minilm.calls == calls + 1
        assert np.array_equal(again, first[:2])
        # A different model id never sees these vectors.
        assert cache.get_many("another-model", [text_key(texts[0])]) == {}
    np.testing.assert_allclose(first, minilm.encode(texts), atol=1e-5)
