"""The simulator's state and routing: which request becomes which response or generation.

:class:`SimApp` owns everything shared by connections: the profile, the answer book, the seed
and the per-prompt occurrence counts (determinism), the counters behind ``/metrics``, the
gateway (admission control) and the one token scheduler. ``route()`` turns a parsed HTTP request
into either an immediate :class:`Reply` or a :class:`fourfold.targets.sim.wire.ParsedRequest` that the
connection hands to the engine (``plan()``).
"""

from __future__ import annotations

import asyncio
import json
import re
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from fourfold.targets.sim import wire_anthropic, wire_embed, wire_openai, wire_responses, wire_triton
from fourfold.targets.sim.answers import DEFAULT_PROMPTS_PATH, Answer, AnswerBook
from fourfold.targets.sim.exposition import SimCounters, render_metrics
from fourfold.targets.sim.faults import FaultInjector
from fourfold.targets.sim.gateway import Gateway, GatewayConfig, KeyRateLimit
from fourfold.targets.sim.httpio import IncomingRequest
from fourfold.targets.sim.plan import Plan, RequestFacts, make_plan
from fourfold.targets.sim.prefix import PrefixCache
from fourfold.targets.sim.profile import Profile
from fourfold.targets.sim.scheduler import TokenScheduler
from fourfold.targets.sim.sessions import (
    DEFAULT_SESSIONS_DIR,
    SessionBook,
    SessionKnobs,
    session_answer,
    session_rng,
)
from fourfold.targets.sim.toolcalls import choose_call
from fourfold.targets.sim.wire import JSON_CONTENT_TYPE, ParsedRequest, WireError, dumps

PLAN_HEADER = "x-fourfold-plan"
PLAN_DETAIL_HEADER = "x-fourfold-plan-detail"
PLAN_HEADER_MAX_CHARS = 12_000     # h11 (httpx) refuses response heads above 16 KiB by default
PLANS_PATH = "/_fourfold/plans/"   # + request id: the full plan of a recent detail request
RECENT_PLANS = 1024
_V2_MODEL_RE = re.compile(r"^/v2/models/([^/]+)(?:/versions/[^/]+)?"
                          r"(?:/(generate_stream|generate|infer|ready))?/?$")


@dataclass(frozen=True)
class SimConfig:
    """Everything ``python -m fourfold.targets.sim`` was told (the profile already has its overrides)."""

    profile: Profile
    seed: int = 0
    host: str = "127.0.0.1"
    port: int = 8000
    gateway: GatewayConfig = field(default_factory=GatewayConfig)
    prompt_paths: tuple[Path, ...] = (DEFAULT_PROMPTS_PATH,)
    session_paths: tuple[Path, ...] = (DEFAULT_SESSIONS_DIR,)


@dataclass
class Reply:
    """An immediate (non-generated) response."""

    status: int
    body: bytes = b""
    content_type: str = JSON_CONTENT_TYPE
    headers: list[tuple[str, str]] = field(default_factory=list)
    delay_s: float = 0.0     # sent this long after the request arrived (embeddings, rerank)


def json_reply(status: int, obj: Any, headers: list[tuple[str, str]] | None = None) -> Reply:
    return Reply(status, dumps(obj), JSON_CONTENT_TYPE, headers or [])


def error_reply(status: int, message: str, headers: list[tuple[str, str]] | None = None) -> Reply:
    return json_reply(status, {"error": {"message": message, "type": _ERROR_TYPES.get(status, "error"),
                                         "code": status}}, headers)


_ERROR_TYPES = {400: "invalid_request_error", 404: "not_found_error", 405: "method_not_allowed",
                411: "length_required", 413: "request_too_large", 429: "rate_limit_error",
                500: "api_error", 503: "overloaded_error"}


