"""A RAG endpoint in its own shape: a JSON request template and paths into its answer.

Unlike the model APIs, every RAG service has its own wire format, so this dialect is
configured (:class:`RagWire`) rather than fixed. The default fits fourfold's reference service
(``fourfold.targets.rag``) and many hand-written ones.

Request: ``template`` is JSON in which string values are filled in: ``"{question}"`` (the
item's prompt), ``"{stream}"`` (a boolean), ``"{model}"``, ``"{max_tokens}"`` (an integer,
the key is dropped when there is none) and ``"{id}"``; ``{question}`` inside a longer string
is replaced as text. The default is ``{"question": "{question}", "stream": "{stream}"}``.

Response: the parser reads a JSON body or an SSE stream, whichever arrives (it looks at the
first byte: ``{`` means a JSON body), and finds values by **path specs**, alternatives separated
by ``|`` (the first that matches wins):

- ``a.b.0.c``: a dotted path into the JSON body, and into every SSE event's JSON data;
  a number indexes a list, ``*`` maps over one (``documents.*.id``);
- ``sse:NAME`` / ``sse:NAME:a.b``: only SSE events named ``NAME`` (their whole data, or a path in it).

``answer`` paths give text (in a stream each match is one delta), ``ids`` a list of document ids
(or one comma-separated string), ``timings`` an object of stage -> milliseconds (``_ms`` suffixes
are dropped, ``_us`` values converted) that lands in ``record.server_timing`` next to what the
``Server-Timing`` header said, ``usage`` the output token count. A stream ends with
``data: [DONE]`` or an event named ``done``/``end``/``complete``; an ``error`` event or a JSON
``error`` field is the server's error.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from fourfold.client.dialects.base import HttpRequest, RequestOptions
from fourfold.client.dialects.jsonevents import JsonEventParser, finite_number, loads_event
from fourfold.client.sse import DEFAULT_MAX_EVENT_BYTES, SSEEvent
from fourfold.workloads.items import Item

__all__ = ["DEFAULT_TEMPLATE", "PathSpec", "RagDialect", "RagParser", "RagWire", "extract", "parse_paths",
           "render_template"]

DEFAULT_TEMPLATE = '{"question": "{question}", "stream": "{stream}"}'
TERMINAL_EVENTS = frozenset({"done", "end", "complete", "completed"})
_MISSING = object()


@dataclass(frozen=True)
class PathSpec:
    parts: tuple[str, ...]
    event: str | None = None          # None: the JSON body and every SSE event

    def applies_to(self, event: str | None) -> bool:
        """``event`` is None for a JSON body."""
        return self.event is None or self.event == event


def parse_paths(text: str) -> tuple[PathSpec, ...]:
    """``"answer|sse:final:text"`` -> specs (see module docstring); empty text -> no specs."""
    specs = []
    for alt in (a.strip() for a in text.split("|")):
        if not alt:
            continue
        if alt.startswith("sse:"):
            name, _, path = alt[4:].partition(":")
            if not name:
                raise ValueError(f"path spec {alt!r}: expected sse:EVENT or sse:EVENT:path")
            specs.append(PathSpec(tuple(p for p in path.split(".") if p), name))
        else:
            specs.append(PathSpec(tuple(p for p in alt.split(".") if p)))
    return tuple(specs)


def extract(obj: Any, parts: tuple[str, ...]) -> Any:
    """The value at ``parts`` in ``obj`` (``_MISSING`` when absent); ``*`` maps over a list."""
    for i, part in enumerate(parts):
        if part == "*":
            if not isinstance(obj, list):
                return _MISSING
            found = [extract(x, parts[i + 1:]) for x in obj]
            return [x for x in found if x is not _MISSING]
        if isinstance(obj, dict):
            obj = obj.get(part, _MISSING)
        elif isinstance(obj, list) and part.lstrip("-").isdigit() and -len(obj) <= int(part) < len(obj):
            obj = obj[int(part)]
        else:
            return _MISSING
        if obj is _MISSING:
            return _MISSING
    return obj


def render_template(template: Any, item: Item, options: RequestOptions) -> Any:
    """The request body: ``template`` (parsed JSON) with placeholders filled (module docstring)."""
    max_tokens = options.max_tokens if options.max_tokens is not None else item.max_tokens
    values = {"{question}": item.prompt, "{stream}": options.stream, "{model}": options.model,
              "{max_tokens}": max_tokens, "{id}": item.id}

    def fill(node: Any) -> Any:
        if isinstance(node, dict):
            out = {}
            for key, value in node.items():
                filled = fill(value)
                if filled is not _MISSING:
                    out[key] = filled
            return out
        if isinstance(node, list):
            return [x for x in (fill(v) for v in node) if x is not _MISSING]
        if isinstance(node, str):
            if node in values:
                return _MISSING if values[node] is None else values[node]
            return node.replace("{question}", item.prompt) if "{question}" in node else node
        return node

    return fill(template)


@dataclass(frozen=True)
class RagWire:
    """Where the request goes and where the answer's parts are (module docstring)."""

    path: str = "/v1/rag"
    template: str = DEFAULT_TEMPLATE
    answer: str = "answer|delta|delta.text|text|choices.0.delta.content|choices.0.message.content"
    ids: str = "retrieved_ids|document_ids|ids|documents.*.id|sources.*.id|contexts.*.id"
    timings: str = "timings|server_timing|sse:fourfold.timing"
    usage: str = "usage.completion_tokens|usage.output_tokens"

    def __post_init__(self) -> None:
        try:
            parsed = json.loads(self.template)
        except ValueError as exc:
            raise ValueError(f"--rag-request-template is not JSON ({exc}): {self.template[:120]!r}") from None
        if not isinstance(parsed, dict):
            raise ValueError("--rag-request-template must be a JSON object")
        if "{question}" not in self.template:
            raise ValueError("--rag-request-template has no {question} placeholder")
        for name in ("answer", "ids", "timings", "usage"):
            parse_paths(getattr(self, name))
        if not self.path.startswith("/"):
            raise ValueError(f"--rag-path {self.path!r} must start with /")


