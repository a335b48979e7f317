"""Dense retrieval and re-ranking with all-MiniLM-L6-v2 (optional: ``--retriever dense`` or
``--rerank dense``).

The embedder is fingerprint's (:class:`fourfold.fingerprint.embedder.MiniLMEmbedder` behind its disk
cache), imported only when a dense stage is asked for: loading torch takes seconds, and the
BM25 service must start in well under one. The corpus is embedded once at start-up (cached on
disk across runs) and the model is loaded then too; each question costs one forward pass (a few
to ~70 ms on a small CPU). Questions skip the disk cache (its SQLite handle belongs to the thread
that opened it, and the server answers on many threads) and are encoded one at a time under a
lock: a model and its tokenizer are not safe to call from several threads at once.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import numpy as np

from fourfold.fingerprint.embedder import CachedEmbedder, EmbeddingCache, MiniLMEmbedder
from fourfold.targets.rag.corpus import Document

__all__ = ["DenseIndex", "DenseReranker", "default_embedder"]

Candidates = list[tuple[int, float]]


def default_embedder() -> Any:
    """fingerprint's MiniLM embedder with its disk cache (the model loads on first use)."""

    return CachedEmbedder(MiniLMEmbedder(), EmbeddingCache())


class DenseIndex:
    """Unit vectors of every document; cosine search by a matrix product."""

    name = "dense"

    def __init__(self, docs: Sequence[Document], embedder: Any) -> None:
        self.embedder = embedder
        self.matrix = self._unit(np.asarray(embedder.encode([d.indexed_text for d in docs]),
                                            dtype=np.float32))
        self._query_encoder = getattr(embedder, "inner", embedder)     # CachedEmbedder -> its model
        self._lock = threading.Lock()
        self.query_vector("warm-up")                                    # load the model now, not on a request

    @staticmethod
    def _unit(m: np.ndarray) -> np.ndarray:
        norms = np.linalg.norm(m, axis=-1, keepdims=True)
        return np.divide(m, norms, out=np.zeros_like(m), where=norms > 0)

    def query_vector(self, question: str) -> np.ndarray:
        return self.encode([question])[0]

    def encode(self, texts: list[str]) -> np.ndarray:
        """Unit vectors of ``texts``, one forward pass under the lock (``POST /v1/embeddings``)."""
        with self._lock:
            vectors = self._query_encoder.encode(texts)
        return self._unit(np.asarray(vectors, dtype=np.float32))

    def search(self, question: str, n: int) -> Candidates:
        sims = self.matrix @ self.query_vector(question)
        order = sorted(range(len(sims)), key=lambda i: (-float(sims[i]), i))[:n]
        return [(i, float(sims[i])) for i in order]


class DenseReranker:
    name = "dense"

    def __init__(self, index: DenseIndex) -> None:
        self.index = index

    def rerank(self, question: str, candidates: Candidates, **_: Any) -> Candidates:
        if not candidates:
            return []
        q = self.index.query_vector(question)
        rescored = [(doc, float(self.index.matrix[doc] @ q)) for doc, _ in candidates]
        return sorted(rescored, key=lambda kv: (-kv[1], kv[0]))

    def score_texts(self, question: str, texts: list[str]) -> list[float]:
        """Cosine of the question's vector and each text's (``POST /v1/rerank``)."""
        vectors = self.index.encode([question, *texts])
        return [float(v @ vectors[0]) for v in vectors[1:]]
