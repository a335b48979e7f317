"""``--sweep`` (fourfold.levels.sweep_live): the pure parts of the step controller, its answers
from the dispatchers, the live panel rows and the capacity report reading a --sweep run."""

from __future__ import annotations

import json
from types import SimpleNamespace

import gevent
import pytest

from fourfold.errors import OptionError
from fourfold.gates.slo import parse_spec
from fourfold.gates.sweep import RatePoint, rate_point
from fourfold.levels.l2_options import GatewaySettings
from fourfold.levels.l2_stats import base_of
from fourfold.levels.ladder import parse_step_scenario
from fourfold.levels.sweep_live import (
    Controller,
    Step,
    StepBox,
    check_inputs,
    round_rate,
    step_scenario,
    step_summary,
    sweep_slo_text,
)
from fourfold.levels.webui_panels import sweep_rows
from fourfold.reports.capacity import read_sweep

SLOS = parse_spec("ttft_p95<=150ms")


def group(requests: int, ttft_p95: float, queue_p99: float = 1.0, failures: int = 0) -> dict:
    return {"level": "l2", "scenario": "sweep@8/s", "requests": requests, "failures": failures,
            "ok": requests - failures, "error_rate": failures / requests, "goodput_rps": None,
            "ttft_ms": {"count": requests, "p50": ttft_p95 / 2, "p95": ttft_p95, "p99": ttft_p95},
            "queue_ms": {"p99": queue_p99}}


@pytest.mark.parametrize("rate, points, expected", [
    (6.0, [], "sweep@6/s"),
    (7.348, [RatePoint(6.0, True)], "sweep@7.348/s"),
    (9.0, [RatePoint(9.0, False)], "sweep@9/s#2"),
    (9.0, [RatePoint(9.0, False), RatePoint(9.0, False)], "sweep@9/s#3"),
])
def test_step_scenarios_keep_steps_apart_and_are_no_ladder_steps(rate, points, expected):
    assert step_scenario(rate, points) == expected
    assert parse_step_scenario(expected) is None          # "sweep@6/s" is not a ladder step of 6 users
    assert base_of(expected) == "sweep"


def test_rates_are_offered_as_named():
    assert round_rate(7.348469228349534) == 7.348 and round_rate(12.0) == 12.0 \
        and round_rate(123456.7) == 123500.0


@pytest.mark.parametrize("kwargs, passed, saturated, reason", [
    ({"group": group(20, 60.0), "sent": 20, "cut": 0}, True, False, ""),
    ({"group": group(20, 231.0), "sent": 20, "cut": 0}, False, False, "ttft_p95"),
    ({"group": group(12, 90.0), "sent": 20, "cut": 8}, False, True, "the target saturated"),
    ({"group": group(20, 60.0, queue_p99=400.0), "sent": 20, "cut": 0}, False, False, "could not keep up"),
    ({"group": group(20, 60.0), "sent": 20, "cut": 0, "missing": 1}, False, False, "could not keep up"),
    ({"group": None, "sent": 0, "cut": 0}, False, False, "no request completed"),
])
def test_a_step_is_judged_from_its_own_summary(kwargs, passed, saturated, reason):
    summary = step_summary(kwargs["group"], kwargs["sent"], kwargs["cut"], 2.5,
                           missing=kwargs.get("missing", 0))
    point = rate_point(8.0, summary, SLOS)
    assert (point.passed, point.saturated) == (passed, saturated)
    assert reason in point.reason
    if kwargs["group"]:
        assert point.sent_rps == kwargs["sent"] / 2.5
        assert point.achieved_rps == kwargs["group"]["requests"] / 2.5 \
            and point.requests == kwargs["group"]["requests"]


def test_the_sweep_slo_is_the_runs_slo_else_the_ladders():
    assert sweep_slo_text("e2e_p99<=2s", 450.0) == "e2e_p99<=2s"
    assert sweep_slo_text("", 450.0) == "ttft_p95<=450ms"


def controller(dispatchers: int = 2) -> Controller:
    settings = GatewaySettings(sweep=True, sweep_step_s=2.5, sweep_tolerance=0.1, sweep_max_steps=6)
    return Controller(SimpleNamespace(runner=None, parsed_options=None), settings, "ttft_p95<=150ms",
                      dispatchers)


