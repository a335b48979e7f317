"""--abort-on-error-rate's decision (fourfold.levels.abort.ErrorWatch), on a fake clock."""

from __future__ import annotations

import pytest

from fourfold.levels.abort import MIN_REQUESTS, ErrorWatch
from fourfold.measure.record import RequestRecord


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def feed(watch: ErrorWatch, clock: Clock, classes: list[str], every_s: float) -> None:
    for cls in classes:
        watch.observe(RequestRecord(error_class=cls))
        clock.t += every_s


def test_every_request_failing_for_the_window_stops_the_run_once():
    clock, stops = Clock(), []
    watch = ErrorWatch(1.0, 10.0, lambda: stops.append(clock.t), clock)
    feed(watch, clock, ["http_4xx"] * 40, 0.2)          # 8 s: not yet a whole window
    assert stops == [] and watch.aborted is None
    feed(watch, clock, ["http_4xx"] * 20 + ["connect_error"] * 5, 0.2)
    assert stops == [pytest.approx(110.0)]              # the first record 10 s after the first one
    assert watch.aborted is not None and watch.aborted["classes"] == {"http_4xx": 50}
    assert watch.aborted["reason"] == "every request failed in the last 10 s (50 of 50: http_4xx 50)"


def test_one_success_in_the_window_keeps_it_going_and_cancelled_or_cut_are_no_failures():
    clock, stops = Clock(), []
    watch = ErrorWatch(1.0, 10.0, lambda: stops.append(1), clock)
    feed(watch, clock, (["http_5xx"] * 9 + ["ok"]) * 10, 0.2)
    feed(watch, clock, ["truncated", "cancelled"] * 40, 0.2)
    assert stops == []


def test_a_lower_rate_and_the_minimum_count():
    clock, stops = Clock(), []
    watch = ErrorWatch(0.5, 5.0, lambda: stops.append(1), clock)
    feed(watch, clock, ["rate_limited"] * (MIN_REQUESTS - 1), 1.0)     # 9 requests in 9 s: too few
    assert stops == []
    feed(watch, clock, ["ok", "rate_limited"] * 6, 0.4)
    assert stops == [1] and "of" in watch.aborted["reason"]
    off = ErrorWatch(0.0, 5.0, lambda: stops.append(2), clock)
    feed(off, clock, ["connect_error"] * 100, 0.5)
    assert stops == [1]                                  # 0: never
