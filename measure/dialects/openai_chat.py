"""OpenAI chat completions (``POST /v1/chat/completions``), streamed as SSE or as one JSON body.

The same parser reads every OpenAI-compatible server fourfold has met (vLLM, SGLang,
llama.cpp's server, TGI's ``/v1`` route, the simulator): a *content delta* is an event whose
``choices[0].delta`` carries non-empty ``content`` or reasoning (``reasoning_content`` from
DeepSeek/vLLM, ``reasoning`` from newer vLLM/Ollama); a role-only first chunk is not one. Usage
may come in its own chunk with ``choices: []`` (``stream_options.include_usage``), inside the
finish chunk (TGI, llama.cpp) or in every chunk (vLLM ``continuous_usage_stats``): the last value
wins. ``data: [DONE]`` is the terminal event. llama.cpp's ``timings`` block (server-side prompt and
predict times) lands in ``server_timing``.

This module also holds :class:`JsonEventParser`, the bookkeeping every JSON-over-SSE dialect
shares (SSE decoding, malformed-event counting, error ranking, the one-JSON-body mode), so the
Anthropic and Triton parsers only say what their events mean.
"""

from __future__ import annotations

import json
import re
from json.scanner import make_scanner
from typing import Any

from measure.dialects.base import Completion, HttpRequest, RequestOptions
from measure.items import Item
from measure.sse import DEFAULT_MAX_EVENT_BYTES, SSEDecoder, SSEEvent

__all__ = ["ERROR_RANK", "JsonEventParser", "OpenAIChat", "OpenAIChatParser",
           "classify_error_message", "error_message", "loads_event"]

_CONTEXT_LENGTH = re.compile(
    r"context[ _-]?(length|window)|maximum context|max_model_len|prompt is too long"
    r"|input length|max_input_len|too many (input )?tokens",
    re.IGNORECASE,
)

# When several problems show up in one body, the most telling one is reported.
ERROR_RANK = {"": 0, "malformed_stream": 1, "too_large": 2, "interrupted": 3, "http_5xx": 3,
              "rate_limited": 3, "context_length": 4}


# the C scanner json.loads itself ends up in (typeshed types its argument as the C class)
_scan_json = make_scanner(json.JSONDecoder())  # type: ignore[arg-type]


def loads_event(text: str) -> Any:
    """``json.loads`` for one event's data, about twice as fast on a short object.

    ``json.loads`` spends half its time on a small event in two whitespace regexes around the C
    scanner; this calls the scanner directly when the text starts with ``{`` and checks the tail
    by hand. Same results and same ``ValueError`` (``JSONDecodeError``) on bad input.
    """
    if not text.startswith("{"):
        return json.loads(text)
    try:
        obj, end = _scan_json(text, 0)
    except StopIteration as exc:   # what the scanner raises where json.loads says "Expecting value"
        raise json.JSONDecodeError("Expecting value", text, exc.value) from None
    if end != len(text) and text[end:].strip(" \t\n\r"):
        raise json.JSONDecodeError("Extra data", text, end)
    return obj


def classify_error_message(message: str, default: str = "interrupted") -> str:
    """Error class for an error reported inside a 200 body: context length, else ``default``."""
    return "context_length" if _CONTEXT_LENGTH.search(message) else default


def error_message(error: Any) -> str:
    """The human text of an error payload (``{"message": ...}``, a plain string, or anything)."""
    if isinstance(error, dict):
        text = error.get("message") or error.get("error") or error.get("type") or ""
        code = error.get("code")
        if isinstance(text, str) and isinstance(code, str) and code not in text:
            text = f"{text} ({code})"  # OpenAI puts "context_length_exceeded" in code
        return text if isinstance(text, str) else json.dumps(text)
    return error if isinstance(error, str) else json.dumps(error)


