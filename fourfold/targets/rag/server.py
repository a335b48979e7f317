"""The reference RAG service over HTTP/1.1 (standard library: one thread per connection).

Endpoints (JSON in, JSON or SSE out):

- ``POST /v1/rag`` ``{"question": str, "stream": bool = false, "top_k": int?, "max_tokens": int?}``:
  retrieve, re-rank, assemble the prompt (the chunks in a system message, the bare question as
  the last user message), ask the upstream model, answer.
- ``POST /v1/retrieve`` ``{"question": str, "top_k": int?}``: retrieval only.
- ``POST /v1/embeddings``, ``POST /v1/rerank`` (and ``/rerank``): the dense stage's vectors and the
  re-ranker's scores alone, in the OpenAI and vLLM / Jina shapes (:mod:`fourfold.targets.rag.standalone`).
- ``GET /v1/rag/config``: the pipeline's configuration; ``GET /health``.

Every ``/v1/rag`` response carries ``X-Retrieved-Ids: doc-0007,doc-0142,...`` and a standard
``Server-Timing`` header (milliseconds). Stage definitions, all measured by the service:

=========== ===========================================================================
retrieve    first-stage search (BM25 or dense)
rerank      re-ranking the candidates (absent without a re-ranker)
llm_ttft    upstream request sent -> first text delta received from the model
generate    first text delta -> the model's stream ended
total       request body read -> answer complete (the stages plus prompt assembly and I/O)
=========== ===========================================================================

Non-streaming: one JSON body ``{"answer", "retrieved_ids", "timings", "usage", "model"}`` and
every stage in ``Server-Timing``. Streaming (``text/event-stream``): the head is sent after
retrieval, so ``Server-Timing`` holds ``retrieve`` and ``rerank`` only; then::

    event: retrieval
    data: {"retrieved_ids": [...], "timings": {"retrieve": 0.41, "rerank": 0.12}}

    data: {"delta": "Velora "}                 (one event per model delta)
    ...
    data: {"usage": {"prompt_tokens": 212, "completion_tokens": 9}, "finish_reason": "stop"}

    event: fourfold.timing
    data: {"retrieve": 0.41, "rerank": 0.12, "llm_ttft": 80.3, "generate": 161.0, "total": 242.9}

    data: [DONE]

An upstream failure before the head is a 502 JSON error; after it, an ``event: error`` with
``{"error": {"message": ...}}`` and the stream ends without ``[DONE]``.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from fourfold.targets.rag import standalone
from fourfold.targets.rag.corpus import Document
from fourfold.targets.rag.retriever import Pipeline, Retrieval
from fourfold.targets.rag.upstream import Delta, Upstream, UpstreamError, Usage

__all__ = ["SYSTEM_PROMPT", "RagHandler", "RagServer", "RagService", "assemble_messages", "server_timing"]

log = logging.getLogger("fourfold.rag")
MAX_BODY_BYTES = 1 << 20
MAX_TOP_K = 50
SYSTEM_PROMPT = ("Answer the user's question using only the numbered context documents below. "
                 "If they disagree or do not contain the answer, say so.")
STAGES = ("retrieve", "rerank", "llm_ttft", "generate", "total")


def assemble_messages(question: str, docs: Sequence[Document]) -> list[dict[str, str]]:
    """System message with the retrieved chunks, then the bare question as the last user message
    (so a model, or the simulator's exact-match answer book, sees the question itself)."""
    context = "\n".join(f"[{d.id}] {d.title}: {d.text}" for d in docs)
    return [{"role": "system", "content": f"{SYSTEM_PROMPT}\n\nContext:\n{context}"},
            {"role": "user", "content": question}]


def server_timing(timings: dict[str, float]) -> str:
    """``{"retrieve": 0.41}`` -> ``retrieve;dur=0.41`` (standard Server-Timing syntax, ms)."""
    return ", ".join(f"{name};dur={value:.3f}" for name, value in timings.items())


class RagService:
    """The pipeline, the upstream model and the prompt: everything a handler needs."""

    def __init__(self, pipeline: Pipeline, upstream: Upstream, max_tokens: int | None = 256) -> None:
        self.pipeline = pipeline
        self.upstream = upstream
        self.max_tokens = max_tokens
        self.by_id = {d.id: d for d in pipeline.docs}

    @property
    def config(self) -> dict[str, Any]:
        return {**self.pipeline.config, "upstream": self.upstream.url, "model": self.upstream.model,
                "max_tokens": self.max_tokens}

    def retrieve(self, question: str, top_k: int | None) -> tuple[Retrieval, list[dict[str, str]]]:
        found = self.pipeline.retrieve(question, top_k)
        return found, assemble_messages(question, [self.by_id[i] for i in found.ids])


class BadRequest(Exception):
    pass


def _parse_request(body: bytes) -> dict[str, Any]:
    try:
        data = json.loads(body or b"{}")
    except ValueError as exc:
        raise BadRequest(f"the body is not JSON ({exc})") from None
    if not isinstance(data, dict):
        raise BadRequest("the body must be a JSON object")
    question = data.get("question")
    if not isinstance(question, str) or not question.strip():
        raise BadRequest("'question' must be a non-empty string")
    for name, upper in (("top_k", MAX_TOP_K), ("max_tokens", 1 << 16)):
        value = data.get(name)
        if value is not None and (not isinstance(value, int) or isinstance(value, bool)
                                  or not 1 <= value <= upper):
            raise BadRequest(f"'{name}' must be an integer from 1 to {upper}")
    return data


class RagHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    server: RagServer

    # ---- plumbing ----
    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the stdlib's signature
        if self.server.verbose:
            super().log_message(format, *args)

    def _send_json(self, status: int, obj: Any, headers: dict[str, str] | None = None) -> None:
        body = json.dumps(obj, ensure_ascii=False).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)

    def _error(self, status: int, message: str) -> None:
        self._send_json(status, {"error": {"message": message, "code": status}})

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(b"%X\r\n%s\r\n" % (len(data), data))

    def _event(self, obj: Any, event: str = "") -> None:
        head = f"event: {event}\n".encode() if event else b""
        self._chunk(head + b"data: " + json.dumps(obj, ensure_ascii=False).encode() + b"\n\n")

    def _body(self) -> bytes:
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_BODY_BYTES:
            raise BadRequest(f"the body is larger than {MAX_BODY_BYTES} bytes")
        return self.rfile.read(length) if length > 0 else b""

    # ---- routes ----
    def do_GET(self) -> None:  # noqa: N802 - the stdlib's naming
        if self.path == "/health":
            self._send_json(200, {"status": "ok"})
        elif self.path == "/v1/rag/config":
            self._send_json(200, self.server.service.config)
        else:
            self._error(404, f"no route for GET {self.path}; see POST /v1/rag, POST /v1/retrieve")

    def do_POST(self) -> None:  # noqa: N802
        try:
            body = self._body()
            t_start = time.perf_counter()
            if self.path in standalone.STANDALONE_PATHS:
                self._stage_alone(standalone.STANDALONE_PATHS[self.path], body)
                return
            if self.path not in ("/v1/rag", "/v1/retrieve"):
                self._error(404, f"no route for POST {self.path}; see POST /v1/rag, POST /v1/retrieve")
                return
            request = _parse_request(body)
        except BadRequest as exc:
            self._error(400, str(exc))
            return
        service = self.server.service
        try:
            found, messages = service.retrieve(request["question"], request.get("top_k"))
        except Exception as exc:  # noqa: BLE001 - a bug in retrieval answers 500, never a dropped connection
            log.exception("retrieval failed")
            self._error(500, f"retrieval failed: {type(exc).__name__}: {exc}")
            return
        ids_header = {"X-Retrieved-Ids": ",".join(found.ids)}
        if self.path == "/v1/retrieve":
            self._send_json(200, {"retrieved_ids": list(found.ids), "scores": list(found.scores),
                                  "timings": found.timings_ms},
                            {**ids_header, "Server-Timing": server_timing(found.timings_ms)})
            return
        max_tokens = request.get("max_tokens") or service.max_tokens
        if request.get("stream"):
            self._stream(service, found, messages, max_tokens, t_start, ids_header)
        else:
            self._whole(service, found, messages, max_tokens, t_start, ids_header)

    def _stage_alone(self, kind: str, body: bytes) -> None:
        """``/v1/embeddings``, ``/v1/rerank``: one stage of the pipeline, timed in Server-Timing."""
        t0 = time.perf_counter()
        try:
            answer = standalone.answer(kind, body, self.server.service.pipeline)
        except standalone.StageRequestError as exc:
            self._error(400, str(exc))
            return
        except standalone.StageUnavailable as exc:
            self._error(404, str(exc))
            return
        except Exception as exc:  # noqa: BLE001 - a bug in a stage answers 500, never a dropped connection
            log.exception("%s failed", kind)
            self._error(500, f"{kind} failed: {type(exc).__name__}: {exc}")
            return
        stage = "embed" if kind == "embeddings" else "rerank"
        self._send_json(200, answer, {"Server-Timing": server_timing(
            {stage: round((time.perf_counter() - t0) * 1000, 3)})})

    def _generate(self, service: RagService, messages: list[dict[str, str]], max_tokens: int | None,
                  timings: dict[str, float], on_delta: Any) -> Usage:
        """Run the upstream stream; fill llm_ttft / generate into ``timings``; return usage."""
        clock = time.perf_counter
        t_send = clock()
        t_first: float | None = None
        usage = Usage(None, None)
        for event in service.upstream.stream_chat(messages, max_tokens):
            if isinstance(event, Delta):
                if t_first is None:
                    t_first = clock()
                on_delta(event.text)
            else:
                usage = event
        t_end = clock()
        timings["llm_ttft"] = round(((t_first or t_end) - t_send) * 1000, 3)
        timings["generate"] = round((t_end - (t_first or t_end)) * 1000, 3)
        return usage

    def _whole(self, service: RagService, found: Retrieval, messages: list[dict[str, str]],
               max_tokens: int | None, t_start: float, headers: dict[str, str]) -> None:
        timings = dict(found.timings_ms)
        parts: list[str] = []
        try:
            usage = self._generate(service, messages, max_tokens, timings, parts.append)
        except UpstreamError as exc:
            self._error(502 if exc.status < 500 else exc.status, str(exc))
            return
        timings["total"] = round((time.perf_counter() - t_start) * 1000, 3)
        self._send_json(200, {
            "answer": "".join(parts), "retrieved_ids": list(found.ids), "timings": timings,
            "usage": {"prompt_tokens": usage.prompt_tokens, "completion_tokens": usage.completion_tokens},
            "finish_reason": usage.finish_reason, "model": service.upstream.model,
        }, {**headers, "Server-Timing": server_timing(timings)})

    def _stream(self, service: RagService, found: Retrieval, messages: list[dict[str, str]],
                max_tokens: int | None, t_start: float, headers: dict[str, str]) -> None:
        timings = dict(found.timings_ms)
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("Server-Timing", server_timing(timings))
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        try:
            self._event({"retrieved_ids": list(found.ids), "timings": dict(timings)}, "retrieval")
            try:
                usage = self._generate(service, messages, max_tokens, timings,
                                       lambda text: self._event({"delta": text}))
            except UpstreamError as exc:
                self._event({"error": {"message": str(exc), "code": exc.status}}, "error")
                self._chunk(b"")      # the zero-length chunk ends the body (no [DONE]: interrupted)
                return
            self._event({"usage": {"prompt_tokens": usage.prompt_tokens,
                                   "completion_tokens": usage.completion_tokens},
                         "finish_reason": usage.finish_reason})
            timings["total"] = round((time.perf_counter() - t_start) * 1000, 3)
            self._event(timings, "fourfold.timing")
            self._chunk(b"data: [DONE]\n\n")
            self._chunk(b"")
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True     # the client went away; the upstream stream was closed


class RagServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 1024

    def __init__(self, address: tuple[str, int], service: RagService, verbose: bool = False) -> None:
        super().__init__(address, RagHandler)
        self.service = service
        self.verbose = verbose

    def handle_error(self, request: Any, client_address: Any) -> None:
        if self.verbose:
            super().handle_error(request, client_address)
