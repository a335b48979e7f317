"""What a real target sends, classified without sockets (fourfold#20): a finish reason and a clean
end without a terminal event, implausible usage, keep-alive pieces that are not content, redirects,
and the summary's counts of each."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from fourfold.client.dialects import get_dialect
from fourfold.client.dialects.rag import RagDialect, RagWire
from fourfold.client.h1body import is_idle_piece, read_pieces
from fourfold.client.stream import classify_status
from fourfold.measure.console import format_summary
from fourfold.measure.record import RequestRecord
from fourfold.measure.stats import LLMStats


def parse(dialect: Any, body: bytes, streaming: bool = True) -> Any:
    parser = (get_dialect(dialect) if isinstance(dialect, str) else dialect).parser(streaming)
    for i in range(0, len(body), 7):        # torn reads: 7 bytes each
        parser.feed(body[i:i + 7])
    return parser.finish()


def sse(*objs: Any, event: str | None = None) -> bytes:
    head = f"event: {event}\n".encode() if event else b""
    return b"".join(head + b"data: " + (o if isinstance(o, bytes) else json.dumps(o).encode()) + b"\n\n"
                    for o in objs)


def openai(content: str | None = None, finish: str | None = None, usage: Any = None) -> dict[str, Any]:
    obj: dict[str, Any] = {"choices": [{"index": 0, "delta": {} if content is None else {"content": content},
                                        "finish_reason": finish}]}
    if usage is not None:
        obj["usage"] = usage
    return obj


def anthropic(text_parts: list[str], stop: str | None, output_tokens: Any = 2) -> bytes:
    body = sse({"type": "message_start", "message": {"usage": {"input_tokens": 5, "output_tokens": 1}}},
               event="message_start")
    for text in text_parts:
        body += sse({"type": "content_block_delta", "index": 0,
                     "delta": {"type": "text_delta", "text": text}},
                    event="content_block_delta")
    delta: dict[str, Any] = {"type": "message_delta", "delta": {"stop_reason": stop} if stop else {},
                             "usage": {"output_tokens": output_tokens}}
    return body + sse(delta, event="message_delta")


# ---- a finish reason, then a clean end: complete without a terminal event -------------------------

COMPLETE_WITHOUT_TERMINAL = [
    ("openai", sse(openai("a"), openai("b"), openai(None, "length", {"completion_tokens": 2}))),
    ("openai", sse(openai("a"), openai("b", "stop"))),
    ("anthropic", anthropic(["a", "b"], "end_turn")),
    ("rag", sse({"delta": "a"}, {"delta": "b", "finish_reason": "stop"})),
]


@pytest.mark.parametrize("dialect, body", COMPLETE_WITHOUT_TERMINAL)
def test_a_finish_reason_and_a_clean_end_is_complete(dialect, body):
    done = parse(dialect, body)
    assert (done.text, done.terminal, done.error_class) == ("ab", True, "")
    assert done.extra["no_terminal_event"] is True


@pytest.mark.parametrize("dialect, body", COMPLETE_WITHOUT_TERMINAL)
def test_a_torn_last_line_is_not_a_clean_end(dialect, body):
    done = parse(dialect, body + b'data: {"choices": [{"delta": {"content": "c')
    assert not done.terminal and "no_terminal_event" not in done.extra


@pytest.mark.parametrize("dialect, body", [
    ("openai", sse(openai("a"), openai("b"))),
    ("anthropic", anthropic(["a", "b"], None)),
    ("rag", sse({"delta": "a"}, {"delta": "b"})),
])
def test_a_clean_end_without_a_finish_reason_is_not_complete(dialect, body):
    done = parse(dialect, body)
    assert done.text == "ab" and not done.terminal and "no_terminal_event" not in done.extra


def test_a_terminal_event_needs_no_flag_and_triton_never_had_one():
    done = parse("openai", sse(openai("a", "stop"), b"[DONE]"))
    assert done.terminal and done.extra == {}
    done = parse("triton", sse({"text_output": "a"}, {"text_output": "b"}))
    assert done.terminal and done.extra == {}


# ---- implausible usage ----------------------------------------------------------------------------

IMPLAUSIBLE = [(-5, -5), (1e29, "1e+29"), (10**29, str(10**29)), ("12", "12"), (2.5, "2.5"), (True, "True"),
               (float("nan"), "nan"), ([3], "[3]"), (85, 85)]


@pytest.mark.parametrize("value, reported", IMPLAUSIBLE)
def test_implausible_openai_usage_is_flagged_and_not_believed(value, reported):
    body = sse(openai("Hello"), openai(" world", "stop"))[:-2] + b"\n\n"
    usage = json.dumps({"completion_tokens": value, "prompt_tokens": 3}).encode()   # NaN as JSON's NaN
    done = parse("openai", body + b'data: {"choices": [], "usage": ' + usage + b"}\n\ndata: [DONE]\n\n")
    assert done.output_tokens is None and done.extra["usage_implausible"] == reported
    assert done.content_deltas == 2 and done.input_tokens == 3
    json.dumps(done.extra, allow_nan=False)          # the record can still be written


@pytest.mark.parametrize("dialect, body", [
    ("anthropic", anthropic(["a", "b"], "end_turn", output_tokens=-1)),
    ("anthropic", anthropic(["a", "b"], "end_turn", output_tokens=10**12)),
    ("rag", sse({"delta": "a"}, {"delta": "b", "usage": {"completion_tokens": -1}}, b"[DONE]")),
])
def test_implausible_usage_in_every_dialect(dialect, body):
    done = parse(dialect, body)
    assert done.output_tokens is None and "usage_implausible" in done.extra


@pytest.mark.parametrize("usage, tokens", [
    ({"completion_tokens": 84}, 84),               # 10 x 2 deltas or 11 bytes of text, plus 64
    ({"completion_tokens": 2.0}, 2),
    # hidden reasoning
    ({"completion_tokens": 900, "completion_tokens_details": {"reasoning_tokens": 850}}, 900),
])
def test_plausible_usage_is_believed(usage, tokens):
    done = parse("openai", sse(openai("Hello"), openai(" world", "stop", usage), b"[DONE]"))
    assert done.output_tokens == tokens and "usage_implausible" not in done.extra


def test_a_non_streamed_body_may_count_one_token_per_byte_of_its_text():
    body = json.dumps({"choices": [{"message": {"content": "x" * 400}, "finish_reason": "stop"}],
                       "usage": {"completion_tokens": 400, "prompt_tokens": -3}}).encode()
    done = parse("openai", body, streaming=False)
    assert done.output_tokens == 400 and done.content_deltas == 1
    assert done.input_tokens is None and done.extra == {"input_usage_implausible": -3}


def test_non_finite_server_timings_are_dropped():
    done = parse(RagDialect(RagWire()),
                 b'{"answer": "a", "timings": {"retrieve_ms": NaN, "llm_ms": 1e400, "x_ms": 2}}',
                 streaming=False)
    assert done.server_timing == {"x": 2.0}


# ---- keep-alive pieces are not content --------------------------------------------------------------

@pytest.mark.parametrize("piece, idle", [
    (b": ping\n\n", True), (b"\n", True), (b"\r\n\r\n", True), (b": keep-alive", True), (b":\r:\r", True),
    (b'event: ping\ndata: {"type": "ping"}\n\n', True), (b"event: ping\r\n", True),
    (b'data: {"choices":[{"delta":{"content":"shopping"}}]}\n\n', False), (b"data: [DONE]\n\n", False),
    (b"event: content_block_delta\n", False), (b"ping\n\n", False), (b"event: pi", False),
    (b": ping\n\ndata: {}\n\n", False), (b'{"id": 1}', False),
])
def test_is_idle_piece(piece, idle):
    assert (is_idle_piece(piece) is not None) is idle


def test_a_body_of_keep_alive_pieces_times_out_by_its_content():
    """httpx's transports (HTTP/2) read through read_pieces: pings more than the timeout after the
    last content end the read, as RawH1Transport's watchdog does."""
    ms = 1_000_000
    pieces = [b": ping\n\n"] * 3 + [b'data: {"x": 1}\n\n'] + [b": ping\n\n"] * 3
    stamps: list[int] = []

    def body():  # noqa: ANN202
        for i, piece in enumerate(pieces):
            stamps.append(i * 400 * ms)      # one piece every 0.4 s
            yield piece
    times: list[int] = []
    got: list[bytes] = []
    with pytest.raises(httpx.ReadTimeout, match="no content for 1 s"):
        read_pieces(body(), times, got, 1 << 30, None, stamps, content_timeout_s=1.0, since_ns=0)
    assert len(got) == 7          # the content at 1.2 s reset the clock; the ping at 2.4 s was 1.2 s after it
    assert read_pieces(iter(pieces), [], [], 1 << 30, None, [0], content_timeout_s=1.0, since_ns=0) == ""


