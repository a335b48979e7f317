"""OpenAI chat completions (``POST /v1/chat/completions``), streamed as SSE or as one JSON body.

The same parser reads every OpenAI-compatible server fourfold has met (vLLM, SGLang,
llama.cpp's server, TGI's ``/v1`` route, the simulator): a *content delta* is an event whose
``choices[0].delta`` carries non-empty ``content``, reasoning (``reasoning_content`` from
DeepSeek/vLLM/SGLang, ``reasoning`` from newer vLLM/Ollama) or a piece of a tool call (``tool_calls``:
a function's name or argument text); a role-only first chunk is not one. ``finish_reason:
"tool_calls"`` ends a complete answer like ``stop``. Usage
may come in its own chunk with ``choices: []`` (``stream_options.include_usage``), inside the
finish chunk (TGI, llama.cpp) or in every chunk (vLLM ``continuous_usage_stats``): the last value
wins. ``data: [DONE]`` is the terminal event. llama.cpp's ``timings`` block (server-side prompt and
predict times) lands in ``server_timing``.

Most content deltas of a stream skip JSON altogether: :func:`content_template` proves the
stream's template once, and :class:`~fourfold.client.dialects.jsonevents.JsonEventParser`'s
whole-body fast path then reads each delta's text straight out of the bytes. The bookkeeping every
JSON-over-SSE dialect shares lives in :mod:`~fourfold.client.dialects.jsonevents` (its names are
importable from here too).
"""

from __future__ import annotations

import json
import re
from typing import Any

from fourfold.client.dialects.base import HttpRequest, RequestOptions
from fourfold.client.dialects.jsonevents import (
    ERROR_RANK,
    JsonEventParser,
    classify_error_message,
    error_message,
    loads_event,
    loads_json,
)
from fourfold.client.sse import DEFAULT_MAX_EVENT_BYTES, SSEEvent
from fourfold.workloads.items import Item

__all__ = ["ERROR_RANK", "JsonEventParser", "OpenAIChat", "OpenAIChatParser", "classify_error_message",
           "content_template", "cut_without_a_reason", "error_message", "loads_event"]

_JSON_STRING = re.compile(rb'"(?:[^"\\\x00-\x1f]|\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4}))*"')
_PROBE = "\x01fourfold\x02"


def content_template(payload: bytes) -> tuple[bytes, bytes] | None:
    """(prefix, suffix) around the content string of a plain chat-completion delta event, when
    every event ``prefix + <JSON string> + suffix`` means exactly "content = that string".

    A server writes every token's chunk from one template (same id, created, model, index, null
    finish_reason); only the content differs. The template is proven, not assumed: the event with
    a probe string in place of its content must parse to the same object with the probe as its
    content, and that object must carry nothing else the parser reads (no finish reason, usage,
    error, timings, reasoning or tool call; a null ``reasoning_content``, as SGLang and DeepSeek
    send beside every answer delta, carries nothing).
    """
    at = payload.find(b'"content":')
    if at < 0:
        return None
    start = at + 10
    while payload[start:start + 1] == b" ":
        start += 1
    literal = _JSON_STRING.match(payload, start)
    if literal is None:
        return None
    prefix, suffix = payload[:start], payload[literal.end():]
    try:
        original = loads_json(payload)
        probe = loads_json(prefix + json.dumps(_PROBE).encode() + suffix)
        choices = probe["choices"]
        delta = choices[0]["delta"]
        if (type(probe) is not dict or type(choices) is not list or type(delta) is not dict
                or delta.get("content") != _PROBE):
            return None
        delta["content"] = original["choices"][0]["delta"]["content"]
    except (ValueError, TypeError, KeyError, IndexError, AttributeError):
        return None
    if probe != original or len(choices) != 1 or type(choices[0]) is not dict:
        return None
    if (delta.get("reasoning_content") or delta.get("reasoning") or delta.get("tool_calls")
            or choices[0].get("finish_reason")
            or probe.get("usage") or "error" in probe or probe.get("object") == "error"
            or "timings" in probe):
        return None
    return prefix, suffix


def cut_without_a_reason(parser: JsonEventParser, terminal: str) -> None:
    """A stream that reached its terminal event (``terminal``) but never said why the answer
    stopped was cut short, not completed: ``interrupted``, unless a failure is already known."""
    done = parser._done
    if parser.streaming and done.terminal and not done.finish_reason and not done.error_class:
        parser._error("interrupted", f"{terminal} without a finish reason: the server ended the answer "
                                     f"after {done.content_deltas} content deltas without saying why")


