"""Hostile servers, the stream: header drip, ping-only SSE, implausible usage, redirects, an
unsolicited second response, a finish reason and a clean end without ``[DONE]``. A real headless L1
run against each: it ends by itself, no traceback, one record per request the server saw, in the
expected class, and the summary counts what the target got wrong."""

from __future__ import annotations

import pytest

from tests.hostile import harness as h

pytestmark = pytest.mark.integration
HANDLERS = "tests.hostile.test_streams"
READ_TIMEOUT_S = 1.0


# ---------------------------------------------------------------- handlers (run in the server process)

async def header_drip(conn: h.Conn, req: h.Request) -> None:
    """The status line, then one header line every 0.3 s: bytes, never a complete head."""
    await conn.send_raw(b"HTTP/1.1 200 OK\r\n")
    for i in range(1000):
        await conn.sleep(0.3)
        await conn.send_raw(b"X-Drip-%d: .\r\n" % i)


async def ping_only(conn: h.Conn, req: h.Request) -> None:
    """200 and then ``: ping`` comments every 0.2 s (``conn.param``: one content token first)."""
    await conn.send_head(200, {"Content-Type": "text/event-stream"}, chunked=True)
    if conn.param == "token first":
        await conn.send_chunk(h.openai_chunk("Hello"))
    for _ in range(1000):
        await conn.sleep(0.2)
        await conn.send_chunk(b": ping\n\n")


async def implausible_usage(conn: h.Conn, req: h.Request) -> None:
    """Three tokens, and a usage of ``conn.param`` (raw JSON text) output tokens."""
    usage = b'{"prompt_tokens": 5, "completion_tokens": %s}' % conn.param.encode()
    events = [*h.good_stream(3)[:3], h.openai_chunk(None, "stop")[:-3] + b', "usage": ' + usage + b"}\n\n"]
    await conn.send_sse(events)


async def redirect(conn: h.Conn, req: h.Request) -> None:
    status = (301, 302, 307, 308)[conn.index % 4]
    await conn.send_response(status, b"", headers={"Location": "https://llm.example.com/v1/chat/completions"})


async def unsolicited(conn: h.Conn, req: h.Request) -> None:
    """A good answer and, in the same write, a second one nobody asked for. (One that comes later,
    while the connection idles in the pool, is tested in tests/integration/test_bad_input.py; one
    that comes after the next request went out cannot be told from that request's answer.)"""
    body = b"".join(b"%x\r\n%s\r\n" % (len(e), e)
                    for e in h.good_stream(3) + [b"data: [DONE]\n\n"]) + b"0\r\n\r\n"
    answer = (b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
              b"Transfer-Encoding: chunked\r\n\r\n" + body)
    await conn.send_raw(answer + answer)


async def no_done(conn: h.Conn, req: h.Request) -> None:
    """Tokens, a last chunk with a finish reason (``conn.param``) and usage, a clean end: no [DONE]."""
    events = [h.openai_chunk(f"w{i} ") for i in range(3)]
    events.append(h.openai_chunk(None, conn.param, {"prompt_tokens": 5, "completion_tokens": 3}))
    await conn.send_sse(events, gap_s=0.01, done=False)


# ---------------------------------------------------------------- tests

def _run(tmp_path, spec: str, param: object = None, seconds: float = 3.0, tls: bool = False):  # noqa: ANN202
    with h.HostileServer(f"{HANDLERS}:{spec}", param=param, tls=tls) as server:
        run = h.run_level(server.url, tmp_path, users=2, seconds=seconds,
                          extra=["--read-timeout", f"{READ_TIMEOUT_S:g}", *(["--insecure"] if tls else [])])
    h.assert_clean(run, max_s=30)
    return server, run


@pytest.mark.parametrize("spec, param, expected, tls", [
    ("header_drip", None, "ttft_timeout", False),
    ("ping_only", None, "ttft_timeout", False),
    ("ping_only", "token first", "read_timeout", False),
    ("header_drip", None, "ttft_timeout", True),     # TLS: blocking reads, the watchdog throws
])
def test_bytes_without_content_time_out(tmp_path, spec, param, expected, tls):
    """A stuck stream is a timeout, never a request cancelled at the end of the run: with a 1 s read
    timeout and 4 s of run, each user gets through at least two requests."""
    server, run = _run(tmp_path, spec, param, seconds=4, tls=tls)
    records = h.assert_one_record_per_request(run, server, expected)
    timed_out = [r for r in records if r["error_class"] == expected]
    assert len(timed_out) >= 4, run.classes()
    assert all("no content for 1 s" in r["error_detail"] for r in timed_out)
    assert all(r["e2e_ms"] is None or r["e2e_ms"] < 2000 for r in timed_out)
    assert run.summary["total"]["errors"][expected] == len(timed_out)


@pytest.mark.parametrize("value, reported", [("-5", -5), ("100000000000000000000000000000",
                                                             "100000000000000000000000000000")])
def test_implausible_usage_is_flagged_and_the_chunks_counted(tmp_path, value, reported):
    server, run = _run(tmp_path, "implausible_usage", value)
    records = h.assert_one_record_per_request(run, server, "ok")
    done = [r for r in records if r["error_class"] == "ok"]
    assert done and all(r["extra"]["usage_implausible"] == reported for r in done)
    assert all((r["output_tokens"], r["output_tokens_source"]) == (3, "chunks") for r in done)
    total = run.summary["total"]
    assert total["usage_implausible"] == len(done) and total["output_tokens_total"] == 3 * len(done)
    assert f"usage_implausible={len(done)}" in run.output          # the console summary says it too


def test_redirects_are_their_own_class_with_the_location(tmp_path):
    server, run = _run(tmp_path, "redirect")
    records = h.assert_one_record_per_request(run, server, "redirect")
    assert {r["status"] for r in records} == {301, 302, 307, 308}
    assert all("https://llm.example.com/v1/chat/completions" in r["error_detail"] for r in records
               if r["error_class"] == "redirect")
    assert "http_4xx" not in run.summary["total"]["errors"]


def test_an_unsolicited_second_response_is_a_protocol_error(tmp_path):
    server, run = _run(tmp_path, "unsolicited")
    records = h.assert_one_record_per_request(run, server, "malformed_stream")
    broken = [r for r in records if r["error_class"] == "malformed_stream"]
    assert broken and all(r["extra"]["unsolicited_bytes"] > 100 and r["text"] == "w0 w1 w2 " for r in broken)
    assert server.connections == len(records)          # the spoiled connection is never reused
    assert run.summary["total"]["unsolicited_responses"] == len(broken)


@pytest.mark.parametrize("finish, expected", [("stop", "ok"), ("length", "truncated")])
def test_a_finish_reason_and_a_clean_end_without_done_is_complete(tmp_path, finish, expected):
    server, run = _run(tmp_path, "no_done", finish)
    records = h.assert_one_record_per_request(run, server, expected)
    done = [r for r in records if r["error_class"] == expected]
    assert done and all(r["terminal"] and r["extra"]["no_terminal_event"] for r in done)
    total = run.summary["total"]
    assert total["no_terminal_event"] == len(done) and total["interrupted"] == 0
    assert total["ttft_ms"]["count"] == len(done)      # TTFT is measured (it was missing entirely)
