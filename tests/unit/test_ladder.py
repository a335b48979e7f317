"""Concurrency ladder: parsing, step schedule, scenario tags, the knee and its report."""

from __future__ import annotations

import pytest

from fourfold.levels.l2_options import parse_ladder
from fourfold.levels.ladder import (
    Ladder,
    find_knee,
    format_ladder,
    ladder_report,
    parse_step_scenario,
    step_scenario,
)


@pytest.mark.parametrize(("text", "steps"), [
    ("8,16,32,64", (8, 16, 32, 64)),
    (" 8, 16 ,32 ", (8, 16, 32)),
    ("4 8 12", (4, 8, 12)),
    ("1", (1,)),
    ("", ()),
    ("off", ()),
    ("None", ()),
    (None, ()),
    ([2, 4], (2, 4)),
])
def test_parse_ladder(text, steps):
    assert parse_ladder(text) == steps


@pytest.mark.parametrize(("text", "message"), [
    ("8,x,32", "expected user counts like '8,16,32,64'"),
    ("8,0", "at least 1 user"),
    ("16,8", "steps must increase"),
    ("8,8", "steps must increase"),
])
def test_bad_ladders_say_what_to_write(text, message):
    with pytest.raises(ValueError, match=message):
        parse_ladder(text)


@pytest.mark.parametrize(("elapsed", "tick"), [
    (0.0, (8, 8.0)), (4.99, (8, 8.0)), (5.0, (16, 16.0)), (14.9, (32, 32.0)), (19.99, (64, 64.0)),
    (20.0, None), (100.0, None), (-1.0, (8, 8.0)),
])
def test_ladder_ticks_hold_each_step(elapsed, tick):
    ladder = Ladder((8, 16, 32, 64), hold_s=5.0)
    assert ladder.tick(elapsed) == tick
    assert ladder.duration_s == 20.0


def test_ladder_needs_steps_and_a_hold():
    with pytest.raises(ValueError, match="at least one step"):
        Ladder((), 5.0)
    with pytest.raises(ValueError, match="--ladder-hold-s must be > 0"):
        Ladder((8,), 0.0)


def test_step_scenarios_round_trip():
    assert step_scenario("ladder", 32) == "ladder@32"
    assert parse_step_scenario("ladder@32") == ("ladder", 32)
    assert parse_step_scenario("h2@128") == ("h2", 128)
    for other in ("closed", "open", "ladder@32@mirror", "ladder@", "@4"):
        assert parse_step_scenario(other) is None


@pytest.mark.parametrize(("steps", "knee"), [
    ([(8, 100.0), (16, 120.0), (32, 300.0), (64, 900.0)], 32),      # the usual shape
    ([(64, 900.0), (8, 100.0), (32, 300.0), (16, 120.0)], 32),      # order of the input does not matter
    ([(8, 100.0), (16, 120.0), (32, 450.0)], 32),                   # exactly at the SLO meets it
    ([(8, 100.0), (16, 500.0), (32, 300.0)], 8),                    # a lucky step above a miss is no knee
    ([(8, 460.0), (16, 120.0)], None),                              # the first step misses
    ([(8, 100.0), (16, None), (32, 100.0)], 8),                     # a step with no ok request misses
    ([(8, 100.0), (16, 200.0)], 16),                                # every step meets: the top one
    ([], None),
])
def test_knee(steps, knee):
    assert find_knee(steps, 450.0) == knee


def _group(scenario, p95, requests=40, level="l2"):
    ttft = {"count": requests if p95 is not None else 0, "p50": p95 and p95 / 2, "p95": p95,
            "p99": p95 and p95 * 1.1}
    e2e = {"count": requests, "p50": 400.0, "p95": 500.0, "p99": 600.0}
    return {"level": level, "scenario": scenario, "requests": requests, "failures": 0, "ttft_ms": ttft,
            "e2e_ms": e2e, "request_rps": 10.0, "output_tps": 400.0, "conn_reuse": 1.0}


def test_ladder_report_orders_steps_numerically_and_finds_each_knee():
    groups = [_group("ladder@64", 600.0), _group("ladder@8", 50.0), _group("ladder@16", 55.0),
              _group("ladder@32", 60.0), _group("closed", 10.0), _group("h2@8", 500.0)]
    report = ladder_report(groups, slo_ms=200.0)
    assert set(report) == {"ladder", "h2"}
    ladder = report["ladder"]
    assert [row["users"] for row in ladder["steps"]] == [8, 16, 32, 64]
    assert [row["meets_slo"] for row in ladder["steps"]] == [True, True, True, False]
    assert ladder["knee_users"] == 32 and ladder["slo_ttft_p95_ms"] == 200.0
    assert report["h2"]["knee_users"] is None


def test_format_ladder_exact_text():
    report = ladder_report([_group("ladder@8", 50.0), _group("ladder@16", 300.0)], slo_ms=200.0)["ladder"]
    assert format_ladder("ladder", report, hold_s=20.0) == [
        "L2 concurrency ladder 'ladder' (TTFT SLO: p95 <= 200 ms, 20 s per step)",
        " users   reqs  TTFT p50      p95      p99   E2E p50      p95   req/s  out tok/s  SLO",
        "     8     40      25.0     50.0     55.0     400.0    500.0    10.0      400.0  meets",
        "    16     40     150.0    300.0    330.0     400.0    500.0    10.0      400.0  MISSES",
        "knee: 8 users - the highest step whose TTFT p95 meets 200 ms, every lower step meeting it too",
    ]
    top = ladder_report([_group("ladder@8", 50.0)], 200.0)["ladder"]
    assert format_ladder("ladder", top)[-1].endswith("(the top step: the knee may lie higher)")
    none = ladder_report([_group("ladder@8", None)], 200.0)["ladder"]
    assert format_ladder("ladder", none)[-1] == ("knee: none - the first step (8 users) already misses "
                                                  "TTFT p95 <= 200 ms")


def test_the_shape_tags_each_step_and_keeps_the_last_one_after_the_ladder_ends():
    # a user whose wait ends while the run stops sends one more request: it belongs to the last step,
    # not to an untagged "closed" scenario (CI saw two such records when the locust start was slow)
    from argparse import Namespace
    from types import SimpleNamespace

    from fourfold.levels.ladder import STEP_ATTR, LadderShape

    options = Namespace(ladder="4,8", ladder_hold_s=3, run_time=None)
    shape = LadderShape()
    shape.runner = SimpleNamespace(environment=SimpleNamespace(parsed_options=options))
    seen = []
    for elapsed in (0.0, 2.9, 3.0, 5.9, 6.0, 9.0):
        shape.get_run_time = lambda elapsed=elapsed: elapsed       # type: ignore[method-assign]
        seen.append((shape.tick(), getattr(options, STEP_ATTR)))
    assert [tick for tick, _ in seen] == [(4, 4.0), (4, 4.0), (8, 8.0), (8, 8.0), None, None]
    assert [step for _, step in seen] == [4, 4, 8, 8, 8, 8]
    options.ladder = "off"
    options.num_users, options.spawn_rate = 3, 1
    assert shape.tick() == (3, 1.0) and getattr(options, STEP_ATTR) is None