# ---- redirects and the summary --------------------------------------------------------------------

@pytest.mark.parametrize("status, expected", [(301, "redirect"), (302, "redirect"), (307, "redirect"),
                                              (308, "redirect"), (304, "redirect"), (404, "http_4xx"),
                                              (429, "rate_limited"), (503, "http_5xx")])
def test_classify_status(status, expected):
    assert classify_status(status, "") == expected


def test_the_summary_and_the_console_count_what_the_target_got_wrong():
    stats = LLMStats()
    base = dict(level="L1", started_at=1000.0, ttfb_ms=1.0, ttft_ms=2.0, e2e_ms=3.0, status=200,
                terminal=True)
    for extra in ({"usage_implausible": -5}, {"input_usage_implausible": "x"}, {"no_terminal_event": True},
                  {"unsolicited_bytes": 120}, {"unsolicited_before": 99}, {}):
        stats.add_record(RequestRecord(**base, extra=dict(extra)))
    total = stats.summary()["total"]
    assert (total["usage_implausible"], total["no_terminal_event"],
            total["unsolicited_responses"]) == (2, 1, 2)
    assert total["interrupted"] == 0
    text = format_summary(stats.summary())
    assert "target: usage_implausible=2, no_terminal_event=1, unsolicited_responses=2" in text.splitlines()
    assert "target:" not in format_summary(LLMStats().summary())
