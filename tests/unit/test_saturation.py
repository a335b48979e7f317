"""The over-saturation detector (fourfold/gates/saturation.py) on single synthetic series: a growing queue
fires with a reason that says what grew, too early or too few requests is no verdict, a closed loop's
jump is not growth, Little's law between steps. Its false-alarm rate and power over many seeds are in
tests/calibration/test_saturation_calibration.py."""

from __future__ import annotations

import math
import random

import pytest

from fourfold.gates.saturation import (
    StepFigures,
    fit,
    judge_steps,
    judge_trend,
    min_judge_s,
    t_quantile_975,
)
from tests.calibration.latency import series


def test_a_growing_queue_fires_with_the_rise_in_the_reason():
    """Latency 100 ms + 50 ms per second (an open loop 5 % over capacity with 1 s answers); every seed
    fires (tests/calibration/test_saturation_calibration.py)."""
    points = series(7, growth_ms_s=50.0)
    verdict = judge_trend(points, 8.0, 5.0)
    assert verdict.saturated and verdict.judged
    assert verdict.reason.startswith("over-saturated: TTFT rose ")
    first, last = (float(v) for v in verdict.reason.split("rose ")[1].split(" ms")[0].split(" -> "))
    # the fitted line from the window's first arrival (~2.7 s) to its last (~8 s): ~235 -> ~500 ms
    assert 150 < first < 330 and 380 < last < 650 and "95% CI [+" in verdict.reason


def test_in_flight_samples_must_grow_too():
    points = series(3, growth_ms_s=80.0)
    growing = [(t / 10, 4 + t) for t in range(100)]
    steady = [(t / 10, 4 + (t % 3)) for t in range(100)]
    verdict = judge_trend(points, 10.0, 5.0, in_flight=growing, what="TTFT from arrival")
    assert verdict.saturated and "requests in flight and growing" in verdict.reason
    assert verdict.reason.startswith("over-saturated: TTFT from arrival rose")
    quiet = judge_trend(points, 10.0, 5.0, in_flight=steady)
    assert not quiet.saturated and "not growing" in quiet.reason


def test_too_early_or_too_few_requests_is_no_verdict():
    points = series(1, growth_ms_s=200.0)
    early = judge_trend(points, 4.0, 5.0)
    assert not early.saturated and not early.judged and "judged from 5 s" in early.reason
    few = judge_trend(series(1, rate=3.0, growth_ms_s=200.0), 10.0, 5.0)
    assert not few.saturated and not few.judged and "judged from 30" in few.reason


def test_the_closed_loop_jump_at_a_step_start_is_not_growth():
    """Users doubled against a queue: TTFT jumps in the first second, then holds: the first third of the
    step is left out, so no alarm."""
    rng = random.Random(5)
    points = [(t / 20, (100.0 if t < 20 else 400.0) * math.exp(rng.gauss(0, 0.2))) for t in range(200)]
    assert not any(judge_trend([p for p in points if p[0] <= s], s, 5.0).saturated for s in range(5, 11))


def test_between_steps_little_law():
    healthy = judge_steps(StepFigures(4, 100, 400.0, 55.0), StepFigures(8, 200, 790.0, 57.0))
    assert healthy.judged and not healthy.saturated and "not past saturation" in healthy.reason
    past = judge_steps(StepFigures(4, 100, 400.0, 55.0), StepFigures(8, 100, 412.0, 290.0))
    assert past.saturated
    assert past.reason == ("past saturation: users 4 -> 8 (x2.0) but output tokens/s 400 -> 412 (+3 %) while "
                           "TTFT p50 rose 55 -> 290 ms (x5.3): the added users wait in the server's queue "
                           "(Little's law)")
    # 2 -> 48 users against 4 slots: throughput doubled, far less than the users' x24
    assert judge_steps(StepFigures(2, 50, 200.0, 55.0), StepFigures(48, 100, 400.0, 2500.0)).saturated
    # throughput flat but TTFT flat too (a server that slows every stream instead of queueing): not this
    assert not judge_steps(StepFigures(4, 100, 400.0, 55.0), StepFigures(8, 100, 400.0, 60.0)).saturated
    assert not judge_steps(StepFigures(4, 5, 400.0, 55.0), StepFigures(8, 100, 400.0, 300.0)).judged
    assert not judge_steps(StepFigures(8, 100, 400.0, 55.0), StepFigures(10, 100, 400.0, 300.0)).judged


def test_fit_and_t_quantile():
    trend = fit([0.0, 1.0, 2.0, 3.0], [1.0, 3.0, 5.0, 7.0])
    assert trend is not None and trend.slope == pytest.approx(2.0) and trend.low == pytest.approx(2.0)
    assert fit([1.0, 1.0, 1.0], [1.0, 2.0, 3.0]) is None and fit([1.0], [2.0]) is None
    assert t_quantile_975(30) == pytest.approx(2.042, abs=0.002)
    assert t_quantile_975(10) == pytest.approx(2.228, abs=0.005)
    assert min_judge_s(6.0) == 5.0 and min_judge_s(30.0) == 10.0
