"""Bad input from the target is a classified record, never a crash (transport + stream + locust)."""

from __future__ import annotations

import collections
import json

import pytest

from fourfold.levels.base import make_client
from fourfold.levels.options import Settings
from fourfold.measure.dialects import RequestOptions, get_dialect
from fourfold.measure.items import Item
from fourfold.measure.record import RequestRecord
from fourfold.measure.stream import send
from tests.conftest import only_run_dir, read_jsonl, run_locust
from tests.faulty_server import FaultyServer

pytestmark = pytest.mark.integration
ITEM = Item(id="hello", messages=({"role": "user", "content": "Say hello."},))
EXPECTED = {
    "ok": "ok",
    "malformed_json": "malformed_stream",
    "drop_mid_stream": "interrupted",
    "http_500": "http_5xx",
    "http_429": "rate_limited",
    "no_done": "interrupted",
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
    assert len(records) == len(server.seen) > len(EXPECTED)     # one record per request the server saw
    got = collections.Counter(r["error_class"] for r in records)
    want = collections.Counter(EXPECTED[f] for f in server.seen)
    cancelled = got.pop("cancelled", 0)       # in flight when the run stopped: kept, not classified
    assert cancelled <= 3                     # at most one per user
    assert all(got[k] <= want[k] and got[k] >= want[k] - cancelled for k in want)
    assert sum(got.values()) + cancelled == sum(want.values())
    summary = json.loads((only_run_dir(tmp_path) / "summary.json").read_text())
    assert summary["total"]["errors"]["rate_limited"] == got["rate_limited"]
    assert summary["total"]["requests"] == len(records) - cancelled