class JsonEventParser:
    """A StreamParser for dialects whose stream is SSE events carrying JSON.

    Subclasses implement ``_on_event`` (one SSE event -> content deltas it carried, 0 or 1) and
    ``_on_body`` (the whole non-streamed JSON body). Text and reasoning go into ``_text`` /
    ``_reasoning``; everything else straight into ``_done`` (the Completion being built).
    """

    def __init__(self, streaming: bool = True, max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES) -> None:
        self.streaming = streaming
        self.max_event_bytes = max_event_bytes
        self.decoder = SSEDecoder(max_event_bytes)
        self.server_timing: dict[str, float] = {}
        self.malformed_events = 0
        self._text: list[str] = []
        self._reasoning: list[str] = []
        self._body: list[bytes] = []
        self._body_bytes = 0
        self._done = Completion()
        self._finished = False

    # ---- StreamParser ----
    def feed(self, data: bytes) -> int:
        """Consume raw bytes; return the content deltas they completed (0 when not streaming)."""
        if not self.streaming:
            self._body_bytes += len(data)
            if self._body_bytes <= self.max_event_bytes:
                self._body.append(data)
            return 0
        deltas = 0
        on_event = self._on_event
        for event in self.decoder.decode(data):
            deltas += on_event(event)
        self._done.content_deltas += deltas
        return deltas

    def finish(self) -> Completion:
        """End of body: flush, parse a non-streamed body, and return the Completion (idempotent)."""
        done = self._done
        if self._finished:
            return done
        self._finished = True
        if self.streaming:
            for event in self.decoder.flush():
                done.content_deltas += self._on_event(event)
            if self.decoder.too_large:
                self._error("too_large", f"an SSE event exceeded {self.max_event_bytes} bytes and was discarded")
            if self.decoder.invalid_utf8:   # replaced by U+FFFD (the text is kept) and counted
                self._malformed_utf8(self.decoder.invalid_utf8)
        elif self._body_bytes > self.max_event_bytes:
            self._error("too_large", f"response body of {self._body_bytes} bytes exceeds {self.max_event_bytes}")
        else:
            raw = b"".join(self._body)
            try:
                raw.decode("utf-8-sig")
            except UnicodeDecodeError:
                self._malformed_utf8(1)
            try:
                obj = json.loads(raw.decode("utf-8-sig", "replace"))
                if not isinstance(obj, dict):
                    raise TypeError("not a JSON object")
                self._on_body(obj)
            except (ValueError, AttributeError, TypeError, KeyError, IndexError) as exc:
                self._malformed(raw[:120].decode("utf-8", "replace"), f"not a valid response body ({exc})")
        self._finalize()
        if done.error_class == "malformed_stream" and self.malformed_events > 1:
            done.error_detail += f" (+{self.malformed_events - 1} more malformed)"
        done.text = "".join(self._text)
        done.reasoning = "".join(self._reasoning)
        return done

    # ---- for subclasses ----
    def _on_event(self, event: SSEEvent) -> int:
        raise NotImplementedError

    def _on_body(self, obj: dict[str, Any]) -> None:
        raise NotImplementedError

    def _finalize(self) -> None:
        """Hook run once by finish() before the Completion is returned."""

    def _json(self, data: str) -> dict[str, Any] | None:
        """The event's JSON object, or None (counted as malformed) when it is not one."""
        try:
            obj = loads_event(data)
        except ValueError as exc:
            self._malformed(data, f"not JSON ({exc})")
            return None
        if not isinstance(obj, dict):
            self._malformed(data, "not a JSON object")
            return None
        return obj

    def _malformed_utf8(self, lines: int) -> None:
        self.malformed_events += 1
        if self.malformed_events == 1:
            self._error("malformed_stream", f"invalid UTF-8 in {lines} line(s) of the body (replaced by U+FFFD)")

    def _malformed(self, data: str, why: str) -> None:
        self.malformed_events += 1
        if self.malformed_events == 1:
            self._error("malformed_stream", f"{why}: {data[:120]!r}")

    def _server_error(self, error: Any, default: str = "interrupted") -> None:
        message = error_message(error)
        self._error(classify_error_message(message, default), message or "error event without a message")

    def _error(self, error_class: str, detail: str) -> None:
        """Keep the most telling problem (``ERROR_RANK``); the first of equal rank wins."""
        done = self._done
        if ERROR_RANK.get(error_class, 3) > ERROR_RANK.get(done.error_class, 3):
            done.error_class, done.error_detail = error_class, detail

    def _read_timings(self, timings: Any) -> None:
        """Numeric ``*_ms`` / ``*_us`` entries of a server's timing block -> ``server_timing``."""
        if isinstance(timings, dict):
            for key, value in timings.items():
                if (isinstance(key, str) and key.endswith(("_ms", "_us"))
                        and isinstance(value, (int, float)) and not isinstance(value, bool)):
                    self.server_timing[key] = float(value)


class OpenAIChatParser(JsonEventParser):
    """Parser for one chat-completions response; ``streaming`` picks SSE or one JSON body."""

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
            got = 0
            choices = obj.get("choices")
            if choices:
                choice = choices[0]
                delta = choice.get("delta")
                if delta:
                    content = delta.get("content")
                    if content and isinstance(content, str):
                        self._text.append(content)
                        got = 1
                    reasoning = delta.get("reasoning_content") or delta.get("reasoning")
                    if reasoning and isinstance(reasoning, str):
                        self._reasoning.append(reasoning)
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
        except (AttributeError, TypeError, KeyError, IndexError) as exc:
            self._malformed(data, f"unexpected shape ({type(exc).__name__}: {exc})")
            return 0

    def _on_body(self, obj: dict[str, Any]) -> None:
        if "error" in obj or obj.get("object") == "error":
            self._server_error(obj.get("error", obj))
            return
        choice = obj["choices"][0]
        message = choice.get("message") or {}
        content = message.get("content")
        reasoning = message.get("reasoning_content") or message.get("reasoning")
        if isinstance(content, str) and content:
            self._text.append(content)
        if isinstance(reasoning, str) and reasoning:
            self._reasoning.append(reasoning)
        done = self._done
        done.content_deltas = 1 if (self._text or self._reasoning) else 0
        done.finish_reason = str(choice.get("finish_reason") or "")
        if isinstance(obj.get("usage"), dict):
            self._read_usage(obj["usage"])
        self._read_timings(obj.get("timings"))
        done.terminal = True

    def _read_usage(self, usage: dict[str, Any]) -> None:
        out, inp = usage.get("completion_tokens"), usage.get("prompt_tokens")
        if isinstance(out, int):
            self._done.output_tokens = out
        if isinstance(inp, int):
            self._done.input_tokens = inp


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
        body.update(options.extra_body)
        return HttpRequest("POST", self.path, json=body, headers=dict(options.extra_headers),
                           stream=options.stream)

    def parser(self, streaming: bool = True, max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES) -> OpenAIChatParser:
        return OpenAIChatParser(streaming, max_event_bytes)
