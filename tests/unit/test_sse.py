"""SSEDecoder: the WHATWG line rules, torn reads at every byte, limits, and garbage in."""

from __future__ import annotations

from itertools import pairwise

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fourfold.client.sse import SSEDecoder, SSEEvent


def decode_all(chunks: list[bytes], **kwargs: int) -> tuple[list[SSEEvent], SSEDecoder]:
    decoder = SSEDecoder(**kwargs)
    events: list[SSEEvent] = []
    for chunk in chunks:
        events.extend(decoder.decode(chunk))
    events.extend(decoder.flush())
    return events, decoder


def split_at(data: bytes, cuts: list[int]) -> list[bytes]:
    points = [0, *sorted(set(cuts)), len(data)]
    return [data[a:b] for a, b in pairwise(points)]


def ev(data: str, event: str = "message", id: str | None = None, retry: int | None = None) -> SSEEvent:
    return SSEEvent(event, data, id, retry)


CASES = [
    # (name, stream bytes, expected events)
    ("one event", b"data: hello\n\n", [ev("hello")]),
    ("two events", b"data: a\n\ndata: b\n\n", [ev("a"), ev("b")]),
    ("multi-line data", b"data: a\ndata: b\ndata:\n\n", [ev("a\nb\n")]),
    ("crlf", b"data: a\r\n\r\ndata: b\r\n\r\n", [ev("a"), ev("b")]),
    ("lone cr", b"data: a\r\rdata: b\r\r", [ev("a"), ev("b")]),
    ("mixed line ends", b"data: a\r\ndata: b\n\rdata: c\r\n\n", [ev("a\nb"), ev("c")]),
    ("cr then crlf is two line ends", b"data: a\r\r\n", [ev("a")]),
    ("comment only", b": ping\n\n: ping\n\ndata: x\n\n", [ev("x")]),
    ("comment inside an event", b"data: a\n: keep-alive\ndata: b\n\n", [ev("a\nb")]),
    ("no space after colon", b"data:x\n\n", [ev("x")]),
    ("only one space removed", b"data:  x \n\n", [ev(" x ")]),
    ("field without colon", b"data\n\n", [ev("")]),
    ("two empty data lines", b"data\ndata\n\n", [ev("\n")]),
    ("colon inside value", b'data: {"a": "b:c"}\n\n', [ev('{"a": "b:c"}')]),
    ("event name", b"event: ping\ndata: {}\n\n", [ev("{}", event="ping")]),
    ("event name without data", b"event: message_stop\n\n", [ev("", event="message_stop")]),
    ("event name resets", b"event: a\ndata: 1\n\ndata: 2\n\n", [ev("1", "a"), ev("2")]),
    ("empty event name is message", b"event:\ndata: 1\n\n", [ev("1")]),
    ("id persists", b"id: 7\ndata: a\n\ndata: b\n\n", [ev("a", id="7"), ev("b", id="7")]),
    ("id with NUL ignored", b"id: 1\ndata: a\n\nid: x\x00y\ndata: b\n\n", [ev("a", id="1"), ev("b", id="1")]),
    ("retry", b"retry: 3000\ndata: a\n\ndata: b\n\n", [ev("a", retry=3000), ev("b")]),
    ("bad retry ignored", b"retry: 3s\ndata: a\n\n", [ev("a")]),
    ("id-only block not dispatched", b"id: 5\n\ndata: a\n\n", [ev("a", id="5")]),
    ("retry-only block not dispatched", b"retry: 5\n\ndata: a\n\n", [ev("a")]),
    ("unknown field ignored", b"foo: bar\ndata: a\nDATA: b\n\n", [ev("a")]),
    ("leading blank lines", b"\n\n\ndata: a\n\n", [ev("a")]),
    ("bom at start", b"\xef\xbb\xbfdata: a\n\n", [ev("a")]),
    ("bom only at start", b"\xef\xbb\xbfdata: a\n\n\xef\xbb\xbfdata: b\n\ndata: c\n\n", [ev("a"), ev("c")]),
    ("utf-8", "data: café — 😊\n\n".encode(), [ev("café — 😊")]),
    ("missing final blank line", b"data: a\n\ndata: b\n", [ev("a"), ev("b")]),
    ("torn last line dropped", b"data: a\n\ndata: b", [ev("a")]),
    ("empty stream", b"", []),
]


@pytest.mark.parametrize("name, stream, expected", CASES, ids=[c[0] for c in CASES])
def test_decodes_whole_and_at_every_byte(name: str, stream: bytes, expected: list[SSEEvent]) -> None:
    assert decode_all([stream])[0] == expected
    assert decode_all([stream[i:i + 1] for i in range(len(stream))])[0] == expected


@pytest.mark.parametrize("name, stream, expected", CASES, ids=[c[0] for c in CASES])
def test_decodes_every_two_way_split(name: str, stream: bytes, expected: list[SSEEvent]) -> None:
    for cut in range(len(stream) + 1):
        assert decode_all([stream[:cut], stream[cut:]])[0] == expected, cut


