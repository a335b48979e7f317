"""Hostile servers, the credentials: a target that echoes every credential it was sent into every
place fourfold keeps something of a response (body text across the 512 / 4096 / 16,384-character
cuts, error bodies, the plan header, Server-Timing names, the content type, Retry-After, the
finish reason, usage, SSE event names, excerpts of a malformed event, a bad chunk size or status
line). Nothing of a configured credential (``--api-key``, each ``--header`` value) may be written
anywhere, not even the first characters of one that a cut left; a ``--header-public`` value stays.
"""

from __future__ import annotations

import itertools
import json
import subprocess
import sys

import pytest

from tests.hostile import harness as h

pytestmark = pytest.mark.integration
HANDLERS = "tests.hostile.test_secrets"

API_KEY = "sk-PLANTcli-7Hq2Zr9Lw4Xv8Nm3"
SUB_KEY = "ocpPLANT-5fG8kT1xQ0wE6rY2uI4o"
PUBLIC = "trace-PUBLIC-4242-visible"
PLANTED = (API_KEY, SUB_KEY)
MIN_CHARS = 6        # fourfold.rundir.secrets.MIN_CHARS: what is left of a cut key is at most 5 characters


# ---------------------------------------------------------------- handlers (run in the server process)

def _sent(req: h.Request) -> list[str]:
    """The credentials the client sent, as the server reads them back."""
    found = [req.headers.get("authorization", "").partition(" ")[2]]
    found += [req.headers.get(name, "") for name in ("ocp-apim-subscription-key", "x-api-key")]
    return [value for value in found if value]


def _across(secret: str, cut: int, inside: int = 12, fill: str = "-") -> str:
    """Filler, then ``secret`` starting ``inside`` characters before position ``cut``."""
    return fill * (cut - inside) + secret


def _chunk(obj: dict) -> bytes:
    return h.sse_event(obj)


def _content(text: str, finish: str | None = None, usage: dict | None = None) -> bytes:
    return h.openai_chunk(text, finish, usage)


async def _stream(conn: h.Conn, secrets: list[str], public: str) -> None:
    """A well-formed stream holding the keys everywhere: headers, text (across 16,384), event
    names, finish reason, usage."""
    first = secrets[0]
    headers = {"x-fourfold-plan": json.dumps({"echo": secrets, first: public, "nested": [{"k": secrets}]}),
               "Server-Timing": ", ".join(f"{s};dur=1" for s in secrets) + f", {public};dur=2",
               "Retry-After": first}
    events = [h.sse_event({"choices": [{"index": 0, "delta": {"content": f"{public} " + " ".join(secrets)}}]},
                          event=first),
              _content(_across(first, 16_384 - len(public) - 1 - len(" ".join(secrets)),
                               inside=12, fill="a")),
              _content(" tail " + json.dumps(secrets) + " " + "z" * 100),
              _content(None, first, {"prompt_tokens": 5, "completion_tokens": first, "model": first})]
    await conn.send_sse(events, headers)


async def _plan_cut(conn: h.Conn, secrets: list[str], public: str) -> None:
    await conn.send_sse(h.good_stream(2), {"x-fourfold-plan": "{" + _across(secrets[0], 256)})


async def _content_type(conn: h.Conn, secrets: list[str], public: str) -> None:
    body = f"<html>{' '.join(secrets)}</html>"
    await conn.send_response(200, body,
                             content_type="text/html; x=" + _across(secrets[-1], 100 - len("text/html; x=")))


async def _error_512(conn: h.Conn, secrets: list[str], public: str) -> None:
    await conn.send_response(401, _across(secrets[0], 512) + " and " + secrets[-1], content_type="text/plain")


async def _error_4096(conn: h.Conn, secrets: list[str], public: str) -> None:
    body = json.dumps({"error": {"message": f"invalid key {secrets[-1]}", "type": secrets[0]}})
    await conn.send_response(500, body + _across(secrets[0], 4096 - len(body)),
                             content_type="application/json")


async def _rate_limited(conn: h.Conn, secrets: list[str], public: str) -> None:
    await conn.send_response(429, {"error": {"message": f"slow down, {secrets[0]}"}},
                             headers={"Retry-After": secrets[-1]})


