"""Cost and energy through a real run (issue 35, part 3): an L1 run on the embedded simulator with a
price per hour and API prices; summary.json's cost block from its own figures, the simulated GPU's power
per token, and the live gate failing a cost ceiling (exit 3) with the measured value."""

from __future__ import annotations

import json

import pytest

from tests.conftest import only_run_dir, run_locust

pytestmark = pytest.mark.integration


def test_the_cost_block_and_its_gate(tmp_path, locustfile):
    proc = run_locust(["-f", locustfile("l1_throughput.py"), "--headless", "-u", "4", "-r", "4", "-t", "4s",
                       "--sim-profile", "flat", "--max-tokens", "40", "--price-per-hour", "100",
                       "--price-per-1m-input", "1", "--price-per-1m-output", "4",
                       "--slo", "cost_per_1m_output<0.01usd, joules_per_token<1000"], tmp_path)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 3, out[-3000:]
    summary = json.loads((only_run_dir(tmp_path) / "summary.json").read_text())
    total, cost = summary["total"], summary["cost"]
    expected = (100 * total["wall_s"] / 3600
                + (total["prompt_tokens_total"] * 1 + total["output_tokens_total"] * 4) / 1e6)
    assert cost["cost_usd"] == pytest.approx(expected, abs=1e-6) and total["prompt_tokens_total"] > 0
    per_1m = expected / total["output_tokens_total"] * 1e6
    assert cost["cost_per_1m_output"] == pytest.approx(per_1m, abs=1e-6)
    assert cost["cost_per_request"] == pytest.approx(expected / total["ok"], abs=1e-6)
    power = summary["server_metrics"]["metrics"]["server.power_w"]["mean"]
    assert 90 <= power <= 700 and cost["power_w_mean"] == power
    assert cost["joules_per_token"] == pytest.approx(power * total["wall_s"] / total["output_tokens_total"],
                                                     abs=1e-4)
    verdicts = {v["slo"]: v for v in summary["slo"]["verdicts"]}
    assert verdicts["cost_per_1m_output<0.01"]["status"] == "miss"
    assert verdicts["cost_per_1m_output<0.01"]["measured"] == cost["cost_per_1m_output"]
    assert verdicts["joules_per_token<1000"]["status"] == "pass"
    assert "cost_per_1m_output < 0.01" in out
