"""The gateway overhead per ladder step, by hand: summary.json's l2.overhead from both arms' group
summaries (levels.l2_direct), and the report's rows from compare's rows (reports.overhead)."""

from __future__ import annotations

from fourfold.levels.l2_direct import arm_of, format_overhead, overhead_report
from fourfold.reports.compare import Row
from fourfold.reports.overhead import overhead_rows


def group(scenario: str, ttft: tuple[float, float], e2e: tuple[float, float], n: int = 100) -> dict:
    return {"scenario": scenario, "requests": n, "failures": 1,
            "ttft_ms": {"count": n, "p50": ttft[0], "p95": ttft[1]}, "e2e_ms": {"count": n, "p50": e2e[0],
                                                                                 "p95": e2e[1]}}


def test_arms_are_told_by_the_scenario_suffix():
    assert arm_of("ladder@8@direct") == ("ladder@8", "direct")
    assert arm_of("ladder@8") == ("ladder@8", "gateway")


def test_the_overhead_block_pairs_each_step_s_arms():
    groups = [group("ladder@8", (52.0, 60.0), (90.0, 99.0)),
              group("ladder@8@direct", (50.0, 57.5), (88.0, 95.0)),
              group("ladder@4@direct", (50.0, 55.0), (80.0, 85.0), 90),
              group("ladder@4", (50.5, 55.5), (80.5, 85.0)),
              group("ladder@16", (70.0, 80.0), (100.0, 110.0))]                 # no direct arm: left out
    block = overhead_report(groups, "http://backend")
    assert block is not None and block["direct_host"] == "http://backend"
    assert [s["users"] for s in block["steps"]] == [4, 8]
    four, eight = block["steps"]
    assert four["requests"] == {"gateway": 100, "direct": 90}
    assert four["ttft_p50_ms"] == {"gateway": 50.5, "direct": 50.0, "overhead": 0.5}
    assert eight["ttft_p95_ms"]["overhead"] == 2.5 and eight["e2e_p95_ms"]["overhead"] == 4.0
    lines = format_overhead(block)
    assert "4 users" in lines[2] and "+0.5" in lines[2]
    assert overhead_report([group("ladder@8", (1.0, 2.0), (3.0, 4.0))], "x") is None


def _row(group: str, metric: str, base: float, cand: float, ci: tuple[float, float] | None) -> Row:
    return Row(group, metric, metric, "ms", "lower", base, cand, cand - base, None,
               ci[0] if ci else None, ci[1] if ci else None, None, "inconclusive", "arms", 100, 100,
               why="" if ci else "p95 of 100 values (needs 200)")


def test_the_report_rows_are_the_steps_ttft_and_e2e_rows_in_order():
    rows = [_row("l2:ladder@8", "e2e_p50", 88.0, 90.0, (1.0, 3.0)),
            _row("l2:ladder@4", "ttft_p95", 55.0, 55.5, None),
            _row("l2:ladder@4", "ttft_p50", 50.0, 50.5, (0.2, 0.8)),
            _row("l2:ladder@4", "itl_p95", 1.0, 1.0, None),
            _row("l1:saturation", "ttft_p50", 1.0, 2.0, None)]
    out = overhead_rows(rows)
    assert [(r.users, r.metric) for r in out] == [(4, "ttft_p50"), (4, "ttft_p95"), (8, "e2e_p50")]
    assert out[0].overhead == 0.5 and (out[0].ci_low, out[0].ci_high) == (0.2, 0.8)
    assert out[1].why.startswith("p95 of 100 values") and out[0].why == ""