async def _bad_event(conn: h.Conn, secrets: list[str], public: str) -> None:
    # a malformed data line: the parser quotes its first 120 characters, cutting the key
    bad = b'data: {"choices": "' + _across(secrets[0], 120 - len('{"choices": "')).encode() + b"\n\n"
    await conn.send_sse([_content("hi "), bad, _content(None, "stop")])


async def _bad_chunk(conn: h.Conn, secrets: list[str], public: str) -> None:
    # a chunk size line that is no number: the wire error quotes 32 bytes of it
    await conn.send_head(200, {"Content-Type": "text/event-stream"}, chunked=True)
    await conn.send_raw(b"zz" + secrets[0].encode() + b"\r\nxx\r\n")
    conn.close()


async def _bad_chunk_short(conn: h.Conn, secrets: list[str], public: str) -> None:
    # the same, cut 4 characters into the key
    await conn.send_head(200, {"Content-Type": "text/event-stream"}, chunked=True)
    await conn.send_raw(b"z" * 28 + secrets[0].encode() + b"\r\nxx\r\n")
    conn.close()


async def _bad_status(conn: h.Conn, secrets: list[str], public: str) -> None:
    await conn.send_raw(b"HTTP/1.1 2x0 " + secrets[-1].encode() + b"\r\nContent-Length: 0\r\n\r\n")
    conn.close()


async def _anthropic(conn: h.Conn, secrets: list[str], public: str) -> None:
    start = {"type": "message_start", "message": {"id": secrets[0], "usage": {"input_tokens": 3}}}
    events = [h.sse_event(start, event="message_start"),
              h.sse_event({"delta": 5}, event=secrets[0]),
              h.sse_event({"type": "content_block_delta", "index": 0,
                           "delta": {"type": "text_delta", "text": " ".join(secrets)}},
                          event="content_block_delta"),
              h.sse_event({"type": "error",
                           "error": {"type": secrets[-1], "message": f"bad key {secrets[0]}"}},
                          event="error")]
    await conn.send_sse(events, done=False)


CASES = {"stream": _stream, "plan_cut": _plan_cut, "content_type": _content_type, "error_512": _error_512,
         "error_4096": _error_4096, "rate_limited": _rate_limited, "bad_event": _bad_event,
         "bad_chunk": _bad_chunk, "bad_chunk_short": _bad_chunk_short, "bad_status": _bad_status,
         "anthropic": _anthropic}
LOCUST_CASES = [name for name in CASES if name != "anthropic"]
_turn = itertools.count()


async def echo(conn: h.Conn, req: h.Request) -> None:
    """Echo the credentials it was sent: the case named by ``X-Case``, else the next in turn."""
    case = req.headers.get("x-case") or LOCUST_CASES[next(_turn) % len(LOCUST_CASES)]
    await conn.sleep(conn.param or 0)
    await CASES[case](conn, _sent(req) or ["no-credential-was-sent"], req.headers.get("x-trace", ""))


# ---------------------------------------------------------------- tests

def _leaks(text: str) -> list[str]:
    """Planted keys, their escaped forms, or their first MIN_CHARS characters, found in ``text``."""
    found = [form for secret in PLANTED for form in h.escaped_forms(secret) if form in text]
    return found + [secret[:MIN_CHARS] for secret in PLANTED if secret[:MIN_CHARS] in text]


