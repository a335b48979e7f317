"""fourfold's reference RAG service ("python -m fourfold.targets.rag").

A real retrieval pipeline over the bundled corpus (``data/rag/corpus.jsonl``): BM25 or MiniLM
dense retrieval, an optional re-rank step (lexical best-sentence coverage, or dense), prompt
assembly, and a streamed call to any OpenAI-compatible model (the simulator by default). It
reports its stage timings in ``Server-Timing`` (and, for streams, a final ``fourfold.timing``
SSE event) and the retrieved ids in ``X-Retrieved-Ids`` and the body. Like the simulator it
never imports ``measure``.

Modules: ``text`` (tokenizer), ``bm25``, ``rerank``, ``dense`` (optional, loads torch),
``retriever`` (the pipeline), ``corpus``, ``upstream`` (model client), ``server`` (HTTP),
``cli``, ``launch`` (start it as a subprocess).
"""

from __future__ import annotations

from fourfold.targets.rag.corpus import (
    DEFAULT_CORPUS,
    DEFAULT_QUESTIONS,
    Document,
    Question,
    load_corpus,
    load_questions,
)
from fourfold.targets.rag.retriever import RERANKERS, RETRIEVERS, Pipeline, Retrieval, evaluate_recall

__all__ = [
    "DEFAULT_CORPUS",
    "DEFAULT_QUESTIONS",
    "RERANKERS",
    "RETRIEVERS",
    "Document",
    "Pipeline",
    "Question",
    "Retrieval",
    "evaluate_recall",
    "load_corpus",
    "load_questions",
]
