"""L1 through real locust processes: local headless run and master + 2 workers."""

from __future__ import annotations

import csv
import json
import re
import subprocess

import pytest

from tests.conftest import LOCUST, free_port, locust_env, only_run_dir, read_jsonl, run_locust

pytestmark = pytest.mark.integration


@pytest.mark.timing
def test_headless_l1_without_host_runs_the_simulator_and_writes_a_run(tmp_path, locustfile):
    proc = run_locust(["-f", locustfile("l1_throughput.py"), "--headless", "-u", "4", "-r", "4", "-t", "8s",
                       "--sim-profile", "flat", "--max-tokens", "24",
                       "--csv", str(tmp_path / "loc")], tmp_path)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-3000:]
    assert "fourfold LLM summary" in out
    run = only_run_dir(tmp_path)
    meta = json.loads((run / "meta.json").read_text())
    summary = json.loads((run / "summary.json").read_text())
    records = read_jsonl(run / "records.jsonl")
    measured = [r for r in records if not r["warmup"] and r["error_class"] != "cancelled"]
    assert meta["level"] == "l1" and meta["target"].startswith("http://127.0.0.1:")
    assert len([r for r in records if r["warmup"]]) == 4            # one warm-up per user
    assert summary["total"]["requests"] == len(measured) > 8
    assert summary["total"]["failures"] == 0
    # every measured request is a full 24-token answer from the flat profile (ttft 50 ms, itl 10 ms)
    assert {r["output_tokens"] for r in measured} == {24}
    assert all(r["error_class"] == "ok" and r["terminal"] for r in measured)
    ttft = summary["total"]["ttft_ms"]
    assert 49.0 <= ttft["p50"] <= 60.0
    assert 9.0 <= summary["total"]["itl_ms"]["p50"] <= 11.5
    assert summary["total"]["output_tps"] > 50
    # Locust's own table counts the same requests under one LLM row; Aggregated is not polluted
    with open(tmp_path / "loc_stats.csv") as fh:
        rows = {row["Name"]: row for row in csv.DictReader(fh)}
    assert int(rows["l1:saturation"]["Request Count"]) == len(measured)
    assert int(rows["Aggregated"]["Request Count"]) == len(measured)
    # the sampler read the simulator's /metrics
    assert "server.running" in summary["server_metrics"]["metrics"]
    assert (run / "server_metrics.json").exists()


def test_master_and_two_workers_merge_every_record_exactly(tmp_path, locustfile):
    port = free_port()
    common = ["-f", locustfile("l1_throughput.py"), "--sim-profile", "flat", "--max-tokens", "16"]
    master = subprocess.Popen(
        [*LOCUST, *common, "--master", "--master-bind-host", "127.0.0.1", "--master-bind-port", str(port),
         "--headless", "-u", "6", "-r", "6", "-t", "8s", "--expect-workers", "2"],
        cwd=tmp_path, env=locust_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    workers = [subprocess.Popen([*LOCUST, *common, "--worker", "--master-host", "127.0.0.1",
                                 "--master-port", str(port)],
                                cwd=tmp_path, env=locust_env(), stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True) for _ in range(2)]
    try:
        master_out, _ = master.communicate(timeout=90)
        worker_outs = [w.communicate(timeout=30)[0] for w in workers]
    finally:
        for proc in (master, *workers):
            if proc.poll() is None:
                proc.kill()
    assert master.returncode == 0, master_out[-3000:]
    seen = [int(m.group(1)) for out in worker_outs
            for m in re.finditer(r"fourfold worker: (\d+) records measured", out)]
    assert len(seen) == 2 and all(n > 0 for n in seen), worker_outs
    run = only_run_dir(tmp_path)
    records = read_jsonl(run / "records.jsonl")
    summary = json.loads((run / "summary.json").read_text())
    assert len(records) == sum(seen)                       # every record reached the master's run log
    measured = [r for r in records if not r["warmup"] and r["error_class"] != "cancelled"]
    assert summary["total"]["requests"] == len(measured)   # merged histograms count each exactly once
    assert summary["total"]["ttft_ms"]["count"] == len(measured)
    assert summary["total"]["output_tokens_total"] == sum(r["output_tokens"] for r in measured)
    assert len({r["request_id"] for r in records}) == len(records)
