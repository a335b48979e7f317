"""The simulator's embeddings and rerank endpoints (non-streaming JSON, answered whole after a delay).

- ``POST /v1/embeddings`` (OpenAI): ``{"model", "input": str | [str], "encoding_format"?}`` ->
  ``{"object": "list", "data": [{"object": "embedding", "index", "embedding"}], "model", "usage"}``;
  each vector is a deterministic unit vector of ``embed_dims`` numbers drawn from a hash of its text.
- ``POST /v1/rerank`` and ``/rerank`` (vLLM, Jina): ``{"model", "query", "documents": [str | {"text"}],
  "top_n"?}`` -> ``{"id", "model", "usage": {"total_tokens"}, "results": [{"index", "document",
  "relevance_score"}]}``, best first; ``POST /v2/rerank`` (Cohere): ``{"id", "results": [{"index",
  "relevance_score"}], "meta": {"billed_units": {"search_units": 1}}}``.

The relevance score is the words the query and a document share over the geometric mean of their
word counts (deterministic, no model). The reply is due ``embed_ms + embed_ms_per_input × inputs +
embed_ms_per_1k_tokens × tokens / 1000`` after the request arrived (:func:`delay_ms`), so latency
grows with the batch size the way the profile says.
"""

from __future__ import annotations

import hashlib
import json
import math
import random
import re
from dataclasses import dataclass
from typing import Any

from fourfold.targets.sim.profile import Profile
from fourfold.targets.sim.tokens import count_tokens

__all__ = ["EMBED_PATHS", "EmbedAnswer", "EmbedRequestError", "answer", "delay_ms", "unit_vector"]

EMBED_PATHS = {"/v1/embeddings": "embeddings", "/v1/rerank": "rerank", "/rerank": "rerank",
               "/v2/rerank": "rerank-cohere"}
MAX_INPUTS = 4096
_WORD_RE = re.compile(r"\w+")


class EmbedRequestError(ValueError):
    """A request body the endpoint rejects (400)."""


@dataclass(frozen=True)
class EmbedAnswer:
    body: dict[str, Any]
    inputs: int           # texts embedded, or documents scored
    tokens: int           # input tokens (the simulator's tokenizer)


def unit_vector(text: str, dims: int) -> list[float]:
    """A deterministic unit vector for ``text`` (the same text, the same vector, in every process)."""
    seed = int.from_bytes(hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()[:8], "big")
    rng = random.Random(seed)
    raw = [rng.gauss(0.0, 1.0) for _ in range(dims)]
    norm = math.sqrt(sum(x * x for x in raw)) or 1.0
    return [round(x / norm, 6) for x in raw]


def delay_ms(profile: Profile, inputs: int, tokens: int) -> float:
    """When the reply is due after the request arrived, in ms."""
    return (profile.embed_ms + profile.embed_ms_per_input * inputs
            + profile.embed_ms_per_1k_tokens * tokens / 1000)


def _body(raw: bytes) -> dict[str, Any]:
    try:
        body = json.loads(raw or b"null")
    except (ValueError, UnicodeDecodeError) as exc:
        raise EmbedRequestError(f"the body is not JSON: {exc}") from None
    if not isinstance(body, dict):
        raise EmbedRequestError("the body must be a JSON object")
    return body


def _texts(value: Any, name: str, allow_objects: bool = False) -> list[str]:
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not items:
        raise EmbedRequestError(f"{name!r} must be a string or a non-empty list of strings")
    if len(items) > MAX_INPUTS:
        raise EmbedRequestError(f"{name!r}: at most {MAX_INPUTS} inputs, got {len(items)}")
    texts = []
    for item in items:
        if allow_objects and isinstance(item, dict):
            item = item.get("text")
        if not isinstance(item, str):
            raise EmbedRequestError(f"every item of {name!r} must be a string"
                                    + (' or {"text": string}' if allow_objects else ""))
        texts.append(item)
    return texts


def _score(query_words: set[str], text: str) -> float:
    words = set(_WORD_RE.findall(text.lower()))
    if not query_words or not words:
        return 0.0
    return round(len(query_words & words) / math.sqrt(len(query_words) * len(words)), 6)


def answer(kind: str, raw: bytes, profile: Profile, request_id: str) -> EmbedAnswer:
    """The response body for ``kind`` (a value of :data:`EMBED_PATHS`); EmbedRequestError for a bad body."""
    body = _body(raw)
    model = body.get("model") if isinstance(body.get("model"), str) else profile.model
    if kind == "embeddings":
        if body.get("encoding_format", "float") != "float":
            raise EmbedRequestError("encoding_format: only \"float\" is served")
        texts = _texts(body.get("input"), "input")
        tokens = sum(count_tokens(t) for t in texts)
        data = [{"object": "embedding", "index": i, "embedding": unit_vector(t, profile.embed_dims)}
                for i, t in enumerate(texts)]
        return EmbedAnswer({"object": "list", "data": data, "model": model,
                            "usage": {"prompt_tokens": tokens, "total_tokens": tokens}}, len(texts), tokens)
    query = body.get("query")
    if not isinstance(query, str):
        raise EmbedRequestError("'query' must be a string")
    docs = _texts(body.get("documents"), "documents", allow_objects=True)
    top_n = body.get("top_n")
    if top_n is not None and (isinstance(top_n, bool) or not isinstance(top_n, int) or top_n < 1):
        raise EmbedRequestError("'top_n' must be a whole number >= 1")
    query_words = set(_WORD_RE.findall(query.lower()))
    scored = sorted(((_score(query_words, d), i) for i, d in enumerate(docs)), key=lambda s: (-s[0], s[1]))
    scored = scored[:top_n] if top_n else scored
    tokens = count_tokens(query) * len(docs) + sum(count_tokens(d) for d in docs)
    if kind == "rerank-cohere":
        ranked = [{"index": i, "relevance_score": s} for s, i in scored]
        return EmbedAnswer({"id": request_id, "results": ranked,
                            "meta": {"billed_units": {"search_units": 1}}}, len(docs), tokens)
    results: list[dict[str, Any]] = [{"index": i, "document": {"text": docs[i]}, "relevance_score": s}
                                     for s, i in scored]
    return EmbedAnswer({"id": request_id, "model": model, "usage": {"total_tokens": tokens},
                        "results": results}, len(docs), tokens)