def test_a_key_echoed_into_any_field_a_server_controls_is_redacted_before_any_cut():
    from fourfold.client.dialects import RequestOptions, get_dialect
    from fourfold.client.stream import send
    from fourfold.levels.base import make_client
    from fourfold.levels.options import Settings
    from fourfold.measure.record import RequestRecord
    from fourfold.workloads.items import Item

    settings = Settings(api_key=API_KEY, headers=(("Ocp-Apim-Subscription-Key", SUB_KEY),),
                        public_headers=(("X-Trace", PUBLIC),), read_timeout_s=5, connect_timeout_s=5)
    item = Item(id="q", messages=({"role": "user", "content": "hi"},))
    records: dict[str, RequestRecord] = {}
    with h.HostileServer(f"{HANDLERS}:echo") as server:
        client = make_client(settings, server.url)
        for case in CASES:
            dialect = get_dialect("anthropic" if case == "anthropic" else "openai")
            request = dialect.build(item, RequestOptions())
            request.headers["X-Case"] = case
            records[case] = send(client, dialect, request, RequestRecord())
        client.close()
    for case, record in records.items():
        line = record.to_json()
        assert not _leaks(line), f"{case}: {_leaks(line)} in {line[:3000]}"
        assert "***" in line, f"{case}: the echo was not met: {line[:2000]}"
    stream = records["stream"]
    assert stream.error_class == "ok" and stream.text_truncated and len(stream.text) == 16_384
    assert (stream.text.startswith(f"{PUBLIC} *** ***")
            and "a" * 20 + "*** tail [\"***\", \"***\"] zzz" in stream.text)
    assert stream.finish_reason == "***"
    assert stream.plan == {"echo": ["***", "***"], "***": PUBLIC, "nested": [{"k": ["***", "***"]}]}
    assert stream.server_timing == {"***": 1.0, PUBLIC: 2.0}
    assert records["plan_cut"].plan == {"unparsed": "{" + "-" * 244 + "***"}
    assert records["content_type"].error_class == "malformed_stream"
    assert records["content_type"].extra["content_type"] == "text/html; x=" + "-" * 75 + "***"
    assert records["error_512"].error_class == "http_4xx"
    assert records["error_512"].error_detail == "HTTP 401: " + "-" * 500 + "*** and ***"
    assert records["error_4096"].error_class == "http_5xx"
    assert records["error_4096"].error_detail.startswith(
        'HTTP 500: {"error": {"message": "invalid key ***", "type": "***"}}')
    assert records["rate_limited"].error_class == "rate_limited"
    assert records["rate_limited"].error_detail == 'HTTP 429: {"error": {"message": "slow down, ***"}}'
    # excerpts cut by the parser and the wire reader (120 and 32-64 characters) before fourfold sees them
    assert records["bad_event"].error_class == "malformed_stream"
    assert records["bad_event"].error_detail.endswith("-" * 20 + "***'")
    assert records["bad_chunk"].error_detail.endswith("b'zz***'")
    assert records["bad_chunk_short"].error_detail.endswith("b'" + "z" * 28 + "***'")
    assert records["bad_status"].error_detail.endswith("b'HTTP/1.1 2x0 ***'")
    assert records["anthropic"].text == "*** ***" and records["anthropic"].error_detail == "bad key ***"


def test_a_real_run_against_an_echoing_target_writes_no_credential_anywhere(tmp_path):
    """--api-key, a credential header whose name says nothing (Ocp-Apim-Subscription-Key) and a
    --header-public: no planted key in records, meta, summary, Locust's CSV/HTML and log, the
    compare report, stdout or stderr; the public header's value kept."""
    with h.HostileServer(f"{HANDLERS}:echo", param=0.05) as server:
        run = h.run_level(server.url, tmp_path, users=2, seconds=4,
                          extra=["--api-key", API_KEY, "--header", f"Ocp-Apim-Subscription-Key: {SUB_KEY}",
                                 "--header-public", f"X-Trace: {PUBLIC}",
                                 "--logfile", str(tmp_path / "locust.log")])
    h.assert_clean(run, max_s=40)
    records = h.assert_one_record_per_request(
        run, server, {"ok", "malformed_stream", "http_4xx", "http_5xx", "rate_limited", "interrupted"})
    assert len(records) >= len(LOCUST_CASES), run.classes()
    assert run.run_dir is not None
    compare = subprocess.run([sys.executable, "-m", "fourfold", "compare", str(run.run_dir), str(run.run_dir),
                              "--out", str(tmp_path / "compare"), "--resamples", "200"],
                             cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False)
    assert compare.returncode == 0, compare.stderr[-2000:]
    run.stdout += compare.stdout
    run.stderr += compare.stderr
    files = h.assert_no_secret(run, [*PLANTED, *(s[:MIN_CHARS] for s in PLANTED)])
    assert {p.suffix for p in files} >= {".json", ".jsonl", ".csv", ".html", ".log", ".md"}, files
    meta = json.loads((run.run_dir / "meta.json").read_text())
    assert meta["settings"]["headers"] == [["Ocp-Apim-Subscription-Key", "***"]]
    assert (meta["settings"]["public_headers"] == [["X-Trace", PUBLIC]]
            and meta["settings"]["api_key"] == "***")
    assert any(PUBLIC in r["text"] for r in records), "the public header's value was not kept"
    assert any(r["server_timing"].get(PUBLIC) == 2.0 for r in records)
