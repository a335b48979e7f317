"""The OpenAI Responses API (``POST /v1/responses``), streamed as typed SSE events or as one JSON body.

Every event's payload names its ``type`` (the ``event:`` line repeats it). What is output:

- ``response.output_text.delta``: answer text (the first one is the first answer token);
- ``response.reasoning_text.delta`` (vLLM, gpt-oss: the reasoning itself) and
  ``response.reasoning_summary_text.delta`` (OpenAI's models: a summary of reasoning the usage counts
  but never sends): reasoning;
- ``response.function_call_arguments.delta``: a piece of a tool call's arguments, and the
  ``function_call`` item of ``response.output_item.added`` its name (answer output, as in chat);
- ``response.refusal.delta``: answer text too (a refusal is the answer).

The terminal events say how it ended: ``response.completed`` (``finish_reason`` ``stop``, or
``tool_calls`` when the output is only calls), ``response.incomplete`` (``max_output_tokens`` ->
``length`` so truncation reads as in every dialect; other reasons kept as sent), ``response.failed``
(its ``error.code``: ``rate_limit_exceeded`` -> rate_limited, ``server_error`` -> http_5xx, a
context-length message -> context_length, anything else interrupted). Their ``response.usage`` is
read: ``input_tokens`` with ``input_tokens_details.cached_tokens``, ``output_tokens`` with
``output_tokens_details.reasoning_tokens``. An ``error`` event is classified the same way. A stream
that ends without a terminal event was cut (no record is complete without one).
"""

from __future__ import annotations

from typing import Any

from fourfold.client.dialects.base import HttpRequest, RequestOptions
from fourfold.client.dialects.jsonevents import JsonEventParser, classify_error_message, error_message
from fourfold.client.sse import DEFAULT_MAX_EVENT_BYTES, SSEEvent
from fourfold.workloads.items import Item
from fourfold.workloads.tools import responses_input, responses_tool_choice, responses_tools

__all__ = ["OpenAIResponses", "OpenAIResponsesParser", "responses_error_class"]

_ERROR_CODES = {"rate_limit_exceeded": "rate_limited", "server_error": "http_5xx",
                "server_is_overloaded": "http_5xx", "slow_down": "rate_limited"}
_INCOMPLETE = {"max_output_tokens": "length", "max_tokens": "length"}
_TERMINAL = {"response.completed": "completed", "response.incomplete": "incomplete",
             "response.failed": "failed"}


def responses_error_class(error: Any) -> str:
    """Error class for a Responses ``error`` object (``{"code": ..., "message": ...}``)."""
    code = error.get("code") if isinstance(error, dict) else None
    if isinstance(code, str) and code in _ERROR_CODES:
        return _ERROR_CODES[code]
    return classify_error_message(error_message(error))


