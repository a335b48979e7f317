"""The service's own stages served alone, in the shapes embedding and re-ranking servers use, so
``locustfiles/embeddings.py`` can load-test them without the model behind the pipeline:

- ``POST /v1/embeddings`` (OpenAI): the dense stage's MiniLM vectors of the inputs (only where a
  dense stage is loaded: ``--retriever dense`` or ``--rerank dense``; else a 404 that says so);
- ``POST /v1/rerank`` and ``/rerank`` (vLLM / Jina): the configured re-ranker's scores of the given
  documents for the query (``lexical``: best-sentence coverage; ``dense``: MiniLM cosine; with
  ``--rerank none`` a 404), best first, ``top_n`` kept.

``usage`` counts the service's word tokens (:func:`fourfold.targets.rag.text.tokenize`), not the
model's word pieces. Bad bodies raise :class:`StageRequestError` (the handler answers 400).
"""

from __future__ import annotations

import json
import zlib
from typing import Any

from fourfold.targets.rag.retriever import Pipeline
from fourfold.targets.rag.text import tokenize

__all__ = ["STANDALONE_PATHS", "StageRequestError", "StageUnavailable", "answer"]

STANDALONE_PATHS = {"/v1/embeddings": "embeddings", "/v1/rerank": "rerank", "/rerank": "rerank"}
MAX_INPUTS = 2048


class StageRequestError(ValueError):
    """A body the endpoint rejects (400)."""


class StageUnavailable(LookupError):
    """The stage is not loaded in this service's configuration (404)."""


def _texts(value: Any, name: str) -> list[str]:
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not items or len(items) > MAX_INPUTS:
        raise StageRequestError(f"{name!r} must be a string or a list of 1 to {MAX_INPUTS} strings")
    out: list[str] = []
    for item in items:
        text = item.get("text") if isinstance(item, dict) else item
        if not isinstance(text, str):
            raise StageRequestError(f"every item of {name!r} must be a string")
        out.append(text)
    return out


def _tokens(texts: list[str]) -> int:
    return sum(len(tokenize(text)) for text in texts)


def answer(kind: str, raw: bytes, pipeline: Pipeline) -> dict[str, Any]:
    """The response body of ``kind`` (a value of :data:`STANDALONE_PATHS`)."""
    try:
        body = json.loads(raw or b"null")
    except (ValueError, UnicodeDecodeError) as exc:
        raise StageRequestError(f"the body is not JSON ({exc})") from None
    if not isinstance(body, dict):
        raise StageRequestError("the body must be a JSON object")
    model = body.get("model") if isinstance(body.get("model"), str) else "fourfold-rag"
    if kind == "embeddings":
        dense = pipeline.dense
        if dense is None:
            raise StageUnavailable("no embedding model is loaded: start the service with --retriever dense "
                                   "or --rerank dense")
        texts = _texts(body.get("input"), "input")
        vectors = dense.encode(texts)
        tokens = _tokens(texts)
        return {"object": "list", "model": model, "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
                "data": [{"object": "embedding", "index": i, "embedding": [round(float(x), 6) for x in v]}
                         for i, v in enumerate(vectors)]}
    query = body.get("query")
    if not isinstance(query, str):
        raise StageRequestError("'query' must be a string")
    docs = _texts(body.get("documents"), "documents")
    top_n = body.get("top_n")
    if top_n is not None and (isinstance(top_n, bool) or not isinstance(top_n, int) or top_n < 1):
        raise StageRequestError("'top_n' must be a whole number >= 1")
    if pipeline.reranker is None:
        raise StageUnavailable("no re-ranker is configured (--rerank none): start the service with "
                               "--rerank lexical or --rerank dense")
    scores = pipeline.reranker.score_texts(query, docs)
    ranked = sorted(range(len(docs)), key=lambda i: (-scores[i], i))[:top_n or len(docs)]
    return {"id": f"rerank-{zlib.crc32(raw):08x}", "model": model,
            "usage": {"total_tokens": _tokens([query]) * len(docs) + _tokens(docs)},
            "results": [{"index": i, "document": {"text": docs[i]}, "relevance_score": round(scores[i], 6)}
                        for i in ranked]}
