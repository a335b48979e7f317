"""The server-metrics sampler against real tiny HTTP servers on 127.0.0.1: several --metrics-url
merged into one row (the first URL listed wins), errors kept per URL and logged once (parsing the
option is in tests/unit/test_sampler.py)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from fourfold.levels.telemetry_sampler import Sampler

pytestmark = pytest.mark.integration
ENGINE = "vllm:num_requests_running 7\nvllm:kv_cache_usage_perc 0.5\nDCGM_FI_DEV_MEM_COPY_UTIL 11\n"
DCGM = "DCGM_FI_DEV_GPU_UTIL{gpu=\"0\"} 97\nDCGM_FI_DEV_MEM_COPY_UTIL{gpu=\"0\"} 80\n"


def _serve(body: str | None) -> Iterator[str]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            data = (body or "no such page").encode()
            self.send_response(200 if body is not None else 404)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/metrics"
    server.shutdown()
    server.server_close()


@pytest.fixture
def engine() -> Iterator[str]:
    yield from _serve(ENGINE)


@pytest.fixture
def dcgm() -> Iterator[str]:
    yield from _serve(DCGM)


@pytest.fixture
def missing() -> Iterator[str]:
    yield from _serve(None)


def test_two_sources_merge_into_one_row_and_the_first_url_listed_wins(engine, dcgm):
    sampler = Sampler([engine, dcgm])
    row = sampler.sample_once()
    assert row["server.running"] == 7 and row["server.kv_cache_usage_pct"] == 50.0
    assert row["server.gpu_util_pct"] == 97            # only the exporter gives it
    assert row["server.mem_bw_util_pct"] == 11         # both give it: the engine's URL came first
    assert Sampler([dcgm, engine]).sample_once()["server.mem_bw_util_pct"] == 80
    summary = sampler.stop()
    assert summary["metrics_urls"] == [engine, dcgm] and summary["errors"] == {}
    assert summary["metrics"]["server.gpu_util_pct"]["max"] == 97


def test_a_target_without_metrics_is_said_once_and_kept_per_url(engine, missing, caplog):
    sampler = Sampler([missing, engine])
    with caplog.at_level(logging.WARNING, logger="fourfold"):
        rows = [sampler.sample_once() for _ in range(4)]
    assert all(row["server.running"] == 7 for row in rows)        # the other URL still counts
    said = [r.getMessage() for r in caplog.records if missing in r.getMessage()]
    assert len(said) == 1 and "HTTP 404" in said[0]
    assert sampler.stop()["errors"] == {missing: f"HTTP 404 from {missing}"}
