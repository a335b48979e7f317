"""Bad input from the target is a classified record, never a crash (transport + stream + locust)."""

from __future__ import annotations

import collections
import json
import time

import pytest

from fourfold.client.dialects import RequestOptions, get_dialect
from fourfold.client.stream import send
from fourfold.levels.base import make_client
from fourfold.levels.options import Settings
from fourfold.measure.record import RequestRecord
from fourfold.workloads.items import Item
from tests.conftest import only_run_dir, preflight_requests, read_jsonl, run_locust
from tests.faulty_server import FaultyServer

pytestmark = pytest.mark.integration
ITEM = Item(id="hello", messages=({"role": "user", "content": "Say hello."},))
EXPECTED = {
    "ok": "ok",
    "malformed_json": "malformed_stream",
    "drop_mid_stream": "interrupted",
    "http_500": "http_5xx",
    "http_429": "rate_limited",
    "no_done": "ok",               # a finish reason, then a clean end: complete without [DONE]
    "no_finish": "interrupted",     # a clean end with no finish reason
    "context_length": "context_length",
}


@pytest.fixture
def server():
    srv = FaultyServer()
    yield srv
    srv.stop()


@pytest.mark.parametrize("fault", sorted(EXPECTED))
def test_each_fault_is_classified(server, fault):
    client = make_client(Settings(read_timeout_s=5), server.url)
    dialect = get_dialect("openai")
    request = dialect.build(ITEM, RequestOptions())
    request.headers["x-fault"] = fault
    record = send(client, dialect, request, RequestRecord())
    assert record.error_class == EXPECTED[fault], record.error_detail
    if fault == "ok":
        assert record.text == "Hello world" and record.output_tokens == 2 and record.terminal
    if fault == "malformed_json":
        assert record.text == "Hello world"          # the good events around the bad one still count
    if fault == "http_429":
        assert record.status == 429 and record.extra["retry_after_s"] == 2.0
    if fault == "drop_mid_stream":
        assert record.ttft_ms is not None and not record.terminal


def test_connection_refused_is_a_connect_error():
    client = make_client(Settings(connect_timeout_s=2), "http://127.0.0.1:9")
    dialect = get_dialect("openai")
    record = send(client, dialect, dialect.build(ITEM, RequestOptions()), RequestRecord())
    assert record.error_class == "connect_error" and record.status == 0


def test_a_locust_run_against_a_misbehaving_target_keeps_every_record(server, tmp_path, locustfile):
    proc = run_locust(["-f", locustfile("l1_throughput.py"), "--headless", "-u", "3", "-r", "3", "-t", "5s",
                       "--host", server.url, "--warmup-requests", "0", "--read-timeout", "5",
                       "--metrics-url", "off"], tmp_path)
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert proc.returncode == 1        # Locust's own exit code on failed requests: the run went on
    records = read_jsonl(only_run_dir(tmp_path) / "records.jsonl")
    seen = server.seen[preflight_requests(only_run_dir(tmp_path)):]     # the preflight's first: no record
    assert len(records) == len(seen) > len(EXPECTED)            # one record per request the server saw
    got = collections.Counter(r["error_class"] for r in records)
    want = collections.Counter(EXPECTED[f] for f in seen)
    cancelled = got.pop("cancelled", 0)       # in flight when the run stopped: kept, not classified
    assert cancelled <= 3                     # at most one per user
    assert all(got[k] <= want[k] and got[k] >= want[k] - cancelled for k in want)
    assert sum(got.values()) + cancelled == sum(want.values())
    summary = json.loads((only_run_dir(tmp_path) / "summary.json").read_text())
    assert summary["total"]["errors"]["rate_limited"] == got["rate_limited"]
    assert summary["total"]["requests"] == len(records) - cancelled


def test_a_per_class_error_rate_gates_a_run(server, tmp_path, locustfile):
    """``--slo error_rate.rate_limited<1%``: the gate reads that class's share of the summary's requests,
    the same figure as the report's ``error_rate.rate_limited`` row; a miss exits 3."""
    proc = run_locust(["-f", locustfile("l1_throughput.py"), "--headless", "-u", "2", "-r", "2", "-t", "4s",
                       "--host", server.url, "--warmup-requests", "0", "--read-timeout", "5",
                       "--metrics-url", "off",
                       "--slo", "error_rate.rate_limited<1%,error_rate.connect_error<1%"], tmp_path)
    assert proc.returncode == 3, proc.stderr[-3000:]
    summary = json.loads((only_run_dir(tmp_path) / "summary.json").read_text())
    total = summary["total"]
    limited, connect = summary["slo"]["verdicts"]
    assert limited["status"] == "miss" and connect["status"] == "pass" and connect["measured"] == 0.0
    assert limited["measured"] == pytest.approx(total["errors"]["rate_limited"] / total["requests"])
    assert limited["measured"] > 0.01