class OpenAIChatParser(JsonEventParser):
    """Parser for one chat-completions response; ``streaming`` picks SSE or one JSON body."""

    _template: tuple[bytes, bytes] | None = None

    def _find_template(self, parts: list[bytes]) -> tuple[bytes, bytes] | None:
        """(``b"data: "`` + prefix, suffix) of this stream's plain content deltas (see
        :func:`content_template`), taken from one of its first JSON events that the next event
        fits too (the role chunk that opens a vLLM stream has a template of its own), or None."""
        tries = 0
        for i, part in enumerate(parts[:-1]):
            # (a reasoning model's reasoning events, with no content string, are passed over uncounted)
            if (not part.startswith(b"data: {") or b"\n" in part or b'"content":' not in part
                    or b'"content":null' in part or b'"content": null' in part):
                continue
            tries += 1
            if tries > 4:
                break
            found = content_template(part[6:])
            if found is not None:
                prefix, suffix = b"data: " + found[0], found[1]
                following = parts[i + 1]
                if following.startswith(prefix) and following.endswith(suffix):
                    self._template = (prefix, suffix)
                    return self._template
        return None

    def _finalize(self) -> None:
        """``data: [DONE]`` after no finish reason at all is an answer cut short: every
        OpenAI-compatible server met puts the reason it stopped (``stop``, ``length``, ...) in the
        last choice. llama-cpp-python's server does exactly this when ``interrupt_requests`` is on
        and another request arrives (the body then ends cleanly or is dropped, by version)."""
        cut_without_a_reason(self, "data: [DONE]")

    def _on_event(self, event: SSEEvent) -> int:
        data = event.data
        if not data.startswith("{"):
            if data.strip() == "[DONE]":
                self._done.terminal = True
            elif data:
                self._malformed(data, "not JSON")
            return 0
        try:
            obj = loads_event(data)
        except ValueError as exc:
            self._malformed(data, f"not JSON ({exc})")
            return 0
        try:
            return self._on_object(obj)
        except (AttributeError, TypeError, KeyError, IndexError) as exc:
            self._malformed(data, f"unexpected shape ({type(exc).__name__}: {exc})")
            return 0

    def _on_object(self, obj: Any) -> int:
        """One event's JSON value -> content deltas (0 or 1); raises on an unexpected shape."""
        got = 0
        choices = obj.get("choices")
        if choices:
            choice = choices[0]
            delta = choice.get("delta")
            if delta:
                content = delta.get("content")
                if content and isinstance(content, str):
                    self._answer(content)
                    got = 1
                calls = delta.get("tool_calls")
                if calls and isinstance(calls, list):
                    for call in calls:
                        function = call.get("function") or {}
                        if self._tool(call.get("index", 0), call.get("id"), function.get("name"),
                                      function.get("arguments")):
                            got = 1
                reasoning = delta.get("reasoning_content") or delta.get("reasoning")
                if reasoning and isinstance(reasoning, str):
                    self._thought(reasoning, answered=bool(got))
                    got = 1
            finish = choice.get("finish_reason")
            if finish:
                self._done.finish_reason = str(finish)
        usage = obj.get("usage")
        if usage:
            self._read_usage(usage)
        if "error" in obj or obj.get("object") == "error":
            self._server_error(obj.get("error", obj))
        if "timings" in obj:
            self._read_timings(obj["timings"])
        return got

    def _on_body(self, obj: dict[str, Any]) -> None:
        if "error" in obj or obj.get("object") == "error":
            self._server_error(obj.get("error", obj))
            return
        choice = obj["choices"][0]
        message = choice.get("message") or {}
        content = message.get("content")
        reasoning = message.get("reasoning_content") or message.get("reasoning")
        if isinstance(reasoning, str) and reasoning:
            self._thought(reasoning, answered=isinstance(content, str) and bool(content))
        if isinstance(content, str) and content:
            self._answer(content)
        for index, call in enumerate(message.get("tool_calls") or ()):
            function = call.get("function") or {}
            self._tool(index, call.get("id"), function.get("name"), function.get("arguments"))
        done = self._done
        done.content_deltas = 1 if (self._text or self._reasoning or self._tools) else 0
        done.finish_reason = str(choice.get("finish_reason") or "")
        if isinstance(obj.get("usage"), dict):
            self._read_usage(obj["usage"])
        self._read_timings(obj.get("timings"))
        done.terminal = True

    def _read_usage(self, usage: dict[str, Any]) -> None:
        """The last reported counts win; finish() decides whether they are plausible. Reasoning:
        ``completion_tokens_details.reasoning_tokens`` (OpenAI, DeepSeek, vLLM); prompt tokens from
        the prefix cache: ``prompt_tokens_details.cached_tokens`` (OpenAI, vLLM, SGLang) or
        ``prompt_cache_hit_tokens`` (DeepSeek)."""
        out, inp = usage.get("completion_tokens"), usage.get("prompt_tokens")
        if out is not None:
            self.usage_output = out
            details = usage.get("completion_tokens_details")
            hidden = details.get("reasoning_tokens") if isinstance(details, dict) else None
            self.usage_reasoning = hidden
            # reasoning it did not stream (OpenAI's o-series): no chunk stands for it
            self.usage_hidden = hidden if type(hidden) is int and not self._reasoning else 0
        if inp is not None:
            self.usage_input = inp
            details = usage.get("prompt_tokens_details")
            cached = details.get("cached_tokens") if isinstance(details, dict) else None
            self.usage_cached = cached if cached is not None else usage.get("prompt_cache_hit_tokens")


class OpenAIChat:
    """The OpenAI chat-completions dialect (vLLM, SGLang, llama.cpp, TGI, Ollama, OpenAI)."""

    name = "openai"
    path = "/v1/chat/completions"

    def build(self, item: Item, options: RequestOptions) -> HttpRequest:
        """The request body; ``extra_body`` is merged last (shallow) so it can override anything."""
        body: dict[str, Any] = {
            "model": options.model,
            "messages": [dict(m) for m in item.messages],
            "stream": options.stream,
        }
        max_tokens = options.max_tokens if options.max_tokens is not None else item.max_tokens
        if max_tokens is not None:
            body["max_tokens"] = max_tokens
        if options.stream and options.include_usage:
            body["stream_options"] = {"include_usage": True}
        if options.ignore_eos:
            body["ignore_eos"] = True
        if options.temperature is not None:
            body["temperature"] = options.temperature
        if item.meta.get("tools"):                      # the item's tools, as the dataset gives them
            body["tools"] = item.meta["tools"]
            if "tool_choice" in item.meta:
                body["tool_choice"] = item.meta["tool_choice"]
        body.update(options.extra_body)
        return HttpRequest("POST", self.path, json=body, headers=dict(options.extra_headers),
                           stream=options.stream)

    def parser(self, streaming: bool = True,
               max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES) -> OpenAIChatParser:
        return OpenAIChatParser(streaming, max_event_bytes)
