"""--prometheus-port through a real Prometheus (issue 35, part 2): Debian's ``prometheus`` scrapes an L1
run on the embedded simulator once a second; at the last scrape after summary.json was written
(``fourfold_test_finished 1``, kept up by --prometheus-linger) PromQL's ``histogram_quantile(0.95, ...)``
of TTFT lies in the exported bucket that holds summary.json's TTFT p95, and the counters equal
summary.json's counts. Without the binary the test is skipped, except under CI (env ``CI`` set),
where it fails: ``.ci/run`` installs the package."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from fourfold.data import bundled
from fourfold.measure.histogram import DEFAULT_ALPHA
from fourfold.measure.promexport import bounds_ms
from tests.conftest import free_port, only_run_dir, run_locust

pytestmark = pytest.mark.integration


def prometheus_binary() -> str:
    found = shutil.which("prometheus") or next(
        (p for p in ("/usr/bin/prometheus", "/usr/local/bin/prometheus") if os.access(p, os.X_OK)), None)
    if found is None:
        message = "no prometheus binary: .ci/run installs Debian's `prometheus` (apt-get install prometheus)"
        if os.environ.get("CI"):
            pytest.fail(message + "; under CI this test must run")
        pytest.skip(message)
    return found


def get_json(url: str, timeout: float = 5.0) -> Any:
    with urllib.request.urlopen(url, timeout=timeout) as response:
        return json.loads(response.read())


def query(base: str, promql: str, at: float | None = None) -> list[dict[str, Any]]:
    params = {"query": promql, **({"time": repr(at)} if at is not None else {})}
    answer = get_json(f"{base}/api/v1/query?{urllib.parse.urlencode(params)}")
    assert answer["status"] == "success", answer
    return answer["data"]["result"]


@pytest.fixture
def prometheus(tmp_path: Path):
    """A Prometheus scraping 127.0.0.1:<port> every second: (its URL, the port fourfold serves on)."""
    binary = prometheus_binary()
    target, port = free_port(), free_port()
    config = tmp_path / "prometheus.yml"
    config.write_text("global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\n"
                      "scrape_configs:\n  - job_name: fourfold\n    static_configs:\n"
                      f"      - targets: ['127.0.0.1:{target}']\n")
    log = (tmp_path / "prometheus.log").open("w")
    proc = subprocess.Popen([binary, f"--config.file={config}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                             f"--web.listen-address=127.0.0.1:{port}", "--log.level=warn"],
                            stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None, (tmp_path / "prometheus.log").read_text()[-3000:]
            try:
                with urllib.request.urlopen(f"{base}/-/ready", timeout=2) as response:
                    if response.status == 200:
                        break
            except OSError:
                pass
            assert time.monotonic() < deadline, "prometheus did not get ready in 60 s"
            time.sleep(0.2)
        yield base, target
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=15)
        log.close()


def bucket_around(value_s: float) -> tuple[float, float]:
    """The exported bucket (lower, upper] in seconds that holds ``value_s``."""
    lower = 0.0
    for _, bound_ms in bounds_ms(DEFAULT_ALPHA):
        if value_s <= bound_ms / 1000:
            return lower, bound_ms / 1000
        lower = bound_ms / 1000
    return lower, float("inf")


def test_promql_p95_agrees_with_summary_json_within_the_bucket(tmp_path, locustfile, prometheus) -> None:
    base, port = prometheus
    # the baseline profile: TTFTs spread over several exported buckets (~70..270 ms), not one
    proc = run_locust(["-f", locustfile("l1_throughput.py"), "--headless", "-u", "8", "-r", "8", "-t", "8s",
                       "--max-tokens", "40", "--metrics-url", "off",
                       "--prometheus-port", str(port), "--prometheus-linger", "4"], tmp_path, timeout=120)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-3000:]
    assert f"Prometheus metrics at http://127.0.0.1:{port}/metrics" in out
    summary = json.loads((only_run_dir(tmp_path) / "summary.json").read_text())
    (group,) = [g for g in summary["groups"] if g["level"] == "l1"]
    assert group["requests"] >= 10, group["requests"]

    # the last scrape that saw the finished test: summary.json's figures exactly
    (series,) = query(base, "fourfold_test_finished[5m]")
    finished = [float(t) for t, v in series["values"] if v == "1"]
    assert finished, f"no scrape after summary.json was written: {series['values']}"
    at = finished[-1]
    running = [float(t) for t, v in series["values"] if v == "0"]
    assert running, "no scrape while the test ran"

    p95_query = 'histogram_quantile(0.95, sum by (le) (fourfold_ttft_seconds_bucket{level="l1"}))'
    (p95,) = query(base, p95_query, at)
    promql_s = float(p95["value"][1])
    summary_s = group["ttft_ms"]["p95"] / 1000
    lower, upper = bucket_around(summary_s)
    print(f"TTFT p95 over {group['ttft_ms']['count']} requests: PromQL {promql_s:.6f} s, "
          f"summary.json {summary_s:.6f} s, bucket ({lower:.6f}, {upper:.6f}]")
    assert lower <= promql_s <= upper

    def scalar(promql: str) -> float:
        (found,) = query(base, promql, at)
        return float(found["value"][1])

    assert scalar('sum(fourfold_requests_total{level="l1"})') == group["requests"]
    assert scalar('sum(fourfold_failed_requests_total{level="l1"})') == group["failures"]
    assert scalar('sum(fourfold_output_tokens_total{level="l1"})') == group["output_tokens_total"]
    assert scalar('sum(fourfold_ttft_seconds_count{level="l1"})') == group["ttft_ms"]["count"]
    assert scalar('sum(fourfold_e2e_seconds_sum{level="l1"})') == pytest.approx(
        group["e2e_ms"]["mean"] * group["e2e_ms"]["count"] / 1000, rel=1e-9)

    # the Grafana dashboard's queries are PromQL this Prometheus runs, and the load's panels have data
    board = json.loads(bundled("grafana", "fourfold.json").read_text())
    last_running = running[-1]
    for panel in board["panels"]:
        for target in panel["targets"]:
            expr = (target["expr"].replace("$level", ".*").replace("$scenario", ".*")
                    .replace("$__rate_interval", "5s"))
            found = query(base, expr, last_running)
            if panel["title"].split()[0] in ("TTFT", "ITL", "TPOT", "E2E", "Output", "Requests/s"):
                assert found, (panel["title"], expr)


def test_a_port_taken_stops_the_run_at_start_up(tmp_path, locustfile) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        proc = run_locust(["-f", locustfile("l1_throughput.py"), "--headless", "-t", "3s",
                           "--prometheus-port", str(port)], tmp_path, timeout=60)
    assert proc.returncode == 2, (proc.stdout + proc.stderr)[-3000:]
    assert f"fourfold: error: --prometheus-port {port}: cannot listen on 127.0.0.1:{port}" in proc.stderr
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())
