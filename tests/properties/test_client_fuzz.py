"""The whole client path under hypothesis: chunked framing and SSE in any split give the same
record; random bytes end in a classified error, never an exception and never ``client_error``
(which would mean a bug in fourfold). The socket-level fuzz is in tests/integration/test_wire_fuzz.py.
"""

from __future__ import annotations

from collections.abc import Iterator
from itertools import pairwise
from pathlib import Path

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fourfold.client.dialects import RequestOptions, get_dialect
from fourfold.client.h1wire import MalformedResponse, chunk_size
from fourfold.client.stream import StreamLimits, send
from fourfold.client.transport import ChunkedDecoder
from fourfold.measure.record import ERROR_CLASSES, TEXT_CAP_CHARS, RequestRecord
from fourfold.workloads.items import Item
from fourfold.workloads.tokenizer import Tokenizer

RECORDED = Path(__file__).resolve().parents[1] / "recorded"
STREAMS = {"vllm_chat": "openai", "vllm_chat_reasoning": "openai", "llamacpp_chat": "openai",
           "tgi_chat": "openai", "llamacpp_captured_stop": "openai", "llamacpp_captured_length": "openai",
           "anthropic_messages": "anthropic", "anthropic_messages_crlf": "anthropic",
           "anthropic_thinking_tools": "anthropic", "triton_generate_stream": "triton",
           "deepseek_reasoner": "openai", "sglang_reasoning": "openai", "openai_tool_calls": "openai",
           "openai_responses_reasoning": "responses", "openai_responses_tool_call": "responses",
           "vllm_responses_incomplete": "responses", "llamacpp_captured_tool_call": "openai"}
ITEM = Item(id="q", messages=({"role": "user", "content": "hi"},))
SSE = "text/event-stream; charset=utf-8"


def split_at(data: bytes, cuts: list[int]) -> list[bytes]:
    points = [0, *sorted({c for c in cuts if 0 < c < len(data)}), len(data)]
    return [data[a:b] for a, b in pairwise(points)]


def chunked(payloads: list[bytes], extension: bool = False) -> bytes:
    ext = b";name=value" if extension else b""
    return b"".join(b"%x%s\r\n%s\r\n" % (len(p), ext, p) for p in payloads if p) + b"0\r\n\r\n"


# ---- ChunkedDecoder ----------------------------------------------------------------------------
@settings(max_examples=120, deadline=None)
@given(payloads=st.lists(st.binary(min_size=1, max_size=300), max_size=8), extension=st.booleans(),
       trailer=st.booleans(), data=st.data())
def test_chunked_decoder_any_split_gives_the_payload(payloads: list[bytes], extension: bool, trailer: bool,
                                                     data: st.DataObject) -> None:
    body = chunked(payloads, extension)
    if trailer:
        body = body[:-2] + b"x-trailer: 1\r\n\r\n"
    cuts = data.draw(st.lists(st.integers(0, len(body)), max_size=12))
    decoder = ChunkedDecoder()
    out = b"".join(decoder.decode(piece) for piece in split_at(body, cuts))
    assert out == b"".join(payloads) and decoder.done


@pytest.mark.parametrize("line", [b"-6", b"-1", b"+5", b"0x5", b" 5", b"5_0", b"", b"g", b"f" * 16, b"\xff"])
def test_a_chunk_size_line_is_plain_hex_or_malformed(line: bytes) -> None:
    with pytest.raises(MalformedResponse, match="bad chunk size"):
        chunk_size(line)
    whole = ChunkedDecoder()           # the one-whole-chunk fast path refuses it too
    with pytest.raises(MalformedResponse):
        whole.decode(line + b"\r\nhello\r\n")


def test_chunk_sizes_with_extensions_and_whitespace_before_them():
    assert [chunk_size(line) for line in (b"1a", b"1A", b"0", b"5 ;name=v", b"5;a;b", b"f" * 15)] == \
        [26, 26, 0, 5, 5, 2**60 - 1]


def test_the_twelve_bytes_that_hung_the_decoder_are_refused_after_the_payload_before_them():
    decoder = ChunkedDecoder()
    assert decoder.decode(b"1\r\nX\r\n-6\r\nZ") == b"X"          # the good chunk of the same read is kept
    assert isinstance(decoder.error, MalformedResponse) and "b'-6'" in str(decoder.error)
    with pytest.raises(MalformedResponse, match="b'-6'"):           # and the body goes no further
        decoder.decode(b"ZZZZZZ\r\n0\r\n\r\n")
    alone = ChunkedDecoder()
    with pytest.raises(MalformedResponse, match="b'-6'"):           # nothing before it: raised at once
        alone.decode(b"-6\r\nZ")
    assert alone.error is None


