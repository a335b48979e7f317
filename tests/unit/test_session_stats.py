"""Session aggregates per variant (pure): counts, rates, means, exact merge, the printed table."""

from __future__ import annotations

import pytest

from fourfold.levels.l4_stats import SessionStats, format_sessions, mean_of_counts


def fill(stats: SessionStats) -> None:
    a, b = stats.variant("A"), stats.variant("B")
    for _ in range(5):
        a.started()
        b.started()
    a.ended("completed", 4, 8000.0)
    a.ended("completed", 5, 10000.0)
    a.ended("max_turns", 6, 12000.0)
    a.ended("abandoned", 2, 3000.0, "e2e")
    a.cut()
    b.ended("completed", 3, 6000.0)
    b.ended("completed", 3, 6000.0)
    b.ended("completed", 4, 7000.0)
    b.ended("abandoned", 1, 1000.0, "ttft")
    b.ended("abandoned", 1, 1500.0, "error")


def test_rates_and_means_per_variant():
    stats = SessionStats()
    fill(stats)
    summary = stats.summary()
    a, b, total = summary["by_variant"]["A"], summary["by_variant"]["B"], summary["total"]
    assert (a["started"], a["ended"], a["completed"], a["max_turns"], a["abandoned"], a["cut"]) == \
        (5, 4, 2, 1, 1, 1)
    assert a["completion_rate"] == 0.5 and a["abandonment_rate"] == 0.25 and a["max_turns_rate"] == 0.25
    assert a["rounds_mean"] == pytest.approx(17 / 4) and a["rounds_to_completion_mean"] == pytest.approx(4.5)
    assert a["abandoned_by"] == {"ttft": 0, "e2e": 1, "error": 0}
    assert b["rounds"] == {"1": 2, "3": 2, "4": 1} and b["rounds_to_completion"] == {"3": 2, "4": 1}
    assert b["completion_rate"] == 0.6 and b["rounds_to_completion_mean"] == pytest.approx(10 / 3)
    assert total["ended"] == 9 and total["completed"] == 5 and total["rounds_mean"] == pytest.approx(29 / 9)
    assert a["duration_ms"]["count"] == 4 and a["duration_ms"]["max"] == pytest.approx(12000, rel=0.01)


def test_worker_deltas_merge_exactly():
    direct, worker, master = SessionStats(), SessionStats(), SessionStats()
    fill(direct)
    fill(worker)
    master.merge_wire(worker.take_wire())
    assert worker.variants == {}                     # take_wire resets the worker
    fill(worker)
    master.merge_wire(worker.take_wire())
    fill(direct)
    assert master.summary() == direct.summary()


def test_mean_of_counts():
    assert mean_of_counts({}) is None
    assert mean_of_counts({2: 1, 4: 3}) == 3.5


def test_printed_table():
    stats = SessionStats()
    fill(stats)
    assert format_sessions(stats.summary()).splitlines() == [
        "fourfold sessions (rounds = user turns; complete = every goal fact covered; "
        "to-done = mean rounds of completed sessions)",
        "variant  sessions complete% abandon% maxturn% rounds to-done dur p50 s  p95 s  cut",
        "A               4      50.0     25.0     25.0   4.25    4.50       8.0   12.0    1",
        "B               5      60.0     40.0      0.0   2.40    3.33       6.0    7.0    0",
        "total           9      55.6     33.3     11.1   3.22    3.80       6.0   12.0    1",
    ]
