"""The sweep's capacity row (fourfold.reports.capacity) and `fourfold sweep`'s bad input."""

from __future__ import annotations

import pytest

from fourfold.cli import main
from fourfold.gates.slo import parse_spec
from fourfold.reports.capacity import _latency_slos, capacity_row, read_sweep, sweep_plot


def block(capacity: float | None, low: float, high: float | None, slo: str = "ttft_p95<=300ms") -> dict:
    return {"slo": slo, "capacity_rps": capacity, "bracket_rps": [low, high],
            "rates": [{"offered_rps": low, "passed": True,
                       "latency_ms": {"ttft_ms": {"p50": 90.0, "p95": 120.0},
                                      "e2e_ms": {"p50": 700.0, "p95": 760.0}}},
                      {"offered_rps": high or 2 * low, "passed": False,
                       "latency_ms": {"ttft_ms": {"p50": 300.0, "p95": 900.0},
                                      "e2e_ms": {"p50": 1000.0, "p95": 1500.0}}}]}


@pytest.mark.parametrize(("baseline", "candidate", "verdict"), [
    (block(5.8, 5.8, 6.1), block(11.6, 11.6, 12.2), "better"),          # brackets apart
    (block(11.6, 11.6, 12.2), block(5.8, 5.8, 6.1), "worse"),
    (block(5.8, 5.8, 6.3), block(6.0, 6.0, 6.5), "inconclusive"),   # brackets overlap
    (block(5.8, 5.8, 6.1), block(6.1, 6.1, 6.6), "better"),         # the candidate passed the baseline's miss
    (block(None, 0.0, 1.0), block(6.1, 6.1, 6.6), "n/a"),           # a side found no passing rate
])
def test_capacity_row_verdict_from_brackets(baseline, candidate, verdict):
    row = capacity_row(baseline, candidate)
    assert row.verdict == verdict and row.metric == "capacity_rps" and row.group == "sweep"
    if verdict != "n/a":
        assert row.delta == pytest.approx(candidate["capacity_rps"] - baseline["capacity_rps"])
        assert row.ci_low <= row.delta <= row.ci_high
        assert row.label == "capacity (ttft_p95<=300ms)"


def test_capacity_row_says_when_slos_differ():
    assert capacity_row(block(5.8, 5.8, 6.1), block(5.8, 5.8, 6.1, "e2e_p95<=1s")).label == \
        "capacity (SLOs differ)"


def test_read_sweep_and_plot(tmp_path):
    assert read_sweep(tmp_path) is None
    (tmp_path / "summary.json").write_text('{"kind": "sweep", "sweep": {"capacity_rps": 5.8}}')
    assert read_sweep(tmp_path) == {"capacity_rps": 5.8}
    svg = sweep_plot(block(5.8, 5.8, 6.1), tmp_path / "sweep.svg").read_text()
    assert svg.startswith("<?xml") and "<svg" in svg
    assert _latency_slos("ttft_p95<=300ms,error_rate<1%,e2e_p95@l2:open<=1s") == parse_spec("ttft_p95<=300ms")
    assert _latency_slos("not a spec") == []


@pytest.mark.parametrize(("argv", "message"), [
    (["--tolerance", "0"], "--tolerance must be within (0, 1), got 0.0"),
    (["--duration-s", "1"], "--duration-s must be within [2, 86400]"),
    (["--duration-s", "1e300"], "--duration-s must be within [2, 86400], got 1e+300"),
    (["--probe-users", "1000000000"], "--probe-users must be within [1, 10000]"),
    (["--max-runs", "1"], "--max-runs must be within [2, 100]"),
    (["--sim-set", "max_batch"], "--sim-set 'max_batch': expected KEY=VALUE"),
    (["--slo", "ttft_p95<=fast"], "--slo"),
])
def test_bad_sweep_options_are_one_line_and_exit_2_before_anything_starts(argv, message, tmp_path, capsys):
    assert main(["sweep", "--out", str(tmp_path), *argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("fourfold: error:") and message in err[-1]
    assert not any(tmp_path.iterdir())                      # no sweep directory, no simulator, no run


def test_a_sweep_among_plain_runs_is_a_usage_error(tmp_path, capsys):
    sweep = tmp_path / "sweep"
    sweep.mkdir()
    (sweep / "summary.json").write_text('{"kind": "sweep", "sweep": {"capacity_rps": 5.8}}')
    assert main(["compare", str(sweep), str(tmp_path / "other"), "--out", str(tmp_path / "out")]) == 2
    assert "is a sweep directory" in capsys.readouterr().err
