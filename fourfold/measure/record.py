"""RequestRecord: everything fourfold keeps about one LLM request.

A record is the unit every sink consumes: the histograms (measure.stats), the Locust request
event, and the run log (``records.jsonl``). It is a plain dataclass so it serialises to one JSON
line and reads back without Locust, sockets or the model.

Times are milliseconds relative to the moment the request was handed to the socket
(``t_send``), except ``started_at`` (Unix seconds, wall clock) which places the record in the
run. ``chunk_offsets_ms`` holds the receive time of every *content* chunk (a network read that
carried at least one delta of output: answer text or reasoning), so ITL, stalls and the stream
waveform can be recomputed later; the first ``reasoning_chunks`` of them carried reasoning only, and
``ttfo_ms`` is the one after them (the first answer token).
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import Any

from fourfold.measure.rhythm import gaps_ms

SCHEMA_VERSION = 1
TEXT_CAP_CHARS = 16_384

# Every request ends in exactly one of these classes ("ok" when nothing went wrong).
ERROR_CLASSES = (
    "ok",
    "connect_error",      # could not open the connection (refused, DNS, TLS handshake)
    "ttft_timeout",       # response headers or first token did not arrive in time
    "read_timeout",       # the stream went silent longer than the read timeout after it started
    "http_4xx",           # non-200 status in the 4xx range other than 429
    "http_5xx",           # 5xx status
    "redirect",           # 3xx: fourfold follows no redirect (the detail names the Location; --host is the
                          # final URL)
    "rate_limited",       # 429
    "context_length",     # 400 whose body says the context length was exceeded
    "malformed_stream",   # bytes that do not parse as HTTP/1.1 or as the dialect's wire format
    "interrupted",        # the stream ended (or broke) before its terminal event
    "truncated",          # the server stopped at max_tokens / length finish
    "too_large",          # a response (or a single event) larger than the configured limit
    "client_error",       # anything else raised inside the client (a bug in fourfold, counted not crashed)
    "cancelled",          # the load generator stopped (end of run) before the response ended
)
FAILURE_CLASSES = frozenset(ERROR_CLASSES) - {"ok", "truncated", "cancelled"}

# record.extra keys for what a target got wrong beside the class (counted in summary.json, docs/errors.md)
NO_TERMINAL_EVENT = "no_terminal_event"       # complete by a finish reason and a clean end, no [DONE] /
                                              # message_stop
USAGE_IMPLAUSIBLE = "usage_implausible"       # the output count the server reported (not believed: chunks
                                              # counted)
INPUT_USAGE_IMPLAUSIBLE = "input_usage_implausible"   # the prompt count it reported (not believed:
                                                      # input_tokens None)
UNSOLICITED = "unsolicited_bytes"             # bytes after this response's end on its connection
                                              # (malformed_stream)
UNSOLICITED_BEFORE = "unsolicited_before"     # bytes an idle pooled connection held before this request
                                              # (dropped)
# receive stamps that read before the request was sent (the kernel's clock and ours disagreeing, not
# the target): raised to the send, so no latency is negative (client.stream)
STAMPS_BEFORE_SEND = "stamps_before_send"
INPUT_TOKENS_SOURCE = "input_tokens_source"   # with --tokenizer: "usage" (the server's count) or "tokenizer"
TOOL_CALLS = "tool_calls"                     # the tool calls an answer made: [{"id", "name", "arguments"}]
TOOL_CALLS_NOT_JSON = "tool_calls_not_json"   # of them, those whose arguments are no JSON object
TOOL_CALL_COUNT = "tool_call_count"           # how many calls (a number: the report reads it from extra)
# of them, those that do not fit the tools the request offered (unknown name, no JSON object, schema
# broken: workloads.tools.call_problem); only when tools were offered, with the first problem
TOOL_CALLS_INVALID, TOOL_CALL_PROBLEM = "tool_calls_invalid", "tool_call_problem"
MAX_TOOL_CALLS = 64                           # calls kept per record (all are counted)


@dataclass
class RequestRecord:
    """One LLM request, as measured by the client."""

    level: str = ""
    scenario: str = ""
    dialect: str = ""
    endpoint: str = ""
    item_id: str = ""
    request_id: str = ""
    user_id: int = -1
    variant: str = ""
    pair_id: str = ""
    tenant: str = ""                 # --mix: the alias of the entry it went out as (never a key)
    warmup: bool = False
    started_at: float = 0.0          # Unix seconds (wall clock) when the request was sent
    sent_mono_s: float = 0.0         # the same instant on CLOCK_MONOTONIC (aligns with same-host servers)
    status: int = 0                  # HTTP status; 0 when no response arrived
    error_class: str = "ok"
    error_detail: str = ""
    ttfb_ms: float | None = None     # send -> response headers
    ttft_ms: float | None = None     # send -> first chunk carrying output (answer text or reasoning)
    ttfo_ms: float | None = None     # send -> first chunk carrying answer text, not reasoning (TTFO)
    e2e_ms: float | None = None      # send -> last content chunk or terminal event
    queue_ms: float = 0.0            # open loop: intended arrival -> send (client queueing)
    chunk_offsets_ms: list[float] = field(default_factory=list)
    output_tokens: int = 0
    output_tokens_source: str = "chunks"   # "usage" (the server's), "tokenizer" (--tokenizer), else "chunks"
    input_tokens: int | None = None
    cached_tokens: int | None = None   # prompt tokens the server took from its prefix cache (its usage)
    reasoning_tokens: int = 0        # of output_tokens, those that were reasoning
    reasoning_tokens_source: str = ""   # "usage", "tokenizer", "chunks", "estimate"; "" when none came
    reasoning_chunks: int = 0        # content chunks before the first answer chunk: reasoning only
    content_chunks: int = 0
    multi_token_chunks: int = 0      # content chunks that carried more than one token (measure.tokentiming)
    client_output_tokens: int | None = None   # the client's own count beside the server's usage (tokentiming)
    terminal: bool = False           # saw the dialect's terminal event ([DONE], message_stop, ...)
    finish_reason: str = ""
    text: str = ""
    text_truncated: bool = False
    response_bytes: int = 0
    conn_reused: bool | None = None
    conn_reconnected: bool = False   # the pooled connection had been closed (idle): a new one was opened
    http_version: str = ""
    connect_ms: float | None = None
    server_timing: dict[str, float] = field(default_factory=dict)
    plan: dict[str, Any] = field(default_factory=dict)   # the target's stated plan (simulator header)
    extra: dict[str, Any] = field(default_factory=dict)  # level-specific facts (doc ids, turn, ...)
    schema: int = SCHEMA_VERSION

    # ---- derived values (pure) ----
    @property
    def ok(self) -> bool:
        return self.error_class not in FAILURE_CLASSES

    @property
    def itl_ms(self) -> list[float]:
        """Gaps between consecutive content chunks (vLLM's ITL, AIPerf's inter-chunk latency).
        Every other derived number (TPOT, interrupted, goodput, ...) is in :mod:`fourfold.measure.metrics`."""
        return gaps_ms(self.chunk_offsets_ms)

    def set_text(self, text: str, cap: int = TEXT_CAP_CHARS) -> None:
        if len(text) > cap:
            self.text, self.text_truncated = text[:cap], True
        else:
            self.text, self.text_truncated = text, False

    def to_dict(self) -> dict[str, Any]:
        """A shallow dict of the fields (``dataclasses.asdict`` deep-copies every float of the
        chunk offsets: 2.8 ms for a 200-token record, on the hot path)."""
        return {name: getattr(self, name) for name in _FIELD_NAMES}

    def to_json(self) -> str:
        """One JSON line, always encodable as UTF-8 (see :func:`mend_surrogates`)."""
        line = json.dumps(self.to_dict(), ensure_ascii=False, separators=(",", ":"), allow_nan=False,
                          default=str)
        return line if line.isascii() else mend_surrogates(line)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RequestRecord:
        return cls(**{k: v for k, v in data.items() if k in _FIELD_SET})


def mend_surrogates(text: str) -> str:
    """``text`` as UTF-8 can hold it. A server that JSON-escapes an emoji as ``"\\ud83d"`` in one
    event and ``"\\ude00"`` in the next leaves two lone surrogates in the joined answer, which no
    UTF-8 file accepts: a pair becomes its character again, a surrogate without its partner U+FFFD."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


_FIELD_NAMES = tuple(f.name for f in dataclasses.fields(RequestRecord))
_FIELD_SET = frozenset(_FIELD_NAMES)
