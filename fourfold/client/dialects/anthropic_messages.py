"""Anthropic Messages (``POST /v1/messages``), streamed as named SSE events or as one JSON body.

The stream is ``message_start`` (input tokens), then per content block ``content_block_start`` /
``content_block_delta``... / ``content_block_stop``, then ``message_delta`` (stop reason and the
cumulative output tokens) and ``message_stop`` (the terminal event); ``ping`` may appear anywhere.
``message_start`` also carries an ``output_tokens`` of 1 or 2: a placeholder, not read, so a
stream cut before ``message_delta`` reports no server count rather than a wrong one.
A ``text_delta`` is answer text and a ``thinking_delta`` is reasoning: both are content deltas (the
first ``text_delta`` is the first answer token). The prompt's size is ``input_tokens`` plus the
cache's ``cache_read_input_tokens`` and ``cache_creation_input_tokens`` (Anthropic counts them
apart); the cache read is the record's ``cached_tokens``.
A ``tool_use`` block is answer output too: its ``content_block_start`` (the tool's name) and each
non-empty ``input_json_delta`` (a piece of its arguments) are content deltas; ``signature_delta``
and ``citations_delta`` are not.

``stop_reason: "max_tokens"`` becomes ``finish_reason: "length"`` so truncation reads the same in
every dialect; other stop reasons are kept as sent (``end_turn``, ``stop_sequence``, ``tool_use``).
An ``error`` event maps its ``error.type``: ``rate_limit_error`` -> rate_limited,
``overloaded_error`` / ``api_error`` -> http_5xx, a context-length message -> context_length,
anything else -> interrupted.
"""

from __future__ import annotations

import json
from typing import Any

from fourfold.client.dialects.base import HttpRequest, RequestOptions
from fourfold.client.dialects.jsonevents import JsonEventParser, classify_error_message, error_message
from fourfold.client.dialects.openai_chat import cut_without_a_reason
from fourfold.client.sse import DEFAULT_MAX_EVENT_BYTES, SSEEvent
from fourfold.workloads.items import Item
from fourfold.workloads.tools import anthropic_history, anthropic_tool_choice, anthropic_tools

__all__ = ["ANTHROPIC_VERSION", "DEFAULT_MAX_TOKENS", "AnthropicMessages", "AnthropicMessagesParser",
           "anthropic_error_class"]

ANTHROPIC_VERSION = "2023-06-01"
DEFAULT_MAX_TOKENS = 1024   # the API requires max_tokens; used when neither item nor options set it

_ERROR_TYPES = {"rate_limit_error": "rate_limited", "overloaded_error": "http_5xx", "api_error": "http_5xx"}
_STOP_REASONS = {"max_tokens": "length"}


def anthropic_error_class(error: Any) -> str:
    """Error class for an Anthropic ``error`` object (``{"type": ..., "message": ...}``)."""
    kind = error.get("type") if isinstance(error, dict) else None
    if kind in _ERROR_TYPES:
        return _ERROR_TYPES[kind]
    return classify_error_message(error_message(error))