@settings(max_examples=150, deadline=None)
@given(st.lists(st.one_of(st.binary(max_size=40),
                          st.sampled_from([b"\r\n", b"0\r\n", b"5\r\nhello\r\n", b"ffffffff\r\n",
                                           b";", b"-1\r\n", b"-6\r\n", b"0x5\r\n", b"\r"])), max_size=10))
def test_chunked_decoder_random_bytes_raise_only_remote_protocol_error(pieces: list[bytes]) -> None:
    decoder = ChunkedDecoder()
    try:
        for piece in pieces:
            decoder.decode(piece)
    except httpx.RemoteProtocolError:
        pass


# ---- send() through httpx.MockTransport ----------------------------------------------------------
def send_body(dialect: str, pieces: list[bytes], content_type: str = SSE, status: int = 200,
              stream: bool = True, limits: StreamLimits | None = None) -> RequestRecord:
    def handler(request: httpx.Request) -> httpx.Response:
        def body() -> Iterator[bytes]:
            yield from pieces
        return httpx.Response(status, headers={"content-type": content_type}, content=body())

    client = httpx.Client(base_url="http://test", transport=httpx.MockTransport(handler))
    d = get_dialect(dialect)
    return send(client, d, d.build(ITEM, RequestOptions(stream=stream)), RequestRecord(),
                limits or StreamLimits())


def outcome(record: RequestRecord) -> tuple:
    return (record.error_class, record.text, record.output_tokens, record.terminal, record.finish_reason,
            record.response_bytes, record.reasoning_tokens, record.reasoning_tokens_source,
            record.cached_tokens)


@pytest.fixture(scope="module")
def whole() -> dict[str, tuple]:
    return {name: outcome(send_body(dialect, [(RECORDED / f"{name}.sse").read_bytes()]))
            for name, dialect in STREAMS.items()}


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(name=st.sampled_from(sorted(STREAMS)), data=st.data())
def test_any_split_of_a_recorded_stream_gives_the_same_record(whole: dict[str, tuple], name: str,
                                                              data: st.DataObject) -> None:
    raw = (RECORDED / f"{name}.sse").read_bytes()
    pieces = split_at(raw, data.draw(st.lists(st.integers(0, len(raw)), max_size=20)))
    record = send_body(STREAMS[name], pieces)
    assert outcome(record) == whole[name]
    assert record.error_class in ("ok", "truncated")


@pytest.mark.parametrize(("name", "reasoning", "tokens", "source", "cached"), [
    ("vllm_chat_reasoning", 10, 10, "chunks", None),     # no reasoning count in its usage: counted
    ("deepseek_reasoner", 10, 10, "usage", 16),
    ("sglang_reasoning", 6, 6, "chunks", 24),
    ("anthropic_thinking_tools", 3, 3, "chunks", 0),      # message_start's cache_read_input_tokens
    ("openai_responses_reasoning", 6, 192, "usage", 1152),   # a summary of 192 tokens never sent
    ("vllm_responses_incomplete", 10, 10, "usage", 16),
    ("vllm_chat", 0, 0, "", None),
])
def test_the_first_answer_token_is_timed_apart_from_the_reasoning(name: str, reasoning: int, tokens: int,
                                                                  source: str, cached: int | None) -> None:
    """One event a read: TTFT is the first reasoning chunk's, TTFO the first answer chunk's; a read
    holding the last reasoning event and the first answer event is the answer's first chunk."""
    raw = (RECORDED / f"{name}.sse").read_bytes()
    events = [e + b"\n\n" for e in raw.split(b"\n\n") if e.strip()]
    record = send_body(STREAMS[name], events)
    assert record.error_class in ("ok", "truncated"), record.error_detail
    assert (record.reasoning_chunks, record.reasoning_tokens, record.reasoning_tokens_source,
            record.cached_tokens) == (reasoning, tokens, source, cached)
    assert record.ttft_ms == record.chunk_offsets_ms[0]
    assert record.ttfo_ms == record.chunk_offsets_ms[reasoning]
    if reasoning:
        answer = next(i for i, e in enumerate(events) if b'"content":"' in e and b'"content":""' not in e
                      or b"text_delta" in e or b"output_text.delta" in e)
        last = max(i for i, e in enumerate(events[:answer])
                   if b'"reasoning_content":"' in e or b"thinking_delta" in e or b"reasoning_text.delta" in e
                   or b"summary_text.delta" in e)
        merged = [*events[:last], b"".join(events[last:answer + 1]), *events[answer + 1:]]
        again = send_body(STREAMS[name], merged)
        assert again.reasoning_chunks == reasoning - 1
        assert again.ttfo_ms == again.chunk_offsets_ms[reasoning - 1]


