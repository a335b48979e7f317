"""Server telemetry end to end: real headless L1 runs against the simulator, whose /metrics gives
DCGM_FI_DEV_MEM_COPY_UTIL following its tokens/s (baseline <= 42 %, candidate <= 92 %). The SLO
gate judges it live, `fourfold check` judges it after, and `fourfold compare` shows it as rows."""

from __future__ import annotations

import csv
import json

import pytest

from fourfold.cli import main as cli_main
from tests.conftest import REPO, only_run_dir, run_locust

pytestmark = pytest.mark.integration
SLO = "gpu_mem_bw_util_max<85%"


def _run(base, profile: str, *extra: str):
    base.mkdir()
    proc = run_locust(["-f", str(REPO / "locustfiles" / "l1_throughput.py"), "--headless", "-u", "16",
                       "-r", "16", "-t", "8s", "--max-tokens", "128", "--sim-profile", profile, *extra], base)
    return proc, only_run_dir(base)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    base = tmp_path_factory.mktemp("telemetry")
    return (_run(base / "baseline", "baseline", "--slo", SLO),
            _run(base / "candidate", "candidate", "--slo", SLO))


def test_the_live_gate_misses_the_candidate_s_memory_bandwidth_with_its_measured_value(runs):
    (base_proc, base_run), (proc, run) = runs
    assert base_proc.returncode == 0, (base_proc.stdout + base_proc.stderr)[-3000:]
    assert proc.returncode == 3, (proc.stdout + proc.stderr)[-3000:]
    assert "gpu_mem_bw_util_max < 85 %  server" in proc.stdout and "MISSED" in proc.stdout
    summary = json.loads((run / "summary.json").read_text())
    [verdict] = summary["slo"]["verdicts"]
    measured = summary["server_metrics"]["metrics"]["server.mem_bw_util_pct"]["max"]
    assert verdict["status"] == "miss" and verdict["measured"] == pytest.approx(measured / 100)
    assert 85 < measured <= 92
    assert summary["server_metrics"]["metrics_urls"][0].endswith("/metrics")
    base = json.loads((base_run / "summary.json").read_text())
    assert base["slo"]["verdicts"][0]["status"] == "pass"
    assert base["server_metrics"]["metrics"]["server.mem_bw_util_pct"]["max"] <= 42
    assert cli_main(["check", str(run)]) == 3 and cli_main(["check", str(base_run)]) == 0


def test_compare_shows_more_memory_bandwidth_on_the_candidate(runs, tmp_path):
    (_, base_run), (_, run) = runs
    assert cli_main(["compare", str(base_run), str(run), "--out", str(tmp_path), "--no-html"]) == 0
    with open(tmp_path / "report.csv", encoding="utf-8") as fh:
        rows = {row["metric"]: row for row in csv.DictReader(fh)}
    mean = rows["telemetry.server.mem_bw_util_pct.mean"]
    assert float(mean["candidate_value"]) > float(mean["baseline_value"]) + 20
    # one run a side: no verdict on a row of runs (its interval is shown), or too few effective samples
    assert (mean["verdict"], mean["why"][:12]) in (("inconclusive", "1 run a side"),
                                                   ("too few", mean["why"][:12]))
    top = rows["telemetry.server.mem_bw_util_pct.max"]
    assert (float(top["candidate_value"]) > 85 >= 42 >= float(top["baseline_value"])
            and top["verdict"] == "n/a")
    assert "server: memory-bandwidth util mean" in (tmp_path / "report.md").read_text(encoding="utf-8")
    # the simulated GPU's power follows its utilisation (90 W idle, 700 W at 100 %)
    power = rows["telemetry.server.power_w.mean"]
    assert power["unit"] == "W" and 90 <= float(power["baseline_value"]) <= 700
    base_util = float(rows["telemetry.server.gpu_util_pct.mean"]["baseline_value"])
    assert float(power["baseline_value"]) == pytest.approx(90 + 610 * base_util / 100, rel=0.02)


def test_repeated_metrics_urls_are_each_sampled_and_a_failing_one_is_said_once(tmp_path):
    refused = ["http://127.0.0.1:9/metrics", "http://127.0.0.1:9/dcgm"]       # the discard port: refused
    proc, run = _run(tmp_path / "urls", "flat", "--metrics-url", refused[0], "--metrics-url", refused[1])
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-3000:]
    for url in refused:
        assert out.count(f"server metrics from {url}:") == 1         # once, though sampled every second
    block = json.loads((run / "summary.json").read_text())["server_metrics"]
    assert block["metrics_urls"] == refused and sorted(block["errors"]) == sorted(refused)
