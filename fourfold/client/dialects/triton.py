"""Triton Inference Server / KServe v2: the generate extension (streamed) and tensor ``infer``.

Streaming goes to ``POST /v2/models/{model}/generate_stream`` with a flat JSON body (inputs and
parameters side by side: ``text_input``, ``max_tokens``, ``stream``, ``temperature``...). The
server answers ``data: {"model_name": ..., "text_output": "<delta>", ...}`` events (TensorRT-LLM
adds ``sequence_*``, logits and log-prob fields); each non-empty ``text_output`` is a content
delta, and an event with an ``error`` key is a server error. Triton sends no terminal event, so
``finish()`` calls a stream complete (``terminal=True``) when at least one event arrived and no
error happened; a connection that broke early is the transport's to mark as interrupted.

Non-streaming goes to ``POST /v2/models/{model}/infer`` in the KServe v2 tensor form and reads
the ``text_output`` tensor. Server-side timings (``inference_time_ms`` or any numeric ``*_ms`` /
``*_us`` key at the top level or under ``parameters``) land in ``parser.server_timing``.

Triton reports no token counts and no finish reason: ``output_tokens`` stays None (the record
falls back to counting chunks) and ``finish_reason`` stays "".
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from fourfold.client.dialects.base import HttpRequest, RequestOptions
from fourfold.client.dialects.jsonevents import JsonEventParser
from fourfold.client.sse import DEFAULT_MAX_EVENT_BYTES, SSEEvent
from fourfold.workloads.items import Item

__all__ = ["DEFAULT_MAX_TOKENS", "Triton", "TritonParser", "flatten_prompt"]

DEFAULT_MAX_TOKENS = 1024   # TensorRT-LLM's ensemble requires max_tokens; used when nothing sets it


def flatten_prompt(messages: tuple[dict[str, str], ...] | list[dict[str, str]]) -> str:
    """Chat messages as one ``text_input``: a lone message as is, else ``role: content`` lines."""
    if len(messages) == 1:
        return messages[0].get("content", "")
    return "\n".join(f"{m.get('role', 'user')}: {m.get('content', '')}" for m in messages)


class TritonParser(JsonEventParser):
    """Parser for a generate_stream SSE body (``streaming``) or an ``infer`` tensor response."""

    def __init__(self, streaming: bool = True, max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES) -> None:
        super().__init__(streaming, max_event_bytes)
        self.events = 0

    def _on_event(self, event: SSEEvent) -> int:
        obj = self._json(event.data)
        if obj is None:
            return 0
        self.events += 1
        if "error" in obj:
            self._server_error(obj["error"])
            return 0
        if "inference_time_ms" in obj or "parameters" in obj:
            self._read_server_timing(obj)
        text = obj.get("text_output")
        if text and isinstance(text, str):
            self._answer(text)
            return 1
        return 0

    def _on_body(self, obj: dict[str, Any]) -> None:
        if "error" in obj:
            self._server_error(obj["error"])
            return
        text = obj.get("text_output")   # the non-streamed generate extension answers flat
        if text is None:
            output = next((o for o in obj["outputs"] if o.get("name") == "text_output"), None)
            if output is None:
                raise KeyError("no text_output tensor in outputs")
            text = output["data"][0]
            while isinstance(text, list):   # shape [1, 1] may come back nested
                text = text[0]
        if not isinstance(text, str):
            raise TypeError(f"text_output is {type(text).__name__}, expected a string")
        self._answer(text)
        self._read_server_timing(obj)
        self._done.content_deltas = 1 if text else 0
        self._done.terminal = True

    def _finalize(self) -> None:
        if self.streaming:
            self._done.terminal = self.events > 0 and not self._done.error_class

    def _read_server_timing(self, obj: dict[str, Any]) -> None:
        for scope in (obj, obj.get("parameters")):
            if isinstance(scope, dict):
                self._read_timings(scope)


class Triton:
    """The Triton / KServe v2 dialect (TensorRT-LLM, vLLM and Python backends)."""

    name = "triton"

    def build(self, item: Item, options: RequestOptions) -> HttpRequest:
        """``options.model`` may carry a version (``"ensemble/versions/2"``): "/" is kept as is."""
        prompt = flatten_prompt(item.messages)
        max_tokens = options.max_tokens if options.max_tokens is not None else item.max_tokens
        if max_tokens is None:
            max_tokens = DEFAULT_MAX_TOKENS
        model = quote(options.model, safe="/")
        if options.stream:
            body: dict[str, Any] = {"text_input": prompt, "max_tokens": max_tokens, "stream": True}
            if options.temperature is not None:
                body["temperature"] = options.temperature
            if options.ignore_eos:
                body["ignore_eos"] = True
            path = f"/v2/models/{model}/generate_stream"
        else:
            inputs = [
                {"name": "text_input", "datatype": "BYTES", "shape": [1], "data": [prompt]},
                {"name": "max_tokens", "datatype": "INT32", "shape": [1], "data": [max_tokens]},
            ]
            if options.temperature is not None:
                inputs.append({"name": "temperature", "datatype": "FP32", "shape": [1],
                               "data": [options.temperature]})
            body = {"inputs": inputs}
            path = f"/v2/models/{model}/infer"
        body.update(options.extra_body)
        return HttpRequest("POST", path, json=body, headers=dict(options.extra_headers),
                           stream=options.stream)

    def parser(self, streaming: bool = True, max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES) -> TritonParser:
        return TritonParser(streaming, max_event_bytes)
