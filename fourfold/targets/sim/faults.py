"""Fault injection: the simulator misbehaving on purpose, at a chosen rate per kind.

A profile's ``"faults"`` object (or ``--fault KIND=RATE``, repeatable) gives each kind a rate
(the share of generation requests it hits; the rates add up to at most 1) and tunes a few of
them (``--fault stall_s=3``). Every fault is decided when a generation request has been parsed,
from its own ``random.Random`` seeded with ``(seed, prompt, n-th occurrence of that prompt)``,
so the same requests meet the same faults in every run with the same seed (the plan's rule).
A request may also ask for one fault with the header ``x-fourfold-fault: KIND`` (tests do), which
wins over the rates (an unknown kind is answered 400 with the valid ones).
The applied fault is named in the response's ``x-fourfold-plan`` header (``"fault": KIND``)
and counted in ``/metrics`` (``fourfold_sim_faults_total{fault=KIND}``), so a test can match
each record of the client to what the server did.

=========================  ==========================================================================
kind                       what the simulator does (streaming; non-streaming differences in brackets)
=========================  ==========================================================================
``mid_stream_disconnect``  closes the connection after half of the tokens [after half of the bytes]
``malformed_json``         sends ``data: {"fault": ...`` (not JSON) before the middle token [cuts the body]
``invalid_utf8``           the middle token carries the bytes ``C3 28`` (invalid UTF-8) [in the body]
``missing_done``           leaves out the last event (``[DONE]`` / ``message_stop``; Triton has none)
                           [cuts the body]
``http_429``               answers 429 with ``Retry-After: retry_after_s`` and an error body
``http_500``, ``http_503``  answers that status with an error body
``slow_headers``           waits ``slow_headers_s`` before admitting the request (no status line yet)
``stall``                  pauses ``stall_s`` before the middle token (a pause in the plan)
``huge_chunk``             sends one event of ``huge_chunk_bytes`` before the middle token
                           [pads the body by that much]
``wrong_content_type``     answers 200 with ``text/html`` (an HTML error page)
``endless``                never ends: keeps sending tokens at the plan's ITL until the client goes
                           [sends nothing at all]
=========================  ==========================================================================

Stream faults wrap the generation's :class:`fourfold.targets.sim.wire.Encoder` (:class:`FaultyEncoder`)
or its scheduler job (:class:`DisconnectJob`, :class:`EndlessJob`); head faults are answered by
the connection before the gateway sees the request (:func:`fault_reply`).
The kinds, their rates and parameters (:class:`FaultSpec`, what a profile holds) are in
:mod:`fourfold.targets.sim.fault_spec`.
"""

from __future__ import annotations

import json
import random
from typing import Any, NamedTuple, Protocol

from fourfold.errors import FaultError  # noqa: F401 - re-exported: its home before fourfold.errors
from fourfold.targets.sim.fault_spec import FaultSpec
from fourfold.targets.sim.httpio import chunk
from fourfold.targets.sim.plan import Plan
from fourfold.targets.sim.wire import Encoder

FAULT_HEADER = "x-fourfold-fault"
HEAD_FAULTS = frozenset({"http_429", "http_500", "http_503", "wrong_content_type"})
INVALID_UTF8 = b"\xc3\x28"              # a two-byte lead followed by "(": never valid UTF-8
_MARK = "\ue000"                         # private-use character swapped for INVALID_UTF8 after encoding
_MARK_UTF8 = _MARK.encode("utf-8")
MALFORMED_EVENT = b'data: {"fault": "malformed_json", "choices": [{"delta": {"content": BROKEN\n\n'
HTML_PAGE = (b"<!DOCTYPE html>\n<html><head><title>502 Bad Gateway</title></head>\n"
             b"<body><h1>Bad Gateway</h1><p>The upstream server sent an invalid response.</p>"
             b"</body></html>\n")
_MAX_BUFFERED_BYTES = 4 * 1024 * 1024    # an endless stream waits while the client reads this far behind