# ---- what real targets were seen to do (fourfold#20) ----------------------------------------------

def _send(server, fault: str, read_timeout_s: float = 5, client=None):  # noqa: ANN001, ANN202
    client = client or make_client(Settings(read_timeout_s=read_timeout_s), server.url)
    dialect = get_dialect("openai")
    request = dialect.build(ITEM, RequestOptions())
    request.headers["x-fault"] = fault
    return send(client, dialect, request, RequestRecord())


@pytest.mark.timing
@pytest.mark.parametrize("fault, expected", [("header_drip", "ttft_timeout"), ("ping_only", "ttft_timeout"),
                                             ("ping_after_token", "read_timeout")])
def test_a_stream_whose_bytes_carry_no_content_times_out(server, fault, expected):
    """Bytes keep coming (a header line every 0.2 s, ': ping' every 0.1 s) but no content: the
    read timeout (1 s) counts content, so the request ends by itself (it waited for ever before)."""
    started = time.monotonic()
    record = _send(server, fault, read_timeout_s=1)
    elapsed = time.monotonic() - started
    assert record.error_class == expected, record.error_detail
    assert 0.9 < elapsed < 2.5
    assert "no content for 1 s" in record.error_detail
    if fault == "ping_after_token":
        assert record.text == "Hello" and record.ttft_ms is not None


def test_a_finish_reason_and_a_clean_end_without_done_is_a_complete_answer(server):
    record = _send(server, "no_done")
    assert (record.error_class, record.terminal, record.finish_reason) == ("ok", True, "stop")
    assert record.extra["no_terminal_event"] is True and record.ttft_ms is not None
    record = _send(server, "no_finish")
    assert (record.error_class, record.terminal) == ("interrupted", False)
    assert "no_terminal_event" not in record.extra


@pytest.mark.parametrize("value, reported", [
    ("-5", -5), ("1e29", "1e+29"), ("100000000000000000000000000000", "100000000000000000000000000000"),
    ('"2"', "2"), ("2.5", "2.5"), ("true", "True"), ("NaN", "nan"), ("85", 85), ("null", None)])
def test_implausible_usage_is_flagged_and_chunks_are_counted(server, value, reported):
    record = _send(server, f"usage={value}")
    assert record.error_class == "ok" and record.text == "Hello world"
    assert (record.output_tokens, record.output_tokens_source) == (2, "chunks")
    assert record.extra.get("usage_implausible") == reported
    json.loads(record.to_json())        # a NaN or a 30-digit count must not make the line unwritable


@pytest.mark.parametrize("value, tokens", [("2", 2), ("84", 84), ("2.0", 2)])
def test_plausible_usage_is_believed(server, value, tokens):
    record = _send(server, f"usage={value}")
    assert (record.output_tokens, record.output_tokens_source) == (tokens, "usage")
    assert "usage_implausible" not in record.extra


def test_a_redirect_is_its_own_class_with_the_location(server):
    record = _send(server, "redirect")
    assert (record.error_class, record.status) == ("redirect", 301)
    assert ("https://api.example.com/v1/chat/completions" in record.error_detail
            and "--host" in record.error_detail)


def test_an_unsolicited_second_response_is_a_protocol_error_and_the_connection_is_dropped(server):
    client = make_client(Settings(read_timeout_s=5), server.url)
    first = _send(server, "unsolicited", client=client)
    assert first.error_class == "malformed_stream" and first.text == "Hello world"
    assert first.extra["unsolicited_bytes"] > 100 and "HTTP/1.1 200 OK" in first.error_detail
    second = _send(server, "ok", client=client)
    assert second.error_class == "ok" and second.conn_reused is False  # a new connection, not the spoiled one
    assert "unsolicited_before" not in second.extra
    assert server.seen == ["unsolicited", "ok"]        # one record per request the server saw


def test_an_unsolicited_response_on_an_idle_connection_is_dropped_and_counted(server):
    client = make_client(Settings(read_timeout_s=5), server.url)
    first = _send(server, "unsolicited_late", client=client)
    assert first.error_class == "ok"
    time.sleep(0.3)                                  # the second answer arrives while the connection idles
    second = _send(server, "ok", client=client)
    assert second.error_class == "ok" and second.text == "Hello world"
    assert second.conn_reused is False and second.extra["unsolicited_before"] > 100
    assert server.seen == ["unsolicited_late", "ok"]