class AnthropicMessagesParser(JsonEventParser):
    """Parser for one Messages response; ``streaming`` picks SSE events or one JSON body."""

    def _on_event(self, event: SSEEvent) -> int:
        obj = self._json(event.data) if event.data else {}
        if obj is None:
            return 0
        kind = obj.get("type") or event.event
        try:
            if kind == "content_block_delta":
                delta = obj["delta"]
                delta_type = delta.get("type")
                if delta_type == "text_delta":
                    text = delta.get("text")
                    if text and isinstance(text, str):
                        self._answer(text)
                        return 1
                elif delta_type == "thinking_delta":
                    thinking = delta.get("thinking")
                    if thinking and isinstance(thinking, str):
                        self._thought(thinking)
                        return 1
                elif delta_type == "input_json_delta":       # a tool_use block's input, piece by piece
                    return int(self._tool(obj.get("index"), arguments=delta.get("partial_json")))
            elif kind == "content_block_start":
                block = obj.get("content_block") or {}
                if block.get("type") == "tool_use":          # its name is output already (OpenAI's too)
                    return int(self._tool(obj.get("index"), block.get("id"), block.get("name")))
            elif kind == "message_delta":
                self._read_usage(obj.get("usage"))
                stop = (obj.get("delta") or {}).get("stop_reason")
                if stop:
                    self._done.finish_reason = _STOP_REASONS.get(stop, str(stop))
            elif kind == "message_start":   # its output_tokens is a placeholder (1-2): input only
                self._read_usage((obj.get("message") or {}).get("usage"), output=False)
            elif kind == "message_stop":
                self._done.terminal = True
            elif kind == "error":
                error = obj.get("error", obj)
                self._error(anthropic_error_class(error), error_message(error) or "error event")
            # ping, content_block_start/stop and unknown (future) events carry nothing we count
        except (AttributeError, TypeError, KeyError) as exc:
            self._malformed(event.data, f"unexpected {kind} shape ({type(exc).__name__}: {exc})")
        return 0

    def _finalize(self) -> None:
        """``message_stop`` with no ``stop_reason`` in any ``message_delta``: an answer cut short
        (the API always says why it stopped), as for OpenAI's bare ``[DONE]``."""
        cut_without_a_reason(self, "message_stop")

    def _on_body(self, obj: dict[str, Any]) -> None:
        if obj.get("type") == "error" or "error" in obj:
            error = obj.get("error", obj)
            self._error(anthropic_error_class(error), error_message(error) or "error body")
            return
        for block in obj["content"]:
            kind = block.get("type")
            if kind == "text" and isinstance(block.get("text"), str):
                self._answer(block["text"])
            elif kind == "thinking" and isinstance(block.get("thinking"), str):
                self._thought(block["thinking"], answered=bool(self._text))
            elif kind == "tool_use":
                arguments = json.dumps(block.get("input"), ensure_ascii=False) if "input" in block else None
                self._tool(len(self._tools), block.get("id"), block.get("name"), arguments)
        done = self._done
        done.content_deltas = 1 if any(self._text) or any(self._reasoning) or self._tools else 0
        stop = obj.get("stop_reason")
        done.finish_reason = _STOP_REASONS.get(stop, str(stop)) if stop else ""
        self._read_usage(obj.get("usage"))
        done.terminal = True

    def _read_usage(self, usage: Any, output: bool = True) -> None:
        if not isinstance(usage, dict):
            return
        out, inp = usage.get("output_tokens"), usage.get("input_tokens")
        if output and out is not None:
            self.usage_output = out       # finish() decides whether the counts are plausible
        if inp is not None:
            # input_tokens leaves out the prompt tokens read from and written to the cache
            cached, written = usage.get("cache_read_input_tokens"), usage.get("cache_creation_input_tokens")
            parts = [inp, *(n for n in (cached, written) if n is not None)]
            self.usage_input = sum(parts) if all(type(n) is int for n in parts) else inp
            if cached is not None:
                self.usage_cached = cached


class AnthropicMessages:
    """The Anthropic Messages dialect (api.anthropic.com, Bedrock/Vertex proxies, LiteLLM)."""

    name = "anthropic"
    path = "/v1/messages"

    def build(self, item: Item, options: RequestOptions) -> HttpRequest:
        """System-role messages move to the top-level ``system`` field (joined by a blank line).

        ``ignore_eos`` and ``include_usage`` have no Anthropic equivalent (usage is always sent)
        and the API rejects unknown fields, so they are not sent; ``extra_body`` is merged last.
        """
        system = [m.get("content", "") for m in item.messages if m.get("role") == "system"]
        max_tokens = options.max_tokens if options.max_tokens is not None else item.max_tokens
        body: dict[str, Any] = {
            "model": options.model,
            "messages": anthropic_history([m for m in item.messages if m.get("role") != "system"]),
            "max_tokens": max_tokens if max_tokens is not None else DEFAULT_MAX_TOKENS,
            "stream": options.stream,
        }
        if system:
            body["system"] = "\n\n".join(system)
        if options.temperature is not None:
            body["temperature"] = options.temperature
        if item.meta.get("tools"):                      # the item's tools in the Messages API's shape
            body["tools"] = anthropic_tools(item.meta["tools"])
            if "tool_choice" in item.meta:
                body["tool_choice"] = anthropic_tool_choice(item.meta["tool_choice"])
        body.update(options.extra_body)
        headers = {"anthropic-version": ANTHROPIC_VERSION, **options.extra_headers}
        return HttpRequest("POST", self.path, json=body, headers=headers, stream=options.stream)

    def parser(self, streaming: bool = True,
               max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES) -> AnthropicMessagesParser:
        return AnthropicMessagesParser(streaming, max_event_bytes)