class SimApp:
    """Shared state of one simulator process (one event loop)."""

    def __init__(self, config: SimConfig, loop: asyncio.AbstractEventLoop,
                 answers: AnswerBook | None = None) -> None:
        self.config = config
        self.profile = config.profile
        self.seed = config.seed
        self.loop = loop
        self.answers = answers if answers is not None else AnswerBook.load(config.prompt_paths)
        self.counters = SimCounters()
        self.gateway = Gateway(config.gateway)
        self.key_limit = KeyRateLimit(config.gateway.key_rate_limit)
        self.scheduler = TokenScheduler(loop)
        self.faults = FaultInjector(config.profile.faults, config.seed)
        self._occurrences: dict[str, int] = {}
        self.prefix_cache = PrefixCache(self.profile.prefix_cache_block_tokens,
                                        self.profile.kv_cache_capacity_tokens)
        self.sessions = SessionBook.load(config.session_paths)
        self._session_knobs = SessionKnobs(self.profile.session_first_share,
                                           self.profile.session_facts_per_turn,
                                           self.profile.session_miss_rate)
        self._recent_plans: OrderedDict[str, dict[str, Any]] = OrderedDict()
        self._plain_plan_header = json.dumps({"seed": self.seed, "profile": self.profile.name},
                                             separators=(",", ":"))
        self._to_handle: deque[Callable[[], None]] = deque()
        self._handling = False

    def handle_soon(self, handler: Callable[[], None]) -> None:
        """Queue the handling of bytes just read. One handler runs per loop iteration, so
        sockets that become readable meanwhile are read, and their requests stamped, between two
        handlings rather than after a whole burst of them; due tokens are written in between too."""
        self._to_handle.append(handler)
        if not self._handling:
            self._handling = True
            self.loop.call_soon(self._handle_next)

    def _handle_next(self) -> None:
        handler = self._to_handle.popleft()
        try:
            handler()
        finally:
            if self._to_handle:
                self.loop.call_soon(self._handle_next)
            else:
                self._handling = False

    def plain_headers(self, fault: str = "") -> list[tuple[str, str]]:
        if fault:   # a response decided by a fault names it, like a plan header does
            return [(PLAN_HEADER, json.dumps({"seed": self.seed, "profile": self.profile.name,
                                              "fault": fault}, separators=(",", ":")))]
        return [(PLAN_HEADER, self._plain_plan_header)]

    def choose_fault(self, parsed: ParsedRequest, forced: str = "") -> str:
        """Count a received generation request and decide its fault ("" for none); ``forced`` is
        the request's ``x-fourfold-fault`` header (already checked), which wins over the rates."""
        counters = self.counters
        counters.received_total += 1
        fault = forced or self.faults.choose(parsed.prompt)
        if fault:
            counters.faults[fault] = counters.faults.get(fault, 0) + 1
        return fault

    def route(self, request: IncomingRequest) -> Reply | ParsedRequest:
        """Dispatch by path and method; dialect errors become replies in that dialect's format."""
        path, method = request.path, request.method
        try:
            if path == "/v1/chat/completions":
                return self._need(method, "POST") or wire_openai.parse(
                    request.body, request.headers, self.profile.model)
            if path == "/v1/messages":
                return self._need(method, "POST") or wire_anthropic.parse(
                    request.body, request.headers, self.profile.model, self.profile.beta_features)
            if path == "/v1/responses":
                return self._need(method, "POST") or wire_responses.parse(
                    request.body, request.headers, self.profile.model)
            if path in wire_embed.EMBED_PATHS:
                return self._need(method, "POST") or self._embed(wire_embed.EMBED_PATHS[path],
                                                                 request.body)
            if path == "/v1/models":
                return self._need(method, "GET") or Reply(200, wire_openai.models_body(self.profile.model))
            if path in ("/health", "/v2/health/ready", "/v2/health/live", "/ping"):
                return self._need(method, "GET") or Reply(200, b"", "text/plain; charset=utf-8")
            if path == "/metrics":
                return self._need(method, "GET") or Reply(
                    200, render_metrics(self.profile, self.counters, self.loop.time()).encode(),
                    "text/plain; version=0.0.4; charset=utf-8")
            if path.startswith(PLANS_PATH):
                found = self._recent_plans.get(path[len(PLANS_PATH):])
                return self._need(method, "GET") or (
                    json_reply(200, found) if found is not None else error_reply(404, "no such recent plan"))
            match = _V2_MODEL_RE.match(path)
            if match:
                return self._route_v2(request, unquote(match.group(1)), match.group(2) or "")
        except WireError as exc:
            return json_reply(exc.status, exc.body, list(exc.headers.items()))
        return error_reply(404, f"no route for {method} {path}; see GET /v1/models, "
                                "POST /v1/chat/completions, /v1/messages, /v1/responses, "
                                "/v1/embeddings, /v1/rerank, /v2/rerank, "
                                "/v2/models/<m>/generate_stream|generate|infer")

    def _embed(self, kind: str, body: bytes) -> Reply:
        """Embeddings or rerank: the whole answer, due after the profile's delay (wire_embed)."""
        try:
            found = wire_embed.answer(kind, body, self.profile, f"rr-{self.counters.received_total:012x}")
        except wire_embed.EmbedRequestError as exc:
            return error_reply(400, str(exc))
        counters = self.counters
        counters.received_total += 1
        counters.prompt_tokens_total += found.tokens
        due_ms = wire_embed.delay_ms(self.profile, found.inputs, found.tokens)
        return Reply(200, dumps(found.body), JSON_CONTENT_TYPE, delay_s=due_ms / 1000.0)

    def _route_v2(self, request: IncomingRequest, model: str, action: str) -> Reply | ParsedRequest:
        method = request.method
        if action in ("", "ready"):
            return self._need(method, "GET") or (
                Reply(200) if action == "ready" else json_reply(200, {
                    "name": model, "versions": ["1"], "platform": "fourfold-sim",
                    "inputs": [{"name": "text_input", "datatype": "BYTES", "shape": [-1]}],
                    "outputs": [{"name": "text_output", "datatype": "BYTES", "shape": [-1]}]}))
        not_allowed = self._need(method, "POST")
        if not_allowed:
            return not_allowed
        if action == "infer":
            return wire_triton.parse_infer(request.body, model)
        return wire_triton.parse_generate(request.body, model, stream=action == "generate_stream")

    @staticmethod
    def _need(method: str, allowed: str) -> Reply | None:
        if method == allowed:
            return None
        return error_reply(405, f"method {method} not allowed here; use {allowed}", [("allow", allowed)])

    def plan(self, parsed: ParsedRequest) -> Plan:
        """Decide the plan for an admitted request and account for it in the counters."""
        occurrence = self._occurrences.get(parsed.prompt, 0)
        self._occurrences[parsed.prompt] = occurrence + 1
        counters = self.counters
        facts = RequestFacts(
            prompt=parsed.prompt,
            input_tokens=parsed.input_tokens,
            max_tokens=parsed.max_tokens,
            ignore_eos=parsed.ignore_eos,
            occurrence=occurrence,
            request_index=counters.requests_total,
            running=counters.running,
            cached_tokens=self._cached_tokens(parsed),
        )
        goal = self.sessions.find(parsed.messages) if parsed.messages else None
        session: dict[str, Any] = {}
        if goal is None:
            answer = self.answers.answer(parsed.prompt)
        else:   # a session turn: answered from its goal and the history (fourfold.targets.sim.sessions)
            key = f"{goal.id}\x1f{len(parsed.messages)}\x1f{parsed.prompt}"
            nth = self._occurrences.get(key, 0)
            self._occurrences[key] = nth + 1
            turn = session_answer(goal, parsed.messages, self._session_knobs,
                                  session_rng(self.seed, goal.id, len(parsed.messages), parsed.prompt, nth))
            answer = Answer(turn.text, goal.id, None)
            session = {"id": goal.id, "new_facts": list(turn.new_facts),
                       "revealed_before": turn.revealed_before}
        profile = self.profile
        call = (None if parsed.tool_result or goal is not None
                else choose_call(parsed.tools, parsed.prompt, self.seed, occurrence,
                                 1.0 if parsed.tool_forced else profile.tool_call_share,
                                 profile.tool_call_invalid_rate))
        plan = make_plan(profile, answer, facts, self.seed, reword=goal is None, tool_call=call)
        plan.messages, plan.session = len(parsed.messages), session
        counters.requests_total += 1
        counters.running += 1
        counters.prompt_tokens_total += plan.input_tokens
        counters.kv_tokens += plan.input_tokens
        return plan

    def _cached_tokens(self, parsed: ParsedRequest) -> int:
        """Leading prompt tokens the prefix cache holds (0 when the profile has no prefill cost)."""
        if not self.profile.prefill_ms_per_1k_tokens or not self.prefix_cache.block_tokens:
            return 0
        text = "\n".join(text for _, text in parsed.messages) if parsed.messages else parsed.prompt
        return self.prefix_cache.admit(text)

    def plan_header(self, plan: Plan, request_id: str, detail: bool, t0_s: float) -> str:
        """The ``x-fourfold-plan`` value; a detail plan too large for a header is served at PLANS_PATH."""
        extra: dict[str, Any] = {"t0_monotonic_s": round(t0_s, 6)}
        if not detail:
            return plan.header_value(False, extra)
        full = plan.header_value(True, extra)
        if len(full) <= PLAN_HEADER_MAX_CHARS:
            return full
        self._recent_plans[request_id] = {**plan.summary(True), **extra}
        while len(self._recent_plans) > RECENT_PLANS:
            self._recent_plans.popitem(last=False)
        return plan.header_value(False, {**extra, "offsets_url": PLANS_PATH + request_id})

    def request_id(self) -> str:
        return f"{self.seed & 0xFFFF:04x}{self.counters.requests_total:012x}"

    def finished(self, plan: Plan, sent_tokens: int, reason: str) -> None:
        """A generation ended ("stop", "length" or "abort"): release its slot and cache."""
        counters = self.counters
        counters.running -= 1
        counters.kv_tokens -= plan.input_tokens + sent_tokens
        counters.finished[reason] = counters.finished.get(reason, 0) + 1
        self.gateway.release()
        counters.waiting = self.gateway.waiting