class RagParser(JsonEventParser):
    """One response of a RAG endpoint; JSON body or SSE, detected from the first byte."""

    def __init__(self, wire: RagWire, streaming: bool = True,
                 max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES) -> None:
        super().__init__(streaming, max_event_bytes)
        self.answer_specs = parse_paths(wire.answer)
        self.ids_specs = parse_paths(wire.ids)
        self.timings_specs = parse_paths(wire.timings)
        self.usage_specs = parse_paths(wire.usage)
        self.retrieved_ids: list[str] | None = None
        self._head = b""
        self._decided = False

    def feed(self, data: bytes) -> int:
        if not self._decided:
            head = (self._head + data).lstrip()
            if not head:
                self._head += data
                return 0
            self._decided = True
            self.streaming = not head.startswith(b"{")
            data, self._head = self._head + data, b""
        return super().feed(data)

    def finish(self):  # type: ignore[no-untyped-def]
        if not self._decided and self._head:
            self._decided = True
            super().feed(self._head)
        return super().finish()

    # ---- finding values ----
    def _first(self, specs: tuple[PathSpec, ...], obj: Any, event: str | None) -> Any:
        for spec in specs:
            if spec.applies_to(event):
                value = extract(obj, spec.parts)
                if value is not _MISSING and value is not None:
                    return value
        return _MISSING

    def _read(self, obj: Any, event: str | None) -> int:
        """Take ids, timings and usage from one JSON object; return 1 when it carried answer text."""
        got = 0
        text = self._first(self.answer_specs, obj, event)
        if isinstance(text, str) and text:
            self._answer(text)
            got = 1
        ids = self._first(self.ids_specs, obj, event)
        if isinstance(ids, str):
            ids = [s.strip() for s in ids.split(",") if s.strip()]
        if isinstance(ids, list) and all(isinstance(x, (str, int)) and not isinstance(x, bool) for x in ids):
            self.retrieved_ids = [str(x) for x in ids]
        for spec in self.timings_specs:
            if spec.applies_to(event):
                timings = extract(obj, spec.parts)
                if isinstance(timings, dict):
                    self._take_timings(timings)
        tokens = self._first(self.usage_specs, obj, event)
        if tokens is not _MISSING:
            self.usage_output = tokens      # checked in finish() (JsonEventParser._settle_usage)
        if isinstance(obj, dict) and isinstance(obj.get("finish_reason"), str) and obj["finish_reason"]:
            self._done.finish_reason = obj["finish_reason"]
        return got

    def _take_timings(self, timings: dict[str, Any]) -> None:
        for key, value in timings.items():
            number = finite_number(value)
            if not isinstance(key, str) or number is None:
                continue
            value = number
            name = key.lower()
            if name.endswith("_us"):
                name, value = name[:-3], value / 1000
            elif name.endswith("_ms"):
                name = name[:-3]
            self.server_timing[name] = float(value)

    # ---- JsonEventParser hooks ----
    def _on_event(self, event: SSEEvent) -> int:
        data = event.data.strip()
        name = event.event
        if data == "[DONE]" or name in TERMINAL_EVENTS:
            self._done.terminal = True
            if not data or data == "[DONE]":
                return 0
        if not data:
            return 0
        if not data.startswith(("{", "[")):
            if name == "error":
                self._server_error(data)
            else:
                self._malformed(data, "not JSON")
            return 0
        try:
            obj = loads_event(data)
        except ValueError as exc:
            self._malformed(data, f"not JSON ({exc})")
            return 0
        if name == "error" or (isinstance(obj, dict) and obj.get("error")):
            self._server_error(obj.get("error", obj) if isinstance(obj, dict) else obj)
            return 0
        return self._read(obj, name)

    def _on_body(self, obj: dict[str, Any]) -> None:
        if obj.get("error"):
            self._server_error(obj["error"])
            return
        self._read(obj, None)
        self._done.content_deltas = 1 if self._text else 0
        self._done.terminal = True

    def _finalize(self) -> None:
        done = self._done
        done.server_timing = dict(self.server_timing)
        if self.retrieved_ids is not None:
            done.extra = {"retrieved_ids": self.retrieved_ids}


class RagDialect:
    """A configured RAG endpoint (``RagDialect()`` speaks to fourfold's reference service)."""

    name = "rag"

    def __init__(self, wire: RagWire | None = None) -> None:
        self.wire = wire or RagWire()
        self.template = json.loads(self.wire.template)
        self.path = self.wire.path

    def build(self, item: Item, options: RequestOptions) -> HttpRequest:
        body = render_template(self.template, item, options)
        body.update(options.extra_body)
        return HttpRequest("POST", self.path, json=body, headers=dict(options.extra_headers),
                           stream=options.stream)

    def parser(self, streaming: bool = True, max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES) -> RagParser:
        return RagParser(self.wire, streaming, max_event_bytes)