class FaultInjector:
    """Decides the fault of each generation request (``choose``), deterministically."""

    def __init__(self, spec: FaultSpec | None, seed: int) -> None:
        self.spec = spec if spec is not None else FaultSpec()
        self.seed = seed
        self._occurrences: dict[str, int] = {}

    def __bool__(self) -> bool:
        return bool(self.spec.rates)

    def choose(self, prompt: str) -> str:
        """The fault for this request ("" for none): one draw against the cumulative rates."""
        if not self.spec.rates:
            return ""
        occurrence = self._occurrences.get(prompt, 0)
        self._occurrences[prompt] = occurrence + 1
        draw = random.Random(f"{self.seed}\x1ffault\x1f{prompt}\x1f{occurrence}").random()
        cumulative = 0.0
        for kind, rate in self.spec.rates:
            cumulative += rate
            if draw < cumulative:
                return kind
        return ""


# ---- head faults ----
class FaultReply(NamedTuple):
    status: int
    body: bytes
    content_type: str
    headers: list[tuple[str, str]]


_ERRORS = {"http_429": (429, "rate_limit_error"), "http_500": (500, "api_error"),
           "http_503": (503, "overloaded_error")}


def fault_reply(kind: str, spec: FaultSpec) -> FaultReply:
    """The whole response of a head fault (``HEAD_FAULTS``)."""
    if kind == "wrong_content_type":
        return FaultReply(200, HTML_PAGE, "text/html; charset=utf-8", [])
    status, err_type = _ERRORS[kind]
    error = {"error": {"message": f"simulated fault {kind}", "type": err_type, "code": status}}
    headers = [("retry-after", str(spec.retry_after_s))] if kind == "http_429" else []
    return FaultReply(status, json.dumps(error, separators=(",", ":")).encode(), "application/json", headers)


