"""Anthropic Messages API (``POST /v1/messages``), streaming and not.

Stream (each event is ``event: NAME`` + ``data: JSON`` + blank line): ``message_start`` (with
``usage.input_tokens``), ``content_block_start``, ``ping`` - all three right after the response
headers - then one ``content_block_delta`` / ``text_delta`` per token, and after the last token
``content_block_stop``, ``message_delta`` (``stop_reason`` + ``usage.output_tokens``) and
``message_stop``.

``anthropic-beta``: when the profile lists ``beta_features``, any other requested beta is
answered 400 ``invalid_request_error`` "Unknown beta feature" (the article's feature-flag probe).
"""

from __future__ import annotations

import json
from typing import Any

from fourfold.targets.sim.plan import Plan
from fourfold.targets.sim.tokens import content_text, count_tokens
from fourfold.targets.sim.toolcalls import apply_choice, ends_with_tool_result, offered_tools
from fourfold.targets.sim.wire import (
    SSE_CONTENT_TYPE,
    ParsedRequest,
    WireError,
    chat_history,
    dumps,
    encode_run,
    parse_json_object,
    positive_int,
    split_run,
)

STOP_REASONS = {"stop": "end_turn", "length": "max_tokens", "tool_calls": "tool_use"}


def error(message: str, status: int = 400, err_type: str = "invalid_request_error") -> WireError:
    return WireError(status, {"type": "error", "error": {"type": err_type, "message": message}})


def check_betas(headers: dict[str, str], known: tuple[str, ...] | None) -> None:
    if known is None:
        return
    requested = [b.strip() for b in headers.get("anthropic-beta", "").split(",") if b.strip()]
    for beta in requested:
        if beta not in known:
            raise error(f"Unknown beta feature: {beta}")


def parse(body: bytes, headers: dict[str, str], default_model: str,
          betas: tuple[str, ...] | None = None) -> ParsedRequest:
    check_betas(headers, betas)
    data = parse_json_object(body, error)
    messages = data.get("messages")
    if not isinstance(messages, list) or not messages or not all(isinstance(m, dict) for m in messages):
        raise error("messages: Field required (a non-empty list of message objects)")
    if "max_tokens" not in data:
        raise error("max_tokens: Field required")
    max_tokens = positive_int(data.get("max_tokens"), "max_tokens", error)
    prompt = ""
    for message in reversed(messages):
        if message.get("role") == "user":
            prompt = "".join(content_text(message.get("content")))
            break
    texts = [t for m in messages for t in content_text(m.get("content"))]
    texts.extend(content_text(data.get("system")))
    model: str = data["model"] if isinstance(data.get("model"), str) else default_model
    tools, forced = apply_choice(offered_tools(data), data.get("tool_choice"))
    return ParsedRequest(
        dialect="anthropic",
        model=model,
        prompt=prompt.strip(),
        input_tokens=sum(count_tokens(t) for t in texts),
        stream=bool(data.get("stream")),
        max_tokens=max_tokens,
        ignore_eos=bool(data.get("ignore_eos")),
        make_encoder=lambda plan, request_id: MessagesEncoder(plan, request_id, model),
        messages=chat_history(messages),
        tools=tools,
        tool_forced=forced,
        tool_result=ends_with_tool_result(messages),
    )


def _event(name: bytes, payload: bytes) -> bytes:
    return b"event: " + name + b"\ndata: " + payload + b"\n\n"


