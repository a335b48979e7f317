"""Embeddings and rerank as dialects: one JSON request, one JSON answer (no stream, no TTFT).

- ``embeddings`` (OpenAI ``/v1/embeddings``, served by vLLM, llama.cpp, TEI, Ollama...): the item's
  ``meta["inputs"]`` (or its prompt) as ``input``; the answer's ``data[*].embedding`` are counted
  (``record.extra["outputs"]``) and checked (a list of finite numbers each, one length, the indexes
  0..n-1), ``usage.prompt_tokens`` is the record's ``input_tokens``. A server without pooling
  (llama-cpp-python's with a causal model such as SmolLM2) sends one vector per token for each input:
  read as well, the record's ``extra["per_token"]`` saying so.
- ``rerank`` (vLLM and Jina's ``/v1/rerank``): ``{"model", "query", "documents"}`` from the item's
  ``meta["query"]`` and ``meta["documents"]``; the answer's ``results[*]`` each need an integer
  ``index`` and a finite ``relevance_score``; ``usage.total_tokens`` is ``input_tokens``.
- ``rerank-cohere`` (Cohere's ``/v2/rerank``): the same request, ``results`` without documents and
  ``meta.billed_units`` (``input_tokens`` when it says so; search units carry no token count).

A body that is not JSON, or not this shape, is ``malformed_stream`` with the reason (never an
exception). Whether the count fits what was sent is the level's check once the record is complete
(:func:`fourfold.measure.embedstats.count_mismatch`): a parser does not see the request.
"""

from __future__ import annotations

import json
import math
from typing import Any

from fourfold.client.dialects.base import Completion, HttpRequest, RequestOptions
from fourfold.measure.embedstats import MAX_INDEX, OUTPUTS
from fourfold.workloads.items import Item

__all__ = ["EMBED_DIALECTS", "EmbedDialect", "EmbedParser"]

PER_TOKEN = "per_token"     # record.extra: the vectors came one per token, not pooled (llama.cpp, no pooling)
PATHS = {"embeddings": "/v1/embeddings", "rerank": "/v1/rerank", "rerank-cohere": "/v2/rerank"}


def _whole(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


class EmbedParser:
    """Takes the whole body, then reads it in :meth:`finish` (see the module docstring)."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._body = bytearray()

    def feed(self, data: bytes) -> int:
        self._body += data
        return 0

    def finish(self) -> Completion:
        done = Completion(terminal=True, output_tokens=0)
        try:
            body = json.loads(bytes(self._body))
        except (ValueError, UnicodeDecodeError):
            return self._bad(done, f"the body is not JSON: {bytes(self._body[:80])!r}")
        if not isinstance(body, dict):
            return self._bad(done, "the body is not a JSON object")
        if "error" in body:
            return self._bad(done, f"an error body: {str(body['error'])[:200]}")
        read = self._read_embeddings if self.kind == "embeddings" else self._read_rerank
        why = read(body, done)
        return self._bad(done, why) if why else done

    @staticmethod
    def _bad(done: Completion, why: str) -> Completion:
        done.error_class, done.error_detail = "malformed_stream", why
        return done

    @staticmethod
    def _read_embeddings(body: dict[str, Any], done: Completion) -> str:
        data = body.get("data")
        if not isinstance(data, list):
            return "no list of embeddings in 'data'"
        lengths: set[int] = set()
        indexes: list[Any] = []
        per_token = 0
        for entry in data:
            vector = entry.get("embedding") if isinstance(entry, dict) else None
            if isinstance(vector, list) and vector and isinstance(vector[0], list):   # one per token
                per_token += 1
                lengths.update(len(row) if isinstance(row, list) else 0 for row in vector)
                vector = [x for row in vector for x in (row if isinstance(row, list) else [None])]
            if not isinstance(vector, list) or not vector or not all(_finite(x) for x in vector):
                return "an embedding that is not a non-empty list of finite numbers"
            if not per_token:
                lengths.add(len(vector))
            indexes.append(entry.get("index", len(indexes)))
        if per_token not in (0, len(data)):
            return "some embeddings are pooled and some per token"
        if len(lengths) > 1:
            return f"embeddings of different lengths: {sorted(lengths)}"
        if sorted(i for i in indexes if _whole(i) is not None) != list(range(len(data))):
            return "the embeddings' indexes are not 0..n-1"
        done.extra[OUTPUTS] = len(data)
        if lengths:
            done.extra["dims"] = lengths.pop()
        if per_token:
            done.extra[PER_TOKEN] = True
        usage = body.get("usage")
        done.input_tokens = _whole(usage.get("prompt_tokens")) if isinstance(usage, dict) else None
        return ""

    @staticmethod
    def _read_rerank(body: dict[str, Any], done: Completion) -> str:
        results = body.get("results")
        if not isinstance(results, list):
            return "no list of results in 'results'"
        top = -1
        for result in results:
            if not isinstance(result, dict) or _whole(result.get("index")) is None \
                    or not _finite(result.get("relevance_score")):
                return "a result without an integer 'index' and a finite 'relevance_score'"
            top = max(top, result["index"])
        done.extra[OUTPUTS], done.extra[MAX_INDEX] = len(results), top
        usage = body.get("usage")
        meta = body.get("meta")
        billed = meta.get("billed_units") if isinstance(meta, dict) else None
        if isinstance(usage, dict):
            done.input_tokens = _whole(usage.get("total_tokens", usage.get("prompt_tokens")))
        elif isinstance(billed, dict):
            done.input_tokens = _whole(billed.get("input_tokens"))
        return ""


class EmbedDialect:
    """``embeddings``, ``rerank`` or ``rerank-cohere`` (module docstring)."""

    def __init__(self, kind: str, path: str = "") -> None:
        if kind not in PATHS:
            raise ValueError(f"unknown embeddings kind {kind!r}; one of {', '.join(PATHS)}")
        self.name = kind
        self.path = path or PATHS[kind]

    def build(self, item: Item, options: RequestOptions) -> HttpRequest:
        body: dict[str, Any] = {"model": options.model}
        if self.name == "embeddings":
            inputs = item.meta.get("inputs")
            body["input"] = list(inputs) if isinstance(inputs, (list, tuple)) else [item.prompt]
        else:
            documents = item.meta.get("documents")
            body["query"] = str(item.meta.get("query", item.prompt))
            body["documents"] = list(documents) if isinstance(documents, (list, tuple)) else [item.prompt]
        body.update(options.extra_body)
        return HttpRequest("POST", self.path, body, dict(options.extra_headers), stream=False)

    def parser(self, streaming: bool) -> EmbedParser:
        return EmbedParser(self.name)


EMBED_DIALECTS = tuple(PATHS)