def test_tool_calls_are_answer_output_kept_on_the_record_and_checked_for_json() -> None:
    """A tool-call stream has no text: its first tool-call delta is the first token (TTFT = TTFO),
    finish_reason tool_calls is a complete answer, the call is kept; arguments cut in the middle
    are counted as no JSON object, not a crash."""
    raw = (RECORDED / "openai_tool_calls.sse").read_bytes()
    events = [e + b"\n\n" for e in raw.split(b"\n\n") if e.strip()]
    record = send_body("openai", events)
    assert (record.error_class, record.finish_reason, record.text) == ("ok", "tool_calls", "")
    assert record.ttft_ms == record.ttfo_ms == record.chunk_offsets_ms[0] and record.content_chunks == 13
    assert record.extra["tool_calls"] == [{"id": "call_DdmO9pD3xa9XTPNJ32zg2hcA", "name": "get_weather",
                                          "arguments": '{"location":"Paris, France","unit":"celsius"}'}]
    assert record.extra["tool_calls_not_json"] == 0
    last = max(i for i, e in enumerate(events) if b'"arguments":' in e)
    again = send_body("openai", events[:last] + events[last + 1:])      # the closing '"}' lost
    assert again.error_class == "ok" and again.extra["tool_calls_not_json"] == 1
    assert again.extra["tool_calls"][0]["arguments"] == '{"location":"Paris, France","unit":"celsius'


GARBAGE = st.lists(st.one_of(st.binary(max_size=50), st.sampled_from([
    b"data: ", b"data: [DONE]\n\n", b"\n\n", b"\r\n", b"{", b'{"choices":[{"delta":{"content":"x"}}]}',
    b"event: message_stop\n", b'data: {"type":"message_stop"}\n\n', b'{"text_output": 3}', b"\xff\xfe",
    b'data: {"error": {"message": "context length exceeded"}}\n\n', b"event: error\n"])), max_size=12)


@settings(max_examples=150, deadline=None)
@given(dialect=st.sampled_from(["openai", "anthropic", "triton"]), stream=st.booleans(), pieces=GARBAGE,
       status=st.sampled_from([200, 200, 200, 206, 400, 413, 429, 500, 503]),
       content_type=st.sampled_from([SSE, "application/json", "text/html", ""]))
def test_random_bodies_end_in_a_classified_error_never_a_crash(dialect: str, stream: bool,
                                                               pieces: list[bytes], status: int,
                                                               content_type: str) -> None:
    record = send_body(dialect, pieces, content_type, status, stream, StreamLimits(max_response_bytes=300))
    assert record.error_class in ERROR_CLASSES and record.error_class != "client_error", record.error_detail
    assert (record.error_class == "ok") == (record.ok and record.error_class != "truncated")


# ---- classes of particular bodies ----------------------------------------------------------------
OK_STREAM = (b'data: {"choices":[{"delta":{"content":"Hello"}}]}\n\n'
             b'data: {"choices":[{"delta":{},"finish_reason":"stop"}]}\n\ndata: [DONE]\n\n')


@pytest.mark.parametrize(("content_type", "body", "expected"), [
    (SSE, OK_STREAM, "ok"),
    ("application/json", OK_STREAM, "ok"),         # mislabelled, but a complete stream: counted as what it is
    ("text/html; charset=utf-8", b"<html><body>502 Bad Gateway</body></html>", "malformed_stream"),
    ("application/json", b'{"error": "upstream"}', "malformed_stream"),
    ("", b"<html>no content type at all</html>", "interrupted"),
])
def test_content_type(content_type: str, body: bytes, expected: str) -> None:
    record = send_body("openai", [body], content_type)
    assert record.error_class == expected, record.error_detail
    if expected == "malformed_stream" and "html" in content_type:
        assert "text/html" in record.error_detail


