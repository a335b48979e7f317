"""The capacity sweep's search (fourfold.gates.sweep): a fake target with a known capacity."""

from __future__ import annotations

import math

import pytest

from fourfold.cli.sweep import exit_code as sweep_exit_code
from fourfold.gates.slo import parse_spec
from fourfold.gates.sweep import (
    RatePoint,
    SearchPlan,
    bracket,
    find_knee,
    format_table,
    knee_metric,
    next_rate,
    rate_point,
    search,
)


def fake_target(capacity_rps: float, calls: list[float], *, saturate_above: float | None = None):
    def measure(rate: float) -> RatePoint:
        calls.append(rate)
        saturated = saturate_above is not None and rate > saturate_above
        passed = rate <= capacity_rps and not saturated
        return RatePoint(rate, passed, "" if passed else "miss", saturated=saturated,
                         latency_ms={"ttft_ms": {"p95": 100.0 if rate <= capacity_rps else 1000.0}})
    return measure


@pytest.mark.parametrize(("capacity", "start", "hint"), [
    (5.71, 8.6, 11.4),       # the probe overestimates (a tight SLO): the search goes down first
    (11.43, 8.6, 11.4),      # the probe's throughput is the capacity
    (40.0, 8.6, 11.4),       # the probe underestimates: the climb goes past its hint
    (0.9, 10.0, 12.0),       # ten times below the start
])
@pytest.mark.parametrize("tolerance", [0.10, 0.05])
def test_search_brackets_a_known_capacity_within_the_tolerance(capacity, start, hint, tolerance):
    calls: list[float] = []
    result = search(fake_target(capacity, calls), start, SearchPlan(tolerance=tolerance), upper_hint_rps=hint)
    low, high = result.bracket_rps
    assert result.converged, result.stopped
    assert low <= capacity < high
    assert (high - low) / low <= tolerance
    assert result.capacity_rps == low
    assert len(calls) <= SearchPlan().max_runs    # bounded: no fixed grid
    assert calls[-1] == high and calls.count(high) == 2          # the closing miss is confirmed once
    assert len(set(calls)) == len(calls) - 1                     # no other rate twice


def test_a_lone_noisy_miss_is_run_again_and_the_search_recovers():
    calls: list[float] = []
    clean = fake_target(11.43, [])

    def noisy(rate: float) -> RatePoint:        # the machine was busy during the third run only
        calls.append(rate)
        if len(calls) == 3:
            return RatePoint(rate, False, "ttft_p95 missed")
        return clean(rate)

    result = search(noisy, 8.3, SearchPlan(tolerance=0.1), upper_hint_rps=11.0)
    low, high = result.bracket_rps
    assert result.converged and low <= 11.43 < high, calls
    assert calls.count(calls[2]) == 2                            # the noisy rate was run again


def test_a_saturated_miss_is_not_confirmed():
    calls: list[float] = []
    search(fake_target(5.0, calls, saturate_above=5.0), 4.0, SearchPlan(tolerance=0.1), upper_hint_rps=5.0)
    assert len(set(calls)) == len(calls)


def test_search_never_runs_above_a_miss_and_stops_at_max_runs():
    calls: list[float] = []
    result = search(fake_target(11.0, calls, saturate_above=6.0), 8.0, SearchPlan(tolerance=0.01, max_runs=4),
                    upper_hint_rps=12.0)
    assert len(calls) == 4 and not result.converged and "4 runs" in result.stopped, calls
    assert calls[0] == 8.0 and all(rate < 8.0 for rate in calls[1:])      # saturated at 8: nothing higher
    low, high = result.bracket_rps
    assert low <= 6.0 < high


def test_every_rate_missing_ends_below_min_rps():
    calls: list[float] = []
    result = search(fake_target(0.001, calls), 4.0, SearchPlan(min_rps=0.1))
    assert result.capacity_rps is None and result.bracket_rps[0] == 0.0
    assert "every rate missed" in result.stopped
    assert min(calls) >= 0.1


def test_next_rate_steps():
    plan = SearchPlan(tolerance=0.1, growth=1.5)
    ok, miss = (lambda r: RatePoint(r, True)), (lambda r: RatePoint(r, False, "x"))
    assert next_rate([], 7.5, plan, 10.0) == (7.5, "")
    assert next_rate([ok(7.5)], 7.5, plan, 10.0)[0] == pytest.approx(11.0)     # just above the probe's rate
    assert next_rate([ok(12.0)], 7.5, plan, 10.0)[0] == pytest.approx(18.0)    # past it: by growth
    assert next_rate([miss(9.0)], 9.0, plan)[0] == pytest.approx(4.0)           # down by growth ** 2
    assert next_rate([ok(4.0), miss(9.0)], 9.0, plan)[0] == pytest.approx(6.0)  # geometric midpoint
    rate, why = next_rate([ok(10.0), miss(10.9), miss(10.9)], 9.0, plan)
    assert rate is None and "within 10 %" in why
    # a pass above a miss (noise) does not count: the bracket is below the lowest miss
    assert bracket([ok(4.0), miss(6.0), ok(8.0)]) == (4.0, 6.0)
    assert bracket([ok(4.0), miss(6.0), ok(6.0), miss(7.0)]) == (6.0, 7.0)    # either run passed: a pass
    assert next_rate([ok(10.0), miss(10.9)], 9.0, plan)[0] == 10.9              # the closing miss, again


