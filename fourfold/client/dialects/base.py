"""The dialect contract: a wire format as a parser object without sockets.

A dialect turns an :class:`~fourfold.workloads.items.Item` into an :class:`HttpRequest` (``build``) and
hands out a fresh :class:`StreamParser` per response. The parser is fed the raw bytes exactly as
they came off the socket (``feed``), in any split, and returns how many *content deltas* (pieces
of output: answer text, reasoning) those bytes completed, so the caller can attribute token arrival to
the receive timestamp it took *before* parsing. ``finish()`` returns the :class:`Completion`.

Bad input from the server is data: a parser never raises on malformed bytes; it records the
problem in ``Completion.error_class`` / ``error_detail`` and keeps going where it can.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from fourfold.workloads.items import Item


@dataclass(frozen=True)
class RequestOptions:
    """Per-run knobs that shape the request body (not the transport)."""

    model: str = "fourfold-sim"
    stream: bool = True
    max_tokens: int | None = None      # overrides the item's max_tokens when set
    temperature: float | None = None
    ignore_eos: bool = False           # vLLM/simulator extension: always produce max_tokens
    include_usage: bool = True         # OpenAI stream_options.include_usage
    extra_body: dict[str, Any] = field(default_factory=dict)
    extra_headers: dict[str, str] = field(default_factory=dict)


@dataclass
class HttpRequest:
    method: str
    path: str
    json: dict[str, Any] | None = None
    headers: dict[str, str] = field(default_factory=dict)
    stream: bool = True


def with_base_path(path: str, base_path: str) -> str:
    """``path`` with its first segment replaced by ``base_path`` (``--base-path``): ``/v1/chat/completions``
    and ``/openai/v1`` give ``/openai/v1/chat/completions``; unchanged when ``base_path`` is empty."""
    if not base_path:
        return path
    first, _, rest = path.lstrip("/").partition("/")
    return f"{base_path.rstrip('/')}/{rest}" if rest else base_path.rstrip("/") or "/"


@dataclass
class Completion:
    """What a parser learned from one response body."""

    text: str = ""
    reasoning: str = ""
    content_deltas: int = 0            # deltas of output of any kind: answer text, reasoning (tool calls)
    first_answer_delta: int | None = None   # index among them of the first that carried answer output
    reasoning_deltas: int = 0          # deltas that carried reasoning
    output_tokens: int | None = None   # from the server's usage, when it reported one
    reasoning_tokens: int | None = None     # from the usage's reasoning count, when reported and plausible
    input_tokens: int | None = None
    cached_tokens: int | None = None   # prompt tokens the server took from its prefix cache (usage)
    tool_calls: list[dict[str, str]] = field(default_factory=list)   # {"id", "name", "arguments"} each
    finish_reason: str = ""
    terminal: bool = False             # the dialect's end-of-stream event was seen
    error_class: str = ""              # "" or one of measure.record.ERROR_CLASSES
    error_detail: str = ""
    server_timing: dict[str, float] = field(default_factory=dict)   # stage -> ms found in the body
    extra: dict[str, Any] = field(default_factory=dict)              # dialect facts for record.extra


class StreamParser(Protocol):
    def feed(self, data: bytes) -> int:
        """Consume raw bytes; return the number of content deltas they completed."""

    def finish(self) -> Completion:
        """End of body: flush what is buffered and return the completion."""


class Dialect(Protocol):
    name: str

    def build(self, item: Item, options: RequestOptions) -> HttpRequest: ...

    def parser(self, streaming: bool) -> StreamParser: ...
