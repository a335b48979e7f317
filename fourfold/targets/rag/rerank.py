"""Re-rankers: reorder a first-stage candidate list (pure, except the dense one's model).

- :class:`PassageReranker` (``--rerank lexical``): scores each candidate by its *best sentence*:
  the IDF mass of the distinct query terms that one sentence contains, over the IDF mass of all
  query terms (0..1). BM25 scores whole documents, so a short document that repeats a name
  outranks a long one that states the fact once; looking for the one sentence that answers the
  question removes that length bias. The candidate's first-stage score, scaled to 0..1 over the
  candidates, breaks ties (weight ``tie_weight``).
- :class:`DenseReranker` (``--rerank dense``): cosine of MiniLM embeddings of the question and
  each candidate (see :mod:`fourfold.targets.rag.dense`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from fourfold.targets.rag.text import sentences, tokenize

__all__ = ["PassageReranker"]

Candidates = list[tuple[int, float]]


class PassageReranker:
    """Best-sentence query coverage (see module docstring)."""

    name = "lexical"

    def __init__(self, texts: Sequence[str], idf: Callable[[str], float], tie_weight: float = 0.05) -> None:
        self.idf = idf
        self.tie_weight = tie_weight
        self.doc_sentences: list[list[frozenset[str]]] = [
            [frozenset(tokenize(s)) for s in sentences(text)] or [frozenset()] for text in texts]

    def coverage(self, query_terms: Sequence[str], doc: int) -> float:
        terms = list(dict.fromkeys(query_terms))
        weights = {t: self.idf(t) for t in terms}
        total = sum(weights.values())
        if total <= 0:
            return 0.0
        return max(sum(w for t, w in weights.items() if t in sent)
                   for sent in self.doc_sentences[doc]) / total

    def score_texts(self, question: str, texts: Sequence[str]) -> list[float]:
        """Best-sentence coverage of any texts (``POST /v1/rerank``): the corpus's IDF, no tie score."""
        terms = list(dict.fromkeys(tokenize(question)))
        weights = {t: self.idf(t) for t in terms}
        total = sum(weights.values())
        if total <= 0:
            return [0.0] * len(texts)
        return [max(sum(w for t, w in weights.items() if t in sent) for sent in
                    [frozenset(tokenize(s)) for s in sentences(text)] or [frozenset()]) / total
                for text in texts]

    def rerank(self, question: str, candidates: Candidates, **_: Any) -> Candidates:
        if not candidates:
            return []
        terms = tokenize(question)
        top = max(score for _, score in candidates) or 1.0
        rescored = [(doc, self.coverage(terms, doc) + self.tie_weight * score / top)
                    for doc, score in candidates]
        return sorted(rescored, key=lambda kv: (-kv[1], kv[0]))