def test_knee_is_where_ttft_p95_doubles():
    def point(rate: float, p95: float) -> RatePoint:
        return RatePoint(rate, True, latency_ms={"ttft_ms": {"p95": p95}})
    assert find_knee([point(4, 100), point(6, 150), point(8, 260), point(9, 150)]) == 6
    assert find_knee([]) is None
    # a server that slows streams instead of queueing: E2E climbs, TTFT does not
    flat_ttft = [RatePoint(r, True, latency_ms={"ttft_ms": {"p95": 100.0}, "e2e_ms": {"p95": e2e}})
                 for r, e2e in ((4.7, 717.0), (6.9, 1488.0), (10.3, 2711.0))]
    assert find_knee(flat_ttft) == 10.3
    assert find_knee(flat_ttft, metric=knee_metric(parse_spec("error_rate<1%,e2e_p95<=1.5s"))) == 4.7
    assert knee_metric(parse_spec("error_rate<1%")) == ("ttft_ms", "p95")
    assert knee_metric(parse_spec("itl_p99<=50ms")) == ("itl_ms", "p99")


SUMMARY = {
    "total": {"requests": 50, "error_rate": 0.0, "goodput_rps": 5.5,
              "ttft_ms": {"p50": 80.0, "p95": 120.0, "p99": 150.0},
              "itl_ms": {"p50": 20.0, "p95": 21.0, "p99": 22.0},
              "e2e_ms": {"p50": 700.0, "p95": 760.0, "p99": 800.0}},
    "groups": [],
    "l2": {"open_loop": {"sent_rps": 5.9, "completed_rps": 5.6, "target_kept_up": True,
                         "generator_kept_up": True}},
}


def test_rate_point_from_a_summary():
    point = rate_point(6.0, SUMMARY, parse_spec("ttft_p95<=300ms"))
    assert point.passed and point.reason == "" and point.achieved_rps == 5.6 and point.sent_rps == 5.9
    assert point.latency_ms["e2e_ms"]["p95"] == 760.0
    missed = rate_point(6.0, SUMMARY, parse_spec("ttft_p95<=100ms"))
    assert not missed.passed and "ttft_p95" in missed.reason
    saturated = dict(SUMMARY, l2={"open_loop": {"target_kept_up": False}})
    point = rate_point(6.0, saturated, parse_spec("ttft_p95<=300ms"))
    assert not point.passed and point.saturated and "saturated" in point.reason
    failing = dict(SUMMARY, total=dict(SUMMARY["total"], error_rate=0.2))
    assert "errors climbed" in rate_point(6.0, failing, parse_spec("ttft_p95<=300ms"),
                                          max_error_rate=0.05).reason
    assert RatePoint.from_dict(point.to_dict()) == point


def test_table_states_capacity_bracket_and_knee():
    result = search(fake_target(5.0, []), 4.0, SearchPlan(tolerance=0.1), upper_hint_rps=6.0)
    text = "\n".join(format_table(result, "ttft_p95 <= 300 ms"))
    low, high = result.bracket_rps
    assert f"capacity: {low:.2f} requests/s, bracket [{low:.2f}, {high:.2f}] (converged" in text
    assert "knee:" in text and text.count("MISSES") == sum(not p.passed for p in result.points)
    assert math.isclose(result.capacity_rps or 0, low)


EMPTY = {"total": {"requests": 0}, "groups": [],
         "l2": {"open_loop": {"sent_rps": 2.0, "completed_rps": 0.0, "target_kept_up": True}}}


def test_a_run_that_completed_nothing_is_inconclusive_not_a_miss():
    """Runs shorter than one answer used to read as misses all the way down ("capacity: below
    0.10/s", exit 0): now the rate is not judged, and the search stops there, saying why."""
    point = rate_point(6.0, EMPTY, parse_spec("ttft_p95<=300ms"))
    assert point.inconclusive and not point.passed and "inconclusive" in point.reason
    # nothing completed because in flight kept growing: that is the target, a miss
    saturated = rate_point(6.0, dict(EMPTY, l2={"open_loop": {"target_kept_up": False}}),
                           parse_spec("ttft_p95<=300ms"))
    assert not saturated.inconclusive and saturated.saturated
    calls: list[float] = []

    def measure(rate: float) -> RatePoint:
        calls.append(rate)
        return rate_point(rate, EMPTY, parse_spec("ttft_p95<=300ms"))
    result = search(measure, 4.0, SearchPlan(min_rps=0.1))
    assert calls == [4.0] and result.capacity_rps is None and result.bracket_rps == (0.0, None)
    assert result.stopped == "inconclusive at 4/s: no request completed"
    text = "\n".join(format_table(result, "ttft_p95 <= 300 ms"))
    assert "capacity: not measured - no rate was judged (inconclusive at 4/s" in text and "MISSES" not in text
    assert sweep_exit_code(result.to_dict()) == 1
    # a bracket found before an inconclusive run keeps its capacity; an inconclusive point is no miss
    ok, miss = RatePoint(4.0, True), RatePoint(9.0, False, "x")
    odd = RatePoint(6.0, False, "no request completed", inconclusive=True)
    assert bracket([ok, odd, miss]) == (4.0, 9.0)
    assert next_rate([ok, miss, odd], 4.0)[0] is None


def test_the_sweep_exit_code_follows_docs_sweep_md():
    assert sweep_exit_code({"capacity_rps": 5.0, "rates": []}) == 0
    assert sweep_exit_code({"capacity_rps": None, "rates": [{"passed": False, "inconclusive": False}]}) == 3
    assert sweep_exit_code({"capacity_rps": None, "rates": [{"passed": False, "inconclusive": True}]}) == 1
