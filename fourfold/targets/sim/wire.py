"""Shared pieces of the simulator's wire formats (written independently of ``measure``).

Each dialect module (``wire_openai``, ``wire_anthropic``, ``wire_triton``) turns a request body
into a :class:`ParsedRequest` (or raises :class:`WireError` with the body a real server of that
kind would send) and renders a :class:`fourfold.targets.sim.plan.Plan` as bytes through an
:class:`Encoder`:

- ``prelude()``: events written right after the response headers (may be empty);
- ``tokens(first, texts)``: the events carrying tokens ``first .. first + len(texts) - 1``
  (the hot path: one call per scheduler step, pre-encoded byte templates, cached JSON strings);
- ``closing()``: the events after the last token (finish reason, usage, terminal event);
- ``body()``: the whole non-streaming JSON body.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from fourfold.targets.sim.plan import Plan
from fourfold.targets.sim.tokens import content_text

SSE_CONTENT_TYPE = "text/event-stream; charset=utf-8"
JSON_CONTENT_TYPE = "application/json"

JSON_STR_CACHE: dict[str, bytes] = {}
_JSON_STR_CACHE_MAX = 200_000


def json_str(text: str) -> bytes:
    """``json.dumps(text)`` as UTF-8 bytes, cached (tokens repeat a lot)."""
    cached = JSON_STR_CACHE.get(text)
    if cached is None:
        cached = json.dumps(text, ensure_ascii=False).encode("utf-8")
        if len(JSON_STR_CACHE) < _JSON_STR_CACHE_MAX:
            JSON_STR_CACHE[text] = cached
    return cached


def encode_run(prefix: bytes, texts: list[str], suffix: bytes) -> bytes:
    """``prefix + json(text) + suffix`` for every text, joined (the per-token hot path)."""
    get = JSON_STR_CACHE.get
    return b"".join([prefix + (get(t) or json_str(t)) + suffix for t in texts])


def group_texts(first: int, texts: list[str], k: int, base: int) -> list[str]:
    """``texts`` (tokens ``first``, ``first + 1``, ...) joined ``k`` to an event, the groups counted
    from token ``base`` (the plan's ``tokens_per_event``; a run split by a pause joins what it holds)."""
    if k <= 1 or len(texts) <= 1:
        return texts
    out: list[str] = []
    current: list[str] = []
    group = None
    for i, text in enumerate(texts):
        at = (first + i - base) // k
        if at != group and current:
            out.append("".join(current))
            current = []
        group = at
        current.append(text)
    out.append("".join(current))
    return out


def split_run(plan: Plan, first: int, texts: list[str]) -> tuple[list[str], list[str]]:
    """A run's reasoning tokens and answer tokens, each joined ``plan.tokens_per_event`` to an event."""
    thought = min(max(0, plan.reasoning - first), len(texts))
    k = plan.tokens_per_event
    if k <= 1:
        return texts[:thought], texts[thought:]
    return (group_texts(first, texts[:thought], k, 0),
            group_texts(first + thought, texts[thought:], k, plan.reasoning))


def dumps(obj: Any) -> bytes:
    """Compact JSON bytes (UTF-8, no ASCII escaping, like vLLM and the Anthropic API)."""
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


class WireError(Exception):
    """A request the dialect rejects: carries the status, the JSON body and extra headers."""

    def __init__(self, status: int, body: dict[str, Any], headers: dict[str, str] | None = None) -> None:
        super().__init__(f"{status}: {body}")
        self.status = status
        self.body = body
        self.headers = headers or {}


class Encoder(Protocol):
    content_type: str

    def prelude(self) -> bytes: ...

    def tokens(self, first: int, texts: list[str]) -> bytes: ...

    def closing(self) -> bytes: ...

    def body(self) -> bytes: ...


@dataclass
class ParsedRequest:
    """A request reduced to what the planner needs, plus how to render its answer."""

    dialect: str
    model: str
    prompt: str
    input_tokens: int
    stream: bool
    max_tokens: int | None = None
    ignore_eos: bool = False
    make_encoder: Callable[[Plan, str], Encoder] | None = None
    options: dict[str, Any] = field(default_factory=dict)
    messages: tuple[tuple[str, str], ...] = ()   # (role, text) of every chat message, in order
    tools: tuple[tuple[str, str, dict[str, Any]], ...] = ()   # (name, description, schema) offered
    tool_result: bool = False     # the conversation ends with a tool's result: answer in text
    tool_forced: bool = False     # tool_choice asks for a call (required, or a named tool)


def parse_json_object(body: bytes, error: Callable[[str], WireError]) -> dict[str, Any]:
    """Decode a JSON object body or raise the dialect's error."""
    try:
        data = json.loads(body or b"null")
    except ValueError as exc:
        raise error(f"request body is not valid JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise error("request body must be a JSON object")
    return data


def chat_history(messages: list[dict[str, Any]]) -> tuple[tuple[str, str], ...]:
    """``(role, text)`` of every chat message (the session simulator reads the whole history)."""
    return tuple((str(m.get("role", "")), "".join(content_text(m.get("content")))) for m in messages)


def positive_int(value: Any, name: str, error: Callable[[str], WireError]) -> int | None:
    """None stays None; otherwise an int >= 1 or the dialect's error."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise error(f"{name} must be a positive integer, got {value!r}")
    return value