# ---- stream faults ----
def fault_index(plan: Plan) -> int:
    """The token a stream fault happens at: the middle one (never the first when there are two)."""
    n = len(plan.tokens)
    return max(1, n // 2) if n > 1 else 0


def shape_plan(plan: Plan, kind: str, spec: FaultSpec) -> None:
    """Record the fault in the plan; a ``stall`` becomes a pause of ``stall_s`` in its offsets."""
    plan.fault = kind
    at = fault_index(plan)
    if kind == "stall" and at < len(plan.offsets_ms):
        stall_ms = spec.stall_s * 1000.0
        plan.offsets_ms[at:] = [offset + stall_ms for offset in plan.offsets_ms[at:]]
        plan.pauses.append((at, stall_ms))


def drop_last_event(events: bytes) -> bytes:
    """``events`` (SSE events, each ending in a blank line) without the last one."""
    cut = events.rstrip(b"\n").rfind(b"\n\n")
    return events[:cut + 2] if cut >= 0 else b""


class FaultyEncoder:
    """Wraps a dialect's encoder for ``malformed_json``, ``invalid_utf8``, ``missing_done`` and
    ``huge_chunk``; any other kind passes through unchanged."""

    __slots__ = ("inner", "kind", "at", "spec", "content_type", "first_token")

    def __init__(self, inner: Encoder, kind: str, at: int, spec: FaultSpec, first_token: str = "") -> None:
        self.inner = inner
        self.kind = kind
        self.at = at
        self.spec = spec
        self.content_type = inner.content_type
        self.first_token = first_token     # where invalid UTF-8 goes into a non-streamed answer

    def _huge_event(self) -> bytes:
        return b'data: {"fault":"huge_chunk","pad":"' + b"x" * self.spec.huge_chunk_bytes + b'"}\n\n'

    def prelude(self) -> bytes:
        return self.inner.prelude()

    def tokens(self, first: int, texts: list[str]) -> bytes:
        at, inner = self.at, self.inner
        if (self.kind not in ("malformed_json", "invalid_utf8", "huge_chunk")
                or not first <= at < first + len(texts)):
            return inner.tokens(first, texts)
        cut = at - first
        before = inner.tokens(first, texts[:cut]) if cut else b""
        if self.kind == "invalid_utf8":
            bad = inner.tokens(at, [texts[cut] + _MARK]).replace(_MARK_UTF8, INVALID_UTF8)
            rest = texts[cut + 1:]
            return before + bad + (inner.tokens(at + 1, rest) if rest else b"")
        inject = MALFORMED_EVENT if self.kind == "malformed_json" else self._huge_event()
        return before + inject + inner.tokens(at, texts[cut:])

    def closing(self) -> bytes:
        closing = self.inner.closing()
        return drop_last_event(closing) if self.kind == "missing_done" else closing

    def body(self) -> bytes:
        body = self.inner.body()
        if self.kind in ("malformed_json", "missing_done"):
            return body[:len(body) // 2]
        if self.kind == "invalid_utf8":   # after the answer's first token, else in the first string
            needle = (json.dumps(self.first_token, ensure_ascii=False)[1:-1].encode() if self.first_token
                      else b"")
            i = body.find(needle) + len(needle) if needle and needle in body else body.find(b':"') + 2
            return body[:i] + INVALID_UTF8 + body[i:] if i >= 2 else body + INVALID_UTF8
        if self.kind == "huge_chunk" and body.endswith(b"}"):
            return body[:-1] + b',"fault_pad":"' + b"x" * self.spec.huge_chunk_bytes + b'"}'
        return body


class _Generation(Protocol):
    """What the job wrappers use of ``fourfold.targets.sim.server.Generation``."""

    conn: Any
    app: Any
    plan: Plan
    encoder: Encoder
    stream: bool
    head: bytes
    dues: list[float]
    index: int
    done: bool

    def step(self, now_s: float, horizon_s: float) -> float | None: ...


class DisconnectJob:
    """Steps the generation up to the fault token, then closes the connection (no last chunk)."""

    __slots__ = ("gen", "at")

    def __init__(self, gen: _Generation) -> None:
        self.gen = gen
        self.at = fault_index(gen.plan)

    def step(self, now_s: float, horizon_s: float) -> float | None:
        gen = self.gen
        if gen.done:
            return None
        transport = gen.conn.transport
        if not gen.stream:
            transport.write(gen.head[:len(gen.head) // 2])
            transport.close()        # connection_lost() aborts the generation and frees its slot
            return None
        cap = gen.dues[self.at - 1] if 0 < self.at <= len(gen.dues) else horizon_s
        next_due_s = gen.step(now_s, min(horizon_s, cap))
        if next_due_s is not None and gen.index >= self.at:
            transport.close()
            return None
        return next_due_s


class EndlessJob:
    """Sends the answer's tokens over and over at the plan's ITL until the client goes away."""

    __slots__ = ("gen", "sent", "itl_s", "texts")

    def __init__(self, gen: _Generation) -> None:
        self.gen = gen
        self.sent = 0
        self.itl_s = max(gen.plan.itl_ms, 1.0) / 1000.0
        self.texts = gen.plan.tokens or [" "]

    def step(self, now_s: float, horizon_s: float) -> float | None:
        gen = self.gen
        if gen.done or not gen.stream:
            return None              # not streaming: nothing is ever sent (the client times out)
        transport = gen.conn.transport
        first_s = gen.dues[0]
        if transport.get_write_buffer_size() > _MAX_BUFFERED_BYTES:
            return now_s + 0.05      # the client reads slower than we write: wait, do not buffer more
        due = int((horizon_s - first_s) / self.itl_s) + 1 if horizon_s >= first_s else 0
        if due > self.sent:
            n = len(self.texts)
            texts = [self.texts[i % n] for i in range(self.sent, due)]
            transport.write(chunk(gen.encoder.tokens(self.sent, texts)))
            gen.app.counters.generation_tokens_total += len(texts)
            self.sent = due
        return first_s + self.sent * self.itl_s


def wrap_encoder(encoder: Encoder, plan: Plan, kind: str, spec: FaultSpec) -> Encoder:
    if kind in ("malformed_json", "invalid_utf8", "missing_done", "huge_chunk"):
        at = len(plan.tokens) // 2
        return FaultyEncoder(encoder, kind, at, spec, plan.tokens[0] if plan.tokens else "")
    return encoder


def wrap_job(job: _Generation, kind: str) -> Any:
    """The scheduler job for a generation with this fault (the generation itself when unchanged)."""
    if kind == "mid_stream_disconnect":
        return DisconnectJob(job)
    if kind == "endless":
        return EndlessJob(job)
    return job
