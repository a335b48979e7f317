"""Hostile servers, the wire: TLS keep-alive, split surrogates, deep JSON, chunk-size tricks, gzip,
1xx responses, HTTP/1.0 close-delimited bodies, ``\\r``-only SSE. A real headless L1 run against each:
it ends by itself, no traceback, one record per request the server saw, in the expected class."""

from __future__ import annotations

import gzip
import itertools
import json
from pathlib import Path

import pytest

from tests.hostile import harness as h

pytestmark = pytest.mark.integration
HANDLERS = "tests.hostile.test_wire"


# ---------------------------------------------------------------- handlers (run in the server process)

async def keepalive_tls(conn: h.Conn, req: h.Request) -> None:
    body = b"".join(h.good_stream(3)) + b"data: [DONE]\n\n"
    await conn.send_response(200, body, content_type="text/event-stream")


async def split_surrogates(conn: h.Conn, req: h.Request) -> None:
    # an emoji JSON-escaped as two lone surrogates, one per event (each event one token)
    events = [b'data: {"choices":[{"index":0,"delta":{"content":"hi \\ud83d"}}]}\n\n',
              b'data: {"choices":[{"index":0,"delta":{"content":"\\ude00 there"}}]}\n\n',
              h.openai_chunk(None, "stop", {"prompt_tokens": 3, "completion_tokens": 2})]
    await conn.send_sse(events)


async def deep_json(conn: h.Conn, req: h.Request) -> None:
    events = [h.openai_chunk("ok "), b"data: " + b"[" * 100_000 + b"\n\n",
              h.openai_chunk(None, "stop", {"prompt_tokens": 3, "completion_tokens": 1}), b"data: [DONE]\n\n"]
    if conn.index % 2:       # every second answer in one piece (one read: the per-event parse path)
        await conn.send_response(200, b"".join(events), content_type="text/event-stream")
    else:
        await conn.send_sse(events[:-1])


async def chunk_tricks(conn: h.Conn, req: h.Request) -> None:
    """Legal chunked framing a naive parser trips on: chunk extensions, upper-case hex with leading
    zeros, one event split over three chunks, two events in one chunk, a trailer after the last chunk."""
    events = h.good_stream(4) + [b"data: [DONE]\n\n"]
    await conn.send_head(200, {"Content-Type": "text/event-stream"}, chunked=True)
    first = events[0]
    await conn.send_raw(b"%X;name=value\r\n%s\r\n" % (10, first[:10]))
    await conn.send_raw(b"000%X\r\n%s\r\n" % (len(first) - 15, first[10:-5]))
    await conn.send_raw(b"%x ; ext\r\n%s\r\n" % (5, first[-5:]))
    both = events[1] + events[2]
    await conn.send_raw(b"%x\r\n%s\r\n" % (len(both), both))
    for event in events[3:]:
        await conn.send_chunk(event)
    await conn.send_raw(b"0\r\nX-Trailer: done\r\n\r\n")


async def huge_chunk_size(conn: h.Conn, req: h.Request) -> None:
    """A chunk size of 2**64 - 1: must be refused (too large), not allocated."""
    await conn.send_head(200, {"Content-Type": "text/event-stream"}, chunked=True)
    await conn.send_raw(b"ffffffffffffffff\r\n" + h.openai_chunk("x"))
    await conn.sleep(0.2)
    conn.close()


async def negative_chunk_size(conn: h.Conn, req: h.Request) -> None:
    """The 12 bytes that hung the load generator for good (fourfold#32): one chunk, then a chunk
    size of -6 (Python's int() takes the sign); then the connection stays open, silent."""
    await conn.send_head(200, {"Content-Type": "text/event-stream"}, chunked=True)
    await conn.send_raw(b"1\r\nX\r\n-6\r\nZ")
    await conn.sleep(1.0)
    conn.close()


_NOT_HEX = itertools.cycle((b"0x%x", b"+%x", b" %x", b"%x_0"))       # each answer the next one


async def not_hex_chunk_sizes(conn: h.Conn, req: h.Request) -> None:
    """A content event, then a chunk-size line that int(..., 16) reads but HTTP does not allow:
    "0x..", "+..", " ..", "1_0", in turn."""
    bad = next(_NOT_HEX)
    event = h.openai_chunk("x")
    await conn.send_head(200, {"Content-Type": "text/event-stream"}, chunked=True)
    await conn.send_chunk(event)
    await conn.send_raw(bad.replace(b"%x", b"%x" % len(event)) + b"\r\n" + event + b"\r\n")
    await conn.sleep(0.2)
    conn.close()


def make_bomb(path: Path) -> str:
    """256 MiB of text in ~250 KiB, written to ``path`` (2 s of CPU to make: made once, by the test
    that sends it, not on import by every server process that imports this module for a handler)."""
    path.write_bytes(gzip.compress(b"data: " + b"0" * (256 << 20) + b"\n\n"))
    return str(path)


