"""Per-class error rates in the SLO gate: ``error_rate.<class>`` (the report's per-class rows)."""

from __future__ import annotations

import pytest

from fourfold.errors import SLOSpecError
from fourfold.gates.slo import parse_spec, parse_table
from fourfold.gates.slo_verdict import evaluate

SUMMARY = {"total": {"requests": 200, "ok": 180, "errors": {"ok": 180, "rate_limited": 15, "http_5xx": 5}},
           "groups": [{"level": "l1", "scenario": "saturation", "requests": 50, "ok": 50,
                       "errors": {"ok": 50}}]}


def test_a_class_rate_is_that_class_over_all_requests():
    slos = parse_spec("error_rate.rate_limited<5%, error_rate.http_5xx<=2.5%, error_rate.connect_error<0.1%")
    assert [s.threshold for s in slos] == [0.05, 0.025, 0.001]
    verdicts = evaluate(slos, SUMMARY)
    assert [(v.status, v.measured) for v in verdicts] == [("miss", 0.075), ("pass", 0.025), ("pass", 0.0)]
    assert verdicts[0].message == "error_rate.rate_limited < 5 % missed at Aggregated: measured 7.50 %"


def test_a_scoped_class_rate_and_a_group_without_requests():
    [verdict] = evaluate(parse_spec("error_rate.http_5xx@l1:saturation<1%"), SUMMARY)
    assert (verdict.status, verdict.measured) == ("pass", 0.0)
    [verdict] = evaluate(parse_spec("error_rate.http_5xx<1%"), {"total": {"requests": 0, "errors": {}}})
    assert verdict.status == "no_data" and verdict.failed


def test_a_table_entry_is_a_ceiling_and_unknown_classes_are_refused():
    [slo] = parse_table({"error_rate.rate_limited": 0.01}, where="slo.toml")
    assert (slo.op, slo.threshold) == ("<=", 0.01)
    for bad in ("error_rate.bogus<1%", "error_rate.ok<1%", "error_rate.truncated<1%"):
        with pytest.raises(SLOSpecError, match="unknown metric"):
            parse_spec(bad)
