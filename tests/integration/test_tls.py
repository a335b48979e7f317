"""HTTPS with keep-alive: every request on a reused TLS connection succeeds, and the records match
what the server saw (issue "Real targets", item 1: the idle-connection check peeked with
``recv(1, MSG_PEEK)``, which an SSL socket refuses, so every second request failed)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import httpx
import pytest

from fourfold.client.factory import make_http_client
from tests.conftest import REPO, only_run_dir, preflight_requests, read_jsonl, run_locust

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def tls_server(tmp_path_factory):
    if shutil.which("openssl") is None:
        pytest.skip("openssl is needed to make the test certificate")
    base = tmp_path_factory.mktemp("tls")
    cert, key = base / "cert.pem", base / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes",
                    "-keyout", str(key), "-out", str(cert),
                    "-days", "1", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
                   check=True, capture_output=True, timeout=60)
    server = subprocess.Popen([sys.executable, str(REPO / "tests" / "tls_sse_server.py"),
                               str(cert), str(key)], stdout=subprocess.PIPE, text=True)
    try:
        line = server.stdout.readline().strip()           # type: ignore[union-attr]
        assert line.startswith("listening "), line
        yield line.split()[-1]
    finally:
        server.kill()
        server.wait(10)


def _stats(url: str) -> dict[str, int]:
    return httpx.get(f"{url}/stats", verify=False, timeout=10).json()


def test_sequential_requests_reuse_one_tls_connection(tls_server):
    before = _stats(tls_server)
    client = make_http_client(tls_server, insecure=True)
    try:
        for _ in range(6):
            response = client.post("/v1/chat/completions",
                                   json={"model": "m", "stream": True, "messages": []})
            assert response.status_code == 200 and response.text.endswith("data: [DONE]\n\n")
    finally:
        client.close()
    after = _stats(tls_server)
    assert after["requests"] - before["requests"] == 6
    # one connection for six (the stats GET has its own)
    assert after["connections"] - before["connections"] - 1 == 1


def test_an_l1_run_over_https_records_exactly_the_requests_the_server_saw(tls_server, tmp_path):
    before = _stats(tls_server)
    proc = run_locust(["-f", str(REPO / "locustfiles" / "l1_throughput.py"), "--headless", "-u", "3",
                       "-r", "3", "-t", "4s", "--host", tls_server, "--insecure", "--model", "m",
                       "--stop-timeout", "5", "--metrics-url", "off"], tmp_path)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    seen = _stats(tls_server)["requests"] - before["requests"]
    records = read_jsonl(only_run_dir(tmp_path) / "records.jsonl")
    classes = {r["error_class"] for r in records}
    assert classes == {"ok"}, classes
    assert len(records) + preflight_requests(only_run_dir(tmp_path)) == seen and seen >= 6   # + the preflight
    summary = json.loads((only_run_dir(tmp_path) / "summary.json").read_text())
    assert summary["total"]["failures"] == 0

    # request phases (issue 34, part 3): a new TLS connection's lookup, connect and handshake add up to its
    # connect time; every request was written and waited for, and those two fit in its time to the head
    new = [r for r in records if r["conn_reused"] is False]
    reused = [r for r in records if r["conn_reused"]]
    assert new and reused
    for r in new:
        phases = r["extra"]
        assert phases["tls_ms"] > 0 and phases["dns_ms"] >= 0 and phases["tcp_ms"] > 0
        connect = phases["dns_ms"] + phases["tcp_ms"] + phases["tls_ms"]
        assert connect == pytest.approx(r["connect_ms"], abs=0.5)
    for r in reused:
        assert not {"dns_ms", "tcp_ms", "tls_ms"} & r["extra"].keys()
    for r in records:
        assert r["extra"]["send_ms"] >= 0 and r["extra"]["wait_ms"] >= 0
        assert r["extra"]["send_ms"] + r["extra"]["wait_ms"] <= r["ttfb_ms"] + 0.01