async def gzip_bomb(conn: h.Conn, req: h.Request) -> None:
    """A gzip'd event stream well under the raw cap that inflates to 256 MiB (fourfold#32: 2.2 GB
    of memory per MiB sent): inflated no further than the response cap, ``too_large``."""
    bomb = Path(conn.param).read_bytes()
    await conn.send_head(200, {"Content-Type": "text/event-stream", "Content-Encoding": "gzip"}, chunked=True)
    for start in range(0, len(bomb), 16384):
        await conn.send_chunk(bomb[start:start + 16384])
    await conn.send_chunk(b"")


async def gzip_sse(conn: h.Conn, req: h.Request) -> None:
    """A gateway that gzips the event stream although the client asked for ``identity`` (seen with
    proxies that compress every text/* type), one gzip member over many chunks; every second answer
    deflate-encoded (zlib stream) instead."""
    import zlib

    body = b"".join(h.good_stream(3)) + b"data: [DONE]\n\n"
    if conn.index % 2:
        data, encoding = gzip.compress(body), "gzip"
    else:
        data, encoding = zlib.compress(body), "deflate"
    await conn.send_head(200, {"Content-Type": "text/event-stream", "Content-Encoding": encoding},
                         chunked=True)
    for i in range(0, len(data), 40):
        await conn.send_chunk(data[i:i + 40])
    await conn.send_chunk(b"")


async def informational(conn: h.Conn, req: h.Request) -> None:
    """``100 Continue`` and ``103 Early Hints`` before the real response."""
    await conn.send_raw(b"HTTP/1.1 100 Continue\r\n\r\n")
    await conn.send_raw(b"HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\n\r\n")
    await conn.send_sse(h.good_stream(3))


async def http10_close(conn: h.Conn, req: h.Request) -> None:
    """HTTP/1.0, no Content-Length, no chunking: the body ends when the server closes."""
    await conn.send_raw(b"HTTP/1.0 200 OK\r\nContent-Type: text/event-stream\r\n\r\n")
    for event in h.good_stream(3) + [b"data: [DONE]\n\n"]:
        await conn.send_raw(event)
        await conn.sleep(0.01)
    conn.close()


async def cr_only(conn: h.Conn, req: h.Request) -> None:
    """SSE lines ended by a lone ``\\r`` (the SSE spec allows CR, LF and CRLF)."""
    events = [e.replace(b"\n", b"\r") for e in h.good_stream(3) + [b"data: [DONE]\n\n"]]
    await conn.send_sse(events, done=False)


async def reset_mid_stream(conn: h.Conn, req: h.Request) -> None:
    """Two content events, then a TCP reset (SO_LINGER 0) instead of the rest."""
    import socket
    import struct

    await conn.send_head(200, {"Content-Type": "text/event-stream"}, chunked=True)
    for event in h.good_stream(3)[:2]:
        await conn.send_chunk(event)
    await conn.sleep(0.05)
    sock = conn.writer.get_extra_info("socket")
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    conn.close()


async def short_content_length(conn: h.Conn, req: h.Request) -> None:
    """Content-Length promises more than is sent, then the connection closes."""
    body = b"".join(h.good_stream(3)) + b"data: [DONE]\n\n"
    await conn.send_head(200, {"Content-Type": "text/event-stream", "Content-Length": str(len(body) + 500)})
    await conn.send_raw(body)
    conn.close()


async def length_and_chunked(conn: h.Conn, req: h.Request) -> None:
    """Both Content-Length (wrong) and Transfer-Encoding: chunked; chunked framing wins (RFC 9112 6.3)."""
    body = b"".join(h.good_stream(3)) + b"data: [DONE]\n\n"
    await conn.send_head(200, {"Content-Type": "text/event-stream", "Content-Length": "7"}, chunked=True)
    await conn.send_chunk(body)
    await conn.send_chunk(b"")
    conn.close()        # a message with both headers must not be followed by another on the connection


async def garbage_status_line(conn: h.Conn, req: h.Request) -> None:
    await conn.send_raw(b"HTTP/1.1 OK-ish\r\nContent-Length: 2\r\n\r\nhi")
    conn.close()


async def nul_and_bom(conn: h.Conn, req: h.Request) -> None:
    """A UTF-8 BOM before the first event and NUL characters inside the text (both legal)."""
    events = h.good_stream(3)
    events[0] = b"\xef\xbb\xbf" + h.openai_chunk("a\x00b ")
    await conn.send_sse(events)


# ---------------------------------------------------------------- tests

def _run(tmp_path, spec: str, *, tls: bool = False, extra: list[str] | None = None, seconds: float = 2,
         param=None):
    with h.HostileServer(f"{HANDLERS}:{spec}", tls=tls, param=param) as server:
        run = h.run_level(server.url, tmp_path, users=2, seconds=seconds,
                          extra=["--read-timeout", "2", *(["--insecure"] if tls else []), *(extra or [])])
    h.assert_clean(run, max_s=45)
    return server, run


def test_tls_keep_alive_carries_every_request_on_one_connection_per_user(tmp_path):
    server, run = _run(tmp_path, "keepalive_tls", tls=True)
    records = h.assert_one_record_per_request(run, server, "ok")
    assert len(records) > 20 and server.connections == 2
    assert sum(bool(r["conn_reused"]) for r in records) == len(records) - 2