ROLE = b'data: {"choices":[{"index":0,"delta":{"role":"assistant"},"finish_reason":null}]}\n\n'
HELLO = b'data: {"choices":[{"index":0,"delta":{"content":"Hello"},"finish_reason":null}]}\n\n'


@pytest.mark.parametrize(("pieces", "deltas"), [
    ([ROLE, b"data: [DONE]\n\n"], 0),              # llama-cpp-python's interrupt_requests cut, byte for byte
    ([ROLE, HELLO, HELLO, b"data: [DONE]\n\n"], 2),  # cut after some content
])
def test_done_without_a_finish_reason_is_an_interrupted_answer(pieces: list[bytes], deltas: int) -> None:
    """A stream that ends cleanly with [DONE] but never said why it stopped was cut short: it is not
    an ``ok`` answer (with 0 tokens it would have counted as a complete, empty one)."""
    record = send_body("openai", pieces)
    assert record.error_class == "interrupted" and not record.ok
    assert record.error_detail == ("data: [DONE] without a finish reason: the server ended the answer after "
                                   f"{deltas} content deltas without saying why")
    assert record.output_tokens == deltas and record.terminal
    finished = send_body("openai", [*pieces[:-1], OK_STREAM.split(b"\n\n", 1)[1]])  # the finish chunk, [DONE]
    assert finished.error_class == "ok" and finished.finish_reason == "stop"


ANTHROPIC_START = (b'event: message_start\n'
                   b'data: {"type":"message_start","message":{"usage":{"input_tokens":5}}}\n\n'
                   b'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,'
                   b'"delta":{"type":"text_delta","text":"Hello"}}\n\n')
ANTHROPIC_STOP = b'event: message_stop\ndata: {"type":"message_stop"}\n\n'
ANTHROPIC_REASON = (b'event: message_delta\ndata: {"type":"message_delta","delta":{"stop_reason":"end_turn"},'
                    b'"usage":{"output_tokens":1}}\n\n')


def test_message_stop_without_a_stop_reason_is_an_interrupted_answer() -> None:
    record = send_body("anthropic", [ANTHROPIC_START, ANTHROPIC_STOP])
    assert record.error_class == "interrupted" and record.terminal
    assert record.error_detail == ("message_stop without a finish reason: the server ended the answer after "
                                   "1 content deltas without saying why")
    finished = send_body("anthropic", [ANTHROPIC_START, ANTHROPIC_REASON, ANTHROPIC_STOP])
    assert finished.error_class == "ok" and finished.finish_reason == "end_turn"


def test_the_answer_kept_in_a_record_is_capped_and_flagged() -> None:
    words = [b'data: {"choices":[{"delta":{"content":"0123456789"}}]}\n\n'] * 2000     # 20,000 characters
    record = send_body("openai", [*words, b'data: {"choices":[{"delta":{},"finish_reason":"stop"}]}\n\n',
                                  b"data: [DONE]\n\n"])
    assert record.error_class == "ok" and record.output_tokens == 2000
    assert len(record.text) == TEXT_CAP_CHARS and record.text_truncated


def test_a_response_over_the_byte_limit_is_too_large() -> None:
    record = send_body("openai", [OK_STREAM[:40]] * 100, limits=StreamLimits(max_response_bytes=1000))
    assert record.error_class == "too_large" and "1000 bytes" in record.error_detail


# ---- a record that cannot be finished ------------------------------------------------------------
class _BrokenBackend:
    """A tokenizer that loads but cannot encode (fourfold#32: every success was recorded "cancelled")."""

    def encode(self, text, add_special_tokens=False):  # noqa: ANN001, ANN201
        raise RuntimeError("this tokenizer cannot encode")


def test_an_error_while_finishing_a_record_is_a_client_error_not_cancelled() -> None:
    body = (b'data: {"choices":[{"delta":{"content":"hi"},"finish_reason":"stop"}]}\n\n'
            b"data: [DONE]\n\n")

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers={"content-type": SSE}, content=body)

    client = httpx.Client(base_url="http://test", transport=httpx.MockTransport(handler))
    dialect = get_dialect("openai")
    record = send(client, dialect, dialect.build(ITEM, RequestOptions(stream=True)), RequestRecord(),
                  tokenizer=Tokenizer("broken.json", _BrokenBackend()))
    assert record.error_class == "client_error"
    assert record.error_detail == ("finishing the record failed: RuntimeError: this tokenizer cannot encode")
    assert record.status == 200