@pytest.mark.parametrize("name, stream, expected", [c for c in CASES if len(c[1]) <= 64],
                         ids=[c[0] for c in CASES if len(c[1]) <= 64])
def test_decodes_every_three_way_split(name: str, stream: bytes, expected: list[SSEEvent]) -> None:
    for a in range(len(stream) + 1):
        for b in range(a, len(stream) + 1):
            assert decode_all([stream[:a], stream[a:b], stream[b:]])[0] == expected, (a, b)


def test_empty_reads_change_nothing() -> None:
    events, _ = decode_all([b"", b"\xef\xbb", b"", b"\xbfdata: a\r", b"", b"\n\r", b"", b"\n", b""])
    assert events == [ev("a")]


def test_crlf_torn_between_reads_is_one_line_end() -> None:
    events, _ = decode_all([b"data: a\r", b"\n\r", b"\n", b"data: b\r", b"\r", b"\n"])
    assert events == [ev("a"), ev("b")]


def test_events_come_out_of_the_read_that_completes_them() -> None:
    decoder = SSEDecoder()
    assert decoder.decode(b"data: a\n") == []
    assert decoder.decode(b"\ndata: b\n\ndata: c") == [ev("a"), ev("b")]
    assert decoder.decode(b"\n\n") == [ev("c")]
    assert decoder.flush() == []


def test_flush_reports_the_dropped_tail() -> None:
    events, decoder = decode_all([b"data: a\n\ndata: {\"tor"])
    assert events == [ev("a")]
    assert decoder.discarded_tail_bytes == len(b'data: {"tor')


def test_invalid_utf8_is_replaced_and_counted() -> None:
    events, decoder = decode_all([b"data: ok\n\ndata: \xff\xfe!\ndata: \xc3\n\ndata: fine\n\n"])
    assert events == [ev("ok"), ev("\ufffd\ufffd!\n\ufffd"), ev("fine")]
    assert decoder.invalid_utf8 == 2


def test_multibyte_char_torn_across_reads_decodes_cleanly() -> None:
    raw = "data: 😊é\n\n".encode()
    for cut in range(len(raw)):
        events, decoder = decode_all([raw[:cut], raw[cut:]])
        assert events == [ev("😊é")]
        assert decoder.invalid_utf8 == 0


@pytest.mark.parametrize("chunk_bytes", [1, 7, 64, 10_000])
def test_oversized_line_is_discarded_and_the_stream_recovers(chunk_bytes: int) -> None:
    raw = b"data: small\n\ndata: " + b"x" * 1000 + b"\ndata: more\n\ndata: after\n\n"
    chunks = [raw[i:i + chunk_bytes] for i in range(0, len(raw), chunk_bytes)]
    events, decoder = decode_all(chunks, max_event_bytes=100)
    assert events == [ev("small"), ev("after")]
    assert decoder.too_large and decoder.events_dropped == 1


def test_event_of_many_small_lines_over_the_limit_is_dropped() -> None:
    raw = b"event: big\n" + b"data: 0123456789\n" * 20 + b"\ndata: next\n\n"
    events, decoder = decode_all([raw], max_event_bytes=100)
    assert events == [ev("next")]
    assert decoder.too_large and decoder.events_dropped == 1


def test_events_under_the_limit_leave_the_flag_clear() -> None:
    events, decoder = decode_all([b"data: " + b"y" * 90 + b"\n\n"] * 3, max_event_bytes=100)
    assert len(events) == 3 and not decoder.too_large


EVENT = st.builds(
    lambda extra, name, lines: extra + (b"event: " + name.encode() + b"\n" if name else b"")
    + b"".join(b"data: " + line.encode() + b"\n" for line in lines) + b"\n",
    st.sampled_from([b"", b"", b"id: 3\n", b"retry: 10\n", b": ping\n", b"retry: 5\n\n", b"x-y: z\n"]),
    st.sampled_from(["", "delta", "ping"]),
    st.lists(st.text(st.characters(codec="utf-8", exclude_characters="\r\n"), max_size=12),
             min_size=1, max_size=3),
)


@settings(max_examples=150, deadline=None)
@given(st.lists(EVENT, min_size=1, max_size=6), st.sampled_from([b"\n", b"\r\n", b"\r"]), st.data())
def test_random_events_survive_random_splits(events: list[bytes], eol: bytes, data: st.DataObject) -> None:
    raw = b"".join(events).replace(b"\n", eol)
    expected = decode_all([b"".join(events)])[0]
    assert len(expected) == len(events)
    cuts = data.draw(st.lists(st.integers(0, len(raw)), max_size=12))
    assert decode_all(split_at(raw, cuts))[0] == expected


@settings(max_examples=200, deadline=None)
@given(st.lists(st.binary(max_size=40), max_size=8))
def test_random_bytes_never_raise(chunks: list[bytes]) -> None:
    events, decoder = decode_all(chunks, max_event_bytes=64)
    assert all(isinstance(e.data, str) for e in events)
    assert decoder.invalid_utf8 >= 0