class OpenAIResponsesParser(JsonEventParser):
    """Parser for one Responses API response; ``streaming`` picks SSE events or one JSON body."""

    def __init__(self, streaming: bool = True, max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES) -> None:
        super().__init__(streaming, max_event_bytes)
        self._summary_only = True     # every reasoning delta so far was a summary (OpenAI's models)

    def _on_event(self, event: SSEEvent) -> int:
        obj = self._json(event.data) if event.data else {}
        if obj is None:
            return 0
        kind = obj.get("type") or event.event
        try:
            if kind == "response.output_text.delta" or kind == "response.refusal.delta":
                delta = obj.get("delta")
                if delta and isinstance(delta, str):
                    self._answer(delta)
                    return 1
            elif kind == "response.reasoning_text.delta" or kind == "response.reasoning_summary_text.delta":
                delta = obj.get("delta")
                if delta and isinstance(delta, str):
                    if kind == "response.reasoning_text.delta":
                        self._summary_only = False
                    self._thought(delta)
                    return 1
            elif kind == "response.function_call_arguments.delta":
                call = obj.get("item_id") or obj.get("output_index")
                return int(self._tool(call, arguments=obj.get("delta")))
            elif kind == "response.output_item.added":
                item = obj.get("item") or {}
                if item.get("type") == "function_call":
                    return int(self._tool(item.get("id") or obj.get("output_index"), item.get("call_id"),
                                          item.get("name"), item.get("arguments")))
            elif kind in _TERMINAL:
                self._read_response(obj.get("response") or {}, kind)
            elif kind == "error":
                error = obj.get("error") if isinstance(obj.get("error"), dict) else obj
                self._error(responses_error_class(error), error_message(error) or "error event")
            # created, in_progress, content_part.*, *.done and unknown (future) events carry nothing counted
        except (AttributeError, TypeError, KeyError) as exc:
            self._malformed(event.data, f"unexpected {kind} shape ({type(exc).__name__}: {exc})")
        return 0

    def _read_response(self, response: dict[str, Any], kind: str) -> None:
        """A terminal event's response object (or the whole non-streamed body)."""
        done = self._done
        done.terminal = True
        status = response.get("status") or _TERMINAL.get(kind, "")
        if status == "failed" or response.get("error"):
            error = response.get("error") or {}
            self._error(responses_error_class(error), error_message(error) or "response.failed")
        elif status == "incomplete":
            reason = (response.get("incomplete_details") or {}).get("reason") or "incomplete"
            done.finish_reason = _INCOMPLETE.get(reason, str(reason))
        elif status == "completed":
            calls_only = self._tools and not self._text
            done.finish_reason = "tool_calls" if calls_only else "stop"
        self._read_usage(response.get("usage"))

    def _on_body(self, obj: dict[str, Any]) -> None:
        if obj.get("object") != "response" and "error" in obj:
            error = obj.get("error")
            self._error(responses_error_class(error), error_message(error) or "error body")
            return
        for index, item in enumerate(obj["output"]):
            kind = item.get("type")
            if kind == "message":
                for part in item.get("content") or ():
                    text = part.get("text") if part.get("type") == "output_text" else part.get("refusal")
                    if isinstance(text, str) and text:
                        self._answer(text)
            elif kind == "reasoning":
                parts = [*(item.get("content") or ()), *(item.get("summary") or ())]
                texts = [p.get("text") for p in parts if isinstance(p, dict)]
                self._summary_only = not item.get("content")
                thought = "".join(t for t in texts if isinstance(t, str))
                if thought:
                    self._thought(thought, answered=bool(self._text))
            elif kind == "function_call":
                self._tool(index, item.get("call_id"), item.get("name"), item.get("arguments"))
        self._done.content_deltas = 1 if any(self._text) or any(self._reasoning) or self._tools else 0
        self._read_response(obj, "")
        self._done.terminal = obj.get("status") in ("completed", "incomplete", "failed")

    def _read_usage(self, usage: Any) -> None:
        """The terminal event's usage; reasoning that came only as a summary (or not at all) is
        reasoning the server kept to itself: no delta stands for those tokens."""
        if not isinstance(usage, dict):
            return
        out, inp = usage.get("output_tokens"), usage.get("input_tokens")
        if out is not None:
            self.usage_output = out
            details = usage.get("output_tokens_details")
            hidden = details.get("reasoning_tokens") if isinstance(details, dict) else None
            self.usage_reasoning = hidden
            self.usage_hidden = hidden if type(hidden) is int and self._summary_only else 0
        if inp is not None:
            self.usage_input = inp
            details = usage.get("input_tokens_details")
            self.usage_cached = details.get("cached_tokens") if isinstance(details, dict) else None


class OpenAIResponses:
    """The OpenAI Responses dialect (OpenAI, vLLM, SGLang, LiteLLM, Ollama's ``/v1/responses``)."""

    name = "responses"
    path = "/v1/responses"

    def build(self, item: Item, options: RequestOptions) -> HttpRequest:
        """System messages become ``instructions`` (joined by a blank line), the rest ``input``;
        ``max_output_tokens`` is the limit. The usage always comes with the terminal event, so
        ``include_usage`` sends nothing; ``ignore_eos`` is sent as for chat (vLLM's extension) when
        asked for. ``extra_body`` is merged last."""
        system = [m.get("content", "") for m in item.messages if m.get("role") == "system"]
        body: dict[str, Any] = {
            "model": options.model,
            "input": responses_input([m for m in item.messages if m.get("role") != "system"]),
            "stream": options.stream,
        }
        if system:
            body["instructions"] = "\n\n".join(str(s) for s in system)
        max_tokens = options.max_tokens if options.max_tokens is not None else item.max_tokens
        if max_tokens is not None:
            body["max_output_tokens"] = max_tokens
        if options.ignore_eos:
            body["ignore_eos"] = True
        if options.temperature is not None:
            body["temperature"] = options.temperature
        if item.meta.get("tools"):                      # the item's tools in the Responses API's flat shape
            body["tools"] = responses_tools(item.meta["tools"])
            if "tool_choice" in item.meta:
                body["tool_choice"] = responses_tool_choice(item.meta["tool_choice"])
        body.update(options.extra_body)
        return HttpRequest("POST", self.path, json=body, headers=dict(options.extra_headers),
                           stream=options.stream)

    def parser(self, streaming: bool = True,
               max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES) -> OpenAIResponsesParser:
        return OpenAIResponsesParser(streaming, max_event_bytes)
