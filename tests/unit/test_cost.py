"""What tokens cost (issue 35, part 3): summary.json's cost block from the run's figures, by hand; the SLO
grammar's cost clauses; the report's rows carry output tokens/s's spread over."""

from __future__ import annotations

import numpy as np
import pytest

from fourfold.errors import SLOSpecError
from fourfold.gates.slo import parse_spec
from fourfold.gates.slo_verdict import evaluate
from fourfold.measure.cost import Prices, cost_block, cost_usd, joules_per_token
from fourfold.reports.costrows import cost_per_1m_output, energy_per_token
from fourfold.reports.rows import CompareSettings, GroupSample

SUMMARY = {"total": {"wall_s": 90.0, "ok": 200, "prompt_tokens_total": 400_000,
                     "output_tokens_total": 50_000},
           "server_metrics": {"metrics": {"server.power_w": {"mean": 450.0, "max": 700.0},
                                          "nvidia_smi.power_w": {"mean": 1.0}}},
           "sessions": {"total": {"ended": 40}}}


def test_the_cost_block_by_hand():
    block = cost_block(SUMMARY, Prices(per_hour=8.0, per_1m_input=0.5, per_1m_output=2.0))
    assert block is not None
    cost = 8.0 * 90 / 3600 + (400_000 * 0.5 + 50_000 * 2.0) / 1e6           # 0.2 + 0.3 USD
    assert block["cost_usd"] == pytest.approx(cost) == 0.5
    assert block["cost_per_1m_output"] == pytest.approx(cost / 50_000 * 1e6)     # 10 USD
    assert block["cost_per_request"] == pytest.approx(cost / 200)
    assert block["cost_per_session"] == pytest.approx(cost / 40)
    # the target's power (not nvidia-smi's) over the wall time, per output token
    assert block["power_w_mean"] == 450.0 and block["joules_per_token"] == pytest.approx(450 * 90 / 50_000)
    assert block["tokens_per_joule"] == pytest.approx(50_000 / (450 * 90), abs=1e-4)
    assert cost_block({"total": SUMMARY["total"]}, Prices()) is None        # no price, no power: no block
    power_only = cost_block(SUMMARY, Prices())
    assert power_only is not None and power_only["cost_usd"] is None and power_only["joules_per_token"] > 0
    assert Prices.of({"price_per_hour": 3, "price_per_1m_output": 1.5}) == Prices(3.0, 0.0, 1.5)
    assert cost_usd(Prices(per_hour=1.0), None, 10, 10) is None and joules_per_token(None, 90, 10) is None


def test_cost_clauses_gate_the_run():
    slos = parse_spec("cost_per_1m_output<=12usd, joules_per_token<0.5J, cost_per_session<0.001")
    prices = Prices(per_hour=8.0, per_1m_input=0.5, per_1m_output=2.0)
    summary = {**SUMMARY, "cost": cost_block(SUMMARY, prices)}
    verdicts = evaluate(slos, summary)
    assert [v.status for v in verdicts] == ["pass", "miss", "miss"]
    assert verdicts[1].measured == pytest.approx(0.81) and "0.81 J" in verdicts[1].message
    assert evaluate(parse_spec("cost_per_1m_output<1"), {"total": {}})[0].status == "no_data"
    for bad, says in (("cost_per_1m_output<2ms", "is in USD"), ("joules_per_token@l1:x<1", "drop @l1:x")):
        with pytest.raises(SLOSpecError, match=says):
            parse_spec(bad)


def test_the_report_rows_carry_throughputs_spread_over():
    rng, s = np.random.default_rng(1), CompareSettings(resamples=200)
    series = np.full(120, 500.0) + np.random.default_rng(2).normal(0, 20, 120)    # output tokens per second
    g = GroupSample(requests=300, output_tokens_total=float(series.sum()), wall_s=120.0, tokens_per_s=series,
                    prompt_tokens_total=0.0, prices=Prices(per_hour=36.0),
                    telemetry={"server.power_w": np.array([400.0, 500.0])})
    cost = cost_per_1m_output(g, rng, s)
    tps = series.sum() / 120
    assert cost is not None and cost.value == pytest.approx(36 / 3600 / tps * 1e6)
    assert cost.replicates is not None
    assert abs(np.median(cost.replicates) - cost.value) < 0.02 * cost.value
    energy = energy_per_token(g, rng, s)
    assert energy is not None and energy.value == pytest.approx(450 / tps)
    free = GroupSample(output_tokens_total=1.0, wall_s=1.0, prices=Prices())
    assert cost_per_1m_output(free, rng, s) is None
