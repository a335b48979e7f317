"""The retrieval pipeline: first stage (BM25 or dense), optional re-rank, top-k.

    pipeline = Pipeline.build(load_corpus(), retriever="bm25", rerank="lexical", top_k=3)
    result = pipeline.retrieve("When was Velora Systems founded?")
    result.ids, result.timings_ms          # ("doc-0007", ...), {"retrieve": 0.4, "rerank": 0.2}

The first stage returns ``candidates`` documents (20 by default) when a re-ranker follows, else
``top_k``; the re-ranker reorders the candidates and the pipeline keeps the first ``top_k``.
Stage times are ``time.perf_counter`` milliseconds around each stage.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from fourfold.targets.rag.bm25 import BM25Index
from fourfold.targets.rag.corpus import Document
from fourfold.targets.rag.rerank import PassageReranker
from fourfold.targets.rag.text import tokenize

__all__ = ["RERANKERS", "RETRIEVERS", "Pipeline", "Retrieval", "evaluate_recall"]

RETRIEVERS = ("bm25", "dense")
RERANKERS = ("none", "lexical", "dense")
Candidates = list[tuple[int, float]]


class FirstStage(Protocol):
    name: str

    def search(self, question: str, n: int) -> Candidates: ...


class Reranker(Protocol):
    name: str

    def rerank(self, question: str, candidates: Candidates) -> Candidates: ...

    def score_texts(self, question: str, texts: list[str]) -> list[float]: ...


class BM25Retriever:
    name = "bm25"

    def __init__(self, docs: Sequence[Document]) -> None:
        self.index = BM25Index([tokenize(d.indexed_text) for d in docs])

    def search(self, question: str, n: int) -> Candidates:
        return self.index.top(tokenize(question), n)


@dataclass(frozen=True)
class Retrieval:
    ids: tuple[str, ...]
    scores: tuple[float, ...]
    timings_ms: dict[str, float] = field(default_factory=dict)


@dataclass
class Pipeline:
    docs: list[Document]
    first: FirstStage
    reranker: Reranker | None = None
    top_k: int = 3
    candidates: int = 20
    dense: Any = None          # the DenseIndex when a dense stage is loaded (POST /v1/embeddings)

    @classmethod
    def build(cls, docs: Sequence[Document], retriever: str = "bm25", rerank: str = "none", top_k: int = 3,
              candidates: int = 20, embedder: Any = None) -> Pipeline:
        """A pipeline by names; ``embedder`` (an object with ``encode(texts)``) for dense stages."""
        docs = list(docs)
        if retriever not in RETRIEVERS:
            raise ValueError(f"unknown retriever {retriever!r}; expected one of: {', '.join(RETRIEVERS)}")
        if rerank not in RERANKERS:
            raise ValueError(f"unknown re-ranker {rerank!r}; expected one of: {', '.join(RERANKERS)}")
        if top_k < 1 or candidates < 1:
            raise ValueError("top_k and candidates must be at least 1")
        if "dense" in (retriever, rerank):
            from fourfold.targets.rag.dense import DenseIndex, DenseReranker, default_embedder

            dense = DenseIndex(docs, embedder or default_embedder())
        first: FirstStage = BM25Retriever(docs) if retriever == "bm25" else dense
        reranker: Reranker | None = None
        if rerank == "lexical":
            bm25 = first.index if isinstance(first, BM25Retriever) else BM25Retriever(docs).index
            reranker = PassageReranker([d.indexed_text for d in docs], bm25.idf)
        elif rerank == "dense":
            reranker = DenseReranker(dense)
        return cls(docs, first, reranker, top_k, max(candidates, top_k),
                   dense if "dense" in (retriever, rerank) else None)

    @property
    def config(self) -> dict[str, Any]:
        return {"retriever": self.first.name, "rerank": self.reranker.name if self.reranker else "none",
                "top_k": self.top_k, "candidates": self.candidates if self.reranker else self.top_k,
                "documents": len(self.docs)}

    def retrieve(self, question: str, top_k: int | None = None) -> Retrieval:
        k = top_k or self.top_k
        clock = time.perf_counter
        t0 = clock()
        found = self.first.search(question, max(self.candidates, k) if self.reranker else k)
        t1 = clock()
        timings = {"retrieve": round((t1 - t0) * 1000, 3)}
        if self.reranker is not None:
            found = self.reranker.rerank(question, found)
            timings["rerank"] = round((clock() - t1) * 1000, 3)
        found = found[:k]
        return Retrieval(tuple(self.docs[i].id for i, _ in found), tuple(round(s, 4) for _, s in found),
                         timings)


def evaluate_recall(pipeline: Pipeline, questions: Sequence[Any], k: int = 3) -> dict[str, float]:
    """Offline recall@k per question id: |top-k ∩ gold| / |gold| (questions without gold skipped)."""
    out = {}
    for q in questions:
        gold = set(q.gold_ids)
        if gold:
            ids = pipeline.retrieve(q.prompt, top_k=k).ids[:k]
            out[q.id] = len(gold.intersection(ids)) / len(gold)
    return out