def test_a_surrogate_pair_split_over_two_events_is_one_character(tmp_path):
    server, run = _run(tmp_path, "split_surrogates")
    records = h.assert_one_record_per_request(run, server, "ok")
    assert records and all(r["text"] == "hi \U0001f600 there" for r in records if r["error_class"] == "ok")


def test_deep_json_is_a_malformed_stream_not_a_crash(tmp_path):
    server, run = _run(tmp_path, "deep_json")
    records = h.assert_one_record_per_request(run, server, "malformed_stream")
    assert records and all(r["text"].startswith("ok") for r in records if r["error_class"] != "cancelled")


def test_legal_chunk_tricks_give_the_whole_answer(tmp_path):
    server, run = _run(tmp_path, "chunk_tricks")
    records = h.assert_one_record_per_request(run, server, "ok")
    assert records and all(r["text"] == "w0 w1 w2 w3 " and r["output_tokens"] == 4 for r in records
                           if r["error_class"] == "ok")


def test_a_chunk_size_of_two_to_the_64_is_refused(tmp_path):
    server, run = _run(tmp_path, "huge_chunk_size")
    h.assert_one_record_per_request(run, server, {"malformed_stream", "too_large", "interrupted"})


def test_a_negative_chunk_size_is_a_malformed_stream_and_the_run_ends(tmp_path):
    server, run = _run(tmp_path, "negative_chunk_size", seconds=3)      # each answer holds 1 s
    records = h.assert_one_record_per_request(run, server, "malformed_stream")
    assert len(records) >= 4 and all("bad chunk size b'-6'" in r["error_detail"] for r in records
                                      if r["error_class"] == "malformed_stream")


def test_chunk_sizes_that_are_not_plain_hex_are_malformed(tmp_path):
    server, run = _run(tmp_path, "not_hex_chunk_sizes")
    records = h.assert_one_record_per_request(run, server, "malformed_stream")
    assert len(records) >= 8 and all(r["text"] == "x" for r in records if r["error_class"] != "cancelled")


def test_a_compression_bomb_is_too_large_not_inflated(tmp_path):
    server, run = _run(tmp_path, "gzip_bomb", param=make_bomb(tmp_path / "bomb.gz"))
    records = h.assert_one_record_per_request(run, server, "too_large")
    assert records and all(r["error_detail"] == "decoded (gzip) body passed 16777216 bytes"
                           for r in records if r["error_class"] == "too_large")


def test_a_compressed_event_stream_is_decoded(tmp_path):
    server, run = _run(tmp_path, "gzip_sse")
    records = h.assert_one_record_per_request(run, server, "ok")
    assert records and all(r["text"] == "w0 w1 w2 " for r in records if r["error_class"] == "ok")


def test_informational_responses_before_the_answer_are_skipped(tmp_path):
    server, run = _run(tmp_path, "informational")
    records = h.assert_one_record_per_request(run, server, "ok")
    assert records and all(r["status"] == 200 and r["output_tokens"] == 3 for r in records
                           if r["error_class"] == "ok")


def test_an_http10_close_delimited_body_is_complete_and_not_reused(tmp_path):
    server, run = _run(tmp_path, "http10_close")
    records = h.assert_one_record_per_request(run, server, "ok")
    assert len(records) > 4 and server.connections == server.requests
    assert not any(r["conn_reused"] for r in records)


def test_cr_only_line_endings_are_events(tmp_path):
    server, run = _run(tmp_path, "cr_only")
    records = h.assert_one_record_per_request(run, server, "ok")
    assert records and all(r["text"] == "w0 w1 w2 " for r in records if r["error_class"] == "ok")
    assert json.dumps(run.summary["total"]["requests"]) == \
        str(len(records) - run.classes().get("cancelled", 0))


def test_a_reset_mid_stream_is_interrupted_with_what_came_before(tmp_path):
    server, run = _run(tmp_path, "reset_mid_stream")
    records = h.assert_one_record_per_request(run, server, "interrupted")
    assert records and all(r["text"] == "w0 w1 " and r["ttft_ms"] is not None for r in records
                           if r["error_class"] == "interrupted")


def test_a_body_shorter_than_its_content_length_is_interrupted(tmp_path):
    server, run = _run(tmp_path, "short_content_length")
    h.assert_one_record_per_request(run, server, "interrupted")


def test_chunked_framing_wins_over_a_content_length(tmp_path):
    server, run = _run(tmp_path, "length_and_chunked")
    records = h.assert_one_record_per_request(run, server, "ok")
    assert records and all(r["output_tokens"] == 3 for r in records if r["error_class"] == "ok")


def test_a_garbage_status_line_is_a_malformed_stream(tmp_path):
    server, run = _run(tmp_path, "garbage_status_line")
    h.assert_one_record_per_request(run, server, "malformed_stream")


def test_a_bom_and_nul_characters_are_text(tmp_path):
    server, run = _run(tmp_path, "nul_and_bom")
    records = h.assert_one_record_per_request(run, server, "ok")
    assert records and all(r["text"] == "a\x00b w1 w2 " for r in records if r["error_class"] == "ok")
