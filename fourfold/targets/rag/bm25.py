"""Okapi BM25 over an in-memory corpus (pure Python; fine for a few thousand documents).

    index = BM25Index([tokenize(doc) for doc in texts])
    index.top(tokenize("When was Velora Systems founded?"), 20)   # [(doc index, score), ...]

Scores follow Robertson & Zaragoza: ``idf(t) = ln(1 + (N - df + 0.5) / (df + 0.5))`` (never
negative) and ``tf * (k1 + 1) / (tf + k1 * (1 - b + b * dl / avgdl))`` per query term; a term
repeated in the query counts once. Ties break on the document index, so results are
deterministic.
"""

from __future__ import annotations

import heapq
import math
from collections import Counter
from collections.abc import Iterable, Sequence

__all__ = ["BM25Index"]


class BM25Index:
    """An inverted index of term frequencies with BM25 scoring."""

    def __init__(self, documents: Sequence[Sequence[str]], k1: float = 1.2, b: float = 0.75) -> None:
        self.k1, self.b = k1, b
        self.n_docs = len(documents)
        self.lengths = [len(doc) for doc in documents]
        self.avgdl = (sum(self.lengths) / self.n_docs) if self.n_docs else 0.0
        self.postings: dict[str, list[tuple[int, int]]] = {}
        for i, doc in enumerate(documents):
            for term, tf in Counter(doc).items():
                self.postings.setdefault(term, []).append((i, tf))
        self._norm = [k1 * (1 - b + b * dl / self.avgdl) if self.avgdl else k1 for dl in self.lengths]

    def idf(self, term: str) -> float:
        df = len(self.postings.get(term, ()))
        return math.log(1.0 + (self.n_docs - df + 0.5) / (df + 0.5))

    def scores(self, query: Iterable[str]) -> dict[int, float]:
        """BM25 score of every document sharing at least one term with ``query``."""
        out: dict[int, float] = {}
        k1 = self.k1
        norm = self._norm
        for term in dict.fromkeys(query):
            postings = self.postings.get(term)
            if not postings:
                continue
            idf = self.idf(term)
            for i, tf in postings:
                out[i] = out.get(i, 0.0) + idf * tf * (k1 + 1) / (tf + norm[i])
        return out

    def top(self, query: Iterable[str], n: int) -> list[tuple[int, float]]:
        """The ``n`` best (document index, score) pairs, best first."""
        scored = self.scores(query)
        best = heapq.nsmallest(n, scored.items(), key=lambda kv: (-kv[1], kv[0]))
        return [(i, s) for i, s in best]