def test_the_controller_judges_a_step_once_every_dispatcher_answered():
    sweep = controller(dispatchers=2)
    sweep.current = Step(3, "sweep@9/s", 9.0, 2.5, 2.5)
    sweep.on_done(msg=SimpleNamespace(data={"seq": 2, "sent": 5, "cut": 0}))     # an older step's: ignored
    sweep.on_done(msg=SimpleNamespace(data={"seq": 3, "sent": 11, "cut": 0}))
    assert not sweep.answered.is_set()
    sweep.on_done(msg=SimpleNamespace(data={"seq": 3, "sent": 11, "cut": 1}))
    assert sweep.answered.is_set() and [a["sent"] for a in sweep.answers] == [11, 11]


def test_the_controllers_block_has_fourfold_sweeps_shape_and_the_step_now_running():
    sweep = controller()
    sweep.points = [RatePoint(6.0, True, scenario="sweep@6/s"), RatePoint(9.0, False, scenario="sweep@9/s")]
    sweep.current = Step(3, "sweep@7.348/s", 7.348, 2.5, 2.5)
    block = sweep.block()
    assert {"rates", "capacity_rps", "bracket_rps", "converged", "stopped", "knee_rps",
            "knee_metric"} <= set(block)
    assert block["current_rps"] == 7.348 and block["stopped"] == "still searching" and not block["finished"]
    assert block["capacity_rps"] == 6.0 and block["bracket_rps"] == [6.0, 9.0] and not block["converged"]
    assert [r["scenario"] for r in block["rates"]] == ["sweep@6/s", "sweep@9/s"]
    assert json.loads(json.dumps(block)) == block
    assert "capacity: 6.00 requests/s, bracket [6.00, 9.00] (NOT converged: still searching)" in sweep.lines()


def test_a_dispatcher_waits_for_a_step_newer_than_the_last_it_offered():
    box = StepBox()
    box.on_step(msg=SimpleNamespace(data={"seq": 1, "scenario": "sweep@6/s", "rate_rps": 6.0,
                                          "duration_s": 2.5, "drain_s": 2.5}))
    assert box.wait(0).scenario == "sweep@6/s"
    assert gevent.with_timeout(0.05, box.wait, 1, timeout_value="waiting") == "waiting"


def test_sweep_options_are_checked():
    with pytest.raises(ValueError, match="--sweep-step-s"):
        GatewaySettings(sweep_step_s=0.5)
    with pytest.raises(ValueError, match="--sweep-tolerance"):
        GatewaySettings(sweep_tolerance=1.0)
    with pytest.raises(OptionError, match="l2_open_loop.py"):
        check_inputs(False, GatewaySettings(sweep=True), SimpleNamespace())
    check_inputs(False, GatewaySettings(sweep=False), SimpleNamespace())      # no --sweep: nothing to check


def test_the_live_panel_shows_the_rate_now_each_rate_and_the_bracket():
    sweep = controller()
    sweep.points = [RatePoint(6.0, True, achieved_rps=6.0, latency_ms={"ttft_ms": {"p95": 54.1}},
                              scenario="sweep@6/s"),
                    RatePoint(9.0, False, achieved_rps=8.8, latency_ms={"ttft_ms": {"p95": 231.6}},
                              scenario="sweep@9/s")]
    sweep.current = Step(3, "sweep@7.348/s", 7.348, 2.5, 2.5)
    rows = [(r["metric"], r["value"]) for r in sweep_rows(sweep.block())]
    assert rows == [("offering now (req/s)", "7.35"),
                    ("sweep@6/s: ttft_p95 ms, achieved req/s, SLO", "54.1, 6.00, meets"),
                    ("sweep@9/s: ttft_p95 ms, achieved req/s, SLO", "231.6, 8.80, MISSES"),
                    ("capacity req/s (SLO ttft_p95<=150ms)", "6.00 in [6.00, 9.00] (not converged yet)"),
                    ("knee (req/s)", "6.00")]
    assert sweep_rows({}) == []


def test_compare_reads_the_sweep_of_a_sweep_run(tmp_path):
    sweep = controller()
    sweep.points = [RatePoint(6.0, True), RatePoint(9.0, False)]
    (tmp_path / "summary.json").write_text(json.dumps({"kind": "run", "l2": {"sweep": sweep.block()}}))
    assert read_sweep(tmp_path)["capacity_rps"] == 6.0
    (tmp_path / "summary.json").write_text(json.dumps({"kind": "run", "l2": {}}))
    assert read_sweep(tmp_path) is None
