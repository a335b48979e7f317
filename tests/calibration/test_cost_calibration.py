"""The cost and energy rows are claims too: on A/A comparisons they decide nothing in more than alpha of
the comparisons, and a version that serves fewer tokens per second (the same machine-hour and power
spread over fewer tokens) is found worse. Simulated runs (simulate.py) with a price per hour and a GPU
power series that follows the run's throughput, through fourfold compare's own code, the two rows as the
gate's family (``--gate cost_per_1m_output,joules_per_token``)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from fourfold.measure.cost import Prices
from fourfold.reports.compare import CompareSettings, GroupSample, adjust, compare_groups
from tests.calibration.simulate import ITEMS, NOISY, QUIET, Version, decided, simulate_run

SETTINGS = CompareSettings(resamples=400, gate=("cost_per_1m_output", "joules_per_token"))
ROWS = ("cost_per_1m_output", "joules_per_token")


def priced_run(v: Version, rng: np.random.Generator, levels: np.ndarray) -> GroupSample:
    """A simulated run on a $10/hour machine whose power (W) rises with its output tokens/s, sampled
    once a second with the sampler's noise."""
    g = simulate_run(v, rng, levels)
    g.prices = Prices(per_hour=10.0)
    tps = g.output_tokens_total / g.wall_s
    seconds = max(10, int(g.wall_s))
    g.telemetry = {"server.power_w": 300.0 + 0.2 * tps + rng.normal(0.0, 15.0, seconds)}
    return g


def compare_costs(base: Version, cand: Version, runs: int, rng: np.random.Generator):
    levels = rng.uniform(0.6, 0.9, ITEMS)
    b = [priced_run(base, rng, levels) for _ in range(runs)]
    c = [priced_run(cand, rng, levels) for _ in range(runs)]
    rows = adjust(compare_groups("l1:sim", b, c, SETTINGS), SETTINGS.alpha)
    return [r for r in rows if r.metric in ROWS]


@pytest.mark.parametrize("version, runs", [(NOISY, 2), (QUIET, 3)])
def test_a_a_cost_rows_false_positive_rate_is_at_most_alpha(version, runs):
    rng = np.random.default_rng(70 + runs)
    reps = 50
    alarms = 0
    for _ in range(reps):
        rows = compare_costs(version, version, runs, rng)
        assert {r.metric for r in rows} == set(ROWS) and all(r.gated for r in rows)
        alarms += bool(decided(rows))
    assert alarms / reps <= SETTINGS.alpha


def test_fewer_tokens_per_second_cost_more_per_token():
    """Every request 20 % slower per token (QUIET: runs differ ~1.5 %): each token holds the machine-hour and
    the power longer; with 3 runs a side both rows are found worse in >= 80 % of the comparisons."""
    rng = np.random.default_rng(8)
    slower = dataclasses.replace(QUIET, tpot_ms=QUIET.tpot_ms * 1.2, ttft_ms=QUIET.ttft_ms * 1.2)
    reps = 20
    found = {key: 0 for key in ROWS}
    for _ in range(reps):
        for row in compare_costs(QUIET, slower, 3, rng):
            found[row.metric] += row.verdict == "worse"
    assert all(n / reps >= 0.8 for n in found.values()), found