class MessagesEncoder:
    """Renders one Messages API response from its plan."""

    content_type = SSE_CONTENT_TYPE
    __slots__ = ("plan", "message_id", "model")

    _DELTA_PREFIX = (b'event: content_block_delta\n'
                     b'data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":')
    _DELTA_SUFFIX = b"}}\n\n"
    # with extended thinking: block 0 is the thinking, block 1 the text
    _THINKING_PREFIX = (b'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,'
                        b'"delta":{"type":"thinking_delta","thinking":')
    _TEXT_AFTER_THINKING = _DELTA_PREFIX.replace(b'"index":0', b'"index":1')
    _CALL_PREFIX = (b'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,'
                    b'"delta":{"type":"input_json_delta","partial_json":')

    def __init__(self, plan: Plan, request_id: str, model: str) -> None:
        self.plan = plan
        self.message_id = f"msg_{request_id}"
        self.model = model

    def _message(self, content: list[dict[str, Any]], stop_reason: str | None,
                 output_tokens: int) -> dict[str, Any]:
        return {
            "id": self.message_id,
            "type": "message",
            "role": "assistant",
            "model": self.model,
            "content": content,
            "stop_reason": stop_reason,
            "stop_sequence": None,
            "usage": {"input_tokens": self.plan.input_tokens, "output_tokens": output_tokens},
        }

    def prelude(self) -> bytes:
        start = {"type": "message_start", "message": self._message([], None, 1)}
        call = self.plan.tool_call
        first = ({"type": "tool_use", "id": "toolu_" + call.call_id[5:], "name": call.name, "input": {}}
                 if call is not None else {"type": "thinking", "thinking": ""} if self.plan.reasoning
                 else {"type": "text", "text": ""})
        block = {"type": "content_block_start", "index": 0, "content_block": first}
        return (
            _event(b"message_start", dumps(start))
            + _event(b"content_block_start", dumps(block))
            + _event(b"ping", b'{"type": "ping"}')
        )

    def tokens(self, first: int, texts: list[str]) -> bytes:
        reasoning = self.plan.reasoning
        thoughts, answer = split_run(self.plan, first, texts)     # the events of this run
        if self.plan.tool_call is not None:
            return encode_run(self._CALL_PREFIX, answer, self._DELTA_SUFFIX)
        if not reasoning:
            return encode_run(self._DELTA_PREFIX, answer, self._DELTA_SUFFIX)
        thought = min(max(0, reasoning - first), len(texts))
        out = encode_run(self._THINKING_PREFIX, thoughts, self._DELTA_SUFFIX)
        if thought < len(texts):
            if first + thought == reasoning:       # the answer starts in this run: close the thinking
                out += self._switch_blocks()
            out += encode_run(self._TEXT_AFTER_THINKING, answer, self._DELTA_SUFFIX)
        return out

    def _switch_blocks(self) -> bytes:
        signature = {"type": "content_block_delta", "index": 0,
                     "delta": {"type": "signature_delta", "signature": "c2ltdWxhdGVk"}}
        block = {"type": "content_block_start", "index": 1, "content_block": {"type": "text", "text": ""}}
        return (_event(b"content_block_delta", dumps(signature))
                + _event(b"content_block_stop", b'{"type":"content_block_stop","index":0}')
                + _event(b"content_block_start", dumps(block)))

    def closing(self) -> bytes:
        delta = {
            "type": "message_delta",
            "delta": {"stop_reason": STOP_REASONS[self.plan.finish_reason], "stop_sequence": None},
            "usage": {"output_tokens": self.plan.output_tokens},
        }
        plan = self.plan
        last = 1 if plan.reasoning and plan.reasoning < plan.output_tokens else 0
        return (
            _event(b"content_block_stop", b'{"type":"content_block_stop","index":%d}' % last)
            + _event(b"message_delta", dumps(delta))
            + _event(b"message_stop", b'{"type":"message_stop"}')
        )

    def body(self) -> bytes:
        content: list[dict[str, Any]] = [{"type": "text", "text": self.plan.text}]
        call = self.plan.tool_call
        if call is not None:
            try:
                arguments = json.loads(self.plan.text)
            except ValueError:          # cut at max_tokens: the API sends what it parsed, here nothing
                arguments = {}
            content = [{"type": "tool_use", "id": "toolu_" + call.call_id[5:], "name": call.name,
                        "input": arguments}]
        if self.plan.reasoning:
            content.insert(0, {"type": "thinking", "thinking": self.plan.reasoning_text,
                               "signature": "c2ltdWxhdGVk"})
        return dumps(self._message(content, STOP_REASONS[self.plan.finish_reason], self.plan.output_tokens))
