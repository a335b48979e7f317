"""The SLO gate in headless runs against the simulator: exit 0 / 3 / 2, verdicts, JUnit, workers."""

from __future__ import annotations

import json
import subprocess
import xml.etree.ElementTree as ET

import pytest

from tests.conftest import LOCUST, REPO, free_port, locust_env, only_run_dir, run_locust

pytestmark = pytest.mark.integration


def test_loose_slo_file_passes_with_exit_0_and_skips_quality_floors(tmp_path, locustfile):
    junit = tmp_path / "out" / "slo.xml"
    proc = run_locust(["-f", locustfile("l1_throughput.py"), "--headless", "-u", "3", "-r", "3", "-t", "4s",
                       "--sim-profile", "flat", "--max-tokens", "16", "--slo", str(REPO / "ci" / "slo.toml"),
                       "--junit", str(junit)], tmp_path)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-3000:]
    assert "fourfold SLO gate: all 3 met" in out
    assert "ttft_p95 <= 450 ms" in out and "similarity_mean >= 0.75" in out and "skipped" in out
    summary = json.loads((only_run_dir(tmp_path) / "summary.json").read_text())
    block = summary["slo"]
    assert block["passed"] is True and block["exit_code"] == 0 and block["source"].endswith("ci/slo.toml")
    assert [v["status"] for v in block["verdicts"]] == ["pass", "pass", "pass", "skipped"]
    assert summary["slo_ms"] == {"ttft_ms": 450.0, "e2e_ms": 1400.0}
    root = ET.parse(junit).getroot()
    assert root.get("tests") == "4" and root.get("failures") == "0" and root.get("skipped") == "1"


def test_tight_slo_on_master_and_two_workers_exits_3_with_verdicts_and_junit(tmp_path, locustfile):
    port = free_port()
    junit = tmp_path / "slo-junit.xml"
    common = ["-f", locustfile("l1_throughput.py"), "--sim-profile", "flat", "--max-tokens", "16"]
    master = subprocess.Popen(
        [*LOCUST, *common, "--master", "--master-bind-host", "127.0.0.1", "--master-bind-port", str(port),
         "--headless", "-u", "4", "-r", "4", "-t", "4s", "--expect-workers", "2",
         "--slo", "ttft_p50<=1ms,interruption_rate<0.5%,output_tps>=1", "--junit", str(junit)],
        cwd=tmp_path, env=locust_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    # the workers get no --slo and another --stall-ms: they count with the master's thresholds
    workers = [subprocess.Popen([*LOCUST, *common, "--worker", "--master-host", "127.0.0.1",
                                 "--master-port", str(port), "--stall-ms", "99"], cwd=tmp_path,
                                env=locust_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True) for _ in range(2)]
    try:
        master_out, _ = master.communicate(timeout=60)
        for worker in workers:
            worker.communicate(timeout=20)
    finally:
        for proc in (master, *workers):
            if proc.poll() is None:
                proc.kill()
    assert master.returncode == 3, master_out[-3000:]
    assert "fourfold SLO gate: 1 of 3 failed (exit code 3)" in master_out
    assert "cannot merge" not in master_out and "Traceback" not in master_out
    summary = json.loads((only_run_dir(tmp_path) / "summary.json").read_text())
    verdicts = {v["slo"]: v for v in summary["slo"]["verdicts"]}
    assert verdicts["ttft_p50<=1ms"]["status"] == "miss" and verdicts["ttft_p50<=1ms"]["measured"] > 1
    assert verdicts["interruption_rate<0.5%"]["status"] == "pass"
    assert verdicts["output_tps>=1"]["status"] == "pass"
    # the workers counted goodput with the master's thresholds: no request had its first token within 1 ms
    assert summary["slo_ms"] == {"ttft_ms": 1.0} and summary["stall_threshold_ms"] == 150.0
    assert summary["total"]["requests"] > 0 and summary["total"]["good"] == 0
    suite = ET.parse(junit).getroot().find("testsuite")
    assert suite is not None and suite.get("failures") == "1"
    failed = [case for case in suite.iter("testcase") if case.find("failure") is not None]
    assert [case.get("name") for case in failed] == ["ttft_p50 <= 1 ms"]
    message = failed[0].find("failure").get("message")
    assert message.startswith("ttft_p50 <= 1 ms missed at Aggregated: measured ") and message.endswith(" ms")


def test_malformed_slo_is_a_usage_error_with_exit_2(tmp_path, locustfile):
    """(tests/unit/test_slo.py covers every kind of malformed spec and file)"""
    spec, message = "ttft_p96<=450ms", "unknown metric 'ttft_p96'; valid metrics: latency"
    proc = run_locust(["-f", locustfile("l1_throughput.py"), "--headless", "-u", "1", "-t", "2s",
                       "--slo", spec], tmp_path, timeout=60)
    assert proc.returncode == 2, (proc.stdout + proc.stderr)[-2000:]
    assert "argument --slo:" in proc.stderr and message in proc.stderr
    assert not (tmp_path / "runs").exists()               # nothing ran
